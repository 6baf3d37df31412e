"""The FUSE proxy daemon: a unix socket that mounts FUSE file systems for unprivileged callers.

One thread runs a selector over the listening socket and every connection still sending its
request: reading is cheap and bounded, so a thousand silent or slow clients cost nothing but a
descriptor each, until their request timeout closes them. A complete request goes to a small
pool of workers, which identify the caller from the kernel, judge the request
(:mod:`podwright.core.fuse_proxy.mount_policy`), do the privileged work
(:mod:`podwright.adapters.fuse.mounter`), reply and close. Connections beyond
``max_connections`` are told the daemon is busy and closed at once. Every descriptor (the
connection, a namespace fd the caller sent, the caller's pidfd and namespace, the FUSE device
when the reply cannot be delivered) is closed on every path; a mount whose descriptor could not
be delivered is detached again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import selectors
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any

from podwright.adapters.fuse import callers
from podwright.adapters.fuse.errors import FuseProxyError, ServerSetupError, TransportError
from podwright.adapters.fuse.mounter import Mounter
from podwright.adapters.fuse.transport import FdTransport, PeerClosedError
from podwright.core.fuse_proxy.mount_policy import (
    ProxyPolicy,
    RequestRefusedError,
    check_mount_quota,
    check_mountpoint,
    find_unmount_target,
    plan_mount,
)
from podwright.core.fuse_proxy.protocol import (
    Done,
    Failed,
    Mounted,
    MountRequest,
    PingRequest,
    ProtocolError,
    Received,
    Reply,
    Request,
    UnmountRequest,
    decode_request,
    encode_reply,
)

LOG = logging.getLogger("podwright.fuse_proxy")


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Where the daemon listens, what it allows, and its bounds."""

    socket_path: str
    policy: ProxyPolicy
    request_timeout: float = 5.0
    operation_timeout: float = 10.0
    workers: int = 8
    max_connections: int = 256
    fuse_device: str = "/dev/fuse"
    proc_root: str = "/proc"

    def __post_init__(self) -> None:
        for name in ("request_timeout", "operation_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("workers", "max_connections"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not os.path.isabs(self.socket_path):
            raise ValueError(f"socket_path must be absolute, got {self.socket_path!r}")

    def to_json(self) -> str:
        """The configuration as JSON, for :func:`main` in a fresh process."""
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServerConfig:
        """A configuration from :meth:`to_json`; every value is checked again."""
        values: dict[str, Any] = json.loads(text)
        policy = values.pop("policy")
        policy["mount_prefixes"] = tuple(policy["mount_prefixes"])
        return cls(policy=ProxyPolicy(**policy), **values)


@dataclasses.dataclass
class _Pending:
    transport: FdTransport
    deadline: float


class FuseProxyServer:
    """Serve requests on ``config.socket_path`` until :meth:`shutdown`."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._mounter = Mounter(config.fuse_device, config.operation_timeout)
        self._listener: socket.socket | None = None
        self._socket_identity: tuple[int, int] | None = None
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stopping = threading.Event()
        self._in_flight = 0
        self._lock = threading.Lock()

    def bind(self) -> None:
        """Create the socket (and its directory), refusing to replace a live daemon's socket."""
        path = self.config.socket_path
        directory = os.path.dirname(path)
        try:
            os.makedirs(directory, mode=0o755, exist_ok=True)
            existing = os.lstat(path)
        except FileNotFoundError:
            existing = None
        except OSError as error:
            raise ServerSetupError(f"cannot prepare {directory}: {error.strerror}") from error
        if existing is not None:
            if not stat.S_ISSOCK(existing.st_mode):
                raise ServerSetupError(f"{path} exists and is not a socket; refusing to replace it")
            if _is_served(path):
                raise ServerSetupError(f"another FUSE proxy daemon is listening on {path}")
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            listener.bind(path)
            os.chmod(path, 0o666)  # anyone may connect; identity comes from SO_PEERCRED
            listener.listen(min(self.config.max_connections, socket.SOMAXCONN))
            listener.setblocking(False)
        except OSError as error:
            listener.close()
            raise ServerSetupError(f"cannot listen on {path}: {error.strerror}") from error
        identity = os.stat(path)
        self._socket_identity = (identity.st_dev, identity.st_ino)
        self._listener = listener

    def serve_forever(self) -> None:
        """Accept and serve until :meth:`shutdown`; binds first if :meth:`bind` was not called."""
        if self._listener is None:
            self.bind()
        assert self._listener is not None
        pending: dict[int, _Pending] = {}
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)
        self._mounter.fork_server.start()  # before any worker thread exists
        pool = ThreadPoolExecutor(self.config.workers, thread_name_prefix="fuse-proxy")
        LOG.info("serving on %s", self.config.socket_path)
        try:
            while not self._stopping.is_set():
                timeout = _next_timeout(pending)
                for key, _ in selector.select(timeout):
                    if key.fileobj is self._listener:
                        self._accept(selector, pending)
                    elif key.fileobj == self._wake_read:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_read, 512)
                    else:
                        self._read(selector, pending, key.fd, pool)
                self._expire(selector, pending)
        finally:
            for entry in pending.values():
                entry.transport.close()
            selector.close()
            pool.shutdown(wait=True)
            self._mounter.close()
            self._close_listener()
            LOG.info("stopped")

    def shutdown(self) -> None:
        """Stop serving (safe from any thread or a signal handler)."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"x")

    def close(self) -> None:
        """Release the wake-up pipe; call after :meth:`serve_forever` returned."""
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _close_listener(self) -> None:
        if self._listener is None:
            return
        self._listener.close()
        self._listener = None
        with contextlib.suppress(OSError):
            current = os.stat(self.config.socket_path)
            if (current.st_dev, current.st_ino) == self._socket_identity:
                os.unlink(self.config.socket_path)

    def _accept(self, selector: selectors.BaseSelector, pending: dict[int, _Pending]) -> None:
        assert self._listener is not None
        while True:
            try:
                connection, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # EMFILE and kin: keep serving the others
                LOG.warning("cannot accept a connection: %s", error)
                return
            transport = FdTransport(connection)
            with self._lock:
                busy = len(pending) + self._in_flight >= self.config.max_connections
            if busy:
                _reply_quietly(transport, Failed(errno.EAGAIN, "the FUSE proxy is busy; try again"))
                transport.close()
                continue
            connection.setblocking(False)
            deadline = time.monotonic() + self.config.request_timeout
            pending[connection.fileno()] = _Pending(transport, deadline)
            selector.register(connection, selectors.EVENT_READ)

    def _read(
        self,
        selector: selectors.BaseSelector,
        pending: dict[int, _Pending],
        fd: int,
        pool: ThreadPoolExecutor,
    ) -> None:
        entry = pending[fd]
        try:
            complete = entry.transport.pump()
        except BlockingIOError:
            return
        except ProtocolError as error:
            self._drop(selector, pending, fd, Failed(errno.EPROTO, f"bad request: {error}"))
            return
        except PeerClosedError:
            self._drop(selector, pending, fd, None)
            return
        except TransportError as error:
            LOG.info("dropping a connection: %s", error)
            self._drop(selector, pending, fd, None)
            return
        if not complete:
            return
        selector.unregister(entry.transport.sock)
        del pending[fd]
        with self._lock:
            self._in_flight += 1
        pool.submit(self._serve, entry.transport)

    def _drop(
        self,
        selector: selectors.BaseSelector,
        pending: dict[int, _Pending],
        fd: int,
        reply: Failed | None,
    ) -> None:
        entry = pending.pop(fd)
        selector.unregister(entry.transport.sock)
        if reply is not None:
            _reply_quietly(entry.transport, reply)
        entry.transport.close()

    def _expire(self, selector: selectors.BaseSelector, pending: dict[int, _Pending]) -> None:
        now = time.monotonic()
        for fd in [fd for fd, entry in pending.items() if entry.deadline <= now]:
            limit = self.config.request_timeout
            self._drop(
                selector,
                pending,
                fd,
                Failed(errno.ETIMEDOUT, f"no complete request within {limit:g}s"),
            )

    def _serve(self, transport: FdTransport) -> None:
        started = time.monotonic()
        sent_fd: int | None = None
        caller: callers.Caller | None = None
        what = "request"
        try:
            frame, sent_fd = transport.take()
            request = decode_request(frame)
            what = _describe(request)
            caller = callers.identify(transport.sock, self.config.proc_root, sent_fd)
            outcome = self._perform(request, caller)
            if isinstance(outcome, _Delivery):
                self._deliver(transport, outcome, caller)
            else:
                transport.send(encode_reply(outcome), None, self.config.request_timeout)
            LOG.info("%s for %s: ok in %.1f ms", what, _who(caller), _ms(started))
        except RequestRefusedError as refusal:
            LOG.info("%s for %s: refused: %s", what, _who(caller), refusal.message)
            _reply_quietly(transport, Failed(refusal.errno, refusal.message))
        except ProtocolError as error:
            _reply_quietly(transport, Failed(errno.EPROTO, f"bad request: {error}"))
        except FuseProxyError as error:
            LOG.info("%s for %s: %s", what, _who(caller), error)
        except Exception:
            LOG.exception("%s for %s failed", what, _who(caller))
            _reply_quietly(transport, Failed(errno.EIO, "internal error in the FUSE proxy"))
        finally:
            if sent_fd is not None:
                os.close(sent_fd)
            if caller is not None:
                caller.close()
            transport.close()
            with self._lock:
                self._in_flight -= 1

    def _perform(self, request: Request, caller: callers.Caller) -> Reply | _Delivery:
        """A reply, or for a mount the FUSE descriptor to deliver."""
        policy = self.config.policy
        if isinstance(request, PingRequest):
            return Done()
        if isinstance(request, Received):
            raise RequestRefusedError(errno.EPROTO, "nothing to acknowledge: no mount was made")
        components = check_mountpoint(request.mountpoint, policy.mount_prefixes)
        mounts = caller.mountinfo()
        if isinstance(request, UnmountRequest):
            find_unmount_target(mounts, request.mountpoint, caller.uid)
            self._mounter.unmount(caller, components, request.lazy)
            return Done()
        plan = plan_mount(request.options, policy, caller.uid, caller.gid)
        check_mount_quota(mounts, caller.uid, policy)
        return _Delivery(self._mounter.mount(caller, components, plan), components)

    def _deliver(self, transport: FdTransport, delivery: _Delivery, caller: callers.Caller) -> None:
        """Send the descriptor and wait for the caller to acknowledge it; else detach the mount."""
        acknowledged = False
        try:
            transport.send(encode_reply(Mounted()), delivery.device, self.config.request_timeout)
            frame, stray = transport.receive(time.monotonic() + self.config.request_timeout)
            if stray is not None:
                os.close(stray)
            acknowledged = isinstance(decode_request(frame), Received)
        except (TransportError, ProtocolError):
            pass
        finally:
            os.close(delivery.device)
            if not acknowledged:
                self._detach(caller, delivery.components)

    def _detach(self, caller: callers.Caller, components: tuple[str, ...]) -> None:
        """The caller left before it held its descriptor: detach the mount nobody would serve."""
        path = "/" + "/".join(components)
        try:
            self._mounter.undo_mount(caller, components)
        except RequestRefusedError as refusal:
            LOG.warning("could not detach %s after its caller left: %s", path, refusal.message)
        else:
            LOG.info("detached %s: its caller did not take the descriptor", path)


@dataclasses.dataclass(frozen=True)
class _Delivery:
    device: int
    components: tuple[str, ...]


def _is_served(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _next_timeout(pending: dict[int, _Pending]) -> float | None:
    if not pending:
        return None
    return max(0.0, min(entry.deadline for entry in pending.values()) - time.monotonic())


def _reply_quietly(transport: FdTransport, reply: Failed) -> None:
    """Tell the peer why, if it still listens; a peer that left is not an error."""
    with contextlib.suppress(TransportError, OSError):
        transport.send(encode_reply(reply), None, 1.0)


def _describe(request: Request) -> str:
    if isinstance(request, MountRequest):
        return f"mount {request.mountpoint!r} -o {','.join(request.options) or '(none)'}"
    if isinstance(request, UnmountRequest):
        return f"unmount {request.mountpoint!r}{' (lazy)' if request.lazy else ''}"
    return "ping" if isinstance(request, PingRequest) else "an acknowledgement"


def _who(caller: callers.Caller | None) -> str:
    return caller.describe() if caller is not None else "an unidentified caller"


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def serve(config: ServerConfig) -> None:
    """Bind and serve until SIGTERM or SIGINT; a setup error is raised before serving starts."""
    server = FuseProxyServer(config)
    try:
        server.bind()

        def stop(_number: int, _frame: FrameType | None) -> None:
            server.shutdown()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        server.serve_forever()
    finally:
        server.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m podwright.adapters.fuse.server CONFIG_JSON LOG_LEVEL``.

    ``podwright fuse-proxy server`` checks its options and then replaces itself with this small
    process: the daemon forks for every request, and a fork costs in proportion to the memory
    of the process (the full command line loads the Kubernetes models, about three times as
    much), which the benchmark measures as milliseconds per mount.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print(
            "usage: python -m podwright.adapters.fuse.server CONFIG_JSON LOG_LEVEL", file=sys.stderr
        )
        return 2
    logging.basicConfig(
        level=args[1].upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        serve(ServerConfig.from_json(args[0]))
    except (ValueError, KeyError, TypeError) as error:
        print(f"podwright fuse-proxy server: bad configuration: {error}", file=sys.stderr)
        return 2
    except ServerSetupError as error:
        print(f"podwright fuse-proxy server: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
