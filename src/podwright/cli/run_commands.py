"""``podwright run``, ``list``, ``status``, ``logs`` and ``abort``: workloads as local tasks.

``run`` takes a workload through its policies, renders it, records a task in the task store
(``$PODWRIGHT_HOME/tasks.db``; default ``~/.local/state/podwright``) and runs it on the local
backend with the executor, in this process, until it ends: each phase change, each Kubernetes
event and the containers' output are printed as they come. Ctrl-C aborts the task (its processes
are stopped, the task ends Aborted). The exit status says how it ended: 0 succeeded, 1 the
policies rejected it (nothing ran), 2 bad input, 3 it failed, 4 it was aborted. The other commands
read the same store.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import click

from podwright.adapters.local.cluster import LocalCluster
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.cli.common import BadInput, ExitCode, scalar_text, table
from podwright.cli.render_command import Preparation, preparation_options, prepare_workload
from podwright.core.lifecycle.phases import Phase
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex
from podwright.engine.executor import Executor, ExecutorConfig, resource_ref
from podwright.engine.kubernetes_port import ObjectRef
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import (
    HistoryEntry,
    NewTask,
    StoreUnavailableError,
    TaskNotFoundError,
    TaskRecord,
    TaskStoreError,
)

HOME_ENV = "PODWRIGHT_HOME"
LOCAL_BACKEND = "local"
_POLL_SECONDS = 0.2


def default_home() -> str:
    """``$PODWRIGHT_HOME``, else ``$XDG_STATE_HOME/podwright``, else ~/.local/state/podwright."""
    if os.environ.get(HOME_ENV):
        return os.environ[HOME_ENV]
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "podwright")


home_option = click.option(
    "--home",
    type=click.Path(file_okay=False),
    default=default_home,
    show_default=f"${HOME_ENV}, else ~/.local/state/podwright",
    help="podwright's state directory: the task store and the local backend's logs.",
)


def _open_store(home: str) -> SQLiteTaskStore:
    try:
        return SQLiteTaskStore(Path(home) / "tasks.db")
    except StoreUnavailableError as error:
        raise click.ClickException(str(error)) from error


def _now() -> datetime:
    return datetime.now(UTC)


@click.command("run")
@preparation_options
@click.option("--namespace", default="default", show_default=True, help="The task's namespace.")
@home_option
def run_command(*, preparation: Preparation, namespace: str, home: str) -> None:
    """Run a workload on this machine: policies, rendering, then the task until it ends."""
    prepared = prepare_workload(preparation, namespace)
    store = _open_store(home)
    task_id = f"{prepared.name}-{secrets.token_hex(3)}"
    workload_type_name = str(prepared.submission.workload_type.value)
    try:
        store.submit(
            NewTask(
                task_id=task_id,
                workload_type=workload_type_name,
                name=prepared.name,
                namespace=namespace,
                backend=LOCAL_BACKEND,
                workload=_plain(prepared.submission.spec),
                effective=_plain(prepared.workload),
                manifests=tuple(prepared.rendering.manifests),
                submitted_at=_now(),
            )
        )
        click.echo(
            f"task {task_id}: {workload_type_name} workload {prepared.name!r}, local backend"
        )
        if prepared.sources:
            rows = [
                [f"  {path}", scalar_text(prepared.values[path]), source]
                for path, source in prepared.sources.items()
            ]
            click.echo(table(["  EFFECTIVE FIELD", "VALUE", "SOURCE"], rows))
        for image in _images(prepared.rendering.manifests):
            click.echo(f"  image {image} is recorded, not pulled: commands run on this machine")
        phase = _follow(store, Path(home), task_id, Path.cwd())
    finally:
        store.close()
    sys.exit(_exit_code(phase))


def _follow(store: SQLiteTaskStore, home: Path, task_id: str, workdir: Path) -> Phase:
    """Run the task with an in-process executor and print what happens, until it is finalized.

    Containers without a workingDir run in ``workdir`` (where ``run`` was started), as a
    command typed there would.
    """
    events = EventIndex(ttl=timedelta(hours=1), max_per_object=200)
    cluster = LocalCluster(home / "local", events=events, default_workdir=workdir)
    executor = Executor(
        store,
        cluster,
        ExecutorConfig(
            backend=LOCAL_BACKEND,
            round_interval=timedelta(seconds=_POLL_SECONDS),
            task_ids=frozenset({task_id}),
        ),
        LifecycleConfig(inject_finalizer=True),
        clock=_now,
        sleep=time.sleep,
        events=events,
    )
    printer = _Printer(store, cluster, executor, task_id, time.monotonic())
    interrupts = 0

    def interrupted(_number: int, _frame: FrameType | None) -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts == 1:
            click.echo("interrupted: aborting the task (Ctrl-C again to stop at once)", err=True)
            store.request_abort(task_id, _now())
        else:
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        while True:
            executor.run_round()
            record = printer.update()
            if record.finalized:
                printer.update()
                return record.phase
            time.sleep(_POLL_SECONDS)
    except KeyboardInterrupt:
        click.echo("stopped: the task's processes are killed", err=True)
        return Phase.ABORTED
    finally:
        signal.signal(signal.SIGINT, previous)
        cluster.close()


class _Printer:
    """Prints a task's new phases, attached events and output lines since the last update."""

    def __init__(
        self,
        store: SQLiteTaskStore,
        cluster: LocalCluster,
        executor: Executor,
        task_id: str,
        started: float,
    ) -> None:
        self._store, self._cluster, self._executor = store, cluster, executor
        self._task_id, self._started = task_id, started
        self._phases = self._events = 0
        self._offsets: dict[Path, int] = {}

    def update(self) -> TaskRecord:
        record = self._store.get(self._task_id)
        for entry in self._store.history(self._task_id)[self._phases :]:
            self._phases += 1
            click.echo(f"{self._elapsed()}  {_history_line(entry)}")
        for event in self._store.events(self._task_id)[self._events :]:
            self._events += 1
            click.echo(f"{self._elapsed()}  event: {event.reason}")
        for path in _log_files(self._cluster, self._executor, record):
            self._print_new_lines(path)
        return record

    def _print_new_lines(self, path: Path) -> None:
        offset = self._offsets.get(path, 0)
        with path.open("rb") as log:
            log.seek(offset)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offsets[path] = offset + len(complete)
        for line in complete.decode("utf-8", "replace").splitlines():
            click.echo(f"  | {line}")

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self._started:7.1f}s"


def _history_line(entry: HistoryEntry) -> str:
    """A phase and why: the error's message when it failed, else the reason."""
    why = entry.error_message or entry.reason
    return f"{entry.phase.value}  {why}" if why else entry.phase.value


def _log_files(cluster: LocalCluster, executor: Executor, record: TaskRecord) -> list[Path]:
    return local_log_files(cluster.state_dir, executor.resource_ref(record))


def local_log_files(state_dir: Path, ref: ObjectRef) -> list[Path]:
    """The output files of a local task's pods: the Pod's, or every pod its Job created."""
    root = state_dir / "logs" / ref.namespace
    if not root.is_dir():
        return []
    if ref.kind == "Pod":
        directories = [root / ref.name]
    else:  # a Job's pods are named <job>-<suffix>
        created = (p for p in root.iterdir() if p.name.startswith(f"{ref.name}-"))
        directories = sorted(created, key=lambda p: p.stat().st_mtime)
    return [log for directory in directories for log in sorted(directory.glob("*.log"))]


def _images(manifests: Sequence[dict[str, Any]]) -> list[str]:
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("containers", "initContainers") and isinstance(item, list):
                    found.extend(str(c.get("image")) for c in item if isinstance(c, dict))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(list(manifests))
    return sorted(set(found))


def _plain(data: object) -> dict[str, Any]:
    plain: dict[str, Any] = json.loads(json.dumps(data, default=str))
    return plain


def _exit_code(phase: Phase) -> int:
    if phase is Phase.SUCCESS:
        return ExitCode.OK
    if phase is Phase.ABORTED:
        return ExitCode.ABORTED
    return ExitCode.TASK_FAILED


@click.command("list")
@home_option
def list_command(*, home: str) -> None:
    """List the tasks in the store, oldest first."""
    store = _open_store(home)
    try:
        records = store.list_tasks()
    finally:
        store.close()
    if not records:
        click.echo("no tasks")
        return
    rows = [
        [
            record.task_id,
            record.task.workload_type,
            record.task.backend,
            record.phase.value,
            record.task.submitted_at.strftime("%Y-%m-%d %H:%M:%S"),
            "no" if record.finalized else "yes",
        ]
        for record in records
    ]
    click.echo(table(["ID", "TYPE", "BACKEND", "PHASE", "SUBMITTED", "ACTIVE"], rows))


@click.command("status")
@click.argument("task_id", required=False)
@home_option
def status_command(*, task_id: str | None, home: str) -> None:
    """Show a task (default: the latest): its phase, its phase history and its events."""
    store = _open_store(home)
    try:
        record = _find(store, task_id)
        history = store.history(record.task_id)
        events = store.events(record.task_id)
    finally:
        store.close()
    task = record.task
    click.echo(f"task:      {task.task_id}")
    click.echo(f"workload:  {task.name} ({task.workload_type}), namespace {task.namespace}")
    click.echo(f"backend:   {task.backend}")
    click.echo(f"phase:     {record.phase.value}{f' ({record.reason})' if record.reason else ''}")
    flags = [
        flag
        for flag, on in (
            ("abort requested", record.abort_requested),
            ("finalized", record.finalized),
        )
        if on
    ]
    if flags:
        click.echo(f"           {', '.join(flags)}")
    click.echo("history:")
    for entry in history:
        click.echo(f"  {entry.occurred_at:%H:%M:%S}  {_history_line(entry)}")
    if events:
        click.echo("events:")
        for event in events:
            click.echo(f"  {event.reason}")


@click.command("logs")
@click.argument("task_id")
@click.option("-f", "--follow", is_flag=True, help="Keep printing output until the task ends.")
@home_option
def logs_command(*, task_id: str, follow: bool, home: str) -> None:
    """Print a local task's output (every container of its pods, in order)."""
    store = _open_store(home)
    offsets: dict[Path, int] = {}
    try:
        record = _find(store, task_id)
        if record.task.backend != LOCAL_BACKEND:
            raise BadInput(f"task {task_id} ran on the {record.task.backend} backend, not locally")
        ref = resource_ref(record, default_plugins(), LifecycleConfig())
        while True:
            for path in local_log_files(Path(home) / "local", ref):
                with path.open("rb") as log:
                    log.seek(offsets.get(path, 0))
                    data = log.read()
                offsets[path] = offsets.get(path, 0) + len(data)
                click.echo(data.decode("utf-8", "replace"), nl=False)
            if not follow or store.get(task_id).finalized:
                return
            time.sleep(_POLL_SECONDS)
    finally:
        store.close()


@click.command("abort")
@click.argument("task_id")
@home_option
def abort_command(*, task_id: str, home: str) -> None:
    """Ask for a task to be aborted; whoever runs it stops its resources and ends it Aborted."""
    store = _open_store(home)
    try:
        record = _find(store, task_id)
        if record.phase.is_terminal:
            click.echo(f"task {task_id} already ended: {record.phase.value}")
            return
        store.request_abort(task_id, _now())
    finally:
        store.close()
    click.echo(f"abort requested for task {task_id}")


def _find(store: SQLiteTaskStore, task_id: str | None) -> TaskRecord:
    try:
        if task_id is not None:
            return store.get(task_id)
        records = store.list_tasks()
    except TaskNotFoundError as error:
        raise BadInput(str(error)) from error
    except TaskStoreError as error:
        raise click.ClickException(str(error)) from error
    if not records:
        raise BadInput(f"no tasks in {store.path}")
    return records[-1]
