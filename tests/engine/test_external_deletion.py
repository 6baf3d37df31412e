"""A task's resource deleted by someone else, through the plugin manager and the executor: the
platform's failure (UnexpectedObjectDeletion), whether the executor looks before or after the
kubelet stopped the containers, unless the task had succeeded or failed before the deletion (an
abort podwright asked for: ``test_executor_rules``)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from podwright.core.lifecycle import ErrorKind, Phase
from podwright.core.lifecycle.objects import parse_time, rfc3339
from podwright.engine.config import LifecycleConfig
from podwright.engine.kubernetes_port import ObjectRef
from podwright.engine.plugins import JobPlugin
from tests.engine.conftest import NAMESPACE
from tests.engine.fake_kubernetes import FakeKubernetes, resource_of
from tests.engine.test_plugin_manager import Harness, podresource_of, task

FINALIZED = LifecycleConfig(inject_finalizer=True)
POD = ObjectRef("v1", "Pod", NAMESPACE, "task-1")


def _bound_pod() -> dict[str, Any]:
    resource = podresource_of(**{"podwright.dev/primary-container": "main"})
    resource["spec"]["nodeName"] = "node-1"  # bound: its deletion waits for the kubelet
    resource["spec"]["containers"].append({"name": "side", "image": "busybox"})
    return resource


def _terminated(name: str, exit_code: int, finished: datetime) -> dict[str, Any]:
    terminated = {"exitCode": exit_code, "reason": "Error", "finishedAt": rfc3339(finished)}
    return {"name": name, "state": {"terminated": terminated}}


def _running(name: str) -> dict[str, Any]:
    return {"name": name, "state": {"running": {}}}


def _delete(kube: FakeKubernetes, ref: ObjectRef, grace: int | None = None) -> datetime:
    """Delete as a person does; when the deletion was requested, as the object records it."""
    deleted = kube.store.delete(
        resource_of(ref.api_version, ref.kind), ref.namespace, ref.name, grace_period_seconds=grace
    )
    metadata = deleted["metadata"]
    deadline = parse_time(metadata["deletionTimestamp"])
    assert deadline is not None
    return deadline - timedelta(seconds=metadata["deletionGracePeriodSeconds"])


def _pod_launched(kube: FakeKubernetes) -> tuple[Harness, Any]:
    harness = Harness(kube, FINALIZED)
    the_task = task(resource=_bound_pod())
    harness.round(the_task)
    kube.set_status(POD, {"phase": "Running", "containerStatuses": [_running("main")]})
    assert harness.round(the_task).info.phase is Phase.RUNNING
    return harness, the_task


@pytest.mark.parametrize("kubelet_confirmed", [False, True], ids=["in-grace", "after-kubelet"])
def test_a_pod_the_deletion_stopped_is_not_the_users_failure(
    kube: FakeKubernetes, kubelet_confirmed: bool
) -> None:
    """The race the cluster tier found: the kubelet stops the containers (SIGTERM, exit code
    143) and reports the pod Failed; the executor may look within the grace period, or after
    the kubelet's final delete (podwright's finalizer keeps the pod)."""
    harness, the_task = _pod_launched(kube)
    requested = _delete(kube, POD)
    stopped = [_terminated("main", 143, requested), _terminated("side", 143, requested)]
    kube.set_status(POD, {"phase": "Failed", "containerStatuses": stopped})
    if kubelet_confirmed:
        _delete(kube, POD, grace=0)
    info = harness.round(the_task).info
    assert (info.phase, info.reason) == (
        Phase.SYSTEM_RETRYABLE_FAILURE,
        "UnexpectedObjectDeletion",
    )
    assert info.error is not None
    assert info.error.kind is ErrorKind.SYSTEM
    assert info.error.message.startswith(f"Pod {NAMESPACE}/task-1 was deleted at ")
    assert "not by podwright, and stopped: " in info.error.message
    assert "[main] terminated with exit code 143" in info.error.message


def test_a_failure_before_the_deletion_keeps_its_reason(kube: FakeKubernetes) -> None:
    """The primary container failed on its own (the executor had not looked yet); someone
    deleted the pod a minute later, and the deletion stopped its sidecar."""
    harness, the_task = _pod_launched(kube)
    kube.set_status(POD, {"containerStatuses": [_running("main"), _running("side")]})
    requested = _delete(kube, POD)
    failed = _terminated("main", 1, requested - timedelta(minutes=1))
    kube.set_status(
        POD, {"phase": "Failed", "containerStatuses": [failed, _terminated("side", 143, requested)]}
    )
    info = harness.round(the_task).info
    assert (info.phase, info.reason) == (Phase.RETRYABLE_FAILURE, "Error")


def test_a_success_seen_while_deleting_stays_a_success(kube: FakeKubernetes) -> None:
    harness, the_task = _pod_launched(kube)
    requested = _delete(kube, POD)
    done = [_terminated("main", 0, requested), _terminated("side", 0, requested)]
    kube.set_status(POD, {"phase": "Succeeded", "containerStatuses": done})
    assert harness.round(the_task).info.phase is Phase.SUCCESS


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m"}]}}},
    }


@pytest.mark.parametrize(
    ("failed_after", "expected"),
    [
        pytest.param(timedelta(seconds=5), "UnexpectedObjectDeletion", id="failed-by-deletion"),
        pytest.param(timedelta(minutes=-1), "BackoffLimitExceeded", id="failed-before"),
    ],
)
def test_a_job_failed_while_someone_deletes_it(
    kube: FakeKubernetes, failed_after: timedelta, expected: str
) -> None:
    """A Job deleted in the foreground has its pods deleted, and the Job controller may count
    them failed and fail the Job before the garbage collector is done; a Job that had failed
    before keeps its own reason."""
    harness = Harness(kube, FINALIZED, plugin=JobPlugin())
    the_task = task(resource=_job())
    harness.round(the_task)
    ref = harness.manager.object_ref(the_task)
    kube.set_status(ref, {"active": 1, "ready": 1})
    assert harness.round(the_task).info.phase is Phase.RUNNING
    requested = _delete(kube, ref)
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "BackoffLimitExceeded",
        "lastTransitionTime": rfc3339(requested + failed_after),
    }
    kube.set_status(ref, {"active": 0, "ready": 0, "failed": 1, "conditions": [failed]})
    info = harness.round(the_task).info
    assert info.phase.is_failure
    assert info.reason == expected
