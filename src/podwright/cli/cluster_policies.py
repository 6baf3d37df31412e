"""The ``policy`` command that writes the cluster: ``apply`` (``effective --namespace`` and
``report`` read it through :mod:`podwright.api.cluster_policies`).

Its click definition lives with the other ``policy`` commands; its work is here, loaded only
when it runs, so the commands that read files (``policy check``, ``evaluate``) never load the
Kubernetes client. Every policy reaches the cluster through the same checks as a file: a
document is read with the policy loader first (problems at ``file:line:column``), then every
resource is applied as a server-side dry run (so the admission webhook's refusals, conflicts
included, come back for all of them at once), and only when every one passes are they applied.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence

import click

from podwright.adapters.documents import Document, DocumentError, document_files, read_documents
from podwright.adapters.kubernetes import KubernetesClient
from podwright.api.backends import ClusterAccess, cluster_client, cluster_name
from podwright.api.loading import located
from podwright.cli.common import BadInput
from podwright.core.cluster_resources import (
    API_VERSION,
    NAMESPACE_KIND,
    POLICY_KIND,
    ClusterScopes,
    policy_objects,
    project_namespaces,
    resource_source,
)
from podwright.core.lifecycle.objects import section, text
from podwright.core.policies import Scope
from podwright.core.policy_documents import deprecation, is_policy_file, policy_from_document
from podwright.core.problems import FieldProblem, ProblemsError
from podwright.core.workload_fields import WorkloadType
from podwright.engine.kubernetes_port import (
    ApiConnectionError,
    KubernetesError,
    NotFoundError,
    ObjectRef,
)

FIELD_MANAGER = "podwright"
"""The field manager of what ``policy apply`` writes (``kubectl`` is ``kubectl``)."""


@dataclasses.dataclass(frozen=True)
class ClusterOptions:
    """How to reach the cluster, and its name in the scope tree (None: the kubeconfig's)."""

    kubeconfig: str | None
    context: str | None
    cluster_name: str | None

    @property
    def access(self) -> ClusterAccess:
        return ClusterAccess(self.kubeconfig, self.context)

    @property
    def scopes(self) -> ClusterScopes:
        return ClusterScopes(self.cluster_name or cluster_name(self.access))


@dataclasses.dataclass(frozen=True)
class _PolicyToApply:
    source: str
    """The file, for messages."""
    resource: dict[str, object]
    scope: Scope | None
    """From a file (None: a resource, whose scope the cluster decides)."""
    project: str | None = None
    """A project policy's project, whose namespace is looked up."""
    notes: tuple[FieldProblem, ...] = ()
    """What the reader noticed (:attr:`Policy.notes`)."""
    deprecation: str | None = None
    """Why the document's form is deprecated (a policy file), and what to write instead."""


# policy apply -------------------------------------------------------------------------------


def apply_policies(
    files: Sequence[str],
    options: ClusterOptions,
    *,
    workload_type: str | None,
    scope: Scope | None,
    namespace: str | None,
    name: str | None,
    dry_run: bool,
) -> None:
    """Create or update the policy resources of ``files`` (see the command's help)."""
    documents: dict[str, Document] = {}
    to_apply: list[_PolicyToApply] = []
    errors: list[str] = []
    try:
        read = [
            document
            for file in document_files(files)
            for document in read_documents(file, sys.stdin)
        ]
    except DocumentError as error:
        raise BadInput(str(error)) from error
    if name is not None and len(read) > 1:
        raise click.UsageError("--name names one policy, and the files hold more")
    for document in read:
        documents[document.source] = document
        if isinstance(document.data, Mapping) and document.data.get("kind") == NAMESPACE_KIND:
            click.echo(
                f"podwright: note: {document.source}: {NAMESPACE_KIND} "
                f"{text(section(document.data, 'metadata'), 'name')}: not applied (policy apply "
                "applies policies; kubectl apply -f creates or labels a namespace)",
                err=True,
            )
            continue
        try:
            policy = _policy_of(
                document,
                options,
                workload_type=WorkloadType(workload_type) if workload_type else None,
                scope=scope,
                name=name,
                namespace=namespace,
            )
        except ProblemsError as error:
            errors.extend(located(error, documents, document.source))
            continue
        to_apply.append(policy)
        for note in policy.notes:
            click.echo(f"podwright: note: {document.locate(note.path)}: {note}", err=True)
        if policy.deprecation:
            click.echo(f"podwright: warning: {document.source}: {policy.deprecation}", err=True)
    if errors:
        raise BadInput("\n".join(errors))
    with cluster_client(options.access) as client:
        resources = _placed(client, options.scopes, to_apply, namespace)
        refusals = []
        for policy, resource in zip(to_apply, resources, strict=True):
            replaced = _replaces_another_policy(client, resource) if policy.scope else None
            if replaced:
                refusals.append(f"{policy.source}: {resource_source(resource)}: {replaced}")
                continue
            try:
                client.apply(resource, field_manager=FIELD_MANAGER, dry_run=True)
            except KubernetesError as error:
                if isinstance(error, ApiConnectionError):
                    raise
                refusals.append(f"{policy.source}: {resource_source(resource)}: {error.message}")
        if refusals:
            raise BadInput("\n".join([*refusals, "nothing was applied"]))
        for resource in resources:
            if not dry_run:
                client.apply(resource, field_manager=FIELD_MANAGER)
            name = text(section(resource, "metadata"), "name")
            click.echo(
                f"{str(resource['kind']).lower()}.{API_VERSION.split('/')[0]}/{name} "
                f"{'checked (dry run)' if dry_run else 'applied'}"
            )


def _replaces_another_policy(
    client: KubernetesClient, resource: Mapping[str, object]
) -> str | None:
    """Why applying ``resource`` (made from a file) would replace another policy: an object of
    its name exists for another scope or workload type (a ClusterWorkloadPolicy's name is the
    cluster's, and two files may give two departments' policies one name)."""
    try:
        existing = client.get(ObjectRef.of(resource))
    except NotFoundError:
        return None
    fields = ("scope", "department", "workloadType")
    spec, existing_spec = resource.get("spec"), existing.get("spec")
    assert isinstance(spec, Mapping), "policy_objects writes a spec"
    existing_spec = existing_spec if isinstance(existing_spec, Mapping) else {}
    differing = [
        f"{field} {existing_spec.get(field)!r} (this file: {spec.get(field)!r})"
        for field in fields
        if existing_spec.get(field) != spec.get(field)
    ]
    if not differing:
        return None
    return (
        f"it exists already as another policy ({', '.join(differing)}): give this one another "
        "name (--name), or delete the other first"
    )


def _policy_of(
    document: Document,
    options: ClusterOptions,
    *,
    workload_type: WorkloadType | None,
    scope: Scope | None,
    name: str | None,
    namespace: str | None,
) -> _PolicyToApply:
    """What one file asks to apply: a policy file, a policy resource, or a Run:ai policy
    document (with ``--type`` and ``--scope``), read as every policy document is read; raises
    :class:`PolicyError` with every problem.

    A resource is applied as written (its name ``--name``, its sections as read: a key in Run:ai's
    spelling corrected), for the cluster to place; the cluster's name is needed to read its
    scope. The others become the resource of their scope."""
    data = document.data
    resource = isinstance(data, Mapping) and data.get("apiVersion") == API_VERSION
    policy = policy_from_document(
        data,
        document.source,
        workload_type=workload_type,
        scope=scope,
        name=name,
        scopes=options.scopes if resource else None,
        namespace=namespace,
    )
    if resource:
        assert isinstance(data, Mapping)
        obj = {
            **data,
            "metadata": {**section(data, "metadata"), "name": policy.name},
            "spec": {**section(data, "spec"), **policy.body},
        }
        return _PolicyToApply(document.source, obj, None, notes=policy.notes)
    project = policy.scope.names[-1] if policy.scope.level == "project" else None
    obj = policy_objects(policy)[-1]  # a project's Namespace, if any, comes first
    return _PolicyToApply(
        document.source,
        obj,
        policy.scope,
        project,
        policy.notes,
        deprecation(policy) if is_policy_file(data) else None,
    )


def _placed(
    client: KubernetesClient,
    scopes: ClusterScopes,
    policies: Sequence[_PolicyToApply],
    namespace: str | None,
) -> list[dict[str, object]]:
    """The resources, each project policy in its project's namespace (``namespace`` when
    given, else the one namespace that is the project)."""
    projects = [policy for policy in policies if policy.project is not None]
    namespaces: list[dict[str, object]] = []
    if projects and namespace is None:
        namespaces, _version = client.list_objects("v1", "Namespace")
    placed, errors = [], []
    for policy in policies:
        resource = policy.resource
        if policy.project is None:
            if namespace is not None and resource.get("kind") == POLICY_KIND:
                resource = {
                    **resource,
                    "metadata": {**section(resource, "metadata"), "namespace": namespace},
                }
            placed.append(resource)
            continue
        assert policy.scope is not None
        found = (
            [namespace]
            if namespace is not None
            else project_namespaces(scopes, policy.scope, list(namespaces))
        )
        if len(found) != 1:
            errors.append(
                f"{policy.source}: {policy.scope}: "
                + (
                    f"no namespace is this project (a namespace named {policy.project}, or "
                    f"labelled podwright.dev/project={policy.project}): create it, or give "
                    "--namespace"
                    if not found
                    else f"namespaces {', '.join(found)} are all this project: give --namespace"
                )
            )
            continue
        placed.append(
            {**resource, "metadata": {**section(resource, "metadata"), "namespace": found[0]}}
        )
    if errors:
        raise BadInput("\n".join([*errors, "nothing was applied"]))
    return placed
