"""The one submission pipeline: a workload through its policies, then into manifests.

``podwright run``, ``render`` and ``policy evaluate``, the admission webhook's preview of a
submission, and a notebook all go through :func:`evaluate` and :func:`prepare`, so they cannot
drift apart. The policy engine and the renderer are pure (``podwright.core``); this module picks
the scope, gathers the inputs and turns the core's problems into the API's exceptions.

**Whose scope.** A submission's scope is where it runs: its namespace is its project (and, with
a ``Namespace`` object among the policy documents, that namespace's labels name the project and
department, as in a cluster). A submitter does not choose it; ``scope=`` is for administrators
previewing a policy for a scope, and an evaluation says which way its scope was chosen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from podwright.api.errors import InvalidInputError, PolicyViolationError
from podwright.api.loading import (
    NO_POLICIES,
    Policies,
    Workload,
    guard,
    load_assets,
    load_profile,
    located,
    parse_scope,
    workload_type_of,
)
from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue
from podwright.core.cluster_resources import DEFAULT_DEPARTMENT, DEPARTMENT_LABEL, ClusterScopes
from podwright.core.effective_policy import (
    EffectivePolicy,
    PolicyEntry,
    effective_policy,
    effective_policy_document,
)
from podwright.core.evaluation import Evaluation as CoreEvaluation
from podwright.core.evaluation import Violation, resolve_imposed_assets
from podwright.core.evaluation import evaluate as evaluate_submission
from podwright.core.k8s_names import dns1123_label_problem
from podwright.core.policies import Policy, Scope
from podwright.core.problems import ProblemsError
from podwright.core.workloads import check_runnable as check_workload

if TYPE_CHECKING:
    from podwright.api.loading import Source
    from podwright.core.render import ClusterProfile, Rendering

VIOLATION_CODE = 400
"""The ``code`` of a rejection, as Run:ai's API answers a submission its policies refuse."""


@dataclasses.dataclass(frozen=True)
class ChosenScope:
    """The scope a workload is judged in, how it was chosen, and where it runs."""

    scope: Scope
    chosen_by: str
    """``namespace vision``, ``scope (an administrator's preview)``, ``the policies' deepest
    scope`` or ``no training policy``."""
    namespace: str | None = None
    """The namespace it runs in, when one was given or written in it."""
    notes: tuple[str, ...] = ()
    """What was inferred rather than read (a namespace's department, without its object)."""


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """A workload judged by the policies of its scope: the effective workload with the source
    of every value, or every violation; the warnings and audit findings either way."""

    workload: Workload
    scope: Scope
    chosen_by: str
    result: CoreEvaluation
    policies: tuple[Policy, ...]
    """The policies of the scope's branch that judged it, from the tenant down."""
    notes: tuple[str, ...] = ()
    """What the evaluation noticed (no policy of the workload's type: no rules apply; a
    preview; a department inferred); the notes of reading the workload and the policies are
    theirs."""
    namespace: str | None = None
    """The namespace the workload runs in (given, or its own), which its manifests go to."""

    @property
    def accepted(self) -> bool:
        """Whether the workload may run (no enforced rule is broken)."""
        return self.result.accepted

    @property
    def effective(self) -> Mapping[str, object]:
        """Every effective value, nested as submitted (empty when rejected)."""
        return self.result.workload

    @property
    def sources(self) -> Mapping[str, str]:
        """Where each effective leaf value came from, by dotted path."""
        return self.result.sources

    @property
    def values(self) -> Mapping[str, object]:
        return self.result.values

    @property
    def violations(self) -> tuple[Violation, ...]:
        """Broken rules of policies in ``enforce`` mode (and the workload's own consistency)."""
        return self.result.violations

    @property
    def warnings(self) -> tuple[Violation, ...]:
        """Broken rules of policies in ``warn`` mode: the workload runs, the submitter is told."""
        return self.result.warnings

    @property
    def audited(self) -> tuple[Violation, ...]:
        """Broken rules of policies in ``audit`` mode: recorded, not shown by default."""
        return self.result.audited

    def to_data(self) -> dict[str, object]:
        """The evaluation as ``-o json`` prints it.

        Rejected, as Run:ai's API reports a submission its policies refuse: ``code``,
        ``message``, ``details`` and ``complianceIssues`` (``field``, ``details``, ``rule``),
        with podwright's extras beside them (each issue's ``enforcement`` and owning
        ``policy``; the ``scope``). Accepted: the effective ``workload`` and the ``sources`` of
        its values. Either way the ``warnings`` and ``audited`` findings, issues alike."""
        extras: dict[str, object] = {
            "scope": self.scope.to_text(),
            "scopeChosenBy": self.chosen_by,
            "warnings": [issue_data(issue) for issue in self.warnings],
            "audited": [issue_data(issue) for issue in self.audited],
        }
        if self.accepted:
            return {
                "accepted": True,
                "workload": dict(self.effective),
                "sources": dict(self.sources),
                **extras,
            }
        count = len(self.violations)
        return {
            "accepted": False,
            "code": VIOLATION_CODE,
            "message": f"the workload does not comply with the policies of {self.scope}",
            "details": f"{count} compliance issue{'s' if count != 1 else ''}",
            "complianceIssues": [issue_data(issue) for issue in self.violations],
            **extras,
        }


def issue_data(violation: Violation) -> dict[str, object]:
    """A compliance issue as Run:ai lists it (``field``, ``details``, ``rule``), with the
    ``enforcement`` it has and the ``policy`` that owns the rule (none: the workload's own
    consistency, always enforced)."""
    data: dict[str, object] = {
        **violation.to_json(),
        "enforcement": violation.enforcement.value,
    }
    if violation.policy is not None:
        policy = violation.policy
        data["policy"] = {
            "name": policy.name,
            "scope": policy.scope.to_text(),
            **({"source": policy.source} if policy.source else {}),
        }
    return data


def issue_line(violation: Violation) -> str:
    """One line for an issue: field, details, rule and the policy that owns it."""
    owner = (
        f", policy {violation.policy.name!r} ({violation.policy.scope})" if violation.policy else ""
    )
    return f"{violation.field}: {violation.details} (rule {violation.rule}{owner})"


def choose_scope(
    workload: Workload,
    policies: Policies,
    *,
    scope: Scope | str | None = None,
    namespace: str | None = None,
    cluster: str | None = None,
) -> ChosenScope:
    """The scope ``workload`` is judged in.

    It runs in ``namespace``, else its own ``metadata.namespace`` (the two must agree, as
    kubectl requires). ``scope`` when given: an administrator's preview. Otherwise the project
    of that namespace, read as the cluster reads it (:meth:`ClusterScopes.of_namespace`) from
    its Namespace object, read with the policies or given from the cluster; without the object,
    the namespace's name, in the one department the policies place that project in, else
    ``default`` (a note says it was inferred). Its cluster is ``cluster``, else the one the
    policies lie in. Without a namespace, the deepest scope of the policies of its type, when
    they lie on one branch (a laptop's policy files); none of its type: no rules apply, at the
    tenant."""
    if namespace and workload.namespace and namespace != workload.namespace:
        raise InvalidInputError(
            f"namespace {namespace}: {workload.source} says metadata.namespace "
            f"{workload.namespace}; give one, or make them agree"
        )
    namespace = namespace or workload.namespace
    if namespace is not None and (problem := dns1123_label_problem(namespace)):
        raise InvalidInputError(f"namespace: {namespace!r} {problem}")
    if cluster is not None and policies.cluster not in (None, cluster):
        raise InvalidInputError(
            f"cluster {cluster}: the policies were read for cluster {policies.cluster}; read "
            "them for this one (load_policies(..., cluster=), --cluster-name)"
        )
    given = parse_scope(scope)
    if given is not None:
        return ChosenScope(given, "scope (an administrator's preview)", namespace)
    if namespace is not None:
        found, notes = namespace_scope(namespace, policies, cluster=cluster)
        return ChosenScope(found, f"namespace {namespace}", namespace, notes)
    of_type = [policy for policy in policies.policies if policy.workload_type is workload.type]
    if not of_type:
        return ChosenScope(Scope(()), f"no {workload.type.value} policy")
    return ChosenScope(deepest_scope(of_type), "the policies' deepest scope")


def namespace_scope(
    namespace: str, policies: Policies, *, cluster: str | None = None
) -> tuple[Scope, tuple[str, ...]]:
    """The project scope of ``namespace`` (see :func:`choose_scope`), and what was inferred."""
    cluster = cluster or policies.cluster
    if cluster is None:
        clusters = sorted({policy.scope.names[0] for policy in policies if policy.scope.names})
        raise InvalidInputError(
            f"the policies name clusters {', '.join(clusters)}: say which one the workload runs "
            "in (cluster=, --cluster-name)"
        )
    obj = policies.namespaces.get(namespace)
    if obj is not None:
        return ClusterScopes(cluster).of_namespace(obj), ()
    departments = sorted(
        {
            policy.scope.names[1]
            for policy in policies
            if len(policy.scope.names) == 3 and policy.scope.names[::2] == (cluster, namespace)
        }
    )
    if len(departments) > 1:
        raise InvalidInputError(
            f"namespace {namespace}: the policies place project {namespace} in departments "
            f"{', '.join(departments)}: give its Namespace object, labelled "
            f"{DEPARTMENT_LABEL}, with the policies"
        )
    if not departments:
        return Scope((cluster, DEFAULT_DEPARTMENT, namespace)), ()
    return Scope((cluster, departments[0], namespace)), (
        f"namespace {namespace}: department {departments[0]}, where the policies place project "
        f"{namespace}; a cluster reads it from the namespace's {DEPARTMENT_LABEL} label "
        f"(none: {DEFAULT_DEPARTMENT})",
    )


def deepest_scope(policies: Sequence[Policy]) -> Scope:
    """The deepest scope of ``policies``, which must lie on one branch."""
    scopes = sorted({policy.scope for policy in policies}, key=lambda s: len(s.names))
    deepest = scopes[-1]
    for scope in scopes:
        if not scope.contains(deepest):
            raise InvalidInputError(
                f"the policies lie on more than one branch ({scope} and {deepest}); "
                "give the workload's namespace (metadata.namespace), or preview a scope "
                "(scope=, --scope)"
            )
    return deepest


def check_policies(policies: Policies, assets: Source | AssetCatalogue | None = None) -> None:
    """Bad input listing every problem of ``policies`` as a scope tree: on every branch one
    owner per rule, defaults within the other scopes' rules, and (with ``assets``) imposed
    assets that exist, reference no credentials and can be mounted."""
    catalogue = None if assets is None else load_assets(assets)
    problems: dict[str, None] = {}  # each branch reports its conflicts; say each once
    for policy in policies.policies:
        try:
            combined = effective_policy(policies.policies, policy.scope, policy.workload_type)
            if catalogue is not None:
                resolve_imposed_assets(combined, catalogue)
        except ProblemsError as error:
            problems.update(dict.fromkeys(located(error, policies.documents, None)))
    if problems:
        raise InvalidInputError(list(problems))


def effective(policies: Policies, scope: Scope | str, workload_type: str) -> EffectivePolicy:
    """The effective policy of ``scope`` for ``workload_type``; conflicts between the scopes'
    policies are bad input, at the lines that conflict."""
    chosen = parse_scope(scope)
    assert chosen is not None
    kind = workload_type_of(workload_type)
    return guard(lambda: effective_policy(policies.policies, chosen, kind), policies.documents)


def effective_document(
    combined: EffectivePolicy,
) -> tuple[dict[str, object], list[PolicyEntry]]:
    """The effective policy as a policy document, and each of its entries with its scope."""
    return effective_policy_document(combined)


def evaluate(
    workload: Workload,
    policies: Policies = NO_POLICIES,
    *,
    scope: Scope | str | None = None,
    namespace: str | None = None,
    cluster: str | None = None,
    assets: Source | AssetCatalogue | None = None,
) -> Evaluation:
    """Judge ``workload`` by the policies of its scope (see :func:`choose_scope`).

    A rejection is not an exception here (look at ``accepted``); bad input is: an invalid
    document, policies that conflict, imposed assets without the catalogue they come from."""
    chosen = choose_scope(workload, policies, scope=scope, namespace=namespace, cluster=cluster)
    notes: list[str] = list(chosen.notes)
    if scope is not None:
        notes.append(
            f"a preview in {chosen.scope} (the scope given); a submission is judged in the "
            "scope of its namespace"
        )
    if policies.policies and all(
        policy.workload_type is not workload.type for policy in policies.policies
    ):
        notes.append(f"no {workload.type.value} policy among the policies given, so no rules apply")
    catalogue = EMPTY_CATALOGUE if assets is None else load_assets(assets)
    combined = guard(
        lambda: effective_policy(policies.policies, chosen.scope, workload.type),
        policies.documents,
    )
    if assets is None and combined.imposed_assets:
        imposed = ", ".join(asset.value for asset in combined.imposed_assets)
        raise InvalidInputError(
            f"the policies of {chosen.scope} impose assets ({imposed}); give the asset "
            "catalogue they come from (assets=, --assets FILE)"
        )
    result = guard(
        lambda: evaluate_submission(combined, workload.submission, workload.type, catalogue),
        policies.documents,
        workload.documents,
    )
    return Evaluation(
        workload,
        chosen.scope,
        chosen.chosen_by,
        result,
        combined.policies,
        tuple(notes),
        chosen.namespace,
    )


def check_runnable(workload: Workload) -> None:
    """Bad input when ``workload``, as written, cannot run: a limit below its request, maximum
    replicas below minimum ones, a framework's field for another framework (the check every
    evaluation makes, for a workload taken without policies)."""
    guard(
        lambda: check_workload(workload.type, workload.spec, workload.submission.spec_path),
        workload.documents,
        default_source=workload.source,
    )


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A workload through its policies and rendered: what ``render`` prints and ``run`` runs."""

    name: str
    workload: Workload
    evaluation: Evaluation | None
    """None when no policies were given (the workload is taken as written)."""
    effective: Mapping[str, object]
    profile: ClusterProfile
    rendering: Rendering
    namespace: str | None = None
    """The namespace it was judged and rendered for (None: none; judged in the policies'
    deepest scope, if any)."""

    @property
    def sources(self) -> Mapping[str, str]:
        """Where each effective value came from, by dotted path (empty without policies)."""
        return self.evaluation.sources if self.evaluation else {}

    @property
    def values(self) -> Mapping[str, object]:
        return self.evaluation.values if self.evaluation else {}

    @property
    def manifests(self) -> list[dict[str, object]]:
        """The Kubernetes manifests, in the order they are applied."""
        return [dict(manifest) for manifest in self.rendering.manifests]


def prepare(
    workload: Workload | Evaluation,
    policies: Policies | None = None,
    *,
    scope: Scope | str | None = None,
    namespace: str | None = None,
    cluster: str | None = None,
    assets: Source | AssetCatalogue | None = None,
    profile: Source | ClusterProfile | None = None,
    name: str | None = None,
) -> Prepared:
    """Evaluate ``workload`` (unless it is an evaluation already, or no ``policies`` are
    given: then it is taken as written, after the check every evaluation makes that it can
    run), then render it on ``profile``. Raises :class:`PolicyViolationError` when the
    policies reject it, :class:`InvalidInputError` for bad input and for a field the profile
    cannot honour (named with where its value came from)."""
    # Imported here: rendering loads the k8s models, which the quick commands never need.
    from podwright.core.render import RenderError, refusal_lines  # noqa: PLC0415
    from podwright.core.render import render as render_workload  # noqa: PLC0415

    evaluation: Evaluation | None = None
    if isinstance(workload, Evaluation):
        given = [
            name
            for name, value in (("policies", policies), ("scope", scope), ("cluster", cluster))
            if value is not None
        ]
        if given:
            raise InvalidInputError(
                f"{', '.join(given)}: an evaluation was judged already; give the workload "
                "instead to judge it again"
            )
        evaluation, workload = workload, workload.workload
        if namespace is not None and evaluation.namespace not in (None, namespace):
            raise InvalidInputError(
                f"namespace {namespace}: the workload was judged for namespace "
                f"{evaluation.namespace}"
            )
        namespace = namespace or evaluation.namespace
    catalogue = None if assets is None else load_assets(assets)  # read once, for both steps
    if policies and evaluation is None:
        evaluation = evaluate(
            workload, policies, scope=scope, namespace=namespace, cluster=cluster, assets=catalogue
        )
    if evaluation is not None and not evaluation.accepted:
        raise PolicyViolationError(evaluation)
    submitted = workload
    if evaluation is None:
        check_runnable(submitted)
    effective_workload = evaluation.effective if evaluation else workload.spec
    cluster_profile = load_profile(profile)
    workload_name = name or workload.name
    if not workload_name:
        raise InvalidInputError(
            f"{workload.source}: the workload has no name: give it one (metadata.name), or "
            "name it (name=, --name)"
        )
    sources = evaluation.sources if evaluation else {}
    try:
        rendering = guard(
            lambda: render_workload(
                submitted.type,
                workload_name,
                effective_workload,
                profile=cluster_profile,
                catalogue=EMPTY_CATALOGUE if catalogue is None else catalogue,
                namespace=namespace or submitted.namespace,
            )
        )
    except RenderError as error:
        raise InvalidInputError(
            refusal_lines(cluster_profile.name, error.problems, sources)
        ) from None
    return Prepared(
        workload_name,
        workload,
        evaluation,
        effective_workload,
        cluster_profile,
        rendering,
        namespace or submitted.namespace,
    )


def render(
    workload: Workload | Evaluation,
    policies: Policies | None = None,
    *,
    scope: Scope | str | None = None,
    namespace: str | None = None,
    cluster: str | None = None,
    assets: Source | AssetCatalogue | None = None,
    profile: Source | ClusterProfile | None = None,
    name: str | None = None,
) -> list[dict[str, object]]:
    """The Kubernetes manifests of ``workload`` (see :func:`prepare`), as JSON-ready dicts."""
    return prepare(
        workload,
        policies,
        scope=scope,
        namespace=namespace,
        cluster=cluster,
        assets=assets,
        profile=profile,
        name=name,
    ).manifests
