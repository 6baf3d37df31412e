"""The local backend: a Kubernetes port whose Pods and Jobs run as processes on this machine.

The lifecycle engine drives it exactly as it drives a cluster (same plugin manager, same plugins,
same phase decisions): objects are created, read, patched, replaced and deleted with the API's
semantics (uid, resourceVersion, generateName, 404/409, resourceVersion preconditions, finalizers
and deletionTimestamp), and their status is written in the API's vocabulary
(:mod:`podwright.core.local_runtime`). A Pod's init containers run in order, then its containers
together, each as a process in its own session with the pod's command, arguments, environment and
working directory (without one: the backend's default, else a scratch directory of the
pod), its output captured in ``<state_dir>/logs/<namespace>/<pod>/<container>.log``
and its memory limit applied as RLIMIT_DATA; the image is recorded, not pulled, and the Pulled
event says so. A Job creates one pod at a time from its template and retries failed pods up to its
backoffLimit. PersistentVolumeClaims, Services and ConfigMaps are kept as records (nothing is
provisioned or exposed), and, as the garbage collector would, removed with the object that owns
them. Deleting a Pod stops its processes (SIGTERM to the process group, SIGKILL after the
grace period). Events go to the engine's event index with the kubelet's reasons (Scheduled,
Pulled, Created, Started, Failed, Killing; SuccessfulCreate, Completed, BackoffLimitExceeded).

Objects live in memory: a restarted backend knows none of them, and a task whose resource it no
longer has is failed by the engine as externally deleted, after ``close`` killed its processes.
A backend that could not close (its process was killed) leaves processes behind; every running
container is recorded in ``<state_dir>/running/<pid>`` (with the process's start time, so a reused
pid is never mistaken for it), and the next backend on the same state directory kills those process
groups before it starts anything. Only one backend may use a state directory at a time: the
executor holds :data:`LOCK_NAME` while it runs one.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import resource
import signal
import string
import subprocess
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from podwright.core.json_patch import (
    MalformedPatchError,
    UnappliablePatchError,
    apply_json_patch,
    apply_merge_patch,
)
from podwright.core.local_runtime import (
    CREATE_CONTAINER_ERROR,
    ContainerRun,
    LaunchRefusal,
    plan_launch,
    pod_status,
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
)

RUNNABLE = {("v1", "Pod"), ("batch/v1", "Job")}
RECORDED = {("v1", "PersistentVolumeClaim"), ("v1", "Service"), ("v1", "ConfigMap")}
DEFAULT_GRACE_SECONDS = 30
_JOB_RETRY_DELAY = 1.0
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
LOCK_NAME = "executor.lock"
_START_ERROR_EXIT = 128
"""The exit code Kubernetes reports for a container whose command could not be started."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class _PodRun:
    """The processes of one pod and what they did."""

    ref: ObjectRef
    init: list[ContainerRun]
    main: list[ContainerRun]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class LocalCluster:
    """Pods and Jobs as local processes, behind the engine's Kubernetes port."""

    def __init__(
        self,
        state_dir: str | Path,
        *,
        events: EventIndex | None = None,
        clock: Callable[[], datetime] = _utc_now,
        base_env: dict[str, str] | None = None,
        default_workdir: str | Path | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self._default_workdir = default_workdir
        self._events = events
        self._clock = clock
        self._base_env = base_env if base_env is not None else _host_env()
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._pods: dict[tuple[str, str], _PodRun] = {}
        self._jobs: dict[tuple[str, str], threading.Thread] = {}
        self._version = 0
        self._changed = threading.Condition()
        self._closed = False
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
            if not metadata.get("name"):
                prefix = metadata.get("generateName")
                if not prefix:
                    raise InvalidError(
                        "metadata.name or metadata.generateName is required", status=422
                    )
                metadata["name"] = prefix + "".join(random.choices(_SUFFIX_ALPHABET, k=5))
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
            stored["status"] = {}
            self._store(key, stored)
            ref = ObjectRef(api_version, kind, namespace, metadata["name"])
            if kind == "Pod":
                self._start_pod(ref, stored)
            elif kind == "Job":
                self._start_job(ref)
            return copy.deepcopy(stored)

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        with self._changed:
            return copy.deepcopy(self._existing(ref))

    def cached(self, ref: ObjectRef) -> JsonObject | None:
        with self._changed:
            found = self._objects.get((ref.kind, ref.namespace, ref.name))
            return copy.deepcopy(found) if found is not None else None

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
            replacement = copy.deepcopy(dict(obj))
            replacement["status"] = copy.deepcopy(current.get("status", {}))
            return self._update(ref, current, replacement)

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> None:
        with self._changed:
            current = self._existing(ref)
            metadata = current["metadata"]
            if "deletionTimestamp" not in metadata:
                metadata["deletionTimestamp"] = _time(self._clock())
                self._bump(current)
            finalized = not metadata.get("finalizers")
        if ref.kind == "Pod":
            self._stop_pod(ref, remove=finalized)
            return
        if ref.kind == "Job":
            for pod in self._pods_of(ref):
                self.delete(pod)
        if finalized:
            self._remove(ref)

    # Local only ----------------------------------------------------------------------------

    def log_path(self, namespace: str, pod: str, container: str) -> Path:
        """Where a container's output is captured."""
        return self.state_dir / "logs" / namespace / pod / f"{container}.log"

    def pods_of_job(self, namespace: str, job: str) -> list[str]:
        """The names of the pods a Job created, oldest first."""
        with self._changed:
            found = self._objects.get(("Job", namespace, job))
        if found is None:
            return []
        return [ref.name for ref in self._pods_of(ObjectRef("batch/v1", "Job", namespace, job))]

    def close(self) -> None:
        """Stop every process (SIGKILL), and wait for the runners."""
        with self._changed:
            self._closed = True
            runs = list(self._pods.values())
            jobs = list(self._jobs.values())
            self._changed.notify_all()
        for run in runs:
            run.stopping.set()
            _signal_all(run, signal.SIGKILL)
        for thread in [run.thread for run in runs if run.thread] + jobs:
            thread.join(timeout=30)

    # Objects -------------------------------------------------------------------------------

    def _existing(self, ref: ObjectRef) -> dict[str, Any]:
        found = self._objects.get((ref.kind, ref.namespace, ref.name))
        if found is None:
            raise NotFoundError(
                f'{ref.kind.lower()}s "{ref.name}" not found', status=404, reason="NotFound"
            )
        return found

    def _store(self, key: tuple[str, str, str], obj: dict[str, Any]) -> None:
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
        if (
            metadata.get("resourceVersion", current["metadata"]["resourceVersion"])
            != current["metadata"]["resourceVersion"]
        ):
            raise ConflictError(
                f'Operation cannot be fulfilled on {ref.kind.lower()}s "{ref.name}": the object '
                "has been modified; please apply your changes to the latest version and try again",
                status=409,
                reason="Conflict",
            )
        for fixed in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp"):
            if fixed in current["metadata"]:
                metadata[fixed] = current["metadata"][fixed]
        updated["metadata"] = metadata
        key = (ref.kind, ref.namespace, ref.name)
        self._store(key, updated)
        if "deletionTimestamp" in metadata and not metadata.get("finalizers"):
            pod_running = ref.kind == "Pod" and (ref.namespace, ref.name) in self._pods
            if not pod_running:
                self._drop(key)
        return copy.deepcopy(updated)

    def _remove(self, ref: ObjectRef) -> None:
        with self._changed:
            self._drop((ref.kind, ref.namespace, ref.name))
            self._changed.notify_all()

    def _drop(self, key: tuple[str, str, str]) -> None:
        """Forget an object, and the recorded objects it owns (called with the lock held)."""
        dropped = self._objects.pop(key, None)
        if dropped is None:
            return
        uid = dropped["metadata"]["uid"]
        owned = [
            other
            for other, obj in self._objects.items()
            if any(
                owner.get("uid") == uid for owner in obj["metadata"].get("ownerReferences") or []
            )
        ]
        for other in owned:
            self._drop(other)

    def _set_status(self, ref: ObjectRef, status: dict[str, Any]) -> None:
        with self._changed:
            found = self._objects.get((ref.kind, ref.namespace, ref.name))
            if found is not None and found.get("status") != status:
                found["status"] = status
                self._bump(found)

    def _event(self, ref: ObjectRef, reason: str, note: str, kind: str = "Normal") -> None:
        if self._events is None:
            return
        now = self._clock()
        with self._changed:
            found = self._objects.get((ref.kind, ref.namespace, ref.name))
        if found is None:
            return
        event = ObjectEvent(str(uuid.uuid4()), now, now, reason, note, kind)
        self._events.add(EventKey(ref.namespace, ref.kind, ref.name), event, now)

    # Pods ----------------------------------------------------------------------------------

    def _start_pod(self, ref: ObjectRef, pod: dict[str, Any]) -> None:
        spec = pod.get("spec") or {}
        run = _PodRun(
            ref,
            init=[ContainerRun(str(c.get("name"))) for c in spec.get("initContainers") or []],
            main=[ContainerRun(str(c.get("name"))) for c in spec.get("containers") or []],
        )
        self._pods[(ref.namespace, ref.name)] = run
        run.thread = threading.Thread(
            target=self._run_pod, args=(run, copy.deepcopy(pod)), name=f"pod {ref.name}"
        )
        run.thread.start()

    def _run_pod(self, run: _PodRun, pod: dict[str, Any]) -> None:
        ref = run.ref
        spec = pod.get("spec") or {}
        created = self._clock()
        self._event(
            ref, "Scheduled", f"Successfully assigned {ref.namespace}/{ref.name} to this machine"
        )
        self._publish(run, created)
        try:
            for index, container in enumerate(spec.get("initContainers") or []):
                if run.stopping.is_set() or not self._run_container(
                    run, run.init, index, container, pod=pod, created=created
                ):
                    return
                self._wait_container(run, run.init, index, created)
                if run.init[index].exit_code != 0:
                    return
            threads = []
            for index, container in enumerate(spec.get("containers") or []):
                if run.stopping.is_set():
                    return
                if self._run_container(run, run.main, index, container, pod=pod, created=created):
                    waiter = threading.Thread(
                        target=self._wait_container, args=(run, run.main, index, created)
                    )
                    waiter.start()
                    threads.append(waiter)
            for waiter in threads:
                waiter.join()
        finally:
            self._publish(run, created)
            with self._changed:
                self._pods.pop((ref.namespace, ref.name), None)
                found = self._objects.get((ref.kind, ref.namespace, ref.name))
                if (
                    found is not None
                    and "deletionTimestamp" in found["metadata"]
                    and not found["metadata"].get("finalizers")
                ):
                    self._drop((ref.kind, ref.namespace, ref.name))
                self._changed.notify_all()

    def _run_container(
        self,
        run: _PodRun,
        runs: list[ContainerRun],
        index: int,
        container: dict[str, Any],
        *,
        pod: dict[str, Any],
        created: datetime,
    ) -> bool:
        """Start one container; False when it cannot start (its status says why)."""
        name = runs[index].name
        image = container.get("image", "")
        self._event(
            run.ref,
            "Pulled",
            f"Image {image!r} is recorded, not pulled: the local backend runs commands on "
            "this machine",
        )
        try:
            launch = plan_launch(container, pod)
            cwd = str(launch.working_dir or self._default_workdir or self._scratch(run.ref))
            if not os.path.isdir(cwd):
                raise LaunchRefusal(
                    CREATE_CONTAINER_ERROR,
                    f"container {name!r}: workingDir {cwd} does not exist on this machine",
                )
        except LaunchRefusal as refusal:
            runs[index] = ContainerRun(
                name, waiting_reason=refusal.reason, waiting_message=refusal.message
            )
            self._event(run.ref, "Failed", f"Error: {refusal.message}", "Warning")
            self._publish(run, created)
            return False
        log = self.log_path(run.ref.namespace, run.ref.name, name)
        log.parent.mkdir(parents=True, exist_ok=True)
        self._event(run.ref, "Created", f"Created container {name}")
        started = self._clock()
        with log.open("ab") as output:
            try:
                process = subprocess.Popen(
                    list(launch.argv),
                    cwd=cwd,
                    env={**self._base_env, **launch.env},
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as error:
                message = f"failed to start container {name!r}: {error.strerror}: {launch.argv[0]}"
                output.write(f"{message}\n".encode())
                runs[index] = ContainerRun(name, started, self._clock(), _START_ERROR_EXIT)
                self._event(run.ref, "Failed", f"Error: {message}", "Warning")
                self._publish(run, created)
                return False
        if launch.memory_limit_bytes is not None:
            with contextlib.suppress(OSError):
                limit = (launch.memory_limit_bytes, launch.memory_limit_bytes)
                resource.prlimit(process.pid, resource.RLIMIT_DATA, limit)
        run.processes[name] = process
        _record_running(self.state_dir, process.pid)
        runs[index] = ContainerRun(name, started)
        self._event(run.ref, "Started", f"Started container {name}")
        self._publish(run, created)
        if run.stopping.is_set():
            _signal_all(run, signal.SIGKILL)
        return True

    def _wait_container(
        self, run: _PodRun, runs: list[ContainerRun], index: int, created: datetime
    ) -> None:
        name = runs[index].name
        process = run.processes[name]
        code = process.wait()
        _forget_running(self.state_dir, process.pid)
        exit_code = code if code >= 0 else 128 - code
        runs[index] = ContainerRun(name, runs[index].started_at, self._clock(), exit_code)
        self._publish(run, created)

    def _publish(self, run: _PodRun, created: datetime) -> None:
        self._set_status(run.ref, pod_status(run.init, run.main, created, self._clock()))

    def _scratch(self, ref: ObjectRef) -> Path:
        scratch = self.state_dir / "pods" / ref.namespace / ref.name
        scratch.mkdir(parents=True, exist_ok=True)
        return scratch

    def _stop_pod(self, ref: ObjectRef, *, remove: bool) -> None:
        with self._changed:
            run = self._pods.get((ref.namespace, ref.name))
            pod = self._objects.get((ref.kind, ref.namespace, ref.name))
            grace = (pod or {}).get("spec", {}).get("terminationGracePeriodSeconds")
        if run is None:
            if remove:
                self._remove(ref)
            return
        run.stopping.set()
        self._event(ref, "Killing", "Stopping the pod's containers")
        _signal_all(run, signal.SIGTERM)
        seconds = DEFAULT_GRACE_SECONDS if grace is None else int(grace)

        def escalate() -> None:
            if run.thread is not None:
                run.thread.join(timeout=seconds)
            _signal_all(run, signal.SIGKILL)

        threading.Thread(target=escalate, name=f"stop {ref.name}", daemon=True).start()

    # Jobs ----------------------------------------------------------------------------------

    def _start_job(self, ref: ObjectRef) -> None:
        thread = threading.Thread(target=self._run_job, args=(ref,), name=f"job {ref.name}")
        self._jobs[(ref.namespace, ref.name)] = thread
        thread.start()

    def _pods_of(self, job: ObjectRef) -> list[ObjectRef]:
        with self._changed:
            found = self._objects.get(("Job", job.namespace, job.name))
            uid = found["metadata"]["uid"] if found else None
            pods = [
                obj
                for (kind, namespace, _), obj in self._objects.items()
                if kind == "Pod"
                and namespace == job.namespace
                and uid is not None
                and (obj["metadata"].get("labels") or {}).get("controller-uid") == uid
            ]
        pods.sort(key=lambda pod: int(pod["metadata"]["resourceVersion"]))
        return [ObjectRef("v1", "Pod", job.namespace, pod["metadata"]["name"]) for pod in pods]

    def _run_job(self, ref: ObjectRef) -> None:
        failed = 0
        started = _time(self._clock())
        while True:
            with self._changed:
                job = self._objects.get((ref.kind, ref.namespace, ref.name))
                if job is None or "deletionTimestamp" in job["metadata"] or self._closed:
                    return
                job = copy.deepcopy(job)
            limit = (job.get("spec") or {}).get("backoffLimit", 6)
            pod = self._job_pod(job)
            created = self.create(pod)
            pod_ref = ObjectRef("v1", "Pod", ref.namespace, created["metadata"]["name"])
            self._event(ref, "SuccessfulCreate", f"Created pod: {pod_ref.name}")
            phase = self._follow_job_pod(ref, pod_ref, failed, started)
            if phase is None:
                return
            if phase == "Succeeded":
                self._end_job(ref, succeeded=True, failed=failed, started=started)
                return
            failed += 1
            if failed > limit:
                self._end_job(ref, succeeded=False, failed=failed, started=started)
                return
            with self._changed:
                self._changed.wait(timeout=_JOB_RETRY_DELAY)

    def _follow_job_pod(
        self, ref: ObjectRef, pod_ref: ObjectRef, failed: int, started: str | None
    ) -> str | None:
        """Mirror the pod into the Job's status until it ends; its phase, or None if gone."""
        while True:
            with self._changed:
                job = self._objects.get((ref.kind, ref.namespace, ref.name))
                pod = self._objects.get((pod_ref.kind, pod_ref.namespace, pod_ref.name))
                if job is None or "deletionTimestamp" in job["metadata"] or self._closed:
                    return None
                observed = copy.deepcopy((pod or {}).get("status") or {})
            phase = observed.get("phase", "Pending")
            if pod is None or phase in ("Succeeded", "Failed"):
                return phase if pod is not None else "Failed"
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in observed.get("conditions") or []
            )
            job_status: dict[str, Any] = {"active": 1, "ready": int(ready), "startTime": started}
            if failed:
                job_status["failed"] = failed
            self._set_status(ref, job_status)
            with self._changed:
                self._changed.wait(timeout=1.0)

    def _job_pod(self, job: dict[str, Any]) -> dict[str, Any]:
        metadata = job["metadata"]
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        pod_metadata = template.get("metadata") or {}
        labels = dict(pod_metadata.get("labels") or {})
        labels.update({"controller-uid": metadata["uid"], "job-name": metadata["name"]})
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

    def _end_job(
        self, ref: ObjectRef, *, succeeded: bool, failed: int, started: str | None
    ) -> None:
        """The Job's final status (Complete, or Failed past its backoff limit) and its event."""
        now = _time(self._clock())
        status: dict[str, Any] = {"active": 0, "ready": 0, "startTime": started}
        if succeeded:
            status.update(succeeded=1, completionTime=now)
            condition = {"type": "Complete", "status": "True", "lastTransitionTime": now}
            event = ("Completed", "Job completed", "Normal")
        else:
            message = "Job has reached the specified backoff limit"
            condition = {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": message,
                "lastTransitionTime": now,
            }
            event = ("BackoffLimitExceeded", message, "Warning")
        if failed:
            status["failed"] = failed
        status["conditions"] = [condition]
        self._set_status(ref, status)
        self._event(ref, *event)


def _signal_all(run: _PodRun, number: int) -> None:
    for process in list(run.processes.values()):
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, number)


def kill_orphans(state_dir: Path) -> int:
    """SIGKILL the process groups a killed backend left running; how many there were."""
    directory = state_dir / "running"
    if not directory.is_dir():
        return 0
    killed = 0
    for record in directory.iterdir():
        with contextlib.suppress(ValueError, OSError):
            pid = int(record.name)
            if record.read_text().strip() == _start_time(pid):
                os.killpg(pid, signal.SIGKILL)
                killed += 1
        record.unlink(missing_ok=True)
    return killed


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2 :].split()[19]


def _record_running(state_dir: Path, pid: int) -> None:
    directory = state_dir / "running"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / str(pid)).write_text(_start_time(pid))


def _forget_running(state_dir: Path, pid: int) -> None:
    (state_dir / "running" / str(pid)).unlink(missing_ok=True)


def _host_env() -> dict[str, str]:
    """What a local container inherits from this machine: where to find programs, the locale."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")
    return {name: os.environ[name] for name in keep if name in os.environ}


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
