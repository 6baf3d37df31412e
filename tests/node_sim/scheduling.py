"""Where the node simulator binds a pod no scheduler took: a pure decision over its nodes.

A small part of kube-scheduler's filters, enough for podwright's pods: the ``NodeResourcesFit``
filter (a pod's requests against a node's allocatable minus what the pods bound to it request,
extended resources such as ``nvidia.com/gpu`` and ``smarter-devices/fuse`` included, and the
``pods`` count) and the ``NodeAffinity`` filter's ``nodeSelector`` part. A pod's request is the
scheduler's (``computePodResourceRequest`` in ``pkg/scheduler/framework/types.go``): per resource,
the sum over its containers or the largest of its init containers, whichever is more; a container
that sets only a limit requests that much (the API server's defaulting). Node affinity, taints and
tolerations, topology spread and priorities are left out: the simulator's nodes have no taints.
The first node that fits wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

Amounts = dict[str, Decimal]


@dataclass(frozen=True)
class Candidate:
    """A node as the decision sees it: its name, labels and allocatable amounts."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, Decimal]


def pod_requests(pod: Mapping[str, Any]) -> Amounts:
    """What a pod asks of a node, the ``pods`` slot included."""
    spec = pod.get("spec") or {}
    total: Amounts = {"pods": Decimal(1)}
    for container in spec.get("containers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def choose_node(
    pod: Mapping[str, Any], nodes: Sequence[Candidate], bound: Mapping[str, Iterable[Amounts]]
) -> str | None:
    """The first of ``nodes`` whose labels match the pod's ``nodeSelector`` and whose allocatable
    still holds its requests once ``bound[node]`` (the requests of the pods on it) are counted;
    None when none does."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    wanted = pod_requests(pod)
    for node in nodes:
        if any(node.labels.get(key) != value for key, value in selector.items()):
            continue
        used: Amounts = {}
        for requests in bound.get(node.name, ()):
            for name, amount in requests.items():
                used[name] = used.get(name, Decimal(0)) + amount
        if all(
            amount <= node.allocatable.get(name, Decimal(0)) - used.get(name, Decimal(0))
            for name, amount in wanted.items()
            if amount > 0
        ):
            return node.name
    return None


def _container_requests(container: Mapping[str, Any]) -> Amounts:
    resources = container.get("resources") or {}
    amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(str(value)) for name, value in amounts.items()}
