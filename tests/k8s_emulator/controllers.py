"""The controllers a real control plane runs (kube-controller-manager), for the emulator: a real
cluster has them, so podwright meets them there, and the emulator must not let a test pass that a
cluster would fail (a Job whose pods never come, a dependent that outlives its owner, a namespace
without its ``kube-root-ca.crt``).

Each controller runs in a thread of its own and is built as the real ones are: it keeps a view of
the objects it acts on (:class:`View`, as a real controller keeps an informer's cache, with its
indexes by uid and by owner), brought up to date from the store's change history; each change puts
the keys it concerns on a work queue (``affected``: a pod's change queues its Job, an owner gone
queues its dependents), and each queued key is synced on its own, level-triggered, from the view's
state of it (``sync``), through the store's own create, patch, delete and status writes (so
admission and deletion semantics apply to them as to any client). A sync may ask to be done again
after a while (a back-off, a deadline), and one whose write failed is queued again soon. A change
costs the work of the keys it concerns, not a pass over every object: with thousands of Jobs and
pods, passes over all of them were most of the emulator's time. They talk to the store in-process,
not over HTTP: the emulator's request counts are the clients' alone.

* :class:`GarbageCollector` (``pkg/controller/garbagecollector/garbagecollector.go``,
  ``attemptToDeleteItem``, ``processDeletingDependentsItem``, ``orphanDependents``; the
  "Garbage Collection" and "Use Cascading Deletion" docs): a dependent whose owners (by uid) are
  all gone is deleted in the background; an owner deleted in the foreground has its dependents
  deleted and loses its ``foregroundDeletion`` finalizer once no dependent with
  ``blockOwnerDeletion`` is left; an owner deleted with the ``orphan`` finalizer has its
  ownerReferences removed from its dependents, then the finalizer. A dependent with another owner
  still present only loses its references to the owners that are gone or going.
* :class:`JobController` (``pkg/controller/job/job_controller.go``, ``syncJob``, ``manageJob``,
  ``trackJobStatusAndRemoveFinalizers``, ``enactJobFinished``; batch/v1 with the v1.31+ interim
  conditions): it makes the Job's pods from its template (``generateName`` ``<job>-``, a
  controller ownerReference that blocks the owner's deletion, the ``batch.kubernetes.io/
  job-tracking`` finalizer), keeps ``active``, ``ready``, ``terminating``, ``succeeded``,
  ``failed``, ``startTime`` and ``uncountedTerminatedPods``, counts each finished pod through
  ``uncountedTerminatedPods`` and removes its finalizer, replaces failed pods after a back-off
  until ``backoffLimit``, and finishes with ``SuccessCriteriaMet`` then ``Complete`` (and
  ``completionTime``), or ``FailureTarget`` then ``Failed`` (``BackoffLimitExceeded``,
  ``DeadlineExceeded`` past ``activeDeadlineSeconds``), deleting the active pods of a Job that
  failed. NonIndexed Jobs with any parallelism and completions. Not emulated: Indexed Jobs,
  ``suspend`` (a suspended Job is left alone), ``podFailurePolicy``, ``successPolicy``,
  ``backoffLimitPerIndex``, ``managedBy``, adoption of orphan pods, Events but one (below),
  and the ``ttlSecondsAfterFinished`` controller. The back-off before a failed pod is replaced is
  the real one's shape (doubling per failure, capped) but short and configurable
  (:class:`JobBackoff`); the real one starts at 10 s, capped at 6 min. A pod create the API
  server refuses (a ResourceQuota's admission, say) is recorded as the real pod control records
  it, a ``Warning`` Event ``FailedCreate`` on the Job, ``Error creating: <the server's message>``
  (``RealPodControl.createPods`` in ``pkg/controller/controller_utils.go``; none for a namespace
  being deleted). It puts no condition on the Job: ``manageJob`` stops creating at the first
  refusal, ``syncJob`` writes the status it has (``startTime``, no pod active) and returns the
  error, and the Job is synced again after its work queue's rate limit (1 s, doubling per refused
  sync, at most 1 min: ``DefaultJobApiBackOff``, ``MaxJobApiBackOff``), not at once.
* :class:`NamespaceController`: the root-CA publisher
  (``pkg/controller/certificates/rootcacertpublisher/publisher.go``: a ``kube-root-ca.crt``
  ConfigMap with ``ca.crt`` in every namespace, recreated and restored when deleted or changed),
  the service-account controller (``pkg/controller/serviceaccount/serviceaccounts_controller.go``:
  a ``default`` ServiceAccount in every namespace) and the namespace controller
  (``pkg/controller/namespace/deletion/namespaced_resources_deleter.go``: a Terminating namespace
  has its contents deleted, in the background; once nothing is left, its ``kubernetes``
  finalizer is removed through ``namespaces/<name>/finalize`` and the namespace goes). It writes
  no deletion conditions to the namespace's status.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from podwright.adapters.kubernetes.rate_limit import TokenBucket
from tests.k8s_emulator.cost_model import (
    ControllerClient,
    ControllerStore,
    CostModel,
    WriteGate,
)
from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.resource_types import ResourceType
from tests.k8s_emulator.store import (
    ApiStore,
    Obj,
    WatchEvent,
    json_copy,
    resource_type,
    rfc3339,
)
from tests.k8s_emulator.strategies import FOREGROUND_DELETION, NAMESPACE_FINALIZER, ORPHAN

RETRY_SECONDS = 0.05
"""How soon a controller tries again after a write lost a race (409, 404) with another client."""
REFUSED_RETRY_SECONDS = 1.0
"""How soon it tries again after a write was refused (an admission webhook, a quota, an error):
a real controller requeues with a rate limit, rather than hammering whoever refused."""


CONTENT_RECHECK_SECONDS = 0.05
"""How soon the namespace controller looks again at a Terminating namespace with content left."""


def _retry_after(error: ApiError) -> float:
    return RETRY_SECONDS if error.code in (404, 409) else REFUSED_RETRY_SECONDS


JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
REFUSED_CREATE_RETRY_SECONDS = 1.0
"""How soon the Job controller tries again after its first refused pod create
(``DefaultJobApiBackOff``); each further refusal in a row doubles it."""
REFUSED_CREATE_RETRY_MAX_SECONDS = 60.0
"""The longest the Job controller waits between refused pod creates (``MaxJobApiBackOff``)."""
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)
EMULATOR_CA_CERTIFICATE = (
    "-----BEGIN CERTIFICATE-----\n"
    "cG9kd3JpZ2h0J3MgQVBJLXNlcnZlciBlbXVsYXRvcjogbm8gcmVhbCBDQSBiZWhpbmQgdGhpcw==\n"
    "-----END CERTIFICATE-----\n"
)
"""The emulator serves plain HTTP: the published bundle is a placeholder in PEM form."""
DEFAULT_SERVICE_ACCOUNT = "default"

PODS = resource_type("", "pods")
JOBS = resource_type("batch", "jobs")
NAMESPACES = resource_type("", "namespaces")
CONFIG_MAPS = resource_type("", "configmaps")
SERVICE_ACCOUNTS = resource_type("", "serviceaccounts")
EVENTS = resource_type("events.k8s.io", "events")
Snapshot = list[tuple[ResourceType, Obj]]
ObjectKey = tuple[ResourceType, str, str]


@dataclass(frozen=True)
class Change:
    """One change the view took in: the object as it is now (as it was last, when deleted) and
    as it was before (None when added, or when the view was read whole)."""

    resource: ResourceType
    obj: Obj
    previous: Obj | None
    deleted: bool

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"]["uid"])


class View:
    """A controller's own copy of the objects it acts on (those ``keeps`` accepts), kept up to
    date from the store's change history as an informer keeps its cache from a watch, and read
    whole again when that history no longer reaches back; with the uid of every object in the
    store (for the garbage collector's question "is this owner still there?"), and an index of
    the objects it keeps by uid and by the owners they name (a controller's informer indexers)."""

    def __init__(self, store: ApiStore, keeps: Callable[[ResourceType, Obj], bool]) -> None:
        self._store = store
        self._keeps = keeps
        self.objects: dict[ObjectKey, tuple[ResourceType, Obj]] = {}
        self.uids: set[str] = set()
        self.by_uid: dict[str, ObjectKey] = {}
        self.dependents: dict[str, set[ObjectKey]] = {}
        """Owner uid -> the kept objects whose ownerReferences name it."""
        self.revision = -1
        self._complete = False

    def refresh(self) -> list[Change]:
        """Catch up with the store; the changes taken in (when the view is read whole, every
        object it keeps, as if added: a controller then looks at all of them again)."""
        changes = self._store.changes(self.revision) if self._complete else None
        if changes is None:
            objects, self.revision = self._store.snapshot()
            self.objects, self.by_uid, self.dependents = {}, {}, {}
            for resource, obj in objects:
                if self._keeps(resource, obj):
                    self._put(_object_key(resource, obj), resource, obj)
            self.uids = {obj["metadata"]["uid"] for _resource, obj in objects}
            self._complete = True
            return [Change(r, o, None, False) for r, o in self.objects.values()]
        events, self.revision = changes
        return [change for event in events if (change := self._apply(event)) is not None]

    def _apply(self, event: WatchEvent) -> Change | None:
        key = _object_key(event.resource, event.obj)
        change = Change(event.resource, event.obj, event.previous, event.type == "DELETED")
        if change.deleted:
            self.uids.discard(change.uid)
            self._drop(key)
            return change  # any object gone may be an owner gone
        self.uids.add(change.uid)
        if self._keeps(event.resource, event.obj):
            self._put(key, event.resource, event.obj)
            return change
        return change if self._drop(key) else None

    def _put(self, key: ObjectKey, resource: ResourceType, obj: Obj) -> None:
        self._drop(key)
        self.objects[key] = (resource, obj)
        self.by_uid[obj["metadata"]["uid"]] = key
        for uid in _owner_uids(obj):
            self.dependents.setdefault(uid, set()).add(key)

    def _drop(self, key: ObjectKey) -> bool:
        found = self.objects.pop(key, None)
        if found is None:
            return False
        obj = found[1]
        self.by_uid.pop(obj["metadata"]["uid"], None)
        for uid in _owner_uids(obj):
            keys = self.dependents.get(uid)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.dependents[uid]
        return True

    def get(self, key: ObjectKey) -> Obj | None:
        found = self.objects.get(key)
        return None if found is None else found[1]

    def dependents_of(self, uid: str) -> Snapshot:
        """The kept objects naming ``uid`` as an owner, in a stable order."""
        return [self.objects[key] for key in sorted(self.dependents.get(uid, ()), key=_order)]


def _order(key: ObjectKey) -> tuple[str, str, str]:
    return (key[0].plural, key[1], key[2])


def _owner_uids(obj: Obj) -> list[str]:
    return [reference["uid"] for reference in obj["metadata"].get("ownerReferences") or []]


def _object_key(resource: ResourceType, obj: Obj) -> ObjectKey:
    return (resource, *_key(obj))


class Controller(Protocol):
    """A controller as kube-controller-manager's are built: changes put keys on a work queue
    (:meth:`affected`), and each key is synced on its own (:meth:`sync`), level-triggered: from
    the view's state of it, whatever change queued it."""

    name: str

    def keeps(self, resource: ResourceType, obj: Obj) -> bool:
        """Whether the controller acts on this object (its view holds only those)."""

    def affected(self, view: View, change: Change) -> list[ObjectKey]:
        """The keys to sync after ``change`` (the view already holds it)."""

    def sync(self, view: View, key: ObjectKey, now: datetime) -> float | None:
        """Act on the state of ``key``; the seconds after which to sync it again even if
        nothing changes (None: only on a change). An :class:`ApiError` queues it again soon."""


@dataclass(frozen=True)
class JobBackoff:
    """The Job controller's delay before it replaces a failed pod: ``initial`` seconds after the
    first failure, doubled for each further one, at most ``limit``."""

    initial: float = 0.05
    limit: float = 1.0

    def after(self, failures: int) -> float:
        return 0.0 if failures <= 0 else min(self.initial * 2 ** (failures - 1), self.limit)


class ControlPlane:
    """The controllers, each in a thread driven by the store's changes; :meth:`stop` ends and
    joins them. Under a ``cost_model`` each controller writes through a client of its own, rate
    limited as kube-controller-manager's are, and its writes take slots of the server's
    ``write_gate`` (``cost_model.py``)."""

    def __init__(
        self,
        store: ApiStore,
        *,
        job_backoff: JobBackoff = JobBackoff(),
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        cost_model: CostModel | None = None,
        write_gate: WriteGate | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._stop = threading.Event()

        gate = write_gate
        if cost_model is not None and gate is None:
            gate = WriteGate(cost_model.write_latency, cost_model.max_writes_in_flight)

        def client() -> ControllerStore:
            if cost_model is None or gate is None:
                return store
            bucket = TokenBucket(cost_model.controller_qps, cost_model.controller_burst)
            return ControllerClient(store, bucket, gate)

        self.controllers: list[Controller] = [
            GarbageCollector(client()),
            JobController(client(), job_backoff),
            NamespaceController(client()),
        ]
        self._threads = [
            threading.Thread(target=self._run, args=(c,), name=f"emulator-{c.name}", daemon=True)
            for c in self.controllers
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._store.wake_watchers()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=10)

    def _run(self, controller: Controller) -> None:
        view = View(self._store, controller.keeps)
        queued: dict[ObjectKey, None] = {}  # the work queue: each key once, in arrival order
        timers: dict[ObjectKey, float] = {}  # key -> when to sync it again (time.monotonic)
        while True:
            wait = None if not timers else max(min(timers.values()) - time.monotonic(), 0.0)
            self._store.wait_for_change(view.revision, self._stop, wait)
            if self._stop.is_set():
                return
            for change in view.refresh():
                queued.update(dict.fromkeys(controller.affected(view, change)))
            moment = time.monotonic()
            queued.update(dict.fromkeys(key for key, due in timers.items() if due <= moment))
            now = self._clock()
            while queued:
                key = next(iter(queued))
                del queued[key]
                timers.pop(key, None)
                try:
                    again = controller.sync(view, key, now)
                except ApiError as error:
                    again = _retry_after(error)
                if again is not None:
                    timers[key] = time.monotonic() + again


def _sooner(first: float | None, second: float | None) -> float | None:
    if first is None:
        return second
    return first if second is None else min(first, second)


def _key(obj: Obj) -> tuple[str, str]:
    metadata = obj["metadata"]
    return metadata.get("namespace", ""), metadata["name"]


def _deleting(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def _finalizers(obj: Obj) -> list[str]:
    return list(obj["metadata"].get("finalizers") or [])


def _set_metadata(
    store: ControllerStore, resource: ResourceType, obj: Obj, field_name: str, value: Any
) -> None:
    """A merge patch of one metadata field, conditional on the version the controller read."""
    namespace, name = _key(obj)
    patch = {"metadata": {field_name: value, "resourceVersion": obj["metadata"]["resourceVersion"]}}
    store.patch(resource, namespace, name, patch, "application/merge-patch+json")


# Garbage collector -------------------------------------------------------------------------------


def _going(view: View, uid: str) -> bool | None:
    """Whether the owner ``uid`` is gone (True), being deleted in the foreground (None: its
    dependents go first), or present (False)."""
    if uid not in view.uids:
        return True
    key = view.by_uid.get(uid)
    owner = None if key is None else view.get(key)
    if owner is not None and _deleting(owner) and FOREGROUND_DELETION in _finalizers(owner):
        return None
    return False


class GarbageCollector:
    """Its view holds the objects with owners and those being deleted: any other object is an
    owner that is present and not going, which the view's uids tell. A change queues the object
    itself, the owners it names (an owner deleted in the foreground waits for its dependents),
    and, when it is gone or going, its dependents (``GraphBuilder``'s ``attemptToDelete`` queue
    and ``processGraphChanges``)."""

    name = "garbage-collector"

    def __init__(self, store: ControllerStore) -> None:
        self._store = store

    def keeps(self, resource: ResourceType, obj: Obj) -> bool:
        return bool(obj["metadata"].get("ownerReferences")) or _deleting(obj)

    def affected(self, view: View, change: Change) -> list[ObjectKey]:
        keys = [_object_key(change.resource, change.obj)]
        for obj in (change.obj, change.previous):
            if obj is not None:
                keys.extend(key for uid in _owner_uids(obj) if (key := view.by_uid.get(uid)))
        if change.deleted or _deleting(change.obj):
            keys.extend(view.dependents.get(change.uid, ()))
        return keys

    def sync(self, view: View, key: ObjectKey, now: datetime) -> float | None:
        found = view.objects.get(key)
        if found is None:
            return None
        resource, obj = found
        if _deleting(obj):
            self._finish_owner(resource, obj, view)
        elif obj["metadata"].get("ownerReferences"):
            self._collect(resource, obj, view)
        return None

    def _finish_owner(self, resource: ResourceType, owner: Obj, view: View) -> None:
        uid = owner["metadata"]["uid"]
        finalizers = _finalizers(owner)
        if ORPHAN in finalizers:
            for dependent_resource, dependent in view.dependents_of(uid):
                kept = [r for r in dependent["metadata"]["ownerReferences"] if r["uid"] != uid]
                _set_metadata(
                    self._store, dependent_resource, dependent, "ownerReferences", kept or None
                )
            self._drop_finalizer(resource, owner, ORPHAN)
        elif FOREGROUND_DELETION in finalizers:
            blocking = False
            for dependent_resource, dependent in view.dependents_of(uid):
                reference = next(
                    r for r in dependent["metadata"]["ownerReferences"] if r["uid"] == uid
                )
                blocking = blocking or bool(reference.get("blockOwnerDeletion"))
                if not _deleting(dependent):
                    self._collect(dependent_resource, dependent, view)
            if not blocking:
                self._drop_finalizer(resource, owner, FOREGROUND_DELETION)

    def _collect(self, resource: ResourceType, obj: Obj, view: View) -> None:
        """``attemptToDeleteItem``: an object whose owners are gone or going."""
        solid, going, waiting = [], [], False
        for reference in obj["metadata"]["ownerReferences"]:
            state = _going(view, reference["uid"])
            if state is False:
                solid.append(reference)
            else:
                going.append(reference)
                waiting = waiting or state is None
        if solid:
            if going:
                _set_metadata(self._store, resource, obj, "ownerReferences", solid)
            return
        if waiting and view.dependents.get(obj["metadata"]["uid"]):
            policy = "Foreground"
        elif ORPHAN in _finalizers(obj):
            policy = "Orphan"
        elif FOREGROUND_DELETION in _finalizers(obj):
            policy = "Foreground"
        else:
            policy = "Background"
        namespace, name = _key(obj)
        self._store.delete(
            resource,
            namespace,
            name,
            preconditions={"uid": obj["metadata"]["uid"]},
            propagation=policy,
        )

    def _drop_finalizer(self, resource: ResourceType, obj: Obj, finalizer: str) -> None:
        kept = [f for f in _finalizers(obj) if f != finalizer]
        _set_metadata(self._store, resource, obj, "finalizers", kept or None)


# Job controller ----------------------------------------------------------------------------------


def _condition(kind: str, reason: str, message: str, now: datetime) -> Obj:
    stamp = rfc3339(now)
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }


def _has_condition(job: Obj, kind: str) -> Obj | None:
    conditions: list[Obj] = (job.get("status") or {}).get("conditions") or []
    for condition in conditions:
        if condition.get("type") == kind and condition.get("status") == "True":
            return condition
    return None


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _finished(pod: Obj) -> bool:
    return _phase(pod) in ("Succeeded", "Failed")


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _job_owners(pod: Obj) -> list[str]:
    """The uids of the Jobs that are the pod's controller (one, if any)."""
    return [
        reference["uid"]
        for reference in pod["metadata"].get("ownerReferences") or []
        if reference.get("controller") and reference.get("kind") == "Job"
    ]


@dataclass
class _JobProgress:
    """What the controller remembers of a Job between syncs (the real one: its back-off
    store): the failures it has seen, and when it saw the last; for the Job of this uid (one
    made again under the same name starts afresh)."""

    uid: str
    failures: int = 0
    last_failure: datetime | None = None
    refusals: int = 0
    """Pod creates refused in a row (its work queue's rate limiter counts them)."""
    last_refusal: datetime | None = None


class JobController:
    name = "job-controller"

    def __init__(self, store: ControllerStore, backoff: JobBackoff) -> None:
        self._store = store
        self._backoff = backoff
        self._progress: dict[ObjectKey, _JobProgress] = {}

    def keeps(self, resource: ResourceType, obj: Obj) -> bool:
        """The Jobs, and the pods a Job controls or tracks."""
        if resource == JOBS:
            return True
        return resource == PODS and (
            JOB_TRACKING_FINALIZER in _finalizers(obj) or bool(_job_owners(obj))
        )

    def affected(self, view: View, change: Change) -> list[ObjectKey]:
        """A Job changed: the Job, and its pods when it went (they lose their tracking
        finalizer); a pod changed: the Jobs that control or controlled it, and the pod itself
        (it may hold the finalizer of a Job that is gone)."""
        if not self.keeps(change.resource, change.obj):
            return []  # another object gone: none of this controller's business
        key = _object_key(change.resource, change.obj)
        if change.resource == JOBS:
            return [key, *view.dependents.get(change.uid, ())] if change.deleted else [key]
        owners = {uid for obj in (change.obj, change.previous) if obj for uid in _job_owners(obj)}
        jobs = [job for uid in sorted(owners) if (job := view.by_uid.get(uid)) is not None]
        return [*jobs, key]

    def sync(self, view: View, key: ObjectKey, now: datetime) -> float | None:
        found = view.objects.get(key)
        if found is None:
            self._progress.pop(key, None)  # a Job gone: what it went through is forgotten
            return None
        resource, obj = found
        if resource == PODS:
            if self._orphaned(obj, view):
                self._release(obj)
            return None
        if (obj.get("spec") or {}).get("suspend"):
            return None
        if _has_condition(obj, "Complete") or _has_condition(obj, "Failed"):
            return None
        uid = obj["metadata"]["uid"]
        pods = [
            pod
            for pod_resource, pod in view.dependents_of(uid)
            if pod_resource == PODS and uid in _job_owners(pod)
        ]
        return self._sync(obj, pods, now)

    def _sync(self, job: Obj, pods: list[Obj], now: datetime) -> float | None:
        """``syncJob`` for a NonIndexed Job."""
        spec = job["spec"]
        uid = job["metadata"]["uid"]
        key = _object_key(JOBS, job)
        progress = self._progress.get(key)
        if progress is None or progress.uid != uid:
            progress = self._progress[key] = _JobProgress(uid)
        status = json_copy(job.get("status") or {})
        written = json_copy(status)
        uncounted = status.setdefault("uncountedTerminatedPods", {})
        counted_succeeded = set(uncounted.get("succeeded") or [])
        counted_failed = set(uncounted.get("failed") or [])
        replace_only_failed = spec.get("podReplacementPolicy") == "Failed"

        def failed(pod: Obj) -> bool:
            if _phase(pod) == "Failed":
                return True
            return not replace_only_failed and _deleting(pod) and _phase(pod) != "Succeeded"

        tracked = [p for p in pods if JOB_TRACKING_FINALIZER in _finalizers(p)]
        active = [p for p in pods if not _finished(p) and not _deleting(p)]
        terminating = sum(1 for p in pods if _deleting(p) and not _finished(p))
        new_succeeded = [
            p
            for p in tracked
            if _phase(p) == "Succeeded" and p["metadata"]["uid"] not in counted_succeeded
        ]
        new_failed = [
            p for p in tracked if failed(p) and p["metadata"]["uid"] not in counted_failed
        ]
        succeeded = status.get("succeeded", 0) + len(new_succeeded) + len(counted_succeeded)
        failures = status.get("failed", 0) + len(new_failed) + len(counted_failed)
        if failures > progress.failures:
            progress.failures, progress.last_failure = failures, now
        status.setdefault("startTime", rfc3339(now))
        again = None

        finishing = _has_condition(job, "SuccessCriteriaMet") or _has_condition(
            job, "FailureTarget"
        )
        if finishing is None:
            deadline = spec.get("activeDeadlineSeconds")
            if failures > spec["backoffLimit"]:
                finishing = _condition(
                    "FailureTarget",
                    "BackoffLimitExceeded",
                    "Job has reached the specified backoff limit",
                    now,
                )
            elif deadline is not None:
                started = datetime.fromisoformat(status["startTime"])
                left = (started + timedelta(seconds=deadline) - now).total_seconds()
                if left <= 0:
                    finishing = _condition(
                        "FailureTarget",
                        "DeadlineExceeded",
                        "Job was active longer than specified deadline",
                        now,
                    )
                else:
                    again = left
        active_count = len(active)
        if finishing is not None and finishing["type"] == "FailureTarget":
            for pod in active:
                self._store.delete(PODS, *_key(pod), preconditions={"uid": pod["metadata"]["uid"]})
            terminating += len(active)
            active, active_count = [], 0
        elif finishing is None and not _deleting(job):
            active_count, wake = self._manage(job, active, succeeded, progress, now)
            again = _sooner(again, wake)
            completions = spec.get("completions")
            done = succeeded >= completions if completions is not None else succeeded > 0
            if done and active_count == 0:
                finishing = _condition(
                    "SuccessCriteriaMet",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    now,
                )
        status["active"] = active_count
        status["ready"] = sum(1 for p in active if _ready(p))
        status["terminating"] = terminating

        # trackJobStatusAndRemoveFinalizers: record the finished pods as uncounted, flush, remove
        # their finalizers, then count them.
        releasing = []
        for pod in tracked:
            pod_uid = pod["metadata"]["uid"]
            if _phase(pod) == "Succeeded":
                if pod_uid not in counted_failed and pod_uid not in counted_succeeded:
                    uncounted.setdefault("succeeded", []).append(pod_uid)
            elif failed(pod) or (finishing is not None and finishing["type"] == "FailureTarget"):
                if pod_uid not in counted_failed:
                    uncounted.setdefault("failed", []).append(pod_uid)
            elif not _deleting(job) and finishing is None:
                continue
            releasing.append(pod)
        if finishing is not None and not _has_condition(job, finishing["type"]):
            status.setdefault("conditions", []).append(finishing)
        if status != written:
            job = self._write_status(job, status)
            written = json_copy(status)
        for pod in releasing:
            self._release(pod)
        for outcome in ("succeeded", "failed"):
            uids = uncounted.pop(outcome, None) or []
            status[outcome] = status.get(outcome, 0) + len(uids)
        if finishing is not None and terminating == 0:
            final = "Complete" if finishing["type"] == "SuccessCriteriaMet" else "Failed"
            status["conditions"].append(
                _condition(final, finishing["reason"], finishing["message"], now)
            )
            if final == "Complete":
                status["completionTime"] = rfc3339(now)
        if status != written:
            self._write_status(job, status)
        return again

    @staticmethod
    def _orphaned(pod: Obj, view: View) -> bool:
        """A pod holding the tracking finalizer of no Job (``syncOrphanPod``): its Job is gone,
        or orphaned it."""
        if JOB_TRACKING_FINALIZER not in _finalizers(pod):
            return False
        return not any(
            (key := view.by_uid.get(uid)) is not None and key[0] == JOBS for uid in _job_owners(pod)
        )

    def _release(self, pod: Obj) -> None:
        """Remove the pod's tracking finalizer (a pod already gone needs nothing)."""
        kept = [f for f in _finalizers(pod) if f != JOB_TRACKING_FINALIZER]
        try:
            _set_metadata(self._store, PODS, pod, "finalizers", kept or None)
        except ApiError as error:
            if error.code != 404:
                raise

    def _manage(
        self, job: Obj, active: list[Obj], succeeded: int, progress: _JobProgress, now: datetime
    ) -> tuple[int, float | None]:
        """``manageJob``: as many active pods as the Job wants, a failed one replaced after the
        back-off; the active count after it, and when to look again."""
        spec = job["spec"]
        completions = spec.get("completions")
        wanted = spec["parallelism"]
        if completions is not None:
            wanted = min(wanted, completions - succeeded)
        elif succeeded > 0:
            wanted = 0
        wanted = max(wanted, 0)
        if len(active) > wanted:
            for pod in active[wanted:]:
                self._store.delete(PODS, *_key(pod), preconditions={"uid": pod["metadata"]["uid"]})
            return wanted, None
        missing = wanted - len(active)
        if missing == 0:
            return len(active), None
        if progress.last_failure is not None:
            ready_at = progress.last_failure + timedelta(
                seconds=self._backoff.after(progress.failures)
            )
            if now < ready_at:
                return len(active), (ready_at - now).total_seconds()
        if progress.last_refusal is not None:
            retry_at = progress.last_refusal + timedelta(seconds=_refused_delay(progress.refusals))
            if now < retry_at:
                return len(active), (retry_at - now).total_seconds()
        namespace = job["metadata"]["namespace"]
        for created in range(missing):
            try:
                self._store.create(PODS, namespace, self._pod_for(job))
            except ApiError as error:
                if _namespace_terminating(error):
                    raise
                self._record_failed_create(job, error, now)
                progress.refusals, progress.last_refusal = progress.refusals + 1, now
                return len(active) + created, _refused_delay(progress.refusals)
        progress.refusals, progress.last_refusal = 0, None
        return len(active) + missing, None

    def _record_failed_create(self, job: Obj, error: ApiError, now: datetime) -> None:
        """The ``FailedCreate`` Warning the real pod control records on the Job, as a client
        of ``events.k8s.io/v1`` reads an Event its recorder wrote through ``v1``."""
        metadata = job["metadata"]
        self._store.create(
            EVENTS,
            metadata["namespace"],
            {
                # Named as client-go's recorder names events: the object's name, a nanosecond clock.
                "metadata": {"name": f"{metadata['name']}.{time.time_ns():x}"},
                "regarding": {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": metadata["name"],
                    "namespace": metadata["namespace"],
                    "uid": metadata["uid"],
                    "resourceVersion": metadata.get("resourceVersion", ""),
                },
                "reason": "FailedCreate",
                "type": "Warning",
                "note": f"Error creating: {error.message}",
                "reportingController": self.name,
                "reportingInstance": "",
                "deprecatedSource": {"component": self.name},
                "deprecatedFirstTimestamp": rfc3339(now),
                "deprecatedLastTimestamp": rfc3339(now),
                "deprecatedCount": 1,
            },
        )

    def _pod_for(self, job: Obj) -> Obj:
        template = json_copy(job["spec"].get("template") or {})
        metadata = template.get("metadata") or {}
        metadata.pop("name", None)
        metadata["generateName"] = f"{job['metadata']['name']}-"
        metadata["namespace"] = job["metadata"]["namespace"]
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": job["metadata"]["name"],
                "uid": job["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        metadata["finalizers"] = [*(metadata.get("finalizers") or []), JOB_TRACKING_FINALIZER]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}

    def _write_status(self, job: Obj, status: Obj) -> Obj:
        namespace, name = _key(job)
        return self._store.replace(
            JOBS, namespace, name, {**job, "status": status}, subresource="status"
        )


def _refused_delay(refusals: int) -> float:
    delay = REFUSED_CREATE_RETRY_SECONDS * 2.0 ** max(refusals - 1, 0)
    return min(delay, REFUSED_CREATE_RETRY_MAX_SECONDS)


def _namespace_terminating(error: ApiError) -> bool:
    """A create refused because its namespace is being deleted (the ``NamespaceTerminating``
    cause): the real pod control records no event for it."""
    causes = error.details.get("causes") or []
    return any(cause.get("reason") == "NamespaceTerminating" for cause in causes)


# Namespaces --------------------------------------------------------------------------------------


class NamespaceController:
    name = "namespace-controller"

    def __init__(self, store: ControllerStore) -> None:
        self._store = store

    def keeps(self, resource: ResourceType, obj: Obj) -> bool:
        """The namespaces, and what it publishes in each."""
        name = obj["metadata"]["name"]
        return (
            resource == NAMESPACES
            or (resource, name) == (CONFIG_MAPS, ROOT_CA_CONFIG_MAP)
            or (resource, name) == (SERVICE_ACCOUNTS, DEFAULT_SERVICE_ACCOUNT)
        )

    def affected(self, view: View, change: Change) -> list[ObjectKey]:
        """The namespace itself, or the one what it publishes is in."""
        if not self.keeps(change.resource, change.obj):
            return []  # another object gone: none of this controller's business
        if change.resource == NAMESPACES:
            return [_object_key(NAMESPACES, change.obj)]
        return [(NAMESPACES, "", change.obj["metadata"]["namespace"])]

    def sync(self, view: View, key: ObjectKey, now: datetime) -> float | None:
        namespace = view.get(key)
        if namespace is None:
            return None
        name = namespace["metadata"]["name"]
        if _deleting(namespace):
            # Its contents are read from the store itself, and read again until they are gone
            # (the real controller requeues a namespace with content left).
            inside, _revision = self._store.snapshot(namespace=name)
            return None if self._empty(namespace, inside) else CONTENT_RECHECK_SECONDS
        published = [
            found
            for kind, published_name in (
                (CONFIG_MAPS, ROOT_CA_CONFIG_MAP),
                (SERVICE_ACCOUNTS, DEFAULT_SERVICE_ACCOUNT),
            )
            if (found := view.objects.get((kind, name, published_name))) is not None
        ]
        self._publish(name, published)
        return None

    def _publish(self, namespace: str, inside: Snapshot) -> None:
        """The root-CA publisher's ConfigMap and the service-account controller's ``default``."""
        found = {(resource, obj["metadata"]["name"]): obj for resource, obj in inside}
        wanted_data = {"ca.crt": EMULATOR_CA_CERTIFICATE}
        config_map = found.get((CONFIG_MAPS, ROOT_CA_CONFIG_MAP))
        if config_map is None:
            self._store.create(
                CONFIG_MAPS,
                namespace,
                {
                    "metadata": {
                        "name": ROOT_CA_CONFIG_MAP,
                        "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
                    },
                    "data": wanted_data,
                },
            )
        elif config_map.get("data") != wanted_data and not _deleting(config_map):
            self._store.replace(
                CONFIG_MAPS, namespace, ROOT_CA_CONFIG_MAP, {**config_map, "data": wanted_data}
            )
        if (SERVICE_ACCOUNTS, DEFAULT_SERVICE_ACCOUNT) not in found:
            self._store.create(
                SERVICE_ACCOUNTS, namespace, {"metadata": {"name": DEFAULT_SERVICE_ACCOUNT}}
            )

    def _empty(self, namespace: Obj, inside: Snapshot) -> bool:
        """``deleteAllContent``, then ``finalizeNamespace`` once nothing is left; whether it is
        done with the namespace."""
        finalizers = (namespace.get("spec") or {}).get("finalizers") or []
        if NAMESPACE_FINALIZER not in finalizers:
            return True
        for resource, obj in inside:
            if not _deleting(obj):
                self._store.delete(
                    resource,
                    *_key(obj),
                    preconditions={"uid": obj["metadata"]["uid"]},
                    propagation="Background",
                )
        if inside:
            return False
        name = namespace["metadata"]["name"]
        finalized = json_copy(namespace)
        finalized["spec"]["finalizers"] = [f for f in finalizers if f != NAMESPACE_FINALIZER]
        self._store.replace(NAMESPACES, "", name, finalized, subresource="finalize")
        return True
