"""What every podwright command shares: exit codes and the one-line bad-input error."""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import IntEnum

import click


class ExitCode(IntEnum):
    """What the process exit status means; scripts may rely on these."""

    OK = 0
    VIOLATIONS = 1
    """The input is valid but breaks enforced policy rules."""
    BAD_INPUT = 2
    """Unreadable or invalid input, or a usage error."""
    TASK_FAILED = 3
    """The task ran and failed (``podwright run``)."""
    ABORTED = 4
    """The task was aborted (``podwright run``)."""


class BadInput(click.ClickException):
    """Input the command cannot use; reported on one line, exit status 2."""

    exit_code = ExitCode.BAD_INPUT


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned with two spaces between them, as kubectl prints them."""
    widths = [
        max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=False)
    ]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return "\n".join(lines)


def scalar_text(value: object) -> str:
    """A value in a table cell: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)
