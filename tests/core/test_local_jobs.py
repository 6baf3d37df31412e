"""The local backend's Job controller, as pure decisions: counts, back-off, conditions, events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podwright.core.lifecycle.phases import Phase
from podwright.core.lifecycle.resource_status import job_phase
from podwright.core.local_jobs import JobEvent, job_spec_problems, sync_job
from podwright.core.local_runtime import Backoff

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
BACKOFF = Backoff(timedelta(seconds=10), timedelta(minutes=10))


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return at(seconds).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(limit: int = 2, policy: str = "Never", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "train", "namespace": "research", "uid": "job-uid"},
        "spec": {
            "backoffLimit": limit,
            "completions": 1,
            "template": {"spec": {"restartPolicy": policy, "containers": [{"name": "main"}]}},
        },
        "status": status,
    }


def pod(
    uid: str,
    phase: str,
    *,
    finished: float | None = None,
    ready: bool = False,
    restarts: int = 0,
    deleting: bool = False,
) -> dict[str, Any]:
    state: dict[str, Any] = {"running": {}}
    if finished is not None:
        state = {
            "terminated": {
                "exitCode": 0 if phase == "Succeeded" else 1,
                "finishedAt": stamp(finished),
            }
        }
    metadata: dict[str, Any] = {"name": f"train-{uid}", "uid": uid}
    if deleting:
        metadata["deletionTimestamp"] = stamp(0)
    return {
        "metadata": metadata,
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "main", "state": state, "restartCount": restarts}],
        },
    }


def test_a_new_job_creates_its_first_pod_and_starts() -> None:
    step = sync_job(job(), [], frozenset(), at(0), BACKOFF)
    assert step.create_pod
    assert step.status == {
        "startTime": stamp(0),
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
    }


def test_a_running_pod_is_active_and_ready() -> None:
    step = sync_job(
        job(startTime=stamp(0)), [pod("a", "Running", ready=True)], frozenset(), at(5), BACKOFF
    )
    assert not step.create_pod
    assert (step.status["active"], step.status["ready"]) == (1, 1)
    assert job_phase({"status": step.status, "spec": {}}, at(5)).phase is Phase.RUNNING


@pytest.mark.parametrize(
    ("failures", "now", "create", "wake_at"),
    [
        pytest.param(1, 9, False, 10, id="first failure: 10 s"),
        pytest.param(1, 10, True, None, id="first failure, waited"),
        pytest.param(2, 15, False, 20, id="second failure: 20 s"),
        pytest.param(2, 20, True, None, id="second failure, waited"),
    ],
)
def test_a_failed_pod_is_replaced_after_the_job_controllers_back_off(
    failures: int, now: float, create: bool, wake_at: float | None
) -> None:
    pods = [pod(f"p{n}", "Failed", finished=0) for n in range(failures)]
    step = sync_job(job(limit=6, startTime=stamp(0)), pods, frozenset(), at(now), BACKOFF)
    assert step.create_pod is create
    assert step.wake_at == (at(wake_at) if wake_at is not None else None)
    assert step.status["failed"] == failures
    # Between two pods none is active: the Job has started and waits for its next pod.
    assert "active" not in step.status


def test_failures_are_counted_once() -> None:
    failed = pod("a", "Failed", finished=0)
    first = sync_job(job(limit=6), [failed], frozenset(), at(1), BACKOFF)
    assert first.counted == {"a"}
    again = sync_job(job(limit=6, **first.status), [failed], first.counted, at(2), BACKOFF)
    assert again.status["failed"] == 1


def test_past_the_backoff_limit_the_job_fails_with_the_controllers_conditions_and_event() -> None:
    pods = [pod(f"p{n}", "Failed", finished=n) for n in range(3)]
    step = sync_job(job(limit=2, startTime=stamp(0)), pods, frozenset(), at(5), BACKOFF)
    assert [c["type"] for c in step.status["conditions"]] == ["FailureTarget", "Failed"]
    assert {c["reason"] for c in step.status["conditions"]} == {"BackoffLimitExceeded"}
    assert step.events == (
        JobEvent("BackoffLimitExceeded", "Job has reached the specified backoff limit", "Warning"),
    )
    assert step.finished
    assert not step.create_pod
    assert job_phase({"status": step.status, "spec": {}}, at(5)).phase is Phase.RETRYABLE_FAILURE


def test_with_on_failure_restarts_count_toward_the_limit_and_the_pod_is_deleted_first() -> None:
    running = pod("a", "Running", restarts=2)
    failing = sync_job(job(limit=2, policy="OnFailure"), [running], frozenset(), at(5), BACKOFF)
    assert [c["type"] for c in failing.status["conditions"]] == ["FailureTarget"]
    assert failing.delete_pods == ("train-a",)
    assert failing.events == (JobEvent("SuccessfulDelete", "Deleted pod: train-a"),)
    assert failing.status["failed"] == 1  # a pod that has not ended is considered failed
    assert not failing.finished
    # The pod terminates; once it is gone, the Job has failed.
    terminating = pod("a", "Running", restarts=2, deleting=True)
    waiting = sync_job(
        job(limit=2, policy="OnFailure", **failing.status),
        [terminating],
        failing.counted,
        at(6),
        BACKOFF,
    )
    assert (waiting.status["terminating"], waiting.delete_pods, waiting.finished) == (1, (), False)
    failed = sync_job(
        job(limit=2, policy="OnFailure", **waiting.status), [], waiting.counted, at(7), BACKOFF
    )
    assert [c["type"] for c in failed.status["conditions"]] == ["FailureTarget", "Failed"]
    assert failed.status["failed"] == 1
    assert failed.finished


@pytest.mark.parametrize(
    ("limit", "restarts", "fails"),
    [(0, 0, False), (0, 1, True), (2, 1, False), (2, 2, True)],
)
def test_the_restart_limit_under_on_failure(limit: int, restarts: int, fails: bool) -> None:
    step = sync_job(
        job(limit=limit, policy="OnFailure"),
        [pod("a", "Running", restarts=restarts)],
        frozenset(),
        at(1),
        BACKOFF,
    )
    assert ("conditions" in step.status) is fails


def test_a_success_completes_the_job() -> None:
    step = sync_job(
        job(startTime=stamp(0)), [pod("a", "Succeeded", finished=3)], frozenset(), at(4), BACKOFF
    )
    assert [(c["type"], c["reason"]) for c in step.status["conditions"]] == [
        ("SuccessCriteriaMet", "CompletionsReached"),
        ("Complete", "CompletionsReached"),
    ]
    assert step.status["completionTime"] == stamp(4)
    assert step.status["succeeded"] == 1
    assert step.events == (JobEvent("Completed", "Job completed"),)
    assert job_phase({"status": step.status, "spec": {}}, at(4)).phase is Phase.SUCCESS


def test_a_finished_job_does_nothing_more() -> None:
    done: dict[str, Any] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    step = sync_job(job(**done), [], frozenset(), at(9), BACKOFF)
    assert (step.finished, step.create_pod, step.status) == (True, False, done)


def test_a_job_being_deleted_creates_no_pod() -> None:
    deleting = job()
    deleting["metadata"]["deletionTimestamp"] = stamp(0)
    step = sync_job(deleting, [], frozenset(), at(1), BACKOFF)
    assert not step.create_pod


@pytest.mark.parametrize(
    ("spec", "problems"),
    [
        (
            {
                "backoffLimit": -1,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m"}]}},
            },
            ["spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0"],
        ),
        ({}, ["spec.template.spec: Required value"]),
        (
            {"template": {"spec": {"containers": [{"name": "m"}]}}},
            [
                'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"'
            ],
        ),
    ],
)
def test_job_specs_are_validated_as_the_api_server_does(
    spec: dict[str, Any], problems: list[str]
) -> None:
    assert job_spec_problems(spec) == problems
