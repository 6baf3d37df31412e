"""The cluster port tells whoever follows the tasks (the operator's work queue) of every change its
watches see, over HTTP against the emulator: a task's resource created, changed and deleted, and
an event about it; an event about an object the port does not hold (not podwright's) is not told.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from podwright.adapters.kubernetes import KubernetesClient
from podwright.adapters.kubernetes.cluster_port import ClusterPort
from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.engine.config import MANAGED_BY, MANAGED_BY_LABEL
from podwright.engine.event_index import EventIndex
from podwright.engine.kubernetes_port import ObjectRef, PatchType
from podwright.engine.plugins import default_plugins
from tests.k8s_emulator import Emulator
from tests.kube.support import emulator_with_namespace, eventually

NAMESPACE = "test"


class Told:
    """The names of the resources the port told of, in order."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, resource: JsonObject) -> None:
        with self._lock:
            self.names.append(text(section(resource, "metadata"), "name"))

    def count(self, name: str) -> int:
        with self._lock:
            return self.names.count(name)


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with emulator_with_namespace(NAMESPACE) as running:
        yield running


@pytest.fixture
def watched(emulator: Emulator) -> Iterator[tuple[ClusterPort, Told, KubernetesClient]]:
    told = Told()
    events = EventIndex(ttl=timedelta(hours=1), max_per_object=50)
    port = ClusterPort(
        KubernetesClient.for_host(emulator.url),
        default_plugins(),
        events,
        namespace=NAMESPACE,
        changed=told,
    )
    client = KubernetesClient.for_host(emulator.url)
    try:
        port.watch(("v1", "Pod"))
        eventually(port.synced)
        yield port, told, client
    finally:
        client.close()
        port.close()


def pod(name: str, *, podwrights: bool = True) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY} if podwrights else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox:1"}]},
    }


def event_about(name: str, reason: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{reason.lower()}", "namespace": NAMESPACE},
        "eventTime": "2026-11-29T12:00:00.000000Z",
        "reportingController": "test",
        "reportingInstance": "test",
        "action": "Test",
        "reason": reason,
        "type": "Normal",
        "note": reason,
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": NAMESPACE},
    }


def test_a_resource_and_its_events_are_told_as_they_change(
    watched: tuple[ClusterPort, Told, KubernetesClient],
) -> None:
    _port, told, client = watched
    client.create(pod("task-a"))
    eventually(lambda: told.count("task-a") == 1)
    ref = ObjectRef("v1", "Pod", NAMESPACE, "task-a")
    client.patch(ref, {"metadata": {"annotations": {"seen": "yes"}}}, PatchType.MERGE)
    eventually(lambda: told.count("task-a") == 2)
    client.create(event_about("task-a", "Scheduled"))
    eventually(lambda: told.count("task-a") == 3)
    # Deleted (the watch may show the deletion's start as a change of its own first).
    client.delete(ref, propagation="Background")
    eventually(lambda: told.count("task-a") >= 4)


def test_an_event_about_an_object_that_is_not_podwrights_is_not_told(
    watched: tuple[ClusterPort, Told, KubernetesClient],
) -> None:
    _port, told, client = watched
    client.create(pod("someone-elses", podwrights=False))
    client.create(event_about("someone-elses", "Scheduled"))
    # An event told after both shows the event watch went past the first. (An event seen before
    # its object is in the watch cache is not told either: the object's own arrival is, and its
    # handle reads the event from the index.)
    client.create(pod("task-b"))
    eventually(lambda: told.count("task-b") == 1)
    client.create(event_about("task-b", "Scheduled"))
    eventually(lambda: told.count("task-b") == 2)
    assert told.count("someone-elses") == 0


TASK_ID_LABEL = "podwright.dev/task-id"


def job(name: str, task: str) -> dict[str, Any]:
    """A podwright Job whose pod template carries the task's label, as the plugin manager makes
    it (the emulator's Job controller creates its pod)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY, TASK_ID_LABEL: task},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {TASK_ID_LABEL: task}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1"}],
                },
            },
        },
    }


def test_a_tasks_pods_are_cached_by_its_label_and_their_changes_told_as_their_jobs(
    watched: tuple[ClusterPort, Told, KubernetesClient],
) -> None:
    port, told, client = watched
    port.watch(("batch/v1", "Job"))
    eventually(port.synced)
    eventually(lambda: port.cached_pods(NAMESPACE, TASK_ID_LABEL, "t-1") == [])
    client.create(job("train", "t-1"))
    # Someone else's pod with the label but no Job of podwright's controlling it: cached (the
    # label selects it), told of as nothing.
    stray = pod("stray", podwrights=False)
    stray["metadata"]["labels"] = {TASK_ID_LABEL: "t-2"}
    client.create(stray)

    def pod_of_train() -> list[JsonObject]:
        return port.cached_pods(NAMESPACE, TASK_ID_LABEL, "t-1") or []

    eventually(lambda: len(pod_of_train()) == 1)
    (cached,) = pod_of_train()
    name = text(section(cached, "metadata"), "name")
    assert name.startswith("train-")
    job_uid = client.get(ObjectRef("batch/v1", "Job", NAMESPACE, "train"))["metadata"]["uid"]
    assert section(cached, "metadata").get("ownerReferences") == [
        {"uid": job_uid, "controller": True}
    ]
    assert "spec" not in cached  # trimmed to what the phase decisions read
    eventually(lambda: len(port.cached_pods(NAMESPACE, TASK_ID_LABEL, "t-2") or []) == 1)

    # The Job controller has counted the pod active: it writes the Job again only when its pods
    # change what it counts, and neither change below does.
    job_ref = ObjectRef("batch/v1", "Job", NAMESPACE, "train")
    eventually(lambda: section(port.cached(job_ref) or {}, "status").get("active") == 1)
    before = told.count("train")
    pod_ref = ObjectRef("v1", "Pod", NAMESPACE, name)
    # A change the cache's trim drops (an annotation) is nothing to act on: not told; the pod
    # running (not ready yet) is.
    client.patch(pod_ref, {"metadata": {"annotations": {"seen": "yes"}}}, PatchType.MERGE)
    client.patch_status(pod_ref, {"status": {"phase": "Running"}}, PatchType.MERGE)
    eventually(lambda: section(pod_of_train()[0], "status").get("phase") == "Running")
    assert told.count("train") == before + 1
    assert (port.cached(job_ref) or {})["metadata"]["resourceVersion"] == client.get(job_ref)[
        "metadata"
    ]["resourceVersion"]
    assert told.count("stray") == told.count("") == 0
    # Another label than the tasks' pods carry has no cache to answer.
    assert port.cached_pods(NAMESPACE, "example.com/other", "t-1") is None
