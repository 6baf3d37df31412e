"""A task's other manifests, its *companions*, made the task's own before they are created.

A workload renders to one resource (the Pod, Job, ... a plugin launches) and companions: its new
PersistentVolumeClaims and its Services. Two runs of one workload must neither share nor fight
over what is theirs alone, so the engine makes each task's companions its own:

* What the task's pods **need** (PersistentVolumeClaims, ConfigMaps, Secrets) keeps the name the
  pods refer to it by: a claim's name is the user's ``claimName``, and claims are shared by name on
  purpose (a second run of a workspace mounts the same claim; another workspace may refer to it).
  It carries the task's labels, is created *before* the resource (a pod whose claim does not exist
  yet is unschedulable), and gets no owner: a persistent claim outlives the task (a user who wants
  it to go with the pod asks for an ``ephemeral`` volume instead, which Kubernetes deletes with the
  pod).
* What **depends on** the resource (Services, and anything else) is named after the task's object,
  keeping the renderer's suffix (``-nodeport`` when a workload has Services of several types), a
  DNS-1035 label of at most 63 characters; a Service selects the task's pods by the task's labels
  besides the renderer's; it is created once the resource exists, owned by it, so it goes with it.

Only an object carrying the task's labels was created by the task (by an earlier round whose
outcome was lost): the engine checks that when a create answers AlreadyExists.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from podwright.core.k8s_names import derived_label
from podwright.core.lifecycle.objects import JsonObject, section, text

NEEDED_KINDS = frozenset({("v1", "PersistentVolumeClaim"), ("v1", "ConfigMap"), ("v1", "Secret")})
"""Kinds a pod refers to by name, created before the resource and never owned by it."""

_LABEL_VALUE_MAX_LENGTH = 63


@dataclass(frozen=True)
class Companions:
    """A task's companions, ready to create: ``needed`` before its resource, ``dependent`` after
    it (each then given an owner reference to the resource)."""

    needed: tuple[dict[str, Any], ...] = ()
    dependent: tuple[dict[str, Any], ...] = ()


def task_companions(
    manifests: Sequence[JsonObject],
    *,
    object_name: str,
    workload_name: str,
    namespace: str,
    labels: Mapping[str, str],
) -> Companions:
    """The task's companions among ``manifests`` (its resource left out by the caller).

    ``object_name`` is the name of the task's resource, ``workload_name`` the name the renderer
    derived the companions' names from, ``labels`` the task's labels (its id).
    """
    needed: list[dict[str, Any]] = []
    dependent: list[dict[str, Any]] = []
    for manifest in manifests:
        body = copy.deepcopy(dict(manifest))
        metadata = dict(section(body, "metadata"))
        metadata.setdefault("namespace", namespace)
        metadata["labels"] = {**section(metadata, "labels"), **labels}
        body["metadata"] = metadata
        if (text(body, "apiVersion"), text(body, "kind")) in NEEDED_KINDS:
            needed.append(body)
            continue
        metadata["name"] = companion_name(object_name, workload_name, text(metadata, "name"))
        spec = section(body, "spec")
        if text(body, "kind") == "Service" and section(spec, "selector"):
            body["spec"] = {**spec, "selector": {**section(spec, "selector"), **labels}}
        dependent.append(body)
    return Companions(tuple(needed), tuple(dependent))


def companion_name(object_name: str, workload_name: str, rendered_name: str) -> str:
    """A dependent companion's name for one task: the task's object name, followed by what the
    renderer added to the workload's name (``notebook-ada-nodeport`` → ``<object>-nodeport``),
    or by the whole rendered name when it is not derived from the workload's."""
    base = derived_label(workload_name)
    if rendered_name == base:
        return object_name
    suffix = rendered_name[len(base) :] if rendered_name.startswith(f"{base}-") else rendered_name
    return derived_label(object_name, suffix.lstrip("-"))


def task_label_value(task_id: str) -> str:
    """A task id as a label value (at most 63 of the characters a label value allows)."""
    cleaned = "".join(
        ch if (ch.isascii() and ch.isalnum()) or ch in "-_." else "-" for ch in task_id
    )
    return cleaned[:_LABEL_VALUE_MAX_LENGTH].strip("-_.") or "task"


def carries(obj: JsonObject, labels: Mapping[str, str]) -> bool:
    """Whether ``obj`` has every one of ``labels`` (it was created by their task)."""
    found = section(section(obj, "metadata"), "labels")
    return all(found.get(key) == value for key, value in labels.items())
