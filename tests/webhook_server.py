"""A test CA, server certificates, and a small HTTPS server of admission webhooks.

An API server calls admission webhooks over HTTPS and checks their certificate against the
configuration's ``caBundle``. Tests serve webhooks from their own process, at
``PODWRIGHT_TEST_WEBHOOK_HOST`` (default ``127.0.0.1``: a real API server on the same machine
reaches it), with a certificate from a CA made for the run; the emulator and a real API server
call them alike.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

WEBHOOK_HOST_VARIABLE = "PODWRIGHT_TEST_WEBHOOK_HOST"

Review = dict[str, Any]
Handler = Callable[[Review], Review]
"""Takes an AdmissionReview's ``request``, returns its ``response`` (the uid is filled in when
absent)."""


def webhook_host() -> str:
    return os.environ.get(WEBHOOK_HOST_VARIABLE) or "127.0.0.1"


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA for one test run: it issues server certificates and is their ``caBundle``."""

    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "podwright test CA")])
        certificate = (
            _builder(name, name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256())
        )
        return cls(certificate, key)

    @property
    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def ca_bundle(self) -> str:
        """The CA as a webhook configuration's ``clientConfig.caBundle``: base64 of its PEM."""
        return base64.b64encode(self.pem).decode()

    def issue(self, host: str) -> tuple[bytes, bytes]:
        """A server certificate for ``host`` (an IP address or a DNS name) and its key, in PEM."""
        key = ec.generate_private_key(ec.SECP256R1())
        try:
            subject: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            subject = x509.DNSName(host)
        certificate = (
            _builder(
                x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]),
                self.certificate.subject,
                key.public_key(),
            )
            .add_extension(x509.SubjectAlternativeName([subject]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


@dataclass
class WebhookServer:
    """Admission webhooks served over HTTPS on a free port: each path has its handler, and every
    request a path received is kept (``reviews``). A ``with`` block starts and stops it."""

    handlers: Mapping[str, Handler]
    authority: CertificateAuthority = field(default_factory=CertificateAuthority.create)
    host: str = field(default_factory=webhook_host)
    received: dict[str, list[Review]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                path = self.path.partition("?")[0]
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                handler = server.handlers.get(path)
                if handler is None:
                    self._answer(404, b"no webhook here")
                    return
                request = review["request"]
                with server._lock:
                    server.received.setdefault(path, []).append(request)
                response = {"uid": request["uid"], **handler(request)}
                answer = {"apiVersion": review["apiVersion"], "kind": review["kind"]}
                self._answer(200, json.dumps({**answer, "response": response}).encode())

            def _answer(self, code: int, data: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        certificate, key = self.authority.issue(self.host)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as directory:
            certificate_file, key_file = Path(directory, "tls.crt"), Path(directory, "tls.key")
            certificate_file.write_bytes(certificate)
            key_file.write_bytes(key)
            context.load_cert_chain(certificate_file, key_file)
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        port = self._server.server_address[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{port}{path}"

    def reviews(self, path: str) -> list[Review]:
        """The AdmissionReview requests ``path`` received so far."""
        with self._lock:
            return list(self.received.get(path, []))

    def __enter__(self) -> WebhookServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
