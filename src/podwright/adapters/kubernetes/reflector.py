"""List-and-watch loops that keep Kubernetes state in memory: objects, and their events.

A :class:`Reflector` lists the selected objects, then watches from the list's resourceVersion,
resuming from the last version it saw whenever the stream ends or breaks, and re-listing when the
server answers 410 Gone (the version was compacted away). Its handler receives the listing and every
change: :class:`WatchCache` keeps the objects (trimmed by the plugin, and with their strings
shared, :func:`shared_strings`, so thousands of pods stay small), :class:`EventWatcher` feeds
Kubernetes events into the engine's ``EventIndex``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.core.lifecycle.objects import JsonObject, parse_time, section, text
from podwright.core.lifecycle.pod_status import scheduler_message
from podwright.engine.backoff import jittered_delay
from podwright.engine.event_index import EventIndex, EventKey, ObjectEvent
from podwright.engine.kubernetes_port import GoneError, KubernetesError, ThrottledError

logger = logging.getLogger(__name__)

_STOP_SECONDS = 10.0
"""The longest :meth:`Reflector.stop` waits for the watch's thread."""


class ReflectorHandler(Protocol):
    def replace(self, objects: list[dict[str, Any]]) -> None:
        """The complete current state (after a list)."""

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        """One change: ADDED, MODIFIED or DELETED."""


class Reflector:
    """A list-and-watch loop on a background thread."""

    def __init__(
        self,
        client: KubernetesClient,
        api_version: str,
        kind: str,
        handler: ReflectorHandler,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        watch_timeout_seconds: int = 300,
        max_backoff: timedelta = timedelta(seconds=30),
    ) -> None:
        self._client = client
        self._api_version = api_version
        self._kind = kind
        self._handler = handler
        self._namespace = namespace
        self._label_selector = label_selector
        self._field_selector = field_selector
        self._watch_timeout = watch_timeout_seconds
        self._max_backoff = max_backoff
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._streams: list[Any] = []
        self._thread = threading.Thread(target=self._run, name=f"reflector-{kind}", daemon=True)
        self._rng = random.Random()
        self.resource_version: str | None = None
        # Observable for tests and metrics.
        self.lists = 0
        self.watches = 0
        self.error = ""
        """Why the last list or watch failed, until one succeeds again ("" while it works)."""

    def start(self) -> Reflector:
        self._thread.start()
        return self

    def wait_synced(self, timeout: float) -> bool:
        """Wait until the first list has been handled."""
        return self._synced.wait(timeout)

    def stop(self) -> None:
        """Stop watching, and wait (at most ``_STOP_SECONDS``) for the watch's thread to end."""
        self._stop.set()
        if self._thread.ident is None:  # never started
            return
        deadline = time.monotonic() + _STOP_SECONDS
        while True:
            # Again until the thread ends: a watch whose request was on its way when the stop
            # came registers its stream only once answered, then waits on it for the next event.
            for stream in list(self._streams):
                # A stream already closed, or whose connection went back to the pool, has
                # nothing left to shut down (urllib3 says so with a ValueError or RuntimeError).
                with contextlib.suppress(ValueError, RuntimeError, OSError):
                    stream.shutdown()
            self._thread.join(timeout=0.05)
            if not self._thread.is_alive() or time.monotonic() >= deadline:
                return

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if self.resource_version is None:
                    self._list()
                self._watch()
                failures = 0
            except GoneError:
                logger.info(
                    "%s watch: resourceVersion %s is gone; re-listing",
                    self._kind,
                    self.resource_version,
                )
                self.resource_version = None
            except KubernetesError as exc:
                if self._stop.is_set():
                    return
                self.error = exc.message
                delay = jittered_delay(
                    failures, timedelta(seconds=0.2), self._max_backoff, self._rng
                )
                if isinstance(exc, ThrottledError) and exc.retry_after is not None:
                    delay = max(delay, timedelta(seconds=exc.retry_after))
                failures += 1
                logger.warning("%s watch failed (%s); retrying in %s", self._kind, exc, delay)
                self._stop.wait(delay.total_seconds())

    def _list(self) -> None:
        items, version = self._client.list_objects(
            self._api_version,
            self._kind,
            namespace=self._namespace,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
        )
        self.lists += 1
        self.error = ""
        self._handler.replace(items)
        self.resource_version = version
        self._synced.set()

    def _watch(self) -> None:
        assert self.resource_version is not None
        self.watches += 1
        self._streams.clear()
        events = self._client.watch(
            self._api_version,
            self._kind,
            resource_version=self.resource_version,
            namespace=self._namespace,
            label_selector=self._label_selector,
            field_selector=self._field_selector,
            timeout_seconds=self._watch_timeout,
            stream_holder=self._streams,
        )
        try:
            for event in events:
                if self._stop.is_set():
                    return
                self.error = ""
                obj = event.get("object") or {}
                version = section(obj, "metadata").get("resourceVersion")
                if event.get("type") != "BOOKMARK":
                    self._handler.apply(str(event.get("type")), obj)
                if version:
                    self.resource_version = str(version)
        finally:
            self._streams.clear()


class WatchCache:
    """Objects of one kind by (namespace, name), as last seen, kept current by a reflector."""

    def __init__(self, trim: Callable[[JsonObject], dict[str, Any]] | None = None) -> None:
        self._trim = trim or dict
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def get(self, namespace: str, name: str) -> JsonObject | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def values(self) -> list[JsonObject]:
        """Every object, as last seen."""
        with self._lock:
            return list(self._objects.values())

    def replace(self, objects: list[dict[str, Any]]) -> None:
        fresh = {_key(obj): shared_strings(self._trim(obj)) for obj in objects}
        with self._lock:
            self._objects = fresh

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        key = _key(obj)
        if event_type == "DELETED":
            with self._lock:
                self._objects.pop(key, None)
            return
        trimmed = shared_strings(self._trim(obj))
        with self._lock:
            self._objects[key] = trimmed


class LabelIndexedCache(WatchCache):
    """A watch cache that also finds its objects by the value of one label, as client-go's
    indexers do (``cache.Indexers``): the pods of a task, by its task-id label. The label is
    read before the object is trimmed, so the trim need not keep it."""

    def __init__(
        self, label: str, trim: Callable[[JsonObject], dict[str, Any]] | None = None
    ) -> None:
        super().__init__(trim)
        self.label = label
        self._values: dict[tuple[str, str], str] = {}
        self._by_value: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}

    def labelled(self, namespace: str, value: str) -> list[JsonObject]:
        """The objects of ``namespace`` whose label is ``value``."""
        with self._lock:
            return list(self._by_value.get((namespace, value), {}).values())

    def replace(self, objects: list[dict[str, Any]]) -> None:
        fresh: dict[tuple[str, str], dict[str, Any]] = {}
        values: dict[tuple[str, str], str] = {}
        index: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
        for key, obj in {_key(obj): obj for obj in objects}.items():
            fresh[key] = trimmed = shared_strings(self._trim(obj))
            value = self._value(obj)
            if value is not None:
                values[key] = value
                index.setdefault((key[0], value), {})[key[1]] = trimmed
        with self._lock:
            self._objects, self._values, self._by_value = fresh, values, index

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        key = _key(obj)
        deleted = event_type == "DELETED"
        trimmed = None if deleted else shared_strings(self._trim(obj))
        value = None if deleted else self._value(obj)
        with self._lock:
            self._objects.pop(key, None)
            previous = self._values.pop(key, None)
            if previous is not None:
                entries = self._by_value.get((key[0], previous), {})
                entries.pop(key[1], None)
                if not entries:
                    self._by_value.pop((key[0], previous), None)
            if trimmed is None:
                return
            self._objects[key] = trimmed
            if value is not None:
                self._values[key] = value
                self._by_value.setdefault((key[0], value), {})[key[1]] = trimmed

    def _value(self, obj: JsonObject) -> str | None:
        value = section(obj, "metadata", "labels").get(self.label)
        return sys.intern(value) if isinstance(value, str) else None


SHARED_STRING_LENGTH = 64
"""Strings up to this long are shared: field names, and values such as kinds, phases, reasons,
names and times; longer ones (messages, manifests' commands) are rarely repeated."""


def shared_strings(value: Any) -> Any:
    """``value`` (decoded JSON) with every dict key and every short string interned.

    A watch cache holds thousands of objects of the same shape: decoded one by one, each has
    its own copy of every field name and of every repeated value, which is half of its memory.
    Interned, they share one. Numbers, booleans and None are shared by Python already."""
    if isinstance(value, dict):
        return {sys.intern(key): shared_strings(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shared_strings(item) for item in value]
    if isinstance(value, str) and len(value) <= SHARED_STRING_LENGTH:
        return sys.intern(value)
    return value


class NotifyingCache:
    """A watch cache that says when it changed: ``changed`` is called after each listing and
    each change it is told of, once the cache holds it."""

    def __init__(self, cache: WatchCache, changed: Callable[[], None]) -> None:
        self._cache = cache
        self._changed = changed

    def replace(self, objects: list[dict[str, Any]]) -> None:
        self._cache.replace(objects)
        self._changed()

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        self._cache.apply(event_type, obj)
        self._changed()


class EventWatcher:
    """Feeds the Kubernetes events of one kind's objects into an :class:`EventIndex`.

    Only an event's first sighting is indexed: Kubernetes reports a repeated event by updating the
    same Event object, and those updates are not new events.
    """

    def __init__(self, index: EventIndex, clock: Callable[[], datetime] | None = None) -> None:
        self._index = index
        self._clock = clock or (lambda: datetime.now(UTC))

    def replace(self, objects: list[dict[str, Any]]) -> None:
        now = self._clock()
        for obj in objects:
            self._add(obj, now)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        if event_type == "DELETED":
            self._index.remove(_event_key(obj), text(section(obj, "metadata"), "uid"))
        else:
            self._add(obj, self._clock())

    def _add(self, obj: Mapping[str, Any], now: datetime) -> None:
        event = object_event(obj)
        if event is not None:
            self._index.add(_event_key(obj), event, now)


def object_event(obj: Mapping[str, Any]) -> ObjectEvent | None:
    """An ``events.k8s.io/v1`` Event as the index keeps it (None without uid or time)."""
    metadata = section(obj, "metadata")
    created = parse_time(metadata.get("creationTimestamp"))
    uid = text(metadata, "uid")
    if created is None or not uid:
        return None
    recorded = (
        parse_time(obj.get("eventTime"))
        or parse_time(obj.get("deprecatedFirstTimestamp"))
        or created
    )
    reason, note = text(obj, "reason"), text(obj, "note")
    return ObjectEvent(
        uid=uid,
        created=created,
        recorded=recorded,
        reason=reason,
        note=scheduler_message(note) if reason == "FailedScheduling" else note,
        type=text(obj, "type") or "Normal",
    )


def _event_key(obj: Mapping[str, Any]) -> EventKey:
    regarding = section(obj, "regarding")
    namespace = text(regarding, "namespace") or text(section(obj, "metadata"), "namespace")
    return EventKey(namespace, text(regarding, "kind"), text(regarding, "name"))


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    metadata = section(obj, "metadata")
    return (text(metadata, "namespace"), text(metadata, "name"))
