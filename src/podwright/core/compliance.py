"""What a Workload's status says of its compliance with the policies in force now.

Admission decides once; policies change afterwards. A policy change never changes an admitted
workload (its spec was fixed at admission), so the cluster says instead, on each Workload, whether
the current policies would still admit it: the ``PolicyCompliant`` condition (``True`` with reason
``Compliant``; ``False`` with ``Noncompliant``, ``WorkloadInvalid`` or ``PolicyUnreadable`` and a
message listing every issue, within :data:`MESSAGE_LIMIT` characters), and ``status.compliance``:
the findings of rules in warn and audit mode, which admit the workload but are worth knowing.
The condition speaks of policies only: whether the cluster profile can render a Workload is
judged once, at admission (the validating webhook refuses what it cannot), and a Workload admitted
before a profile change is failed by the operator with the same message, in its task's status.

Two pure steps, so the writer patches only on change: :func:`assess` evaluates a Workload through
the one pipeline the webhooks use; :func:`status_patch` turns the assessment into the merge patch
of ``status`` that brings the Workload there, or None when it is there already. The condition's
``lastTransitionTime`` moves only when its status does (the API conventions' rule); the top-level
``status.observedGeneration`` is the operator's and is never written here.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from datetime import datetime

from podwright.core.admission import (
    PolicyFor,
    evaluate_workload,
    finding,
    problem_text,
    violation_text,
)
from podwright.core.assets import AssetCatalogue
from podwright.core.lifecycle.objects import JsonObject, condition, integer, items, rfc3339, section
from podwright.core.policies import Enforcement, PolicyError, Scope
from podwright.core.problems import FieldProblem, ProblemsError

CONDITION_TYPE = "PolicyCompliant"
MESSAGE_LIMIT = 2048
"""The most characters a condition's message takes (the CRD allows 32768; ``kubectl describe``
shows it whole, so a long list of issues is cut, saying how many were left out)."""


class ComplianceReason(enum.StrEnum):
    """Why the ``PolicyCompliant`` condition is what it is (metav1.Condition's CamelCase
    reason)."""

    COMPLIANT = "Compliant"
    """The current policies admit the workload (perhaps with warn or audit findings)."""
    NONCOMPLIANT = "Noncompliant"
    """The current policies would refuse it: an enforced rule is broken."""
    WORKLOAD_INVALID = "WorkloadInvalid"
    """Its spec is not a valid workload (written before the webhooks were installed)."""
    POLICY_UNREADABLE = "PolicyUnreadable"
    """The policies (or assets) of its scope cannot be read or combined: the webhooks refuse
    every workload there until they are fixed."""


@dataclasses.dataclass(frozen=True)
class Assessment:
    """What the current policies say of one Workload."""

    reason: ComplianceReason
    message: str
    """What the condition says: the issues after a head, bounded in length."""
    findings: tuple[Mapping[str, str], ...] = ()
    """The violations of warn- and audit-mode rules, as :func:`~podwright.core.admission.finding`
    writes them."""
    issues: tuple[str, ...] = ()
    """Every issue of a workload that is not compliant, whole (``policy report`` lists them)."""

    @property
    def compliant(self) -> bool:
        return self.reason is ComplianceReason.COMPLIANT


def assess(
    obj: Mapping[str, object], scope: Scope, policy_for: PolicyFor, catalogue: AssetCatalogue
) -> Assessment:
    """``obj`` (a Workload) evaluated under the effective policies of ``scope``, its namespace's
    project, as the validating webhook would evaluate it now."""
    try:
        evaluation = evaluate_workload(obj, policy_for, catalogue)
    except PolicyError as error:
        return unreadable_policies(scope, error.problems)
    except ProblemsError as error:
        issues = tuple(problem_text(problem) for problem in error.problems)
        return Assessment(
            ComplianceReason.WORKLOAD_INVALID,
            bounded_list("the workload is not valid: ", issues),
            issues=issues,
        )
    findings = tuple(finding(violation) for violation in evaluation.warnings + evaluation.audited)
    if not evaluation.accepted:
        issues = tuple(violation_text(violation) for violation in evaluation.violations)
        return Assessment(
            ComplianceReason.NONCOMPLIANT,
            bounded_list(f"the current policies of {scope} would refuse it: ", issues),
            findings,
            issues,
        )
    message = f"the current policies of {scope} admit it"
    if findings:
        count = len(findings)
        message += (
            f", with {count} finding{'s' if count > 1 else ''} of rules in warn or audit mode "
            "(status.compliance.findings)"
        )
    return Assessment(ComplianceReason.COMPLIANT, message, findings)


def unreadable_policies(scope: Scope, problems: Sequence[FieldProblem]) -> Assessment:
    """The assessment of every Workload of ``scope`` while its policies or assets cannot be
    read or combined (``problems`` says why)."""
    issues = tuple(problem_text(problem) for problem in problems)
    return Assessment(
        ComplianceReason.POLICY_UNREADABLE,
        bounded_list(
            f"the policies of {scope} cannot be applied, so the webhooks admit no workload there: ",
            issues,
        ),
        issues=issues,
    )


def bounded_list(head: str, entries: Sequence[str], limit: int = MESSAGE_LIMIT) -> str:
    """``head`` and ``entries`` joined by ``; ``, at most ``limit`` characters: the entries that
    do not fit are counted instead (``… (and 3 more)``), and a first entry that cannot fit even
    alone is cut short with an ellipsis."""
    if limit < len(head) + 1 + _more_room(max(len(entries) - 1, 0)):
        raise ValueError(
            f"limit: {limit} characters leave no room for {len(entries)} entries after a head "
            f"of {len(head)}"
        )
    text = head + "; ".join(entries)
    if len(text) <= limit:
        return text
    text = head
    for index, entry in enumerate(entries):
        separator = "; " if index else ""
        after = len(entries) - index - 1
        if len(text) + len(separator) + len(entry) + _more_room(after) <= limit:
            text += separator + entry
        elif index == 0:
            room = limit - len(text) - 1 - _more_room(after)
            return text + entry[:room] + "…" + _more(after)
        else:
            return text + _more(len(entries) - index)
    return text


def _more(left: int) -> str:
    """``" (and N more)"`` for ``left`` entries left out (nothing when none are)."""
    return f" (and {left} more)" if left else ""


def _more_room(left: int) -> int:
    return len(_more(left))


def status_patch(
    obj: JsonObject, assessment: Assessment, now: datetime
) -> dict[str, object] | None:
    """The JSON merge patch of ``status`` that makes ``obj`` carry ``assessment``, or None when
    it carries it already.

    The condition list is written whole (a merge patch replaces lists), with every other
    condition as it was: the caller makes the patch conditional on the resourceVersion it read,
    so a condition another writer added meanwhile is never lost. ``now`` becomes the
    ``lastTransitionTime`` when the condition's status changes."""
    status = section(obj, "status")
    current = condition(obj, CONDITION_TYPE)
    wanted = _condition(obj, assessment, current, now)
    compliance = _compliance(assessment)
    patch: dict[str, object] = {}
    if current is None or dict(current) != wanted:
        conditions = [
            wanted if entry.get("type") == CONDITION_TYPE else dict(entry)
            for entry in items(status, "conditions")
        ]
        patch["conditions"] = conditions if current is not None else [*conditions, wanted]
    if status.get("compliance") != compliance:
        patch["compliance"] = compliance
    return {"status": patch} if patch else None


def _condition(
    obj: JsonObject, assessment: Assessment, current: JsonObject | None, now: datetime
) -> dict[str, object]:
    status = "True" if assessment.compliant else "False"
    kept = current.get("lastTransitionTime") if current is not None else None
    changed = current is None or current.get("status") != status or not isinstance(kept, str)
    wanted: dict[str, object] = {
        "type": CONDITION_TYPE,
        "status": status,
        "reason": assessment.reason.value,
        "message": assessment.message,
        "lastTransitionTime": rfc3339(now) if changed else kept,
    }
    generation = integer(section(obj, "metadata"), "generation")
    if generation is not None:
        wanted["observedGeneration"] = generation
    return wanted


def _compliance(assessment: Assessment) -> dict[str, object] | None:
    """``status.compliance``: the findings, and the strictest mode among them (``warn`` when
    any is a warning); None (absent) when there are none."""
    if not assessment.findings:
        return None
    modes = {found.get("enforcement") for found in assessment.findings}
    strictest = Enforcement.WARN if Enforcement.WARN.value in modes else Enforcement.AUDIT
    return {
        "enforcement": strictest.value,
        "findings": [dict(found) for found in assessment.findings],
    }
