"""A resource someone else deletes: when its deletion was requested, and whether the task's end is
the deletion's (``core.lifecycle.deletion``), with the failure times the plugins date it by."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.lifecycle import Phase, PhaseInfo
from podwright.core.lifecycle import phases as p
from podwright.core.lifecycle.deletion import Deletion, deletion_of, judge_deletion
from podwright.core.lifecycle.objects import rfc3339
from podwright.core.lifecycle.pod_status import pod_failed_at
from podwright.core.lifecycle.resource_status import failed_at

REQUESTED = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
NOW = REQUESTED + timedelta(seconds=40)
SUBJECT = "Pod vision/notebook-ada"


def _at(seconds: float) -> datetime:
    return REQUESTED + timedelta(seconds=seconds)


def _meta(deadline: datetime, grace: int | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"deletionTimestamp": rfc3339(deadline)}
    if grace is not None:
        metadata["deletionGracePeriodSeconds"] = grace
    return {"metadata": metadata}


@pytest.mark.parametrize(
    ("obj", "kind", "expected"),
    [
        pytest.param({"metadata": {}}, "Pod", None, id="not-deleted"),
        pytest.param(_meta(_at(30), 30), "Pod", Deletion(REQUESTED, True), id="pod-graceful"),
        pytest.param(_meta(_at(5), 5), "Pod", Deletion(REQUESTED, True), id="pod-shortened"),
        pytest.param(_meta(_at(12), 0), "Pod", Deletion(_at(12), False), id="pod-kubelet-final"),
        pytest.param(_meta(_at(45), 1), "Pod", Deletion(_at(44), False), id="pod-clamped-to-1"),
        pytest.param(_meta(REQUESTED, 0), "Job", Deletion(REQUESTED, True), id="job"),
        pytest.param(_meta(REQUESTED, None), "PyTorchJob", Deletion(REQUESTED, True), id="crd"),
        pytest.param(
            {"metadata": {"deletionTimestamp": "yesterday"}},
            "Pod",
            Deletion(None, False),
            id="unreadable",
        ),
    ],
)
def test_when_a_deletion_was_requested(
    obj: dict[str, Any], kind: str, expected: Deletion | None
) -> None:
    assert deletion_of(obj, kind) == expected


@given(
    grace=st.integers(min_value=2, max_value=3600),
    shorter=st.lists(st.integers(min_value=0, max_value=3600), max_size=4),
    elapsed=st.integers(min_value=0, max_value=7200),
)
def test_a_pods_deletion_is_dated_exactly_or_bounded_through_shortened_deletes(
    grace: int, shorter: list[int], elapsed: int
) -> None:
    """Replays ``BeforeDelete``'s rules (staging/src/k8s.io/apiserver/pkg/registry/rest/
    delete.go): a shorter period moves the deadline by the difference, and a deadline that
    would lie in the past is set to now with a period of 1 s (0 when 0 was asked). Whatever
    the deletes, the date read is exact, or is the latest the request can have been."""
    deadline, period = _at(grace), grace
    now = _at(elapsed)
    for asked in shorter:
        if asked >= period or period == 0:
            continue
        deadline, period = deadline - timedelta(seconds=period - asked), asked
        if deadline < now:
            deadline, period = now, 1 if asked else 0
    deletion = deletion_of(_meta(deadline, period), "Pod")
    assert deletion is not None
    assert deletion.requested_at is not None
    if deletion.exact:
        assert deletion.requested_at == REQUESTED
    else:
        assert deletion.requested_at >= REQUESTED


def _failure(code: str = "Error") -> PhaseInfo:
    return p.retryable_failure(NOW, code, "pod failed\n[main] terminated with exit code 143")


EXACT = Deletion(REQUESTED, exact=True)
BOUNDED = Deletion(REQUESTED, exact=False)


@pytest.mark.parametrize(
    ("info", "deletion", "ended", "expected"),
    [
        pytest.param(p.success(NOW), EXACT, None, Phase.SUCCESS, id="success-kept"),
        pytest.param(p.aborted(NOW, "x"), EXACT, None, Phase.ABORTED, id="aborted-kept"),
        pytest.param(
            p.permanent_failure(NOW, "Preempted", "preempted"),
            EXACT,
            _at(3),
            Phase.PERMANENT_FAILURE,
            id="permanent-kept",
        ),
        pytest.param(p.running(NOW), EXACT, None, Phase.SYSTEM_RETRYABLE_FAILURE, id="running"),
        pytest.param(p.undefined(), EXACT, None, Phase.SYSTEM_RETRYABLE_FAILURE, id="unknown"),
        pytest.param(_failure(), EXACT, _at(2), Phase.SYSTEM_RETRYABLE_FAILURE, id="sigterm"),
        pytest.param(
            p.system_retryable_failure(NOW, "Interrupted", "137"),
            EXACT,
            _at(30),
            Phase.SYSTEM_RETRYABLE_FAILURE,
            id="sigkill-after-grace",
        ),
        pytest.param(_failure(), EXACT, _at(0.9), Phase.SYSTEM_RETRYABLE_FAILURE, id="same-second"),
        pytest.param(_failure(), EXACT, None, Phase.SYSTEM_RETRYABLE_FAILURE, id="undated"),
        pytest.param(_failure(), EXACT, _at(-1), Phase.RETRYABLE_FAILURE, id="predates"),
        pytest.param(
            _failure(), BOUNDED, _at(-1), Phase.SYSTEM_RETRYABLE_FAILURE, id="bounded-unknown"
        ),
    ],
)
def test_what_a_deletion_makes_of_the_plugins_phase(
    info: PhaseInfo, deletion: Deletion, ended: datetime | None, expected: Phase
) -> None:
    judged = judge_deletion(info, deletion, ended, subject=SUBJECT, reached=Phase.RUNNING, now=NOW)
    assert judged.phase is expected
    if expected is Phase.SYSTEM_RETRYABLE_FAILURE:
        assert judged.reason == "UnexpectedObjectDeletion"
        assert judged.error is not None
        assert judged.error.kind is p.ErrorKind.SYSTEM
    else:
        assert judged == info


def test_the_message_names_the_object_when_it_was_deleted_and_what_it_stopped() -> None:
    judged = judge_deletion(
        _failure(), EXACT, _at(2), subject=SUBJECT, reached=Phase.RUNNING, now=NOW
    )
    assert judged.error is not None
    assert judged.error.message == (
        "Pod vision/notebook-ada was deleted at 2026-11-21T12:00:00Z, not by podwright, and "
        "stopped: pod failed\n[main] terminated with exit code 143"
    )
    running = judge_deletion(
        p.undefined(), BOUNDED, None, subject=SUBJECT, reached=Phase.INITIALIZING, now=NOW
    )
    assert running.error is not None
    assert running.error.message == (
        "Pod vision/notebook-ada was deleted at 2026-11-21T12:00:00Z or earlier, not by "
        "podwright, while its task was Initializing"
    )


_PHASES = st.sampled_from(
    [
        p.success(NOW),
        p.running(NOW),
        p.queued(NOW, "waiting"),
        _failure(),
        p.system_retryable_failure(NOW, "Interrupted", "137"),
        p.permanent_failure(NOW, "InvalidImageName", "bad"),
    ]
)
_TIMES = st.none() | st.integers(min_value=-3600, max_value=3600).map(_at)


@given(info=_PHASES, exact=st.booleans(), ended=_TIMES)
def test_only_a_failure_dated_before_an_exactly_dated_deletion_is_left_to_the_user(
    info: PhaseInfo, exact: bool, ended: datetime | None
) -> None:
    judged = judge_deletion(
        info, Deletion(REQUESTED, exact), ended, subject=SUBJECT, reached=Phase.RUNNING, now=NOW
    )
    assert judged.phase is not Phase.RETRYABLE_FAILURE or (
        exact and ended is not None and ended < REQUESTED
    )
    if info.phase in (Phase.SUCCESS, Phase.PERMANENT_FAILURE):
        assert judged == info
    elif not info.phase.is_terminal:
        assert judged.reason == "UnexpectedObjectDeletion"


def _terminated(name: str, exit_code: int, finished: datetime, reason: str = "Error") -> Any:
    terminated = {"exitCode": exit_code, "reason": reason, "finishedAt": rfc3339(finished)}
    return {"name": name, "state": {"terminated": terminated}}


def _pod(*containers: Any, primary: str = "", init: tuple[Any, ...] = ()) -> dict[str, Any]:
    annotations = {"podwright.dev/primary-container": primary} if primary else {}
    status = {"phase": "Failed", "containerStatuses": list(containers)}
    return {
        "metadata": {"annotations": annotations},
        "status": {**status, "initContainerStatuses": list(init)},
    }


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(_pod(_terminated("main", 143, _at(2))), _at(2), id="one-container"),
        pytest.param(
            _pod(_terminated("main", 1, _at(-60)), _terminated("side", 143, _at(2))),
            _at(-60),
            id="first-failure-decides",
        ),
        pytest.param(
            _pod(_terminated("main", 0, _at(-60)), _terminated("side", 143, _at(2))),
            _at(2),
            id="a-success-is-no-failure",
        ),
        pytest.param(
            _pod(
                _terminated("side", 1, _at(-60)), _terminated("main", 143, _at(2)), primary="main"
            ),
            _at(2),
            id="the-primary-decides",
        ),
        pytest.param(
            _pod(_terminated("main", 0, _at(-60), reason="OOMKilled")), _at(-60), id="oom-killed"
        ),
        pytest.param(_pod(init=(_terminated("setup", 2, _at(-5)),)), _at(-5), id="init-container"),
        pytest.param(_pod({"name": "main", "state": {"waiting": {}}}), None, id="undated"),
    ],
)
def test_when_a_pod_failed(pod: dict[str, Any], expected: datetime | None) -> None:
    assert pod_failed_at(pod) == expected


def test_when_a_job_failed() -> None:
    condition = {"type": "Failed", "status": "True", "lastTransitionTime": rfc3339(_at(3))}
    assert failed_at({"status": {"conditions": [condition]}}) == _at(3)
    assert failed_at({"status": {"conditions": [{**condition, "status": "False"}]}}) is None
    assert failed_at({"status": {}}) is None
