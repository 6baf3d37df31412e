"""The policy reference's worked examples, to the letter."""

from __future__ import annotations

from tests.policy_helpers import make_policy, run


def test_itemized_extended_resources_example() -> None:
    policy = make_policy(
        {
            "defaults": {
                "compute": {
                    "extendedResources": {
                        "instances": [
                            {"resource": "default/cpu", "quantity": 5},
                            {"resource": "default/memory", "quantity": "4M"},
                        ],
                        "attributes": {"quantity": 3},
                    }
                }
            },
            "rules": {
                "compute": {
                    "extendedResources": {
                        "instances": {"locked": ["default/cpu"]},
                        "attributes": {"quantity": {"required": True}},
                    }
                }
            },
        }
    )
    evaluation = run(
        [policy],
        {
            "image": "ubuntu",
            "compute": {
                "extendedResources": [
                    {"resource": "default/memory", "exclude": True},
                    {"resource": "added/cpu"},
                    {"resource": "added/memory", "quantity": "5M"},
                ]
            },
        },
    )
    assert evaluation.accepted
    assert evaluation.workload == {
        "image": "ubuntu",
        "compute": {
            "extendedResources": [
                {"resource": "default/cpu", "quantity": 5},
                {"resource": "added/cpu", "quantity": 3},
                {"resource": "added/memory", "quantity": "5M"},
            ]
        },
    }
    sources = evaluation.sources
    # Resource / source of the instance / quantity / source of the attribute quantity.
    assert (
        sources["compute.extendedResources[default/cpu].resource"]
        == "policy default (cluster prod)"
    )
    assert (
        sources["compute.extendedResources[default/cpu].quantity"]
        == "policy default (cluster prod)"
    )
    assert sources["compute.extendedResources[added/cpu].resource"] == "submission"
    assert (
        sources["compute.extendedResources[added/cpu].quantity"]
        == "attribute default (cluster prod)"
    )
    assert sources["compute.extendedResources[added/memory].resource"] == "submission"
    assert sources["compute.extendedResources[added/memory].quantity"] == "submission"
    assert not any("default/memory" in path for path in sources)

    # A submission cannot exclude the locked default/cpu.
    refused = run(
        [policy],
        {
            "image": "ubuntu",
            "compute": {"extendedResources": [{"resource": "default/cpu", "exclude": True}]},
        },
    )
    assert [issue.to_json() for issue in refused.violations] == [
        {
            "field": "compute.extendedResources[default/cpu]",
            "details": "'default/cpu' is locked by cluster prod and cannot be excluded",
            "rule": "locked",
        }
    ]
    assert refused.to_json() == {"complianceIssues": [refused.violations[0].to_json()]}


DEFAULTS = {"imagePullPolicy": "Always", "security": {"runAsNonRoot": True, "runAsUid": 500}}
SUBMISSION = {"image": "ubuntu", "security": {"runAsUid": 501}}


def test_defaults_example() -> None:
    evaluation = run([make_policy({"defaults": DEFAULTS})], SUBMISSION)
    assert evaluation.accepted
    assert evaluation.values == {
        "image": "ubuntu",
        "imagePullPolicy": "Always",
        "security.runAsNonRoot": True,
        "security.runAsUid": 501,
    }
    assert evaluation.sources == {
        "image": "submission",
        "imagePullPolicy": "policy default (cluster prod)",
        "security.runAsNonRoot": "policy default (cluster prod)",
        "security.runAsUid": "submission",
    }


def test_run_as_uid_with_can_edit_false_fails() -> None:
    policy = make_policy(
        {"defaults": DEFAULTS, "rules": {"security": {"runAsUid": {"canEdit": False}}}}
    )
    evaluation = run([policy], SUBMISSION)
    assert not evaluation.accepted
    assert evaluation.workload == {}
    assert evaluation.to_json() == {
        "complianceIssues": [
            {
                "field": "security.runAsUid",
                "details": "the policy's default is 500 and cannot be changed; got 501",
                "rule": "canEdit",
            }
        ]
    }
    # Submitting the default itself is no change.
    assert run([policy], {"image": "ubuntu", "security": {"runAsUid": 500}}).accepted
