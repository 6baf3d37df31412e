"""The tasks of the cluster's operator: Workload resources, read and written as tasks.

A task submitted to the operator is a Workload (``metadata`` its name and namespace, ``spec``
the workload's spec with ``type`` beside it): the operator (the leader of its replicas) holds it
with its finalizer, renders it, runs its task and keeps the task's record in the Workload's
status. The cluster's policies, assets and profile apply, through its admission webhooks; a
refusal of the validating webhook is :class:`~podwright.api.errors.AdmissionDeniedError`, with
every issue.

The Workloads of a namespace (or of all) are listed into a :class:`WorkloadCache` and read
through a :class:`WorkloadTaskStore`, so a :class:`~podwright.api.client.Client` shows them as it
shows this machine's tasks. Nothing of a task's record is written here: an abort sets the
annotation ``podwright.dev/abort-requested`` (the operator aborts the task, the Workload stays)
and a delete deletes the Workload (the operator aborts the task and finalizes it, and the
Workload goes once it is finalized). A task is named by its id (``<name>-<first 8 hex digits of
the Workload's uid>``) or by its Workload's name. A Workload the operator has not taken yet
shows as its task would, phase Undefined, waiting for the operator
(:func:`~podwright.engine.workload_tasks.pending_record`). Watches follow Workloads
(:class:`WorkloadWatch`), each change waking a waiter (:class:`ChangeWaiter`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from podwright.adapters.kubernetes import (
    KubernetesClient,
    KubernetesConfigError,
    Reflector,
)
from podwright.adapters.kubernetes.workload_store import (
    WorkloadCache,
    WorkloadTaskStore,
    request_abort_annotation,
)
from podwright.api.backends import (
    OPERATOR,
    ClusterAccess,
    Identity,
    cluster_client,
    context_namespace,
    context_of,
    resolve_backend,
)
from podwright.api.errors import (
    AdmissionDeniedError,
    BackendError,
    BackendUnreachableError,
    InvalidInputError,
    TaskNotFoundError,
    TaskStoreUnavailableError,
)
from podwright.api.loading import Workload
from podwright.api.pipeline import check_runnable
from podwright.api.state import utc_now
from podwright.api.task_logs import ClusterLogTail, LogLine
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND
from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import resource_ref
from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ApiConnectionError,
    ConflictError,
    ForbiddenError,
    InvalidError,
    KubernetesError,
    NamespaceNotFoundError,
    NotFoundError,
    ObjectRef,
    QuotaExceededError,
)
from podwright.engine.plugin import PluginError
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import (
    AttachedEvent,
    HistoryEntry,
    TaskRecord,
    TaskStoreError,
)
from podwright.engine.task_store import (
    TaskNotFoundError as UnrecordedTaskError,
)
from podwright.engine.workload_tasks import (
    is_submitted,
    pending_record,
    task_id_of,
    workload_key,
)

WAITING = "waiting for the operator"
"""The reason of a Workload's task before the operator recorded it."""


@dataclasses.dataclass(frozen=True)
class OperatorTarget:
    """Where the Workloads are: the cluster (its kubeconfig context) and the namespace (None:
    every namespace)."""

    access: ClusterAccess
    cluster: str
    namespace: str | None
    default_namespace: str
    """The namespace of the kubeconfig's context (what a command without ``-n`` uses)."""

    def again(self, namespace: str | None = None) -> str:
        """The options a command needs to find the task again (``--backend operator -n x``)."""
        options = " --backend operator"
        chosen = namespace or self.namespace
        if chosen and chosen != self.default_namespace:
            options += f" -n {chosen}"
        if self.access.context is not None:
            options += f" --context {self.access.context}"
        if self.access.kubeconfig is not None:
            options += f" --kubeconfig {self.access.kubeconfig}"
        return options

    def backend(self) -> str:
        """The backend of the target's tasks, as the commands show it: ``operator/<context>``."""
        return f"{OPERATOR}/{self.cluster}"

    def where(self) -> str:
        if self.namespace is None:
            return f"cluster {self.cluster}"
        return f"namespace {self.namespace} of cluster {self.cluster}"


def operator_target(
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    *,
    all_namespaces: bool = False,
    identity: Identity | None = None,
) -> OperatorTarget:
    """The cluster and namespace of ``--kubeconfig``, ``--context``, ``-n`` and
    ``--all-namespaces``, reached as ``identity`` (None: as the kubeconfig's own user);
    :class:`InvalidInputError` naming the argument that cannot be used."""
    if all_namespaces and namespace is not None:
        raise InvalidInputError("--all-namespaces: give it or --namespace, not both")
    access = ClusterAccess(kubeconfig, context, identity)
    cluster = context_of(resolve_backend(OPERATOR, access))
    default_namespace = context_namespace(access)
    return OperatorTarget(
        access,
        cluster,
        None if all_namespaces else (namespace or default_namespace),
        default_namespace,
    )


ACCESS_CHECKED = {
    "workloads": (API_VERSION.split("/")[0], "workloads", ""),
    "pods/log": ("", "pods", "log"),
}
"""What :func:`allowed` asks about: the operator's Workloads, and their pods' output."""


def allowed(target: OperatorTarget, verb: str, namespace: str, resource: str) -> bool:
    """Whether the target's user (its identity, else the kubeconfig's) may ``verb`` the
    ``resource`` (one of :data:`ACCESS_CHECKED`) in ``namespace``, as the API server answers a
    SelfSubjectAccessReview (``kubectl auth can-i``)."""
    if resource not in ACCESS_CHECKED:
        raise InvalidInputError(f"resource {resource!r}: one of {', '.join(ACCESS_CHECKED)}")
    group, plural, subresource = ACCESS_CHECKED[resource]
    attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": plural}
    if subresource:
        attributes["subresource"] = subresource
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    with cluster_client(target.access) as client:
        answer = client.create(review)
    status = answer.get("status")
    return isinstance(status, dict) and status.get("allowed") is True


def not_served(target: OperatorTarget) -> InvalidInputError:
    return InvalidInputError(
        f"--backend operator: cluster {target.cluster} does not serve {API_VERSION} Workloads: "
        "install podwright's operator there, or run with --backend kubernetes"
    )


# run: the Workload ------------------------------------------------------------------------------


def workload_object(workload: Workload, namespace: str, name: str | None) -> dict[str, Any]:
    """The Workload object of ``workload`` in ``namespace`` (named ``name``, else its own
    name), checked as ``run`` checks a workload taken without policies."""
    check_runnable(workload)
    name = name or workload.name
    if not name:
        raise InvalidInputError(
            "the workload has no name: give one in its file (metadata.name) or with --name"
        )
    document: dict[str, Any] = json.loads(json.dumps(workload.to_document(), default=str))
    document["metadata"] = {**document["metadata"], "name": name, "namespace": namespace}
    return document


_DENIAL = re.compile(
    r'admission webhook "(?P<webhook>[^"]*)" denied the request: (?P<why>.*)', re.S
)
_ISSUES = re.compile(
    r"(?P<count>\d+) compliance issues? with the policies of (?P<scope>.+?): (?P<issues>.*)", re.S
)


def create_workload(
    client: KubernetesClient, workload: Mapping[str, Any], target: OperatorTarget
) -> dict[str, Any]:
    """Create ``workload``; the Workload as created. A refusal of the admission webhook prints
    every issue and ends the command with status 1; what else the API server refuses ends it
    with the status of its kind (2 bad input, 5, 6 no answer)."""
    metadata = section(workload, "metadata")
    name, namespace = text(metadata, "name"), text(metadata, "namespace")
    what = f"Workload {namespace}/{name}"
    try:
        return client.create(workload)
    except AlreadyExistsError as error:
        raise InvalidInputError(
            f"{what} exists already: give the workload another name with --name, or delete it "
            f"(podwright delete {name}{target.again(namespace)})"
        ) from error
    except NamespaceNotFoundError as error:
        raise InvalidInputError(
            f"--namespace {namespace}: cluster {target.cluster} has no such namespace"
        ) from error
    except NotFoundError as error:
        raise not_served(target) from error
    except QuotaExceededError as error:
        raise BackendError(f"cluster {target.cluster} refused {what}: {error.message}") from error
    except ForbiddenError as error:
        denial = _DENIAL.search(error.message)
        if denial is None:
            raise BackendError(
                f"cluster {target.cluster} refused {what}: {error.message}"
            ) from error
        raise _denied(denial["webhook"], denial["why"], what) from error
    except InvalidError as error:
        raise InvalidInputError(
            f"cluster {target.cluster} refused {what} as invalid: {error.message}"
        ) from error
    except ApiConnectionError as error:
        if error.may_have_reached:
            raise BackendUnreachableError(
                f"{error.message}: {what} may have been created (podwright status {name}"
                f"{target.again(namespace)})"
            ) from error
        raise BackendUnreachableError(f"{error.message}; nothing was created") from error


def _denied(webhook: str, why: str, what: str) -> AdmissionDeniedError:
    """An admission webhook's refusal, its compliance issues one each when it listed them."""
    found = _ISSUES.fullmatch(why.strip())
    if found is None:
        return AdmissionDeniedError(
            f"the cluster's admission webhook {webhook!r} refused {what}; nothing was created",
            webhook=webhook,
            issues=[why.strip()],
        )
    count = int(found["count"])
    return AdmissionDeniedError(
        f"{count} violation{'s' if count > 1 else ''} of the policies of {found['scope']}: the "
        f"cluster's admission webhook refused {what}; nothing was created",
        webhook=webhook,
        issues=re.split(r"; (?=spec\.)", found["issues"]),
    )


# A Workload's task, as the commands show it -----------------------------------------------------


def workload_ref(record: TaskRecord) -> ObjectRef:
    return ObjectRef(API_VERSION, WORKLOAD_KIND, record.task.namespace, record.task.name)


def _uid(workload: JsonObject) -> str:
    return text(section(workload, "metadata"), "uid")


def _record(store: WorkloadTaskStore, workload: JsonObject) -> TaskRecord:
    """``workload``'s task as ``store`` reads it, or its :func:`pending_record` before the
    operator recorded it; :class:`BackendError` when its record cannot be read."""
    if not is_submitted(workload) or not _uid(workload):
        return pending_record(workload, WAITING, utc_now())
    try:
        return store.get(task_id_of(workload))
    except UnrecordedTaskError:
        return pending_record(workload, WAITING, utc_now())
    except TaskStoreError as error:
        raise TaskStoreUnavailableError(str(error)) from error


T = TypeVar("T")


def _read(read: Callable[[], T]) -> T:
    """A read of a Workload's record; one that cannot be read is
    :class:`TaskStoreUnavailableError`."""
    try:
        return read()
    except TaskStoreError as error:
        raise TaskStoreUnavailableError(str(error)) from error


class WorkloadTasks:
    """The tasks of the Workloads listed from one namespace (or all), for the task commands."""

    def __init__(
        self,
        client: KubernetesClient,
        target: OperatorTarget,
        workloads: list[dict[str, Any]],
        *,
        label_selector: str | None = None,
        resource_version: str | None = None,
    ) -> None:
        self._client, self.target = client, target
        self._label_selector = label_selector
        self._resource_version = resource_version
        """The listing's resourceVersion: a watch goes on from it (None: it lists again)."""
        self._cache = WorkloadCache()
        self._cache.replace(workloads)
        self.store = WorkloadTaskStore(client, self._cache, may_write=lambda: True)

    def records(self) -> list[TaskRecord]:
        """Every Workload's task, the oldest submission first."""
        records = [_record(self.store, workload) for workload in self._cache.workloads()]
        records.sort(key=lambda record: (record.task.submitted_at, record.task_id))
        return records

    def find(self, task_id: str | None) -> TaskRecord:
        """The task of ``task_id`` (a task id, or a Workload's name), else the latest one;
        :class:`TaskNotFoundError` when there is none."""
        if task_id is None:
            records = self.records()
            if not records:
                raise TaskNotFoundError(f"no Workloads in {self.target.where()}")
            return records[-1]
        workloads = self._cache.workloads()
        for workload in workloads:
            if _uid(workload) and task_id_of(workload) == task_id:
                return _record(self.store, workload)
        for workload in workloads:
            if workload_key(workload)[1] == task_id:
                return _record(self.store, workload)
        raise TaskNotFoundError(
            f"no task {task_id!r} in {self.target.where()}: give a task id or a Workload's name "
            f"(podwright list{self.target.again()})"
        )

    def history(self, record: TaskRecord) -> list[HistoryEntry]:
        if record.revision == 0:
            return []
        return _read(lambda: self.store.history(record.task_id))

    def events(self, record: TaskRecord) -> list[AttachedEvent]:
        if record.revision == 0:
            return []
        return _read(lambda: self.store.events(record.task_id))

    def workload(self, record: TaskRecord) -> JsonObject | None:
        return self._cache.get(record.task.namespace, record.task.name)

    def abort(self, record: TaskRecord) -> str:
        """Ask the operator to abort the task (the annotation); what was done, in one line."""
        task_id = record.task_id
        if record.phase.is_terminal or record.finalized:
            return f"task {task_id} already ended: {record.phase.value}"
        where = f"Workload {record.task.namespace}/{record.task.name}"
        workload = self.workload(record)
        if workload is None:
            raise InvalidInputError(f"task {task_id}: {where} is gone")
        try:
            request_abort_annotation(self._client, workload_ref(record), _uid(workload), utc_now())
        except NotFoundError as error:
            raise InvalidInputError(f"task {task_id}: {where} is gone") from error
        return (
            f"abort requested for task {task_id}: the operator stops it ({where} stays; "
            f"podwright status {task_id}{self.target.again(record.task.namespace)})"
        )

    def delete(self, record: TaskRecord) -> str:
        """Delete the task's Workload; what was done, in one line."""
        task_id = record.task_id
        where = f"Workload {record.task.namespace}/{record.task.name}"
        workload = self.workload(record)
        if workload is None:
            return f"task {task_id} deleted ({where} was gone already)"
        try:
            # Only the Workload that was read: one made again under its name is another task.
            self._client.delete(workload_ref(record), uid=_uid(workload) or None)
        except NotFoundError:
            return f"task {task_id} deleted ({where} was gone already)"
        except ConflictError:
            return (
                f"task {task_id} deleted ({where} was gone already; the Workload of that name "
                "now is another task's, left alone)"
            )
        except ApiConnectionError as error:
            raise BackendUnreachableError(f"task {task_id}: {error.message}") from error
        except KubernetesError as error:
            raise BackendError(
                f"task {task_id}: cluster {self.target.cluster} refused to delete {where}: "
                f"{error.message}"
            ) from error
        if record.finalized or record.revision == 0:
            return f"task {task_id} deleted ({where})"
        return (
            f"task {task_id}: {record.phase.value}, {where} deleted: the operator aborts and "
            "finalizes the task, and the Workload goes once it is finalized"
        )

    def wait_gone(self, records: Sequence[TaskRecord], timeout: timedelta) -> list[TaskRecord]:
        """Wait until the Workloads of ``records`` are gone, at most ``timeout``; the records of
        those still there."""
        known = {
            record.task_id: workload
            for record in records
            if (workload := self.workload(record)) is not None
        }
        uids = {task_id: _uid(workload) for task_id, workload in known.items()}
        namespaces = {record.task.namespace for record in records}
        namespace = next(iter(namespaces)) if len(namespaces) == 1 else None
        with WorkloadWatch(self._client, namespace, seen=list(known.values())) as watch:
            watch.wait_until(
                lambda: all(watch.is_gone(uid) for uid in uids.values()), timeout.total_seconds()
            )
            return [
                record
                for record in records
                if record.task_id in uids and not watch.is_gone(uids[record.task_id])
            ]

    @contextlib.contextmanager
    def watching(self) -> Iterator[WatchedTasks]:
        """Every task of the target's Workloads (those of the label selector they were listed
        with), kept current by a watch from the listing on, until the block ends: it watches
        from the listing's resourceVersion, so the Workloads are not listed again (a list of
        thousands is the costliest request there is; the API server answers 410 Gone when that
        version is too old, and the watch lists then)."""
        watch = WorkloadWatch(
            self._client,
            self.target.namespace,
            label_selector=self._label_selector,
            seen=self._cache.workloads(),
            resource_version=self._resource_version,
        )
        watched = WatchedTasks(watch, self._client)  # its changes count from before the watch's
        with watch:
            yield watched

    @contextlib.contextmanager
    def following(self, record: TaskRecord) -> Iterator[WorkloadView]:
        """The task's Workload, kept current by a watch, until the block ends."""
        workload = self.workload(record)
        if workload is None:
            raise InvalidInputError(f"task {record.task_id}: its Workload is gone")
        with following(self._client, workload) as view:
            yield view


@contextlib.contextmanager
def workload_tasks(
    target: OperatorTarget, *, label_selector: str | None = None
) -> Iterator[WorkloadTasks]:
    """The target's Workloads (those ``label_selector`` selects, the API server choosing), listed
    once, as tasks; the API server's failures end the command (no answer: status 6; a refusal:
    5), and a cluster without the Workload kind is bad input."""
    with cluster_client(target.access) as client:
        try:
            workloads, version = client.list_objects(
                API_VERSION,
                WORKLOAD_KIND,
                namespace=target.namespace,
                label_selector=label_selector,
            )
        except NotFoundError as error:
            raise not_served(target) from error
        yield WorkloadTasks(
            client, target, workloads, label_selector=label_selector, resource_version=version
        )


# Following a Workload ----------------------------------------------------------------------------


class WorkloadWatch:
    """The Workloads of a namespace (all: None), or the one named, or those of a label selector,
    kept current by a watch. One deleted stays as it was last seen, its uid remembered as gone;
    ``seen`` are the objects known before the watch began (gone too if the watch's first list
    lacks them). With ``resource_version`` (that of the list ``seen`` came from, whole) the
    watch starts from it, with no list of its own."""

    def __init__(
        self,
        client: KubernetesClient,
        namespace: str | None,
        *,
        name: str | None = None,
        label_selector: str | None = None,
        seen: Sequence[JsonObject] = (),
        resource_version: str | None = None,
    ) -> None:
        self._changes = threading.Condition()
        self._gone: set[str] = set()
        self._changed_times = 0
        self.cache = WorkloadCache(changed=self._changed)
        for workload in seen:
            self.cache.put(dict(workload))
        self._reflector = Reflector(
            client,
            API_VERSION,
            WORKLOAD_KIND,
            self,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=f"metadata.name={name}" if name else None,
        )
        self._reflector.resource_version = resource_version or None

    def __enter__(self) -> WorkloadWatch:
        self._reflector.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._reflector.stop()

    def is_gone(self, uid: str) -> bool:
        with self._changes:
            return uid in self._gone

    def gone(self) -> frozenset[str]:
        """The uids of the Workloads seen gone."""
        with self._changes:
            return frozenset(self._gone)

    def change_count(self) -> int:
        """How many changes it has seen."""
        with self._changes:
            return self._changed_times

    def wait_for_change(self, since: int, timeout: float) -> int:
        """Wait until it has seen more changes than ``since``, at most ``timeout`` seconds; how
        many it has seen."""
        with self._changes:
            self._changes.wait_for(lambda: self._changed_times != since, timeout)
            return self._changed_times

    def wait_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``done()`` (checked at every change), at most ``timeout`` seconds."""
        with self._changes:
            return self._changes.wait_for(done, timeout)

    # The reflector's handler ------------------------------------------------------------------

    def replace(self, objects: list[dict[str, Any]]) -> None:
        listed = {_uid(obj) for obj in objects}
        keys = {workload_key(obj) for obj in objects}
        known = self.cache.workloads()
        with self._changes:
            self._gone.update(_uid(obj) for obj in known if _uid(obj) not in listed)
        # What went while the watch was down stays as it was last seen.
        kept = [dict(obj) for obj in known if workload_key(obj) not in keys]
        self.cache.replace([*objects, *kept])

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        before = self.cache.get(*workload_key(obj))
        with self._changes:
            if before is not None and _uid(before) != _uid(obj):
                self._gone.add(_uid(before))  # another Workload of that name: ours went
            if event_type == "DELETED":
                self._gone.add(_uid(obj))
        # A deleted Workload stays in the cache, as it was when it went.
        self.cache.apply("MODIFIED" if event_type == "DELETED" else event_type, obj)

    def _changed(self, _key: tuple[str, str]) -> None:
        with self._changes:
            self._changed_times += 1
            self._changes.notify_all()


WAKE_SECONDS = 5.0
"""The longest a :class:`ChangeWaiter` waits: a watcher looks again then, changed or not."""


class ChangeWaiter:
    """Waits for what a :class:`WorkloadWatch` sees change after the last wait (the first: after
    the waiter was made), so that a watcher that reads after each wait misses no change."""

    def __init__(self, watch: WorkloadWatch) -> None:
        self._watch = watch
        self._seen = watch.change_count()

    def wait(self, timeout: float = WAKE_SECONDS) -> bool:
        """Return at the next change (at once if one came since the last wait), or after
        ``timeout`` seconds; whether a change came."""
        seen, self._seen = self._seen, self._watch.wait_for_change(self._seen, timeout)
        return self._seen != seen


class WatchedTasks:
    """The tasks of the Workloads a :class:`WorkloadWatch` keeps (those gone left out), for
    ``list --watch`` and the console's feed; :attr:`changes` wakes it. Read it from one
    thread."""

    def __init__(self, watch: WorkloadWatch, client: KubernetesClient) -> None:
        self._watch = watch
        self._store = WorkloadTaskStore(client, watch.cache, may_write=lambda: True)
        self.changes = ChangeWaiter(watch)
        self._read: dict[int, tuple[JsonObject, str, TaskRecord]] = {}
        """Each Workload object last read (by its id), with its uid and its task: the cache
        keeps an object as it is until a newer version replaces it, so only the Workloads that
        changed since are read again."""

    def records(self) -> list[TaskRecord]:
        gone = self._watch.gone()
        read, self._read = self._read, {}
        records = []
        for workload in self._watch.cache.workloads():
            known = read.get(id(workload))
            if known is None or known[0] is not workload:
                known = (workload, _uid(workload), _record(self._store, workload))
            self._read[id(workload)] = known
            if known[1] not in gone:
                records.append(known[2])
        return records

    def history(self, record: TaskRecord) -> list[HistoryEntry]:
        """The phases of ``record``'s task, from its Workload as the watch last saw it."""
        if record.revision == 0:
            return []
        return _read(lambda: self._store.history(record.task_id))

    def events(self, record: TaskRecord) -> list[AttachedEvent]:
        """The events attached to ``record``'s task, from its Workload as last seen."""
        if record.revision == 0:
            return []
        return _read(lambda: self._store.events(record.task_id))


class WorkloadView:
    """What ``run``'s follower reads of one Workload's task (its ``TaskView``), from a
    :class:`WorkloadWatch` of it."""

    def __init__(self, watch: WorkloadWatch, client: KubernetesClient, workload: JsonObject):
        self._watch, self._client = watch, client
        self._namespace, self._name = workload_key(workload)
        self._uid = _uid(workload)
        self._store = WorkloadTaskStore(client, watch.cache, may_write=lambda: True)
        self.changes = ChangeWaiter(watch)
        """What wakes ``status --watch`` (``run``'s follower polls)."""

    def _workload(self) -> JsonObject:
        current = self._watch.cache.get(self._namespace, self._name)
        if current is None or _uid(current) != self._uid:
            raise BackendError(
                f"Workload {self._namespace}/{self._name} was deleted, and its task's end was "
                "not seen"
            )
        return current

    def get(self, task_id: str) -> TaskRecord:
        record = _record(self._store, self._workload())
        if self._watch.is_gone(self._uid) and not record.finalized:
            raise BackendError(
                f"Workload {self._namespace}/{self._name} was deleted before its task was "
                f"finalized (it was {record.phase.value}): nobody runs it any more"
            )
        return record

    def history(self, task_id: str) -> list[HistoryEntry]:
        try:
            return self._store.history(task_id)
        except UnrecordedTaskError:
            self._workload()
            return []
        except TaskStoreError as error:
            raise TaskStoreUnavailableError(str(error)) from error

    def events(self, task_id: str) -> list[AttachedEvent]:
        try:
            return self._store.events(task_id)
        except UnrecordedTaskError:
            self._workload()
            return []
        except TaskStoreError as error:
            raise TaskStoreUnavailableError(str(error)) from error

    def request_abort(self, task_id: str, now: datetime) -> TaskRecord:
        """The abort annotation (the operator records the request)."""
        ref = ObjectRef(API_VERSION, WORKLOAD_KIND, self._namespace, self._name)
        request_abort_annotation(self._client, ref, self._uid, now)
        return self.get(task_id)


@contextlib.contextmanager
def following(client: KubernetesClient, workload: JsonObject) -> Iterator[WorkloadView]:
    """A view of ``workload``'s task, kept current by a watch of it, until the block ends."""
    namespace, name = workload_key(workload)
    with WorkloadWatch(client, namespace, name=name, seen=[workload]) as watch:
        yield WorkloadView(watch, client, workload)


class NoExecutor:
    """The follower's keeper of an operator's task: the operator runs it, nothing is started."""

    pid: int | None = None
    started = False

    def keep(self, task_id: str, revision: int, *, now: bool = False) -> None:
        """The operator keeps its own tasks."""


class WorkloadLogTail:
    """The output of the primary container of a Workload's task, read as a cluster task's is
    (:class:`ClusterLogTail`, on a client of its own) once the operator recorded the task's
    resource; nothing before."""

    def __init__(self, access: ClusterAccess, current: Callable[[], TaskRecord]) -> None:
        self._access, self._current = access, current
        self._tail: ClusterLogTail | None = None

    def _ready(self) -> ClusterLogTail | None:
        if self._tail is None:
            record = self._current()
            if not record.task.manifests:
                return None
            try:
                ref = resource_ref(record, default_plugins(), LifecycleConfig())
            except PluginError:
                return None
            try:
                api = self._access.connect()
            except KubernetesConfigError as error:  # it loaded a moment ago
                raise BackendError(str(error)) from error
            self._tail = ClusterLogTail(KubernetesClient(api), ref)
        return self._tail

    def read(self, *, now: bool = False) -> list[LogLine]:
        tail = self._ready()
        return [] if tail is None else tail.read(now=now)

    def rest(self) -> list[LogLine]:
        tail = self._ready()
        return [] if tail is None else tail.rest()

    def close(self) -> None:
        if self._tail is not None:
            self._tail.close()

    def unanswered_for(self) -> tuple[timedelta, str] | None:
        return None if self._tail is None else self._tail.unanswered_for()


def runner(record: TaskRecord) -> str:
    """Who runs an operator's task, as messages name it."""
    return f"the operator (Workload {record.task.namespace}/{record.task.name})"
