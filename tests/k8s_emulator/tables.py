"""Server-side printing: a get or a list answered as a ``meta.k8s.io/v1`` Table, as ``kubectl
get`` asks (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) and prints as it comes.

A Table (apimachinery ``pkg/apis/meta/v1/types.go``) has ``columnDefinitions`` (name, type,
format, description, priority; kubectl shows priority 0 unless ``-o wide``) and a row per object:
its ``cells`` and its ``object``, which the ``includeObject`` parameter chooses: ``Metadata`` (the
default: a ``PartialObjectMetadata``), ``Object`` (the whole object, kubectl's ``--sort-by``
asks for it) or ``None``.

Custom resources are printed as apiextensions' table convertor prints them
(``pkg/registry/customresource/tableconvertor/tableconvertor.go``): ``Name``, then the version's
``additionalPrinterColumns`` (or, when it has none, ``Age`` from ``.metadata.creationTimestamp``:
``serveDefaultColumnsIfEmpty`` in ``pkg/apiserver/customresource_handler.go``). A column's
``jsonPath`` is evaluated on the object; a ``string`` column prints the first value found as Go's
JSONPath printer does, ``integer``, ``number`` and ``boolean`` columns send the value when it is
of that type, and a ``date`` column is rendered by the server as an age (``5s``, ``3m``, ``2d``:
``ConvertToHumanReadableDateType`` in apimachinery ``pkg/api/meta/table/table.go``, i.e.
``duration.ShortHumanDuration``); anything else, or nothing found, is ``null`` (kubectl prints
nothing). The JSONPath the emulator evaluates is the subset printer columns use: ``.field``,
``[index]``, ``[*]`` and ``[?(@.path=="value")]`` (``==``, ``!=``); other syntax is refused. A
field runs to the next unescaped terminator (space, ``.``, ``,``, ``[``, ``]``, ``$``, ``@``,
``{``, ``}``), a backslash escaping the character after it and then dropped, as client-go's
``util/jsonpath/parser.go`` reads one (``parseField``): ``.metadata.annotations.example\\.com/x``
is the annotation ``example.com/x``.

Built-in kinds are printed by kube-apiserver's printers (``pkg/printers/internalversion/
printers.go``), whose columns differ by kind; the emulator prints ``Name``, its own columns for
ConfigMaps (``Data``) and Namespaces (``Status``), and ``Age`` (``duration.HumanDuration``, as
``translateTimestampSince``), so a real server shows more columns for the other kinds (a pod's
Ready, Status, Restarts).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.field_validation import OBJECT_META, builtin_description
from tests.k8s_emulator.resource_types import ResourceType

Obj = dict[str, Any]
_TABLE_MEDIA = re.compile(r"^application/json;(?=.*\bas=Table\b)(?=.*\bg=meta\.k8s\.io\b).*$")
_TABLE_VERSION = re.compile(r"\bv=(v1|v1beta1)\b")
INCLUDE_OBJECT = ("None", "Metadata", "Object")


def table_version(accept: str) -> str | None:
    """The version of Table the ``Accept`` header asks for first (``v1`` or ``v1beta1``), or None
    when it asks for no Table."""
    for media in accept.split(","):
        compact = media.replace(" ", "")
        version = _TABLE_VERSION.search(compact)
        if _TABLE_MEDIA.match(compact) and version is not None:
            return version[1]
    return None


def to_table(
    resource: ResourceType,
    payload: Obj,
    *,
    columns: Sequence[Mapping[str, Any]] | None,
    include_object: str | None,
    version: str,
    now: datetime,
) -> Obj:
    """``payload`` (an object, or a list of them) as a Table. ``columns``: a custom resource's
    printer columns (None: a built-in kind's)."""
    include = include_object or "Metadata"
    if include not in INCLUDE_OBJECT:
        raise ApiError(
            400,
            "BadRequest",
            f"includeObject: Unsupported value: {json.dumps(include)}: supported values: "
            + ", ".join(json.dumps(value) for value in INCLUDE_OBJECT),
        )
    printer = _CustomPrinter(columns) if columns is not None else _BuiltinPrinter(resource)
    items = payload.get("items", [payload])
    rows = [
        {"cells": printer.cells(item, now), "object": _row_object(item, include, version)}
        for item in items
    ]
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": {"resourceVersion": payload["metadata"].get("resourceVersion", "")},
        "columnDefinitions": printer.definitions,
        "rows": rows,
    }


def _row_object(obj: Obj, include: str, version: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": obj["metadata"],
    }


def _column(name: str, kind: str, description: str, format: str = "", priority: int = 0) -> Obj:
    return {
        "name": name,
        "type": kind,
        "format": format,
        "description": description,
        "priority": priority,
    }


def _name_column() -> Obj:
    return _column("Name", "string", builtin_description(OBJECT_META, "name"), "name")


class _CustomPrinter:
    def __init__(self, columns: Sequence[Mapping[str, Any]]) -> None:
        columns = columns or [
            {
                "name": "Age",
                "type": "date",
                "jsonPath": ".metadata.creationTimestamp",
                "description": builtin_description(OBJECT_META, "creationTimestamp"),
            }
        ]
        self._columns = [
            (column["type"], parse_json_path(column["jsonPath"])) for column in columns
        ]
        self.definitions = [_name_column()] + [
            _column(
                column["name"],
                column["type"],
                column.get("description")
                or f"Custom resource definition column (in JSONPath format): {column['jsonPath']}",
                column.get("format", ""),
                column.get("priority", 0),
            )
            for column in columns
        ]

    def cells(self, obj: Obj, now: datetime) -> list[Any]:
        cells: list[Any] = [obj["metadata"].get("name", "")]
        for kind, steps in self._columns:
            found = evaluate(obj, steps)
            cells.append(None if not found else _cell(kind, found[0], now))
        return cells


class _BuiltinPrinter:
    def __init__(self, resource: ResourceType) -> None:
        self._kind = resource.kind if resource.group == "" else ""
        own = {
            "ConfigMap": [
                _column(
                    "Data", "string", builtin_description("io.k8s.api.core.v1.ConfigMap", "data")
                )
            ],
            "Namespace": [_column("Status", "string", "The status of the namespace")],
        }.get(self._kind, [])
        age = _column("Age", "string", builtin_description(OBJECT_META, "creationTimestamp"))
        self.definitions = [_name_column(), *own, age]

    def cells(self, obj: Obj, now: datetime) -> list[Any]:
        own: list[Any] = []
        if self._kind == "ConfigMap":
            own = [len(obj.get("data") or {}) + len(obj.get("binaryData") or {})]
        elif self._kind == "Namespace":
            own = [(obj.get("status") or {}).get("phase", "")]
        created = obj["metadata"].get("creationTimestamp")
        age = human_duration(now - _timestamp(created)) if created else "<unknown>"
        return [obj["metadata"].get("name", ""), *own, age]


def _cell(kind: str, value: Any, now: datetime) -> Any:
    """A column's cell from the first value its JSONPath found (``cellForJSONValue``)."""
    if kind == "string":
        return go_text(value)
    if kind == "integer" and isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind == "date" and isinstance(value, str):
        try:
            return short_human_duration(now - _timestamp(value))
        except ValueError:
            return "<invalid>"
    return None


def _timestamp(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"not an RFC 3339 time: {text}")
    return moment


def go_text(value: Any) -> str:
    """``value`` as Go's ``fmt.Print`` writes a decoded JSON value (JSONPath's printer): maps as
    ``map[k:v]`` with sorted keys, lists as ``[a b]``, ``<nil>`` for null."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{key}:{go_text(value[key])}" for key in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_text(item) for item in value) + "]"
    return str(value)


def _go_float(value: float) -> str:
    """``%v`` of a float64: the shortest representation, with an exponent below 1e-4 and from
    1e21 on."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    if math.isinf(value) or math.isnan(value):
        return {"inf": "+Inf", "-inf": "-Inf"}.get(str(value), "NaN")
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return f"{mantissa}e{int(exponent):+03d}"
    return text


def short_human_duration(elapsed: timedelta) -> str:
    """apimachinery ``duration.ShortHumanDuration``: one unit; ``0s`` for a clock skew up to a
    second, ``<invalid>`` beyond."""
    whole = int(elapsed.total_seconds())
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 60:
        return f"{whole}s"
    if whole // 60 < 60:
        return f"{whole // 60}m"
    hours = whole // 3600
    if hours < 24:
        return f"{hours}h"
    if hours < 24 * 365:
        return f"{hours // 24}d"
    return f"{hours // 24 // 365}y"


def human_duration(elapsed: timedelta) -> str:
    """apimachinery ``duration.HumanDuration``: two units where the first is small (``5m30s``,
    ``2h5m``, ``3d4h``, ``2y10d``)."""
    whole = int(elapsed.total_seconds())
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        return f"{minutes}m" if whole % 60 == 0 else f"{minutes}m{whole % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, hours // 24 % 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


# JSONPath -----------------------------------------------------------------------------------------

_STEP = re.compile(
    r"\.(?P<field>(?:\\.|[^\s.,\[\]$@{}\\])+)"
    r"|\[(?P<index>-?\d+)\]"
    r"|\[(?P<all>\*)\]"
    r"|\[\?\(@(?P<path>(?:\.[A-Za-z0-9_\-]+)+)\s*(?P<op>==|!=)\s*(?P<literal>\"[^\"]*\"|'[^']*'|-?\d+(?:\.\d+)?|true|false)\)\]"
)


@functools.cache
def parse_json_path(path: str) -> tuple[tuple[str, Any], ...]:
    """A printer column's JSONPath as steps; syntax beyond the subset printer columns use is
    refused, naming the path."""
    steps: list[tuple[str, Any]] = []
    position = 0
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None:
            raise ApiError(
                500,
                "InternalError",
                f"the emulator does not evaluate the JSONPath {path!r} (at {text[position:]!r}): "
                "it evaluates .field, [index], [*] and [?(@.field==value)]",
            )
        if match["field"] is not None:
            steps.append(("field", match["field"].replace("\\", "")))
        elif match["index"] is not None:
            steps.append(("index", int(match["index"])))
        elif match["all"] is not None:
            steps.append(("all", None))
        else:
            literal = match["literal"]
            value = literal[1:-1] if literal[0] in "\"'" else json.loads(literal)
            steps.append(("filter", (tuple(match["path"][1:].split(".")), match["op"], value)))
        position = match.end()
    return tuple(steps)


def evaluate(value: Any, steps: tuple[tuple[str, Any], ...]) -> list[Any]:
    """Every value the steps reach from ``value``, in order (missing keys reach nothing)."""
    current = [value]
    for kind, argument in steps:
        current = [reached for item in current for reached in _step(item, kind, argument)]
    return current


def _step(item: Any, kind: str, argument: Any) -> list[Any]:
    if isinstance(item, dict):
        if kind == "field":
            return [item[argument]] if argument in item else []
        return list(item.values()) if kind == "all" else []
    if not isinstance(item, list):
        return []
    if kind == "index":
        return [item[argument]] if -len(item) <= argument < len(item) else []
    if kind == "filter":
        return [element for element in item if _matches(element, argument)]
    return list(item) if kind == "all" else []


def _matches(element: Any, condition: tuple[tuple[str, ...], str, Any]) -> bool:
    fields, operator, literal = condition
    found = evaluate(element, tuple(("field", name) for name in fields))
    if not found:
        return False
    return (found[0] == literal) == (operator == "==")
