"""The compliance status (core/compliance.py): what the current policies say of an admitted
Workload, and the status patch that records it only when something changed."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.assets import EMPTY_CATALOGUE
from podwright.core.compliance import (
    CONDITION_TYPE,
    MESSAGE_LIMIT,
    Assessment,
    ComplianceReason,
    assess,
    bounded_list,
    status_patch,
    unreadable_policies,
)
from podwright.core.json_patch import apply_merge_patch
from podwright.core.policies import PolicyError
from podwright.core.problems import FieldProblem
from tests.core.test_admission import POLICY_FOR, VISION_SCOPE, workload

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
EARLIER = "2026-01-01T00:00:00Z"


def compliance_of(spec: Mapping[str, Any]) -> Assessment:
    return assess(workload(spec), VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE)


# What the current policies say ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "reason", "message", "findings"),
    [
        pytest.param(
            {"image": "ubuntu"},
            ComplianceReason.COMPLIANT,
            "the current policies of project vision admit it",
            [],
            id="compliant",
        ),
        pytest.param(
            {"image": "ubuntu", "priorityClass": "high", "nodePools": ["v100"]},
            ComplianceReason.COMPLIANT,
            "the current policies of project vision admit it, with 2 findings of rules in warn "
            "or audit mode (status.compliance.findings)",
            [
                ("spec.priorityClass", "options", "warn", "department research"),
                ("spec.nodePools", "options", "audit", "project vision"),
            ],
            id="compliant-with-warn-and-audit-findings",
        ),
        pytest.param(
            {"compute": {"gpuDevicesRequest": 16}, "nodePools": ["v100"]},
            ComplianceReason.NONCOMPLIANT,
            "the current policies of project vision would refuse it: spec.image: a value is "
            "required, and neither the submission nor the policy gives one (rule required, "
            "policy 'prod-training' of cluster prod); spec.compute.gpuDevicesRequest: 16 "
            "(submission) is above the maximum 8 (rule max, policy 'prod-training' of cluster "
            "prod)",
            [("spec.nodePools", "options", "audit", "project vision")],
            id="noncompliant-every-issue-and-the-findings",
        ),
        pytest.param(
            {"image": "ubuntu", "compute": {"gpuDevicesRequest": "two"}},
            ComplianceReason.WORKLOAD_INVALID,
            "the workload is not valid: spec.compute.gpuDevicesRequest: expected an integer, "
            "got 'two' (string)",
            [],
            id="invalid-workload",
        ),
    ],
)
def test_a_workload_is_assessed_as_the_validating_webhook_would_now(
    spec: Mapping[str, Any],
    reason: ComplianceReason,
    message: str,
    findings: list[tuple[str, str, str, str]],
) -> None:
    assessment = compliance_of(spec)
    assert (assessment.reason, assessment.message) == (reason, message)
    assert [
        (found["field"], found["rule"], found["enforcement"], found["scope"])
        for found in assessment.findings
    ] == findings
    assert assessment.compliant is (reason is ComplianceReason.COMPLIANT)


def test_policies_that_cannot_be_applied_make_every_workload_of_the_scope_noncompliant() -> None:
    problem = FieldProblem(("spec", "rules"), "min 8 is above max 2", "WorkloadPolicy vision/bad")

    def broken(_workload_type: object) -> Any:
        raise PolicyError([problem])

    assessment = assess(workload({"image": "ubuntu"}), VISION_SCOPE, broken, EMPTY_CATALOGUE)
    assert assessment == unreadable_policies(VISION_SCOPE, [problem])
    assert assessment.reason is ComplianceReason.POLICY_UNREADABLE
    assert assessment.message == (
        "the policies of project vision cannot be applied, so the webhooks admit no workload "
        "there: WorkloadPolicy vision/bad: spec.rules: min 8 is above max 2"
    )


# Bounded messages -------------------------------------------------------------------------------


FOUR = ["aaaaaaaa", "bbbbbbbb", "cccccccc", "dddddddd"]


@pytest.mark.parametrize(
    ("entries", "limit", "expected"),
    [
        pytest.param(["a", "b"], 20, "head: a; b", id="all-fit"),
        pytest.param(FOUR, 30, "head: aaaaaaaa (and 3 more)", id="rest-counted"),
        pytest.param(FOUR, 43, "head: aaaaaaaa; bbbbbbbb (and 2 more)", id="two-fit"),
        pytest.param(FOUR, 44, "head: aaaaaaaa; bbbbbbbb; cccccccc; dddddddd", id="all-just-fit"),
        pytest.param(["x" * 50], 12, "head: xxxxx…", id="one-long-entry-cut"),
        pytest.param(["x" * 50, "y"], 25, "head: xxxxx… (and 1 more)", id="long-first-cut"),
        pytest.param([], 10, "head: ", id="nothing"),
    ],
)
def test_a_list_of_issues_is_cut_to_the_limit_saying_how_many_are_left_out(
    entries: list[str], limit: int, expected: str
) -> None:
    assert bounded_list("head: ", entries, limit) == expected
    assert len(expected) <= limit


def test_a_limit_that_leaves_no_room_after_the_head_is_refused() -> None:
    with pytest.raises(ValueError, match="limit: 7 characters leave no room for 2 entries"):
        bounded_list("head: ", ["a", "b"], 7)


@given(
    st.lists(st.text(min_size=0, max_size=60), max_size=30),
    st.integers(min_value=40, max_value=400),
)
def test_a_bounded_list_never_exceeds_its_limit_and_keeps_what_fits(
    entries: list[str], limit: int
) -> None:
    text = bounded_list("issues: ", entries, limit)
    assert len(text) <= limit
    whole = "issues: " + "; ".join(entries)
    if len(whole) <= limit:
        assert text == whole
    else:
        assert text.endswith(("more)", "…"))


def test_a_long_list_of_issues_stays_within_the_condition_message_limit() -> None:
    problems = [FieldProblem(("spec", f"f{n}"), "x" * 100, "policy") for n in range(100)]
    message = unreadable_policies(VISION_SCOPE, problems).message
    assert len(message) <= MESSAGE_LIMIT
    listed = message.count("policy: spec.f")
    assert 10 < listed < 100
    assert message.endswith(f"xxx (and {100 - listed} more)")


# The status patch -------------------------------------------------------------------------------


def with_status(status: Mapping[str, Any] | None, generation: int | None = 3) -> dict[str, Any]:
    obj = workload({"image": "ubuntu"})
    if generation is not None:
        obj["metadata"]["generation"] = generation
    if status is not None:
        obj["status"] = copy.deepcopy(dict(status))
    return obj


COMPLIANT = Assessment(ComplianceReason.COMPLIANT, "admitted")
NONCOMPLIANT = Assessment(ComplianceReason.NONCOMPLIANT, "refused: spec.image: required")
FINDING = {
    "field": "spec.nodePools",
    "rule": "options",
    "message": "'v100' is not among the options",
    "enforcement": "audit",
    "policy": "WorkloadPolicy vision/vision-training",
    "scope": "project vision",
}
WARNING = {**FINDING, "field": "spec.priorityClass", "enforcement": "warn"}
AUDITED = Assessment(ComplianceReason.COMPLIANT, "admitted, with findings", (FINDING,))


def compliant_condition(**changes: Any) -> dict[str, Any]:
    return {
        "type": CONDITION_TYPE,
        "status": "True",
        "reason": "Compliant",
        "message": "admitted",
        "lastTransitionTime": EARLIER,
        "observedGeneration": 3,
        **changes,
    }


LAUNCHED = {
    "type": "Launched",
    "status": "True",
    "reason": "JobCreated",
    "message": "",
    "lastTransitionTime": EARLIER,
}


@pytest.mark.parametrize(
    ("status", "assessment", "patch"),
    [
        pytest.param(
            None,
            COMPLIANT,
            {"conditions": [compliant_condition(lastTransitionTime="2026-03-01T12:00:00Z")]},
            id="first-status",
        ),
        pytest.param(
            {"conditions": [LAUNCHED], "observedGeneration": 2, "phase": "Running"},
            COMPLIANT,
            {
                "conditions": [
                    LAUNCHED,
                    compliant_condition(lastTransitionTime="2026-03-01T12:00:00Z"),
                ]
            },
            id="appended-after-the-operators-conditions",
        ),
        pytest.param(
            {"conditions": [compliant_condition(), LAUNCHED]},
            COMPLIANT,
            None,
            id="unchanged",
        ),
        pytest.param(
            {"conditions": [compliant_condition(), LAUNCHED]},
            NONCOMPLIANT,
            {
                "conditions": [
                    compliant_condition(
                        status="False",
                        reason="Noncompliant",
                        message="refused: spec.image: required",
                        lastTransitionTime="2026-03-01T12:00:00Z",
                    ),
                    LAUNCHED,
                ]
            },
            id="turns-false-in-place-at-now",
        ),
        pytest.param(
            {"conditions": [compliant_condition(message="admitted before")]},
            COMPLIANT,
            {"conditions": [compliant_condition()]},
            id="new-message-same-status-keeps-the-transition-time",
        ),
        pytest.param(
            {"conditions": [compliant_condition(observedGeneration=2)]},
            COMPLIANT,
            {"conditions": [compliant_condition()]},
            id="new-generation-recorded",
        ),
        pytest.param(
            {"conditions": [compliant_condition()]},
            AUDITED,
            {
                "conditions": [compliant_condition(message="admitted, with findings")],
                "compliance": {"enforcement": "audit", "findings": [FINDING]},
            },
            id="audit-findings",
        ),
        pytest.param(
            {"conditions": [compliant_condition()]},
            Assessment(ComplianceReason.COMPLIANT, "admitted", (FINDING, WARNING)),
            {"compliance": {"enforcement": "warn", "findings": [FINDING, WARNING]}},
            id="warn-is-the-stricter-mode",
        ),
        pytest.param(
            {
                "conditions": [compliant_condition()],
                "compliance": {"enforcement": "audit", "findings": [FINDING]},
            },
            COMPLIANT,
            {"compliance": None},
            id="findings-gone-removed",
        ),
    ],
)
def test_the_status_patch_changes_only_what_the_assessment_changes(
    status: Mapping[str, Any] | None, assessment: Assessment, patch: Mapping[str, Any] | None
) -> None:
    obj = with_status(status)
    assert status_patch(obj, assessment, NOW) == (None if patch is None else {"status": patch})


def test_a_workload_without_a_generation_gets_a_condition_without_one() -> None:
    patch = status_patch(with_status(None, generation=None), COMPLIANT, NOW)
    assert patch is not None
    assert patch == {
        "status": {
            "conditions": [
                {
                    "type": CONDITION_TYPE,
                    "status": "True",
                    "reason": "Compliant",
                    "message": "admitted",
                    "lastTransitionTime": "2026-03-01T12:00:00Z",
                }
            ]
        }
    }


def test_the_patch_never_writes_the_operators_observed_generation() -> None:
    obj = with_status({"observedGeneration": 1, "conditions": [LAUNCHED]})
    patch = status_patch(obj, NONCOMPLIANT, NOW)
    assert patch is not None
    status = patch["status"]
    assert isinstance(status, dict)
    assert set(status) == {"conditions"}


ASSESSMENTS = st.builds(
    Assessment,
    st.sampled_from(ComplianceReason),
    st.text(max_size=40),
    st.lists(st.sampled_from([FINDING, WARNING]), max_size=3).map(tuple),
)
STATUSES = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "conditions": st.lists(
                st.sampled_from(
                    [LAUNCHED, compliant_condition(), compliant_condition(status="False")]
                ),
                max_size=2,
                unique_by=lambda condition: condition["type"],
            ),
            "compliance": st.just({"enforcement": "audit", "findings": [FINDING]}),
            "observedGeneration": st.integers(min_value=0, max_value=5),
        },
    ),
)


@given(STATUSES, ASSESSMENTS, ASSESSMENTS, st.integers(min_value=1, max_value=10**6))
def test_a_status_written_is_found_right_and_transitions_only_on_a_change_of_status(
    status: Mapping[str, Any] | None,
    first: Assessment,
    second: Assessment,
    seconds_later: int,
) -> None:
    """Applying the patch, then assessing again (even later) asks for nothing: the writer
    patches only on change. A second assessment moves lastTransitionTime only when the
    condition's status changes, and every other condition is kept as it was."""
    obj = with_status(status)
    later = NOW + timedelta(seconds=seconds_later)
    patch = status_patch(obj, first, NOW)
    written = obj if patch is None else apply_merge_patch(obj, patch)
    assert status_patch(written, first, later) is None
    again = status_patch(written, second, later)
    final = written if again is None else apply_merge_patch(written, again)
    conditions = {c["type"]: c for c in final["status"]["conditions"]}
    before = {c["type"]: c for c in written["status"]["conditions"]}
    assert {k: v for k, v in conditions.items() if k != CONDITION_TYPE} == {
        k: v for k, v in before.items() if k != CONDITION_TYPE
    }
    kept = before[CONDITION_TYPE]["status"] == conditions[CONDITION_TYPE]["status"]
    assert (
        conditions[CONDITION_TYPE]["lastTransitionTime"]
        == before[CONDITION_TYPE]["lastTransitionTime"]
    ) is kept
    assert final["status"].get("observedGeneration") == (status or {}).get("observedGeneration")
