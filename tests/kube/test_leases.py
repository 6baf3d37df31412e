"""Leases and Nodes as the API server keeps them: what leader election and node heartbeats rely on.

* Leases (``coordination.k8s.io/v1``): a create of a name that exists is 409 AlreadyExists, so one
  candidate wins an election; an update with a stale resourceVersion is 409 Conflict, so a holder
  that lost the lease cannot renew it over the new holder's; every field leader election writes
  round-trips, the MicroTimes in ``metav1.MicroTime``'s format (``2006-01-02T15:04:05.000000Z``);
  ``ValidateLeaseSpec`` (``pkg/apis/coordination/validation/validation.go``) refuses a
  ``leaseDurationSeconds`` not above 0 and a negative ``leaseTransitions``, on create and update.
* Nodes: ``nodeStrategy`` (``pkg/registry/core/node/strategy.go``) keeps the status given on
  create (a kubelet registers its node with it), keeps the old status on an update of the node
  (``PrepareForUpdate``: ``newNode.Status = oldNode.Status``) and the old spec on an update of
  ``nodes/status`` (``nodeStatusStrategy.PrepareForUpdate``: ``newNode.Spec = oldNode.Spec``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ConflictError,
    InvalidError,
    NotFoundError,
)
from tests.kube.support import ApiServer
from tests.node_sim.rest import NODES, call, leases_path

MICRO_TIME = "2026-11-24T23:05:20.123456Z"


def _lease(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name},
        "spec": {"holderIdentity": "candidate-a", "leaseDurationSeconds": 15, **spec},
    }


def test_a_second_create_of_a_lease_is_already_exists(api: ApiServer) -> None:
    path = leases_path(api.namespace)
    call(api.api_client, "POST", path, _lease("leader"))
    with pytest.raises(AlreadyExistsError):
        call(api.api_client, "POST", path, _lease("leader", holderIdentity="candidate-b"))
    assert call(api.api_client, "GET", f"{path}/leader")["spec"]["holderIdentity"] == "candidate-a"


def test_a_renewal_from_a_stale_resource_version_is_a_conflict(api: ApiServer) -> None:
    path = leases_path(api.namespace)
    stale = call(api.api_client, "POST", path, _lease("leader"))
    taken = {**stale, "spec": {**stale["spec"], "holderIdentity": "candidate-b"}}
    call(api.api_client, "PUT", f"{path}/leader", taken)
    renewed = {**stale, "spec": {**stale["spec"], "renewTime": MICRO_TIME}}
    with pytest.raises(ConflictError):
        call(api.api_client, "PUT", f"{path}/leader", renewed)
    assert call(api.api_client, "GET", f"{path}/leader")["spec"]["holderIdentity"] == "candidate-b"


def test_the_fields_of_leader_election_round_trip(api: ApiServer) -> None:
    spec = {
        "holderIdentity": "candidate-a",
        "leaseDurationSeconds": 15,
        "acquireTime": MICRO_TIME,
        "renewTime": MICRO_TIME,
        "leaseTransitions": 3,
    }
    created = call(api.api_client, "POST", leases_path(api.namespace), _lease("leader", **spec))
    assert created["spec"] == spec
    read = call(api.api_client, "GET", f"{leases_path(api.namespace)}/leader")
    assert read["spec"] == spec


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "leaseDurationSeconds",
            0,
            "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
        ),
        (
            "leaseTransitions",
            -1,
            "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
        ),
    ],
)
def test_validation_refuses_what_validate_lease_spec_refuses_on_create_and_update(
    api: ApiServer, field: str, value: int, message: str
) -> None:
    path = leases_path(api.namespace)
    with pytest.raises(InvalidError) as refused:
        call(api.api_client, "POST", path, _lease("refused", **{field: value}))
    assert f'Lease.coordination.k8s.io "refused" is invalid: {message}' in str(refused.value)
    lease = call(api.api_client, "POST", path, _lease("updated"))
    with pytest.raises(InvalidError) as refused:
        call(
            api.api_client,
            "PUT",
            f"{path}/updated",
            {**lease, "spec": {**lease["spec"], field: value}},
        )
    assert message in str(refused.value)


@pytest.fixture
def node(api: ApiServer) -> Iterator[dict[str, Any]]:
    """A Node of the test's own (no kubelet behind it), created with a status, deleted after."""
    name = f"podwright-test-node-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"podwright.dev/test": "nodes"}},
        "spec": {"unschedulable": True},
        "status": {
            "capacity": {"cpu": "1", "pods": "10"},
            "allocatable": {"cpu": "1", "pods": "10"},
        },
    }
    created = call(api.api_client, "POST", NODES, body)
    try:
        yield created
    finally:
        with contextlib.suppress(NotFoundError):
            call(api.api_client, "DELETE", f"{NODES}/{name}")


def test_a_node_keeps_the_status_it_is_created_with(node: dict[str, Any]) -> None:
    assert node["status"]["capacity"] == {"cpu": "1", "pods": "10"}


def test_a_nodes_status_is_written_through_nodes_status_only(
    api: ApiServer, node: dict[str, Any]
) -> None:
    path = f"{NODES}/{node['metadata']['name']}"
    merge = "application/merge-patch+json"
    changed = {"spec": {"unschedulable": False}, "status": {"capacity": {"cpu": "2"}}}
    updated = call(api.api_client, "PATCH", path, changed, content_type=merge)
    assert not updated["spec"].get("unschedulable")  # a real server leaves false out
    assert updated["status"]["capacity"] == {"cpu": "1", "pods": "10"}
    reported = {"spec": {"unschedulable": True}, "status": {"capacity": {"cpu": "4"}}}
    updated = call(api.api_client, "PATCH", f"{path}/status", reported, content_type=merge)
    assert not updated["spec"].get("unschedulable")
    assert updated["status"]["capacity"] == {"cpu": "4", "pods": "10"}
