"""``podwright convert``: workload and policy files rewritten as the objects a cluster serves.

A workload file is a Kubernetes object (``apiVersion: podwright.dev/v1alpha1``, ``kind:
Workload``), and a policy one a WorkloadPolicy or ClusterWorkloadPolicy, which ``kubectl apply``
takes as podwright does. Workloads in the deprecated ``{type, name, spec}`` form, bare fields of
a known type, and policy files of ``podwright.dev/v1`` (deprecated) are converted by this
command: printed, or rewritten in place. Nothing is printed unless every document of every file
is good; with ``--in-place`` each file whose documents are all good is rewritten, and a file with
a bad one is left as it was. A file is replaced whole (a temporary file beside it, renamed over it),
so it either stays as it was or holds the converted documents, never part of them.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import click
from click.core import ParameterSource

from podwright import api
from podwright.api import BackendError, InvalidInputError, WorkloadType
from podwright.api.conversion import ConvertedFile, convert_file, rewrite, workload_files
from podwright.cli.common import BadInput, Unavailable, output_option


@click.command("convert")
@click.argument("sources", metavar="[FILE|DIR|-]...", nargs=-1)
@click.option(
    "--type",
    "workload_type",
    type=click.Choice([kind.value for kind in WorkloadType]),
    help="The type of bare documents (the fields alone); a document that states another "
    "type is bad input.",
)
@click.option(
    "--in-place",
    is_flag=True,
    help="Rewrite each file that holds a document to convert, in its own format (JSON for "
    ".json files, YAML otherwise), and name it; print nothing else.",
)
@output_option("YAML documents, or JSON: one object, or a v1 List of several.")
@click.pass_context
def convert_command(
    ctx: click.Context,
    *,
    sources: tuple[str, ...],
    workload_type: str | None,
    in_place: bool,
    output: str,
) -> None:
    """Print workload and policy files as the objects a cluster serves, or rewrite them with
    --in-place.

    Reads every document of each FILE (a multi-document YAML stream too), the .yaml, .yml and
    .json files of each DIR, or standard input ('-', or no FILE when input is piped in). A
    document written as {type, name, spec} (deprecated), or as bare fields with --type, becomes
    a Workload (apiVersion: podwright.dev/v1alpha1, kind: Workload, metadata, spec with its
    type). A policy file of podwright.dev/v1 (deprecated) becomes a ClusterWorkloadPolicy, or,
    for a project, the Namespace that is the project (labelled with its department) and a
    WorkloadPolicy in it; those objects do not name their cluster (read them with
    --cluster-name). A document that is such an object already, or a Run:ai policy document,
    passes unchanged.

    With --in-place, a file is replaced whole, through a temporary file beside it that keeps
    its mode, or left as it is; the comments of a rewritten file are lost. A file with a bad
    document is left as it is, and every problem of every file is reported (exit status 2).
    """
    if in_place and ctx.get_parameter_source("output") is not ParameterSource.DEFAULT:
        raise click.UsageError(
            "--in-place writes each file in its own format (JSON for .json files, YAML "
            "otherwise); -o is for printing"
        )
    if not sources:
        if sys.stdin.isatty():
            raise click.UsageError("no FILE given and standard input is a terminal")
        sources = ("-",)
    if in_place and "-" in sources:
        raise click.UsageError("--in-place rewrites files; standard input ('-') is none")
    files = workload_files(sources)
    if in_place:
        files = list(dict.fromkeys(files))
    converted: dict[str, ConvertedFile] = {}
    errors: list[str] = []
    for name in files:
        try:
            converted[name] = convert_file(name, workload_type)
        except InvalidInputError as error:
            errors.extend(error.problems)
    unwritten: list[str] = []
    if in_place:
        rewritten, unwritten = _rewrite(converted)
        if not rewritten and not errors and not unwritten:
            click.echo(
                "podwright: note: every document is an object a cluster serves already", err=True
            )
    elif not errors:
        _print([obj for file in converted.values() for obj in file.objects], output)
    for file in converted.values():
        if file.clusters:
            click.echo(
                f"podwright: note: {file.name}: its policies named cluster "
                f"{', '.join(file.clusters)}, which the objects a cluster serves do not say: "
                f"read them with --cluster-name {file.clusters[0]}",
                err=True,
            )
    if errors:
        raise BadInput("\n".join([*errors, *unwritten]))
    if unwritten:
        raise Unavailable("\n".join(unwritten))


def _print(objects: Sequence[object], output: str) -> None:
    if output == "json":
        shown = (
            objects[0]
            if len(objects) == 1
            else {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        )
        click.echo(json.dumps(shown, indent=2))
    else:
        click.echo("---\n".join(api.to_yaml(obj) for obj in objects), nl=False)


def _rewrite(converted: dict[str, ConvertedFile]) -> tuple[int, list[str]]:
    """Rewrite each file with a document converted, naming it on standard output; how many
    were, and why the others could not be."""
    errors: list[str] = []
    rewritten = 0
    for name, file in converted.items():
        if not file.changed:
            continue
        try:
            rewrite(file)
        except BackendError as error:
            errors.append(str(error))
            continue
        rewritten += 1
        count = file.documents
        click.echo(
            f"rewrote {name} ({file.changed} of {count} document{'s' if count > 1 else ''} "
            "converted)"
        )
    return rewritten, errors
