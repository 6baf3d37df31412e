"""Restarts and retries as a task shows them: the plugin manager over the local backend.

The local backend restarts containers as a kubelet does (the first restart at once, the next
after the crash-loop back-off, here 2 s) and retries Jobs as the Job controller does. These
scenarios run real processes, through the plugin manager's rounds as the executor runs them, and
check what the task shows: a pod that restarts is Running throughout, its reasons name each
restart and the back-off; a Job whose container restarts in place is Running, retrying, then
Success. Each step a test waits for is held by a gate file the test creates, or lasts the 2 s
back-off, so no status the test looks for can pass unseen between two rounds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.local.cluster import LocalCluster
from podwright.core.lifecycle import Phase, PhaseInfo, decode_state
from podwright.core.local_runtime import Backoff
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex
from podwright.engine.kubernetes_port import ObjectRef, PatchType
from podwright.engine.plugin import Plugin, TaskContext
from podwright.engine.plugin_manager import PluginManager
from podwright.engine.plugins import JobPlugin, PodPlugin
from tests.kube.support import eventually

BACK_OFF = Backoff(timedelta(seconds=2), timedelta(minutes=1))
NAMESPACE = "research"


@pytest.fixture
def local(tmp_path: Path, events: EventIndex) -> Iterator[LocalCluster]:
    """The local backend with a 2 s crash-loop and Job back-off; its processes killed after."""
    cluster = LocalCluster(
        tmp_path / "local", events=events, restart_backoff=BACK_OFF, job_backoff=BACK_OFF
    )
    yield cluster
    cluster.close()


@dataclass
class Follower:
    """One task's reconcile rounds, as the executor runs them, and every report that differs
    from the one before (a timeline entry of ``podwright run``)."""

    manager: PluginManager
    task: TaskContext
    state: dict[str, Any] | None = None
    reports: list[PhaseInfo] = field(default_factory=list)

    def round(self) -> PhaseInfo:
        transition = self.manager.handle(self.task, self.state, datetime.now(UTC))
        if transition.state_changed:
            self.state = transition.encoded_state()
        info = transition.info
        if not self.reports or (self.reports[-1].phase, self.reports[-1].reason) != (
            info.phase,
            info.reason,
        ):
            self.reports.append(info)
        return info

    def until(self, check: Callable[[PhaseInfo], bool], timeout: float = 60) -> PhaseInfo:
        """Run rounds until a report passes ``check``; a task that ends first fails the test."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.round()
            if check(info):
                return info
            assert not info.phase.is_terminal, f"ended first: {self.shown()}"
            assert time.monotonic() < deadline, f"not seen within {timeout} s: {self.shown()}"
            time.sleep(0.05)

    def shown(self) -> list[tuple[str, str]]:
        return [
            (info.phase.value, info.error.message if info.error else info.reason)
            for info in self.reports
        ]


def follower(cluster: LocalCluster, plugin: Plugin, resource: dict[str, Any]) -> Follower:
    manager = PluginManager(plugin, cluster, LifecycleConfig(), sleep=time.sleep)
    return Follower(manager, TaskContext("restarts", NAMESPACE, resource))


def gated(count: Path, gate: Path, *runs: str) -> str:
    """A script whose n-th run does ``runs[n - 1]`` (the last one for every run after), where
    ``GATE`` waits for the test to create ``gate``."""
    steps = [
        f"if [ $n -eq {number} ]; then {run.replace('GATE', _wait_for(gate))}; fi"
        for number, run in enumerate(runs[:-1], start=1)
    ]
    return "; ".join(
        [
            f"n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 ))",
            f"echo $n > {count}",
            *steps,
            runs[-1],
        ]
    )


def _wait_for(gate: Path) -> str:
    return f"while [ ! -e {gate} ]; do sleep 0.05; done"


def _container(script: str) -> dict[str, Any]:
    return {"name": "main", "image": "python:3.12", "command": ["sh", "-c", script]}


def _after_running(reports: list[PhaseInfo]) -> list[Phase]:
    phases = [info.phase for info in reports]
    return phases[phases.index(Phase.RUNNING) :]


def test_a_bare_pod_that_crashes_is_running_throughout_its_restarts_shown(
    local: LocalCluster, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = gated(tmp_path / "runs", gate, "exit 1", "GATE; exit 1", "exec sleep 300")
    workspace = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "notebook",
            "annotations": {"podwright.dev/primary-container": "main"},
        },
        # No restartPolicy: a bare Pod's is Always.
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [_container(script)]},
    }
    task = follower(local, PodPlugin(), workspace)
    restarted_once = "[main] restarted 1 time, last exit code 1 (Error)"
    task.until(lambda info: info.reason == restarted_once)
    gate.touch()
    backing_off = task.until(lambda info: "CrashLoopBackOff" in info.reason)
    task.until(lambda info: info.reason == "[main] restarted 2 times, last exit code 1 (Error)")

    pod = local.get(task.manager.object_ref(task.task))
    assert pod["spec"]["restartPolicy"] == "Always"
    assert backing_off.reason == (
        f"{restarted_once}, CrashLoopBackOff: back-off 2s restarting failed container=main "
        f"pod={pod['metadata']['name']}_{NAMESPACE}({pod['metadata']['uid']})"
    )
    reasons = [info.reason for info in task.reports]
    assert reasons.index(restarted_once) < reasons.index(backing_off.reason)
    assert set(_after_running(task.reports)) == {Phase.RUNNING}, task.shown()


def test_an_on_failure_job_whose_container_restarts_is_running_retrying_then_succeeds(
    local: LocalCluster, tmp_path: Path
) -> None:
    # The first restart is immediate: only the second, after the kubelet's back-off, leaves the
    # Job's pod active and not ready long enough for its status to show it.
    gate = tmp_path / "gate"
    script = gated(tmp_path / "runs", gate, "GATE; exit 1", "exit 1", "exit 0")
    training = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {
            "backoffLimit": 6,
            "template": {
                "metadata": {"annotations": {"podwright.dev/primary-container": "main"}},
                "spec": {"restartPolicy": "OnFailure", "containers": [_container(script)]},
            },
        },
    }
    task = follower(local, JobPlugin(), training)
    task.until(lambda info: info.phase is Phase.RUNNING)
    gate.touch()
    retrying = task.until(lambda info: info.reason.startswith("retrying:"))
    done = task.until(lambda info: info.phase.is_terminal)

    assert done.phase is Phase.SUCCESS, task.shown()
    assert retrying.phase is Phase.RUNNING
    assert retrying.reason == (
        "retrying: 1 active pod(s), 0 ready: a failed container restarts in place after the "
        "kubelet's back-off (restartPolicy OnFailure; restarts count toward the backoff limit "
        "of 6)"
    )
    assert set(_after_running(task.reports)) == {Phase.RUNNING, Phase.SUCCESS}, task.shown()
    (pod_name,) = local.pods_of_job(NAMESPACE, task.manager.object_ref(task.task).name)
    pod = local.get(ObjectRef("v1", "Pod", NAMESPACE, pod_name))
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 2


def test_a_job_deleted_in_the_background_has_not_stopped_while_its_pod_runs(
    local: LocalCluster,
) -> None:
    # A person's `kubectl delete job` while podwright's finalizer holds the Job: the garbage
    # collector leaves its pod running as long as the Job exists, with no foregroundDeletion
    # finalizer to say so; the Job's status still counts the pod active.
    training = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "held", "finalizers": ["podwright.dev/finalizer"]},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [_container("exec sleep 300")],
                }
            }
        },
    }
    task = follower(local, JobPlugin(), training)
    task.until(lambda info: info.phase is Phase.RUNNING)
    ref = task.manager.object_ref(task.task)
    local.delete(ref)
    held = local.get(ref)
    assert "deletionTimestamp" in held["metadata"]
    assert held["metadata"]["finalizers"] == ["podwright.dev/finalizer"]
    assert held["status"]["active"] == 1
    assert not JobPlugin().stopped(held)
    # Once the finalizer goes, the Job goes, and its pod after it: then it has stopped.
    (pod_name,) = local.pods_of_job(NAMESPACE, ref.name)
    version = held["metadata"]["resourceVersion"]
    local.patch(
        ref, {"metadata": {"finalizers": None, "resourceVersion": version}}, PatchType.MERGE
    )
    eventually(lambda: local.cached(ObjectRef("v1", "Pod", NAMESPACE, pod_name)) is None)
    assert local.cached(ref) is None


def test_a_primary_container_that_ends_under_never_ends_the_task_read_from_the_watch_cache(
    local: LocalCluster,
) -> None:
    # The watch cache keeps a trimmed pod (PodPlugin.trim): it must keep what tells a restart
    # from an end, or a pod that runs once reads as one restarting Always.
    workspace = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "notebook",
            "annotations": {"podwright.dev/primary-container": "main"},
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                _container("exit 0"),
                {**_container("exec sleep 300"), "name": "metrics"},
            ],
        },
    }
    task = follower(local, PodPlugin(), workspace)
    done = task.until(lambda info: info.phase.is_terminal)
    assert done.phase is Phase.SUCCESS, task.shown()
    observed = local.get(task.manager.object_ref(task.task))
    assert observed["status"]["phase"] == "Running"  # its metrics container runs on
    cached = PodPlugin().trim(observed)
    state = decode_state(task.state)
    read = PodPlugin().phase(cached, state, datetime.now(UTC), LifecycleConfig())
    assert (read.phase, read.reason) == (done.phase, done.reason)
