"""podwright's CRDs installed through the API, as a user installs ``deploy/crds/``: against the
emulator, and, marked ``cluster``, a real API server.

The CRDs have fixed names: they are the content of ``deploy/crds/`` for every test, installed
once per session on a real cluster (``podwright_crds``, ``PodwrightCrds``): a cluster that
already has them as they are keeps them, one that has them with other content gets them back as
they were at the session's end. Cluster-scoped objects get names unique to the run and are
deleted afterwards, also on failure.
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

import yaml

from podwright.core.cluster_resources import API_VERSION, WORKLOAD_FINALIZER
from podwright.core.crds import custom_resource_definitions
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType
from tests.cluster.support import PodwrightCrds
from tests.kube.support import CRD_PATH, ApiServer, cluster_namespace, eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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


def _crds_named(api: ApiServer) -> dict[str, Any]:
    """podwright's CRDs the server has, by name."""
    found = {}
    for crd in custom_resource_definitions():
        status, stored = api.request("GET", f"{CRD_PATH}/{crd['metadata']['name']}")
        if status == 200:
            found[crd["metadata"]["name"]] = stored
    return found


def test_crds_already_in_place_are_used_and_left_there(
    api: ApiServer, podwright_crds: None
) -> None:
    """An install that finds podwright's CRDs as ``deploy/crds/`` has them changes nothing, and
    its removal leaves them there: they are not its own."""
    before = _crds_named(api)
    again = PodwrightCrds(api.api_client)
    again.install()
    again.remove()
    after = _crds_named(api)
    assert sorted(after) == sorted(crd["metadata"]["name"] for crd in custom_resource_definitions())
    assert {name: crd["spec"] for name, crd in after.items()} == {
        name: crd["spec"] for name, crd in before.items()
    }


def test_crds_a_session_installs_are_removed_at_its_end(emulator_api: ApiServer) -> None:
    api = emulator_api
    crds = PodwrightCrds(api.api_client)
    crds.install()
    assert len(_crds_named(api)) == len(custom_resource_definitions())
    crds.remove()
    assert _crds_named(api) == {}


def test_a_crd_with_other_content_is_replaced_for_the_session_and_put_back_after(
    emulator_api: ApiServer,
) -> None:
    """A cluster with another podwright's CRDs: the tests run on ``deploy/crds/``'s (none
    skipped), and the cluster gets its own back."""
    api = emulator_api
    (older,) = [
        crd for crd in custom_resource_definitions() if crd["spec"]["names"]["kind"] == "Asset"
    ]
    older["spec"]["names"]["shortNames"] = ["older"]
    name = older["metadata"]["name"]
    status, created = api.request("POST", CRD_PATH, older)
    assert status == 201, created
    crds = PodwrightCrds(api.api_client)
    crds.install()
    assert "older" not in _crds_named(api)[name]["spec"]["names"].get("shortNames", [])
    crds.remove()
    remaining = _crds_named(api)
    assert list(remaining) == [name]
    assert remaining[name]["spec"]["names"]["shortNames"] == ["older"]


def test_a_tests_namespace_goes_though_its_workloads_were_held_by_podwright(
    api: ApiServer, podwright_crds: None
) -> None:
    """The mutating webhook holds each Workload with podwright's finalizer from its creation; a
    test's namespace is let go at its end all the same (``let_workloads_go``), where no operator
    is left to do it: the namespace controller waits for every object's finalizers
    (``deleteAllContent`` in ``pkg/controller/namespace/deletion``), so without that the
    namespace would stay Terminating on a real cluster."""
    keep = "example.com/keep"
    made = cluster_namespace(api.client)
    namespace = next(made)
    body = _example("workload-training.yaml")
    body["metadata"] = {"name": "held", "finalizers": [keep, WORKLOAD_FINALIZER]}
    api.client.create({**body, "metadata": {**body["metadata"], "namespace": namespace}})
    with contextlib.suppress(StopIteration):
        next(made)  # the test is over: its namespace is let go
    ref = ObjectRef(API_VERSION, "Workload", namespace, "held")
    held = api.client.get(ref)
    assert held["metadata"]["finalizers"] == [keep], "podwright's finalizer gone, another's kept"
    api.client.patch(ref, {"metadata": {"finalizers": None}}, PatchType.MERGE)
    eventually(lambda: _gone(api, namespace), timeout=60)


def _gone(api: ApiServer, namespace: str) -> bool:
    try:
        api.client.get(ObjectRef("v1", "Namespace", "", namespace))
    except NotFoundError:
        return True
    return False
