"""How long a stopping local executor waits for the tasks it aborted: as long as the engine may
take to record them Aborted (their longest grace period, then ``abortMargin``, then the events'
settling), and a little more, never a fixed time that would cut a long grace period short.

Over the engine's in-memory port, with one fake clock for the engine and for the wait (a sleep
advances it): the pods never confirm they stopped, so the engine records each abort only once
its grace period and margin are over.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.cli import executor_command
from podwright.cli.executor_command import _abort_local_tasks
from podwright.core.lifecycle import Phase
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import Executor, ExecutorConfig
from podwright.engine.kubernetes_port import ObjectRef, ServerError
from podwright.engine.task_store import NewTask
from tests.engine.conftest import NAMESPACE
from tests.engine.fake_kubernetes import FakeKubernetes
from tests.engine.test_executor_rules import Clock, bound_pod

LONGEST_GRACE = timedelta(seconds=120)
SETTLE = ExecutorConfig(backend="local").events_settle
SLACK_BOUND = timedelta(minutes=1)
"""How much longer than the engine needs the wait may last, at most."""
GRACES = {"short": 30, "long": int(LONGEST_GRACE.total_seconds())}
"""The running local tasks the executor aborts as it stops, and their grace periods (seconds)."""
MARGINS = [timedelta(seconds=20), timedelta(minutes=5)]


class FakeTime:
    """The ``time`` the stop wait reads: :class:`Clock`'s, which its sleeps advance."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._epoch = clock()

    def monotonic(self) -> float:
        return (self._clock() - self._epoch).total_seconds()

    def sleep(self, seconds: float) -> None:
        self._clock.advance(seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(executor_command, "time", FakeTime(clock))
    return clock


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteTaskStore]:
    opened = SQLiteTaskStore(tmp_path / "tasks.db")
    yield opened
    opened.close()


def _stopping(
    store: SQLiteTaskStore, clock: Clock, margin: timedelta
) -> tuple[Executor, FakeKubernetes, LifecycleConfig]:
    """An executor of the local backend running the tasks of :data:`GRACES`, about to stop."""
    kube = FakeKubernetes()
    kube.namespace(NAMESPACE)
    lifecycle = LifecycleConfig(inject_finalizer=True, abort_margin=margin)
    executor = Executor(
        store,
        kube,
        ExecutorConfig(backend="local"),
        lifecycle,
        clock=clock,
        sleep=lambda _seconds: None,
    )
    for task_id, grace in GRACES.items():
        resource = bound_pod(grace)
        store.submit(
            NewTask(task_id, "workspace", task_id, NAMESPACE, "local", {}, {}, (resource,), clock())
        )
    executor.run_round()
    running = {
        "phase": "Running",
        "containerStatuses": [{"name": "main", "state": {"running": {}}}],
    }
    for task_id in GRACES:
        kube.set_status(ObjectRef("v1", "Pod", NAMESPACE, task_id), running)
    clock.advance(1)
    executor.run_round()
    assert {store.get(task_id).phase for task_id in GRACES} == {Phase.RUNNING}
    return executor, kube, lifecycle


def _stop(
    executor: Executor, store: SQLiteTaskStore, clock: Clock, lifecycle: LifecycleConfig
) -> timedelta:
    """Stop: abort the local tasks and wait for them. How long that took on the fake clock."""
    with executor:
        stopping_at = clock()
        _abort_local_tasks(executor, store, lifecycle)
    return clock() - stopping_at


@pytest.mark.parametrize("margin", MARGINS)
def test_the_wait_lasts_until_the_engine_records_the_abort_after_the_grace_and_the_margin(
    store: SQLiteTaskStore, clock: Clock, margin: timedelta
) -> None:
    executor, _, lifecycle = _stopping(store, clock, margin)
    waited = _stop(executor, store, clock, lifecycle)
    long = store.get("long")
    assert (long.phase, long.finalized) == (Phase.ABORTED, True)
    assert long.reason == (
        f"aborted on request; Pod {NAMESPACE}/long did not confirm that the pod's containers "
        f"stopped within {int((LONGEST_GRACE + margin).total_seconds())} s (the grace period of "
        f"120 s and a margin of {int(margin.total_seconds())} s)"
    )
    assert store.get("short").finalized
    assert LONGEST_GRACE + margin <= waited < LONGEST_GRACE + margin + SETTLE + SLACK_BOUND


@pytest.mark.parametrize("margin", MARGINS)
def test_the_wait_ends_a_little_after_the_engine_would_have_recorded_the_abort(
    store: SQLiteTaskStore, clock: Clock, margin: timedelta
) -> None:
    """A task the executor cannot finalize (its finalizer cannot be removed) is waited for no
    longer than the engine needs and a little more: then the backend's close kills what is left."""
    executor, kube, lifecycle = _stopping(store, clock, margin)
    timeouts = (ServerError("etcdserver: request timed out", status=500) for _ in range(1000))
    kube.fail("patch", *timeouts)
    waited = _stop(executor, store, clock, lifecycle)
    assert not store.get("long").finalized
    assert LONGEST_GRACE + margin + SETTLE <= waited < LONGEST_GRACE + margin + SLACK_BOUND
