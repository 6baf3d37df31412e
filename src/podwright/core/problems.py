"""Problems with user input, each at a field path, and the error that carries all of them.

Every reader in the core (pod specs, workloads, policies, asset catalogues) reports *every*
problem it finds, not only the first, each at the field path the user wrote, so that the CLI can
point at a file, line and column. The shared pieces live here: the problem record, the error that
carries a list of them, and the wording helpers that keep messages alike across readers.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Sequence

from podwright.core.field_paths import FieldPath, format_path


@dataclasses.dataclass(frozen=True)
class FieldProblem:
    """One thing wrong with the input, at a field path in the user's own (camelCase) terms."""

    path: FieldPath
    message: str
    source: str | None = None
    """Which document the path is in, when a problem spans several (a scope tree of policies)."""

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.message}" if self.path else self.message


class ProblemsError(ValueError):
    """Input that cannot be used; ``problems`` lists every reason, in document order."""

    def __init__(self, problems: Sequence[FieldProblem]) -> None:
        if not problems:
            raise ValueError("a ProblemsError needs at least one problem")
        self.problems = tuple(problems)
        super().__init__(summary(self.problems))


def summary(problems: Sequence[object]) -> str:
    """An error's one-line message: its first problem, and how many more there are."""
    more = len(problems) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{problems[0]}{suffix}"


_YAML_TYPE_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "list",
    dict: "mapping",
    type(None): "null",
}


def describe(value: object) -> str:
    """A value as the user wrote it, with its YAML type: ``'abc' (string)``, ``1.5 (number)``."""
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    kind = next(
        (name for python, name in _YAML_TYPE_NAMES.items() if type(value) is python),
        type(value).__name__,
    )
    return f"{shown} ({kind})"


def shown(value: object) -> str:
    """A value as messages quote it: strings quoted, numbers and lists as written."""
    return repr(value) if isinstance(value, str) else str(value).replace("'", '"')


def unknown_field(name: object, known: Iterable[str]) -> str:
    """``unknown field 'imagePullPolcy' (did you mean 'imagePullPolicy'?)``."""
    close = difflib.get_close_matches(str(name), list(known), n=1)
    return f"unknown field {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")


def one_of(choices: Sequence[object]) -> str:
    """``one of 'a', 'b', 'c'``."""
    return "one of " + ", ".join(repr(choice) for choice in choices)
