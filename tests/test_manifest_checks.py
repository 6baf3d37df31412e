"""The manifest checks used by every test must themselves be able to fail."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest

from tests.manifests import (
    APPARMOR_FIELD_SINCE,
    SCHEMA_VERSIONS,
    api_server_errors,
    crd_schema_errors,
    manifest_errors,
    required_value_errors,
    schema_errors,
)


def _pod(
    container: dict[str, object], annotations: dict[str, str] | None = None
) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"annotations": annotations or {}},
        "spec": {"containers": [container]},
    }


@pytest.mark.parametrize(
    "container",
    [
        pytest.param({}, id="container-without-name"),
        pytest.param({"name": "a", "imagePullPolcy": "Always"}, id="unknown-field"),
        pytest.param({"name": "a", "tty": "yes"}, id="wrong-type"),
    ],
)
def test_schema_errors_are_found(container: dict[str, object]) -> None:
    assert schema_errors(_pod(container))
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(_pod(container), SCHEMA_VERSIONS[-1], strict=True)


@pytest.mark.parametrize(
    ("container", "annotations"),
    [
        pytest.param(
            {
                "name": "a",
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"add": ["CAP_SYS_ADMIN"]},
                },
            },
            None,
            id="cap-sys-admin-without-escalation",
        ),
        pytest.param(
            {
                "name": "a",
                "securityContext": {"allowPrivilegeEscalation": False, "privileged": True},
            },
            None,
            id="privileged-without-escalation",
        ),
        pytest.param(
            {"name": "a", "resources": {"requests": {"smarter-devices/fuse": "1"}}},
            None,
            id="extended-resource-without-limit",
        ),
        pytest.param(
            {"name": "a", "volumeMounts": [{"name": "v", "mountPath": "/v"}]},
            None,
            id="mount-of-missing-volume",
        ),
        pytest.param(
            {"name": "a"},
            {"container.apparmor.security.beta.kubernetes.io/b": "unconfined"},
            id="apparmor-annotation-for-missing-container",
        ),
        pytest.param(
            {"name": "a", "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}},
            {"container.apparmor.security.beta.kubernetes.io/a": "unconfined"},
            id="apparmor-annotation-contradicts-field",
        ),
    ],
)
def test_api_server_errors_are_found(
    container: dict[str, object], annotations: dict[str, str] | None
) -> None:
    pod = _pod(container, annotations)
    assert not schema_errors(pod, oldest=APPARMOR_FIELD_SINCE)
    assert api_server_errors(pod)  # type: ignore[arg-type]


def _pytorch_job(template_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j"},
        "spec": {
            "pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": template_spec}}}
        },
    }


def test_crd_schemas_are_closed_to_fields_the_server_would_prune() -> None:
    valid = _pytorch_job({"containers": [{"name": "pytorch", "image": "i"}]})
    assert manifest_errors(valid) == []
    misspelt = _pytorch_job(
        {"containers": [{"name": "pytorch", "image": "i", "imagePullPolcy": "Always"}]}
    )
    assert any("imagePullPolcy" in error for error in manifest_errors(misspelt))
    typo_at_top = {**valid, "spec": {**valid["spec"], "runPolicie": {}}}
    assert any("runPolicie" in error for error in crd_schema_errors(typo_at_top))


def test_pod_templates_inside_custom_resources_meet_the_api_servers_rules() -> None:
    twins = _pytorch_job({"containers": [{"name": "a", "image": "i"}, {"name": "a", "image": "i"}]})
    assert any("duplicate container names" in error for error in manifest_errors(twins))


def test_knative_pod_fields_are_checked_as_a_pod() -> None:
    service = {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {
            "template": {
                "spec": {
                    "containerConcurrency": 1,
                    "containers": [{"name": "c", "image": "i", "prots": []}],
                }
            }
        },
    }
    assert any("prots" in error for error in manifest_errors(service))


def test_a_container_without_an_image_is_found_in_pods_and_pod_templates() -> None:
    # The API server's answer: spec.containers[0].image: Required value.
    pod = _pod({"name": "a"})
    assert required_value_errors(pod) == ["Pod: spec.containers[0].image: Required value"]
    daemon_set = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {
                    "initContainers": [{"name": "i"}],
                    "containers": [{"name": "a", "image": "x"}],
                },
            },
        },
    }
    assert required_value_errors(daemon_set) == [
        "spec.template: spec.initContainers[0].image: Required value"
    ]
    assert manifest_errors(daemon_set) == []
