"""Server-side field validation: what the API server does with the fields of a request body that
the kind's schema does not know ("Field validation" in the API concepts at kubernetes.io;
``fieldValidation`` in apimachinery ``pkg/apis/meta/v1/types.go``).

Unknown fields are always dropped (a built-in kind decodes into its Go type; a custom resource is
pruned by its structural schema); the request's ``fieldValidation`` says what else happens:

* ``Strict``: the request fails. A create or an update answers 400 BadRequest ``<Kind> in version
  "<version>" cannot be handled as a <Kind>: strict decoding error: unknown field "spec.foo"``
  (``transformDecodeError`` in apiserver ``pkg/endpoints/handlers/rest.go``); a patch answers 422
  Invalid `` "" is invalid: patch: Invalid value: "<the patched object>": strict decoding error:
  ...`` (``applyPatchToCurrentObject`` in ``handlers/patch.go``);
* ``Warn`` (the default, also when the parameter is absent): a ``Warning`` header for each field,
  ``unknown field "spec.foo"``;
* ``Ignore``: nothing;
* any other value is refused with 422 (``ValidateFieldValidation`` in apimachinery
  ``pkg/apis/meta/v1/validation/validation.go``).

Server-side apply types the applied configuration whatever the parameter says: an unknown field
answers 500 ``failed to create typed patch object (<namespace>/<name>; <group>/<version>,
Kind=<Kind>): .spec.foo: field not declared in schema`` (structured-merge-diff's validation, as
apiserver ``fieldmanager/internal/structuredmerge.go`` reports it).

Paths are written as the server writes them (``spec.containers[0].foo``; server-side apply's with
a leading dot). A custom resource's are sorted (its pruning collects them so); a built-in kind's
follow the object. The schemas of the built-in kinds are Kubernetes 1.36's, from the
``kubernetes-validate`` package; ``metadata`` is checked against ObjectMeta, in custom resources
too (and in their ``x-kubernetes-embedded-resource`` objects). Not modelled: duplicate fields (the
body is parsed before this sees it), and server-side apply reporting at most one unknown field per
object (a real server stops at the first it meets; here all are listed).
"""

from __future__ import annotations

import contextvars
import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes_validate.utils import schema_contents

from tests.k8s_emulator.admission import warn
from tests.k8s_emulator.discovery import KUBERNETES_VERSION
from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.resource_types import ResourceType

Obj = dict[str, Any]
Schema = dict[str, Any]
Directive = Literal["Strict", "Warn", "Ignore"]
Write = Literal["create", "update", "patch", "apply"]

_DIRECTIVES: tuple[Directive, ...] = ("Ignore", "Strict", "Warn")
_OPTIONS_KINDS: dict[Write, str] = {
    "create": "CreateOptions",
    "update": "UpdateOptions",
    "patch": "PatchOptions",
    "apply": "PatchOptions",
}
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@dataclass(frozen=True)
class Decoding:
    """How the request being served has its body decoded: its ``fieldValidation`` and the kind
    of write it is."""

    directive: Directive = "Warn"
    write: Write = "create"


_decoding: contextvars.ContextVar[Decoding | None] = contextvars.ContextVar(
    "field_validation", default=None
)
"""The current request's (writes made in-process, by controllers and tests, are ``Warn``ed:
their warnings go nowhere)."""


def begin_request(write: Write, field_validation: str | None) -> None:
    """Decode the bodies of the request this thread now serves as ``field_validation`` says
    (absent or empty: ``Warn``); a value the server does not know is refused."""
    value = field_validation or "Warn"
    if value not in _DIRECTIVES:
        supported = ", ".join(json.dumps(v) for v in ("", *_DIRECTIVES))
        raise ApiError(
            422,
            "Invalid",
            f'{_OPTIONS_KINDS[write]}.meta.k8s.io "" is invalid: fieldValidation: Unsupported '
            f'value: "{value}": supported values: {supported}',
        )
    _decoding.set(Decoding(value, write))  # type: ignore[arg-type]  # checked just above


def decoded(resource: ResourceType, obj: Obj, custom_schema: Schema | None) -> Obj:
    """``obj`` without the fields its kind does not know (``custom_schema``: a custom resource's
    structural schema; None: a built-in kind, by its Kubernetes schema), which are refused,
    warned of or ignored as the request asked."""
    if custom_schema is None:
        schema, closed = _builtin_schema(resource), _closed_builtin
    else:
        schema, closed = custom_schema, _closed_structural
    if schema is None:
        return obj
    walk = _Walk(custom=custom_schema is not None)
    kept = walk.value(obj, schema, None, closed, root=True)
    unknown = sorted(walk.unknown) if custom_schema is not None else walk.unknown
    if unknown:
        _report(resource, obj, kept, unknown)
    return kept  # type: ignore[no-any-return]  # an object stays an object


def _report(resource: ResourceType, given: Obj, kept: Obj, unknown: list[str]) -> None:
    decoding = _decoding.get() or Decoding()
    if decoding.write == "apply":
        metadata = given.get("metadata") or {}
        subject = f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"
        group_version = resource.api_version if resource.group else f"/{resource.version}"
        errors = [f".{path}: field not declared in schema" for path in unknown]
        listed = errors[0] if len(errors) == 1 else "\n  ".join(["errors:", *errors])
        raise ApiError(
            500,
            "",
            f"failed to create typed patch object ({subject}; {group_version}, "
            f"Kind={resource.kind}): {listed}",
        )
    messages = [f'unknown field "{path}"' for path in unknown]
    if decoding.directive == "Warn":
        warn(messages)
    if decoding.directive != "Strict":
        return
    error = f"strict decoding error: {', '.join(messages)}"
    if decoding.write == "patch":
        patched = json.dumps(given, sort_keys=True, separators=(",", ":"))
        raise ApiError(
            422,
            "Invalid",
            f' "" is invalid: patch: Invalid value: {json.dumps(patched)}: {error}',
            details={
                "causes": [
                    {
                        "reason": "FieldValueInvalid",
                        "message": f"Invalid value: {json.dumps(patched)}: {error}",
                        "field": "patch",
                    }
                ]
            },
        )
    raise ApiError(
        400,
        "BadRequest",
        f'{resource.kind} in version "{resource.version}" cannot be handled as a '
        f"{resource.kind}: {error}",
    )


_Path = tuple[Any, str | int] | None
"""Where a value is, as (the path of its parent, its key or index): made into text only for an
unknown field, since most fields are known and a string per field was most of a walk's time."""
_SCALARS = (str, int, float, bool, type(None))


class _Walk:
    """One walk over an object and its schema: the object without the fields the schema does not
    know, and their paths (``unknown``)."""

    def __init__(self, *, custom: bool) -> None:
        self.unknown: list[str] = []
        self._custom = custom

    def value(
        self,
        value: Any,
        schema: Schema,
        path: _Path,
        closed: Callable[[Schema], bool],
        *,
        root: bool = False,
    ) -> Any:
        """``value`` without what ``schema`` does not know; ``closed`` tells which objects of
        the schema keep only the fields they name."""
        if "$ref" in schema:
            schema = _resolved(schema)
        kind = type(value)
        if kind is list:
            items = schema.get("items")
            if not isinstance(items, dict):
                return value
            return [
                item if type(item) in _SCALARS else self.value(item, items, (path, i), closed)
                for i, item in enumerate(value)
            ]
        if kind is not dict:
            return value
        resource = root or (self._custom and bool(schema.get("x-kubernetes-embedded-resource")))
        properties: dict[str, Schema] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        kept: dict[str, Any] = {}
        for key, item in value.items():
            if resource and key == "metadata":
                meta = _builtin_definitions()[OBJECT_META]
                kept[key] = self.value(item, meta, (path, key), _closed_builtin)
            elif resource and key in ("apiVersion", "kind"):
                kept[key] = item
            elif key in properties:
                kept[key] = (
                    item
                    if type(item) in _SCALARS
                    else self.value(item, properties[key], (path, key), closed)
                )
            elif isinstance(additional, dict):
                kept[key] = (
                    item
                    if type(item) in _SCALARS
                    else self.value(item, additional, (path, key), closed)
                )
            elif closed(schema):
                self.unknown.append(_written((path, key)))
            else:
                kept[key] = item
        return kept


def _written(path: _Path) -> str:
    """A path as the server writes it: ``spec.containers[0].foo``."""
    parts: list[str | int] = []
    while path is not None:
        path, part = path
        parts.append(part)
    text = ""
    for part in reversed(parts):
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text = f"{text}.{part}" if text else part
    return text


def _closed_structural(schema: Schema) -> bool:
    """A structural schema's object keeps only the fields it names (pruning, apiextensions
    ``pkg/apiserver/schema/pruning/algorithm.go``)."""
    return not schema.get("x-kubernetes-preserve-unknown-fields") and (
        schema.get("additionalProperties") is not True
    )


def _closed_builtin(schema: Schema) -> bool:
    """A built-in type's object keeps only its Go type's fields; an object without them (a
    ``RawExtension``, apiextensions' ``JSON``) keeps anything."""
    return "properties" in schema and schema.get("additionalProperties") is False


def _resolved(schema: Schema) -> Schema:
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        return _builtin_definitions()[reference.removeprefix("#/$defs/")]
    return schema


@functools.cache
def _builtin_definitions() -> Mapping[str, Schema]:
    """Kubernetes' definitions, closed to unknown fields (the ``-strict`` variant)."""
    definitions: Mapping[str, Schema] = schema_contents(
        f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict/_definitions.json",
        KUBERNETES_VERSION,
    )["$defs"]
    return definitions


@functools.cache
def _builtin_kinds() -> Mapping[tuple[str, str, str], Schema]:
    return {
        (gvk["group"], gvk["version"], gvk["kind"]): definition
        for definition in _builtin_definitions().values()
        for gvk in definition.get("x-kubernetes-group-version-kind") or []
    }


def _builtin_schema(resource: ResourceType) -> Schema | None:
    return _builtin_kinds().get((resource.group, resource.version, resource.kind))


def builtin_description(definition: str, field: str) -> str:
    """The description of a built-in type's field (its Go type's ``SwaggerDoc``)."""
    return str(_builtin_definitions()[definition]["properties"][field]["description"])
