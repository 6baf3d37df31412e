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

from podwright.adapters.documents import Document, dump_yaml
from podwright.cli.common import BadInput, ExitCode, output_option
from podwright.cli.inputs import (
    SCOPE,
    evaluate_workload,
    guard,
    load_catalogue,
    load_profile,
    read_submission,
    violation_line,
    workload_options,
)
from podwright.core.assets import EMPTY_CATALOGUE
from podwright.core.policies import Scope
from podwright.core.render import ClusterProfile, RenderError, Rendering
from podwright.core.render import render as render_workload
from podwright.core.workloads import Submission, check_runnable


@dataclasses.dataclass(frozen=True)
class PreparedWorkload:
    """A workload through its policies and rendered: what ``render`` prints and ``run`` runs."""

    name: str
    submission: Submission
    workload: Mapping[str, object]
    sources: Mapping[str, str]
    """Where each effective value came from, by dotted path (empty without policies)."""
    values: Mapping[str, object]
    """Each effective leaf value, by the same paths (empty without policies)."""
    profile: ClusterProfile
    rendering: Rendering


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


def preparation_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options of :func:`prepare_workload`, given to ``command`` as one ``preparation``."""

    @functools.wraps(command)
    def with_preparation(**given: Any) -> None:
        fields = {field.name: given.pop(field.name) for field in dataclasses.fields(Preparation)}
        command(preparation=Preparation(**fields), **given)

    options: list[Callable[[Callable[..., None]], Callable[..., None]]] = [
        workload_options,
        click.option(
            "--policy",
            "policy_files",
            metavar="FILE",
            multiple=True,
            help="A policy to evaluate the workload under (repeatable; none: take it as written).",
        ),
        click.option(
            "--scope", type=SCOPE, help="The workload's scope (default: the policies' deepest)."
        ),
        click.option("--assets", "assets_file", metavar="FILE", help="The asset catalogue."),
        click.option(
            "--profile",
            "profile_file",
            metavar="FILE",
            help="The cluster profile (default: safe defaults).",
        ),
        click.option("--name", help="The workload's name (default: the file's 'name')."),
    ]
    decorated = with_preparation
    for option in reversed(options):
        decorated = option(decorated)
    return decorated


def prepare_workload(preparation: Preparation, namespace: str | None) -> PreparedWorkload:
    """Evaluate (violations end the command with status 1) and render; bad input raises."""
    workload_file, workload_type = preparation.workload_file, preparation.workload_type
    assets_file, policy_files = preparation.assets_file, preparation.policy_files
    documents: dict[str, Document] = {}
    sources: Mapping[str, str] = {}
    values: Mapping[str, object] = {}
    if policy_files:
        evaluated = evaluate_workload(
            policy_files=policy_files,
            workload_file=workload_file,
            workload_type=workload_type,
            scope=preparation.scope,
            assets_file=assets_file,
        )
        evaluation = evaluated.evaluation
        if not evaluation.accepted:
            for violation in evaluation.violations:
                click.echo(f"podwright: violation: {violation_line(violation)}", err=True)
            count = len(evaluation.violations)
            click.echo(
                f"podwright: {count} violation{'s' if count > 1 else ''}: nothing rendered",
                err=True,
            )
            sys.exit(ExitCode.VIOLATIONS)
        submission, workload, sources, values = (
            evaluated.submission,
            evaluation.workload,
            evaluation.sources,
            evaluation.values,
        )
    else:
        document, submission = read_submission(workload_file, workload_type, documents)
        workload = submission.spec
        guard(
            lambda: check_runnable(submission.workload_type, workload, submission.spec_path),
            documents,
            default_source=document.source,
        )
    catalogue = load_catalogue(assets_file, documents) if assets_file else EMPTY_CATALOGUE
    profile = load_profile(preparation.profile_file, documents)
    name = preparation.name or submission.name
    if not name:
        raise BadInput("the workload has no name: give one in its file ('name:') or with --name")
    try:
        rendering = guard(
            lambda: render_workload(
                submission.workload_type,
                name,
                workload,
                profile=profile,
                catalogue=catalogue,
                namespace=namespace,
            ),
            documents,
        )
    except RenderError as error:
        lines = [
            f"{problem} (value from {sources[problem.field]})"
            if problem.field in sources and sources[problem.field] != "submission"
            else str(problem)
            for problem in error.problems
        ]
        raise BadInput(
            f"cannot render on cluster profile {profile.name!r}:\n" + "\n".join(lines)
        ) from error
    return PreparedWorkload(name, submission, workload, sources, values, profile, rendering)


@click.command("render")
@preparation_options
@click.option("--namespace", help="The namespace of every manifest (default: none set).")
@output_option("YAML documents, or a JSON v1 List.")
def render_command(*, preparation: Preparation, namespace: str | None, output: str) -> None:
    """Render a workload into the Kubernetes manifests a platform applies.

    workspace: a Pod; training: a batch/v1 Job; distributed: the Kubeflow job of its framework
    (PyTorchJob, MPIJob, TFJob, XGBoostJob, JAXJob); inference: a Knative Service. New claims
    and Services go with them.
    """
    rendering = prepare_workload(preparation, namespace).rendering
    if output == "json":
        items = list(rendering.manifests)
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))
    else:
        click.echo("---\n".join(dump_yaml(manifest) for manifest in rendering.manifests), nl=False)
