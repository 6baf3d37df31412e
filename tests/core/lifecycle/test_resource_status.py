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
