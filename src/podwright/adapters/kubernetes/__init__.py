"""The Kubernetes adapter: the engine's Kubernetes port over the official ``kubernetes`` client.

``KubernetesClient`` makes the REST calls (create, get, replace, patch, delete, list, watch) with
the official client's configuration, authentication and connection pool, and maps every failure
onto the port's error tree. ``WatchCache`` and ``EventWatcher`` keep label-selected objects and
their Kubernetes events in memory from a list and a watch that resumes from its resourceVersion and
re-lists when the server answers 410 Gone; steady-state reconcile rounds then cost the API server
nothing.
"""

from podwright.adapters.kubernetes.client import KubernetesClient, KubernetesConfigError, connect
from podwright.adapters.kubernetes.reflector import EventWatcher, Reflector, WatchCache

__all__ = [
    "EventWatcher",
    "KubernetesClient",
    "KubernetesConfigError",
    "Reflector",
    "WatchCache",
    "connect",
]
