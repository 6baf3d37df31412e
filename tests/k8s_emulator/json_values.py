"""Copying decoded JSON, which the emulator does at every write: its own function, because
``copy.deepcopy`` spends half its time on what JSON cannot hold (memo, reductions, classes)."""

from __future__ import annotations

from typing import Any


def json_copy(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists and scalars: what the store holds), twice as
    quick as ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {key: json_copy(item) for key, item in value.items()}
    if kind is list:
        return [json_copy(item) for item in value]
    return value
