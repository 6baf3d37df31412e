"""Serving the console: the address it listens on, its token, and Uvicorn.

The console binds to loopback unless told otherwise; an address another machine can reach is
served with TLS (a certificate and key given), or in clear only with ``insecure``, since its
token would cross the network in clear. The token is new at every start unless one is given,
and the URL that carries it is printed once the socket listens (``port`` 0: any free one).
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import secrets
import socket
import threading
import webbrowser
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp

from podwright import api
from podwright.console.app import ConsoleSettings, console_app
from podwright.console.gate import Access, fixed
from podwright.console.hub import TaskHub
from podwright.console.sources import ConsoleSources

DEFAULT_LISTEN = "127.0.0.1:8080"
SHUTDOWN_SECONDS = 3
BACKLOG = 2048
"""Connections the listening socket holds until the server takes them (Uvicorn's default)."""
"""How long open pages' streams are given to end when the console stops."""


@dataclasses.dataclass(frozen=True)
class Address:
    """Where the console listens."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Address:
        """``HOST:PORT`` (``[::1]:8080`` for IPv6); bad input names ``--listen``."""
        host, colon, port = text.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not colon or not host or not port.isdigit() or int(port) > 65535:
            raise api.InvalidInputError(
                f"--listen {text!r}: HOST:PORT, a port from 0 (any free one) to 65535, "
                "e.g. 127.0.0.1:8080"
            )
        return cls(host, int(port))

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    """How ``podwright console`` serves (see the module's docstring)."""

    listen: str = DEFAULT_LISTEN
    insecure: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
    open_browser: bool = False
    read_only: bool = False
    token: str | None = None
    profile: str | None = None
    """The cluster profile submissions are rendered with on this machine's backends."""

    def address(self) -> Address:
        address = Address.parse(self.listen)
        if (self.tls_cert is None) != (self.tls_key is None):
            raise api.InvalidInputError("--tls-cert and --tls-key go together: give both")
        if not address.is_loopback and self.tls_cert is None and not self.insecure:
            raise api.InvalidInputError(
                f"--listen {self.listen}: beyond loopback the console's token would cross the "
                "network in clear; give --tls-cert and --tls-key, or --insecure to accept that"
            )
        return address


def serve(
    sources: ConsoleSources,
    options: ServeOptions,
    announce: Callable[[str], None],
    announce_note: Callable[[str], None],
) -> None:
    """Serve the console until interrupted (SIGINT, SIGTERM): check the inputs (``announce_note``
    tells what was narrowed), read the tasks once, listen, then ``announce`` the URL with the
    token."""
    address = options.address()
    sources.check()
    if options.profile is not None:
        api.load_profile(options.profile)  # bad input now, not at the first submission
    sources, note = sources.narrowed()
    if note is not None:
        announce_note(note)
    token = options.token or secrets.token_urlsafe(32)
    listener = _listen(address, options.listen)
    hub = TaskHub(sources.client)
    hub.start()
    try:
        access = Access(fixed(token), secure=options.tls_cert is not None)
        settings = ConsoleSettings(access, read_only=options.read_only, profile=options.profile)
        server = uvicorn.Server(_config(console_app(sources, hub, settings), options))
        announce(f"{_base_url(listener, options)}/?token={token}")
        if options.open_browser:
            webbrowser.open(f"{_base_url(listener, options)}/?token={token}")
        server.run(sockets=[listener])
    finally:
        hub.stop()
        listener.close()


class ConsoleThread:
    """The console served from a thread of another program (``podwright operator
    --console``), until :meth:`stop`: the same application, hub and server as ``podwright
    console``, without its signal handling (its host program has its own)."""

    def __init__(
        self, sources: ConsoleSources, options: ServeOptions, settings: ConsoleSettings
    ) -> None:
        address = options.address()
        sources.check()
        self._listener = _listen(address, options.listen)
        self._hub = TaskHub(sources.client)
        self._server = uvicorn.Server(_config(console_app(sources, self._hub, settings), options))
        self.url = _base_url(self._listener, options)
        self._started = False
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[self._listener])),
            name="podwright-console-server",
            daemon=True,
        )

    def start(self) -> None:
        """Serve, reading the tasks meanwhile (its host program does not wait for them)."""
        self._hub.start(timeout=0)
        self._started = True
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (a console never started only lets its socket go)."""
        self._server.should_exit = True
        if self._started:
            self._thread.join(SHUTDOWN_SECONDS + 5)
            self._hub.stop()
        self._listener.close()


def _listen(address: Address, given: str) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address.host, address.port))
        listener.listen(BACKLOG)  # connections wait from the moment the URL is printed
    except OSError as error:
        listener.close()
        raise api.InvalidInputError(f"--listen {given}: {error.strerror}") from None
    return listener


def _config(app: ASGIApp, options: ServeOptions) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        ssl_certfile=options.tls_cert,
        ssl_keyfile=options.tls_key,
    )


def _base_url(listener: socket.socket, options: ServeOptions) -> str:
    host, port = listener.getsockname()[:2]
    scheme = "https" if options.tls_cert else "http"
    shown = f"[{host}]" if listener.family == socket.AF_INET6 else host
    return f"{scheme}://{shown}:{port}"
