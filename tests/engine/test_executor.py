"""The executor over the SQLite task store and the local backend: real processes, real rounds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.local.cluster import LocalCluster
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.core.lifecycle.phases import Phase
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex
from podwright.engine.executor import Executor, ExecutorConfig
from podwright.engine.kubernetes_port import ObjectRef
from podwright.engine.task_store import NewTask, TaskRecord


def now() -> datetime:
    return datetime.now(UTC)


_OPEN: list[Executor] = []


@pytest.fixture(autouse=True)
def _close_executors() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteTaskStore]:
    opened = SQLiteTaskStore(tmp_path / "tasks.db")
    yield opened
    opened.close()


def executor(
    store: SQLiteTaskStore,
    cluster: LocalCluster,
    events: EventIndex,
    *,
    lifecycle: LifecycleConfig | None = None,
    observer: Any = None,
    **config: Any,
) -> Executor:
    settings = ExecutorConfig(backend="local", round_interval=timedelta(milliseconds=50), **config)
    engine = Executor(
        store,
        cluster,
        settings,
        lifecycle or LifecycleConfig(inject_finalizer=True, delete_resource_on_finalize=True),
        clock=now,
        sleep=time.sleep,
        events=events,
        observer=observer,
    )
    _OPEN.append(engine)
    return engine


def job(script: str, backoff_limit: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "ignored", "namespace": "research"},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"annotations": {"podwright.dev/primary-container": "main"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "trainer:1", "command": ["sh", "-c", script]}
                    ],
                },
            },
        },
    }


def submit(
    store: SQLiteTaskStore, task_id: str, script: str, backend: str = "local", **job_options: Any
) -> None:
    store.submit(
        NewTask(
            task_id,
            "training",
            task_id,
            "research",
            backend,
            {"command": script},
            {"command": script},
            (job(script, **job_options),),
            now(),
        )
    )


def run_until(engine: Executor, done: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "not done in time"
        engine.run_round()
        time.sleep(0.02)


def finalized(store: SQLiteTaskStore, *task_ids: str) -> bool:
    return all(store.get(task_id).finalized for task_id in task_ids)


def phases_of(store: SQLiteTaskStore, task_id: str) -> list[Phase]:
    return [entry.phase for entry in store.history(task_id)]


def test_tasks_run_to_their_terminal_phase_and_are_finalized(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex, tmp_path: Path
) -> None:
    go = tmp_path / "go"  # the good task trains until it was seen Running
    submit(store, "good", f"echo training; while [ ! -e {go} ]; do sleep 0.05; done")
    submit(store, "bad", "exit 2")
    engine = executor(store, cluster, events)
    run_until(engine, lambda: store.get("good").phase is Phase.RUNNING)
    go.touch()
    run_until(engine, lambda: finalized(store, "good", "bad"))
    good, bad = store.get("good"), store.get("bad")
    assert good.phase is Phase.SUCCESS
    assert bad.phase is Phase.RETRYABLE_FAILURE
    assert phases_of(store, "good")[0] is Phase.QUEUED
    assert Phase.RUNNING in phases_of(store, "good")
    attached = [event.reason for event in store.events("good")]
    assert attached[0].startswith("SuccessfulCreate: Created pod: good-"), attached
    assert attached[-1] == "Completed: Job completed", attached
    assert store.list_tasks(active_only=True) == []
    # Finalized with delete_resource_on_finalize: the Jobs are gone.
    assert cluster.cached(ObjectRef("batch/v1", "Job", "research", "good")) is None


def test_an_abort_request_stops_the_resource_and_the_task_ends_aborted(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    submit(store, "long", "sleep 300")
    engine = executor(store, cluster, events)
    run_until(engine, lambda: store.get("long").phase is Phase.RUNNING)
    store.request_abort("long", now())
    run_until(engine, lambda: finalized(store, "long"))
    assert store.get("long").phase is Phase.ABORTED
    assert phases_of(store, "long")[-1] is Phase.ABORTED
    assert store.history("long")[-1].reason == "aborted on request"


def test_a_restarted_executor_carries_on_without_creating_anything_twice(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    submit(store, "resumed", "sleep 1; echo done")
    first = executor(store, cluster, events)
    run_until(first, lambda: store.get("resumed").phase in (Phase.INITIALIZING, Phase.RUNNING))
    second = executor(store, cluster, events)  # the first is gone: no state but the store
    run_until(second, lambda: finalized(store, "resumed"))
    assert store.get("resumed").phase is Phase.SUCCESS
    created = [
        event for event in store.events("resumed") if event.reason.startswith("SuccessfulCreate")
    ]
    assert len(created) == 1


def test_only_the_executors_backend_is_served(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    submit(store, "elsewhere", "true", backend="kubernetes")
    report = executor(store, cluster, events).run_round()
    assert report.due == 0
    assert store.get("elsewhere").revision == 1


def test_a_task_that_fails_to_reconcile_backs_off(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    store.submit(
        NewTask(
            "odd",
            "training",
            "odd",
            "research",
            "local",
            {},
            {},
            ({"apiVersion": "v1", "kind": "ConfigMap"},),
            now(),
        )
    )
    engine = executor(store, cluster, events, error_backoff_base=timedelta(seconds=30))
    assert engine.run_round().errors == 1
    assert engine.run_round().due == 0  # not due again for 30 s
    assert store.get("odd").revision == 1


def test_run_stops_when_asked(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    submit(store, "quick", "true")
    engine = executor(store, cluster, events)
    stop = threading.Event()
    runner = threading.Thread(target=engine.run, args=(stop,))
    runner.start()
    deadline = time.monotonic() + 30
    while not finalized(store, "quick") and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    runner.join(10)
    assert not runner.is_alive()
    assert store.get("quick").phase is Phase.SUCCESS


def test_rounds_report_what_they_did(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    submit(store, "counted", "true")
    engine = executor(store, cluster, events)
    first = engine.run_round()
    assert (first.due, first.advanced, first.errors) == (1, 1, 0)
    record: TaskRecord = store.get("counted")
    assert record.phase is Phase.QUEUED


def pod(script: str, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ignored", "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "x:1", "command": ["sh", "-c", script]}],
        },
    }


def submit_manifests(store: SQLiteTaskStore, task_id: str, *manifests: dict[str, Any]) -> None:
    store.submit(
        NewTask(task_id, "workspace", task_id, "research", "local", {}, {}, manifests, now())
    )


def test_a_claim_is_created_before_the_pod_and_outlives_it_a_service_goes_with_it(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "work"},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "nb"},
        "spec": {"selector": {"podwright.dev/workload": "nb"}},
    }
    submit_manifests(store, "nb", claim, pod("sleep 0.5"), service)
    engine = executor(store, cluster, events)
    run_until(engine, lambda: store.get("nb").phase is not Phase.UNDEFINED)
    pod_created = cluster.get(ObjectRef("v1", "Pod", "research", "nb"))
    work = cluster.get(ObjectRef("v1", "PersistentVolumeClaim", "research", "work"))
    assert int(work["metadata"]["resourceVersion"]) < int(
        pod_created["metadata"]["resourceVersion"]
    )
    assert "ownerReferences" not in work["metadata"]
    assert work["metadata"]["labels"] == {"podwright.dev/task-id": "nb"}
    exposed = cluster.get(ObjectRef("v1", "Service", "research", "nb"))  # made with the pod
    assert exposed["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "nb", "uid": pod_created["metadata"]["uid"]}
    ]
    assert exposed["spec"]["selector"] == {
        "podwright.dev/workload": "nb",
        "podwright.dev/task-id": "nb",
    }
    run_until(engine, lambda: finalized(store, "nb"))
    assert store.get("nb").phase is Phase.SUCCESS
    assert cluster.cached(ObjectRef("v1", "Service", "research", "nb")) is None
    assert cluster.cached(ObjectRef("v1", "PersistentVolumeClaim", "research", "work"))


def test_a_companion_created_by_an_earlier_executor_is_not_an_error(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {}}
    submit_manifests(store, "web", pod(f"while [ ! -e {go} ]; do sleep 0.05; done"), service)
    run_until(executor(store, cluster, events), lambda: store.get("web").phase is Phase.RUNNING)
    restarted = executor(store, cluster, events)
    assert restarted.run_round().errors == 0
    go.touch()
    run_until(restarted, lambda: finalized(store, "web"))
    assert store.get("web").phase is Phase.SUCCESS


def test_ttl_seconds_after_finished_delays_finalization_then_deletes_the_resource(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    submit_manifests(
        store, "kept", pod("true", **{"podwright.dev/ttl-seconds-after-finished": "1"})
    )
    engine = executor(store, cluster, events, lifecycle=LifecycleConfig(inject_finalizer=True))
    run_until(engine, lambda: store.get("kept").phase is Phase.SUCCESS)
    ended = time.monotonic()
    engine.run_round()
    assert not store.get("kept").finalized  # kept for its TTL
    assert cluster.cached(ObjectRef("v1", "Pod", "research", "kept")) is not None
    run_until(engine, lambda: finalized(store, "kept"))
    assert time.monotonic() - ended >= 0.9
    assert cluster.cached(ObjectRef("v1", "Pod", "research", "kept")) is None


def test_without_a_ttl_the_resource_stays_after_finalization_unless_configured(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    submit_manifests(store, "stays", pod("true"))
    engine = executor(store, cluster, events, lifecycle=LifecycleConfig(inject_finalizer=True))
    run_until(engine, lambda: finalized(store, "stays"))
    left = cluster.get(ObjectRef("v1", "Pod", "research", "stays"))
    assert "podwright.dev/finalizer" not in (left["metadata"].get("finalizers") or [])


def test_the_observer_is_told_every_round_with_tasks_by_phase(
    store: SQLiteTaskStore, cluster: LocalCluster, events: EventIndex
) -> None:
    reports: list[Any] = []

    class Observer:
        def round_finished(self, report: Any) -> None:
            reports.append(report)

    submit(store, "watched", "true")
    engine = executor(store, cluster, events, observer=Observer())
    run_until(engine, lambda: finalized(store, "watched"))
    assert reports[0].active_by_phase == {"Undefined": 1}
    assert sum(r.finalized_by_phase.get("Success", 0) for r in reports) == 1
    engine.run_round()
    assert reports[-1].active_by_phase == {}


def test_a_round_that_cannot_read_the_store_says_so(
    store: SQLiteTaskStore,
    cluster: LocalCluster,
    events: EventIndex,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from podwright.engine.task_store import StoreUnavailableError

    def unavailable(**_options: Any) -> list[TaskRecord]:
        raise StoreUnavailableError("database is locked")

    engine = executor(store, cluster, events)
    assert engine.run_round().store_read
    monkeypatch.setattr(store, "list_tasks", unavailable)
    report = engine.run_round()
    assert (report.store_read, report.due, report.errors) == (False, 0, 1)
