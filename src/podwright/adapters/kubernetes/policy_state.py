"""The cluster's policies, namespaces, assets and cluster profile, kept in watch caches for the
admission webhooks (and the operator, which renders Workloads on the same profile).

The webhooks answer each review within milliseconds (the API server waits on them), so they never
read the cluster while answering: a reflector per kind keeps the objects, and the policies are
read once per change, not per review. A namespace created a moment ago may not have reached its
cache yet: it is then read directly, once (the DESIGN's "a direct GET is the fallback when the
cache has not seen an object yet"), on a handler thread of the webhook server: on its loop,
where the reviews are answered from memory, that read raises
:class:`~podwright.adapters.webhook_server.WouldBlock`, and the server asks again from a thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.adapters.kubernetes.reflector import NotifyingCache, Reflector, WatchCache
from podwright.adapters.webhook_server import WouldBlock, may_block
from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue
from podwright.core.cluster_resources import (
    API_VERSION,
    ASSET_KIND,
    CLUSTER_ASSET_KIND,
    CLUSTER_POLICY_KIND,
    POLICY_KIND,
    ClusterScopes,
    catalogue_from_resources,
    policy_from_resource,
    resource_source,
)
from podwright.core.lifecycle.objects import JsonObject
from podwright.core.policies import Policy, PolicyError, Scope
from podwright.core.problems import FieldProblem
from podwright.core.render import DEFAULT_PROFILE, ClusterProfile, profile_from_data
from podwright.core.render.profile import API_VERSION as PROFILE_API_VERSION
from podwright.core.render.profile import KIND as PROFILE_KIND
from podwright.engine.admission_service import PolicySnapshot, UnreadablePolicy
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef

KINDS = (
    ("v1", "Namespace"),
    (API_VERSION, POLICY_KIND),
    (API_VERSION, CLUSTER_POLICY_KIND),
    (API_VERSION, ASSET_KIND),
    (API_VERSION, CLUSTER_ASSET_KIND),
    (API_VERSION, PROFILE_KIND),
)


class ClusterPolicyState:
    """The :class:`~podwright.engine.admission_service.PolicyState` of a cluster."""

    def __init__(
        self,
        client: KubernetesClient,
        scopes: ClusterScopes,
        profile_name: str = DEFAULT_PROFILE.name,
    ) -> None:
        """``profile_name``: the ClusterProfile the operator renders Workloads with."""
        self._client = client
        self._scopes = scopes
        self._profile_name = profile_name
        self._profile: tuple[int, ClusterProfile] | None = None
        self._lock = threading.Lock()
        self._version = 0
        self._snapshot: PolicySnapshot | None = None
        self._listeners: list[Callable[[], None]] = []
        self._catalogues: dict[str, tuple[int, AssetCatalogue]] = {}
        """Each namespace's catalogue and the version it was read at: a review reads it, so it
        is built once per change, not per review."""
        self._caches = {kind: WatchCache() for _api_version, kind in KINDS}
        self._reflectors = [
            Reflector(client, api_version, kind, NotifyingCache(self._caches[kind], self._bump))
            for api_version, kind in KINDS
        ]

    def start(self, timeout: float) -> bool:
        """Start watching; whether every kind was listed within ``timeout`` seconds."""
        for reflector in self._reflectors:
            reflector.start()
        return all(reflector.wait_synced(timeout) for reflector in self._reflectors)

    def read_once(self) -> ClusterPolicyState:
        """List every kind once, without watching: the state of a command that reads the
        cluster's policies and exits (``policy effective``, ``policy report``)."""
        for api_version, kind in KINDS:
            objects, _version = self._client.list_objects(api_version, kind)
            self._caches[kind].replace(objects)
        self._bump()
        return self

    def synced(self) -> bool:
        """Whether every kind has been listed (until then a snapshot may lack policies)."""
        return all(reflector.wait_synced(0) for reflector in self._reflectors)

    def stop(self) -> None:
        for reflector in self._reflectors:
            reflector.stop()

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (on a watch's thread) after each change of a namespace, policy,
        asset or the profile, once the snapshot's version has moved."""
        self._listeners.append(listener)

    def _bump(self) -> None:
        with self._lock:
            self._version += 1
        for listener in self._listeners:
            listener()

    # PolicyState ----------------------------------------------------------------------------

    def snapshot(self) -> PolicySnapshot:
        with self._lock:
            version, known = self._version, self._snapshot
        if known is not None and known.version == version:
            return known
        policies: list[Policy] = []
        unreadable: list[UnreadablePolicy] = []
        for kind in (CLUSTER_POLICY_KIND, POLICY_KIND):
            for obj in self._caches[kind].values():
                read = self._read_policy(obj)
                if isinstance(read, Policy):
                    policies.append(read)
                else:
                    unreadable.append(read)
        snapshot = PolicySnapshot(version, tuple(policies), tuple(unreadable))
        with self._lock:
            if self._version == version:
                self._snapshot = snapshot
        return snapshot

    def namespace_scope(self, namespace: str) -> Scope:
        obj = self._caches["Namespace"].get("", namespace)
        if obj is None:
            if not may_block():
                raise WouldBlock(f"namespace {namespace} is not in the watch cache yet")
            try:
                obj = self._client.get(ObjectRef("v1", "Namespace", "", namespace))
            except NotFoundError:
                raise LookupError(namespace) from None
        return self._scopes.of_namespace(obj)

    def catalogue(self, namespace: str) -> AssetCatalogue:
        with self._lock:
            version, known = self._version, self._catalogues.get(namespace)
        if known is not None and known[0] == version:
            return known[1]
        catalogue = self._read_catalogue(namespace)
        with self._lock:
            if self._version == version:
                self._catalogues = {
                    name: entry for name, entry in self._catalogues.items() if entry[0] == version
                }
                self._catalogues[namespace] = (version, catalogue)
        return catalogue

    def profile(self) -> ClusterProfile:
        """The ClusterProfile named at construction (absent: the safe defaults); ProfileError
        when its spec cannot be read."""
        with self._lock:
            version, known = self._version, self._profile
        if known is not None and known[0] == version:
            return known[1]
        found = self._caches[PROFILE_KIND].get("", self._profile_name)
        if found is None:
            profile = DEFAULT_PROFILE
        else:
            spec = found.get("spec")
            document = {
                "apiVersion": PROFILE_API_VERSION,
                "kind": PROFILE_KIND,
                "metadata": {"name": self._profile_name},
                "spec": dict(spec) if isinstance(spec, dict) else {},
            }
            profile = profile_from_data(document, f"ClusterProfile {self._profile_name}")
        with self._lock:
            if self._version == version:
                self._profile = (version, profile)
        return profile

    def _read_catalogue(self, namespace: str) -> AssetCatalogue:
        assets = [
            *self._caches[CLUSTER_ASSET_KIND].values(),
            *(obj for obj in self._caches[ASSET_KIND].values() if _namespace(obj) == namespace),
        ]
        if not assets:
            return EMPTY_CATALOGUE
        return catalogue_from_resources([dict(obj) for obj in assets])

    def _read_policy(self, obj: JsonObject) -> Policy | UnreadablePolicy:
        source = resource_source(obj)
        try:
            if obj.get("kind") == CLUSTER_POLICY_KIND:
                spec = obj.get("spec")
                scope = self._scopes.of_cluster_policy(spec if isinstance(spec, dict) else {})
            else:
                scope = self.namespace_scope(_namespace(obj))
        except (ValueError, LookupError) as error:
            return UnreadablePolicy(source, None, (FieldProblem((), str(error), source),))
        try:
            return policy_from_resource(obj, scope)
        except PolicyError as error:
            return UnreadablePolicy(source, scope, error.problems)


def _namespace(obj: JsonObject) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("namespace", "")) if isinstance(metadata, dict) else ""
