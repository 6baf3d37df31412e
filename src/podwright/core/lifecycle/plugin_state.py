"""The plugin manager's state for one task, as it is persisted between reconcile rounds.

The state is what lets a restarted engine carry on: whether the resource was created, the last phase
reported (so versions never go backwards and unchanged rounds write nothing), and the creation and
recording times of the last Kubernetes event attached (so no event is attached twice). It is encoded
as plain JSON-compatible data with a format version; a state written by an unknown format cannot be
trusted and fails the task rather than guessing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from podwright.core.lifecycle.phases import Phase

STATE_FORMAT_VERSION = 1


class ManagerPhase(enum.StrEnum):
    NOT_STARTED = "NotStarted"
    STARTED = "Started"


class CorruptedPluginStateError(ValueError):
    """The persisted state is of an unknown format version, or is not a state at all."""


@dataclass(frozen=True, slots=True)
class PluginState:
    manager_phase: ManagerPhase = ManagerPhase.NOT_STARTED
    phase: Phase = Phase.UNDEFINED
    phase_version: int = 0
    reason: str = ""
    last_event_created: datetime | None = None
    last_event_recorded: datetime | None = None
    # Consecutive system errors while creating the resource; the launch gives up after a few.
    launch_failures: int = 0


def encode_state(state: PluginState) -> dict[str, Any]:
    """The state as JSON-compatible data, tagged with :data:`STATE_FORMAT_VERSION`."""
    return {
        "version": STATE_FORMAT_VERSION,
        "managerPhase": state.manager_phase.value,
        "plugin": {
            "phase": state.phase.value,
            "version": state.phase_version,
            "reason": state.reason,
        },
        "lastEvent": {
            "created": _encode_time(state.last_event_created),
            "recorded": _encode_time(state.last_event_recorded),
        },
        "launchFailures": state.launch_failures,
    }


def decode_state(data: Mapping[str, Any] | None) -> PluginState:
    """The state encoded by :func:`encode_state`; empty or missing data is a task not yet started.

    Raises :class:`CorruptedPluginStateError` for any other format version, or data that is not a
    state of this version.
    """
    if not data:
        return PluginState()
    version = data.get("version")
    if version != STATE_FORMAT_VERSION:
        raise CorruptedPluginStateError(
            f"plugin state has format version {version!r}; this engine reads version "
            f"{STATE_FORMAT_VERSION}"
        )
    try:
        plugin = data["plugin"]
        last_event = data["lastEvent"]
        state = PluginState(
            manager_phase=ManagerPhase(data["managerPhase"]),
            phase=Phase(plugin["phase"]),
            phase_version=_integer(plugin["version"]),
            reason=str(plugin["reason"]),
            last_event_created=_decode_time(last_event["created"]),
            last_event_recorded=_decode_time(last_event["recorded"]),
            launch_failures=_integer(data["launchFailures"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptedPluginStateError(f"plugin state version 1 is malformed: {exc!r}") from exc
    return state


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def _encode_time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _decode_time(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO 8601 time, got {value!r}")
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"time {value!r} has no time zone")
    return parsed
