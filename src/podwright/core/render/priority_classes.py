"""The PriorityClasses a cluster profile names, as manifests, and what to do with existing ones.

Every pod podwright renders names the PriorityClass of its priority level (``podwright-low`` for
training, by default), and the API server refuses a pod whose class does not exist. So podwright
ships the classes: :func:`priority_class_manifests` makes them from the profile (the default
profile: all seven levels, with the values and preemptibility :mod:`.profile` explains), and
``podwright priority-classes`` prints them, writes ``deploy/priority-classes.yaml`` and applies
them. A PriorityClass's ``value`` and ``preemptionPolicy`` cannot change once it exists;
:func:`compare` says whether an existing class is the one the profile means, so that applying
never replaces one silently.

None of them is ``globalDefault``: a pod podwright did not render keeps the cluster's default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum

from podwright.core.render.profile import PRIORITY_LEVELS, ClusterProfile, PriorityLevel
from podwright.core.render.storage import Manifest

API_VERSION = "scheduling.k8s.io/v1"
KIND = "PriorityClass"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
IMMUTABLE_FIELDS = ("value", "preemptionPolicy")
"""What the API server refuses to change on an existing PriorityClass."""


def priority_class_manifests(profile: ClusterProfile) -> list[Manifest]:
    """One PriorityClass per class the profile's levels name, lowest level first (a class two
    levels share appears once)."""
    manifests: dict[str, Manifest] = {}
    for level in PRIORITY_LEVELS:
        priority = profile.priority_classes.get(level)
        if priority is not None and priority.class_name not in manifests:
            manifests[priority.class_name] = _manifest(profile, level, priority)
    return list(manifests.values())


def _manifest(profile: ClusterProfile, level: str, priority: PriorityLevel) -> Manifest:
    kind = "preemptible" if priority.preemptible else "not preemptible"
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": priority.class_name,
            "labels": {
                MANAGED_BY_LABEL: "podwright",
                profile.label("priority-level"): level,
            },
        },
        "value": priority.value,
        "preemptionPolicy": priority.preemption_policy,
        "globalDefault": False,
        "description": (
            f"podwright priority {level} ({kind}): the PriorityClass of workloads whose "
            f"priorityClass is {level}"
        ),
    }


class Outcome(StrEnum):
    """What applying one PriorityClass came to."""

    CREATED = "created"
    PRESENT = "already present"
    DIFFERENT = "present with a different value"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """An existing PriorityClass against the manifest the profile means."""

    outcome: Outcome
    differences: Mapping[str, tuple[object, object]] = dataclasses.field(default_factory=dict)
    """For each immutable field that differs: (the cluster's value, the profile's)."""

    def advice(self, name: str) -> str:
        """What the person applying should do about a different class (empty when none)."""
        if self.outcome is not Outcome.DIFFERENT:
            return ""
        found = ", ".join(
            f"{field} {existing} (the profile's: {wanted})"
            for field, (existing, wanted) in self.differences.items()
        )
        return (
            f"it has {found}, which cannot be changed in place; nothing was replaced. Either "
            f"give this level the class's own value in the cluster profile (priorityClasses), "
            f"or delete the class once no pod uses it (kubectl delete priorityclass {name}) "
            "and apply again"
        )


def compare(existing: Mapping[str, object], wanted: Mapping[str, object]) -> Comparison:
    """Whether ``existing`` (as the API server returns it) is the class ``wanted`` describes.

    Only ``value`` and ``preemptionPolicy`` count: they cannot be updated, and they are what
    scheduling reads. An unset ``preemptionPolicy`` is the API's default,
    ``PreemptLowerPriority``. The description, labels and ``globalDefault`` are the cluster
    owner's to keep.
    """
    differences: dict[str, tuple[object, object]] = {}
    for field in IMMUTABLE_FIELDS:
        default = "PreemptLowerPriority" if field == "preemptionPolicy" else None
        found, meant = existing.get(field, default), wanted.get(field, default)
        if found != meant:
            differences[field] = (found, meant)
    return Comparison(Outcome.DIFFERENT if differences else Outcome.PRESENT, differences)
