"""The policies a cluster holds, read as its admission webhooks read them: a namespace's scope,
the cluster's policies and the namespace's assets, and the admitted Workloads the current
policies would refuse.

``podwright policy effective -n NS`` and ``policy report`` are built on this module, and so is
anything else that shows the cluster's policies (a web console, which reads the cluster through
:mod:`podwright.api` alone): they all see what the webhooks would decide. Each call reads the
cluster once (a :class:`~podwright.adapters.kubernetes.policy_state.ClusterPolicyState` listed
once, without watching), so what it returns is one consistent moment of the cluster.

The API server's failures are those of :func:`~podwright.api.backends.cluster_client`: no answer
is :class:`~podwright.api.errors.BackendUnreachableError`, any other refusal
:class:`~podwright.api.errors.BackendError`; a namespace that does not exist, or whose policies
or assets cannot be read, is :class:`~podwright.api.errors.InvalidInputError`.
"""

from __future__ import annotations

import dataclasses

from podwright.adapters.kubernetes.policy_state import ClusterPolicyState
from podwright.api.backends import ClusterAccess, cluster_client
from podwright.api.backends import cluster_name as kubeconfig_cluster_name
from podwright.api.errors import InvalidInputError
from podwright.api.loading import Policies
from podwright.core.admission import problem_lines
from podwright.core.assets import AssetCatalogue
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND, ClusterScopes
from podwright.core.lifecycle.objects import section, text
from podwright.core.policies import Scope
from podwright.core.problems import ProblemsError
from podwright.engine.admission_service import AdmissionService
from podwright.engine.compliance_monitor import assess_in_namespace


@dataclasses.dataclass(frozen=True)
class ClusterPolicies:
    """What governs the Workloads of one namespace, as the cluster holds it at one moment.

    ``policies`` are every readable policy of the cluster (``effective(policies, scope, type)``
    combines the namespace's branch); ``assets`` the catalogue its imposed assets come from
    (``evaluate(workload, policies, scope=scope, assets=assets)`` judges a workload as the
    webhook would)."""

    scope: Scope
    """The project scope of the namespace."""
    policies: Policies
    assets: AssetCatalogue
    """The cluster's ClusterAssets and the namespace's Assets."""
    cluster: str
    """The cluster's name in the scope tree."""


def read_cluster_policies(
    access: ClusterAccess, namespace: str, *, cluster_name: str | None = None
) -> ClusterPolicies:
    """The scope of ``namespace``, the cluster's policies and the namespace's assets.

    ``cluster_name`` is the cluster's name in the scope tree (None: the name the kubeconfig
    gives the cluster of its context). :class:`InvalidInputError` when the namespace does not
    exist, or when a policy that may govern it or one of its assets cannot be read."""
    with cluster_client(access) as client:
        cluster = cluster_name or kubeconfig_cluster_name(access)
        state = ClusterPolicyState(client, ClusterScopes(cluster)).read_once()
        try:
            scope = state.namespace_scope(namespace)
        except LookupError:
            raise InvalidInputError(
                f"--namespace {namespace}: no such namespace in {client.server}"
            ) from None
        snapshot = state.snapshot()
        unreadable = snapshot.unreadable_in(scope)
        if unreadable:
            raise InvalidInputError(
                f"the policies of {scope} cannot be read: {problem_lines(unreadable)}"
            )
        try:
            assets = state.catalogue(namespace)
        except ProblemsError as error:
            raise InvalidInputError(
                f"the assets of namespace {namespace} cannot be read: "
                f"{problem_lines(error.problems)}"
            ) from None
        policies = Policies(tuple(snapshot.policies), {}, cluster=cluster)
        return ClusterPolicies(scope, policies, assets, cluster)


@dataclasses.dataclass(frozen=True)
class ReportEntry:
    """A Workload the current policies would not admit as it is."""

    namespace: str
    name: str
    reason: str
    """Why it is not compliant (its PolicyCompliant condition's reason)."""
    issues: tuple[str, ...]

    def to_data(self) -> dict[str, object]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "reason": self.reason,
            "issues": list(self.issues),
        }


@dataclasses.dataclass(frozen=True)
class ComplianceReport:
    """The admitted Workloads the cluster's current policies would refuse."""

    entries: tuple[ReportEntry, ...]
    """Each refused Workload, with every issue."""
    judged: int
    """How many Workloads were judged."""


def compliance_report(
    access: ClusterAccess, namespace: str | None, *, cluster_name: str | None = None
) -> ComplianceReport:
    """The Workloads (of ``namespace``, or of every namespace when None) that the cluster's
    current policies would refuse, each judged as the status writer judges it.

    ``cluster_name`` is the cluster's name in the scope tree (None: the kubeconfig's).
    ``judged`` counts every Workload listed; one whose namespace is being deleted (and the
    Workload with it) is never an entry."""
    with cluster_client(access) as client:
        scopes = ClusterScopes(cluster_name or kubeconfig_cluster_name(access))
        state = ClusterPolicyState(client, scopes).read_once()
        service = AdmissionService(state, scopes)
        workloads, _version = client.list_objects(API_VERSION, WORKLOAD_KIND, namespace=namespace)
        entries = []
        for obj in workloads:
            metadata = section(obj, "metadata")
            where, name = text(metadata, "namespace"), text(metadata, "name")
            try:
                assessment = assess_in_namespace(state, service, obj, where)
            except LookupError:
                continue  # its namespace is being deleted, and the Workload with it
            if not assessment.compliant:
                entries.append(ReportEntry(where, name, assessment.reason.value, assessment.issues))
        return ComplianceReport(tuple(entries), len(workloads))
