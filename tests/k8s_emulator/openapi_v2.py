"""``/openapi/v2``: the paths of ``openapi_v3.py``'s documents as one Swagger 2.0 document, in JSON
or, as client-go asks for it, in protobuf.

kubectl 1.27 and 1.28 ask only OpenAPI v2 whether a kind supports server-side field validation
(cli-runtime ``pkg/resource/query_param_verifier.go``, ``supportsQueryParam``: the PATCH operation
whose ``x-kubernetes-group-version-kind`` names the kind, and a ``fieldValidation`` query parameter
among its parameters); later versions ask OpenAPI v3 first and fall back to this. client-go reads
v2 only as protobuf (``DiscoveryClient.OpenAPISchema`` in ``discovery/discovery_client.go``:
``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``, decoded as gnostic's
``openapi_v2.Document``), so the document is encoded here in protobuf's wire format, with the
field numbers of gnostic's ``openapiv2/OpenAPIv2.proto``, for the part of the schema the
document uses: paths, operations (id, produces, consumes, query parameters, responses) and vendor
extensions (as YAML, gnostic's ``Any.yaml``). Not served, as in v3: the definitions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import yaml

from tests.k8s_emulator.discovery import GIT_VERSION
from tests.k8s_emulator.openapi_v3 import resource_paths
from tests.k8s_emulator.resource_types import ResourceType

V2_PATH = "/openapi/v2"
PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
"""What client-go asks for; the answer's ``Content-Type`` spells it without the ``@``, which Go's
``mime.ParseMediaType`` refuses (kube-openapi ``pkg/handler/handler.go``)."""
PROTOBUF_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}
"""gnostic's ``PathItem`` field of each operation."""


def swagger_document(served: Iterable[ResourceType]) -> dict[str, Any]:
    """Every served resource's paths and operations, as Swagger 2.0."""
    paths: dict[str, Any] = {}
    for resource in served:
        for path, operations in resource_paths(resource).items():
            paths[path] = {method: _v2(op) for method, op in operations.items()}
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": GIT_VERSION},
        "paths": paths,
    }


def _v2(operation: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI v3 operation as Swagger 2.0 writes it: request bodies as ``consumes``, a
    parameter's schema inlined."""
    converted = {key: value for key, value in operation.items() if key != "requestBody"}
    converted["produces"] = ["application/json"]
    if "requestBody" in operation:
        converted["consumes"] = list(operation["requestBody"]["content"])
    converted["parameters"] = [
        {
            "name": parameter["name"],
            "in": parameter["in"],
            "description": parameter["description"],
            **parameter["schema"],
        }
        for parameter in operation.get("parameters", [])
    ]
    return converted


def protobuf(document: dict[str, Any]) -> bytes:
    """``document`` (a :func:`swagger_document`) as a gnostic ``openapi_v2.Document``."""
    info = _string(1, document["info"]["title"]) + _string(2, document["info"]["version"])
    paths = b"".join(
        _message(2, _string(1, path) + _path_item(operations))
        for path, operations in document["paths"].items()
    )
    return _string(1, document["swagger"]) + _message(2, info) + _message(8, paths)


def _path_item(operations: dict[str, Any]) -> bytes:
    item = b"".join(
        _message(_METHODS[method], _operation(operation))
        for method, operation in operations.items()
    )
    return _message(2, item)


def _operation(operation: dict[str, Any]) -> bytes:
    encoded = _string(5, operation["operationId"])
    encoded += b"".join(_string(6, media) for media in operation["produces"])
    encoded += b"".join(_string(7, media) for media in operation.get("consumes", []))
    for parameter in operation["parameters"]:
        query = (
            _string(2, parameter["in"])
            + _string(3, parameter["description"])
            + _string(4, parameter["name"])
            + _string(6, parameter["type"])
            + _boolean(20, parameter["uniqueItems"])
        )
        # ParametersItem.parameter > Parameter.non_body_parameter > query_parameter_sub_schema
        encoded += _message(8, _message(1, _message(2, _message(3, query))))
    responses = b"".join(
        _message(1, _string(1, code) + _message(2, _message(1, _string(1, value["description"]))))
        for code, value in operation["responses"].items()
    )
    encoded += _message(9, responses)
    for name, value in operation.items():
        if name.startswith("x-"):
            encoded += _message(
                13, _string(1, name) + _message(2, _string(2, yaml.safe_dump(value)))
            )
    return encoded


def _varint(number: int) -> bytes:
    encoded = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        encoded.append(low | (0x80 if number else 0))
        if not number:
            return bytes(encoded)


def _message(field: int, data: bytes) -> bytes:
    """A length-delimited field (wire type 2): a string, bytes or an embedded message."""
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _string(field: int, text: str) -> bytes:
    return _message(field, text.encode())


def _boolean(field: int, value: bool) -> bytes:
    return _varint(field << 3) + _varint(int(value)) if value else b""
