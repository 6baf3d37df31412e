"""Serving the console: the address it listens on, its token, and Uvicorn.

The console binds to loopback unless told otherwise; an address another machine can reach is
served with TLS (a certificate and key given), or in clear only with ``insecure``, since its
token would cross the network in clear. The token is new at every start unless one is given,
and the URL that carries it is printed once the socket listens (``port`` 0: any free one).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import secrets
import socket
import webbrowser
from collections.abc import Callable

import uvicorn

from podwright import api
from podwright.console.app import ConsoleSettings, console_app
from podwright.console.hub import TaskHub
from podwright.console.sources import ConsoleSources

DEFAULT_LISTEN = "127.0.0.1:8080"
SHUTDOWN_SECONDS = 3
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


def serve(sources: ConsoleSources, options: ServeOptions, announce: Callable[[str], None]) -> None:
    """Serve the console until interrupted (SIGINT, SIGTERM): check the inputs, read the
    tasks once, listen, then ``announce`` the URL with the token."""
    address = options.address()
    sources.check()
    token = options.token or secrets.token_urlsafe(32)
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address.host, address.port))
    except OSError as error:
        listener.close()
        raise api.InvalidInputError(f"--listen {options.listen}: {error.strerror}") from None
    hub = TaskHub(sources.client)
    hub.start()
    try:
        app = console_app(sources, hub, ConsoleSettings(token, read_only=options.read_only))
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=SHUTDOWN_SECONDS,
            ssl_certfile=options.tls_cert,
            ssl_keyfile=options.tls_key,
        )
        server = uvicorn.Server(config)
        # Listening before the URL is announced: a browser (or a script) that opens it at once
        # waits in the backlog until Uvicorn accepts, instead of being refused.
        listener.listen(config.backlog)
        port = listener.getsockname()[1]
        scheme = "https" if options.tls_cert else "http"
        host = f"[{address.host}]" if family == socket.AF_INET6 else address.host
        url = f"{scheme}://{host}:{port}/?token={token}"
        announce(url)
        if options.open_browser:
            webbrowser.open(url)
        server.run(sockets=[listener])
    finally:
        hub.stop()
        listener.close()
