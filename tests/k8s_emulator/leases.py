"""What the API server checks in a ``coordination.k8s.io/v1`` Lease, for the emulator's store.

Leases are what leader election (client-go's ``leaderelection`` with a ``LeaseLock``) and node
heartbeats (the kubelet's lease controller, in the ``kube-node-lease`` namespace every cluster
has) are built on. Their semantics are the store's own (409 AlreadyExists on create, 409 Conflict
on an update with a stale resourceVersion); this module adds what ``ValidateLeaseSpec`` in
``pkg/apis/coordination/validation/validation.go`` refuses, on create and on update:
``leaseDurationSeconds`` not above 0, and ``leaseTransitions`` below 0. The MicroTimes
(``acquireTime``, ``renewTime``) need no validation there: they are stored as given, in the format
``2006-01-02T15:04:05.000000Z`` (``metav1.MicroTime``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.k8s_emulator.errors import ApiError

NODE_LEASE_NAMESPACE = "kube-node-lease"
"""Where kubelets keep their heartbeat Leases; every cluster has it (the API server creates it)."""


def validate_lease(lease: Mapping[str, Any]) -> None:
    """Refuse a Lease whose spec ``ValidateLeaseSpec`` refuses, with the server's 422."""
    spec = lease.get("spec") or {}
    problems = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        problems.append(
            f"spec.leaseDurationSeconds: Invalid value: {duration}: must be greater than 0"
        )
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        problems.append(
            f"spec.leaseTransitions: Invalid value: {transitions}: must be greater than or equal "
            "to 0"
        )
    if not problems:
        return
    name = (lease.get("metadata") or {}).get("name", "")
    listed = problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]"
    raise ApiError(
        422,
        "Invalid",
        f'Lease.coordination.k8s.io "{name}" is invalid: {listed}',
        details={"name": name, "group": "coordination.k8s.io", "kind": "Lease"},
    )
