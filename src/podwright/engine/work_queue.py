"""A rate-limited, de-duplicating, delaying work queue of keys: what drives the operator.

The operator has no round that waits for its slowest Workload. Whenever a watch shows that a
Workload, its resource or its events changed, the Workload's key is added to this queue; worker
threads take a key, handle that one Workload, and say they are done with it. A slow write then
delays only its own Workload, and the time a key waits to be taken is the operator's *queue
latency*, reported through ``latency``.

The semantics are client-go's ``workqueue`` (``k8s.io/client-go/util/workqueue``; in
kubernetes/kubernetes under ``staging/src/k8s.io/client-go/util/workqueue``):

* ``queue.go`` (``Type``: ``Add``, ``Get``, ``Done``, ``ShutDown``): a key is *ready* at most once
  (its ``dirty`` set), so a burst of changes to one Workload costs one handle; a key being handled
  (``processing``) that is added again is not handed to a second worker: it is ready again when
  ``done`` is called, so one Workload is never handled by two workers at once. After ``shut_down``,
  adds are ignored and ``get`` returns what is still ready, then ``None``.
* ``delaying_queue.go`` (``AddAfter``, ``waitingLoop``, ``insert``): a key can be made ready after a
  delay (a retry, a resync); a key already waiting keeps the earlier of its two times.
* ``rate_limiting_queue.go`` (``AddRateLimited``, ``Forget``, ``NumRequeues``) with
  ``default_rate_limiters.go`` (``ItemExponentialFailureRateLimiter.When``): a key that failed is
  added again after ``base × 2^n`` for its n-th consecutive failure before this one, at most
  ``cap``, until ``forget`` (after a success) resets its count.

Where it differs, it is to stay small and exact. There is no thread of its own (client-go's
``waitingLoop``): every add, get, done and count first makes the waiting keys whose time came (by
``clock``) ready, in the order of their times, and a blocked ``get`` waits on the condition at most
until the earliest of them. A key is ready or waiting, never both: the earlier time wins, so
``add`` of a waiting key drops its later time, and ``add_after`` of a key already ready (or added
while in hand) does nothing. A key's memory is a few dict, set and heap entries, no object of its
own, for an operator that holds thousands; a heap entry left behind when a key's time changes is
skipped when it comes up, and the heap is rebuilt once such entries outnumber the live ones.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from datetime import timedelta
from typing import Generic, TypeVar

from podwright.engine.backoff import exponential_delay

K = TypeVar("K", bound=Hashable)

# Stale heap entries tolerated beyond the live ones before the heap is rebuilt: the rebuild costs
# one pass over the heap, so it happens only after as many stale entries as live ones (plus this).
_STALE_HEAP_SLACK = 64


@dataclasses.dataclass(frozen=True)
class RetryBackoff:
    """Per-key exponential failure backoff (client-go's ``ItemExponentialFailureRateLimiter``)."""

    base: float = 0.005
    """Seconds the first failure waits; the n-th consecutive failure after it waits
    ``base × 2^n``. At least a microsecond (the resolution of the delays)."""
    cap: float = 60.0
    """The longest a failure waits, in seconds; at least ``base``."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.base) and self.base >= 1e-6):
            raise ValueError(
                f"RetryBackoff.base must be a finite number of seconds of at least 0.000001 "
                f"(one microsecond), got {self.base!r}"
            )
        if not (math.isfinite(self.cap) and self.cap >= self.base):
            raise ValueError(
                f"RetryBackoff.cap must be a finite number of seconds of at least base "
                f"({self.base!r}), got {self.cap!r}"
            )

    def delay(self, failures: int) -> float:
        """Seconds to wait after a failure that follows ``failures`` consecutive ones."""
        return exponential_delay(
            failures, timedelta(seconds=self.base), timedelta(seconds=self.cap)
        ).total_seconds()


class WorkQueue(Generic[K]):
    """Keys to handle, each handed to one worker at a time. Thread-safe.

    ``clock`` gives the times of delays and of ``latency`` (seconds, monotonic); ``latency``, when
    given, is called at each ``get`` with the seconds the key waited since it became ready (added,
    or its delay passed), outside the queue's lock.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff: RetryBackoff = RetryBackoff(),
        latency: Callable[[float], None] | None = None,
    ) -> None:
        self._clock = clock
        self._backoff = backoff
        self._latency = latency
        self._condition = threading.Condition(threading.Lock())
        # Ready keys not in hand, oldest first; each is in _ready_since.
        self._queue: deque[K] = deque()
        # Every ready key (client-go's dirty set), in the queue or in hand, with when it became
        # ready: a key in hand that is here goes back to the queue at done().
        self._ready_since: dict[K, float] = {}
        self._in_hand: set[K] = set()
        # Waiting keys and when each becomes ready; the heap orders them, the sequence number
        # keeps keys of one time in the order they were added (and keys need not be comparable).
        # A heap entry whose time is not its key's time here is stale and skipped.
        self._waiting_until: dict[K, float] = {}
        self._waiting_heap: list[tuple[float, int, K]] = []
        self._sequence = itertools.count()
        self._failures: dict[K, int] = {}
        self._shut_down = False

    def add(self, key: K) -> None:
        """Make ``key`` ready now; nothing if it is already ready. A key in hand is ready again
        when its handling is done."""
        with self._condition:
            now = self._clock()
            self._promote_due(now)
            if self._shut_down:
                return
            if self._waiting_until.pop(key, None) is not None:
                self._compact_if_stale()
            self._make_ready(key, now)

    def add_after(self, key: K, delay: float) -> None:
        """Make ``key`` ready after ``delay`` seconds (at once when ``delay <= 0``). A key already
        waiting keeps the earlier of its two times; a key already ready stays as it is."""
        if not math.isfinite(delay):
            raise ValueError(
                f"add_after({key!r}, {delay!r}): the delay must be a finite number of seconds"
            )
        if delay <= 0:
            self.add(key)
            return
        with self._condition:
            now = self._clock()
            self._promote_due(now)
            if self._shut_down or key in self._ready_since:
                return
            ready_at = now + delay
            current = self._waiting_until.get(key)
            if current is not None and current <= ready_at:
                return
            self._waiting_until[key] = ready_at
            heapq.heappush(self._waiting_heap, (ready_at, next(self._sequence), key))
            if current is not None:
                self._compact_if_stale()
            # A get blocked until a later key's time must now wake at this one's.
            self._condition.notify()

    def add_rate_limited(self, key: K) -> None:
        """Count one more consecutive failure of ``key`` and make it ready after its backoff
        (``RetryBackoff.delay`` of the failures before this one)."""
        with self._condition:
            if self._shut_down:
                return
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        self.add_after(key, self._backoff.delay(failures))

    def forget(self, key: K) -> None:
        """Reset ``key``'s count of consecutive failures (after a success); any key will do."""
        with self._condition:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        """``key``'s consecutive failures since it was last forgotten."""
        with self._condition:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None) -> K | None:
        """The oldest ready key, now in hand until ``done``; ``None`` when none is ready within
        ``timeout`` seconds (``None``: wait until one is or the queue is shut down; ``0``: do not
        wait), or once the queue is shut down and nothing is ready."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while True:
                now = self._clock()
                self._promote_due(now)
                if self._queue:
                    key = self._queue.popleft()
                    ready_since = self._ready_since.pop(key)
                    self._in_hand.add(key)
                    break
                if self._shut_down:
                    return None
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return None
                if self._waiting_heap:
                    until_next = max(0.0, self._waiting_heap[0][0] - now)
                    wait = until_next if wait is None else min(wait, until_next)
                self._condition.wait(wait)
        if self._latency is not None:
            self._latency(now - ready_since)
        return key

    def done(self, key: K) -> None:
        """``key``'s handling is over; if it was added meanwhile, it is ready again."""
        with self._condition:
            if key not in self._in_hand:
                raise ValueError(f"done({key!r}): the key is not in hand (no get returned it)")
            self._promote_due(self._clock())
            self._in_hand.remove(key)
            if key in self._ready_since:
                self._queue.append(key)
                self._condition.notify()

    def shut_down(self) -> None:
        """Wake every blocked ``get``; later adds are ignored, waiting keys dropped, and ``get``
        returns ``None`` once what is ready has been taken (client-go's ``ShutDown``)."""
        with self._condition:
            self._shut_down = True
            self._waiting_until.clear()
            self._waiting_heap.clear()
            self._condition.notify_all()

    def ready(self) -> int:
        """Keys ready to be handled and not in hand: the queue's depth."""
        with self._condition:
            self._promote_due(self._clock())
            return len(self._queue)

    def waiting(self) -> int:
        """Keys waiting for their delay."""
        with self._condition:
            self._promote_due(self._clock())
            return len(self._waiting_until)

    def in_hand(self) -> int:
        """Keys being handled."""
        with self._condition:
            return len(self._in_hand)

    def _make_ready(self, key: K, now: float) -> None:
        if key in self._ready_since:
            return
        self._ready_since[key] = now
        if key not in self._in_hand:
            self._queue.append(key)
            self._condition.notify()

    def _promote_due(self, now: float) -> None:
        """Make ready, in the order of their times, the waiting keys whose time came."""
        heap = self._waiting_heap
        while heap and heap[0][0] <= now:
            ready_at, _, key = heapq.heappop(heap)
            if self._waiting_until.get(key) != ready_at:
                continue
            del self._waiting_until[key]
            self._make_ready(key, ready_at)

    def _compact_if_stale(self) -> None:
        """Rebuild the heap from the live entries once the stale ones outnumber them."""
        if len(self._waiting_heap) <= 2 * len(self._waiting_until) + _STALE_HEAP_SLACK:
            return
        seen: set[K] = set()
        live: list[tuple[float, int, K]] = []
        for entry in self._waiting_heap:
            ready_at, _, key = entry
            if self._waiting_until.get(key) == ready_at and key not in seen:
                seen.add(key)
                live.append(entry)
        heapq.heapify(live)
        self._waiting_heap = live
