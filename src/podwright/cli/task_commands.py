"""``podwright list``, ``status``, ``logs``, ``abort`` and ``delete``: the tasks in the task store.

They read the store ``run`` writes (``--home``, or ``$PODWRIGHT_TASK_STORE``). ``abort`` records the
request and makes sure an executor serves the task's backend, starting one when none does, so the
abort happens even when nothing else runs. ``delete`` removes tasks from the store: a finalized
one at once (with its history, events and, on the local backend, its log files); an active one is
aborted first and removed once the executor finalized it (within ``--timeout``). A task whose
backend cannot be reached from here (its context gone from the kubeconfig, the kubeconfig
unreadable) is removed only if its resource was never created; otherwise ``delete`` refuses, and
``--force`` removes the record anyway, saying what may be left on the cluster.

Unknown task ids are bad input (exit status 2), each named, and the others are still handled;
a task that cannot be aborted or removed makes the status 5 (:class:`~podwright.cli.common.
ExitCode`). ``logs -f`` stops quietly on Ctrl-C, with status 0.

``list`` and ``status`` print a table for people, or with ``-o json|yaml`` one document for scripts
(the data of :mod:`podwright.engine.task_views`). ``list`` shows the tasks its filters select
(``--phase``, ``--type``, ``-l`` label selector, ``--active``) in the order of ``--sort-by``.
``--watch`` then prints what changes: ``list -w`` each selected task that appears, changes phase
or is finalized, as a row, a JSON object on one line or a YAML document, until Ctrl-C (status 0,
as ``kubectl get -w``); ``status -w`` each new phase and event of the task until it is finalized.
This machine's store is polled (``POLL_SECONDS``; read again only when another process wrote
it), the operator's Workloads are watched.

With ``--backend operator`` (and ``-n``, ``--context``, ``--kubeconfig``) they read the Workloads of
the cluster's operator instead (:mod:`podwright.cli.operator_backend`) and show them alike:
``abort`` sets the Workload's abort annotation, ``delete`` deletes the Workload (the operator
aborts and finalizes its task first; ``--wait`` waits until it is gone, within ``--timeout``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

import click

from podwright.adapters.documents import dump_yaml
from podwright.adapters.kubernetes import KubernetesClient, KubernetesConfigError, connect
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.cli.backends import LOCAL, OPERATOR, access_for, cluster_problem
from podwright.cli.common import (
    BadInput,
    ExitCode,
    Unavailable,
    Unreachable,
    output_option,
    table,
)
from podwright.cli.executor_command import DURATION
from podwright.cli.executors import ExecutorKeeper, ExecutorLaunch, ExecutorStartError
from podwright.cli.operator_backend import (
    OperatorTarget,
    WorkloadLogTail,
    WorkloadTasks,
    all_namespaces_option,
    operator_options,
    operator_target,
    refuse_without_operator,
    workload_tasks,
)
from podwright.cli.run_commands import POLL_SECONDS
from podwright.cli.run_display import history_line
from podwright.cli.state import home_option, open_store, utc_now
from podwright.cli.task_logs import (
    LOST_SERVER_AFTER,
    ClusterLogTail,
    LocalLogTail,
    LogTail,
    local_log_directories,
)
from podwright.core.label_selectors import LabelSelector, SelectorError, parse_label_selector
from podwright.core.lifecycle.phases import Phase
from podwright.core.lifecycle.plugin_state import (
    CorruptedPluginStateError,
    decode_state,
)
from podwright.core.workload_fields import WorkloadType
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import resource_ref
from podwright.engine.plugin import PluginError
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import (
    AttachedEvent,
    HistoryEntry,
    StaleRevisionError,
    TaskNotFoundError,
    TaskRecord,
    TaskStoreError,
)
from podwright.engine.task_views import (
    SortKey,
    TaskFilter,
    in_order,
    phase_change,
    sort_tasks,
    task_event,
    task_item,
    task_list,
    task_status,
)

T = TypeVar("T")

TABLE, JSON, YAML = "table", "json", "yaml"
OUTPUTS = (TABLE, JSON, YAML)
"""``list -o`` and ``status -o``: a table (what a person reads) by default."""

kubeconfig_option = click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="For a cluster task: the kubeconfig holding its context (default: $KUBECONFIG, else "
    "~/.kube/config).",
)


class _LabelSelectorType(click.ParamType[LabelSelector]):
    """A Kubernetes label selector; a malformed one is a usage error saying where."""

    name = "SELECTOR"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> LabelSelector:
        if isinstance(value, LabelSelector):
            return value
        try:
            return parse_label_selector(str(value))
        except SelectorError as error:
            self.fail(f"{value!r}: {error}", param, ctx)


_PHASES = {phase.value.lower(): phase for phase in Phase}


class _PhaseType(click.ParamType[Phase]):
    """A lifecycle phase, as ``list`` shows it, in any case (``Running``, ``running``); an unknown
    one is a usage error listing them."""

    name = "PHASE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Phase:
        if isinstance(value, Phase):
            return value
        phase = _PHASES.get(str(value).lower())
        if phase is None:
            self.fail(f"{value!r} is not a phase: one of {', '.join(Phase)}", param, ctx)
        return phase


@click.command("list")
@click.option(
    "--phase",
    "phases",
    multiple=True,
    type=_PhaseType(),
    help=f"Only the tasks in this phase (repeatable: in any of them): {', '.join(Phase)}.",
)
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice([workload_type.value for workload_type in WorkloadType]),
    help="Only the tasks of this workload type (repeatable: of any of them).",
)
@click.option(
    "-l",
    "--selector",
    type=_LabelSelectorType(),
    default="",
    help="Only the tasks whose labels match this Kubernetes label selector: k=v, k!=v, "
    "'k in (a,b)', 'k notin (a,b)', k, !k; a comma means and.",
)
@click.option("--active", is_flag=True, help="Only the tasks not finalized yet.")
@click.option(
    "--sort-by",
    type=click.Choice([key.value for key in SortKey]),
    default=SortKey.SUBMITTED.value,
    show_default=True,
    help="The order: submitted (the oldest first), updated (the longest unchanged first), name, "
    "phase (the lifecycle's order) or type; ties by task id.",
)
@output_option(
    "table; json: a TaskList object; yaml: the same in YAML. With --watch: each task as a row, "
    "a JSON object on one line, or a YAML document.",
    formats=OUTPUTS,
)
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="Then print each selected task that appears, changes phase or is finalized, until Ctrl-C.",
)
@operator_options
@all_namespaces_option
@kubeconfig_option
@home_option
def list_command(
    *,
    phases: tuple[Phase, ...],
    types: tuple[str, ...],
    selector: LabelSelector,
    active: bool,
    sort_by: str,
    output: str,
    watch: bool,
    backend: str | None,
    namespace: str | None,
    context: str | None,
    all_namespaces: bool,
    kubeconfig: str | None,
    home: str,
) -> None:
    """List the tasks in the store, oldest first.

    Those the filters select, in the order of --sort-by; with --watch, then each one that
    appears, changes phase or is finalized, until Ctrl-C."""
    view = _ListView(
        TaskFilter(frozenset(phases), frozenset(types), selector, active),
        SortKey(sort_by),
    )
    try:
        if backend == OPERATOR:
            _list_workloads(
                view,
                operator_target(kubeconfig, context, namespace, all_namespaces=all_namespaces),
                output,
                watch=watch,
            )
            return
        refuse_without_operator(
            namespace=namespace,
            context=context,
            all_namespaces=all_namespaces,
            kubeconfig=kubeconfig,
        )
        store = open_store(home)
        with contextlib.closing(store):
            changes = _StoreChanges(store)  # before the first read: no change is missed
            lines = _TaskLines(output, None, namespaces=False, nothing=view.nothing("no tasks"))
            shown = lines.listing(view.select(_stored(store.list_tasks)), watching=watch)
            if watch:
                _follow_list(lambda: _stored(store.list_tasks), changes, view, lines, shown)
    except KeyboardInterrupt:
        if not watch:
            raise
        # Ctrl-C ends watching, as it ends 'kubectl get -w'


def _list_workloads(view: _ListView, target: OperatorTarget, output: str, *, watch: bool) -> None:
    """``list --backend operator``: the Workloads' tasks, the API server selecting them by
    label too."""
    all_namespaces = target.namespace is None
    with workload_tasks(target, label_selector=str(view.filter.selector) or None) as tasks:
        nothing = view.nothing(f"no Workloads in {target.where()}")
        lines = _TaskLines(output, target.backend(), namespaces=all_namespaces, nothing=nothing)
        shown = lines.listing(view.select(tasks.records()), watching=watch)
        if watch:
            with tasks.watching() as watched:
                _follow_list(watched.records, watched.changes, view, lines, shown)


@dataclasses.dataclass(frozen=True)
class _ListView:
    """Which tasks ``list`` shows, in which order."""

    filter: TaskFilter
    sort_by: SortKey

    def select(self, records: list[TaskRecord]) -> list[TaskRecord]:
        return sort_tasks(
            (record for record in records if self.filter.matches(record)), self.sort_by
        )

    def nothing(self, sentence: str) -> str:
        """What the table says when there is no task to show."""
        return f"{sentence} matching the filters" if self.filter else sentence


class _Changes(Protocol):
    def wait(self) -> None:
        """Return once something may have changed since the last return (at first: since the
        object was made)."""


class _StoreChanges:
    """The task store's changes, polled (``POLL_SECONDS``) through its data version, so that
    the tasks are read again only when another process wrote them."""

    def __init__(self, store: SQLiteTaskStore) -> None:
        self._store = store
        self._version = _stored(store.data_version)

    def wait(self) -> None:
        while True:
            time.sleep(POLL_SECONDS)
            version = _stored(self._store.data_version)
            if version != self._version:
                self._version = version
                return


_Shown = dict[str, tuple[Phase, bool]]
"""The tasks a watch of ``list`` printed last, each one's phase and whether it is finalized."""


def _follow_list(
    read: Callable[[], list[TaskRecord]],
    changes: _Changes,
    view: _ListView,
    lines: _TaskLines,
    shown: _Shown,
) -> None:
    """Print each task of ``view`` that appears (in ``read()``, or among those the filters
    select) or changes phase, or is finalized, after each of ``changes``; Ctrl-C ends it."""
    while True:
        changes.wait()
        now_shown: _Shown = {}
        for record in view.select(read()):
            state = (record.phase, record.finalized)
            if shown.get(record.task_id) != state:
                lines.changed(record)
            now_shown[record.task_id] = state
        shown = now_shown


_HEADERS = ["ID", "TYPE", "BACKEND", "PHASE", "SUBMITTED", "ACTIVE"]


class _TaskLines:
    """Tasks as ``list`` prints them (``output``): a table, or a TaskList in JSON or YAML; when
    watching, each task as a row (aligned with the table's), a JSON object on one line, or a
    YAML document, the first ones as the rest. ``backend``: every task's, else each its own;
    ``namespaces``: a column of them; ``nothing``: what the table says of no task."""

    def __init__(self, output: str, backend: str | None, *, namespaces: bool, nothing: str) -> None:
        self._output, self._backend, self._namespaces = output, backend, namespaces
        self._nothing = nothing
        self._headers = [*(["NAMESPACE"] if namespaces else []), *_HEADERS]
        self._widths: list[int] | None = None
        self._documents = 0

    def listing(self, records: list[TaskRecord], *, watching: bool) -> _Shown:
        """Print ``records``; those printed, as a watch follows them."""
        if self._output == TABLE and not records:
            click.echo(self._nothing, err=watching)  # a watch's output stays rows
        elif not watching and self._output == TABLE:
            click.echo(table(self._headers, [self._row(record) for record in records]))
        elif not watching:
            items = [task_item(record, backend=self._backend) for record in records]
            _print_document(task_list(items), self._output, watching=False)
        else:
            if self._output == TABLE:
                self._widths = _widths(self._headers, [self._row(record) for record in records])
                click.echo(_aligned(self._headers, self._widths))
            for record in records:
                self.changed(record)
        return {record.task_id: (record.phase, record.finalized) for record in records}

    def changed(self, record: TaskRecord) -> None:
        """Print one task, as a watch does."""
        if self._output != TABLE:
            if self._documents and self._output == YAML:
                click.echo("---")
            self._documents += 1
            _print_document(task_item(record, backend=self._backend), self._output, watching=True)
            return
        row = self._row(record)
        if self._widths is None:  # the first row after an empty listing: the header first
            self._widths = _widths(self._headers, [row])
            click.echo(_aligned(self._headers, self._widths))
        click.echo(_aligned(row, self._widths))

    def _row(self, record: TaskRecord) -> list[str]:
        return [
            *([record.task.namespace] if self._namespaces else []),
            record.task_id,
            record.task.workload_type,
            self._backend or record.task.backend,
            record.phase.value,
            record.task.submitted_at.strftime("%Y-%m-%d %H:%M:%S"),
            "no" if record.finalized else "yes",
        ]


def _widths(headers: list[str], rows: list[list[str]]) -> list[int]:
    return [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]


def _aligned(cells: list[str], widths: list[int]) -> str:
    """A row of :func:`~podwright.cli.common.table` of these widths (a longer cell pushes the
    rest right)."""
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def _print_document(data: dict[str, Any], output: str, *, watching: bool) -> None:
    """``data`` as JSON (indented; on one line when ``watching``) or as a YAML document."""
    if output == JSON:
        click.echo(json.dumps(data) if watching else json.dumps(data, indent=2))
    else:
        click.echo(dump_yaml(data), nl=False)


@click.command("status")
@click.argument("task_id", required=False)
@output_option(
    "table; json: the task with its phase history and events; yaml: the same in YAML. With "
    "--watch: then each new phase and event as a line, a JSON object on one line, or a YAML "
    "document.",
    formats=OUTPUTS,
)
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="Then print each new phase and event as it happens, until the task is finalized.",
)
@operator_options
@kubeconfig_option
@home_option
def status_command(
    *,
    task_id: str | None,
    output: str,
    watch: bool,
    backend: str | None,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    home: str,
) -> None:
    """Show a task (default: the latest): its phase, its phase history and its events.

    With --watch, then each new phase and event, until the task is finalized."""
    try:
        if backend == OPERATOR:
            target = operator_target(kubeconfig, context, namespace)
            with workload_tasks(target) as tasks:
                record = tasks.find(task_id)
                history, events = tasks.history(record), tasks.events(record)
                lines = _StatusLines(output, target.backend(), watching=watch)
                lines.status(record, history, events)
                if watch and not record.finalized:
                    with tasks.following(record) as view:
                        _follow_status(
                            view,
                            record.task_id,
                            view.changes,
                            lines,
                            history=history,
                            events=events,
                        )
            return
        refuse_without_operator(namespace=namespace, context=context, kubeconfig=kubeconfig)
        store = open_store(home)
        with contextlib.closing(store):
            changes = _StoreChanges(store)  # before the first read: no change is missed
            found = _find(store, task_id).task_id
            record, history, events = _read_task(store, found)
            lines = _StatusLines(output, None, watching=watch)
            lines.status(record, history, events)
            if watch:
                _follow_status(store, found, changes, lines, history=history, events=events)
    except KeyboardInterrupt:
        if not watch:
            raise
        # Ctrl-C ends watching, as it ends 'kubectl get -w'


class _TaskReader(Protocol):
    """What ``status --watch`` reads of a task: the store, or a watched Workload's view."""

    def get(self, task_id: str) -> TaskRecord: ...

    def history(self, task_id: str) -> list[HistoryEntry]: ...

    def events(self, task_id: str) -> list[AttachedEvent]: ...


def _follow_status(
    reader: _TaskReader,
    task_id: str,
    changes: _Changes,
    lines: _StatusLines,
    *,
    history: list[HistoryEntry],
    events: list[AttachedEvent],
) -> None:
    """Print each phase and event of the task after those shown (``history``, ``events``), in
    the order they happened, until the task is finalized."""
    phases_shown, shown_events = len(history), list(events)
    while True:
        record, now_history, now_events = _read_task(reader, task_id)
        lines.news(task_id, now_history[phases_shown:], events_after(shown_events, now_events))
        phases_shown, shown_events = len(now_history), now_events
        if record.finalized:
            return
        changes.wait()


def events_after(shown: list[AttachedEvent], now: list[AttachedEvent]) -> list[AttachedEvent]:
    """The events of ``now`` that came after those ``shown``. A Workload keeps only its latest
    events (64), so the oldest shown may have dropped out of ``now``: ``now`` begins with the
    rest of ``shown``, then the new ones."""
    for dropped in range(len(shown) + 1):
        kept = shown[dropped:]
        if now[: len(kept)] == kept:
            return now[len(kept) :]
    return now


def _read_task(
    reader: _TaskReader, task_id: str
) -> tuple[TaskRecord, list[HistoryEntry], list[AttachedEvent]]:
    """The task with its history and events as one write left them: read again when another
    came between the reads (a phase and the events that came with it are shown together, in
    their order, and once the task is finalized its history and events are whole)."""
    while True:
        record = _stored(lambda: reader.get(task_id))
        history = _stored(lambda: reader.history(task_id))
        events = _stored(lambda: reader.events(task_id))
        if _stored(lambda: reader.get(task_id)).revision == record.revision:
            return record, history, events


class _StatusLines:
    """A task's status as ``status`` prints it (``output``), and, when ``watching``, what
    happens next: the history's and events' lines, or a JSON object on one line each (the
    status first), or a YAML document each. ``backend``: the task's, else its own."""

    def __init__(self, output: str, backend: str | None, *, watching: bool) -> None:
        self._output, self._backend, self._watching = output, backend, watching

    def status(
        self, record: TaskRecord, history: list[HistoryEntry], events: list[AttachedEvent]
    ) -> None:
        if self._output == TABLE:
            _show_status(record, history, events, self._backend or record.task.backend)
            return
        data = task_status(record, history, events, backend=self._backend)
        _print_document(data, self._output, watching=self._watching)

    def news(self, task_id: str, phases: list[HistoryEntry], events: list[AttachedEvent]) -> None:
        """New phases and events, in the order they happened."""
        for at, item in in_order(phases, events, now=utc_now()):
            if self._output == TABLE:
                what = (
                    history_line(item)
                    if isinstance(item, HistoryEntry)
                    else f"event: {item.reason}"
                )
                click.echo(f"  {at:%H:%M:%S}  {what}")
                continue
            if self._output == YAML:
                click.echo("---")
            data = (
                phase_change(task_id, item)
                if isinstance(item, HistoryEntry)
                else task_event(task_id, item)
            )
            _print_document(data, self._output, watching=True)


def _show_status(
    record: TaskRecord, history: list[HistoryEntry], events: list[AttachedEvent], backend: str
) -> None:
    task = record.task
    click.echo(f"task:      {task.task_id}")
    click.echo(f"workload:  {task.name} ({task.workload_type}), namespace {task.namespace}")
    click.echo(f"backend:   {backend}")
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
@operator_options
@kubeconfig_option
@home_option
def logs_command(
    *,
    task_id: str,
    follow: bool,
    backend: str | None,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    home: str,
) -> None:
    """Print a task's output: every container of a local task's pods, in order; the primary
    container of a cluster task's primary pod. Ctrl-C stops following."""
    if backend == OPERATOR:
        target = operator_target(kubeconfig, context, namespace)
        with workload_tasks(target) as tasks:
            _operator_logs(tasks, tasks.find(task_id), follow=follow)
        return
    refuse_without_operator(namespace=namespace, context=context)
    store = open_store(home)
    with contextlib.closing(store):
        record = _find(store, task_id)
        tail = _all_output(record, Path(home), kubeconfig)
        with contextlib.closing(tail):
            _print_output(tail, lambda: _stored(lambda: store.get(task_id)), task_id, follow)


def _operator_logs(tasks: WorkloadTasks, record: TaskRecord, *, follow: bool) -> None:
    """The output of an operator's task: its Workload followed by a watch with ``follow``."""
    task_id = record.task_id
    if not follow:
        if not record.task.manifests:
            click.echo(f"podwright: task {task_id} has no output yet: {record.reason}", err=True)
        tail = WorkloadLogTail(tasks.target.access, lambda: record)
        with contextlib.closing(tail):
            _print_output(tail, lambda: record, task_id, follow)
        return
    with tasks.following(record) as view:
        tail = WorkloadLogTail(tasks.target.access, lambda: view.get(task_id))
        with contextlib.closing(tail):
            _print_output(tail, lambda: view.get(task_id), task_id, follow)


def _print_output(
    tail: LogTail, current: Callable[[], TaskRecord], task_id: str, follow: bool
) -> None:
    """Print what ``tail`` reads: what there is, or with ``follow`` until the task (``current``)
    is finalized. Ctrl-C stops following."""
    try:
        while True:
            ended = current().finalized
            for line in tail.rest() if ended or not follow else tail.read():
                click.echo(line.text)
            _unless_silent(tail, task_id, patience=LOST_SERVER_AFTER if follow else None)
            if ended or not follow:
                return
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        return  # Ctrl-C ends following, as it does for 'kubectl logs -f'


def _unless_silent(tail: LogTail, task_id: str, *, patience: timedelta | None) -> None:
    """:class:`Unreachable` (exit status 6) once the task's API server has given no answer for
    longer than ``patience`` (None: at all): its output cannot be read."""
    silence = tail.unanswered_for()
    if silence is None or (patience is not None and silence[0] < patience):
        return
    raise Unreachable(f"{silence[1]}: the output of task {task_id} cannot be read")


def _all_output(record: TaskRecord, home: Path, kubeconfig: str | None) -> LogTail:
    ref = resource_ref(record, default_plugins(), LifecycleConfig())
    if record.task.backend == LOCAL:
        return LocalLogTail(home / LOCAL, ref)
    problem = cluster_problem(record.task.backend, kubeconfig)
    if problem is not None:
        raise BadInput(f"task {record.task_id} runs on {record.task.backend}: {problem}")
    access = access_for(record.task.backend, kubeconfig)
    try:
        client = KubernetesClient(connect(access.kubeconfig, access.context))
    except KubernetesConfigError as error:
        raise BadInput(f"task {record.task_id} runs on {record.task.backend}: {error}") from error
    return ClusterLogTail(client, ref)


@click.command("abort")
@click.argument("task_id")
@operator_options
@kubeconfig_option
@home_option
def abort_command(
    *,
    task_id: str,
    backend: str | None,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    home: str,
) -> None:
    """Abort a task: its executor (started when none runs) stops its resources and ends it
    Aborted. 'podwright status ID' follows it. With --backend operator: the operator does."""
    if backend == OPERATOR:
        target = operator_target(kubeconfig, context, namespace)
        with workload_tasks(target) as tasks:
            click.echo(tasks.abort(tasks.find(task_id)))
        return
    refuse_without_operator(namespace=namespace, context=context)
    store = open_store(home)
    with contextlib.closing(store):
        record = _find(store, task_id)
        if record.phase.is_terminal:
            click.echo(f"task {task_id} already ended: {record.phase.value}")
            return
        launch = ExecutorLaunch(Path(home), store.path, record.task.backend, kubeconfig)
        problem = _unreachable(launch)
        if problem is not None:
            raise Unavailable(
                f"task {task_id} cannot be aborted: its backend {record.task.backend} cannot be "
                f"reached from here: {problem}; 'podwright delete {task_id}' removes its record"
            )
        _stored(lambda: store.request_abort(task_id, utc_now()))
        try:
            serving = launch.ensure()
        except ExecutorStartError as error:
            raise Unavailable(f"abort of task {task_id} recorded, but {error}") from error
    runner = "a background executor" if serving.started else "the executor"
    click.echo(f"abort requested for task {task_id}: {runner} (pid {serving.pid}) stops it")


@click.command("delete")
@click.argument("task_ids", metavar="[ID]...", nargs=-1)
@click.option("--all-finished", is_flag=True, help="Delete every finalized task too.")
@click.option(
    "--force",
    is_flag=True,
    help="Remove the record of a task whose backend cannot be reached even when its resource "
    "was created there (which may then be left behind).",
)
@click.option(
    "--timeout",
    type=DURATION,
    default="2m",
    show_default=True,
    help="How long to wait for an active task's abort (a Go duration: 30s, 5m).",
)
@click.option(
    "--wait",
    is_flag=True,
    help="With --backend operator: wait until the operator finalized each task and its Workload "
    "is gone (within --timeout).",
)
@operator_options
@kubeconfig_option
@home_option
def delete_command(
    *,
    task_ids: tuple[str, ...],
    all_finished: bool,
    force: bool,
    timeout: timedelta,
    wait: bool,
    backend: str | None,
    namespace: str | None,
    context: str | None,
    kubeconfig: str | None,
    home: str,
) -> None:
    """Delete tasks from the store: an active one is aborted first; its history, events and local
    log files go with it. With --backend operator: their Workloads (the operator aborts them)."""
    if not task_ids and not all_finished:
        raise click.UsageError("give the IDs of the tasks to delete, or --all-finished")
    if backend == OPERATOR:
        if force:
            raise BadInput(
                "--force: with --backend operator the operator finalizes every Workload deleted "
                "(podwright's finalizer holds it until then); leave --force out"
            )
        target = operator_target(kubeconfig, context, namespace)
        code = _delete_workloads(target, task_ids, all_finished, wait=wait, timeout=timeout)
        if code:
            sys.exit(code)
        return
    refuse_without_operator(namespace=namespace, context=context, wait=wait)
    store = open_store(home)
    with contextlib.closing(store):
        records: dict[str, TaskRecord] = {}
        unknown: list[str] = []
        for task_id in dict.fromkeys(task_ids):
            try:
                records[task_id] = store.get(task_id)
            except TaskNotFoundError:
                unknown.append(task_id)
            except TaskStoreError as error:
                raise Unavailable(str(error)) from error
        if all_finished:
            for record in _stored(store.list_tasks):
                if record.finalized:
                    records.setdefault(record.task_id, record)
        for task_id in unknown:
            click.echo(f"podwright: error: no task {task_id!r} in {store.path}", err=True)
        deleter = _Deleter(store, Path(home), kubeconfig, force=force, timeout=timeout)
        failed = 0
        for record in records.values():
            try:
                click.echo(deleter.delete(record))
            except click.ClickException as error:
                failed += 1
                click.echo(f"podwright: error: {error.format_message()}", err=True)
    if unknown:
        sys.exit(ExitCode.BAD_INPUT)
    if failed:
        sys.exit(ExitCode.UNAVAILABLE)


def _delete_workloads(
    target: OperatorTarget,
    task_ids: tuple[str, ...],
    all_finished: bool,
    *,
    wait: bool,
    timeout: timedelta,
) -> int:
    """Delete the Workloads of the tasks (and of every finalized one, ``all_finished``); with
    ``wait``, until they are gone. The exit status, as for the tasks of the store."""
    unknown = failed = 0
    with workload_tasks(target) as tasks:
        records: dict[str, TaskRecord] = {}
        for task_id in dict.fromkeys(task_ids):
            try:
                record = tasks.find(task_id)
            except BadInput as error:
                unknown += 1
                click.echo(f"podwright: error: {error.format_message()}", err=True)
                continue
            records.setdefault(record.task_id, record)
        if all_finished:
            for record in tasks.records():
                if record.finalized:
                    records.setdefault(record.task_id, record)
        deleted = []
        for record in records.values():
            try:
                click.echo(tasks.delete(record))
            except click.ClickException as error:
                failed += 1
                click.echo(f"podwright: error: {error.format_message()}", err=True)
            else:
                deleted.append(record)
        if wait and deleted:
            left = {record.task_id for record in tasks.wait_gone(deleted, timeout)}
            for record in deleted:
                if record.task_id not in left:
                    click.echo(f"task {record.task_id}: its Workload is gone")
                    continue
                failed += 1
                click.echo(
                    f"podwright: error: task {record.task_id}: its Workload "
                    f"{record.task.namespace}/{record.task.name} is still there after "
                    f"{_duration(timeout)}: the operator has not finalized it (podwright status "
                    f"{record.task_id}{target.again(record.task.namespace)})",
                    err=True,
                )
    if unknown:
        return ExitCode.BAD_INPUT
    return ExitCode.UNAVAILABLE if failed else ExitCode.OK


class _Deleter:
    """Removes one task after another, aborting those still active."""

    def __init__(
        self,
        store: SQLiteTaskStore,
        home: Path,
        kubeconfig: str | None,
        *,
        force: bool,
        timeout: timedelta,
    ) -> None:
        self._store, self._home, self._kubeconfig = store, home, kubeconfig
        self._force, self._timeout = force, timeout

    def delete(self, record: TaskRecord) -> str:
        """Remove the task; what was done, in one line."""
        task_id, backend = record.task_id, record.task.backend
        if record.finalized:
            self._remove(record)
            return f"task {task_id} deleted"
        launch = ExecutorLaunch(self._home, self._store.path, backend, self._kubeconfig)
        problem = _unreachable(launch)
        if problem is None:
            ended = self._aborted(record, launch)
            self._remove(ended)
            if ended.finalized:
                return f"task {task_id} aborted and deleted"
            return (
                f"task {task_id} deleted (--force): its abort did not finish within "
                f"{_duration(self._timeout)}; its {_resource_name(record)} may be left on "
                f"{backend}; delete it there if it is"
            )
        if not _was_created(record):
            self._remove(record)
            kept = (
                "; the claims it created stay, as claims outlive their tasks"
                if _claims_created(record)
                else ""
            )
            return (
                f"task {task_id} deleted: its backend {backend} cannot be reached ({problem}), "
                f"and its resource was never created there{kept}"
            )
        left = _resource_name(record)
        if not self._force:
            raise Unavailable(
                f"task {task_id} is not deleted: its backend {backend} cannot be reached "
                f"({problem}), and its {left} may exist there; --force removes the record anyway"
            )
        self._remove(record)
        return (
            f"task {task_id} deleted (--force): its {left} may be left on {backend}; delete it "
            "there if it is"
        )

    def _aborted(self, record: TaskRecord, launch: ExecutorLaunch) -> TaskRecord:
        """The task once the executor finalized it, its abort requested if it is not over."""
        task_id = record.task_id
        if not record.phase.is_terminal:
            record = _stored(lambda: self._store.request_abort(task_id, utc_now()))
        keeper = ExecutorKeeper(launch)
        keeper.keep(task_id, record.revision, now=True)
        click.echo(
            f"task {task_id}: {record.phase.value}, aborting it: waiting for the executor "
            f"(pid {keeper.pid}) to finish, at most {_duration(self._timeout)}",
            err=True,
        )
        deadline = time.monotonic() + self._timeout.total_seconds()
        while not record.finalized:
            if time.monotonic() > deadline:
                if self._force:  # the API server may be gone: the record goes all the same
                    return record
                raise Unavailable(
                    f"task {task_id} is not deleted: not finalized within "
                    f"{_duration(self._timeout)} (it is {record.phase.value}, abort requested); "
                    f"see {launch.log}; --force removes the record anyway"
                )
            time.sleep(POLL_SECONDS)
            record = _stored(lambda: self._store.get(task_id))
            keeper.keep(task_id, record.revision)
        return record

    def _remove(self, record: TaskRecord) -> None:
        """Remove the record as it was read (a task that changed meanwhile stays), and its local
        log files."""
        try:
            self._store.delete(record.task_id, record.revision)
        except StaleRevisionError as error:
            raise Unavailable(
                f"task {record.task_id} is not deleted: it changed while it was being deleted "
                "(an executor serves it); try again"
            ) from error
        except TaskStoreError as error:
            raise Unavailable(str(error)) from error
        if record.task.backend == LOCAL:
            with contextlib.suppress(PluginError):
                ref = resource_ref(record, default_plugins(), LifecycleConfig())
                for directory in local_log_directories(self._home / LOCAL, ref):
                    shutil.rmtree(directory, ignore_errors=True)


def _unreachable(launch: ExecutorLaunch) -> str | None:
    """Why the task's backend cannot be served from here, or None (an executor serves it, or one
    can be started)."""
    if launch.slot.serving() is not None:
        return None
    return cluster_problem(launch.key, launch.kubeconfig)


def _was_created(record: TaskRecord) -> bool:
    """Whether the task's resource may have been created (its launch started, or a create of it
    may have reached the API server)."""
    try:
        return not decode_state(record.plugin_state).never_created
    except CorruptedPluginStateError:
        return True


def _claims_created(record: TaskRecord) -> bool:
    """Whether what the task's pods need (its claims) was created, before its resource."""
    try:
        return decode_state(record.plugin_state).needs_created
    except CorruptedPluginStateError:
        return True


def _resource_name(record: TaskRecord) -> str:
    try:
        ref = resource_ref(record, default_plugins(), LifecycleConfig())
    except PluginError:
        return "resource"
    return f"{ref.kind} {ref.namespace}/{ref.name}"


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    return f"{seconds // 60}m{seconds % 60}s" if seconds >= 60 else f"{value.total_seconds():g}s"


def _stored(read: Callable[[], T]) -> T:
    """A store operation; the store being unavailable ends the command with status 5."""
    try:
        return read()
    except TaskNotFoundError as error:
        raise BadInput(str(error)) from error
    except TaskStoreError as error:
        raise Unavailable(str(error)) from error


def _find(store: SQLiteTaskStore, task_id: str | None) -> TaskRecord:
    """The task of ``task_id`` (bad input when unknown), else the latest one."""
    if task_id is not None:
        return _stored(lambda: store.get(task_id))
    records = _stored(store.list_tasks)
    if not records:
        raise BadInput(f"no tasks in {store.path}")
    return records[-1]
