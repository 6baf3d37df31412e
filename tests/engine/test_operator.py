"""The operator's rounds over an in-memory Workload store: what it does for each Workload (hold,
render and submit a new one; record a refusal; let a finished or deleted one go), that it does
nothing at all while it does not lead and stops as soon as it no longer does, that one
Workload's lost race stops no other, and, with the real executor over the in-memory Kubernetes
port, a Workload's whole way: submitted, launched (owned by the Workload), deleted, aborted,
finalized, let go."""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podwright.core.cluster_resources import API_VERSION
from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.core.lifecycle.phases import Phase, PhaseInfo
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import Executor, ExecutorConfig, RoundReport
from podwright.engine.kubernetes_port import ObjectRef
from podwright.engine.operator import OperatorRound, RenderRefusedError, WorkloadOperator
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
from podwright.engine.workload_tasks import (
    OPERATOR_BACKEND,
    WORKLOAD_FINALIZER,
    abort_requested_workload,
    advanced_workload,
    events_attached,
    finalized_workload,
    has_finalizer,
    history_of,
    is_submitted,
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
        return copy.deepcopy(obj)

    def delete_workload(self, name: str) -> None:
        """Delete as a person does: gone at once, or marked while finalizers hold it."""
        obj = self.objects[name]
        if not obj["metadata"].get("finalizers"):
            del self.objects[name]
            return
        obj["metadata"]["deletionTimestamp"] = "2026-11-21T12:00:30Z"
        obj["metadata"]["resourceVersion"] = str(next(self._versions))

    def fail(self, method: str, name: str, error: TaskStoreError) -> None:
        self.failures[(method, name)] = error

    def touched(self) -> list[str]:
        """The Workloads any call was about, in order, once each."""
        return list(dict.fromkeys(name for _method, name in self.calls if name))

    # The operator's own calls ----------------------------------------------------------------

    def workloads(self) -> list[JsonObject]:
        self._call("workloads", "")
        return [copy.deepcopy(self.objects[name]) for name in sorted(self.objects)]

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
        self._call("submit", task.name)
        current = self.objects.get(task.name)
        if current is None:
            raise TaskNotFoundError(task.name)
        if is_submitted(current):
            raise TaskExistsError(task.task_id)
        return _record(self._write(current, submitted_workload(current, task, task.submitted_at)))

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
        obj, record = self._current(task_id, revision)
        return _record(self._write(obj, finalized_workload(obj, record, now)))

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
        else:
            written["status"] = copy.deepcopy(body["status"])
        written["metadata"]["resourceVersion"] = str(next(self._versions))
        if written["metadata"].get("deletionTimestamp") and not written["metadata"]["finalizers"]:
            del self.objects[name]
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


@dataclasses.dataclass
class StubExecutor:
    """The executor's part of a round, counted."""

    rounds: int = 0

    def run_round(self) -> RoundReport:
        self.rounds += 1
        return RoundReport(due=0, advanced=0, finalized=0, errors=0, seconds=0.0)

    def seconds_until_due(self) -> float:
        return 1.0

    def in_parallel(self, work: Callable[[Any], str], items: Sequence[Any]) -> list[str]:
        return [work(item) for item in items]


class Renderer:
    """Renders each Workload as one pod, or refuses those named in ``refuse``; remembers what
    it was given."""

    def __init__(self, refuse: Mapping[str, str] | None = None) -> None:
        self.refuse = dict(refuse or {})
        self.given: list[JsonObject] = []

    def __call__(self, workload: JsonObject) -> Sequence[Mapping[str, Any]]:
        self.given.append(workload)
        name = _name(workload)
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

    def round(self) -> OperatorRound:
        report = self.operator.run_round()
        assert report is not None, "a round of the leader"
        return report


def harness(*, refuse: Mapping[str, str] | None = None, leads: bool = True) -> Harness:
    store, executor = FakeWorkloads(), StubExecutor()
    render, leadership = Renderer(refuse), Leadership(leads)
    operator = WorkloadOperator(
        store,
        executor,  # type: ignore[arg-type]
        render,
        clock=lambda: T0,
        leads=leadership,
    )
    return Harness(store, executor, render, leadership, operator)


def counts(report: OperatorRound) -> tuple[int, int, int, int]:
    return report.submitted, report.refused, report.released, report.errors


# What a round does for each Workload -------------------------------------------------------------


def test_a_new_workload_is_held_rendered_from_the_held_copy_and_submitted() -> None:
    h = harness()
    h.store.add("notebook", finalizers=["example.com/keep"])
    report = h.round()
    assert counts(report) == (1, 0, 0, 0)
    assert h.executor.rounds == 1
    stored = h.store.objects["notebook"]
    assert stored["metadata"]["finalizers"] == ["example.com/keep", WORKLOAD_FINALIZER]
    (rendered,) = h.render.given
    assert WORKLOAD_FINALIZER in rendered["metadata"]["finalizers"], "rendered once held"
    record = _record(stored)
    assert record.task_id == task_id_of(stored)
    assert (record.revision, record.phase, record.task.backend) == (
        1,
        Phase.UNDEFINED,
        OPERATOR_BACKEND,
    )
    assert record.task.manifests == (pod_manifest("notebook"),)
    assert record.task.owner is not None
    assert (record.task.owner.name, record.task.owner.uid) == (
        "notebook",
        stored["metadata"]["uid"],
    )
    assert record.task.submitted_at == T0
    assert [method for method, _ in h.store.calls] == [
        "workloads",
        "record",
        "hold",
        "submit",
    ]
    # The next round finds it submitted: nothing more to do for it.
    assert counts(h.round()) == (0, 0, 0, 0)
    assert len(h.render.given) == 1


def test_a_workload_that_cannot_be_rendered_is_recorded_refused_then_let_go() -> None:
    h = harness(refuse={"notebook": "compute: no node pool has h100"})
    h.store.add("notebook")
    assert counts(h.round()) == (0, 1, 0, 0)
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
    assert counts(h.round()) == (0, 0, 1, 0)
    assert not h.store.objects["notebook"]["metadata"].get("finalizers")
    assert _record(h.store.objects["notebook"]).phase is Phase.PERMANENT_FAILURE


def _finalized_status(store: FakeWorkloads, name: str) -> dict[str, Any]:
    """The status of a Workload ``name`` whose task ended and was finalized."""
    scratch = FakeWorkloads()
    read = scratch.add(name)
    task_id = _record(scratch._write(read, submitted_workload(read, _task(read), T0))).task_id
    record = scratch.advance(task_id, 1, {}, PhaseInfo(Phase.SUCCESS, 1), T0)
    scratch.mark_finalized(task_id, record.revision, T0)
    status: dict[str, Any] = scratch.objects[name]["status"]
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
    assert counts(h.round()) == (0, 0, 1, 0)
    assert ("notebook" not in h.store.objects) is gone
    if not gone:
        remaining = h.store.objects["notebook"]["metadata"]["finalizers"]
        assert remaining == [name for name in finalizers if name != WORKLOAD_FINALIZER]
    assert counts(h.round()) == (0, 0, 0, 0), "let go once"
    assert h.render.given == []


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
    assert counts(h.round()) == (0, 0, released, 0)
    assert h.render.given == []
    assert ("submit", "notebook") not in h.store.calls
    if released:
        assert "notebook" not in h.store.objects


# Leadership ------------------------------------------------------------------------------------


def test_a_replica_that_does_not_lead_does_nothing_at_all() -> None:
    h = harness(leads=False)
    h.store.add("new")
    h.store.add("done", finalizers=[WORKLOAD_FINALIZER], status=_finalized_status(h.store, "done"))
    assert h.operator.run_round() is None
    assert h.store.calls == []
    assert h.executor.rounds == 0
    assert h.render.given == []


def test_a_leader_that_loses_leadership_mid_round_stops_at_the_next_workload() -> None:
    h = harness()
    for name in ("a", "b", "c"):
        h.store.add(name)

    def lose_leadership(method: str, name: str) -> None:
        if (method, name) == ("submit", "a"):
            h.leadership.leads = False

    h.store.before = lose_leadership
    assert h.operator.run_round() is None
    acted_on = {name for method, name in h.store.calls if method not in ("workloads", "record")}
    assert acted_on == {"a"}, "every Workload is read first; only the first was acted on"
    assert h.executor.rounds == 0
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
    report = h.round()
    assert (report.submitted, report.errors) == (2, errors)
    assert h.executor.rounds == 1
    for name in ("a", "c"):
        assert is_submitted(h.store.objects[name]), name
    assert not is_submitted(h.store.objects["b"])
    # The next round decides again on a fresh read, and does it.
    h.round()
    assert is_submitted(h.store.objects["b"])


def test_a_workload_whose_record_cannot_be_read_is_skipped() -> None:
    h = harness()
    h.store.add("a")
    h.store.add("b", status={"task": {"id": "junk", "revision": 1}})
    h.store.add("c")
    report = h.round()
    assert counts(report) == (2, 0, 0, 0)
    assert [_name(given) for given in h.render.given] == ["a", "c"]


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
        yield (
            WorkloadOperator(store, executor, Renderer(), clock=clock, leads=lambda: True),
            store,
        )


def test_a_workload_is_launched_owned_by_it_aborted_when_deleted_and_let_go(
    engine: tuple[WorkloadOperator, FakeWorkloads], kube: FakeKubernetes, clock: Clock
) -> None:
    operator, store = engine
    store.add("notebook")
    first = operator.run_round()
    assert first is not None
    assert (first.submitted, first.tasks.advanced) == (1, 1)
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
    last: dict[str, Any] = {}
    for _ in range(6):
        clock.advance(2)
        operator.run_round()
        if "notebook" not in store.objects:
            break
        last = copy.deepcopy(store.objects["notebook"])
    assert "notebook" not in store.objects, store.objects.get("notebook")
    assert kube.calls["delete"] == 1, "the pod, once"
    assert [entry.phase for entry in history_of(last)] == [Phase.QUEUED, Phase.ABORTED]
    assert _record(last).finalized is True


def test_a_burst_of_new_workloads_is_submitted_in_turns_with_the_tasks_rounds() -> None:
    h = harness()
    h.operator = WorkloadOperator(
        h.store,
        h.executor,  # type: ignore[arg-type]
        h.render,
        clock=lambda: T0,
        leads=h.leadership,
        submissions_per_round=2,
    )
    for name in ("a", "b", "c", "d", "e"):
        h.store.add(name)
    assert [counts(h.round())[0] for _ in range(4)] == [2, 2, 1, 0]
    assert h.executor.rounds == 4, "the tasks' rounds run between the turns"
    with pytest.raises(ValueError, match="submissions_per_round: must be at least 1, got 0"):
        WorkloadOperator(
            h.store,
            h.executor,  # type: ignore[arg-type]
            h.render,
            clock=lambda: T0,
            leads=h.leadership,
            submissions_per_round=0,
        )
