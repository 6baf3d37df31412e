"""The executor's rules over the in-memory port with a fake clock: an abort recorded only once the
resource stopped (or its grace period and margin are over), a task whose resource never existed
aborted and finalized without a request, a round that says the API server is unreachable, and how
long a task's pods may take to stop."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.core.lifecycle import Phase, PhaseInfo, decode_state
from podwright.core.lifecycle.objects import rfc3339
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex, EventKey, ObjectEvent
from podwright.engine.executor import Executor, ExecutorConfig, stop_grace
from podwright.engine.kubernetes_port import ApiConnectionError, ObjectRef
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import NewTask
from tests.engine.conftest import NAMESPACE, Clock
from tests.engine.fake_kubernetes import FakeKubernetes

SERVER = "https://10.0.0.1:6443"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteTaskStore]:
    opened = SQLiteTaskStore(tmp_path / "tasks.db")
    yield opened
    opened.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def executor(store: SQLiteTaskStore, kube: FakeKubernetes, clock: Clock) -> Iterator[Executor]:
    with Executor(
        store,
        kube,
        ExecutorConfig(backend="kubernetes/test", concurrency=2),
        LifecycleConfig(inject_finalizer=True, abort_margin=timedelta(seconds=10)),
        clock=clock,
        sleep=lambda _seconds: None,
    ) as running:
        yield running


def bound_pod(grace: int = 20) -> dict[str, Any]:
    """A pod bound to a node, with a termination grace period of ``grace`` seconds."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"annotations": {"podwright.dev/primary-container": "main"}},
        "spec": {
            "nodeName": "node-1",  # bound: its deletion waits for the kubelet
            "terminationGracePeriodSeconds": grace,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "x:1"}],
        },
    }


def _submit(store: SQLiteTaskStore, clock: Clock, task_id: str = "t1") -> None:
    store.submit(
        NewTask(
            task_id,
            "workspace",
            task_id,
            NAMESPACE,
            "kubernetes/test",
            {},
            {},
            (bound_pod(),),
            clock(),
        )
    )


def _running(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> ObjectRef:
    executor.run_round()
    ref = ObjectRef("v1", "Pod", NAMESPACE, "t1")
    kube.set_status(
        ref, {"phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {}}}]}
    )
    clock.advance(1)
    executor.run_round()
    assert store.get("t1").phase is Phase.RUNNING
    return ref


def test_an_abort_is_recorded_once_the_pods_containers_have_stopped(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> None:
    _submit(store, clock)
    ref = _running(executor, kube, store, clock)
    store.request_abort("t1", clock())
    clock.advance(1)
    executor.run_round()
    aborting = store.get("t1")
    assert aborting.phase is Phase.RUNNING
    assert aborting.reason == "aborting: waiting for the pod's containers to stop (grace 20 s)"
    assert kube.get(ref)["metadata"]["deletionGracePeriodSeconds"] == 20
    clock.advance(5)
    executor.run_round()
    assert store.get("t1").phase is Phase.RUNNING  # still stopping: nothing new to write
    kube.set_status(ref, {"containerStatuses": [{"name": "main", "state": {"terminated": {}}}]})
    clock.advance(1)
    executor.run_round()
    aborted = store.get("t1")
    assert (aborted.phase, aborted.reason) == (Phase.ABORTED, "aborted on request")
    assert [entry.phase for entry in store.history("t1")][-2:] == [Phase.RUNNING, Phase.ABORTED]
    clock.advance(1)
    executor.run_round()
    assert store.get("t1").finalized


def test_an_aborted_pod_that_fails_as_its_containers_stop_is_aborted(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> None:
    """podwright's own deletion goes the abort path, never the plugin's phase: the pod turning
    Failed as SIGTERM stops its container (exit code 143) confirms the abort; it is no failure
    and no UnexpectedObjectDeletion."""
    _submit(store, clock)
    ref = _running(executor, kube, store, clock)
    store.request_abort("t1", clock())
    clock.advance(1)
    executor.run_round()
    stopped = {"exitCode": 143, "reason": "Error", "finishedAt": rfc3339(clock())}
    kube.set_status(
        ref,
        {
            "phase": "Failed",
            "containerStatuses": [{"name": "main", "state": {"terminated": stopped}}],
        },
    )
    clock.advance(1)
    executor.run_round()
    aborted = store.get("t1")
    assert (aborted.phase, aborted.reason) == (Phase.ABORTED, "aborted on request")


def test_an_abort_the_resource_never_confirms_is_recorded_after_its_grace_and_margin(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> None:
    _submit(store, clock)
    _running(executor, kube, store, clock)
    store.request_abort("t1", clock())
    clock.advance(1)
    executor.run_round()  # the pod is deleted now
    clock.advance(29)
    executor.run_round()
    assert store.get("t1").phase is Phase.RUNNING
    clock.advance(1)
    executor.run_round()
    aborted = store.get("t1")
    assert aborted.phase is Phase.ABORTED
    assert aborted.reason == (
        f"aborted on request; Pod {NAMESPACE}/t1 did not confirm that the pod's containers "
        "stopped within 30 s (the grace period of 20 s and a margin of 10 s)"
    )


def _job(grace: int) -> dict[str, Any]:
    pod = bound_pod(grace)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {},
        "spec": {"template": {"metadata": pod["metadata"], "spec": pod["spec"]}},
    }


def _without_grace(pod: dict[str, Any]) -> dict[str, Any]:
    spec = {
        key: value for key, value in pod["spec"].items() if key != "terminationGracePeriodSeconds"
    }
    return {**pod, "spec": spec}


@pytest.mark.parametrize(
    ("manifest", "seconds"),
    [(bound_pod(grace=20), 20), (_job(grace=45), 45), (_without_grace(bound_pod()), 30)],
)
def test_a_tasks_stop_grace_is_its_pods_termination_grace_period(
    store: SQLiteTaskStore, clock: Clock, manifest: dict[str, Any], seconds: int
) -> None:
    """What a stopping local executor sizes its wait for the tasks it aborted from (with
    abortMargin): the grace period of the task's pods, the API server's 30 s when unset."""
    store.submit(NewTask("t1", "workspace", "t1", NAMESPACE, "local", {}, {}, (manifest,), clock()))
    assert stop_grace(store.get("t1"), default_plugins()) == timedelta(seconds=seconds)


def _refused() -> ApiConnectionError:
    return ApiConnectionError(
        f"cannot reach the Kubernetes API server {SERVER}: connection refused",
        server=SERVER,
        cause="connection refused",
        may_have_reached=False,
    )


def test_a_task_that_never_reached_the_server_ends_and_is_finalized_without_a_request(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> None:
    attempts = LifecycleConfig().launch_attempts
    kube.fail("create", *[_refused() for _ in range(attempts)])
    _submit(store, clock)
    reports = []
    while not store.get("t1").phase.is_terminal:
        reports.append(executor.run_round())
        clock.advance(20)
    assert len(reports) == attempts
    assert {report.connection_error for report in reports} == {_refused().message}
    failed = store.get("t1")
    assert (failed.phase, failed.reason) == (Phase.SYSTEM_RETRYABLE_FAILURE, "ApiServerUnreachable")
    requests = sum(kube.calls.values())
    executor.run_round()
    assert store.get("t1").finalized
    assert sum(kube.calls.values()) == requests


def test_aborting_a_task_whose_resource_never_existed_needs_no_request(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> None:
    kube.fail("create", _refused())
    _submit(store, clock)
    executor.run_round()
    store.request_abort("t1", clock())
    requests = sum(kube.calls.values())
    clock.advance(20)
    executor.run_round()
    executor.run_round()
    aborted = store.get("t1")
    assert (aborted.phase, aborted.finalized) == (Phase.ABORTED, True)
    assert aborted.reason == "aborted on request; its resource was never created"
    assert sum(kube.calls.values()) == requests


def test_a_round_says_when_an_abort_cannot_reach_the_server(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> None:
    _submit(store, clock)
    _running(executor, kube, store, clock)
    store.request_abort("t1", clock())
    kube.fail("delete", _refused())
    clock.advance(1)
    report = executor.run_round()
    assert (report.errors, report.connection_error) == (1, _refused().message)
    assert not store.get("t1").phase.is_terminal


def test_an_abort_that_cannot_read_the_resource_still_counts_its_bound_from_the_delete(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> None:
    _submit(store, clock)
    _running(executor, kube, store, clock)
    store.request_abort("t1", clock())
    kube.cache_enabled = False
    kube.fail("get", _refused())
    clock.advance(1)
    deleted_at = clock()
    report = executor.run_round()
    assert (report.errors, report.connection_error) == (1, _refused().message)
    aborting = store.get("t1")
    assert aborting.reason == "aborting: waiting for the pod's containers to stop (grace 20 s)"
    assert decode_state(aborting.plugin_state).aborting_since == deleted_at
    clock.advance(30)
    executor.run_round()
    assert store.get("t1").phase is Phase.ABORTED
    assert kube.calls["delete"] == 1


def test_events_that_arrive_after_the_task_ended_are_attached_before_it_is_finalized(
    store: SQLiteTaskStore, kube: FakeKubernetes, clock: Clock
) -> None:
    # The event watch lags behind the pod's: a quick pod's Scheduled event may be indexed only
    # after the round that saw it succeed. It still reaches the task, without a new phase entry.
    events = EventIndex(ttl=timedelta(hours=1), max_per_object=50)
    with Executor(
        store,
        kube,
        ExecutorConfig(backend="kubernetes/test", events_settle=timedelta(seconds=1)),
        LifecycleConfig(inject_finalizer=True),
        clock=clock,
        sleep=lambda _seconds: None,
        events=events,
    ) as executor:
        _submit(store, clock)
        executor.run_round()
        ref = ObjectRef("v1", "Pod", NAMESPACE, "t1")
        kube.set_status(
            ref,
            {
                "phase": "Succeeded",
                "containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": 0}}}],
            },
        )
        clock.advance(1)
        executor.run_round()
        assert store.get("t1").phase is Phase.SUCCESS
        history = len(store.history("t1"))
        scheduled = ObjectEvent(
            "e1", clock.now - timedelta(seconds=2), clock.now, "Scheduled", "assigned to node-1"
        )
        events.add(EventKey(NAMESPACE, "Pod", "t1"), scheduled, clock())
        executor.run_round()
        ended = store.get("t1")
        assert not ended.finalized
        assert [event.reason for event in store.events("t1")] == ["Scheduled: assigned to node-1"]
        assert len(store.history("t1")) == history
        executor.run_round()
        assert not store.get("t1").finalized  # the events settle first
        clock.advance(1)
        executor.run_round()
        assert store.get("t1").finalized
        assert [event.reason for event in store.events("t1")] == ["Scheduled: assigned to node-1"]


def test_a_finished_task_whose_plugin_state_cannot_be_read_is_still_finalized(
    executor: Executor, kube: FakeKubernetes, store: SQLiteTaskStore, clock: Clock
) -> None:
    # A state from a newer podwright (an unknown format version): the round must not fail.
    _submit(store, clock)
    store.advance("t1", 1, {"version": 99}, PhaseInfo(Phase.SUCCESS, 1, "done"), clock())
    executor.run_round()
    clock.advance(2)
    report = executor.run_round()
    assert report.errors == 0
    assert store.get("t1").finalized


def _unbound_pod_task(store: SQLiteTaskStore, clock: Clock) -> None:
    pod = bound_pod()
    del pod["spec"]["nodeName"]  # the scheduler has not placed it yet
    store.submit(
        NewTask("t1", "workspace", "t1", NAMESPACE, "kubernetes/test", {}, {}, (pod,), clock())
    )


def test_a_new_reason_within_a_phase_is_written_only_once_it_lasts(
    executor: Executor, store: SQLiteTaskStore, clock: Clock
) -> None:
    _unbound_pod_task(store, clock)
    executor.run_round()
    launched = store.get("t1")
    assert (launched.phase, launched.reason) == (Phase.QUEUED, f"Pod {NAMESPACE}/t1 created")
    clock.advance(1)
    assert executor.run_round().due == 1
    assert store.get("t1").revision == launched.revision, "waiting for the scheduler: not yet"
    # It has to last reason_settle (1 s) from this handle, the first to see it, however long
    # ago the last write was.
    assert executor.seconds_until_due() == pytest.approx(1.0)
    clock.advance(0.5)
    assert executor.run_round().due == 0
    clock.advance(0.5)
    executor.run_round()
    lasted = store.get("t1")
    assert (lasted.revision, lasted.phase, lasted.reason) == (
        launched.revision + 1,
        Phase.QUEUED,
        "waiting for the scheduler",
    )


def test_a_new_phase_is_written_at_once_however_soon(
    executor: Executor, store: SQLiteTaskStore, kube: FakeKubernetes, clock: Clock
) -> None:
    _unbound_pod_task(store, clock)
    executor.run_round()
    clock.advance(0.1)
    kube.set_status(
        ObjectRef("v1", "Pod", NAMESPACE, "t1"),
        {"phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {}}}]},
    )
    turn = executor.handle_task(store.get("t1"))  # as the operator does, on the pod's change
    assert turn.advanced
    assert store.get("t1").phase is Phase.RUNNING


def test_reason_settle_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="reason_settle must not be negative, got -1 day"):
        ExecutorConfig(backend="b", reason_settle=timedelta(seconds=-1))
