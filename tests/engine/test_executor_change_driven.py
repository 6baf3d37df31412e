"""Change-driven rounds: a task whose last handle changed nothing is skipped (no worker, no plugin
manager round) while its fingerprint (record revision, cached resourceVersion, event version) is
the same and the resync interval has not passed; anything else is handled as before.

Every test first shows a skip, so each fails when the rule is gone; the clock is a fake one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.core.lifecycle import Phase, PhaseInfo
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex, EventKey, ObjectEvent
from podwright.engine.executor import Executor, ExecutorConfig, RoundReport
from podwright.engine.kubernetes_port import ObjectRef, PatchType, ServerError
from podwright.engine.plugin import TaskContext
from podwright.engine.plugin_manager import PluginManager, Transition
from podwright.engine.task_store import NewTask, TaskRecord
from tests.engine.conftest import NAMESPACE, Clock
from tests.engine.fake_kubernetes import FakeKubernetes

BACKEND = "kubernetes/test"
RESYNC = timedelta(seconds=5)
POD = ObjectRef("v1", "Pod", NAMESPACE, "t1")
POD_EVENTS = EventKey(NAMESPACE, "Pod", "t1")


class ReportingStore(SQLiteTaskStore):
    """The SQLite store, whose chosen tasks it reports with another phase or an abort requested
    at the revision they have: as the Workload store reports a Workload being deleted."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.reported: dict[str, dict[str, Any]] = {}

    def list_tasks(self, *, active_only: bool = False) -> list[TaskRecord]:
        return [
            dataclasses.replace(record, **self.reported.get(record.task_id, {}))
            for record in super().list_tasks(active_only=active_only)
        ]


Tweak = Callable[[Transition], Transition]


class Handles:
    """Counts the plugin managers' handles; ``next`` tweaks the outcome of the next one."""

    def __init__(self) -> None:
        self.count = 0
        self.next: Tweak | None = None

    @contextlib.contextmanager
    def counting(self) -> Iterator[Handles]:
        original = PluginManager.handle

        def handle(
            manager: PluginManager, task: TaskContext, persisted: Any, now: datetime
        ) -> Transition:
            self.count += 1
            tweak, self.next = self.next, None
            transition = original(manager, task, persisted, now)
            return transition if tweak is None else tweak(transition)

        with mock.patch.object(PluginManager, "handle", handle):
            yield self


class Harness:
    """An executor over a SQLite store and the in-memory port, a pod task ``t1`` running."""

    def __init__(self, path: str | Path, stack: contextlib.ExitStack) -> None:
        self.clock = Clock()
        self.kube = FakeKubernetes()
        self.kube.namespace(NAMESPACE)
        self.events = EventIndex(ttl=timedelta(hours=1), max_per_object=50)
        self.store = stack.enter_context(contextlib.closing(ReportingStore(path)))
        self.handles = stack.enter_context(Handles().counting())
        self.executor = stack.enter_context(
            Executor(
                self.store,
                self.kube,
                ExecutorConfig(backend=BACKEND, concurrency=2, resync_interval=RESYNC),
                LifecycleConfig(inject_finalizer=True),
                clock=self.clock,
                sleep=lambda _seconds: None,
                events=self.events,
            )
        )
        self._labels = 0
        self._events = 0

    def start(self) -> None:
        """Submit ``t1``, launch its pod, see it Running, then handle it once without change."""
        self.store.submit(
            NewTask("t1", "workspace", "t1", NAMESPACE, BACKEND, {}, {}, (_pod(),), self.clock())
        )
        self.run_round()
        self.kube.set_status(
            POD,
            {"phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {}}}]},
        )
        self.tick()
        self.run_round()
        assert self.store.get("t1").phase is Phase.RUNNING
        self.tick()
        assert self.handled_in_round()  # changes nothing: the next rounds may skip it

    def tick(self, seconds: float = 1) -> None:
        self.clock.advance(seconds)

    def run_round(self) -> RoundReport:
        return self.executor.run_round()

    def handled_in_round(self) -> bool:
        """Run a round; whether ``t1`` was handled (else it was skipped, never undue here)."""
        before = self.handles.count
        report = self.run_round()
        handled = self.handles.count - before
        assert report.due == 1
        assert (handled, report.skipped) in {(1, 0), (0, 1)}
        return handled == 1

    def bump_revision(self) -> None:
        """Write ``t1`` as it is: only its revision changes."""
        record = self.store.get("t1")
        info = PhaseInfo(record.phase, record.phase_version, record.reason)
        self.store.advance("t1", record.revision, record.plugin_state, info, self.clock())

    def touch_resource(self) -> None:
        """Change the pod in a way its phase does not see: a new resourceVersion only."""
        self._labels += 1
        self.kube.store.patch(
            self.kube.resource("v1", "Pod"),
            NAMESPACE,
            "t1",
            {"metadata": {"labels": {"touched": str(self._labels)}}},
            PatchType.MERGE.value,
        )

    def add_event(self) -> str:
        self._events += 1
        uid = f"e{self._events}"
        now = self.clock()
        self.events.add(POD_EVENTS, ObjectEvent(uid, now, now, "Pulled", uid), now)
        return uid

    def remove_event(self, uid: str) -> None:
        self.events.remove(POD_EVENTS, uid)


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"annotations": {"podwright.dev/primary-container": "main"}},
        "spec": {
            "nodeName": "node-1",
            "terminationGracePeriodSeconds": 20,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "x:1"}],
        },
    }


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    with contextlib.ExitStack() as stack:
        started = Harness(tmp_path / "tasks.db", stack)
        started.start()
        yield started


def test_an_unchanged_task_is_skipped_until_the_resync_interval_has_passed(
    harness: Harness,
) -> None:
    handled = []
    for _second in range(2 * int(RESYNC.total_seconds())):
        harness.tick()
        handled.append(harness.handled_in_round())
    # Handled (without change) at 0 s; then every 5 s: at 5 s and 10 s.
    assert handled == [False] * 4 + [True] + [False] * 4 + [True]


def test_a_skipped_task_costs_no_request(harness: Harness) -> None:
    requests = sum(harness.kube.calls.values())
    harness.tick()
    assert not harness.handled_in_round()
    assert sum(harness.kube.calls.values()) == requests


def _remove_an_event(harness: Harness) -> None:
    """Add an event and let a handle attach it (a change: handled again next round), then
    reach a skip again, and remove the event."""
    uid = harness.add_event()
    harness.tick()
    assert harness.handled_in_round()
    harness.tick()
    assert harness.handled_in_round()
    harness.tick()
    assert not harness.handled_in_round()
    harness.remove_event(uid)


CHANGES: dict[str, Callable[[Harness], object]] = {
    "a new revision": Harness.bump_revision,
    "a new resourceVersion in the cache": Harness.touch_resource,
    "a new event": Harness.add_event,
    "an event removed": _remove_an_event,
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=list(CHANGES))
def test_a_change_of_the_fingerprint_has_the_task_handled_in_the_next_round(
    harness: Harness, change: Callable[[Harness], object]
) -> None:
    harness.tick()
    assert not harness.handled_in_round()
    change(harness)
    harness.tick()
    assert harness.handled_in_round()


def test_a_new_event_is_attached_in_the_next_round(harness: Harness) -> None:
    harness.tick()
    assert not harness.handled_in_round()
    harness.add_event()
    harness.tick()
    assert harness.run_round().advanced == 1
    assert [event.reason for event in harness.store.events("t1")] == ["Pulled: e1"]


def _raise(_transition: Transition) -> Transition:
    raise ServerError("the server failed", status=500)


UNSETTLED: dict[str, Tweak] = {
    "asked for retry_after": lambda t: dataclasses.replace(t, retry_after=timedelta(seconds=1)),
    "met an error it carried on from": lambda t: dataclasses.replace(
        t, api_error=ServerError("the server failed", status=500)
    ),
    "raised an error": _raise,
}


@pytest.mark.parametrize("tweak", UNSETTLED.values(), ids=list(UNSETTLED))
def test_a_task_whose_handle_did_not_settle_is_not_skipped(harness: Harness, tweak: Tweak) -> None:
    harness.tick()
    assert not harness.handled_in_round()
    harness.tick(RESYNC.total_seconds())
    harness.handles.next = tweak
    assert harness.handled_in_round()
    harness.tick()  # the retry or the first error's backoff: one round interval
    assert harness.handled_in_round()  # nothing changed, but the last handle did not settle
    harness.tick()
    assert not harness.handled_in_round()  # that one did


def test_a_cache_miss_is_never_skipped(harness: Harness) -> None:
    harness.tick()
    assert not harness.handled_in_round()
    harness.kube.cache_enabled = False
    gets = harness.kube.calls["get"]
    for _round in range(3):
        harness.tick()
        assert harness.handled_in_round()
    assert harness.kube.calls["get"] == gets + 3  # the plugin manager read it from the server
    harness.kube.cache_enabled = True
    harness.tick()
    assert harness.handled_in_round()  # the handles before saw no fingerprint
    harness.tick()
    assert not harness.handled_in_round()


def test_an_abort_requested_without_a_new_revision_is_not_skipped(harness: Harness) -> None:
    harness.tick()
    assert not harness.handled_in_round()
    harness.store.reported["t1"] = {"abort_requested": True}  # a Workload being deleted
    harness.tick()
    report = harness.run_round()
    assert (report.due, report.skipped) == (1, 0)
    assert harness.kube.calls["delete"] == 1
    assert harness.store.get("t1").reason.startswith("aborting: waiting for")


def test_a_terminal_task_without_a_new_revision_is_not_skipped(harness: Harness) -> None:
    harness.tick()
    assert not harness.handled_in_round()
    harness.store.reported["t1"] = {"phase": Phase.SUCCESS}
    harness.tick()
    report = harness.run_round()
    assert (report.due, report.skipped, report.finalized) == (1, 0, 1)
    assert harness.store.get("t1").finalized


def test_resync_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"^resync_interval must be positive, got 0:00:00$"):
        ExecutorConfig(backend=BACKEND, resync_interval=timedelta(0))


# A model of the rule, against the executor over random histories -------------------------------

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["nothing", "revision", "resource", "add event", "remove event"]),
        st.integers(1, 4),
    ),
    max_size=15,
)


@settings(max_examples=40)
@given(STEPS)
def test_a_task_is_handled_exactly_when_the_rule_says(steps: list[tuple[str, int]]) -> None:
    """Handled iff its inputs changed since its last handle, that handle changed something
    (attached an event), or the resync interval has passed since; else skipped."""
    with tempfile.TemporaryDirectory() as directory, contextlib.ExitStack() as stack:
        harness = Harness(Path(directory) / "tasks.db", stack)
        harness.start()
        last_handle, wrote, changed = harness.clock(), False, False
        present: list[str] = []
        unattached: set[str] = set()
        for change, seconds in steps:
            made = change != "nothing"
            if change == "revision":
                harness.bump_revision()
            elif change == "resource":
                harness.touch_resource()
            elif change == "add event":
                present.append(harness.add_event())
                unattached.add(present[-1])
            elif change == "remove event" and present:
                removed = present.pop()
                harness.remove_event(removed)
                unattached.discard(removed)
            elif change == "remove event":
                made = False  # no event to remove
            changed = changed or made
            harness.tick(seconds)
            expected = changed or wrote or harness.clock() - last_handle >= RESYNC
            assert harness.handled_in_round() == expected
            if expected:
                last_handle, wrote, changed = harness.clock(), bool(unattached), False
                unattached.clear()


# One task at a time (the operator's work queue) ---------------------------------------------------


def test_a_task_handled_on_its_own_is_skipped_while_unchanged_and_says_when_it_is_due(
    harness: Harness,
) -> None:
    harness.tick(2)
    skipped = harness.executor.handle_task(harness.store.get("t1"))
    assert (skipped.skipped, skipped.due_in) == (True, RESYNC - timedelta(seconds=2))
    harness.tick(3)
    resynced = harness.executor.handle_task(harness.store.get("t1"))
    assert (resynced.skipped, resynced.advanced, resynced.due_in) == (False, False, RESYNC)
    harness.touch_resource()
    changed = harness.executor.handle_task(harness.store.get("t1"))
    assert not changed.skipped, "a change of its resource is handled at once"
    assert changed.due_in == RESYNC, "it changed nothing the task records"


def test_a_task_whose_handle_wrote_is_due_after_the_round_interval(harness: Harness) -> None:
    harness.kube.set_status(
        POD,
        {
            "phase": "Succeeded",
            "containerStatuses": [
                {"name": "main", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
            ],
        },
    )
    turn = harness.executor.handle_task(harness.store.get("t1"))
    assert turn.advanced
    assert harness.store.get("t1").phase is Phase.SUCCESS
    assert turn.due_in == timedelta(0), "its finalization is due at once"


def test_a_forgotten_task_is_handled_again_as_a_new_one(harness: Harness) -> None:
    harness.tick()
    assert harness.executor.handle_task(harness.store.get("t1")).skipped
    harness.executor.forget_task("t1")
    assert not harness.executor.handle_task(harness.store.get("t1")).skipped
