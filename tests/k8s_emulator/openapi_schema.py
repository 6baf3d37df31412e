"""A custom resource's structural schema applied as the API server applies it: prune, default,
validate. Pure functions over JSON values; the store turns the errors into a 422.

The order and the wording are the apiextensions-apiserver's:

* pruning (``pkg/apiserver/schema/pruning/algorithm.go``): a field the schema does not name is
  dropped, silently, unless its object has ``x-kubernetes-preserve-unknown-fields: true``; an
  object schema with ``additionalProperties`` keeps every key and prunes each value by it; at the
  root, and in an ``x-kubernetes-embedded-resource``, ``apiVersion``, ``kind`` and ``metadata`` are
  kept (the emulator does not prune inside ``metadata``);
* defaulting (``pkg/apiserver/schema/defaulting/algorithm.go``, ``Default``): a property that is
  absent, or null where the schema is not nullable, gets a copy of its ``default``, then every
  present value is defaulted by its own schema; a null without a default where the schema is not
  nullable is dropped (``PruneNonNullableNullsWithoutDefaults``);
* validation (kube-openapi ``pkg/validation/validate``, with the messages of
  ``pkg/validation/errors/schema.go``, turned into field errors by ``kubeOpenAPIResultToFieldErrors``
  in apiextensions-apiserver ``pkg/apiserver/validation/validation.go``): a wrong type is
  ``field.TypeInvalid`` whose value is the JSON type found (``spec.x: Invalid value: "string":
  spec.x in body must be of type integer: "string"``), a missing required property
  ``field.Required`` (``spec.y: Required value``), a value outside ``enum`` ``field.NotSupported``,
  ``maxLength`` ``field.TooLong``, ``maxItems`` ``field.TooMany``, and every other keyword
  (``minimum``, ``maximum`` and their exclusive forms, ``minLength``, ``pattern``, ``minItems``)
  ``field.Invalid`` with kube-openapi's message.

Not modelled: CEL rules (``x-kubernetes-validations``), ``format``, ``multipleOf``,
``uniqueItems``, ``min/maxProperties``, ``allOf``/``anyOf``/``oneOf``/``not``, list types and map
keys, and the ``unknown field`` warnings a server sends for what it pruned.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]
_KEPT_AT_ROOT = ("apiVersion", "kind", "metadata")


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``: its ``reason`` (the cause type), ``field`` path, and ``message``
    (``ErrorBody``: the text after ``<field>: ``)."""

    reason: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"

    def cause(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


# Pruning ------------------------------------------------------------------------------------------


def prune(value: Any, schema: Schema) -> Any:
    """``value`` (an object's root) without the fields ``schema`` does not name."""
    return _prune(value, schema, root=True)


def _prune(value: Any, schema: Schema, *, root: bool = False) -> Any:
    if isinstance(value, list):
        items = schema.get("items")
        return [_prune(item, items) for item in value] if isinstance(items, dict) else value
    if not isinstance(value, dict):
        return value
    keeps_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    properties: dict[str, Schema] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
    pruned: dict[str, Any] = {}
    for key, item in value.items():
        if embedded and key in _KEPT_AT_ROOT:
            pruned[key] = item
        elif key in properties:
            pruned[key] = _prune(item, properties[key])
        elif isinstance(additional, dict):
            pruned[key] = _prune(item, additional)
        elif keeps_unknown or additional is True:
            pruned[key] = item
    return pruned


# Defaulting ---------------------------------------------------------------------------------------


def apply_defaults(value: Any, schema: Schema) -> Any:
    """``value`` with the schema's defaults filled in. ``value`` is never changed: what defaulting
    changes is copied, one container at a time, and the rest is shared with it (copying every
    object whole at every write was a tenth of the emulator's time)."""
    return _defaulted(value, schema)


def _defaulted(value: Any, schema: Schema) -> Any:
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return value
        defaulted = [_defaulted(item, items) for item in value]
        return (
            value
            if all(new is old for new, old in zip(defaulted, value, strict=True))
            else defaulted
        )
    if not isinstance(value, dict):
        return value
    properties: dict[str, Schema] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    result = value
    for key, property_schema in properties.items():
        if "default" not in property_schema:
            continue
        if key not in value or (value[key] is None and not property_schema.get("nullable")):
            if result is value:
                result = dict(value)
            result[key] = copy.deepcopy(property_schema["default"])
    for key in list(result):
        if key in properties:
            child_schema: Schema | None = properties[key]
        elif isinstance(additional, dict):
            child_schema = additional
        else:
            child_schema = None
        if child_schema is None:
            continue
        item = result[key]
        if item is None and not child_schema.get("nullable"):
            if result is value:
                result = dict(value)
            del result[key]
            continue
        defaulted = _defaulted(item, child_schema)
        if defaulted is not item:
            if result is value:
                result = dict(value)
            result[key] = defaulted
    return result


# Validation ---------------------------------------------------------------------------------------


def validate(value: Any, schema: Schema) -> list[FieldError]:
    """Every way ``value`` breaks ``schema``, as field errors in the server's words."""
    errors: list[FieldError] = []
    _validate(value, schema, "", errors)
    return errors


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _expected_types(schema: Schema) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    return [schema["type"]] if schema.get("type") else []


def _type_matches(value: Any, expected: list[str]) -> bool:
    found = _json_type(value)
    return (
        found in expected
        or (found == "integer" and "number" in expected)
        or (found == "number" and "integer" in expected and float(value).is_integer())
    )


def go_value(value: Any) -> str:
    """A bad value as ``field.Error.ErrorBody`` prints it: strings quoted, numbers and booleans
    plain (Go's ``%v``: a float with no fraction prints without one)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def _in_body(path: str) -> str:
    return f"{path} in body"


def _validate(value: Any, schema: Schema, path: str, errors: list[FieldError]) -> None:
    expected = _expected_types(schema)
    if value is None:
        if expected and not schema.get("nullable"):
            errors.append(_type_error(path, expected, "null"))
        return
    if expected and not _type_matches(value, expected):
        errors.append(_type_error(path, expected, _json_type(value)))
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(
            json.dumps(v if isinstance(v, str) else json.dumps(v)) for v in schema["enum"]
        )
        errors.append(
            FieldError(
                "FieldValueNotSupported",
                path,
                f"Unsupported value: {go_value(value)}: supported values: {allowed}",
            )
        )
    if isinstance(value, str):
        _validate_string(value, schema, path, errors)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        _validate_number(value, schema, path, errors)
    elif isinstance(value, list):
        _validate_array(value, schema, path, errors)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, errors)


def _type_error(path: str, expected: list[str], found: str) -> FieldError:
    return FieldError(
        "FieldValueTypeInvalid",
        path,
        f"Invalid value: {json.dumps(found)}: {_in_body(path)} must be of type "
        f"{','.join(expected)}: {json.dumps(found)}",
    )


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, f"Invalid value: {go_value(value)}: {detail}")


def _validate_string(value: str, schema: Schema, path: str, errors: list[FieldError]) -> None:
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(
            FieldError(
                "FieldValueTooLong",
                path,
                f"Too long: may not be more than {schema['maxLength']} bytes",
            )
        )
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(
            _invalid(
                path,
                value,
                f"{_in_body(path)} should be at least {schema['minLength']} chars long",
            )
        )
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        errors.append(_invalid(path, value, f"{_in_body(path)} should match '{schema['pattern']}'"))


def _validate_number(value: float, schema: Schema, path: str, errors: list[FieldError]) -> None:
    if "minimum" in schema:
        exclusive = bool(schema.get("exclusiveMinimum"))
        if value < schema["minimum"] or (exclusive and value == schema["minimum"]):
            relation = "greater than" if exclusive else "greater than or equal to"
            errors.append(
                _invalid(
                    path,
                    value,
                    f"{_in_body(path)} should be {relation} {go_value(float(schema['minimum']))}",
                )
            )
    if "maximum" in schema:
        exclusive = bool(schema.get("exclusiveMaximum"))
        if value > schema["maximum"] or (exclusive and value == schema["maximum"]):
            relation = "less than" if exclusive else "less than or equal to"
            errors.append(
                _invalid(
                    path,
                    value,
                    f"{_in_body(path)} should be {relation} {go_value(float(schema['maximum']))}",
                )
            )


def _validate_array(value: list[Any], schema: Schema, path: str, errors: list[FieldError]) -> None:
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            _validate(item, items, f"{path}[{index}]", errors)
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(
            _invalid(
                path,
                len(value),
                f"{_in_body(path)} should have at least {schema['minItems']} items",
            )
        )
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(
            FieldError(
                "FieldValueTooMany",
                path,
                f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
            )
        )


def _validate_object(
    value: dict[str, Any], schema: Schema, path: str, errors: list[FieldError]
) -> None:
    properties: dict[str, Schema] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if key in properties:
            _validate(item, properties[key], child, errors)
        elif isinstance(additional, dict):
            _validate(item, additional, child, errors)
    for key in schema.get("required") or []:
        if key not in value:
            errors.append(
                FieldError("FieldValueRequired", f"{path}.{key}" if path else key, "Required value")
            )


# Structural schemas -------------------------------------------------------------------------------

_JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
_FORBIDDEN_IN_JUNCTORS = {
    "type": "must be empty to be structural",
    "additionalProperties": "must be undefined to be structural",
    "default": "must be undefined to be structural",
    "description": "must be empty to be structural",
    "nullable": "must be false to be structural",
    "x-kubernetes-preserve-unknown-fields": "must be false to be structural",
    "x-kubernetes-embedded-resource": "must be false to be structural",
    "x-kubernetes-int-or-string": "must be false to be structural",
    "x-kubernetes-list-map-keys": "must be empty to be structural",
    "x-kubernetes-list-type": "must be undefined to be structural",
    "x-kubernetes-map-type": "must be undefined to be structural",
    "x-kubernetes-validations": "must be empty to be structural",
}


def structural_errors(schema: Schema, path: str) -> list[FieldError]:
    """Why ``schema`` (a version's ``openAPIV3Schema``, at ``path``) is not a structural schema,
    as a server refuses a CRD for it: apiextensions ``pkg/apiserver/schema/validation.go``
    (``validateStructuralInvariants``, ``validateNestedValueValidation``) and the checks of
    ``ValidateCustomResourceDefinitionOpenAPISchema`` in ``pkg/apis/apiextensions/validation/
    validation.go`` (``additionalProperties`` beside ``properties``, ``uniqueItems``), sorted by
    their text as the server sorts them. Not checked: that a field a junctor names is also named
    outside it, and ``metadata`` below the root."""
    errors: list[FieldError] = []
    _structural(schema, "root", path, errors)
    return sorted(errors, key=str)


def _structural(schema: Schema, level: str, path: str, errors: list[FieldError]) -> None:
    items = schema.get("items")
    if schema.get("type") == "array" and items is None:
        errors.append(
            FieldError("FieldValueRequired", f"{path}.items", "Required value: must be specified")
        )
    if isinstance(items, dict):
        _structural(items, "item", f"{path}.items", errors)
    properties: dict[str, Schema] = schema.get("properties") or {}
    for name, child in properties.items():
        _structural(child, "field", f"{path}.properties[{name}]", errors)
    additional = schema.get("additionalProperties")
    if additional is not None:
        if level == "root":
            errors.append(
                FieldError(
                    "FieldValueForbidden",
                    f"{path}.additionalProperties",
                    "Forbidden: must not be used at the root",
                )
            )
        if properties and additional is not True:
            errors.append(
                FieldError(
                    "FieldValueForbidden",
                    f"{path}.additionalProperties",
                    "Forbidden: additionalProperties and properties are mutual exclusive",
                )
            )
        if isinstance(additional, dict):
            _structural(additional, "field", f"{path}.additionalProperties", errors)
    if schema.get("uniqueItems") is True:
        errors.append(
            FieldError(
                "FieldValueForbidden",
                f"{path}.uniqueItems",
                "Forbidden: uniqueItems cannot be set to true since the runtime complexity "
                "becomes quadratic",
            )
        )
    int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    if int_or_string and schema.get("x-kubernetes-preserve-unknown-fields"):
        errors.append(
            FieldError(
                "FieldValueInvalid",
                f"{path}.x-kubernetes-preserve-unknown-fields",
                "Invalid value: true: must be false if x-kubernetes-int-or-string is true",
            )
        )
    if (
        not schema.get("type")
        and not int_or_string
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        where = {
            "root": "at the root",
            "item": "for specified array items",
            "field": "for specified object fields",
        }[level]
        errors.append(
            FieldError(
                "FieldValueRequired", f"{path}.type", f"Required value: must not be empty {where}"
            )
        )
    if level == "root" and schema.get("type") not in (None, "object"):
        errors.append(
            FieldError(
                "FieldValueInvalid",
                f"{path}.type",
                f"Invalid value: {go_value(schema['type'])}: must be object at the root",
            )
        )
    for junctor in _JUNCTORS:
        nested = schema.get(junctor)
        if nested is None:
            continue
        if junctor == "anyOf" and int_or_string and nested == _INT_OR_STRING_ANY_OF:
            continue
        for index, alternative in enumerate(nested if isinstance(nested, list) else [nested]):
            where = f"{path}.{junctor}" if junctor == "not" else f"{path}.{junctor}[{index}]"
            _nested_structural(alternative, where, errors)


def _nested_structural(schema: Schema, path: str, errors: list[FieldError]) -> None:
    for key, message in _FORBIDDEN_IN_JUNCTORS.items():
        if schema.get(key) not in (None, False, "", [], {}):
            errors.append(
                FieldError("FieldValueForbidden", f"{path}.{key}", f"Forbidden: {message}")
            )
    if isinstance(schema.get("items"), dict):
        _nested_structural(schema["items"], f"{path}.items", errors)
    for name, child in (schema.get("properties") or {}).items():
        _nested_structural(child, f"{path}.properties[{name}]", errors)
    for junctor in _JUNCTORS:
        nested = schema.get(junctor)
        for index, alternative in enumerate(
            nested if isinstance(nested, list) else [nested] if nested else []
        ):
            where = f"{path}.{junctor}" if junctor == "not" else f"{path}.{junctor}[{index}]"
            _nested_structural(alternative, where, errors)
