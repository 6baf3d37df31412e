"""Reading observed Kubernetes objects: plain JSON data as the API server sends it.

Phase decisions read a handful of status fields from objects the engine keeps by the thousand in its
watch caches; reading the JSON directly costs nothing, where building the client's models for every
object on every round would dominate a reconcile round. These helpers give those reads types, and
treat a missing or mistyped field as absent, as the API conventions ask of clients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

JsonObject = Mapping[str, Any]

_EMPTY: JsonObject = {}


def section(obj: JsonObject, *path: str) -> JsonObject:
    """The object at ``path``, or an empty mapping when any step is missing or not an object."""
    current: Any = obj
    for key in path:
        current = current.get(key) if isinstance(current, Mapping) else None
    return current if isinstance(current, Mapping) else _EMPTY


def items(obj: JsonObject, key: str) -> Sequence[JsonObject]:
    """The objects of the list at ``key`` (entries that are not objects are skipped)."""
    value = obj.get(key)
    if not isinstance(value, list):
        return ()
    return [entry for entry in value if isinstance(entry, Mapping)]


def controller_of(obj: JsonObject) -> JsonObject | None:
    """The owner reference of ``obj`` that is its controller (an object has at most one:
    apimachinery's ``metav1.GetControllerOf``), or None."""
    owners = items(section(obj, "metadata"), "ownerReferences")
    return next((owner for owner in owners if owner.get("controller") is True), None)


def text(obj: JsonObject, key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def integer(obj: JsonObject, key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def timestamp(obj: JsonObject, key: str) -> datetime | None:
    """An RFC 3339 time field (``2026-11-21T10:00:00Z``), or None when absent or unreadable."""
    return parse_time(obj.get(key))


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def rfc3339(value: datetime) -> str:
    """``value`` as the API server writes times: UTC, whole seconds (``2026-11-21T10:00:00Z``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(obj: JsonObject, condition_type: str) -> JsonObject | None:
    """The status condition of ``condition_type``, or None."""
    for entry in items(section(obj, "status"), "conditions"):
        if entry.get("type") == condition_type:
            return entry
    return None


def condition_is(obj: JsonObject, condition_type: str, status: str) -> JsonObject | None:
    """The status condition of ``condition_type`` when its status is ``status`` ("True"...)."""
    found = condition(obj, condition_type)
    return found if found is not None and found.get("status") == status else None


def describe(reason: str, message: str) -> str:
    """``reason: message``, or whichever of the two is present."""
    return ": ".join(part for part in (reason, message) if part)
