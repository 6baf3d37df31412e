"""``podwright run``: a workload through its policies and rendering, then its task followed.

``run`` takes a workload through its policies, renders it, and submits it through
:class:`podwright.api.Client`: it records a task in the task store
(``$PODWRIGHT_HOME/tasks.db``; default ``~/.local/state/podwright``), makes sure an executor serves
the task's backend (starting ``podwright executor --until-idle`` in the background when none does;
:mod:`podwright.api.executors`), and follows the task from the store and its output until it is
finalized: the phase timeline, the Kubernetes events and the primary container's output, in the
order they happened (a live display on a terminal, plain lines elsewhere). It never runs the
engine itself, so nothing it does to itself (Ctrl-C, SIGTERM, SIGHUP, its output closed) can
orphan the task; if the executor exits while the task is active, ``run`` starts another.
``--detach`` records the task, makes sure an executor serves it, and returns.

Before anything is recorded, a workload the chosen backend cannot run is refused: on the local
backend, any manifest the local backend neither runs nor records (a distributed workload's
Kubeflow job, an inference workload's Knative Service). A local task's containers without a
``workingDir`` run where ``run`` was started, as a command typed there would: that directory is
written into the recorded manifests as their ``workingDir``, since the executor that runs them
may have been started anywhere.

With ``--backend operator`` nothing of this is local: ``run`` creates a Workload of the workload
file, which the cluster's operator runs (:mod:`podwright.api.operator_tasks`), and follows it
with the same display; Ctrl-C then stops following at once, and the Workload goes on.

Ctrl-C on a terminal asks whether to abort the task, detach from it, or continue; elsewhere it
aborts. Aborting follows the task to Aborted; a second Ctrl-C then stops following at once, the
executor finishing the abort. The exit status (:class:`~podwright.cli.common.ExitCode`): 0
succeeded (or detached), 1 rejected by the policies, 2 bad input, 3 failed, 4 aborted, 5 no
executor could serve it or the store is unavailable, 6 the API server gave no answer (before
anything was recorded, at the task's launch, or for ``LOST_SERVER_AFTER`` while following it),
129 and 143 stopped following on SIGHUP or SIGTERM, 141 output closed; in the last three, and
when the server was lost while following, the task goes on with the executor.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from types import FrameType
from typing import Any

import click

from podwright.api import (
    AdmissionDeniedError,
    BackendError,
    Client,
    Phase,
    Prepared,
    SubmittedTask,
    TaskNotFoundError,
    TaskRecord,
    TaskStoreUnavailableError,
)
from podwright.api.backends import LOCAL, OPERATOR, context_of
from podwright.api.client import POLL_SECONDS, Keeper, TaskReader
from podwright.api.state import utc_now
from podwright.api.task_logs import API_SERVER_UNREACHABLE, LOST_SERVER_AFTER, LogTail
from podwright.cli.common import (
    ExitCode,
    Unreachable,
    point_output_at_devnull,
    scalar_text,
    table,
)
from podwright.cli.executor_command import lifecycle_option
from podwright.cli.inputs import load_workload
from podwright.cli.operator_options import refuse_for_operator
from podwright.cli.render_command import (
    Preparation,
    preparation_options,
    prepare_workload,
)
from podwright.cli.run_display import Display, LiveDisplay, PlainDisplay, Timeline, show
from podwright.cli.task_options import home_option, submit_options

SETTLE = timedelta(seconds=1.5)
"""How long what happened is held back before it is shown: the executor records a task's events
and phases in its next round (a second by default), after the output they came before."""


@click.command("run")
@preparation_options(preview=False)
@click.option(
    "-n",
    "--namespace",
    default=None,
    help="The task's namespace (default: the kubeconfig context's namespace, as kubectl "
    "chooses it; else default).",
)
@submit_options
@click.option(
    "--detach",
    is_flag=True,
    help="Submit the task and return; a background executor (or the operator) runs it "
    "('status', 'logs -f' follow).",
)
@lifecycle_option
@home_option
def run_command(
    *,
    preparation: Preparation,
    namespace: str | None,
    backend: str | None,
    kubeconfig: str | None,
    context: str | None,
    detach: bool,
    lifecycle_config: str | None,
    home: str,
) -> None:
    """Run a workload: policies, rendering, then the task until it ends (or --detach).

    The task is run by a background executor ('podwright executor --until-idle', started when
    none serves the backend); this command follows it, and leaves it running when it is stopped.
    With --backend operator the task is a Workload, which the cluster's operator runs.
    """
    if backend == OPERATOR:
        refuse_for_operator(preparation, lifecycle_config, namespace)
    client = Client(
        backend,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        home=home,
        lifecycle_config=lifecycle_config,
    )
    with client:
        sys.exit(_run(client, preparation, detach))


def _run(client: Client, preparation: Preparation, detach: bool) -> int:
    """Submit the workload, then follow its task (unless ``detach``) until it is finalized;
    the exit status."""
    workload = load_workload(preparation.workload_file, preparation.workload_type)
    prepared: Prepared | None = None
    if not client.is_operator:
        namespace = client.submission_namespace(workload)
        # On this machine a workload that names no namespace is judged by the policies'
        # deepest scope, as `policy evaluate` judges it, and runs in the fallback namespace. In
        # a cluster, the namespace's own labels name its project and department, as the
        # admission webhook reads them.
        described = preparation.department is not None or preparation.project is not None
        namespace_object = (
            _namespace_object(client, namespace)
            if namespace and preparation.policy_files and not described
            else None
        )
        prepared = prepare_workload(
            preparation, namespace, workload, namespace_object=namespace_object
        )
    client.check_reachable()  # before the signals wait: Ctrl-C still ends it, nothing recorded
    with Signals() as signals:
        # Signals wait while the task is recorded and handed to an executor: it is never left
        # recorded with nobody to run it.
        try:
            submitted = (
                client.submit(workload, name=preparation.name)
                if prepared is None
                else client.submit(prepared)
            )
        except AdmissionDeniedError as denied:
            _report_denial(denied)
            return ExitCode.VIOLATIONS
        task_id, again = submitted.task_id, submitted.again
        try:
            signals.start_following()
            _introduce(client, submitted, prepared)
            if detach:
                click.echo(f"task {task_id} left to {submitted.runner}")
                click.echo(
                    f"  follow it: podwright status {task_id}{again}; podwright logs {task_id} "
                    f"-f{again}"
                )
                return ExitCode.OK
            task = submitted.record.task
            with client.following(submitted) as following:
                follower = Follower(
                    following.view,
                    submitted.record,
                    following.logs,
                    following.keeper,
                    signals,
                    runner=submitted.runner if client.is_operator else None,
                    again=again,
                    interrupt_detaches=client.is_operator,
                )
                return follower.follow(_display(f"{task.workload_type} {task.name}"))
        except _StopFollowing as stopped:
            if stopped.exit_code == ExitCode.HANGUP:
                point_output_at_devnull()  # the terminal is gone
            who = "the operator" if client.is_operator else "the executor"
            _note_quietly(
                f"podwright: {stopped.name}: stopped following task {task_id}; it goes on "
                f"with {who} (podwright status {task_id}{again})"
            )
            return stopped.exit_code


def _namespace_object(client: Client, namespace: str) -> Mapping[str, object] | None:
    """The cluster's Namespace, or None; a note when this user may not read it."""
    return client.namespace_object(
        namespace,
        unreadable=lambda: click.echo(
            f"podwright: note: namespace {namespace}: this user may not read it, so its "
            "project and department are inferred from the policies",
            err=True,
        ),
    )


def _report_denial(denied: AdmissionDeniedError) -> None:
    """Each issue of an admission webhook's refusal on a line of its own, then what it did."""
    for issue in denied.issues:
        click.echo(f"podwright: violation: {issue}", err=True)
    click.echo(f"podwright: {denied.summary}", err=True)


def _introduce(client: Client, submitted: SubmittedTask, prepared: Prepared | None) -> None:
    task = submitted.record.task
    key = submitted.backend
    if client.is_operator:
        where = f"cluster {key.partition('/')[2]} (operator)"
    else:
        where = "local backend" if key == LOCAL else f"cluster {context_of(key)}"
    click.echo(f"task {task.task_id}: {task.workload_type} workload {task.name!r}, {where}")
    if prepared is not None and prepared.sources:
        rows = [
            [f"  {path}", scalar_text(prepared.values[path]), source]
            for path, source in prepared.sources.items()
        ]
        click.echo(table(["  EFFECTIVE FIELD", "VALUE", "SOURCE"], rows))
    if key == LOCAL:
        for image in _images(task.manifests):
            click.echo(f"  image {image} is recorded, not pulled: commands run on this machine")


def _display(title: str) -> Display:
    if sys.stdout.isatty() and os.environ.get("TERM") != "dumb":
        return LiveDisplay(title)
    return PlainDisplay()


class _StopFollowing(BaseException):
    """SIGTERM or SIGHUP: ``run`` stops following; the task goes on with its executor."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.name = signal.Signals(number).name
        self.exit_code = ExitCode.TERMINATED if number == signal.SIGTERM else ExitCode.HANGUP


class Signals:
    """SIGINT, SIGTERM and SIGHUP while ``run`` has a task.

    Until :meth:`start_following` they are only noted (the task is being recorded and handed to
    an executor); then SIGTERM and SIGHUP raise :class:`_StopFollowing`. SIGINT (Ctrl-C) sets
    :attr:`interrupted` for the follower to ask about, except while the task is being aborted
    (:attr:`aborting`), when it raises :class:`KeyboardInterrupt` to stop following at once.
    """

    _STOPPING = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.interrupted = False
        self.aborting = False
        self._following = False
        self._stop: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        for number in (signal.SIGINT, *self._STOPPING):
            self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *_exc: object) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)

    def start_following(self) -> None:
        self._following = True
        if self._stop is not None:
            raise _StopFollowing(self._stop)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """SIGTERM and SIGHUP wait while the block runs (an executor being started for the
        task, which an interruption could leave half started); one that came meanwhile stops
        following once it is done."""
        self._following = False
        try:
            yield
        finally:
            self.start_following()

    def _handle(self, number: int, _frame: FrameType | None) -> None:
        if number == signal.SIGINT:
            if self.aborting:
                raise KeyboardInterrupt
            self.interrupted = True
        elif self._following:
            raise _StopFollowing(number)
        else:
            self._stop = number


def _note_quietly(text: str) -> None:
    """One line on standard error, if it can still be written (not after SIGHUP)."""
    with contextlib.suppress(OSError):
        click.echo(text, err=True)


class Follower:
    """Shows what happens to the task, from the store and its output, until it is finalized.

    ``runner`` names who runs the task in what this says (default: the executor, with its pid),
    ``again`` the options the commands that follow it again need (``podwright status ID`` +
    ``again``), and ``interrupt_detaches`` makes Ctrl-C stop following at once, the task going
    on, rather than ask whether to abort it: the operator's tasks (nothing here runs them).
    """

    def __init__(
        self,
        store: TaskReader,
        record: TaskRecord,
        logs: LogTail,
        keeper: Keeper,
        signals: Signals,
        *,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], None] = time.sleep,
        runner: str | None = None,
        again: str = "",
        interrupt_detaches: bool = False,
    ) -> None:
        self._store, self._task_id, self._logs = store, record.task_id, logs
        self._origin = record.task.submitted_at
        self._keeper, self._signals = keeper, signals
        self._clock, self._sleep = clock, sleep
        self._runner, self._again, self._interrupt_detaches = runner, again, interrupt_detaches
        self._timeline = Timeline(SETTLE)
        self._phases = self._events = 0
        self._ended = False
        self._output_read_at = self._origin
        self._error_code: str | None = None

    def follow(self, display: Display) -> int:
        """Follow until the task is finalized; the exit status."""
        try:
            while True:
                record = self._show_news(display)
                if record.finalized:
                    return _exit_code(record.phase, self._error_code)
                self._check_server()
                with self._signals.holding():
                    self._keeper.keep(self._task_id, record.revision)
                if self._signals.interrupted:
                    code = self._on_interrupt(display, record)
                    if code is not None:
                        return code
                self._sleep(POLL_SECONDS)
        except KeyboardInterrupt:  # a second Ctrl-C, while the task is being aborted
            return self._stop_following(display)
        finally:
            display.close()

    def _show_news(self, display: Display) -> TaskRecord:
        """Show what happened and settled since the last look, in order; the task as it is now.

        The store is read before the output, so the output read includes everything written
        before the phases read; once a phase is terminal the containers have ended, and their
        output is read to its end and shown before that phase, with the events attached until
        the task is finalized."""
        try:
            record = self._store.get(self._task_id)
            phases = self._store.history(self._task_id)[self._phases :]
            events = self._store.events(self._task_id)[self._events :]
        except TaskNotFoundError as error:
            raise BackendError(f"{error}: it was deleted while it was followed") from error
        except TaskStoreUnavailableError as error:
            runner = self._runner or "the executor"
            message = f"{error} (task {self._task_id} goes on with {runner})"
            raise TaskStoreUnavailableError(message) from error
        self._phases += len(phases)
        self._events += len(events)
        if phases:
            self._error_code = phases[-1].error_code
        self._ended = (
            self._ended or record.finalized or any(entry.phase.is_terminal for entry in phases)
        )
        new = bool(phases or events)
        before = self._clock()
        lines = self._logs.rest() if self._ended else self._logs.read(now=new)
        self._timeline.add(phases, events, lines, lines_after=self._output_read_at)
        self._output_read_at = before
        now = self._clock()
        # The terminal phase is shown once the task is finalized: until then the executor may
        # still attach events that happened before it (the event watch lags behind the pod's).
        for item in self._timeline.release(now, everything=record.finalized):
            show(display, item, self._origin, now)
        return record

    def _check_server(self) -> None:
        """:class:`Unreachable` once the task's API server has given no answer for
        ``LOST_SERVER_AFTER``: the executor keeps retrying, but following would only wait."""
        lost = self._logs.unanswered_for()
        if lost is None or lost[0] < LOST_SERVER_AFTER:
            return
        raise Unreachable(
            f"{lost[1]}, for {lost[0].total_seconds():.0f}s; task {self._task_id} goes on with "
            f"{self._runs_it()}, which keeps retrying: podwright logs {self._task_id} -f"
            f"{self._again}"
        )

    def _runs_it(self) -> str:
        """Who runs the task, as the messages name it."""
        return self._runner or f"the executor (pid {self._keeper.pid})"

    def _on_interrupt(self, display: Display, record: TaskRecord) -> int | None:
        """Ask what Ctrl-C meant (on a terminal; elsewhere it aborts): the exit status when this
        command should stop now, else None."""
        self._signals.interrupted = False
        if self._interrupt_detaches:
            return self._detach(display, record)
        if record.abort_requested:  # being aborted already: Ctrl-C stops following
            return self._stop_following(display)
        choice = "abort"
        if sys.stdin.isatty():
            display.pause()
            try:
                choice = click.prompt(
                    "interrupted: abort the task, or detach or continue?",
                    type=click.Choice(["abort", "detach", "continue"]),
                    default="abort",
                    err=True,
                )
            except click.Abort:
                choice = "abort"
            display.resume()
        if choice == "detach":
            return self._detach(display, record)
        if choice == "abort":
            self._store.request_abort(self._task_id, utc_now())
            self._signals.aborting = True
            display.note(
                "interrupted: aborting the task (Ctrl-C again stops following; the executor "
                "finishes the abort)"
            )
        return None

    def _detach(self, display: Display, record: TaskRecord) -> int:
        """Show what was read, leave the task to whoever runs it, and say so."""
        for item in self._timeline.release(self._clock(), everything=True):
            show(display, item, self._origin, self._clock())
        with self._signals.holding():
            self._keeper.keep(self._task_id, record.revision, now=True)
        task_id, again = self._task_id, self._again
        display.note(
            f"detached: task {task_id} goes on with {self._runs_it()}; podwright status "
            f"{task_id}{again}; podwright logs {task_id} -f{again}"
        )
        return ExitCode.OK

    def _stop_following(self, display: Display) -> int:
        display.note(
            f"stopped following; the executor finishes aborting task {self._task_id} "
            f"(podwright status {self._task_id})"
        )
        return ExitCode.ABORTED


def _images(manifests: Sequence[Mapping[str, Any]]) -> list[str]:
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


def _exit_code(phase: Phase, error_code: str | None) -> int:
    """The exit status of a task finalized in ``phase``, its last report's error ``error_code``."""
    if phase is Phase.SUCCESS:
        return ExitCode.OK
    if phase is Phase.ABORTED:
        return ExitCode.ABORTED
    if error_code == API_SERVER_UNREACHABLE:
        return ExitCode.UNREACHABLE
    return ExitCode.TASK_FAILED
