"""podwright's admission webhooks served to the cluster under test as a user serves them:
``podwright webhook`` in a subprocess on this machine, its webhook configurations (named
``podwright``) pointing the API server at it.

On the emulator the API server reaches it at ``127.0.0.1``; a real cluster at the address at
which it reaches this machine, ``PODWRIGHT_TEST_WEBHOOK_HOST``, by default ``127.0.0.1`` too (an
API server on the same machine). A :class:`WebhookProcess` is up once its configurations name its URL and a
request through the API server has been answered by it; :meth:`WebhookProcess.ensure` starts it
again when a test stopped it or pointed the configurations elsewhere, so that every test finds it
serving whatever ran before.
"""

from __future__ import annotations

import base64
import contextlib
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from podwright.core.webhook_configurations import (
    CONFIGURATION_NAME,
    MUTATING_KIND,
    VALIDATING_KIND,
)
from tests.cluster.support import ROOT, Server
from tests.kube.support import eventually
from tests.node_sim.rest import send
from tests.webhook_server import LOOPBACK, webhook_host

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1"
CONFIGURATION_PATHS = {
    kind: f"{CONFIGURATIONS}/{kind.lower()}s/{CONFIGURATION_NAME}"
    for kind in (MUTATING_KIND, VALIDATING_KIND)
}
WORKLOADS = "/apis/podwright.dev/v1alpha1/namespaces/{namespace}/workloads"
PROBE_NAMESPACE = "default"
"""Where the probe's dry-run Workload is sent: a namespace every cluster has."""
START_SECONDS = 60.0
STOP_SECONDS = 30.0
_SERVING = re.compile(r"serving podwright's admission webhooks at (https://\S+) ")


def webhook_address(*, real: bool) -> str:
    """The address a real cluster's API server (``real``) or the emulator reaches this
    machine at: ``PODWRIGHT_TEST_WEBHOOK_HOST`` for a real one (:func:`webhook_host`, by default
    ``127.0.0.1``), ``127.0.0.1`` for the emulator, which runs here."""
    return webhook_host() if real else LOOPBACK


def configuration_webhooks(server: Server, kind: str) -> list[tuple[str, str]]:
    """The (name, URL) of each webhook of podwright's configuration of ``kind``."""
    answer = send(server.api_client, "GET", CONFIGURATION_PATHS[kind])
    assert answer.status == 200, answer
    return [
        (hook["name"], str((hook.get("clientConfig") or {}).get("url")))
        for hook in answer.body.get("webhooks") or []
    ]


def configuration_urls_and_bundles(server: Server) -> set[tuple[str, str]] | None:
    """Every webhook's ``clientConfig`` (URL, CA bundle) in podwright's two configurations;
    None while one of them is missing."""
    found = set()
    for path in CONFIGURATION_PATHS.values():
        answer = send(server.api_client, "GET", path)
        if answer.status == 404:
            return None
        assert answer.status == 200, answer
        for hook in answer.body.get("webhooks") or []:
            config = hook.get("clientConfig") or {}
            found.add((str(config.get("url")), str(config.get("caBundle"))))
    return found


def ca_bundle_pem(server: Server) -> bytes:
    """The CA bundle the configurations carry (the same in every webhook), as PEM."""
    given = configuration_urls_and_bundles(server)
    assert given, "podwright's webhook configurations are missing"
    (bundle,) = {bundle for _url, bundle in given}
    return base64.b64decode(bundle)


def delete_configurations(server: Server) -> None:
    """Delete podwright's webhook configurations (they outlive the process on purpose)."""
    for path in CONFIGURATION_PATHS.values():
        send(server.api_client, "DELETE", path)
    eventually(lambda: configuration_urls_and_bundles(server) is None)


def probe_workload(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "podwright.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": f"probe-{uuid.uuid4().hex[:8]}", "namespace": namespace},
        "spec": {"type": "training", "image": "busybox:1"},
    }


def answered_by_the_webhooks(server: Server) -> bool:
    """Whether a dry-run create of a Workload gets an answer of the webhooks (admitted, or
    refused by them), not a failure to call them."""
    answer = send(
        server.api_client,
        "POST",
        WORKLOADS.format(namespace=PROBE_NAMESPACE),
        probe_workload(PROBE_NAMESPACE),
        query={"dryRun": "All"},
    )
    assert "failed calling webhook" not in str(answer.body), answer.body
    return answer.status == 201 or "admission webhook" in str((answer.body or {}).get("message"))


class WebhookProcess:
    """``podwright webhook --kubeconfig K --port 0 --webhook-host H``, its output in a log
    file; :meth:`start` waits until it serves, :meth:`stop` sends SIGTERM and expects exit 0."""

    def __init__(self, server: Server, host: str, directory: Path, profile_name: str) -> None:
        """``profile_name``: the operators' ClusterProfile, on which the webhook judges
        Workloads (``--profile``)."""
        self.server = server
        self._host = host
        self._profile_name = profile_name
        self._directory = directory
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_path = directory / "webhook.log"
        self.url: str | None = None
        """The URL the configurations name for it (``https://H:PORT``), once it serves."""
        self._configured: set[tuple[str, str]] | None = None
        self.single_webhook = False
        """Whether it is started with ``--single-webhook`` (Workloads judged in one call)."""

    @property
    def log(self) -> str:
        return self._log_path.read_text() if self._log_path.exists() else ""

    def start(self) -> None:
        assert self._process is None, "already started"
        self._log = self._log_path.open("ab")
        self._process = subprocess.Popen(
            [
                *(sys.executable, "-m", "podwright", "webhook"),
                *("--kubeconfig", str(self.server.kubeconfig)),
                *("--port", "0", "--webhook-host", self._host),
                *("--profile", self._profile_name),
                *(["--single-webhook"] if self.single_webhook else []),
            ],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        start = self._log_path.stat().st_size
        self.url = eventually(lambda: self._announced(start), timeout=START_SECONDS)
        self._configured = eventually(self._configurations_name_it, timeout=START_SECONDS)
        eventually(lambda: answered_by_the_webhooks(self.server), timeout=START_SECONDS)

    def _announced(self, start: int) -> str | None:
        process = self._process
        assert process is not None
        assert process.poll() is None, f"podwright webhook exited {process.returncode}:\n{self.log}"
        found = _SERVING.search(self._log_path.read_bytes()[start:].decode(errors="replace"))
        return found.group(1) if found else None

    def _configurations_name_it(self) -> set[tuple[str, str]] | None:
        given = configuration_urls_and_bundles(self.server)
        if not given or any(not url.startswith(f"{self.url}/") for url, _ in given):
            return None
        return given

    def stop(self) -> None:
        """SIGTERM, and exit status 0 (the configurations stay)."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            returncode = process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(f"podwright webhook ignored SIGTERM:\n{self.log}") from None
        finally:
            if self._log is not None:
                self._log.close()
        assert returncode == 0, f"podwright webhook exited {returncode}:\n{self.log}"

    def serving(self) -> bool:
        """Whether it runs and the configurations are still the ones it installed."""
        if self._process is None or self._process.poll() is not None:
            return False
        return configuration_urls_and_bundles(self.server) == self._configured

    def ensure(self) -> None:
        """Serving, started again if it is not."""
        if not self.serving():
            self.stop()
            self.start()


@contextlib.contextmanager
def webhook_process(
    server: Server, host: str, directory: Path, profile_name: str
) -> Iterator[WebhookProcess]:
    """A :class:`WebhookProcess` serving; afterwards stopped (exit 0) and its configurations
    deleted, also on failure."""
    process = WebhookProcess(server, host, directory, profile_name)
    try:
        process.start()
        yield process
    finally:
        try:
            process.stop()
        finally:
            delete_configurations(server)
