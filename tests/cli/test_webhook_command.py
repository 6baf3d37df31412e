"""``podwright webhook`` against the API-server emulator: what it refuses to start on (CRDs not
installed, cert-manager files without their CA, an API server that does not answer), and
cert-manager's files served and trusted. Its admission work is the cluster tier's
(tests/cluster/test_admission.py)."""

from __future__ import annotations

import base64
import datetime
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

from podwright.adapters.certificates import CertificateAuthority
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


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[tuple[Emulator, str]]:
    with Emulator() as running:
        yield running, str(write_kubeconfig(tmp_path / "kubeconfig", running.url))


def webhook(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["webhook", "--port", "0", *args])
    return result.exit_code, result.stderr


def test_it_does_not_start_without_podwrights_crds(emulator: tuple[Emulator, str]) -> None:
    _running, kubeconfig = emulator
    code, stderr = webhook("--kubeconfig", kubeconfig)
    assert code == 2
    assert "lacks podwright's CustomResourceDefinitions workloads.podwright.dev, " in stderr
    assert "install them first with 'kubectl apply --server-side -f deploy/crds/'" in stderr


def test_an_api_server_that_does_not_answer_is_named(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}"))
    code, stderr = webhook("--kubeconfig", kubeconfig, "--webhook-host", "127.0.0.1")
    assert code == 6
    assert f"127.0.0.1:{port}" in stderr


def installed(kubeconfig: str) -> KubernetesClient:
    client = KubernetesClient(connect(kubeconfig))
    for crd in custom_resource_definitions():
        client.apply(crd, field_manager="test")
    return client


def certificate_files(directory: Path, *, with_ca: bool) -> bytes:
    """A CA's serving certificate for 127.0.0.1 as cert-manager's Secret holds it; its PEM."""
    now = datetime.datetime.now(datetime.UTC)
    authority = CertificateAuthority.create(now=now, validity=datetime.timedelta(days=1))
    serving = authority.issue(["127.0.0.1"], now=now, validity=datetime.timedelta(hours=1))
    directory.mkdir()
    (directory / "tls.crt").write_bytes(serving.certificate_pem)
    (directory / "tls.key").write_bytes(serving.key_pem)
    if with_ca:
        (directory / "ca.crt").write_bytes(authority.pem)
    return authority.pem


def test_cert_manager_files_without_their_ca_are_refused(
    emulator: tuple[Emulator, str], tmp_path: Path
) -> None:
    _running, kubeconfig = emulator
    installed(kubeconfig).close()
    directory = tmp_path / "tls"
    certificate_files(directory, with_ca=False)
    code, stderr = webhook("--kubeconfig", kubeconfig, "--cert-dir", str(directory))
    assert code == 5
    assert f"--cert-dir {directory}: it has no ca.crt" in stderr


def test_cert_manager_files_are_served_and_their_ca_trusted_until_it_stops(
    emulator: tuple[Emulator, str], tmp_path: Path
) -> None:
    """The configurations carry ``ca.crt``, the server serves ``tls.crt``, a SIGTERM stops it
    (status 0), and the configurations stay: Workloads are refused while nothing serves."""
    _running, kubeconfig = emulator
    client = installed(kubeconfig)
    directory = tmp_path / "tls"
    ca = certificate_files(directory, with_ca=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "podwright", "webhook", "--kubeconfig", kubeconfig,
         "--webhook-host", "127.0.0.1", "--port", "0", "--cert-dir", str(directory)],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        refs = [
            ObjectRef(ADMISSION_API_VERSION, kind, "", CONFIGURATION_NAME)
            for kind in (MUTATING_KIND, VALIDATING_KIND)
        ]

        def both() -> list[dict[str, object]] | None:
            found = [present(client, ref) for ref in refs]
            return [obj for obj in found if obj is not None] if all(found) else None

        configurations = eventually(both, timeout=60)
        urls = set()
        for configuration in configurations:
            for hook in configuration["webhooks"]:
                assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
                urls.add(hook["clientConfig"]["url"].rsplit("/", 2)[0])
        (url,) = urls
        host, port = url.removeprefix("https://").split(":")
        served = ssl.get_server_certificate((host, int(port)), timeout=10)
        assert x509.load_pem_x509_certificate(served.encode()) == (
            x509.load_pem_x509_certificate((directory / "tls.crt").read_bytes())
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stderr is not None
        process.stderr.close()
    assert all(present(client, ref) for ref in refs)  # left in place: fail closed
    client.close()


def present(client: KubernetesClient, ref: ObjectRef) -> dict[str, object] | None:
    try:
        return client.get(ref)
    except NotFoundError:
        return None
