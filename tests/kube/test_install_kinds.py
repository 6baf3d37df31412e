"""The built-in kinds ``podwright install`` applies beyond those the engine uses: Deployments and
DaemonSets (``apps/v1``), and ClusterRoles, ClusterRoleBindings, Roles and RoleBindings
(``rbac.authorization.k8s.io/v1``). Each is listed by discovery as a real server lists it
(namespaced or not, short names), created and changed by server-side apply, and deleted; a
Deployment's status is written only through its status subresource (``deploymentStrategy`` and
``deploymentStatusStrategy`` in ``pkg/registry/apps/deployment/strategy.go``: an update of the
main resource keeps the old status, one of ``deployments/status`` keeps the old spec).

On a real cluster the objects run nothing: the Deployment has no replica, the DaemonSet selects
no node, and the RBAC objects grant reading ConfigMaps. Cluster-scoped ones are deleted here,
also when the test fails.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType
from tests.kube.support import ApiServer

FIELD_MANAGER = "podwright-contract"
RBAC = "rbac.authorization.k8s.io/v1"
LABELS = {"app.kubernetes.io/name": "podwright-contract"}


def _pod_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": dict(LABELS)},
        "spec": {
            "nodeSelector": {"podwright.dev/contract-test-no-such-node": "true"},
            "containers": [{"name": "main", "image": "registry.invalid/none:1"}],
        },
    }


def _deployment(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "operator", "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": dict(LABELS)},
            "template": _pod_template(),
        },
    }


def _daemon_set(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "daemon", "namespace": namespace},
        "spec": {"selector": {"matchLabels": dict(LABELS)}, "template": _pod_template()},
    }


def _rbac(namespace: str, unique: str) -> list[dict[str, Any]]:
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    subjects = [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}]
    cluster_role = f"podwright-contract-{unique}"
    return [
        {
            "apiVersion": RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": cluster_role},
            "rules": rules,
        },
        {
            "apiVersion": RBAC,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": cluster_role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_role,
            },
            "subjects": subjects,
        },
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "reader", "namespace": namespace},
            "rules": rules,
        },
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "reader", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": subjects,
        },
    ]


@contextlib.contextmanager
def _deleted_afterwards(api: ApiServer, objects: list[dict[str, Any]]) -> Iterator[None]:
    try:
        yield
    finally:
        for obj in objects:
            with contextlib.suppress(NotFoundError):
                api.client.delete(ObjectRef.of(obj))


@pytest.mark.parametrize(
    ("group_version", "plural", "listed"),
    [
        ("apps/v1", "deployments", ("Deployment", True, ["deploy"])),
        ("apps/v1", "daemonsets", ("DaemonSet", True, ["ds"])),
        (RBAC, "clusterroles", ("ClusterRole", False, None)),
        (RBAC, "clusterrolebindings", ("ClusterRoleBinding", False, None)),
        (RBAC, "roles", ("Role", True, None)),
        (RBAC, "rolebindings", ("RoleBinding", True, None)),
    ],
)
def test_discovery_lists_the_kinds_of_the_installation(
    api: ApiServer, group_version: str, plural: str, listed: tuple[str, bool, list[str] | None]
) -> None:
    """Each with its kind, whether it is namespaced, and its short names; the ``apps`` kinds with
    a status subresource, the RBAC kinds without one."""
    status, listing = api.request("GET", f"/apis/{group_version}")
    assert status == 200, listing
    (entry,) = [r for r in listing["resources"] if r["name"] == plural]
    assert (entry["kind"], entry["namespaced"], entry.get("shortNames")) == listed
    subresources = {r["name"] for r in listing["resources"] if r["name"].startswith(f"{plural}/")}
    assert (f"{plural}/status" in subresources) == (group_version == "apps/v1")


def test_every_kind_is_created_changed_and_deleted_by_server_side_apply(api: ApiServer) -> None:
    unique = uuid.uuid4().hex[:8]
    objects = [
        _deployment(api.namespace),
        _daemon_set(api.namespace),
        *_rbac(api.namespace, unique),
    ]
    with _deleted_afterwards(api, objects):
        for obj in objects:
            stored = api.client.apply(obj, field_manager=FIELD_MANAGER)
            assert (stored["kind"], stored["metadata"]["name"]) == (
                obj["kind"],
                obj["metadata"]["name"],
            )
            assert ("namespace" in stored["metadata"]) == ("namespace" in obj["metadata"])
        changed = {
            **objects[0],
            "metadata": {**objects[0]["metadata"], "labels": {"changed": "yes"}},
        }
        api.client.apply(changed, field_manager=FIELD_MANAGER)
        assert api.client.get(ObjectRef.of(changed))["metadata"]["labels"] == {"changed": "yes"}
        role = api.client.get(ObjectRef.of(objects[2]))
        assert role["rules"] == objects[2]["rules"]
        binding = api.client.get(ObjectRef.of(objects[3]))
        assert (binding["roleRef"], binding["subjects"]) == (
            objects[3]["roleRef"],
            objects[3]["subjects"],
        )
        for obj in objects:
            api.client.delete(ObjectRef.of(obj))
        for obj in objects:
            if obj["kind"] not in ("Deployment", "DaemonSet"):  # their pods go first
                assert api.gone(ObjectRef.of(obj)), obj["kind"]


def test_a_deployments_status_is_written_through_its_status_subresource_only(
    api: ApiServer,
) -> None:
    """What ``podwright install`` waits on (``observedGeneration``, ``updatedReplicas``,
    ``readyReplicas``, ``availableReplicas``) is the deployment controller's to write, through
    ``deployments/status``. The answers are compared, not a later read: on a real cluster the
    controller writes the status again at any time."""
    ref = ObjectRef("apps/v1", "Deployment", api.namespace, "operator")
    created = api.client.apply(_deployment(api.namespace), field_manager=FIELD_MANAGER)
    assert created["metadata"]["generation"] == 1
    status = {"observedGeneration": 1, "replicas": 0, "readyReplicas": 0}
    written = api.client.patch_status(
        ref, {"spec": {"replicas": 5}, "status": status}, PatchType.MERGE
    )
    assert written["spec"]["replicas"] == 0
    assert written["status"]["observedGeneration"] == 1
    main = api.client.patch(
        ref, {"spec": {"replicas": 0, "paused": True}, "status": {"replicas": 7}}, PatchType.MERGE
    )
    assert main["spec"]["paused"] is True
    assert main["status"].get("replicas") != 7
    assert main["metadata"]["generation"] == 2
