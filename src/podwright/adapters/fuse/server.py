"""The FUSE proxy daemon: a unix socket that mounts FUSE file systems for unprivileged callers.

One thread runs a selector over the listening socket and every connection still sending its
request: reading is cheap and bounded, so silent or slow clients cost nothing but a descriptor
each, until their request timeout closes them. It never blocks on a client: what it sends (a
refusal, a ping's answer) is sent without waiting, or not at all.

**Limits per caller.** The caller's uid comes from the kernel (SO_PEERCRED) when the connection
is accepted, before a byte is read, and :mod:`podwright.core.fuse_proxy.admission` counts what
each uid holds: connections (``max_connections_per_uid``, under the global ``max_connections``)
and requests handed to workers (``max_requests_per_uid``). A caller over a limit gets EAGAIN,
"... retry later", and the connection is closed; the client
(:class:`~podwright.adapters.fuse.client.ProxyClient`) retries such refusals with backoff within
its timeout. Refusals are logged once per burst and
then counted, so a flood does not flood the log. The queue of connections not yet accepted is as
long as the kernel allows, so that a flood cannot fill it and turn the others away before the
daemon knows who they are.

**The health check always answers.** A ping is answered by the selector thread itself, without
a worker, so it never waits behind mounts. Callers in the daemon's own mount namespace (its
liveness probe, ``podwright fuse-proxy ping`` run in its container) are exempt from every limit:
whatever the others do, a flood from any uid (root in another pod included) cannot refuse them.

**The work.** A complete mount or unmount request goes to a small pool of worker threads, which
identify the caller (:mod:`podwright.adapters.fuse.callers`), judge the request
(:mod:`podwright.core.fuse_proxy.mount_policy`), do the privileged work
(:mod:`podwright.adapters.fuse.mounter`), reply and close. Every blocking operation a worker
does has a deadline. Every descriptor (the connection, a namespace fd the caller sent, the
caller's pidfd and namespace, the FUSE device when the reply cannot be delivered) is closed on
every path; a mount whose descriptor was not acknowledged is detached again. The log tells what
happened, in order, each step with its own duration: ``mounted in 12.1 ms, descriptor delivered
in 0.3 ms``; or ``timed out after 5004 ms; the mount helper killed it``, then ``detached /x in
2.0 ms``.

**Shutdown is bounded** (SIGTERM or SIGINT): the daemon stops accepting (its socket is removed),
closes every connection still sending its request and every request not yet started ("shutting
down; retry later"), and gives the requests in progress ``shutdown_grace`` seconds. Then it
cancels what is left: the mount helper kills their children, the callers' sockets are shut for
reading (a worker waiting for an acknowledgement stops waiting), and the mounts that may have
been made are detached, all within :data:`CANCEL_LIMIT`. Last, the helper ends (or its process
group is killed). The daemon exits 0 within ``shutdown_grace`` + 1 s, whatever its callers or
children do. Signals wake the selector through :func:`signal.set_wakeup_fd`, so a signal that
arrives just before it blocks is never lost; and one that arrives during start-up (before it
serves) ends it the same way, with status 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import json
import logging
import os
import queue
import selectors
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from podwright.adapters.fuse import callers, syscalls
from podwright.adapters.fuse.errors import FuseProxyError, ServerSetupError, TransportError
from podwright.adapters.fuse.mounter import (
    SHUTTING_DOWN,
    MaybeMountedError,
    Mounter,
    OperationCancelledError,
    OperationTimedOutError,
)
from podwright.adapters.fuse.transport import FdTransport, PeerClosedError
from podwright.core.fuse_proxy.admission import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_UID,
    DEFAULT_MAX_REQUESTS_PER_UID,
    DEFAULT_WORKERS,
    Admission,
    Busy,
    DaemonLimits,
)
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
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
DEFAULT_SHUTDOWN_GRACE = 0.5
MAX_SHUTDOWN_GRACE = 20.0
"""The DaemonSet's pods have 30 s to stop; the grace stays well inside them."""
CANCEL_LIMIT = 0.4
"""Seconds cancelled requests have to end (their children killed, their mounts detached).
With the mount helper's own limit to exit (``mounter.HELPER_STOP_LIMIT``) it makes the second
the daemon may take after its grace."""
_STOPPING_SEND_TIMEOUT = 0.2
"""What a worker waits to send a reply once the daemon is stopping."""
_ACCEPTS_PER_ROUND = 64
"""Connections accepted before the selector looks at the others again (a flood cannot starve
the connections already in)."""
_REFUSAL_SUMMARY_INTERVAL = 10.0
_LIMIT_OPTIONS = {
    "max_connections": "--max-connections",
    "max_connections_per_uid": "--max-connections-per-uid",
    "max_requests_per_uid": "--max-requests-per-uid",
}


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """Where the daemon listens, what it allows, and its bounds."""

    socket_path: str
    policy: ProxyPolicy
    request_timeout: float = 5.0
    """Seconds a client has to send its whole request (and to acknowledge a mount)."""
    operation_timeout: float = 10.0
    """Seconds one mount or unmount may take before its child is killed."""
    workers: int = DEFAULT_WORKERS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_uid: int = DEFAULT_MAX_CONNECTIONS_PER_UID
    max_requests_per_uid: int = DEFAULT_MAX_REQUESTS_PER_UID
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    """Seconds requests in progress have to finish after SIGTERM before they are cancelled."""
    fuse_device: str = "/dev/fuse"
    proc_root: str = "/proc"

    def __post_init__(self) -> None:
        for name in ("request_timeout", "operation_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.shutdown_grace <= MAX_SHUTDOWN_GRACE:
            raise ValueError(
                f"shutdown_grace must be between 0 and {MAX_SHUTDOWN_GRACE:g} seconds, "
                f"got {self.shutdown_grace}"
            )
        self.limits  # noqa: B018 (checks the limits: a ValueError names the one that is wrong)
        if not os.path.isabs(self.socket_path):
            raise ValueError(f"socket_path must be absolute, got {self.socket_path!r}")

    @property
    def limits(self) -> DaemonLimits:
        """The workers and connection limits (checked: a ValueError names the one that is wrong)."""
        return DaemonLimits(
            self.workers,
            self.max_connections,
            self.max_connections_per_uid,
            self.max_requests_per_uid,
        )

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
    """A connection still sending its request."""

    transport: FdTransport
    deadline: float
    uid: int
    pid: int


@dataclasses.dataclass(eq=False)
class _Work:
    """A complete mount or unmount request, handed to the workers."""

    transport: FdTransport
    request: MountRequest | UnmountRequest
    sent_fd: int | None
    uid: int
    pid: int

    def close(self) -> None:
        if self.sent_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.sent_fd)
            self.sent_fd = None
        self.transport.close()


class _Refusals:
    """Refusals for being over a limit, logged without flooding the log: the first of a burst
    at once, then how many more every :data:`_REFUSAL_SUMMARY_INTERVAL` seconds."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, str], int] = {}
        self.next_summary: float | None = None

    def note(self, uid: int, busy: Busy, now: float) -> None:
        key = (uid, busy.limit)
        if key in self._counts:
            self._counts[key] += 1
            return
        self._counts[key] = 0
        LOG.warning(
            "refusing user %d: %s (%s); more refusals are counted every %gs",
            uid,
            busy.message,
            _LIMIT_OPTIONS[busy.limit],
            _REFUSAL_SUMMARY_INTERVAL,
        )
        if self.next_summary is None:
            self.next_summary = now + _REFUSAL_SUMMARY_INTERVAL

    def summarize(self, now: float) -> None:
        if self.next_summary is None or now < self.next_summary:
            return
        for (uid, limit), count in list(self._counts.items()):
            if count:
                LOG.warning(
                    "refused user %d %d more times in the last %gs (%s)",
                    uid,
                    count,
                    _REFUSAL_SUMMARY_INTERVAL,
                    _LIMIT_OPTIONS[limit],
                )
                self._counts[(uid, limit)] = 0
            else:
                del self._counts[(uid, limit)]  # the burst is over: the next one is logged at once
        self.next_summary = now + _REFUSAL_SUMMARY_INTERVAL if self._counts else None


class FuseProxyServer:
    """Serve requests on ``config.socket_path`` until :meth:`shutdown`."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._mounter = Mounter(config.fuse_device, config.operation_timeout)
        self._listener: socket.socket | None = None
        self._socket_identity: tuple[int, int] | None = None
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stopping = False
        """Set by :meth:`shutdown` (and read by every thread): a plain attribute, not an Event,
        because a signal handler must take no lock (see :meth:`shutdown`)."""
        self._cancelling = threading.Event()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._admission = Admission(config.limits)
        self._active: set[_Work] = set()
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._refusals = _Refusals()
        self._namespace = _namespace_identity(f"{config.proc_root}/self/ns/mnt")

    @property
    def wakeup_fd(self) -> int:
        """The write end of the selector's wake-up pipe, for :func:`signal.set_wakeup_fd`."""
        return self._wake_write

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
            # The queue of connections not yet accepted costs the daemon no descriptor, and the
            # selector accepts (and refuses, when over a limit) at once; a short queue would let
            # a flood fill it, and every other caller's connect would fail before the daemon
            # could tell who it is. So: as long as the kernel allows (net.core.somaxconn).
            listener.listen(socket.SOMAXCONN)
            listener.setblocking(False)
        except OSError as error:
            listener.close()
            raise ServerSetupError(f"cannot listen on {path}: {error.strerror}") from error
        identity = os.stat(path)
        self._socket_identity = (identity.st_dev, identity.st_ino)
        self._listener = listener

    def serve_forever(self) -> None:
        """Accept and serve until :meth:`shutdown`; binds first if :meth:`bind` was not called.

        Returns within ``shutdown_grace`` + 1 s of :meth:`shutdown` (see the module docstring).
        """
        if self._listener is None and not self._stopping:
            self.bind()
        pending: dict[int, _Pending] = {}
        selector = selectors.DefaultSelector()
        try:
            if not self._stopping:
                assert self._listener is not None
                selector.register(self._listener, selectors.EVENT_READ)
                selector.register(self._wake_read, selectors.EVENT_READ)
                self._mounter.start()  # before any worker thread exists
                self._start_workers()
            if self._stopping:
                LOG.info("stopping before serving")
            else:
                LOG.info("serving on %s", self.config.socket_path)
            while not self._stopping:
                for key, _ in selector.select(self._next_timeout(pending)):
                    if key.fileobj is self._listener:
                        self._accept(selector, pending)
                    elif key.fileobj == self._wake_read:
                        self._drain_wakeups()
                    else:
                        self._read(selector, pending, key.fd)
                now = time.monotonic()
                self._expire(selector, pending, now)
                self._refusals.summarize(now)
        finally:
            self._stop(selector, pending)

    def shutdown(self) -> None:
        """Stop serving; safe from any thread or a signal handler.

        It takes no lock: a handler that did (``threading.Event.set`` does) deadlocks the
        daemon when a second signal interrupts the first one's handler while it holds the lock.
        """
        self._stopping = True
        with contextlib.suppress(OSError):
            os.write(self._wake_write, b"\0")

    def close(self) -> None:
        """Release the wake-up pipe; call after :meth:`serve_forever` returned."""
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._wake_read = self._wake_write = -1

    # The selector thread: accept, read, answer pings, hand requests over, expire.

    def _start_workers(self) -> None:
        for index in range(self.config.workers):
            # Daemon threads: a worker stuck beyond every bound must not keep the process alive.
            worker = threading.Thread(
                target=self._work_loop, name=f"fuse-proxy-{index}", daemon=True
            )
            worker.start()
            self._workers.append(worker)

    def _drain_wakeups(self) -> None:
        try:
            data = os.read(self._wake_read, 512)
        except BlockingIOError:
            return
        # Bytes written by the C-level signal handler are the signal numbers: act on them even
        # before the Python-level handler has run.
        if STOP_SIGNALS.intersection(data):
            self._stopping = True

    def _next_timeout(self, pending: dict[int, _Pending]) -> float | None:
        moments = [entry.deadline for entry in pending.values()]
        if self._refusals.next_summary is not None:
            moments.append(self._refusals.next_summary)
        if not moments:
            return None
        return max(0.0, min(moments) - time.monotonic())

    def _accept(self, selector: selectors.BaseSelector, pending: dict[int, _Pending]) -> None:
        assert self._listener is not None
        for _ in range(_ACCEPTS_PER_ROUND):
            try:
                connection, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # EMFILE and kin: keep serving the others
                LOG.warning("cannot accept a connection: %s", error)
                return
            try:
                pid, uid, _ = syscalls.peer_credentials(connection)
            except OSError as error:
                LOG.info("dropping a connection without credentials: %s", error)
                connection.close()
                continue
            transport = FdTransport(connection)
            with self._lock:
                busy = self._admission.open_connection(uid, functools.partial(self._is_local, pid))
            if busy is not None:
                self._refusals.note(uid, busy, time.monotonic())
                _reply_now(transport, Failed(busy.errno, busy.message))
                transport.close()
                continue
            connection.setblocking(False)
            deadline = time.monotonic() + self.config.request_timeout
            pending[connection.fileno()] = _Pending(transport, deadline, uid, pid)
            selector.register(connection, selectors.EVENT_READ)

    def _read(
        self, selector: selectors.BaseSelector, pending: dict[int, _Pending], fd: int
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
        frame, sent_fd = entry.transport.take()
        answer: Reply
        try:
            request = decode_request(frame)
        except ProtocolError as error:
            answer = Failed(errno.EPROTO, f"bad request: {error}")
        else:
            if isinstance(request, MountRequest | UnmountRequest):
                self._hand_over(_Work(entry.transport, request, sent_fd, entry.uid, entry.pid))
                return
            if isinstance(request, PingRequest):  # answered here: it never waits behind mounts
                answer = Done()
                LOG.debug("ping from uid=%d pid=%d: answered", entry.uid, entry.pid)
            else:
                answer = Failed(errno.EPROTO, "nothing to acknowledge: no mount was made")
        if sent_fd is not None:
            os.close(sent_fd)
        _reply_now(entry.transport, answer)
        self._close_connection(entry.transport, entry.uid)

    def _hand_over(self, work: _Work) -> None:
        with self._lock:
            busy = self._admission.start_request(
                work.uid, functools.partial(self._is_local, work.pid)
            )
            if busy is None:
                self._active.add(work)
        if busy is None:
            self._queue.put(work)
            return
        self._refusals.note(work.uid, busy, time.monotonic())
        _reply_now(work.transport, Failed(busy.errno, busy.message))
        work.close()
        with self._lock:
            self._admission.close_connection(work.uid)

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
            _reply_now(entry.transport, reply)
        self._close_connection(entry.transport, entry.uid)

    def _close_connection(self, transport: FdTransport, uid: int) -> None:
        transport.close()
        with self._lock:
            self._admission.close_connection(uid)

    def _expire(
        self, selector: selectors.BaseSelector, pending: dict[int, _Pending], now: float
    ) -> None:
        limit = self.config.request_timeout
        for fd in [fd for fd, entry in pending.items() if entry.deadline <= now]:
            self._drop(
                selector,
                pending,
                fd,
                Failed(errno.ETIMEDOUT, f"no complete request within {limit:g}s"),
            )

    def _is_local(self, pid: int) -> bool:
        """Whether the peer runs in the daemon's own mount namespace (its container)."""
        if pid <= 0 or self._namespace is None:
            return False
        return _namespace_identity(f"{self.config.proc_root}/{pid}/ns/mnt") == self._namespace

    # Shutting down (see the module docstring).

    def _stop(self, selector: selectors.BaseSelector, pending: dict[int, _Pending]) -> None:
        started = time.monotonic()
        self._stopping = True
        self._close_listener()
        if self._workers:
            with self._lock:
                in_progress = len(self._active)
            LOG.info(
                "stopping: no longer accepting; closing %d connection(s) still sending their "
                "request; %d request(s) in progress",
                len(pending),
                in_progress,
            )
        for fd in list(pending):
            self._drop(selector, pending, fd, Failed(errno.EAGAIN, SHUTTING_DOWN))
        selector.close()
        self._refuse_queued()
        if self._wait_for_workers(self.config.shutdown_grace):
            self._cancel()
        for _ in self._workers:
            self._queue.put(None)
        self._mounter.close()
        LOG.info("stopped in %.0f ms", _ms(started))

    def _cancel(self) -> None:
        with self._lock:
            active = list(self._active)
        LOG.info(
            "cancelling %d request(s) still in progress after the %gs shutdown grace",
            len(active),
            self.config.shutdown_grace,
        )
        self._cancelling.set()
        self._mounter.cancel()
        for work in active:
            with contextlib.suppress(OSError):
                work.transport.sock.shutdown(socket.SHUT_RD)
        self._refuse_queued()
        left = self._wait_for_workers(CANCEL_LIMIT)
        if left:
            LOG.warning(
                "%d request(s) did not end within %gs of their cancellation; exiting without them",
                left,
                CANCEL_LIMIT,
            )

    def _wait_for_workers(self, limit: float) -> int:
        """Wait until no request is in progress, at most ``limit`` seconds; how many still are."""
        with self._lock:
            self._idle.wait_for(lambda: not self._active, timeout=limit)
            return len(self._active)

    def _refuse_queued(self) -> None:
        """Refuse the requests no worker has started yet (a worker may take some meanwhile)."""
        while True:
            try:
                work = self._queue.get_nowait()
            except queue.Empty:
                return
            if work is not None:
                self._refuse_stopping(work)
                self._finish(work)

    def _close_listener(self) -> None:
        if self._listener is None:
            return
        self._listener.close()
        self._listener = None
        with contextlib.suppress(OSError):
            current = os.stat(self.config.socket_path)
            if (current.st_dev, current.st_ino) == self._socket_identity:
                os.unlink(self.config.socket_path)

    # The workers.

    def _work_loop(self) -> None:
        while (work := self._queue.get()) is not None:
            try:
                if self._stopping:
                    self._refuse_stopping(work)
                else:
                    self._serve(work)
            finally:
                self._finish(work)

    def _finish(self, work: _Work) -> None:
        work.close()
        with self._lock:
            self._admission.finish_request(work.uid)
            self._admission.close_connection(work.uid)
            self._active.discard(work)
            self._idle.notify_all()

    def _refuse_stopping(self, work: _Work) -> None:
        LOG.info("%s for uid=%d: refused: shutting down", _describe(work.request), work.uid)
        _reply_now(work.transport, Failed(errno.EAGAIN, SHUTTING_DOWN))

    def _serve(self, work: _Work) -> None:
        started = time.monotonic()
        caller: callers.Caller | None = None
        what, who = _describe(work.request), f"uid={work.uid} pid={work.pid}"
        try:
            caller = callers.identify(work.transport.sock, self.config.proc_root, work.sent_fd)
            who = caller.describe()
            if isinstance(work.request, UnmountRequest):
                self._unmount(work.request, caller)
                LOG.info("%s for %s: unmounted in %.1f ms", what, who, _ms(started))
                self._send(work.transport, Done())
            else:
                self._mount(work, caller, what, started)
        except OperationTimedOutError as error:
            LOG.warning(
                "%s for %s: timed out after %.0f ms; the mount helper killed it",
                what,
                who,
                _ms(started),
            )
            _reply_quietly(work.transport, Failed(error.errno, error.message))
        except OperationCancelledError as error:
            LOG.info(
                "%s for %s: cancelled after %.0f ms: the daemon is shutting down",
                what,
                who,
                _ms(started),
            )
            _reply_quietly(work.transport, Failed(error.errno, error.message))
        except RequestRefusedError as refusal:
            LOG.info("%s for %s: refused in %.1f ms: %s", what, who, _ms(started), refusal.message)
            _reply_quietly(work.transport, Failed(refusal.errno, refusal.message))
        except FuseProxyError as error:
            LOG.info("%s for %s: %s", what, who, error)
        except Exception:
            LOG.exception("%s for %s failed", what, who)
            _reply_quietly(work.transport, Failed(errno.EIO, "internal error in the FUSE proxy"))
        finally:
            if caller is not None:
                caller.close()

    def _unmount(self, request: UnmountRequest, caller: callers.Caller) -> None:
        components = check_mountpoint(request.mountpoint, self.config.policy.mount_prefixes)
        find_unmount_target(caller.mountinfo(), request.mountpoint, caller.uid)
        self._mounter.unmount(caller, components, request.lazy)

    def _mount(self, work: _Work, caller: callers.Caller, what: str, started: float) -> None:
        """Mount, deliver the descriptor, and log each step; detach what was not delivered."""
        assert isinstance(work.request, MountRequest)
        policy = self.config.policy
        components = check_mountpoint(work.request.mountpoint, policy.mount_prefixes)
        plan = plan_mount(work.request.options, policy, caller.uid, caller.gid)
        check_mount_quota(caller.mountinfo(), caller.uid, policy)
        who = caller.describe()
        try:
            device = self._mounter.mount(caller, components, plan)
        except MaybeMountedError as error:
            outcome = (
                "cancelled (the daemon is shutting down)"
                if isinstance(error.cause, OperationCancelledError)
                else "timed out; the mount helper killed it"
            )
            LOG.warning(
                "%s for %s: %s after %.0f ms, once it had called mount(2)",
                what,
                who,
                outcome,
                _ms(started),
            )
            self._detach(what, who, caller, components)
            _reply_quietly(work.transport, Failed(error.errno, error.message))
            return
        mounted_ms = _ms(started)
        delivering = time.monotonic()
        problem = self._deliver(work.transport, device)
        if problem is None:
            LOG.info(
                "%s for %s: mounted in %.1f ms, descriptor delivered in %.1f ms",
                what,
                who,
                mounted_ms,
                _ms(delivering),
            )
            return
        LOG.warning(
            "%s for %s: mounted in %.1f ms, but the descriptor was not taken after %.0f ms: %s",
            what,
            who,
            mounted_ms,
            _ms(delivering),
            problem,
        )
        self._detach(what, who, caller, components)

    def _deliver(self, transport: FdTransport, device: int) -> str | None:
        """Send the descriptor and wait for the caller's acknowledgement; why not, if it failed."""
        try:
            transport.send(encode_reply(Mounted()), device, self._send_timeout())
            frame, stray = transport.receive(time.monotonic() + self.config.request_timeout)
            if stray is not None:
                os.close(stray)
            answer = decode_request(frame)
            if isinstance(answer, Received):
                return None
            return f"the caller sent {_describe(answer)} instead of an acknowledgement"
        except PeerClosedError:
            if self._cancelling.is_set():
                return "cancelled: the daemon is shutting down"
            return "the caller closed the connection"
        except (TransportError, ProtocolError) as error:
            return str(error)
        finally:
            os.close(device)

    def _detach(
        self, what: str, who: str, caller: callers.Caller, components: tuple[str, ...]
    ) -> None:
        """Detach a mount nobody will serve (undelivered, or its child killed after mount(2))."""
        started = time.monotonic()
        path = "/" + "/".join(components)
        try:
            self._mounter.undo_mount(caller, components)
        except RequestRefusedError as refusal:
            LOG.warning(
                "%s for %s: could not detach %s (%.1f ms): %s",
                what,
                who,
                path,
                _ms(started),
                refusal.message,
            )
        else:
            LOG.info("%s for %s: detached %s in %.1f ms", what, who, path, _ms(started))

    def _send(self, transport: FdTransport, reply: Reply) -> None:
        transport.send(encode_reply(reply), None, self._send_timeout())

    def _send_timeout(self) -> float:
        if self._stopping:
            return _STOPPING_SEND_TIMEOUT
        return self.config.request_timeout


def _is_served(path: str) -> bool:
    """Whether a process listens on the socket at ``path``: only a refused connection says no
    (a listener whose backlog is full, as under a flood, does not answer at once, but is alive)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        probe.settimeout(1.0)
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError:
        return True
    finally:
        probe.close()
    return True


def _namespace_identity(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def _reply_now(transport: FdTransport, reply: Reply) -> None:
    """Send ``reply`` without waiting (the selector thread never blocks on a client)."""
    with contextlib.suppress(TransportError, OSError):
        transport.send(encode_reply(reply), None, 0.0)


def _reply_quietly(transport: FdTransport, reply: Failed) -> None:
    """Tell the peer why, if it still listens; a peer that left is not an error."""
    with contextlib.suppress(TransportError, OSError):
        transport.send(encode_reply(reply), None, _STOPPING_SEND_TIMEOUT)


def _describe(request: Request) -> str:
    if isinstance(request, MountRequest):
        return f"mount {request.mountpoint!r} -o {','.join(request.options) or '(none)'}"
    if isinstance(request, UnmountRequest):
        return f"unmount {request.mountpoint!r}{' (lazy)' if request.lazy else ''}"
    return "ping" if isinstance(request, PingRequest) else "an acknowledgement"


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def serve(config: ServerConfig) -> None:
    """Bind and serve until SIGTERM or SIGINT (in the main thread); a setup error is raised
    before serving starts.

    SIGTERM and SIGINT may arrive blocked (``podwright fuse-proxy server`` blocks them before it
    becomes this process): they are unblocked once the handlers and the wake-up descriptor are
    in place, so one sent during start-up is acted upon, not fatal. The first one starts the
    stop; the ones after it are ignored.
    """
    server = FuseProxyServer(config)

    def stop(_number: int, _frame: FrameType | None) -> None:
        # The stop is under way, and bounded: later signals are ignored. Handled, a burst of
        # them would run this handler inside itself until the stack overflows; and one that
        # arrives while the interpreter exits (it restores the default actions) would kill it.
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        server.shutdown()

    previous_wakeup = signal.set_wakeup_fd(server.wakeup_fd, warn_on_full_buffer=False)
    for number in STOP_SIGNALS:
        signal.signal(number, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        server.serve_forever()
    finally:
        signal.set_wakeup_fd(previous_wakeup)
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
