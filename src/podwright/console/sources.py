"""Where the console's tasks and policies come from: the same client and the same policies as
the commands, chosen once at start.

A :class:`ConsoleSources` makes the :class:`~podwright.api.Client` of the backend the console
was started for (this machine's store, or the cluster's operator read with the user's own
kubeconfig, so that its RBAC decides what the console shows) and finds the policies that judge
a namespace's submissions: the cluster's own for the operator (as ``podwright policy effective
-n`` reads them), else the policy files given (as ``podwright run --policy``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from podwright import api
from podwright.api.backends import OPERATOR, ClusterAccess
from podwright.api.cluster_policies import read_cluster_policies
from podwright.api.forms import SubmissionForm, submission_form
from podwright.api.loading import NO_POLICIES, Policies
from podwright.api.pipeline import namespace_scope

FALLBACK_NAMESPACE = "default"
"""The namespace the console submits to when no other is known, as kubectl does."""


@dataclasses.dataclass(frozen=True)
class Judges:
    """What judges a submission in one namespace: its scope, the policies of the cluster or
    the files, and the asset catalogue imposed assets come from (None: none given)."""

    namespace: str
    scope: api.Scope | None
    """None: no policies, so no scope (the workload is taken as written)."""
    policies: Policies
    assets: api.AssetCatalogue | None
    notes: tuple[str, ...] = ()

    def form(self, workload_type: str) -> SubmissionForm:
        """The submission form of ``workload_type`` in this namespace."""
        scope = self.scope if self.scope is not None else api.Scope(())
        return submission_form(self.policies, scope, workload_type, assets=self.assets)


@dataclasses.dataclass(frozen=True)
class ConsoleSources:
    """The backend and policies a console serves (see the module's docstring)."""

    backend: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    all_namespaces: bool = False
    home: str | None = None
    policy_files: tuple[str, ...] = ()
    assets_file: str | None = None
    cluster_name: str | None = None

    @property
    def is_operator(self) -> bool:
        return self.backend == OPERATOR

    def client(self, identity: api.Identity | None = None) -> api.Client:
        """A new client of the console's backend (close it after use); with ``identity``, one
        that acts as that person (the operator's Workloads, through impersonation)."""
        return api.Client(
            self.backend,
            kubeconfig=self.kubeconfig,
            context=self.context,
            namespace=self.namespace if self.is_operator else None,
            all_namespaces=self.all_namespaces,
            home=self.home,
            identity=identity,
        )

    def check(self) -> None:
        """Bad input (:class:`~podwright.api.InvalidInputError`) before anything is served:
        policy files with the operator, whose policies are the cluster's; files that do not
        load."""
        if self.is_operator and (self.policy_files or self.assets_file):
            given = "--policy" if self.policy_files else "--assets"
            raise api.InvalidInputError(
                f"{given}: with --backend operator the cluster's own policies and assets judge "
                "every submission; leave it out"
            )
        self.file_policies()
        self.file_assets()

    def narrowed(self) -> tuple[ConsoleSources, str | None]:
        """These sources, reading only the kubeconfig context's namespace when they were to
        read every namespace and the user may not list Workloads in all of them (their RBAC
        decides what they see); and a note saying so (None: nothing narrowed)."""
        if not (self.is_operator and self.all_namespaces):
            return self, None
        try:
            with self.client() as client:
                if client.allowed("list", ""):
                    return self, None
        except api.PodwrightError:
            return self, None  # not known: the feed tells what the API server says
        narrowed = dataclasses.replace(self, all_namespaces=False)
        with narrowed.client() as client:
            where = client.where
        return narrowed, (
            f"you may not list Workloads in every namespace: showing {where} (-n for another)"
        )

    @functools.cache  # noqa: B019 - one per console, read once
    def file_policies(self) -> Policies:
        if not self.policy_files:
            return NO_POLICIES
        return api.load_policies(*self.policy_files, cluster=self.cluster_name)

    @functools.cache  # noqa: B019 - one per console, read once
    def file_assets(self) -> api.AssetCatalogue | None:
        return api.load_assets(self.assets_file) if self.assets_file else None

    def judges(self, namespace: str) -> Judges:
        """What judges submissions in ``namespace`` (see :class:`Judges`)."""
        if self.is_operator:
            read = read_cluster_policies(
                ClusterAccess(self.kubeconfig, self.context),
                namespace,
                cluster_name=self.cluster_name,
            )
            return Judges(namespace, read.scope, read.policies, read.assets)
        policies = self.file_policies()
        if not policies.policies:
            return Judges(namespace, None, policies, self.file_assets())
        scope, notes = namespace_scope(namespace, policies, cluster=self.cluster_name)
        return Judges(namespace, scope, policies, self.file_assets(), notes)

    def known_namespaces(self, seen: Sequence[str]) -> list[str]:
        """The namespaces to offer: those of the tasks ``seen``, the console's own, those the
        policy files name, and ``default``."""
        names = {*seen, FALLBACK_NAMESPACE}
        if self.namespace:
            names.add(self.namespace)
        if not self.is_operator:
            policies = self.file_policies()
            names.update(policies.namespaces)
            names.update(
                policy.scope.names[2] for policy in policies if len(policy.scope.names) == 3
            )
        return sorted(names)
