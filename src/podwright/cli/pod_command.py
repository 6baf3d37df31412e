"""``podwright pod``: grants applied to a pod spec, and the Pod manifest printed.

Reads a pod spec, or a Pod manifest, as YAML or JSON from a file or standard input, applies the
grants asked for (FUSE through the device plugin, a privileged container or the FUSE proxy;
nested sandboxing; a termination grace period) with :class:`~podwright.core.pod_template.
PodTemplate`, and prints the Pod manifest.
"""

from __future__ import annotations

import json
import sys

import click

from podwright.adapters.documents import STDIN, DocumentError, dump_yaml, read_document
from podwright.cli.common import BadInput, output_option
from podwright.core.fuse_proxy.manifests import FuseProxySetup
from podwright.core.pod_input import PodInputError, pod_input_from_data
from podwright.core.pod_template import (
    PRIMARY_CONTAINER_ANNOTATION,
    PodTemplate,
    PodTemplateError,
)


@click.command("pod")
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
@output_option("Output format.")
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
