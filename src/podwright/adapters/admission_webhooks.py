"""podwright's admission webhooks, running: put together once for every process that serves them.

Serving the webhooks takes five pieces, started in an order that never leaves the API server
calling a webhook nobody answers: the cluster's policies, namespaces, assets and the operator's
cluster profile in watch caches
(:class:`~podwright.adapters.kubernetes.policy_state.ClusterPolicyState`), the decisions over
them (:class:`~podwright.engine.admission_service.AdmissionService`), a certificate (podwright's
own CA, renewed and rotated by a :class:`~podwright.adapters.certificates.CertificateKeeper`,
the CA kept in this process or, for replicas behind one Service, in a Secret they share
(``ca_secret``: :mod:`podwright.adapters.kubernetes.ca_secret`); or cert-manager's files), the
HTTPS server, and last the two webhook configurations that point the API server at it, applied
server-side. Beside them, the compliance status writer keeps each Workload's ``PolicyCompliant``
condition current as policies change. ``podwright webhook`` runs them out of the cluster (the
configurations name ``https://HOST:PORT``, as ``kopf run`` does); the operator runs the same in
the cluster behind a Service.

Stopping leaves the configurations in place on purpose: their ``failurePolicy: Fail`` keeps
Workloads and policies out while nothing checks them (policies can still be read, and the
configurations deleted with ``kubectl delete``).

Exceptions::

    AdmissionWebhooksError
    ├── NotInstalledError     podwright's CRDs are not in the cluster
    └── WebhooksStartError    the caches did not fill, or the certificate or address is unusable
    (and the Kubernetes adapter's KubernetesError for the API server's own failures)
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from podwright.adapters.certificates import (
    CertificateDirectory,
    CertificateError,
    CertificateKeeper,
    CertificateSettings,
    Clock,
)
from podwright.adapters.kubernetes.ca_secret import CaSecret
from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.adapters.kubernetes.compliance_status import ComplianceStatusWriter
from podwright.adapters.kubernetes.policy_state import ClusterPolicyState
from podwright.adapters.kubernetes.webhook_configurations import publish_ca_bundle
from podwright.adapters.webhook_server import (
    ServerSettings,
    WebhookServer,
    WebhookServerError,
    WouldBlock,
)
from podwright.core.admission import BadReviewError
from podwright.core.cluster_resources import GROUP, ClusterScopes
from podwright.core.k8s_names import dns1123_label_problem, dns1123_subdomain_problem
from podwright.core.render import DEFAULT_PROFILE
from podwright.core.webhook_configurations import (
    ServiceEndpoint,
    UrlEndpoint,
    webhook_configurations,
)
from podwright.engine.admission_service import AdmissionService, Handler
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef

LOG = logging.getLogger("podwright.webhook")

FIELD_MANAGER = "podwright-webhook"
"""The field manager of the webhook configurations this process applies."""

_CRD_API_VERSION = "apiextensions.k8s.io/v1"
_REQUIRED_CRDS = (
    f"workloads.{GROUP}",
    f"workloadpolicies.{GROUP}",
    f"clusterworkloadpolicies.{GROUP}",
    f"assets.{GROUP}",
    f"clusterassets.{GROUP}",
    f"clusterprofiles.{GROUP}",
)


class AdmissionWebhooksError(Exception):
    """The webhooks cannot be served."""


class NotInstalledError(AdmissionWebhooksError):
    """podwright's CustomResourceDefinitions are missing from the cluster."""


class WebhooksStartError(AdmissionWebhooksError):
    """The webhooks could not start: caches not filled in time, an unusable certificate or
    address."""


@dataclasses.dataclass(frozen=True)
class SecretRef:
    """A Secret, by its namespace and name (``NAMESPACE/NAME`` as :meth:`parse` reads it)."""

    namespace: str
    name: str

    def __post_init__(self) -> None:
        problem = dns1123_label_problem(self.namespace)
        if problem:
            raise ValueError(f"namespace: {self.namespace!r} is not a namespace name: it {problem}")
        problem = dns1123_subdomain_problem(self.name)
        if problem:
            raise ValueError(f"name: {self.name!r} is not a Secret name: it {problem}")

    @classmethod
    def parse(cls, text: str) -> SecretRef:
        """``NAMESPACE/NAME``."""
        namespace, slash, name = text.partition("/")
        if not slash or not namespace or not name or "/" in name:
            raise ValueError(f"{text!r} is not NAMESPACE/NAME")
        return cls(namespace, name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True)
class WebhookSettings:
    """Where the webhooks are served, and how the API server reaches and trusts them.

    Exactly one of ``webhook_host`` (the configurations name ``https://webhook_host:PORT``) and
    ``service`` (they name the Service, in the cluster); at most one of
    ``certificate_directory`` and ``ca_secret`` (neither: a CA of this process's own)."""

    cluster_name: str
    webhook_host: str | None = None
    profile_name: str = DEFAULT_PROFILE.name
    """The ClusterProfile the operator renders Workloads with (absent: the safe defaults): a
    Workload that cannot be rendered on it is refused."""
    service: ServiceEndpoint | None = None
    listen_host: str = "0.0.0.0"
    port: int = 9443
    certificate_directory: Path | None = None
    """cert-manager's files (``tls.crt``, ``tls.key``, ``ca.crt``) instead of podwright's CA."""
    ca_secret: SecretRef | None = None
    """The Secret that keeps podwright's CA for every process serving the webhooks (created
    when absent; the operator's replicas): each issues its own certificate from it. Needs
    ``get``, ``create`` and ``update`` of Secrets in its namespace."""
    certificates: CertificateSettings = dataclasses.field(default_factory=CertificateSettings)
    certificate_check_seconds: float = 60.0
    sync_timeout_seconds: float = 30.0
    server: ServerSettings = dataclasses.field(default_factory=ServerSettings)
    single_webhook: bool = False
    """Workloads judged in the mutating webhook's one call, with no validating webhook of their
    own (``podwright.core.webhook_configurations``: half the calls per Workload write; another
    mutating webhook that changes Workloads after podwright's is checked only as far as
    ``reinvocationPolicy: IfNeeded`` goes)."""

    def __post_init__(self) -> None:
        if (self.webhook_host is None) == (self.service is None):
            raise ValueError(
                "webhook_host, service: exactly one: the address the API server reaches this "
                "process at, or the Service in front of it"
            )
        if self.certificate_directory is not None and self.ca_secret is not None:
            raise ValueError(
                "certificate_directory, ca_secret: at most one: cert-manager's files, or the "
                "Secret that keeps podwright's CA"
            )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port: must be within 0..65535 (0: any free port), got {self.port}")

    @property
    def certificate_hosts(self) -> list[str]:
        """The names the serving certificate is for."""
        if self.service is not None:
            name, namespace = self.service.name, self.service.namespace
            return [f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]
        assert self.webhook_host is not None
        return [self.webhook_host]


def address_towards(server_url: str) -> str:
    """This machine's address on the route to the API server at ``server_url``: where a
    webhook run here is reached from it when nothing else is said (no packet is sent)."""
    parts = urlsplit(server_url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or 443
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        address = socket.getaddrinfo(host, port, family, socket.SOCK_DGRAM)[0][4]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(address)
            return str(probe.getsockname()[0])
    except OSError as error:
        raise WebhooksStartError(
            f"cannot find this machine's address towards the API server {server_url}: {error}; "
            "give the address the API server reaches this process at (--webhook-host)"
        ) from error


def timed_routes(
    routes: Mapping[str, Handler],
    answered: Callable[[str, float], None],
    clock: Callable[[], float],
) -> dict[str, Handler]:
    """``routes`` telling ``answered(path, seconds)`` how long each review took, answered or
    failed; not an attempt that raised :class:`~podwright.adapters.webhook_server.WouldBlock`,
    which the server runs again, and which is timed then."""

    def timed(path: str, handle: Handler) -> Handler:
        def handler(review: Mapping[str, object]) -> dict[str, object]:
            started: float | None = clock()
            try:
                return handle(review)
            except WouldBlock:
                started = None
                raise
            finally:
                if started is not None:
                    answered(path, clock() - started)

        return handler

    return {path: timed(path, handle) for path, handle in routes.items()}


class AdmissionWebhooks:
    """The webhooks of one process: :meth:`start` serves them and points the cluster at them,
    :meth:`stop` stops serving (a ``with`` block does both)."""

    def __init__(
        self,
        client: KubernetesClient,
        settings: WebhookSettings,
        *,
        clock: Clock,
        answered: Callable[[str, float], None] | None = None,
    ) -> None:
        """``answered(path, seconds)`` is told how long each review took (the metrics)."""
        self._client = client
        self._settings = settings
        self._clock = clock
        self._answered = answered
        scopes = ClusterScopes(settings.cluster_name)
        self._state = ClusterPolicyState(client, scopes, settings.profile_name)
        self.service = AdmissionService(self._state, scopes)
        self._compliance = ComplianceStatusWriter(client, self._state, self.service, clock=clock)
        self._compliance_started = False
        self._tls: CertificateKeeper | CertificateDirectory | None = None
        self._server: WebhookServer | None = None

    @property
    def url(self) -> str:
        """``https://HOST:PORT`` of the server (the address listened on)."""
        if self._server is None:
            raise AdmissionWebhooksError("the webhooks are not started")
        return self._server.url()

    @property
    def base_url(self) -> str | None:
        """The URL the webhook configurations name (None: they name a Service)."""
        if self._server is None or self._settings.webhook_host is None:
            return None
        host = self._settings.webhook_host
        return f"https://{f'[{host}]' if ':' in host else host}:{self._server.address[1]}"

    @property
    def ca_bundle(self) -> bytes:
        """The CA bundle the configurations carry now."""
        bundle = self._tls.ca_bundle if self._tls is not None else None
        if bundle is None:
            raise AdmissionWebhooksError("the webhooks have no CA bundle (not started)")
        return bundle

    def start(self) -> AdmissionWebhooks:
        try:
            self._check_installed()
            if not self._state.start(self._settings.sync_timeout_seconds):
                raise WebhooksStartError(
                    "the policies, namespaces and assets were not listed within "
                    f"{self._settings.sync_timeout_seconds:g} s"
                )
            self._tls = self._start_tls()
            self._server = WebhookServer(
                self._timed(self.service.routes()),
                self._tls,
                host=self._settings.listen_host,
                port=self._settings.port,
                settings=self._settings.server,
                bad_review_errors=(BadReviewError,),
                answer_inline=True,  # from the watch caches (ClusterPolicyState)
            ).start()
            self._install_configurations()
            self._compliance_started = True
            if not self._compliance.start(self._settings.sync_timeout_seconds):
                LOG.warning(
                    "the Workloads were not listed within %g s: their compliance status "
                    "follows once they are",
                    self._settings.sync_timeout_seconds,
                )
        except (CertificateError, WebhookServerError) as error:
            self.stop()
            raise WebhooksStartError(str(error)) from error
        except BaseException:
            self.stop()
            raise
        return self

    def _timed(self, routes: Mapping[str, Handler]) -> dict[str, Handler]:
        if self._answered is None:
            return dict(routes)
        return timed_routes(routes, self._answered, time.monotonic)

    def stop(self) -> None:
        if self._compliance_started:
            self._compliance.stop()
        if self._server is not None:
            self._server.stop()
        if self._tls is not None:
            self._tls.stop()
        self._state.stop()

    def __enter__(self) -> AdmissionWebhooks:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _check_installed(self) -> None:
        missing = []
        for name in _REQUIRED_CRDS:
            try:
                self._client.get(ObjectRef(_CRD_API_VERSION, "CustomResourceDefinition", "", name))
            except NotFoundError:
                missing.append(name)
        if missing:
            raise NotInstalledError(
                f"the cluster {self._client.server} lacks podwright's CustomResourceDefinitions "
                f"{', '.join(missing)}: install them first with "
                "'kubectl apply --server-side -f deploy/crds/' (or 'podwright crds | kubectl "
                "apply --server-side -f -')"
            )

    def _start_tls(self) -> CertificateKeeper | CertificateDirectory:
        directory = self._settings.certificate_directory
        if directory is not None:
            files = CertificateDirectory(directory, clock=self._clock)
            if files.ca_bundle is None:
                raise WebhooksStartError(
                    f"--cert-dir {directory}: it has no {CertificateDirectory.CA_FILE}: the "
                    "webhook configurations need the CA that issued its "
                    f"{CertificateDirectory.CERTIFICATE_FILE}"
                )
            return files.start()
        return CertificateKeeper(
            self._settings.certificate_hosts,
            clock=self._clock,
            publish_bundle=lambda bundle: LOG.info(
                "CA bundle published into %d webhook configuration patch(es)",
                len(publish_ca_bundle(self._client, bundle)),
            ),
            settings=self._settings.certificates,
            authority_store=self._authority_store(),
            check_interval_seconds=self._settings.certificate_check_seconds,
        ).start()

    def _authority_store(self) -> CaSecret | None:
        secret = self._settings.ca_secret
        return None if secret is None else CaSecret(self._client, secret.namespace, secret.name)

    def _install_configurations(self) -> None:
        endpoint: UrlEndpoint | ServiceEndpoint
        if self._settings.service is not None:
            endpoint = self._settings.service
        else:
            assert self.base_url is not None
            endpoint = UrlEndpoint(self.base_url)
        for configuration in webhook_configurations(
            endpoint, ca_bundle=self.ca_bundle, single_webhook=self._settings.single_webhook
        ):
            self._client.apply(configuration, field_manager=FIELD_MANAGER)
        LOG.info(
            "webhook configurations 'podwright' point the API server %s at %s",
            self._client.server,
            self.base_url or f"the Service {endpoint}",
        )
