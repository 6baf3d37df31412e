"""Cluster profiles: the safe defaults, a full profile, and every problem reported at its path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from podwright.core.render import DEFAULT_PROFILE, ProfileError, profile_from_data
from podwright.core.render.profile import (
    PRIORITY_LEVELS,
    FuseGrantMode,
    PriorityLevel,
    S3Adapter,
    SchedulerType,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cluster-profile.yaml"


def document(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "podwright.dev/v1", "kind": "ClusterProfile", "spec": spec}


def test_an_empty_profile_is_the_safe_default() -> None:
    assert profile_from_data(document()) == DEFAULT_PROFILE
    assert DEFAULT_PROFILE.fuse_grant is FuseGrantMode.NONE
    assert DEFAULT_PROFILE.scheduler_name == "default-scheduler"
    assert DEFAULT_PROFILE.authorization_types == {"public"}
    assert [DEFAULT_PROFILE.priority_classes[level] for level in ("low", "high")] == [
        PriorityLevel("podwright-low", 40, preemptible=True),
        PriorityLevel("podwright-high", 125, preemptible=False),
    ]


def test_default_levels_follow_run_ai_values_and_kai_preemptibility() -> None:
    levels = DEFAULT_PROFILE.priority_classes
    assert [(level, levels[level]) for level in PRIORITY_LEVELS] == [
        (level, PriorityLevel(f"podwright-{level}", value, value < 100))
        for level, value in [
            ("very-low", 25),
            ("low", 40),
            ("medium-low", 65),
            ("medium", 80),
            ("medium-high", 90),
            ("high", 125),
            ("very-high", 150),
        ]
    ]
    policies = {level: priority.preemption_policy for level, priority in levels.items() if priority}
    assert policies["low"] == "Never"  # preemptible work evicts nobody
    assert policies["high"] == "PreemptLowerPriority"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"value": 150}, PriorityLevel("podwright-low", 150, preemptible=False)),
        ({"value": 99}, PriorityLevel("podwright-low", 99, preemptible=True)),
        ({"value": 150, "preemptible": True}, PriorityLevel("podwright-low", 150, True)),
        ({"name": "train"}, PriorityLevel("train", 40, preemptible=True)),
    ],
)
def test_a_level_may_name_its_value_and_preemptibility(
    entry: dict[str, Any], expected: PriorityLevel
) -> None:
    assert (
        profile_from_data(document(priorityClasses={"low": entry})).priority_classes["low"]
        == expected
    )


def test_the_example_profile() -> None:
    profile = profile_from_data(yaml.safe_load(EXAMPLE.read_text()), str(EXAMPLE))
    assert profile.name == "prod"
    assert profile.scheduler_type is SchedulerType.KAI
    assert profile.queue == "research"
    assert profile.fuse_grant is FuseGrantMode.PRIVILEGED
    assert profile.s3_adapter is S3Adapter.S3FS
    assert profile.node_pool_label == "node.example.com/pool"
    assert set(profile.priority_classes) == set(PRIORITY_LEVELS)
    assert profile.helper_resources == DEFAULT_PROFILE.helper_resources  # shown as they are


def test_kai_defaults_its_scheduler_name_and_queue() -> None:
    profile = profile_from_data(document(scheduler={"type": "kai"}))
    assert (profile.scheduler_name, profile.queue) == ("kai-scheduler", "default-queue")


def test_a_label_domain_moves_the_default_node_labels() -> None:
    profile = profile_from_data(document(labelDomain="ml.example.com"))
    assert profile.node_type_label == "ml.example.com/node-type"
    assert profile.label("workload") == "ml.example.com/workload"


def test_a_level_set_to_null_is_not_offered() -> None:
    profile = profile_from_data(
        document(priorityClasses={"very-high": None, "low": {"name": "cheap"}})
    )
    assert profile.priority_classes["very-high"] is None
    assert profile.priority_classes["low"] == PriorityLevel("cheap", 40, preemptible=True)


def test_helper_resources_default_to_small_figures_and_each_key_may_be_set_alone() -> None:
    assert DEFAULT_PROFILE.helper_resources.manifest() == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "512Mi"},
    }
    profile = profile_from_data(
        document(helperResources={"requests": {"memory": "256Mi"}, "limits": {"cpu": 2}})
    )
    assert profile.helper_resources.manifest() == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "2", "memory": "512Mi"},
    }


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"kind": "Profile"}, "kind: expected 'ClusterProfile', got 'Profile' (string)"),
        (
            document(helperResources={"requests": {"cpu": "lots"}}),
            "spec.helperResources.requests.cpu: 'lots' is not a quantity",
        ),
        (
            document(helperResources={"limits": {"memory": 0}}),
            "spec.helperResources.limits.memory: expected a quantity above zero, got 0 (integer)",
        ),
        (
            document(helperResources={"requests": {"cpu": "2"}}),
            "spec.helperResources.requests.cpu: 2 is above limits.cpu (1); a request may not "
            "exceed its limit",
        ),
        (
            document(helperResources={"limits": {"gpu": 1}}),
            "spec.helperResources.limits.gpu: unknown field 'gpu'",
        ),
        (
            document(helperResources={"request": {}}),
            "spec.helperResources.request: unknown field 'request' (did you mean 'requests'?)",
        ),
        (
            document(scheduler={"type": "volcano"}),
            "spec.scheduler.type: expected one of 'default', 'kai', got 'volcano' (string)",
        ),
        (
            document(scheduler={"queue": "q"}),
            "spec.scheduler.queue: a queue needs scheduler type 'kai'",
        ),
        (
            document(schedular={}),
            "spec.schedular: unknown field 'schedular' (did you mean 'scheduler'?)",
        ),
        (
            document(fuse={"grant": "yes"}),
            "spec.fuse.grant: expected one of 'none', 'device-plugin', 'privileged', 'proxy', got 'yes' (string)",
        ),
        (document(nodeLabels={"nodeType": "not a key!"}), "spec.nodeLabels.nodeType: 'not a key!'"),
        (
            document(priorityClasses={"urgent": {"name": "x"}}),
            "spec.priorityClasses.urgent: unknown field 'urgent'",
        ),
        (
            document(priorityClasses={"low": {"preemptible": "yes"}}),
            "spec.priorityClasses.low.preemptible: expected true or false",
        ),
        (
            document(priorityClasses={"low": {"name": "Low!"}}),
            "spec.priorityClasses.low.name: 'Low!'",
        ),
        (
            document(priorityClasses={"low": {"name": "system-low"}}),
            "spec.priorityClasses.low.name: 'system-low' starts with 'system-', which Kubernetes "
            "keeps for its own classes",
        ),
        (
            document(priorityClasses={"low": {"value": 2_000_000_000}}),
            "spec.priorityClasses.low.value: expected an integer of at most 1000000000",
        ),
        (
            document(priorityClasses={"low": {"value": "40"}}),
            "spec.priorityClasses.low.value: expected an integer",
        ),
        (
            document(priorityClasses={"high": {"name": "shared"}, "low": {"name": "shared"}}),
            "spec.priorityClasses.high: PriorityClass 'shared' is also level low's, with another "
            "value or preemptibility",
        ),
        (
            document(knative={"features": ["kubernetes.podspec-dryrun"]}),
            "spec.knative.features[0]: expected one of",
        ),
        (
            document(authorizationTypes="public"),
            "spec.authorizationTypes: expected a list, got 'public' (string)",
        ),
        (
            document(git={"image": ""}),
            "spec.git.image: expected a non-empty string, got '' (string)",
        ),
        ([], "expected a mapping, got [] (list)"),
    ],
)
def test_problems(data: Any, problem: str) -> None:
    with pytest.raises(ProfileError) as caught:
        profile_from_data(data, "profile.yaml")
    assert any(str(found).startswith(problem) for found in caught.value.problems), (
        caught.value.problems
    )
    assert all(found.source == "profile.yaml" for found in caught.value.problems)


def test_every_problem_is_reported() -> None:
    with pytest.raises(ProfileError) as caught:
        profile_from_data(document(fuse={"grant": "x"}, s3={"adapter": "y"}, labelDomain="A B"))
    assert len(caught.value.problems) == 3
