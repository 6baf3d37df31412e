"""What a plugin tells the plugin manager about one Kubernetes resource kind.

A plugin builds the resource for a task, names the object the manager reads back, decides the task's
phase from what it observes, and says how it differs from the defaults (a kind that must not carry
owner references or finalizers, a name length its controller needs room within, an abort that
patches instead of deleting). Everything else (names, labels, finalizers, creation, events,
cleanup) is the manager's, written once for every kind.
"""

from __future__ import annotations

import copy
import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from podwright.core.lifecycle import PhaseInfo, PluginState
from podwright.engine.config import LifecycleConfig
from podwright.engine.kubernetes_port import JsonObject, ObjectRef, PatchType


@dataclass(frozen=True, slots=True)
class PluginProperties:
    disable_owner_references: bool = False
    disable_finalizer_injection: bool = False
    # The longest object name the kind's controllers leave room for (they derive names from it).
    generated_name_max_length: int = 63
    disable_delete_on_finalize: bool = False


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
    """One task as the plugin manager sees it: its id, where it runs, and its rendered resource."""

    task_id: str
    namespace: str
    resource: JsonObject
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner: OwnerReference | None = None


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
        self, observed: JsonObject, state: PluginState, now: datetime, config: LifecycleConfig
    ) -> PhaseInfo:
        """The task's phase from its observed object (pure: no I/O, ``now`` passed in)."""

    def abort_override(self, task: TaskContext, ref: ObjectRef) -> AbortOverride | None:
        """How to abort instead of deleting, or None to delete."""
        return None

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
