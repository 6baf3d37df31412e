"""podwright's resources in a cluster, read as the policy engine's inputs.

In a cluster, policies are objects (``WorkloadPolicy`` in a namespace, ``ClusterWorkloadPolicy``
for the cluster), a workload is a ``Workload``, and the scope tree tenant → cluster → department →
project maps onto Kubernetes: a namespace is a project (its label ``podwright.dev/project``
renames it), its label ``podwright.dev/department`` names its department (``default`` when
absent, as every Run:ai project belongs to a department), and tenant and cluster scopes are
cluster-wide. This module turns those objects into the same :class:`Policy`, :class:`Scope` and
:class:`Submission` values the files on a laptop become, so the CLI, the admission webhooks and
the operator evaluate with one engine. Problems keep the paths of the objects themselves
(``spec.rules.compute...``), so ``kubectl`` users read them in their own terms.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from podwright.core.assets import API_VERSION as CATALOGUE_API_VERSION
from podwright.core.assets import KIND as CATALOGUE_KIND
from podwright.core.assets import AssetCatalogue, catalogue_from_data
from podwright.core.field_paths import FieldPath
from podwright.core.policies import API_VERSION as POLICY_FILE_API_VERSION
from podwright.core.policies import KIND as POLICY_FILE_KIND
from podwright.core.policies import Policy, PolicyError, Scope, policy_from_data
from podwright.core.problems import FieldProblem, ProblemsError, describe
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import Submission, WorkloadInputError, submission_from_fields

GROUP = "podwright.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
WORKLOAD_KIND = "Workload"
WORKLOAD_FINALIZER = f"{GROUP}/workload"
"""Held on a Workload from its admission (the mutating webhook adds it; the operator, when no
webhook did, before it submits the task) until its task is finalized: deleting the Workload
aborts the task, and the Workload goes only once nothing of its task is left running."""
SUBMITTED_BY_ANNOTATION = f"{GROUP}/submitted-by"
"""Who submitted a Workload: the user the API server authenticated for its create, written by
podwright's mutating webhook over whatever the creator wrote, and put back by it when an update
changes or removes it (so nobody may claim another's name). A Workload created before the webhook
recorded submitters has none, and an update cannot add one."""
POLICY_KIND = "WorkloadPolicy"
CLUSTER_POLICY_KIND = "ClusterWorkloadPolicy"
ASSET_KIND = "Asset"
NAMESPACE_KIND = "Namespace"
"""A ``v1`` Namespace: a project, its labels naming its department (and project)."""
CLUSTER_ASSET_KIND = "ClusterAsset"

PROJECT_LABEL = f"{GROUP}/project"
DEPARTMENT_LABEL = f"{GROUP}/department"
DEFAULT_DEPARTMENT = "default"
"""The department of a namespace that names none (Run:ai's default department)."""

CLUSTER_SCOPES = ("tenant", "cluster", "department")
"""What ``spec.scope`` of a ClusterWorkloadPolicy may say."""


@dataclasses.dataclass(frozen=True)
class ClusterScopes:
    """The scope tree of one cluster: ``cluster`` is its name in the tree (the scope every
    ClusterWorkloadPolicy of scope ``cluster`` speaks of)."""

    cluster: str

    def of_namespace(self, namespace: Mapping[str, object]) -> Scope:
        """The project scope of a namespace object (its labels name project and department)."""
        metadata = namespace.get("metadata")
        labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
        labels = labels if isinstance(labels, Mapping) else {}
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        project = labels.get(PROJECT_LABEL) or name
        department = labels.get(DEPARTMENT_LABEL) or DEFAULT_DEPARTMENT
        if not isinstance(project, str) or not isinstance(department, str):
            raise ValueError(f"a namespace object without a name: {namespace!r}")
        return Scope((self.cluster, department, project))

    def of_cluster_policy(self, spec: Mapping[str, object]) -> Scope:
        """The scope a ClusterWorkloadPolicy's ``spec.scope`` (and ``spec.department``) names;
        a ValueError names what is wrong."""
        level = spec.get("scope", "cluster")
        department = spec.get("department")
        if level not in CLUSTER_SCOPES:
            raise ValueError(
                f"spec.scope: expected one of {', '.join(CLUSTER_SCOPES)}, got {level!r}"
            )
        if level == "department":
            if not isinstance(department, str) or not department:
                raise ValueError(
                    "spec.department: a policy of scope department names its department"
                )
            return Scope((self.cluster, department))
        if department is not None:
            raise ValueError(
                f"spec.department: only a policy of scope department has one, not {level}"
            )
        return Scope(() if level == "tenant" else (self.cluster,))


def resource_source(obj: Mapping[str, object]) -> str:
    """How problems and sources name an object: ``WorkloadPolicy vision/training``."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    namespace, name = metadata.get("namespace"), metadata.get("name")
    return f"{obj.get('kind')} {namespace}/{name}" if namespace else f"{obj.get('kind')} {name}"


def policy_from_resource(
    obj: Mapping[str, object], scope: Scope, source: str | None = None
) -> Policy:
    """A WorkloadPolicy or ClusterWorkloadPolicy object as the policy of ``scope``; raises
    :class:`PolicyError` with every problem, at the object's own paths. Problems and the
    policy name ``source`` (by default the object: ``WorkloadPolicy vision/training``)."""
    source = resource_source(obj) if source is None else source
    spec = obj.get("spec")
    metadata = obj.get("metadata")
    if not isinstance(spec, Mapping):
        raise PolicyError([FieldProblem(("spec",), "expected a mapping", source)])
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    problems: list[FieldProblem] = []
    if obj.get("kind") == CLUSTER_POLICY_KIND:
        body = {key: value for key, value in spec.items() if key not in ("scope", "department")}
    else:
        body = dict(spec)
        if body.pop("scope", None) is not None:
            problems.append(
                FieldProblem(
                    ("spec", "scope"),
                    f"a {POLICY_KIND} is the policy of its namespace's project and says no "
                    f"scope (a {CLUSTER_POLICY_KIND} says tenant, cluster or department)",
                    source,
                )
            )
    document = {
        "apiVersion": POLICY_FILE_API_VERSION,
        "kind": POLICY_FILE_KIND,
        "metadata": {"name": name},
        "spec": {**body, "scope": scope.to_data()},
    }
    try:
        policy = policy_from_data(document, source)
    except PolicyError as error:
        raise PolicyError([*problems, *error.problems]) from None
    if problems:
        raise PolicyError(problems)
    return policy


def submission_from_resource(
    obj: Mapping[str, object], workload_type: WorkloadType | None = None
) -> Submission:
    """A Workload object as a submission: ``spec.type`` is its type, the rest of ``spec`` its
    fields, ``metadata.name`` its name; raises :class:`WorkloadInputError` with every problem,
    at the object's own paths. ``workload_type`` is the type asked for, if any: a ``spec.type``
    that says another is a problem naming both.

    Nothing else is read: the API server has checked the rest of an object it serves, and
    :mod:`~podwright.core.workload_documents` checks the rest of a Workload written in a file.
    """
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise WorkloadInputError(
            [
                FieldProblem(
                    ("spec",),
                    f"expected a mapping of the workload's type and fields, got {describe(spec)}",
                )
            ]
        )
    metadata = obj.get("metadata")
    return submission_from_fields(
        spec.get("type"),
        metadata.get("name") if isinstance(metadata, Mapping) else None,
        {key: value for key, value in spec.items() if key != "type"},
        workload_type,
        type_path=("spec", "type"),
        name_path=("metadata", "name"),
        spec_path=("spec",),
    )


def catalogue_from_resources(assets: list[Mapping[str, object]]) -> AssetCatalogue:
    """Asset and ClusterAsset objects as one catalogue (each object one asset: its name, and
    ``spec`` as the catalogue entry's other fields)."""
    entries = []
    for obj in assets:
        metadata = obj.get("metadata")
        spec = obj.get("spec")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        entries.append({"name": name, **(spec if isinstance(spec, Mapping) else {})})
    document = {"apiVersion": CATALOGUE_API_VERSION, "kind": CATALOGUE_KIND, "assets": entries}
    try:
        return catalogue_from_data(document, "the cluster's Assets")
    except ProblemsError as error:
        raise type(error)([_at_asset(problem, assets) for problem in error.problems]) from None


def _at_asset(problem: FieldProblem, assets: list[Mapping[str, object]]) -> FieldProblem:
    """A problem of the assembled catalogue, named by the object it came from."""
    path = problem.path
    if len(path) >= 2 and path[0] == "assets" and isinstance(path[1], int):
        obj = assets[path[1]]
        rest = path[2:]
        where: FieldPath = ("metadata", "name") if rest[:1] == ("name",) else ("spec", *rest)
        return FieldProblem(where, problem.message, resource_source(obj))
    return problem


# Policies as resources ----------------------------------------------------------------------------


class PolicyDocumentError(ValueError):
    """A document that cannot become a policy resource (names the field and what is allowed)."""


def policy_resource(
    name: str, body: Mapping[str, object], scope: Scope, *, namespace: str | None
) -> dict[str, object]:
    """The resource of a policy of ``scope`` whose ``spec`` (without its scope) is ``body``:
    a ClusterWorkloadPolicy for the tenant, the cluster or a department, a WorkloadPolicy in
    ``namespace`` (the project's) for a project."""
    spec = {key: value for key, value in body.items() if key != "scope"}
    metadata: dict[str, object] = {"name": name}
    if scope.level == "project":
        if not namespace:
            raise PolicyDocumentError(f"{scope}: a project policy goes in the project's namespace")
        metadata["namespace"] = namespace
        return {"apiVersion": API_VERSION, "kind": POLICY_KIND, "metadata": metadata, "spec": spec}
    where: dict[str, object] = {"scope": scope.level}
    if scope.level == "department":
        where["department"] = scope.names[-1]
    spec = {**where, **spec}
    return {
        "apiVersion": API_VERSION,
        "kind": CLUSTER_POLICY_KIND,
        "metadata": metadata,
        "spec": spec,
    }


def namespace_resource(
    name: str, *, department: str | None = None, project: str | None = None
) -> dict[str, object]:
    """The ``v1`` Namespace ``name`` labelled, as :meth:`ClusterScopes.of_namespace` reads it,
    with ``department`` and ``project`` (each only when given)."""
    labels = {
        label: value
        for label, value in ((DEPARTMENT_LABEL, department), (PROJECT_LABEL, project))
        if value is not None
    }
    metadata: dict[str, object] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": NAMESPACE_KIND, "metadata": metadata}


def policy_objects(policy: Policy) -> list[dict[str, object]]:
    """The objects a cluster holds for ``policy``: a ClusterWorkloadPolicy for the tenant, the
    cluster or a department; for a project, the Namespace that is the project (named after it,
    labelled with its department) and the WorkloadPolicy in it. The cluster's name is none of
    theirs to say: the objects lie in a cluster."""
    spec = {
        "workloadType": policy.workload_type.value,
        "enforcement": policy.enforcement.value,
        **policy.body,
    }
    if policy.scope.level != "project":
        return [policy_resource(policy.name, spec, policy.scope, namespace=None)]
    _cluster, department, project = policy.scope.names
    return [
        namespace_resource(project, department=department),
        policy_resource(policy.name, spec, policy.scope, namespace=project),
    ]


def project_namespaces(
    scopes: ClusterScopes, scope: Scope, namespaces: list[Mapping[str, object]]
) -> list[str]:
    """The namespaces that are the project ``scope`` (a project's name is its namespace's, or
    the namespace's ``podwright.dev/project`` label), whatever cluster name ``scope`` gives."""
    found = []
    for namespace in namespaces:
        of_namespace = scopes.of_namespace(namespace)
        if of_namespace.names[1:] == scope.names[1:]:
            metadata = namespace.get("metadata")
            assert isinstance(metadata, Mapping), "of_namespace read its name"
            found.append(str(metadata.get("name")))
    return sorted(found)
