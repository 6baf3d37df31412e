"""Following a cluster task's output through the pod log API (against the emulator)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from podwright.adapters.kubernetes import KubernetesClient
from podwright.api.task_logs import ClusterLogTail, LogLine
from podwright.engine.kubernetes_port import ObjectRef
from tests.k8s_emulator import Emulator

NAMESPACE = "test"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


@pytest.fixture
def client(emulator: Emulator) -> Iterator[KubernetesClient]:
    connected = KubernetesClient.for_host(emulator.url)
    connected.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    yield connected
    connected.close()


def make_pod(client: KubernetesClient, name: str, labels: dict[str, str]) -> None:
    client.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "labels": labels,
                "annotations": {"podwright.dev/primary-container": "main"},
            },
            "spec": {
                "containers": [
                    {"name": "sidecar", "image": "x"},
                    {"name": "main", "image": "x"},
                ]
            },
        }
    )


def texts(lines: list[LogLine]) -> list[str]:
    return [line.text for line in lines]


def test_lines_are_read_once_even_within_the_same_second(
    emulator: Emulator, client: KubernetesClient
) -> None:
    make_pod(client, "solo", {})
    clock = Clock()
    tail = ClusterLogTail(client, ObjectRef("v1", "Pod", NAMESPACE, "solo"), monotonic=clock)
    emulator.write_log(NAMESPACE, "solo", "sidecar", "not this one", "2026-11-21T10:00:00.1Z")
    emulator.write_log(NAMESPACE, "solo", "main", "one", "2026-11-21T10:00:00.100000000Z")
    emulator.write_log(NAMESPACE, "solo", "main", "two", "2026-11-21T10:00:00.200000000Z")
    assert tail.read() == [
        LogLine("one", datetime(2026, 11, 21, 10, 0, 0, 100000, tzinfo=UTC)),
        LogLine("two", datetime(2026, 11, 21, 10, 0, 0, 200000, tzinfo=UTC)),
    ]
    emulator.write_log(NAMESPACE, "solo", "main", "three", "2026-11-21T10:00:00.300000000Z")
    assert texts(tail.read()) == []  # polled a moment ago
    assert texts(tail.read(now=True)) == ["three"]
    clock.now += 1.5
    emulator.write_log(NAMESPACE, "solo", "main", "four", "2026-11-21T10:00:02.000000000Z")
    assert texts(tail.read()) == ["four"]


def test_a_jobs_newest_pod_is_followed(emulator: Emulator, client: KubernetesClient) -> None:
    job = ObjectRef("batch/v1", "Job", NAMESPACE, "train")
    clock = Clock()
    tail = ClusterLogTail(client, job, monotonic=clock)
    assert texts(tail.read()) == []  # no pod yet
    make_pod(client, "train-aaaaa", {"batch.kubernetes.io/job-name": "train"})
    emulator.write_log(NAMESPACE, "train-aaaaa", "main", "attempt 1", "2026-11-21T10:00:00.0Z")
    clock.now += 1
    assert texts(tail.read()) == ["attempt 1"]


def test_a_kubeflow_jobs_master_replica_is_followed(
    emulator: Emulator, client: KubernetesClient
) -> None:
    labels = {"training.kubeflow.org/job-name": "dist"}
    make_pod(
        client,
        "dist-worker-0",
        {
            **labels,
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": "0",
        },
    )
    make_pod(
        client,
        "dist-master-0",
        {
            **labels,
            "training.kubeflow.org/replica-type": "master",
            "training.kubeflow.org/replica-index": "0",
        },
    )
    emulator.write_log(NAMESPACE, "dist-worker-0", "main", "worker", "2026-11-21T10:00:00.0Z")
    emulator.write_log(NAMESPACE, "dist-master-0", "main", "master", "2026-11-21T10:00:00.0Z")
    tail = ClusterLogTail(client, ObjectRef("kubeflow.org/v1", "PyTorchJob", NAMESPACE, "dist"))
    assert texts(tail.read()) == ["master"]
