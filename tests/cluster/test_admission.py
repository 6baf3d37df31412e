"""Policies enforced by the cluster, as a user meets them: podwright's CRDs installed from
``deploy/crds`` with ``kubectl apply --server-side``, ``podwright webhook`` serving from this
machine (``webhook``), and Workloads and policies written with ``kubectl`` (its output read as a
user reads it) and with the official Python client.

* a compliant Workload is admitted with its defaults (a default, a ``defaultFrom`` value, an
  imposed asset) in what ``kubectl get -o yaml`` shows; a non-compliant one is refused in enforce
  mode with every issue listed, admitted with a ``Warning:`` per issue in warn mode, and admitted
  silently in audit mode (the findings go into the AdmissionReview's audit annotation, which the
  API server writes to its audit log, out of a user's sight: the test reads it from the
  webhook's answer to the same review);
* every scope (tenant, cluster, a department by its namespace label, a project, and the
  ``podwright.dev/project`` label that renames it) and every rule type, each with its message;
* policies: a second rule in a branch refused naming its owner, a malformed one refused with
  its fields; ``podwright policy apply`` of the examples and ``policy effective`` of a
  namespace;
* an admitted spec is fixed, but an inference Workload's ``autoscaling``;
* fail closed: with the webhook stopped, Workloads and policies are refused naming it, and
  policies can still be read;
* the serving certificate renewed and the CA rotated while Workloads are created: none refused.

ClusterWorkloadPolicies are cluster-wide: each test names its own uniquely (departments too),
and deletes them afterwards, waiting until the webhook has forgotten them (:class:`Scene`).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import re
import ssl
import threading
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from kubernetes.client import CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from podwright.adapters.admission_webhooks import AdmissionWebhooks, WebhookSettings
from podwright.adapters.certificates import CertificateSettings
from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.adapters.kubernetes.resources import rest_resource
from podwright.api.backends import ClusterAccess, cluster_name
from podwright.core.admission import FINDINGS_ANNOTATION
from podwright.core.cluster_resources import DEPARTMENT_LABEL, PROJECT_LABEL
from podwright.core.webhook_configurations import (
    ADMIT_WORKLOADS,
    MUTATE_WORKLOADS,
    MUTATING_KIND,
    VALIDATE_POLICIES,
    VALIDATE_WORKLOADS,
    VALIDATING_KIND,
)
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef
from tests.cluster.support import EXAMPLES, Completed, Server, podwright_command
from tests.cluster.webhooks import (
    CONFIGURATIONS,
    WORKLOADS,
    WebhookProcess,
    ca_bundle_pem,
    configuration_urls_and_bundles,
    configuration_webhooks,
    webhook_address,
)
from tests.kube.support import cluster_namespace, eventually
from tests.node_sim.rest import send
from tests.webhook_server import Review, utc_now
from tests.webhook_server import WebhookServer as RecordingWebhooks

GROUP, VERSION = "podwright.dev", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
DENIED = 'admission webhook "workloads.podwright.dev" denied the request: '
POLICY_DENIED = 'admission webhook "policies.podwright.dev" denied the request: '
ROUTES = (MUTATE_WORKLOADS, VALIDATE_WORKLOADS, VALIDATE_POLICIES)
CREATE_REFUSED = 'Error from server (Forbidden): error when creating "STDIN": ' + DENIED


def workload(name: str, namespace: str, workload_type: str = "training", **spec: Any) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": workload_type, **spec},
    }


def project_policy(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"workloadType": "training", **spec},
    }


def cluster_policy(name: str, scope: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterWorkloadPolicy",
        "metadata": {"name": name},
        "spec": {"workloadType": "training", "scope": scope, **spec},
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def plural(obj: Mapping[str, Any]) -> str:
    return rest_resource(API_VERSION, str(obj["kind"])).plural


def collection_path(obj: Mapping[str, Any]) -> str:
    resource = rest_resource(API_VERSION, str(obj["kind"]))
    return resource.collection_path(obj["metadata"].get("namespace"))


def refusal(error: ApiException) -> tuple[int, str]:
    """An API error's status and message."""
    return error.status, json.loads(error.body)["message"]


@dataclass
class Scene:
    """A test's namespaces and policies, created for it and deleted after it (policies first,
    each waited for until the webhook no longer counts it)."""

    server: Server
    namespaces: list[Iterator[str]] = field(default_factory=list)
    policies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def objects(self) -> CustomObjectsApi:
        return CustomObjectsApi(self.server.api_client)

    def namespace(self, department: str | None = None, project: str | None = None) -> str:
        """A namespace of the test's own (a project of ``department``, named ``project``)."""
        labels = {DEPARTMENT_LABEL: department, PROJECT_LABEL: project}
        created = cluster_namespace(
            self.server.client, {key: value for key, value in labels.items() if value}
        )
        self.namespaces.append(created)
        return next(created)

    def policy(self, policy: dict[str, Any]) -> dict[str, Any]:
        """``policy`` created, once the webhook counts it."""
        self.server.client.create(policy)
        return self.counted(policy)

    def counted(self, policy: dict[str, Any]) -> dict[str, Any]:
        """``policy`` (in the cluster), kept for deletion, once the webhook counts it."""
        self.policies.append(policy)
        eventually(lambda: self._counts(policy))
        return policy

    def _counts(self, policy: Mapping[str, Any]) -> bool:
        """Whether the webhook counts ``policy``: a copy of it (a second policy of its scope
        and type) is refused, dry run."""
        copy = {**policy, "metadata": {**policy["metadata"], "name": unique("count-probe")}}
        answer = send(
            self.server.api_client, "POST", collection_path(copy), copy, query={"dryRun": "All"}
        )
        if answer.status == 201:
            return False
        assert "conflicts with the policies of its scopes" in answer.body["message"], answer.body
        return True

    def kubectl_apply(self, *manifests: Mapping[str, Any]) -> Completed:
        return self.server.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifests))

    def kubectl_get(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``kubectl get KIND NAME -o yaml``, as read."""
        metadata = obj["metadata"]
        shown = self.server.kubectl(
            "get", f"{plural(obj)}.{GROUP}", metadata["name"], "-n", metadata["namespace"],
            "-o", "yaml",
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        loaded: dict[str, Any] = yaml.safe_load(shown.stdout)
        return loaded

    def create(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        """A Workload created with the Python client (ApiException when refused)."""
        created: dict[str, Any] = self.objects.create_namespaced_custom_object(
            GROUP,
            VERSION,
            obj["metadata"]["namespace"],
            "workloads",
            dict(obj),
            dry_run="All" if dry_run else None,
        )
        return created

    def spec_admitted(self, obj: Mapping[str, Any], expected: Mapping[str, Any]) -> bool:
        """Whether a dry-run create of ``obj`` is admitted with ``expected`` as its spec
        (AssertionError, for :func:`eventually`, saying what it got)."""
        try:
            spec = self.create(obj, dry_run=True)["spec"]
        except ApiException as error:
            raise AssertionError(refusal(error)) from None
        assert spec == expected
        return True

    def get(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        got: dict[str, Any] = self.objects.get_namespaced_custom_object(
            GROUP, VERSION, obj["metadata"]["namespace"], "workloads", obj["metadata"]["name"]
        )
        return got

    def refused(self, obj: Mapping[str, Any]) -> tuple[int, str]:
        """The status and message of the Python client's create of ``obj``, refused."""
        with pytest.raises(ApiException) as refused:
            self.create(obj)
        return refusal(refused.value)

    def clean_up(self) -> None:
        """Delete the policies, each until the webhook no longer counts it (a later test's
        policy of the same scope would conflict with it), then the namespaces."""
        try:
            for policy in reversed(self.policies):
                metadata = policy["metadata"]
                ref = ObjectRef(
                    API_VERSION, policy["kind"], metadata.get("namespace", ""), metadata["name"]
                )
                try:
                    self.server.client.delete(ref)
                except NotFoundError:
                    continue
                eventually(lambda policy=policy: not self._counts(policy))
        finally:
            for created in reversed(self.namespaces):
                created.close()


@pytest.fixture
def scene(server: Server, webhook: WebhookProcess) -> Iterator[Scene]:
    made = Scene(server)
    try:
        yield made
    finally:
        made.clean_up()


def the_cluster(server: Server) -> str:
    """The cluster's name in the scope tree: the kubeconfig's name for it."""
    return cluster_name(ClusterAccess(str(server.kubeconfig), None))


def issues(scope: str, *found: str) -> str:
    count = len(found)
    return (
        f"{count} compliance issue{'s' if count > 1 else ''} with the policies of {scope}: "
        + "; ".join(found)
    )


# Workloads: defaults, and every mode ------------------------------------------------------------


CLIENTS = ["kubectl", "python"]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_compliant_workload_is_admitted_with_its_defaults_in_its_spec(
    scene: Scene, client: str
) -> None:
    namespace = scene.namespace()
    asset_id = unique("datasets")
    scene.server.client.create(
        {
            "apiVersion": API_VERSION,
            "kind": "Asset",
            "metadata": {"name": "team-datasets", "namespace": namespace},
            "spec": {
                "id": asset_id,
                "kind": "pvc",
                "spec": {"claimName": "team-datasets", "path": "/datasets", "readOnly": True},
            },
        }
    )
    scene.policy(
        project_policy(
            "defaults",
            namespace,
            defaults={"priorityClass": "low", "compute": {"cpuCoreLimit": 4}},
            rules={
                "compute": {
                    "cpuCoreRequest": {
                        "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": 0.5}
                    }
                }
            },
            imposedAssets=[asset_id],
        )
    )
    submitted = workload("resnet", namespace, image="pytorch:2", compute={"gpuDevicesRequest": 1})
    expected = {
        "type": "training",
        "image": "pytorch:2",
        "priorityClass": "low",
        "compute": {"gpuDevicesRequest": 1, "cpuCoreLimit": 4, "cpuCoreRequest": 2},
        "storage": {
            "pvc": [
                {
                    "name": "team-datasets",
                    "claimName": "team-datasets",
                    "path": "/datasets",
                    "readOnly": True,
                }
            ]
        },
    }
    # The asset reaches the webhook's cache on its own time.
    eventually(lambda: scene.spec_admitted(submitted, expected))
    if client == "kubectl":
        applied = scene.kubectl_apply(submitted)
        assert (applied.returncode, applied.stderr) == (0, ""), applied.stderr
        assert applied.stdout == "workload.podwright.dev/resnet created\n"
        assert scene.kubectl_get(submitted)["spec"] == expected
    else:
        assert scene.create(submitted)["spec"] == expected
        assert scene.get(submitted)["spec"] == expected


@pytest.mark.parametrize("client", CLIENTS)
def test_a_workload_that_breaks_enforced_rules_is_refused_with_every_issue(
    scene: Scene, client: str
) -> None:
    namespace = scene.namespace()
    policy = scene.policy(
        project_policy(
            "limits",
            namespace,
            rules={
                "image": {"required": True},
                "compute": {"gpuDevicesRequest": {"max": 2}},
                "priorityClass": {"options": [{"value": "low"}, {"value": "medium"}]},
            },
        )
    )
    owner = f"policy {policy['metadata']['name']!r} of project {namespace}"
    message = issues(
        f"project {namespace}",
        "spec.image: a value is required, and neither the submission nor the policy gives one "
        f"(rule required, {owner})",
        f'spec.priorityClass: \'high\' (submission) is not among the options ["low", "medium"] '
        f"(rule options, {owner})",
        f"spec.compute.gpuDevicesRequest: 4 (submission) is above the maximum 2 (rule max, {owner})",
    )
    submitted = workload(
        "greedy", namespace, priorityClass="high", compute={"gpuDevicesRequest": 4}
    )
    if client == "kubectl":
        applied = scene.kubectl_apply(submitted)
        assert (applied.returncode, applied.stdout) == (1, "")
        assert applied.stderr == CREATE_REFUSED + message + "\n", applied.stderr
    else:
        assert scene.refused(submitted) == (403, DENIED + message)
    with pytest.raises(ApiException) as missing:
        scene.get(submitted)
    assert missing.value.status == 404


INVALID = 'The request is invalid: error when creating "STDIN": ' + DENIED


def test_without_a_policy_a_workload_that_cannot_run_is_refused_as_podwright_render_says(
    scene: Scene, tmp_path: Path
) -> None:
    """Without any policy, a Workload without an image is refused by the validating webhook
    (before, it was admitted and the operator failed it), with, on one line, what ``podwright
    render`` prints of it (on the profile the webhook judges it on: the operators'): by kubectl,
    dry run or not, and by the Python client."""
    namespace = scene.namespace()
    submitted = workload("no-image", namespace, compute={"gpuDevicesRequest": 1})
    refused = scene.refused(submitted)
    profile = re.fullmatch(
        re.escape(DENIED) + r"cannot render on cluster profile '([^']+)': .*", refused[1]
    )
    assert profile, refused
    path = tmp_path / "workload.yaml"
    path.write_text(yaml.safe_dump(submitted))
    named = tmp_path / "profile.yaml"
    named.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "podwright.dev/v1",
                "kind": "ClusterProfile",
                "metadata": {"name": profile.group(1)},
            }
        )
    )
    rendered = podwright_command("render", "-f", str(path), "--profile", str(named), cwd=tmp_path)
    assert rendered.returncode == 2, rendered.stdout
    head, *reasons = [
        line.removeprefix("podwright: error: ") for line in rendered.stderr.splitlines()
    ]
    message = f"{head} {'; '.join(reasons)}"
    assert message == (
        f"cannot render on cluster profile {profile.group(1)!r}: image: required: the container "
        "image (submit one, or have a policy default it)"
    )
    assert refused == (422, DENIED + message)
    for dry_run in ((), ("--dry-run=server",)):
        applied = scene.server.kubectl(
            "apply", *dry_run, "-f", "-", input=yaml.safe_dump(submitted)
        )
        assert (applied.returncode, applied.stdout) == (1, "")
        assert applied.stderr == INVALID + message + "\n", applied.stderr
    with pytest.raises(ApiException) as missing:
        scene.get(submitted)
    assert missing.value.status == 404


def test_warn_mode_admits_with_a_warning_for_each_issue(scene: Scene) -> None:
    namespace = scene.namespace()
    scene.policy(
        project_policy(
            "advice",
            namespace,
            enforcement="warn",
            rules={
                "compute": {"gpuDevicesRequest": {"max": 2}},
                "nodePools": {"options": [{"value": "a100"}]},
            },
        )
    )
    owner = f"policy 'advice' of project {namespace}"
    warnings = [  # in the field catalogue's order, whatever order the server sends the keys in
        "spec.nodePools: item 0, 'v100', of [\"v100\"] (submission) is not among the options "
        f'["a100"] '
        f"(rule options, {owner})",
        f"spec.compute.gpuDevicesRequest: 4 (submission) is above the maximum 2 (rule max, {owner})",
    ]
    spec = {"image": "pytorch:2", "nodePools": ["v100"], "compute": {"gpuDevicesRequest": 4}}

    applied = scene.kubectl_apply(workload("with-kubectl", namespace, **spec))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout == "workload.podwright.dev/with-kubectl created\n"
    assert applied.stderr.splitlines() == [f"Warning: {text}" for text in warnings]

    created = send(
        scene.server.api_client,
        "POST",
        WORKLOADS.format(namespace=namespace),
        workload("with-python", namespace, **spec),
    )
    assert created.status == 201, created.body
    assert [warning_text(header) for header in created.warnings] == warnings
    assert created.body["spec"] == {"type": "training", **spec}


def test_audit_mode_admits_silently_and_records_the_findings_in_the_audit_log_and_status(
    scene: Scene, webhook: WebhookProcess
) -> None:
    namespace = scene.namespace()
    scene.policy(
        project_policy(
            "watch",
            namespace,
            enforcement="audit",
            rules={"compute": {"gpuDevicesRequest": {"max": 2}}},
        )
    )
    submitted = workload("watched", namespace, image="pytorch:2", compute={"gpuDevicesRequest": 4})
    applied = scene.kubectl_apply(submitted)
    assert (applied.returncode, applied.stderr) == (0, "")
    assert applied.stdout == "workload.podwright.dev/watched created\n"
    assert scene.kubectl_get(submitted)["spec"] == submitted["spec"]

    # The API server writes audit annotations to its audit log only: what the webhook answers
    # it for this Workload is read from the webhook itself, as the API server calls it.
    answer = review(webhook, submitted)
    assert answer["allowed"] is True
    assert "warnings" not in answer
    (finding,) = json.loads(answer["auditAnnotations"][FINDINGS_ANNOTATION])
    assert finding == {
        "field": "spec.compute.gpuDevicesRequest",
        "rule": "max",
        "message": "4 (submission) is above the maximum 2",
        "enforcement": "audit",
        "policy": f"WorkloadPolicy {namespace}/watch",
        "scope": f"project {namespace}",
    }

    # What users see: podwright webhook's status writer puts the findings on the Workload,
    # which stays PolicyCompliant (audit mode admits).
    def status() -> dict[str, Any] | None:
        current = scene.kubectl_get(submitted).get("status") or {}
        return current if (current.get("compliance") or {}).get("findings") else None

    shown = eventually(status, timeout=30)
    assert shown["compliance"] == {"enforcement": "audit", "findings": [finding]}
    (condition,) = (c for c in shown["conditions"] if c["type"] == "PolicyCompliant")
    assert (condition["status"], condition["reason"]) == ("True", "Compliant")


def warning_text(header: str) -> str:
    """A ``Warning`` header's text (``299 - "<text>"``, quotes and backslashes escaped: RFC
    9111's quoted-string, as ``NewWarningHeader`` writes it)."""
    code, agent, quoted = header.split(" ", 2)
    assert (code, agent) == ("299", "-"), header
    assert quoted[:1] + quoted[-1:] == '""', header
    return re.sub(r"\\(.)", r"\1", quoted[1:-1])


def review(webhook: WebhookProcess, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The validating webhook's response to a CREATE review of ``obj``, sent as the API server
    sends it (over HTTPS, trusting the configurations' CA bundle)."""
    metadata = obj["metadata"]
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": GROUP, "version": VERSION, "kind": obj["kind"]},
        "resource": {"group": GROUP, "version": VERSION, "resource": plural(obj)},
        "name": metadata["name"],
        "namespace": metadata["namespace"],
        "operation": "CREATE",
        "object": obj,
        "dryRun": True,
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    assert webhook.url is not None
    context = ssl.create_default_context(cadata=ca_bundle_pem(webhook.server).decode())
    sent = urllib.request.Request(
        f"{webhook.url}/validate/workloads",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(sent, context=context, timeout=10) as answer:
        response: dict[str, Any] = json.loads(answer.read())["response"]
    return response


# Every scope, every rule type --------------------------------------------------------------------


@pytest.mark.parametrize("level", ["tenant", "cluster", "department", "project", "project-label"])
def test_a_rule_of_every_scope_refuses_the_workloads_under_it_naming_the_scope(
    scene: Scene, level: str
) -> None:
    rules = {"compute": {"gpuDevicesRequest": {"max": 2}}}
    name = unique(level)
    department, project = unique("dept"), unique("proj")
    if level == "project":
        namespace = scene.namespace(department)
        policy, scope = project_policy(name, namespace, rules=rules), f"project {namespace}"
    elif level == "project-label":
        namespace = scene.namespace(department, project)
        policy, scope = project_policy(name, namespace, rules=rules), f"project {project}"
    else:
        namespace = scene.namespace(department)
        policy = cluster_policy(name, level, rules=rules)
        scope = {
            "tenant": "tenant",
            "cluster": f"cluster {the_cluster(scene.server)}",
            "department": f"department {department}",
        }[level]
        if level == "department":
            policy["spec"]["department"] = department
    scene.policy(policy)
    project_scope = f"project {project if level == 'project-label' else namespace}"
    message = issues(
        project_scope,
        f"spec.compute.gpuDevicesRequest: 4 (submission) is above the maximum 2 "
        f"(rule max, policy {name!r} of {scope})",
    )
    refused = workload("too-many", namespace, image="pytorch:2", compute={"gpuDevicesRequest": 4})
    assert scene.refused(refused) == (403, DENIED + message)
    admitted = workload("enough", namespace, image="pytorch:2", compute={"gpuDevicesRequest": 2})
    assert scene.create(admitted)["spec"] == admitted["spec"]


RULES: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "canAdd": (
        {
            "defaults": {"environmentVariables": {"instances": [{"name": "A", "value": "1"}]}},
            "rules": {"environmentVariables": {"instances": {"canAdd": False}}},
        },
        {"environmentVariables": [{"name": "B", "value": "2"}]},
        "spec.environmentVariables[B]: the policy allows no instances but its own ('A'); 'B' is "
        "added",
    ),
    "locked": (
        {
            "defaults": {
                "environmentVariables": {"instances": [{"name": "HF_HOME", "value": "/data"}]}
            },
            "rules": {"environmentVariables": {"instances": {"locked": ["HF_HOME"]}}},
        },
        {"environmentVariables": [{"name": "HF_HOME", "value": "/tmp"}]},
        "spec.environmentVariables[HF_HOME]: 'HF_HOME' is locked by project {namespace} and "
        "cannot be modified (changed: value)",
    ),
    "canEdit": (
        {
            "defaults": {"imagePullPolicy": "IfNotPresent"},
            "rules": {"imagePullPolicy": {"canEdit": False}},
        },
        {"imagePullPolicy": "Always"},
        "spec.imagePullPolicy: the policy's default is 'IfNotPresent' and cannot be changed; got "
        "'Always'",
    ),
    "required": (
        {"rules": {"command": {"required": True}}},
        {},
        "spec.command: a value is required, and neither the submission nor the policy gives one",
    ),
    "min": (
        {"rules": {"compute": {"cpuCoreRequest": {"min": 0.5}}}},
        {"compute": {"cpuCoreRequest": 0.1}},
        "spec.compute.cpuCoreRequest: 0.1 (submission) is below the minimum 0.5",
    ),
    "max": (
        {"rules": {"compute": {"gpuDevicesRequest": {"max": 2}}}},
        {"compute": {"gpuDevicesRequest": 4}},
        "spec.compute.gpuDevicesRequest: 4 (submission) is above the maximum 2",
    ),
    "step": (
        {"rules": {"compute": {"gpuDevicesRequest": {"step": 2}}}},
        {"compute": {"gpuDevicesRequest": 3}},
        "spec.compute.gpuDevicesRequest: 3 (submission) is not a multiple of the step 2 counted "
        "from 0",
    ),
    "options": (
        {"rules": {"priorityClass": {"options": [{"value": "low"}, {"value": "medium"}]}}},
        {"priorityClass": "high"},
        'spec.priorityClass: \'high\' (submission) is not among the options ["low", "medium"]',
    ),
    "defaultFrom": (
        {
            "rules": {
                "compute": {
                    "cpuCoreRequest": {
                        "max": 1,
                        "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": 0.5},
                    }
                }
            }
        },
        {"compute": {"cpuCoreLimit": 4}},
        "spec.compute.cpuCoreRequest: 2 (defaultFrom compute.cpuCoreLimit × 0.5 (project "
        "{namespace})) is above the maximum 1",
    ),
}
"""Per rule type: a project policy's ``defaults`` and ``rules``, a submission that breaks it, and
the issue (``{namespace}``: the test's namespace). The rule a ``defaultFrom`` value breaks is
the one named (here ``max``)."""


@pytest.mark.parametrize("rule", list(RULES))
def test_every_rule_type_refuses_with_its_message(scene: Scene, rule: str) -> None:
    policy, spec, issue = RULES[rule]
    namespace = scene.namespace()
    scene.policy(project_policy("rules", namespace, **policy))
    named = "max" if rule == "defaultFrom" else rule
    owner = f"(rule {named}, policy 'rules' of project {namespace})"
    message = issues(f"project {namespace}", f"{issue.format(namespace=namespace)} {owner}")
    applied = scene.kubectl_apply(workload("breaks", namespace, image="pytorch:2", **spec))
    assert (applied.returncode, applied.stdout) == (1, "")
    assert applied.stderr == CREATE_REFUSED + message + "\n", applied.stderr


# Policies ---------------------------------------------------------------------------------------


def test_a_second_rule_for_a_field_of_the_branch_is_refused_naming_its_owner(
    scene: Scene,
) -> None:
    department = unique("dept")
    owner = scene.policy(
        cluster_policy(
            unique("owner"),
            "department",
            department=department,
            rules={"compute": {"gpuDevicesRequest": {"max": 4}}},
        )
    )
    namespace = scene.namespace(department)
    second = project_policy(
        "looser", namespace, rules={"compute": {"gpuDevicesRequest": {"max": 8}}}
    )
    applied = scene.kubectl_apply(second)
    assert (applied.returncode, applied.stdout) == (1, "")
    source = f"WorkloadPolicy {namespace}/looser"
    assert applied.stderr == (
        'The request is invalid: error when creating "STDIN": '
        + POLICY_DENIED
        + f"{source} conflicts with the policies of its scopes: {source}: "
        "spec.rules.compute.gpuDevicesRequest: the rules of compute.gpuDevicesRequest are owned "
        f"by department {department} (policy {owner['metadata']['name']!r}); a field's rules are "
        "set by one scope of a branch\n"
    ), applied.stderr


def test_a_malformed_policy_is_refused_with_every_field_in_error(scene: Scene) -> None:
    namespace = scene.namespace()
    malformed = project_policy(
        "malformed",
        namespace,
        defaults={"compute": {"gpuDevicesRequest": 5}},
        rules={
            "compute": {
                "gpuDevicesRequest": {"max": 2},
                "cpuCoreRequest": {"min": 4, "max": 2},
                "cpuCoreLimit": {"defaultFrom": {"field": "compute.nothing", "factor": 2}},
            }
        },
    )
    applied = scene.kubectl_apply(malformed)
    assert (applied.returncode, applied.stdout) == (1, "")
    assert applied.stderr == (
        'The request is invalid: error when creating "STDIN": '
        + POLICY_DENIED
        + f"WorkloadPolicy {namespace}/malformed is invalid: "
        "spec.rules.compute.cpuCoreLimit.defaultFrom.field: 'compute.nothing' is not a field of "
        "the same section (compute); defaultFrom reads a sibling field (inside an itemized field, "
        "an attribute of the same instance); "
        "spec.rules.compute.cpuCoreRequest.min: min 4 is above max 2; "
        "spec.defaults.compute.gpuDevicesRequest: the default breaks this policy's own 'max' "
        "rule: 5 is above the maximum 2\n"
    ), applied.stderr
    # What the CRD's schema refuses, the API server refuses before any webhook sees it.
    applied = scene.kubectl_apply(project_policy("loud", namespace, enforcement="loud"))
    assert (applied.returncode, applied.stdout) == (1, "")
    assert applied.stderr.startswith(
        'The WorkloadPolicy "loud" is invalid: spec.enforcement: Unsupported value: "loud": '
    ), applied.stderr


EXAMPLE_POLICIES = [EXAMPLES / "policies" / name for name in (
    "cluster-prod.yaml", "department-research.yaml", "project-vision.yaml"
)]  # fmt: skip


def test_policy_apply_of_the_examples_and_the_effective_policy_of_a_namespace(
    scene: Scene,
) -> None:
    """The examples' department is ``research`` and their project ``vision``: a namespace of
    the test's own is that project by its labels, and ``-n`` puts the project's WorkloadPolicy
    there (the example's Namespace ``vision`` is not applied). A ClusterWorkloadPolicy of scope
    cluster governs the cluster it is in."""
    namespace = scene.namespace("research", "vision")
    kubeconfig = ("--kubeconfig", str(scene.server.kubeconfig))
    files = [option for path in EXAMPLE_POLICIES for option in ("-f", str(path))]
    applied = podwright_command(
        "policy", "apply", *files, "-n", namespace, *kubeconfig,
        cwd=scene.server.kubeconfig.parent,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "clusterworkloadpolicy.podwright.dev/prod-training applied",
        "clusterworkloadpolicy.podwright.dev/research-training applied",
        "workloadpolicy.podwright.dev/vision-training applied",
    ]
    for kind, name, in_namespace in (
        ("ClusterWorkloadPolicy", "prod-training", ""),
        ("ClusterWorkloadPolicy", "research-training", ""),
        ("WorkloadPolicy", "vision-training", namespace),
    ):
        scene.counted(scene.server.client.get(ObjectRef(API_VERSION, kind, in_namespace, name)))
    shown = podwright_command(
        "policy", "effective", "-n", namespace, "--type", "training", "-o", "json",
        *kubeconfig, cwd=scene.server.kubeconfig.parent,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    effective = json.loads(shown.stdout)
    cluster = f"cluster {the_cluster(scene.server)}"
    assert effective["policies"] == ["prod-training", "research-training", "vision-training"]
    rules = {path: scope for path, scope in effective["sources"].items() if "rules." in path}
    assert rules == {
        "rules.image": cluster,
        "rules.compute.gpuDevicesRequest": cluster,
        "rules.compute.cpuCoreRequest": cluster,
        "rules.compute.cpuMemoryRequest": cluster,
        "rules.compute.extendedResources.attributes.quantity": cluster,
        "rules.compute.extendedResources.instances": cluster,
        "rules.security.runAsUid": cluster,
        "rules.priorityClass": "department research",
        "rules.environmentVariables.instances": "department research",
        "rules.nodePools": "project vision",
    }
    assert effective["sources"]["defaults.image"] == "project vision"
    assert effective["sources"]["imposedAssets[0]"] == cluster


# After admission ---------------------------------------------------------------------------------


def test_an_admitted_spec_is_fixed_but_an_inference_workloads_autoscaling(scene: Scene) -> None:
    namespace = scene.namespace()
    training = workload("fixed", namespace, image="pytorch:2")
    assert scene.kubectl_apply(training).returncode == 0
    changed = scene.kubectl_apply(workload("fixed", namespace, image="pytorch:3"))
    assert (changed.returncode, changed.stdout) == (1, "")
    assert changed.stderr.splitlines()[-1].endswith(
        'for: "STDIN": error when patching "STDIN": '
        + DENIED
        + "spec.image: cannot change after the workload was admitted "
        "(delete it and submit a new one)"
    ), changed.stderr
    assert scene.kubectl_get(training)["spec"]["image"] == "pytorch:2"

    autoscaling = {
        "minReplicas": 0,
        "maxReplicas": 2,
        "metric": "concurrency",
        "metricThreshold": 10,  # what Knative needs to scale on concurrency: it must render
    }
    serving = {"image": "vllm:1", "autoscaling": autoscaling}
    assert (
        scene.kubectl_apply(workload("served", namespace, "inference", **serving)).returncode == 0
    )
    scaled = {**serving, "autoscaling": {**autoscaling, "maxReplicas": 4}}
    applied = scene.kubectl_apply(workload("served", namespace, "inference", **scaled))
    assert (applied.returncode, applied.stderr) == (0, "")
    assert applied.stdout == "workload.podwright.dev/served configured\n"
    assert (
        scene.kubectl_get(workload("served", namespace))["spec"]["autoscaling"]
        == (scaled["autoscaling"])
    )
    changed = scene.kubectl_apply(
        workload("served", namespace, "inference", **{**scaled, "image": "vllm:2"})
    )
    assert changed.returncode == 1
    assert changed.stderr.splitlines()[-1].endswith(
        DENIED + "spec.image: cannot change after the workload was admitted "
        "(only spec.autoscaling may change)"
    ), changed.stderr


def test_with_the_webhook_stopped_workloads_and_policies_are_refused_and_policies_read(
    scene: Scene, webhook: WebhookProcess
) -> None:
    namespace = scene.namespace()
    scene.policy(project_policy("kept", namespace, defaults={"priorityClass": "low"}))
    webhook.stop()
    try:
        applied = scene.kubectl_apply(workload("unchecked", namespace, image="pytorch:2"))
        assert (applied.returncode, applied.stdout) == (1, "")
        assert 'failed calling webhook "workloads.podwright.dev"' in applied.stderr
        refused = scene.kubectl_apply(project_policy("unchecked", namespace))
        assert refused.returncode == 1
        assert 'failed calling webhook "policies.podwright.dev"' in refused.stderr
        listed = scene.server.kubectl(
            "get", "workloadpolicies,clusterworkloadpolicies", "-n", namespace, "-o", "name"
        )
        assert listed.returncode == 0, listed.stderr
        assert "workloadpolicy.podwright.dev/kept" in listed.stdout.splitlines()
    finally:
        webhook.ensure()
    assert scene.create(workload("checked", namespace, image="pytorch:2"))["spec"] == {
        "type": "training",
        "image": "pytorch:2",
        "priorityClass": "low",
    }


@contextlib.contextmanager
def later_mutating_webhook(
    scene: Scene, namespace: str, marker: str, patch: list[dict[str, Any]]
) -> Iterator[RecordingWebhooks]:
    """A mutating webhook of the test's own, after podwright's (configurations are called in
    the order of their names), that applies ``patch`` to the Workloads labelled ``marker``;
    deleted afterwards."""

    def mutate(request: Review) -> Review:
        encoded = base64.b64encode(json.dumps(patch).encode()).decode()
        return {"allowed": True, "patchType": "JSONPatch", "patch": encoded}

    path = f"{CONFIGURATIONS}/mutatingwebhookconfigurations"
    name = f"zz-{marker}.podwright.dev"
    with RecordingWebhooks({"/later": mutate}) as server:
        hook = {
            "name": name,
            "clientConfig": {"url": server.url("/later"), "caBundle": server.ca_bundle},
            "rules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": [GROUP],
                    "apiVersions": [VERSION],
                    "resources": ["workloads"],
                    "scope": "Namespaced",
                }
            ],
            "objectSelector": {"matchLabels": {marker: "yes"}},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }
        body = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [hook],
        }
        created = send(scene.server.api_client, "POST", path, body)
        assert created.status == 201, created.body
        try:

            def in_force() -> bool:
                probe = workload(unique("probe"), namespace, image="pytorch:2")
                probe["metadata"]["labels"] = {marker: "yes"}
                send(
                    scene.server.api_client,
                    "POST",
                    WORKLOADS.format(namespace=namespace),
                    probe,
                    query={"dryRun": "All"},
                )
                sent = server.reviews("/later")
                return any(r["name"] == probe["metadata"]["name"] for r in sent)

            eventually(in_force, timeout=30)
            yield server
        finally:
            send(scene.server.api_client, "DELETE", f"{path}/{name}")


def test_a_single_webhook_admits_refuses_and_judges_a_later_webhooks_change_in_one_call(
    scene: Scene, webhook: WebhookProcess
) -> None:
    """``podwright webhook --single-webhook``: the mutating webhook judges Workloads (at
    /admit/workloads, reinvocationPolicy IfNeeded) and no validating one does; a compliant
    Workload gets its defaults, a non-compliant one is refused naming every issue, and one that
    a later mutating webhook makes non-compliant is refused too: the API server calls podwright's
    again after that change."""
    namespace = scene.namespace()
    policy = scene.policy(
        project_policy(
            "limits",
            namespace,
            defaults={"priorityClass": "low"},
            rules={"compute": {"gpuDevicesRequest": {"max": 2}}},
        )
    )
    owner = f"policy {policy['metadata']['name']!r} of project {namespace}"
    too_many = issues(
        f"project {namespace}",
        f"spec.compute.gpuDevicesRequest: 4 (submission) is above the maximum 2 (rule max, {owner})",
    )
    webhook.stop()
    webhook.single_webhook = True
    try:
        webhook.start()
        assert configuration_webhooks(scene.server, MUTATING_KIND) == [
            ("workloads.podwright.dev", f"{webhook.url}{ADMIT_WORKLOADS}")
        ]
        assert configuration_webhooks(scene.server, VALIDATING_KIND) == [
            ("policies.podwright.dev", f"{webhook.url}{VALIDATE_POLICIES}")
        ]
        assert scene.create(workload("one-call", namespace, image="pytorch:2"))["spec"] == {
            "type": "training",
            "image": "pytorch:2",
            "priorityClass": "low",
        }
        greedy = workload("greedy", namespace, image="pytorch:2", compute={"gpuDevicesRequest": 4})
        assert scene.refused(greedy) == (403, DENIED + too_many)
        marker = unique("later")
        more_gpus = [{"op": "add", "path": "/spec/compute", "value": {"gpuDevicesRequest": 4}}]
        with later_mutating_webhook(scene, namespace, marker, more_gpus):
            changed = workload("changed-later", namespace, image="pytorch:2")
            changed["metadata"]["labels"] = {marker: "yes"}
            assert scene.refused(changed) == (403, DENIED + too_many)
    finally:
        webhook.stop()
        webhook.single_webhook = False
        webhook.ensure()


# Certificates ------------------------------------------------------------------------------------


def served_serial(url: str) -> int:
    """The serial number of the certificate the server at ``url`` serves now."""
    host, _, port = url.removeprefix("https://").rpartition(":")
    pem = ssl.get_server_certificate((host.strip("[]"), int(port)), timeout=5)
    return x509.load_pem_x509_certificate(pem.encode()).serial_number


def rotation_settings(server: Server) -> CertificateSettings:
    """Certificates of seconds, renewed at 40% of their lives so that a loaded machine has most
    of a certificate's life to renew it: the serving one after 1.6 s (2.4 s to spare), the CA
    after 4 s. The emulator reads the configurations at each call, so a new CA bundle is trusted
    at once; a real API server reloads them from a watch, so it is given 2 s (and the lives are
    longer)."""
    if server.is_real:
        return CertificateSettings(
            authority_validity=datetime.timedelta(seconds=24),
            serving_validity=datetime.timedelta(seconds=7.5),
            renewal_fraction=0.4,
            bundle_settle=datetime.timedelta(seconds=2),
        )
    return CertificateSettings(
        authority_validity=datetime.timedelta(seconds=10),
        serving_validity=datetime.timedelta(seconds=4),
        renewal_fraction=0.4,
        bundle_settle=datetime.timedelta(0),
    )


def test_the_certificate_renewed_and_the_ca_rotated_refuse_no_request(
    scene: Scene, webhook: WebhookProcess
) -> None:
    """The webhooks in this process, with certificates of seconds, while a thread creates
    Workloads (dry run) without pause: the served certificate is renewed (its serial changes),
    the CA is rotated (the configurations' CA bundle changes, and a certificate of the new CA is
    served), and no create fails."""
    namespace = scene.namespace()
    client = KubernetesClient(connect(str(scene.server.kubeconfig)))
    settings = WebhookSettings(
        cluster_name=the_cluster(scene.server),
        webhook_host=webhook_address(real=scene.server.is_real),
        listen_host=webhook_address(real=scene.server.is_real),
        port=0,
        certificates=rotation_settings(scene.server),
        certificate_check_seconds=0.1,
    )
    failures: list[str] = []
    created = 0
    done = threading.Event()

    def create_workloads() -> None:
        nonlocal created
        while not done.is_set():
            answer = send(
                scene.server.api_client,
                "POST",
                WORKLOADS.format(namespace=namespace),
                workload(unique("w"), namespace, image="pytorch:2"),
                query={"dryRun": "All"},
            )
            if answer.status != 201:
                failures.append(str(answer.body))
            created += 1

    bundles: list[bytes] = []
    serials: list[int] = []

    def rotated(webhooks: AdmissionWebhooks) -> bool:
        # The two configurations are patched one after the other: either may be ahead.
        for _url, encoded in configuration_urls_and_bundles(scene.server) or ():
            bundle = base64.b64decode(encoded)
            if bundle not in bundles:
                bundles.append(bundle)
        serial = served_serial(webhooks.url)
        if not serials or serials[-1] != serial:
            serials.append(serial)
        # A new CA's bundle (both CAs, then the new one alone) may come and go between two
        # looks: a rotation shows as another bundle, and the new CA's certificate served.
        return len(bundles) >= 2 and len(serials) >= 3

    creating = threading.Thread(target=create_workloads, name="creating-workloads")
    try:
        with AdmissionWebhooks(client, settings, clock=utc_now) as webhooks:
            assert webhooks.base_url is not None
            eventually(
                lambda: (
                    {url for url, _bundle in configuration_urls_and_bundles(scene.server) or ()}
                    == {f"{webhooks.base_url}{path}" for path in ROUTES}
                )
            )
            creating.start()
            eventually(lambda: rotated(webhooks), timeout=30, interval=0.1)
            done.set()
            creating.join()
    finally:
        done.set()
        client.close()
    assert failures == []
    assert created > 0
    assert all(bundle.count(b"BEGIN CERTIFICATE") in (1, 2) for bundle in bundles)
