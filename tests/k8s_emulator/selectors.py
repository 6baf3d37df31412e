"""Label and field selectors, parsed and matched as the API server does."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from tests.k8s_emulator.errors import ApiError

Requirement = Callable[[Mapping[str, str]], bool]

_SET_REQUIREMENT = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQUALITY = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def _split(selector: str) -> list[str]:
    """Split at the commas that are not inside parentheses."""
    parts, depth, current = [], 0, []
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def label_selector(selector: str | None) -> Requirement:
    """A predicate over a labels mapping; 400 BadRequest for a selector that does not parse."""
    requirements: list[Requirement] = []
    for part in _split(selector or ""):
        if match := _SET_REQUIREMENT.match(part):
            key, operator, values = match[1], match[2], {v.strip() for v in match[3].split(",")}
            if operator == "in":
                requirements.append(lambda labels, k=key, vs=values: labels.get(k) in vs)
            else:
                requirements.append(lambda labels, k=key, vs=values: labels.get(k) not in vs)
        elif match := _EQUALITY.match(part):
            key, operator, value = match[1], match[2], match[3]
            if operator == "!=":
                requirements.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                requirements.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif match := _EXISTS.match(part):
            negated, key = match[1] == "!", match[2]
            requirements.append(lambda labels, k=key, n=negated: (k in labels) != n)
        else:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}")
    return lambda labels: all(requirement(labels) for requirement in requirements)


def field_selector(
    selector: str | None, fields: Callable[[Mapping[str, Any]], Mapping[str, str]]
) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate over objects, given the selectable fields of their kind."""
    terms = []
    for part in _split(selector or ""):
        match = _EQUALITY.match(part)
        if match is None:
            raise ApiError(400, "BadRequest", f"invalid field selector: {part!r}")
        terms.append((match[1], match[2] != "!=", match[3]))

    def matches(obj: Mapping[str, Any]) -> bool:
        available = fields(obj)
        for key, equal, value in terms:
            if key not in available:
                raise ApiError(400, "BadRequest", f"field label not supported: {key}")
            if (available[key] == value) != equal:
                return False
        return True

    return matches
