"""Workload submissions: fields, types and workload types, every problem at its path."""

from __future__ import annotations

from typing import Any

import pytest

from podwright.core.workload_fields import (
    SCHEMAS,
    Itemized,
    Leaf,
    Section,
    ValueType,
    WorkloadType,
    catalogue_rank,
    field_at,
)
from podwright.core.workloads import WorkloadInputError, submission_from_data


def problems(data: Any, workload_type: WorkloadType | None = WorkloadType.WORKSPACE) -> list[str]:
    with pytest.raises(WorkloadInputError) as caught:
        submission_from_data(data, workload_type)
    return [str(problem) for problem in caught.value.problems]


@pytest.mark.parametrize(
    ("spec", "workload_type", "expected"),
    [
        (
            {"imagePulPolicy": "Always"},
            "workspace",
            "imagePulPolicy: unknown field 'imagePulPolicy' (did you mean 'imagePullPolicy'?)",
        ),
        (
            {"imagePullPolicy": "always"},
            "workspace",
            "imagePullPolicy: expected one of 'Always', 'IfNotPresent', 'Never', got 'always' (string)",
        ),
        (
            {"backoffLimit": 2},
            "inference",
            "backoffLimit: 'backoffLimit' is not supported for inference workloads "
            "(only for workspace, training, distributed)",
        ),
        (
            {"storage": {"s3": []}},
            "inference",
            "storage.s3: 's3' is not supported for inference workloads",
        ),
        (
            {"security": {"hostNetwork": True}},
            "inference",
            "security.hostNetwork: 'hostNetwork' is not supported for inference",
        ),
        (
            {"completions": 2},
            "workspace",
            "completions: 'completions' is not supported for workspace workloads "
            "(only for training)",
        ),
        (
            {"servingPort": {"container": 80}},
            "training",
            "servingPort: 'servingPort' is not supported for training workloads "
            "(only for inference)",
        ),
        (
            {"compute": {"gpuDevicesRequest": 1.5}},
            "workspace",
            "compute.gpuDevicesRequest: expected an integer, got 1.5 (number)",
        ),
        (
            {"compute": {"gpuDevicesRequest": True}},
            "workspace",
            "compute.gpuDevicesRequest: expected an integer, got True (boolean)",
        ),
        (
            {"compute": {"cpuMemoryRequest": "lots"}},
            "workspace",
            "compute.cpuMemoryRequest: 'lots' is not a quantity",
        ),
        (
            {"compute": {"cpuCoreRequest": "1"}},
            "workspace",
            "compute.cpuCoreRequest: expected a number, got '1' (string)",
        ),
        (
            {"compute": {"gpuPortionLimit": 1.5}},
            "workspace",
            "compute.gpuPortionLimit: must be at most 1, got 1.5 (number)",
        ),
        (
            {"ports": [{"name": "a", "container": 70000}]},
            "workspace",
            "ports[0].container: must be at most 65535",
        ),
        ({"nodePools": "a100"}, "workspace", "nodePools: expected a list, got 'a100' (string)"),
        (
            {"nodePools": ["a", 1]},
            "workspace",
            "nodePools: item 1: expected a string, got 1 (integer)",
        ),
        (
            {"createHomeDir": "yes"},
            "workspace",
            "createHomeDir: expected true or false, got 'yes' (string)",
        ),
        ({"compute": []}, "workspace", "compute: expected a mapping of fields, got [] (list)"),
        (
            {"labels": {"team": "x"}},
            "workspace",
            "labels: expected a list of instances, each with its 'name'",
        ),
        (
            {"labels": [{"value": "x"}]},
            "workspace",
            "labels[0]: every instance needs its key 'name' (a non-empty string)",
        ),
        (
            {"labels": [{"name": "a"}, {"name": "a"}]},
            "workspace",
            "labels[1].name: 'a' is given twice (first at index 0)",
        ),
        (
            {"labels": [{"name": "a", "exclude": "yes"}]},
            "workspace",
            "labels[0].exclude: expected true or false",
        ),
        (
            {"compute": {"extendedResources": [{"name": "x"}]}},
            "workspace",
            "compute.extendedResources[0]: every instance needs its key 'resource'",
        ),
        (
            {"storage": {"dataVolume": [{"name": "x"}]}},
            "workspace",
            "storage.dataVolume[0]: every instance needs its key 'id'",
        ),
        (
            {"exposedUrls": [{"container": "80"}]},
            "workspace",
            "exposedUrls[0].container: expected an integer",
        ),
        (
            {"image": "x"},
            "distributed",
            "image: distributed training puts every field under 'master' or 'worker', not 'image'",
        ),
        (
            {"master": {"numWorkers": 2}},
            "distributed",
            "master.numWorkers: 'numWorkers' belongs in the 'worker' section",
        ),
        (
            {"worker": {"distributedFramework": "Horovod"}},
            "distributed",
            "worker.distributedFramework: expected one of 'MPI', 'PyTorch', 'TF', 'XGBoost', 'JAX'",
        ),
    ],
)
def test_bad_submissions(spec: dict[str, Any], workload_type: str, expected: str) -> None:
    found = problems(spec, WorkloadType(workload_type))
    assert any(problem.startswith(expected) for problem in found), found


def test_every_problem_is_reported() -> None:
    assert (
        len(problems({"image": 1, "tty": "no", "compute": {"gpuDevicesRequest": -1}, "x": 1})) == 4
    )


def test_wrapped_submissions_carry_their_type() -> None:
    submission = submission_from_data({"type": "training", "name": "r", "spec": {"completions": 3}})
    assert submission.workload_type is WorkloadType.TRAINING
    assert submission.name == "r"
    assert submission.spec == {"completions": 3}
    assert problems({"type": "training", "spec": {}}, WorkloadType.WORKSPACE) == [
        "type: the file says 'training' but 'workspace' was asked for"
    ]
    assert problems({"type": "batch", "spec": {}}, None)[0].startswith(
        "type: expected one of 'workspace', 'training', 'distributed', 'inference'"
    )
    assert problems({"image": "x"}, None)[0].startswith("the workload type is not given")
    assert problems({"spec": {}, "metadata": {}}, WorkloadType.WORKSPACE)[0].startswith(
        "metadata: unknown field"
    )


def test_null_means_not_given_and_group_ids_may_be_comma_separated() -> None:
    submission = submission_from_data(
        {"image": None, "security": {"supplementalGroups": "100, 200"}}, WorkloadType.WORKSPACE
    )
    assert submission.spec == {"security": {"supplementalGroups": [100, 200]}}


def test_the_catalogue_has_the_issues_field_facts() -> None:
    workspace, training = SCHEMAS[WorkloadType.WORKSPACE], SCHEMAS[WorkloadType.TRAINING]
    inference, distributed = SCHEMAS[WorkloadType.INFERENCE], SCHEMAS[WorkloadType.DISTRIBUTED]
    assert set(distributed.fields) == {"master", "worker"}
    worker = distributed.fields["worker"]
    assert isinstance(worker, Section)
    for name in (
        "numWorkers",
        "distributedFramework",
        "minReplicas",
        "maxReplicas",
        "slotsPerWorker",
        "sshAuthMountPath",
        "mpiLauncherCreationPolicy",
        "cleanPodPolicy",
    ):
        assert name in worker.fields
        assert field_at(workspace, (name,)) is None
    for name in ("completions", "parallelism"):
        assert field_at(training, (name,)) is not None
        assert field_at(workspace, (name,)) is None
    for path in [
        ("backoffLimit",),
        ("restartPolicy",),
        ("terminationGracePeriodSeconds",),
        ("terminateAfterPreemption",),
        ("stdin",),
        ("tty",),
        ("security", "allowPrivilegeEscalation"),
        ("security", "hostIpc"),
        ("security", "hostNetwork"),
        ("storage", "s3"),
    ]:
        assert field_at(inference, path) is None, path
        assert field_at(workspace, path) is not None, path
    for name in ("servingPort", "autoscaling", "servingConfiguration"):
        assert field_at(inference, (name,)) is not None
        assert field_at(training, (name,)) is None
    keys = {}
    for path in [
        ("environmentVariables",),
        ("labels",),
        ("annotations",),
        ("imagePullSecrets",),
        ("ports",),
        ("tolerations",),
        ("compute", "extendedResources"),
        *[
            ("storage", kind)
            for kind in (
                "dataVolume",
                "hostPath",
                "git",
                "pvc",
                "nfs",
                "s3",
                "configMapVolumes",
                "secretVolume",
            )
        ],
    ]:
        field = field_at(workspace, path)
        assert isinstance(field, Itemized), path
        keys[path[-1]] = field.key
    assert keys.pop("extendedResources") == "resource"
    assert keys.pop("dataVolume") == "id"
    assert set(keys.values()) == {"name"}
    quantity = field_at(workspace, ("compute", "gpuMemoryRequest"))
    assert isinstance(quantity, Leaf)
    assert quantity.value_type is ValueType.QUANTITY
    enums = {
        ("imagePullPolicy",): ("Always", "IfNotPresent", "Never"),
        ("restartPolicy",): ("Always", "Never", "OnFailure"),
        ("security", "seccompProfileType"): ("RuntimeDefault", "Unconfined", "Localhost"),
        ("security", "uidGidSource"): ("fromTheImage", "custom", "idpToken"),
        ("compute", "gpuRequestType"): ("portion", "memory"),
        ("priorityClass",): (
            "very-low",
            "low",
            "medium-low",
            "medium",
            "medium-high",
            "high",
            "very-high",
        ),
    }
    for path, choices in enums.items():
        field = field_at(workspace, path)
        assert isinstance(field, Leaf)
        assert field.choices == choices
    serving = {
        name: field_at(inference, ("servingPort", name))
        for name in ("protocol", "authorizationType")
    }
    assert [field.choices for field in serving.values() if isinstance(field, Leaf)] == [
        ("http", "grpc"),
        ("public", "authenticatedUsers", "authorizedUsersOrGroups"),
    ]
    service_type = field_at(workspace, ("ports", "serviceType"))
    assert isinstance(service_type, Leaf)
    assert service_type.choices == ("LoadBalancer", "NodePort", "ClusterIP")


def _itemized_within(field: Section | Itemized | Leaf, inside: bool) -> list[str]:
    """The itemized fields found below an itemized field's attributes."""
    if isinstance(field, Itemized):
        found = ["itemized"] if inside else []
        return found + _itemized_within(field.attributes, True)
    if isinstance(field, Section):
        return [name for child in field.fields.values() for name in _itemized_within(child, inside)]
    return []


@pytest.mark.parametrize("workload_type", list(WorkloadType))
def test_no_itemized_field_lies_within_an_instance(workload_type: WorkloadType) -> None:
    # catalogue_rank reads an instance's key up to the last ']' of a path on this ground.
    assert _itemized_within(SCHEMAS[workload_type], False) == []


@pytest.mark.parametrize(
    ("workload_type", "paths"),
    [
        pytest.param(
            WorkloadType.TRAINING,
            [
                "image",
                "priorityClass",
                "storage.pvc[a.b]",
                "storage.pvc[a.b].claimName",
                "storage.pvc[a.b].path",
                "storage.pvc[z[1]]",
                "security.runAsUid",
                "compute.cpuCoreRequest",
                "compute.cpuCoreLimit",
                "compute.gpuDevicesRequest",
                "compute.extendedResources[nvidia.com/gpu]",
                "unknown",
            ],
            id="the-catalogues-order-instances-by-key-unknown-last",
        ),
        pytest.param(
            WorkloadType.DISTRIBUTED,
            ["master.image", "master.compute.cpuCoreLimit", "worker.image", "worker.numWorkers"],
            id="roles-in-order-then-their-fields",
        ),
    ],
)
def test_catalogue_rank_orders_paths_as_the_catalogue_lists_the_fields(
    workload_type: WorkloadType, paths: list[str]
) -> None:
    root = SCHEMAS[workload_type]
    shuffled = paths[1::2] + paths[::2]
    assert sorted(shuffled, key=lambda path: catalogue_rank(root, path)) == paths
