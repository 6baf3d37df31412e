"""The final workload is judged, whatever produced each value.

Rules are checked against every value of the effective workload (the submission's, a policy or
attribute default, an imposed asset, a ``defaultFrom``), and the workload's own consistency (a
limit not below its request, a field of the right distributed framework) is checked on the
final workload by :func:`~podwright.core.workloads.inconsistencies`, which evaluation and the
renderer (a submission rendered without policies) both call.
"""

from __future__ import annotations

from typing import Any

import pytest

from podwright.core.assets import catalogue_from_data
from podwright.core.policies import PolicyError
from podwright.core.render import render
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import (
    WorkloadInputError,
    check_runnable,
    inconsistencies,
    submission_from_data,
)
from tests.policy_helpers import CLUSTER, PROJECT, make_policy, run

CATALOGUE = catalogue_from_data(
    {
        "apiVersion": "podwright.dev/v1",
        "kind": "AssetCatalogue",
        "assets": [
            {
                "id": "big",
                "name": "scratch",
                "kind": "pvc",
                "spec": {"claimName": "s", "path": "/s", "claimInfo": {"size": "2Ti"}},
            }
        ],
    }
)

STEP_FROM_LIMIT = {
    "compute": {
        "cpuCoreRequest": {
            "step": 0.5,
            "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": 0.5},
        }
    }
}


@pytest.mark.parametrize(
    ("body", "spec", "field", "details"),
    [
        pytest.param(
            {"rules": {"compute": {"gpuDevicesRequest": {"max": 2}}}},
            {"compute": {"gpuDevicesRequest": 4}},
            "compute.gpuDevicesRequest",
            "4 (submission) is above the maximum 2",
            id="submission",
        ),
        pytest.param(
            {"rules": STEP_FROM_LIMIT},
            {"compute": {"cpuCoreLimit": 1.5}},
            "compute.cpuCoreRequest",
            "0.75 (defaultFrom compute.cpuCoreLimit × 0.5 (cluster prod)) is not a multiple of "
            "the step 0.5 counted from 0",
            id="defaultFrom of a submitted value",
        ),
        pytest.param(
            {
                "rules": {
                    "ports": {
                        "attributes": {
                            "external": {
                                "min": 1024,
                                "defaultFrom": {"field": "container", "factor": 1},
                            }
                        }
                    }
                }
            },
            {"ports": [{"name": "web", "container": 80}]},
            "ports[web].external",
            "80 (defaultFrom ports.container × 1 (cluster prod)) is below the minimum 1024",
            id="defaultFrom inside a submitted instance",
        ),
        pytest.param(
            {
                "imposedAssets": ["big"],
                "rules": {
                    "storage": {"pvc": {"attributes": {"claimInfo": {"size": {"max": "1Ti"}}}}}
                },
            },
            {},
            "storage.pvc[scratch].claimInfo.size",
            "'2Ti' (imposed asset big (cluster prod)) is above the maximum '1Ti'",
            id="imposed asset",
        ),
    ],
)
def test_a_rule_judges_a_value_whatever_produced_it(
    body: dict[str, Any], spec: dict[str, Any], field: str, details: str
) -> None:
    evaluation = run([make_policy(body)], spec, catalogue=CATALOGUE)
    assert [(issue.field, issue.details) for issue in evaluation.violations] == [(field, details)]


@pytest.mark.parametrize(
    ("policies", "spec", "workload_type", "field", "details"),
    [
        pytest.param(
            [{"defaults": {"compute": {"cpuCoreLimit": 1}}}],
            {"compute": {"cpuCoreRequest": 2}},
            "workspace",
            "compute.cpuCoreLimit",
            "cpuCoreLimit 1 (policy default (cluster prod)) is below cpuCoreRequest 2 (submission)",
            id="limit from a policy default",
        ),
        pytest.param(
            [
                {
                    "defaults": {"compute": {"cpuMemoryLimit": "1Gi"}},
                    "rules": {
                        "compute": {
                            "cpuMemoryRequest": {
                                "defaultFrom": {"field": "cpuMemoryLimit", "factor": 2}
                            }
                        }
                    },
                }
            ],
            {},
            "workspace",
            "compute.cpuMemoryLimit",
            "cpuMemoryLimit '1Gi' (policy default (cluster prod)) is below cpuMemoryRequest "
            "'2Gi' (defaultFrom compute.cpuMemoryLimit × 2 (cluster prod))",
            id="request from a defaultFrom",
        ),
        pytest.param(
            [{"defaults": {"autoscaling": {"maxReplicas": 2}}}],
            {"autoscaling": {"minReplicas": 3}},
            "inference",
            "autoscaling.maxReplicas",
            "maxReplicas 2 (policy default (cluster prod)) is below minReplicas 3 (submission)",
            id="replicas",
        ),
        pytest.param(
            [],
            {"worker": {"slotsPerWorker": 2, "distributedFramework": "PyTorch"}},
            "distributed",
            "worker.slotsPerWorker",
            "slotsPerWorker 2 (submission) applies only to MPI; the framework is 'PyTorch' "
            "(submission)",
            id="another framework's field, submitted before the framework",
        ),
        pytest.param(
            [{"defaults": {"worker": {"distributedFramework": "TF"}}}],
            {"worker": {"minReplicas": 1}},
            "distributed",
            "worker.minReplicas",
            "minReplicas 1 (submission) applies only to PyTorch; the framework is 'TF' "
            "(policy default (cluster prod))",
            id="another framework's field, the framework from a default",
        ),
    ],
)
def test_the_final_workload_must_be_consistent(
    policies: list[dict[str, Any]],
    spec: dict[str, Any],
    workload_type: str,
    field: str,
    details: str,
) -> None:
    loaded = [make_policy(body, workload_type=workload_type) for body in policies]
    evaluation = run(loaded, spec, workload_type=workload_type)
    assert [(issue.field, issue.rule, issue.details) for issue in evaluation.violations] == [
        (field, "distributedFramework" if "applies only" in details else "consistency", details)
    ]
    assert evaluation.violations[0].policy is None  # always enforced


def test_a_default_that_breaks_a_rule_of_another_scope_through_default_from() -> None:
    cluster = make_policy({"rules": STEP_FROM_LIMIT}, scope=CLUSTER, name="c")
    project = make_policy({"defaults": {"compute": {"cpuCoreLimit": 1.5}}}, scope=PROJECT, name="p")
    with pytest.raises(PolicyError) as caught:
        run([cluster, project], {})
    (problem,) = caught.value.problems
    assert problem.source == "p"
    assert problem.path == ("spec", "defaults", "compute", "cpuCoreLimit")
    assert problem.message == (
        "this default of project vision makes compute.cpuCoreRequest default to 0.75 "
        "(defaultFrom compute.cpuCoreLimit × 0.5), which breaks the 'step' rule of cluster prod "
        "(policy 'c'): 0.75 is not a multiple of the step 0.5 counted from 0"
    )
    # A submitted limit is judged at evaluation instead: the policies combine.
    assert run([cluster], {"compute": {"cpuCoreLimit": 2}}).accepted


def test_a_default_instance_of_another_scope_computes_an_attribute_that_breaks_a_rule() -> None:
    cluster = make_policy(
        {
            "rules": {
                "ports": {
                    "attributes": {"external": {"min": 1024, "defaultFrom": {"field": "container"}}}
                }
            }
        },
        scope=CLUSTER,
        name="c",
    )
    project = make_policy(
        {"defaults": {"ports": {"instances": [{"name": "web", "container": 80}]}}},
        scope=PROJECT,
        name="p",
    )
    with pytest.raises(PolicyError) as caught:
        run([cluster, project], {})
    (problem,) = caught.value.problems
    assert problem.path == ("spec", "defaults", "ports", "instances", 0, "container")
    assert "makes ports.external default to 80" in problem.message
    assert "breaks the 'min' rule of cluster prod" in problem.message


@pytest.mark.parametrize(
    ("workload_type", "spec", "path", "message"),
    [
        pytest.param(
            "training",
            {"compute": {"cpuCoreRequest": 2, "cpuCoreLimit": 1}},
            ("compute", "cpuCoreLimit"),
            "cpuCoreLimit 1 is below cpuCoreRequest 2",
            id="cpu",
        ),
        pytest.param(
            "workspace",
            {"compute": {"cpuMemoryRequest": "2Gi", "cpuMemoryLimit": "2G"}},
            ("compute", "cpuMemoryLimit"),
            "cpuMemoryLimit '2G' is below cpuMemoryRequest '2Gi'",
            id="memory, across units",
        ),
        pytest.param(
            "workspace",
            {"compute": {"gpuPortionRequest": 0.5, "gpuPortionLimit": 0.25}},
            ("compute", "gpuPortionLimit"),
            "gpuPortionLimit 0.25 is below gpuPortionRequest 0.5",
            id="GPU portion",
        ),
        pytest.param(
            "workspace",
            {"compute": {"gpuMemoryRequest": "8Gi", "gpuMemoryLimit": "4Gi"}},
            ("compute", "gpuMemoryLimit"),
            "gpuMemoryLimit '4Gi' is below gpuMemoryRequest '8Gi'",
            id="GPU memory",
        ),
        pytest.param(
            "inference",
            {"autoscaling": {"minReplicas": 3, "maxReplicas": 2}},
            ("autoscaling", "maxReplicas"),
            "maxReplicas 2 is below minReplicas 3",
            id="Knative replicas",
        ),
        pytest.param(
            "distributed",
            {"worker": {"distributedFramework": "PyTorch", "minReplicas": 3, "maxReplicas": 2}},
            ("worker", "maxReplicas"),
            "maxReplicas 2 is below minReplicas 3",
            id="elastic PyTorch replicas",
        ),
        pytest.param(
            "distributed",
            {"master": {"compute": {"cpuCoreRequest": 4, "cpuCoreLimit": 2}}},
            ("master", "compute", "cpuCoreLimit"),
            "cpuCoreLimit 2 is below cpuCoreRequest 4",
            id="a role's limit",
        ),
        pytest.param(
            "distributed",
            {"worker": {"sshAuthMountPath": "/ssh", "distributedFramework": "JAX"}},
            ("worker", "sshAuthMountPath"),
            "sshAuthMountPath '/ssh' applies only to MPI; the framework is 'JAX'",
            id="another framework's field",
        ),
    ],
)
def test_a_workload_rendered_without_policies_must_be_consistent(
    workload_type: str, spec: dict[str, Any], path: tuple[str, ...], message: str
) -> None:
    kind = WorkloadType(workload_type)
    submission = submission_from_data({"type": workload_type, "spec": spec})
    [found] = inconsistencies(kind, submission.spec)
    assert (found.path, found.message) == (path, message)
    with pytest.raises(WorkloadInputError) as in_file:
        check_runnable(kind, submission.spec, submission.spec_path)
    assert [(problem.path, problem.message) for problem in in_file.value.problems] == [
        (("spec", *path), message)
    ]
    # The renderer never emits such a workload, whoever calls it.
    with pytest.raises(WorkloadInputError, match=r"is below|applies only"):
        render(kind, "job", submission.spec)


def test_values_within_their_bounds_are_consistent() -> None:
    spec = {
        "compute": {
            "cpuCoreRequest": 1,
            "cpuCoreLimit": 1,
            "cpuMemoryRequest": "1Gi",
            "cpuMemoryLimit": "1073741824",
        }
    }
    assert inconsistencies(WorkloadType.WORKSPACE, spec) == []
