"""The Kubernetes events seen for each object, kept so the plugin manager can attach new ones.

The event watcher feeds it; the plugin manager lists what arrived since the last event it attached.
An event counts once, at its first occurrence: when Kubernetes aggregates a repeated event it
updates the same Event object (its count or series), and those updates add nothing here. Memory is
bounded two ways: events older than a TTL are dropped, and each object keeps at most a fixed number
of its newest events.

Each object's events also carry a version, which the executor reads to tell whether a task's events
changed since its last round without listing them: it changes with every event added or removed.
Versions are drawn from one counter for the whole index, so an object whose events were all dropped
(its version forgotten with them, back to 0) and that gets new ones never shows a version it
showed before.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True, order=True)
class EventKey:
    """The object an event is about."""

    namespace: str
    kind: str
    name: str


@dataclass(frozen=True, slots=True)
class ObjectEvent:
    uid: str
    created: datetime
    recorded: datetime
    reason: str
    note: str
    type: str = "Normal"

    @property
    def order(self) -> tuple[datetime, datetime, str]:
        return (self.created, self.recorded, self.uid)

    def describe(self) -> str:
        return f"{self.reason}: {self.note}" if self.note else self.reason


@dataclass(slots=True)
class _ObjectEvents:
    ordered: list[tuple[datetime, datetime, str]] = field(default_factory=list)
    by_uid: dict[str, ObjectEvent] = field(default_factory=dict)
    version: int = 0


class EventIndex:
    """Events by (namespace, kind, name), ordered by (creation, recorded) time. Thread-safe."""

    def __init__(self, *, ttl: timedelta, max_per_object: int) -> None:
        if max_per_object < 1:
            raise ValueError(f"max_per_object: must be at least 1, got {max_per_object}")
        self._ttl = ttl
        self._max = max_per_object
        self._objects: dict[EventKey, _ObjectEvents] = {}
        self._changes = 0
        self._lock = threading.Lock()

    def add(self, key: EventKey, event: ObjectEvent, now: datetime) -> bool:
        """Index ``event`` unless it is already indexed or already expired; True when added."""
        if event.created < now - self._ttl:
            return False
        with self._lock:
            events = self._objects.setdefault(key, _ObjectEvents())
            if event.uid in events.by_uid:
                return False
            bisect.insort(events.ordered, event.order)
            events.by_uid[event.uid] = event
            while len(events.ordered) > self._max:
                _created, _recorded, uid = events.ordered.pop(0)
                del events.by_uid[uid]
            self._changed(events)
            return True

    def remove(self, key: EventKey, uid: str) -> None:
        """Forget a deleted event."""
        with self._lock:
            events = self._objects.get(key)
            if events is None or uid not in events.by_uid:
                return
            events.ordered.remove(events.by_uid.pop(uid).order)
            self._changed(events)
            if not events.ordered:
                del self._objects[key]

    def forget(self, key: EventKey) -> None:
        """Forget every event of an object (its task is finalized)."""
        with self._lock:
            self._objects.pop(key, None)

    def list(
        self,
        key: EventKey,
        after_created: datetime | None = None,
        after_recorded: datetime | None = None,
    ) -> list[ObjectEvent]:
        """The object's events created after ``after_created``, or at that time and recorded
        after ``after_recorded``; oldest first."""
        with self._lock:
            events = self._objects.get(key)
            if events is None:
                return []
            if after_created is None:
                chosen = events.ordered
            else:
                recorded = after_recorded or after_created
                start = bisect.bisect_right(events.ordered, (after_created, recorded, "\uffff"))
                chosen = events.ordered[start:]
            return [events.by_uid[uid] for _c, _r, uid in chosen]

    def expire(self, now: datetime) -> int:
        """Drop events older than the TTL; the number dropped."""
        horizon = now - self._ttl
        dropped = 0
        with self._lock:
            for key in list(self._objects):
                events = self._objects[key]
                cut = bisect.bisect_left(events.ordered, (horizon,))
                for _c, _r, uid in events.ordered[:cut]:
                    del events.by_uid[uid]
                if cut:
                    dropped += cut
                    del events.ordered[:cut]
                    self._changed(events)
                if not events.ordered:
                    del self._objects[key]
        return dropped

    def version(self, key: EventKey) -> int:
        """The version of the object's events: another number whenever an event of the object
        was added or removed since, 0 while it has none."""
        with self._lock:
            events = self._objects.get(key)
            return 0 if events is None else events.version

    def _changed(self, events: _ObjectEvents) -> None:
        """Give ``events`` a version no object showed before (the caller holds the lock)."""
        self._changes += 1
        events.version = self._changes

    def __len__(self) -> int:
        with self._lock:
            return sum(len(events.ordered) for events in self._objects.values())
