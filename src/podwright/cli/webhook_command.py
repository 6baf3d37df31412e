"""``podwright webhook``: serve the admission webhooks from this machine until stopped.

Run out of the cluster (development, tests, a cluster without the operator), as ``kopf run``
runs an operator: it serves HTTPS with a certificate of its own CA, and points podwright's
webhook configurations at ``https://ADDR:PORT`` with that CA's bundle (``--ca-secret``: the CA
kept in a Secret, shared with every other process serving with it). The configurations stay
when it stops (SIGTERM, Ctrl-C): with ``failurePolicy: Fail``, Workloads and policies are then
refused until a webhook serves again.

Exit status: 0 stopped by a signal; 2 bad options or podwright's CRDs not installed; 5 the
webhooks could not start; 6 the API server gives no answer.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from podwright.adapters.admission_webhooks import (
    AdmissionWebhooks,
    NotInstalledError,
    SecretRef,
    WebhookSettings,
    WebhooksStartError,
    address_towards,
)
from podwright.api.backends import ClusterAccess, cluster_client
from podwright.api.backends import cluster_name as default_cluster_name
from podwright.api.state import utc_now
from podwright.cli.common import (
    SINGLE_WEBHOOK_HELP,
    BadInput,
    Unavailable,
    cluster_access_options,
)
from podwright.cli.signals import stopping_on_signals
from podwright.core.render.profile import DEFAULT_PROFILE

logger = logging.getLogger("podwright.webhook")

DEFAULT_PORT = 9443
"""controller-runtime's webhook port, which cluster firewalls (GKE's, for one) are used to."""


F = TypeVar("F", bound=Callable[..., object])


def serving_options(command: F) -> F:
    """``--webhook-host``, ``--listen``, ``--port``, ``--cert-dir`` and ``--single-webhook``:
    where the admission webhooks are served and reached, and how (``podwright webhook``,
    ``podwright operator``)."""
    command = click.option(
        "--single-webhook",
        is_flag=True,
        help=SINGLE_WEBHOOK_HELP,
    )(command)
    command = click.option(
        "--cert-dir",
        type=click.Path(file_okay=False, exists=True, path_type=Path),
        default=None,
        help="Serve DIR/tls.crt and DIR/tls.key (as cert-manager's Secret holds them) and trust "
        "DIR/ca.crt, instead of a certificate of podwright's own CA.",
    )(command)
    command = click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=DEFAULT_PORT,
        show_default=True,
        help="The port the webhooks listen on (0: any free port).",
    )(command)
    command = click.option(
        "--listen",
        "listen_host",
        metavar="ADDR",
        default=None,
        help="The address to listen on (default: --webhook-host when it is an IP address, else "
        "every address).",
    )(command)
    return click.option(
        "--webhook-host",
        metavar="ADDR",
        default=None,
        help="The address the API server reaches this process at: an IP address or a DNS name "
        "(default: this machine's address on its route to the API server).",
    )(command)


def listen_address(listen_host: str | None, webhook_host: str | None) -> str:
    """Where to listen: ``--listen``, else ``--webhook-host`` when it is an IP address, else
    every address."""
    if listen_host:
        return listen_host
    if webhook_host is not None:
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(webhook_host)
            return webhook_host
    return "0.0.0.0"


@click.command("webhook")
@cluster_access_options
@serving_options
@click.option(
    "--ca-secret",
    metavar="NAMESPACE/NAME",
    default=None,
    help="Keep podwright's CA in this Secret (created when absent) instead of in this process, "
    "so that every process serving the webhooks with it serves certificates of one CA that "
    "outlives them; each issues its own certificate from it. Needs get, create and update of "
    "Secrets in NAMESPACE.",
)
@click.option(
    "--profile",
    "profile_name",
    default=DEFAULT_PROFILE.name,
    show_default=True,
    help="The ClusterProfile the operator renders Workloads with (its --profile; absent: the "
    "safe defaults): a Workload that cannot be rendered on it is refused.",
)
def webhook_command(
    *,
    kubeconfig: str | None,
    context: str | None,
    webhook_host: str | None,
    listen_host: str | None,
    port: int,
    cert_dir: Path | None,
    ca_secret: str | None,
    profile_name: str,
    cluster_name: str | None,
    single_webhook: bool,
) -> None:
    """Serve the admission webhooks of Workloads and policies, and point the cluster at them.

    Workloads get their policies' defaults and are refused when they break enforced rules (every
    issue listed) or cannot be rendered on the operator's cluster profile (as 'podwright render'
    says why); policies are refused when malformed or in conflict with another. Stops on
    SIGTERM or Ctrl-C; the webhook configurations stay, so nothing unchecked gets in meanwhile.
    """
    if cert_dir is not None and ca_secret is not None:
        raise click.UsageError(
            "--cert-dir and --ca-secret are different sources of the webhooks' certificate "
            "(cert-manager's files, a Secret keeping podwright's CA); choose one"
        )
    try:
        secret = None if ca_secret is None else SecretRef.parse(ca_secret)
    except ValueError as error:
        raise BadInput(f"--ca-secret: {error}") from error
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    access = ClusterAccess(kubeconfig, context)
    with cluster_client(access) as client:
        try:
            host = webhook_host or address_towards(client.server)
            settings = WebhookSettings(
                cluster_name=cluster_name or default_cluster_name(access),
                webhook_host=host,
                profile_name=profile_name,
                listen_host=listen_address(listen_host, host),
                port=port,
                certificate_directory=cert_dir,
                ca_secret=secret,
                single_webhook=single_webhook,
            )
            stop = threading.Event()
            with (
                stopping_on_signals(stop, "stopping"),
                AdmissionWebhooks(client, settings, clock=utc_now) as webhooks,
            ):
                logger.info(
                    "serving podwright's admission webhooks at %s (listening on %s)",
                    webhooks.base_url,
                    webhooks.url,
                )
                stop.wait()
        except NotInstalledError as error:
            raise BadInput(str(error)) from error
        except WebhooksStartError as error:
            raise Unavailable(f"the webhooks could not start: {error}") from error
    logger.info(
        "stopped; the webhook configurations stay (remove them with 'kubectl delete "
        "mutatingwebhookconfiguration,validatingwebhookconfiguration podwright')"
    )
