"""Reading the inputs several commands share: policies, asset catalogues, cluster profiles and
workload files.

Each reader turns a core :class:`~podwright.core.problems.ProblemsError` into one
``file:line:column: path: message`` line per problem, so every command reports bad input alike.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

import click

from podwright.adapters.documents import Document, DocumentError, dump_yaml, read_document
from podwright.cli.common import BadInput
from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue, catalogue_from_data
from podwright.core.effective_policy import EffectivePolicy, effective_policy
from podwright.core.evaluation import Evaluation, Violation, evaluate
from podwright.core.policies import Policy, Scope, policy_from_data, scope_from_text
from podwright.core.problems import ProblemsError
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import Submission, submission_from_data

if TYPE_CHECKING:
    from podwright.core.render import ClusterProfile

T = TypeVar("T")


def deepest_scope(policies: Sequence[Policy], workload_type: WorkloadType) -> Scope:
    """The deepest scope of the policies of ``workload_type``, when they lie on one branch; the
    tenant when none is of that type (no rules apply then, as in Run:ai)."""
    scopes = sorted(
        {policy.scope for policy in policies if policy.workload_type is workload_type},
        key=lambda s: len(s.names),
    )
    if not scopes:
        return Scope(())
    deepest = scopes[-1]
    for scope in scopes:
        if not scope.contains(deepest):
            raise click.UsageError(
                f"the policies lie on more than one branch ({scope} and {deepest}); "
                "name the workload's scope with --scope"
            )
    return deepest


def load_policies(files: Iterable[str]) -> tuple[dict[str, Document], list[Policy]]:
    """Read and check each policy file; every problem of every file is reported."""
    documents: dict[str, Document] = {}
    policies: list[Policy] = []
    errors: list[str] = []
    for name in files:
        document = read(name, documents)
        try:
            policies.append(policy_from_data(document.data, document.source))
        except ProblemsError as error:
            errors.extend(located(error, documents, document.source))
    if errors:
        raise BadInput("\n".join(errors))
    return documents, policies


def load_catalogue(name: str, documents: dict[str, Document]) -> AssetCatalogue:
    """Read and check the asset catalogue file ``name``."""
    document = read(name, documents)
    return guard(lambda: catalogue_from_data(document.data, document.source), documents)


def load_profile(name: str | None, documents: dict[str, Document]) -> ClusterProfile:
    """Read and check the cluster profile file ``name``; without one, the safe defaults.

    The renderer (and with it the Kubernetes client's models) is loaded here, by the commands
    that render, not by every command that reads inputs."""
    from podwright.core.render import DEFAULT_PROFILE, profile_from_data  # noqa: PLC0415

    if name is None:
        return DEFAULT_PROFILE
    document = read(name, documents)
    return guard(lambda: profile_from_data(document.data, document.source), documents)


def combine(
    policies: Sequence[Policy],
    scope: Scope,
    workload_type: WorkloadType,
    documents: Mapping[str, Document],
) -> EffectivePolicy:
    """The effective policy of ``scope``; scope conflicts are reported against their files."""
    return guard(lambda: effective_policy(policies, scope, workload_type), documents)


def read(name: str, documents: dict[str, Document]) -> Document:
    """Read the YAML or JSON file ``name`` ('-': standard input) and remember it by source."""
    try:
        document = read_document(name, sys.stdin)
    except DocumentError as error:
        raise BadInput(str(error)) from error
    documents[document.source] = document
    return document


def guard(
    action: Callable[[], T], documents: Mapping[str, Document], default_source: str | None = None
) -> T:
    """Run ``action``; a ProblemsError becomes bad input located in ``documents``."""
    try:
        return action()
    except ProblemsError as error:
        raise BadInput("\n".join(located(error, documents, default_source))) from error


def located(
    error: ProblemsError, documents: Mapping[str, Document], default_source: str | None
) -> list[str]:
    """Each problem of ``error`` as ``file:line:column: path: message``."""
    lines: list[str] = []
    for problem in error.problems:
        source = problem.source or default_source
        document = documents.get(source) if source else None
        where = document.locate(problem.path) if document else (source or "")
        lines.append(f"{where}: {problem}" if where else str(problem))
    return lines


def emit(data: object, output: str) -> None:
    """Print ``data`` as YAML or JSON."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(dump_yaml(data), nl=False)


def violation_line(violation: Violation) -> str:
    """One line for a violation: field, details, rule and the policy that owns it."""
    owner = (
        f", policy {violation.policy.name!r} ({violation.policy.scope})" if violation.policy else ""
    )
    return f"{violation.field}: {violation.details} (rule {violation.rule}{owner})"


class _ScopeParam(click.ParamType[Scope]):
    name = "SCOPE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> Scope:
        if isinstance(value, Scope):
            return value
        try:
            return scope_from_text(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


SCOPE = _ScopeParam()
WORKLOAD_TYPES = click.Choice([kind.value for kind in WorkloadType])


@dataclasses.dataclass(frozen=True)
class EvaluatedWorkload:
    """A workload file read and evaluated under the policies of its scope."""

    document: Document
    submission: Submission
    evaluation: Evaluation


def read_submission(
    name: str, workload_type: str | None, documents: dict[str, Document]
) -> tuple[Document, Submission]:
    """Read and check the workload file ``name`` (of ``workload_type``, else the file's type)."""
    document = read(name, documents)
    submission = guard(
        lambda: submission_from_data(
            document.data, WorkloadType(workload_type) if workload_type else None
        ),
        documents,
        default_source=document.source,
    )
    return document, submission


WORKLOAD_OPTIONS = (
    click.option(
        "--workload",
        "workload_file",
        metavar="FILE",
        required=True,
        help="The workload submission ('-' for standard input).",
    ),
    click.option(
        "--type",
        "workload_type",
        type=WORKLOAD_TYPES,
        help="The workload type (default: the file's 'type').",
    ),
)
"""The ``--workload FILE [--type T]`` options of every command that reads a workload."""


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
    show_audited: bool = False,
) -> EvaluatedWorkload:
    """Read the workload, policies and catalogue; evaluate; print warnings on standard error."""
    documents, policies = load_policies(policy_files)
    document, submission = read_submission(workload_file, workload_type, documents)
    if policies and all(
        policy.workload_type is not submission.workload_type for policy in policies
    ):
        kind = submission.workload_type.value
        click.echo(
            f"podwright: note: no {kind} policy among the files given, so no rules apply",
            err=True,
        )
    if scope is None:
        scope = deepest_scope(policies, submission.workload_type)
    catalogue = load_catalogue(assets_file, documents) if assets_file else EMPTY_CATALOGUE
    effective = combine(policies, scope, submission.workload_type, documents)
    if assets_file is None and effective.imposed_assets:
        imposed = ", ".join(asset.value for asset in effective.imposed_assets)
        raise BadInput(
            f"the policies of {scope} impose assets ({imposed}); "
            "give the asset catalogue with --assets FILE"
        )
    evaluation = guard(
        lambda: evaluate(effective, submission, submission.workload_type, catalogue), documents
    )
    for warning in evaluation.warnings:
        click.echo(f"podwright: warning: {violation_line(warning)}", err=True)
    if show_audited:
        for audited in evaluation.audited:
            click.echo(f"podwright: audit: {violation_line(audited)}", err=True)
    return EvaluatedWorkload(document, submission, evaluation)
