"""``podwright render``: an effective workload becomes the Kubernetes manifests to apply.

With ``--policy`` files the workload is first evaluated (violations exit with status 1, as in
``podwright policy evaluate``); without, the submission is rendered as written, after the same
check of the workload as it will run that evaluation makes (a limit below its request is bad
input, at its line in the file). The cluster
profile (``--profile``) says how this cluster does what the workload leaves open; without one,
the safe defaults apply. A field the profile cannot honour is bad input (exit status 2), named
with where its value came from. ``podwright run`` shares these steps (:func:`prepare_workload`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from podwright import api
from podwright.api import Prepared, Scope, Workload
from podwright.api.pipeline import issue_line
from podwright.cli.common import ExitCode, output_option
from podwright.cli.inputs import (
    NAMESPACE_LABEL_OPTIONS,
    SCOPE,
    cluster_name_option,
    described_namespaces,
    load_policies,
    load_workloads,
    say_findings,
    workload_options,
)


@dataclasses.dataclass(frozen=True)
class Preparation:
    """What a command that renders a workload was given: the workload and how to judge it."""

    workload_file: str
    workload_type: str | None
    policy_files: Sequence[str]
    scope: Scope | None
    assets_file: str | None
    profile_file: str | None
    name: str | None
    cluster_name: str | None
    department: str | None
    """The department of the namespace it runs in (its Namespace object not at hand)."""
    project: str | None
    """The project of that namespace, when not the one of its name."""


def preparation_options(*, preview: bool) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """The options of :func:`prepare_workload`, given to the command as one ``preparation``;
    ``--scope`` only where a scope is previewed (``render``): a submission (``run``) is judged
    in the scope of the namespace it runs in, which its submitter does not choose."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def with_preparation(**given: Any) -> None:
            fields = {
                field.name: given.pop(field.name, None) for field in dataclasses.fields(Preparation)
            }
            command(preparation=Preparation(**fields), **given)

        decorated = with_preparation
        for option in reversed(_preparation_options(preview=preview)):
            decorated = option(decorated)
        return decorated

    return decorate


def _preparation_options(
    *, preview: bool
) -> list[Callable[[Callable[..., None]], Callable[..., None]]]:
    scope = click.option(
        "--scope",
        type=SCOPE,
        help="Preview the workload in this scope (for administrators; a submission is judged "
        "in its namespace's project). Default: the namespace's scope (--namespace, else the "
        "file's metadata.namespace), else the policies' deepest.",
    )
    return [
        workload_options,
        click.option(
            "--policy",
            "policy_files",
            metavar="FILE",
            multiple=True,
            help="A policy to evaluate the workload under (repeatable; none: take it as written).",
        ),
        *([scope] if preview else []),
        cluster_name_option,
        *NAMESPACE_LABEL_OPTIONS,
        click.option("--assets", "assets_file", metavar="FILE", help="The asset catalogue."),
        click.option(
            "--profile",
            "profile_file",
            metavar="FILE",
            help="The cluster profile (default: safe defaults).",
        ),
        click.option("--name", help="The workload's name (default: the file's metadata.name)."),
    ]


def prepare_workload(
    preparation: Preparation,
    namespace: str | None,
    workload: Workload,
    *,
    namespace_object: Mapping[str, object] | None = None,
) -> Prepared:
    """Evaluate ``workload`` (violations end the command with status 1) and render it; bad
    input raises. ``namespace`` is where it runs: its scope, and its manifests' namespace,
    whose project and department ``--department`` and ``--project`` say, else its
    ``namespace_object`` (read from a cluster), else its object among the policy files."""
    assets = api.load_assets(preparation.assets_file) if preparation.assets_file else None
    evaluation = None
    described = described_namespaces(
        namespace or workload.namespace, preparation.department, preparation.project
    )
    if preparation.policy_files:
        policies = load_policies(
            preparation.policy_files,
            workload_type=workload.type.value,
            scope=preparation.scope,
            cluster=preparation.cluster_name,
            namespaces=described
            or ({namespace: namespace_object} if namespace and namespace_object else None),
            namespace=namespace,
        )
        evaluation = api.evaluate(
            workload,
            policies,
            scope=preparation.scope,
            namespace=namespace,
            cluster=preparation.cluster_name,
            assets=assets,
        )
        say_findings(evaluation)
        if not evaluation.accepted:
            for violation in evaluation.violations:
                click.echo(f"podwright: violation: {issue_line(violation)}", err=True)
            count = len(evaluation.violations)
            click.echo(
                f"podwright: {count} violation{'s' if count > 1 else ''}: nothing rendered",
                err=True,
            )
            sys.exit(ExitCode.VIOLATIONS)
    return api.prepare(
        evaluation or workload,
        namespace=None if evaluation else namespace,
        assets=assets,
        profile=preparation.profile_file,
        name=preparation.name,
    )


@click.command("render")
@preparation_options(preview=True)
@click.option(
    "--namespace",
    help="The namespace of every manifest, whose project's policies judge the workload "
    "(default: the file's metadata.namespace; none: none set).",
)
@output_option("YAML documents, or a JSON v1 List.")
def render_command(*, preparation: Preparation, namespace: str | None, output: str) -> None:
    """Render a workload into the Kubernetes manifests a platform applies.

    workspace: a Pod; training: a batch/v1 Job; distributed: the Kubeflow job of its framework
    (PyTorchJob, MPIJob, TFJob, XGBoostJob, JAXJob); inference: a Knative Service. New claims
    and Services go with them. A file of several workloads (or a directory) renders each, in
    order.
    """
    workloads = load_workloads(preparation.workload_file, preparation.workload_type)
    if preparation.name is not None and len(workloads) > 1:
        raise click.UsageError(
            f"--name names one workload, and {preparation.workload_file} holds {len(workloads)}"
        )
    manifests = [
        manifest
        for workload in workloads
        for manifest in prepare_workload(preparation, namespace, workload).rendering.manifests
    ]
    if output == "json":
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests}, indent=2))
    else:
        click.echo("---\n".join(api.to_yaml(manifest) for manifest in manifests), nl=False)
