"""The ``podwright`` command line.

Each stage of podwright is a command of its own, so a user can stop at any stage and look at its
output. Bad input of any kind (an unreadable or unparsable file, something that is not a pod
spec, grants that contradict each other or the spec) ends the command with exit code 2 and one
line on standard error that names the file, the line, the field and the problem.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from podwright._version import __version__
from podwright.api.errors import (
    AdmissionDeniedError,
    BackendError,
    BackendUnreachableError,
    PodwrightError,
    PolicyViolationError,
)
from podwright.cli.common import (
    BadInput,
    ExitCode,
    Unavailable,
    Unreachable,
    Violations,
    exit_status_help,
    point_output_at_devnull,
)

COMMANDS: dict[str, tuple[str, str, str]] = {
    "abort": (
        "podwright.cli.task_commands",
        "abort_command",
        "Abort a task: its executor (started when none runs) stops its resources and ends it "
        "Aborted.",
    ),
    "convert": (
        "podwright.cli.convert_command",
        "convert_command",
        "Print workload and policy files as the objects a cluster serves, or rewrite them with "
        "--in-place.",
    ),
    "crds": (
        "podwright.cli.crds_command",
        "crds_command",
        "Print the CustomResourceDefinitions of podwright.dev.",
    ),
    "delete": (
        "podwright.cli.task_commands",
        "delete_command",
        "Delete tasks from the store: an active one is aborted first; its history, events and "
        "local log files go with it.",
    ),
    "console": (
        "podwright.cli.console_command",
        "console_command",
        "Serve the web console: the workloads, updated live; each workload's timeline, events "
        "and output; a submission form built from the policies; the policies at work.",
    ),
    "executor": (
        "podwright.cli.executor_command",
        "executor_command",
        "Run every active task of a backend in the task store until stopped (SIGTERM, Ctrl-C).",
    ),
    "fuse-proxy": (
        "podwright.cli.fuse_proxy_commands",
        "fuse_proxy_group",
        "FUSE mounts for unprivileged containers, through a privileged per-node daemon.",
    ),
    "install": (
        "podwright.cli.install_command",
        "install_command",
        "Install podwright in a cluster and wait until its operator is ready.",
    ),
    "list": (
        "podwright.cli.task_commands",
        "list_command",
        "List the tasks in the store, oldest first.",
    ),
    "logs": (
        "podwright.cli.task_commands",
        "logs_command",
        "Print a task's output: every container of a local task's pods, in order; the primary "
        "container of a cluster task's primary pod.",
    ),
    "operator": (
        "podwright.cli.operator_command",
        "operator_command",
        "Run the lifecycle engine in the cluster: every Workload to its end, one leader at a time.",
    ),
    "pod": (
        "podwright.cli.pod_command",
        "pod_command",
        "Apply grants to a pod spec and print the resulting Pod manifest.",
    ),
    "policy": (
        "podwright.cli.policy_commands",
        "policy_group",
        "Workload policies: defaults, rules and imposed assets per scope and workload type.",
    ),
    "priority-classes": (
        "podwright.cli.priority_class_command",
        "priority_classes_command",
        "Print, or create with --apply, the PriorityClasses of the profile's priority levels.",
    ),
    "render": (
        "podwright.cli.render_command",
        "render_command",
        "Render a workload into the Kubernetes manifests a platform applies.",
    ),
    "run": (
        "podwright.cli.run_commands",
        "run_command",
        "Run a workload: policies, rendering, then the task until it ends (or --detach).",
    ),
    "status": (
        "podwright.cli.task_commands",
        "status_command",
        "Show a task (default: the latest): its phase, its phase history and its events.",
    ),
    "uninstall": (
        "podwright.cli.install_command",
        "uninstall_command",
        "Remove podwright from a cluster, leaving no Workload or resource held by its finalizers.",
    ),
    "webhook": (
        "podwright.cli.webhook_command",
        "webhook_command",
        "Serve the admission webhooks of Workloads and policies, and point the cluster at them.",
    ),
}
"""Every command: its module, the command object's name there, and its one-line help.

A command's module is imported only when that command runs (or its own help is asked for), so
``podwright --help`` and ``--version`` load none of them, and ``policy evaluate`` none of the
Kubernetes client. The one-line help is what ``podwright --help`` lists; a test keeps it equal
to the command's own."""


class PodwrightGroup(click.Group):
    """The ``podwright`` group: commands loaded on first use (:data:`COMMANDS`), and errors as
    one line, ``podwright: error: ...``, on standard error."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _help = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, from :data:`COMMANDS`, without importing any command."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            # click shortens the text as it would the command's own help
            (name, click.Command(name, help=help_text).get_short_help_str(limit))
            for name, (_module, _attribute, help_text) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any
    ) -> NoReturn:
        try:
            code = super().main(args, prog_name or "podwright", standalone_mode=False, **extra)
        except click.UsageError as error:
            command = error.ctx.command_path if error.ctx else "podwright"
            _fail(f"{error.format_message()} (see '{command} --help')", error.exit_code)
        except click.ClickException as error:
            _fail(error.format_message(), error.exit_code)
        except click.Abort:
            _fail("aborted", ExitCode.INTERRUPTED)
        sys.exit(code if isinstance(code, int) else ExitCode.OK)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            point_output_at_devnull()
            raise click.exceptions.Exit(ExitCode.OUTPUT_CLOSED) from None
        except PodwrightError as error:
            raise _as_click_exception(error) from error


def _as_click_exception(error: PodwrightError) -> click.ClickException:
    """The exit status of each of the public API's exceptions (see podwright.api.errors)."""
    if isinstance(error, PolicyViolationError | AdmissionDeniedError):
        return Violations(str(error))
    if isinstance(error, BackendUnreachableError):
        return Unreachable(str(error))
    if isinstance(error, BackendError):
        return Unavailable(str(error))
    return BadInput(str(error))


def _fail(message: str, code: int) -> NoReturn:
    for line in message.splitlines():
        click.echo(f"podwright: error: {line}", err=True)
    sys.exit(code)


@click.group(
    name="podwright",
    cls=PodwrightGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=exit_status_help(),
)
@click.version_option(__version__, "-V", "--version", prog_name="podwright")
def cli() -> None:
    """Run AI workloads on Kubernetes: policies, least-privilege pods, a lifecycle engine."""


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``podwright`` console entry point."""
    cli.main(argv, prog_name="podwright")
