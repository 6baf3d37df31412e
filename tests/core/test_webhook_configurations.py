"""podwright's webhook configurations: valid manifests for every Kubernetes version the schemas
cover, the webhooks the issue asks for, served at a URL or behind a Service, trusting a CA bundle
or cert-manager's injection; and the patches that put a new CA bundle into exactly podwright's
webhooks (a property over any configurations)."""

from __future__ import annotations

import base64
import copy
import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.adapters.certificates import CertificateAuthority
from podwright.core.json_patch import UnappliablePatchError, apply_json_patch
from podwright.core.webhook_configurations import (
    INJECT_CA_ANNOTATION,
    ServiceEndpoint,
    UrlEndpoint,
    WebhookConfigurationError,
    ca_bundle_patches,
    encoded_ca_bundle,
    webhook_configurations,
)
from tests.manifests import schema_errors

NOW = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
OLD_CA = CertificateAuthority.create(now=NOW, validity=datetime.timedelta(days=30)).pem
NEW_CA = CertificateAuthority.create(now=NOW, validity=datetime.timedelta(days=30)).pem
URL = UrlEndpoint("https://192.0.2.10:8443")
SERVICE = ServiceEndpoint("podwright-system", "podwright-webhook", 443)

COMMON = {
    "failurePolicy": "Fail",
    "matchPolicy": "Equivalent",
    "sideEffects": "None",
    "timeoutSeconds": 5,
    "admissionReviewVersions": ["v1"],
}
WORKLOAD_RULES = [
    {
        "apiGroups": ["podwright.dev"],
        "apiVersions": ["v1alpha1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["workloads"],
        "scope": "Namespaced",
    }
]
POLICY_RULES = [
    {
        "apiGroups": ["podwright.dev"],
        "apiVersions": ["v1alpha1"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["workloadpolicies", "clusterworkloadpolicies"],
        "scope": "*",
    }
]


def test_the_configurations_for_a_url_carry_the_ca_bundle() -> None:
    mutating, validating = webhook_configurations(URL, ca_bundle=OLD_CA)
    bundle = base64.b64encode(OLD_CA).decode()
    metadata = {"name": "podwright", "labels": {"app.kubernetes.io/name": "podwright"}}
    assert mutating == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [
            {
                "name": "workloads.podwright.dev",
                "clientConfig": {
                    "url": "https://192.0.2.10:8443/mutate/workloads",
                    "caBundle": bundle,
                },
                "rules": WORKLOAD_RULES,
                **COMMON,
                "reinvocationPolicy": "Never",
            }
        ],
    }
    assert validating == {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata,
        "webhooks": [
            {
                "name": "workloads.podwright.dev",
                "clientConfig": {
                    "url": "https://192.0.2.10:8443/validate/workloads",
                    "caBundle": bundle,
                },
                "rules": WORKLOAD_RULES,
                **COMMON,
            },
            {
                "name": "policies.podwright.dev",
                "clientConfig": {
                    "url": "https://192.0.2.10:8443/validate/policies",
                    "caBundle": bundle,
                },
                "rules": POLICY_RULES,
                **COMMON,
            },
        ],
    }


def test_the_configurations_for_a_service_let_cert_manager_inject_the_ca() -> None:
    endpoint = ServiceEndpoint("podwright-system", "podwright-webhook", 9443, "/podwright/")
    configurations = webhook_configurations(
        endpoint, inject_ca_from="podwright-system/podwright-webhook"
    )
    for configuration in configurations:
        assert configuration["metadata"]["annotations"] == {
            INJECT_CA_ANNOTATION: "podwright-system/podwright-webhook"
        }
    paths = [
        hook["clientConfig"]
        for configuration in configurations
        for hook in configuration["webhooks"]
    ]
    assert paths == [
        {
            "service": {
                "namespace": "podwright-system",
                "name": "podwright-webhook",
                "port": 9443,
                "path": f"/podwright{path}",
            }
        }
        for path in ("/mutate/workloads", "/validate/workloads", "/validate/policies")
    ]


def test_a_single_webhook_judges_workloads_in_the_mutating_call_reinvoked_if_needed() -> None:
    mutating, validating = webhook_configurations(URL, ca_bundle=OLD_CA, single_webhook=True)
    bundle = base64.b64encode(OLD_CA).decode()
    assert mutating["webhooks"] == [
        {
            "name": "workloads.podwright.dev",
            "clientConfig": {"url": "https://192.0.2.10:8443/admit/workloads", "caBundle": bundle},
            "rules": WORKLOAD_RULES,
            **COMMON,
            "reinvocationPolicy": "IfNeeded",
        }
    ]
    assert [hook["name"] for hook in validating["webhooks"]] == ["policies.podwright.dev"]
    assert (
        validating["webhooks"] == webhook_configurations(URL, ca_bundle=OLD_CA)[1]["webhooks"][1:]
    )


@pytest.mark.parametrize(
    "configurations",
    [
        pytest.param(webhook_configurations(URL, ca_bundle=OLD_CA), id="url and CA bundle"),
        pytest.param(
            webhook_configurations(URL, ca_bundle=OLD_CA, single_webhook=True),
            id="single webhook",
        ),
        pytest.param(
            webhook_configurations(SERVICE, inject_ca_from="podwright-system/webhook"),
            id="service and cert-manager",
        ),
    ],
)
def test_the_configurations_are_valid_manifests(configurations: list[dict[str, Any]]) -> None:
    for configuration in configurations:
        assert schema_errors(configuration) == []


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(
            lambda: webhook_configurations(URL),
            "ca_bundle, inject_ca_from, bundle_from_server: exactly one is needed",
            id="no trust",
        ),
        pytest.param(
            lambda: webhook_configurations(URL, ca_bundle=OLD_CA, inject_ca_from="a/b"),
            "ca_bundle, inject_ca_from, bundle_from_server: exactly one is needed",
            id="both",
        ),
        pytest.param(
            lambda: webhook_configurations(URL, ca_bundle=OLD_CA, bundle_from_server=True),
            "ca_bundle, inject_ca_from, bundle_from_server: exactly one is needed",
            id="a bundle and the server's",
        ),
        pytest.param(
            lambda: webhook_configurations(URL, ca_bundle=b"not PEM"),
            "ca_bundle: expected PEM certificates",
            id="not PEM",
        ),
        pytest.param(
            lambda: webhook_configurations(URL, inject_ca_from="webhook"),
            "inject_ca_from: 'webhook' does not name a cert-manager Certificate: it must be "
            "NAMESPACE/NAME",
            id="no namespace",
        ),
        pytest.param(
            lambda: webhook_configurations(URL, inject_ca_from="Podwright/webhook"),
            "inject_ca_from: 'Podwright/webhook' does not name a cert-manager Certificate: its "
            "namespace must consist of lower-case letters",
            id="a bad namespace",
        ),
        pytest.param(
            lambda: UrlEndpoint("http://192.0.2.10:8443"),
            "base_url: 'http://192.0.2.10:8443' is not a webhook URL: the scheme must be https",
            id="http",
        ),
        pytest.param(lambda: UrlEndpoint("https://:8443"), "a host is needed", id="no host"),
        pytest.param(
            lambda: UrlEndpoint("https://me@192.0.2.10"), "a user is not allowed", id="a user"
        ),
        pytest.param(
            lambda: UrlEndpoint("https://192.0.2.10/?x=1"),
            "a query or fragment is not allowed",
            id="a query",
        ),
        pytest.param(
            lambda: ServiceEndpoint("podwright", "Webhook"),
            "name: 'Webhook' is not a Service's name",
            id="a bad service name",
        ),
        pytest.param(
            lambda: ServiceEndpoint("podwright", "webhook", 0),
            "port: must be within 1..65535, got 0",
            id="port 0",
        ),
        pytest.param(
            lambda: ServiceEndpoint("podwright", "webhook", 443, "webhooks"),
            "path_prefix: 'webhooks' must start with '/'",
            id="a relative path",
        ),
    ],
)
def test_bad_arguments_are_refused_naming_them(make: Any, message: str) -> None:
    with pytest.raises(WebhookConfigurationError, match=message.replace("?", r"\?")):
        make()


# The CA bundle of a rotation -------------------------------------------------------------------


def foreign_webhook(name: str) -> dict[str, Any]:
    """Another webhook of the same configuration: none of podwright's business."""
    return {
        "name": name,
        "clientConfig": {"url": "https://elsewhere.example/hook", "caBundle": "b3RoZXI="},
        "rules": WORKLOAD_RULES,
        **COMMON,
    }


def test_the_patches_set_the_bundle_of_podwright_webhooks_only() -> None:
    mutating, validating = webhook_configurations(URL, ca_bundle=OLD_CA)
    validating["webhooks"].insert(1, foreign_webhook("audit.example.com"))
    patches = ca_bundle_patches([mutating, validating], NEW_CA)
    encoded = encoded_ca_bundle(NEW_CA)
    assert [(patch.kind, patch.name) for patch in patches] == [
        ("MutatingWebhookConfiguration", "podwright"),
        ("ValidatingWebhookConfiguration", "podwright"),
    ]
    assert list(patches[1].operations) == [
        {"op": "test", "path": "/webhooks/0/name", "value": "workloads.podwright.dev"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": encoded},
        {"op": "test", "path": "/webhooks/2/name", "value": "policies.podwright.dev"},
        {"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": encoded},
    ]
    patched = apply_json_patch(validating, list(patches[1].operations))
    assert [hook["clientConfig"]["caBundle"] for hook in patched["webhooks"]] == [
        encoded,
        "b3RoZXI=",
        encoded,
    ]


def test_a_configuration_changed_since_it_was_read_fails_its_patch() -> None:
    _mutating, validating = webhook_configurations(URL, ca_bundle=OLD_CA)
    (patch,) = ca_bundle_patches([validating], NEW_CA)
    reordered = copy.deepcopy(validating)
    reordered["webhooks"].reverse()
    with pytest.raises(UnappliablePatchError):
        apply_json_patch(reordered, list(patch.operations))


def test_configurations_cert_manager_injects_into_or_already_current_are_left_alone() -> None:
    injected = webhook_configurations(SERVICE, inject_ca_from="podwright-system/webhook")
    current = webhook_configurations(URL, ca_bundle=NEW_CA)
    assert ca_bundle_patches([*injected, *current], NEW_CA) == []


@pytest.mark.parametrize(
    ("configuration", "message"),
    [
        pytest.param(
            {"kind": "ConfigMap", "metadata": {"name": "x"}},
            r"configurations\[0\].kind: expected MutatingWebhookConfiguration or "
            "ValidatingWebhookConfiguration, got 'ConfigMap'",
            id="not a configuration",
        ),
        pytest.param(
            {"kind": "ValidatingWebhookConfiguration", "metadata": {}},
            r"configurations\[0\].metadata.name: missing",
            id="no name",
        ),
    ],
)
def test_what_is_not_a_configuration_is_refused(
    configuration: dict[str, Any], message: str
) -> None:
    with pytest.raises(WebhookConfigurationError, match=message):
        ca_bundle_patches([configuration], NEW_CA)


webhook_names = st.sampled_from(
    ["workloads.podwright.dev", "policies.podwright.dev", "audit.example.com", "x.example.org"]
)


@st.composite
def configurations(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]))
    hooks = []
    for name in draw(st.lists(webhook_names, max_size=5)):
        hook = foreign_webhook(name)
        hook["clientConfig"]["caBundle"] = draw(
            st.sampled_from([encoded_ca_bundle(OLD_CA), encoded_ca_bundle(NEW_CA), "b3RoZXI="])
        )
        hooks.append(hook)
    metadata: dict[str, Any] = {"name": draw(st.sampled_from(["podwright", "other"]))}
    if draw(st.booleans()):
        metadata["annotations"] = {INJECT_CA_ANNOTATION: "ns/certificate"}
    return {"kind": kind, "metadata": metadata, "webhooks": hooks}


@given(
    st.lists(
        configurations(),
        max_size=4,
        unique_by=lambda configuration: (configuration["kind"], configuration["metadata"]["name"]),
    )
)
def test_after_the_patches_every_podwright_webhook_has_the_bundle_and_nothing_else_changed(
    found: list[dict[str, Any]],
) -> None:
    encoded = encoded_ca_bundle(NEW_CA)
    patches = {(patch.kind, patch.name): patch for patch in ca_bundle_patches(found, NEW_CA)}
    for configuration in found:
        key = (configuration["kind"], configuration["metadata"]["name"])
        patch = patches.get(key)
        patched = (
            apply_json_patch(configuration, list(patch.operations)) if patch else configuration
        )
        injected = INJECT_CA_ANNOTATION in configuration["metadata"].get("annotations", {})
        for before, after in zip(configuration["webhooks"], patched["webhooks"], strict=True):
            ours = before["name"] in ("workloads.podwright.dev", "policies.podwright.dev")
            expected = encoded if ours and not injected else before["clientConfig"]["caBundle"]
            assert after["clientConfig"]["caBundle"] == expected
            assert {**after, "clientConfig": None} == {**before, "clientConfig": None}
        assert ca_bundle_patches([patched], NEW_CA) == [], "nothing left to patch"
