"""The plugin manager's state for one task, as it is persisted between reconcile rounds.

The state is what lets a restarted engine carry on: whether the resource was created, the last phase
reported (so versions never go backwards and unchanged rounds write nothing), and the creation and
recording times of the last Kubernetes event attached (so no event is attached twice), how far the
launch got (whether a create of the resource may have succeeded, whether what its pods need and what
depends on it were created), and since when an abort waits for the resource to stop. It is encoded
as plain JSON-compatible data with a format version; a state written by an unknown format cannot be
trusted and fails the task rather than guessing. Keys added within a format version are optional
when read, with the value that assumes least (a state written before ``maybeCreated`` existed may
have created its resource; one written before ``dependentsCreated`` and started had its Services
created by the executor that started it).
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
    # A create of the resource may have succeeded: one was answered with a server error, or its
    # connection broke after the request was sent. Until then, a task not started never had a
    # resource, and cleaning up after it needs no request.
    maybe_created: bool = False
    # What the resource's pods need (its claims) was created, before the resource.
    needs_created: bool = False
    # What depends on the resource (its Services) was created, owned by it.
    dependents_created: bool = False
    # When the resource was deleted for an abort that waits for it to stop.
    aborting_since: datetime | None = None

    @property
    def never_created(self) -> bool:
        """Whether the task's resource provably never existed: the task was not started, and
        every create was refused, or never reached the API server."""
        return self.manager_phase is ManagerPhase.NOT_STARTED and not self.maybe_created


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
        "maybeCreated": state.maybe_created,
        "needsCreated": state.needs_created,
        "dependentsCreated": state.dependents_created,
        "abortingSince": _encode_time(state.aborting_since),
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
        manager_phase = ManagerPhase(data["managerPhase"])
        state = PluginState(
            manager_phase=manager_phase,
            phase=Phase(plugin["phase"]),
            phase_version=_integer(plugin["version"]),
            reason=str(plugin["reason"]),
            last_event_created=_decode_time(last_event["created"]),
            last_event_recorded=_decode_time(last_event["recorded"]),
            launch_failures=_integer(data["launchFailures"]),
            maybe_created=_flag(data.get("maybeCreated", True)),
            needs_created=_flag(data.get("needsCreated", False)),
            # Before the key existed, the executor that started a task created its Services.
            dependents_created=_flag(
                data.get("dependentsCreated", manager_phase is ManagerPhase.STARTED)
            ),
            aborting_since=_decode_time(data.get("abortingSince")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptedPluginStateError(f"plugin state version 1 is malformed: {exc!r}") from exc
    return state


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
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
