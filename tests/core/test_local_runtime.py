"""The local backend's pure decisions: what a container runs with, and the Pod status it shows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podwright.core.lifecycle.phases import Phase
from podwright.core.lifecycle.pod_status import PodPhaseConfig, pod_phase
from podwright.core.local_runtime import ContainerRun, LaunchRefusal, plan_launch, pod_status

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
POD = {
    "metadata": {
        "name": "train-1",
        "namespace": "research",
        "uid": "u-1",
        "labels": {"team": "vision"},
    },
    "spec": {},
}


def test_command_args_and_environment_as_the_kubelet_builds_them() -> None:
    container = {
        "name": "main",
        "image": "trainer:1",
        "command": ["python", "$(SCRIPT)"],
        "args": ["--epochs", "$(EPOCHS)", "$$(literal)", "$(UNKNOWN)"],
        "env": [
            {"name": "EPOCHS", "value": "90"},
            {"name": "SCRIPT", "value": "train-$(EPOCHS).py"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {
                "name": "MEMORY_MI",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
        ],
        "workingDir": "/work",
        "resources": {"limits": {"cpu": "1500m", "memory": "2Gi"}},
    }
    launch = plan_launch(container, POD)
    assert launch.argv == ("python", "train-90.py", "--epochs", "90", "$(literal)", "$(UNKNOWN)")
    assert dict(launch.env) == {
        "HOSTNAME": "train-1",
        "EPOCHS": "90",
        "SCRIPT": "train-90.py",
        "POD": "train-1",
        "TEAM": "vision",
        "IP": "127.0.0.1",
        "CPUS": "2",
        "MEMORY_MI": "2048",
    }
    assert (launch.working_dir, launch.memory_limit_bytes) == ("/work", 2 * 2**30)


@pytest.mark.parametrize(
    ("container", "reason", "message"),
    [
        (
            {"name": "main", "image": "trainer:1"},
            "CreateContainerError",
            "container 'main' has no command: the local backend runs commands on this machine and cannot run the image's entrypoint (trainer:1)",
        ),
        (
            {
                "name": "main",
                "command": ["x"],
                "env": [
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
                ],
            },
            "CreateContainerConfigError",
            "env TOKEN comes from secretKeyRef: the local backend has no Secrets or ConfigMaps",
        ),
        (
            {
                "name": "main",
                "command": ["x"],
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.priority"}}}],
            },
            "CreateContainerConfigError",
            "fieldRef 'spec.priority' is not supported",
        ),
        (
            {"name": "main", "command": ["x"], "resources": {"limits": {"memory": "lots"}}},
            "CreateContainerConfigError",
            "resources.limits.memory",
        ),
    ],
)
def test_what_one_machine_cannot_provide_is_refused_with_the_kubelets_reason(
    container: dict[str, Any], reason: str, message: str
) -> None:
    with pytest.raises(
        LaunchRefusal, match=message.replace("(", r"\(").replace(")", r"\)")
    ) as refused:
        plan_launch(container, POD)
    assert refused.value.reason == reason


def run(
    name: str,
    start: int | None = None,
    end: int | None = None,
    code: int | None = None,
    waiting: str = "",
) -> ContainerRun:
    at = lambda seconds: None if seconds is None else T0 + timedelta(seconds=seconds)  # noqa: E731
    return ContainerRun(name, at(start), at(end), code, waiting, "it says why" if waiting else "")


def pod(
    init: list[ContainerRun], main: list[ContainerRun], primary: str = "main"
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "creationTimestamp": "2026-11-21T12:00:00Z",
            "annotations": {"podwright.dev/primary-container": primary},
        },
        "status": pod_status(init, main, T0, T0 + timedelta(seconds=30)),
    }


@pytest.mark.parametrize(
    ("init", "main", "pod_phase_name", "task_phase"),
    [
        ([], [run("main")], "Pending", Phase.INITIALIZING),
        ([run("fetch", 0)], [run("main")], "Pending", Phase.INITIALIZING),
        ([run("fetch", 0, 1, 0)], [run("main", 2)], "Running", Phase.RUNNING),
        ([], [run("main", 0, 5, 0)], "Succeeded", Phase.SUCCESS),
        ([], [run("main", 0, 5, 1)], "Failed", Phase.RETRYABLE_FAILURE),
        ([run("fetch", 0, 1, 2)], [run("main")], "Failed", Phase.RETRYABLE_FAILURE),
        ([], [run("main", 0, 5, 0), run("sidecar", 0)], "Running", Phase.SUCCESS),
        (
            [],
            [run("main", waiting="CreateContainerConfigError")],
            "Pending",
            Phase.PERMANENT_FAILURE,
        ),
    ],
)
def test_statuses_read_by_the_pod_plugin_give_the_phases_a_cluster_would(
    init: list[ContainerRun], main: list[ContainerRun], pod_phase_name: str, task_phase: Phase
) -> None:
    observed = pod(init, main)
    assert observed["status"]["phase"] == pod_phase_name
    assert pod_phase(observed, T0 + timedelta(seconds=30), PodPhaseConfig()).phase == task_phase


def test_a_finished_container_reports_its_code_and_times() -> None:
    status = pod_status([], [run("main", 0, 5, 137)], T0, T0)
    (container,) = status["containerStatuses"]
    assert container["state"] == {
        "terminated": {
            "exitCode": 137,
            "reason": "Error",
            "startedAt": "2026-11-21T12:00:00Z",
            "finishedAt": "2026-11-21T12:00:05Z",
        }
    }
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "False",
        "Ready": "False",
    }
