"""Requests podwright's own client never makes: bindings, Nodes and Leases, as plain JSON.

:class:`~podwright.adapters.kubernetes.KubernetesClient` knows only the kinds podwright handles;
a scheduler, a kubelet and these tests also write Nodes, Leases and bindings. These requests go
through the official client's ``ApiClient`` (its configuration, authentication and connection
pool) and answer with the object as JSON, or raise podwright's errors for the status.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s_client
from urllib3 import HTTPHeaderDict

from podwright.adapters.kubernetes.errors import error_from_status

NODES = "/api/v1/nodes"


def leases_path(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


@dataclass(frozen=True)
class RawAnswer:
    """An API server's whole answer, for what podwright's client does not surface (headers)."""

    status: int
    body: Any
    warnings: list[str]
    """The ``Warning`` headers, each as sent (``299 - "<text>"``)."""


def send(
    api: k8s_client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
    query: dict[str, str] | None = None,
    accept: str = "application/json",
    headers: Sequence[tuple[str, str]] = (),
) -> RawAnswer:
    """``method`` on ``path`` with a JSON ``body``: the whole answer, errors included.
    ``headers`` are sent besides, each as a line of its own (a name may repeat:
    ``Impersonate-Group``)."""
    method, url, params, serialized, _post = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=list((query or {}).items()),
        header_params={"Content-Type": content_type, "Accept": accept},
        body=body,
        auth_settings=["BearerToken"],
    )
    sent = HTTPHeaderDict(params)
    for name, value in headers:
        sent.add(name, value)
    response = api.call_api(method, url, header_params=sent, body=serialized)
    raw = response.read()
    return RawAnswer(
        response.status,
        json.loads(raw) if raw else None,
        list(response.headers.getlist("Warning")),
    )


def call(
    api: k8s_client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = "application/json",
) -> dict[str, Any]:
    """``method`` on ``path`` with a JSON ``body``; the answer's JSON object, or podwright's
    error for its status."""
    answer = send(api, method, path, body, content_type=content_type)
    if answer.status >= 300:
        raise error_from_status(answer.status, json.dumps(answer.body).encode())
    decoded: dict[str, Any] = answer.body
    return decoded


def bind_pod(api: k8s_client.ApiClient, namespace: str, name: str, node: str) -> None:
    """Bind a pod to a node, as the scheduler does (``POST pods/<name>/binding``)."""
    call(
        api,
        "POST",
        f"/api/v1/namespaces/{namespace}/pods/{name}/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        },
    )
