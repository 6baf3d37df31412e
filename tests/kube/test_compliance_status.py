"""The policy state and the compliance status writer over an API server with podwright's CRDs
installed (adapters/kubernetes/policy_state.py and compliance_status.py): against the emulator,
and, marked ``cluster``, a real API server.

No webhook is configured: Workloads are created directly, as if admitted, and the policies change
afterwards. The test namespace is put in a department of the test's own, and every policy is of
that department (or the namespace's project), so policies of the cluster's own do not apply;
cluster-scoped objects get names unique to the run and are deleted afterwards, also on failure.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import ssl
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podwright.adapters.certificates import CertificateKeeper
from podwright.adapters.kubernetes.compliance_status import ComplianceStatusWriter
from podwright.adapters.kubernetes.policy_state import ClusterPolicyState
from podwright.adapters.webhook_server import WebhookServer
from podwright.core.cluster_resources import API_VERSION, ClusterScopes
from podwright.core.compliance import assess
from podwright.core.lifecycle.objects import JsonObject, condition
from podwright.core.policies import Scope
from podwright.engine.admission_service import AdmissionService
from podwright.engine.compliance_monitor import ComplianceSettings
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType
from tests.kube.support import ApiServer, eventually
from tests.webhook_server import utc_now

SCOPES = ClusterScopes("test-cluster")
SYNC_SECONDS = 20.0


@pytest.fixture
def department(api: ApiServer, podwright_crds: None) -> str:
    """podwright's CRDs in place, and the test namespace in a department of the test's own."""
    name = f"pw-test-{uuid.uuid4().hex[:8]}"
    label(api, name)
    return name


@pytest.fixture
def state(api: ApiServer, department: str) -> Iterator[ClusterPolicyState]:
    watching = ClusterPolicyState(api.client, SCOPES)
    try:
        assert watching.start(SYNC_SECONDS)
        assert watching.synced()
        yield watching
    finally:
        watching.stop()


@pytest.fixture
def cluster_objects(api: ApiServer) -> Iterator[list[ObjectRef]]:
    """Cluster-scoped objects the test creates, deleted afterwards (also on failure)."""
    created: list[ObjectRef] = []
    try:
        yield created
    finally:
        for ref in created:
            with contextlib.suppress(NotFoundError):
                api.client.delete(ref)


def label(api: ApiServer, department: str) -> None:
    api.client.patch(
        ObjectRef("v1", "Namespace", "", api.namespace),
        {"metadata": {"labels": {"podwright.dev/department": department}}},
        PatchType.MERGE,
    )


def create(api: ApiServer, obj: dict[str, Any]) -> dict[str, Any]:
    """Create ``obj``; an Established kind may not be served for a moment yet (404): retried."""
    return eventually(lambda: api.client.create(obj))


def department_policy(
    api: ApiServer,
    created: list[ObjectRef],
    department: str,
    max_gpus: int,
    enforcement: str = "enforce",
) -> ObjectRef:
    name = f"pw-test-{uuid.uuid4().hex[:8]}"
    create(
        api,
        {
            "apiVersion": API_VERSION,
            "kind": "ClusterWorkloadPolicy",
            "metadata": {"name": name},
            "spec": {
                "scope": "department",
                "department": department,
                "workloadType": "training",
                "enforcement": enforcement,
                "rules": {"compute": {"gpuDevicesRequest": {"max": max_gpus}}},
            },
        },
    )
    ref = ObjectRef(API_VERSION, "ClusterWorkloadPolicy", "", name)
    created.append(ref)
    return ref


def training(api: ApiServer, name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": api.namespace},
        "spec": {"type": "training", "image": "ubuntu", "compute": {"gpuDevicesRequest": gpus}},
    }


def compliance(api: ApiServer, name: str) -> tuple[str, str, str] | None:
    obj = api.client.get(api.ref("Workload", name, API_VERSION))
    found = condition(obj, "PolicyCompliant")
    if found is None:
        return None
    return found["status"], found["reason"], found["message"]


# The compliance status -----------------------------------------------------------------------


@pytest.fixture
def writer(api: ApiServer, state: ClusterPolicyState) -> Iterator[ComplianceStatusWriter]:
    running = ComplianceStatusWriter(
        api.client,
        state,
        AdmissionService(state, SCOPES),
        clock=lambda: datetime.now(UTC),
        settings=ComplianceSettings(retry_base=timedelta(milliseconds=100)),
    )
    try:
        assert running.start(SYNC_SECONDS)
        yield running
    finally:
        running.stop()


def test_a_stricter_policy_turns_an_admitted_workload_noncompliant_and_back(
    api: ApiServer,
    department: str,
    writer: ComplianceStatusWriter,
    cluster_objects: list[ObjectRef],
) -> None:
    """The condition follows the policies, while the spec stays as admitted (a write to
    ``/status`` changes status only: apiextensions-apiserver
    ``pkg/registry/customresource/status_strategy.go``, ``PrepareForUpdate``)."""
    create(api, training(api, "resnet", gpus=16))
    assert eventually(lambda: compliance(api, "resnet")) == (
        "True",
        "Compliant",
        f"the current policies of project {api.namespace} admit it",
    )
    stored = api.client.get(api.ref("Workload", "resnet", API_VERSION))
    assert stored["spec"]["compute"] == {"gpuDevicesRequest": 16}  # never changed

    policy = department_policy(api, cluster_objects, department, max_gpus=8)

    def refused() -> tuple[str, str, str] | None:
        found = compliance(api, "resnet")
        return found if found is not None and found[0] == "False" else None

    assert eventually(refused) == (
        "False",
        "Noncompliant",
        f"the current policies of project {api.namespace} would refuse it: "
        "spec.compute.gpuDevicesRequest: 16 (submission) is above the maximum 8 (rule max, "
        f"policy '{policy.name}' of department {department})",
    )

    api.client.delete(policy)
    eventually(lambda: (compliance(api, "resnet") or ("",))[0] == "True")


def test_audit_findings_are_recorded_in_status(
    api: ApiServer,
    department: str,
    writer: ComplianceStatusWriter,
    cluster_objects: list[ObjectRef],
) -> None:
    policy = department_policy(api, cluster_objects, department, max_gpus=2, enforcement="audit")
    create(api, training(api, "audited", gpus=4))

    def findings() -> JsonObject | None:
        obj = api.client.get(api.ref("Workload", "audited", API_VERSION))
        return (obj.get("status") or {}).get("compliance")

    assert eventually(findings) == {
        "enforcement": "audit",
        "findings": [
            {
                "field": "spec.compute.gpuDevicesRequest",
                "rule": "max",
                "message": "4 (submission) is above the maximum 2",
                "enforcement": "audit",
                "policy": f"ClusterWorkloadPolicy {policy.name}",
                "scope": f"department {department}",
            }
        ],
    }
    status, reason, _message = compliance(api, "audited") or ("", "", "")
    assert (status, reason) == ("True", "Compliant")


# The policy state ---------------------------------------------------------------------------


def test_a_namespace_relabelled_into_another_department_gets_that_departments_policies(
    api: ApiServer,
    department: str,
    state: ClusterPolicyState,
    cluster_objects: list[ObjectRef],
) -> None:
    other = f"{department}-other"
    department_policy(api, cluster_objects, department, max_gpus=8)
    department_policy(api, cluster_objects, other, max_gpus=2)
    service = AdmissionService(state, SCOPES)
    workload = training(api, "w", gpus=4)

    def reason_in(department_name: str) -> str:
        governing = service.policies_of_namespace(api.namespace)
        if governing.scope != Scope(("test-cluster", department_name, api.namespace)):
            return ""
        return assess(workload, governing.scope, governing.policy_for, governing.catalogue).reason

    assert eventually(lambda: reason_in(department)) == "Compliant"
    label(api, other)
    assert eventually(lambda: reason_in(other)) == "Noncompliant"


def test_each_namespace_sees_the_cluster_assets_and_its_own(
    api: ApiServer,
    department: str,
    state: ClusterPolicyState,
    cluster_objects: list[ObjectRef],
) -> None:
    unique = uuid.uuid4().hex[:8]
    create(
        api,
        {
            "apiVersion": API_VERSION,
            "kind": "Asset",
            "metadata": {"name": "team-datasets", "namespace": api.namespace},
            "spec": {
                "id": f"own-{unique}",
                "kind": "pvc",
                "spec": {"claimName": "team-datasets", "path": "/datasets"},
            },
        },
    )
    create(
        api,
        {
            "apiVersion": API_VERSION,
            "kind": "ClusterAsset",
            "metadata": {"name": f"pw-test-{unique}"},
            "spec": {
                "id": f"shared-{unique}",
                "kind": "s3",
                "spec": {"bucket": "b", "path": "/s3"},
            },
        },
    )
    cluster_objects.append(ObjectRef(API_VERSION, "ClusterAsset", "", f"pw-test-{unique}"))

    def ids(namespace: str) -> set[str]:
        return {
            asset_id for asset_id in state.catalogue(namespace).assets if asset_id.endswith(unique)
        }

    assert eventually(lambda: ids(api.namespace) == {f"own-{unique}", f"shared-{unique}"})
    assert ids(f"{api.namespace}-elsewhere") == {f"shared-{unique}"}


def test_a_policy_that_cannot_be_read_is_reported_with_its_problems(
    api: ApiServer, department: str, state: ClusterPolicyState
) -> None:
    """A WorkloadPolicy the schema accepts but the policy engine cannot use (``min`` above
    ``max``): written before the webhooks were installed, it shows as unreadable in the
    snapshot, for its scope, so the webhooks refuse the workloads it governs."""
    create(
        api,
        {
            "apiVersion": API_VERSION,
            "kind": "WorkloadPolicy",
            "metadata": {"name": "broken", "namespace": api.namespace},
            "spec": {
                "workloadType": "training",
                "rules": {"compute": {"gpuDevicesRequest": {"min": 8, "max": 2}}},
            },
        },
    )
    source = f"WorkloadPolicy {api.namespace}/broken"

    def unreadable() -> list[Any]:
        return [u for u in state.snapshot().unreadable if u.source == source]

    [broken] = eventually(unreadable)
    assert broken.scope == Scope(("test-cluster", department, api.namespace))
    assert [str(problem) for problem in broken.problems] == [
        "spec.rules.compute.gpuDevicesRequest.min: min 8 is above max 2"
    ]
    assert all(policy.source != source for policy in state.snapshot().policies)


def test_a_namespace_not_cached_yet_is_read_on_a_webhook_handler_thread_not_on_its_loop(
    api: ApiServer, department: str
) -> None:
    """The webhook server answers reviews on its loop's thread (``answer_inline``); the one
    read of the API server a review may need, of a namespace its cache has not seen, is made on
    a handler thread, so it holds up no other review."""
    state = ClusterPolicyState(api.client, SCOPES)  # not started: its caches have seen nothing

    def scope_and_thread(review: Any) -> dict[str, Any]:
        scope = state.namespace_scope(api.namespace)
        seen = f"{scope} on {threading.current_thread().name}"
        response = {"uid": review["request"]["uid"], "allowed": True, "warnings": [seen]}
        return {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }

    keeper = CertificateKeeper(["127.0.0.1"], clock=utc_now)
    keeper.refresh()
    request = {"uid": "c0ffee", "operation": "CREATE", "namespace": api.namespace}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    with WebhookServer({"/scope": scope_and_thread}, keeper, answer_inline=True) as server:
        context = ssl.create_default_context(cadata=keeper.ca_bundle.decode())
        connection = http.client.HTTPSConnection(*server.address, context=context, timeout=10)
        try:
            connection.request("POST", "/scope", json.dumps(body).encode())
            (seen,) = json.loads(connection.getresponse().read())["response"]["warnings"]
        finally:
            connection.close()
    namespace = api.client.get(ObjectRef("v1", "Namespace", "", api.namespace))
    assert seen == f"{SCOPES.of_namespace(namespace)} on webhook-handler_0"
