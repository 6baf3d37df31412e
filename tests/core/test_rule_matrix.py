"""Decision matrices: each rule × each value type × where the value comes from.

For every value type a representative field, a value that passes the rule under test (``good``)
and one that breaks it (``bad``). Each row says, for one rule and one combination of policy
default and submitted value, what the effective value is and where it came from, or which rule
is broken.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.policy_helpers import make_policy, run

POLICY = "policy default (cluster prod)"


@dataclasses.dataclass(frozen=True)
class Kind:
    """A value type under test: a field of that type, and a rule set with good/bad values."""

    name: str
    path: tuple[str, ...]
    rules: dict[str, dict[str, Any]]
    """For each value rule the type can carry: the rule body, a good value, a bad value."""
    good: Any
    other_good: Any


KINDS = [
    Kind(
        "string",
        ("image",),
        {"options": {"rule": [{"value": "ubuntu"}, {"value": "debian"}], "bad": "alpine"}},
        "ubuntu",
        "debian",
    ),
    Kind("boolean", ("createHomeDir",), {}, True, False),
    Kind(
        "integer",
        ("backoffLimit",),
        {
            "min": {"rule": 2, "bad": 1},
            "max": {"rule": 10, "bad": 11},
            "step": {"rule": 2, "bad": 5},
        },
        4,
        6,
    ),
    Kind(
        "number",
        ("compute", "cpuCoreRequest"),
        {
            "min": {"rule": 0.5, "bad": 0.25},
            "max": {"rule": 16, "bad": 16.5},
            "step": {"rule": 0.5, "bad": 1.25},
        },
        1.5,
        2,
    ),
    Kind(
        "quantity",
        ("compute", "cpuMemoryRequest"),
        {"min": {"rule": "1Gi", "bad": "1000Mi"}, "max": {"rule": "64Gi", "bad": "65Gi"}},
        "1024Mi",
        "2Gi",
    ),
    Kind(
        "array",
        ("nodePools",),
        {"options": {"rule": [{"value": "a100"}, {"value": "h100"}], "bad": ["a100", "v100"]}},
        ["a100"],
        ["h100", "a100"],
    ),
]


def nested(path: tuple[str, ...], value: object) -> dict[str, object]:
    for name in reversed(path):
        value = {name: value}
    assert isinstance(value, dict)
    return value


def evaluate_case(kind: Kind, rules: dict[str, object], default: object, submitted: object) -> Any:
    body: dict[str, object] = {"rules": nested(kind.path, rules)}
    if default is not None:
        body["defaults"] = nested(kind.path, default)
    spec = {} if submitted is None else nested(kind.path, submitted)
    return run([make_policy(body)], spec)


def outcome(evaluation: Any, kind: Kind) -> tuple[object, ...]:
    dotted = ".".join(kind.path)
    if not evaluation.accepted:
        return ("violation", *sorted({issue.rule for issue in evaluation.violations}))
    if dotted not in evaluation.values:
        return ("absent",)
    return (evaluation.values[dotted], evaluation.sources[dotted])


# (default, submitted) → outcome, for the presence rules; G = good value, O = another good one.
G, O = "G", "O"  # noqa: E741 (one letter each keeps the matrix rows readable)
REQUIRED_ROWS = [
    (None, None, ("violation", "required")),
    (G, None, (G, POLICY)),
    (None, G, (G, "submission")),
    (G, O, (O, "submission")),
]
CAN_EDIT_FALSE_ROWS = [
    (None, None, ("absent",)),
    (G, None, (G, POLICY)),
    (None, G, ("violation", "canEdit")),
    (G, G, (G, "submission")),
    (G, O, ("violation", "canEdit")),
]
CAN_EDIT_TRUE_ROWS = [
    (None, None, ("absent",)),
    (G, None, (G, POLICY)),
    (None, G, (G, "submission")),
    (G, O, (O, "submission")),
]


def concrete(kind: Kind, marker: object) -> object:
    if marker == G:
        return kind.good
    return kind.other_good if marker == O else marker


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.name)
@pytest.mark.parametrize(
    ("rules", "rows"),
    [
        ({"required": True}, REQUIRED_ROWS),
        ({"canEdit": False}, CAN_EDIT_FALSE_ROWS),
        ({"canEdit": True}, CAN_EDIT_TRUE_ROWS),
        ({"required": False}, CAN_EDIT_TRUE_ROWS),
    ],
    ids=["required", "canEdit-false", "canEdit-true", "required-false"],
)
def test_presence_rules(kind: Kind, rules: dict[str, object], rows: list[Any]) -> None:
    for default, submitted, expected in rows:
        evaluation = evaluate_case(kind, rules, concrete(kind, default), concrete(kind, submitted))
        want = tuple(concrete(kind, part) for part in expected)
        assert outcome(evaluation, kind) == want, (rules, default, submitted)


VALUE_RULE_CASES = [(kind, rule) for kind in KINDS for rule in kind.rules]


@pytest.mark.parametrize(
    ("kind", "rule"),
    VALUE_RULE_CASES,
    ids=[f"{kind.name}-{rule}" for kind, rule in VALUE_RULE_CASES],
)
def test_value_rules(kind: Kind, rule: str) -> None:
    body = kind.rules[rule]
    rules = {rule: body["rule"]}
    bad = body["bad"]
    rows = [
        (None, None, ("absent",)),
        (G, None, (G, POLICY)),
        (None, G, (G, "submission")),
        (None, bad, ("violation", rule)),
        (G, O, (O, "submission")),
        (G, bad, ("violation", rule)),
    ]
    for default, submitted, expected in rows:
        evaluation = evaluate_case(kind, rules, concrete(kind, default), concrete(kind, submitted))
        want = tuple(concrete(kind, part) for part in expected)
        assert outcome(evaluation, kind) == want, (rule, default, submitted)


def test_step_counts_from_min() -> None:
    # min 1, step 2: 1, 3, 5, 7 are allowed (the reference's example), 2 and 4 are not.
    rules = {"compute": {"gpuDevicesRequest": {"min": 1, "max": 7, "step": 2}}}
    policy = make_policy({"rules": rules})
    for value, allowed in [(1, True), (2, False), (3, True), (4, False), (7, True), (9, False)]:
        evaluation = run([policy], {"compute": {"gpuDevicesRequest": value}})
        assert evaluation.accepted is allowed, value


def test_quantities_compare_exactly_across_units() -> None:
    policy = make_policy(
        {
            "defaults": {"compute": {"cpuMemoryRequest": "1G"}},
            "rules": {"compute": {"cpuMemoryRequest": {"canEdit": False, "max": "1000M"}}},
        }
    )
    assert run([policy], {"compute": {"cpuMemoryRequest": "1000M"}}).accepted
    assert run([policy], {"compute": {"cpuMemoryRequest": 1000000000}}).accepted
    refused = run([policy], {"compute": {"cpuMemoryRequest": "1000000001"}})
    assert {issue.rule for issue in refused.violations} == {"canEdit", "max"}


def test_every_violation_is_reported_not_only_the_first() -> None:
    policy = make_policy(
        {
            "rules": {
                "image": {"required": True},
                "compute": {"gpuDevicesRequest": {"max": 2}, "cpuCoreRequest": {"min": 1}},
                "nodePools": {"options": [{"value": "a"}]},
            }
        }
    )
    evaluation = run(
        [policy],
        {"compute": {"gpuDevicesRequest": 4, "cpuCoreRequest": 0.5}, "nodePools": ["b", "c"]},
    )
    assert sorted((issue.field, issue.rule) for issue in evaluation.violations) == [
        ("compute.cpuCoreRequest", "min"),
        ("compute.gpuDevicesRequest", "max"),
        ("image", "required"),
        ("nodePools", "options"),
        ("nodePools", "options"),
    ]
    details = {issue.field: issue.details for issue in evaluation.violations}
    assert details["compute.gpuDevicesRequest"] == "4 (submission) is above the maximum 2"
    assert details["compute.cpuCoreRequest"] == "0.5 (submission) is below the minimum 1"
