"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as the Kubernetes API server applies them.

Pure functions over JSON data: the API-server emulator in the tests and the local backend (which
stands in for an API server on one machine) apply patches alike. A patch that is not a patch is a
:class:`MalformedPatchError` (the API server answers 400); one that cannot be applied to the
document, a failed ``test`` among them, is an :class:`UnappliablePatchError` (422).
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """A patch that could not be applied."""


class MalformedPatchError(PatchError):
    """The patch itself is not valid."""


class UnappliablePatchError(PatchError):
    """The patch is valid but does not apply to the document (a missing path, a failed test)."""


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """``target`` with the merge ``patch`` applied (``target`` is not changed)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    _merge_into(result, patch)
    return result


def _merge_into(result: dict[str, Any], patch: dict[str, Any]) -> None:
    """Merge ``patch`` into ``result``, which is already a copy (copying again at every level
    made a patch quadratic in the document's depth)."""
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            existing = result.get(key)
            merged = existing if isinstance(existing, dict) else {}
            _merge_into(merged, value)
            result[key] = merged
        else:
            result[key] = copy.deepcopy(value)


def apply_json_patch(target: Any, operations: Any) -> Any:
    """``target`` with the JSON patch ``operations`` applied (``target`` is not changed)."""
    if not isinstance(operations, list):
        raise MalformedPatchError("a JSON patch must be a list of operations")
    document = copy.deepcopy(target)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise MalformedPatchError(f"invalid JSON patch operation {operation!r}")
        document = _apply(document, operation)
    return document


def json_pointer(*tokens: str) -> str:
    """The JSON pointer (RFC 6901) through the members ``tokens``, each escaped: ``~`` as ``~0``,
    then ``/`` as ``~1`` (``json_pointer("metadata", "annotations", "podwright.dev/x")`` is
    ``/metadata/annotations/podwright.dev~1x``)."""
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise MalformedPatchError(f"invalid JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _unprocessable(message: str) -> UnappliablePatchError:
    return UnappliablePatchError(message)


def _parent(document: Any, parts: list[str]) -> Any:
    current = document
    for part in parts[:-1]:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise _unprocessable(f"doc is missing path: /{'/'.join(parts)}")
    return current


def _get(document: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return document
    parent = _parent(document, parts)
    last = parts[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return parent[int(last)]
    raise _unprocessable(f"doc is missing path: {path}")


def _apply(document: Any, operation: dict[str, Any]) -> Any:
    op, path = operation["op"], operation["path"]
    if op == "test":
        if _get(document, path) != operation.get("value"):
            raise _unprocessable(f"testing value {path} failed: test failed")
        return document
    if op in ("move", "copy"):
        value = copy.deepcopy(_get(document, operation["from"]))
        if op == "move":
            document = _apply(document, {"op": "remove", "path": operation["from"]})
        return _apply(document, {"op": "add", "path": path, "value": value})
    parts = _pointer(path)
    if not parts:
        if op == "remove":
            raise _unprocessable("cannot remove the whole document")
        return copy.deepcopy(operation.get("value"))
    parent = _parent(document, parts)
    last = parts[-1]
    if op == "add":
        if isinstance(parent, list):
            index = len(parent) if last == "-" else _index(parent, last, allow_end=True)
            parent.insert(index, copy.deepcopy(operation.get("value")))
        elif isinstance(parent, dict):
            parent[last] = copy.deepcopy(operation.get("value"))
        else:
            raise _unprocessable(f"cannot add at {path}")
    elif op in ("remove", "replace"):
        _get(document, path)  # must exist
        if isinstance(parent, list):
            index = _index(parent, last, allow_end=False)
            if op == "remove":
                del parent[index]
            else:
                parent[index] = copy.deepcopy(operation.get("value"))
        elif op == "remove":
            del parent[last]
        else:
            parent[last] = copy.deepcopy(operation.get("value"))
    else:
        raise MalformedPatchError(f"unknown JSON patch operation {op!r}")
    return document


def _index(items: list[Any], part: str, *, allow_end: bool) -> int:
    if not part.isdigit() or int(part) > len(items) or (int(part) == len(items) and not allow_end):
        raise _unprocessable(f"index {part!r} is out of range")
    return int(part)
