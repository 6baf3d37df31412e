"""ResourceQuota admission of a pod's create, as the API server's quota admission plugin does it.

The plugin (``checkQuotas`` in
``staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go``) works in two
passes over the namespace's quotas:

1. Constraints, for every quota before any amount: a quota that tracks cpu or memory (``cpu``,
   ``memory``, ``requests.cpu``, ``requests.memory``, ``limits.cpu``, ``limits.memory``: the
   ``validationSet`` of ``pkg/quota/v1/evaluator/core/pods.go``) needs every container, init
   containers included, to specify it (``podEvaluator.Constraints`` and
   ``enforcePodContainerConstraints``; a request of cpu counts as ``cpu`` and ``requests.cpu``, as
   ``podComputeUsageHelper`` says). Otherwise: 403 ``failed quota: <quota>: must specify
   <resource> for: <containers>; <resource> for: ...``, the resources sorted, each one's container
   names sorted and joined by commas.
2. Amounts: the pod's usage (``PodUsageFunc``: the pod's requests and limits as
   ``resource.PodRequests``/``PodLimits`` of ``staging/src/k8s.io/component-helpers/resource/
   helpers.go`` add them up: the containers and the sidecars summed, each other init container
   with the sidecars started before it, the larger of the two), added to what the namespace's
   other pods that have not ended use, against each hard limit the usage names: 403 ``exceeded
   quota: <quota>, requested: ..., used: ..., limited: ...``.

Quota scopes, pod-level resources and overhead are not modelled: podwright's pods use none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from kubernetes.utils.quantity import parse_quantity

from podwright.core.quantities import format_quantity
from tests.k8s_emulator.strategies import forbidden_pod

Obj = dict[str, Any]

MANDATORY = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)
"""What a quota that tracks it makes every container specify (``validationSet``)."""

_COUNTED = ("cpu", "memory", "ephemeral-storage")
"""The native resources whose requests and limits a quota counts."""


def admit_pod_quotas(pod: Obj, quotas: Iterable[Obj], others: Iterable[Obj]) -> None:
    """Admit ``pod`` under the ``quotas`` of its namespace, whose pods ``others`` (already
    stored, still running or pending) use part of them; raises the plugin's 403 ``ApiError``."""
    hard_limits = [
        (
            str(quota["metadata"]["name"]),
            {
                name: parse_quantity(amount)
                for name, amount in ((quota.get("spec") or {}).get("hard") or {}).items()
            },
        )
        for quota in quotas
    ]
    for name, hard in hard_limits:
        missing = _missing(pod, MANDATORY.intersection(hard))
        if missing:
            raise forbidden_pod(pod, f"failed quota: {name}: must specify {missing}")
    requested = _pod_usage(pod)
    used: dict[str, Decimal] = {}
    for other in others:
        for resource, amount in _pod_usage(other).items():
            used[resource] = used.get(resource, Decimal(0)) + amount
    for name, hard in hard_limits:
        over = sorted(
            resource
            for resource, limit in hard.items()
            if requested.get(resource)
            and used.get(resource, Decimal(0)) + requested[resource] > limit
        )
        if over:
            raise forbidden_pod(
                pod,
                f"exceeded quota: {name}, requested: {_listing(requested, over)}, "
                f"used: {_listing(used, over)}, limited: {_listing(hard, over)}",
            )


def _missing(pod: Obj, required: frozenset[str]) -> str:
    """``enforcePodContainerConstraints`` over the containers, then the init containers:
    ``<resource> for: <names>`` per resource some container leaves out, or ``""``."""
    without: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        stated = _compute_usage(resources.get("requests") or {}, resources.get("limits") or {})
        for resource in required - stated.keys():
            without.setdefault(resource, set()).add(str(container.get("name")))
    return "; ".join(
        f"{resource} for: {','.join(sorted(without[resource]))}" for resource in sorted(without)
    )


def _pod_usage(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the pod counts against a quota: one of ``pods`` and its compute resources."""
    spec = pod.get("spec") or {}
    usage = _compute_usage(_pod_total(spec, "requests"), _pod_total(spec, "limits"))
    return {"pods": Decimal(1), **usage}


def _pod_total(spec: Mapping[str, Any], section: str) -> dict[str, Decimal]:
    """``aggregateContainerResourcesByFn``: the containers and the sidecars (init containers
    with ``restartPolicy: Always``) summed, or, when larger, what an init container needs with
    the sidecars started before it."""

    def amounts(container: Mapping[str, Any]) -> dict[str, Decimal]:
        stated = (container.get("resources") or {}).get(section) or {}
        return {name: parse_quantity(amount) for name, amount in stated.items()}

    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        _add(total, amounts(container))
    sidecars: dict[str, Decimal] = {}
    while_initializing: dict[str, Decimal] = {}
    for container in spec.get("initContainers") or []:
        if container.get("restartPolicy") == "Always":
            _add(total, amounts(container))
            _add(sidecars, amounts(container))
            needs = dict(sidecars)
        else:
            needs = amounts(container)
            _add(needs, sidecars)
        _max(while_initializing, needs)
    _max(total, while_initializing)
    return total


def _compute_usage(requests: Mapping[str, Any], limits: Mapping[str, Any]) -> dict[str, Decimal]:
    """``podComputeUsageHelper``: what requests and limits count as; a request of cpu is both
    ``cpu`` and ``requests.cpu``, an extended resource's request ``requests.<name>``."""
    usage: dict[str, Decimal] = {}
    for resource in _COUNTED:
        if resource in requests:
            usage[resource] = usage[f"requests.{resource}"] = parse_quantity(requests[resource])
        if resource in limits:
            usage[f"limits.{resource}"] = parse_quantity(limits[resource])
    for resource, amount in requests.items():
        if "/" in resource and not resource.startswith(("kubernetes.io/", "requests.")):
            usage[f"requests.{resource}"] = parse_quantity(amount)
    return usage


def _add(total: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, Decimal(0)) + amount


def _max(total: dict[str, Decimal], amounts: Mapping[str, Decimal]) -> None:
    for name, amount in amounts.items():
        total[name] = max(total.get(name, Decimal(0)), amount)


def _listing(amounts: Mapping[str, Decimal], names: list[str]) -> str:
    return ",".join(f"{name}={format_quantity(amounts.get(name, Decimal(0)))}" for name in names)
