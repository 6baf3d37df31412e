"""Reading pod specs and Pod manifests from plain data: what is accepted, and each error."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1Container, V1PodSpec, V1ResourceRequirements

from podwright.core.field_paths import format_path
from podwright.core.pod_input import PodInputError, pod_input_from_data


def problems_of(data: object) -> list[str]:
    with pytest.raises(PodInputError) as caught:
        pod_input_from_data(data)
    return [str(problem) for problem in caught.value.problems]


def test_a_bare_pod_spec() -> None:
    pod = pod_input_from_data({"containers": [{"name": "main", "image": "x"}]})
    assert pod.spec == V1PodSpec(containers=[V1Container(name="main", image="x")])
    assert (pod.name, pod.namespace, pod.labels, pod.annotations) == (None, None, None, None)


def test_a_pod_manifest_with_its_metadata() -> None:
    pod = pod_input_from_data(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "train",
                "namespace": "ml",
                "labels": {"app": "t"},
                "annotations": {"a": "b"},
            },
            "spec": {"containers": [{"name": "main", "image": "x"}]},
        }
    )
    assert (pod.name, pod.namespace, pod.labels, pod.annotations) == (
        "train",
        "ml",
        {"app": "t"},
        {"a": "b"},
    )


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param({"limits": {"cpu": 1}}, {"limits": {"cpu": "1"}}, id="int"),
        pytest.param({"requests": {"cpu": 0.5}}, {"requests": {"cpu": "0.5"}}, id="float"),
        pytest.param(
            {"limits": {"nvidia.com/gpu": 2}}, {"limits": {"nvidia.com/gpu": "2"}}, id="gpu"
        ),
        pytest.param({"limits": {"memory": "2Gi"}}, {"limits": {"memory": "2Gi"}}, id="string"),
    ],
)
def test_numbers_are_read_as_quantities_where_quantities_belong(
    resources: dict[str, Any], expected: dict[str, Any]
) -> None:
    for field in ("containers", "initContainers"):
        data = {
            "containers": [{"name": "a", "image": "x"}],
            field: [{"name": "b", "image": "x", "resources": resources}],
        }
        spec = pod_input_from_data(data).spec
        container = (spec.init_containers or spec.containers)[-1]
        assert container.resources == V1ResourceRequirements(**expected)


def test_numbers_in_volume_and_pod_quantities() -> None:
    spec = pod_input_from_data(
        {
            "containers": [{"name": "a", "image": "x"}],
            "overhead": {"cpu": 1},
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": 1000}}],
        }
    ).spec
    assert spec.overhead == {"cpu": "1"}
    assert spec.volumes[0].empty_dir.size_limit == "1000"  # type: ignore[index, union-attr]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            [1], ["expected a pod spec or a Pod manifest (a mapping), got [1] (list)"], id="list"
        ),
        pytest.param(
            "x", ["expected a pod spec or a Pod manifest (a mapping), got 'x' (string)"], id="str"
        ),
        pytest.param({}, ["containers: required field is missing"], id="empty"),
        pytest.param(
            {"containers": [{"name": "a", "imagePullPolcy": "Always"}]},
            ["containers[0].imagePullPolcy: unknown field (did you mean 'imagePullPolicy'?)"],
            id="typo-suggests-the-field",
        ),
        pytest.param(
            {"containers": [{"name": "a", "frobnicate": 1}]},
            ["containers[0].frobnicate: unknown field"],
            id="unknown-field",
        ),
        pytest.param(
            {"containers": [{"name": "a", "env": [{"name": "X", "value": 1}]}]},
            ["containers[0].env[0].value: expected a string, got 1 (integer)"],
            id="env-value-must-be-a-string",
        ),
        pytest.param(
            {"containers": [{"name": "a", "readinessProbe": {"httpGet": {"port": 1.5}}}]},
            [
                "containers[0].readinessProbe.httpGet.port: "
                "expected an integer or a string, got 1.5 (number)"
            ],
            id="int-or-string",
        ),
        pytest.param(
            {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": True}}}]},
            [
                "containers[0].resources.limits['nvidia.com/gpu']: "
                "expected a string, got True (boolean)"
            ],
            id="bool-is-not-a-quantity",
        ),
        pytest.param(
            {"containers": [{}, {"name": 3}], "hostIPC": "yes"},
            [
                "containers[0].name: required field is missing",
                "containers[1].name: expected a string, got 3 (integer)",
                "hostIPC: expected true or false, got 'yes' (string)",
            ],
            id="every-problem-is-reported",
        ),
        pytest.param(
            {"metadata": {"name": "x"}, "spec": {}},
            [
                "this looks like a Pod manifest without apiVersion and kind; "
                "add 'apiVersion: v1' and 'kind: Pod', or give the bare pod spec"
            ],
            id="manifest-without-kind",
        ),
        pytest.param(
            {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}},
            [
                "expected a Pod manifest (apiVersion: v1, kind: Pod) or a bare pod spec, "
                "got apiVersion: 'apps/v1', kind: 'Deployment'"
            ],
            id="another-kind",
        ),
        pytest.param(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"uid": "1", "labels": {"a": 1}},
                "status": {},
            },
            [
                "status: not accepted here; a Pod manifest may have "
                "apiVersion, kind, metadata, spec",
                "metadata.uid: not accepted in a pod template input; "
                "allowed: name, generateName, namespace, labels, annotations",
                "metadata.labels.a: expected a string, got 1 (integer)",
                "spec: required field is missing",
            ],
            id="manifest-problems-together",
        ),
        pytest.param(
            {"apiVersion": "v1", "kind": "Pod", "metadata": [], "spec": []},
            [
                "metadata: expected a mapping, got [] (list)",
                "spec: expected a mapping, got [] (list)",
            ],
            id="manifest-shapes",
        ),
    ],
)
def test_problems_name_the_field(data: object, expected: list[str]) -> None:
    assert problems_of(data) == expected


def test_the_error_message_counts_the_other_problems() -> None:
    with pytest.raises(
        PodInputError,
        match=r"^containers\[0\]\.name: required field is missing \(and 2 more problems\)$",
    ):
        pod_input_from_data({"containers": [{}, {"name": 3}], "hostIPC": "yes"})


def test_the_input_is_not_modified() -> None:
    data = {"containers": [{"name": "a", "image": "x", "resources": {"limits": {"cpu": 1}}}]}
    pod_input_from_data(data)
    assert data == {
        "containers": [{"name": "a", "image": "x", "resources": {"limits": {"cpu": 1}}}]
    }


@pytest.mark.parametrize(
    ("path", "text"),
    [
        pytest.param((), "", id="empty"),
        pytest.param(("spec", "containers", 0, "name"), "spec.containers[0].name", id="nested"),
        pytest.param(("limits", "nvidia.com/gpu"), "limits['nvidia.com/gpu']", id="dotted-key"),
        pytest.param((0, "a"), "[0].a", id="leading-index"),
        pytest.param(("host_ipc-x",), "host_ipc-x", id="dashes-and-underscores"),
    ],
)
def test_format_path(path: tuple[str | int, ...], text: str) -> None:
    assert format_path(path) == text
