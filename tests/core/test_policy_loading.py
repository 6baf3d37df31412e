"""A policy is checked on load: every problem reported at its path in the document."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.field_paths import format_path
from podwright.core.policies import (
    Enforcement,
    Policy,
    PolicyError,
    Scope,
    policy_from_data,
    policy_from_runai,
    scope_from_data,
    scope_from_text,
)
from podwright.core.workload_fields import WorkloadType
from tests.policy_helpers import policy_data

WORKSPACE = WorkloadType.WORKSPACE


def problems_of(body: dict[str, Any], **options: Any) -> list[tuple[str, str]]:
    with pytest.raises(PolicyError) as caught:
        policy_from_data(policy_data(body, **options))
    return [
        (".".join(str(part) for part in problem.path), problem.message)
        for problem in caught.value.problems
    ]


@pytest.mark.parametrize(
    ("body", "path", "message"),
    [
        (
            {"defaults": {"imagePulPolicy": "Always"}},
            "spec.defaults.imagePulPolicy",
            "did you mean 'imagePullPolicy'",
        ),
        (
            {"rules": {"image": {"min": 1}}},
            "spec.rules.image.min",
            "a string field cannot carry the rule 'min'",
        ),
        (
            {"rules": {"createHomeDir": {"options": [{"value": True}]}}},
            "spec.rules.createHomeDir.options",
            "cannot carry",
        ),
        (
            {"rules": {"compute": {"cpuMemoryRequest": {"step": 2}}}},
            "spec.rules.compute.cpuMemoryRequest.step",
            "cannot carry",
        ),
        (
            {"rules": {"compute": {"cpuCoreRequest": {"Step": 2, "step": 1}}}},
            "spec.rules.compute.cpuCoreRequest.Step",
            "'Step' reads as 'step', which is given too: give it once",
        ),
        (
            {"rules": {"compute": {"cpuCoreRequest": {"Stepp": 2}}}},
            "spec.rules.compute.cpuCoreRequest.Stepp",
            "unknown rule 'Stepp' (did you mean 'step'?)",
        ),
        (
            {"rules": {"cpuCoreRequest": {"min": 1}}},
            "spec.rules.cpuCoreRequest",
            "unknown field 'cpuCoreRequest' here (did you mean 'compute.cpuCoreRequest'?)",
        ),
        (
            {"defaults": {"readiness": {"periodSeconds": 1}}},
            "spec.defaults.readiness",
            "unknown field 'readiness' here (did you mean 'probes.readiness'?)",
        ),
        (
            {"rules": {"compute": {"cpuCoreRequest": {"Min": "one"}}}},
            "spec.rules.compute.cpuCoreRequest.Min",
            "expected a number, got 'one' (string)",
        ),
        (
            {"defaults": {"storage": {"hostPath": {"attributes": [{"ReadOnly": "yes"}]}}}},
            "spec.defaults.storage.hostPath.attributes.0.ReadOnly",
            "expected true or false, got 'yes' (string)",
        ),
        (
            {"defaults": {"storage": {"hostPath": {"attributes": [{"readOnly": True}, {}]}}}},
            "spec.defaults.storage.hostPath.attributes",
            "expected a mapping of fields, got [",
        ),
        (
            {"defaults": {"labels": {"instances": [{"value": "x"}]}}},
            "spec.defaults.labels.instances.0",
            "every instance needs its key 'name'",
        ),
        (
            {"defaults": {"storage": {"nfs": {"instances": [{"server": "s", "exclude": True}]}}}},
            "spec.defaults.storage.nfs.instances.0.exclude",
            "only a submission can exclude an instance",
        ),
        (
            {"rules": {"compute": {"gpuDevicesRequest": {"min": 4, "max": 2}}}},
            "spec.rules.compute.gpuDevicesRequest.min",
            "min 4 is above max 2",
        ),
        (
            {"rules": {"compute": {"cpuMemoryRequest": {"min": "2Gi", "max": "1G"}}}},
            "spec.rules.compute.cpuMemoryRequest.min",
            "above max",
        ),
        (
            {"rules": {"compute": {"gpuDevicesRequest": {"step": 0}}}},
            "spec.rules.compute.gpuDevicesRequest.step",
            "must be above 0",
        ),
        (
            {"rules": {"compute": {"gpuDevicesRequest": {"max": "eight"}}}},
            "spec.rules.compute.gpuDevicesRequest.max",
            "expected an integer",
        ),
        (
            {"rules": {"imagePullPolicy": {"options": [{"value": "Sometimes"}]}}},
            "spec.rules.imagePullPolicy.options.0.value",
            "expected one of 'Always'",
        ),
        ({"rules": {"image": {"options": []}}}, "spec.rules.image.options", "non-empty list"),
        (
            {"rules": {"image": {"required": "yes"}}},
            "spec.rules.image.required",
            "expected true or false",
        ),
        (
            {"rules": {"compute": {"required": True}}},
            "spec.rules.compute.required",
            "compute is a section",
        ),
        (
            {"rules": {"labels": {"instances": {"canAdd": False, "lock": ["a"]}}}},
            "spec.rules.labels.instances.lock",
            "did you mean 'locked'",
        ),
        (
            {"rules": {"labels": {"canAdd": False}}},
            "spec.rules.labels.canAdd",
            "unknown field 'canAdd'",
        ),
        (
            {
                "defaults": {"compute": {"gpuDevicesRequest": 9}},
                "rules": {"compute": {"gpuDevicesRequest": {"max": 8}}},
            },
            "spec.defaults.compute.gpuDevicesRequest",
            "breaks this policy's own 'max' rule: 9 is above the maximum 8",
        ),
        (
            {
                "defaults": {"image": "alpine"},
                "rules": {"image": {"options": [{"value": "ubuntu"}]}},
            },
            "spec.defaults.image",
            "own 'options' rule",
        ),
        (
            {
                "defaults": {"labels": {"instances": [{"name": "a", "value": "x"}]}},
                "rules": {"labels": {"attributes": {"value": {"options": [{"value": "y"}]}}}},
            },
            "spec.defaults.labels.instances.0.value",
            "own 'options' rule",
        ),
        (
            {"defaults": {"labels": {"instances": [{"value": "x"}]}}},
            "spec.defaults.labels.instances.0",
            "needs its key 'name'",
        ),
        (
            {"defaults": {"labels": {"instances": [{"name": "a", "exclude": True}]}}},
            "spec.defaults.labels.instances.0.exclude",
            "only a submission can exclude",
        ),
        (
            {"defaults": {"labels": {"attributes": {"name": "x"}}}},
            "spec.defaults.labels.attributes.name",
            "key of each instance",
        ),
        (
            {"defaults": {"labels": [{"name": "a"}]}},
            "spec.defaults.labels",
            "expected {instances: [...], attributes: {...}}",
        ),
        (
            {"defaults": {"backoffLimit": 3}},
            "spec.defaults.backoffLimit",
            "not supported for inference",
        ),
        (
            {
                "rules": {
                    "compute": {
                        "cpuCoreRequest": {"defaultFrom": {"field": "compute.cpuMemoryLimit"}}
                    }
                }
            },
            "spec.rules.compute.cpuCoreRequest.defaultFrom.field",
            "can default only from an integer or number",
        ),
        (
            {
                "rules": {
                    "compute": {"cpuCoreRequest": {"defaultFrom": {"field": "security.runAsUid"}}}
                }
            },
            "spec.rules.compute.cpuCoreRequest.defaultFrom.field",
            "not a field of the same section (compute)",
        ),
        (
            {
                "rules": {
                    "compute": {
                        "cpuCoreRequest": {"defaultFrom": {"field": "compute.cpuCoreRequest"}}
                    }
                }
            },
            "spec.rules.compute.cpuCoreRequest.defaultFrom.field",
            "cannot default from itself",
        ),
        (
            {
                "rules": {
                    "compute": {
                        "cpuCoreRequest": {
                            "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": "half"}
                        }
                    }
                }
            },
            "spec.rules.compute.cpuCoreRequest.defaultFrom.factor",
            "expected a number",
        ),
        (
            {
                "rules": {
                    "compute": {
                        "cpuCoreRequest": {
                            "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": -0.5}
                        }
                    }
                }
            },
            "spec.rules.compute.cpuCoreRequest.defaultFrom.factor",
            "must be at least 0, got -0.5: it would compute a negative amount",
        ),
        (
            {
                "defaults": {"compute": {"cpuCoreLimit": 1.5}},
                "rules": {
                    "compute": {
                        "cpuCoreRequest": {
                            "step": 0.5,
                            "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": 0.5},
                        }
                    }
                },
            },
            "spec.defaults.compute.cpuCoreLimit",
            "this default makes compute.cpuCoreRequest default to 0.75 (defaultFrom "
            "compute.cpuCoreLimit × 0.5), which breaks this policy's own 'step' rule: 0.75 is not "
            "a multiple of the step 0.5 counted from 0",
        ),
        (
            {
                "defaults": {"compute": {"cpuMemoryLimit": "4Gi"}},
                "rules": {
                    "compute": {
                        "cpuMemoryRequest": {
                            "min": "3Gi",
                            "defaultFrom": {"field": "cpuMemoryLimit", "factor": 0.5},
                        }
                    }
                },
            },
            "spec.defaults.compute.cpuMemoryLimit",
            "own 'min' rule: '2Gi' is below the minimum '3Gi'",
        ),
        (
            {
                "defaults": {"compute": {"cpuCoreLimit": 8}},
                "rules": {
                    "compute": {
                        "cpuCoreRequest": {"defaultFrom": {"field": "cpuCoreLimit", "factor": 0.5}},
                        "gpuDevicesRequest": {
                            "max": 2,
                            "defaultFrom": {"field": "cpuCoreRequest", "factor": 1},
                        },
                    }
                },
            },
            "spec.defaults.compute.cpuCoreLimit",
            "makes compute.gpuDevicesRequest default to 4 (defaultFrom compute.cpuCoreRequest × 1), "
            "which breaks this policy's own 'max' rule",
        ),
        (
            {
                "defaults": {
                    "ports": {"instances": [{"name": "web", "container": 8080, "external": 80}]}
                },
                "rules": {
                    "ports": {
                        "attributes": {
                            "external": {"max": 9000, "defaultFrom": {"field": "container"}}
                        }
                    }
                },
            },
            None,
            None,
        ),
        (
            {
                "defaults": {"ports": {"instances": [{"name": "web", "container": 9090}]}},
                "rules": {
                    "ports": {
                        "attributes": {
                            "external": {"max": 9000, "defaultFrom": {"field": "container"}}
                        }
                    }
                },
            },
            "spec.defaults.ports.instances.0.container",
            "makes ports.external default to 9090 (defaultFrom ports.container × 1), which breaks "
            "this policy's own 'max' rule",
        ),
        ({"imposedAssets": "a1"}, "spec.imposedAssets", "expected a list of asset ids"),
        (
            {"enforcement": "strict"},
            "spec.enforcement",
            "expected one of 'enforce', 'warn', 'audit'",
        ),
        ({"extra": 1}, "spec.extra", "unknown field 'extra'"),
    ],
)
def test_problems_are_found_at_their_path(
    body: dict[str, Any], path: str | None, message: str | None
) -> None:
    options = {"workload_type": "inference"} if "backoffLimit" in str(body) else {}
    if path is None:  # the row is a policy without problems
        policy_from_data(policy_data(body, **options))
        return
    found = problems_of(body, **options)
    assert any(where == path and message in text for where, text in found), found


def test_a_default_from_cycle_in_one_policy() -> None:
    found = problems_of(
        {
            "rules": {
                "compute": {
                    "cpuCoreRequest": {"defaultFrom": {"field": "compute.cpuCoreLimit"}},
                    "cpuCoreLimit": {"defaultFrom": {"field": "compute.cpuCoreRequest"}},
                }
            }
        }
    )
    assert found == [
        (
            "spec.rules.compute.cpuCoreRequest.defaultFrom",
            "defaultFrom forms a cycle: compute.cpuCoreRequest → compute.cpuCoreLimit → compute.cpuCoreRequest",
        )
    ]


def test_every_problem_is_reported() -> None:
    found = problems_of(
        {
            "defaults": {"imagePulPolicy": 1, "compute": {"gpuDevicesRequest": "x"}},
            "rules": {"image": {"max": 1}},
        }
    )
    assert len(found) == 3


def test_document_envelope() -> None:
    with pytest.raises(PolicyError) as caught:
        policy_from_data({"apiVersion": "v1", "kind": "Policy", "spec": {"workloadType": "batch"}})
    paths = [problem.path for problem in caught.value.problems]
    assert paths == [
        ("apiVersion",),
        ("kind",),
        ("metadata",),
        ("spec", "scope"),
        ("spec", "workloadType"),
    ]


def test_a_valid_policy_is_flattened_by_schema_path() -> None:
    policy = policy_from_data(
        policy_data(
            {
                "defaults": {
                    "compute": {
                        "cpuCoreRequest": 1,
                        "extendedResources": {"attributes": {"quantity": 2}},
                    }
                },
                "rules": {"compute": {"extendedResources": {"instances": {"canAdd": False}}}},
            },
            scope={"cluster": "prod", "department": "research"},
            enforcement="audit",
        )
    )
    assert policy.scope == Scope(("prod", "research"))
    assert policy.enforcement is Enforcement.AUDIT
    assert dict(policy.defaults) == {
        ("compute", "cpuCoreRequest"): 1,
        ("compute", "extendedResources", "quantity"): 2,
    }
    assert policy.instance_rules[("compute", "extendedResources")].can_add is False


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("tenant", Scope()),
        ({"cluster": "prod"}, Scope(("prod",))),
        ({"cluster": "a", "department": "b", "project": "c"}, Scope(("a", "b", "c"))),
    ],
)
def test_scopes(data: object, expected: Scope) -> None:
    assert scope_from_data(data) == expected
    assert scope_from_text(expected.to_text()) == expected
    assert scope_from_data(expected.to_data()) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"cluster": "a", "project": "c"}, "a project scope must name its department"),
        ({"department": "b"}, "must name its cluster"),
        ({"region": "eu"}, "unknown field 'region'"),
        ({"cluster": ""}, "cluster: expected a non-empty name"),
        (["prod"], "expected 'tenant' or a mapping"),
    ],
)
def test_bad_scopes(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        scope_from_data(data)


def test_scope_tree() -> None:
    tenant, cluster, project = Scope(), Scope(("p",)), Scope(("p", "d", "x"))
    assert tenant.contains(project)
    assert cluster.contains(project)
    assert not project.contains(cluster)
    assert not Scope(("q",)).contains(project)
    assert str(project) == "project x"
    assert str(tenant) == "tenant"


@pytest.mark.parametrize(
    ("body", "read", "notes"),
    [
        pytest.param(
            {"rules": {"compute": {"cpuCoreRequest": {"min": 1, "Step": 2}}}},
            {"rules": {"compute": {"cpuCoreRequest": {"min": 1, "step": 2}}}},
            [("spec.rules.compute.cpuCoreRequest.Step", "read as 'step'")],
            id="rule",
        ),
        pytest.param(
            {"rules": {"Storage": {"hostPath": {"Instances": {"Locked": ["HOME"]}}}}},
            {"rules": {"storage": {"hostPath": {"instances": {"locked": ["HOME"]}}}}},
            [
                ("spec.rules.Storage", "read as 'storage'"),
                ("spec.rules.Storage.hostPath.Instances", "read as 'instances'"),
                ("spec.rules.Storage.hostPath.Instances.Locked", "read as 'locked'"),
            ],
            id="itemized-rules",
        ),
        pytest.param(
            {"rules": {"image": {"Options": [{"Value": "a"}]}}},
            {"rules": {"image": {"options": [{"value": "a"}]}}},
            [
                ("spec.rules.image.Options", "read as 'options'"),
                ("spec.rules.image.Options[0].Value", "read as 'value'"),
            ],
            id="options",
        ),
        pytest.param(
            {"rules": {"compute": {"cpuCoreRequest": {"defaultFrom": {"Field": "cpuCoreLimit"}}}}},
            {"rules": {"compute": {"cpuCoreRequest": {"defaultFrom": {"field": "cpuCoreLimit"}}}}},
            [("spec.rules.compute.cpuCoreRequest.defaultFrom.Field", "read as 'field'")],
            id="default-from",
        ),
        pytest.param(
            {"defaults": {"storage": {"git": {"attributes": {"Repository": "https://a"}}}}},
            {"defaults": {"storage": {"git": {"attributes": {"repository": "https://a"}}}}},
            [("spec.defaults.storage.git.attributes.Repository", "read as 'repository'")],
            id="attribute",
        ),
        pytest.param(
            {
                "defaults": {
                    "storage": {"pvc": {"instances": [{"claimName": "c", "ReadOnly": True}]}}
                }
            },
            {
                "defaults": {
                    "storage": {"pvc": {"instances": [{"claimName": "c", "readOnly": True}]}}
                }
            },
            [("spec.defaults.storage.pvc.instances[0].ReadOnly", "read as 'readOnly'")],
            id="instance",
        ),
        pytest.param(
            {"defaults": {"exposedUrls": [{"URL": "https://a"}]}},
            {"defaults": {"exposedUrls": [{"url": "https://a"}]}},
            [("spec.defaults.exposedUrls[0].URL", "read as 'url'")],
            id="array-of-objects",
        ),
        pytest.param(
            {"defaults": {"storage": {"hostPath": {"attributes": [{"readOnly": True}]}}}},
            {"defaults": {"storage": {"hostPath": {"attributes": {"readOnly": True}}}}},
            [
                (
                    "spec.defaults.storage.hostPath.attributes",
                    "a list of one-key mappings, read as one mapping of 'readOnly'",
                )
            ],
            id="attributes-as-a-list",
        ),
        pytest.param(
            {"rules": {"storage": {"nfs": {"attributes": [{"ReadOnly": {"canEdit": False}}]}}}},
            {"rules": {"storage": {"nfs": {"attributes": {"readOnly": {"canEdit": False}}}}}},
            [
                (
                    "spec.rules.storage.nfs.attributes",
                    "a list of one-key mappings, read as one mapping of 'ReadOnly'",
                ),
                ("spec.rules.storage.nfs.attributes[0].ReadOnly", "read as 'readOnly'"),
            ],
            id="rule-attributes-as-a-list",
        ),
        pytest.param(
            {"defaults": {"compute": {"cpuCoreRequest": 1}}},
            {"defaults": {"compute": {"cpuCoreRequest": 1}}},
            [],
            id="as-written",
        ),
    ],
)
def test_run_ai_spellings_are_read_with_a_note(
    body: dict[str, Any], read: dict[str, Any], notes: list[tuple[str, str]]
) -> None:
    """Go's encoding/json, which Run:ai's API server decodes a policy with, matches keys to
    fields whatever their letter case; the reference's examples rely on it."""
    policy = policy_from_data(policy_data(body), source="p.yaml")
    assert dict(policy.body) == read
    assert [(format_path(note.path), note.message) for note in policy.notes] == notes
    assert all(note.source == "p.yaml" for note in policy.notes)
    as_read = policy_from_data(policy_data(read), source="p.yaml")
    assert dataclasses.replace(policy, notes=()) == as_read


def test_a_problem_below_a_respelled_key_is_at_the_key_as_written() -> None:
    found = problems_of(
        {"rules": {"Compute": {"cpuCoreRequest": {"Min": 8, "max": 4}}}},
    )
    assert found == [("spec.rules.Compute.cpuCoreRequest.Min", "min 8 is above max 4")]


SPELLED_RIGHT: dict[str, Any] = {
    "defaults": {
        "imagePullPolicy": "Always",
        "security": {"runAsUid": 500},
        "storage": {
            "pvc": {
                "instances": [{"claimName": "c", "path": "/c", "claimInfo": {"size": "1Gi"}}],
                "attributes": {"readOnly": True},
            }
        },
        "exposedUrls": [{"url": "https://a", "container": 80}],
    },
    "rules": {
        "image": {"options": [{"value": "a", "displayed": "A"}], "required": True},
        "compute": {
            "cpuCoreRequest": {"min": 1, "step": 1, "defaultFrom": {"field": "cpuCoreLimit"}},
        },
        "storage": {"pvc": {"instances": {"canAdd": False}, "attributes": {"path": {}}}},
    },
}
"""A body with a key of every kind a policy's sections hold (fields, itemized sections,
attributes, rules, instance rules, options, defaultFrom)."""


@st.composite
def respelled(draw: st.DrawFn, data: object) -> tuple[object, int]:
    """``data`` with some keys in other letter case, and how many."""
    if isinstance(data, list):
        items = [draw(respelled(item)) for item in data]
        return [item for item, _ in items], sum(count for _, count in items)
    if not isinstance(data, dict):
        return data, 0
    result: dict[str, object] = {}
    count = 0
    for key, value in data.items():
        spelling = draw(st.sampled_from([key, key.upper(), key[0].swapcase() + key[1:]]))
        child, below = draw(respelled(value))
        result[spelling] = child
        count += below + (spelling != key)
    return result, count


@given(respelled(SPELLED_RIGHT))
def test_any_letter_case_reads_as_the_spelling_it_differs_from(case: tuple[Any, int]) -> None:
    """As Go's encoding/json decodes Run:ai's policies: a key is matched whatever its case, and
    each one read otherwise than written is one note, at its path as written."""
    body, changed = case

    def read(data: object) -> Policy:
        return policy_from_runai(data, name="p", scope=Scope(), workload_type=WORKSPACE)

    policy = read(body)
    assert dataclasses.replace(policy, notes=()) == read(SPELLED_RIGHT)
    assert len(policy.notes) == changed
    for note in policy.notes:
        node: Any = body
        for part in note.path:
            node = node[part]  # the path as written leads to what was written
