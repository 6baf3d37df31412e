"""The PriorityClasses a profile names: manifests a real API server accepts, and comparing an
existing class with the one the profile means."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from podwright.core.render import DEFAULT_PROFILE, render
from podwright.core.render.priority_classes import Outcome, compare, priority_class_manifests
from podwright.core.render.profile import PRIORITY_LEVELS, PriorityLevel, profile_from_data
from podwright.core.workload_fields import WorkloadType
from tests.manifests import schema_errors


def api_server_errors(manifest: dict[str, Any]) -> list[str]:
    """What ValidatePriorityClass (pkg/apis/scheduling/validation) refuses beyond the schema:
    a value above HighestUserDefinablePriority (1e9) unless a system class, the system- prefix,
    and an unknown preemptionPolicy."""
    errors = []
    if manifest["metadata"]["name"].startswith("system-"):
        errors.append("names with 'system-' are reserved")
    if manifest["value"] > 1_000_000_000:
        errors.append("value above 1000000000")
    if manifest.get("preemptionPolicy") not in (None, "Never", "PreemptLowerPriority"):
        errors.append(f"preemptionPolicy {manifest['preemptionPolicy']!r}")
    return errors


def test_the_default_profile_ships_a_class_per_level_that_its_pods_name() -> None:
    manifests = priority_class_manifests(DEFAULT_PROFILE)
    for manifest in manifests:
        assert schema_errors(manifest) == []
        assert api_server_errors(manifest) == []
    assert [
        (m["metadata"]["name"], m["value"], m["preemptionPolicy"], m["globalDefault"])
        for m in manifests
    ] == [
        ("podwright-very-low", 25, "Never", False),
        ("podwright-low", 40, "Never", False),
        ("podwright-medium-low", 65, "Never", False),
        ("podwright-medium", 80, "Never", False),
        ("podwright-medium-high", 90, "Never", False),
        ("podwright-high", 125, "PreemptLowerPriority", False),
        ("podwright-very-high", 150, "PreemptLowerPriority", False),
    ]
    assert manifests[1]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "podwright",
        "podwright.dev/priority-level": "low",
    }
    # Exactly the names the renderer gives pods of each workload type by default.
    shipped = {manifest["metadata"]["name"] for manifest in manifests}
    for workload_type, spec in [
        (WorkloadType.WORKSPACE, {"image": "x"}),
        (WorkloadType.TRAINING, {"image": "x"}),
        (WorkloadType.INFERENCE, {"image": "x"}),
    ]:
        pod = render(workload_type, "w", spec).pod_templates["main"].to_k8s_pod()
        assert pod["spec"]["priorityClassName"] in shipped


def test_a_profile_ships_the_classes_it_names_once_each() -> None:
    profile = profile_from_data(
        {
            "apiVersion": "podwright.dev/v1",
            "kind": "ClusterProfile",
            "spec": {
                "priorityClasses": {
                    "very-low": None,
                    "low": {"name": "batch", "value": 40},
                    "medium-low": {"name": "batch", "value": 40},
                    "very-high": {"name": "serving", "value": 1_000_000_000},
                }
            },
        }
    )
    manifests = priority_class_manifests(profile)
    names = [manifest["metadata"]["name"] for manifest in manifests]
    assert names == [
        "batch",
        "podwright-medium",
        "podwright-medium-high",
        "podwright-high",
        "serving",
    ]
    assert all(schema_errors(m) == [] and api_server_errors(m) == [] for m in manifests)


def test_no_level_and_no_class_when_the_cluster_offers_none() -> None:
    classes = dict.fromkeys(PRIORITY_LEVELS)
    profile = dataclasses.replace(DEFAULT_PROFILE, priority_classes=classes)
    assert priority_class_manifests(profile) == []


WANTED = priority_class_manifests(
    dataclasses.replace(
        DEFAULT_PROFILE,
        priority_classes={"low": PriorityLevel("podwright-low", 40, preemptible=True)},
    )
)[0]


@pytest.mark.parametrize(
    ("existing", "outcome", "differences"),
    [
        ({"value": 40, "preemptionPolicy": "Never"}, Outcome.PRESENT, {}),
        (
            {"value": 40, "preemptionPolicy": "Never", "description": "theirs"},
            Outcome.PRESENT,
            {},
        ),
        (
            {"value": 50, "preemptionPolicy": "Never"},
            Outcome.DIFFERENT,
            {"value": (50, 40)},
        ),
        (
            {"value": 40},
            Outcome.DIFFERENT,
            {"preemptionPolicy": ("PreemptLowerPriority", "Never")},
        ),
        (
            {"value": 100, "preemptionPolicy": "PreemptLowerPriority"},
            Outcome.DIFFERENT,
            {"value": (100, 40), "preemptionPolicy": ("PreemptLowerPriority", "Never")},
        ),
    ],
)
def test_an_existing_class_is_compared_on_what_cannot_change(
    existing: dict[str, Any], outcome: Outcome, differences: dict[str, Any]
) -> None:
    comparison = compare(existing, WANTED)
    assert comparison.outcome is outcome
    assert dict(comparison.differences) == differences
    advice = comparison.advice("podwright-low")
    assert bool(advice) == (outcome is Outcome.DIFFERENT)
    if advice:
        assert "nothing was replaced" in advice
        assert "kubectl delete priorityclass podwright-low" in advice


def test_an_unset_preemption_policy_is_the_api_default() -> None:
    wanted = {"value": 125, "preemptionPolicy": "PreemptLowerPriority"}
    assert compare({"value": 125}, wanted).outcome is Outcome.PRESENT
