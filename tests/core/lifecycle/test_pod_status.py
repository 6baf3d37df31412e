"""The pod status → phase decision matrix (pure, fake clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podwright.core.lifecycle import ErrorKind, Phase
from podwright.core.lifecycle.pod_status import PodPhaseConfig, pod_phase, preemption_ends_task

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CONFIG = PodPhaseConfig()


def _time(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(
    phase: str,
    *,
    containers: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    primary: str | None = None,
    spec_containers: tuple[str, ...] = ("main",),
    reason: str = "",
    message: str = "",
    created_minutes_ago: float = 1,
    policy: str = "Never",
) -> dict[str, Any]:
    """A pod as the API server shows it; ``policy`` is its ``restartPolicy`` (the rows of this
    table are pods that run once: restarts are ``test_restarts.py``'s)."""
    annotations = {"podwright.dev/primary-container": primary} if primary else {}
    status: dict[str, Any] = {"phase": phase, "containerStatuses": containers or []}
    if conditions is not None:
        status["conditions"] = conditions
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return {
        "metadata": {"annotations": annotations, "creationTimestamp": _time(created_minutes_ago)},
        "spec": {
            "restartPolicy": policy,
            "containers": [{"name": n} for n in spec_containers],
        },
        "status": status,
    }


def _terminated(name: str, exit_code: int, reason: str = "") -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": exit_code, "reason": reason}}}


def _waiting(name: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"name": name, "state": {"waiting": {"reason": reason, "message": message}}}


def _scheduled_not_ready(minutes_ago: float) -> list[dict[str, Any]]:
    return [
        {"type": "PodScheduled", "status": "True"},
        {
            "type": "Ready",
            "status": "False",
            "reason": "ContainersNotReady",
            "lastTransitionTime": _time(minutes_ago),
        },
    ]


@pytest.mark.parametrize(
    ("pod", "phase", "code"),
    [
        # Succeeded
        (_pod("Succeeded", containers=[_terminated("main", 0, "Completed")]), Phase.SUCCESS, ""),
        (
            _pod(
                "Succeeded",
                containers=[_terminated("main", 0), _terminated("side", 137, "OOMKilled")],
            ),
            Phase.RETRYABLE_FAILURE,
            "OOMKilled",
        ),
        # Failed
        (
            _pod("Failed", containers=[_terminated("main", 1, "Error")]),
            Phase.RETRYABLE_FAILURE,
            "Error",
        ),
        (_pod("Failed", reason="Shutdown"), Phase.SYSTEM_RETRYABLE_FAILURE, "Interrupted"),
        (_pod("Failed", reason="Terminated"), Phase.SYSTEM_RETRYABLE_FAILURE, "Interrupted"),
        (_pod("Failed", reason="NodeShutdown"), Phase.SYSTEM_RETRYABLE_FAILURE, "Interrupted"),
        (_pod("Failed", reason="NodeAffinity"), Phase.SYSTEM_RETRYABLE_FAILURE, "Interrupted"),
        (
            _pod("Failed", containers=[_terminated("main", 137)], primary="main"),
            Phase.SYSTEM_RETRYABLE_FAILURE,
            "Interrupted",
        ),
        (
            _pod("Failed", containers=[_terminated("main", 247)]),
            Phase.SYSTEM_RETRYABLE_FAILURE,
            "Interrupted",
        ),
        (
            # SIGKILL of a sidecar is not the primary container's interruption.
            _pod(
                "Failed",
                containers=[_terminated("main", 2), _terminated("side", 137)],
                primary="main",
            ),
            Phase.RETRYABLE_FAILURE,
            "Error",
        ),
        (
            _pod("Failed", containers=[_terminated("main", 137, "OOMKilled")]),
            Phase.RETRYABLE_FAILURE,
            "OOMKilled",
        ),
        (
            _pod("Failed", reason="Evicted", message="low memory"),
            Phase.RETRYABLE_FAILURE,
            "Evicted",
        ),
        # Pending
        (_pod("Pending"), Phase.QUEUED, ""),
        (
            _pod(
                "Pending",
                conditions=[
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes",
                    }
                ],
            ),
            Phase.QUEUED,
            "",
        ),
        (_pod("Pending", conditions=_scheduled_not_ready(1)), Phase.INITIALIZING, ""),
        *(
            (
                _pod(
                    "Pending",
                    conditions=_scheduled_not_ready(60),
                    containers=[_waiting("main", reason)],
                ),
                Phase.INITIALIZING,
                "",
            )
            for reason in ("ErrImagePull", "ContainerCreating", "PodInitializing")
        ),
        (
            _pod(
                "Pending",
                conditions=_scheduled_not_ready(2),
                containers=[_waiting("main", "CreateContainerError")],
            ),
            Phase.INITIALIZING,
            "",
        ),
        (
            _pod(
                "Pending",
                conditions=_scheduled_not_ready(3),
                containers=[_waiting("main", "CreateContainerError")],
            ),
            Phase.PERMANENT_FAILURE,
            "CreateContainerError",
        ),
        (
            _pod(
                "Pending",
                conditions=_scheduled_not_ready(0),
                containers=[_waiting("main", "CreateContainerConfigError", "secret x not found")],
            ),
            Phase.PERMANENT_FAILURE,
            "CreateContainerConfigError",
        ),
        (
            _pod(
                "Pending",
                conditions=_scheduled_not_ready(0),
                containers=[_waiting("main", "InvalidImageName")],
            ),
            Phase.PERMANENT_FAILURE,
            "InvalidImageName",
        ),
        (
            _pod(
                "Pending",
                conditions=_scheduled_not_ready(2),
                containers=[_waiting("main", "ImagePullBackOff")],
            ),
            Phase.INITIALIZING,
            "",
        ),
        (
            _pod(
                "Pending",
                conditions=_scheduled_not_ready(4),
                containers=[_waiting("main", "ImagePullBackOff")],
            ),
            Phase.RETRYABLE_FAILURE,
            "ImagePullBackOff",
        ),
        (
            _pod(
                "Pending",
                conditions=_scheduled_not_ready(4),
                containers=[_waiting("main", "ImagePullBackOff", "429 Too Many Requests")],
            ),
            Phase.SYSTEM_RETRYABLE_FAILURE,
            "ImagePullBackOff",
        ),
        (
            _pod(
                "Pending",
                conditions=_scheduled_not_ready(0),
                containers=[_waiting("main", "RunContainerError")],
            ),
            Phase.SYSTEM_RETRYABLE_FAILURE,
            "RunContainerError",
        ),
        # Running, without and with a primary container
        (_pod("Running"), Phase.RUNNING, ""),
        (
            _pod(
                "Running", primary="main", containers=[{"name": "main", "state": {"running": {}}}]
            ),
            Phase.RUNNING,
            "",
        ),
        (_pod("Running", primary="main", containers=[_terminated("main", 0)]), Phase.SUCCESS, ""),
        (
            _pod("Running", primary="main", containers=[_terminated("main", 3, "Error")]),
            Phase.RETRYABLE_FAILURE,
            "Error",
        ),
        (
            _pod("Running", primary="main", containers=[_terminated("main", 1)]),
            Phase.RETRYABLE_FAILURE,
            "ContainerFailed",
        ),
        (
            _pod("Running", primary="main", containers=[_terminated("main", 137, "OOMKilled")]),
            Phase.RETRYABLE_FAILURE,
            "OOMKilled",
        ),
        (
            _pod("Running", primary="main", containers=[_terminated("main", 137)]),
            Phase.SYSTEM_RETRYABLE_FAILURE,
            "Interrupted",
        ),
        (_pod("Running", primary="main", containers=[]), Phase.RUNNING, ""),
        (
            _pod("Running", primary="gone", containers=[], spec_containers=("main",)),
            Phase.PERMANENT_FAILURE,
            "PrimaryContainerNotFound",
        ),
        (_pod("Unknown"), Phase.UNDEFINED, ""),
    ],
)
def test_pod_status_decides_the_phase(pod: dict[str, Any], phase: Phase, code: str) -> None:
    info = pod_phase(pod, NOW, CONFIG)
    assert info.phase is phase
    if code:
        assert info.error is not None
        assert info.error.code == code


def test_failure_messages_carry_the_pods_reason_message_and_terminations() -> None:
    pod = _pod(
        "Failed",
        reason="Evicted",
        message="The node was low on memory",
        containers=[_terminated("main", 1, "Error")],
    )
    info = pod_phase(pod, NOW, CONFIG)
    assert info.error is not None
    assert "Evicted: The node was low on memory" in info.error.message
    assert "[main] terminated with exit code 1, reason Error" in info.error.message


def test_unschedulable_reason_names_the_schedulers_message() -> None:
    pod = _pod(
        "Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available",
            }
        ],
    )
    assert pod_phase(pod, NOW, CONFIG).reason == "Unschedulable: 0/3 nodes are available"


@pytest.mark.parametrize(
    ("reason", "cleanup"),
    [
        ("CreateContainerError", True),
        ("CreateContainerConfigError", True),
        ("RunContainerError", True),
        ("InvalidImageName", False),
    ],
)
def test_failures_that_hold_a_node_ask_for_cleanup(reason: str, cleanup: bool) -> None:
    pod = _pod(
        "Pending", conditions=_scheduled_not_ready(10), containers=[_waiting("main", reason)]
    )
    assert pod_phase(pod, NOW, CONFIG).cleanup_on_failure is cleanup


def test_grace_periods_are_configurable() -> None:
    pod = _pod(
        "Pending",
        conditions=_scheduled_not_ready(1),
        containers=[_waiting("main", "CreateContainerConfigError")],
    )
    patient = PodPhaseConfig(create_container_config_error_grace=timedelta(minutes=5))
    assert pod_phase(pod, NOW, patient).phase is Phase.INITIALIZING
    assert pod_phase(pod, NOW, CONFIG).phase is Phase.PERMANENT_FAILURE


def test_grace_clock_falls_back_to_the_pods_creation_time() -> None:
    pod = _pod(
        "Pending", containers=[_waiting("main", "CreateContainerError")], created_minutes_ago=10
    )
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    assert pod_phase(pod, NOW, CONFIG).phase is Phase.PERMANENT_FAILURE


@pytest.mark.parametrize(
    ("timeout", "created", "phase"),
    [
        (None, 600, Phase.QUEUED),
        (timedelta(minutes=5), 4, Phase.QUEUED),
        (timedelta(minutes=5), 6, Phase.SYSTEM_RETRYABLE_FAILURE),
    ],
)
def test_pending_timeout(timeout: timedelta | None, created: float, phase: Phase) -> None:
    pod = _pod("Pending", created_minutes_ago=created)
    info = pod_phase(pod, NOW, PodPhaseConfig(pod_pending_timeout=timeout))
    assert info.phase is phase
    if phase.is_failure:
        assert info.reason == "PodPendingTimeout"
        assert info.cleanup_on_failure


@pytest.mark.parametrize(
    ("annotation", "disrupted", "phase"),
    [
        ("true", True, Phase.PERMANENT_FAILURE),
        ("true", False, Phase.SYSTEM_RETRYABLE_FAILURE),
        ("false", True, Phase.SYSTEM_RETRYABLE_FAILURE),
        (None, True, Phase.SYSTEM_RETRYABLE_FAILURE),
    ],
)
def test_terminate_after_preemption(annotation: str | None, disrupted: bool, phase: Phase) -> None:
    pod = _pod("Failed", reason="Terminated", containers=[_terminated("main", 137)])
    if annotation is not None:
        pod["metadata"]["annotations"]["podwright.dev/terminate-after-preemption"] = annotation
    if disrupted:
        pod["status"]["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    info = preemption_ends_task(pod, pod_phase(pod, NOW, CONFIG), NOW)
    assert info.phase is phase
    if phase is Phase.PERMANENT_FAILURE:
        assert info.error is not None
        assert info.error.kind is ErrorKind.SYSTEM
        assert "PreemptionByScheduler" in info.error.message
