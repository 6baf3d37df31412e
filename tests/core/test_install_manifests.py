"""podwright's installation: every object valid for every Kubernetes version the schemas cover,
in an order a server accepts; the operator's Deployment unprivileged (Pod Security's
``restricted``) and probed; RBAC exactly as the operator's contract and the people's roles say,
with no wildcard; the webhooks behind the operator's Service with no CA bundle (the operator
writes its own); the settings refused with their field named."""

from __future__ import annotations

from typing import Any

import pytest

from podwright._version import __version__
from podwright.core.crds import custom_resource_definitions
from podwright.core.install_manifests import (
    DEFAULT_IMAGE,
    InstallSettings,
    InstallSettingsError,
    install_manifests,
    install_parts,
)
from podwright.core.render.priority_classes import priority_class_manifests
from podwright.core.render.profile import DEFAULT_PROFILE
from podwright.core.webhook_configurations import (
    INJECT_CA_ANNOTATION,
    ServiceEndpoint,
    webhook_configurations,
)
from tests.manifests import CORE_API_VERSIONS, assert_accepted_as_printed, schema_errors

DEFAULT = InstallSettings()
WITH_FUSE_PROXY = InstallSettings(with_fuse_proxy=True)
WITH_CONSOLE = InstallSettings(console=True, console_auth_proxy=True)
OPERATOR_LABELS = {"app.kubernetes.io/name": "podwright", "app.kubernetes.io/component": "operator"}


def find(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    return found


def deployment(settings: InstallSettings = DEFAULT) -> dict[str, Any]:
    return find(install_manifests(settings), "Deployment", "podwright-operator")


def container(settings: InstallSettings = DEFAULT) -> dict[str, Any]:
    (only,) = deployment(settings)["spec"]["template"]["spec"]["containers"]
    return only


# Valid, and in an order a server accepts ---------------------------------------------------------


@pytest.mark.parametrize(
    "settings", [DEFAULT, WITH_FUSE_PROXY, WITH_CONSOLE], ids=["default", "fuse-proxy", "console"]
)
def test_every_object_is_valid_for_every_kubernetes_version(settings: InstallSettings) -> None:
    """Built-in kinds with pods (Deployment, DaemonSet) are checked as ``kubectl apply`` takes
    them (schemas, the API server's cross-field rules, required values); the others by the
    schema of their kind, strict (an unknown field is an error)."""
    manifests = install_manifests(settings)
    with_pods = [m for m in manifests if m["apiVersion"] in CORE_API_VERSIONS]
    assert_accepted_as_printed(with_pods)
    errors = [
        f"{m['kind']} {m['metadata']['name']}: {error}"
        for m in manifests
        if m["apiVersion"] not in CORE_API_VERSIONS
        for error in schema_errors(m)
    ]
    assert not errors, "\n".join(errors)


def test_the_objects_come_in_apply_order() -> None:
    """CRDs first (the server serves their kinds only once they are Established), the namespace
    before anything in it, the operator before the webhook configurations that send requests to
    it, and the FUSE proxy, when asked for, last."""
    kinds = [m["kind"] for m in install_manifests(WITH_FUSE_PROXY)]
    assert kinds == [
        *["CustomResourceDefinition"] * 6,
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        *["ClusterRole"] * 3,
        *["PriorityClass"] * 7,
        "Service",
        "Deployment",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "Namespace",
        "ServiceAccount",
        "DaemonSet",
    ]
    assert "DaemonSet" not in [m["kind"] for m in install_manifests(DEFAULT)]
    assert [part.name for part in install_parts(WITH_FUSE_PROXY)] == [
        "crds",
        "namespace",
        "rbac",
        "priority-classes",
        "operator",
        "webhooks",
        "fuse-proxy",
    ]


def test_the_crds_and_priority_classes_are_the_ones_their_commands_print() -> None:
    manifests = install_manifests(DEFAULT)
    assert [m for m in manifests if m["kind"] == "CustomResourceDefinition"] == (
        custom_resource_definitions()
    )
    assert [m for m in manifests if m["kind"] == "PriorityClass"] == priority_class_manifests(
        DEFAULT_PROFILE
    )


@pytest.mark.parametrize("namespace", ["podwright-system", "ml-platform"])
def test_everything_of_the_operator_is_in_its_namespace(namespace: str) -> None:
    manifests = install_manifests(InstallSettings(namespace=namespace, with_fuse_proxy=True))
    placed = {(m["kind"], m["metadata"]["name"]): m["metadata"].get("namespace") for m in manifests}
    for kind in ("ServiceAccount", "Role", "RoleBinding", "Deployment"):
        assert placed[(kind, "podwright-operator")] == namespace
    assert placed[("Service", "podwright-webhook")] == namespace
    assert placed[("DaemonSet", "podwright-fuse-proxy")] == "podwright-fuse-proxy"
    binding = find(manifests, "ClusterRoleBinding", "podwright-operator")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "podwright-operator", "namespace": namespace}
    ]
    configurations = [m for m in manifests if m["kind"].endswith("WebhookConfiguration")]
    assert len(configurations) == 2
    for configuration in configurations:
        for hook in configuration["webhooks"]:
            assert hook["clientConfig"]["service"]["namespace"] == namespace


def test_the_namespaces_are_podwrights_and_say_what_pods_they_allow() -> None:
    """``uninstall`` deletes a namespace only when it carries ``part-of: podwright``. The
    operator's enforces Pod Security's ``restricted`` (the operator needs nothing more); the FUSE
    proxy's daemon is privileged, so it has a namespace of its own that allows it."""
    manifests = install_manifests(WITH_FUSE_PROXY)
    operator, fuse_proxy = (m for m in manifests if m["kind"] == "Namespace")
    assert operator["metadata"]["labels"] == {
        "app.kubernetes.io/name": "podwright",
        "app.kubernetes.io/part-of": "podwright",
        "pod-security.kubernetes.io/enforce": "restricted",
    }
    assert fuse_proxy["metadata"]["name"] == "podwright-fuse-proxy"
    assert fuse_proxy["metadata"]["labels"] == {
        "pod-security.kubernetes.io/enforce": "privileged",
        "app.kubernetes.io/part-of": "podwright",
    }


# The operator's Deployment ----------------------------------------------------------------------


def test_the_operator_runs_unprivileged_as_pod_security_restricted_requires() -> None:
    """Every control of the ``restricted`` profile (Pod Security Standards): non-root, no
    privilege escalation, every capability dropped, the runtime's seccomp profile, no host
    namespace or path, only allowed volume types; and a read-only root file system with an
    ``emptyDir`` at /tmp."""
    pod = deployment()["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container()["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod)
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert container()["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod["serviceAccountName"] == "podwright-operator"
    assert pod["terminationGracePeriodSeconds"] == 60


def test_the_operator_is_probed_and_has_its_requests() -> None:
    probes = container()
    ports = {port["name"]: port["containerPort"] for port in probes["ports"]}
    assert ports == {"webhook": 9443, "metrics": 8080}
    assert probes["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert probes["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert probes["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }


def test_the_operator_command_line_spells_out_every_setting() -> None:
    """The image's entry point is ``podwright``; the namespace comes from the downward API."""
    assert container()["image"] == f"ghcr.io/podwright/podwright:{__version__}" == DEFAULT_IMAGE
    assert "command" not in container()
    assert container()["args"] == [
        "operator",
        "--namespace",
        "$(POD_NAMESPACE)",
        "--webhook-service",
        "podwright-webhook",
        "--ca-secret",
        "podwright-webhook-ca",
        "--metrics-address",
        "0.0.0.0:8080",
        "--port",
        "9443",
    ]
    assert container()["env"] == [
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]


def test_two_replicas_roll_without_a_gap_and_spread_over_nodes() -> None:
    spec = deployment()["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    (term,) = spec["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"] == {
        "labelSelector": {"matchLabels": OPERATOR_LABELS},
        "topologyKey": "kubernetes.io/hostname",
    }
    assert deployment(InstallSettings(replicas=3))["spec"]["replicas"] == 3


def test_the_labels_name_the_version_but_the_selector_does_not() -> None:
    """A Deployment's selector cannot change, so an upgrade must not change it."""
    spec = deployment()["spec"]
    assert spec["selector"] == {"matchLabels": OPERATOR_LABELS}
    labels = spec["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/version"] == __version__
    assert OPERATOR_LABELS.items() <= labels.items()
    assert deployment()["metadata"]["labels"]["app.kubernetes.io/version"] == __version__


def test_the_webhook_service_reaches_the_operators_webhook_port() -> None:
    service = find(install_manifests(DEFAULT), "Service", "podwright-webhook")
    assert service["spec"]["selector"] == OPERATOR_LABELS
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "webhook", "protocol": "TCP"}
    ]
    assert "webhook" in {port["name"] for port in container()["ports"]}


# RBAC -------------------------------------------------------------------------------------------

READ = ["get", "list", "watch"]
MANAGE = ["get", "list", "watch", "create", "delete", "patch"]
WEBHOOK_CONFIGURATIONS = ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]


def rule(
    groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None = None
) -> dict[str, Any]:
    found: dict[str, Any] = {"apiGroups": groups, "resources": resources}
    if names is not None:
        found["resourceNames"] = names
    return {**found, "verbs": verbs}


def test_the_operators_cluster_role_is_exactly_its_contract() -> None:
    role = find(install_manifests(DEFAULT), "ClusterRole", "podwright-operator")
    assert role["rules"] == [
        rule(["podwright.dev"], ["workloads"], [*READ, "update", "patch"]),
        rule(["podwright.dev"], ["workloads/status"], ["get", "update", "patch"]),
        rule(["podwright.dev"], ["workloads/finalizers"], ["update"]),
        rule(
            ["podwright.dev"],
            [
                "workloadpolicies",
                "clusterworkloadpolicies",
                "assets",
                "clusterassets",
                "clusterprofiles",
            ],
            READ,
        ),
        # Not in the issue's list: the webhooks check at start that podwright's CRDs exist.
        rule(
            ["apiextensions.k8s.io"],
            ["customresourcedefinitions"],
            ["get"],
            [crd["metadata"]["name"] for crd in custom_resource_definitions()],
        ),
        rule([""], ["namespaces"], READ),
        rule([""], ["pods", "services", "persistentvolumeclaims"], MANAGE),
        rule(["events.k8s.io"], ["events"], [*READ, "create", "patch"]),
        rule(["batch"], ["jobs"], MANAGE),
        rule(
            ["kubeflow.org"], ["pytorchjobs", "mpijobs", "tfjobs", "xgboostjobs", "jaxjobs"], MANAGE
        ),
        rule(["serving.knative.dev"], ["services"], MANAGE),
        rule(
            ["admissionregistration.k8s.io"],
            WEBHOOK_CONFIGURATIONS,
            [*READ, "patch", "update"],
            ["podwright"],
        ),
        rule(["admissionregistration.k8s.io"], WEBHOOK_CONFIGURATIONS, ["create"]),
    ]


def test_the_operators_role_holds_its_lease_and_its_ca_secret_by_name() -> None:
    role = find(install_manifests(DEFAULT), "Role", "podwright-operator")
    assert role["metadata"]["namespace"] == "podwright-system"
    assert role["rules"] == [
        rule(["coordination.k8s.io"], ["leases"], ["create"]),
        rule(["coordination.k8s.io"], ["leases"], ["get", "update"], ["podwright-operator"]),
        rule([""], ["secrets"], ["create"]),
        rule([""], ["secrets"], ["get", "update"], ["podwright-webhook-ca"]),
    ]


def test_the_operators_roles_are_bound_to_its_service_account() -> None:
    manifests = install_manifests(DEFAULT)
    subject = {
        "kind": "ServiceAccount",
        "name": "podwright-operator",
        "namespace": "podwright-system",
    }
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find(manifests, kind, "podwright-operator")
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": "podwright-operator",
        }
        assert binding["subjects"] == [subject]


WRITE = ["create", "update", "patch", "delete"]
CLUSTER_READS = rule(
    ["podwright.dev"], ["clusterworkloadpolicies", "clusterassets", "clusterprofiles"], READ
)


@pytest.mark.parametrize(
    ("name", "rules", "aggregated_into"),
    [
        (
            "podwright-viewer",
            [
                rule(["podwright.dev"], ["workloads", "workloadpolicies", "assets"], READ),
                CLUSTER_READS,
            ],
            {"view", "edit", "admin"},
        ),
        (
            "podwright-editor",
            [
                rule(["podwright.dev"], ["workloads"], [*READ, *WRITE]),
                rule(["podwright.dev"], ["workloadpolicies", "assets"], READ),
                CLUSTER_READS,
            ],
            {"edit", "admin"},
        ),
        (
            "podwright-admin",
            [
                rule(
                    ["podwright.dev"], ["workloads", "workloadpolicies", "assets"], [*READ, *WRITE]
                ),
                CLUSTER_READS,
            ],
            {"admin"},
        ),
    ],
)
def test_the_roles_for_people_are_aggregated_into_the_built_in_ones(
    name: str, rules: list[dict[str, Any]], aggregated_into: set[str]
) -> None:
    """Each includes the one below it (so it may be bound alone), and is aggregated into the
    built-in roles from its own up (``edit`` and ``admin`` take ``view``'s rules only through
    labels). No role for people writes a cluster-scoped kind: those are cluster
    administrators'."""
    role = find(install_manifests(DEFAULT), "ClusterRole", name)
    assert role["rules"] == rules
    labels = role["metadata"]["labels"]
    prefix = "rbac.authorization.k8s.io/aggregate-to-"
    assert {key.removeprefix(prefix) for key in labels if key.startswith(prefix)} == (
        aggregated_into
    )
    assert all(labels[f"{prefix}{built_in}"] == "true" for built_in in aggregated_into)


def test_no_rule_has_a_wildcard_and_only_the_operator_writes_cluster_scoped_kinds() -> None:
    roles = [m for m in install_manifests(DEFAULT) if m["kind"] in ("ClusterRole", "Role")]
    assert len(roles) == 5
    for role in roles:
        for entry in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in entry.get(field, []), (role["metadata"]["name"], entry)
            if role["metadata"]["name"] != "podwright-operator":
                cluster_kinds = {"clusterworkloadpolicies", "clusterassets", "clusterprofiles"}
                if cluster_kinds & set(entry["resources"]):
                    assert entry["verbs"] == READ


# Webhook configurations -----------------------------------------------------------------------


def test_the_webhooks_point_at_the_operators_service_and_carry_no_ca_bundle() -> None:
    """No cert-manager: the operator keeps its CA in a Secret and writes the bundle itself.
    Without one, the API server cannot trust the webhook, and ``failurePolicy: Fail`` refuses
    Workloads and policies until the operator serves: closed, never open."""
    manifests = install_manifests(InstallSettings(namespace="ml-platform"))
    configurations = [m for m in manifests if m["kind"].endswith("WebhookConfiguration")]
    expected = webhook_configurations(
        ServiceEndpoint("ml-platform", "podwright-webhook", 443), inject_ca_from="ml-platform/x"
    )
    for configuration in expected:
        del configuration["metadata"]["annotations"]
        configuration["metadata"]["labels"]["app.kubernetes.io/part-of"] = "podwright"
    assert configurations == expected
    for configuration in configurations:
        assert configuration["metadata"]["name"] == "podwright"
        assert INJECT_CA_ANNOTATION not in configuration["metadata"].get("annotations", {})
        for hook in configuration["webhooks"]:
            assert "caBundle" not in hook["clientConfig"]
            assert hook["failurePolicy"] == "Fail"


def test_a_single_webhook_install_configures_the_webhooks_and_the_operator_alike() -> None:
    """The operator applies its configurations too, with server-side apply: it must be told the
    mode the installation wrote, or the two would disagree."""
    settings = InstallSettings(namespace="ml-platform", single_webhook=True)
    manifests = install_manifests(settings)
    configurations = [m for m in manifests if m["kind"].endswith("WebhookConfiguration")]
    expected = webhook_configurations(
        ServiceEndpoint("ml-platform", "podwright-webhook", 443),
        bundle_from_server=True,
        single_webhook=True,
    )
    for configuration in expected:
        configuration["metadata"]["labels"]["app.kubernetes.io/part-of"] = "podwright"
    assert configurations == expected
    assert container(settings)["args"][-1] == "--single-webhook"
    assert "--single-webhook" not in container()["args"]


def test_the_console_is_served_behind_its_service_with_an_optional_token() -> None:
    """The operator's console is off by default; on, it is served behind the Service
    podwright-console, its token (and an authenticating proxy's secret) from a Secret the
    administrator creates (optional: the operator starts without it), and the operator may read
    pods' output, and impersonate people only behind the proxy."""
    assert "--console" not in container()["args"]
    read_only = InstallSettings(console=True)
    args = container(read_only)["args"]
    assert args[-6:] == [
        "--console",
        "--console-listen",
        "0.0.0.0:8090",
        "--console-insecure",
        "--console-token-file",
        "/var/run/podwright/console/token",
    ]
    mount = {"name": "console-token", "mountPath": "/var/run/podwright/console", "readOnly": True}
    assert mount in container(read_only)["volumeMounts"]
    volumes = deployment(read_only)["spec"]["template"]["spec"]["volumes"]
    secret = {"secretName": "podwright-console", "optional": True}
    assert {"name": "console-token", "secret": secret} in volumes
    assert {"name": "console", "containerPort": 8090, "protocol": "TCP"} in container(read_only)[
        "ports"
    ]
    service = find(install_manifests(read_only), "Service", "podwright-console")
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "console", "protocol": "TCP"}
    ]
    assert not [
        m for m in install_manifests(DEFAULT) if m["metadata"]["name"] == "podwright-console"
    ]

    def cluster_rules(settings: InstallSettings) -> list[dict[str, Any]]:
        role = find(install_manifests(settings), "ClusterRole", "podwright-operator")
        rules: list[dict[str, Any]] = role["rules"]
        return rules

    added = [rule for rule in cluster_rules(read_only) if rule not in cluster_rules(DEFAULT)]
    assert added == [{"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}]
    proxied = [rule for rule in cluster_rules(WITH_CONSOLE) if rule not in cluster_rules(read_only)]
    assert proxied == [
        {"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}
    ]
    assert container(WITH_CONSOLE)["args"][-2:] == [
        "--console-auth-proxy",
        "/var/run/podwright/console/proxy-secret",
    ]
    with pytest.raises(InstallSettingsError) as refused:
        InstallSettings(console_auth_proxy=True)
    assert (refused.value.field, refused.value.problem) == (
        "console_auth_proxy",
        "goes with the console: install it with the console too",
    )


# The FUSE proxy ---------------------------------------------------------------------------------


def test_the_fuse_proxy_runs_the_installations_image_in_its_own_namespace() -> None:
    settings = InstallSettings(
        with_fuse_proxy=True, image="registry.example/podwright:dev", image_pull_policy="Always"
    )
    manifests = install_manifests(settings)
    daemon = find(manifests, "DaemonSet", "podwright-fuse-proxy")
    (server,) = daemon["spec"]["template"]["spec"]["containers"]
    assert (server["image"], server["imagePullPolicy"]) == (
        "registry.example/podwright:dev",
        "Always",
    )
    assert container(settings)["image"] == "registry.example/podwright:dev"
    assert daemon["metadata"]["namespace"] == "podwright-fuse-proxy"
    # The image's user is 65532; a privileged process has capabilities only as root.
    assert server["securityContext"] == {"privileged": True, "runAsUser": 0, "runAsGroup": 0}


# Settings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "field", "message"),
    [
        (
            {"namespace": "Podwright"},
            "namespace",
            "'Podwright' is not a namespace name: it must consist of lower-case letters, digits and '-'",
        ),
        (
            {"namespace": "kube-system"},
            "namespace",
            "'kube-system' is Kubernetes' own namespace; podwright needs one of its own "
            "(uninstalling deletes it), such as 'podwright-system'",
        ),
        (
            {"with_fuse_proxy": True, "fuse_proxy_namespace": "podwright-system"},
            "fuse_proxy_namespace",
            "'podwright-system' is the operator's namespace too; the FUSE proxy is privileged "
            "and needs a namespace of its own",
        ),
        ({"image": ""}, "image", "expected an image reference such as 'ghcr.io/podwright/"),
        ({"image": "a b"}, "image", "expected an image reference"),
        ({"replicas": 0}, "replicas", "at least 1 is needed (the webhooks), got 0"),
        ({"replicas": True}, "replicas", "expected an integer, got True"),
        (
            {"image_pull_policy": "always"},
            "image_pull_policy",
            "expected one of Always, IfNotPresent, Never, got 'always'",
        ),
    ],
    ids=[
        "namespace-name",
        "system-namespace",
        "shared-namespace",
        "empty-image",
        "image-with-space",
        "no-replica",
        "boolean-replicas",
        "pull-policy",
    ],
)
def test_settings_no_installation_can_have_are_refused_naming_the_field(
    settings: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InstallSettingsError) as caught:
        InstallSettings(**settings)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: {message}")
