"""podwright's webhook configurations installed in the emulator, pointing at podwright's webhook
server in this process: the API server calls it over HTTPS, verifying its certificate against the
configurations' ``caBundle``; a refusal and a warning come back to the client; the keeper rotates
its CA, publishing each bundle into the configurations, and no create is refused meanwhile; and
podwright's own webhooks, served by :class:`AdmissionWebhooks` as ``podwright webhook`` serves
them, refuse a Workload the operator's cluster profile cannot render.

Emulator only: the configurations are cluster-wide and named ``podwright``, and the Workload CRD
here is a minimal stand-in for podwright's own (a real cluster may have both installed). What the
emulator does with them is pinned against real API servers by tests/kube/test_admission_webhooks.py.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from podwright.adapters.admission_webhooks import AdmissionWebhooks, WebhookSettings
from podwright.adapters.certificates import CertificateKeeper, CertificateSettings
from podwright.adapters.kubernetes.webhook_configurations import publish_ca_bundle
from podwright.adapters.webhook_server import WebhookServer
from podwright.core.cluster_resources import SUBMITTED_BY_ANNOTATION
from podwright.core.crds import custom_resource_definitions
from podwright.core.webhook_configurations import (
    MUTATE_WORKLOADS,
    VALIDATE_POLICIES,
    VALIDATE_WORKLOADS,
    UrlEndpoint,
    encoded_ca_bundle,
    webhook_configurations,
)
from podwright.engine.kubernetes_port import ObjectRef, PatchType
from tests.k8s_emulator.admission import TEST_USER
from tests.kube.support import ApiServer, eventually, installed_crd
from tests.kube.test_kubectl_api import TABLE
from tests.webhook_server import ManualClock, PublishedBundles, utc_now, webhook_host

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1"
WORKLOAD_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "workloads.podwright.dev"},
    "spec": {
        "group": "podwright.dev",
        "scope": "Namespaced",
        "names": {"plural": "workloads", "singular": "workload", "kind": "Workload"},
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                },
            }
        ],
    },
}


def respond(review: Mapping[str, Any], **response: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], **response},
    }


def mutate(review: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults a policy would give: a priority, when the workload has none."""
    spec = review["request"]["object"]["spec"]
    if "priority" in spec:
        return respond(review, allowed=True)
    patch = [{"op": "add", "path": "/spec/priority", "value": "low"}]
    encoded = base64.b64encode(json.dumps(patch).encode()).decode()
    return respond(review, allowed=True, patchType="JSONPatch", patch=encoded)


def validate(review: Mapping[str, Any]) -> dict[str, Any]:
    """A policy that allows 4 GPUs at most, and warns about more than 2."""
    gpus = review["request"]["object"]["spec"].get("gpus", 0)
    if gpus > 4:
        message = f"spec.gpus: {gpus} is more than the 4 the project's policy allows"
        return respond(review, allowed=False, status={"code": 403, "message": message})
    warnings = [f"spec.gpus: {gpus} GPUs are scarce this week"] if gpus > 2 else []
    return respond(review, allowed=True, warnings=warnings)


ROUTES = {
    MUTATE_WORKLOADS: mutate,
    VALIDATE_WORKLOADS: validate,
    VALIDATE_POLICIES: lambda review: respond(review, allowed=True),
}


@contextlib.contextmanager
def installed_configurations(
    api: ApiServer, server: WebhookServer, ca_bundle: bytes
) -> Iterator[None]:
    configurations = webhook_configurations(UrlEndpoint(server.url()), ca_bundle=ca_bundle)
    created = []
    try:
        for configuration in configurations:
            plural = configuration["kind"].lower() + "s"
            status, body = api.request("POST", f"{CONFIGURATIONS}/{plural}", configuration)
            assert status == 201, body
            created.append(f"{CONFIGURATIONS}/{plural}/podwright")
        yield
    finally:
        for path in created:
            api.request("DELETE", path)


def workload(api: ApiServer, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "podwright.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": api.namespace},
        "spec": {"type": "training", **spec},
    }


def create(api: ApiServer, name: str, **spec: Any) -> Any:
    path = f"/apis/podwright.dev/v1alpha1/namespaces/{api.namespace}/workloads"
    return api.send("POST", path, workload(api, name, **spec))


def test_the_api_server_calls_podwrights_webhooks_and_relays_their_answers(
    emulator_api: ApiServer,
) -> None:
    api = emulator_api
    keeper = CertificateKeeper([webhook_host()], clock=utc_now)
    keeper.refresh()
    with (
        installed_crd(api, WORKLOAD_CRD),
        WebhookServer(ROUTES, keeper, host=webhook_host()) as server,
        installed_configurations(api, server, keeper.ca_bundle),
    ):
        admitted = create(api, "small", gpus=1)
        assert admitted.status == 201, admitted.body
        assert admitted.body["spec"] == {"type": "training", "gpus": 1, "priority": "low"}
        assert admitted.warnings == []

        warned = create(api, "larger", gpus=3, priority="high")
        assert warned.status == 201, warned.body
        assert warned.body["spec"]["priority"] == "high"
        assert warned.warnings == ['299 - "spec.gpus: 3 GPUs are scarce this week"']

        refused = create(api, "huge", gpus=8)
        assert refused.status == 403
        assert refused.body["message"] == (
            'admission webhook "workloads.podwright.dev" denied the request: spec.gpus: 8 is '
            "more than the 4 the project's policy allows"
        )


def test_a_ca_rotation_published_into_the_configurations_refuses_no_create(
    emulator_api: ApiServer,
) -> None:
    """The keeper's clock runs ahead of the real one by at most five minutes, the margin by which
    a certificate's validity starts early, so that the emulator's real-time checks accept every
    certificate; the emulator reads the configurations at each call, so a bundle needs no time
    to settle."""
    api = emulator_api
    clock = ManualClock()
    bundles = PublishedBundles(clock)

    def publish(bundle: bytes) -> None:
        publish_ca_bundle(api.client, bundle)
        bundles(bundle)

    settings = CertificateSettings(
        authority_validity=datetime.timedelta(seconds=400),
        serving_validity=datetime.timedelta(seconds=120),
        bundle_settle=datetime.timedelta(0),
    )
    keeper = CertificateKeeper(
        [webhook_host()], clock=clock, publish_bundle=publish, settings=settings
    )
    keeper.refresh()
    with (
        installed_crd(api, WORKLOAD_CRD),
        WebhookServer(ROUTES, keeper, host=webhook_host()) as server,
        installed_configurations(api, server, keeper.ca_bundle),
    ):
        refused = []
        for _step in range(15):  # 300 seconds: the CA is due after 267
            clock.advance(datetime.timedelta(seconds=20))
            keeper.refresh()
            answer = create(api, f"w-{uuid.uuid4().hex[:8]}", gpus=1)
            if answer.status != 201:
                refused.append(answer.body)
        assert refused == []
        # The first CA (before the configurations existed), both during the rotation, the new.
        assert [bundle.count(b"BEGIN CERTIFICATE") for _when, bundle in bundles] == [1, 2, 1]
        current = encoded_ca_bundle(keeper.ca_bundle)
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            _status, configuration = api.request("GET", f"{CONFIGURATIONS}/{kind}/podwright")
            assert {hook["clientConfig"]["caBundle"] for hook in configuration["webhooks"]} == {
                current
            }


def test_podwrights_webhooks_refuse_what_the_operators_profile_cannot_render(
    emulator_api: ApiServer,
) -> None:
    """:class:`AdmissionWebhooks` as ``podwright webhook --profile tests`` runs it, with no policy
    at all: a Workload the profile cannot render is refused, dry run or not, with what ``podwright
    render`` says; the ClusterProfile it names is watched, so a profile that can render it admits
    it."""
    api = emulator_api
    for crd in custom_resource_definitions():
        api.client.apply(crd, field_manager="test")
    settings = WebhookSettings(
        cluster_name="test",
        webhook_host=webhook_host(),
        listen_host=webhook_host(),
        port=0,
        profile_name="tests",
    )
    path = f"/apis/podwright.dev/v1alpha1/namespaces/{api.namespace}/workloads"
    denied = 'admission webhook "workloads.podwright.dev" denied the request: '
    with AdmissionWebhooks(api.client, settings, clock=utc_now):
        for query in ({}, {"dryRun": "All"}):
            no_image = api.send("POST", path, workload(api, "no-image"), query=query)
            assert (no_image.status, no_image.body["message"]) == (
                422,
                denied + "cannot render on cluster profile 'default': image: required: the "
                "container image (submit one, or have a policy default it)",
            )
        fraction = workload(api, "fraction", image="pytorch", compute={"gpuPortionRequest": 0.5})
        refused = api.send("POST", path, fraction)
        assert refused.status == 422
        assert refused.body["message"].startswith(
            denied + "cannot render on cluster profile 'default': compute.gpuPortionRequest: a "
            "fraction of a GPU needs the KAI scheduler"
        )
        api.client.create(
            {
                "apiVersion": "podwright.dev/v1alpha1",
                "kind": "ClusterProfile",
                "metadata": {"name": "tests"},
                "spec": {"scheduler": {"type": "kai", "name": "kai-scheduler"}},
            }
        )
        eventually(lambda: api.send("POST", path, fraction).status == 201)


@pytest.mark.parametrize("single_webhook", [False, True], ids=["two-calls", "single-webhook"])
def test_podwrights_webhooks_record_who_submitted_a_workload_and_keep_it(
    emulator_api: ApiServer, single_webhook: bool
) -> None:
    """Served as ``podwright webhook`` serves them, by both paths: a create records the user the
    API server authenticated (the emulator's, for every request) over the name its creator wrote;
    an update that changes or removes it gets it back; ``kubectl get workloads`` shows it."""
    api = emulator_api
    for crd in custom_resource_definitions():
        api.client.apply(crd, field_manager="test")
    settings = WebhookSettings(
        cluster_name="test",
        webhook_host=webhook_host(),
        listen_host=webhook_host(),
        port=0,
        single_webhook=single_webhook,
    )
    path = f"/apis/podwright.dev/v1alpha1/namespaces/{api.namespace}/workloads"
    ref = ObjectRef("podwright.dev/v1alpha1", "Workload", api.namespace, "resnet")
    with AdmissionWebhooks(api.client, settings, clock=utc_now):
        claimed = workload(api, "resnet", image="pytorch")
        claimed["metadata"]["annotations"] = {SUBMITTED_BY_ANNOTATION: "someone-else"}
        created = api.send("POST", path, claimed)
        assert created.status == 201, created.body
        requester = TEST_USER["username"]
        assert created.body["metadata"]["annotations"] == {SUBMITTED_BY_ANNOTATION: requester}

        # As `kubectl annotate --overwrite` and `kubectl annotate ...-` update it (merge patches:
        # the compliance status writer may update the Workload meanwhile).
        for annotations, kept in (
            ({SUBMITTED_BY_ANNOTATION: "mallory", "note": "x"}, {"note": "x"}),
            ({SUBMITTED_BY_ANNOTATION: None}, {"note": "x"}),
            (None, {}),
        ):
            patch = {"metadata": {"annotations": annotations}}
            updated = api.client.patch(ref, patch, PatchType.MERGE)
            assert updated["metadata"]["annotations"] == {
                SUBMITTED_BY_ANNOTATION: requester,
                **kept,
            }

        table = api.send("GET", path, accept=TABLE).body
    names = [column["name"] for column in table["columnDefinitions"]]
    [row] = table["rows"]
    assert row["cells"][names.index("Submitter")] == requester
