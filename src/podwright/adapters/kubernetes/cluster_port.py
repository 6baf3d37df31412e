"""The engine's Kubernetes port for a real cluster: the REST client plus watch caches, per kind.

An executor's tasks use a few kinds (Pods, Jobs, a Kubeflow kind, Knative Services). The first time
the engine reads a task's resource, :class:`ClusterPort` starts two reflectors for that kind: one
keeps podwright's objects of the kind (selected by the managed-by label, trimmed by the kind's
plugin) in a :class:`WatchCache`, the other feeds the kind's Kubernetes events into the engine's
``EventIndex``. Until the cache has listed, reads go to the API server; afterwards a steady-state
reconcile round costs the API server nothing. Kinds no task uses are never listed, so a cluster
without the Kubeflow or Knative CRDs is not asked about them.

A kind whose plugin reads the task's pods too (``Plugin.follows_pods``: a Job, whose controller
counts its pods late on a busy control plane) has them from one more reflector, started the first
time they are asked for: the pods that carry the task-id label, indexed by it
(:class:`LabelIndexedCache`), each trimmed to what the phase decisions read of it.

Whoever follows the tasks (the operator's work queue) is told of each change: ``changed`` is
called with the resource whenever a watch shows that it, one of its events, or one of its pods
changed.

Each watch holds a connection for as long as it runs, so the client's connection pool must have
room for the watches besides the executor's workers: :func:`connection_pool_size`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.adapters.kubernetes.reflector import (
    EventWatcher,
    LabelIndexedCache,
    Reflector,
    WatchCache,
)
from podwright.core.lifecycle.objects import controller_of, section, text
from podwright.core.lifecycle.resource_status import pod_progress_fields
from podwright.engine.config import MANAGED_BY, MANAGED_BY_LABEL
from podwright.engine.event_index import EventIndex
from podwright.engine.kubernetes_port import JsonObject, ObjectRef, PatchType
from podwright.engine.plugin import Plugin

WATCHES_PER_KIND = 2
"""The watch streams a kind's reflectors hold: its objects, and their events."""


def connection_pool_size(concurrency: int, plugins: Mapping[tuple[str, str], Plugin]) -> int:
    """The connections an executor of ``concurrency`` workers over a :class:`ClusterPort` may
    hold at once: one per worker, one per watch stream of every plugin kind, the pods' watch
    when a plugin follows pods, and one spare (a log tail, or a probe of the server)."""
    pods = any(plugin.follows_pods for plugin in plugins.values())
    return concurrency + WATCHES_PER_KIND * len(plugins) + int(pods) + 1


class ClusterPort:
    """:class:`KubernetesClient` with watch caches started for each plugin kind on first use.

    ``namespace`` limits the watches to one namespace (None: every namespace, which needs
    cluster-wide list and watch permission).
    """

    def __init__(
        self,
        client: KubernetesClient,
        plugins: Mapping[tuple[str, str], Plugin],
        events: EventIndex,
        *,
        namespace: str | None = None,
        changed: Callable[[JsonObject], None] | None = None,
    ) -> None:
        self.client = client
        self._changed = changed
        self._plugins = plugins
        self._events = events
        self._namespace = namespace
        self._reflectors: dict[tuple[str, str], tuple[Reflector, Reflector]] = {}
        self._caches: dict[tuple[str, str], WatchCache] = {}
        self._pods: tuple[Reflector, LabelIndexedCache] | None = None
        self._lock = threading.Lock()
        self._closed = False

    # The port ------------------------------------------------------------------------------

    def create(self, obj: JsonObject) -> dict[str, Any]:
        return self.client.create(obj)

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        return self.client.get(ref)

    def cached(self, ref: ObjectRef) -> JsonObject | None:
        self.watch((ref.api_version, ref.kind))
        return self.client.cached(ref)

    def cached_pods(self, namespace: str, label: str, value: str) -> list[JsonObject] | None:
        pods = self._pods_watch(label)
        if pods is None:
            return None
        reflector, cache = pods
        return cache.labelled(namespace, value) if reflector.wait_synced(0) else None

    def patch(self, ref: ObjectRef, body: Any, patch_type: PatchType) -> dict[str, Any]:
        return self.client.patch(ref, body, patch_type)

    def replace(self, ref: ObjectRef, obj: JsonObject) -> dict[str, Any]:
        return self.client.replace(ref, obj)

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> None:
        self.client.delete(ref, propagation=propagation)

    # Watches -------------------------------------------------------------------------------

    def watch(self, kind: tuple[str, str]) -> None:
        """Start the object and event reflectors of a plugin's kind (once; other kinds: no-op)."""
        plugin = self._plugins.get(kind)
        if plugin is None:
            return
        with self._lock:
            if self._closed or kind in self._reflectors:
                return
            api_version, name = kind
            cache = WatchCache(plugin.trim)
            objects = Reflector(
                self.client,
                api_version,
                name,
                cache if self._changed is None else _ObjectsTold(cache, self._changed),
                namespace=self._namespace,
                label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}",
            )
            watcher = EventWatcher(self._events)
            events = Reflector(
                self.client,
                "events.k8s.io/v1",
                "Event",
                watcher if self._changed is None else _EventsTold(watcher, cache, self._changed),
                namespace=self._namespace,
                field_selector=f"regarding.kind={name}",
            )
            self._reflectors[kind] = (objects, events)
            self._caches[kind] = cache
            self.client.add_cache(api_version, name, _SyncedOnly(cache, objects))
        objects.start()
        events.start()

    def _pods_watch(self, label: str) -> tuple[Reflector, LabelIndexedCache] | None:
        """The reflector and cache of the pods that carry ``label`` (started on first use, for
        the one label the tasks' pods carry; None when closed, or asked for another label)."""
        with self._lock:
            if self._pods is None and not self._closed:
                cache = LabelIndexedCache(label, pod_progress_fields)
                handler = (
                    cache if self._changed is None else _PodsTold(cache, self._owner, self._changed)
                )
                reflector = Reflector(
                    self.client,
                    "v1",
                    "Pod",
                    handler,
                    namespace=self._namespace,
                    label_selector=label,
                )
                self._pods = (reflector, cache)
                reflector.start()
            if self._pods is None or self._pods[1].label != label:
                return None
            return self._pods

    def _owner(self, pod: JsonObject) -> JsonObject | None:
        """The resource of a plugin's kind that controls ``pod``, as its watch cache holds it."""
        owner = controller_of(pod)
        if owner is None:
            return None
        with self._lock:
            cache = self._caches.get((text(owner, "apiVersion"), text(owner, "kind")))
        namespace = text(section(pod, "metadata"), "namespace")
        return None if cache is None else cache.get(namespace, text(owner, "name"))

    def synced(self) -> bool:
        """Whether every started watch has listed at least once."""
        return all(reflector.wait_synced(0) for reflector in self._started())

    def watch_error(self) -> str:
        """Why a watch is failing now ("cannot reach the Kubernetes API server ..."), or "":
        the caches then hold what the watches saw last, and the executor's rounds, reading
        them, would not notice the API server is gone."""
        return next((r.error for r in self._started() if r.error), "")

    def close(self) -> None:
        """Stop the watches and close the connection pool."""
        with self._lock:
            self._closed = True
        for reflector in self._started():
            reflector.stop()
        self.client.close()

    def _started(self) -> list[Reflector]:
        with self._lock:
            started = [reflector for pair in self._reflectors.values() for reflector in pair]
            return started if self._pods is None else [*started, self._pods[0]]


class _SyncedOnly:
    """A watch cache that answers only once its reflector has listed (before, the API does)."""

    def __init__(self, cache: WatchCache, reflector: Reflector) -> None:
        self._cache = cache
        self._reflector = reflector

    def get(self, namespace: str, name: str) -> JsonObject | None:
        if not self._reflector.wait_synced(0):
            return None
        return self._cache.get(namespace, name)


class _Handler(Protocol):
    """What a reflector feeds: a list, then each watch event."""

    def replace(self, objects: list[dict[str, Any]]) -> None: ...

    def apply(self, event_type: str, obj: dict[str, Any]) -> None: ...


class _ObjectsTold:
    """A kind's watch cache that tells ``changed`` of each object it was given."""

    def __init__(self, cache: WatchCache, changed: Callable[[JsonObject], None]) -> None:
        self._cache = cache
        self._changed = changed

    def replace(self, objects: list[dict[str, Any]]) -> None:
        self._cache.replace(objects)
        for obj in objects:
            self._changed(obj)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        self._cache.apply(event_type, obj)
        self._changed(obj)


class _PodsTold:
    """The task pods' watch cache, telling ``changed`` of the resource that controls each pod
    whose cached form it changed (a pod no plugin's resource controls concerns no task; a change
    the trim drops, such as a binding or a finalizer removed, is nothing to act on)."""

    def __init__(
        self,
        cache: LabelIndexedCache,
        owner: Callable[[JsonObject], JsonObject | None],
        changed: Callable[[JsonObject], None],
    ) -> None:
        self._cache = cache
        self._owner = owner
        self._changed = changed

    def replace(self, objects: list[dict[str, Any]]) -> None:
        self._cache.replace(objects)
        for pod in objects:
            self._tell(pod)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        metadata = section(obj, "metadata")
        key = (text(metadata, "namespace"), text(metadata, "name"))
        before = self._cache.get(*key)
        self._cache.apply(event_type, obj)
        if event_type == "DELETED" or self._cache.get(*key) != before:
            self._tell(obj)

    def _tell(self, pod: JsonObject) -> None:
        resource = self._owner(pod)
        if resource is not None:
            self._changed(resource)


class _EventsTold:
    """A kind's event watcher that tells ``changed`` of the object each event is about, when
    the kind's watch cache holds it (the events of other objects concern no task)."""

    def __init__(
        self, watcher: _Handler, objects: WatchCache, changed: Callable[[JsonObject], None]
    ) -> None:
        self._watcher = watcher
        self._objects = objects
        self._changed = changed

    def replace(self, objects: list[dict[str, Any]]) -> None:
        self._watcher.replace(objects)
        for event in objects:
            self._tell(event)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        self._watcher.apply(event_type, obj)
        self._tell(obj)

    def _tell(self, event: JsonObject) -> None:
        regarding = section(event, "regarding")
        namespace = text(regarding, "namespace") or text(section(event, "metadata"), "namespace")
        resource = self._objects.get(namespace, text(regarding, "name"))
        if resource is not None:
            self._changed(resource)
