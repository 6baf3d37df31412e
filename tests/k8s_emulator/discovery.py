"""The API server's legacy discovery documents, for the kinds a store serves now.

``GET /api`` (APIVersions), ``/api/v1`` and ``/apis/<group>/<version>`` (APIResourceList),
``/apis`` (APIGroupList) and ``/apis/<group>`` (APIGroup), in the shapes of apimachinery's
``pkg/apis/meta/v1/types.go`` (see "Discovery API" in the API concepts at kubernetes.io): enough
for the official client's ``DynamicClient`` and for kubectl, which falls back to these when the
aggregated discovery (``apidiscovery.k8s.io/v2``) is not offered: client-go's ``downloadLegacy``
and ``downloadAPIs`` (``discovery/discovery_client.go``) ask for the aggregated types first and
read any answer whose ``Content-Type`` is not one of them as the legacy documents. Each resource
has its ``singularName``, ``shortNames`` (``kubectl get cm``) and ``categories`` (``kubectl get
all``). A group's preferred version is its highest by Kubernetes' version priority (GA over beta
over alpha, then the higher number). Verbs list what the emulator serves (no
``deletecollection``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tests.k8s_emulator.resource_types import ResourceType

KUBERNETES_VERSION = "1.36.0"
"""The Kubernetes version the emulator answers as (``/version``), whose built-in schemas it holds
requests to (``field_validation.py``)."""
GIT_VERSION = f"v{KUBERNETES_VERSION}-emulator"
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
_GROUP_VERSION = re.compile(r"^/apis/(?P<group>[^/]+)(?:/(?P<version>[^/]+))?$")
_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def discovery_document(
    path: str, served: Iterable[ResourceType], server_address: str
) -> dict[str, Any] | None:
    """The discovery document at ``path``, or None when ``path`` is not a discovery path (or
    names a group or version not served: the caller answers 404)."""
    resources = list(served)
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ],
        }
    if path == "/api/v1":
        return _resource_list("v1", [r for r in resources if r.group == ""])
    if path == "/apis":
        groups = sorted({r.group for r in resources if r.group})
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_group(group, resources) for group in groups],
        }
    match = _GROUP_VERSION.match(path)
    if match is None:
        return None
    group, version = match["group"], match["version"]
    in_group = [r for r in resources if r.group == group]
    if version is None:
        return (
            {"kind": "APIGroup", "apiVersion": "v1", **_group(group, resources)}
            if in_group
            else None
        )
    in_version = [r for r in in_group if r.version == version]
    return _resource_list(f"{group}/{version}", in_version) if in_version else None


def _group(group: str, resources: list[ResourceType]) -> dict[str, Any]:
    versions = sorted({r.version for r in resources if r.group == group}, key=_priority)
    listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": listed, "preferredVersion": listed[0]}


def _priority(version: str) -> tuple[int, int, int, str]:
    """Sorts first the version a group prefers (``version.CompareKubeAwareVersionStrings``)."""
    match = _KUBE_VERSION.match(version)
    if match is None:
        return (3, 0, 0, version)
    stability = {None: 0, "beta": 1, "alpha": 2}[match[2]]
    return (stability, -int(match[1]), -int(match[3] or 0), version)


def _resource_list(group_version: str, resources: list[ResourceType]) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for resource in resources:
        entry: dict[str, Any] = {
            "name": resource.plural,
            "singularName": resource.singular or resource.kind.lower(),
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": _VERBS,
        }
        if resource.short_names:
            entry["shortNames"] = list(resource.short_names)
        if resource.categories:
            entry["categories"] = list(resource.categories)
        entries.append(entry)
        if resource.status_subresource:
            entries.append(
                {
                    "name": f"{resource.plural}/status",
                    "singularName": "",
                    "namespaced": resource.namespaced,
                    "kind": resource.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }
