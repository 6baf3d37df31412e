"""The task store over Workloads, over real HTTP against the API-server emulator with podwright's
Workload CRD: each replica has its own client, and its cache is kept by a real ``Reflector``.

The port's contract (``tests/adapters/test_sqlite_store.py``'s cases, where they apply), then
what is the cluster's own: of two replicas writing at one revision exactly one wins; a write
that lost to another writer (the compliance writer, a label) is stale and succeeds on a fresh
read; a replica that may not write sends nothing; the cache never goes back to an older copy; a
record that cannot be read is skipped, not fatal; podwright's finalizer comes and goes alone.

A replica whose watch lags is made so explicitly: its reflector is stopped (``freeze``) and a
new one lists again (``rewatch``), so no test depends on how fast a watch delivers.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.adapters.kubernetes.reflector import Reflector
from podwright.adapters.kubernetes.workload_store import WorkloadCache, WorkloadTaskStore
from podwright.core.cluster_resources import (
    API_VERSION,
    SUBMITTED_BY_ANNOTATION,
    WORKLOAD_FINALIZER,
    WORKLOAD_KIND,
)
from podwright.core.crds import custom_resource_definitions
from podwright.core.lifecycle.objects import JsonObject, condition, section, text
from podwright.core.lifecycle.phases import (
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    ReasonInfo,
)
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType
from podwright.engine.task_store import (
    AttachedEvent,
    HistoryEntry,
    StaleRevisionError,
    StoreUnavailableError,
    TaskExistsError,
    TaskNotFoundError,
    TaskRecord,
)
from podwright.engine.workload_tasks import (
    FINALIZED_ANNOTATION,
    advanced_workload,
    new_task,
    record_of,
    submitted_workload,
    task_id_of,
)
from tests.k8s_emulator import Emulator, Fault
from tests.kube.support import eventually, write_kubeconfig

NAMESPACE = "research"
T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SPEC = {"type": "training", "image": "trainer:1", "command": "python train.py"}
MANIFESTS = (
    {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "resnet", "namespace": NAMESPACE},
        "spec": {"backoffLimit": 0, "template": {"spec": {"containers": [{"name": "main"}]}}},
    },
)
SYNC_SECONDS = 20.0
WRITES = ("create", "update", "patch", "delete")
COMPLIANCE = {
    "enforcement": "warn",
    "findings": [{"field": "image", "rule": "options", "message": "not an allowed image"}],
}
POLICY_COMPLIANT = {
    "type": "PolicyCompliant",
    "status": "False",
    "reason": "PolicyViolated",
    "message": "image: not an allowed image",
    "lastTransitionTime": "2026-11-21T11:00:00Z",
}


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ref(name: str) -> ObjectRef:
    return ObjectRef(API_VERSION, WORKLOAD_KIND, NAMESPACE, name)


def version_of(obj: JsonObject) -> str:
    return text(section(obj, "metadata"), "resourceVersion")


class Replica:
    """One operator replica's task store: its own client, its cache, its reflector."""

    def __init__(
        self,
        kubeconfig: Path,
        *,
        may_write: Callable[[], bool],
        on_phase: Callable[[JsonObject, TaskRecord, PhaseInfo], None] | None,
    ) -> None:
        self.client = KubernetesClient(connect(str(kubeconfig)))
        self.cache = WorkloadCache()
        self.store = WorkloadTaskStore(
            self.client, self.cache, may_write=may_write, on_phase=on_phase
        )
        self.reflector: Reflector | None = None
        self.rewatch()

    def rewatch(self) -> None:
        """Follow the Workloads again: list (so the cache is current when this returns), then
        watch."""
        self.freeze()
        self.reflector = Reflector(
            self.client, API_VERSION, WORKLOAD_KIND, self.cache, namespace=NAMESPACE
        ).start()
        assert self.reflector.wait_synced(SYNC_SECONDS), "the Workloads were not listed"

    def freeze(self) -> None:
        """Stop following the Workloads: the cache keeps what it has (a watch that lags)."""
        if self.reflector is not None:
            self.reflector.stop()
            self.reflector = None

    def sees(self, name: str, version: str) -> JsonObject:
        """The Workload once the cache holds it at ``version``."""

        def cached() -> JsonObject | None:
            obj = self.cache.get(NAMESPACE, name)
            return obj if obj is not None and version_of(obj) == version else None

        return eventually(cached, timeout=SYNC_SECONDS)

    def close(self) -> None:
        self.freeze()
        self.client.close()


@dataclasses.dataclass
class Cluster:
    emulator: Emulator
    client: KubernetesClient
    """The test's own client: another writer's requests (a person, the compliance writer)."""
    kubeconfig: Path
    replicas: list[Replica] = dataclasses.field(default_factory=list)

    def replica(
        self,
        *,
        may_write: Callable[[], bool] = lambda: True,
        on_phase: Callable[[JsonObject, TaskRecord, PhaseInfo], None] | None = None,
    ) -> Replica:
        started = Replica(self.kubeconfig, may_write=may_write, on_phase=on_phase)
        self.replicas.append(started)
        return started

    def create(self, name: str, **metadata: Any) -> dict[str, Any]:
        return self.client.create(
            {
                "apiVersion": API_VERSION,
                "kind": WORKLOAD_KIND,
                "metadata": {"name": name, "namespace": NAMESPACE, **metadata},
                "spec": dict(SPEC),
            }
        )

    def get(self, name: str) -> dict[str, Any]:
        return self.client.get(ref(name))

    def writes(self) -> int:
        """The write requests the API server has answered so far (refused ones included)."""
        return sum(self.emulator.requests(verb) for verb in WRITES)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh emulator with podwright's Workload CRD (only it: the others' schemas take
    seconds to check, and no test here uses them) and the namespace ``research``."""
    (workloads,) = [
        crd
        for crd in custom_resource_definitions()
        if crd["spec"]["names"]["kind"] == WORKLOAD_KIND  # type: ignore[index]
    ]
    with Emulator() as emulator:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", emulator.url)
        client = KubernetesClient(connect(str(kubeconfig)))
        running = Cluster(emulator, client, kubeconfig)
        try:
            client.apply(workloads, field_manager="test")
            client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            )
            yield running
        finally:
            for replica in running.replicas:
                replica.close()
            client.close()


def submit(cluster: Cluster, replica: Replica, name: str, at_time: datetime = T0) -> TaskRecord:
    """A new Workload ``name``, its task submitted through ``replica``."""
    created = cluster.create(name)
    seen = replica.sees(name, version_of(created))
    return replica.store.submit(new_task(seen, MANIFESTS, at_time))


def on_server(cluster: Cluster, name: str) -> TaskRecord:
    """The record as the API server holds it."""
    found = record_of(cluster.get(name))
    assert found is not None
    return found


# The port's contract ---------------------------------------------------------------------------


def test_a_submitted_task_reads_back_whole(cluster: Cluster) -> None:
    replica = cluster.replica()
    created = cluster.create("resnet")
    task = new_task(replica.sees("resnet", version_of(created)), MANIFESTS, T0)
    assert task.task_id == f"resnet-{created['metadata']['uid'].replace('-', '')[:8]}"
    replica.freeze()  # what follows is read from the write's answer, not from the watch
    record = replica.store.submit(task)
    assert record.task == task
    assert (record.revision, record.phase, record.phase_version) == (1, Phase.UNDEFINED, 0)
    assert (record.abort_requested, record.finalized, record.plugin_state) == (False, False, {})
    assert replica.store.get(task.task_id) == record
    assert replica.store.history(task.task_id) == []
    assert replica.store.events(task.task_id) == []
    assert on_server(cluster, "resnet") == record
    assert replica.store.list_tasks() == [record]


def test_who_submitted_a_task_is_its_workloads_annotation_through_every_write(
    cluster: Cluster,
) -> None:
    """The annotation podwright's mutating webhook writes (written here as it would be: no
    webhook serves this emulator) names who submitted the task, from the cache, from the writes'
    answers and on the API server; a Workload created before submitters were recorded names
    nobody."""
    replica = cluster.replica()
    created = cluster.create("resnet", annotations={SUBMITTED_BY_ANNOTATION: "alice"})
    task = new_task(replica.sees("resnet", version_of(created)), MANIFESTS, T0)
    assert task.submitted_by == "alice"
    record = replica.store.submit(task)
    advanced = replica.store.advance(record.task_id, 1, {}, PhaseInfo(Phase.QUEUED, 1), at(1))
    assert advanced.task.submitted_by == "alice"
    assert replica.store.get(task.task_id).task.submitted_by == "alice"
    assert on_server(cluster, "resnet").task.submitted_by == "alice"
    submit(cluster, replica, "older")
    assert {found.task.name: found.task.submitted_by for found in replica.store.list_tasks()} == {
        "resnet": "alice",
        "older": "",
    }


def test_ids_are_unique_and_unknown_ids_are_reported(cluster: Cluster) -> None:
    replica = cluster.replica()
    record = submit(cluster, replica, "resnet")
    with pytest.raises(TaskExistsError, match=f"task {record.task_id} was already submitted"):
        replica.store.submit(record.task)
    for call in (replica.store.get, replica.store.history, replica.store.events):
        with pytest.raises(TaskNotFoundError, match="no Workload holds task nope"):
            call("nope")
    with pytest.raises(TaskNotFoundError):
        replica.store.request_abort("nope", T0)
    elsewhere = dataclasses.replace(record.task, task_id="ghost-00000000", name="ghost")
    with pytest.raises(TaskNotFoundError, match=f"no Workload {NAMESPACE}/ghost"):
        replica.store.submit(elsewhere)


def test_advances_append_history_on_phase_changes_and_every_attached_event(
    cluster: Cluster,
) -> None:
    told: list[tuple[str, int, Phase]] = []

    def on_phase(workload: JsonObject, record: TaskRecord, info: PhaseInfo) -> None:
        told.append((version_of(workload), record.revision, info.phase))

    replica = cluster.replica(on_phase=on_phase)
    task_id = submit(cluster, replica, "resnet").task_id
    store = replica.store
    queued = PhaseInfo(Phase.QUEUED, 1, "Unschedulable", occurred_at=T0)
    record = store.advance(task_id, 1, {"version": 1, "managerPhase": "Started"}, queued, T0)
    record = store.advance(task_id, record.revision, {"version": 1}, queued, at(1))
    running = PhaseInfo(
        Phase.RUNNING,
        2,
        "",
        additional_reasons=(ReasonInfo("Pulled: image pulled", T0), ReasonInfo("Started", None)),
    )
    record = store.advance(task_id, record.revision, {"version": 1, "x": 2}, running, at(5))
    # A new reason in the same phase is a new version in the history, but no phase change: no
    # Event is told of it.
    still_running = PhaseInfo(Phase.RUNNING, 3, "serving")
    record = store.advance(task_id, record.revision, {"version": 1, "x": 2}, still_running, at(6))
    failed = PhaseInfo(
        Phase.PERMANENT_FAILURE,
        4,
        "OOMKilled",
        error=ExecutionError("OOMKilled", "the container ran out of memory", ErrorKind.USER),
        occurred_at=at(9),
    )
    record = store.advance(task_id, record.revision, {"version": 1, "x": 3}, failed, at(10))
    assert (record.revision, record.phase, record.phase_version, record.reason) == (
        6,
        Phase.PERMANENT_FAILURE,
        4,
        "OOMKilled",
    )
    assert (record.plugin_state, record.updated_at) == ({"version": 1, "x": 3}, at(10))
    assert store.history(task_id) == [
        HistoryEntry(Phase.QUEUED, 1, "Unschedulable", T0),
        HistoryEntry(Phase.RUNNING, 2, "", at(5)),
        HistoryEntry(Phase.RUNNING, 3, "serving", at(6)),
        HistoryEntry(
            Phase.PERMANENT_FAILURE,
            4,
            "OOMKilled",
            at(9),
            "OOMKilled",
            "the container ran out of memory",
            ErrorKind.USER,
        ),
    ]
    assert store.events(task_id) == [
        AttachedEvent("Pulled: image pulled", T0),
        AttachedEvent("Started", None),
    ]
    assert on_server(cluster, "resnet") == record
    # Told of each new phase (not of the second Queued, nor of Running's new reason), with the
    # Workload as stored.
    stored = cluster.get("resnet")
    assert [(revision, phase) for _version, revision, phase in told] == [
        (2, Phase.QUEUED),
        (4, Phase.RUNNING),
        (6, Phase.PERMANENT_FAILURE),
    ]
    assert told[-1][0] == version_of(stored)
    status = stored["status"]
    assert (status["phase"], status["message"]) == (
        "PermanentFailure",
        "the container ran out of memory",
    )


def test_a_write_from_a_stale_read_is_refused_without_a_request_and_changes_nothing(
    cluster: Cluster,
) -> None:
    replica = cluster.replica()
    task_id = submit(cluster, replica, "resnet").task_id
    replica.store.request_abort(task_id, T0)
    writes = cluster.writes()
    with pytest.raises(StaleRevisionError, match=f"task {task_id} is at revision 2, not 1"):
        replica.store.advance(
            task_id,
            1,
            {"stale": True},
            PhaseInfo(Phase.RUNNING, 1, "", additional_reasons=(ReasonInfo("x"),)),
            T0,
        )
    with pytest.raises(StaleRevisionError):
        replica.store.mark_finalized(task_id, 1, T0)
    with pytest.raises(StaleRevisionError):
        replica.store.delete(task_id, 1)
    assert cluster.writes() == writes
    record = on_server(cluster, "resnet")
    assert (record.revision, record.phase, record.plugin_state) == (2, Phase.UNDEFINED, {})
    assert replica.store.history(task_id) == []
    assert replica.store.events(task_id) == []


def test_abort_requests_are_idempotent_and_finalized_tasks_leave_the_active_set(
    cluster: Cluster,
) -> None:
    replica = cluster.replica()
    later = submit(cluster, replica, "later", at(1))
    first = submit(cluster, replica, "first", T0)
    store = replica.store
    writes = cluster.writes()
    assert store.request_abort(first.task_id, T0).revision == 2
    assert store.request_abort(first.task_id, T0).revision == 2
    assert cluster.writes() == writes + 1, "the second request writes nothing"
    assert store.get(first.task_id).abort_requested is True
    assert on_server(cluster, "first").abort_requested is True
    assert [record.task_id for record in store.list_tasks()] == [first.task_id, later.task_id]
    writes = cluster.writes()
    finalized = store.mark_finalized(first.task_id, 2, at(2))
    assert (finalized.finalized, finalized.revision) == (True, 2)
    assert cluster.writes() == writes + 1, "finalized and let go in one write"
    assert [record.task_id for record in store.list_tasks(active_only=True)] == [later.task_id]
    assert [record.task_id for record in store.list_tasks()] == [first.task_id, later.task_id]
    assert on_server(cluster, "first").finalized is True
    metadata = cluster.get("first")["metadata"]
    assert WORKLOAD_FINALIZER not in (metadata.get("finalizers") or [])
    assert metadata["annotations"][FINALIZED_ANNOTATION] == first.task_id


def test_a_task_is_deleted_with_its_workload_only_at_the_revision_read(cluster: Cluster) -> None:
    replica = cluster.replica()
    record = submit(cluster, replica, "resnet")
    task_id = record.task_id
    replica.store.request_abort(task_id, T0)  # a write since 'record' was read
    with pytest.raises(StaleRevisionError, match=f"task {task_id} is at revision 2, not 1"):
        replica.store.delete(task_id, record.revision)
    assert "deletionTimestamp" not in cluster.get("resnet")["metadata"]
    replica.store.delete(task_id, 2)
    with pytest.raises(NotFoundError):
        cluster.get("resnet")

    def forgotten() -> bool:
        try:
            replica.store.get(task_id)
        except TaskNotFoundError:
            return True
        return False

    eventually(forgotten, timeout=SYNC_SECONDS)
    assert replica.store.list_tasks() == []


def test_a_delete_that_lost_to_another_writer_is_refused_by_the_api_server(
    cluster: Cluster,
) -> None:
    replica = cluster.replica()
    task_id = submit(cluster, replica, "resnet").task_id
    replica.freeze()
    cluster.client.patch(
        ref("resnet"), {"metadata": {"labels": {"team": "vision"}}}, PatchType.MERGE
    )
    writes = cluster.writes()
    with pytest.raises(StaleRevisionError):
        replica.store.delete(task_id, 1)
    assert cluster.writes() == writes + 1, "the API server refused it"
    assert "deletionTimestamp" not in cluster.get("resnet")["metadata"]


def test_a_deleted_workload_held_by_podwright_stays_with_its_task_to_abort(
    cluster: Cluster,
) -> None:
    replica = cluster.replica()
    created = cluster.create("resnet", finalizers=[WORKLOAD_FINALIZER])
    seen = replica.sees("resnet", version_of(created))
    task_id = replica.store.submit(new_task(seen, MANIFESTS, T0)).task_id
    replica.store.delete(task_id, 1)
    deleting = cluster.get("resnet")
    assert deleting["metadata"]["deletionTimestamp"]
    replica.sees("resnet", version_of(deleting))
    record = replica.store.get(task_id)
    assert (record.abort_requested, record.revision) == (True, 1)


# Two replicas, and other writers ---------------------------------------------------------------


def test_of_two_replicas_advancing_at_one_revision_exactly_one_wins(cluster: Cluster) -> None:
    first, second = cluster.replica(), cluster.replica()
    record = submit(cluster, first, "resnet")
    second.sees("resnet", version_of(cluster.get("resnet")))
    both = threading.Barrier(2)
    won: dict[str, TaskRecord] = {}
    lost: dict[str, BaseException] = {}

    def advance(name: str, replica: Replica) -> None:
        both.wait(timeout=SYNC_SECONDS)
        info = PhaseInfo(Phase.QUEUED, 1, f"launched by {name}")
        try:
            won[name] = replica.store.advance(record.task_id, 1, {"by": name}, info, at(1))
        except StaleRevisionError as error:
            lost[name] = error

    threads = [
        threading.Thread(target=advance, args=(name, replica))
        for name, replica in (("first", first), ("second", second))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=SYNC_SECONDS)
    assert len(won) == len(lost) == 1, (won, lost)
    ((winner, written),) = won.items()
    assert written.revision == 2
    stored = on_server(cluster, "resnet")
    assert (stored.revision, stored.plugin_state, stored.reason) == (
        2,
        {"by": winner},
        f"launched by {winner}",
    )


def test_a_replica_whose_cache_lags_loses_and_wins_once_it_read_again(cluster: Cluster) -> None:
    first, second = cluster.replica(), cluster.replica()
    task_id = submit(cluster, first, "resnet").task_id
    second.sees("resnet", version_of(cluster.get("resnet")))
    second.freeze()
    first.store.advance(task_id, 1, {"by": "first"}, PhaseInfo(Phase.QUEUED, 1), at(1))
    writes = cluster.writes()
    with pytest.raises(StaleRevisionError, match=f"Workload {NAMESPACE}/resnet changed"):
        second.store.advance(task_id, 1, {"by": "second"}, PhaseInfo(Phase.QUEUED, 1), at(1))
    assert cluster.writes() == writes + 1, "sent, and refused by the API server"
    assert on_server(cluster, "resnet").plugin_state == {"by": "first"}
    second.rewatch()
    fresh = second.store.get(task_id)
    assert (fresh.revision, fresh.plugin_state) == (2, {"by": "first"})
    running = PhaseInfo(Phase.RUNNING, 2)
    written = second.store.advance(task_id, 2, {"by": "second"}, running, at(2))
    assert on_server(cluster, "resnet") == written
    assert [entry.phase for entry in second.store.history(task_id)] == [
        Phase.QUEUED,
        Phase.RUNNING,
    ]


def _label(cluster: Cluster, obj: JsonObject) -> None:
    body = {"metadata": {"labels": {"team": "vision"}}}
    cluster.client.patch(ref("resnet"), body, PatchType.MERGE)


def _assess(cluster: Cluster, obj: JsonObject) -> None:
    """What the compliance writer sends: the conditions whole, its own added, conditional on
    the version it read."""
    conditions = [*section(obj, "status").get("conditions", []), POLICY_COMPLIANT]
    body = {
        "metadata": {"resourceVersion": version_of(obj)},
        "status": {"conditions": conditions, "compliance": COMPLIANCE},
    }
    cluster.client.patch_status(ref("resnet"), body, PatchType.MERGE)


def _kept_label(obj: JsonObject) -> bool:
    return bool(section(obj, "metadata").get("labels") == {"team": "vision"})


def _kept_assessment(obj: JsonObject) -> bool:
    return bool(
        condition(obj, "PolicyCompliant") == POLICY_COMPLIANT
        and section(obj, "status").get("compliance") == COMPLIANCE
    )


@pytest.mark.parametrize(
    ("other_write", "kept"),
    [
        pytest.param(_label, _kept_label, id="a-label"),
        pytest.param(_assess, _kept_assessment, id="the-compliance-writers-status"),
    ],
)
def test_a_write_that_lost_to_another_writer_is_stale_and_succeeds_on_a_fresh_read(
    cluster: Cluster,
    other_write: Callable[[Cluster, JsonObject], None],
    kept: Callable[[JsonObject], bool],
) -> None:
    replica = cluster.replica()
    task_id = submit(cluster, replica, "resnet").task_id
    queued = replica.store.advance(task_id, 1, {}, PhaseInfo(Phase.QUEUED, 1), at(1))
    replica.freeze()
    other_write(cluster, cluster.get("resnet"))
    running = PhaseInfo(Phase.RUNNING, 2)
    with pytest.raises(StaleRevisionError):
        replica.store.advance(task_id, queued.revision, {"x": 1}, running, at(2))
    assert on_server(cluster, "resnet").phase is Phase.QUEUED
    replica.rewatch()
    written = replica.store.advance(task_id, queued.revision, {"x": 1}, running, at(2))
    stored = cluster.get("resnet")
    assert record_of(stored) == written
    assert kept(stored), stored
    ready = condition(stored, "Ready")
    assert ready is not None
    assert ready["status"] == "True"


def _operations(cluster: Cluster, replica: Replica) -> dict[str, Callable[[], object]]:
    """One write of each kind the store makes: on a new Workload (no task, not held) and on one
    whose task is Queued (held)."""
    fresh = cluster.create("fresh")
    held = cluster.create("held", finalizers=[WORKLOAD_FINALIZER])
    new = replica.sees("fresh", version_of(fresh))
    task_id = replica.store.submit(
        new_task(replica.sees("held", version_of(held)), MANIFESTS, T0)
    ).task_id
    replica.store.advance(task_id, 1, {}, PhaseInfo(Phase.QUEUED, 1), at(1))
    store = replica.store
    return {
        "submit": lambda: store.submit(new_task(new, MANIFESTS, T0)),
        "advance": lambda: store.advance(task_id, 2, {}, PhaseInfo(Phase.RUNNING, 2), at(2)),
        "request_abort": lambda: store.request_abort(task_id, at(2)),
        "mark_finalized": lambda: store.mark_finalized(task_id, 2, at(2)),
        "delete": lambda: store.delete(task_id, 2),
        "hold": lambda: store.hold(new),
        "release": lambda: store.release(replica.cache.get(NAMESPACE, "held") or {}),
        "refuse": lambda: store.refuse(new, task_id_of(new), "cannot render", at(2)),
    }


@pytest.mark.parametrize(
    "operation",
    [
        "submit",
        "advance",
        "request_abort",
        "mark_finalized",
        "delete",
        "hold",
        "release",
        "refuse",
    ],
)
def test_a_replica_that_may_not_write_refuses_every_write_without_a_request(
    cluster: Cluster, operation: str
) -> None:
    leading = threading.Event()
    leading.set()
    replica = cluster.replica(may_write=leading.is_set)
    operations = _operations(cluster, replica)
    before = {name: cluster.get(name) for name in ("fresh", "held")}
    writes = cluster.writes()
    leading.clear()
    with pytest.raises(StoreUnavailableError, match="does not lead"):
        operations[operation]()
    assert cluster.writes() == writes
    assert {name: cluster.get(name) for name in ("fresh", "held")} == before


def test_a_replica_that_leads_makes_each_of_those_writes(cluster: Cluster) -> None:
    """The counterpart of the test above: each operation there does write when allowed."""
    replica = cluster.replica()
    operations = _operations(cluster, replica)
    for name in ("hold", "submit", "advance", "request_abort"):
        writes = cluster.writes()
        operations[name]()
        assert cluster.writes() == writes + 1, name


# The cache ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arrives_as",
    [
        pytest.param("watch-event", id="a-late-watch-event"),
        pytest.param("own-write", id="a-late-write-answer"),
        pytest.param("relist", id="a-list-older-than-a-write"),
    ],
)
def test_the_cache_never_goes_back_to_an_older_version(cluster: Cluster, arrives_as: str) -> None:
    replica = cluster.replica()
    task_id = submit(cluster, replica, "resnet").task_id
    older = copy.deepcopy(replica.cache.get(NAMESPACE, "resnet"))
    assert older is not None
    newer = replica.store.advance(task_id, 1, {"n": 1}, PhaseInfo(Phase.QUEUED, 1), at(1))
    version = version_of(cluster.get("resnet"))
    replica.sees("resnet", version)
    replica.freeze()  # nothing else arrives meanwhile
    if arrives_as == "watch-event":
        replica.cache.apply("MODIFIED", older)
    elif arrives_as == "own-write":
        replica.cache.put(older)
    else:
        replica.cache.replace([older])
    cached = replica.cache.get(NAMESPACE, "resnet")
    assert cached is not None
    assert version_of(cached) == version
    assert replica.store.get(task_id) == newer


def test_a_deleted_and_recreated_workload_replaces_the_old_one() -> None:
    """Another uid is another object: its version is not compared with the old one's."""
    cache = WorkloadCache()
    old = {"metadata": {"namespace": NAMESPACE, "name": "w", "uid": "a", "resourceVersion": "9"}}
    new = {"metadata": {"namespace": NAMESPACE, "name": "w", "uid": "b", "resourceVersion": "5"}}
    cache.apply("ADDED", old)
    cache.apply("ADDED", new)
    assert cache.get(NAMESPACE, "w") == new


def test_a_workload_deleted_and_created_again_is_another_task(cluster: Cluster) -> None:
    replica = cluster.replica()
    old = submit(cluster, replica, "resnet")
    cluster.client.delete(ref("resnet"))

    def forgotten() -> bool:
        return replica.cache.get(NAMESPACE, "resnet") is None

    eventually(forgotten, timeout=SYNC_SECONDS)
    new = submit(cluster, replica, "resnet", at(1))
    assert new.task_id != old.task_id
    assert replica.store.get(new.task_id) == new
    with pytest.raises(TaskNotFoundError):
        replica.store.get(old.task_id)
    assert replica.store.list_tasks() == [new]


def test_a_record_is_decoded_once_per_version_and_an_older_copy_as_it_is() -> None:
    cache = WorkloadCache()
    metadata = {"namespace": NAMESPACE, "name": "w", "uid": "0a1b2c3d-e", "resourceVersion": "5"}
    read = {"apiVersion": API_VERSION, "kind": WORKLOAD_KIND, "metadata": metadata, "spec": SPEC}
    first = submitted_workload(read, new_task(read, MANIFESTS, T0), T0)
    record = record_of(first)
    assert record is not None
    second = advanced_workload(first, record, {}, PhaseInfo(Phase.QUEUED, 1), at(1)).workload
    second = {**second, "metadata": {**metadata, "resourceVersion": "6"}}
    cache.apply("ADDED", second)
    current = cache.get(NAMESPACE, "w")
    assert current is not None
    decoded = cache.record(current)
    assert decoded is not None
    assert decoded.revision == 2
    assert cache.record(current) is decoded, "decoded once"
    older = cache.record(first)
    assert older is not None
    assert older.revision == 1


def _at(name: str, uid: str, version: int) -> dict[str, Any]:
    return {
        "metadata": {
            "namespace": NAMESPACE,
            "name": name,
            "uid": uid,
            "resourceVersion": str(version),
        }
    }


def test_every_change_the_watch_shows_is_told_with_the_workloads_key() -> None:
    told: list[tuple[str, str]] = []
    cache = WorkloadCache(changed=told.append)
    cache.replace([_at("w", "a", 1), _at("v", "b", 2)])
    assert sorted(told) == [(NAMESPACE, "v"), (NAMESPACE, "w")]
    told.clear()
    cache.apply("MODIFIED", _at("w", "a", 3))
    cache.apply("MODIFIED", _at("w", "a", 3))  # the same version again: no change
    cache.apply("MODIFIED", _at("w", "a", 2))  # an older one: kept out, no change
    cache.apply("DELETED", _at("w", "a", 4))
    cache.apply("ADDED", _at("w", "c", 5))  # made again under the name
    assert told == [(NAMESPACE, "w")] * 3
    told.clear()
    cache.replace([_at("w", "c", 5)])  # "v" is gone, "w" unchanged
    assert told == [(NAMESPACE, "v")]


def test_the_stores_own_writes_and_their_echo_are_not_told() -> None:
    told: list[tuple[str, str]] = []
    cache = WorkloadCache(changed=told.append)
    cache.replace([_at("w", "a", 1)])
    told.clear()
    cache.put(_at("w", "a", 2))
    assert cache.get(NAMESPACE, "w") == _at("w", "a", 2)
    cache.apply("MODIFIED", _at("w", "a", 2))  # the watch delivers the write
    cache.replace([_at("w", "a", 2)])  # or a list does
    assert told == []


_GARBAGE = {
    "no-times": ({"task": {"id": "junk", "revision": 7}}, "needs submittedAt"),
    "unknown-phase": (
        {
            "phase": "Exploded",
            "task": {
                "id": "junk",
                "revision": 1,
                "submittedAt": "2026-11-21T12:00:00Z",
                "updatedAt": "2026-11-21T12:00:00Z",
            },
        },
        "status.phase",
    ),
}


@pytest.mark.parametrize("garbage", list(_GARBAGE))
def test_a_workload_whose_record_cannot_be_read_is_skipped_and_unavailable(
    cluster: Cluster, garbage: str, caplog: pytest.LogCaptureFixture
) -> None:
    replica = cluster.replica()
    good = submit(cluster, replica, "good")
    junk = cluster.create("junk")
    status, message = _GARBAGE[garbage]
    written = cluster.client.patch_status(ref("junk"), {"status": status}, PatchType.MERGE)
    replica.sees("junk", version_of(written))
    with caplog.at_level(logging.ERROR, logger="podwright.operator"):
        assert replica.store.list_tasks() == [good]
    assert f"Workload {NAMESPACE}/junk: " in caplog.text
    assert message in caplog.text
    with pytest.raises(StoreUnavailableError, match=f"Workload {NAMESPACE}/junk: .*{message}"):
        replica.store.get(task_id_of(junk))
    assert replica.store.list_tasks(active_only=True) == [good]


def test_a_history_that_cannot_be_read_is_unavailable(cluster: Cluster) -> None:
    """The port's errors are the store's whole error tree: a history entry of an unknown phase
    (written by something else) is the store's StoreUnavailableError, not a ValueError."""
    replica = cluster.replica()
    task_id = submit(cluster, replica, "resnet").task_id
    entry = {"phase": "Exploded", "version": 1, "occurredAt": "2026-11-21T12:00:00Z"}
    written = cluster.client.patch_status(
        ref("resnet"), {"status": {"task": {"history": [entry]}}}, PatchType.MERGE
    )
    replica.sees("resnet", version_of(written))
    with pytest.raises(StoreUnavailableError):
        replica.store.history(task_id)


# The finalizer, a refusal, the API server's errors ----------------------------------------------


def test_hold_and_release_add_and_remove_only_podwrights_finalizer(cluster: Cluster) -> None:
    replica = cluster.replica()
    created = cluster.create("resnet", finalizers=["example.com/keep"])
    seen = replica.sees("resnet", version_of(created))
    held = replica.store.hold(seen)
    assert held["metadata"]["finalizers"] == ["example.com/keep", WORKLOAD_FINALIZER]
    assert cluster.get("resnet")["metadata"]["finalizers"] == [
        "example.com/keep",
        WORKLOAD_FINALIZER,
    ]
    writes = cluster.writes()
    assert replica.store.hold(held) is held, "held already: nothing sent"
    assert cluster.writes() == writes
    replica.store.release(held)
    released = cluster.get("resnet")
    assert released["metadata"]["finalizers"] == ["example.com/keep"]
    assert replica.cache.get(NAMESPACE, "resnet") == released
    writes = cluster.writes()
    replica.store.release(released)
    assert cluster.writes() == writes, "released already: nothing sent"


def test_a_hold_from_a_stale_read_keeps_the_finalizer_another_added(cluster: Cluster) -> None:
    replica = cluster.replica()
    created = cluster.create("resnet")
    seen = replica.sees("resnet", version_of(created))
    replica.freeze()
    other = {"metadata": {"finalizers": ["example.com/other"]}}
    cluster.client.patch(ref("resnet"), other, PatchType.MERGE)
    with pytest.raises(StaleRevisionError):
        replica.store.hold(seen)
    assert cluster.get("resnet")["metadata"]["finalizers"] == ["example.com/other"]
    replica.rewatch()
    fresh = replica.cache.get(NAMESPACE, "resnet")
    assert fresh is not None
    replica.store.hold(fresh)
    assert cluster.get("resnet")["metadata"]["finalizers"] == [
        "example.com/other",
        WORKLOAD_FINALIZER,
    ]


def test_a_refused_workload_is_recorded_finalized(cluster: Cluster) -> None:
    replica = cluster.replica()
    created = cluster.create("resnet")
    seen = replica.sees("resnet", version_of(created))
    replica.store.refuse(seen, task_id_of(seen), "compute: no node pool has h100", at(3))
    record = replica.store.get(task_id_of(seen))
    assert (record.phase, record.reason, record.finalized) == (
        Phase.PERMANENT_FAILURE,
        "RenderFailed",
        True,
    )
    assert replica.store.list_tasks(active_only=True) == []
    assert on_server(cluster, "resnet") == record
    assert cluster.get("resnet")["status"]["message"] == "compute: no node pool has h100"


def test_the_api_servers_errors_are_the_ports(cluster: Cluster) -> None:
    replica = cluster.replica()
    task_id = submit(cluster, replica, "resnet").task_id
    cluster.emulator.inject(Fault(500, method="PUT", path="/status$"))
    with pytest.raises(StoreUnavailableError, match=f"Workload {NAMESPACE}/resnet: "):
        replica.store.advance(task_id, 1, {}, PhaseInfo(Phase.QUEUED, 1), at(1))
    assert on_server(cluster, "resnet").revision == 1
    replica.freeze()
    cluster.client.delete(ref("resnet"))
    with pytest.raises(TaskNotFoundError, match=f"Workload {NAMESPACE}/resnet is gone"):
        replica.store.advance(task_id, 1, {}, PhaseInfo(Phase.QUEUED, 1), at(1))


def test_the_cache_keeps_no_managed_fields_nor_kubectls_copy_and_the_server_keeps_both(
    cluster: Cluster,
) -> None:
    """What the cache drops (the largest parts of a Workload, which nothing here reads) the
    status updates made from it do not take from the object: the API server keeps an object's
    metadata on a status update (the status strategy), and its managedFields when a request has
    none (the field manager: apimachinery's ``managedfields`` leaves them as they were)."""
    last_applied = "kubectl.kubernetes.io/last-applied-configuration"
    created = cluster.client.apply(
        {
            "apiVersion": API_VERSION,
            "kind": WORKLOAD_KIND,
            "metadata": {
                "name": "applied",
                "namespace": NAMESPACE,
                "annotations": {last_applied: '{"kind": "Workload"}', "team": "vision"},
            },
            "spec": dict(SPEC),
        },
        field_manager="kubectl",
    )
    assert created["metadata"]["managedFields"]
    replica = cluster.replica()
    seen = replica.sees("applied", version_of(created))
    assert "managedFields" not in seen["metadata"]
    assert seen["metadata"]["annotations"] == {"team": "vision"}
    record = replica.store.submit(new_task(seen, MANIFESTS, T0))
    replica.store.advance(record.task_id, 1, {}, PhaseInfo(Phase.QUEUED, 1), at(1))
    stored = cluster.get("applied")
    assert stored["metadata"]["annotations"][last_applied] == '{"kind": "Workload"}'
    managers = {entry["manager"] for entry in stored["metadata"]["managedFields"]}
    assert "kubectl" in managers, stored["metadata"]["managedFields"]
