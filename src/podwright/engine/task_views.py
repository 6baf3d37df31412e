"""Tasks as plain data, and which of them a listing shows in which order.

``podwright list`` and ``status`` print tasks as JSON or YAML for scripts, and a Python API will
return the same data: this module is where a :class:`~podwright.engine.task_store.TaskRecord`
(with its phase history and events) becomes that data, so both say the same thing. The keys are
camelCase, times RFC 3339 in UTC to the second (``2026-11-27T15:08:05Z``), as Kubernetes writes
them; every key is always there (None where a time is not known; ``submittedBy`` ``""`` where
who submitted the task is not, as for one recorded before podwright recorded submitters), except
a history entry's ``error``, there only when the phase failed with one. :class:`TaskFilter` and
:func:`sort_tasks` are what ``list --phase/--type/-l/--active`` and ``--sort-by`` mean, for every
backend.

No I/O and no clock: the records come in, plain data and decisions go out.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from podwright.core.label_selectors import LabelSelector
from podwright.core.lifecycle.phases import Phase
from podwright.engine.task_store import AttachedEvent, HistoryEntry, TaskRecord

TASK_KIND = "Task"
"""A task (``list``'s items, ``status``'s document, which adds its history and events)."""
TASK_LIST_KIND = "TaskList"
"""``list``'s document: ``{"kind": "TaskList", "items": [...]}``."""
TASK_PHASE_KIND = "TaskPhase"
"""A phase a task entered, as ``status --watch`` prints it when it happens."""
TASK_EVENT_KIND = "TaskEvent"
"""An event attached to a task, as ``status --watch`` prints it when it happens."""


def _aware(value: datetime) -> datetime:
    """``value`` with a zone (UTC when it has none), so that any two compare."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def utc_time(value: datetime) -> str:
    """``value`` in RFC 3339, UTC, whole seconds; a time without a zone is taken as UTC (the
    store writes none such, but a record written by something else may hold one)."""
    utc = _aware(value).astimezone(UTC).replace(microsecond=0, tzinfo=None)
    return f"{utc.isoformat()}Z"  # strftime's %Y may not pad years before 1000 to four digits


def task_item(record: TaskRecord, *, backend: str | None = None) -> dict[str, Any]:
    """The task as ``list`` shows it; ``backend`` instead of the record's own (the operator's
    tasks show the cluster they are on: ``operator/<context>``)."""
    task = record.task
    return {
        "kind": TASK_KIND,
        "id": task.task_id,
        "name": task.name,
        "namespace": task.namespace,
        "type": task.workload_type,
        "backend": backend or task.backend,
        "phase": record.phase.value,
        "reason": record.reason,
        "submittedAt": utc_time(task.submitted_at),
        "submittedBy": task.submitted_by,
        "updatedAt": utc_time(record.updated_at),
        "active": not record.finalized,
        "abortRequested": record.abort_requested,
        "labels": dict(sorted(task.labels.items())),
    }


def history_item(entry: HistoryEntry) -> dict[str, Any]:
    """A phase the task went through; ``error`` only when it failed with one."""
    item: dict[str, Any] = {
        "phase": entry.phase.value,
        "version": entry.version,
        "reason": entry.reason,
        "occurredAt": utc_time(entry.occurred_at),
    }
    if entry.error_code is not None or entry.error_message is not None:
        item["error"] = {
            "code": entry.error_code or "",
            "message": entry.error_message or "",
            "kind": entry.error_kind.value if entry.error_kind is not None else None,
        }
    return item


def event_item(event: AttachedEvent) -> dict[str, Any]:
    """An event attached to the task; ``occurredAt`` None when the event told no time."""
    return {
        "reason": event.reason,
        "occurredAt": utc_time(event.occurred_at) if event.occurred_at is not None else None,
    }


def task_status(
    record: TaskRecord,
    history: Sequence[HistoryEntry],
    events: Sequence[AttachedEvent],
    *,
    backend: str | None = None,
) -> dict[str, Any]:
    """The task as ``status`` shows it: :func:`task_item` with its phase history and events."""
    return {
        **task_item(record, backend=backend),
        "history": [history_item(entry) for entry in history],
        "events": [event_item(event) for event in events],
    }


def task_list(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``list``'s document of :func:`task_item` items (none: an empty list)."""
    return {"kind": TASK_LIST_KIND, "items": list(items)}


def phase_change(task_id: str, entry: HistoryEntry) -> dict[str, Any]:
    """A phase the task ``task_id`` entered, on its own (``status --watch``)."""
    return {"kind": TASK_PHASE_KIND, "taskId": task_id, **history_item(entry)}


def task_event(task_id: str, event: AttachedEvent) -> dict[str, Any]:
    """An event attached to the task ``task_id``, on its own (``status --watch``)."""
    return {"kind": TASK_EVENT_KIND, "taskId": task_id, **event_item(event)}


def in_order(
    phases: Iterable[HistoryEntry], events: Iterable[AttachedEvent], *, now: datetime
) -> list[tuple[datetime, HistoryEntry | AttachedEvent]]:
    """Phases and events in the order they happened, each with its time: a phase before an
    event of the same time (the event came with it), an event that tells no time at ``now``
    (when it was seen); those of the same time and kind as they came."""
    timed: list[tuple[datetime, int, HistoryEntry | AttachedEvent]] = [
        (_aware(entry.occurred_at), 0, entry) for entry in phases
    ]
    timed += [(_aware(event.occurred_at or now), 1, event) for event in events]
    timed.sort(key=lambda item: item[:2])
    return [(at, item) for at, _rank, item in timed]


@dataclasses.dataclass(frozen=True)
class TaskFilter:
    """Which tasks a listing shows: all of these that are given (empty: any)."""

    phases: frozenset[Phase] = frozenset()
    """Tasks in one of these phases."""
    types: frozenset[str] = frozenset()
    """Tasks of one of these workload types."""
    selector: LabelSelector = dataclasses.field(default_factory=LabelSelector)
    """Tasks whose labels it matches."""
    active_only: bool = False
    """Tasks not finalized yet."""

    def matches(self, record: TaskRecord) -> bool:
        return (
            (not self.phases or record.phase in self.phases)
            and (not self.types or record.task.workload_type in self.types)
            and self.selector.matches(record.task.labels)
            and not (self.active_only and record.finalized)
        )

    def __bool__(self) -> bool:
        """Whether it leaves any task out."""
        return bool(self.phases or self.types or self.selector or self.active_only)


class SortKey(enum.StrEnum):
    """What ``list --sort-by`` orders tasks by; ties are ordered by task id."""

    SUBMITTED = "submitted"
    """When submitted, the oldest first."""
    UPDATED = "updated"
    """When last changed, the longest unchanged first."""
    NAME = "name"
    """The workload's name, alphabetically."""
    PHASE = "phase"
    """The phase, in the lifecycle's order (Undefined … Running, Success, the failures,
    Aborted: :class:`~podwright.core.lifecycle.phases.Phase`'s order)."""
    TYPE = "type"
    """The workload type, alphabetically."""


_PHASE_ORDER = {phase: index for index, phase in enumerate(Phase)}

_SORT_KEYS: dict[SortKey, Callable[[TaskRecord], Any]] = {
    SortKey.SUBMITTED: lambda record: _aware(record.task.submitted_at),
    SortKey.UPDATED: lambda record: _aware(record.updated_at),
    SortKey.NAME: lambda record: record.task.name,
    SortKey.PHASE: lambda record: _PHASE_ORDER[record.phase],
    SortKey.TYPE: lambda record: record.task.workload_type,
}


def sort_tasks(records: Iterable[TaskRecord], by: SortKey = SortKey.SUBMITTED) -> list[TaskRecord]:
    """``records`` ordered by ``by``, then by task id."""
    key = _SORT_KEYS[by]
    return sorted(records, key=lambda record: (key(record), record.task_id))
