"""The local backend: a Kubernetes port whose Pods and Jobs run as processes on this machine.

The lifecycle engine drives it exactly as it drives a cluster (same plugin manager, same plugins,
same phase decisions): objects are created, read, patched, replaced and deleted with the API
server's semantics (uid, resourceVersion, generateName, 404/409/422, resourceVersion
preconditions, finalizers, status kept by the status subresource's owner), and their status is
written by a local kubelet (:mod:`.kubelet`) and a local Job controller, both deciding as
Kubernetes does (:mod:`podwright.core.local_runtime`, :mod:`podwright.core.local_jobs`):

* a Pod's containers run as processes (command, arguments, environment, working directory; the
  image is recorded, not pulled, and the Pulled event says so; the memory limit is RLIMIT_DATA),
  their output in ``<state_dir>/logs/<namespace>/<pod>/<container>.log``; they are restarted as
  the pod's ``restartPolicy`` says, with the kubelet's crash-loop back-off (``restart_backoff``);
* a Job runs its pods one at a time, replaces failed ones after the Job controller's back-off
  (``job_backoff``) up to its ``backoffLimit`` (restarts count with ``OnFailure``), and honours
  ``ttlSecondsAfterFinished``;
* deletion is graceful, as the API server and the kubelet make it: a Pod gets a
  ``deletionTimestamp`` (now + its grace period) and ``deletionGracePeriodSeconds`` (the delete's
  ``grace_period_seconds``, else the pod's ``terminationGracePeriodSeconds``, else 30; 0 for a pod
  that already ended), its containers get SIGTERM, SIGKILL at the end of the grace period, and the
  object goes once its processes are gone and its finalizers are empty (a grace period of 0 kills
  at once, and ``delete`` returns once the processes are gone). Other kinds go at once unless
  finalizers hold them. Propagation is the garbage collector's: ``Background`` deletes an owner's
  dependents once the owner is gone, ``Foreground`` keeps the owner (``foregroundDeletion``) until
  its blocking dependents are gone, ``Orphan`` leaves them without the owner;
* PersistentVolumeClaims, Services and ConfigMaps are kept as records: nothing is provisioned or
  exposed.

Events go to the engine's event index with the reasons Kubernetes uses (Scheduled, Pulled,
Created, Started, Killing, BackOff, Failed; SuccessfulCreate, SuccessfulDelete, Completed,
BackoffLimitExceeded).

Objects live in memory: a restarted backend knows none of them, and a task whose resource it no
longer has is failed by the engine as externally deleted, after ``close`` stopped its processes.
``close`` stops every pod with its grace period (SIGTERM, SIGKILL, reaped) before it returns. A
backend that could not close (its process was killed) leaves processes behind: the next backend on
the same state directory kills them before it starts anything (:func:`.kubelet.kill_orphans`).
Only one backend may use a state directory at a time: the executor holds :data:`LOCK_NAME` while
it runs one.
"""

from __future__ import annotations

import contextlib
import copy
import random
import string
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from podwright.adapters.local.kubelet import PodHost, PodWorker, host_env, kill_orphans
from podwright.core.json_patch import (
    MalformedPatchError,
    UnappliablePatchError,
    apply_json_patch,
    apply_merge_patch,
)
from podwright.core.lifecycle.objects import controller_of
from podwright.core.local_jobs import DEFAULT_BACKOFF_LIMIT, job_spec_problems, sync_job
from podwright.core.local_runtime import (
    CRASH_LOOP_BACKOFF,
    DEFAULT_GRACE_SECONDS,
    JOB_POD_FAILURE_BACKOFF,
    Backoff,
    grace_seconds,
    pod_spec_problems,
)
from podwright.engine.event_index import EventIndex, EventKey, ObjectEvent
from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ConflictError,
    InvalidError,
    JsonObject,
    NotFoundError,
    ObjectRef,
    PatchType,
    ServerError,
)

RUNNABLE = {("v1", "Pod"), ("batch/v1", "Job")}
RECORDED = {("v1", "PersistentVolumeClaim"), ("v1", "Service"), ("v1", "ConfigMap")}
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
FOREGROUND_DELETION = "foregroundDeletion"
LOCK_NAME = "executor.lock"
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
_JOB_RESYNC_SECONDS = 1.0
_Key = tuple[str, str, str]


def _utc_now() -> datetime:
    return datetime.now(UTC)


class LocalCluster:
    """Pods and Jobs as local processes, behind the engine's Kubernetes port.

    ``restart_backoff`` is the crash-loop back-off of restarted containers (the kubelet's 10 s
    doubling to 5 min by default) and ``job_backoff`` the Job controller's before it replaces a
    failed pod (10 s doubling to 10 min): tests pass shorter ones.
    """

    def __init__(
        self,
        state_dir: str | Path,
        *,
        events: EventIndex | None = None,
        clock: Callable[[], datetime] = _utc_now,
        base_env: dict[str, str] | None = None,
        default_workdir: str | Path | None = None,
        restart_backoff: Backoff = CRASH_LOOP_BACKOFF,
        job_backoff: Backoff = JOB_POD_FAILURE_BACKOFF,
    ) -> None:
        self.state_dir = Path(state_dir)
        self._default_workdir = default_workdir
        self._events = events
        self._clock = clock
        self._base_env = base_env if base_env is not None else host_env()
        self._restart_backoff = restart_backoff
        self._job_backoff = job_backoff
        self._objects: dict[_Key, dict[str, Any]] = {}
        self._kubelet: dict[tuple[str, str], PodWorker] = {}
        self._jobs: dict[tuple[str, str], threading.Thread] = {}
        self._version = 0
        self._changed = threading.Condition()
        self._closed = False
        self._host = PodHost(
            write_status=self._write_pod_status,
            event=self._event,
            finished=self._pod_finished,
            log_path=self.log_path,
            workdir=self._workdir,
        )
        self.orphans_killed = kill_orphans(self.state_dir)

    # The port ------------------------------------------------------------------------------

    def create(self, obj: JsonObject) -> dict[str, Any]:
        api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
        if (api_version, kind) not in RUNNABLE | RECORDED:
            raise InvalidError(
                f"the local backend runs Pods and Jobs, not {api_version}/{kind}; run it on a "
                "cluster (--backend kubernetes)",
                status=422,
                reason="Invalid",
            )
        stored = copy.deepcopy(dict(obj))
        metadata = stored.setdefault("metadata", {})
        namespace = metadata.setdefault("namespace", "default")
        with self._changed:
            if self._closed:
                raise ServerError("the local backend is closed", status=503)
            if not metadata.get("name"):
                prefix = metadata.get("generateName")
                if not prefix:
                    raise InvalidError(
                        "metadata.name or metadata.generateName is required", status=422
                    )
                metadata["name"] = prefix + "".join(random.choices(_SUFFIX_ALPHABET, k=5))
            _default(kind, stored)
            _validate(kind, stored)
            key = (kind, namespace, metadata["name"])
            if key in self._objects:
                raise AlreadyExistsError(
                    f'{kind.lower()}s "{metadata["name"]}" already exists',
                    status=409,
                    reason="AlreadyExists",
                )
            metadata.pop("generateName", None)
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = _time(self._clock())
            metadata["generation"] = 1
            stored["status"] = {"phase": "Pending"} if kind == "Pod" else {}
            self._store(key, stored)
            ref = ObjectRef(api_version, kind, namespace, metadata["name"])
            if kind == "Pod":
                worker = PodWorker(
                    self._host,
                    ref,
                    copy.deepcopy(stored),
                    state_dir=self.state_dir,
                    clock=self._clock,
                    backoff=self._restart_backoff,
                    base_env=self._base_env,
                )
                self._kubelet[(namespace, ref.name)] = worker
                worker.start()
            elif kind == "Job":
                thread = threading.Thread(
                    target=self._run_job, args=(ref,), name=f"job {ref.name}", daemon=True
                )
                self._jobs[(namespace, ref.name)] = thread
                thread.start()
            return copy.deepcopy(stored)

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        with self._changed:
            return copy.deepcopy(self._existing(ref))

    def cached(self, ref: ObjectRef) -> JsonObject | None:
        with self._changed:
            found = self._objects.get(_key(ref))
            return copy.deepcopy(found) if found is not None else None

    def cached_pods(self, namespace: str, label: str, value: str) -> list[JsonObject] | None:
        with self._changed:
            return [
                copy.deepcopy(obj)
                for (kind, pod_namespace, _), obj in self._objects.items()
                if kind == "Pod"
                and pod_namespace == namespace
                and (obj["metadata"].get("labels") or {}).get(label) == value
            ]

    def patch(self, ref: ObjectRef, body: Any, patch_type: PatchType) -> dict[str, Any]:
        with self._changed:
            current = self._existing(ref)
            try:
                if patch_type is PatchType.JSON:
                    patched = apply_json_patch(current, body)
                else:
                    if not isinstance(body, dict):
                        raise InvalidError("a merge patch must be a JSON object", status=400)
                    patched = apply_merge_patch(current, body)
            except MalformedPatchError as error:
                raise InvalidError(str(error), status=400, reason="BadRequest") from error
            except UnappliablePatchError as error:
                raise InvalidError(str(error), status=422, reason="Invalid") from error
            return self._update(ref, current, patched)

    def replace(self, ref: ObjectRef, obj: JsonObject) -> dict[str, Any]:
        with self._changed:
            current = self._existing(ref)
            return self._update(ref, current, copy.deepcopy(dict(obj)))

    def delete(
        self,
        ref: ObjectRef,
        *,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
    ) -> None:
        """Delete as the API server does (see the module docstring): a Pod stops gracefully and
        stays, with its ``deletionTimestamp``, until its processes are gone and its finalizers
        are empty."""
        if propagation not in PROPAGATION_POLICIES:
            allowed = ", ".join(f'"{policy}"' for policy in PROPAGATION_POLICIES)
            raise InvalidError(
                f'propagationPolicy: Unsupported value: "{propagation}": supported values: '
                f"{allowed}",
                status=422,
                reason="Invalid",
            )
        with self._changed:
            current = self._existing(ref)
            forced = self._request_deletion(_key(ref), current, propagation, grace_period_seconds)
            self._sweep()
        if forced is not None:
            forced.join()

    # Local only ----------------------------------------------------------------------------

    def log_path(self, namespace: str, pod: str, container: str) -> Path:
        """Where a container's output is captured (every run of it, appended)."""
        return self.state_dir / "logs" / namespace / pod / f"{container}.log"

    def pods_of_job(self, namespace: str, job: str) -> list[str]:
        """The names of the pods a Job created, oldest first."""
        with self._changed:
            found = self._objects.get(("Job", namespace, job))
            if found is None:
                return []
            return [pod["metadata"]["name"] for pod in self._owned_pods(found)]

    def close(self) -> None:
        """Stop every pod as a node shutting down does (SIGTERM, SIGKILL after its grace period,
        reaped), and the Job controller; return once no process of this backend remains."""
        with self._changed:
            self._closed = True
            workers = list(self._kubelet.values())
            jobs = list(self._jobs.values())
            deadlines = [self._stop_deadline(worker.ref) for worker in workers]
            self._changed.notify_all()
        for thread in jobs:
            thread.join()
        for worker, deadline in zip(workers, deadlines, strict=True):
            worker.stop(deadline)
        for worker in workers:
            worker.join()

    # Objects -------------------------------------------------------------------------------

    def _existing(self, ref: ObjectRef) -> dict[str, Any]:
        found = self._objects.get(_key(ref))
        if found is None:
            raise NotFoundError(
                f'{ref.kind.lower()}s "{ref.name}" not found', status=404, reason="NotFound"
            )
        return found

    def _store(self, key: _Key, obj: dict[str, Any]) -> None:
        self._objects[key] = obj
        self._bump(obj)

    def _bump(self, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self._changed.notify_all()

    def _update(
        self, ref: ObjectRef, current: dict[str, Any], updated: dict[str, Any]
    ) -> dict[str, Any]:
        metadata = updated.get("metadata") or {}
        old = current["metadata"]
        if metadata.get("resourceVersion", old["resourceVersion"]) != old["resourceVersion"]:
            raise ConflictError(
                f'Operation cannot be fulfilled on {ref.kind.lower()}s "{ref.name}": the object '
                "has been modified; please apply your changes to the latest version and try again",
                status=409,
                reason="Conflict",
            )
        added = set(metadata.get("finalizers") or []) - set(old.get("finalizers") or [])
        if "deletionTimestamp" in old and added:
            raise InvalidError(
                f'{ref.kind} "{ref.name}" is invalid: metadata.finalizers: Forbidden: no new '
                f"finalizers can be added if the object is being deleted, found new finalizers "
                f"{sorted(added)}",
                status=422,
                reason="Invalid",
            )
        fixed = ("name", "namespace", "uid", "creationTimestamp", "generation")
        for field in (*fixed, "deletionTimestamp", "deletionGracePeriodSeconds"):
            if field in old:
                metadata[field] = old[field]
            else:
                metadata.pop(field, None)
        updated["metadata"] = metadata
        if ref.kind in ("Pod", "Job"):
            # The status subresource's owner (the kubelet, the Job controller) writes it.
            updated["status"] = copy.deepcopy(current.get("status") or {})
        self._store(_key(ref), updated)
        self._sweep()
        return copy.deepcopy(updated)

    def _request_deletion(
        self, key: _Key, obj: dict[str, Any], propagation: str, grace: int | None
    ) -> PodWorker | None:
        """Mark ``obj`` deleted as the API server does (called with the lock held); the pod
        worker to wait for when the deletion is immediate (a grace period of 0)."""
        metadata = obj["metadata"]
        now = self._clock()
        forced = None
        if key[0] == "Pod":
            forced = self._delete_pod(key, obj, grace, now)
        elif "deletionTimestamp" not in metadata:
            metadata["deletionTimestamp"] = _time(now)
            metadata["deletionGracePeriodSeconds"] = 0
            metadata["generation"] = metadata.get("generation", 1) + 1
        uid = metadata["uid"]
        if propagation == "Foreground":
            if FOREGROUND_DELETION not in (metadata.get("finalizers") or []):
                metadata["finalizers"] = [*(metadata.get("finalizers") or []), FOREGROUND_DELETION]
            for other, dependent in list(self._objects.items()):
                if (
                    uid in _owner_uids(dependent)
                    and "deletionTimestamp" not in dependent["metadata"]
                ):
                    self._request_deletion(other, dependent, "Background", None)
        elif propagation == "Orphan":
            for dependent in self._objects.values():
                owners = dependent["metadata"].get("ownerReferences") or []
                if any(owner.get("uid") == uid for owner in owners):
                    kept = [owner for owner in owners if owner.get("uid") != uid]
                    dependent["metadata"]["ownerReferences"] = kept
                    self._bump(dependent)
        self._bump(obj)
        return forced

    def _delete_pod(
        self, key: _Key, pod: dict[str, Any], grace: int | None, now: datetime
    ) -> PodWorker | None:
        """The API server's graceful deletion of a pod (``BeforeDelete`` with the pod strategy's
        ``CheckGracefulDelete``), passed on to the pod's kubelet worker."""
        metadata = pod["metadata"]
        worker = self._kubelet.get((key[1], key[2]))
        if grace is not None and grace < 0:
            grace = 1
        if "deletionTimestamp" in metadata:
            current = metadata.get("deletionGracePeriodSeconds")
            if not current or grace is None or grace >= current:
                return None  # only a shorter grace period changes a pending deletion
            requested = datetime.fromisoformat(metadata["deletionTimestamp"]) - timedelta(
                seconds=current
            )
            deadline = requested + timedelta(seconds=grace)
            if deadline < now:
                deadline, grace = now, (1 if grace else 0)
        else:
            if grace is None:
                grace = grace_seconds(pod.get("spec") or {})
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                grace = 0  # a pod that already ended goes at once
            deadline = now + timedelta(seconds=grace)
            metadata["generation"] = metadata.get("generation", 1) + 1
        metadata["deletionTimestamp"] = _time(deadline)
        metadata["deletionGracePeriodSeconds"] = grace
        if worker is None:
            return None
        worker.stop(deadline)
        return worker if grace == 0 else None

    def _sweep(self) -> None:
        """The garbage collector and the API server's final removal (called with the lock held):
        dependents of owners that are gone are deleted, a foreground deletion ends when its
        blocking dependents are gone, and a deleted object without finalizers (a pod: without
        processes) is removed."""
        changed = True
        while changed:
            changed = False
            uids = {obj["metadata"]["uid"] for obj in self._objects.values()}
            for key, obj in list(self._objects.items()):
                metadata = obj["metadata"]
                owners = _owner_uids(obj)
                if owners and not owners & uids and "deletionTimestamp" not in metadata:
                    self._request_deletion(key, obj, "Background", None)
                    changed = True
                finalizers = metadata.get("finalizers") or []
                if "deletionTimestamp" not in metadata:
                    continue
                if FOREGROUND_DELETION in finalizers and not self._blocking(metadata["uid"]):
                    metadata["finalizers"] = [f for f in finalizers if f != FOREGROUND_DELETION]
                    self._bump(obj)
                    changed = True
                running = key[0] == "Pod" and (key[1], key[2]) in self._kubelet
                if not metadata.get("finalizers") and not running:
                    del self._objects[key]
                    changed = True
        self._changed.notify_all()

    def _blocking(self, uid: str) -> bool:
        """Whether a dependent that blocks its owner's foreground deletion still exists."""
        return any(
            owner.get("uid") == uid and owner.get("blockOwnerDeletion")
            for obj in self._objects.values()
            for owner in obj["metadata"].get("ownerReferences") or []
        )

    def _event(self, ref: ObjectRef, reason: str, note: str, kind: str = "Normal") -> None:
        if self._events is None:
            return
        now = self._clock()
        with self._changed:
            if _key(ref) not in self._objects:
                return
        event = ObjectEvent(str(uuid.uuid4()), now, now, reason, note, kind)
        self._events.add(EventKey(ref.namespace, ref.kind, ref.name), event, now)

    def _set_status(self, key: _Key, status: dict[str, Any]) -> None:
        found = self._objects.get(key)
        if found is not None and found.get("status") != status:
            found["status"] = status
            self._bump(found)

    # Pods ----------------------------------------------------------------------------------

    def _write_pod_status(
        self, ref: ObjectRef, compute: Callable[[JsonObject | None], dict[str, Any]]
    ) -> None:
        with self._changed:
            found = self._objects.get(_key(ref))
            if found is not None:
                self._set_status(_key(ref), compute(found.get("status")))

    def _pod_finished(self, ref: ObjectRef) -> None:
        """The pod's processes are gone: a deleted pod without finalizers goes; with finalizers,
        it stays as the kubelet's final delete leaves it (grace period 0)."""
        with self._changed:
            self._kubelet.pop((ref.namespace, ref.name), None)
            found = self._objects.get(_key(ref))
            if found is not None and "deletionTimestamp" in found["metadata"]:
                metadata = found["metadata"]
                if metadata.get("finalizers") and metadata.get("deletionGracePeriodSeconds"):
                    metadata["deletionTimestamp"] = _time(self._clock())
                    metadata["deletionGracePeriodSeconds"] = 0
                    self._bump(found)
            self._sweep()

    def _workdir(self, ref: ObjectRef) -> Path:
        if self._default_workdir is not None:
            return Path(self._default_workdir)
        scratch = self.state_dir / "pods" / ref.namespace / ref.name
        scratch.mkdir(parents=True, exist_ok=True)
        return scratch

    def _stop_deadline(self, ref: ObjectRef) -> datetime:
        """When a closing backend kills a pod: its deletion's deadline, else its grace period."""
        pod = self._objects.get(_key(ref)) or {}
        deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
        if deleting:
            return datetime.fromisoformat(deleting)
        seconds = grace_seconds(pod.get("spec") or {}) if pod else DEFAULT_GRACE_SECONDS
        return self._clock() + timedelta(seconds=seconds)

    # Jobs ----------------------------------------------------------------------------------

    def _owned_pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        """The pods a Job controls, oldest first (called with the lock held)."""
        uid = job["metadata"]["uid"]
        return [
            obj
            for (kind, namespace, _), obj in self._objects.items()
            if kind == "Pod"
            and namespace == job["metadata"]["namespace"]
            and (controller_of(obj) or {}).get("uid") == uid
        ]

    def _run_job(self, ref: ObjectRef) -> None:
        """The Job controller for one Job: sync, act, wait for a change or the next deadline."""
        key = _key(ref)
        counted: frozenset[str] = frozenset()
        while True:
            with self._changed:
                job = self._objects.get(key)
                if job is None or self._closed:
                    return
                job, pods = copy.deepcopy(job), copy.deepcopy(self._owned_pods(job))
            step = sync_job(job, pods, counted, self._clock(), self._job_backoff)
            counted = step.counted
            for name in step.delete_pods:
                with contextlib.suppress(NotFoundError):
                    self.delete(ObjectRef("v1", "Pod", ref.namespace, name))
            with self._changed:
                current = self._objects.get(key)
                if current is None or self._closed:
                    return
                self._set_status(key, step.status)
                for event in step.events:
                    self._event(ref, event.reason, event.note, event.type)
                if step.create_pod and "deletionTimestamp" not in current["metadata"]:
                    created = self.create(_job_pod(current))
                    self._event(
                        ref, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
                    )
                    continue
                if step.finished:
                    break
                timeout = _JOB_RESYNC_SECONDS
                if step.wake_at is not None:
                    timeout = min(timeout, (step.wake_at - self._clock()).total_seconds())
                self._changed.wait(timeout=max(timeout, 0.0))
        self._expire_after_ttl(ref, job)

    def _expire_after_ttl(self, ref: ObjectRef, job: dict[str, Any]) -> None:
        """The TTL-after-finished controller: a finished Job with ``ttlSecondsAfterFinished`` is
        deleted (in the foreground) that long after it finished."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if not isinstance(ttl, int):
            return
        deadline = self._clock() + timedelta(seconds=ttl)
        with self._changed:
            while not self._closed and _key(ref) in self._objects:
                remaining = (deadline - self._clock()).total_seconds()
                if remaining <= 0:
                    self.delete(ref, propagation="Foreground")
                    return
                self._changed.wait(timeout=remaining)


def _default(kind: str, obj: dict[str, Any]) -> None:
    """The API server's defaults for the fields the local backend reads."""
    spec = obj.setdefault("spec", {})
    if kind == "Job":
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec.update(completions=1, parallelism=1)
        spec.setdefault("backoffLimit", DEFAULT_BACKOFF_LIMIT)
        spec = spec.setdefault("template", {}).setdefault("spec", {})
    if kind in ("Pod", "Job"):
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)


def _validate(kind: str, obj: JsonObject) -> None:
    """The API server's validation of what the local backend relies on; 422 with every problem."""
    spec = obj.get("spec") or {}
    if kind == "Pod":
        problems = pod_spec_problems(spec)
    elif kind == "Job":
        problems = job_spec_problems(spec)
    else:
        return
    if problems:
        name = obj["metadata"]["name"]
        raise InvalidError(
            f'{kind} "{name}" is invalid: {"; ".join(problems)}', status=422, reason="Invalid"
        )


def _job_pod(job: dict[str, Any]) -> dict[str, Any]:
    """A pod from the Job's template, labelled and owned as the Job controller makes it."""
    metadata = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    pod_metadata = template.get("metadata") or {}
    identity = {"controller-uid": metadata["uid"], "job-name": metadata["name"]}
    labels = {
        **(pod_metadata.get("labels") or {}),
        **{f"batch.kubernetes.io/{name}": value for name, value in identity.items()},
        **identity,
    }
    pod_metadata.update(
        {
            "generateName": f"{metadata['name']}-",
            "namespace": metadata["namespace"],
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": metadata["name"],
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
    )
    pod_metadata.pop("name", None)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_metadata,
        "spec": template.get("spec") or {},
    }


def _owner_uids(obj: JsonObject) -> set[str]:
    return {str(owner.get("uid")) for owner in obj["metadata"].get("ownerReferences") or []}


def _key(ref: ObjectRef) -> _Key:
    return (ref.kind, ref.namespace, ref.name)


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
