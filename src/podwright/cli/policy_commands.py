"""``podwright policy``: lint policies, show a scope's effective policy, evaluate a workload.

Exit codes: 0 when everything is in order (warnings are printed on standard error), 1 when a
workload breaks enforced rules, 2 for bad input (unreadable files, invalid policies or workloads,
conflicting scopes). Every problem in a file is reported at its ``file:line:column``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

import click

from podwright.adapters.documents import Document, DocumentError, dump_yaml, read_document
from podwright.cli.common import BadInput, ExitCode
from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue, catalogue_from_data
from podwright.core.effective_policy import (
    EffectivePolicy,
    effective_policy,
    effective_policy_document,
)
from podwright.core.evaluation import Evaluation, Violation, evaluate, resolve_imposed_assets
from podwright.core.policies import Policy, Scope, policy_from_data, scope_from_text
from podwright.core.problems import ProblemsError
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import submission_from_data

T = TypeVar("T")

_FORMATS = click.Choice(["table", "yaml", "json"])
_TYPES = click.Choice([kind.value for kind in WorkloadType])


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


_SCOPE = _ScopeParam()


@click.group("policy")
def policy_group() -> None:
    """Workload policies: defaults, rules and imposed assets per scope and workload type.

    A scope is 'tenant' or level=name pairs from the top down, for example
    'cluster=prod,department=research,project=vision'.
    """


@policy_group.command("check")
@click.argument("policy_files", metavar="POLICY...", nargs=-1, required=True)
@click.option(
    "--assets",
    "assets_file",
    metavar="FILE",
    help="The asset catalogue to check imposed assets against.",
)
def check_command(policy_files: Sequence[str], assets_file: str | None) -> None:
    """Check policy files, alone and as a scope tree; print a summary of each.

    Every policy is checked on its own (fields, value types, rules its field can carry,
    min/max, defaults within its rules, defaultFrom), then every branch of the tree it forms
    (one owner per rule, defaults within other scopes' rules, imposed assets).
    """
    documents, policies = _load_policies(policy_files)
    catalogue = _load_catalogue(assets_file, documents) if assets_file else None
    problems: dict[str, None] = {}  # each branch reports its conflicts; say each once
    for policy in policies:
        try:
            effective = effective_policy(policies, policy.scope, policy.workload_type)
            if catalogue is not None:
                resolve_imposed_assets(effective, catalogue)
        except ProblemsError as error:
            problems.update(dict.fromkeys(_located(error, documents, None)))
    if problems:
        raise BadInput("\n".join(problems))
    rows = [
        [
            policy.source or "",
            policy.name,
            str(policy.scope),
            policy.workload_type.value,
            policy.enforcement.value,
            str(len(policy.defaults) + len(policy.instances)),
            str(len(policy.rules) + len(policy.instance_rules)),
            str(len(policy.imposed_assets)),
        ]
        for policy in sorted(policies, key=lambda p: (p.workload_type.value, p.scope.names))
    ]
    click.echo(
        _table(["FILE", "NAME", "SCOPE", "TYPE", "MODE", "DEFAULTS", "RULES", "ASSETS"], rows)
    )
    click.echo(f"{len(policies)} polic{'y' if len(policies) == 1 else 'ies'} checked: no problems")


@policy_group.command("effective")
@click.argument("policy_files", metavar="POLICY...", nargs=-1, required=True)
@click.option(
    "--scope", "scope", type=_SCOPE, required=True, help="The scope to combine the branch for."
)
@click.option("--type", "workload_type", type=_TYPES, required=True, help="The workload type.")
@click.option(
    "-o", "--output", type=_FORMATS, default="table", show_default=True, help="Output format."
)
def effective_command(
    policy_files: Sequence[str], scope: Scope, workload_type: str, output: str
) -> None:
    """Print the effective policy of a scope: the branch's defaults, rules and imposed assets,
    each with the scope it came from."""
    documents, policies = _load_policies(policy_files)
    effective = _combine(policies, scope, WorkloadType(workload_type), documents)
    document, entries = effective_policy_document(effective)
    if output == "table":
        rows = [[entry.path, _scalar(entry.value), str(entry.scope)] for entry in entries]
        click.echo(
            _table(["ENTRY", "VALUE", "SCOPE"], rows) if rows else "(the branch has no policy)"
        )
        return
    data = {
        "scope": scope.to_data(),
        "workloadType": workload_type,
        "policies": [policy.name for policy in effective.policies],
        **document,
        "sources": {entry.path: str(entry.scope) for entry in entries},
    }
    _emit(data, output)


@policy_group.command("evaluate")
@click.argument("policy_files", metavar="POLICY...", nargs=-1, required=True)
@click.option(
    "--workload",
    "workload_file",
    metavar="FILE",
    required=True,
    help="The workload submission ('-' for standard input).",
)
@click.option(
    "--type", "workload_type", type=_TYPES, help="The workload type (default: the file's 'type')."
)
@click.option(
    "--scope",
    type=_SCOPE,
    help="The workload's scope (default: the deepest scope of the policies, "
    "when they lie on one branch).",
)
@click.option(
    "--assets", "assets_file", metavar="FILE", help="The asset catalogue imposed assets come from."
)
@click.option(
    "--show-audited",
    is_flag=True,
    help="Also print violations of rules in audit mode (on standard error).",
)
@click.option(
    "-o", "--output", type=_FORMATS, default="table", show_default=True, help="Output format."
)
def evaluate_command(
    *,
    policy_files: Sequence[str],
    workload_file: str,
    workload_type: str | None,
    scope: Scope | None,
    assets_file: str | None,
    show_audited: bool,
    output: str,
) -> None:
    """Evaluate a workload under the policies: print the effective workload with the source of
    every value, or every violation (exit status 1)."""
    documents, policies = _load_policies(policy_files)
    workload_document = _read(workload_file, documents)
    submission = _guard(
        lambda: submission_from_data(
            workload_document.data, WorkloadType(workload_type) if workload_type else None
        ),
        documents,
        default_source=workload_document.source,
    )
    if scope is None:
        scope = _deepest_scope(policies, submission.workload_type)
    catalogue = _load_catalogue(assets_file, documents) if assets_file else EMPTY_CATALOGUE
    effective = _combine(policies, scope, submission.workload_type, documents)
    if assets_file is None and effective.imposed_assets:
        imposed = ", ".join(asset.value for asset in effective.imposed_assets)
        raise BadInput(
            f"the policies of {scope} impose assets ({imposed}); "
            "give the asset catalogue with --assets FILE"
        )
    evaluation = _guard(
        lambda: evaluate(effective, submission, submission.workload_type, catalogue), documents
    )
    for warning in evaluation.warnings:
        click.echo(f"podwright: warning: {_violation_line(warning)}", err=True)
    if show_audited:
        for audited in evaluation.audited:
            click.echo(f"podwright: audit: {_violation_line(audited)}", err=True)
    _print_evaluation(evaluation, output)
    if not evaluation.accepted:
        sys.exit(ExitCode.VIOLATIONS)


def _print_evaluation(evaluation: Evaluation, output: str) -> None:
    if output != "table":
        _emit(evaluation.to_json(), output)
        return
    if evaluation.accepted:
        rows = [
            [path, _scalar(evaluation.values[path]), source]
            for path, source in evaluation.sources.items()
        ]
        click.echo(
            _table(["FIELD", "VALUE", "SOURCE"], rows)
            if rows
            else "(the effective workload is empty)"
        )
        return
    rows = [[issue.field, issue.rule, issue.details] for issue in evaluation.violations]
    click.echo(_table(["FIELD", "RULE", "DETAILS"], rows))
    count = len(evaluation.violations)
    click.echo(f"{count} violation{'s' if count > 1 else ''}: the workload is rejected", err=True)


def _violation_line(violation: Violation) -> str:
    owner = (
        f", policy {violation.policy.name!r} ({violation.policy.scope})" if violation.policy else ""
    )
    return f"{violation.field}: {violation.details} (rule {violation.rule}{owner})"


def _deepest_scope(policies: Sequence[Policy], workload_type: WorkloadType) -> Scope:
    scopes = sorted(
        {policy.scope for policy in policies if policy.workload_type is workload_type},
        key=lambda s: len(s.names),
    )
    if not scopes:
        raise BadInput(f"no {workload_type.value} policy among the files given")
    deepest = scopes[-1]
    for scope in scopes:
        if not scope.contains(deepest):
            raise click.UsageError(
                f"the policies lie on more than one branch ({scope} and {deepest}); "
                "name the workload's scope with --scope"
            )
    return deepest


def _load_policies(files: Iterable[str]) -> tuple[dict[str, Document], list[Policy]]:
    documents: dict[str, Document] = {}
    policies: list[Policy] = []
    errors: list[str] = []
    for name in files:
        document = _read(name, documents)
        try:
            policies.append(policy_from_data(document.data, document.source))
        except ProblemsError as error:
            errors.extend(_located(error, documents, document.source))
    if errors:
        raise BadInput("\n".join(errors))
    return documents, policies


def _load_catalogue(name: str, documents: dict[str, Document]) -> AssetCatalogue:
    document = _read(name, documents)
    return _guard(lambda: catalogue_from_data(document.data, document.source), documents)


def _combine(
    policies: Sequence[Policy],
    scope: Scope,
    workload_type: WorkloadType,
    documents: Mapping[str, Document],
) -> EffectivePolicy:
    return _guard(lambda: effective_policy(policies, scope, workload_type), documents)


def _read(name: str, documents: dict[str, Document]) -> Document:
    try:
        document = read_document(name, sys.stdin)
    except DocumentError as error:
        raise BadInput(str(error)) from error
    documents[document.source] = document
    return document


def _guard(
    action: Callable[[], T], documents: Mapping[str, Document], default_source: str | None = None
) -> T:
    try:
        return action()
    except ProblemsError as error:
        raise BadInput("\n".join(_located(error, documents, default_source))) from error


def _located(
    error: ProblemsError, documents: Mapping[str, Document], default_source: str | None
) -> list[str]:
    lines: list[str] = []
    for problem in error.problems:
        source = problem.source or default_source
        document = documents.get(source) if source else None
        where = document.locate(problem.path) if document else (source or "")
        lines.append(f"{where}: {problem}" if where else str(problem))
    return lines


def _emit(data: object, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(dump_yaml(data), nl=False)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [
        max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)
    ]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return "\n".join(lines)


def _scalar(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)
