"""The operator over an in-memory Workload store and its work queue: what it does for each
Workload (hold, render and submit a new one; record a refusal; let a finished or deleted one go),
that it does nothing at all while it does not lead and stops as soon as it no longer does, that
one Workload's lost race or failed write stops no other (a failed one comes back after its
backoff), that every write's change queues the Workload again, and, with the real executor over
the in-memory Kubernetes port, a Workload's whole way: submitted, launched (owned by the Workload),
deleted, aborted, finalized, let go, its key waiting in between as long as the executor says."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podwright.core.cluster_resources import API_VERSION, WORKLOAD_FINALIZER
from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.core.lifecycle.phases import Phase, PhaseInfo
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import Executor, ExecutorConfig, RecordLaunch, TaskTurn
from podwright.engine.kubernetes_port import ObjectRef
from podwright.engine.operator import (
    OperatorTally,
    RenderRefusedError,
    WorkloadOperator,
    owning_workload,
)
from podwright.engine.task_store import (
    AttachedEvent,
    HistoryEntry,
    JsonData,
    NewTask,
    StaleRevisionError,
    StoreUnavailableError,
    TaskExistsError,
    TaskNotFoundError,
    TaskRecord,
    TaskStoreError,
)
from podwright.engine.work_queue import WorkQueue
from podwright.engine.workload_tasks import (
    OPERATOR_BACKEND,
    abort_requested_workload,
    advanced_workload,
    events_attached,
    finalized_patch,
    has_finalizer,
    history_of,
    is_submitted,
    launched_workload,
    new_task,
    record_of,
    refused_workload,
    submitted_workload,
    task_id_of,
    with_finalizer_patch,
    without_finalizer_patch,
)
from tests.engine.conftest import NAMESPACE
from tests.engine.fake_kubernetes import FakeKubernetes

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SPEC = {"type": "workspace", "image": "jupyter:1"}


def pod_manifest(name: str) -> dict[str, Any]:
    """What rendering a Workload makes: one pod (no node: deleting it is immediate)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "annotations": {"podwright.dev/primary-container": "main"},
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "jupyter:1"}]},
    }


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def seconds(self) -> float:
        """The time as the work queue reads it: seconds since T0."""
        return (self.now - T0).total_seconds()


class FakeWorkloads:
    """The operator's Workload store in memory: Workloads by name (in one namespace), written
    with the same pure functions as the cluster's store, each write conditional on the
    resourceVersion read (:class:`StaleRevisionError` otherwise), as the API server does.

    It records every call (method, Workload name or task id), can fail the next call of a method
    for a Workload with a given error (``fail``), and calls ``before`` before each call (a test
    takes leadership away there)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.failures: dict[tuple[str, str], TaskStoreError] = {}
        self.before: Callable[[str, str], None] = lambda _method, _name: None
        self.let_go: dict[str, dict[str, Any]] = {}
        """The Workloads deleted once their last finalizer was removed, as last written."""
        self.changed: Callable[[tuple[str, str]], None] = lambda _key: None
        """Told of every change but the store's own writes, as the cluster's Workload cache
        tells the operator."""
        self._versions = itertools.count(1)
        self._uids = itertools.count(1)

    # Test controls -------------------------------------------------------------------------

    def add(
        self, name: str, *, finalizers: Sequence[str] = (), status: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"{next(self._uids):08x}-0000-4000-8000-000000000000",
            "resourceVersion": str(next(self._versions)),
            "generation": 1,
        }
        if finalizers:
            metadata["finalizers"] = list(finalizers)
        obj = {"apiVersion": API_VERSION, "kind": "Workload", "metadata": metadata, "spec": SPEC}
        if status is not None:
            obj["status"] = dict(status)
        self.objects[name] = obj
        self.changed((NAMESPACE, name))
        return copy.deepcopy(obj)

    def delete_workload(self, name: str) -> None:
        """Delete as a person does: gone at once, or marked while finalizers hold it."""
        obj = self.objects[name]
        if not obj["metadata"].get("finalizers"):
            del self.objects[name]
        else:
            obj["metadata"]["deletionTimestamp"] = "2026-11-21T12:00:30Z"
            obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.changed((NAMESPACE, name))

    def fail(self, method: str, name: str, error: TaskStoreError) -> None:
        self.failures[(method, name)] = error

    def touched(self) -> list[str]:
        """The Workloads any call was about, in order, once each."""
        return list(dict.fromkeys(name for _method, name in self.calls if name))

    # The operator's own calls ----------------------------------------------------------------

    def workloads(self) -> list[JsonObject]:
        self._call("workloads", "")
        return [copy.deepcopy(self.objects[name]) for name in sorted(self.objects)]

    def workload(self, namespace: str, name: str) -> JsonObject | None:
        self._call("workload", name)
        found = self.objects.get(name) if namespace == NAMESPACE else None
        return None if found is None else copy.deepcopy(found)

    def record(self, workload: JsonObject) -> TaskRecord | None:
        self._call("record", _name(workload))
        return record_of(workload)

    def hold(self, workload: JsonObject) -> JsonObject:
        self._call("hold", _name(workload))
        if has_finalizer(workload):
            return workload
        return self._write(workload, with_finalizer_patch(workload), metadata=True)

    def release(self, workload: JsonObject) -> None:
        self._call("release", _name(workload))
        if has_finalizer(workload):
            self._write(workload, without_finalizer_patch(workload), metadata=True)

    def refuse(self, workload: JsonObject, task_id: str, message: str, now: datetime) -> None:
        self._call("refuse", _name(workload))
        self._write(workload, refused_workload(workload, task_id, message, now))

    # The task store --------------------------------------------------------------------------

    def submit(self, task: NewTask) -> TaskRecord:
        current = self._unsubmitted(task)
        return _record(self._write(current, submitted_workload(current, task, task.submitted_at)))

    def submit_launched(
        self, task: NewTask, plugin_state: JsonData, info: PhaseInfo, now: datetime
    ) -> TaskRecord:
        current = self._unsubmitted(task)
        body = launched_workload(current, task, plugin_state, info, now)
        return _record(self._write(current, body))

    def get(self, task_id: str) -> TaskRecord:
        return _record(self._by_task(task_id))

    def list_tasks(self, *, active_only: bool = False) -> list[TaskRecord]:
        found = [record_of(obj) for obj in self.objects.values()]
        records = [r for r in found if r is not None and not (active_only and r.finalized)]
        return sorted(records, key=lambda record: (record.task.submitted_at, record.task_id))

    def advance(
        self, task_id: str, revision: int, plugin_state: JsonData, info: PhaseInfo, now: datetime
    ) -> TaskRecord:
        obj, record = self._current(task_id, revision)
        return _record(
            self._write(obj, advanced_workload(obj, record, plugin_state, info, now).workload)
        )

    def request_abort(self, task_id: str, now: datetime) -> TaskRecord:
        obj = self._by_task(task_id)
        record = _record(obj)
        if record.abort_requested:
            return record
        return _record(self._write(obj, abort_requested_workload(obj, record, now)))

    def mark_finalized(self, task_id: str, revision: int, now: datetime) -> TaskRecord:
        obj, _record_read = self._current(task_id, revision)
        return _record(self._write(obj, finalized_patch(obj, task_id), metadata=True))

    def delete(self, task_id: str, revision: int) -> None:
        obj, _record_read = self._current(task_id, revision)
        self.delete_workload(_name(obj))

    def history(self, task_id: str) -> list[HistoryEntry]:
        return history_of(self._by_task(task_id))

    def events(self, task_id: str) -> list[AttachedEvent]:
        return events_attached(self._by_task(task_id))

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------------------------------

    def _call(self, method: str, name: str) -> None:
        self.calls.append((method, name))
        self.before(method, name)
        error = self.failures.pop((method, name), None)
        if error is not None:
            raise error

    def _unsubmitted(self, task: NewTask) -> dict[str, Any]:
        """The Workload ``task`` is to be recorded in (a "submit" call), still without one."""
        self._call("submit", task.name)
        current = self.objects.get(task.name)
        if current is None:
            raise TaskNotFoundError(task.name)
        if is_submitted(current):
            raise TaskExistsError(task.task_id)
        return current

    def _by_task(self, task_id: str) -> dict[str, Any]:
        for obj in self.objects.values():
            if is_submitted(obj) and task_id_of(obj) == task_id:
                return copy.deepcopy(obj)
        raise TaskNotFoundError(task_id)

    def _current(self, task_id: str, revision: int) -> tuple[dict[str, Any], TaskRecord]:
        obj = self._by_task(task_id)
        record = _record(obj)
        if record.revision != revision:
            raise StaleRevisionError(f"{task_id} is at {record.revision}, not {revision}")
        return obj, record

    def _write(
        self, read: JsonObject, body: Mapping[str, Any], *, metadata: bool = False
    ) -> dict[str, Any]:
        name = _name(read)
        current = self.objects.get(name)
        if current is None:
            raise TaskNotFoundError(name)
        if text(section(body, "metadata"), "resourceVersion") != _version(current):
            raise StaleRevisionError(f"Workload {name} changed")
        written = copy.deepcopy(current)
        if metadata:
            finalizers = body["metadata"]["finalizers"]
            written["metadata"]["finalizers"] = list(finalizers or [])
            annotations = body["metadata"].get("annotations") or {}
            written["metadata"]["annotations"] = {
                **(written["metadata"].get("annotations") or {}),
                **annotations,
            }
        else:
            written["status"] = copy.deepcopy(body["status"])
        written["metadata"]["resourceVersion"] = str(next(self._versions))
        if written["metadata"].get("deletionTimestamp") and not written["metadata"]["finalizers"]:
            del self.objects[name]
            self.let_go[name] = written
        else:
            self.objects[name] = written
        return copy.deepcopy(written)


def _name(workload: JsonObject) -> str:
    return text(section(workload, "metadata"), "name")


def _version(workload: JsonObject) -> str:
    return text(section(workload, "metadata"), "resourceVersion")


def _record(workload: JsonObject) -> TaskRecord:
    found = record_of(workload)
    if found is None:
        raise TaskNotFoundError(_name(workload))
    return found


class StubExecutor:
    """The executor's part, counted: each active task handled, due again in ``due_in``."""

    def __init__(self) -> None:
        self.config = ExecutorConfig(backend=OPERATOR_BACKEND)
        self.handled: list[str] = []
        self.launched: list[str] = []
        self.forgotten: list[str] = []
        self.due_in = timedelta(seconds=5)

    def handle_task(self, record: TaskRecord) -> TaskTurn:
        self.handled.append(record.task_id)
        return TaskTurn(due_in=self.due_in)

    def launch(self, task: NewTask, record: RecordLaunch) -> TaskTurn:
        """Records the task Queued, as a launch that created its resource does."""
        record({"launched": True}, PhaseInfo(Phase.QUEUED, 1, "created"), T0)
        self.launched.append(task.task_id)
        return TaskTurn(due_in=self.due_in, advanced=True)

    def forget_task(self, task_id: str) -> None:
        self.forgotten.append(task_id)


class FakeMonotonic:
    """The work queue's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Renderer:
    """Renders each Workload as one pod, or refuses those named in ``refuse``; remembers what
    it was given."""

    def __init__(self, refuse: Mapping[str, str] | None = None) -> None:
        self.refuse = dict(refuse or {})
        self.defect_once: set[str] = set()
        """Names whose next rendering fails with a KeyError (a defect), once."""
        self.given: list[JsonObject] = []

    def __call__(self, workload: JsonObject) -> Sequence[Mapping[str, Any]]:
        self.given.append(workload)
        name = _name(workload)
        if name in self.defect_once:
            self.defect_once.discard(name)
            raise KeyError("spec")
        if name in self.refuse:
            raise RenderRefusedError(self.refuse[name])
        return [pod_manifest(name)]


class Leadership:
    def __init__(self, leads: bool = True) -> None:
        self.leads = leads
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.leads


@dataclasses.dataclass
class Harness:
    store: FakeWorkloads
    executor: StubExecutor
    render: Renderer
    leadership: Leadership
    operator: WorkloadOperator
    monotonic: FakeMonotonic

    def step(self) -> OperatorTally:
        """Handle every Workload that is ready, until none is; what was done."""
        self.operator.drain()
        return self.operator.take_tally()

    def later(self, seconds: float) -> OperatorTally:
        """The queue's clock moved on ``seconds``, then :meth:`step`."""
        self.monotonic.now += seconds
        return self.step()


def harness(*, refuse: Mapping[str, str] | None = None, leads: bool = True) -> Harness:
    store, executor = FakeWorkloads(), StubExecutor()
    render, leadership, monotonic = Renderer(refuse), Leadership(leads), FakeMonotonic()
    operator = WorkloadOperator(
        store,
        executor,  # type: ignore[arg-type]
        render,
        WorkQueue(clock=monotonic),
        clock=lambda: T0,
        leads=leadership,
    )
    store.changed = operator.changed
    return Harness(store, executor, render, leadership, operator, monotonic)


def counts(tally: OperatorTally) -> tuple[int, int, int, int]:
    return tally.submitted, tally.refused, tally.released, tally.errors


# What the operator does for each Workload ---------------------------------------------------------


def test_a_new_workload_is_held_rendered_from_the_held_copy_and_submitted() -> None:
    h = harness()
    h.store.add("notebook", finalizers=["example.com/keep"])
    assert counts(h.step()) == (1, 0, 0, 0)
    stored = h.store.objects["notebook"]
    assert stored["metadata"]["finalizers"] == ["example.com/keep", WORKLOAD_FINALIZER]
    (rendered,) = h.render.given
    assert WORKLOAD_FINALIZER in rendered["metadata"]["finalizers"], "rendered once held"
    record = _record(stored)
    assert record.task_id == task_id_of(stored)
    # Launched before it was recorded, and recorded with what the launch did: one write.
    assert (record.revision, record.phase, record.plugin_state, record.task.backend) == (
        2,
        Phase.QUEUED,
        {"launched": True},
        OPERATOR_BACKEND,
    )
    assert record.task.manifests == (pod_manifest("notebook"),)
    assert record.task.owner is not None
    assert (record.task.owner.name, record.task.owner.uid) == (
        "notebook",
        stored["metadata"]["uid"],
    )
    assert record.task.submitted_at == T0
    assert [method for method, _ in h.store.calls] == ["workload", "record", "hold", "submit"]
    assert h.executor.launched == [record.task_id]
    assert counts(h.step()) == (0, 0, 0, 0), "nothing more until it is due or changes"
    assert h.executor.handled == []
    assert len(h.render.given) == 1


def test_a_workload_that_cannot_be_rendered_is_recorded_refused_then_let_go() -> None:
    h = harness(refuse={"notebook": "compute: no node pool has h100"})
    h.store.add("notebook")
    # Refused, and (the refusal's write queueing it again) let go at once.
    assert counts(h.step()) == (0, 1, 1, 0)
    stored = h.store.objects["notebook"]
    record = _record(stored)
    assert (record.phase, record.finalized, record.reason) == (
        Phase.PERMANENT_FAILURE,
        True,
        "RenderFailed",
    )
    assert stored["status"]["message"] == "compute: no node pool has h100"
    assert record.task_id == task_id_of(stored)
    assert h.store.list_tasks(active_only=True) == [], "no task for the executor"
    assert h.executor.handled == []
    assert not stored["metadata"].get("finalizers")


def _finalized_status(store: FakeWorkloads, name: str) -> dict[str, Any]:
    """The status of a Workload ``name`` whose task ended and that records it finalized (as a
    refusal does, and podwright did before it let a Workload go in the same write)."""
    scratch = FakeWorkloads()
    read = scratch.add(name)
    task_id = _record(scratch._write(read, submitted_workload(read, _task(read), T0))).task_id
    scratch.advance(task_id, 1, {}, PhaseInfo(Phase.SUCCESS, 1), T0)
    status: dict[str, Any] = scratch.objects[name]["status"]
    status["task"]["finalized"] = True
    return status


def _task(workload: JsonObject) -> NewTask:
    return new_task(workload, [pod_manifest(_name(workload))], T0)


@pytest.mark.parametrize(
    ("finalizers", "deleted", "gone"),
    [
        pytest.param([WORKLOAD_FINALIZER], False, False, id="finalized"),
        pytest.param([WORKLOAD_FINALIZER], True, True, id="finalized-and-deleted"),
        pytest.param(
            ["example.com/keep", WORKLOAD_FINALIZER], True, False, id="another-finalizer-stays"
        ),
    ],
)
def test_a_finalized_tasks_workload_is_let_go(
    finalizers: list[str], deleted: bool, gone: bool
) -> None:
    h = harness()
    h.store.add("notebook", finalizers=finalizers, status=_finalized_status(h.store, "notebook"))
    if deleted:
        h.store.delete_workload("notebook")
    assert counts(h.step()) == (0, 0, 1, 0)
    assert ("notebook" not in h.store.objects) is gone
    if not gone:
        remaining = h.store.objects["notebook"]["metadata"]["finalizers"]
        assert remaining == [name for name in finalizers if name != WORKLOAD_FINALIZER]
    h.operator.enqueue_all()
    assert counts(h.step()) == (0, 0, 0, 0), "let go once"
    assert h.render.given == []
    assert h.executor.handled == []


@pytest.mark.parametrize(
    ("finalizers", "released"),
    [
        pytest.param([WORKLOAD_FINALIZER], 1, id="held"),
        pytest.param(["example.com/keep"], 0, id="never-held"),
    ],
)
def test_a_workload_deleted_before_its_task_is_let_go_unsubmitted(
    finalizers: list[str], released: int
) -> None:
    h = harness()
    h.store.add("notebook", finalizers=finalizers)
    h.store.delete_workload("notebook")
    assert counts(h.step()) == (0, 0, released, 0)
    assert h.render.given == []
    assert ("submit", "notebook") not in h.store.calls
    if released:
        assert "notebook" not in h.store.objects


def test_an_active_task_is_handled_again_when_due_or_when_its_workload_changes() -> None:
    h = harness()
    h.store.add("notebook")
    h.step()
    task_id = task_id_of(h.store.objects["notebook"])
    assert (h.executor.launched, h.executor.handled) == ([task_id], [])
    assert h.operator.queue.waiting() == 1
    assert counts(h.later(4.9)) == (0, 0, 0, 0)
    assert h.executor.handled == [], "not due yet"
    h.later(0.1)
    assert h.executor.handled == [task_id], "due after what the executor said"
    h.later(5)
    assert h.executor.handled == [task_id] * 2, "and again, as often"
    h.store.changed(("team-a", "notebook"))  # (another namespace's Workload of that name)
    h.store.changed((NAMESPACE, "notebook"))
    h.step()
    assert h.executor.handled == [task_id] * 3, "a change is handled at once"


def test_a_deleted_workloads_task_is_forgotten_by_the_executor() -> None:
    h = harness()
    h.store.add("notebook")
    h.step()
    task_id = task_id_of(h.store.objects["notebook"])
    del h.store.objects["notebook"]  # gone (its finalizer removed by hand)
    h.store.changed((NAMESPACE, "notebook"))
    h.step()
    assert h.executor.forgotten == [task_id]
    h.later(5)
    assert h.executor.handled == [], "never handled again"


def test_a_task_of_another_backend_is_left_to_it() -> None:
    h = harness()
    h.store.add("notebook")
    h.step()
    h.executor.config = ExecutorConfig(backend="local")
    h.later(5)
    assert h.executor.handled == []
    assert h.operator.queue.waiting() == 0


# Leadership ------------------------------------------------------------------------------------


def test_a_replica_that_does_not_lead_does_nothing_at_all() -> None:
    h = harness(leads=False)
    h.store.add("new")
    h.store.add("done", finalizers=[WORKLOAD_FINALIZER], status=_finalized_status(h.store, "done"))
    assert h.operator.drain() == 2
    assert h.store.calls == []
    assert h.executor.handled == []
    assert h.render.given == []
    assert h.operator.take_tally() == OperatorTally()
    # Taking the lead, it queues every Workload again.
    h.leadership.leads = True
    assert h.operator.enqueue_all() == 2
    assert counts(h.step()) == (1, 0, 1, 0)


def test_a_leader_that_loses_leadership_stops_at_the_next_workload() -> None:
    h = harness()
    for name in ("a", "b", "c"):
        h.store.add(name)

    def lose_leadership(method: str, name: str) -> None:
        if (method, name) == ("submit", "a"):
            h.leadership.leads = False

    h.store.before = lose_leadership
    h.step()
    acted_on = {name for method, name in h.store.calls if method not in ("workloads", "record")}
    assert acted_on == {"a"}, "only the Workload in hand was acted on"
    assert h.executor.handled == []
    assert [_name(given) for given in h.render.given] == ["a"]
    assert "finalizers" not in h.store.objects["b"]["metadata"]


# One Workload's trouble stops no other ---------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "error", "errors"),
    [
        pytest.param("hold", StaleRevisionError("changed"), 0, id="hold-lost-a-race"),
        pytest.param("submit", StaleRevisionError("changed"), 0, id="submit-lost-a-race"),
        pytest.param("submit", TaskExistsError("already"), 0, id="submitted-meanwhile"),
        pytest.param("hold", TaskNotFoundError("gone"), 0, id="deleted-meanwhile"),
        pytest.param("hold", StoreUnavailableError("does not lead"), 1, id="store-unavailable"),
        pytest.param("refuse", StaleRevisionError("changed"), 0, id="refuse-lost-a-race"),
    ],
)
def test_one_workloads_failed_write_does_not_stop_the_others(
    method: str, error: TaskStoreError, errors: int
) -> None:
    h = harness(refuse={"b": "cannot render"} if method == "refuse" else None)
    for name in ("a", "b", "c"):
        h.store.add(name)
    h.store.fail(method, "b", error)
    tally = h.step()
    assert (tally.submitted, tally.refused, tally.errors) == (2, 0, errors)
    for name in ("a", "c"):
        assert is_submitted(h.store.objects[name]), name
    assert not is_submitted(h.store.objects["b"])
    # A lost race is decided again on the Workload's next change; a failed write after its
    # backoff.
    if errors:
        assert h.operator.queue.failures((NAMESPACE, "b")) == 1
        h.later(0.005)
    else:
        h.store.changed((NAMESPACE, "b"))
        h.step()
    assert is_submitted(h.store.objects["b"])
    if method == "refuse":
        assert _record(h.store.objects["b"]).phase is Phase.PERMANENT_FAILURE
    assert h.operator.queue.failures((NAMESPACE, "b")) == 0, "forgotten once it succeeded"


def test_a_workload_whose_record_cannot_be_read_is_skipped() -> None:
    h = harness()
    h.store.add("a")
    h.store.add("b", status={"task": {"id": "junk", "revision": 1}})
    h.store.add("c")
    tally = h.step()
    assert counts(tally) == (2, 0, 0, 0)
    assert [_name(given) for given in h.render.given] == ["a", "c"]


def test_a_defect_handling_one_workload_is_logged_and_it_is_retried_after_a_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = harness()
    h.store.add("a")
    h.store.add("b")
    h.render.defect_once = {"b"}
    tally = h.step()
    assert (tally.submitted, tally.errors) == (1, 1)
    assert f"Workload {NAMESPACE}/b: could not be handled" in caplog.text
    h.later(0.005)
    assert is_submitted(h.store.objects["b"])


# The whole way, with the real executor ------------------------------------------------------------


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(kube: FakeKubernetes, clock: Clock) -> Iterator[tuple[WorkloadOperator, FakeWorkloads]]:
    store = FakeWorkloads()
    with Executor(
        store,
        kube,
        ExecutorConfig(backend=OPERATOR_BACKEND, concurrency=1),
        LifecycleConfig(),
        clock=clock,
        sleep=lambda _seconds: None,
    ) as executor:
        operator = WorkloadOperator(
            store,
            executor,
            Renderer(),
            WorkQueue(clock=clock.seconds),
            clock=clock,
            leads=lambda: True,
        )
        store.changed = operator.changed
        yield operator, store


def test_a_workload_is_launched_owned_by_it_aborted_when_deleted_and_let_go(
    engine: tuple[WorkloadOperator, FakeWorkloads], kube: FakeKubernetes, clock: Clock
) -> None:
    operator, store = engine
    store.add("notebook")
    operator.drain()
    first = operator.take_tally()
    assert (first.submitted, first.advanced) == (1, 1), "launched, and recorded so, at once"
    workload = store.objects["notebook"]
    task_id = task_id_of(workload)
    (created,) = kube.created
    assert created.startswith("Pod/")
    pod = kube.get(ObjectRef("v1", "Pod", NAMESPACE, created.removeprefix("Pod/")))
    (owner,) = pod["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["uid"]) == (
        API_VERSION,
        "Workload",
        "notebook",
        workload["metadata"]["uid"],
    )
    assert store.get(task_id).phase is Phase.QUEUED
    assert workload["status"]["phase"] == "Queued"
    store.delete_workload("notebook")
    assert store.get(task_id).abort_requested is True
    for _ in range(6):
        clock.advance(2)
        operator.drain()
        if "notebook" not in store.objects:
            break
    assert "notebook" not in store.objects, store.objects.get("notebook")
    last = store.let_go["notebook"]
    assert kube.calls["delete"] == 1, "the pod, once"
    assert [(entry.phase, entry.reason) for entry in history_of(last)] == [
        (Phase.QUEUED, f"Pod {NAMESPACE}/{created.removeprefix('Pod/')} created"),
        (Phase.ABORTED, "aborted on request"),
    ]
    assert _record(last).finalized is True


def test_a_burst_of_new_workloads_is_submitted_as_it_comes() -> None:
    h = harness()
    names = [f"w{number}" for number in range(300)]
    for name in names:
        h.store.add(name)
    assert h.operator.queue.ready() == 300
    tally = h.step()
    assert tally.submitted == 300, "no cap on a turn: all of them at once"
    assert all(is_submitted(h.store.objects[name]) for name in names)


# Which Workload a change of a task's resource concerns -------------------------------------------

_WORKLOAD_OWNER = {"apiVersion": API_VERSION, "kind": "Workload", "name": "notebook", "uid": "u"}


@pytest.mark.parametrize(
    ("owners", "key"),
    [
        pytest.param([_WORKLOAD_OWNER], (NAMESPACE, "notebook"), id="owned-by-a-workload"),
        pytest.param(
            [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "v"}, _WORKLOAD_OWNER],
            (NAMESPACE, "notebook"),
            id="among-other-owners",
        ),
        pytest.param(
            [{**_WORKLOAD_OWNER, "apiVersion": "example.com/v1"}], None, id="another-apis-kind"
        ),
        pytest.param([{**_WORKLOAD_OWNER, "kind": "Job"}], None, id="another-kind"),
        pytest.param([{**_WORKLOAD_OWNER, "name": ""}], None, id="no-name"),
        pytest.param(["garbage"], None, id="not-a-reference"),
        pytest.param(None, None, id="no-owners"),
    ],
)
def test_a_resource_change_queues_the_workload_that_owns_it(
    owners: list[Any] | None, key: tuple[str, str] | None
) -> None:
    metadata: dict[str, Any] = {"name": "notebook-1", "namespace": NAMESPACE}
    if owners is not None:
        metadata["ownerReferences"] = owners
    assert owning_workload({"metadata": metadata}) == key
