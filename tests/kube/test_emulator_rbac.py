"""The emulator's RBAC switch and users (``Emulator(rbac=True)``, ``add_user``, ``users=``),
what tests use to be a user; what RBAC then does is pinned against a real server by
``test_rbac_contract.py``.

* Off (the default) nothing is checked: any token, or none, may do anything, and an access
  review answers allowed (a server whose authorizer is AlwaysAllow).
* On, a request with no ``Authorization`` is the admin (``system:masters``), so that fixtures
  work unchanged; a token of ``add_user`` (or ``users=``) is that user and its groups, through
  a kubeconfig that ``write_kubeconfig(..., token=...)`` writes, as podwright's own client reads
  it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s_client

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.engine.kubernetes_port import ForbiddenError
from tests.k8s_emulator import Emulator
from tests.k8s_emulator.rbac import SELF_SUBJECT_ACCESS_REVIEWS
from tests.kube.support import write_kubeconfig
from tests.node_sim.rest import send


def _namespaces(client: KubernetesClient, *names: str) -> None:
    for name in names:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def _grant_configmaps(client: KubernetesClient, namespace: str, subject: dict[str, str]) -> None:
    """A Role listing ConfigMaps in ``namespace``, bound to ``subject`` (the admin writes)."""
    client.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reader", "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        }
    )
    client.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", **subject}],
        }
    )


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(rbac=True, users={"team-token": ("carol", ("team-a",))}) as running:
        admin = KubernetesClient.for_host(running.url)
        _namespaces(admin, "team-a", "team-b")
        admin.close()
        yield running


def _client(tmp_path: Path, emulator: Emulator, token: str) -> KubernetesClient:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", emulator.url, token=token)
    return KubernetesClient(connect(str(kubeconfig)))


def test_a_token_of_add_user_is_its_user_through_a_kubeconfig(
    emulator: Emulator, tmp_path: Path
) -> None:
    admin = KubernetesClient.for_host(emulator.url)
    _grant_configmaps(admin, "team-a", {"kind": "User", "name": "alice"})
    alice = _client(tmp_path, emulator, emulator.add_user("alice"))
    try:
        items, _ = alice.list_objects("v1", "ConfigMap", namespace="team-a")
        assert [c["metadata"]["name"] for c in items] == ["kube-root-ca.crt"]
        with pytest.raises(ForbiddenError, match='User "alice" cannot list resource "configmaps"'):
            alice.list_objects("v1", "ConfigMap", namespace="team-b")
    finally:
        alice.close()
        admin.close()


def test_a_token_of_users_is_its_user_in_its_groups(emulator: Emulator, tmp_path: Path) -> None:
    admin = KubernetesClient.for_host(emulator.url)
    _grant_configmaps(admin, "team-b", {"kind": "Group", "name": "team-a"})
    carol = _client(tmp_path, emulator, "team-token")
    try:
        assert carol.list_objects("v1", "ConfigMap", namespace="team-b")[0]
        with pytest.raises(ForbiddenError, match='User "carol" cannot list'):
            carol.list_objects("v1", "ConfigMap", namespace="team-a")
    finally:
        carol.close()
        admin.close()


def test_without_rbac_nothing_is_checked(tmp_path: Path) -> None:
    with Emulator() as running:
        client = _client(tmp_path, running, "whatever")
        try:
            _namespaces(client, "team-a")
            assert client.list_objects("v1", "ConfigMap", namespace="team-a")[0]
        finally:
            client.close()
        raw = k8s_client.ApiClient(k8s_client.Configuration(host=running.url))
        with contextlib.closing(raw):
            review = {"spec": {"resourceAttributes": {"verb": "delete", "resource": "nodes"}}}
            answer = send(raw, "POST", SELF_SUBJECT_ACCESS_REVIEWS, review)
        assert (answer.status, answer.body["status"]) == (201, {"allowed": True})
        with pytest.raises(ValueError, match="rbac=True"):
            running.add_user("alice")
    with pytest.raises(ValueError, match="rbac=True"):
        Emulator(users={"token": ("alice", ())})


def test_write_kubeconfig_without_a_token_is_unchanged(tmp_path: Path) -> None:
    config = json.loads(write_kubeconfig(tmp_path / "k", "http://127.0.0.1:1").read_text())
    assert config["users"] == [{"name": "emu", "user": {"token": "unused"}}]
    with_token = json.loads(
        write_kubeconfig(tmp_path / "t", "http://127.0.0.1:1", token="secret").read_text()
    )
    assert with_token["users"] == [{"name": "emu", "user": {"token": "secret"}}]
