"""Backoff between attempts: per (kind, namespace) for quota refusals, jittered for retries.

When a namespace's quota is full, every task that launches there would be refused the same way;
one backoff per (kind, namespace) spares the API server those requests until the window passes,
and widens the window while refusals continue. Retries of conflicts and server errors wait an
exponentially growing, jittered delay so that many tasks retrying at once spread out.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta


def jittered_delay(attempt: int, base: timedelta, cap: timedelta, rng: random.Random) -> timedelta:
    """The delay before retry number ``attempt`` (0 for the first): between half and all of
    ``base × 2^attempt``, at most ``cap``."""
    return exponential_delay(attempt, base, cap) * rng.uniform(0.5, 1.0)


def exponential_delay(attempt: int, base: timedelta, cap: timedelta) -> timedelta:
    """``base × 2^attempt``, at most ``cap``."""
    delay: timedelta = min(cap, base * (2 ** min(attempt, 30)))
    return delay


@dataclass(frozen=True, slots=True)
class BackoffKey:
    kind: str
    namespace: str


@dataclass(slots=True)
class _Window:
    until: datetime
    refusals: int


class QuotaBackoff:
    """Exponential backoff windows per (kind, namespace). Thread-safe."""

    def __init__(self, *, base: timedelta, cap: timedelta) -> None:
        self._base = base
        self._cap = cap
        self._windows: dict[BackoffKey, _Window] = {}
        self._lock = threading.Lock()

    def blocked_until(self, key: BackoffKey, now: datetime) -> datetime | None:
        """When launches of ``key`` may try again, or None when they may try now."""
        with self._lock:
            window = self._windows.get(key)
            return window.until if window is not None and now < window.until else None

    def refused(self, key: BackoffKey, now: datetime) -> datetime:
        """Record a quota refusal; returns when the next attempt may be made."""
        with self._lock:
            window = self._windows.get(key)
            refusals = 1 if window is None else window.refusals + 1
            until: datetime = now + exponential_delay(refusals - 1, self._base, self._cap)
            self._windows[key] = _Window(until, refusals)
            return until

    def admitted(self, key: BackoffKey) -> None:
        """A launch of ``key`` succeeded: the quota has room again."""
        with self._lock:
            self._windows.pop(key, None)
