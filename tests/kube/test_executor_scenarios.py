"""The executor in this process over HTTP: the emulator, the node simulator (scheduler and
kubelet), the SQLite store, and the cluster port with its watches, as ``podwright executor`` runs them.

* two runs of one workspace: two Services, each selecting only its own task's pod;
* a claim created before the pod, never owned by it, outliving the task; a Service owned by it;
* an abort recorded only once the kubelet has stopped the pod's containers;
* an API server that cannot be reached (a closed port; the emulator stopped mid-run): launches
  fail after a bounded number of attempts, saying why, and every task still ends;
* a namespace that does not exist: a permanent failure naming it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.kubernetes import KubernetesClient
from podwright.adapters.kubernetes.cluster_port import ClusterPort
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.core.lifecycle import Phase
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex
from podwright.engine.executor import Executor, ExecutorConfig, RoundReport
from podwright.engine.kubernetes_port import ObjectRef
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import NewTask, TaskRecord
from tests.k8s_emulator import Emulator
from tests.kube.support import OUTCOMES, emulator_with_namespace, eventually
from tests.node_sim import simulate_nodes

NAMESPACE = "test"
BACKEND = "kubernetes/emulator"
TASK_ID_LABEL = "podwright.dev/task-id"


class Clock:
    """The wall clock, until a test moves it on by hand."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with emulator_with_namespace(NAMESPACE) as running:
        yield running


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteTaskStore]:
    opened = SQLiteTaskStore(tmp_path / "tasks.db")
    yield opened
    opened.close()


class Running:
    """An executor over a cluster port, and what it needs closed afterwards."""

    def __init__(self, url: str, store: SQLiteTaskStore, clock: Clock, **lifecycle: Any) -> None:
        events = EventIndex(ttl=timedelta(hours=1), max_per_object=50)
        self.port = ClusterPort(
            KubernetesClient.for_host(url), default_plugins(), events, namespace=NAMESPACE
        )
        self.executor = Executor(
            store,
            self.port,
            ExecutorConfig(backend=BACKEND, round_interval=timedelta(milliseconds=100)),
            LifecycleConfig(inject_finalizer=True, **lifecycle),
            clock=clock,
            sleep=lambda _seconds: None,
            events=events,
        )
        self.store = store

    def close(self) -> None:
        self.executor.close()
        self.port.close()

    def until(self, done: Any, timeout: float = 30) -> RoundReport:
        """Run rounds until ``done()``; the last round's report."""
        reports: list[RoundReport] = []

        def check() -> bool:
            reports.append(self.executor.run_round())
            return bool(done())

        eventually(check, timeout=timeout)
        return reports[-1]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def running(emulator: Emulator, store: SQLiteTaskStore, clock: Clock) -> Iterator[Running]:
    opened = Running(emulator.url, store, clock, delete_resource_on_finalize=True)
    yield opened
    opened.close()


def workspace(task_id: str, outcome: str = "hang", namespace: str = NAMESPACE) -> NewTask:
    """A workspace as the renderer makes it: a new claim, the pod, and its Service."""
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "nb-work"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "nb",
            "labels": {"podwright.dev/workload": "nb"},
            "annotations": OUTCOMES[outcome],
        },
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "main", "image": "jupyter:1"}],
            "volumes": [{"name": "work", "persistentVolumeClaim": {"claimName": "nb-work"}}],
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nb", "labels": {"podwright.dev/workload": "nb"}},
        "spec": {
            "type": "ClusterIP",
            "selector": {"podwright.dev/workload": "nb"},
            "ports": [{"name": "http", "port": 8888, "targetPort": 8888}],
        },
    }
    return NewTask(
        task_id,
        "workspace",
        "nb",
        namespace,
        BACKEND,
        {},
        {},
        (claim, pod, service),
        datetime.now(UTC),
    )


def _list(url: str, kind: str, selector: str | None = None) -> list[dict[str, Any]]:
    client = KubernetesClient.for_host(url)
    try:
        return client.list_objects("v1", kind, namespace=NAMESPACE, label_selector=selector)[0]
    finally:
        client.close()


def _phase(store: SQLiteTaskStore, task_id: str) -> Phase:
    return store.get(task_id).phase


def test_two_runs_of_one_workspace_each_get_a_service_of_their_own(
    emulator: Emulator, running: Running, store: SQLiteTaskStore
) -> None:
    store.submit(workspace("nb-first"))
    store.submit(workspace("nb-second"))
    with simulate_nodes(emulator.url, namespace=NAMESPACE) as nodes:
        running.until(
            lambda: (
                {_phase(store, t) for t in ("nb-first", "nb-second")} == {Phase.RUNNING}
                and len(_list(emulator.url, "Service")) == 2
            )
        )
        services = {s["metadata"]["name"]: s for s in _list(emulator.url, "Service")}
        assert set(services) == {"nb-first", "nb-second"}
        for name, exposed in services.items():
            selector = ",".join(f"{k}={v}" for k, v in exposed["spec"]["selector"].items())
            assert [p["metadata"]["name"] for p in _list(emulator.url, "Pod", selector)] == [name]
        # The claim is shared by name: one run created it, the other was told it uses it.
        (work,) = _list(emulator.url, "PersistentVolumeClaim")
        creator = work["metadata"]["labels"][TASK_ID_LABEL]
        other = ({"nb-first", "nb-second"} - {creator}).pop()
        notes = [event.reason for event in store.events(other)]
        assert (
            f"PersistentVolumeClaim {NAMESPACE}/nb-work already exists and was not created by "
            "this task: the task uses it as it is"
        ) in notes
        for task_id in ("nb-first", "nb-second"):
            store.request_abort(task_id, datetime.now(UTC))
        running.until(lambda: all(record.finalized for record in store.list_tasks()))
    assert {len(uids) for uids in nodes.pod_uids.values()} == {1}


def _first_created(url: str, kind: str, since: str) -> int:
    client = KubernetesClient.for_host(url)
    try:
        for event in client.watch(
            "v1", kind, resource_version=since, namespace=NAMESPACE, timeout_seconds=2
        ):
            if event["type"] == "ADDED":
                return int(event["object"]["metadata"]["resourceVersion"])
    finally:
        client.close()
    raise AssertionError(f"no {kind} was created")


def test_a_claim_comes_before_its_pod_and_outlives_the_task_its_service_goes_with_the_pod(
    emulator: Emulator, running: Running, store: SQLiteTaskStore
) -> None:
    since = str(emulator.store.resource_version)
    store.submit(workspace("nb-1"))
    with simulate_nodes(emulator.url, namespace=NAMESPACE):
        running.until(lambda: len(_list(emulator.url, "Service")) == 1)
        (exposed,) = _list(emulator.url, "Service")
        (pod,) = _list(emulator.url, "Pod")
        assert exposed["metadata"]["ownerReferences"] == [
            {"apiVersion": "v1", "kind": "Pod", "name": "nb-1", "uid": pod["metadata"]["uid"]}
        ]
        store.request_abort("nb-1", datetime.now(UTC))
        running.until(lambda: store.get("nb-1").finalized)
    assert _phase(store, "nb-1") is Phase.ABORTED
    assert _first_created(emulator.url, "PersistentVolumeClaim", since) < _first_created(
        emulator.url, "Pod", since
    )
    assert _list(emulator.url, "Pod") == []  # deleted on finalize
    (work,) = _list(emulator.url, "PersistentVolumeClaim")
    assert "ownerReferences" not in work["metadata"]
    assert work["metadata"]["labels"][TASK_ID_LABEL] == "nb-1"


def test_an_abort_is_recorded_only_once_the_kubelet_stopped_the_containers(
    emulator: Emulator, running: Running, store: SQLiteTaskStore
) -> None:
    store.submit(workspace("nb-1"))
    ref = ObjectRef("v1", "Pod", NAMESPACE, "nb-1")
    client = KubernetesClient.for_host(emulator.url)
    with simulate_nodes(emulator.url, namespace=NAMESPACE) as nodes:
        running.until(lambda: _phase(store, "nb-1") is Phase.RUNNING)
        nodes.hold_stops()
        store.request_abort("nb-1", datetime.now(UTC))
        running.until(lambda: store.get("nb-1").reason.startswith("aborting:"))
        assert store.get("nb-1").reason == (
            "aborting: waiting for the pod's containers to stop (grace 30 s)"
        )
        held = client.get(ref)
        assert held["metadata"]["deletionTimestamp"]
        assert held["metadata"]["deletionGracePeriodSeconds"] == 30
        for _ in range(5):  # the pod's containers run on: the task is not Aborted
            running.executor.run_round()
        assert _phase(store, "nb-1") is Phase.RUNNING
        nodes.release_stops()
        running.until(lambda: _phase(store, "nb-1") is Phase.ABORTED)
        stopped = client.get(ref)  # podwright's finalizer keeps it until finalized
        assert [c["state"].keys() for c in stopped["status"]["containerStatuses"]] == [
            {"terminated"}
        ]
        running.until(lambda: store.get("nb-1").finalized)
    assert store.history("nb-1")[-1].reason == "aborted on request"
    assert _list(emulator.url, "Pod") == []
    client.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_api_server_fails_the_launch_after_bounded_retries_and_ends_the_task(
    store: SQLiteTaskStore, clock: Clock
) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    unreachable = Running(url, store, clock)
    store.submit(workspace("nb-1"))
    reports = []
    try:
        while not store.get("nb-1").finalized:
            assert len(reports) <= LifecycleConfig().launch_attempts, reports
            reports.append(unreachable.executor.run_round())
            clock.advance(20)  # past any launch backoff
    finally:
        unreachable.close()
    failed = store.get("nb-1")
    assert (failed.phase, failed.reason) == (Phase.SYSTEM_RETRYABLE_FAILURE, "ApiServerUnreachable")
    assert store.history("nb-1")[-1].error_message == (
        f"cannot reach the Kubernetes API server {url}: connection refused; "
        f"gave up after {LifecycleConfig().launch_attempts} attempts"
    )
    assert reports[0].connection_error == (
        f"cannot reach the Kubernetes API server {url}: connection refused"
    )


def test_the_api_server_going_away_mid_run_ends_new_tasks_and_is_reported(
    store: SQLiteTaskStore, clock: Clock
) -> None:
    emulator = Emulator().start()
    setup = KubernetesClient.for_host(emulator.url)
    setup.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    setup.close()
    executing = Running(emulator.url, store, clock)
    try:
        store.submit(workspace("nb-running"))
        with simulate_nodes(emulator.url, namespace=NAMESPACE):
            executing.until(lambda: _phase(store, "nb-running") is Phase.RUNNING)
        emulator.stop()
        store.submit(workspace("nb-late"))
        reports = []
        while not store.get("nb-late").finalized:
            assert len(reports) <= LifecycleConfig().launch_attempts, reports
            clock.advance(20)
            reports.append(executing.executor.run_round())
        assert store.get("nb-late").reason == "ApiServerUnreachable"
        assert reports[0].connection_error.startswith(
            f"cannot reach the Kubernetes API server {emulator.url}: connection refused"
        )
        # The running task is as the last watch saw it, and the watches say why they fail;
        # aborting it needs the server.
        assert _phase(store, "nb-running") is Phase.RUNNING
        unreachable = f"cannot reach the Kubernetes API server {emulator.url}"
        eventually(lambda: executing.port.watch_error().startswith(unreachable))
        store.request_abort("nb-running", clock())
        clock.advance(20)
        report = executing.executor.run_round()
        assert report.errors == 1
        assert report.connection_error.startswith("cannot reach the Kubernetes API server")
        assert _phase(store, "nb-running") is Phase.RUNNING
    finally:
        executing.close()
        emulator.stop()


def test_a_namespace_that_does_not_exist_fails_the_task_naming_it(
    emulator: Emulator, running: Running, store: SQLiteTaskStore
) -> None:
    store.submit(workspace("nb-1", namespace="absent"))
    running.until(lambda: store.get("nb-1").finalized)
    record: TaskRecord = store.get("nb-1")
    assert (record.phase, record.reason) == (Phase.PERMANENT_FAILURE, "NamespaceNotFound")
    assert store.history("nb-1")[-1].error_message == (
        "namespace 'absent' does not exist: create it, or run the task in another namespace "
        '(namespaces "absent" not found)'
    )
