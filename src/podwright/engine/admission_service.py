"""The admission webhooks' handlers: an AdmissionReview in, podwright's decision out.

Whatever serves the webhooks (``podwright webhook`` out of the cluster, the operator in it) routes
each review here. The decisions are the core's (:mod:`podwright.core.admission`); this module
gives them the cluster's policies, namespaces, assets and cluster profile (the operator's: what
the validating webhook admits must render on it) through a :class:`PolicyState` port (the
Kubernetes adapter keeps them in watch caches, so a review costs the API server nothing) and keeps
each scope's effective policy prepared until a policy, namespace or asset changes, so a review
costs one evaluation (and a validation, one rendering).

A policy or asset object that cannot be read (written before the webhooks were installed, or by
hand) never loosens anything: every workload of a scope it governs (of the namespaces that see
the asset) is refused, naming it; so is every workload while the cluster profile cannot be read.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

from podwright.core.admission import (
    Decision,
    PolicyFor,
    Request,
    admit_workload,
    mutate_workload,
    problem_lines,
    review_response,
    validate_policy,
    validate_workload,
)
from podwright.core.assets import AssetCatalogue
from podwright.core.cluster_resources import CLUSTER_POLICY_KIND, ClusterScopes
from podwright.core.effective_policy import effective_policy
from podwright.core.evaluation import PreparedPolicy, prepare
from podwright.core.policies import Policy, PolicyError, Scope
from podwright.core.problems import FieldProblem, ProblemsError
from podwright.core.render import ClusterProfile
from podwright.core.webhook_configurations import (
    ADMIT_WORKLOADS,
    MUTATE_WORKLOADS,
    VALIDATE_POLICIES,
    VALIDATE_WORKLOADS,
)
from podwright.core.workload_fields import WorkloadType

Handler = Callable[[Mapping[str, object]], dict[str, object]]


@dataclasses.dataclass(frozen=True)
class UnreadablePolicy:
    """A policy object in the cluster that cannot be read as a policy, and why."""

    source: str
    scope: Scope | None
    """Its scope, when that much could be read (None: it may govern any scope)."""
    problems: tuple[FieldProblem, ...]


@dataclasses.dataclass(frozen=True)
class PolicySnapshot:
    """Every policy of the cluster at one moment; ``version`` changes whenever a policy,
    namespace or asset does."""

    version: int
    policies: tuple[Policy, ...]
    unreadable: tuple[UnreadablePolicy, ...] = ()

    def unreadable_in(self, scope: Scope) -> list[FieldProblem]:
        """The problems of the unreadable policies that may govern ``scope``."""
        return [
            problem
            for broken in self.unreadable
            if broken.scope is None or broken.scope.contains(scope)
            for problem in broken.problems
        ]


class PolicyState(Protocol):
    """What the webhooks read of the cluster."""

    def snapshot(self) -> PolicySnapshot: ...

    def namespace_scope(self, namespace: str) -> Scope:
        """The project scope of ``namespace`` (LookupError: no such namespace)."""

    def catalogue(self, namespace: str) -> AssetCatalogue:
        """The assets a workload of ``namespace`` may use: the cluster's and its own."""

    def profile(self) -> ClusterProfile:
        """The cluster profile the operator renders Workloads with (ProblemsError: it cannot
        be read)."""


class NamespacePolicies(NamedTuple):
    """The scope of a namespace (its project), the effective policy of each workload type there,
    and the assets its workloads may use."""

    scope: Scope
    policy_for: PolicyFor
    catalogue: AssetCatalogue


class AdmissionService:
    """The webhooks, by path (:meth:`routes`): Workloads' mutating and validating ones, the two
    in one (for a mutating webhook the API server calls alone), and the policies' validating
    one."""

    def __init__(self, state: PolicyState, scopes: ClusterScopes) -> None:
        self._state = state
        self._scopes = scopes
        self._lock = threading.Lock()
        self._version = -1
        self._prepared: dict[tuple[Scope, WorkloadType, str], PreparedPolicy] = {}

    def routes(self) -> dict[str, Handler]:
        return {
            MUTATE_WORKLOADS: self._answering(self._mutate_workload),
            VALIDATE_WORKLOADS: self._answering(self._validate_workload),
            ADMIT_WORKLOADS: self._answering(self._admit_workload),
            VALIDATE_POLICIES: self._answering(self._validate_policy),
        }

    def _answering(self, decide: Callable[[Request], Decision]) -> Handler:
        def handle(review: Mapping[str, object]) -> dict[str, object]:
            request = Request.of(review)  # BadReviewError: the server answers 400
            return review_response(review, decide(request))

        return handle

    # Workloads ------------------------------------------------------------------------------

    def _mutate_workload(self, request: Request) -> Decision:
        located = self._locate(request)
        if isinstance(located, Decision):
            return Decision(True)  # the validating webhook refuses it, saying why
        _scope, policy_for, catalogue = located
        return mutate_workload(request, policy_for, catalogue)

    def _validate_workload(self, request: Request) -> Decision:
        return self._judge_workload(request, validate_workload)

    def _admit_workload(self, request: Request) -> Decision:
        return self._judge_workload(request, admit_workload)

    def _judge_workload(
        self,
        request: Request,
        judge: Callable[[Request, Scope, PolicyFor, AssetCatalogue, ClusterProfile], Decision],
    ) -> Decision:
        """``judge`` the request with what governs its namespace and the cluster profile;
        refused when either cannot be read."""
        located = self._locate(request)
        if isinstance(located, Decision):
            return located
        scope, policy_for, catalogue = located
        try:
            profile = self._state.profile()
        except ProblemsError as error:
            return Decision.refuse(
                403,
                "Forbidden",
                "the cluster profile cannot be read, so no workload is admitted: "
                + problem_lines(error.problems),
            )
        return judge(request, scope, policy_for, catalogue, profile)

    def profile(self) -> ClusterProfile:
        """The cluster profile Workloads are rendered with: the one the validating webhook
        judges them on (ProblemsError: it cannot be read)."""
        return self._state.profile()

    def _locate(self, request: Request) -> NamespacePolicies | Decision:
        try:
            return self.policies_of_namespace(request.namespace)
        except LookupError:
            return Decision.refuse(404, "NotFound", f'namespaces "{request.namespace}" not found')
        except ProblemsError as error:
            return Decision.refuse(
                403,
                "Forbidden",
                f"the assets of namespace {request.namespace} cannot be read, so no workload is "
                "admitted there: " + problem_lines(error.problems),
            )

    def policies_of_namespace(self, namespace: str) -> NamespacePolicies:
        """What governs the workloads of ``namespace`` now (LookupError: no such namespace;
        ProblemsError: its assets cannot be read); its effective policies are prepared once per
        type until a policy, namespace or asset changes, for the webhooks and the compliance
        status alike."""
        scope = self._state.namespace_scope(namespace)
        catalogue = self._state.catalogue(namespace)

        def policy_for(workload_type: WorkloadType) -> PreparedPolicy:
            return self._prepared_policy(scope, workload_type, namespace, catalogue)

        return NamespacePolicies(scope, policy_for, catalogue)

    def _prepared_policy(
        self,
        scope: Scope,
        workload_type: WorkloadType,
        namespace: str,
        catalogue: AssetCatalogue,
    ) -> PreparedPolicy:
        snapshot = self._state.snapshot()
        key = (scope, workload_type, namespace)
        with self._lock:
            if snapshot.version != self._version:
                self._prepared.clear()
                self._version = snapshot.version
            prepared = self._prepared.get(key)
        if prepared is not None:
            return prepared
        unreadable = snapshot.unreadable_in(scope)
        if unreadable:
            raise PolicyError(unreadable)
        prepared = prepare(effective_policy(snapshot.policies, scope, workload_type), catalogue)
        with self._lock:
            if snapshot.version == self._version:
                self._prepared[key] = prepared
        return prepared

    # Policies -------------------------------------------------------------------------------

    def _validate_policy(self, request: Request) -> Decision:
        snapshot = self._state.snapshot()
        return validate_policy(request, self._policy_scope, snapshot.policies)

    def _policy_scope(self, obj: Mapping[str, object]) -> Scope:
        spec = obj.get("spec")
        if obj.get("kind") == CLUSTER_POLICY_KIND:
            return self._scopes.of_cluster_policy(spec if isinstance(spec, Mapping) else {})
        metadata = obj.get("metadata")
        namespace = metadata.get("namespace") if isinstance(metadata, Mapping) else None
        try:
            return self._state.namespace_scope(str(namespace))
        except LookupError:
            raise ValueError(f'metadata.namespace: namespaces "{namespace}" not found') from None
