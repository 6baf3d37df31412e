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
:func:`quota_failure` says which refusals end a task for good.

A pod that a controller creates (a Job's, a training operator's) is refused the same way, but the
refusal reaches podwright only as the Warning the controller records on its object, ``FailedCreate``
with the note ``Error creating: <the server's message>`` (``RealPodControl.createPods`` in
``pkg/controller/controller_utils.go``; ``FailedCreatePod`` from Kubeflow's pod control,
``pkg/controller.v1/control/pod_control.go``), while the controller tries again and again; the
object gets no condition for it. :func:`pod_creation_refused` reads those events.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from podwright.core import quantities
from podwright.core.lifecycle import phases
from podwright.core.lifecycle.phases import Phase, PhaseInfo

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


def quota_failure(message: str, now: datetime) -> PhaseInfo | None:
    """The permanent failure a quota's refusal ``message`` means: containers that leave out what
    the quota tracks (ResourcesNotSpecified), or a request that alone exceeds the quota's hard
    limit (ResourceRequestsExceedLimits); None for a refusal that may pass once other workloads
    free the quota, and for any other message."""
    unspecified = parse_unspecified_resources(message)
    if unspecified is not None:
        return phases.permanent_failure(
            now, "ResourcesNotSpecified", f"{unspecified.explain()} ({message})"
        )
    refusal = parse_quota_refusal(message)
    over = refusal.exceeds_hard_limit() if refusal is not None else []
    if over:
        return phases.permanent_failure(
            now,
            "ResourceRequestsExceedLimits",
            f"the request exceeds the quota's hard limit ({'; '.join(over)}): {message}",
        )
    return None


FAILED_POD_CREATE_REASONS = frozenset({"FailedCreate", "FailedCreatePod"})
"""The reasons of the Warning a controller records on its object when a pod create is refused."""

_BEFORE_ANY_POD = frozenset(
    {Phase.UNDEFINED, Phase.NOT_READY, Phase.WAITING_FOR_RESOURCES, Phase.QUEUED}
)


class RecordedEvent(Protocol):
    """What :func:`pod_creation_refused` reads of a Kubernetes event about the task's object."""

    @property
    def reason(self) -> str: ...

    @property
    def note(self) -> str: ...

    @property
    def type(self) -> str: ...


def pod_creation_refused(
    info: PhaseInfo, events: Callable[[], Sequence[RecordedEvent]], now: datetime
) -> PhaseInfo:
    """``info``, the plugin's phase of a resource whose controller creates its pods, unless the
    resource has no pod yet (``info`` is before Initializing) and its controller's latest refused
    pod create (``events()``: the object's, oldest first; read only then, so that a resource
    past its first pod, most of a task's life, costs no look at its events) was refused by a
    quota for good (:func:`quota_failure`): then that permanent failure, asking for cleanup,
    for the controller would go on trying. A refusal that may pass later leaves ``info`` as it
    is: the resource waits, and the event, attached to the task, says why. A resource whose pods
    have started is left to its status, which tells how its controller's retries go."""
    if info.phase not in _BEFORE_ANY_POD:
        return info
    refusal = next(
        (
            event
            for event in reversed(events())
            if event.type == "Warning" and event.reason in FAILED_POD_CREATE_REASONS
        ),
        None,
    )
    failure = quota_failure(refusal.note, now) if refusal is not None else None
    return info if failure is None else replace(failure, cleanup_on_failure=True)


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
