"""Turn a user's pod spec or Pod manifest, as plain data, into client models with exact errors.

People hand podwright the pod specs they already have: a bare ``PodSpec`` or a ``kind: Pod``
manifest, parsed from YAML or JSON. The official client's models validate strictly (unknown
fields and wrong types are refused), but their errors speak pydantic; this module reports each
problem at the field path the user wrote (``spec.containers[0].imagePullPolicy``), suggests the
intended name for a misspelt field, and reports every problem, not only the first. Where YAML and
the models disagree it accepts what kubectl accepts: a number where a quantity is expected
(``cpu: 1``) is read as that quantity.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic
from kubernetes.client import V1ObjectMeta, V1PodSpec

from podwright.core.field_paths import FieldPath
from podwright.core.problems import FieldProblem, ProblemsError, describe

ACCEPTED_METADATA_FIELDS = ("name", "generateName", "namespace", "labels", "annotations")
POD_MANIFEST_FIELDS = ("apiVersion", "kind", "metadata", "spec")


class PodInputError(ProblemsError):
    """The input is not a usable pod spec or Pod manifest; ``problems`` lists every reason."""


@dataclasses.dataclass(frozen=True)
class PodInput:
    """A pod spec with the metadata its manifest carried (all ``None`` for a bare spec)."""

    spec: V1PodSpec
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


def pod_input_from_data(data: object) -> PodInput:
    """Read a bare pod spec, or a ``v1`` ``Pod`` manifest, from parsed YAML or JSON."""
    if not isinstance(data, Mapping):
        raise PodInputError(
            [
                FieldProblem(
                    (), f"expected a pod spec or a Pod manifest (a mapping), got {describe(data)}"
                )
            ]
        )
    if "kind" not in data and "apiVersion" not in data:
        if "spec" in data or "metadata" in data:
            raise PodInputError(
                [
                    FieldProblem(
                        (),
                        "this looks like a Pod manifest without apiVersion and kind; add "
                        "'apiVersion: v1' and 'kind: Pod', or give the bare pod spec",
                    )
                ]
            )
        return PodInput(spec=_pod_spec(data, ()))
    return _pod_manifest(data)


def _pod_manifest(data: Mapping[Any, Any]) -> PodInput:
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if kind != "Pod" or api_version != "v1":
        raise PodInputError(
            [
                FieldProblem(
                    (),
                    "expected a Pod manifest (apiVersion: v1, kind: Pod) or a bare pod spec, got "
                    f"apiVersion: {api_version!r}, kind: {kind!r}",
                )
            ]
        )
    problems = [
        FieldProblem(
            (key,), f"not accepted here; a Pod manifest may have {_listed(POD_MANIFEST_FIELDS)}"
        )
        for key in data
        if key not in POD_MANIFEST_FIELDS
    ]
    metadata = data.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        problems.append(
            FieldProblem(("metadata",), f"expected a mapping, got {describe(metadata)}")
        )
        metadata = {}
    problems.extend(
        FieldProblem(
            ("metadata", key),
            f"not accepted in a pod template input; allowed: {_listed(ACCEPTED_METADATA_FIELDS)}",
        )
        for key in metadata
        if key not in ACCEPTED_METADATA_FIELDS
    )
    meta: V1ObjectMeta | None = None
    try:
        meta = V1ObjectMeta.model_validate(
            {key: value for key, value in metadata.items() if key in ACCEPTED_METADATA_FIELDS}
        )
    except pydantic.ValidationError as error:
        problems.extend(_problems_from(error, V1ObjectMeta, ("metadata",)))
    spec: V1PodSpec | None = None
    if "spec" not in data:
        problems.append(FieldProblem(("spec",), "required field is missing"))
    else:
        try:
            spec = _pod_spec(data["spec"], ("spec",))
        except PodInputError as error:
            problems.extend(error.problems)
    if problems:
        raise PodInputError(problems)
    assert spec is not None
    assert meta is not None
    return PodInput(
        spec=spec,
        name=meta.name,
        generate_name=meta.generate_name,
        namespace=meta.namespace,
        labels=meta.labels,
        annotations=meta.annotations,
    )


def _pod_spec(data: object, prefix: FieldPath) -> V1PodSpec:
    if not isinstance(data, Mapping):
        raise PodInputError([FieldProblem(prefix, f"expected a mapping, got {describe(data)}")])
    normalized: object = data
    for pattern in _QUANTITY_PATHS:
        normalized = _numbers_as_quantities(normalized, pattern)
    try:
        spec = V1PodSpec.model_validate(normalized)
    except pydantic.ValidationError as error:
        raise PodInputError(_problems_from(error, V1PodSpec, prefix)) from None
    missing = [
        FieldProblem(
            (*prefix, field, index, "image"),
            "required: the API server refuses a Pod whose container has no image",
        )
        for field, containers in (
            ("initContainers", spec.init_containers),
            ("containers", spec.containers),
        )
        for index, container in enumerate(containers or [])
        if not container.image
    ]
    if missing:
        raise PodInputError(missing)
    return spec


def _container_quantity_paths(containers: str) -> list[tuple[str, ...]]:
    return [
        (containers, "*", "resources", "limits", "*"),
        (containers, "*", "resources", "requests", "*"),
        (containers, "*", "env", "*", "valueFrom", "resourceFieldRef", "divisor"),
    ]


_DOWNWARD_DIVISOR = ("downwardAPI", "items", "*", "resourceFieldRef", "divisor")
_QUANTITY_PATHS: tuple[tuple[str, ...], ...] = (
    *_container_quantity_paths("containers"),
    *_container_quantity_paths("initContainers"),
    ("resources", "limits", "*"),
    ("resources", "requests", "*"),
    ("overhead", "*"),
    ("volumes", "*", "emptyDir", "sizeLimit"),
    ("volumes", "*", "ephemeral", "volumeClaimTemplate", "spec", "resources", "limits", "*"),
    ("volumes", "*", "ephemeral", "volumeClaimTemplate", "spec", "resources", "requests", "*"),
    ("volumes", "*", *_DOWNWARD_DIVISOR),
    ("volumes", "*", "projected", "sources", "*", *_DOWNWARD_DIVISOR),
)
"""Where a pod spec holds quantities: a number found there is read as the quantity it spells."""


def _numbers_as_quantities(node: object, pattern: tuple[str, ...]) -> object:
    """A copy of ``node`` with numbers at ``pattern`` (``*``: any key or index) as strings."""
    if not pattern:
        is_number = isinstance(node, int | float) and not isinstance(node, bool)
        return str(node) if is_number else node
    head, rest = pattern[0], pattern[1:]
    if isinstance(node, Mapping):
        return {
            key: _numbers_as_quantities(value, rest) if head in ("*", key) else value
            for key, value in node.items()
        }
    if isinstance(node, list) and head == "*":
        return [_numbers_as_quantities(item, rest) for item in node]
    return node


def _problems_from(
    error: pydantic.ValidationError, model: type[pydantic.BaseModel], prefix: FieldPath
) -> list[FieldProblem]:
    """Readable problems from pydantic's errors, one per field path, in input order.

    A union field fails once per member; its claims are joined: ``expected an integer or a
    string, got 1.5 (number)``.
    """
    claims: dict[FieldPath, list[str]] = {}
    given: dict[FieldPath, str] = {}
    for detail in error.errors():
        path, parent = _readable_location(detail["loc"], model)
        claim, shown = _claim(detail, path, parent)
        found = claims.setdefault(prefix + path, [])
        if claim not in found:
            found.append(claim)
        if shown is not None:
            given[prefix + path] = shown
    return [
        FieldProblem(path, _joined(found) + (f", got {given[path]}" if path in given else ""))
        for path, found in claims.items()
    ]


def _joined(claims: list[str]) -> str:
    expected = "expected "
    if len(claims) > 1 and all(claim.startswith(expected) for claim in claims):
        return expected + " or ".join(claim.removeprefix(expected) for claim in claims)
    return " or ".join(claims)


def _readable_location(
    loc: tuple[int | str, ...], model: type[pydantic.BaseModel]
) -> tuple[FieldPath, type[pydantic.BaseModel] | None]:
    """The location in the user's terms, and the model that holds its last segment.

    Walking the location alongside the models' field types maps python field names to the
    JSON names and drops the tags pydantic appends inside unions (``port.int``).
    """
    path: list[str | int] = []
    current: object = model
    parent: type[pydantic.BaseModel] | None = None
    for segment in loc:
        current = _unwrap_optional(current)
        if isinstance(current, type) and issubclass(current, pydantic.BaseModel):
            parent = current
            name = _field_by_json_name(current).get(str(segment))
            path.append(str(segment))
            current = current.model_fields[name].annotation if name else None
        elif typing.get_origin(current) in (list, dict):
            path.append(segment)
            current = typing.get_args(current)[-1]
        else:
            break
    return tuple(path), parent


def _unwrap_optional(annotation: object) -> object:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def _field_by_json_name(model: type[pydantic.BaseModel]) -> dict[str, str]:
    """JSON (camelCase) name → python field name; the first alias choice is the JSON name."""
    names: dict[str, str] = {}
    for field_name, field in model.model_fields.items():
        alias = field.validation_alias
        json_name = alias.choices[0] if isinstance(alias, pydantic.AliasChoices) else None
        names[json_name if isinstance(json_name, str) else field_name] = field_name
    return names


def _claim(
    detail: Any, path: FieldPath, parent: type[pydantic.BaseModel] | None
) -> tuple[str, str | None]:
    """What is wrong at ``path``, and the offending value as shown to the user (if any)."""
    kind = detail["type"]
    if kind == "missing":
        return "required field is missing", None
    if kind == "extra_forbidden":
        known = list(_field_by_json_name(parent)) if parent else []
        close = difflib.get_close_matches(str(path[-1]), known, n=1) if path else []
        return "unknown field" + (f" (did you mean {close[0]!r}?)" if close else ""), None
    expected = _EXPECTED.get(kind)
    claim = f"expected {expected}" if expected else str(detail["msg"])
    return claim, describe(detail.get("input"))


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "float_type": "a number",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names)
