"""``podwright policy``: lint policies, show a scope's effective policy, evaluate a workload.

Exit codes: 0 when everything is in order (warnings are printed on standard error), 1 when a
workload breaks enforced rules, 2 for bad input (unreadable files, invalid policies or workloads,
conflicting scopes). Every problem in a file is reported at its ``file:line:column``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from podwright.api import Scope
from podwright.api.pipeline import (
    Evaluation,
    check_policies,
    effective,
    effective_document,
    namespace_scope,
)
from podwright.cli.common import ExitCode, cluster_access_options, scalar_text, table
from podwright.cli.inputs import (
    SCOPE,
    WORKLOAD_TYPES,
    cluster_name_option,
    described_namespaces,
    emit,
    evaluate_workload,
    load_policies,
    namespace_label_options,
    workload_options,
)

_FORMATS = click.Choice(["table", "yaml", "json"])


@click.group("policy")
def policy_group() -> None:
    """Workload policies: defaults, rules and imposed assets per scope and workload type.

    A scope is 'tenant' or level=name pairs from the top down, for example
    'cluster=prod,department=research,project=vision'.
    """


_POLICY_NAMESPACE = click.option(
    "-n",
    "--namespace",
    default=None,
    help="The namespace of WorkloadPolicy objects that name none (as kubectl's), and the one "
    "--department and --project describe.",
)

_RUNAI_TYPE = click.option(
    "--type",
    "workload_type",
    type=WORKLOAD_TYPES,
    help="The workload type of Run:ai policy documents (defaults/rules/imposedAssets), which "
    "do not say it.",
)


@policy_group.command("check")
@click.argument("policy_files", metavar="POLICY...", nargs=-1, required=True)
@click.option(
    "--assets",
    "assets_file",
    metavar="FILE",
    help="The asset catalogue to check imposed assets against.",
)
@_RUNAI_TYPE
@click.option(
    "--scope",
    type=SCOPE,
    help="The scope of Run:ai policy documents, which do not say it (default: tenant).",
)
@cluster_name_option
@_POLICY_NAMESPACE
@namespace_label_options
def check_command(
    *,
    policy_files: Sequence[str],
    assets_file: str | None,
    workload_type: str | None,
    scope: Scope | None,
    cluster_name: str | None,
    namespace: str | None,
    department: str | None,
    project: str | None,
) -> None:
    """Check policy files, alone and as a scope tree; print a summary of each.

    Every policy is checked on its own (fields, value types, rules its field can carry,
    min/max, defaults within its rules, defaultFrom), then every branch of the tree it forms
    (one owner per rule, defaults within other scopes' rules, imposed assets). A
    WorkloadPolicy is the policy of its namespace's project, in the department the namespace's
    Namespace object among the files says (or -n NS --department D).
    """
    policies = load_policies(
        policy_files,
        workload_type=workload_type,
        scope=scope,
        cluster=cluster_name,
        namespaces=described_namespaces(namespace, department, project),
        namespace=namespace,
    )
    check_policies(policies, assets_file)
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
        for policy in sorted(
            policies.policies, key=lambda p: (p.workload_type.value, p.scope.names)
        )
    ]
    click.echo(
        table(["FILE", "NAME", "SCOPE", "TYPE", "MODE", "DEFAULTS", "RULES", "ASSETS"], rows)
    )
    click.echo(f"{len(policies)} polic{'y' if len(policies) == 1 else 'ies'} checked: no problems")


@policy_group.command("effective")
@click.argument("policy_files", metavar="[POLICY...]", nargs=-1)
@click.option(
    "--scope", "scope", type=SCOPE, help="The scope to combine the branch for (policy files)."
)
@click.option(
    "-n",
    "--namespace",
    default=None,
    help="The namespace whose project's policy to show: read from the cluster, or, with "
    "POLICY files, from them (the namespace's Namespace object among them, or --department).",
)
@namespace_label_options
@click.option(
    "--type", "workload_type", type=WORKLOAD_TYPES, required=True, help="The workload type."
)
@click.option(
    "-o", "--output", type=_FORMATS, default="table", show_default=True, help="Output format."
)
@cluster_access_options
def effective_command(
    *,
    policy_files: Sequence[str],
    scope: Scope | None,
    namespace: str | None,
    department: str | None,
    project: str | None,
    workload_type: str,
    output: str,
    kubeconfig: str | None,
    context: str | None,
    cluster_name: str | None,
) -> None:
    """Print the effective policy of a scope: the branch's defaults, rules and imposed assets,
    each with the scope it came from.

    From policy files, for --scope or for the project of the namespace -n names (as the
    admission webhook combines them), or from the cluster with -n alone.
    """
    if namespace is not None and not policy_files:
        if scope is not None or department is not None or project is not None:
            raise click.UsageError(
                "-n without POLICY files reads the policies and the namespace from the "
                "cluster: give no --scope, --department or --project"
            )
        from podwright.api.backends import ClusterAccess  # noqa: PLC0415
        from podwright.api.cluster_policies import read_cluster_policies  # noqa: PLC0415

        in_cluster = read_cluster_policies(
            ClusterAccess(kubeconfig, context), namespace, cluster_name=cluster_name
        )
        scope, policies = in_cluster.scope, in_cluster.policies
    else:
        if kubeconfig is not None or context is not None:
            raise click.UsageError("--kubeconfig and --context go with -n without POLICY files")
        if not policy_files or (scope is None) == (namespace is None):
            raise click.UsageError(
                "give POLICY files and one of --scope and -n, or -n alone to read the "
                "cluster's policies"
            )
        policies = load_policies(
            policy_files,
            workload_type=workload_type,
            scope=scope,
            cluster=cluster_name,
            namespaces=described_namespaces(namespace, department, project),
            namespace=namespace,
        )
        if namespace is not None:
            scope, notes = namespace_scope(namespace, policies, cluster=cluster_name)
            for note in notes:
                click.echo(f"podwright: note: {note}", err=True)
    assert scope is not None
    combined = effective(policies, scope, workload_type)
    document, entries = effective_document(combined)
    if output == "table":
        rows = [[entry.path, scalar_text(entry.value), str(entry.scope)] for entry in entries]
        click.echo(
            table(["ENTRY", "VALUE", "SCOPE"], rows) if rows else "(the branch has no policy)"
        )
        return
    data = {
        "scope": scope.to_data(),
        "workloadType": workload_type,
        "policies": [policy.name for policy in combined.policies],
        **document,
        "sources": {entry.path: str(entry.scope) for entry in entries},
    }
    emit(data, output)


@policy_group.command("apply")
@click.option(
    "-f",
    "--filename",
    "files",
    metavar="FILE",
    multiple=True,
    required=True,
    help="A policy file, a WorkloadPolicy or ClusterWorkloadPolicy resource, or a Run:ai "
    "policy document ('-': standard input); repeat for more.",
)
@click.option(
    "--type",
    "workload_type",
    type=WORKLOAD_TYPES,
    help="The workload type of a Run:ai policy document (which does not say it).",
)
@click.option(
    "--scope",
    type=SCOPE,
    help="The scope of a Run:ai policy document (which does not say it).",
)
@click.option(
    "-n",
    "--namespace",
    default=None,
    help="The namespace of project policies (default: the namespace that is the project).",
)
@click.option(
    "--name", default=None, help="The policy's name (default: the file's own, or its name)."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Check every policy with the cluster (admission included) and store nothing.",
)
@cluster_access_options
def apply_command(
    *,
    files: Sequence[str],
    workload_type: str | None,
    scope: Scope | None,
    namespace: str | None,
    name: str | None,
    dry_run: bool,
    kubeconfig: str | None,
    context: str | None,
    cluster_name: str | None,
) -> None:
    """Create or update policy resources in the cluster, from policy files, resources or Run:ai
    policy documents.

    Tenant, cluster and department policies become ClusterWorkloadPolicies; a project's becomes
    a WorkloadPolicy in the project's namespace. Every policy is checked by the cluster first
    (the admission webhook refuses malformed and conflicting ones): when one is refused, none
    is applied, and every refusal is listed.
    """
    from podwright.cli.cluster_policies import ClusterOptions, apply_policies  # noqa: PLC0415

    apply_policies(
        files,
        ClusterOptions(kubeconfig, context, cluster_name),
        workload_type=workload_type,
        scope=scope,
        namespace=namespace,
        name=name,
        dry_run=dry_run,
    )


@policy_group.command("report")
@click.option(
    "-n", "--namespace", default=None, help="Only this namespace's Workloads (default: all)."
)
@click.option(
    "-o", "--output", type=_FORMATS, default="table", show_default=True, help="Output format."
)
@cluster_access_options
def report_command(
    *,
    namespace: str | None,
    output: str,
    kubeconfig: str | None,
    context: str | None,
    cluster_name: str | None,
) -> None:
    """List the admitted Workloads that the cluster's current policies would refuse, each with
    every issue (exit status 1 when there is one).

    A policy change never changes a Workload already admitted; this says which ones the
    policies now disagree with (each Workload's PolicyCompliant condition says the same).
    """
    from podwright.api.backends import ClusterAccess  # noqa: PLC0415
    from podwright.api.cluster_policies import compliance_report  # noqa: PLC0415

    report = compliance_report(
        ClusterAccess(kubeconfig, context), namespace, cluster_name=cluster_name
    )
    entries, judged = report.entries, report.judged
    if output != "table":
        emit([entry.to_data() for entry in entries], output)
    elif entries:
        rows = [
            [entry.namespace, entry.name, entry.reason, issue]
            if index == 0
            else ["", "", "", issue]
            for entry in entries
            for index, issue in enumerate(entry.issues or ("",))
        ]
        click.echo(table(["NAMESPACE", "WORKLOAD", "REASON", "ISSUE"], rows))
    if entries:
        click.echo(
            f"{len(entries)} of {judged} Workload{'s' if judged > 1 else ''} would be refused "
            "by the current policies",
            err=True,
        )
        sys.exit(ExitCode.VIOLATIONS)
    click.echo(f"every Workload ({judged}) complies with the current policies", err=True)


@policy_group.command("evaluate")
@click.argument("policy_files", metavar="POLICY...", nargs=-1, required=True)
@workload_options
@click.option(
    "--scope",
    type=SCOPE,
    help="Preview the workload in this scope (for administrators; a submission is judged in "
    "its namespace's project, metadata.namespace). Default: the workload's namespace's scope, "
    "else the deepest scope of the policies when they lie on one branch.",
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
@cluster_name_option
@click.option(
    "-n",
    "--namespace",
    default=None,
    help="The namespace the workload runs in, whose project's policies judge it (default: its "
    "metadata.namespace).",
)
@namespace_label_options
def evaluate_command(
    *,
    policy_files: Sequence[str],
    workload_file: str,
    workload_type: str | None,
    scope: Scope | None,
    assets_file: str | None,
    show_audited: bool,
    output: str,
    cluster_name: str | None,
    namespace: str | None,
    department: str | None,
    project: str | None,
) -> None:
    """Evaluate a workload under the policies: print the effective workload with the source of
    every value, or every violation (exit status 1)."""
    evaluation = evaluate_workload(
        policy_files=policy_files,
        workload_file=workload_file,
        workload_type=workload_type,
        scope=scope,
        assets_file=assets_file,
        cluster=cluster_name,
        show_audited=show_audited,
        namespace=namespace,
        department=department,
        project=project,
    )
    _print_evaluation(evaluation, output)
    if not evaluation.accepted:
        sys.exit(ExitCode.VIOLATIONS)


def _print_evaluation(evaluation: Evaluation, output: str) -> None:
    if output != "table":
        emit(evaluation.to_data(), output)
        return
    if evaluation.accepted:
        rows = [
            [path, scalar_text(evaluation.values[path]), source]
            for path, source in evaluation.sources.items()
        ]
        click.echo(
            table(["FIELD", "VALUE", "SOURCE"], rows)
            if rows
            else "(the effective workload is empty)"
        )
        return
    rows = [[issue.field, issue.rule, issue.details] for issue in evaluation.violations]
    click.echo(table(["FIELD", "RULE", "DETAILS"], rows))
    count = len(evaluation.violations)
    click.echo(f"{count} violation{'s' if count > 1 else ''}: the workload is rejected", err=True)
