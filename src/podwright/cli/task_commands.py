"""``podwright list``, ``status``, ``logs``, ``abort`` and ``delete``: the tasks in the task store.

Built on :class:`podwright.api.Client`, they read the store ``run`` writes (``--home``, or
``$PODWRIGHT_TASK_STORE``). ``abort`` records the request and makes sure an executor serves
the task's backend, starting one when none does, so the abort happens even when nothing else
runs. ``delete`` removes tasks from the store: a finalized
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
the cluster's operator instead (:mod:`podwright.api.operator_tasks`) and show them alike:
``abort`` sets the Workload's abort annotation, ``delete`` deletes the Workload (the operator
aborts and finalizes its task first; ``--wait`` waits until it is gone, within ``--timeout``).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import click

from podwright import api
from podwright.api import (
    Client,
    Phase,
    SortKey,
    TaskChange,
    TaskNotFoundError,
    TaskOutcome,
    TaskRecord,
    TaskStatus,
    WorkloadType,
)
from podwright.api.backends import OPERATOR
from podwright.api.client import history_line, parse_phase, parse_selector
from podwright.cli.common import (
    ExitCode,
    output_option,
    table,
)
from podwright.cli.executor_command import DURATION
from podwright.cli.operator_options import (
    all_namespaces_option,
    operator_options,
    refuse_without_operator,
)
from podwright.cli.task_options import home_option

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


class _LabelSelectorType(click.ParamType[str]):
    """A Kubernetes label selector; a malformed one is a usage error saying where."""

    name = "SELECTOR"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        try:
            parse_selector(str(value))
        except api.InvalidInputError as error:
            self.fail(f"{value!r}: {error.__cause__}", param, ctx)
        return str(value)


class _PhaseType(click.ParamType[Phase]):
    """A lifecycle phase, as ``list`` shows it, in any case (``Running``, ``running``); an unknown
    one is a usage error listing them."""

    name = "PHASE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Phase:
        try:
            return parse_phase(value if isinstance(value, Phase) else str(value))
        except api.InvalidInputError as error:
            self.fail(str(error), param, ctx)


def _client(
    backend: str | None,
    *,
    home: str,
    kubeconfig: str | None,
    context: str | None = None,
    namespace: str | None = None,
    all_namespaces: bool = False,
    refused: dict[str, object] | None = None,
) -> Client:
    """The client of a task command's options: the operator's Workloads, or this machine's
    store, which takes none of the operator's options (``namespace``, ``context``,
    ``all_namespaces``, and those of ``refused``, the command's own, when given)."""
    if backend == OPERATOR:
        return Client(
            OPERATOR,
            kubeconfig=kubeconfig,
            context=context,
            namespace=namespace,
            all_namespaces=all_namespaces,
            home=home,
        )
    refuse_without_operator(
        namespace=namespace, context=context, all_namespaces=all_namespaces, **(refused or {})
    )
    return Client(backend, kubeconfig=kubeconfig, home=home)


@contextlib.contextmanager
def _watching() -> Iterator[None]:
    """Ctrl-C ends a watch, as it ends 'kubectl get -w' (status 0)."""
    with contextlib.suppress(KeyboardInterrupt):
        yield


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
    selector: str,
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
    client = _client(
        backend,
        home=home,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        all_namespaces=all_namespaces,
        refused={"kubeconfig": kubeconfig},
    )
    selection: dict[str, Any] = {
        "phases": phases,
        "types": types,
        "selector": selector,
        "active": active,
        "sort_by": sort_by,
    }
    filtered = bool(phases or types or selector or active)
    nothing = f"no Workloads in {client.where}" if client.is_operator else "no tasks"
    lines = _TaskLines(
        output,
        client,
        namespaces=client.is_operator and client.all_namespaces,
        nothing=f"{nothing} matching the filters" if filtered else nothing,
    )
    with client, _watching() if watch else contextlib.nullcontext():
        records = client.list(**selection)
        lines.listing(records, watching=watch)
        if watch:
            for record in client.watch_list(**selection, since=records):
                lines.changed(record)


_HEADERS = ["ID", "TYPE", "BACKEND", "PHASE", "SUBMITTED", "ACTIVE"]


class _TaskLines:
    """Tasks as ``list`` prints them (``output``): a table, or a TaskList in JSON or YAML; when
    watching, each task as a row (aligned with the table's), a JSON object on one line, or a
    YAML document, the first ones as the rest, as ``client`` shows them; ``namespaces``: a
    column of them; ``nothing``: what the table says of no task."""

    def __init__(self, output: str, client: Client, *, namespaces: bool, nothing: str) -> None:
        self._output, self._client, self._namespaces = output, client, namespaces
        self._backend = client.shown_backend
        self._nothing = nothing
        self._headers = [*(["NAMESPACE"] if namespaces else []), *_HEADERS]
        self._widths: list[int] | None = None
        self._documents = 0

    def listing(self, records: list[TaskRecord], *, watching: bool) -> None:
        """Print ``records``, as a watch begins or as a listing."""
        if self._output == TABLE and not records:
            click.echo(self._nothing, err=watching)  # a watch's output stays rows
        elif not watching and self._output == TABLE:
            click.echo(table(self._headers, [self._row(record) for record in records]))
        elif not watching:
            _print_document(self._client.list_document(records), self._output, watching=False)
        else:
            if self._output == TABLE:
                self._widths = _widths(self._headers, [self._row(record) for record in records])
                click.echo(_aligned(self._headers, self._widths))
            for record in records:
                self.changed(record)

    def changed(self, record: TaskRecord) -> None:
        """Print one task, as a watch does."""
        if self._output != TABLE:
            if self._documents and self._output == YAML:
                click.echo("---")
            self._documents += 1
            _print_document(self._client.item(record), self._output, watching=True)
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
        click.echo(api.to_yaml(data), nl=False)


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
    client = _client(
        backend,
        home=home,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        refused={"kubeconfig": kubeconfig},
    )
    with client, _watching() if watch else contextlib.nullcontext():
        status = client.get(task_id)
        if output == TABLE:
            _show_status(status)
        else:
            _print_document(status.to_data(), output, watching=watch)
        if watch:
            for change in client.watch(status.task_id, since=status):
                _show_change(change, output)


def _show_change(change: TaskChange, output: str) -> None:
    """A new phase or event, as ``status --watch`` prints it."""
    if output == TABLE:
        click.echo(f"  {change.at:%H:%M:%S}  {change.text}")
        return
    if output == YAML:
        click.echo("---")
    _print_document(change.to_data(), output, watching=True)


def _show_status(status: TaskStatus) -> None:
    record = status.record
    task = record.task
    click.echo(f"task:      {task.task_id}")
    click.echo(f"workload:  {task.name} ({task.workload_type}), namespace {task.namespace}")
    click.echo(f"backend:   {status.backend}")
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
    for entry in status.history:
        click.echo(f"  {entry.occurred_at:%H:%M:%S}  {history_line(entry)}")
    if status.events:
        click.echo("events:")
        for event in status.events:
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
    with _client(
        backend, home=home, kubeconfig=kubeconfig, context=context, namespace=namespace
    ) as client:
        if client.is_operator and not follow:
            record = client.get(task_id).record
            if not record.task.manifests:
                click.echo(
                    f"podwright: task {record.task_id} has no output yet: {record.reason}",
                    err=True,
                )
        with contextlib.suppress(KeyboardInterrupt):  # as it ends 'kubectl logs -f'
            for line in client.logs(task_id, follow=follow):
                click.echo(line)


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
    with _client(
        backend, home=home, kubeconfig=kubeconfig, context=context, namespace=namespace
    ) as client:
        click.echo(client.abort(task_id).message)


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
    client = _client(
        backend,
        home=home,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        refused={"wait": wait},
    )
    with client:
        outcomes = client.delete(
            task_ids,
            all_finished=all_finished,
            force=force,
            timeout=timeout,
            wait=wait,
            progress=lambda text: click.echo(text, err=True),
            report=_print_outcome,
        )
    if any(isinstance(outcome.error, TaskNotFoundError) for outcome in outcomes):
        sys.exit(ExitCode.BAD_INPUT)
    if any(outcome.error is not None for outcome in outcomes):
        sys.exit(ExitCode.UNAVAILABLE)


def _print_outcome(outcome: TaskOutcome) -> None:
    """What became of a task, as it comes: a line on the output, or an error."""
    if outcome.error is None:
        click.echo(outcome.message)
    else:
        click.echo(f"podwright: error: {outcome.message}", err=True)
