"""Reading the inputs several commands share: policies, asset catalogues, cluster profiles and
workload files, through the public API (:mod:`podwright.api`), with the options that name them.

The API reports bad input as :class:`~podwright.api.errors.InvalidInputError`, one
``file:line:column: path: message`` line per problem; the ``podwright`` group turns it into exit
status 2, so every command reports bad input alike. Notes and warnings go to standard error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import click

from podwright import api
from podwright.api import InvalidInputError, Scope, WorkloadType
from podwright.api.loading import Policies, Workload, labelled_namespace, parse_scope
from podwright.api.pipeline import Evaluation, issue_line


def load_policies(
    files: Sequence[str],
    *,
    workload_type: str | None = None,
    scope: Scope | None = None,
    cluster: str | None = None,
    namespaces: Mapping[str, Mapping[str, object]] | None = None,
    namespace: str | None = None,
) -> Policies:
    """Read and check every policy of ``files`` (multi-document files and directories too);
    every problem of every file is reported. A Run:ai policy document, which says neither,
    is of ``workload_type`` and ``scope``; a WorkloadPolicy that names no namespace is in
    ``namespace``. What the reader noticed is printed as notes, a deprecated form as a
    warning that shows the objects to write instead."""
    policies = api.load_policies(
        *files,
        type=workload_type,
        scope=scope,
        cluster=cluster,
        namespaces=namespaces,
        namespace=namespace,
    )
    for note in policies.notes:
        click.echo(f"podwright: note: {note}", err=True)
    for warning in policies.warnings:
        click.echo(f"podwright: warning: {warning}", err=True, nl=not warning.endswith("\n"))
    return policies


NAMESPACE_LABEL_OPTIONS = (
    click.option(
        "--department",
        metavar="NAME",
        help="The department of the namespace (-n, else the workload's metadata.namespace), "
        "as its podwright.dev/department label says in a cluster; instead of its Namespace "
        "object among the policy files.",
    ),
    click.option(
        "--project",
        metavar="NAME",
        help="The project the namespace is, when not the one of its name (its "
        "podwright.dev/project label in a cluster).",
    ),
)
"""``--department`` and ``--project``: the labels of a namespace whose object is not at hand."""


def namespace_label_options(command: Callable[..., None]) -> Callable[..., None]:
    """Decorate ``command`` with :data:`NAMESPACE_LABEL_OPTIONS`."""
    for option in reversed(NAMESPACE_LABEL_OPTIONS):
        command = option(command)
    return command


def described_namespaces(
    namespace: str | None, department: str | None, project: str | None
) -> dict[str, Mapping[str, object]] | None:
    """The Namespace object ``--department`` and ``--project`` describe, by name: that of
    ``namespace``; None when neither is given."""
    if department is None and project is None:
        return None
    if namespace is None:
        given = "--department" if department is not None else "--project"
        raise click.UsageError(
            f"{given} describes a namespace: name it (-n/--namespace, or the workload's "
            "metadata.namespace)"
        )
    return {namespace: labelled_namespace(namespace, department=department, project=project)}


def emit(data: object, output: str) -> None:
    """Print ``data`` as YAML or JSON."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(api.to_yaml(data), nl=False)


class _ScopeParam(click.ParamType[Scope]):
    name = "SCOPE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Scope:
        if isinstance(value, Scope):
            return value
        try:
            scope = parse_scope(str(value))
        except InvalidInputError as error:
            self.fail(str(error), param, ctx)
        assert scope is not None
        return scope


SCOPE = _ScopeParam()

cluster_name_option = click.option(
    "--cluster-name",
    default=None,
    help="The cluster's name in the scope tree: where WorkloadPolicy and ClusterWorkloadPolicy "
    "objects among the policies lie, and where the workload is judged (default: the one "
    "cluster the policy files name, else 'default').",
)
WORKLOAD_TYPES = click.Choice([kind.value for kind in WorkloadType])


def load_workload(name: str, workload_type: str | None) -> Workload:
    """Read and check the one workload of the file ``name`` (of ``workload_type``, else the
    file's type); a deprecated form is read with a warning that shows the form to write
    instead."""
    (workload,) = load_workloads(name, workload_type, one=True)
    return workload


def load_workloads(name: str, workload_type: str | None, *, one: bool = False) -> list[Workload]:
    """Every workload of the file or directory ``name`` (``one``: it must hold exactly one),
    with the warnings of deprecated forms."""
    workloads = api.load_workloads(name, type=workload_type)
    if one and len(workloads) != 1:
        raise click.UsageError(
            f"{name} holds {len(workloads)} workloads, and this command takes one: give a file "
            "of one"
        )
    for workload in workloads:
        for note in workload.notes:
            click.echo(f"podwright: warning: {note}", err=True, nl=not note.endswith("\n"))
    return workloads


WORKLOAD_OPTIONS = (
    click.option(
        "-f",
        "--filename",
        "--workload",
        "workload_file",
        metavar="FILE",
        required=True,
        help="The workload: a Workload object ('-' for standard input), as kubectl apply -f "
        "takes it.",
    ),
    click.option(
        "--type",
        "workload_type",
        type=WORKLOAD_TYPES,
        help="The workload type of bare fields (a Workload says its own in spec.type).",
    ),
)
"""The ``-f/--workload FILE [--type T]`` options of every command that reads a workload."""


def workload_options(command: Callable[..., None]) -> Callable[..., None]:
    """Decorate ``command`` with :data:`WORKLOAD_OPTIONS`."""
    for option in reversed(WORKLOAD_OPTIONS):
        command = option(command)
    return command


def evaluate_workload(
    *,
    policy_files: Sequence[str],
    workload_file: str,
    workload_type: str | None,
    scope: Scope | None,
    assets_file: str | None,
    cluster: str | None = None,
    show_audited: bool = False,
    namespace: str | None = None,
    department: str | None = None,
    project: str | None = None,
) -> Evaluation:
    """Read the workload, policies and catalogue; evaluate the workload in ``namespace`` (else
    its own), whose labels ``department`` and ``project`` may say; print notes and warnings on
    standard error."""
    workload = load_workload(workload_file, workload_type)
    policies = load_policies(
        policy_files,
        workload_type=workload.type.value,
        scope=scope,
        cluster=cluster,
        namespaces=described_namespaces(namespace or workload.namespace, department, project),
        namespace=namespace,
    )
    evaluation = api.evaluate(
        workload, policies, scope=scope, namespace=namespace, cluster=cluster, assets=assets_file
    )
    say_findings(evaluation, show_audited=show_audited)
    return evaluation


def say_findings(evaluation: Evaluation, *, show_audited: bool = False) -> None:
    """The evaluation's notes and warnings (and, asked for, its audit findings) on standard
    error."""
    for note in evaluation.notes:
        click.echo(f"podwright: note: {note}", err=True)
    for warning in evaluation.warnings:
        click.echo(f"podwright: warning: {issue_line(warning)}", err=True)
    if show_audited:
        for audited in evaluation.audited:
            click.echo(f"podwright: audit: {issue_line(audited)}", err=True)
