"""Job, Kubeflow job and Knative Service status → phase (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from podwright.core.lifecycle import Phase
from podwright.core.lifecycle.resource_status import (
    job_phase,
    knative_service_phase,
    kubeflow_job_phase,
)

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def _conditions(
    *pairs: tuple[str, str], reason: str = "", message: str = ""
) -> list[dict[str, Any]]:
    return [{"type": t, "status": s, "reason": reason, "message": message} for t, s in pairs]


def _job(conditions: list[dict[str, Any]] | None = None, **status: Any) -> dict[str, Any]:
    return {"spec": {"backoffLimit": 3}, "status": {"conditions": conditions or [], **status}}


@pytest.mark.parametrize(
    ("job", "phase", "reason"),
    [
        (_job(), Phase.QUEUED, "job created; no pod yet"),
        (_job(active=1), Phase.INITIALIZING, "1 pod(s) starting"),
        (_job(active=1, ready=1), Phase.RUNNING, ""),
        (
            _job(active=1, ready=1, failed=2),
            Phase.RUNNING,
            "2 failed pod(s) of a backoff limit of 3",
        ),
        (
            _job(_conditions(("Suspended", "True"), message="queued by KAI")),
            Phase.QUEUED,
            "Suspended: queued by KAI",
        ),
        (_job(_conditions(("Complete", "True"))), Phase.SUCCESS, ""),
        (
            _job(_conditions(("FailureTarget", "True"))),
            Phase.RUNNING,
            "job is failing; its pods are terminating",
        ),
        (
            _job(_conditions(("SuccessCriteriaMet", "True"))),
            Phase.RUNNING,
            "job met its success criteria; its pods are terminating",
        ),
        (
            _job(_conditions(("Failed", "True"), reason="BackoffLimitExceeded"), failed=4),
            Phase.RETRYABLE_FAILURE,
            "BackoffLimitExceeded",
        ),
        (
            _job(_conditions(("Failed", "True"), reason="DeadlineExceeded")),
            Phase.RETRYABLE_FAILURE,
            "DeadlineExceeded",
        ),
        (
            _job(_conditions(("Failed", "False"), ("Complete", "False"))),
            Phase.QUEUED,
            "job created; no pod yet",
        ),
    ],
)
def test_job_conditions(job: dict[str, Any], phase: Phase, reason: str) -> None:
    info = job_phase(job, NOW)
    assert (info.phase, info.reason) == (phase, reason)


RETRYING = "retrying: {} failed pod(s) of a backoff limit of 10"
BACKOFF = "; next pod after the Job controller's backoff ({} after the last failure)"


def _retrying(**status: Any) -> dict[str, Any]:
    return {"spec": {"backoffLimit": 10}, "status": status}


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        pytest.param(
            _retrying(failed=1), RETRYING.format(1) + BACKOFF.format("10s"), id="first-retry"
        ),
        pytest.param(
            _retrying(failed=2), RETRYING.format(2) + BACKOFF.format("20s"), id="doubling"
        ),
        pytest.param(
            _retrying(failed=4), RETRYING.format(4) + BACKOFF.format("1m20s"), id="minutes"
        ),
        pytest.param(
            _retrying(failed=9), RETRYING.format(9) + BACKOFF.format("10m0s"), id="capped"
        ),
        pytest.param(
            _retrying(failed=1, uncountedTerminatedPods={"failed": ["uid-2"]}),
            RETRYING.format(2) + BACKOFF.format("20s"),
            id="uncounted-failure",
        ),
        pytest.param(
            _retrying(failed=1, active=1),
            RETRYING.format(1) + "; a new pod is starting",
            id="restart",
        ),
        pytest.param(
            _retrying(failed=1, terminating=1),
            RETRYING.format(1) + "; waiting for 1 terminating pod(s) to stop",
            id="terminating",
        ),
        pytest.param(
            _retrying(terminating=1),
            "replacing a pod; waiting for 1 terminating pod(s) to stop",
            id="evicted",
        ),
        pytest.param(
            {"spec": {"completions": 3}, "status": {"succeeded": 1}},
            "1 of 3 completions; the next pod is being created",
            id="between-completions",
        ),
    ],
)
def test_a_job_between_pods_is_running_with_its_retries_and_backoff(
    job: dict[str, Any], reason: str
) -> None:
    # The Job controller replaces a failed pod after 10 s doubling, at most 10 min
    # (DefaultJobPodFailureBackOff, MaxJobPodFailureBackOff in pkg/controller/job/job_controller.go).
    info = job_phase(job, NOW)
    assert (info.phase, info.reason) == (Phase.RUNNING, reason)


def test_a_job_started_without_a_pod_is_queued() -> None:
    info = job_phase(_job(startTime="2026-11-21T11:59:00Z"), NOW)
    assert (info.phase, info.reason) == (
        Phase.QUEUED,
        "job started, but has no pod (see the job's events)",
    )


def test_a_suspended_job_is_queued_for_a_cause() -> None:
    info = job_phase(_job(_conditions(("Suspended", "True"), message="preempted by Kueue")), NOW)
    assert (info.phase, info.reason, info.setback) == (
        Phase.QUEUED,
        "Suspended: preempted by Kueue",
        True,
    )
    assert not job_phase(_job(), NOW).setback


def test_job_failure_message_counts_the_backoff_limit() -> None:
    info = job_phase(
        _job(
            _conditions(
                ("Failed", "True"),
                reason="BackoffLimitExceeded",
                message="Job has reached the specified backoff limit",
            ),
            failed=4,
        ),
        NOW,
    )
    assert info.error is not None
    assert (
        info.error.message
        == "BackoffLimitExceeded: Job has reached the specified backoff limit (4 failed pod(s) of a backoff limit of 3)"
    )


@pytest.mark.parametrize(
    ("conditions", "phase"),
    [
        ([], Phase.QUEUED),
        (_conditions(("Created", "True")), Phase.QUEUED),
        (_conditions(("Created", "True"), ("Running", "True")), Phase.RUNNING),
        (
            _conditions(("Created", "True"), ("Running", "False"), ("Restarting", "True")),
            Phase.RUNNING,
        ),
        (
            _conditions(("Created", "True"), ("Running", "False"), ("Succeeded", "True")),
            Phase.SUCCESS,
        ),
        (
            _conditions(("Created", "True"), ("Running", "False"), ("Failed", "True")),
            Phase.RETRYABLE_FAILURE,
        ),
    ],
)
def test_kubeflow_conditions(conditions: list[dict[str, Any]], phase: Phase) -> None:
    assert kubeflow_job_phase({"status": {"conditions": conditions}}, NOW).phase is phase


def test_a_suspended_kubeflow_job_is_queued_for_a_cause() -> None:
    conditions = _conditions(("Created", "True"), ("Running", "False"), ("Suspended", "True"))
    info = kubeflow_job_phase({"status": {"conditions": conditions}}, NOW)
    assert (info.phase, info.setback) == (Phase.QUEUED, True)


def _service(
    ready: str | None, generation: int = 1, observed: int = 1, **extra: str
) -> dict[str, Any]:
    conditions = []
    if ready is not None:
        conditions.append(
            {"type": "Ready", "status": ready, "reason": "RevisionMissing", "message": "deploying"}
        )
    for kind, status in extra.items():
        conditions.append(
            {
                "type": kind,
                "status": status,
                "reason": "RevisionFailed",
                "message": "image not found",
            }
        )
    return {
        "metadata": {"generation": generation},
        "status": {"observedGeneration": observed, "conditions": conditions},
    }


@pytest.mark.parametrize(
    ("service", "phase", "code"),
    [
        (_service(None), Phase.QUEUED, ""),
        (_service("True", generation=2, observed=1), Phase.QUEUED, ""),
        (_service("Unknown"), Phase.INITIALIZING, ""),
        (_service("True"), Phase.RUNNING, ""),
        (_service("False", ConfigurationsReady="False"), Phase.RETRYABLE_FAILURE, "RevisionFailed"),
        (_service("False"), Phase.RETRYABLE_FAILURE, "RevisionMissing"),
    ],
)
def test_knative_service_conditions(service: dict[str, Any], phase: Phase, code: str) -> None:
    info = knative_service_phase(service, NOW)
    assert info.phase is phase
    if code:
        assert info.error is not None
        assert info.error.code == code
