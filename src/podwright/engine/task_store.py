"""The task store port: every task podwright runs, its state and its history.

A task is submitted once: its workload, effective spec and rendered manifests never change after.
The executor then advances it round after round. Each advance is one atomic write of the plugin
manager's state, the phase (appended to the history when the phase or its version changes) and
the Kubernetes events newly attached, made *before* the executor acts on the round's outcome, so a
crash at any point loses nothing: the next executor resumes from the last write. Every write is
conditional on the task's revision, so two writers (two executors, or an executor and ``podwright
abort``) never overwrite each other: the loser gets :class:`StaleRevisionError`, re-reads, retries.
Removing a task (``podwright delete``) is conditional in the same way, so a task that changed
since it was judged removable stays.

The error tree is the port's contract; an adapter (SQLite by default) maps its library's errors
onto it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from podwright.core.lifecycle.phases import ErrorKind, Phase, PhaseInfo
from podwright.engine.plugin import OwnerReference

JsonData = Mapping[str, Any]


class TaskStoreError(Exception):
    """Anything the task store could not do."""


class TaskNotFoundError(TaskStoreError):
    """No task has this id."""


class TaskExistsError(TaskStoreError):
    """A task with this id was already submitted."""


class StaleRevisionError(TaskStoreError):
    """The task changed since it was read: re-read it and decide again."""


class StoreUnavailableError(TaskStoreError):
    """The store cannot be opened or written (permissions, disk, a schema from a newer version)."""


@dataclasses.dataclass(frozen=True)
class NewTask:
    """A task as submitted: what was asked, what the policies made of it, what will be created."""

    task_id: str
    workload_type: str
    name: str
    namespace: str
    backend: str
    workload: JsonData
    effective: JsonData
    manifests: tuple[JsonData, ...]
    submitted_at: datetime
    owner: OwnerReference | None = None
    """The object the task's resource is owned by (the operator's Workload), if any."""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The task's labels (a workload file's ``metadata.labels``, a Workload's), which
    ``podwright list -l`` selects tasks by."""
    submitted_by: str = ""
    """Who submitted it: this machine's user for a task of this machine's store, the user the
    API server authenticated for a Workload (recorded by podwright's mutating webhook). Empty
    when not known: a task recorded before podwright recorded submitters."""


@dataclasses.dataclass(frozen=True)
class TaskRecord:
    """A task as stored now. ``revision`` grows by one with every write."""

    task: NewTask
    revision: int
    updated_at: datetime
    plugin_state: JsonData
    phase: Phase
    phase_version: int
    reason: str
    abort_requested: bool
    finalized: bool

    @property
    def task_id(self) -> str:
        return self.task.task_id


@dataclasses.dataclass(frozen=True)
class HistoryEntry:
    """One phase (or new version of a phase) a task went through."""

    phase: Phase
    version: int
    reason: str
    occurred_at: datetime
    error_code: str | None = None
    error_message: str | None = None
    error_kind: ErrorKind | None = None


@dataclasses.dataclass(frozen=True)
class AttachedEvent:
    """A Kubernetes event attached to a task (its reason line), in the order attached."""

    reason: str
    occurred_at: datetime | None


class TaskStore(Protocol):
    """Where tasks live between rounds and across restarts."""

    def submit(self, task: NewTask) -> TaskRecord:
        """Record a new task (phase Undefined, revision 1); :class:`TaskExistsError` if known."""

    def get(self, task_id: str) -> TaskRecord:
        """The task as stored now; :class:`TaskNotFoundError` if unknown."""

    def list_tasks(self, *, active_only: bool = False) -> list[TaskRecord]:
        """Every task, oldest submission first; ``active_only``: those not yet finalized."""

    def advance(
        self,
        task_id: str,
        revision: int,
        plugin_state: JsonData,
        info: PhaseInfo,
        now: datetime,
    ) -> TaskRecord:
        """Write one round's outcome, if the task is still at ``revision``."""

    def request_abort(self, task_id: str, now: datetime) -> TaskRecord:
        """Mark the task to be aborted by whoever advances it next (idempotent)."""

    def mark_finalized(self, task_id: str, revision: int, now: datetime) -> TaskRecord:
        """The task's resources are cleaned up; it leaves the active set."""

    def delete(self, task_id: str, revision: int) -> None:
        """Remove the task with its history and events, if it is still at ``revision``
        (``podwright delete``: whoever decided to remove it decided on what it read)."""

    def history(self, task_id: str) -> list[HistoryEntry]:
        """The phases the task went through, in order."""

    def events(self, task_id: str) -> list[AttachedEvent]:
        """The events attached to the task, in order."""

    def close(self) -> None:
        """Release the store."""


def history_entry(info: PhaseInfo, now: datetime) -> HistoryEntry:
    """The history line for a phase report: its time is the report's, or ``now``."""
    error = info.error
    return HistoryEntry(
        phase=info.phase,
        version=info.version,
        reason=info.reason,
        occurred_at=info.occurred_at or now,
        error_code=error.code if error else None,
        error_message=error.message if error else None,
        error_kind=error.kind if error else None,
    )


def unsubmitted_record(
    task: NewTask, *, reason: str = "", abort_requested: bool = False
) -> TaskRecord:
    """The record a task has before the store holds it (revision 0, phase Undefined): what the
    executor launches a new task from, and how the task commands show a Workload the operator
    has not recorded yet."""
    return TaskRecord(
        task=task,
        revision=0,
        updated_at=task.submitted_at,
        plugin_state={},
        phase=Phase.UNDEFINED,
        phase_version=0,
        reason=reason,
        abort_requested=abort_requested,
        finalized=False,
    )


def is_new_phase(record: TaskRecord, info: PhaseInfo) -> bool:
    """Whether ``info`` reports a phase or a phase version the record does not have yet."""
    return (info.phase, info.version) != (record.phase, record.phase_version)


def events_of(info: PhaseInfo) -> Sequence[AttachedEvent]:
    """The events a phase report attaches."""
    return [AttachedEvent(item.reason, item.occurred_at) for item in info.additional_reasons]
