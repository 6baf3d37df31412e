"""What every podwright command shares: exit codes and the one-line errors that end a command."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])


class ExitCode(IntEnum):
    """What the process exit status means; scripts may rely on these."""

    OK = 0
    VIOLATIONS = 1
    """The input is valid but breaks enforced policy rules."""
    BAD_INPUT = 2
    """Unreadable or invalid input, or a usage error."""
    TASK_FAILED = 3
    """The task ran and failed (``podwright run``)."""
    ABORTED = 4
    """The task was aborted (``podwright run``; also when a second Ctrl-C stops following it while
    it is being aborted: the executor finishes the abort)."""
    UNAVAILABLE = 5
    """podwright could not do its part, though the input was good: the task store cannot be opened,
    read or written; no executor could be started, or kept running, for the task's backend; a task
    could not be removed because its backend cannot be reached (``delete`` without ``--force``)
    or its abort did not end in time. A task already recorded is kept."""
    UNREACHABLE = 6
    """The Kubernetes API server gave no answer, after bounded retries with backoff: ``run``
    before it recorded anything, a task whose launch never reached the server
    (``ApiServerUnreachable``), or ``run`` lost the server while following its task (the task
    goes on with the executor, which keeps retrying). The message names the server and the
    cause."""
    HANGUP = 128 + 1
    """``run`` got SIGHUP (its terminal closed) and stopped following; the task goes on with the
    executor (128 + the signal's number, as a shell reports a process the signal killed)."""
    INTERRUPTED = 128 + 2
    """Ctrl-C before the command had done anything that lasts (before ``run`` recorded its
    task): ``podwright: error: aborted``."""
    OUTPUT_CLOSED = 128 + 13
    """The standard output was closed (``podwright run ... | head``: EPIPE); the command stopped
    quietly, and a task goes on with the executor. As a process killed by SIGPIPE, which is what
    ``kubectl logs -f | head`` reports."""
    TERMINATED = 128 + 15
    """``run`` got SIGTERM and stopped following; the task goes on with the executor."""


EXIT_STATUSES: dict[ExitCode, str] = {
    ExitCode.OK: "done (run: the task succeeded, or was left to run with --detach)",
    ExitCode.VIOLATIONS: "the input breaks enforced policy rules (each violation listed)",
    ExitCode.BAD_INPUT: "bad input or usage (the argument, or file:line:column, named)",
    ExitCode.TASK_FAILED: "the task ran and failed (run)",
    ExitCode.ABORTED: "the task was aborted (run)",
    ExitCode.UNAVAILABLE: "podwright could not do its part (task store, executor, backend)",
    ExitCode.UNREACHABLE: "the Kubernetes API server gave no answer, after retries",
    ExitCode.HANGUP: "run lost its terminal (SIGHUP); the task goes on",
    ExitCode.INTERRUPTED: "Ctrl-C before anything that lasts was done",
    ExitCode.OUTPUT_CLOSED: "the standard output was closed (| head); a task goes on",
    ExitCode.TERMINATED: "run got SIGTERM; the task goes on",
}
"""Every exit status, in one line each: ``podwright --help`` and the README's table show these."""


def exit_status_help() -> str:
    """The exit statuses as the top-level help's epilog (``\b``: click keeps the lines)."""
    lines = [f"  {code.value:>3}  {meaning}" for code, meaning in EXIT_STATUSES.items()]
    return "\b\nExit statuses:\n" + "\n".join(lines)


class BadInput(click.ClickException):
    """Input the command cannot use; reported on one line, exit status 2."""

    exit_code = ExitCode.BAD_INPUT


class Violations(click.ClickException):
    """The input breaks enforced policy rules; exit status 1."""

    exit_code = ExitCode.VIOLATIONS


class Unavailable(click.ClickException):
    """Something podwright needs is unavailable (the store, an executor); exit status 5."""

    exit_code = ExitCode.UNAVAILABLE


class Unreachable(click.ClickException):
    """The Kubernetes API server gives no answer; exit status 6."""

    exit_code = ExitCode.UNREACHABLE


def point_output_at_devnull() -> None:
    """The standard output cannot be written any more (closed by its reader, or its terminal
    hung up): point it at /dev/null, as Python's documentation advises, so that flushing it at
    exit does not fail again ("Exception ignored ... BrokenPipeError")."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def output_option(help_text: str, formats: Sequence[str] = ("yaml", "json")) -> Callable[[F], F]:
    """``-o/--output``, one of ``formats``, the first by default: YAML or JSON for the commands
    that print manifests; a table first for those that print tasks."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(formats),
        default=formats[0],
        show_default=True,
        help=help_text,
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned with two spaces between them, as kubectl prints them."""
    widths = [
        max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)
    ]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return "\n".join(lines)


def scalar_text(value: object) -> str:
    """A value in a table cell: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def kubeconfig_options(command: F) -> F:
    """``--kubeconfig`` and ``--context``: how a command reaches a cluster."""
    command = click.option(
        "--context", default=None, help="The kubeconfig context to use (default: its current one)."
    )(command)
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False),
        default=None,
        help="The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config; in a pod, its "
        "service account).",
    )(command)


def cluster_access_options(command: F) -> F:
    """``--kubeconfig``, ``--context`` and ``--cluster-name``: the commands that read or write
    podwright's resources in a cluster."""
    command = click.option(
        "--cluster-name",
        default=None,
        help="The cluster's name in the scope tree, shown in the scopes of rules and issues "
        "(default: the kubeconfig's name for the cluster of its context).",
    )(command)
    return kubeconfig_options(command)


SINGLE_WEBHOOK_HELP = (
    "Judge Workloads in the mutating webhook's call (reinvocationPolicy IfNeeded), with no "
    "validating webhook for them: one call per Workload write instead of two. Only where no "
    "other mutating webhook changes Workloads: one that does after podwright's is checked only "
    "as far as the API server reinvokes podwright's."
)
"""``--single-webhook`` (``podwright webhook``, ``operator`` and ``install``)."""
