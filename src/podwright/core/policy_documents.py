"""One reader for every form a workload policy is written in.

A policy is written in any of these forms, and everything that reads a policy document (the
commands that read policy files, ``policy apply``) reads each with :func:`policy_from_document`:

- **podwright's policy file**, deprecated: ``apiVersion: podwright.dev/v1``, ``kind:
  WorkloadPolicy``, its scope and workload type in ``spec`` (:mod:`~podwright.core.policies`).
  No cluster serves it, and it shares its kind's name with the resource below: it is read with
  a note (:func:`deprecation`) that says to write the policy resources instead, which
  :func:`~podwright.core.cluster_resources.policy_objects` gives.
- **A Run:ai policy document**, as the policy reference writes every example: ``defaults``,
  ``rules`` and ``imposedAssets`` at the top (each may be null), or the request body of Run:ai's
  policy API, ``{meta, policy}``, holding one (``meta`` holds Run:ai's ids of scopes, which mean
  nothing here). It says neither its workload type nor its scope: they are given (the CLI's
  ``--type`` and ``--scope``). Its name is given (``--name``), else the file's stem.
- **A policy resource**, as a cluster holds it: ``apiVersion: podwright.dev/v1alpha1``, ``kind:
  WorkloadPolicy``, the policy of the project its ``metadata.namespace`` is, or ``kind:
  ClusterWorkloadPolicy``, whose ``spec.scope`` is ``tenant``, ``cluster`` or ``department``
  (with ``spec.department``). Their scopes are the cluster's, as
  :class:`~podwright.core.cluster_resources.ClusterScopes` reads them: its name in the scope tree
  is given (needed by every scope below the tenant), and a namespace's department and project are
  read from the ``Namespace`` object of that name when one is given (labels
  ``podwright.dev/department`` and ``podwright.dev/project``), else the namespace is the project
  of the same name in the department ``default``, as in a cluster whose namespace has no labels.
  A WorkloadPolicy that names no namespace is in the namespace given (kubectl's ``-n``), else in
  ``default``.

A workload type or scope given with a document that states its own must agree with it. Problems
(a :class:`~podwright.core.policies.PolicyError`) and notes (:attr:`Policy.notes`) are at the
document's own paths, so ``file:line:column`` points into the file as written: ``rules.compute...``
in a Run:ai document, ``policy.rules...`` in its API body, ``spec.rules...`` in the others.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import PurePath
from types import MappingProxyType

from podwright.core.cluster_resources import (
    API_VERSION as RESOURCE_API_VERSION,
)
from podwright.core.cluster_resources import (
    CLUSTER_POLICY_KIND,
    DEPARTMENT_LABEL,
    NAMESPACE_KIND,
    POLICY_KIND,
    ClusterScopes,
    policy_from_resource,
)
from podwright.core.field_paths import FieldPath
from podwright.core.k8s_names import dns1123_subdomain_problem
from podwright.core.policies import API_VERSION as FILE_API_VERSION
from podwright.core.policies import KIND as FILE_KIND
from podwright.core.policies import (
    RUNAI_SECTIONS,
    Policy,
    PolicyError,
    Scope,
    policy_from_data,
    policy_from_runai,
)
from podwright.core.problems import FieldProblem, describe
from podwright.core.workload_fields import WorkloadType

DEFAULT_NAMESPACE = "default"
"""The namespace of a WorkloadPolicy that names none, when none is given (as kubectl's)."""

_NO_NAMESPACES: Mapping[str, Mapping[str, object]] = MappingProxyType({})
_TENANT_ONLY = ClusterScopes("")
"""Scopes for a tenant ClusterWorkloadPolicy read without the cluster's name (it names none)."""

FORMS = (
    f"a policy resource ({RESOURCE_API_VERSION} {POLICY_KIND} or {CLUSTER_POLICY_KIND}), a "
    f"Run:ai policy document ({', '.join(RUNAI_SECTIONS)}, with no apiVersion or kind) or a "
    f"deprecated policy file ({FILE_API_VERSION} {FILE_KIND})"
)
"""The forms a policy document takes, as messages list them."""


def is_policy_file(data: object) -> bool:
    """Whether ``data`` is written as podwright's deprecated policy file (``podwright.dev/v1``)."""
    return isinstance(data, Mapping) and data.get("apiVersion") == FILE_API_VERSION


def deprecation(policy: Policy) -> str:
    """Why the policy file ``policy`` was read from is deprecated, and what to write instead
    (the objects :func:`~podwright.core.cluster_resources.policy_objects` gives)."""
    if policy.scope.level == "project":
        instead = (
            f"a {POLICY_KIND} in the project's namespace, and the {NAMESPACE_KIND} labelled "
            f"{DEPARTMENT_LABEL}={policy.scope.names[1]}"
        )
    else:
        instead = f"a {CLUSTER_POLICY_KIND} of scope {policy.scope.level}"
    message = (
        f"a {FILE_KIND} of {FILE_API_VERSION} (its scope in spec.scope) is deprecated: no "
        f"cluster serves it; write it as the objects a cluster serves, {instead} "
        f"(apiVersion: {RESOURCE_API_VERSION}); 'podwright convert --in-place FILE' rewrites "
        "the file"
    )
    if policy.scope.names:
        cluster = policy.scope.names[0]
        message += (
            f". Those objects do not name their cluster ({cluster} here): they lie in the "
            f"cluster they are applied to, and offline in the one --cluster-name names "
            f"(--cluster-name {cluster}; cluster= in Python)"
        )
    return message


def policy_from_document(
    data: object,
    source: str | None = None,
    *,
    workload_type: WorkloadType | None = None,
    scope: Scope | None = None,
    name: str | None = None,
    scopes: ClusterScopes | None = None,
    namespaces: Mapping[str, Mapping[str, object]] = _NO_NAMESPACES,
    namespace: str | None = None,
) -> Policy:
    """Read a policy document of any form (see the module's docstring) from ``source``.

    ``workload_type`` and ``scope`` are a Run:ai document's, and must agree with a document
    that states its own. ``name`` names the policy (a Run:ai document's is otherwise the stem of
    ``source``; the others' is their own). ``scopes`` (the cluster's name) and ``namespaces``
    (``Namespace`` objects by name, their labels strings) place a policy resource, ``namespace``
    a WorkloadPolicy that names none. Raises :class:`PolicyError` with every problem found.
    """
    if not isinstance(data, Mapping):
        raise PolicyError(
            [
                FieldProblem(
                    (), f"expected a policy document (a mapping), got {describe(data)}", source
                )
            ]
        )
    reading = _Reading(source, workload_type, scope, name, scopes, namespaces, namespace)
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if api_version == FILE_API_VERSION:
        return reading.policy_file(data)
    if api_version == RESOURCE_API_VERSION:
        return reading.resource(data)
    if api_version is not None or kind is not None:
        raise PolicyError(
            [
                FieldProblem(
                    ("apiVersion",) if api_version is not None else ("kind",),
                    f"apiVersion {api_version}, kind {kind}: expected {FORMS}",
                    source,
                )
            ]
        )
    return reading.runai(data)


@dataclasses.dataclass(frozen=True)
class _Reading:
    """What is given with the document (see :func:`policy_from_document`)."""

    source: str | None
    workload_type: WorkloadType | None
    scope: Scope | None
    name: str | None
    scopes: ClusterScopes | None
    namespaces: Mapping[str, Mapping[str, object]]
    namespace: str | None

    def policy_file(self, data: Mapping[str, object]) -> Policy:
        problems = self._name_problems(self.name, "--name")
        try:
            policy = policy_from_data(data, self.source)
        except PolicyError as error:
            raise PolicyError([*problems, *error.problems]) from None
        problems += self._disagreements(policy, "the file", ("spec", "scope"))
        if problems:
            raise PolicyError(problems)
        return policy if self.name is None else dataclasses.replace(policy, name=self.name)

    def resource(self, data: Mapping[str, object]) -> Policy:
        kind = data.get("kind")
        if kind not in (POLICY_KIND, CLUSTER_POLICY_KIND):
            raise PolicyError(
                [
                    FieldProblem(
                        ("kind",),
                        f"expected {POLICY_KIND!r} or {CLUSTER_POLICY_KIND!r} (a policy resource "
                        f"of {RESOURCE_API_VERSION}), got {describe(kind)}",
                        self.source,
                    )
                ]
            )
        problems = self._name_problems(self.name, "--name")
        metadata = data.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        spec = data.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        own_scope: Scope | None = None
        if kind == POLICY_KIND:
            scope_path: FieldPath = (
                ("metadata", "namespace") if "namespace" in metadata else ("kind",)
            )
            written = metadata.get("namespace")
            where = written if isinstance(written, str) and written else self.namespace
            where = where or DEFAULT_NAMESPACE
            if self.scopes is None:
                problems.append(self._needs_cluster(kind, scope_path))
            else:
                own_scope = self.scopes.of_namespace(
                    self.namespaces.get(where) or {"metadata": {"name": where}}
                )
        else:
            scope_path = ("spec", "scope") if "scope" in spec else ("kind",)
            if self.scopes is None and spec.get("scope") != "tenant":
                problems.append(self._needs_cluster(CLUSTER_POLICY_KIND, scope_path))
            else:
                try:
                    own_scope = (self.scopes or _TENANT_ONLY).of_cluster_policy(spec)
                except ValueError as error:
                    problems.append(self._scope_problem(str(error)))
        obj = data if self.name is None else {**data, "metadata": {**metadata, "name": self.name}}
        try:
            policy = policy_from_resource(obj, own_scope or Scope(), self.source)
        except PolicyError as error:
            raise PolicyError([*problems, *error.problems]) from None
        if own_scope is not None:
            problems += self._disagreements(policy, "the resource", scope_path)
        if problems:
            raise PolicyError(problems)
        return policy

    def runai(self, data: Mapping[str, object]) -> Policy:
        problems: list[FieldProblem] = []
        missing = [
            option
            for option, given in (("--type", self.workload_type), ("--scope", self.scope))
            if given is None
        ]
        if missing:
            problems.append(
                FieldProblem(
                    (),
                    "a Run:ai policy document says neither its workload type nor its scope: "
                    f"give {' and '.join(missing)}",
                    self.source,
                )
            )
        if self.name is not None:
            name = self.name
            problems += self._name_problems(name, "--name")
        elif self.source is not None:
            name = _stem(self.source)
            problems += self._name_problems(name, "from the file name")
        else:
            name = ""
            problems.append(
                FieldProblem((), "a Run:ai policy document has no name: give --name", self.source)
            )
        if self.workload_type is None:
            raise PolicyError(problems)  # its fields mean what its type says they mean
        try:
            policy = policy_from_runai(
                data,
                self.source,
                name=name,
                scope=self.scope or Scope(),
                workload_type=self.workload_type,
            )
        except PolicyError as error:
            raise PolicyError([*problems, *error.problems]) from None
        if problems:
            raise PolicyError(problems)
        return policy

    def _name_problems(self, name: str | None, origin: str) -> list[FieldProblem]:
        """Why ``name`` (from ``origin``) cannot name a policy, which names an object."""
        problem = None if name is None else dns1123_subdomain_problem(name)
        if problem is None:
            return []
        remedy = "" if origin == "--name" else ": give --name"
        return [
            FieldProblem(
                (), f"the policy's name {name!r} ({origin}) {problem}{remedy}", self.source
            )
        ]

    def _disagreements(
        self, policy: Policy, document: str, scope_path: FieldPath
    ) -> list[FieldProblem]:
        """A workload type or scope given that is not the one ``document`` states."""
        problems = []
        for given, own, option, path in (
            (self.scope, policy.scope, "--scope", scope_path),
            (self.workload_type, policy.workload_type, "--type", ("spec", "workloadType")),
        ):
            if given is not None and given != own:
                problems.append(
                    FieldProblem(
                        path,
                        f"{document} says {_shown(own)}, and {option} says {_shown(given)}: "
                        f"leave {option} out",
                        self.source,
                    )
                )
        return problems

    def _needs_cluster(self, kind: object, path: FieldPath) -> FieldProblem:
        return FieldProblem(
            path,
            f"the scope of this {kind} lies in a cluster: give the cluster's name (--cluster-name)",
            self.source,
        )

    def _scope_problem(self, message: str) -> FieldProblem:
        """A ClusterScopes error (``spec.scope: expected ...``) at the path it names."""
        where, separator, what = message.partition(": ")
        if separator and where in ("spec.scope", "spec.department"):
            return FieldProblem(tuple(where.split(".")), what, self.source)
        return FieldProblem(("spec",), message, self.source)


def _stem(source: str) -> str:
    """A file's name without its suffix, nor the ``#N`` of its N-th document."""
    return PurePath(re.sub(r"#\d+$", "", source)).stem


def _shown(value: Scope | WorkloadType) -> str:
    return value.value if isinstance(value, WorkloadType) else str(value)
