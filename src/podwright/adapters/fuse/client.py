"""The client side of the FUSE proxy: ask the node's daemon to mount, unmount or answer a ping.

Used by the fusermount shim, the wrapper, the ``ping`` probe, the tests and the benchmark. One
connection per request. A mount request carries the caller's own mount-namespace descriptor,
which the daemon checks against the namespace it finds from the caller's pid.

A daemon that is busy (the caller is over one of its limits, or it is shutting down) refuses
with EAGAIN and "retry later": nothing was done, so the client retries, after a jittered
exponential backoff, until its timeout; then the last refusal is raised.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import time
from collections.abc import Callable

from podwright.adapters.fuse.errors import ProxyRefusedError, TransportError
from podwright.adapters.fuse.transport import FdTransport
from podwright.core.fuse_proxy.protocol import (
    DEFAULT_SOCKET_PATH,
    SOCKET_ENV,
    Failed,
    Mounted,
    MountRequest,
    PingRequest,
    ProtocolError,
    Received,
    Reply,
    Request,
    UnmountRequest,
    decode_reply,
    encode_request,
)

DEFAULT_TIMEOUT = 30.0
FIRST_RETRY_DELAY = 0.02
MAX_RETRY_DELAY = 1.0
_LATE_ANSWER_WAIT = 1.0
"""How long to look for the daemon's answer after the request could not be sent."""


def socket_path_from_env(environ: dict[str, str] | os._Environ[str]) -> str:
    """The daemon's socket: ``$PODWRIGHT_FUSE_PROXY_SOCKET``, else the default path."""
    return environ.get(SOCKET_ENV) or DEFAULT_SOCKET_PATH


class ProxyClient:
    """Requests to the FUSE proxy daemon listening on ``socket_path``.

    Without a path, ``$PODWRIGHT_FUSE_PROXY_SOCKET``, else :data:`DEFAULT_SOCKET_PATH`.
    """

    def __init__(
        self,
        socket_path: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.socket_path = socket_path or socket_path_from_env(os.environ)
        self.timeout = timeout
        self._monotonic, self._sleep = monotonic, sleep

    def mount(self, mountpoint: str, options: tuple[str, ...] = ()) -> int:
        """Mount at ``mountpoint``; the mounted ``/dev/fuse`` descriptor, which the caller owns."""
        namespace = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        try:
            reply, fd = self._call(MountRequest(mountpoint, options), namespace)
        finally:
            os.close(namespace)
        if isinstance(reply, Mounted) and fd is not None:
            return fd
        raise TransportError(f"the daemon answered a mount with {type(reply).__name__}")

    def unmount(self, mountpoint: str, lazy: bool = False) -> None:
        """Unmount the caller's FUSE mount at ``mountpoint``."""
        self._call(UnmountRequest(mountpoint, lazy), None)

    def ping(self) -> None:
        """Return when the daemon answers; raise when it does not."""
        self._call(PingRequest(), None)

    def _call(self, request: Request, fd: int | None) -> tuple[Reply, int | None]:
        deadline = self._monotonic() + self.timeout
        delay = FIRST_RETRY_DELAY
        while True:
            try:
                return self._exchange(request, fd, deadline)
            except ProxyRefusedError as refusal:
                pause = random.uniform(delay / 2, delay)
                if refusal.errno != errno.EAGAIN or self._monotonic() + pause >= deadline:
                    raise
            self._sleep(pause)
            delay = min(delay * 2, MAX_RETRY_DELAY)

    def _exchange(
        self, request: Request, fd: int | None, deadline: float
    ) -> tuple[Reply, int | None]:
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        except OSError as error:
            raise TransportError(f"cannot create a unix socket: {error}") from error
        transport = FdTransport(sock)
        try:
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.socket_path)
            except BlockingIOError as error:  # a unix socket's backlog is full
                raise ProxyRefusedError(
                    errno.EAGAIN,
                    f"the FUSE proxy at {self.socket_path} is busy: its queue of new connections "
                    "is full; retry later",
                ) from error
            except OSError as error:
                raise TransportError(
                    f"cannot reach the FUSE proxy at {self.socket_path}: "
                    f"{error.strerror or error} (is podwright's fuse-proxy DaemonSet running on "
                    f"this node, and its directory mounted? ${SOCKET_ENV} overrides the path)"
                ) from error
            unsent: TransportError | None = None
            try:
                transport.send(
                    encode_request(request, fd_attached=fd is not None), fd, self.timeout
                )
            except TransportError as error:
                # A daemon that refuses a connection at once (a busy one) answers and closes
                # before the request is sent: its answer is still there to read.
                unsent = error
                deadline = min(deadline, self._monotonic() + _LATE_ANSWER_WAIT)
            try:
                frame, received = transport.receive(deadline)
                reply = decode_reply(frame)
            except TransportError:
                if unsent is not None:
                    raise unsent from None
                raise
            except ProtocolError as error:
                raise TransportError(f"the FUSE proxy sent an invalid reply: {error}") from error
            if isinstance(reply, Mounted):
                try:
                    transport.send(encode_request(Received()), None, self.timeout)
                except TransportError:
                    if received is not None:
                        os.close(received)
                    raise
        finally:
            transport.close()
        if isinstance(reply, Failed):
            if received is not None:
                os.close(received)
            raise ProxyRefusedError(reply.errno, reply.message)
        return reply, received
