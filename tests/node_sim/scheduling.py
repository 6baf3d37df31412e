"""Where the node simulator binds a pod no scheduler took: a pure decision over its nodes.

A small part of kube-scheduler's filters, enough for podwright's pods: the ``NodeResourcesFit``
filter (a pod's requests against a node's allocatable minus what the pods bound to it request,
extended resources such as ``nvidia.com/gpu`` and ``smarter-devices/fuse`` included, and the
``pods`` count) and the ``NodeAffinity`` filter's ``nodeSelector`` part. A pod's request is the
scheduler's (``computePodResourceRequest`` in ``pkg/scheduler/framework/types.go``): per resource,
the sum over its containers or the largest of its init containers, whichever is more; a container
that sets only a limit requests that much (the API server's defaulting). Node affinity, taints and
tolerations, topology spread and priorities are left out: the simulator's nodes have no taints.
The first node that fits wins. What a node's pods request is summed by the caller once per look
(:func:`add_requests`), as the scheduler's cache keeps each ``NodeInfo``'s ``Requested``: with
thousands of pods, summing them again for every pending pod made each decision quadratic.
:class:`Look` sorts the pods of one look into those on the simulator's nodes and those pending.
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


@dataclass(frozen=True)
class Look:
    """One look at the pods from the simulator's nodes: those on them, those waiting for a
    node, and what each node's pods request."""

    on_nodes: list[tuple[Mapping[str, Any], str]]
    """Each pod bound to one of the nodes, with its node."""
    pending: list[Mapping[str, Any]]
    """The pods bound to no node, and not being deleted."""
    used: dict[str, Amounts]
    """Per node, what its pods that have not ended request."""

    @classmethod
    def of(
        cls, pods: Iterable[Mapping[str, Any]], nodes: Iterable[str], bound: Mapping[str, str]
    ) -> Look:
        """Sort ``pods`` onto ``nodes``; ``bound`` (pod uid → node) names the pods the simulator
        bound, whose copies may not show it yet: they are on their node all the same."""
        look = cls([], [], {name: {} for name in nodes})
        for pod in pods:
            metadata, spec = pod["metadata"], pod["spec"]
            node = spec.get("nodeName") or bound.get(metadata["uid"])
            if node in look.used:
                look.on_nodes.append((pod, node))
                if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                    add_requests(look.used[node], pod_requests(pod))
            elif not node and not metadata.get("deletionTimestamp"):
                look.pending.append(pod)
        return look


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


def add_requests(used: Amounts, requests: Mapping[str, Decimal]) -> None:
    """Count a pod's ``requests`` in ``used``, a node's requested amounts so far."""
    for name, amount in requests.items():
        used[name] = used.get(name, Decimal(0)) + amount


def choose_node(
    pod: Mapping[str, Any], nodes: Sequence[Candidate], used: Mapping[str, Mapping[str, Decimal]]
) -> str | None:
    """The first of ``nodes`` whose labels match the pod's ``nodeSelector`` and whose allocatable
    still holds its requests once ``used[node]`` (what the pods on it request, summed with
    :func:`add_requests`) is counted; None when none does."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    wanted = pod_requests(pod)
    for node in nodes:
        if any(node.labels.get(key) != value for key, value in selector.items()):
            continue
        taken = used.get(node.name, {})
        if all(
            amount <= node.allocatable.get(name, Decimal(0)) - taken.get(name, Decimal(0))
            for name, amount in wanted.items()
            if amount > 0
        ):
            return node.name
    return None


def _container_requests(container: Mapping[str, Any]) -> Amounts:
    resources = container.get("resources") or {}
    amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(str(value)) for name, value in amounts.items()}
