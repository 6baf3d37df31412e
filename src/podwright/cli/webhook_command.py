"""``podwright webhook``: serve the admission webhooks from this machine until stopped.

Run out of the cluster (development, tests, a cluster without the operator), as ``kopf run``
runs an operator: it serves HTTPS with a certificate of its own CA, and points podwright's
webhook configurations at ``https://ADDR:PORT`` with that CA's bundle. The configurations stay
when it stops (SIGTERM, Ctrl-C): with ``failurePolicy: Fail``, Workloads and policies are then
refused until a webhook serves again.

Exit status: 0 stopped by a signal; 2 bad options or podwright's CRDs not installed; 5 the
webhooks could not start; 6 the API server gives no answer.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from pathlib import Path

import click

from podwright.adapters.admission_webhooks import (
    AdmissionWebhooks,
    NotInstalledError,
    WebhookSettings,
    WebhooksStartError,
    address_towards,
)
from podwright.cli.backends import ClusterAccess, cluster_client
from podwright.cli.backends import cluster_name as default_cluster_name
from podwright.cli.common import BadInput, Unavailable, cluster_access_options
from podwright.cli.signals import stopping_on_signals
from podwright.cli.state import utc_now

logger = logging.getLogger("podwright.webhook")

DEFAULT_PORT = 9443
"""controller-runtime's webhook port, which cluster firewalls (GKE's, for one) are used to."""


@click.command("webhook")
@cluster_access_options
@click.option(
    "--webhook-host",
    metavar="ADDR",
    default=None,
    help="The address the API server reaches this process at: an IP address or a DNS name "
    "(default: this machine's address on its route to the API server).",
)
@click.option(
    "--listen",
    "listen_host",
    metavar="ADDR",
    default=None,
    help="The address to listen on (default: --webhook-host when it is an IP address, else "
    "every address).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="The port to listen on (0: any free port).",
)
@click.option(
    "--cert-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Serve DIR/tls.crt and DIR/tls.key (as cert-manager's Secret holds them) and trust "
    "DIR/ca.crt, instead of a certificate of podwright's own CA.",
)
def webhook_command(
    *,
    kubeconfig: str | None,
    context: str | None,
    webhook_host: str | None,
    listen_host: str | None,
    port: int,
    cert_dir: Path | None,
    cluster_name: str | None,
) -> None:
    """Serve the admission webhooks of Workloads and policies, and point the cluster at them.

    Workloads get their policies' defaults and are refused when they break enforced rules (every
    issue listed); policies are refused when malformed or in conflict with another. Stops on
    SIGTERM or Ctrl-C; the webhook configurations stay, so nothing unchecked gets in meanwhile.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    access = ClusterAccess(kubeconfig, context)
    with cluster_client(access) as client:
        try:
            host = webhook_host or address_towards(client.server)
            settings = WebhookSettings(
                cluster_name=cluster_name or default_cluster_name(access),
                webhook_host=host,
                listen_host=listen_host or (host if _is_ip_address(host) else "0.0.0.0"),
                port=port,
                certificate_directory=cert_dir,
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


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
