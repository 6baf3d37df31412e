"""Secrets as the API server keeps them: what the webhook CA Secret shared by the operator's
replicas relies on (``podwright.adapters.kubernetes.ca_secret``), with podwright's own client.

* ``data`` (base64), ``type`` and labels round-trip as written, on create and on replace;
* a second create of a name is 409 AlreadyExists, so of two replicas creating the Secret at
  once one wins, and the other's CA is never stored;
* a replace with a stale resourceVersion is 409 Conflict, so of two replicas rotating the CA
  one wins; a replace with the current one is stored, under a new resourceVersion;
* reading a Secret that does not exist is 404.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from podwright.engine.kubernetes_port import AlreadyExistsError, ConflictError, NotFoundError
from tests.kube.support import ApiServer


def _encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _secret(api: ApiServer, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": api.namespace,
            "labels": {"app.kubernetes.io/managed-by": "podwright"},
        },
        "type": "Opaque",
        "data": {key.replace("_", "."): _encoded(value) for key, value in data.items()},
    }


def test_a_secrets_data_type_and_labels_round_trip(api: ApiServer) -> None:
    created = api.client.create(_secret(api, "ca", ca_crt="first", bundle_crt="first\n"))
    read = api.client.get(api.ref("Secret", "ca"))
    for answer in (created, read):
        assert answer["type"] == "Opaque"
        assert answer["data"] == {"ca.crt": _encoded("first"), "bundle.crt": _encoded("first\n")}
        assert answer["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "podwright"}
    assert read["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_a_second_create_of_a_secret_is_already_exists(api: ApiServer) -> None:
    api.client.create(_secret(api, "ca", ca_crt="first"))
    with pytest.raises(AlreadyExistsError):
        api.client.create(_secret(api, "ca", ca_crt="second"))
    assert api.client.get(api.ref("Secret", "ca"))["data"] == {"ca.crt": _encoded("first")}


def test_a_replace_from_a_stale_resource_version_is_a_conflict(api: ApiServer) -> None:
    read = api.client.create(_secret(api, "ca", ca_crt="first"))
    version = read["metadata"]["resourceVersion"]
    ref = api.ref("Secret", "ca")
    winner = {**read, "data": {"ca.crt": _encoded("winner"), "retiring.key": _encoded("k")}}
    replaced = api.client.replace(ref, winner)
    assert replaced["metadata"]["resourceVersion"] != version
    assert replaced["data"] == winner["data"]
    loser = {**read, "data": {"ca.crt": _encoded("loser")}}
    with pytest.raises(ConflictError) as refused:
        api.client.replace(ref, loser)
    assert not isinstance(refused.value, AlreadyExistsError)
    assert api.client.get(ref)["data"] == winner["data"]


def test_a_secret_that_does_not_exist_is_not_found(api: ApiServer) -> None:
    with pytest.raises(NotFoundError):
        api.client.get(api.ref("Secret", "no-such-secret"))
