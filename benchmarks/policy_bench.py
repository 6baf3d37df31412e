"""Policy evaluation throughput and latency, and how its cost grows.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/policy_bench.py``). Prints:

1. a realistic tree (cluster + department + project policies for training, >= 40 rules, five
   itemized fields with >= 5 default instances each, an imposed asset) evaluated against a
   realistic submission, one core, sequentially: evaluations per second, p50/p99/max latency;
   the same with the submission's parsing included; and the cost of combining the tree;
2. parse + evaluate (prepared policy) as a multiple of one ``copy.deepcopy`` of the submission's
   data, the two timed alternately in one loop so that machine noise hits both alike: for the
   realistic submission, and for the biggest example workload (``examples/workload-*.yaml``)
   under the example policies of its type;
3. cost against the number of ruled fields, and against the number of itemized instances, with
   the cost per field / per instance, which stays flat when growth is linear.

Targets (issue 3): >= 5,000 evaluations/s and p99 < 1 ms on one core. Target (issue 18): parse +
evaluate <= 10x one deepcopy of the submission, so that the admission webhook can afford it.
"""

from __future__ import annotations

import copy
import gc
import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from podwright.adapters.documents import read_document
from podwright.api.loading import load_policies
from podwright.core.assets import catalogue_from_data
from podwright.core.effective_policy import effective_policy
from podwright.core.evaluation import PreparedPolicy, evaluate, prepare
from podwright.core.policies import Policy, Scope, policy_from_data
from podwright.core.workload_documents import read_workload_document
from podwright.core.workload_fields import SCHEMAS, Leaf, Section, ValueType, WorkloadType, field_at
from podwright.core.workloads import Submission, submission_from_data

TRAINING = WorkloadType.TRAINING
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEEPCOPY_TARGET = 10
PROJECT = Scope(("prod", "research", "vision"))
CATALOGUE = catalogue_from_data(
    {
        "apiVersion": "podwright.dev/v1",
        "kind": "AssetCatalogue",
        "assets": [
            {
                "id": "datasets",
                "name": "datasets",
                "kind": "pvc",
                "spec": {"claimName": "ds", "path": "/data", "readOnly": True},
            }
        ],
    }
)


def policy(name: str, scope: dict[str, str], body: dict[str, Any]) -> Policy:
    return policy_from_data(
        {
            "apiVersion": "podwright.dev/v1",
            "kind": "WorkloadPolicy",
            "metadata": {"name": name},
            "spec": {"scope": scope, "workloadType": "training", **body},
        }
    )


def instances(
    prefix: str, count: int, key: str = "name", **attributes: Any
) -> list[dict[str, Any]]:
    return [{key: f"{prefix}{index}", **attributes} for index in range(count)]


def realistic_tree(env_instances: int = 8) -> list[Policy]:
    cluster = policy(
        "cluster",
        {"cluster": "prod"},
        {
            "defaults": {
                "imagePullPolicy": "IfNotPresent",
                "priorityClass": "low",
                "backoffLimit": 3,
                "compute": {
                    "cpuCoreLimit": 8,
                    "cpuMemoryRequest": "16Gi",
                    "cpuMemoryLimit": "32Gi",
                    "extendedResources": {
                        "instances": instances("vendor.com/dev", 5, key="resource", quantity=1),
                        "attributes": {"quantity": 1},
                    },
                },
                "security": {
                    "runAsNonRoot": True,
                    "runAsUid": 1000,
                    "runAsGid": 1000,
                    "allowPrivilegeEscalation": False,
                },
                "environmentVariables": {"instances": instances("ENV_", env_instances, value="x")},
                "tolerations": {
                    "instances": instances("tol", 5, operator="Exists", effect="NoSchedule")
                },
            },
            "rules": {
                "image": {"required": True},
                "imagePullPolicy": {"options": [{"value": "Always"}, {"value": "IfNotPresent"}]},
                "backoffLimit": {"min": 0, "max": 10},
                "terminationGracePeriodSeconds": {"max": 600},
                "priorityClass": {
                    "options": [{"value": "low"}, {"value": "medium"}, {"value": "high"}]
                },
                "compute": {
                    "cpuCoreRequest": {
                        "min": 0.5,
                        "max": 32,
                        "step": 0.5,
                        "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": 0.5},
                    },
                    "cpuCoreLimit": {"max": 64},
                    "cpuMemoryRequest": {"min": "1Gi", "max": "256Gi"},
                    "cpuMemoryLimit": {"max": "512Gi"},
                    "gpuDevicesRequest": {"max": 8},
                    "gpuMemoryRequest": {"max": "80Gi"},
                    "largeShmRequest": {"canEdit": True},
                    "extendedResources": {
                        "instances": {"locked": ["vendor.com/dev0"]},
                        "attributes": {"quantity": {"max": 4, "required": True}},
                    },
                },
                "security": {
                    "runAsUid": {"min": 500},
                    "runAsGid": {"min": 500},
                    "runAsNonRoot": {"canEdit": False},
                    "allowPrivilegeEscalation": {"canEdit": False},
                    "hostIpc": {"canEdit": False},
                    "hostNetwork": {"canEdit": False},
                    "seccompProfileType": {
                        "options": [{"value": "RuntimeDefault"}, {"value": "Localhost"}]
                    },
                    "capabilities": {"options": [{"value": "SYS_PTRACE"}, {"value": "NET_ADMIN"}]},
                },
                "environmentVariables": {
                    "instances": {"locked": ["ENV_0", "ENV_1"]},
                    "attributes": {"value": {"required": True}},
                },
                "tolerations": {"instances": {"canAdd": False}},
            },
            "imposedAssets": ["datasets"],
        },
    )
    department = policy(
        "department",
        {"cluster": "prod", "department": "research"},
        {
            "defaults": {
                "nodePools": ["a100", "h100"],
                "autoDeletionTimeAfterCompletionSeconds": 86400,
                "labels": {"instances": instances("label-", 6, value="research")},
                "ports": {
                    "instances": [
                        {"name": f"p{index}", "container": 8000 + index} for index in range(5)
                    ]
                },
            },
            "rules": {
                "nodePools": {"options": [{"value": "a100"}, {"value": "h100"}, {"value": "l4"}]},
                "autoDeletionTimeAfterCompletionSeconds": {"min": 60, "max": 604800},
                "restartPolicy": {"options": [{"value": "Never"}, {"value": "OnFailure"}]},
                "createHomeDir": {"canEdit": True},
                "workingDir": {"required": False},
                "category": {"options": [{"value": "train"}, {"value": "tune"}]},
                "completions": {"min": 1, "max": 100},
                "parallelism": {"min": 1, "max": 16},
                "probes": {
                    "readiness": {
                        "initialDelaySeconds": {"max": 600},
                        "periodSeconds": {"min": 1, "max": 300},
                        "timeoutSeconds": {"min": 1, "max": 60},
                        "successThreshold": {"min": 1, "max": 10},
                        "failureThreshold": {"min": 1, "max": 30},
                    }
                },
                "labels": {
                    "instances": {"locked": ["label-0"]},
                    "attributes": {"value": {"required": True}},
                },
                "ports": {
                    "attributes": {
                        "container": {"min": 1024},
                        "external": {"defaultFrom": {"field": "container", "factor": 1}},
                    }
                },
            },
        },
    )
    project = policy(
        "project",
        {"cluster": "prod", "department": "research", "project": "vision"},
        {
            "enforcement": "warn",
            "defaults": {"image": "nvcr.io/nvidia/pytorch:24.08-py3", "nodeType": "dgx"},
            "rules": {
                "nodeType": {"options": [{"value": "dgx"}, {"value": "hgx"}]},
                "tty": {"canEdit": True},
                "stdin": {"canEdit": True},
                "podAffinityTopology": {"required": False},
                "annotations": {"instances": {"canAdd": True}},
            },
        },
    )
    return [cluster, department, project]


def realistic_submission(env_instances: int = 8) -> dict[str, Any]:
    return {
        "type": "training",
        "name": "resnet",
        "spec": {
            "command": "python train.py",
            "args": "--epochs 90",
            "completions": 4,
            "parallelism": 2,
            "compute": {
                "gpuDevicesRequest": 4,
                "cpuCoreLimit": 16,
                "extendedResources": [
                    {"resource": "vendor.com/dev3", "exclude": True},
                    {"resource": "added/x", "quantity": 2},
                ],
            },
            "security": {"runAsUid": 1234},
            "nodePools": ["h100"],
            "environmentVariables": [
                *({"name": f"ENV_{index}", "value": "x"} for index in range(2, env_instances, 2)),
                *({"name": f"MINE_{index}", "value": "y"} for index in range(5)),
            ],
            "labels": [{"name": "owner", "value": "me"}, {"name": "label-3", "value": "override"}],
            "ports": [{"name": "tb", "container": 6006}],
            "probes": {"readiness": {"periodSeconds": 10}},
        },
    }


def count_rules(policies: list[Policy]) -> int:
    return sum(len(item.rules) + len(item.instance_rules) for item in policies)


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    """Microseconds per call of ``action``, ``repeat`` times after a warm-up."""
    return interleaved([action], repeat)[0]


def interleaved(actions: list[Callable[[], object]], repeat: int) -> list[list[float]]:
    """Microseconds per call of each action, calling them in turn ``repeat`` times: whatever
    disturbs the machine for a while disturbs them all alike."""
    for _ in range(min(200, repeat)):
        for action in actions:
            action()
    samples: list[list[float]] = [[] for _ in actions]
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for action, taken in zip(actions, samples, strict=True):
                start = time.perf_counter_ns()
                action()
                taken.append((time.perf_counter_ns() - start) / 1000)
    finally:
        gc.enable()
    return samples


def summary(label: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    rate = 1_000_000 / statistics.fmean(ordered)
    print(
        f"  {label:<40} {rate:>9,.0f}/s   p50 {p50:7.1f} µs   p99 {p99:7.1f} µs   max {ordered[-1]:8.1f} µs"
    )


def against_deepcopy(label: str, prepared: PreparedPolicy, data: dict[str, Any]) -> None:
    """Parse + evaluate ``data`` under ``prepared``, as a multiple of one deep copy of ``data``
    (medians of samples taken alternately)."""
    workload_type = prepared.policy.workload_type
    outcome = evaluate(prepared, read_workload_document(data).submission, workload_type, CATALOGUE)
    assert outcome.accepted, outcome.violations
    evaluations, copies = interleaved(
        [
            lambda: evaluate(
                prepared, read_workload_document(data).submission, workload_type, CATALOGUE
            ),
            lambda: copy.deepcopy(data),
        ],
        20000,
    )
    evaluation, deepcopy = statistics.median(evaluations), statistics.median(copies)
    ratio = evaluation / deepcopy
    verdict = "met" if ratio <= DEEPCOPY_TARGET else "MISSED"
    print(
        f"  {label:<48} {ratio:5.2f}×   (≤ {DEEPCOPY_TARGET}×: {verdict})   "
        f"p50 {evaluation:6.1f} µs, deepcopy {deepcopy:5.1f} µs   "
        f"{1_000_000 / statistics.fmean(evaluations):>7,.0f} evaluations/s"
    )


def biggest_example() -> tuple[str, PreparedPolicy, dict[str, Any]]:
    """The example workload with the most values, and the example policies of its type (on
    the branch of :data:`PROJECT`), prepared."""
    examples = {
        path.name: read_document(str(path), io.StringIO()).data
        for path in sorted(EXAMPLES.glob("workload-*.yaml"))
    }
    name, data = max(examples.items(), key=lambda example: value_count(example[1]))
    assert isinstance(data, dict)
    workload_type = read_workload_document(data).submission.workload_type
    policies = load_policies(
        *(
            EXAMPLES / "policies" / name
            for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
        ),
        cluster=PROJECT.names[0],
    ).policies
    effective = effective_policy(policies, PROJECT, workload_type)
    label = f"{name} ({value_count(data)} values, {len(effective.policies)} policies)"
    return label, prepare(effective, CATALOGUE), data


def value_count(data: object) -> int:
    """How many scalar values a document holds."""
    if isinstance(data, dict):
        return sum(value_count(item) for item in data.values())
    if isinstance(data, list):
        return sum(value_count(item) for item in data)
    return 1


def numeric_leaves() -> list[tuple[str, ...]]:
    """Every integer, number and quantity field of training outside itemized fields."""
    leaves: list[tuple[str, ...]] = []

    def walk(section: Section, prefix: tuple[str, ...]) -> None:
        for name, field in section.fields.items():
            if isinstance(field, Section):
                walk(field, (*prefix, name))
            elif isinstance(field, Leaf) and field.value_type in NUMERIC:
                leaves.append((*prefix, name))

    walk(SCHEMAS[TRAINING], ())
    return leaves


NUMERIC = {ValueType.INTEGER: 1, ValueType.NUMBER: 1, ValueType.QUANTITY: "1Mi"}


def scaled_fields(count: int) -> tuple[PreparedPolicy, Submission]:
    """A policy with ``count`` numeric fields, each with a default and a min/max rule."""
    defaults: dict[str, Any] = {}
    rules: dict[str, Any] = {}
    for path in numeric_leaves()[:count]:
        field = field_at(SCHEMAS[TRAINING], path)
        assert isinstance(field, Leaf)
        node_d, node_r = defaults, rules
        for name in path[:-1]:
            node_d, node_r = node_d.setdefault(name, {}), node_r.setdefault(name, {})
        low = NUMERIC[field.value_type]
        node_d[path[-1]] = low
        high = "1Gi" if isinstance(low, str) else min(10000, field.maximum or 10000)
        node_r[path[-1]] = {"min": low, "max": high}
    item = policy("fields", {"cluster": "prod"}, {"defaults": defaults, "rules": rules})
    prepared = prepare(effective_policy([item], PROJECT, TRAINING), CATALOGUE)
    return prepared, submission_from_data({"image": "x"}, TRAINING)


def marginal(label: str, unit: str, points: list[tuple[int, float]]) -> None:
    """Cost per point and the marginal cost of each step: flat marginal cost = linear."""
    print(f"  {label:>9} {'µs/eval':>9} {f'marginal µs/{unit}':>20}")
    previous: tuple[int, float] | None = None
    for size, cost in points:
        step = "" if previous is None else f"{(cost - previous[1]) / (size - previous[0]):.2f}"
        print(f"  {size:>9} {cost:>9.1f} {step:>20}")
        previous = (size, cost)


def main() -> int:
    tree = realistic_tree()
    effective = effective_policy(tree, PROJECT, TRAINING)
    submission = submission_from_data(realistic_submission())
    result = evaluate(effective, submission, TRAINING, CATALOGUE)
    assert result.accepted, result.violations
    itemized = {path[-1]: len(found) for path, found in effective.instances.items()}
    print(f"podwright policy benchmark (Python {sys.version.split()[0]}, one core, sequential)")
    print(
        f"tree: 3 policies, {count_rules(tree)} rules, {len(effective.defaults)} defaults, "
        f"default instances {itemized}; the effective workload has {len(result.values)} values"
    )
    prepared = prepare(effective, CATALOGUE)
    summary(
        "evaluate (prepared policy)",
        timed(lambda: evaluate(prepared, submission, TRAINING, CATALOGUE), 20000),
    )
    raw = realistic_submission()
    summary(
        "parse submission + evaluate (prepared)",
        timed(lambda: evaluate(prepared, submission_from_data(raw), TRAINING, CATALOGUE), 20000),
    )
    summary(
        "evaluate (preparing on each call)",
        timed(lambda: evaluate(effective, submission, TRAINING, CATALOGUE), 20000),
    )
    summary(
        "combine the tree (effective_policy)",
        timed(lambda: effective_policy(tree, PROJECT, TRAINING), 5000),
    )

    print("\nparse + evaluate (prepared) against one copy.deepcopy of the submission's data:")
    against_deepcopy(f"realistic ({value_count(raw)} values, 3 policies)", prepared, raw)
    against_deepcopy(*biggest_example())

    print("\ncost against ruled fields (each with a default and a min/max rule):")
    points = []
    available = len(numeric_leaves())
    for count in sorted({5, 10, 15, 20, available}):
        scaled, plain = scaled_fields(count)
        cost = statistics.median(
            timed(
                lambda scaled=scaled, plain=plain: evaluate(scaled, plain, TRAINING, CATALOGUE),
                4000,
            )
        )
        points.append((len(scaled.policy.rules), cost))
    marginal("fields", "field", points)

    print("\ncost against itemized instances (environmentVariables: policy defaults + submitted):")
    points = []
    for count in (8, 16, 32, 64, 128, 256):
        grown = prepare(effective_policy(realistic_tree(count), PROJECT, TRAINING), CATALOGUE)
        grown_submission = submission_from_data(realistic_submission(count))
        variables = evaluate(grown, grown_submission, TRAINING, CATALOGUE).workload[
            "environmentVariables"
        ]
        assert isinstance(variables, list)
        cost = statistics.median(
            timed(
                lambda grown=grown, sub=grown_submission: evaluate(grown, sub, TRAINING, CATALOGUE),
                2000,
            )
        )
        points.append((len(variables), cost))
    marginal("instances", "instance", points)
    return 0


if __name__ == "__main__":
    sys.exit(main())
