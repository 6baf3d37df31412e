"""``podwright operator``: the lifecycle engine in the cluster, driven by Workload resources.

In a pod (the Deployment of ``deploy/``) it reads its service account, names itself after its
pod (``$POD_NAME``) and keeps its Lease in its pod's namespace (``$POD_NAMESPACE``); it serves
the admission webhooks behind the Service ``--webhook-service``, with certificates from the CA
in the Secret ``--ca-secret`` (or cert-manager's, ``--cert-dir``). Out of the cluster, for
development and tests, ``podwright operator --kubeconfig K --webhook-host ADDR`` runs the same
operator against any cluster, as ``kopf run`` does. Stops on SIGTERM or Ctrl-C: the round in
progress finishes, the lease is released, the webhooks' configurations stay.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import threading
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from podwright.adapters.admission_webhooks import (
    NotInstalledError,
    SecretRef,
    WebhookSettings,
    WebhooksStartError,
    address_towards,
)
from podwright.adapters.kubernetes import KubernetesClient, KubernetesConfigError, connect
from podwright.adapters.kubernetes.cluster_port import connection_pool_size
from podwright.adapters.kubernetes.rate_limit import TokenBucket
from podwright.adapters.observability import OperatorMetrics
from podwright.adapters.operator_runtime import (
    OperatorRuntime,
    OperatorSettings,
    OperatorStartError,
)
from podwright.api.backends import ClusterAccess
from podwright.api.backends import cluster_name as default_cluster_name
from podwright.api.errors import PodwrightError
from podwright.api.executors import load_lifecycle_config
from podwright.api.state import utc_now
from podwright.cli.common import BadInput, Unavailable, Unreachable, cluster_access_options
from podwright.cli.executor_command import (
    DURATION,
    lifecycle_option,
    loop_options,
    status_server,
)
from podwright.cli.signals import stopping_on_signals
from podwright.cli.webhook_command import listen_address, serving_options
from podwright.core.k8s_names import dns1123_label_problem
from podwright.core.leader_election import ElectionSettings, ElectionSettingsError
from podwright.core.webhook_configurations import ServiceEndpoint
from podwright.engine.config import LifecycleConfig
from podwright.engine.kubernetes_port import ApiConnectionError, KubernetesError
from podwright.engine.plugins import default_plugins

if TYPE_CHECKING:
    from podwright.console.server import ConsoleThread

logger = logging.getLogger("podwright.operator")

DEFAULT_NAMESPACE = "podwright-system"
CONSOLE_LISTEN = "127.0.0.1:8090"
"""The console's address in the operator's pod: loopback (its metrics have port 8080)."""


class _JsonLogs(logging.Formatter):
    """One JSON object a line: what log collectors in a cluster parse."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _configure_logs(log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(_JsonLogs())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


def _label(value: str, option: str) -> str:
    problem = dns1123_label_problem(value)
    if problem:
        raise BadInput(f"{option} {value!r}: {problem}")
    return value


@click.command("operator")
@cluster_access_options
@click.option(
    "--namespace",
    default=None,
    help=f"Where the operator's Lease (and CA Secret) live (default: $POD_NAMESPACE, else "
    f"{DEFAULT_NAMESPACE}).",
)
@click.option(
    "--identity",
    default=None,
    help="This replica's name in the Lease (default: $POD_NAME, else HOSTNAME-PID).",
)
@click.option("--lease-name", default="podwright-operator", show_default=True, help="The Lease.")
@click.option(
    "--lease-duration",
    type=DURATION,
    default="15s",
    show_default=True,
    help="How long a candidate waits after the holder's last renewal before taking over.",
)
@click.option(
    "--renew-deadline",
    type=DURATION,
    default="10s",
    show_default=True,
    help="How long the leader acts after its last renewal (less than --lease-duration).",
)
@click.option(
    "--retry-period",
    type=DURATION,
    default="2s",
    show_default=True,
    help="How often the lease is renewed, or tried (less than --renew-deadline).",
)
@click.option(
    "--watch-namespace",
    default=None,
    help="Run the Workloads of this namespace only (default: every namespace).",
)
@serving_options
@click.option(
    "--webhook-service",
    metavar="NAME",
    default=None,
    help="In the cluster: the Service in front of the replicas' webhooks (default in a pod: "
    "podwright-webhook).",
)
@click.option(
    "--no-webhooks",
    is_flag=True,
    help="Serve no admission webhooks (another process does).",
)
@click.option(
    "--ca-secret",
    metavar="[NAMESPACE/]NAME",
    default=None,
    help="Keep podwright's webhook CA in this Secret (of --namespace unless named), shared by "
    "every replica (default behind --webhook-service: podwright-webhook-ca; else a CA of this "
    "process's own).",
)
@click.option(
    "--profile",
    "profile_name",
    default="default",
    show_default=True,
    help="The ClusterProfile Workloads are rendered with (absent: the safe defaults).",
)
@loop_options
@click.option(
    "--kube-api-qps",
    type=click.FloatRange(min=0, min_open=True),
    default=500.0,
    show_default=True,
    help="Requests a second the operator sends the API server at most, as client-go's "
    "--kube-api-qps: what a burst of new Workloads is bounded by.",
)
@click.option(
    "--kube-api-burst",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Requests the operator may send at once after an idle while (--kube-api-burst).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default=None,
    help="text, or one JSON object a line (default: json in a pod, text elsewhere).",
)
@click.option(
    "--console",
    "console",
    is_flag=True,
    help="Also serve the web console, on --console-listen: read-only for the holder of its "
    "token (--console-token-file), or as the person an authenticating proxy names "
    "(--console-auth-proxy).",
)
@click.option(
    "--console-listen",
    default=CONSOLE_LISTEN,
    show_default=True,
    metavar="HOST:PORT",
    help="Where the console listens (loopback: reached with 'kubectl port-forward'; beyond it "
    "with --console-insecure, behind a Service).",
)
@click.option(
    "--console-insecure",
    is_flag=True,
    help="Serve the console in plain HTTP beyond loopback (inside the cluster, behind a "
    "Service; put TLS in front of it, at an Ingress).",
)
@click.option(
    "--console-token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The file holding the console's token (a Secret's key, mounted; read again when it "
    "changes): its holder reads every Workload the operator reads and changes nothing (while "
    "the file is missing, no token opens it).",
)
@click.option(
    "--console-auth-proxy",
    "console_proxy_secret_file",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="SECRET_FILE",
    help="Trust the X-Forwarded-User and X-Forwarded-Groups of an authenticating proxy "
    "(oauth2-proxy) that sends the secret of this file in X-Podwright-Proxy-Secret: the "
    "console acts as that person through impersonation, so their RBAC decides what they see "
    "and may do.",
)
@lifecycle_option
def operator_command(
    *,
    kubeconfig: str | None,
    context: str | None,
    cluster_name: str | None,
    namespace: str | None,
    identity: str | None,
    lease_name: str,
    lease_duration: timedelta,
    renew_deadline: timedelta,
    retry_period: timedelta,
    watch_namespace: str | None,
    webhook_host: str | None,
    webhook_service: str | None,
    no_webhooks: bool,
    listen_host: str | None,
    port: int,
    cert_dir: Path | None,
    ca_secret: str | None,
    single_webhook: bool,
    profile_name: str,
    concurrency: int,
    round_interval: timedelta,
    kube_api_qps: float,
    kube_api_burst: int,
    metrics_address: tuple[str, int] | None,
    log_format: str | None,
    lifecycle_config: str | None,
    console: bool,
    console_listen: str,
    console_insecure: bool,
    console_token_file: str | None,
    console_proxy_secret_file: str | None,
) -> None:
    """Run the lifecycle engine in the cluster: every Workload to its end, one leader at a time.

    Replicas elect a leader through a Lease; only the leader launches, follows, aborts and
    finalizes Workloads, each from its status, and another takes over when it goes. Every replica
    serves the admission webhooks and /metrics, /healthz, /readyz. Stops on SIGTERM or Ctrl-C.
    """
    in_pod = "KUBERNETES_SERVICE_HOST" in os.environ and kubeconfig is None
    _configure_logs(log_format or ("json" if in_pod else "text"))
    namespace = _label(
        namespace or os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE, "--namespace"
    )
    identity = identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    if cert_dir is not None and ca_secret is not None:
        raise BadInput("--cert-dir, --ca-secret: give one of them, not both")
    if webhook_host is not None and webhook_service is not None:
        raise BadInput("--webhook-host, --webhook-service: give one of them, not both")
    election = _election(lease_duration, renew_deadline, retry_period)
    lease_name = _label(lease_name, "--lease-name")
    if watch_namespace is not None:
        watch_namespace = _label(watch_namespace, "--watch-namespace")
    lifecycle = load_lifecycle_config(lifecycle_config)
    access = ClusterAccess(kubeconfig, context)
    console_thread = (
        _console(
            kubeconfig,
            context,
            watch_namespace,
            listen=console_listen,
            insecure=console_insecure,
            token_file=console_token_file,
            proxy_secret_file=console_proxy_secret_file,
        )
        if console
        else None
    )
    try:
        api = connect(
            kubeconfig,
            context,
            pool_size=connection_pool_size(concurrency, default_plugins()) + 16,
        )
    except KubernetesConfigError as error:
        raise BadInput(str(error)) from error
    metrics = OperatorMetrics()
    client = KubernetesClient(
        api,
        observer=metrics.api_request,
        rate_limit=TokenBucket(kube_api_qps, kube_api_burst),
    )
    try:
        webhooks = None
        if not no_webhooks:
            if webhook_service is None and webhook_host is None and in_pod:
                webhook_service = "podwright-webhook"
            if ca_secret is None and cert_dir is None and webhook_service is not None:
                ca_secret = "podwright-webhook-ca"
            webhooks = _webhook_settings(
                client,
                cluster_name=cluster_name or default_cluster_name(access),
                namespace=namespace,
                webhook_host=webhook_host,
                webhook_service=webhook_service,
                listen_host=listen_host,
                port=port,
                cert_dir=cert_dir,
                ca_secret=ca_secret,
                single_webhook=single_webhook,
            )
        settings = OperatorSettings(
            namespace=namespace,
            identity=identity,
            lease_name=lease_name,
            election=election,
            watch_namespace=watch_namespace,
            profile_name=profile_name,
            concurrency=concurrency,
            round_interval=round_interval,
            webhooks=webhooks,
        )
        if console_thread is not None:
            console_thread.start()
            logger.info("console on %s", console_thread.url)
        _serve(
            client,
            settings,
            lifecycle=lifecycle,
            metrics=metrics,
            metrics_address=metrics_address,
            round_interval=round_interval,
        )
    finally:
        if console_thread is not None:
            console_thread.stop()
        client.close()


def _console(
    kubeconfig: str | None,
    context: str | None,
    watch_namespace: str | None,
    *,
    listen: str,
    insecure: bool,
    token_file: str | None,
    proxy_secret_file: str | None,
) -> ConsoleThread:
    """The console the operator serves beside its work (``--console``): the Workloads it
    runs, read with its own credentials; read-only for its token's holder, or as the person
    its trusted proxy names."""
    from podwright.console.app import ConsoleSettings  # noqa: PLC0415 (only with --console)
    from podwright.console.gate import Access, SecretFile, fixed  # noqa: PLC0415
    from podwright.console.server import ConsoleThread, ServeOptions  # noqa: PLC0415
    from podwright.console.sources import ConsoleSources  # noqa: PLC0415

    if token_file is None and proxy_secret_file is None:
        raise BadInput(
            "--console: give --console-token-file (a file holding the token), "
            "--console-auth-proxy, or both: otherwise nobody could open it"
        )
    token = SecretFile(token_file) if token_file is not None else fixed(None)
    proxy_secret = SecretFile(proxy_secret_file) if proxy_secret_file is not None else None
    for name, secret in (("--console-token-file", token), ("--console-auth-proxy", proxy_secret)):
        if isinstance(secret, SecretFile) and secret() is None:
            logger.warning(
                "console: %s %s is missing or empty: until it is written, it opens nothing",
                name,
                secret.path,
            )
    sources = ConsoleSources(
        backend="operator",
        kubeconfig=kubeconfig,
        context=context,
        namespace=watch_namespace,
        all_namespaces=watch_namespace is None,
    )
    settings = ConsoleSettings(Access(token, proxy_secret), read_only=True)
    try:
        return ConsoleThread(sources, ServeOptions(listen=listen, insecure=insecure), settings)
    except PodwrightError as error:
        message = str(error).replace("--listen", "--console-listen")
        raise BadInput(message.replace("--insecure", "--console-insecure")) from error


def _election(
    lease_duration: timedelta, renew_deadline: timedelta, retry_period: timedelta
) -> ElectionSettings:
    try:
        return ElectionSettings(lease_duration, renew_deadline, retry_period)
    except ElectionSettingsError as error:
        option = "--" + str(error).split(":", 1)[0].replace("_", "-")
        raise BadInput(f"{option}: {str(error).split(':', 1)[1].strip()}") from error


def _webhook_settings(
    client: KubernetesClient,
    *,
    cluster_name: str,
    namespace: str,
    webhook_host: str | None,
    webhook_service: str | None,
    listen_host: str | None,
    port: int,
    cert_dir: Path | None,
    ca_secret: str | None,
    single_webhook: bool,
) -> WebhookSettings:
    service = None
    if webhook_service is not None:
        service = ServiceEndpoint(namespace, _label(webhook_service, "--webhook-service"))
    else:
        webhook_host = webhook_host or address_towards(client.server)
    secret = None
    if ca_secret is not None:
        try:
            secret = SecretRef.parse(ca_secret if "/" in ca_secret else f"{namespace}/{ca_secret}")
        except ValueError as error:
            raise BadInput(f"--ca-secret: {error}") from error
    return WebhookSettings(
        cluster_name=cluster_name,
        webhook_host=webhook_host,
        service=service,
        listen_host=listen_address(listen_host, webhook_host),
        port=port,
        certificate_directory=cert_dir,
        ca_secret=secret,
        single_webhook=single_webhook,
    )


def _serve(
    client: KubernetesClient,
    settings: OperatorSettings,
    *,
    lifecycle: LifecycleConfig,
    metrics: OperatorMetrics,
    metrics_address: tuple[str, int] | None,
    round_interval: timedelta,
) -> None:
    runtime = OperatorRuntime(client, settings, lifecycle, metrics, clock=utc_now)
    server = None
    if metrics_address is not None:
        server = status_server(metrics, metrics_address, round_interval, lambda: runtime.ready()[0])
        host, bound = server.address
        logger.info("metrics on http://%s:%d/metrics, health on /healthz and /readyz", host, bound)
    stop = threading.Event()
    try:
        with stopping_on_signals(stop, "stopping after this round"):
            try:
                runtime.start()
            except NotInstalledError as error:
                raise BadInput(str(error)) from error
            except (WebhooksStartError, OperatorStartError) as error:
                raise Unavailable(f"the operator could not start: {error}") from error
            except ApiConnectionError as error:
                raise Unreachable(error.message) from error
            except KubernetesError as error:
                raise Unavailable(
                    f"the API server {client.server} refused: {error.message}"
                ) from error
            logger.info(
                "operator %s started (Lease %s/%s)",
                settings.identity,
                settings.namespace,
                settings.lease_name,
            )
            stop.wait()
            runtime.stop()
    finally:
        if server is not None:
            server.stop()
    logger.info("operator %s stopped", settings.identity)
