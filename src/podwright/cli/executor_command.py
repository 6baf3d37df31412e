"""``podwright executor``: the long-running reconcile loop over every active task of a backend.

It serves the task store of ``--home`` (or ``$PODWRIGHT_TASK_STORE``) on one backend: bounded
concurrency, per-task backoff, Prometheus metrics with ``/healthz`` and ``/readyz`` on
``--metrics-address``, and a graceful stop on SIGTERM or SIGINT: the round in progress finishes,
every task's last transition is in the store, and the watches and connections close. On the
local backend the tasks' processes cannot outlive the executor, so stopping it aborts the tasks it
runs first (they end Aborted, their processes stopped).

One executor serves a (task store, backend) pair at a time (:mod:`podwright.api.executors`): one
that finds another holding the pair's executor lock says which pid serves and exits at once, with
status 0. ``--until-idle`` exits once no active task of the backend is left, after releasing the
lock and re-reading the store (a task that arrived meanwhile makes it take the lock again and go
on); ``run``, ``abort`` and ``delete`` start their background executors that way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import click

from podwright.adapters.observability import ExecutorMetrics, StatusServer
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.api.backends import (
    LOCAL,
    ClusterAccess,
    LocalBackendBusyError,
    OpenBackend,
    open_backend,
    resolve_backend,
)
from podwright.api.executors import ExecutorSlot, HeldSlot, load_lifecycle_config
from podwright.api.state import open_store, utc_now
from podwright.cli.common import BadInput, Unavailable
from podwright.cli.signals import stopping_on_signals
from podwright.cli.task_options import cluster_options, home_option
from podwright.engine.config import ConfigError, LifecycleConfig, parse_duration
from podwright.engine.event_index import EventIndex
from podwright.engine.executor import (
    Executor,
    ExecutorConfig,
    RoundObserver,
    RoundReport,
    stop_grace,
)
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import TaskStoreError

logger = logging.getLogger("podwright.executor")

_STOP_ABORT_SLACK = timedelta(seconds=10)
"""Beyond the longest time the engine waits for an aborted task's processes to stop (their grace
period, then ``abortMargin``), how long a stopping local executor waits for the tasks it aborted
to be finalized."""


class _Duration(click.ParamType[timedelta]):
    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            duration = parse_duration(value, param.name if param and param.name else "duration")
        except ConfigError as error:
            self.fail(str(error), param, ctx)
        if duration <= timedelta(0):
            self.fail(f"must be positive, got {value!r}", param, ctx)
        return duration


class _Address(click.ParamType[tuple[str, int] | None]):
    name = "host:port"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[str, int] | None:
        if value is None or isinstance(value, tuple):
            return value
        text = str(value)
        if text == "off":
            return None
        host, _, port = text.rpartition(":")
        if not port.isdigit() or not 0 <= int(port) <= 65535:
            self.fail(f"expected HOST:PORT (port 0-65535) or 'off', got {text!r}", param, ctx)
        return host.strip("[]") or "0.0.0.0", int(port)


DURATION = _Duration()
ADDRESS = _Address()


lifecycle_option = click.option(
    "--lifecycle-config",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="The lifecycle engine's settings (YAML: injectFinalizer, deleteResourceOnFinalize, "
    "backoffs...); default: the documented defaults, with podwright's finalizer.",
)


F = TypeVar("F", bound=Callable[..., object])


def loop_options(command: F) -> F:
    """``--concurrency``, ``--round-interval`` and ``--metrics-address``: how a reconcile loop
    (the executor's, the operator's) is paced and watched."""
    command = click.option(
        "--metrics-address",
        type=ADDRESS,
        default="127.0.0.1:9464",
        show_default=True,
        help="Where /metrics, /healthz and /readyz are served; 'off' for nowhere.",
    )(command)
    command = click.option(
        "--round-interval",
        type=DURATION,
        default="1s",
        show_default=True,
        help="How often each active task is looked at (a Go duration: 500ms, 2s, 1m).",
    )(command)
    return click.option(
        "--concurrency",
        type=click.IntRange(1, 1024),
        default=16,
        show_default=True,
        help="Tasks reconciled at once.",
    )(command)


@dataclass(frozen=True)
class LoopSettings:
    concurrency: int
    round_interval: timedelta


def make_executor(
    store: SQLiteTaskStore,
    backend: OpenBackend,
    settings: LoopSettings,
    lifecycle: LifecycleConfig,
    observer: RoundObserver | None = None,
) -> Executor:
    """The reconcile loop of ``backend``'s tasks in ``store``."""
    return Executor(
        store,
        backend.port,
        ExecutorConfig(
            backend=backend.name,
            concurrency=settings.concurrency,
            round_interval=settings.round_interval,
        ),
        lifecycle,
        clock=utc_now,
        sleep=time.sleep,
        events=backend.events,
        observer=observer,
    )


@click.command("executor")
@cluster_options
@click.option(
    "--namespace",
    default=None,
    help="Watch only this namespace (default: every namespace; needs cluster-wide list/watch).",
)
@loop_options
@click.option("--until-idle", is_flag=True, help="Exit once no active task of the backend is left.")
@lifecycle_option
@home_option
def executor_command(
    *,
    backend: str | None,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    concurrency: int,
    round_interval: timedelta,
    metrics_address: tuple[str, int] | None,
    until_idle: bool,
    lifecycle_config: str | None,
    home: str,
) -> None:
    """Run every active task of a backend in the task store until stopped (SIGTERM, Ctrl-C).

    One executor serves a task store's backend at a time: when another does, this one says which
    and exits (status 0).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    access = ClusterAccess(kubeconfig, context)
    name = resolve_backend(backend, access)
    lifecycle = load_lifecycle_config(lifecycle_config)
    settings = LoopSettings(concurrency, round_interval)
    store = open_store(home)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(store.close)
        slot = ExecutorSlot(store.path, name)
        held: HeldSlot | None = slot.take()
        if held is None:
            logger.info(
                "the %s tasks of %s are served by the executor with pid %s: nothing to do",
                name,
                store.path,
                slot.holder() or "unknown",
            )
            return
        cleanup.callback(lambda: held.release() if held is not None else None)
        metrics = ExecutorMetrics(name)
        serving: list[OpenBackend] = []
        if metrics_address is not None:
            server = status_server(
                metrics,
                metrics_address,
                round_interval,
                lambda: bool(serving) and serving[0].synced(),
            )
            cleanup.callback(server.stop)
            host, port = server.address
            logger.info(
                "metrics on http://%s:%d/metrics, health on /healthz and /readyz", host, port
            )
        stop = threading.Event()
        with stopping_on_signals(stop, "stopping after this round"):
            logger.info(
                "executor for the %s backend of %s started (pid %d)", name, store.path, os.getpid()
            )
            while True:
                opened = _open(
                    name,
                    Path(home),
                    access,
                    metrics,
                    namespace=namespace,
                    concurrency=concurrency,
                    events=EventIndex(
                        ttl=lifecycle.event_ttl, max_per_object=lifecycle.events_per_object
                    ),
                )
                serving[:] = [opened]
                try:
                    _serve(
                        store,
                        opened,
                        settings=settings,
                        lifecycle=lifecycle,
                        metrics=metrics,
                        stop=stop,
                        until_idle=until_idle,
                    )
                finally:
                    serving.clear()
                    opened.close()
                if stop.is_set() or not until_idle:
                    break
                held.release()
                held = None
                if not _has_active_tasks(store, name):
                    logger.info("no active %s task left: exiting", name)
                    break
                held = slot.take()
                if held is None:
                    logger.info(
                        "a new %s task is served by the executor with pid %s: exiting",
                        name,
                        slot.holder() or "unknown",
                    )
                    break
                logger.info("a new %s task arrived: serving again", name)
        logger.info("executor stopped")


def _open(
    name: str,
    home: Path,
    access: ClusterAccess,
    metrics: ExecutorMetrics,
    *,
    namespace: str | None,
    concurrency: int,
    events: EventIndex,
) -> OpenBackend:
    try:
        return open_backend(
            name,
            home=home,
            access=access,
            namespace=namespace,
            observer=metrics.api_request,
            concurrency=concurrency,
            events=events,
        )
    except LocalBackendBusyError as error:
        raise Unavailable(str(error)) from error


def _serve(
    store: SQLiteTaskStore,
    opened: OpenBackend,
    *,
    settings: LoopSettings,
    lifecycle: LifecycleConfig,
    metrics: ExecutorMetrics,
    stop: threading.Event,
    until_idle: bool,
) -> None:
    """Reconcile until stopped, or (``until_idle``) until no active task of the backend is left.

    Stopped, a local executor first aborts its tasks (their processes cannot outlive it); idle,
    it touches nothing: a task submitted since its last round is for whoever serves next."""
    with make_executor(store, opened, settings, lifecycle, observer=_RoundLog(metrics)) as executor:
        executor.run(stop, until_idle=until_idle)
        if opened.name == LOCAL and stop.is_set():
            _abort_local_tasks(executor, store, lifecycle)


def _has_active_tasks(store: SQLiteTaskStore, name: str) -> bool:
    """Whether the store holds an active task of the backend (when it cannot tell: yes)."""
    try:
        return any(record.task.backend == name for record in store.list_tasks(active_only=True))
    except TaskStoreError as error:
        logger.error("could not read the task store: %s", error)
        return True


def status_server(
    metrics: ExecutorMetrics,
    address: tuple[str, int],
    round_interval: timedelta,
    synced: Callable[[], bool],
) -> StatusServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` of a reconcile loop, started (an address that
    cannot be listened on is the option's bad input)."""
    # A round over thousands of tasks may take seconds; a minute of silence is a stuck loop.
    silence = max(60.0, 10 * round_interval.total_seconds())
    try:
        server = StatusServer(
            metrics,
            host=address[0],
            port=address[1],
            max_silence_seconds=silence,
            watches_synced=synced,
        )
    except OSError as error:
        raise BadInput(
            f"--metrics-address {address[0]}:{address[1]}: cannot listen: {error.strerror}"
        ) from error
    return server.start()


class _RoundLog:
    """Counts every round in the metrics, and logs those that did something."""

    def __init__(self, metrics: ExecutorMetrics) -> None:
        self._metrics = metrics

    def round_finished(self, report: RoundReport) -> None:
        self._metrics.round_finished(report)
        if report.advanced or report.finalized or report.errors:
            logger.info(
                "round: %d due, %d advanced, %d finalized, %d errors, %.3fs",
                report.due,
                report.advanced,
                report.finalized,
                report.errors,
                report.seconds,
            )


def _abort_local_tasks(
    executor: Executor, store: SQLiteTaskStore, lifecycle: LifecycleConfig
) -> None:
    """Abort the local tasks still running, and finalize them, before their processes go: as
    long as their grace periods let them stop (then the backend's close kills what is left)."""
    try:
        active = [
            record
            for record in store.list_tasks(active_only=True)
            if record.task.backend == LOCAL and not record.phase.is_terminal
        ]
        for record in active:
            store.request_abort(record.task_id, utc_now())
    except TaskStoreError as error:
        logger.error("could not abort the local tasks: %s", error)
        return
    if not active:
        return
    logger.info("aborting %d local task(s): their processes stop with the executor", len(active))
    plugins = default_plugins()
    graces = [stop_grace(record, plugins) for record in active]
    wait = max(graces) + lifecycle.abort_margin + executor.config.events_settle + _STOP_ABORT_SLACK
    deadline = time.monotonic() + wait.total_seconds()
    aborted = {record.task_id for record in active}
    while time.monotonic() < deadline:
        executor.run_round()
        try:
            still = {record.task_id for record in store.list_tasks(active_only=True)} & aborted
        except TaskStoreError as error:
            logger.error("could not read the local tasks being aborted: %s", error)
            return
        if not still:
            return
        time.sleep(min(0.2, executor.seconds_until_due()))
