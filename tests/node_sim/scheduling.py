"""Where the node simulator binds a pod no scheduler took: a pure decision over its nodes.

A small part of kube-scheduler's filters, enough for podwright's pods and for telling whether a
node that is not the simulator's could take a pod:

* ``NodeResourcesFit``: a pod's requests against a node's allocatable minus what the pods bound
  to it request, extended resources such as ``nvidia.com/gpu`` and ``smarter-devices/fuse``
  included, and the ``pods`` count. A pod's request is the scheduler's
  (``computePodResourceRequest`` in ``pkg/scheduler/framework/types.go``): per resource, the sum
  over its containers or the largest of its init containers, whichever is more; a container that
  sets only a limit requests that much (the API server's defaulting);
* ``NodeAffinity``: the ``nodeSelector``, and the ``matchExpressions`` of
  ``requiredDuringSchedulingIgnoredDuringExecution`` (terms ORed, a term's expressions ANDed;
  ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``); ``matchFields`` are left out;
* ``TaintToleration``: a taint of effect ``NoSchedule`` or ``NoExecute`` keeps every pod that does
  not tolerate it away (``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go``,
  ``Filter``), a toleration matching as ``ToleratesTaint`` in
  ``staging/src/k8s.io/api/core/v1/toleration.go`` says;
* ``NodeUnschedulable``: a cordoned node takes only pods that tolerate
  ``node.kubernetes.io/unschedulable:NoSchedule``.

Topology spread, inter-pod affinity and priorities are left out. The first node that fits wins.
What a node's pods request is summed by the caller once per look (:func:`add_requests`), as the
scheduler's cache keeps each ``NodeInfo``'s ``Requested``: with thousands of pods, summing them
again for every pending pod made each decision quadratic. :class:`Look` sorts the pods of one
look into those on the simulator's nodes and those pending.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

Amounts = dict[str, Decimal]
FILTERING_EFFECTS = ("NoSchedule", "NoExecute")
"""The taint effects the ``TaintToleration`` filter keeps untolerating pods away with."""
UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
"""What ``NodeUnschedulable`` checks a cordoned node's pods against
(``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go``)."""


@dataclass(frozen=True)
class Candidate:
    """A node as the decision sees it: its name, labels, allocatable amounts and taints."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, Decimal]
    taints: Sequence[Mapping[str, str]] = ()
    unschedulable: bool = False

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> Candidate:
        """A Node object as a candidate (its ``status.allocatable``)."""
        spec, status = node.get("spec") or {}, node.get("status") or {}
        return cls(
            node["metadata"]["name"],
            dict(node["metadata"].get("labels") or {}),
            {
                name: parse_quantity(str(value))
                for name, value in (status.get("allocatable") or {}).items()
            },
            tuple(spec.get("taints") or ()),
            bool(spec.get("unschedulable")),
        )


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
    """The first of ``nodes`` that the pod's node affinity selects, whose taints it tolerates,
    and whose allocatable still holds its requests once ``used[node]`` (what the pods on it
    request, summed with :func:`add_requests`) is counted; None when none does."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    wanted = pod_requests(pod)
    for node in nodes:
        if not selects(spec, node.labels) or not tolerates(tolerations, node):
            continue
        taken = used.get(node.name, {})
        if all(
            amount <= node.allocatable.get(name, Decimal(0)) - taken.get(name, Decimal(0))
            for name, amount in wanted.items()
            if amount > 0
        ):
            return node.name
    return None


def selects(spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a pod's ``nodeSelector`` and required node affinity select a node of ``labels``."""
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    return any(
        all(_matches(expression, labels) for expression in term.get("matchExpressions") or [])
        for term in required.get("nodeSelectorTerms") or []
    )


def _matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A node selector requirement (``nodeaffinity``'s ``nodeSelectorRequirementsAsSelector``)."""
    key, operator = expression["key"], expression["operator"]
    values = expression.get("values") or []
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if key not in labels:
        return False
    if operator == "In":
        return labels[key] in values
    if operator == "NotIn":
        return labels[key] not in values
    if not labels[key].lstrip("-").isdigit():
        return False
    if operator == "Gt":
        return int(labels[key]) > int(values[0])
    if operator == "Lt":
        return int(labels[key]) < int(values[0])
    raise ValueError(
        f"node selector operator {operator!r}: In, NotIn, Exists, DoesNotExist, Gt, Lt"
    )


def tolerates(tolerations: Sequence[Mapping[str, Any]], node: Candidate) -> bool:
    """Whether a pod of ``tolerations`` may be scheduled to ``node``: every taint of a filtering
    effect tolerated, and a cordoned node's ``unschedulable`` taint too."""
    taints = [taint for taint in node.taints if taint.get("effect") in FILTERING_EFFECTS]
    if node.unschedulable:
        taints.append(UNSCHEDULABLE_TAINT)
    return all(any(toleration_matches(t, taint) for t in tolerations) for taint in taints)


def toleration_matches(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    """``Toleration.ToleratesTaint``: an empty effect or key matches any, ``Exists`` any value,
    ``Equal`` (the default) the same value."""
    effect, key = toleration.get("effect"), toleration.get("key")
    if effect and effect != taint.get("effect"):
        return False
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def _container_requests(container: Mapping[str, Any]) -> Amounts:
    resources = container.get("resources") or {}
    amounts = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(str(value)) for name, value in amounts.items()}
