"""The local backend's kubelet: one worker thread per Pod runs its containers as processes.

A worker owns its pod's runtime state (:class:`~podwright.core.local_runtime.PodRun`) and is the
only writer of its status, so statuses are written in the order things happened and a phase never
goes back. Its loop is the kubelet's: ask the pure planner (:func:`plan_pod`) what to do, do it
(start a process, SIGTERM or SIGKILL a process group), repeat until nothing is left to do now,
write the status, then wait for a container to exit, a stop request, or the next deadline (a
back-off ending, a grace period ending).

Each container runs in its own session, so its process group is the container: a stop sends
SIGTERM to the group, SIGKILL after the grace period; and when a container's main process exits,
whatever it left in its group is killed, as a container's processes die with its init process.
A container's output goes straight from its processes to its log file (appended across restarts);
its exit is reported only once no process of its group remains, so the file holds all its output
by the time the status says it terminated.

Every running container is recorded in ``<state_dir>/running/<pid>`` with the process's start time,
so a backend that was killed leaves a trace the next one uses to kill what it left
(:func:`kill_orphans`); a reused pid is never mistaken for it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from podwright.adapters.proc import runs_in_group, start_time
from podwright.core.local_runtime import (
    CREATE_CONTAINER_ERROR,
    Backoff,
    LaunchRefusal,
    PodPlan,
    PodRun,
    PodShape,
    plan_launch,
    plan_pod,
    pod_status,
)
from podwright.engine.kubernetes_port import JsonObject, ObjectRef

START_ERROR_EXIT = 128
"""The exit code Kubernetes reports for a container whose command could not be started."""
START_ERROR = "StartError"
_GROUP_EXIT_BOUND = 2.0
"""How long a container's exit waits for the rest of its process group to be gone (seconds)."""


@dataclass(frozen=True)
class PodHost:
    """What a pod worker needs from the cluster that holds its Pod object.

    ``write_status(ref, compute)`` stores ``compute(previous_status)`` as the pod's status;
    ``event(ref, reason, note, type)`` records an event on it; ``finished(ref)`` says the worker
    is done (every process of the pod is gone); ``log_path(namespace, pod, container)`` and
    ``workdir(ref)`` say where output goes and where a container without a working directory runs.
    """

    write_status: Callable[[ObjectRef, Callable[[JsonObject | None], dict[str, Any]]], None]
    event: Callable[[ObjectRef, str, str, str], None]
    finished: Callable[[ObjectRef], None]
    log_path: Callable[[str, str, str], Path]
    workdir: Callable[[ObjectRef], Path]


@dataclass(frozen=True)
class _Exited:
    name: str
    exit_code: int
    at: datetime


@dataclass(frozen=True)
class _Stop:
    deadline: datetime


class PodWorker:
    """Runs one pod's containers on this machine until it stops for good."""

    def __init__(
        self,
        host: PodHost,
        ref: ObjectRef,
        pod: JsonObject,
        *,
        state_dir: Path,
        clock: Callable[[], datetime],
        backoff: Backoff,
        base_env: Mapping[str, str],
    ) -> None:
        self.ref = ref
        self._host = host
        self._pod = pod
        spec = pod.get("spec") or {}
        self._specs = {
            str(c.get("name")): c
            for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        }
        self._state_dir = state_dir
        self._clock = clock
        self._backoff = backoff
        self._base_env = dict(base_env)
        self._run = PodRun.new(PodShape.of(pod), clock())
        self._inbox: queue.Queue[_Exited | _Stop] = queue.Queue()
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._waiters: list[threading.Thread] = []
        self._backed_off: set[tuple[str, int]] = set()
        self._thread = threading.Thread(target=self._work, name=f"kubelet {ref.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, deadline: datetime) -> None:
        """Stop the pod: SIGTERM now, SIGKILL at ``deadline`` for whatever still runs."""
        self._inbox.put(_Stop(deadline))

    def join(self, timeout: float | None = None) -> None:
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # The loop --------------------------------------------------------------------------------

    def _work(self) -> None:
        try:
            self._host.event(
                self.ref,
                "Scheduled",
                f"Successfully assigned {self.ref.namespace}/{self.ref.name} to this machine",
                "Normal",
            )
            while True:
                self._receive(block=False)
                now = self._clock()
                plan = plan_pod(self._run, now, self._backoff)
                if plan.acts:
                    self._act(plan, now)
                    continue
                self._announce_back_offs(plan)
                self._publish(now)
                if plan.done:
                    return
                self._receive(block=True, until=plan.wake_at)
        finally:
            self._kill_what_is_left()
            self._host.finished(self.ref)

    def _receive(self, *, block: bool, until: datetime | None = None) -> None:
        """Apply what happened: container exits and stop requests (waiting for the first one when
        ``block``, until ``until`` at most)."""
        try:
            if block:
                timeout = None
                if until is not None:
                    timeout = max((until - self._clock()).total_seconds(), 0.0)
                message = self._inbox.get(timeout=timeout)
            else:
                message = self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            if isinstance(message, _Exited):
                self._processes.pop(message.name, None)
                run = self._run.containers[message.name]
                self._run = self._run.with_container(run.exited(message.exit_code, message.at))
            else:
                self._run = self._run.stopping_by(message.deadline)
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _act(self, plan: PodPlan, now: datetime) -> None:
        if plan.stop_deadline is not None:
            self._run = self._run.stopping_by(plan.stop_deadline)
        for name in plan.kill:
            run = self._run.containers[name]
            if not run.stopping:
                self._host.event(self.ref, "Killing", f"Stopping container {name}", "Normal")
            self._signal(name, signal.SIGKILL)
            self._run = self._run.with_container(run.signalled(kill=True))
        for name in plan.stop:
            run = self._run.containers[name]
            self._host.event(self.ref, "Killing", f"Stopping container {name}", "Normal")
            self._signal(name, signal.SIGTERM)
            self._run = self._run.with_container(run.signalled())
        for name in plan.start:
            self._start(name, now)

    def _announce_back_offs(self, plan: PodPlan) -> None:
        """The kubelet's BackOff event, once per exit that waits for its restart."""
        for name in plan.back_off:
            run = self._run.containers[name]
            key = (name, run.restart_count)
            if key not in self._backed_off:
                self._backed_off.add(key)
                self._host.event(
                    self.ref,
                    "BackOff",
                    f"Back-off restarting failed container {name} in pod "
                    f"{self._run.shape.describe()}",
                    "Warning",
                )

    def _publish(self, now: datetime) -> None:
        run, backoff = self._run, self._backoff
        self._host.write_status(self.ref, lambda previous: pod_status(run, now, backoff, previous))

    # Containers -------------------------------------------------------------------------------

    def _start(self, name: str, now: datetime) -> None:
        container = self._specs[name]
        run = self._run.containers[name]
        self._host.event(
            self.ref,
            "Pulled",
            f"Image {container.get('image', '')!r} is recorded, not pulled: the local backend "
            "runs commands on this machine",
            "Normal",
        )
        try:
            launch = plan_launch(container, self._pod)
            cwd = str(launch.working_dir or self._host.workdir(self.ref))
            if not os.path.isdir(cwd):
                raise LaunchRefusal(
                    CREATE_CONTAINER_ERROR,
                    f"container {name!r}: workingDir {cwd} does not exist on this machine",
                )
        except LaunchRefusal as refusal:
            self._run = self._run.with_container(run.refused(refusal.reason, refusal.message))
            self._host.event(self.ref, "Failed", f"Error: {refusal.message}", "Warning")
            return
        log = self._host.log_path(self.ref.namespace, self.ref.name, name)
        log.parent.mkdir(parents=True, exist_ok=True)
        self._host.event(self.ref, "Created", f"Created container: {name}", "Normal")
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
                started = run.started(now, self._backoff)
                ended = started.exited(
                    START_ERROR_EXIT, self._clock(), reason=START_ERROR, message=message
                )
                self._run = self._run.with_container(ended)
                self._host.event(self.ref, "Failed", f"Error: {message}", "Warning")
                return
        if launch.memory_limit_bytes is not None:
            with contextlib.suppress(OSError):
                limit = (launch.memory_limit_bytes, launch.memory_limit_bytes)
                resource.prlimit(process.pid, resource.RLIMIT_DATA, limit)
        record_running(self._state_dir, process.pid)
        self._processes[name] = process
        self._run = self._run.with_container(run.started(self._clock(), self._backoff))
        self._host.event(self.ref, "Started", f"Started container {name}", "Normal")
        waiter = threading.Thread(
            target=self._await_exit, args=(name, process), name=f"{self.ref.name}/{name}"
        )
        waiter.start()
        self._waiters = [*(w for w in self._waiters if w.is_alive()), waiter]

    def _await_exit(self, name: str, process: subprocess.Popen[bytes]) -> None:
        code = process.wait()
        at = self._clock()
        # The container's other processes die with its main one; its output is then complete.
        kill_group(process.pid)
        await_group_exit(process.pid, _GROUP_EXIT_BOUND)
        forget_running(self._state_dir, process.pid)
        self._inbox.put(_Exited(name, code if code >= 0 else 128 - code, at))

    def _signal(self, name: str, number: int) -> None:
        process = self._processes.get(name)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, number)

    def _kill_what_is_left(self) -> None:
        """Nothing of the pod may outlive its worker, even one that failed."""
        for name in list(self._processes):
            self._signal(name, signal.SIGKILL)
        for waiter in self._waiters:
            waiter.join()


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def await_group_exit(pgid: int, bound: float) -> None:
    """Wait until no live process is in group ``pgid`` (zombies do not count), ``bound`` seconds
    at most."""
    deadline = time.monotonic() + bound
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (from ``/proc``: state and pgrp)."""
    with os.scandir("/proc") as entries:
        return any(
            entry.name.isdigit() and runs_in_group(int(entry.name), pgid) for entry in entries
        )


def kill_orphans(state_dir: Path) -> int:
    """SIGKILL the process groups a killed backend left running; how many there were."""
    directory = state_dir / "running"
    if not directory.is_dir():
        return 0
    killed = 0
    for record in directory.iterdir():
        with contextlib.suppress(ValueError, OSError):
            pid = int(record.name)
            if record.read_text().strip() == start_time(pid):
                os.killpg(pid, signal.SIGKILL)
                killed += 1
        record.unlink(missing_ok=True)
    return killed


def record_running(state_dir: Path, pid: int) -> None:
    directory = state_dir / "running"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / str(pid)).write_text(start_time(pid) or "")


def forget_running(state_dir: Path, pid: int) -> None:
    (state_dir / "running" / str(pid)).unlink(missing_ok=True)


def host_env() -> dict[str, str]:
    """What a local container inherits from this machine: where to find programs, the locale."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")
    return {name: os.environ[name] for name in keep if name in os.environ}
