"""Building policies, submissions and evaluations in tests, without the file layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue
from podwright.core.effective_policy import EffectivePolicy, effective_policy
from podwright.core.evaluation import Evaluation, evaluate
from podwright.core.policies import Policy, Scope, policy_from_data
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import submission_from_data

CLUSTER = {"cluster": "prod"}
DEPARTMENT = {"cluster": "prod", "department": "research"}
PROJECT = {"cluster": "prod", "department": "research", "project": "vision"}


def policy_data(
    body: Mapping[str, object],
    *,
    scope: object = None,
    workload_type: str = "workspace",
    name: str = "policy",
    enforcement: str | None = None,
) -> dict[str, object]:
    """A WorkloadPolicy document around ``body`` (its defaults, rules, imposedAssets)."""
    spec: dict[str, object] = {
        "scope": CLUSTER if scope is None else scope,
        "workloadType": workload_type,
        **body,
    }
    if enforcement is not None:
        spec["enforcement"] = enforcement
    return {
        "apiVersion": "podwright.dev/v1",
        "kind": "WorkloadPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def make_policy(body: Mapping[str, object], **options: object) -> Policy:
    return policy_from_data(policy_data(body, **options), source=str(options.get("name", "policy")))  # type: ignore[arg-type]


def combine(
    policies: Sequence[Policy],
    scope: Mapping[str, str] | None = None,
    workload_type: str = "workspace",
) -> EffectivePolicy:
    names = tuple((scope or PROJECT).values())
    return effective_policy(policies, Scope(names), WorkloadType(workload_type))


def run(
    policies: Sequence[Policy],
    spec: Mapping[str, object],
    *,
    workload_type: str = "workspace",
    scope: Mapping[str, str] | None = None,
    catalogue: AssetCatalogue = EMPTY_CATALOGUE,
) -> Evaluation:
    kind = WorkloadType(workload_type)
    submission = submission_from_data(dict(spec), kind)
    return evaluate(combine(policies, scope, workload_type), submission, kind, catalogue)


def issues(evaluation: Evaluation) -> list[tuple[str, str]]:
    """(field, rule) of every enforced violation."""
    return [(violation.field, violation.rule) for violation in evaluation.violations]
