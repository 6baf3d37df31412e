"""podwright's admission webhook configurations, and the patches that keep their CA bundle current.

The API server calls podwright's webhooks because two objects tell it to: a
MutatingWebhookConfiguration and a ValidatingWebhookConfiguration, both named ``podwright``.
:func:`webhook_configurations` writes them for where the webhooks are served — a URL
(``podwright webhook`` out of the cluster, as ``kopf run`` does) or a Service (the operator in
the cluster) — and for who vouches for the server's certificate: a CA bundle podwright gives
(``clientConfig.caBundle``), or cert-manager, whose CA injector fills the bundle from the
Certificate named in the ``cert-manager.io/inject-ca-from`` annotation.

The webhooks, each ``failurePolicy: Fail`` (a workload or policy the webhook did not see must not
get in), ``sideEffects: None``, ``timeoutSeconds: 5``, AdmissionReview v1 and ``matchPolicy:
Equivalent``, for CREATE and UPDATE of ``podwright.dev`` resources only (never their status):

* mutating ``workloads.podwright.dev`` at ``/mutate/workloads``: Workloads get their defaults
  (``reinvocationPolicy: Never``: nothing else of podwright's mutates them afterwards);
* validating ``workloads.podwright.dev`` at ``/validate/workloads``: Workloads are checked
  against their policies, as the API server has them after every mutating webhook;
* validating ``policies.podwright.dev`` at ``/validate/policies``: WorkloadPolicies and
  ClusterWorkloadPolicies are checked.

With ``single_webhook`` the mutating webhook judges Workloads too, at ``/admit/workloads``, and
the validating ``workloads.podwright.dev`` is left out: the API server calls podwright once per
Workload write instead of twice. What is given up: the validating webhook sees the object after
*every* mutating webhook; in one call, podwright sees it as it leaves podwright's own. So the
mutating webhook is ``reinvocationPolicy: IfNeeded``: the API server calls it again when a later
mutating webhook changed the object, and podwright judges that change too; but the API docs of
``MutatingWebhook.reinvocationPolicy`` (``k8s.io/api/admissionregistration/v1/types.go``) say
that a webhook reinvoked is not guaranteed to be called yet again after further changes, and
that "to validate an object after all mutations are guaranteed complete, use a validating
admission webhook instead". A cluster with another mutating webhook that changes Workloads'
``spec`` keeps the two webhooks (the default).

:func:`ca_bundle_patches` gives the JSON patches that put a new CA bundle into every podwright
webhook of the configurations read from the cluster (what the certificate keeper needs after a
CA rotation). Pure: no I/O; the adapter that applies them is
``podwright.adapters.kubernetes.webhook_configurations``.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from podwright.core.cluster_resources import GROUP, VERSION
from podwright.core.k8s_names import dns1123_label_problem, dns1123_subdomain_problem

ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"
MUTATING_KIND = "MutatingWebhookConfiguration"
VALIDATING_KIND = "ValidatingWebhookConfiguration"
CONFIGURATION_NAME = "podwright"
"""The name of both configurations."""

WORKLOADS_WEBHOOK = f"workloads.{GROUP}"
POLICIES_WEBHOOK = f"policies.{GROUP}"
PODWRIGHT_WEBHOOKS = frozenset({WORKLOADS_WEBHOOK, POLICIES_WEBHOOK})

MUTATE_WORKLOADS = "/mutate/workloads"
VALIDATE_WORKLOADS = "/validate/workloads"
ADMIT_WORKLOADS = "/admit/workloads"
"""Mutating and validating in one decision: the mutating webhook's path with ``single_webhook``."""
VALIDATE_POLICIES = "/validate/policies"

TIMEOUT_SECONDS = 5
INJECT_CA_ANNOTATION = "cert-manager.io/inject-ca-from"
NAME_LABEL = "app.kubernetes.io/name"

_PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"


class WebhookConfigurationError(ValueError):
    """Arguments no webhook configuration can be written from (names the argument and what is
    allowed)."""


@dataclasses.dataclass(frozen=True)
class UrlEndpoint:
    """Webhooks served at ``base_url`` (``https://HOST:PORT``, maybe with a path prefix): each
    webhook's path is appended. The API server accepts only https, and no user, query or
    fragment (``ValidateWebhookURL`` in k8s.io/apiserver's ``util/webhook/validation.go``)."""

    base_url: str

    def __post_init__(self) -> None:
        problem = _url_problem(self.base_url)
        if problem:
            raise WebhookConfigurationError(
                f"base_url: {self.base_url!r} is not a webhook URL: {problem} "
                "(https://HOST:PORT[/PREFIX])"
            )

    def client_config(self, path: str) -> dict[str, Any]:
        return {"url": self.base_url.rstrip("/") + path}


def _url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme != "https":
        return "the scheme must be https"
    if not parts.hostname:
        return "a host is needed"
    if parts.username is not None:
        return "a user is not allowed"
    if "?" in url or "#" in url:
        return "a query or fragment is not allowed"
    return None


@dataclasses.dataclass(frozen=True)
class ServiceEndpoint:
    """Webhooks served behind the Service ``namespace/name`` on ``port``, each at its path after
    ``path_prefix``."""

    namespace: str
    name: str
    port: int = 443
    path_prefix: str = ""

    def __post_init__(self) -> None:
        for argument in ("namespace", "name"):
            problem = dns1123_label_problem(getattr(self, argument))
            if problem:
                raise WebhookConfigurationError(
                    f"{argument}: {getattr(self, argument)!r} is not a Service's {argument}: "
                    f"it {problem}"
                )
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise WebhookConfigurationError(f"port: must be an integer, got {self.port!r}")
        if not 1 <= self.port <= 65535:
            raise WebhookConfigurationError(f"port: must be within 1..65535, got {self.port}")
        if self.path_prefix and (not self.path_prefix.startswith("/") or "?" in self.path_prefix):
            raise WebhookConfigurationError(
                f"path_prefix: {self.path_prefix!r} must start with '/' and have no query"
            )

    def client_config(self, path: str) -> dict[str, Any]:
        return {
            "service": {
                "namespace": self.namespace,
                "name": self.name,
                "port": self.port,
                "path": self.path_prefix.rstrip("/") + path,
            }
        }


Endpoint = UrlEndpoint | ServiceEndpoint


def webhook_configurations(
    endpoint: Endpoint,
    *,
    ca_bundle: bytes | None = None,
    inject_ca_from: str | None = None,
    bundle_from_server: bool = False,
    single_webhook: bool = False,
) -> list[dict[str, Any]]:
    """The MutatingWebhookConfiguration and the ValidatingWebhookConfiguration of podwright's
    webhooks at ``endpoint``, trusting ``ca_bundle`` (PEM), the CA cert-manager injects from
    its Certificate ``inject_ca_from`` (``NAMESPACE/NAME``), or (``bundle_from_server``) the
    bundle the server will write in itself (the operator, whose CA lives in a Secret; until it
    has, the API server trusts nothing there and the webhooks refuse, closed): exactly one.

    ``single_webhook``: Workloads are judged in the mutating webhook's call (at
    :data:`ADMIT_WORKLOADS`, ``reinvocationPolicy: IfNeeded``), with no validating webhook of
    their own: one call per create instead of two (see the module's docstring)."""
    given = [ca_bundle is not None, inject_ca_from is not None, bundle_from_server]
    if sum(given) != 1:
        raise WebhookConfigurationError(
            "ca_bundle, inject_ca_from, bundle_from_server: exactly one is needed: the CA bundle "
            "(PEM) that vouches for the server's certificate, cert-manager's Certificate "
            "(NAMESPACE/NAME) whose CA its injector puts into the configurations, or the server "
            "writing its own bundle in"
        )
    metadata: dict[str, Any] = {
        "name": CONFIGURATION_NAME,
        "labels": {NAME_LABEL: CONFIGURATION_NAME},
    }
    trust: dict[str, Any] = {}
    if inject_ca_from is not None:
        metadata["annotations"] = {INJECT_CA_ANNOTATION: _certificate_reference(inject_ca_from)}
    elif ca_bundle is not None:
        trust["caBundle"] = encoded_ca_bundle(ca_bundle)

    def webhook(name: str, path: str, resources: list[str], scope: str) -> dict[str, Any]:
        return {
            "name": name,
            "clientConfig": {**endpoint.client_config(path), **trust},
            "rules": [
                {
                    "apiGroups": [GROUP],
                    "apiVersions": [VERSION],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": resources,
                    "scope": scope,
                }
            ],
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "timeoutSeconds": TIMEOUT_SECONDS,
            "admissionReviewVersions": ["v1"],
        }

    workloads = (["workloads"], "Namespaced")
    mutating = {
        **webhook(
            WORKLOADS_WEBHOOK, ADMIT_WORKLOADS if single_webhook else MUTATE_WORKLOADS, *workloads
        ),
        "reinvocationPolicy": "IfNeeded" if single_webhook else "Never",
    }
    policies = (["workloadpolicies", "clusterworkloadpolicies"], "*")
    validating = [webhook(POLICIES_WEBHOOK, VALIDATE_POLICIES, *policies)]
    if not single_webhook:
        validating.insert(0, webhook(WORKLOADS_WEBHOOK, VALIDATE_WORKLOADS, *workloads))
    return [
        _configuration(MUTATING_KIND, metadata, [mutating]),
        _configuration(VALIDATING_KIND, metadata, validating),
    ]


def _configuration(
    kind: str, metadata: Mapping[str, Any], webhooks: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": kind,
        "metadata": copy.deepcopy(dict(metadata)),
        "webhooks": webhooks,
    }


def _certificate_reference(reference: str) -> str:
    namespace, slash, name = reference.partition("/")
    if not slash:
        problem = "it must be NAMESPACE/NAME"
    elif namespace_problem := dns1123_label_problem(namespace):
        problem = f"its namespace {namespace_problem}"
    elif name_problem := dns1123_subdomain_problem(name):
        problem = f"its name {name_problem}"
    else:
        return reference
    raise WebhookConfigurationError(
        f"inject_ca_from: {reference!r} does not name a cert-manager Certificate: {problem}"
    )


def encoded_ca_bundle(ca_bundle: bytes) -> str:
    """A CA bundle (PEM) as ``clientConfig.caBundle`` carries it: base64."""
    if not isinstance(ca_bundle, bytes) or _PEM_CERTIFICATE not in ca_bundle:
        raise WebhookConfigurationError(
            "ca_bundle: expected PEM certificates (bytes with '-----BEGIN CERTIFICATE-----'), "
            f"got {ca_bundle[:40]!r}"
        )
    return base64.b64encode(ca_bundle).decode("ascii")


@dataclasses.dataclass(frozen=True)
class ConfigurationPatch:
    """A JSON patch (RFC 6902) of one webhook configuration."""

    kind: str
    name: str
    operations: tuple[Mapping[str, Any], ...]


def ca_bundle_patches(
    configurations: Iterable[Mapping[str, Any]], ca_bundle: bytes
) -> list[ConfigurationPatch]:
    """The patches that set ``ca_bundle`` (PEM) into every podwright webhook of
    ``configurations`` (as read from the cluster) whose bundle differs. Each webhook is
    addressed by its index, after a ``test`` of its name, so a patch of a configuration that
    changed since it was read fails instead of writing into another webhook. A configuration
    cert-manager injects into (``cert-manager.io/inject-ca-from``) is cert-manager's to keep, and
    left alone."""
    encoded = encoded_ca_bundle(ca_bundle)
    patches = []
    for index, configuration in enumerate(configurations):
        kind, metadata = configuration.get("kind"), configuration.get("metadata")
        if kind not in (MUTATING_KIND, VALIDATING_KIND):
            raise WebhookConfigurationError(
                f"configurations[{index}].kind: expected {MUTATING_KIND} or {VALIDATING_KIND}, "
                f"got {kind!r}"
            )
        if not isinstance(metadata, Mapping) or not metadata.get("name"):
            raise WebhookConfigurationError(f"configurations[{index}].metadata.name: missing")
        if INJECT_CA_ANNOTATION in (metadata.get("annotations") or {}):
            continue
        operations: list[Mapping[str, Any]] = []
        for position, hook in enumerate(configuration.get("webhooks") or []):
            name = hook.get("name")
            if name not in PODWRIGHT_WEBHOOKS:
                continue
            if (hook.get("clientConfig") or {}).get("caBundle") == encoded:
                continue
            operations.append({"op": "test", "path": f"/webhooks/{position}/name", "value": name})
            operations.append(
                {
                    "op": "add",
                    "path": f"/webhooks/{position}/clientConfig/caBundle",
                    "value": encoded,
                }
            )
        if operations:
            patches.append(ConfigurationPatch(kind, str(metadata["name"]), tuple(operations)))
    return patches
