"""``podwright webhook --ca-secret NAMESPACE/NAME`` against the API-server emulator: a malformed
value and ``--cert-dir`` beside it refused before anything is reached (exit 2), a Secret that
holds no CA refused naming it (exit 5), and a run that creates the Secret, serves a certificate
of its CA, puts its bundle into the configurations, never writes the CA's key to its log, and
leaves the Secret when it stops: a second run serves from the same CA."""

from __future__ import annotations

import base64
import signal
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography import x509

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.cli.main import cli
from podwright.core.crds import custom_resource_definitions
from podwright.core.webhook_configurations import (
    ADMISSION_API_VERSION,
    CONFIGURATION_NAME,
    MUTATING_KIND,
    VALIDATING_KIND,
)
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef
from tests.k8s_emulator import Emulator
from tests.kube.support import eventually, write_kubeconfig

NAMESPACE, NAME = "podwright-system", "podwright-webhook-ca"
SECRET = ObjectRef("v1", "Secret", NAMESPACE, NAME)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KubernetesClient, str]]:
    """An emulator with podwright's CRDs and the operator's namespace; a client, a kubeconfig."""
    with Emulator() as running:
        kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", running.url))
        client = KubernetesClient(connect(kubeconfig))
        for crd in custom_resource_definitions():
            client.apply(crd, field_manager="test")
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        try:
            yield client, kubeconfig
        finally:
            client.close()


def webhook(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["webhook", "--port", "0", *args])
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("podwright-webhook-ca", "--ca-secret: 'podwright-webhook-ca' is not NAMESPACE/NAME"),
        ("a/b/c", "--ca-secret: 'a/b/c' is not NAMESPACE/NAME"),
        ("System/ca", "--ca-secret: namespace: 'System' is not a namespace name: it must "),
        ("podwright-system/CA", "--ca-secret: name: 'CA' is not a Secret name: it must "),
    ],
)
def test_a_malformed_secret_is_refused_naming_the_option(value: str, message: str) -> None:
    code, stderr = webhook("--kubeconfig", "/nonexistent", "--ca-secret", value)
    assert code == 2
    assert message in stderr


def test_a_secret_and_cert_managers_files_are_refused_together(tmp_path: Path) -> None:
    code, stderr = webhook(
        "--kubeconfig", "/nonexistent", "--cert-dir", str(tmp_path), "--ca-secret", "a/b"
    )
    assert code == 2
    assert "--cert-dir and --ca-secret are different sources of the webhooks' certificate" in (
        stderr
    )


def test_a_secret_holding_no_ca_is_refused_naming_it(
    cluster: tuple[KubernetesClient, str],
) -> None:
    client, kubeconfig = cluster
    client.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": NAME, "namespace": NAMESPACE},
            "type": "Opaque",
            "data": {"ca.crt": base64.b64encode(b"garbage").decode()},
        }
    )
    code, stderr = webhook(
        "--kubeconfig", kubeconfig, "--webhook-host", "127.0.0.1", "--ca-secret",
        f"{NAMESPACE}/{NAME}",
    )  # fmt: skip
    assert code == 5
    assert (
        f"the webhooks could not start: Secret {NAMESPACE}/{NAME} holds no CA podwright can "
        "use: ca.key: missing; correct it, or delete it to have a new CA made"
    ) in stderr


def configurations_bundle(client: KubernetesClient) -> tuple[bytes, str] | None:
    """The configurations' one CA bundle and URL, once both exist."""
    bundles, urls = set(), set()
    for kind in (MUTATING_KIND, VALIDATING_KIND):
        try:
            configuration = client.get(
                ObjectRef(ADMISSION_API_VERSION, kind, "", CONFIGURATION_NAME)
            )
        except NotFoundError:
            return None
        for hook in configuration["webhooks"]:
            bundles.add(hook["clientConfig"]["caBundle"])
            urls.add(hook["clientConfig"]["url"].rsplit("/", 2)[0])
    (bundle,), (url,) = bundles, urls
    return base64.b64decode(bundle), url


def serve_once(client: KubernetesClient, kubeconfig: str) -> tuple[x509.Certificate, str, bytes]:
    """``podwright webhook --ca-secret`` until it serves: the certificate it serves (checked
    against the configurations' bundle), its log and that bundle; then SIGTERM (exit 0), and the
    configurations it left deleted (so the next run's are told apart)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "podwright", "webhook", "--kubeconfig", kubeconfig,
         "--webhook-host", "127.0.0.1", "--port", "0", "--ca-secret", f"{NAMESPACE}/{NAME}"],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        bundle, url = eventually(lambda: configurations_bundle(client), timeout=60)
        host, port = url.removeprefix("https://").split(":")
        context = ssl.create_default_context(cadata=bundle.decode())
        with (
            socket.create_connection((host, int(port)), timeout=10) as connection,
            context.wrap_socket(connection, server_hostname=host) as tls,
        ):
            served = tls.getpeercert(binary_form=True)
        assert served is not None
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        log = process.stderr.read()
        process.stderr.close()
    for kind in (MUTATING_KIND, VALIDATING_KIND):
        client.delete(ObjectRef(ADMISSION_API_VERSION, kind, "", CONFIGURATION_NAME))
    return x509.load_der_x509_certificate(served), log, bundle


def test_the_ca_is_made_in_the_secret_served_from_and_kept_across_runs(
    cluster: tuple[KubernetesClient, str],
) -> None:
    client, kubeconfig = cluster
    first, log, bundle = serve_once(client, kubeconfig)
    data = {key: base64.b64decode(value) for key, value in client.get(SECRET)["data"].items()}
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    assert first.issuer == ca.subject
    assert bundle == data["bundle.crt"] == data["ca.crt"]
    assert f"Secret {NAMESPACE}/{NAME}: created with a new webhook CA" in log
    key_lines = [line for line in data["ca.key"].decode().splitlines() if "-----" not in line]
    assert not any(line in log for line in key_lines)
    second, _log, _bundle = serve_once(client, kubeconfig)
    assert second.issuer == ca.subject
    assert second != first
    assert client.get(SECRET)["data"]["ca.crt"] == base64.b64encode(data["ca.crt"]).decode()
