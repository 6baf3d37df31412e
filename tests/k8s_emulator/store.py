"""The emulator's object store: the API server's storage and admission semantics, without HTTP.

Deletion follows the registry's (``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/
store.go``, ``Delete`` and ``updateForGracefulDeletionAndFinalizers``; ``rest.BeforeDelete``):

* a Pod is deleted gracefully (``CheckGracefulDelete`` in ``pkg/registry/core/pod/strategy.go``):
  its grace period is the request's ``gracePeriodSeconds``, else its spec's
  ``terminationGracePeriodSeconds`` (30 when unset, as defaulting sets it), and 0 when it is not
  bound to a node or is already Succeeded or Failed. With a period above 0 it stays, with
  ``deletionTimestamp`` (now + the period) and ``deletionGracePeriodSeconds``, until a delete with
  a shorter period (the kubelet's, 0, once its containers stopped) and no finalizer is left;
* a ``propagationPolicy`` of Foreground adds the ``foregroundDeletion`` finalizer (Orphan:
  ``orphan``; Background removes both; none: the kind's default, see ``strategies.py``), which
  the garbage collector (``controllers.py``, when the :class:`Emulator` runs) acts on;
* an object with finalizers stays, marked as deleting (``deletionTimestamp`` now, grace 0), and
  goes once the last finalizer is removed; a Pod deleted with a period of 0 and no finalizer is
  written with its ``deletionTimestamp`` first, then removed (two changes a watch sees, MODIFIED
  then DELETED, as ``updateForGracefulDeletionAndFinalizers`` writes before ``Delete`` removes).

Pods are bound to nodes through the ``binding`` subresource, as the scheduler does. Per-kind
registry rules (Job defaulting, namespace lifecycle) live in ``strategies.py``.
"""

from __future__ import annotations

import bisect
import contextvars
import random
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from podwright.core.json_patch import (
    MalformedPatchError,
    UnappliablePatchError,
    apply_json_patch,
    apply_merge_patch,
)
from tests.k8s_emulator.admission import Admission, Attributes
from tests.k8s_emulator.custom_resources import (
    CRD,
    CustomResourceRegistry,
    ServedVersion,
    admit_custom_object,
    check_definition,
    created_definition_status,
    defaulted_definition,
    definition_status,
    generation_changes,
    main_update_keeps_status,
    status_update,
)
from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.field_validation import decoded
from tests.k8s_emulator.json_values import json_copy
from tests.k8s_emulator.leases import validate_lease
from tests.k8s_emulator.openapi_schema import apply_defaults
from tests.k8s_emulator.resource_quota import admit_pod_quotas
from tests.k8s_emulator.resource_types import ResourceType
from tests.k8s_emulator.selectors import field_selector, label_selector
from tests.k8s_emulator.strategies import (
    FOREGROUND_DELETION,
    ORPHAN,
    admit_pod_priority,
    default_job,
    default_pod,
    deletion_propagation,
    prepare_namespace,
    refuse_in_terminating_namespace,
)

Obj = dict[str, Any]
_DRY_RUN = contextvars.ContextVar("dry_run", default=False)
"""Whether the current thread serves a ``dryRun=All`` request (see ``ApiStore.dry_run``)."""
T = TypeVar("T")

PODS = ResourceType("", "v1", "pods", "Pod", short_names=("po",), categories=("all",))
QUOTAS = ResourceType("", "v1", "resourcequotas", "ResourceQuota", short_names=("quota",))
PRIORITY_CLASSES = ResourceType(
    "scheduling.k8s.io",
    "v1",
    "priorityclasses",
    "PriorityClass",
    namespaced=False,
    status_subresource=False,
    short_names=("pc",),
)
RESOURCE_TYPES = [
    ResourceType("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",)),
    PODS,
    ResourceType(
        "", "v1", "configmaps", "ConfigMap", status_subresource=False, short_names=("cm",)
    ),
    ResourceType("", "v1", "secrets", "Secret", status_subresource=False),
    ResourceType(
        "", "v1", "serviceaccounts", "ServiceAccount", status_subresource=False, short_names=("sa",)
    ),
    ResourceType("", "v1", "services", "Service", short_names=("svc",), categories=("all",)),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",)),
    QUOTAS,
    ResourceType("", "v1", "nodes", "Node", namespaced=False, short_names=("no",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", status_subresource=False),
    ResourceType(
        "events.k8s.io", "v1", "events", "Event", status_subresource=False, short_names=("ev",)
    ),
    PRIORITY_CLASSES,
    ResourceType("batch", "v1", "jobs", "Job", categories=("all",)),
    ResourceType(
        "apps", "v1", "deployments", "Deployment", short_names=("deploy",), categories=("all",)
    ),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", short_names=("ds",), categories=("all",)),
    *(
        ResourceType(
            "rbac.authorization.k8s.io",
            "v1",
            kind.lower() + "s",
            kind,
            namespaced=kind.startswith("Role"),
            status_subresource=False,
        )
        for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ),
    *(
        ResourceType(
            "admissionregistration.k8s.io",
            "v1",
            kind.lower() + "s",
            kind,
            False,
            False,
            categories=("api-extensions",),
        )
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    ),
    CRD,
]
"""The built-in kinds; custom ones are served once their CustomResourceDefinition is created. Short
names and categories are a real server's (``kubectl api-resources``)."""

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_GENERATED_CHARACTERS = "bcdfghjklmnpqrstvwxz2456789"
DEFAULT_POD_GRACE_SECONDS = 30
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
"""The namespaces a cluster starts with (the apiserver's system namespaces controller)."""


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LostRaceError(ApiError):
    """A write that lost to another (409 AlreadyExists, or a stale resourceVersion): the store's
    own answer, never an admission webhook's refusal, so a caller may try again."""


@dataclass
class WatchEvent:
    resource_version: int
    resource: ResourceType
    type: str
    obj: Obj
    previous: Obj | None


class ApiStore:
    """Objects by (resource type, namespace, name), with a global resourceVersion counter and a
    bounded history of changes that watches replay from."""

    def __init__(
        self, *, history_limit: int = 100_000, clock: Callable[[], datetime] | None = None
    ) -> None:
        # By kind first, as etcd keys them (/registry/<group>/<resource>/<namespace>/<name>): a
        # list, a watch's initial state or an admission lookup reads one kind, never them all.
        self._objects: dict[ResourceType, dict[tuple[str, str], Obj]] = {}
        self._history: list[WatchEvent] = []
        self._history_limit = history_limit
        # Versions before the store began are compacted, as on any API server that has run a while.
        self._revision = 1000
        self._compacted = 1000
        self._lock = threading.RLock()
        """Guards everything the store holds."""
        self._changed = threading.Condition(self._lock)
        """Signalled at every change (the control plane follows them all)."""
        self._kind_changed: dict[ResourceType, threading.Condition] = {}
        """Signalled at a change of one kind, over the same lock: a watch wakes for its own kind
        only, as the watch cache of each resource has its own watchers. Waking every watch at
        every write cost more than the writes at thousands of objects."""
        self._clock = clock or (lambda: datetime.now(UTC))
        self._random = random.Random()
        self.custom_resources = CustomResourceRegistry()
        self.admission = Admission(
            configurations=self._webhook_configurations,
            namespace=lambda name: self.get(resource_type("", "namespaces"), "", name),
        )
        for namespace in INITIAL_NAMESPACES:
            self.create(resource_type("", "namespaces"), "", {"metadata": {"name": namespace}})

    # Reading ------------------------------------------------------------------------------

    def served(self, group: str, version: str, plural: str) -> ResourceType:
        """The resource served at ``/apis/<group>/<version>/<plural>`` (``/api/v1/<plural>`` for
        the core group): a built-in kind, or a custom one whose CRD exists; else 404."""
        custom = self.custom_resources.lookup(group, version, plural)
        if custom is not None:
            return custom.resource
        for resource in RESOURCE_TYPES:
            if (resource.group, resource.version, resource.plural) == (group, version, plural):
                return resource
        raise ApiError(
            404, "NotFound", f"the server could not find the requested resource ({plural})"
        )

    def resource_for(self, api_version: str, kind: str) -> ResourceType:
        """The served resource of ``kind`` in ``api_version``; else 404."""
        for resource in self.served_resources():
            if (resource.api_version, resource.kind) == (api_version, kind):
                return resource
        raise ApiError(
            404, "NotFound", f"the server could not find the requested resource ({kind})"
        )

    def served_resources(self) -> list[ResourceType]:
        """Every resource served now: the built-in kinds, then the custom ones."""
        with self._lock:
            return [*RESOURCE_TYPES, *(served.resource for served in self.custom_resources)]

    def now(self) -> datetime:
        """The store's clock: what its timestamps are written by."""
        return self._clock()

    @property
    def in_dry_run(self) -> bool:
        """True while this thread serves a ``dryRun=All`` request (admission sends it to
        webhooks as the AdmissionReview's ``dryRun``)."""
        return _DRY_RUN.get()

    def dry_run(self, operation: Callable[[], T]) -> T:
        """Run a write as ``?dryRun=All`` does: every step (defaulting, admission, validation)
        and the answer as for a real write, but nothing stored, no resourceVersion used, no
        watch event (``rest.DryRunnableStorage`` in apiserver ``pkg/registry/generic/registry/
        dryrun.go``: a create answers without a resourceVersion, an update with the old one).
        The flag is the calling thread's own: other requests go on meanwhile."""
        token = _DRY_RUN.set(True)
        try:
            return operation()
        finally:
            _DRY_RUN.reset(token)

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._revision

    def wait_for_change(self, after: int, stop: threading.Event, timeout: float | None) -> int:
        """Block until the resourceVersion passes ``after``, ``stop`` is set (and the watchers
        woken) or ``timeout`` seconds passed; the current resourceVersion."""
        with self._lock:
            self._changed.wait_for(lambda: self._revision > after or stop.is_set(), timeout)
            return self._revision

    def snapshot(
        self, *, namespace: str | None = None
    ) -> tuple[list[tuple[ResourceType, Obj]], int]:
        """Every stored object (in ``namespace`` only, if given) and the resourceVersion they are
        at, for the controllers. The objects are the store's own: read them, never change them
        (a write replaces an object, it never changes one in place)."""
        with self._lock:
            found = [
                (resource, obj)
                for resource, objects in self._objects.items()
                for (ns, _name), obj in objects.items()
                if namespace is None or ns == namespace
            ]
            return found, self._revision

    def changes(self, since: int) -> tuple[list[WatchEvent], int] | None:
        """The changes after resourceVersion ``since`` and the resourceVersion they lead to, for a
        controller keeping its own view up to date (as an informer does from a watch); None if
        the history no longer reaches back to ``since`` (read a :meth:`snapshot` again). The
        events' objects are copies: read them, never change them."""
        with self._lock:
            after = self._history_after(since)
            return None if after is None else (after, self._revision)

    def get(self, resource: ResourceType, namespace: str, name: str) -> Obj:
        with self._lock:
            return json_copy(self._existing(resource, namespace, name))

    def list(
        self,
        resource: ResourceType,
        namespace: str | None,
        labels: str | None = None,
        fields: str | None = None,
    ) -> tuple[list[Obj], int]:
        selects = self.selector(resource, labels, fields)
        with self._lock:
            found = [
                json_copy(obj)
                for (ns, _name), obj in sorted(self._of_kind(resource).items())
                if (namespace is None or ns == namespace) and selects(obj)
            ]
            return found, self._revision

    def selector(
        self, resource: ResourceType, labels: str | None, fields: str | None
    ) -> Callable[[Mapping[str, Any]], bool]:
        by_labels = label_selector(labels)
        by_fields = field_selector(fields, lambda obj: _selectable_fields(resource, obj))
        return lambda obj: by_labels(obj["metadata"].get("labels") or {}) and by_fields(obj)

    # Writing ------------------------------------------------------------------------------

    def create(self, resource: ResourceType, namespace: str, body: Mapping[str, Any]) -> Obj:
        """Create an object: admission's mutating webhooks see it as decoded (a custom object
        pruned and defaulted), its validating webhooks as it would be stored (named, with its
        uid, checked by its schema); the lock is never held while a webhook is called (the
        registry's ``Create``: ``BeforeCreate``, then the validating admission, then the
        write)."""
        obj = json_copy(dict(body))
        metadata = obj.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise ApiError(400, "BadRequest", "metadata: must be an object")
        if resource.namespaced:
            if metadata.get("namespace", namespace) != namespace:
                raise ApiError(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on "
                    "the request",
                )
            metadata["namespace"] = namespace
        with self._lock:
            self._require_namespace(resource, namespace, metadata.get("name") or "")
        obj = self._decoded(resource, obj)
        obj = self.admission.mutate(
            Attributes(
                resource,
                "CREATE",
                namespace,
                metadata.get("name") or "",
                obj,
                dry_run=self.in_dry_run,
            )
        )
        metadata = obj.setdefault("metadata", {})
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = metadata["generateName"] + "".join(
                self._random.choice(_GENERATED_CHARACTERS) for _ in range(5)
            )
        name = metadata.get("name")
        self._validate(resource, obj, name)
        for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            metadata.pop(server_owned, None)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = rfc3339(self._clock())
        metadata["generation"] = 1
        obj["apiVersion"] = resource.api_version
        obj["kind"] = resource.kind
        if resource.custom:
            if resource.status_subresource:
                obj.pop("status", None)
        elif resource.status_subresource:
            obj["status"] = _initial_status(resource, obj)
        if (resource.group, resource.kind) == ("batch", "Job"):
            default_job(obj)
        if (resource.group, resource.kind) == ("", "Pod"):
            default_pod(obj)
        if resource.kind == "Namespace":
            prepare_namespace(obj)
        with self._lock:
            obj = self._admitted(resource, obj, None)
        self.admission.validate(
            Attributes(resource, "CREATE", namespace, name, obj, dry_run=self.in_dry_run)
        )
        with self._lock:
            self._require_namespace(resource, namespace, name)
            self._require_served(resource)
            key = (resource, namespace if resource.namespaced else "", name)
            if self._lookup(key) is not None:
                raise LostRaceError(
                    409,
                    "AlreadyExists",
                    f'{resource.group_resource} "{name}" already exists',
                    details={"name": name, "group": resource.group, "kind": resource.plural},
                )
            if resource.kind == "Pod" and resource.group == "":
                self._admit_pod(namespace, obj)
            created = self._store(resource, key, obj, "ADDED", None)
            if resource == CRD and not self.in_dry_run:
                self._establish(key, obj)
            return created

    def replace(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> Obj:
        def proposed(current: Obj) -> Obj:
            given = json_copy(dict(body))
            metadata = given.get("metadata") or {}
            if metadata.get("name", name) != name:
                raise ApiError(
                    400,
                    "BadRequest",
                    f"the name of the object ({metadata.get('name')}) does not match the name on "
                    f"the URL ({name})",
                )
            version = metadata.get("resourceVersion")
            if version and version != current["metadata"]["resourceVersion"]:
                raise self._conflict(resource, name)
            return given

        return self._admitted_update(resource, namespace, name, proposed, subresource)

    def patch(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        patch: Any,
        content_type: str,
        *,
        subresource: str | None = None,
    ) -> Obj:
        def proposed(current: Obj) -> Obj:
            try:
                if content_type.startswith("application/json-patch+json"):
                    patched: Obj = apply_json_patch(current, patch)
                elif content_type.startswith(
                    ("application/merge-patch+json", "application/strategic-merge-patch+json")
                ):
                    if not isinstance(patch, dict):
                        raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
                    patched = apply_merge_patch(current, patch)
                else:
                    raise ApiError(
                        415, "UnsupportedMediaType", f"unsupported patch type {content_type}"
                    )
            except MalformedPatchError as error:
                raise ApiError(400, "BadRequest", str(error)) from error
            except UnappliablePatchError as error:
                raise ApiError(422, "UnprocessableEntity", str(error)) from error
            version = (patched.get("metadata") or {}).get("resourceVersion")
            if version != current["metadata"]["resourceVersion"]:
                raise self._conflict(resource, name)
            return patched

        return self._admitted_update(resource, namespace, name, proposed, subresource)

    def apply(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        config: Mapping[str, Any],
        *,
        manager: str,
        subresource: str | None = None,
    ) -> tuple[Obj, bool]:
        """Server-side apply, simplified: the applied configuration creates the object when it
        is absent, else is merged over it as a JSON merge patch would be (lists are replaced
        whole, not merged by key), through the same create and update paths as any write. Its
        manager gets one ``Apply`` entry in ``metadata.managedFields`` (manager, operation,
        apiVersion, time, subresource, and the fields it applied as ``fieldsV1``: lists as
        one field, where a real server names the items of a list with keys; kubectl reads the
        entries, ``csaupgrade.FindFieldsOwners``). Not modelled: field ownership, so no
        conflicts (``force`` changes nothing) and no removal of fields a manager stopped
        applying; managedFields entries of other writes. Returns the object and whether it was
        created."""
        applied = json_copy(dict(config))
        metadata = applied.setdefault("metadata", {})
        metadata.setdefault("name", name)
        key = (resource, namespace if resource.namespaced else "", name)
        while True:
            with self._lock:
                current = json_copy(self._lookup(key))
            entries = [
                entry
                for entry in (current or {}).get("metadata", {}).get("managedFields") or []
                if (entry.get("manager"), entry.get("operation"), entry.get("subresource"))
                != (manager, "Apply", subresource)
            ]
            entry = {
                "manager": manager,
                "operation": "Apply",
                "apiVersion": resource.api_version,
                "time": rfc3339(self._clock()),
                "fieldsType": "FieldsV1",
                "fieldsV1": _fields_v1(applied),
            }
            if subresource:
                entry["subresource"] = subresource
            attempt = json_copy(applied)
            attempt["metadata"]["managedFields"] = [*entries, entry]
            if current is None:
                if subresource is not None:
                    raise self._not_found(resource, name)
                try:
                    return self.create(resource, namespace, attempt), True
                except LostRaceError:  # created meanwhile: apply over it
                    continue
            given_version = metadata.get("resourceVersion")
            attempt["metadata"]["resourceVersion"] = (
                given_version or current["metadata"]["resourceVersion"]
            )
            try:
                patched = self.patch(
                    resource,
                    namespace,
                    name,
                    attempt,
                    "application/merge-patch+json",
                    subresource=subresource,
                )
            except LostRaceError:
                if given_version:
                    raise
                continue  # changed meanwhile: apply again
            return patched, False

    def delete(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        *,
        preconditions: Mapping[str, Any] | None = None,
        grace_period_seconds: int | None = None,
        propagation: str | None = None,
    ) -> Obj:
        """Delete an object: admission sees it without the lock held; if it changed meanwhile,
        all starts over (the registry's conditional delete)."""
        options = {
            "gracePeriodSeconds": grace_period_seconds,
            "preconditions": preconditions,
            "propagationPolicy": propagation,
        }
        while True:
            with self._lock:
                seen = json_copy(self._existing(resource, namespace, name))
            self.admission.admit_delete(
                Attributes(
                    resource,
                    "DELETE",
                    namespace,
                    name,
                    None,
                    seen,
                    options={key: value for key, value in options.items() if value is not None},
                    dry_run=self.in_dry_run,
                )
            )
            with self._lock:
                current = self._existing(resource, namespace, name)
                if current["metadata"]["resourceVersion"] == seen["metadata"]["resourceVersion"]:
                    return self._delete_admitted(
                        resource,
                        namespace,
                        name,
                        current,
                        preconditions=preconditions,
                        grace_period_seconds=grace_period_seconds,
                        propagation=propagation,
                    )

    def _delete_admitted(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        current: Obj,
        *,
        preconditions: Mapping[str, Any] | None,
        grace_period_seconds: int | None,
        propagation: str | None,
    ) -> Obj:
        """The delete itself, under the lock, once admission let it through."""
        metadata = current["metadata"]
        for field in ("uid", "resourceVersion"):
            wanted = (preconditions or {}).get(field)
            if wanted and wanted != metadata[field]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource.group_resource} "{name}": '
                    f"Precondition failed: {field} in precondition: {wanted}, {field} in "
                    f"object meta: {metadata[field]}",
                )
        key = (resource, namespace if resource.namespaced else "", name)
        updated = json_copy(current)
        meta = updated["metadata"]
        now = self._clock()
        graceful = False
        finalized_later = resource.kind == "Namespace" and bool(_namespace_finalizers(updated))
        if finalized_later:
            # The namespace controller empties it, then removes its spec finalizer.
            updated["status"]["phase"] = "Terminating"
        if _is_pod(resource):
            if meta.get("deletionTimestamp"):
                pending = meta.get("deletionGracePeriodSeconds") or 0
                if pending > 0:
                    if grace_period_seconds is None or grace_period_seconds >= pending:
                        return json_copy(current)  # graceful deletion is pending
                    # Only a shorter grace period may be given: the deadline moves closer.
                    started = _parse_time(meta["deletionTimestamp"]) - timedelta(seconds=pending)
                    meta["deletionTimestamp"] = rfc3339(
                        started + timedelta(seconds=grace_period_seconds)
                    )
                    meta["deletionGracePeriodSeconds"] = grace_period_seconds
                    graceful = True
            else:
                period = _pod_grace_period(current, grace_period_seconds)
                meta["deletionTimestamp"] = rfc3339(now + timedelta(seconds=period))
                meta["deletionGracePeriodSeconds"] = period
                _bump_generation(meta)
                graceful = True
        _gc_finalizers(
            meta,
            deletion_propagation(
                resource.api_version, resource.kind, propagation, meta.get("finalizers") or []
            ),
        )
        if meta.get("finalizers") or finalized_later:
            if not graceful:
                # markAsDeleting: deleting now, with a grace period of 0.
                if not meta.get("deletionTimestamp"):
                    _bump_generation(meta)
                    meta["deletionTimestamp"] = rfc3339(now)
                meta["deletionGracePeriodSeconds"] = 0
            if updated == current:
                return json_copy(current)
            return self._store(resource, key, updated, "MODIFIED", current)
        if graceful:
            # updateForGracefulDeletionAndFinalizers writes the deletion first: a watch sees it
            # (MODIFIED) even when a grace period of 0 lets Delete remove the pod right after.
            written = self._store(resource, key, updated, "MODIFIED", current)
            if meta["deletionGracePeriodSeconds"] > 0:
                return written
        return self._remove(resource, key, updated)

    def bind(self, namespace: str, name: str, binding: Mapping[str, Any]) -> Obj:
        """Bind a pod to a node (``POST pods/<name>/binding``): ``spec.nodeName`` and the
        PodScheduled condition, as the scheduler's binding does (``assignPod`` in
        ``pkg/registry/core/pod/storage/storage.go``); a pod bound already, or being deleted,
        is a conflict."""
        node = (binding.get("target") or {}).get("name")
        if not node:
            raise ApiError(422, "Invalid", "Binding.target.name: Required value")
        resource = resource_type("", "pods")
        with self._lock:
            current = self._existing(resource, namespace, name)
            spec = current.get("spec") or {}
            refused = f'Operation cannot be fulfilled on pods/binding "{name}": pod {name}'
            if current["metadata"].get("deletionTimestamp"):
                raise ApiError(
                    409, "Conflict", f"{refused} is being deleted, cannot be assigned to a host"
                )
            if spec.get("nodeName"):
                raise ApiError(
                    409, "Conflict", f'{refused} is already assigned to node "{spec["nodeName"]}"'
                )
            updated = json_copy(current)
            updated.setdefault("spec", {})["nodeName"] = node
            status = updated.setdefault("status", {})
            conditions = [
                c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": rfc3339(self._clock()),
                }
            )
            status["conditions"] = conditions
            key = (resource, namespace, name)
            self._store(resource, key, updated, "MODIFIED", current)
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "code": 201,
            }

    # Watching -----------------------------------------------------------------------------

    def watch(
        self,
        resource: ResourceType,
        namespace: str | None,
        *,
        since: int | None,
        selects: Callable[[Mapping[str, Any]], bool],
        stop: threading.Event,
        deadline: datetime | None,
        bookmark_every: float | None,
    ) -> Iterator[dict[str, Any]]:
        """Watch events after resourceVersion ``since`` (None: the current state first, as
        synthetic ADDED events). Raises :class:`ApiError` 410 when ``since`` is compacted.

        Each event's object is a shallow copy of the stored one, shared with every other
        watcher below its top level: the server sets its ``apiVersion`` and serializes it, and
        copying thousands of objects whole for each watcher was most of a watch's cost."""
        with self._lock:
            if since is None:
                initial = [
                    {"type": "ADDED", "object": dict(obj)}
                    for (ns, _name), obj in self._of_kind(resource).items()
                    if (namespace is None or ns == namespace) and selects(obj)
                ]
                position = self._revision
            else:
                if since < self._compacted:
                    raise ApiError(
                        410,
                        "Expired",
                        f"too old resource version: {since} ({self._compacted})",
                    )
                initial = []
                position = since
        yield from initial
        while not stop.is_set():
            bookmark: Obj | None = None
            with self._lock:
                after = self._history_after(position)
                if after is None:
                    # The history this watch had still to send was compacted (it read too
                    # slowly): it ends, as the API server closes a watcher that falls behind,
                    # and its client resumes from its last version (410 then, so it lists).
                    return
                pending = after
                if not pending:
                    if deadline is not None and datetime.now(UTC) >= deadline:
                        return
                    signalled = self._kind_condition(resource).wait(timeout=bookmark_every or 0.2)
                    # A write may have slipped in between the wait's timeout and its taking the
                    # lock back: a bookmark past it would skip its event for good.
                    quiet = self._history_after(position) == []
                    if not signalled and quiet and bookmark_every is not None:
                        bookmark = {
                            "kind": resource.kind,
                            "apiVersion": resource.api_version,
                            "metadata": {"resourceVersion": str(self._revision)},
                        }
                        position = max(position, self._revision)
            if not pending:
                # Sent once the lock is let go: a slow client never holds up the store.
                if bookmark is not None:
                    yield {"type": "BOOKMARK", "object": bookmark}
                continue
            for event in pending:
                position = event.resource_version
                if event.resource != resource:
                    continue
                ns = event.obj["metadata"].get("namespace", "")
                if namespace is not None and ns != namespace:
                    continue
                was = event.previous is not None and selects(event.previous)
                now = selects(event.obj)
                if event.type == "DELETED":
                    if now:
                        yield {"type": "DELETED", "object": dict(event.obj)}
                elif was and now:
                    yield {"type": "MODIFIED", "object": dict(event.obj)}
                elif now:
                    yield {"type": "ADDED", "object": dict(event.obj)}
                elif was:
                    yield {"type": "DELETED", "object": dict(event.obj)}

    def compact(self) -> int:
        """Forget the watch history up to now: resuming from an older version answers 410."""
        with self._lock:
            self._compacted = self._revision
            self._history.clear()
            return self._compacted

    def wake_watchers(self) -> None:
        with self._lock:
            self._changed.notify_all()
            for condition in self._kind_changed.values():
                condition.notify_all()

    # Internals ----------------------------------------------------------------------------

    def _history_after(self, version: int) -> list[WatchEvent] | None:
        """The recorded changes after ``version``; None if some were compacted away. Callers
        hold the lock."""
        if version < self._compacted:
            return None
        start = bisect.bisect_right(self._history, version, key=lambda e: e.resource_version)
        return self._history[start:]

    def _webhook_configurations(self, plural: str) -> list[Obj]:
        """The stored webhook configurations of one kind, for admission to read (never change):
        every write asks for them, and a copy of each for every request cost more than the rest
        of admission."""
        with self._lock:
            return list(
                self._of_kind(resource_type("admissionregistration.k8s.io", plural)).values()
            )

    def _of_kind(self, resource: ResourceType) -> dict[tuple[str, str], Obj]:
        """The stored objects of one kind, by (namespace, name); callers hold the lock."""
        return self._objects.setdefault(resource, {})

    def _lookup(self, key: tuple[ResourceType, str, str]) -> Obj | None:
        return self._objects.get(key[0], {}).get(key[1:])

    def _existing(self, resource: ResourceType, namespace: str, name: str) -> Obj:
        obj = self._lookup((resource, namespace if resource.namespaced else "", name))
        if obj is None:
            raise self._not_found(resource, name)
        return obj

    def _not_found(self, resource: ResourceType, name: str) -> ApiError:
        return ApiError(
            404,
            "NotFound",
            f'{resource.group_resource} "{name}" not found',
            details={"name": name, "group": resource.group, "kind": resource.plural},
        )

    def _decoded(self, resource: ResourceType, obj: Obj) -> Obj:
        """``obj`` as the API server decodes a request, before mutating admission: without the
        fields its kind does not know (``field_validation``), and a custom object defaulted by
        its schema (apiextensions-apiserver's decoding; "Defaulting" in the
        CustomResourceDefinition docs)."""
        with self._lock:
            served = self._require_served(resource)
        obj = decoded(resource, obj, None if served is None else served.schema)
        # Decoding pruned a custom object already (its walk drops what the schema does not
        # name, as pruning does): what is left is defaulting.
        return obj if served is None else apply_defaults(obj, served.schema)

    def _require_served(self, resource: ResourceType) -> ServedVersion | None:
        """A custom kind's served version (None for a built-in kind); 404 if its CRD went away
        while the request was on its way."""
        if not resource.custom:
            return None
        served = self.custom_resources.lookup(resource.group, resource.version, resource.plural)
        if served is None:
            raise ApiError(
                404,
                "NotFound",
                f"the server could not find the requested resource ({resource.plural})",
            )
        return served

    def _require_namespace(self, resource: ResourceType, namespace: str, name: str) -> None:
        """A namespaced object's namespace exists (else 404 naming it) and is not being deleted
        (else 403, as the NamespaceLifecycle admission plugin refuses)."""
        if not resource.namespaced:
            return
        home = self._lookup((resource_type("", "namespaces"), "", namespace))
        if home is None:
            raise ApiError(
                404,
                "NotFound",
                f'namespaces "{namespace}" not found',
                details={"name": namespace, "kind": "namespaces"},
            )
        if home["status"].get("phase") == "Terminating":
            raise refuse_in_terminating_namespace(resource.group_resource, name, namespace)

    def _conflict(self, resource: ResourceType, name: str) -> ApiError:
        return LostRaceError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {resource.group_resource} "{name}": the object has '
            "been modified; please apply your changes to the latest version and try again",
            details={"name": name, "group": resource.group, "kind": resource.plural},
        )

    def _validate(self, resource: ResourceType, obj: Obj, name: object) -> None:
        if not isinstance(name, str) or not name:
            raise ApiError(
                422,
                "Invalid",
                f"{resource.kind} is invalid: metadata.name: Required value: name or "
                "generateName is required",
            )
        if len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
            raise ApiError(
                422,
                "Invalid",
                f'{resource.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": a '
                "lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.'",
                details={"name": name, "kind": resource.kind},
            )
        if resource.kind == "Pod" and resource.group == "":
            containers = (obj.get("spec") or {}).get("containers")
            if not containers:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Pod "{name}" is invalid: spec.containers: Required value',
                    details={"name": name, "kind": "Pod"},
                )
        if resource.kind == "Lease":
            validate_lease(obj)

    def _admitted_update(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        proposed: Callable[[Obj], Obj],
        subresource: str | None,
    ) -> Obj:
        """An update through admission, as the registry's ``Update`` runs in ``GuaranteedUpdate``:
        the new object is ``proposed`` from the current one, mutated by admission, prepared
        (``_updated``) and validated, all without the lock; it is stored only if the object did
        not change meanwhile, else all starts over from the changed object (as the registry
        retries on a conflict: a resourceVersion precondition then fails in ``proposed``)."""
        while True:
            with self._lock:
                # Not copied: a stored object is never changed in place, and everything below
                # that derives the update from it copies what it changes.
                current = self._existing(resource, namespace, name)
            given = self.admission.mutate(
                Attributes(
                    resource,
                    "UPDATE",
                    namespace,
                    name,
                    self._decoded(resource, proposed(current)),
                    current,
                    subresource or "",
                    dry_run=self.in_dry_run,
                )
            )
            with self._lock:
                updated = self._updated(resource, current, given, subresource)
            self.admission.validate(
                Attributes(
                    resource,
                    "UPDATE",
                    namespace,
                    name,
                    updated,
                    current,
                    subresource or "",
                    dry_run=self.in_dry_run,
                )
            )
            with self._lock:
                stored = self._existing(resource, namespace, name)
                if stored["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]:
                    return self._commit_update(resource, current, updated)

    def _updated(
        self, resource: ResourceType, current: Obj, given: Obj, subresource: str | None
    ) -> Obj:
        """The object an update stores (the strategy's ``PrepareForUpdate``), checked and
        admitted by its kind's schema."""
        metadata = current["metadata"]
        if subresource == "status":
            updated = status_update(resource, current, given)
        elif subresource == "finalize":
            # namespaces/<name>/finalize changes spec.finalizers alone (namespace storage's
            # FinalizeREST and finalizeNamespaceStrategy).
            updated = json_copy(current)
            updated["spec"]["finalizers"] = _namespace_finalizers(given)
        else:
            updated = json_copy(given)
            if resource.status_subresource:
                main_update_keeps_status(resource, current, updated)
        new_metadata = updated.setdefault("metadata", {})
        given_uid = new_metadata.get("uid")
        if given_uid and given_uid != metadata.get("uid"):
            # rest.BeforeUpdate keeps the stored uid only when none is given, then validates the
            # update (ValidateObjectMetaAccessorUpdate): a different one is immutable. Clients
            # send it as a precondition of a patch.
            raise ApiError(
                422,
                "Invalid",
                f'{resource.kind} "{metadata["name"]}" is invalid: metadata.uid: Invalid value: '
                f'"{given_uid}": field is immutable',
                details={"name": metadata["name"], "kind": resource.kind},
            )
        for immutable in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if immutable in metadata:
                new_metadata[immutable] = metadata[immutable]
            else:
                new_metadata.pop(immutable, None)
        updated["apiVersion"] = resource.api_version
        updated["kind"] = resource.kind
        added = set(new_metadata.get("finalizers") or []) - set(metadata.get("finalizers") or [])
        if metadata.get("deletionTimestamp") and added:
            raise ApiError(
                422,
                "Invalid",
                f'{resource.kind} "{metadata["name"]}" is invalid: metadata.finalizers: '
                "Forbidden: no new finalizers can be added if the object is being deleted",
            )
        if resource.kind == "Namespace" and subresource != "finalize":
            # Only the finalize subresource changes them (namespaceStrategy.PrepareForUpdate).
            updated.setdefault("spec", {})["finalizers"] = _namespace_finalizers(current)
        if resource.kind == "Lease":
            validate_lease(updated)
        if subresource != "status" and generation_changes(resource, current, updated):
            new_metadata["generation"] = metadata.get("generation", 1) + 1
        return self._admitted(resource, updated, current)

    def _commit_update(self, resource: ResourceType, current: Obj, updated: Obj) -> Obj:
        metadata = current["metadata"]
        key = (resource, metadata.get("namespace", ""), metadata["name"])
        if updated == current:
            return json_copy(current)
        # ShouldDeleteDuringUpdate: the last finalizer of an object deleted with a grace period of
        # 0 is gone (a pod still in its grace period waits for the kubelet's delete; a namespace,
        # for its spec finalizers too: ShouldDeleteNamespaceDuringUpdate).
        if (
            metadata.get("deletionTimestamp")
            and not updated["metadata"].get("finalizers")
            and not metadata.get("deletionGracePeriodSeconds")
            and not (resource.kind == "Namespace" and _namespace_finalizers(updated))
        ):
            return self._remove(resource, key, updated)
        return self._store(resource, key, updated, "MODIFIED", current)

    def _admitted(self, resource: ResourceType, obj: Obj, previous: Obj | None) -> Obj:
        """``obj`` as its kind's schema and controllers make it before it is stored: a custom
        object pruned, defaulted and validated; a CRD checked, defaulted, and its status
        written (see ``custom_resources``)."""
        served = self._require_served(resource)
        if served is not None:
            return admit_custom_object(served, obj)
        if resource == CRD:
            check_definition(obj)
            obj = defaulted_definition(obj)
            obj["status"] = (
                created_definition_status(obj)
                if previous is None
                else definition_status(obj, rfc3339(self._clock()), previous)
            )
        return obj

    def _establish(self, key: tuple[ResourceType, str, str], crd: Obj) -> None:
        """The naming and establishing controllers' write into a CRD just created (see
        ``custom_resources``), as a change after the create's."""
        established = json_copy(crd)
        established["status"] = definition_status(established, rfc3339(self._clock()), crd)
        self._store(CRD, key, established, "MODIFIED", crd)

    def _store(
        self,
        resource: ResourceType,
        key: tuple[ResourceType, str, str],
        obj: Obj,
        event_type: str,
        previous: Obj | None,
    ) -> Obj:
        if self.in_dry_run:
            answer = json_copy(obj)
            if previous is None:
                answer["metadata"].pop("resourceVersion", None)
            else:
                answer["metadata"]["resourceVersion"] = previous["metadata"]["resourceVersion"]
            return answer
        self._revision += 1
        obj["metadata"]["resourceVersion"] = str(self._revision)
        self._of_kind(resource)[key[1:]] = obj
        # The history shares the stored object, as it shares the previous one: a write replaces
        # an object, it never changes one in place.
        self._record(WatchEvent(self._revision, resource, event_type, obj, previous))
        if resource == CRD:
            self.custom_resources.serve(obj)
        return json_copy(obj)

    def _remove(self, resource: ResourceType, key: tuple[ResourceType, str, str], obj: Obj) -> Obj:
        if self.in_dry_run:
            return json_copy(obj)
        self._revision += 1
        removed = json_copy(obj)
        removed["metadata"]["resourceVersion"] = str(self._revision)
        previous = self._of_kind(resource).pop(key[1:])
        self._record(WatchEvent(self._revision, resource, "DELETED", removed, previous))
        if resource == CRD:
            self._delete_custom_objects(previous)
        return json_copy(removed)

    def _delete_custom_objects(self, crd: Obj) -> None:
        """The CRD is gone: its kind is no longer served, and its objects are deleted."""
        served = self.custom_resources.stop(crd)
        if served is None:
            return
        for (namespace, name), obj in list(self._of_kind(served).items()):
            self._remove(served, (served, namespace, name), obj)

    def _record(self, event: WatchEvent) -> None:
        self._history.append(event)
        if len(self._history) > 2 * self._history_limit:
            # Like etcd's compaction: the oldest half is forgotten, and resuming a watch from a
            # version in it answers 410 Expired.
            dropped = self._history[: self._history_limit]
            self._compacted = dropped[-1].resource_version
            del self._history[: self._history_limit]
        self._changed.notify_all()
        watched = self._kind_changed.get(event.resource)
        if watched is not None:
            watched.notify_all()

    def _kind_condition(self, resource: ResourceType) -> threading.Condition:
        """The condition a watch of ``resource`` waits on; callers hold the lock."""
        condition = self._kind_changed.get(resource)
        if condition is None:
            condition = threading.Condition(self._lock)
            self._kind_changed[resource] = condition
        return condition

    def _admit_pod(self, namespace: str, pod: Obj) -> None:
        """Priority admission (see ``strategies.admit_pod_priority``), then ResourceQuota
        admission (see ``resource_quota``)."""
        admit_pod_priority(pod, list(self._of_kind(PRIORITY_CLASSES).values()))
        quotas = [obj for (ns, _name), obj in self._of_kind(QUOTAS).items() if ns == namespace]
        if not quotas:
            return
        pods = [
            obj
            for (ns, _name), obj in self._of_kind(PODS).items()
            if ns == namespace
            and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        admit_pod_quotas(pod, quotas, pods)


_NAMING_FIELDS = {
    "apiVersion": None,
    "kind": None,
    "metadata": {"name", "namespace", "managedFields", "resourceVersion", "uid"},
}
"""What names an applied object rather than being applied: fields, and fields of ``metadata``."""


def _fields_v1(applied: Mapping[str, Any], skipped: Mapping[str, Any] | None = None) -> Obj:
    """The fields of an applied configuration as a ``FieldsV1`` set (``f:<field>`` for each,
    ``{}`` at the leaves), without those in ``skipped`` (at the top: :data:`_NAMING_FIELDS`)."""
    skipped = _NAMING_FIELDS if skipped is None else skipped
    fields: Obj = {}
    for key, value in applied.items():
        if key in skipped and skipped[key] is None:
            continue
        inner = dict.fromkeys(skipped.get(key) or ())
        fields[f"f:{key}"] = (
            _fields_v1(value, inner) if isinstance(value, Mapping) and value else {}
        )
    return fields


def _is_pod(resource: ResourceType) -> bool:
    return resource.kind == "Pod" and resource.group == ""


def _pod_grace_period(pod: Mapping[str, Any], requested: int | None) -> int:
    """A pod's deletion grace period, as ``CheckGracefulDelete`` decides it."""
    spec = pod.get("spec") or {}
    period = requested
    if period is None:
        period = int(spec.get("terminationGracePeriodSeconds", DEFAULT_POD_GRACE_SECONDS))
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in (
        "Succeeded",
        "Failed",
    ):
        period = 0
    return 1 if period < 0 else period


def _gc_finalizers(metadata: dict[str, Any], propagation: str | None) -> None:
    """The garbage collector's finalizers a delete asks for (``deletionFinalizersFor
    GarbageCollection``): Foreground adds ``foregroundDeletion``, Orphan ``orphan``, Background
    removes both; no policy changes nothing."""
    if propagation is None:
        return
    wanted = {"Foreground": FOREGROUND_DELETION, "Orphan": ORPHAN}.get(propagation)
    finalizers = [
        f for f in metadata.get("finalizers") or [] if f not in (FOREGROUND_DELETION, ORPHAN)
    ]
    if wanted is not None:
        finalizers.append(wanted)
    if finalizers != (metadata.get("finalizers") or []):
        metadata["finalizers"] = finalizers


def _namespace_finalizers(namespace: Mapping[str, Any]) -> list[str]:
    return list((namespace.get("spec") or {}).get("finalizers") or [])


def _bump_generation(metadata: dict[str, Any]) -> None:
    if metadata.get("generation", 0) > 0:
        metadata["generation"] += 1


def _parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _initial_status(resource: ResourceType, obj: Obj) -> Obj:
    if resource.kind == "Pod" and resource.group == "":
        return {"phase": "Pending", "qosClass": "BestEffort"}
    if resource.kind == "ResourceQuota":
        return {"hard": dict((obj.get("spec") or {}).get("hard") or {})}
    if resource.kind == "Namespace":
        return {"phase": "Active"}
    if resource.kind == "Node":  # nodeStrategy.PrepareForCreate keeps a node's status
        return dict(obj.get("status") or {})
    return {}


def _selectable_fields(resource: ResourceType, obj: Mapping[str, Any]) -> dict[str, str]:
    metadata = obj.get("metadata") or {}
    fields = {"metadata.name": metadata.get("name", "")}
    if resource.namespaced:
        fields["metadata.namespace"] = metadata.get("namespace", "")
    if resource.kind == "Event":
        regarding = obj.get("regarding") or {}
        for field in ("kind", "name", "namespace", "uid", "apiVersion"):
            fields[f"regarding.{field}"] = regarding.get(field, "")
        fields["reason"] = obj.get("reason", "")
        fields["type"] = obj.get("type", "")
    if resource.kind == "Pod" and resource.group == "":
        fields["status.phase"] = (obj.get("status") or {}).get("phase", "")
        fields["spec.nodeName"] = (obj.get("spec") or {}).get("nodeName", "")
    return fields


def resource_type(group: str, plural: str) -> ResourceType:
    for resource in RESOURCE_TYPES:
        if resource.group == group and resource.plural == plural:
            return resource
    raise ApiError(404, "NotFound", f"the server could not find the requested resource ({plural})")
