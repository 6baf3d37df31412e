"""Admission webhooks served by the test process over HTTPS, for an API server to call.

An API server calls admission webhooks over HTTPS and checks their certificate against the
configuration's ``caBundle``. Tests serve webhooks from their own process, at
``PODWRIGHT_TEST_WEBHOOK_HOST`` (default ``127.0.0.1``: a real API server on the same machine
reaches it), with podwright's own server (``podwright.adapters.webhook_server``) and a
certificate from podwright's own CA (``podwright.adapters.certificates``), made for the run; the
emulator and a real API server call them alike. Each path's handler here takes the review's
``request`` and gives its ``response``, and every request is kept for the test to look at.
"""

from __future__ import annotations

import datetime
import os
import ssl
import threading
from collections.abc import Callable, Mapping
from typing import Any

from podwright.adapters.certificates import CertificateAuthority, CertificateKeeper
from podwright.adapters.webhook_server import WebhookServer as PodwrightWebhookServer
from podwright.core.webhook_configurations import encoded_ca_bundle

WEBHOOK_HOST_VARIABLE = "PODWRIGHT_TEST_WEBHOOK_HOST"
LOOPBACK = "127.0.0.1"

Review = dict[str, Any]
Handler = Callable[[Review], Review]
"""Takes an AdmissionReview's ``request``, returns its ``response`` (the uid is filled in when
absent)."""


def webhook_host() -> str:
    """Where the tests serve webhooks: ``PODWRIGHT_TEST_WEBHOOK_HOST``, else ``127.0.0.1``."""
    return os.environ.get(WEBHOOK_HOST_VARIABLE) or LOOPBACK


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class ManualClock:
    """A clock that moves only when told (``advance``): certificates' lives pass at once."""

    def __init__(self, start: datetime.datetime | None = None) -> None:
        self.now = start or utc_now()

    def __call__(self) -> datetime.datetime:
        return self.now

    def advance(self, delta: datetime.timedelta) -> datetime.datetime:
        self.now += delta
        return self.now


class PublishedBundles(list[tuple[datetime.datetime, bytes]]):
    """A keeper's ``publish_bundle``: the CA bundles it published, with when (by its clock);
    raises ``ConnectionError(failing)`` instead while ``failing`` is set."""

    def __init__(self, clock: Callable[[], datetime.datetime]) -> None:
        super().__init__()
        self.clock = clock
        self.failing: str | None = None
        self._lock = threading.Lock()

    def __call__(self, bundle: bytes) -> None:
        if self.failing:
            raise ConnectionError(self.failing)
        with self._lock:
            self.append((self.clock(), bundle))

    def in_force(self, at: datetime.datetime) -> bytes | None:
        """The bundle of an API server that loaded only what was published by ``at``."""
        with self._lock:
            earlier = [bundle for when, bundle in self if when <= at]
        return earlier[-1] if earlier else None


def untrusted_ca_bundle() -> str:
    """A ``caBundle`` of a CA that vouches for no server of the tests."""
    authority = CertificateAuthority.create(now=utc_now(), validity=datetime.timedelta(days=1))
    return encoded_ca_bundle(authority.pem)


class WebhookServer:
    """Admission webhooks on a free port: each path has its handler, and every request a path
    received is kept (``reviews``). A ``with`` block starts and stops it."""

    def __init__(self, handlers: Mapping[str, Handler], host: str | None = None) -> None:
        self.host = host or webhook_host()
        self.keeper = CertificateKeeper([self.host], clock=utc_now)
        self.keeper.refresh()
        self._received: dict[str, list[Review]] = {}
        self._lock = threading.Lock()
        routes = {path: self._recording(path, handler) for path, handler in handlers.items()}
        self._handshakes = 0
        self._server = PodwrightWebhookServer(routes, self, host=self.host)

    # The server's TlsSource: the keeper's, each new connection counted (the server asks for a
    # context once per connection it accepts).

    def server_context(self) -> ssl.SSLContext:
        with self._lock:
            self._handshakes += 1
        return self.keeper.server_context()

    def problem(self) -> str | None:
        return self.keeper.problem()

    @property
    def connections_accepted(self) -> int:
        with self._lock:
            return self._handshakes

    def _recording(self, path: str, handler: Handler) -> Callable[[Review], Review]:
        def answer(review: Review) -> Review:
            request = review["request"]
            with self._lock:
                self._received.setdefault(path, []).append(request)
            response = {"uid": request["uid"], **handler(request)}
            return {
                "apiVersion": review["apiVersion"],
                "kind": review["kind"],
                "response": response,
            }

        return answer

    @property
    def ca_bundle(self) -> str:
        """The ``clientConfig.caBundle`` that vouches for this server."""
        return encoded_ca_bundle(self.keeper.ca_bundle)

    def url(self, path: str) -> str:
        return self._server.url(path)

    def reviews(self, path: str) -> list[Review]:
        """The AdmissionReview requests ``path`` received so far."""
        with self._lock:
            return list(self._received.get(path, []))

    def __enter__(self) -> WebhookServer:
        self._server.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.stop()
