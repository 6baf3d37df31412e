"""What a plugin tells the plugin manager about one Kubernetes resource kind.

A plugin builds the resource for a task, names the object the manager reads back, finds the pod
templates inside it, decides the task's phase from what it observes (and when a failure it reports
happened) and whether an aborted resource has stopped, and says how it differs from the defaults
(a kind that must not carry owner references or finalizers, a name length its controller needs
room within, an abort that patches instead of deleting, a deletion that need not wait for
dependents). Everything else (names, labels, finalizers, creation, companions, events, cleanup) is
the manager's, written once for every kind.
"""

from __future__ import annotations

import copy
import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from podwright.core.lifecycle import PhaseInfo, PluginState
from podwright.core.lifecycle.objects import section
from podwright.core.lifecycle.termination import dependents_deleted, grace_period
from podwright.engine.config import LifecycleConfig
from podwright.engine.kubernetes_port import JsonObject, ObjectRef, PatchType


@dataclass(frozen=True, slots=True)
class PluginProperties:
    disable_owner_references: bool = False
    disable_finalizer_injection: bool = False
    # The longest object name the kind's controllers leave room for (they derive names from it).
    generated_name_max_length: int = 63
    disable_delete_on_finalize: bool = False
    # How an abort deletes the resource: in the foreground, the object stays (with the
    # foregroundDeletion finalizer) until the pods it made are gone, which tells when it stopped.
    abort_propagation: str = "Foreground"
    # What a cluster needs installed to serve the kind (a create answered 404 names it).
    served_by: str = ""


@dataclass(frozen=True, slots=True)
class OwnerReference:
    """The object that owns a task's resource (garbage collection deletes the resource with it)."""

    api_version: str
    kind: str
    name: str
    uid: str

    def to_json(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class TaskContext:
    """One task as the plugin manager sees it: its id, where it runs, its rendered resource, and
    its companions (``core.lifecycle.companions``): ``needs``, created before the resource and
    never owned by it, and ``dependents``, created once it exists, owned by it. ``labels`` go on
    the resource, its pods and its companions, and tell the task's objects from others'."""

    task_id: str
    namespace: str
    resource: JsonObject
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: OwnerReference | None = None
    needs: tuple[JsonObject, ...] = ()
    dependents: tuple[JsonObject, ...] = ()


class AbortAction(enum.StrEnum):
    DELETE = "delete"
    PATCH = "patch"
    UPDATE = "update"


@dataclass(frozen=True)
class AbortOverride:
    """How a plugin aborts instead of deleting: a patch, or an update of the object read back.

    With ``delete_on_error`` the manager deletes the object when the patch or update fails.
    """

    action: AbortAction
    patch: Any = None
    patch_type: PatchType = PatchType.MERGE
    update: Callable[[JsonObject], dict[str, Any]] | None = None
    delete_on_error: bool = False


class PluginError(ValueError):
    """A task's resource is not one this plugin can launch."""


class Plugin(ABC):
    """The behaviour of one resource kind. Subclasses set ``api_version`` and ``kind``."""

    api_version: str
    kind: str
    properties: PluginProperties = PluginProperties()
    stop_subject: str = "its pods"
    """What an abort waits for to stop, as the task's reason says it."""
    follows_pods: bool = False
    """Whether :meth:`phase` reads the task's pods besides the resource: a kind whose controller
    reports its pods' progress late (the Job controller, behind its client rate limit). The
    manager then passes the pods a watch cache holds of the task (the port's ``cached_pods``)."""

    @property
    def plugin_id(self) -> str:
        return f"{self.kind.lower()}.{self.api_version}"

    def build_resource(self, task: TaskContext) -> dict[str, Any]:
        """The object to create for ``task``: a copy of its rendered resource."""
        resource = task.resource
        if resource.get("apiVersion") != self.api_version or resource.get("kind") != self.kind:
            raise PluginError(
                f"task {task.task_id}: resource is {resource.get('apiVersion')}/"
                f"{resource.get('kind')}; plugin {self.plugin_id} launches "
                f"{self.api_version}/{self.kind}"
            )
        return copy.deepcopy(dict(resource))

    def build_identity(self, task: TaskContext, name: str) -> ObjectRef:
        """The reference the manager reads the task's object back by."""
        return ObjectRef(self.api_version, self.kind, task.namespace, name)

    @abstractmethod
    def phase(
        self,
        observed: JsonObject,
        state: PluginState,
        now: datetime,
        config: LifecycleConfig,
        pods: Sequence[JsonObject] = (),
    ) -> PhaseInfo:
        """The task's phase from its observed object (pure: no I/O, ``now`` passed in), and from
        the task's ``pods`` when the plugin :attr:`follows_pods` and a watch cache holds them
        (empty otherwise)."""

    def failed_at(self, observed: JsonObject) -> datetime | None:
        """When the failure :meth:`phase` reports happened, or None when the object does not
        say (the default). A resource someone else is deleting whose failure is not dated
        before the deletion was requested fails as the deletion's, not the user's
        (``core.lifecycle.deletion``)."""
        return None

    def abort_override(self, task: TaskContext, ref: ObjectRef) -> AbortOverride | None:
        """How to abort instead of deleting, or None to delete."""
        return None

    def pod_templates(self, resource: JsonObject) -> list[dict[str, Any]]:
        """The pod templates inside ``resource`` (the objects themselves, so the manager can
        label the pods the resource will make): none by default."""
        return []

    def stopped(self, observed: JsonObject) -> bool:
        """Whether the deleted resource has stopped: its dependents (pods) are gone."""
        return dependents_deleted(observed)

    def stop_grace(self, resource: JsonObject) -> timedelta:
        """How long the resource's pods may take to stop once deleted."""
        return grace_period([section(t, "spec") for t in self.pod_templates(resource)])

    def trim(self, observed: JsonObject) -> dict[str, Any]:
        """What the watch cache keeps of an observed object: what :meth:`phase` and the manager
        read. The default drops only ``metadata.managedFields``."""
        trimmed = dict(observed)
        metadata = observed.get("metadata")
        if isinstance(metadata, Mapping) and "managedFields" in metadata:
            trimmed["metadata"] = without_managed_fields(metadata)
        return trimmed


def without_managed_fields(metadata: JsonObject) -> dict[str, Any]:
    """An object's metadata without ``managedFields``, the largest part no decision reads."""
    return {key: value for key, value in metadata.items() if key != "managedFields"}
