"""The task store in the cluster: every task's record in its Workload's status.

:class:`WorkloadTaskStore` is the :class:`~podwright.engine.task_store.TaskStore` the operator's
executor runs on. It reads from :class:`WorkloadCache`, kept current by one list+watch of
Workloads (so a steady state makes no request), and writes each outcome as an update of
``workloads/status`` (a finalization as a patch of the Workload's metadata, which also lets it
go), each conditional on the resourceVersion it read: of two writers (two replicas, one of them
no longer the leader), exactly one wins; the other gets a Conflict, which is the port's
:class:`StaleRevisionError`, and decides again on a fresh read. What a write returns goes into
the cache at once (it is no change to tell the operator of: the writer knows), so the next step
reads its own writes even before the watch delivers them (an older version the watch delivers
later never replaces a newer one).

Every write first asks ``may_write``: a replica that lost its lease stops writing at once, its
writes failing with :class:`StoreUnavailableError`. A phase change is also told to
``on_phase`` (the operator makes it a Kubernetes Event on the Workload and a metric). The
decoding and the patches are :mod:`podwright.engine.workload_tasks`'s; this module only sends
them.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.adapters.kubernetes.reflector import shared_strings
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND
from podwright.core.lifecycle.objects import JsonObject, rfc3339, section, text
from podwright.core.lifecycle.phases import Phase, PhaseInfo
from podwright.engine.kubernetes_port import (
    ApiConnectionError,
    ConflictError,
    InvalidError,
    KubernetesError,
    NotFoundError,
    ObjectRef,
    PatchType,
)
from podwright.engine.plugin import without_managed_fields
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
)
from podwright.engine.workload_tasks import (
    ABORT_ANNOTATION,
    abort_requested_workload,
    advanced_workload,
    describe_workload,
    events_attached,
    finalized_patch,
    has_finalizer,
    history_of,
    is_submitted,
    launched_workload,
    record_of,
    refused_workload,
    submitted_workload,
    task_id_of,
    with_finalizer_patch,
    without_finalizer_patch,
    workload_key,
)

logger = logging.getLogger("podwright.operator")

PhaseListener = Callable[[JsonObject, TaskRecord, PhaseInfo], None]


class WorkloadCache:
    """Workloads by (namespace, name), with an index by task id and each one's decoded record,
    kept current by a reflector (its handler) and by the store's own writes (:meth:`put`).

    ``changed`` is called with the (namespace, name) of every Workload the watch shows new,
    changed (another resourceVersion than the cache holds) or gone: the operator queues it. The
    store's own writes are not told (the operator decides when to look at a Workload it wrote),
    nor is the watch's echo of them, which the cache already holds at that version."""

    def __init__(self, changed: Callable[[tuple[str, str]], None] | None = None) -> None:
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._by_task: dict[str, tuple[str, str]] = {}
        self._records: dict[tuple[str, str], tuple[str, TaskRecord | None]] = {}
        self._lock = threading.Lock()
        self._changed = changed or (lambda _key: None)

    # The reflector's handler -----------------------------------------------------------------

    def replace(self, objects: list[dict[str, Any]]) -> None:
        with self._lock:
            held = self._objects
            self._objects = {}
            self._by_task = {}
            self._records = {}
            for obj in objects:
                mine = held.get(workload_key(obj))
                # A list answered before one of the store's own writes, handled after it.
                self._store(mine if mine is not None and _older(obj, mine) else obj)
            changed = [
                key
                for key in set(held).union(self._objects)
                if _version(held.get(key)) != _version(self._objects.get(key))
            ]
        for key in changed:
            self._changed(key)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        key = workload_key(obj)
        with self._lock:
            before = _version(self._objects.get(key))
            if event_type == "DELETED":
                self._drop(key)
            elif not _older(obj, self._objects.get(key)):
                self._store(obj)
            after = _version(self._objects.get(key))
        if before != after:
            self._changed(key)

    def put(self, obj: dict[str, Any]) -> None:
        """An object as one of the store's own writes returned it (newer than anything the
        watch delivered); not told as a change."""
        with self._lock:
            if not _older(obj, self._objects.get(workload_key(obj))):
                self._store(obj)

    # Reading ---------------------------------------------------------------------------------

    def workloads(self) -> list[JsonObject]:
        with self._lock:
            return list(self._objects.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def get(self, namespace: str, name: str) -> JsonObject | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def by_task(self, task_id: str) -> JsonObject | None:
        with self._lock:
            key = self._by_task.get(task_id)
            return None if key is None else self._objects.get(key)

    def record(self, workload: JsonObject) -> TaskRecord | None:
        """The decoded record of ``workload`` (decoded once per resourceVersion); raises
        ValueError when its record cannot be read."""
        key = workload_key(workload)
        version = text(section(workload, "metadata"), "resourceVersion")
        with self._lock:
            found = self._records.get(key)
        if found is not None and found[0] == version:
            return found[1]
        record = record_of(workload)
        with self._lock:
            if self._objects.get(key) is workload:
                self._records[key] = (version, record)
        return record

    # ------------------------------------------------------------------------------------------

    def _store(self, obj: dict[str, Any]) -> None:
        key = workload_key(obj)
        self._drop(key)
        self._objects[key] = shared_strings(_trimmed(obj))
        if is_submitted(obj) and text(section(obj, "metadata"), "uid"):
            self._by_task[task_id_of(obj)] = key

    def _drop(self, key: tuple[str, str]) -> None:
        old = self._objects.pop(key, None)
        self._records.pop(key, None)
        if old is not None and text(section(old, "metadata"), "uid"):
            self._by_task.pop(task_id_of(old), None)


class WorkloadTaskStore:
    """The task store over Workloads (see the module's docstring)."""

    def __init__(
        self,
        client: KubernetesClient,
        cache: WorkloadCache,
        *,
        may_write: Callable[[], bool] = lambda: True,
        on_phase: PhaseListener | None = None,
    ) -> None:
        self._client = client
        self._cache = cache
        self._may_write = may_write
        self._on_phase = on_phase

    # The port --------------------------------------------------------------------------------

    def submit(self, task: NewTask) -> TaskRecord:
        """Record the task of the Workload ``task.namespace/task.name`` (revision 1)."""
        _stored, record = self._submit(
            task, lambda workload: submitted_workload(workload, task, task.submitted_at)
        )
        return record

    def submit_launched(
        self, task: NewTask, plugin_state: JsonData, info: PhaseInfo, now: datetime
    ) -> TaskRecord:
        """Record the task of the Workload ``task.namespace/task.name`` with what its launch did
        (its plugin state and phase), in one status update: the operator launches a new task
        before it records it (a launch that is not recorded is found again, AlreadyExists
        carrying the task's id, by the next one)."""
        stored, record = self._submit(
            task, lambda workload: launched_workload(workload, task, plugin_state, info, now)
        )
        if self._on_phase is not None and info.phase is not Phase.UNDEFINED:
            self._on_phase(stored, record, info)
        return record

    def _submit(
        self, task: NewTask, body: Callable[[JsonObject], dict[str, Any]]
    ) -> tuple[dict[str, Any], TaskRecord]:
        """Write the first record of ``task`` (``body`` of its Workload as read); the Workload
        as stored, and the record."""
        workload = self._cache.get(task.namespace, task.name)
        if workload is None:
            raise TaskNotFoundError(f"no Workload {task.namespace}/{task.name} to record it in")
        if is_submitted(workload):
            raise TaskExistsError(f"task {task.task_id} was already submitted")
        if task_id_of(workload) != task.task_id:
            raise TaskNotFoundError(
                f"{describe_workload(workload)} is not the Workload of task {task.task_id} "
                "(re-created?)"
            )
        stored = self._write(workload, body(workload))
        record = self._cache.record(stored)
        if record is None:
            raise StoreUnavailableError(
                f"{describe_workload(workload)}: the API server dropped status.task from the "
                "update: its Workload CustomResourceDefinition is older than this operator "
                "(install deploy/crds of this version)"
            )
        return stored, record

    def get(self, task_id: str) -> TaskRecord:
        return self._record(self._workload(task_id))

    def list_tasks(self, *, active_only: bool = False) -> list[TaskRecord]:
        records = []
        for workload in self._cache.workloads():
            try:
                record = self._cache.record(workload)
            except ValueError as error:
                logger.error("%s: %s", describe_workload(workload), error)
                continue
            if record is None or (active_only and record.finalized):
                continue
            records.append(record)
        records.sort(key=lambda record: (record.task.submitted_at, record.task_id))
        return records

    def advance(
        self,
        task_id: str,
        revision: int,
        plugin_state: JsonData,
        info: PhaseInfo,
        now: datetime,
    ) -> TaskRecord:
        workload, record = self._current(task_id, revision)
        advance = advanced_workload(workload, record, plugin_state, info, now)
        stored = self._write(workload, advance.workload)
        written = self._record(stored)
        if info.phase is not record.phase and self._on_phase is not None:
            self._on_phase(stored, written, info)  # a new phase (not a new reason in one)
        return written

    def request_abort(self, task_id: str, now: datetime) -> TaskRecord:
        workload = self._workload(task_id)
        record = self._record(workload)
        if record.abort_requested:
            return record
        return self._record(self._write(workload, abort_requested_workload(workload, record, now)))

    def mark_finalized(self, task_id: str, revision: int, now: datetime) -> TaskRecord:
        """Record the task finalized and let its Workload go, in one metadata patch
        (:func:`~podwright.engine.workload_tasks.finalized_patch`): its revision stays."""
        workload, record = self._current(task_id, revision)
        self._write(workload, finalized_patch(workload, task_id), status=False)
        return dataclasses.replace(record, finalized=True)

    def delete(self, task_id: str, revision: int) -> None:
        workload, _record = self._current(task_id, revision)
        metadata = section(workload, "metadata")
        self._check_leading()
        try:
            self._client.delete(_ref(workload), resource_version=text(metadata, "resourceVersion"))
        except ConflictError as error:
            raise StaleRevisionError(str(error)) from error
        except NotFoundError:
            return
        except KubernetesError as error:
            raise StoreUnavailableError(str(error)) from error

    def history(self, task_id: str) -> list[HistoryEntry]:
        workload = self._workload(task_id)
        try:
            return history_of(workload)
        except ValueError as error:
            raise StoreUnavailableError(
                f"{describe_workload(workload)}: status.task.history: {error}"
            ) from error

    def events(self, task_id: str) -> list[AttachedEvent]:
        return events_attached(self._workload(task_id))

    def close(self) -> None:
        """Nothing to release: the cache's reflector and the client are the operator's."""

    # The operator's own writes -----------------------------------------------------------------

    def workloads(self) -> list[JsonObject]:
        return self._cache.workloads()

    def workload(self, namespace: str, name: str) -> JsonObject | None:
        return self._cache.get(namespace, name)

    def record(self, workload: JsonObject) -> TaskRecord | None:
        return self._cache.record(workload)

    def hold(self, workload: JsonObject) -> JsonObject:
        if has_finalizer(workload):
            return workload
        return self._write(workload, with_finalizer_patch(workload), status=False)

    def release(self, workload: JsonObject) -> None:
        if has_finalizer(workload):
            self._write(workload, without_finalizer_patch(workload), status=False)

    def refuse(self, workload: JsonObject, task_id: str, message: str, now: datetime) -> None:
        self._write(workload, refused_workload(workload, task_id, message, now))

    # ------------------------------------------------------------------------------------------

    def _workload(self, task_id: str) -> JsonObject:
        workload = self._cache.by_task(task_id)
        if workload is None:
            raise TaskNotFoundError(f"no Workload holds task {task_id}")
        return workload

    def _record(self, workload: JsonObject) -> TaskRecord:
        try:
            record = self._cache.record(workload)
        except ValueError as error:
            raise StoreUnavailableError(f"{describe_workload(workload)}: {error}") from error
        if record is None:
            raise TaskNotFoundError(f"{describe_workload(workload)} has no task yet")
        return record

    def _current(self, task_id: str, revision: int) -> tuple[JsonObject, TaskRecord]:
        workload = self._workload(task_id)
        record = self._record(workload)
        if record.revision != revision:
            raise StaleRevisionError(
                f"task {task_id} is at revision {record.revision}, not {revision}"
            )
        return workload, record

    def _check_leading(self) -> None:
        if not self._may_write():
            raise StoreUnavailableError("this replica does not lead: it writes no task")

    def _write(
        self, workload: JsonObject, body: dict[str, Any], *, status: bool = True
    ) -> dict[str, Any]:
        """Send a status update (``status``) or a merge patch of the object's metadata, each
        conditional on the resourceVersion read; the Workload as stored, also put in the
        cache."""
        self._check_leading()
        try:
            if status:
                stored = self._client.replace_status(_ref(workload), body)
            else:
                stored = self._client.patch(_ref(workload), body, PatchType.MERGE)
        except ConflictError as error:
            raise StaleRevisionError(f"{describe_workload(workload)} changed: {error}") from error
        except NotFoundError as error:
            raise TaskNotFoundError(f"{describe_workload(workload)} is gone") from error
        except ApiConnectionError as error:
            raise StoreUnavailableError(str(error)) from error
        except KubernetesError as error:
            raise StoreUnavailableError(f"{describe_workload(workload)}: {error}") from error
        self._cache.put(stored)
        return stored


def request_abort_annotation(
    client: KubernetesClient, ref: ObjectRef, uid: str, now: datetime
) -> None:
    """Ask the operator to abort the task of the Workload at ``ref`` whose uid is ``uid``
    (``podwright abort``). The uid in the patch is its precondition: a Workload made again
    under that name since is another task's, and the API server refuses the patch (422, the
    uid is immutable) rather than abort it. :class:`NotFoundError` in both cases."""
    body = {"metadata": {"uid": uid, "annotations": {ABORT_ANNOTATION: rfc3339(now)}}}
    try:
        client.patch(ref, body, PatchType.MERGE)
    except InvalidError as error:
        if "metadata.uid" not in error.message:
            raise
        raise NotFoundError(
            f"{ref.kind} {ref.namespace}/{ref.name} of uid {uid} is gone: {error.message}"
        ) from error


def _ref(workload: JsonObject) -> ObjectRef:
    metadata = section(workload, "metadata")
    return ObjectRef(
        API_VERSION, WORKLOAD_KIND, text(metadata, "namespace"), text(metadata, "name")
    )


_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _trimmed(workload: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps of a Workload: all but ``metadata.managedFields`` and kubectl's
    last-applied copy of the object, the largest parts nothing here reads. A status update
    sent from it loses neither: the API server keeps an object's metadata on a status update,
    and its managedFields when a request has none."""
    metadata = section(workload, "metadata")
    annotations = section(metadata, "annotations")
    if "managedFields" not in metadata and _LAST_APPLIED not in annotations:
        return workload
    kept = without_managed_fields(metadata)
    if _LAST_APPLIED in annotations:
        kept["annotations"] = {k: v for k, v in annotations.items() if k != _LAST_APPLIED}
    return {**workload, "metadata": kept}


def _version(obj: JsonObject | None) -> tuple[str, str] | None:
    """Which version of which object ``obj`` is (uid, resourceVersion); None for none."""
    if obj is None:
        return None
    metadata = section(obj, "metadata")
    return text(metadata, "uid"), text(metadata, "resourceVersion")


def _older(obj: JsonObject, than: JsonObject | None) -> bool:
    """Whether ``obj`` is an older version of the same object than ``than`` (resourceVersions
    compared as numbers when both are: etcd's are; an opaque one is never judged older)."""
    if than is None:
        return False
    mine, theirs = section(obj, "metadata"), section(than, "metadata")
    if text(mine, "uid") != text(theirs, "uid"):
        return False
    a, b = text(mine, "resourceVersion"), text(theirs, "resourceVersion")
    return a.isdigit() and b.isdigit() and int(a) < int(b)
