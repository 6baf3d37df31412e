"""How much of the FUSE proxy daemon one caller may take: connections and requests per uid.

Any container on the node can connect to the daemon's socket, so one caller must not be able to
deny service to the others by holding connections open or keeping the workers busy. The daemon
knows a caller's uid from the kernel (SO_PEERCRED) as soon as it accepts the connection, before
it reads a byte, and counts per uid: the connections it holds (``max_connections_per_uid``), and
the requests handed to its workers (``max_requests_per_uid``), under the global
``max_connections``. A caller over a limit gets EAGAIN and a message that names the limit and
says to retry later; the daemon's own clients (its liveness probe) are exempt
(:meth:`Admission.open_connection` asks only when a limit would refuse).

:class:`Admission` is plain bookkeeping, with no lock and no clock: the daemon calls it under its
own lock.
"""

from __future__ import annotations

import dataclasses
import errno
from collections import Counter
from collections.abc import Callable

DEFAULT_WORKERS = 8
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_MAX_CONNECTIONS_PER_UID = 32
DEFAULT_MAX_REQUESTS_PER_UID = 4
RETRY_LATER = "retry later"
"""Every refusal for being over a limit ends with these words (and carries EAGAIN)."""


@dataclasses.dataclass(frozen=True)
class DaemonLimits:
    """The daemon's capacity, and how much of it one uid may take."""

    workers: int = DEFAULT_WORKERS
    """Threads that carry out mounts and unmounts."""
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    """Connections the daemon holds at once (accepted and not yet closed), all callers together."""
    max_connections_per_uid: int = DEFAULT_MAX_CONNECTIONS_PER_UID
    """Connections one uid may hold at once; well below ``max_connections``, so that one uid
    never takes them all."""
    max_requests_per_uid: int = DEFAULT_MAX_REQUESTS_PER_UID
    """Requests of one uid handed to workers (queued or running) at once; below the number of
    workers, so that one uid's slow mounts never occupy every worker."""

    def __post_init__(self) -> None:
        for name in (
            "workers",
            "max_connections",
            "max_connections_per_uid",
            "max_requests_per_uid",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if self.max_connections_per_uid > self.max_connections:
            raise ValueError(
                f"max_connections_per_uid ({self.max_connections_per_uid}) must not exceed "
                f"max_connections ({self.max_connections})"
            )
        if self.max_requests_per_uid > self.max_connections_per_uid:
            raise ValueError(
                f"max_requests_per_uid ({self.max_requests_per_uid}) must not exceed "
                f"max_connections_per_uid ({self.max_connections_per_uid}): "
                "every request holds a connection"
            )
        if self.max_requests_per_uid > self.workers:
            raise ValueError(
                f"max_requests_per_uid ({self.max_requests_per_uid}) must not exceed "
                f"workers ({self.workers})"
            )


@dataclasses.dataclass(frozen=True)
class Busy:
    """A refusal for being over a limit: the caller may retry later."""

    limit: str
    """Which limit: ``max_connections``, ``max_connections_per_uid`` or ``max_requests_per_uid``."""
    message: str
    errno: int = errno.EAGAIN


class Admission:
    """Connections and requests per uid, admitted within :class:`DaemonLimits`.

    Every admitted connection must be closed (:meth:`close_connection`) and every started
    request finished (:meth:`finish_request`) exactly once; exempt ones are counted too.
    """

    def __init__(self, limits: DaemonLimits) -> None:
        self.limits = limits
        self._connections: Counter[int] = Counter()
        self._requests: Counter[int] = Counter()

    @property
    def total_connections(self) -> int:
        return self._connections.total()

    def connections(self, uid: int) -> int:
        return self._connections[uid]

    def requests(self, uid: int) -> int:
        return self._requests[uid]

    def open_connection(self, uid: int, exempt: Callable[[], bool] = lambda: False) -> Busy | None:
        """Count a new connection of ``uid``, or the refusal when it is over a limit.

        ``exempt`` is asked only when a limit would refuse; an exempt connection is counted.
        """
        busy = self._connection_refusal(uid)
        if busy is not None and not exempt():
            return busy
        self._connections[uid] += 1
        return None

    def close_connection(self, uid: int) -> None:
        _decrement(self._connections, uid, "connection")

    def start_request(self, uid: int, exempt: Callable[[], bool] = lambda: False) -> Busy | None:
        """Count a request of ``uid`` handed to a worker, or the refusal when it is over its limit.

        ``exempt`` is asked only when the limit would refuse; an exempt request is counted.
        """
        held = self._requests[uid]
        if held >= self.limits.max_requests_per_uid and not exempt():
            return Busy(
                "max_requests_per_uid",
                f"the FUSE proxy is busy: user {uid} already has {held} requests in progress, "
                f"the most one user may have; {RETRY_LATER}",
            )
        self._requests[uid] += 1
        return None

    def finish_request(self, uid: int) -> None:
        _decrement(self._requests, uid, "request")

    def _connection_refusal(self, uid: int) -> Busy | None:
        held = self._connections[uid]
        if held >= self.limits.max_connections_per_uid:
            return Busy(
                "max_connections_per_uid",
                f"the FUSE proxy is busy: user {uid} already has {held} connections open, "
                f"the most one user may have; {RETRY_LATER}",
            )
        total = self.total_connections
        if total >= self.limits.max_connections:
            return Busy(
                "max_connections",
                f"the FUSE proxy is busy: {total} connections are open, the most it holds; "
                f"{RETRY_LATER}",
            )
        return None


def _decrement(counter: Counter[int], uid: int, what: str) -> None:
    if counter[uid] < 1:
        raise ValueError(f"no {what} of uid {uid} is counted")
    counter[uid] -= 1
    if not counter[uid]:
        del counter[uid]
