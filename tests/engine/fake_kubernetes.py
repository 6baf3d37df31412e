"""An in-memory Kubernetes port: the emulator's store, called directly instead of over HTTP.

It counts calls by verb, records what it created in order, can fail the next calls of a verb with
given errors, and has a perfect watch cache (``cached`` and ``cached_pods`` see every object at once) that tests can
switch off. Like a cluster, it serves the third-party kinds (Kubeflow jobs, Knative services) only
once their CRDs are installed (``serve``): else their creates answer 404.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from podwright.adapters.kubernetes.errors import error_from_status
from podwright.engine.kubernetes_port import JsonObject, KubernetesError, ObjectRef, PatchType
from tests.k8s_emulator import ApiError, ApiStore
from tests.k8s_emulator.crds import install_crds
from tests.k8s_emulator.store import RESOURCE_TYPES, ResourceType


def resource_of(api_version: str, kind: str) -> ResourceType:
    """A built-in kind's resource (a custom kind's: ``FakeKubernetes.resource``)."""
    for resource in RESOURCE_TYPES:
        if (resource.api_version, resource.kind) == (api_version, kind):
            return resource
    raise AssertionError(f"no such kind {api_version}/{kind}")


class FakeKubernetes:
    def __init__(self, store: ApiStore | None = None) -> None:
        self.store = store or ApiStore()
        self.calls: Counter[str] = Counter()
        self.created: list[str] = []
        """``Kind/name`` of every object created, in order."""
        self.failures: defaultdict[str, list[KubernetesError]] = defaultdict(list)
        self.kind_failures: defaultdict[str, list[KubernetesError]] = defaultdict(list)
        self.cache_enabled = True

    def fail(self, verb: str, *errors: KubernetesError) -> None:
        self.failures[verb].extend(errors)

    def fail_create_of(self, kind: str, *errors: KubernetesError) -> None:
        """The next creates of objects of ``kind`` raise ``errors``, one each."""
        self.kind_failures[kind].extend(errors)

    def serve(self, api_version: str, kind: str) -> None:
        """Install the CRD that serves ``kind`` (nothing for a built-in kind)."""
        if (api_version, kind) not in {(r.api_version, r.kind) for r in RESOURCE_TYPES}:
            install_crds(self.store, (api_version, kind))

    def resource(self, api_version: str, kind: str) -> ResourceType:
        """The served resource of ``kind``, built-in or custom."""
        try:
            return self.store.resource_for(api_version, kind)
        except ApiError as error:
            raise AssertionError(f"{api_version}/{kind} is not served") from error

    def namespace(self, name: str) -> None:
        self.store.create(resource_of("v1", "Namespace"), "", {"metadata": {"name": name}})

    def _call(self, verb: str, operation: Any) -> Any:
        self.calls[verb] += 1
        if self.failures[verb]:
            raise self.failures[verb].pop(0)
        try:
            return operation()
        except ApiError as error:
            headers = {"Retry-After": str(error.retry_after)} if error.retry_after else {}
            raise error_from_status(error.code, error.status(), headers) from error

    def create(self, obj: JsonObject) -> dict[str, Any]:
        namespace = obj["metadata"].get("namespace", "")
        if self.kind_failures[obj["kind"]]:
            self.calls["create"] += 1
            raise self.kind_failures[obj["kind"]].pop(0)
        created: dict[str, Any] = self._call(
            "create",
            lambda: self.store.create(
                self.store.resource_for(obj["apiVersion"], obj["kind"]), namespace, obj
            ),
        )
        self.created.append(f"{obj['kind']}/{created['metadata']['name']}")
        return created

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        resource = self.resource(ref.api_version, ref.kind)
        return self._call("get", lambda: self.store.get(resource, ref.namespace, ref.name))  # type: ignore[no-any-return]

    def cached(self, ref: ObjectRef) -> JsonObject | None:
        if not self.cache_enabled:
            return None
        try:
            return self.store.get(self.resource(ref.api_version, ref.kind), ref.namespace, ref.name)
        except ApiError:
            return None

    def cached_pods(self, namespace: str, label: str, value: str) -> list[JsonObject] | None:
        if not self.cache_enabled:
            return None
        pods = self.store.list(resource_of("v1", "Pod"), namespace)[0]
        return [pod for pod in pods if (pod["metadata"].get("labels") or {}).get(label) == value]

    def patch(self, ref: ObjectRef, body: Any, patch_type: PatchType) -> dict[str, Any]:
        resource = self.resource(ref.api_version, ref.kind)
        return self._call(  # type: ignore[no-any-return]
            "patch",
            lambda: self.store.patch(resource, ref.namespace, ref.name, body, patch_type.value),
        )

    def replace(self, ref: ObjectRef, obj: JsonObject) -> dict[str, Any]:
        resource = self.resource(ref.api_version, ref.kind)
        return self._call(
            "update", lambda: self.store.replace(resource, ref.namespace, ref.name, obj)
        )  # type: ignore[no-any-return]

    def delete(self, ref: ObjectRef, *, propagation: str = "Background") -> None:
        resource = self.resource(ref.api_version, ref.kind)
        self._call(
            "delete",
            lambda: self.store.delete(resource, ref.namespace, ref.name, propagation=propagation),
        )

    def set_status(self, ref: ObjectRef, status: dict[str, Any]) -> None:
        """Drive the object's status, as its controller or kubelet would."""
        resource = self.resource(ref.api_version, ref.kind)
        self.store.patch(
            resource,
            ref.namespace,
            ref.name,
            {"status": status},
            PatchType.MERGE.value,
            subresource="status",
        )
