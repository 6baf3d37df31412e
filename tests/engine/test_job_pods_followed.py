"""A Job task is Running once the port's watch cache shows a pod of it ready, though the Job's
status has not counted the pod yet (the Job controller counts late on a busy control plane), and
a change of its pods alone has the task handled again instead of skipped as unchanged. And a new
reason within a phase is written only once it has lasted ``reason_settle``, however long ago the
task's last write was: a Job that met its success criteria and completes at once costs one write,
its Success."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.core.lifecycle import Phase
from podwright.core.lifecycle.companions import task_label_value
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import Executor, ExecutorConfig
from podwright.engine.kubernetes_port import ObjectRef
from podwright.engine.task_store import NewTask
from tests.engine.conftest import NAMESPACE, Clock
from tests.engine.fake_kubernetes import FakeKubernetes

BACKEND = "kubernetes/test"
LIFECYCLE = LifecycleConfig()


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "x:1"}],
                }
            },
        },
    }


class JobTask:
    """An executor over a SQLite store and the in-memory port, a Job task ``j1`` launched and its
    Job counting one pod active (as the Job controller writes it once it created the pod)."""

    def __init__(self, path: Path, stack: contextlib.ExitStack) -> None:
        self.clock = Clock()
        self.kube = FakeKubernetes()
        self.kube.namespace(NAMESPACE)
        self.store = stack.enter_context(contextlib.closing(SQLiteTaskStore(path)))
        self.executor = stack.enter_context(
            Executor(
                self.store,
                self.kube,
                ExecutorConfig(backend=BACKEND, concurrency=1, resync_interval=timedelta(hours=1)),
                LIFECYCLE,
                clock=self.clock,
                sleep=lambda _seconds: None,
            )
        )
        self.store.submit(
            NewTask("j1", "training", "j1", NAMESPACE, BACKEND, {}, {}, (_job(),), self.clock())
        )
        self.executor.run_round()
        self.job = self.executor.resource_ref(self.store.get("j1"))
        self.kube.set_status(self.job, {"active": 1, "ready": 0})
        self.pod = ObjectRef("v1", "Pod", NAMESPACE, f"{self.job.name}-abcde")
        job_uid = self.kube.get(self.job)["metadata"]["uid"]
        self.kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": self.pod.name,
                    "namespace": NAMESPACE,
                    "labels": {LIFECYCLE.task_id_label: task_label_value("j1")},
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": self.job.name,
                            "uid": job_uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": [{"name": "main", "image": "x:1"}]},
            }
        )
        self.kube.set_status(
            self.pod, {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
        )

    def round(self, seconds: float = 1) -> tuple[Phase, str, int]:
        """A round ``seconds`` on: the task's phase and reason after it, and the tasks it
        skipped."""
        self.clock.advance(seconds)
        report = self.executor.run_round()
        record = self.store.get("j1")
        return record.phase, record.reason, report.skipped


@pytest.fixture
def task(tmp_path: Path) -> Iterator[JobTask]:
    with contextlib.ExitStack() as stack:
        yield JobTask(tmp_path / "tasks.db", stack)


def test_a_job_whose_pod_is_ready_runs_before_its_status_counts_the_pod(task: JobTask) -> None:
    assert task.round() == (Phase.INITIALIZING, "1 pod(s) starting", 0)
    assert task.round()[2] == 0  # the reason settles (written once it lasted)
    # Handled until a handle changes nothing, then skipped as unchanged.
    skipped = [task.round() for _round in range(3)]
    assert skipped[-1] == (Phase.INITIALIZING, "1 pod(s) starting", 1)

    # The kubelet reports the pod ready; the Job's status still counts it only as active.
    task.kube.set_status(task.pod, {"conditions": [{"type": "Ready", "status": "True"}]})
    assert task.round() == (Phase.RUNNING, "", 0)
    # The Job's status counts the pod at last: nothing new to write.
    task.kube.set_status(task.job, {"ready": 1})
    revision = task.store.get("j1").revision
    assert task.round() == (Phase.RUNNING, "", 0)
    assert task.store.get("j1").revision == revision


def test_a_port_without_a_cache_of_pods_leaves_the_job_to_its_status(task: JobTask) -> None:
    task.kube.set_status(task.pod, {"conditions": [{"type": "Ready", "status": "True"}]})
    task.kube.cache_enabled = False
    assert task.round()[:2] == (Phase.INITIALIZING, "1 pod(s) starting")
    task.kube.set_status(task.job, {"ready": 1})
    assert task.round()[:2] == (Phase.RUNNING, "")


MET = "job met its success criteria; its pods are terminating"


def _running_long(task: JobTask) -> None:
    """The task Running since long ago: its last write a minute back."""
    task.kube.set_status(task.pod, {"conditions": [{"type": "Ready", "status": "True"}]})
    task.kube.set_status(task.job, {"ready": 1})
    assert task.round()[:2] == (Phase.RUNNING, "")
    task.clock.advance(60)


def _criteria_met(task: JobTask) -> None:
    task.kube.set_status(
        task.job,
        {"ready": 0, "active": 0, "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]},
    )


def test_a_reason_that_passes_within_the_settle_time_is_not_written(task: JobTask) -> None:
    _running_long(task)
    _criteria_met(task)
    revision = task.store.get("j1").revision
    assert task.round(0.1)[:2] == (Phase.RUNNING, "")  # seen first now: not written yet
    assert task.store.get("j1").revision == revision
    conditions = [{"type": t, "status": "True"} for t in ("SuccessCriteriaMet", "Complete")]
    task.kube.set_status(task.job, {"succeeded": 1, "conditions": conditions})
    assert task.round()[:2] == (Phase.SUCCESS, "")
    assert [entry.reason for entry in task.store.history("j1")][-2:] == ["", ""]


def test_a_reason_that_lasts_is_written_once_it_has_lasted_the_settle_time(task: JobTask) -> None:
    _running_long(task)
    _criteria_met(task)
    assert task.round(0.1)[:2] == (Phase.RUNNING, "")
    assert task.round(0.5)[:2] == (Phase.RUNNING, "")
    assert task.round(0.5)[:2] == (Phase.RUNNING, MET)
