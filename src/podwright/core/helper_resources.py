"""The cpu and memory of the containers podwright adds to a pod: clones, FUSE adapters, the shim.

A workload's own container takes what its ``compute`` says. The containers podwright adds beside
it (a ``git`` source's clone, an ``s3`` source's FUSE adapter sidecar, the FUSE proxy's shim
installer) must say something too: a namespace's ResourceQuota that constrains ``cpu`` or
``memory`` (``requests.cpu``, ``limits.memory``...) makes the API server refuse a pod any of whose
containers, init containers included, does not specify that resource, before any amount is
compared: ``failed quota: tiny: must specify limits.memory for: clone-git-course`` (Kubernetes'
``pkg/quota/v1/evaluator/core/pods.go``, ``podEvaluator.Constraints``). Most multi-tenant
clusters have such quotas, so every container podwright adds carries requests and limits for
both: a rendered workload's from the cluster profile's ``helperResources``, the shim installer's
from ``FuseProxySetup.resources``, :data:`DEFAULT_HELPER_RESOURCES` when they say nothing.
Ephemeral storage is left out: the list of resources a quota makes mandatory is frozen at cpu
and memory ("do not add more resources to this list!", in the same file).

The defaults, and why:

* requests ``cpu: 100m, memory: 128Mi``: what a clone or an S3 adapter needs at rest (the figures
  Istio gives its sidecar by default). They cost a quota little: a sidecar's requests add to the
  pod's, an init container's count only where they exceed the pod's other containers' (the
  ``resource.PodRequests`` of ``component-helpers``).
* limits ``cpu: 1, memory: 512Mi``: room enough that cloning a mid-sized repository (``git
  index-pack`` resolving deltas) or an S3 adapter's multipart buffers are not OOM-killed, which
  would fail the pod; bounded, so a runaway helper cannot take a node.

A cluster that clones large repositories, or whose quotas or LimitRanges are tighter, sets its
own figures in the profile.
"""

from __future__ import annotations

import dataclasses
import functools
from decimal import Decimal

from podwright.core.quantities import format_quantity

RESOURCE_NAMES = ("cpu", "memory")
"""The resources a helper container states: those a ResourceQuota can make mandatory."""

MEBIBYTE = 2**20


@dataclasses.dataclass(frozen=True)
class Amounts:
    """An amount of each resource: cores of cpu, bytes of memory."""

    cpu: Decimal
    memory: Decimal

    def manifest(self) -> dict[str, str]:
        """The amounts as a container's ``requests`` or ``limits`` spells them."""
        cpu, memory = self._spelled
        return {"cpu": cpu, "memory": memory}

    @functools.cached_property
    def _spelled(self) -> tuple[str, str]:
        """Spelled once: every helper container of every rendering states them."""
        return format_quantity(self.cpu), format_quantity(self.memory)


@dataclasses.dataclass(frozen=True)
class HelperResources:
    """The requests and limits of every container podwright adds to a pod."""

    requests: Amounts
    """What the scheduler reserves for each, and a quota's ``requests.*`` count."""
    limits: Amounts
    """What each may use at most, and a quota's ``limits.*`` count; each at least its request
    (the API server refuses a container whose request exceeds its limit)."""

    def manifest(self) -> dict[str, dict[str, str]]:
        """A container's ``resources``."""
        return {"requests": self.requests.manifest(), "limits": self.limits.manifest()}


DEFAULT_HELPER_RESOURCES = HelperResources(
    requests=Amounts(cpu=Decimal("0.1"), memory=Decimal(128 * MEBIBYTE)),
    limits=Amounts(cpu=Decimal(1), memory=Decimal(512 * MEBIBYTE)),
)
