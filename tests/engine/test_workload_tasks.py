"""A Workload's status as its task's record, as pure data: the record a submission writes and
reads back, what each advance writes (history, events, conditions, times), the abort requests,
what the operator does for a Workload (``next_action``), a refused Workload, and the Event a new
phase makes. Every write is the whole Workload at the resourceVersion read; here the API server's
part (storing it at the next resourceVersion) is :func:`stored`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.cluster_resources import (
    API_VERSION,
    SUBMITTED_BY_ANNOTATION,
    WORKLOAD_FINALIZER,
)
from podwright.core.lifecycle.objects import condition
from podwright.core.lifecycle.phases import (
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    ReasonInfo,
)
from podwright.engine.plugin import OwnerReference
from podwright.engine.task_store import AttachedEvent, HistoryEntry, NewTask, TaskRecord
from podwright.engine.workload_tasks import (
    ABORT_ANNOTATION,
    EVENTS_KEPT,
    FINALIZED_ANNOTATION,
    OPERATOR_BACKEND,
    WorkloadAction,
    abort_requested_workload,
    advanced_workload,
    events_attached,
    finalized_patch,
    history_of,
    launched_workload,
    new_task,
    next_action,
    pending_record,
    phase_event,
    record_of,
    refused_workload,
    submitted_workload,
    task_id_of,
    with_finalizer_patch,
    without_finalizer_patch,
    worth_an_event,
)

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
UID = "3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b"
SPEC = {"type": "training", "image": "trainer:1", "command": "python train.py"}
MANIFESTS: tuple[dict[str, Any], ...] = (
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "resnet"}, "spec": {}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "resnet"}},
)
COMPLIANCE = {
    "enforcement": "warn",
    "findings": [{"field": "image", "rule": "options", "message": "not an allowed image"}],
}
POLICY_COMPLIANT = {
    "type": "PolicyCompliant",
    "status": "False",
    "reason": "PolicyViolated",
    "message": "image: not an allowed image",
    "lastTransitionTime": "2026-11-21T11:00:00Z",
}
ALL_PHASES = list(Phase)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def workload(**metadata: Any) -> dict[str, Any]:
    """A Workload as read from the API server (admitted: no status yet)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": "resnet",
            "namespace": "research",
            "uid": UID,
            "resourceVersion": "10",
            "generation": 2,
            **metadata,
        },
        "spec": dict(SPEC),
    }


def stored(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as the API server stores a write: at the next resourceVersion."""
    metadata = dict(body["metadata"])
    metadata["resourceVersion"] = str(int(metadata["resourceVersion"]) + 1)
    return {**body, "metadata": metadata}


def submitted(base: Mapping[str, Any] | None = None, now: datetime = T0) -> dict[str, Any]:
    """``base`` (a fresh Workload) with its task recorded."""
    read = dict(base) if base is not None else workload()
    return stored(submitted_workload(read, new_task(read, MANIFESTS, now), now))


def record(obj: Mapping[str, Any]) -> TaskRecord:
    found = record_of(obj)
    assert found is not None
    return found


def advance(
    obj: Mapping[str, Any],
    info: PhaseInfo,
    now: datetime,
    state: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``obj`` after the advance that writes ``info``, as stored."""
    body = advanced_workload(obj, record(obj), state or {}, info, now).workload
    assert body["metadata"] == obj["metadata"], "a status update sends the metadata it read"
    return stored(body)


def statuses(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """The statuses of Launched, Ready and Finished."""
    found = []
    for kind in ("Launched", "Ready", "Finished"):
        entry = condition(obj, kind)
        assert entry is not None, kind
        found.append(entry["status"])
    return found[0], found[1], found[2]


def transition_times(obj: Mapping[str, Any]) -> dict[str, str]:
    return {entry["type"]: entry["lastTransitionTime"] for entry in obj["status"]["conditions"]}


# The record a submission writes ------------------------------------------------------------------


def test_a_submitted_workload_reads_back_as_its_task_at_revision_1() -> None:
    read = workload(annotations={SUBMITTED_BY_ANNOTATION: "alice"})
    read["status"] = {"compliance": COMPLIANCE, "conditions": [POLICY_COMPLIANT]}
    task = new_task(read, MANIFESTS, T0)
    assert task == NewTask(
        task_id="resnet-3f2a1b4c",
        workload_type="training",
        name="resnet",
        namespace="research",
        backend=OPERATOR_BACKEND,
        workload=SPEC,
        effective=SPEC,
        manifests=MANIFESTS,
        submitted_at=T0,
        owner=OwnerReference(API_VERSION, "Workload", "resnet", UID),
        submitted_by="alice",
    )
    assert record_of(read) is None, "no record before the submission"
    body = submitted_workload(read, task, T0)
    assert body["metadata"] == read["metadata"], "conditional on the resourceVersion read"
    assert body["spec"] == read["spec"]
    status = body["status"]
    assert (status["phase"], status["observedGeneration"]) == ("Undefined", 2)
    assert (status["compliance"], status["conditions"]) == (COMPLIANCE, [POLICY_COMPLIANT])
    found = record(stored(body))
    assert found.task == task
    assert (found.revision, found.phase, found.phase_version, found.updated_at) == (
        1,
        Phase.UNDEFINED,
        0,
        T0,
    )
    assert (found.plugin_state, found.abort_requested, found.finalized) == ({}, False, False)
    assert history_of(body) == []
    assert events_attached(body) == []


@pytest.mark.parametrize(
    ("annotations", "submitter"),
    [
        pytest.param({SUBMITTED_BY_ANNOTATION: "alice", "team": "a"}, "alice", id="recorded"),
        pytest.param({"team": "a"}, "", id="created-before-submitters-were-recorded"),
        pytest.param(None, "", id="no-annotations"),
    ],
)
def test_who_submitted_the_task_is_who_the_workloads_annotation_names(
    annotations: dict[str, str] | None, submitter: str
) -> None:
    """Pending, submitted and as recorded since: the task of a Workload is the annotation's."""
    read = workload(**({"annotations": annotations} if annotations is not None else {}))
    assert pending_record(read, "waiting", T0).task.submitted_by == submitter
    assert new_task(read, MANIFESTS, T0).submitted_by == submitter
    assert record(submitted(read)).task.submitted_by == submitter


def test_a_launched_workload_is_recorded_with_what_its_launch_did_in_one_write() -> None:
    read = workload()
    task = new_task(read, MANIFESTS, T0)
    info = PhaseInfo(Phase.QUEUED, 1, "Job research/resnet-3f2a1b4c created")
    body = launched_workload(read, task, {"launched": True}, info, at(1))
    assert body["metadata"] == read["metadata"], "conditional on the resourceVersion read"
    found = record(stored(body))
    assert found.task == task
    assert (found.revision, found.phase, found.reason, found.plugin_state) == (
        2,
        Phase.QUEUED,
        "Job research/resnet-3f2a1b4c created",
        {"launched": True},
    )
    assert [(entry.phase, entry.occurred_at) for entry in history_of(body)] == [
        (Phase.QUEUED, at(1))
    ]
    assert body["status"]["phase"] == "Queued"


@pytest.mark.parametrize(
    ("name", "uid", "task_id"),
    [
        pytest.param("resnet", UID, "resnet-3f2a1b4c", id="name-and-uid-start"),
        pytest.param(
            "resnet", "0a1b2c3d-0000-4000-8000-000000000000", "resnet-0a1b2c3d", id="recreated"
        ),
        pytest.param("a", "12-34-56-78-9a", "a-12345678", id="dashes-skipped"),
    ],
)
def test_the_task_id_is_the_workloads_name_and_the_start_of_its_uid(
    name: str, uid: str, task_id: str
) -> None:
    assert task_id_of(workload(name=name, uid=uid)) == task_id


def test_a_workload_without_a_uid_has_no_task_id() -> None:
    with pytest.raises(ValueError, match="has a uid"):
        task_id_of(workload(uid=""))


@pytest.mark.parametrize(
    ("task", "message"),
    [
        pytest.param(
            {"id": "x", "revision": 1}, "needs submittedAt, updatedAt and revision", id="no-times"
        ),
        pytest.param(
            {"id": "x", "submittedAt": "2026-11-21T12:00:00Z", "updatedAt": "2026-11-21T12:00:00Z"},
            "needs submittedAt, updatedAt and revision",
            id="no-revision",
        ),
    ],
)
def test_a_record_written_by_something_else_cannot_be_read(
    task: dict[str, Any], message: str
) -> None:
    obj = workload()
    obj["status"] = {"task": task}
    with pytest.raises(ValueError, match=message):
        record_of(obj)


def test_a_record_with_an_unknown_phase_cannot_be_read() -> None:
    obj = submitted()
    obj["status"]["phase"] = "Exploded"
    with pytest.raises(ValueError, match=r"status\.phase"):
        record_of(obj)


# Advancing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("report", "new_phase"),
    [
        pytest.param(
            PhaseInfo(Phase.QUEUED, 1, "Unschedulable"), False, id="same-phase-and-version"
        ),
        pytest.param(PhaseInfo(Phase.QUEUED, 2, "Unschedulable"), True, id="new-version"),
        pytest.param(PhaseInfo(Phase.RUNNING, 1, ""), True, id="new-phase"),
    ],
)
def test_an_advance_appends_history_only_for_a_new_phase_or_version(
    report: PhaseInfo, new_phase: bool
) -> None:
    queued = advance(
        submitted(), PhaseInfo(Phase.QUEUED, 1, "Unschedulable", occurred_at=at(1)), at(2)
    )
    before = history_of(queued)
    assert before == [HistoryEntry(Phase.QUEUED, 1, "Unschedulable", at(1))]
    result = advanced_workload(queued, record(queued), {"version": 1, "n": 2}, report, at(5))
    assert result.new_phase is new_phase
    written = stored(result.workload)
    expected = [*before, HistoryEntry(report.phase, report.version, report.reason, at(5))]
    assert history_of(written) == (expected if new_phase else before)
    found = record(written)
    assert (found.revision, found.phase, found.phase_version, found.reason) == (
        3,
        report.phase,
        report.version,
        report.reason,
    )
    assert (found.plugin_state, found.updated_at) == ({"version": 1, "n": 2}, at(5))


def test_a_failure_is_recorded_with_its_error() -> None:
    failed = PhaseInfo(
        Phase.PERMANENT_FAILURE,
        3,
        "OOMKilled",
        error=ExecutionError("OOMKilled", "the container ran out of memory", ErrorKind.USER),
        occurred_at=at(9),
    )
    written = advance(submitted(), failed, at(10))
    assert history_of(written) == [
        HistoryEntry(
            Phase.PERMANENT_FAILURE,
            3,
            "OOMKilled",
            at(9),
            "OOMKilled",
            "the container ran out of memory",
            ErrorKind.USER,
        )
    ]
    status = written["status"]
    assert (status["phase"], status["reason"], status["message"]) == (
        "PermanentFailure",
        "OOMKilled",
        "the container ran out of memory",
    )


def test_events_are_appended_and_only_the_latest_are_kept() -> None:
    def reasons(first: int, count: int) -> tuple[ReasonInfo, ...]:
        return tuple(ReasonInfo(f"event {i}", at(i)) for i in range(first, first + count))

    obj = advance(submitted(), PhaseInfo(Phase.QUEUED, 1, additional_reasons=reasons(0, 3)), at(1))
    obj = advance(obj, PhaseInfo(Phase.QUEUED, 1, additional_reasons=reasons(3, 1)), at(2))
    assert events_attached(obj) == [AttachedEvent(f"event {i}", at(i)) for i in range(4)]
    obj = advance(
        obj, PhaseInfo(Phase.RUNNING, 2, additional_reasons=reasons(4, EVENTS_KEPT)), at(3)
    )
    kept = events_attached(obj)
    assert len(kept) == EVENTS_KEPT
    assert kept == [AttachedEvent(f"event {i}", at(i)) for i in range(4, 4 + EVENTS_KEPT)]
    obj = advance(obj, PhaseInfo(Phase.RUNNING, 2, additional_reasons=(ReasonInfo("late"),)), at(4))
    assert [event.reason for event in events_attached(obj)][-2:] == [
        f"event {3 + EVENTS_KEPT}",
        "late",
    ]
    assert events_attached(obj)[-1] == AttachedEvent("late", None)
    assert len(events_attached(obj)) == EVENTS_KEPT


F, T = "False", "True"


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        pytest.param(Phase.UNDEFINED, (F, F, F), id="Undefined"),
        pytest.param(Phase.NOT_READY, (F, F, F), id="NotReady"),
        # The plugin manager reports it when the quota refused the create: nothing was launched.
        pytest.param(Phase.WAITING_FOR_RESOURCES, (F, F, F), id="WaitingForResources"),
        pytest.param(Phase.QUEUED, (T, F, F), id="Queued"),
        pytest.param(Phase.INITIALIZING, (T, F, F), id="Initializing"),
        pytest.param(Phase.RUNNING, (T, T, F), id="Running"),
        # Ended before anything was launched (a create refused, an abort before the create):
        # every created resource is first reported Queued ("<ref> created").
        pytest.param(Phase.SUCCESS, (F, F, T), id="Success"),
        pytest.param(Phase.RETRYABLE_FAILURE, (F, F, T), id="RetryableFailure"),
        pytest.param(Phase.SYSTEM_RETRYABLE_FAILURE, (F, F, T), id="SystemRetryableFailure"),
        pytest.param(Phase.PERMANENT_FAILURE, (F, F, T), id="PermanentFailure"),
        pytest.param(Phase.ABORTED, (F, F, T), id="Aborted"),
    ],
)
def test_the_conditions_of_each_phase_of_a_task_never_launched(
    phase: Phase, expected: tuple[str, str, str]
) -> None:
    assert statuses(advance(submitted(), PhaseInfo(phase, 1), at(1))) == expected


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        pytest.param(Phase.QUEUED, (T, F, F), id="Queued"),
        pytest.param(Phase.RUNNING, (T, T, F), id="Running"),
        pytest.param(Phase.SUCCESS, (T, F, T), id="Success"),
        pytest.param(Phase.RETRYABLE_FAILURE, (T, F, T), id="RetryableFailure"),
        pytest.param(Phase.SYSTEM_RETRYABLE_FAILURE, (T, F, T), id="SystemRetryableFailure"),
        pytest.param(Phase.PERMANENT_FAILURE, (T, F, T), id="PermanentFailure"),
        pytest.param(Phase.ABORTED, (T, F, T), id="Aborted"),
    ],
)
def test_the_conditions_of_each_phase_after_the_task_ran(
    phase: Phase, expected: tuple[str, str, str]
) -> None:
    running = advance(submitted(), PhaseInfo(Phase.RUNNING, 1), at(1))
    assert statuses(advance(running, PhaseInfo(phase, 2), at(2))) == expected


def test_a_conditions_transition_time_moves_only_when_its_status_does() -> None:
    obj = advance(submitted(), PhaseInfo(Phase.QUEUED, 1), at(1))
    first = rfc(1)
    assert transition_times(obj) == {"Launched": first, "Ready": first, "Finished": first}
    obj = advance(obj, PhaseInfo(Phase.INITIALIZING, 2), at(2))
    assert transition_times(obj) == {"Launched": first, "Ready": first, "Finished": first}
    obj = advance(obj, PhaseInfo(Phase.RUNNING, 3), at(3))
    assert transition_times(obj) == {"Launched": first, "Ready": rfc(3), "Finished": first}
    obj = advance(obj, PhaseInfo(Phase.RUNNING, 4, "restarted"), at(4))
    assert transition_times(obj) == {"Launched": first, "Ready": rfc(3), "Finished": first}
    ready = condition(obj, "Ready")
    assert ready is not None
    assert (ready["reason"], ready["message"], ready["observedGeneration"]) == (
        "Running",
        "restarted",
        2,
    )
    obj = advance(obj, PhaseInfo(Phase.SUCCESS, 5), at(5))
    assert transition_times(obj) == {"Launched": first, "Ready": rfc(5), "Finished": rfc(5)}


def rfc(seconds: int) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_another_writers_condition_and_the_compliance_are_kept_by_every_write() -> None:
    read = workload()
    read["status"] = {"compliance": COMPLIANCE, "conditions": [POLICY_COMPLIANT]}
    obj = submitted(read)
    writes = [
        lambda o: advance(o, PhaseInfo(Phase.QUEUED, 1), at(1)),
        lambda o: stored(abort_requested_workload(o, record(o), at(2))),
        lambda o: advance(o, PhaseInfo(Phase.ABORTED, 2), at(3)),
    ]
    for write in writes:
        obj = write(obj)
        assert obj["status"]["compliance"] == COMPLIANCE
        assert condition(obj, "PolicyCompliant") == POLICY_COMPLIANT
        assert sorted(entry["type"] for entry in obj["status"]["conditions"]) == [
            "Finished",
            "Launched",
            "PolicyCompliant",
            "Ready",
        ]
    refused = refused_workload(read, task_id_of(read), "no such GPU type", at(1))
    assert refused["status"]["compliance"] == COMPLIANCE
    assert condition(refused, "PolicyCompliant") == POLICY_COMPLIANT


def test_the_start_and_completion_times_are_set_once() -> None:
    obj = advance(submitted(), PhaseInfo(Phase.QUEUED, 1, occurred_at=at(1)), at(2))
    assert "startTime" not in obj["status"]
    obj = advance(obj, PhaseInfo(Phase.RUNNING, 2, occurred_at=at(3)), at(4))
    assert obj["status"]["startTime"] == rfc(3), "when it happened, not when it was seen"
    assert "completionTime" not in obj["status"]
    obj = advance(obj, PhaseInfo(Phase.RUNNING, 3), at(5))
    obj = advance(obj, PhaseInfo(Phase.SUCCESS, 4), at(6))
    assert (obj["status"]["startTime"], obj["status"]["completionTime"]) == (rfc(3), rfc(6))
    obj = advance(obj, PhaseInfo(Phase.SUCCESS, 5, occurred_at=at(7)), at(8))
    assert (obj["status"]["startTime"], obj["status"]["completionTime"]) == (rfc(3), rfc(6))


def test_a_task_that_failed_without_running_has_no_start_time() -> None:
    obj = advance(submitted(), PhaseInfo(Phase.PERMANENT_FAILURE, 1), at(1))
    assert "startTime" not in obj["status"]
    assert obj["status"]["completionTime"] == rfc(1)


def _patched(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with a metadata merge patch applied, as the API server stores it."""
    metadata = dict(obj["metadata"])
    for key, value in patch["metadata"].items():
        if key == "annotations":
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **value}
        elif value is None:
            metadata.pop(key, None)
        else:
            metadata[key] = value
    return stored({**obj, "metadata": metadata})


def test_finalizing_lets_the_workload_go_and_names_the_task_in_one_metadata_patch() -> None:
    held = _with(
        advance(submitted(), PhaseInfo(Phase.SUCCESS, 1), at(1)), deleting=False, finalizer=True
    )
    task_id = record(held).task_id
    patch = finalized_patch(held, task_id)
    assert patch == {
        "metadata": {
            "resourceVersion": held["metadata"]["resourceVersion"],
            "finalizers": ["example.com/keep"],
            "annotations": {FINALIZED_ANNOTATION: task_id},
        }
    }
    found = record(_patched(held, patch))
    assert found.finalized, "finalized by the annotation naming its task"
    assert (found.revision, found.phase) == (record(held).revision, Phase.SUCCESS), "status kept"


def test_a_finalized_annotation_naming_another_task_finalizes_nothing() -> None:
    """A Workload created again from an exported copy of a finished one carries the old task's
    annotation: its own task is not finalized by it."""
    old = workload(uid="00000000-0000-4000-8000-0000000000aa")
    copied = workload(annotations={FINALIZED_ANNOTATION: task_id_of(old)})
    assert task_id_of(old) != task_id_of(copied)
    assert record(submitted(copied)).finalized is False


# Abort requests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "requested"),
    [
        pytest.param("nothing", False, id="not-requested"),
        pytest.param("deleted", True, id="deletionTimestamp"),
        pytest.param("annotated", True, id="annotation"),
        pytest.param("recorded", True, id="record"),
    ],
)
def test_an_abort_is_requested_by_deletion_by_annotation_or_by_the_record(
    how: str, requested: bool
) -> None:
    obj = submitted()
    if how == "deleted":
        obj["metadata"]["deletionTimestamp"] = "2026-11-21T12:00:05Z"
    elif how == "annotated":
        obj["metadata"]["annotations"] = {ABORT_ANNOTATION: "2026-11-21T12:00:05Z"}
    elif how == "recorded":
        body = abort_requested_workload(obj, record(obj), at(5))
        assert body["status"]["task"]["abortRequested"] is True
        obj = stored(body)
        assert (record(obj).revision, record(obj).updated_at) == (2, at(5))
    assert record(obj).abort_requested is requested


# What a round does for a Workload ----------------------------------------------------------------


def _with(obj: dict[str, Any], *, deleting: bool, finalizer: bool) -> dict[str, Any]:
    metadata = dict(obj["metadata"])
    metadata["finalizers"] = ["example.com/keep", *([WORKLOAD_FINALIZER] if finalizer else [])]
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-21T12:00:05Z"
    return {**obj, "metadata": metadata}


def _finalized() -> dict[str, Any]:
    """A Workload whose status records its task finalized (a refusal writes it so)."""
    obj = advance(submitted(), PhaseInfo(Phase.SUCCESS, 1), at(1))
    obj["status"]["task"]["finalized"] = True
    return obj


def _finalized_by_its_patch() -> dict[str, Any]:
    obj = advance(submitted(), PhaseInfo(Phase.SUCCESS, 1), at(1))
    return _patched(obj, finalized_patch(obj, record(obj).task_id))


_TASKS = {
    "no-task": workload,
    "active": submitted,
    "finalized": _finalized,
    "finalized-by-its-patch": _finalized_by_its_patch,
}


@pytest.mark.parametrize(
    ("task", "deleting", "finalizer", "action"),
    [
        pytest.param("no-task", False, False, WorkloadAction.SUBMIT, id="new"),
        pytest.param("no-task", False, True, WorkloadAction.SUBMIT, id="held-not-submitted"),
        pytest.param("no-task", True, True, WorkloadAction.RELEASE, id="deleted-before-its-task"),
        pytest.param("no-task", True, False, WorkloadAction.NOTHING, id="deleted-not-held"),
        pytest.param("active", False, True, WorkloadAction.NOTHING, id="active"),
        pytest.param("active", True, True, WorkloadAction.NOTHING, id="active-deleted-aborts"),
        pytest.param("finalized", False, True, WorkloadAction.RELEASE, id="finalized"),
        pytest.param("finalized", True, True, WorkloadAction.RELEASE, id="finalized-deleted"),
        pytest.param("finalized", False, False, WorkloadAction.NOTHING, id="released"),
        pytest.param("finalized", True, False, WorkloadAction.NOTHING, id="released-deleted"),
        pytest.param(
            "finalized-by-its-patch", False, False, WorkloadAction.NOTHING, id="let-go-finalized"
        ),
        pytest.param(
            "finalized-by-its-patch", False, True, WorkloadAction.RELEASE, id="held-again"
        ),
    ],
)
def test_next_action(task: str, deleting: bool, finalizer: bool, action: WorkloadAction) -> None:
    obj = _with(_TASKS[task](), deleting=deleting, finalizer=finalizer)
    assert next_action(obj, record_of(obj)) is action


def test_the_finalizer_patches_touch_only_podwrights_finalizer() -> None:
    obj = workload(finalizers=["example.com/keep"])
    held = with_finalizer_patch(obj)
    assert held == {
        "metadata": {
            "resourceVersion": "10",
            "finalizers": ["example.com/keep", WORKLOAD_FINALIZER],
        }
    }
    obj["metadata"]["finalizers"] = held["metadata"]["finalizers"]
    assert without_finalizer_patch(obj) == {
        "metadata": {"resourceVersion": "10", "finalizers": ["example.com/keep"]}
    }
    alone = workload(finalizers=[WORKLOAD_FINALIZER])
    assert without_finalizer_patch(alone) == {
        "metadata": {"resourceVersion": "10", "finalizers": None}
    }


# A Workload that cannot be rendered --------------------------------------------------------------


def test_a_refused_workload_is_a_finalized_permanent_failure() -> None:
    read = _with(workload(), deleting=False, finalizer=True)
    body = refused_workload(read, task_id_of(read), "compute: no node pool has h100", at(3))
    assert body["metadata"] == read["metadata"]
    found = record(stored(body))
    assert (found.task_id, found.revision, found.phase, found.reason) == (
        "resnet-3f2a1b4c",
        1,
        Phase.PERMANENT_FAILURE,
        "RenderFailed",
    )
    assert (found.finalized, found.task.manifests, found.task.submitted_at) == (True, (), at(3))
    assert history_of(body) == [
        HistoryEntry(
            Phase.PERMANENT_FAILURE,
            1,
            "compute: no node pool has h100",
            at(3),
            "RenderFailed",
            "compute: no node pool has h100",
            ErrorKind.USER,
        )
    ]
    status = body["status"]
    assert (status["message"], status["completionTime"]) == (
        "compute: no node pool has h100",
        rfc(3),
    )
    assert "startTime" not in status
    assert statuses(body) == (F, F, T), "nothing was launched"
    assert next_action(stored(body), found) is WorkloadAction.RELEASE


# The Event of a new phase ------------------------------------------------------------------------

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def assert_valid_event(event: Mapping[str, Any]) -> None:
    """What the API server checks of an ``events.k8s.io/v1`` Event (``ValidateEventCreate`` in
    ``pkg/apis/core/validation/events.go``; its lengths are Go's, in bytes)."""
    assert (event["apiVersion"], event["kind"]) == ("events.k8s.io/v1", "Event")
    metadata = event["metadata"]
    assert _DNS_SUBDOMAIN.match(metadata["name"])
    assert len(metadata["name"]) <= 253
    assert _DNS_SUBDOMAIN.match(metadata["namespace"])
    assert _MICRO_TIME.match(event["eventTime"]), event["eventTime"]
    assert _QUALIFIED_NAME.match(event["reportingController"])
    assert 0 < len(event["reportingInstance"].encode()) <= 128
    assert 0 < len(event["action"].encode()) <= 128
    assert 0 < len(event["reason"].encode()) <= 128
    assert event["type"] in ("Normal", "Warning")
    assert len(event["note"].encode()) <= 1024


@pytest.mark.parametrize("phase", ALL_PHASES, ids=[phase.value for phase in ALL_PHASES])
def test_a_new_phase_makes_an_event_regarding_the_workload(phase: Phase) -> None:
    obj = submitted()
    info = PhaseInfo(phase, 2, "because", occurred_at=T0 + timedelta(microseconds=250))
    event = phase_event(obj, info, at(1), component="podwright-operator", instance="op-0")
    assert_valid_event(event)
    assert event["type"] == ("Warning" if phase.is_failure else "Normal")
    assert (event["reason"], event["note"], event["action"]) == (
        phase.value,
        "because",
        "Reconcile",
    )
    assert event["eventTime"] == "2026-11-21T12:00:00.000250Z", "when it happened"
    assert (event["reportingController"], event["reportingInstance"]) == (
        "podwright-operator",
        "op-0",
    )
    assert event["metadata"]["namespace"] == "research"
    assert event["metadata"]["name"].startswith("resnet.")
    assert event["regarding"] == {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "name": "resnet",
        "namespace": "research",
        "uid": UID,
    }


WORTH_AN_EVENT = {
    Phase.UNDEFINED: False,
    Phase.NOT_READY: False,
    Phase.QUEUED: False,
    Phase.INITIALIZING: False,
    Phase.RUNNING: False,
    Phase.WAITING_FOR_RESOURCES: True,
    Phase.RETRYABLE_FAILURE: True,
    Phase.SYSTEM_RETRYABLE_FAILURE: True,
    Phase.PERMANENT_FAILURE: True,
    Phase.SUCCESS: False,
    Phase.ABORTED: True,
}


@pytest.mark.parametrize("phase", list(Phase), ids=[phase.value for phase in Phase])
def test_only_a_phase_a_person_reads_about_is_told_as_an_event(phase: Phase) -> None:
    assert worth_an_event(phase) is WORTH_AN_EVENT[phase]


@pytest.mark.parametrize(
    ("info", "note"),
    [
        pytest.param(PhaseInfo(Phase.RUNNING), "Running", id="no-reason"),
        pytest.param(
            PhaseInfo(
                Phase.RETRYABLE_FAILURE,
                reason="Error",
                error=ExecutionError("Error", "exit code 3"),
            ),
            "Error: exit code 3",
            id="error-added",
        ),
        pytest.param(
            PhaseInfo(
                Phase.PERMANENT_FAILURE,
                reason="OOMKilled: out of memory",
                error=ExecutionError("OOMKilled", "out of memory"),
            ),
            "OOMKilled: out of memory",
            id="error-said-once",
        ),
    ],
)
def test_an_events_note_says_the_reason_and_the_error(info: PhaseInfo, note: str) -> None:
    event = phase_event(submitted(), info, at(1), component="podwright-operator", instance="op-0")
    assert event["note"] == note
    assert event["eventTime"] == "2026-11-21T12:00:01.000000Z", "when it was seen"


@pytest.mark.parametrize(
    "message",
    [pytest.param("x" * 5000, id="ascii"), pytest.param("é" * 5000, id="two-byte-characters")],
)
def test_a_long_note_is_cut_to_what_the_api_server_accepts(message: str) -> None:
    info = PhaseInfo(
        Phase.PERMANENT_FAILURE, reason="Error", error=ExecutionError("Error", message)
    )
    event = phase_event(submitted(), info, at(1), component="podwright-operator", instance="op-0")
    assert_valid_event(event)
    assert event["note"].startswith("Error: " + message[:100])


# The history is the sequence of phase changes --------------------------------------------------

_REPORTS = st.lists(
    st.tuples(
        st.sampled_from(ALL_PHASES),
        st.integers(0, 3),
        st.integers(0, 3),
    ),
    max_size=12,
)


@given(_REPORTS, st.integers(0, 4) | st.integers(EVENTS_KEPT - 6, EVENTS_KEPT + 4))
def test_history_is_the_reports_that_change_the_phase_or_its_version(
    reports: Sequence[tuple[Phase, int, int]], attached_before: int
) -> None:
    obj = submitted()
    # Events attached by earlier rounds, so that the kept window is reached.
    earlier = tuple(ReasonInfo(f"earlier {i}") for i in range(attached_before))
    obj = advance(obj, PhaseInfo(Phase.UNDEFINED, 0, additional_reasons=earlier), at(0))
    expected: list[tuple[Phase, int]] = []
    attached = [event.reason for event in earlier]
    for step, (phase, version, events) in enumerate(reports, start=1):
        before = record(obj)
        info = PhaseInfo(
            phase,
            version,
            additional_reasons=tuple(ReasonInfo(f"{step}.{i}") for i in range(events)),
        )
        result = advanced_workload(obj, before, {"step": step}, info, at(step))
        changed = (phase, version) != (before.phase, before.phase_version)
        assert result.new_phase is changed
        if changed:
            expected.append((phase, version))
        attached += [reason.reason for reason in info.additional_reasons]
        obj = stored(result.workload)
    assert [(entry.phase, entry.version) for entry in history_of(obj)] == expected
    assert [event.reason for event in events_attached(obj)] == attached[-EVENTS_KEPT:]
    final = record(obj)
    assert final.revision == 1 + 1 + len(reports), "the submission, the first advance, each report"
    assert final.plugin_state == ({"step": len(reports)} if reports else {})
