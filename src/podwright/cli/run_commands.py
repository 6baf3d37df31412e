"""``podwright run``, ``list``, ``status``, ``logs`` and ``abort``: workloads as tasks.

``run`` takes a workload through its policies, renders it, records a task in the task store
(``$PODWRIGHT_HOME/tasks.db``; default ``~/.local/state/podwright``) and runs it with the executor
in this process until it ends, on this machine (local backend) or a cluster: the phase timeline,
the Kubernetes events and the primary container's output are shown as they come (a live display
on a terminal, plain lines elsewhere). Ctrl-C asks whether to abort or detach (elsewhere than on a
terminal it aborts); ``--detach`` leaves the task to a background executor at once. The exit
status says how it ended: 0 succeeded, 1 the policies rejected it (nothing ran), 2 bad input,
3 it failed, 4 it was aborted. The other commands read the same store.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import click

from podwright.adapters.kubernetes import KubernetesClient, KubernetesConfigError, connect
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.cli.backends import (
    LOCAL,
    ClusterAccess,
    LocalBackendBusyError,
    OpenBackend,
    access_for,
    backend_key,
    choose_backend,
    cluster_options,
    open_backend,
    start_background_executor,
)
from podwright.cli.common import BadInput, ExitCode, scalar_text, table
from podwright.cli.executor_command import (
    LoopSettings,
    lifecycle_option,
    load_lifecycle_config,
    make_executor,
)
from podwright.cli.render_command import Preparation, preparation_options, prepare_workload
from podwright.cli.run_display import Display, LiveDisplay, PlainDisplay, history_line
from podwright.cli.state import home_option, open_store, utc_now
from podwright.cli.task_logs import ClusterLogTail, LocalLogTail, LogTail, primary_container
from podwright.core.lifecycle.phases import Phase
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import Executor, resource_ref, workload_resource
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import (
    NewTask,
    TaskNotFoundError,
    TaskRecord,
    TaskStoreError,
)

_POLL_SECONDS = 0.2


@click.command("run")
@preparation_options
@click.option("--namespace", default="default", show_default=True, help="The task's namespace.")
@cluster_options
@click.option(
    "--detach",
    is_flag=True,
    help="Submit the task and return; a background executor runs it ('status', 'logs -f' follow).",
)
@lifecycle_option
@home_option
def run_command(
    *,
    preparation: Preparation,
    namespace: str,
    backend: str | None,
    kubeconfig: str | None,
    context: str | None,
    detach: bool,
    lifecycle_config: str | None,
    home: str,
) -> None:
    """Run a workload: policies, rendering, then the task until it ends (or --detach)."""
    access = ClusterAccess(kubeconfig, context)
    key = backend_key(choose_backend(backend, access), access)
    lifecycle = load_lifecycle_config(lifecycle_config)
    prepared = prepare_workload(preparation, namespace)
    store = open_store(home)
    task_id = f"{prepared.name}-{secrets.token_hex(3)}"
    workload_type_name = str(prepared.submission.workload_type.value)
    try:
        store.submit(
            NewTask(
                task_id=task_id,
                workload_type=workload_type_name,
                name=prepared.name,
                namespace=namespace,
                backend=key,
                workload=_plain(prepared.submission.spec),
                effective=_plain(prepared.workload),
                manifests=tuple(prepared.rendering.manifests),
                submitted_at=utc_now(),
            )
        )
        where = "local backend" if key == LOCAL else f"cluster {key.partition('/')[2]}"
        click.echo(f"task {task_id}: {workload_type_name} workload {prepared.name!r}, {where}")
        if prepared.sources:
            rows = [
                [f"  {path}", scalar_text(prepared.values[path]), source]
                for path, source in prepared.sources.items()
            ]
            click.echo(table(["  EFFECTIVE FIELD", "VALUE", "SOURCE"], rows))
        if key == LOCAL:
            for image in _images(prepared.rendering.manifests):
                click.echo(f"  image {image} is recorded, not pulled: commands run on this machine")
        if detach:
            _detach(Path(home), key, task_id, kubeconfig)
            return
        follower = _Follower(
            store,
            Path(home),
            task_id,
            key=key,
            kubeconfig=kubeconfig,
            lifecycle=lifecycle,
            namespace=namespace,
        )
        phase = follower.follow(_display(f"{workload_type_name} {prepared.name}"))
    finally:
        store.close()
    if phase is None:
        _detach(Path(home), key, task_id, kubeconfig)
        return
    sys.exit(_exit_code(phase))


def _detach(home: Path, key: str, task_id: str, kubeconfig: str | None) -> None:
    started = start_background_executor(home, key, kubeconfig)
    runner = f"a background executor (pid {started})" if started else "the running executor"
    click.echo(f"task {task_id} left to {runner}")
    click.echo(f"  follow it: podwright status {task_id}; podwright logs {task_id} -f")


def _display(title: str) -> Display:
    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        return LiveDisplay(title)
    return PlainDisplay()


class _Follower:
    """Runs the task with an in-process executor when it can, and shows what happens.

    On the local backend another process (a detached executor) may hold the backend: then this
    one only watches the store and the log files, and takes over if that executor exits first.
    Containers without a workingDir run where ``run`` was started, as a command typed there would.
    """

    def __init__(
        self,
        store: SQLiteTaskStore,
        home: Path,
        task_id: str,
        *,
        key: str,
        kubeconfig: str | None,
        lifecycle: LifecycleConfig,
        namespace: str,
    ) -> None:
        self._store, self._home, self._task_id, self._key = store, home, task_id, key
        self._kubeconfig, self._lifecycle, self._namespace = kubeconfig, lifecycle, namespace
        self._backend: OpenBackend | None = None
        self._executor: Executor | None = None
        self._logs: LogTail | None = None
        self._interrupted = False
        self._aborting = False

    def follow(self, display: Display) -> Phase | None:
        """Follow until the task is finalized: its phase, or None when the user detached."""
        previous = signal.signal(signal.SIGINT, self._on_interrupt)
        started = time.monotonic()
        phases = events = 0
        try:
            while True:
                self._take_over()
                if self._executor is not None:
                    self._executor.run_round()
                record = self._store.get(self._task_id)
                elapsed = time.monotonic() - started
                for entry in self._store.history(self._task_id)[phases:]:
                    phases += 1
                    display.phase(entry, elapsed)
                for event in self._store.events(self._task_id)[events:]:
                    events += 1
                    display.event(event.reason, elapsed)
                for line in self._log_tail(record).new_lines(now=record.finalized):
                    display.output(line)
                if record.finalized:
                    return record.phase
                if self._interrupted and not self._handle_interrupt(display, record):
                    return None
                time.sleep(_POLL_SECONDS)
        except KeyboardInterrupt:
            if self._executor is None:
                display.note("stopped following; the executor running the task aborts it")
            else:
                display.note("stopped: the task's processes are killed")
            return Phase.ABORTED
        finally:
            signal.signal(signal.SIGINT, previous)
            display.close()
            if self._executor is not None:
                self._executor.close()
            if self._backend is not None:
                self._backend.close()

    def _take_over(self) -> None:
        if self._backend is not None:
            return
        try:
            self._backend = open_backend(
                self._key,
                home=self._home,
                access=access_for(self._key, self._kubeconfig),
                namespace=self._namespace,
                workdir=Path.cwd(),
            )
        except LocalBackendBusyError:
            return  # a detached local executor runs the task; watch the store
        settings = LoopSettings(1, timedelta(seconds=_POLL_SECONDS), frozenset({self._task_id}))
        self._executor = make_executor(self._store, self._backend, settings, self._lifecycle)

    def _log_tail(self, record: TaskRecord) -> LogTail:
        if self._logs is None:
            ref = resource_ref(record, default_plugins(), self._lifecycle)
            cluster = self._backend.cluster if self._backend is not None else None
            if cluster is not None:
                self._logs = ClusterLogTail(cluster.client, ref)
            else:
                manifest = workload_resource(record, default_plugins())
                self._logs = LocalLogTail(self._home / LOCAL, ref, primary_container(manifest))
        return self._logs

    def _on_interrupt(self, _number: int, _frame: FrameType | None) -> None:
        if self._aborting:
            raise KeyboardInterrupt
        self._interrupted = True

    def _handle_interrupt(self, display: Display, record: TaskRecord) -> bool:
        """Ask what Ctrl-C meant (on a terminal; elsewhere it aborts); False to detach."""
        self._interrupted = False
        if record.abort_requested:
            self._aborting = True
            return True
        can_detach = self._key != LOCAL or self._executor is None
        choice = "abort"
        if sys.stdin.isatty():
            display.pause()
            choices = ["abort", "detach", "continue"] if can_detach else ["abort", "continue"]
            if not can_detach:
                click.echo(
                    "(this command runs the task's processes: start it with --detach to leave "
                    "it running)",
                    err=True,
                )
            try:
                choice = click.prompt(
                    "interrupted: abort the task, or " + " or ".join(choices[1:]) + "?",
                    type=click.Choice(choices),
                    default="abort",
                    err=True,
                )
            except click.Abort:
                choice = "abort"
            display.resume()
        if choice == "detach":
            return False
        if choice == "abort":
            display.note("interrupted: aborting the task (Ctrl-C again to stop at once)")
            self._store.request_abort(self._task_id, utc_now())
            self._aborting = True
        return True


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
    store = open_store(home)
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
    store = open_store(home)
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
        click.echo(f"  {entry.occurred_at:%H:%M:%S}  {history_line(entry)}")
    if events:
        click.echo("events:")
        for event in events:
            click.echo(f"  {event.reason}")


@click.command("logs")
@click.argument("task_id")
@click.option("-f", "--follow", is_flag=True, help="Keep printing output until the task ends.")
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="For a cluster task: the kubeconfig holding its context (default: $KUBECONFIG, else "
    "~/.kube/config).",
)
@home_option
def logs_command(*, task_id: str, follow: bool, kubeconfig: str | None, home: str) -> None:
    """Print a task's output: every container of a local task's pods, in order; the primary
    container of a cluster task's primary pod."""
    store = open_store(home)
    try:
        record = _find(store, task_id)
        ref = resource_ref(record, default_plugins(), LifecycleConfig())
        tail: LogTail
        if record.task.backend == LOCAL:
            tail = LocalLogTail(Path(home) / LOCAL, ref)
        else:
            access = access_for(record.task.backend, kubeconfig)
            try:
                client = KubernetesClient(connect(access.kubeconfig, access.context))
            except KubernetesConfigError as error:
                raise click.ClickException(str(error)) from error
            tail = ClusterLogTail(client, ref)
        while True:
            for line in tail.new_lines():
                click.echo(line)
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
    store = open_store(home)
    try:
        record = _find(store, task_id)
        if record.phase.is_terminal:
            click.echo(f"task {task_id} already ended: {record.phase.value}")
            return
        store.request_abort(task_id, utc_now())
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
