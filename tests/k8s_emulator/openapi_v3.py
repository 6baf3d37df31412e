"""The OpenAPI v3 documents kubectl reads: ``/openapi/v3`` and one document per group version.

kubectl (1.27 and later) asks OpenAPI v3 whether a kind supports server-side field validation
before every write: cli-runtime's ``queryParamVerifierV3`` (``pkg/resource/
query_param_verifier_v3.go``) looks, in the group version's document, for the PATCH operation
whose ``x-kubernetes-group-version-kind`` names the kind, and for a ``fieldValidation`` parameter
among its parameters. Found, kubectl leaves validation to the server and sends
``fieldValidation=Strict`` (``field_validation.py`` serves it); when v3 fails it asks OpenAPI v2
(``openapi_v2.py``: kubectl 1.27 and 1.28 ask only v2). kubectl's client-side apply (``pkg/cmd/apply/
patcher.go``) reads the same PATCH operation: a built-in kind's lists
``application/strategic-merge-patch+json`` among its request bodies, and kubectl computes the
strategic merge patch from the schema in ``components.schemas`` when there is one with the kind's
``x-kubernetes-group-version-kind``, else from its compiled-in types (so here); a custom
resource's PATCH has no strategic merge patch, and kubectl sends a JSON merge patch.

The index (``/openapi/v3``) names each group version's document by ``api/v1`` or
``apis/<group>/<version>`` with its ``serverRelativeURL``, which carries a hash of the document
(client-go ``openapi3/root.go``, ``gvToAPIPath``; kube-openapi ``handler3``): a client that
caches documents by URL sees a new one once a CRD changes what is served.

A document lists every served resource's paths and operations (``get``, ``list``, ``create``,
``update``, ``patch``, ``delete``, ``watch``: what discovery lists), each with its
``x-kubernetes-action`` and ``x-kubernetes-group-version-kind`` and the query parameters of its
options (``dryRun``, ``fieldManager``, ``fieldValidation``, ``force``). Not served: the schemas
of the kinds (``components.schemas`` is empty: ``kubectl explain`` has nothing to read), and other
paths of the index (``.well-known``, ``version``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from tests.k8s_emulator.discovery import GIT_VERSION
from tests.k8s_emulator.resource_types import ResourceType

INDEX_PATH = "/openapi/v3"
_DOCUMENT_PATH = re.compile(r"^/openapi/v3/(?P<key>api/v1|apis/[^/]+/[^/]+)$")
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_WRITE_OPTIONS = {
    "dryRun": "When present, indicates that modifications should not be persisted. Valid values "
    "are: All.",
    "fieldManager": "A name associated with the actor or entity that is making these changes.",
    "fieldValidation": "How the server handles unknown or duplicate fields in the request: "
    "Ignore, Warn (the default) or Strict.",
}
_FORCE = "Force is going to force Apply requests; it must be unset for non-apply patch requests."


def openapi_index(served: Iterable[ResourceType]) -> dict[str, Any]:
    """``/openapi/v3``: each served group version's document, by its key, at a URL that carries
    the document's hash."""
    resources = list(served)
    paths = {}
    for key in sorted({_key(resource) for resource in resources}):
        digest = hashlib.sha512(_encoded(_document(key, resources))).hexdigest().upper()
        paths[key] = {"serverRelativeURL": f"{INDEX_PATH}/{key}?hash={digest}"}
    return {"paths": paths}


def openapi_document(path: str, served: Iterable[ResourceType]) -> dict[str, Any] | None:
    """The group version's document at ``path`` (``/openapi/v3/api/v1``, ...), or None when no
    served resource is of that group version (the caller answers 404)."""
    match = _DOCUMENT_PATH.match(path)
    resources = list(served)
    if match is None or not any(_key(resource) == match["key"] for resource in resources):
        return None
    return _document(match["key"], resources)


def _key(resource: ResourceType) -> str:
    return f"apis/{resource.group}/{resource.version}" if resource.group else "api/v1"


def _encoded(document: dict[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True).encode()


def _document(key: str, resources: list[ResourceType]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for resource in resources:
        if _key(resource) == key:
            paths.update(resource_paths(resource))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
        "components": {"schemas": {}},
    }


def resource_paths(resource: ResourceType) -> dict[str, Any]:
    scope = "/namespaces/{namespace}" if resource.namespaced else ""
    collection = f"/{_key(resource)}{scope}/{resource.plural}"
    item = f"{collection}/{{name}}"
    patch_types = PATCH_TYPES if resource.custom else (STRATEGIC_MERGE_PATCH, *PATCH_TYPES)
    paths = {
        collection: {
            "get": _operation(resource, "list", "list"),
            "post": _operation(resource, "create", "post", body=("application/json",)),
        },
        item: {
            "get": _operation(resource, "read", "get"),
            "put": _operation(resource, "replace", "put", body=("application/json",)),
            "patch": _operation(resource, "patch", "patch", body=patch_types),
            "delete": _operation(resource, "delete", "delete"),
        },
        f"/{_key(resource)}/watch{scope}/{resource.plural}": {
            "get": _operation(resource, "watch", "watchlist")
        },
    }
    if resource.status_subresource:
        paths[f"{item}/status"] = {
            "get": _operation(resource, "read", "get", "Status"),
            "put": _operation(resource, "replace", "put", "Status", body=("application/json",)),
            "patch": _operation(resource, "patch", "patch", "Status", body=patch_types),
        }
    return paths


def _operation(
    resource: ResourceType,
    verb: str,
    action: str,
    suffix: str = "",
    *,
    body: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One operation: its id (as the API server names them, ``patchNamespacedConfigMap``), its
    action and kind, and, for a write, the options it takes and the bodies it accepts."""
    scope = "Namespaced" if resource.namespaced else ""
    operation: dict[str, Any] = {
        "operationId": f"{verb}{scope}{resource.kind}{suffix}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {
            "group": resource.group,
            "version": resource.version,
            "kind": resource.kind,
        },
        "responses": {"200": {"description": "OK"}},
    }
    if body:
        options = dict(_WRITE_OPTIONS)
        if action == "patch":
            options["force"] = _FORCE
        operation["parameters"] = [
            {
                "name": name,
                "in": "query",
                "description": description,
                "schema": {"type": "boolean" if name == "force" else "string", "uniqueItems": True},
            }
            for name, description in options.items()
        ]
        operation["requestBody"] = {
            "content": {content_type: {"schema": {"type": "object"}} for content_type in body},
            "required": True,
        }
    return operation
