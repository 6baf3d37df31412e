"""Which executor serves a task store's backend, and starting one: exactly one at a time.

Exactly one process reconciles the tasks of a (task store, backend key) pair: the holder of that
pair's *executor lock*, a file next to the store (``<store>.executor-<key>.lock``, the key
percent-encoded, the holder's pid written in it). It lives by the store, not in ``--home``, so
two state directories sharing one store (``$PODWRIGHT_TASK_STORE``) still share one executor.

Every look at that lock (an executor taking or releasing it, a command asking whether an executor
serves, or starting one) happens under a second lock held for an instant, the *start lock*
(``<store>.executor-<key>.start-lock``). So a command checking never makes an executor's attempt
fail, and two commands cannot both find no executor and both start one. An executor just started
needs a moment before it takes the executor lock: the start lock's file records it (its pid and
its process's start time) as *starting*, and until it took the lock or died it counts as serving.

An ``--until-idle`` executor that found no active task releases its lock, re-reads the store, and
takes the lock again when a task of its backend appeared meanwhile (or exits, when another
executor took it). Every command records its task (or abort request) *before* it makes sure an
executor serves, so no task is ever left unserved: either the check saw the idle executor still
holding the lock, and that executor's re-read sees the task, or the check found the lock free and
started a new executor.

A background executor is started through a short-lived launcher process, so that it is nobody's
child: it outlives the command that started it and is never left a zombie. It runs in its own
session, with its output in ``<home>/executor-<key>.log``; the local backend's containers are its
children, so a task survives the ``run`` that submitted it being interrupted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO
from urllib.parse import quote

from podwright.adapters.documents import DocumentError, read_document
from podwright.adapters.proc import start_time
from podwright.api.backends import (
    KUBERNETES,
    LOCAL,
    access_for,
    lock_holder,
    try_lock,
    write_pid,
)
from podwright.api.errors import BackendError, InvalidInputError
from podwright.engine.config import ConfigError, LifecycleConfig, config_from_data

_DAEMON_LAUNCHER = """
import subprocess, sys
process = subprocess.Popen(
    sys.argv[1:], stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr,
    start_new_session=True,
)
print(process.pid)
"""


class ExecutorStartError(Exception):
    """A background executor could not be started, or does not stay up."""


@dataclasses.dataclass(frozen=True)
class Serving:
    """The executor that serves a store's backend: its pid, and whether it was just started."""

    pid: int
    started: bool = False


class HeldSlot:
    """The executor lock, held by this process until :meth:`release` (or its exit)."""

    def __init__(self, slot: ExecutorSlot, handle: IO[str]) -> None:
        self._slot, self._handle = slot, handle

    def release(self) -> None:
        with self._slot.starting():
            self._handle.close()


@dataclasses.dataclass(frozen=True)
class ExecutorSlot:
    """The place of the one executor of a (task store, backend key) pair."""

    store: Path
    key: str

    @property
    def lock_path(self) -> Path:
        return self.store.with_name(f"{self.store.name}.executor-{quote(self.key, safe='')}.lock")

    @property
    def start_lock_path(self) -> Path:
        return self.lock_path.with_suffix(".start-lock")

    @contextlib.contextmanager
    def starting(self) -> Iterator[IO[str]]:
        """The start lock, held while the block runs; its file records a starting executor."""
        path = self.start_lock_path
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield handle

    def take(self) -> HeldSlot | None:
        """The executor lock for this process (its pid written in it), or None when another
        executor holds it. Either way this process no longer counts as starting."""
        with self.starting() as start_lock:
            if _starting_pid(start_lock) == os.getpid():
                _record_starting(start_lock, None)
            handle = try_lock(self.lock_path)
            if handle is None:
                return None
            return HeldSlot(self, write_pid(handle))

    def serving(self) -> int | None:
        """The pid of the executor serving the pair (holding its lock, or starting), if any."""
        with self.starting() as start_lock:
            return self._serving(start_lock)

    def ensure(self, launch: Callable[[], int]) -> Serving:
        """The serving executor; when there is none, the one ``launch`` starts (its pid)."""
        with self.starting() as start_lock:
            pid = self._serving(start_lock)
            if pid is not None:
                return Serving(pid)
            pid = launch()
            _record_starting(start_lock, pid)
            return Serving(pid, started=True)

    def _serving(self, start_lock: IO[str]) -> int | None:
        handle = try_lock(self.lock_path)
        if handle is None:
            return self.holder()
        handle.close()
        return _starting_pid(start_lock)

    def holder(self) -> int | None:
        """The pid the executor lock's holder wrote in it (without checking it is held)."""
        return lock_holder(self.lock_path)


def _starting_pid(start_lock: IO[str]) -> int | None:
    """The executor recorded as starting, if that very process still lives."""
    start_lock.seek(0)
    fields = start_lock.read().split()
    if len(fields) != 2 or not all(field.isdigit() for field in fields):
        return None
    pid, started = int(fields[0]), fields[1]
    return pid if process_start_time(pid) == started else None


def _record_starting(start_lock: IO[str], pid: int | None) -> None:
    start_lock.seek(0)
    start_lock.truncate()
    started = process_start_time(pid) if pid is not None else None
    if pid is not None and started is not None:
        start_lock.write(f"{pid} {started}\n")
    start_lock.flush()


def process_start_time(pid: int) -> str | None:
    """When a live (not zombie) process started, in clock ticks since boot; None if it is gone.
    With the pid, it names one process: a reused pid has another start time."""
    return start_time(pid, live=True)


def executor_log(home: Path, key: str) -> Path:
    """Where a background executor of ``key`` writes its log."""
    return home / f"executor-{quote(key, safe='')}.log"


@dataclasses.dataclass(frozen=True)
class ExecutorLaunch:
    """How to start ``podwright executor --until-idle`` for a store's backend."""

    home: Path
    store: Path
    key: str
    kubeconfig: str | None = None
    lifecycle_config: str | None = None

    @property
    def slot(self) -> ExecutorSlot:
        return ExecutorSlot(self.store, self.key)

    @property
    def log(self) -> Path:
        return executor_log(self.home, self.key)

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "podwright", "executor", "--until-idle"]
        command += ["--metrics-address", "off", "--home", str(self.home.absolute())]
        if self.key == LOCAL:
            command += ["--backend", LOCAL]
        else:
            access = access_for(self.key, self.kubeconfig)
            command += ["--backend", KUBERNETES]
            if access.kubeconfig:
                command += ["--kubeconfig", str(Path(access.kubeconfig).absolute())]
            if access.context:
                command += ["--context", access.context]
        if self.lifecycle_config:
            command += ["--lifecycle-config", str(Path(self.lifecycle_config).absolute())]
        return command

    def start(self) -> int:
        """Start the executor in the background (whether or not one runs); its pid."""
        self.home.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, "PODWRIGHT_TASK_STORE": str(self.store.absolute())}
        try:
            with self.log.open("ab") as output:
                launcher = subprocess.run(
                    [sys.executable, "-W", "ignore", "-c", _DAEMON_LAUNCHER, *self.command()],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=output,
                    env=environment,
                    check=False,
                )
        except OSError as error:
            raise ExecutorStartError(f"could not start a background executor: {error}") from error
        if launcher.returncode != 0 or not launcher.stdout.strip().isdigit():
            raise ExecutorStartError(f"could not start a background executor: see {self.log}")
        return int(launcher.stdout)

    def ensure(self) -> Serving:
        """The executor serving the store's backend, started when none does."""
        return self.slot.ensure(self.start)

    def last_words(self) -> str:
        """The last line of the executor's log, to say why it stopped."""
        with contextlib.suppress(OSError):
            lines = self.log.read_text(errors="replace").strip().splitlines()
            if lines:
                return lines[-1]
        return "(its log is empty)"


_STARTS_WITHOUT_PROGRESS = 3
"""Executors started in a row for a task that none of them moved, before a command gives up."""


class ExecutorKeeper:
    """Keeps an executor serving a task while a command waits on it (``run``, ``delete``).

    When the serving executor is gone (it failed, or was killed) it starts another; when three it
    started in a row exited without the task moving (its revision unchanged), no executor can
    serve it from here, and :class:`~podwright.api.errors.BackendError` says why, with the last
    line of their log. Checks are at most once a second unless ``now``.
    """

    def __init__(
        self, launch: ExecutorLaunch, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._launch, self._monotonic = launch, monotonic
        self._next_check = 0.0
        self._revision_at_start: int | None = None
        self._starts_without_progress = 0
        self.pid: int | None = None
        """The executor serving the task when last checked."""
        self.started = False
        """Whether the last check started it."""

    def keep(self, task_id: str, revision: int, *, now: bool = False) -> None:
        moment = self._monotonic()
        if moment < self._next_check and not now:
            return
        self._next_check = moment + 1.0
        self.started = False
        self.pid = self._launch.slot.serving()
        if self.pid is not None:
            return
        if revision == self._revision_at_start:
            self._starts_without_progress += 1
            if self._starts_without_progress >= _STARTS_WITHOUT_PROGRESS:
                raise BackendError(
                    f"no executor keeps serving the {self._launch.key} tasks of "
                    f"{self._launch.store}: {self._starts_without_progress} started in a row "
                    f"exited without moving task {task_id}; the last one said: "
                    f"{self._launch.last_words()} (see {self._launch.log}). The task is kept: "
                    f"podwright status {task_id}; podwright delete {task_id}"
                )
        else:
            self._starts_without_progress = 0
        try:
            serving = self._launch.ensure()
        except ExecutorStartError as error:
            raise BackendError(f"task {task_id} is kept, but {error}") from error
        self.pid, self.started = serving.pid, serving.started
        if serving.started:
            self._revision_at_start = revision


def load_lifecycle_config(path: str | None) -> LifecycleConfig:
    """The lifecycle engine's settings from a YAML file; without one, the defaults with
    podwright's finalizer on (no resource disappears before its task is finalized)."""
    if path is None:
        return LifecycleConfig(inject_finalizer=True)
    try:
        data = read_document(path, sys.stdin).data
    except DocumentError as error:
        raise InvalidInputError(str(error)) from error
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path}: the lifecycle configuration must be a mapping")
    try:
        return config_from_data(data)
    except ConfigError as error:
        raise InvalidInputError(f"{path}: {error}") from error
