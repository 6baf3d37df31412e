"""The ``podwright`` command line.

Each stage of podwright is a command of its own, so a user can stop at any stage and look at its
output. Bad input of any kind (an unreadable or unparsable file, something that is not a pod
spec, grants that contradict each other or the spec) ends the command with exit code 2 and one
line on standard error that names the file, the line, the field and the problem.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from podwright import __version__
from podwright.adapters.documents import STDIN, DocumentError, dump_yaml, read_document
from podwright.cli.common import BadInput, ExitCode, point_output_at_devnull
from podwright.cli.executor_command import executor_command
from podwright.cli.fuse_proxy_commands import fuse_proxy_group
from podwright.cli.policy_commands import policy_group
from podwright.cli.priority_class_command import priority_classes_command
from podwright.cli.render_command import render_command
from podwright.cli.run_commands import run_command
from podwright.cli.task_commands import (
    abort_command,
    delete_command,
    list_command,
    logs_command,
    status_command,
)
from podwright.core.fuse_proxy.manifests import FuseProxySetup
from podwright.core.pod_input import PodInputError, pod_input_from_data
from podwright.core.pod_template import (
    PRIMARY_CONTAINER_ANNOTATION,
    PodTemplate,
    PodTemplateError,
)


class PodwrightGroup(click.Group):
    """A command group whose errors are one line, ``podwright: error: ...``, on standard error."""

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


def _fail(message: str, code: int) -> NoReturn:
    for line in message.splitlines():
        click.echo(f"podwright: error: {line}", err=True)
    sys.exit(code)


@click.group(
    name="podwright", cls=PodwrightGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(__version__, "-V", "--version", prog_name="podwright")
def cli() -> None:
    """Run AI workloads on Kubernetes: policies, least-privilege pods, a lifecycle engine."""


@cli.command("pod")
@click.argument("source", metavar="[FILE]", required=False)
@click.option(
    "--allow-fuse",
    is_flag=True,
    help="Grant FUSE through the cluster's FUSE device plugin: the smarter-devices/fuse "
    "resource and SYS_ADMIN, no privilege.",
)
@click.option(
    "--allow-fuse-privileged",
    is_flag=True,
    help="Grant FUSE with a privileged container and the host's /dev/fuse, for clusters "
    "without the FUSE device plugin.",
)
@click.option(
    "--allow-fuse-proxy",
    metavar="SHIM_IMAGE",
    help="Grant FUSE through podwright's per-node FUSE proxy: no privilege, no capability, no "
    "/dev/fuse; SHIM_IMAGE (with podwright) installs the fusermount shim.",
)
@click.option(
    "--allow-nested-sandboxing",
    is_flag=True,
    help="Grant what nested sandboxes (bubblewrap) need: SYS_ADMIN, "
    "allowPrivilegeEscalation: false, AppArmor unconfined.",
)
@click.option(
    "--termination-grace-period",
    type=click.IntRange(min=0),
    metavar="SECONDS",
    help="Set terminationGracePeriodSeconds.",
)
@click.option(
    "--primary-container",
    metavar="NAME",
    help="The container the grants apply to. Default: the one the "
    f"{PRIMARY_CONTAINER_ANNOTATION} annotation names, else 'primary', else the only container.",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="Output format.",
)
def pod_command(
    *,
    source: str | None,
    allow_fuse: bool,
    allow_fuse_privileged: bool,
    allow_fuse_proxy: str | None,
    allow_nested_sandboxing: bool,
    termination_grace_period: int | None,
    primary_container: str | None,
    output: str,
) -> None:
    """Apply grants to a pod spec and print the resulting Pod manifest.

    FILE holds a pod spec, or a Pod manifest (apiVersion: v1, kind: Pod), as YAML or JSON;
    '-' reads standard input, as does no FILE when input is piped in.
    """
    chosen = [
        flag
        for flag, given in (
            ("--allow-fuse", allow_fuse),
            ("--allow-fuse-privileged", allow_fuse_privileged),
            ("--allow-fuse-proxy", allow_fuse_proxy is not None),
        )
        if given
    ]
    if len(chosen) > 1:
        raise click.UsageError(
            f"{' and '.join(chosen)} are different ways to grant FUSE; choose one"
        )
    if allow_fuse_privileged and allow_nested_sandboxing:
        raise click.UsageError(
            "--allow-fuse-privileged cannot be combined with --allow-nested-sandboxing: "
            "Kubernetes rejects a privileged container with allowPrivilegeEscalation: false "
            "(--allow-fuse composes with it)"
        )
    try:
        proxy_setup = None if allow_fuse_proxy is None else FuseProxySetup(allow_fuse_proxy)
    except ValueError as error:
        raise BadInput(f"--allow-fuse-proxy: {error}") from error
    stdin = sys.stdin
    if source is None:
        if stdin.isatty():
            raise click.UsageError("no FILE given and standard input is a terminal")
        source = STDIN
    try:
        document = read_document(source, stdin)
    except DocumentError as error:
        raise BadInput(str(error)) from error
    try:
        pod = pod_input_from_data(document.data)
    except PodInputError as error:
        first = error.problems[0]
        raise BadInput(f"{document.locate(first.path)}: {error}") from error
    try:
        template = PodTemplate.from_spec(
            pod.spec,
            primary_container_name=primary_container
            or (pod.annotations or {}).get(PRIMARY_CONTAINER_ANNOTATION),
            labels=pod.labels,
            annotations=pod.annotations,
        )
        if allow_fuse or allow_fuse_privileged:
            template = template.allow_fuse(privileged=allow_fuse_privileged)
        if proxy_setup is not None:
            template = template.allow_fuse_via_proxy(proxy_setup)
        if allow_nested_sandboxing:
            template = template.allow_nested_sandboxing()
        if termination_grace_period is not None:
            template = template.with_termination_grace_period(termination_grace_period)
        manifest = template.to_k8s_pod(
            name=pod.name, generate_name=pod.generate_name, namespace=pod.namespace
        )
    except PodTemplateError as error:
        raise BadInput(f"{document.source}: {error}") from error
    if output == "json":
        click.echo(json.dumps(manifest, indent=2))
    else:
        click.echo(dump_yaml(manifest), nl=False)


cli.add_command(policy_group)
cli.add_command(render_command)
cli.add_command(priority_classes_command)
cli.add_command(fuse_proxy_group)
cli.add_command(executor_command)
for command in (
    run_command,
    list_command,
    status_command,
    logs_command,
    abort_command,
    delete_command,
):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``podwright`` console entry point."""
    cli.main(argv, prog_name="podwright")
