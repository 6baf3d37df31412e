"""podwright's CRDs installed through the API, as a user installs ``deploy/crds/``: against the
emulator, and, marked ``cluster``, a real API server.

The CRDs have fixed names: a cluster that already has them with the same schemas is used as it is
(and keeps them), one that has them with other content skips these tests
(``fixed_crds_in_place``). Cluster-scoped objects get names unique to the run and are deleted
afterwards, also on failure.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podwright.core.cluster_resources import API_VERSION
from podwright.core.crds import custom_resource_definitions
from tests.kube.support import CRD_PATH, ApiServer, eventually, fixed_crds_in_place

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def podwright_crds(api: ApiServer) -> Iterator[None]:
    with fixed_crds_in_place(api, custom_resource_definitions()):
        yield


def _collection(plural: str, namespace: str | None) -> str:
    where = f"namespaces/{namespace}/" if namespace else ""
    return f"/apis/{API_VERSION}/{where}{plural}"


def _create(api: ApiServer, plural: str, body: dict[str, Any]) -> tuple[int, Any]:
    """POST ``body``; an Established kind may not be served for a moment yet (404): retried."""
    path = _collection(plural, body["metadata"].get("namespace"))

    def attempt() -> tuple[int, Any] | None:
        answer = api.request("POST", path, body)
        return None if answer[0] == 404 else answer

    return eventually(attempt)


def _object(kind: str, name: str, spec: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata, "spec": spec}


def _example(name: str) -> Any:
    return yaml.safe_load((EXAMPLES / name).read_text())


def test_podwright_resources_are_served_and_take_the_examples(
    api: ApiServer, podwright_crds: None
) -> None:
    """Each kind is served once its CRD is Established (apiextensions
    ``pkg/controller/establish``), and an object of each, made from podwright's example files,
    is created (201) and stored with its spec as given (no field pruned, nothing defaulted that
    it gives)."""
    namespace = api.namespace
    workload = _example("workload-training.yaml")
    policy = _example("policies/cluster-prod.yaml")
    body = {key: value for key, value in policy["spec"].items() if key != "scope"}
    catalogue = _example("assets.yaml")
    asset = {key: value for key, value in catalogue["assets"][0].items() if key != "name"}
    profile = _example("cluster-profile.yaml")
    unique = uuid.uuid4().hex[:8]
    objects = [
        (
            "workloads",
            _object("Workload", workload["metadata"]["name"], workload["spec"], namespace),
        ),
        ("workloadpolicies", _object("WorkloadPolicy", "training", body, namespace)),
        ("assets", _object("Asset", catalogue["assets"][0]["name"], asset, namespace)),
        (
            "clusterworkloadpolicies",
            _object(
                "ClusterWorkloadPolicy", f"pw-test-{unique}", {"scope": "cluster", **body}, None
            ),
        ),
        ("clusterassets", _object("ClusterAsset", f"pw-test-{unique}", asset, None)),
        ("clusterprofiles", _object("ClusterProfile", f"pw-test-{unique}", profile["spec"], None)),
    ]
    cluster_wide = [(plural, obj) for plural, obj in objects if "namespace" not in obj["metadata"]]
    try:
        for plural, obj in objects:
            code, stored = _create(api, plural, obj)
            assert code == 201, stored
            assert stored["spec"] == obj["spec"], plural
    finally:
        for plural, obj in cluster_wide:
            api.request("DELETE", f"{_collection(plural, None)}/{obj['metadata']['name']}")


def test_a_workload_the_schema_refuses_is_one_422_naming_each_field(
    api: ApiServer, podwright_crds: None
) -> None:
    """The generated schema's errors in the server's words (kube-openapi's messages, turned into
    field errors by apiextensions ``kubeOpenAPIResultToFieldErrors``): a value outside
    ``spec.type``'s enum, a string where the catalogue says integer; one 422 names both."""
    body = _object(
        "Workload",
        "bad",
        {"type": "batch", "compute": {"gpuDevicesRequest": "two"}},
        api.namespace,
    )
    code, answer = _create(api, "workloads", body)
    assert (code, answer["reason"]) == (422, "Invalid"), answer
    causes = {(c["reason"], c["field"], c["message"]) for c in answer["details"]["causes"]}
    assert causes == {
        (
            "FieldValueNotSupported",
            "spec.type",
            'Unsupported value: "batch": supported values: "workspace", "training", '
            '"distributed", "inference"',
        ),
        (
            "FieldValueTypeInvalid",
            "spec.compute.gpuDevicesRequest",
            'Invalid value: "string": spec.compute.gpuDevicesRequest in body must be of type '
            'integer: "string"',
        ),
    }
    assert answer["message"].startswith('Workload.podwright.dev "bad" is invalid: [')


def test_crds_already_in_place_are_used_and_left_there(api: ApiServer) -> None:
    """A test that finds podwright's CRDs installed uses them and does not delete them."""
    assets = [
        crd for crd in custom_resource_definitions() if crd["spec"]["names"]["kind"] == "Asset"
    ]
    path = f"{CRD_PATH}/{assets[0]['metadata']['name']}"
    with fixed_crds_in_place(api, assets):
        with fixed_crds_in_place(api, assets):
            pass
        assert api.request("GET", path)[0] == 200
