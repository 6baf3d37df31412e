"""Every object of podwright's installation in a cluster, in the order they are applied.

``podwright install`` applies these, ``deploy/install.yaml`` is them in one file (``kubectl apply
--server-side -f``), and ``deploy/kustomization.yaml`` lists the same objects split by part
(``deploy/base/``) for Kustomize users to patch. In apply order:

1. the CustomResourceDefinitions of ``podwright.dev`` (:mod:`podwright.core.crds`): everything
   else may name their kinds, and a server serves a kind only once its CRD is Established;
2. the operator's Namespace (Pod Security ``restricted``: the operator needs nothing more) and
   ServiceAccount;
3. RBAC: the operator's ClusterRole and ClusterRoleBinding, its Role and RoleBinding in its
   namespace (its leader-election Lease, its webhook CA's Secret), and the ClusterRoles for
   people, ``podwright-viewer``, ``podwright-editor`` and ``podwright-admin``, aggregated into
   Kubernetes' ``view``, ``edit`` and ``admin``;
4. the PriorityClasses the default cluster profile names (what ``podwright priority-classes``
   prints: every pod podwright renders names one);
5. the webhook Service and the operator's Deployment;
6. the Mutating- and ValidatingWebhookConfiguration named ``podwright``, pointing at the Service
   (:mod:`podwright.core.webhook_configurations`). They carry no CA bundle: the operator keeps
   its CA in a Secret and writes the bundle into them itself. Until it has, the API server cannot
   trust the webhook, and with ``failurePolicy: Fail`` Workloads and policies are refused: the
   installation is closed to them until the operator serves, never open;
7. optionally, the FUSE proxy: its own Namespace (Pod Security ``privileged``: the daemon is), a
   token-less ServiceAccount and the DaemonSet (:mod:`podwright.core.fuse_proxy.manifests`).

Objects made here carry ``app.kubernetes.io/part-of: podwright``; ``podwright uninstall`` deletes
a namespace only when it carries that label. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from podwright._version import __version__
from podwright.core.crds import custom_resource_definitions
from podwright.core.fuse_proxy.manifests import DaemonSetOptions, daemon_manifests
from podwright.core.k8s_names import dns1123_label_problem
from podwright.core.render.priority_classes import priority_class_manifests
from podwright.core.render.profile import DEFAULT_PROFILE
from podwright.core.webhook_configurations import (
    ServiceEndpoint,
    webhook_configurations,
)

Manifest = dict[str, Any]

GROUP = "podwright.dev"
IMAGE_REPOSITORY = "ghcr.io/podwright/podwright"
DEFAULT_IMAGE = f"{IMAGE_REPOSITORY}:{__version__}"
DEFAULT_NAMESPACE = "podwright-system"
DEFAULT_FUSE_PROXY_NAMESPACE = "podwright-fuse-proxy"
OPERATOR = "podwright-operator"
"""The name of the operator's ServiceAccount, Deployment, ClusterRole, Role, their bindings, and
of its leader-election Lease."""
WEBHOOK_SERVICE = "podwright-webhook"
CA_SECRET = "podwright-webhook-ca"
"""The Secret the operator keeps its webhook CA in."""
CONSOLE_SECRET = "podwright-console"
"""The Secret whose ``token`` opens the operator's console (read-only); the administrator
creates it."""
CONSOLE_TOKEN_DIRECTORY = "/var/run/podwright/console"
"""Where the Secret :data:`CONSOLE_SECRET` is mounted: its ``token``, and the ``proxy-secret``
an authenticating proxy proves itself with."""
CONSOLE_SERVICE = "podwright-console"
CONSOLE_PORT = 8090
VIEWER_ROLE, EDITOR_ROLE, ADMIN_ROLE = "podwright-viewer", "podwright-editor", "podwright-admin"
WEBHOOK_PORT = 9443
METRICS_PORT = 8080
OPERATOR_USER = 65532
"""The image's user (``podwright``, uid and gid 65532)."""

NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
VERSION_LABEL = "app.kubernetes.io/version"
PART_OF_LABEL = "app.kubernetes.io/part-of"
PART_OF = "podwright"
POD_SECURITY_LABEL = "pod-security.kubernetes.io/enforce"
OPERATOR_SELECTOR = {NAME_LABEL: "podwright", COMPONENT_LABEL: "operator"}
"""What the Deployment and the webhook Service select the operator's pods by (a Deployment's
selector cannot change, so the version is not in it)."""

SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
"""Kubernetes' own namespaces: never podwright's (``podwright uninstall`` deletes its
namespace)."""
IMAGE_PULL_POLICIES = ("Always", "IfNotPresent", "Never")

_READ = ["get", "list", "watch"]
_WRITE = ["create", "update", "patch", "delete"]
_MANAGE = ["get", "list", "watch", "create", "delete", "patch"]
"""What the operator does to the resources it launches for a Workload."""
_NAMESPACED_KINDS = ["workloads", "workloadpolicies", "assets"]
_CLUSTER_KINDS = ["clusterworkloadpolicies", "clusterassets", "clusterprofiles"]
_IMAGE = re.compile(r"^[^\s]+$")


class InstallSettingsError(ValueError):
    """A setting no installation can be made with; ``field`` names it (the message says what is
    allowed)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.problem = message


@dataclasses.dataclass(frozen=True)
class InstallSettings:
    """What varies between installations of podwright (the defaults: ``deploy/install.yaml``)."""

    namespace: str = DEFAULT_NAMESPACE
    """The operator's namespace: its ServiceAccount, Role, Deployment, webhook Service, Lease and
    CA Secret live there. podwright's own: ``podwright uninstall`` deletes it, so Kubernetes'
    system namespaces are refused."""
    image: str = DEFAULT_IMAGE
    """The image of the operator (and of the FUSE proxy): podwright's, whose entry point is
    ``podwright``."""
    replicas: int = 2
    """Operator replicas: every one serves the webhooks, the one holding the Lease reconciles."""
    with_fuse_proxy: bool = False
    """Whether the FUSE proxy's DaemonSet (privileged, on every Linux node) is installed too."""
    fuse_proxy_namespace: str = DEFAULT_FUSE_PROXY_NAMESPACE
    """The FUSE proxy's namespace, apart from the operator's: the daemon is privileged, and its
    namespace must allow it where the operator's enforces Pod Security's ``restricted``."""
    image_pull_policy: str = "IfNotPresent"
    """The containers' ``imagePullPolicy``: Always, IfNotPresent or Never."""
    single_webhook: bool = False
    """Workloads judged in the mutating webhook's one call, with no validating webhook of their
    own (the configurations and the operator's ``--single-webhook`` alike:
    ``podwright.core.webhook_configurations``)."""
    console: bool = False
    """Whether the operator serves the web console (``--console``), behind the Service
    :data:`CONSOLE_SERVICE` in plain HTTP inside the cluster: read-only for the holder of the
    token in the Secret :data:`CONSOLE_SECRET` (which the administrator creates), or as the
    person an authenticating proxy names (``console_auth_proxy``)."""
    console_auth_proxy: bool = False
    """Whether the console trusts the identity an authenticating proxy sends with the
    ``proxy-secret`` of :data:`CONSOLE_SECRET`, and acts as that person: the operator may then
    impersonate users and groups."""

    def __post_init__(self) -> None:
        for field in ("namespace", "fuse_proxy_namespace"):
            value = getattr(self, field)
            problem = dns1123_label_problem(value) if isinstance(value, str) else "is no string"
            if problem:
                raise InstallSettingsError(
                    field, f"{value!r} is not a namespace name: it {problem}"
                )
            if value in SYSTEM_NAMESPACES:
                raise InstallSettingsError(
                    field,
                    f"{value!r} is Kubernetes' own namespace; podwright needs one of its own "
                    f"(uninstalling deletes it), such as {DEFAULT_NAMESPACE!r}",
                )
        if self.with_fuse_proxy and self.fuse_proxy_namespace == self.namespace:
            raise InstallSettingsError(
                "fuse_proxy_namespace",
                f"{self.fuse_proxy_namespace!r} is the operator's namespace too; the FUSE proxy "
                "is privileged and needs a namespace of its own",
            )
        if not isinstance(self.image, str) or not _IMAGE.match(self.image):
            raise InstallSettingsError(
                "image",
                f"expected an image reference such as {DEFAULT_IMAGE!r}, got {self.image!r}",
            )
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int):
            raise InstallSettingsError("replicas", f"expected an integer, got {self.replicas!r}")
        if self.replicas < 1:
            raise InstallSettingsError(
                "replicas", f"at least 1 is needed (the webhooks), got {self.replicas}"
            )
        if self.console_auth_proxy and not self.console:
            raise InstallSettingsError(
                "console_auth_proxy", "goes with the console: install it with the console too"
            )
        if self.image_pull_policy not in IMAGE_PULL_POLICIES:
            raise InstallSettingsError(
                "image_pull_policy",
                f"expected one of {', '.join(IMAGE_PULL_POLICIES)}, got {self.image_pull_policy!r}",
            )


@dataclasses.dataclass(frozen=True)
class InstallPart:
    """A group of the installation's objects: ``deploy/base/<name>.yaml`` holds the ones podwright
    makes here; the CRDs and PriorityClasses are in their own files (``deploy/crds/``,
    ``deploy/priority-classes.yaml``)."""

    name: str
    manifests: tuple[Manifest, ...]


def install_parts(settings: InstallSettings) -> list[InstallPart]:
    """The installation's objects by part, in apply order (see the module's docstring)."""
    parts = [
        InstallPart("crds", tuple(_custom_resource_definitions())),
        InstallPart("namespace", (_namespace(settings), _service_account(settings))),
        InstallPart("rbac", tuple(rbac_manifests(settings))),
        InstallPart("priority-classes", tuple(priority_class_manifests(DEFAULT_PROFILE))),
        InstallPart(
            "operator",
            (
                _webhook_service(settings),
                *([_console_service(settings)] if settings.console else []),
                operator_deployment(settings),
            ),
        ),
        InstallPart("webhooks", tuple(operator_webhook_configurations(settings))),
    ]
    if settings.with_fuse_proxy:
        parts.append(InstallPart("fuse-proxy", tuple(fuse_proxy_manifests(settings))))
    return parts


def install_manifests(settings: InstallSettings) -> list[Manifest]:
    """Every object of the installation, in apply order: CRDs first, webhook configurations (and
    the FUSE proxy) last."""
    return [manifest for part in install_parts(settings) for manifest in part.manifests]


def is_custom_resource_definition(manifest: Mapping[str, Any]) -> bool:
    return manifest.get("kind") == "CustomResourceDefinition"


def _custom_resource_definitions() -> list[Manifest]:
    """podwright's CRDs, as manifests (JSON objects whose fields are read here)."""
    return [dict(crd) for crd in custom_resource_definitions()]


# -- the objects --------------------------------------------------------------------------------


def _labels(component: str | None = None) -> dict[str, str]:
    labels = {NAME_LABEL: "podwright"}
    if component is not None:
        labels[COMPONENT_LABEL] = component
    labels[PART_OF_LABEL] = PART_OF
    return labels


def _metadata(name: str, namespace: str | None = None, component: str | None = None) -> Manifest:
    metadata: Manifest = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    metadata["labels"] = _labels(component)
    return metadata


def _namespace(settings: InstallSettings) -> Manifest:
    metadata = _metadata(settings.namespace)
    metadata["labels"][POD_SECURITY_LABEL] = "restricted"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}


def _service_account(settings: InstallSettings) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(OPERATOR, settings.namespace, "operator"),
    }


def _rule(
    groups: Sequence[str],
    resources: Sequence[str],
    verbs: Sequence[str],
    names: Sequence[str] | None = None,
) -> Manifest:
    rule: Manifest = {"apiGroups": list(groups), "resources": list(resources)}
    if names is not None:
        rule["resourceNames"] = list(names)
    rule["verbs"] = list(verbs)
    return rule


def operator_cluster_rules(settings: InstallSettings | None = None) -> list[Manifest]:
    """What the operator may do cluster-wide: read and finalize Workloads and write their status,
    read policies, assets and profiles (and, as it starts, that their CRDs are installed), launch
    and delete the resources of Workloads, record events, and keep its own webhook
    configurations' CA bundle current. Serving the console (``settings.console``), read the
    output of Workloads' pods too, and behind an authenticating proxy impersonate the people it
    names."""
    console = (
        []
        if settings is None or not settings.console
        else [
            _rule([""], ["pods/log"], ["get"]),
            *(
                [_rule([""], ["users", "groups"], ["impersonate"])]
                if settings.console_auth_proxy
                else []
            ),
        ]
    )
    webhooks = ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
    crds = [str(crd["metadata"]["name"]) for crd in _custom_resource_definitions()]
    return [
        _rule([GROUP], ["workloads"], [*_READ, "update", "patch"]),
        _rule([GROUP], ["workloads/status"], ["get", "update", "patch"]),
        _rule([GROUP], ["workloads/finalizers"], ["update"]),
        _rule(
            [GROUP],
            [
                "workloadpolicies",
                "clusterworkloadpolicies",
                "assets",
                "clusterassets",
                "clusterprofiles",
            ],
            _READ,
        ),
        _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], ["get"], crds),
        _rule([""], ["namespaces"], _READ),
        _rule([""], ["pods", "services", "persistentvolumeclaims"], _MANAGE),
        _rule(["events.k8s.io"], ["events"], [*_READ, "create", "patch"]),
        _rule(["batch"], ["jobs"], _MANAGE),
        _rule(
            ["kubeflow.org"],
            ["pytorchjobs", "mpijobs", "tfjobs", "xgboostjobs", "jaxjobs"],
            _MANAGE,
        ),
        _rule(["serving.knative.dev"], ["services"], _MANAGE),
        _rule(
            ["admissionregistration.k8s.io"],
            webhooks,
            [*_READ, "patch", "update"],
            ["podwright"],
        ),
        # A create cannot be restricted by name: the object has none until it exists.
        _rule(["admissionregistration.k8s.io"], webhooks, ["create"]),
        *console,
    ]


def operator_namespace_rules() -> list[Manifest]:
    """What the operator may do in its own namespace: hold its leader-election Lease and keep its
    webhook CA's Secret (each created unrestricted, since a create cannot be restricted by name,
    then read and written by name only)."""
    return [
        _rule(["coordination.k8s.io"], ["leases"], ["create"]),
        _rule(["coordination.k8s.io"], ["leases"], ["get", "update"], [OPERATOR]),
        _rule([""], ["secrets"], ["create"]),
        _rule([""], ["secrets"], ["get", "update"], [CA_SECRET]),
    ]


def people_roles() -> dict[str, tuple[list[Manifest], tuple[str, ...]]]:
    """The ClusterRoles for people, by name: their rules, and the built-in roles (``view``,
    ``edit``, ``admin``) each is aggregated into. A role's rules include the one below it, so
    each may also be bound alone. The cluster-scoped kinds are read by all of them and written by
    none: ClusterWorkloadPolicies, ClusterAssets and ClusterProfiles are cluster administrators'
    to write."""
    cluster_reads = _rule([GROUP], _CLUSTER_KINDS, _READ)
    return {
        VIEWER_ROLE: (
            [_rule([GROUP], _NAMESPACED_KINDS, _READ), cluster_reads],
            ("view", "edit", "admin"),
        ),
        EDITOR_ROLE: (
            [
                _rule([GROUP], ["workloads"], [*_READ, *_WRITE]),
                _rule([GROUP], ["workloadpolicies", "assets"], _READ),
                cluster_reads,
            ],
            ("edit", "admin"),
        ),
        ADMIN_ROLE: (
            [_rule([GROUP], _NAMESPACED_KINDS, [*_READ, *_WRITE]), cluster_reads],
            ("admin",),
        ),
    }


def rbac_manifests(settings: InstallSettings) -> list[Manifest]:
    """The operator's ClusterRole and Role with their bindings to its ServiceAccount, and the
    ClusterRoles for people."""
    subject = {"kind": "ServiceAccount", "name": OPERATOR, "namespace": settings.namespace}
    manifests: list[Manifest] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _metadata(OPERATOR, component="operator"),
            "rules": operator_cluster_rules(settings),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _metadata(OPERATOR, component="operator"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": OPERATOR,
            },
            "subjects": [dict(subject)],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(OPERATOR, settings.namespace, "operator"),
            "rules": operator_namespace_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(OPERATOR, settings.namespace, "operator"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": OPERATOR},
            "subjects": [dict(subject)],
        },
    ]
    for name, (rules, aggregated_into) in people_roles().items():
        metadata = _metadata(name, component="rbac")
        for role in aggregated_into:
            metadata["labels"][f"rbac.authorization.k8s.io/aggregate-to-{role}"] = "true"
        manifests.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": metadata,
                "rules": rules,
            }
        )
    return manifests


def _webhook_service(settings: InstallSettings) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(WEBHOOK_SERVICE, settings.namespace, "operator"),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(OPERATOR_SELECTOR),
            "ports": [{"name": "https", "port": 443, "targetPort": "webhook", "protocol": "TCP"}],
        },
    }


def _console_service(settings: InstallSettings) -> Manifest:
    """The console's Service, in plain HTTP inside the cluster: put TLS in front of it (an
    Ingress), and behind an authenticating proxy point it at the proxy's port instead."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(CONSOLE_SERVICE, settings.namespace, "operator"),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(OPERATOR_SELECTOR),
            "ports": [{"name": "http", "port": 80, "targetPort": "console", "protocol": "TCP"}],
        },
    }


def operator_arguments(settings: InstallSettings) -> list[str]:
    """``podwright operator``'s command line in the pod (the image's entry point is
    ``podwright``), every setting spelt out so a reader of the manifest sees them."""
    return [
        "operator",
        *("--namespace", "$(POD_NAMESPACE)"),
        *("--webhook-service", WEBHOOK_SERVICE),
        *("--ca-secret", CA_SECRET),
        *("--metrics-address", f"0.0.0.0:{METRICS_PORT}"),
        *("--port", str(WEBHOOK_PORT)),
        *(["--single-webhook"] if settings.single_webhook else []),
        *(
            [
                *("--console", "--console-listen", f"0.0.0.0:{CONSOLE_PORT}", "--console-insecure"),
                *("--console-token-file", f"{CONSOLE_TOKEN_DIRECTORY}/token"),
            ]
            if settings.console
            else []
        ),
        *(
            ["--console-auth-proxy", f"{CONSOLE_TOKEN_DIRECTORY}/proxy-secret"]
            if settings.console_auth_proxy
            else []
        ),
    ]


def operator_deployment(settings: InstallSettings) -> Manifest:
    """The operator's Deployment: unprivileged (non-root, read-only root file system, no
    capability, no privilege escalation, the runtime's seccomp profile: Pod Security's
    ``restricted``), its replicas spread over nodes, probed on ``/healthz`` and ``/readyz``."""
    metadata = _metadata(OPERATOR, settings.namespace, "operator")
    metadata["labels"][VERSION_LABEL] = __version__
    pod_labels = {**OPERATOR_SELECTOR, VERSION_LABEL: __version__, PART_OF_LABEL: PART_OF}
    container = {
        "name": "operator",
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "args": operator_arguments(settings),
        "env": [
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [
            {"name": "webhook", "containerPort": WEBHOOK_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            *(
                [{"name": "console", "containerPort": CONSOLE_PORT, "protocol": "TCP"}]
                if settings.console
                else []
            ),
        ],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "metrics"},
            "initialDelaySeconds": 15,
            "periodSeconds": 20,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "metrics"},
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        },
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": OPERATOR_USER,
            "runAsGroup": OPERATOR_USER,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "tmp", "mountPath": "/tmp"},
            *(
                [{"name": "console-token", "mountPath": CONSOLE_TOKEN_DIRECTORY, "readOnly": True}]
                if settings.console
                else []
            ),
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": settings.replicas,
            "selector": {"matchLabels": dict(OPERATOR_SELECTOR)},
            # A new replica is ready before an old one goes: the webhooks keep serving.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "serviceAccountName": OPERATOR,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": OPERATOR_USER,
                        "runAsGroup": OPERATOR_USER,
                        "fsGroup": OPERATOR_USER,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "labelSelector": {"matchLabels": dict(OPERATOR_SELECTOR)},
                                        "topologyKey": "kubernetes.io/hostname",
                                    },
                                }
                            ]
                        }
                    },
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "terminationGracePeriodSeconds": 60,
                    "containers": [container],
                    "volumes": [
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                        *(
                            [
                                {
                                    "name": "console-token",
                                    # The administrator's to create: without it, no token opens
                                    # the console.
                                    "secret": {"secretName": CONSOLE_SECRET, "optional": True},
                                }
                            ]
                            if settings.console
                            else []
                        ),
                    ],
                },
            },
        },
    }


def operator_webhook_configurations(settings: InstallSettings) -> list[Manifest]:
    """podwright's webhook configurations pointing at the operator's Service, without a CA
    bundle: the operator writes its CA's bundle into them (there is no cert-manager to inject
    one), and until then the webhooks refuse everything, closed as ``failurePolicy: Fail``
    asks."""
    endpoint = ServiceEndpoint(settings.namespace, WEBHOOK_SERVICE, 443)
    configurations = webhook_configurations(
        endpoint, bundle_from_server=True, single_webhook=settings.single_webhook
    )
    for configuration in configurations:
        configuration["metadata"]["labels"][PART_OF_LABEL] = PART_OF
    return configurations


def fuse_proxy_manifests(settings: InstallSettings) -> list[Manifest]:
    """The FUSE proxy's Namespace, ServiceAccount and DaemonSet (its daemon root, whatever the
    image's user: ``core.fuse_proxy.manifests``), running the installation's image in a
    namespace of its own."""
    manifests = daemon_manifests(
        DaemonSetOptions(
            image=settings.image,
            namespace=settings.fuse_proxy_namespace,
            image_pull_policy=settings.image_pull_policy,
        )
    )
    for manifest in manifests:
        manifest["metadata"].setdefault("labels", {})[PART_OF_LABEL] = PART_OF
    return manifests
