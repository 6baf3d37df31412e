"""What a ResourceQuota refusal says: can the request ever fit, or must it wait?

The quota admission plugin refuses a create with 403 Forbidden and a message of the form::

    exceeded quota: compute, requested: limits.cpu=3,requests.cpu=3, used: requests.cpu=1,
    limited: limits.cpu=2,requests.cpu=2

A request that exceeds the quota's hard limit on its own will never be admitted, however long it
waits; anything else may fit once other workloads finish.

Before it compares amounts, the plugin refuses a pod some of whose containers (init containers
included) leave out a cpu or memory resource the quota tracks, with a message of the form::

    failed quota: tiny: must specify limits.memory for: clone-git-course,fuse-s3-datasets;
    requests.cpu for: clone-git-course

(``checkQuotas`` in ``staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/
controller.go``; ``podEvaluator.Constraints`` in ``pkg/quota/v1/evaluator/core/pods.go`` sorts
the resources and each one's container names). That pod is never admitted as it is, whatever the
namespace's usage: :func:`parse_unspecified_resources` reads which containers must say what.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from podwright.core import quantities

_QUOTA_MESSAGE = re.compile(
    r"exceeded quota: (?P<quota>[^,]+), requested: (?P<requested>.*?), used: (?P<used>.*?), "
    r"limited: (?P<limited>[^\n\"]*)"
)


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    quota: str
    requested: dict[str, str]
    used: dict[str, str]
    limited: dict[str, str]

    def exceeds_hard_limit(self) -> list[str]:
        """The resources whose request alone is above the quota's hard limit."""
        over = []
        for resource, requested in self.requested.items():
            limit = self.limited.get(resource)
            if limit is not None and _amount(requested) > _amount(limit):
                over.append(f"{resource}: requested {requested}, limit {limit}")
        return over


def is_quota_refusal(message: str) -> bool:
    return "exceeded quota" in message


def parse_quota_refusal(message: str) -> QuotaRefusal | None:
    """The refusal in a quota admission message, or None when it has not the usual form."""
    match = _QUOTA_MESSAGE.search(message)
    if match is None:
        return None
    return QuotaRefusal(
        quota=match["quota"].strip(),
        requested=_resources(match["requested"]),
        used=_resources(match["used"]),
        limited=_resources(match["limited"]),
    )


_MUST_SPECIFY = re.compile(r"failed quota: (?P<quota>[^:\s]+): must specify (?P<missing>[^\n\"]*)")
_MISSING_RESOURCE = re.compile(r"(?P<resource>\S+) for: (?P<containers>[^;\s]+)")


@dataclass(frozen=True, slots=True)
class UnspecifiedResources:
    """A quota's refusal of a pod whose containers leave out resources the quota tracks."""

    quota: str
    containers: dict[str, list[str]]
    """Each container that leaves some out, and the resources it leaves out, sorted."""

    def explain(self) -> str:
        """What is wrong and what to do, naming every container and resource."""
        missing = "; ".join(
            f"{container} ({', '.join(resources)})"
            for container, resources in self.containers.items()
        )
        return (
            f"ResourceQuota {self.quota} needs every container to specify the resources it "
            f"tracks, and these do not: {missing}. Give the workload's container requests and "
            "limits in its compute, and the containers podwright adds (clones, FUSE adapters) "
            "theirs in the cluster profile's helperResources"
        )


def parse_unspecified_resources(message: str) -> UnspecifiedResources | None:
    """The containers a quota's "must specify" refusal names, or None for any other message."""
    match = _MUST_SPECIFY.search(message)
    if match is None:
        return None
    containers: dict[str, list[str]] = {}
    for entry in _MISSING_RESOURCE.finditer(match["missing"]):
        for container in entry["containers"].split(","):
            containers.setdefault(container, []).append(entry["resource"])
    if not containers:
        return None
    return UnspecifiedResources(
        quota=match["quota"],
        containers={name: sorted(containers[name]) for name in sorted(containers)},
    )


def _resources(listing: str) -> dict[str, str]:
    resources = {}
    for entry in listing.split(","):
        name, sep, value = entry.strip().partition("=")
        if sep and name:
            resources[name] = value.strip()
    return resources


def _amount(value: str) -> Decimal:
    try:
        return quantities.parse(value)
    except ValueError:
        return Decimal(0)
