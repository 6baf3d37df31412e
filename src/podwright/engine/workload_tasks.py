"""A Workload's status as the task store of its task: the record, read and written as plain data.

In the cluster the operator keeps no database: a Workload's ``status.task`` *is* its task's
record (the manifests rendered when it was admitted, the plugin manager's versioned state, the
phase history, the events attached), and the rest of its status (phase, reason, conditions,
start and completion times, the objects it owns) is what people and ``kubectl`` read of it. This
module turns a Workload object into a :class:`TaskRecord` and a round's outcome into the status
update that records it, with no I/O and no clock (``now`` is passed in), so the adapter that
sends them (``adapters.kubernetes.workload_store``) only reads and writes.

The task id is the Workload's name and the start of its uid: stable across restarts and
replicas, and new when a Workload is deleted and created again under the same name. Who
submitted the task is who the annotation ``podwright.dev/submitted-by`` names: podwright's
mutating webhook writes it at the create and keeps it (without the webhook, it says what the
creator wrote). A deleted Workload (a deletion timestamp) or one annotated
``podwright.dev/abort-requested`` asks for its task to be aborted. A finalized task's Workload
is let go in the same write that records it finalized (:func:`finalized_patch`: the finalizer
removed, the task named in an annotation), so finalizing costs one request, not a status update
and then a patch. The events kept are the latest :data:`EVENTS_KEPT`, so a Workload's size stays
bounded however long its task runs.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from podwright.core.cluster_resources import (
    API_VERSION,
    SUBMITTED_BY_ANNOTATION,
    WORKLOAD_FINALIZER,
    WORKLOAD_KIND,
)
from podwright.core.lifecycle.objects import (
    JsonObject,
    condition,
    integer,
    items,
    parse_time,
    rfc3339,
    section,
    text,
)
from podwright.core.lifecycle.phases import ErrorKind, Phase, PhaseInfo
from podwright.engine.plugin import OwnerReference
from podwright.engine.task_store import (
    AttachedEvent,
    HistoryEntry,
    NewTask,
    TaskRecord,
    events_of,
    history_entry,
    is_new_phase,
    unsubmitted_record,
)

OPERATOR_BACKEND = "operator"
"""The backend key of every task the operator runs (the executor serves tasks of one key)."""
ABORT_ANNOTATION = "podwright.dev/abort-requested"
FINALIZED_ANNOTATION = "podwright.dev/finalized-task"
"""Set by the operator to the id of the task it finalized (:func:`finalized_patch`)."""
"""Set (to when it was asked) by ``podwright abort``: the task is aborted, the Workload stays."""
EVENTS_KEPT = 64
"""The most events a Workload's record keeps (the latest)."""

_RUNNING_OR_LATER = frozenset({Phase.RUNNING, Phase.SUCCESS})
_NOTE_BYTES = 1024


def _instant(value: datetime) -> str:
    """A time of the record, to the microsecond (the engine's waits count from them; the
    conditions and the top-level times keep the API server's whole seconds)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def task_id_of(workload: JsonObject) -> str:
    """The id of ``workload``'s task: ``<name>-<first 8 hex digits of its uid>``."""
    metadata = section(workload, "metadata")
    uid = text(metadata, "uid").replace("-", "")
    if not uid:
        raise ValueError("a Workload read from the API server has a uid")
    return f"{text(metadata, 'name')}-{uid[:8]}"


def owner_of(workload: JsonObject) -> OwnerReference:
    """The owner reference a task's resource carries to its Workload."""
    metadata = section(workload, "metadata")
    return OwnerReference(API_VERSION, WORKLOAD_KIND, text(metadata, "name"), text(metadata, "uid"))


def is_submitted(workload: JsonObject) -> bool:
    """Whether ``workload``'s task has a record."""
    return bool(section(workload, "status", "task"))


def is_deleting(workload: JsonObject) -> bool:
    return bool(section(workload, "metadata").get("deletionTimestamp"))


def has_finalizer(workload: JsonObject) -> bool:
    return WORKLOAD_FINALIZER in _finalizers(workload)


def without_finalizer_patch(workload: JsonObject) -> dict[str, Any]:
    """The merge patch that removes podwright's finalizer, conditional on the version read."""
    metadata = section(workload, "metadata")
    kept = [name for name in _finalizers(workload) if name != WORKLOAD_FINALIZER]
    return {
        "metadata": {
            "resourceVersion": text(metadata, "resourceVersion"),
            "finalizers": kept or None,
        }
    }


def with_finalizer_patch(workload: JsonObject) -> dict[str, Any]:
    """The merge patch that adds podwright's finalizer, conditional on the version read."""
    metadata = section(workload, "metadata")
    return {
        "metadata": {
            "resourceVersion": text(metadata, "resourceVersion"),
            "finalizers": [*_finalizers(workload), WORKLOAD_FINALIZER],
        }
    }


def _finalizers(workload: JsonObject) -> list[str]:
    return [str(name) for name in section(workload, "metadata").get("finalizers") or []]


def new_task(
    workload: JsonObject, manifests: Sequence[Mapping[str, Any]], now: datetime
) -> NewTask:
    """The task of an admitted ``workload`` whose resources are ``manifests``."""
    return _task(workload, task_id_of(workload), manifests, now)


def _task(
    workload: JsonObject,
    task_id: str,
    manifests: Sequence[Mapping[str, Any]],
    submitted_at: datetime,
) -> NewTask:
    metadata = section(workload, "metadata")
    spec = dict(section(workload, "spec"))
    return NewTask(
        task_id=task_id,
        workload_type=text(spec, "type"),
        name=text(metadata, "name"),
        namespace=text(metadata, "namespace"),
        backend=OPERATOR_BACKEND,
        workload=spec,
        effective=spec,
        manifests=tuple(dict(manifest) for manifest in manifests),
        submitted_at=submitted_at,
        owner=owner_of(workload),
        labels={str(key): str(value) for key, value in section(metadata, "labels").items()},
        submitted_by=text(section(metadata, "annotations"), SUBMITTED_BY_ANNOTATION),
    )


WorkloadKey = tuple[str, str]
"""A Workload's namespace and name: what the operator's work queue and caches key it by."""


def workload_key(workload: JsonObject) -> WorkloadKey:
    metadata = section(workload, "metadata")
    return text(metadata, "namespace"), text(metadata, "name")


def describe_workload(workload: JsonObject) -> str:
    """``Workload NAMESPACE/NAME``, as messages and logs name it."""
    return "Workload {}/{}".format(*workload_key(workload))


def pending_record(workload: JsonObject, reason: str, now: datetime) -> TaskRecord:
    """The task of a Workload the operator has not recorded yet, as the task commands show it:
    revision 0, phase Undefined with ``reason``, no manifests, submitted when the Workload was
    created (``now`` when that cannot be read)."""
    created = parse_time(section(workload, "metadata").get("creationTimestamp")) or now
    return unsubmitted_record(
        _task(workload, task_id_of(workload), (), created),
        reason=reason,
        abort_requested=abort_is_asked(workload),
    )


def abort_is_asked(workload: JsonObject) -> bool:
    """Whether ``workload`` asks for its task to be aborted: deleted, or annotated."""
    metadata = section(workload, "metadata")
    return is_deleting(workload) or bool(section(metadata, "annotations").get(ABORT_ANNOTATION))


def submitted_workload(workload: JsonObject, task: NewTask, now: datetime) -> dict[str, Any]:
    """The status update that records ``task`` (revision 1, phase Undefined)."""
    record = _first_record(task.task_id, now, manifests=task.manifests)
    status = {
        "observedGeneration": integer(section(workload, "metadata"), "generation") or 1,
        "phase": Phase.UNDEFINED.value,
        "reason": "submitted to the operator",
        "task": record,
    }
    return _conditional(workload, status)


def _first_record(
    task_id: str,
    now: datetime,
    *,
    manifests: Sequence[Mapping[str, Any]] = (),
    history: Sequence[HistoryEntry] = (),
) -> dict[str, Any]:
    """A task's record at revision 1: to be run (``manifests``), or ended already (``history``:
    its one phase, and finalized)."""
    return {
        "id": task_id,
        "revision": 1,
        "submittedAt": _instant(now),
        "updatedAt": _instant(now),
        "manifests": [dict(manifest) for manifest in manifests],
        "pluginState": {},
        "phaseVersion": history[-1].version if history else 0,
        "abortRequested": False,
        "finalized": bool(history),
        "history": [_history_json(entry) for entry in history],
        "events": [],
    }


def record_of(workload: JsonObject) -> TaskRecord | None:
    """The task record ``workload``'s status holds (None before its submission).

    Raises ValueError when the record cannot be read (written by something else)."""
    task = section(workload, "status", "task")
    if not task:
        return None
    metadata = section(workload, "metadata")
    status = section(workload, "status")
    submitted = parse_time(task.get("submittedAt"))
    updated = parse_time(task.get("updatedAt"))
    revision = integer(task, "revision")
    if submitted is None or updated is None or revision is None:
        raise ValueError(
            f"{describe_workload(workload)}: status.task needs submittedAt, updatedAt and revision"
        )
    try:
        phase = Phase(text(status, "phase") or Phase.UNDEFINED.value)
    except ValueError as error:
        raise ValueError(f"status.phase: {error}") from error
    return TaskRecord(
        task=_task(workload, text(task, "id"), items(task, "manifests"), submitted),
        revision=revision,
        updated_at=updated,
        plugin_state=dict(section(task, "pluginState")),
        phase=phase,
        phase_version=integer(task, "phaseVersion") or 0,
        reason=text(status, "reason"),
        abort_requested=bool(task.get("abortRequested")) or abort_is_asked(workload),
        finalized=bool(task.get("finalized"))
        or section(metadata, "annotations").get(FINALIZED_ANNOTATION) == text(task, "id"),
    )


def history_of(workload: JsonObject) -> list[HistoryEntry]:
    """The phases ``workload``'s task went through, in order."""
    entries = []
    for entry in items(section(workload, "status", "task"), "history"):
        occurred = parse_time(entry.get("occurredAt"))
        kind = text(entry, "errorKind")
        entries.append(
            HistoryEntry(
                phase=Phase(text(entry, "phase")),
                version=integer(entry, "version") or 0,
                reason=text(entry, "reason"),
                occurred_at=occurred if occurred is not None else datetime.min,
                error_code=text(entry, "errorCode") or None,
                error_message=text(entry, "errorMessage") or None,
                error_kind=ErrorKind(kind) if kind else None,
            )
        )
    return entries


def events_attached(workload: JsonObject) -> list[AttachedEvent]:
    """The events attached to ``workload``'s task (the latest kept), in order."""
    return [
        AttachedEvent(text(event, "reason"), parse_time(event.get("occurredAt")))
        for event in items(section(workload, "status", "task"), "events")
    ]


@dataclasses.dataclass(frozen=True)
class Advance:
    """A round's outcome as the Workload to write, and whether it reports a new phase."""

    workload: dict[str, Any]
    new_phase: bool


def launched_workload(
    workload: JsonObject,
    task: NewTask,
    plugin_state: Mapping[str, Any],
    info: PhaseInfo,
    now: datetime,
) -> dict[str, Any]:
    """The status update that records ``task`` with what its launch did (its plugin state and
    phase): :func:`submitted_workload` and :func:`advanced_workload` in one write."""
    submitted = submitted_workload(workload, task, task.submitted_at)
    first = record_of(submitted)
    assert first is not None, "a submitted Workload has a record"
    return advanced_workload(submitted, first, plugin_state, info, now).workload


def advanced_workload(
    workload: JsonObject,
    record: TaskRecord,
    plugin_state: Mapping[str, Any],
    info: PhaseInfo,
    now: datetime,
) -> Advance:
    """The status update that writes one round's outcome into ``workload``'s record: the
    plugin state, the phase (appended to the history when it or its version is new), the events
    newly attached, the conditions and times that follow from the phase, and the revision + 1."""
    task = section(workload, "status", "task")
    new_phase = is_new_phase(record, info)
    history = [dict(entry) for entry in items(task, "history")]
    if new_phase:
        history.append(_history_json(history_entry(info, now)))
    events = [dict(event) for event in items(task, "events")]
    events += [_event_json(event) for event in events_of(info)]
    record_patch: dict[str, Any] = {
        "revision": record.revision + 1,
        "updatedAt": _instant(now),
        "pluginState": dict(plugin_state),
        "phaseVersion": info.version,
        "history": history,
        "events": events[-EVENTS_KEPT:],
    }
    status: dict[str, Any] = {
        "phase": info.phase.value,
        "reason": info.reason,
        "message": info.error.message if info.error is not None else "",
        "task": record_patch,
        "conditions": _conditions(workload, info.phase, info.reason, now),
    }
    timestamps = section(workload, "status")
    if info.phase in _RUNNING_OR_LATER and not timestamps.get("startTime"):
        status["startTime"] = rfc3339(info.occurred_at or now)
    if info.phase.is_terminal and not timestamps.get("completionTime"):
        status["completionTime"] = rfc3339(info.occurred_at or now)
    return Advance(_conditional(workload, status), new_phase)


def finalized_patch(workload: JsonObject, task_id: str) -> dict[str, Any]:
    """The merge patch that records the task ``task_id`` finalized (its resources cleaned up)
    and lets its Workload go, in one write: podwright's finalizer removed, and the annotation
    ``podwright.dev/finalized-task`` naming the task (a Workload whose task is finalized is
    released at once, so the two are one act; a status update and a metadata patch would be two
    writes). Conditional on the version read. The annotation names the task, so a Workload
    created again from an exported copy of a finished one is not taken for finalized."""
    patch = without_finalizer_patch(workload)
    patch["metadata"]["annotations"] = {FINALIZED_ANNOTATION: task_id}
    return patch


def abort_requested_workload(
    workload: JsonObject, record: TaskRecord, now: datetime
) -> dict[str, Any]:
    """The status update that records an abort request."""
    status = {
        "task": {
            "revision": record.revision + 1,
            "updatedAt": _instant(now),
            "abortRequested": True,
        }
    }
    return _conditional(workload, status)


def _conditional(workload: JsonObject, status: Mapping[str, Any]) -> dict[str, Any]:
    """``workload`` with ``status`` merged into its status (one level deep: ``task``'s keys
    too): the body of the status update, whose resourceVersion is the one read, so the update
    is refused (409) when the Workload changed since."""
    current = dict(section(workload, "status"))
    for key, value in status.items():
        if key == "task" and isinstance(value, Mapping):
            current[key] = {**section(current, "task"), **value}
        else:
            current[key] = value
    return {**workload, "status": current}


_CONDITIONS: Mapping[str, frozenset[Phase]] = {
    "Launched": frozenset({Phase.QUEUED, Phase.INITIALIZING, Phase.RUNNING}),
    "Ready": frozenset({Phase.RUNNING}),
    "Finished": frozenset(phase for phase in Phase if phase.is_terminal),
}


def _conditions(
    workload: JsonObject, phase: Phase, reason: str, now: datetime
) -> list[dict[str, Any]]:
    """The Workload's conditions with Launched, Ready and Finished as ``phase`` makes them; the
    others (PolicyCompliant, another writer's) as they are. Launched stays as it was once the
    task ended (a task that ended launched was launched). A condition's transition time moves
    only when its status does."""
    generation = integer(section(workload, "metadata"), "generation")
    kept = [
        dict(entry)
        for entry in items(section(workload, "status"), "conditions")
        if entry.get("type") not in _CONDITIONS
    ]
    for condition_type, phases in _CONDITIONS.items():
        current = condition(workload, condition_type)
        status = "True" if phase in phases else "False"
        if condition_type == "Launched" and phase.is_terminal:
            status = "True" if current is not None and current.get("status") == "True" else "False"
        moved = current is None or current.get("status") != status
        entry: dict[str, Any] = {
            "type": condition_type,
            "status": status,
            "reason": phase.value,
            "message": reason,
            "lastTransitionTime": rfc3339(now)
            if moved or current is None
            else text(current, "lastTransitionTime") or rfc3339(now),
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        kept.append(entry)
    return kept


def _history_json(entry: HistoryEntry) -> dict[str, Any]:
    data: dict[str, Any] = {
        "phase": entry.phase.value,
        "version": entry.version,
        "reason": entry.reason,
        "occurredAt": rfc3339(entry.occurred_at),
    }
    if entry.error_code is not None:
        data["errorCode"] = entry.error_code
    if entry.error_message is not None:
        data["errorMessage"] = entry.error_message
    if entry.error_kind is not None:
        data["errorKind"] = entry.error_kind.value
    return data


def _event_json(event: AttachedEvent) -> dict[str, Any]:
    data: dict[str, Any] = {"reason": event.reason}
    if event.occurred_at is not None:
        data["occurredAt"] = rfc3339(event.occurred_at)
    return data


class WorkloadAction(enum.Enum):
    """What the operator does for a Workload in a round (besides its task's own round)."""

    NOTHING = "nothing"
    SUBMIT = "submit"
    """Admitted and not deleted, with no task yet: hold it with the finalizer, render it, record
    its task."""
    RELEASE = "release"
    """Its task is finalized (or it was deleted before it had one): remove the finalizer."""


def next_action(workload: JsonObject, record: TaskRecord | None) -> WorkloadAction:
    """What a round does for ``workload`` (whose record is ``record``): a pure decision, the
    same whichever event woke the round."""
    if record is None:
        if is_deleting(workload):
            return WorkloadAction.RELEASE if has_finalizer(workload) else WorkloadAction.NOTHING
        return WorkloadAction.SUBMIT
    if record.finalized and has_finalizer(workload):
        return WorkloadAction.RELEASE
    return WorkloadAction.NOTHING


def refused_workload(
    workload: JsonObject, task_id: str, message: str, now: datetime
) -> dict[str, Any]:
    """The status update that records a task that cannot be run (its Workload cannot be
    rendered on this cluster): PermanentFailure, nothing created, finalized at once."""
    entry = HistoryEntry(
        phase=Phase.PERMANENT_FAILURE,
        version=1,
        reason=message,
        occurred_at=now,
        error_code="RenderFailed",
        error_message=message,
        error_kind=ErrorKind.USER,
    )
    record = _first_record(task_id, now, history=(entry,))
    status = {
        "observedGeneration": integer(section(workload, "metadata"), "generation") or 1,
        "phase": Phase.PERMANENT_FAILURE.value,
        "reason": "RenderFailed",
        "message": message,
        "completionTime": rfc3339(now),
        "conditions": _conditions(workload, Phase.PERMANENT_FAILURE, message, now),
        "task": record,
    }
    return _conditional(workload, status)


def worth_an_event(phase: Phase) -> bool:
    """Whether a Workload's new ``phase`` is told as a Kubernetes Event: where a person reads
    one (``kubectl describe``, ``kubectl events``) to learn why a Workload waits, failed or was
    stopped (waiting for resources, a failure, an abort). The way of a Workload that goes well
    (queued, initializing, running, success) is in its status' phase, conditions and history:
    an Event for each step would be a write per Workload and step that nobody reads."""
    return phase.is_failure or phase in (Phase.WAITING_FOR_RESOURCES, Phase.ABORTED)


def phase_event(
    workload: JsonObject, info: PhaseInfo, now: datetime, *, component: str, instance: str
) -> dict[str, Any]:
    """The ``events.k8s.io/v1`` Event that tells ``kubectl describe`` and ``kubectl events`` of
    a Workload's new phase (Warning for a failure, Normal otherwise), named as client-go's
    recorders name theirs: the object's name and a nanosecond clock (``now``). The note is cut
    to the 1024 bytes the API server takes (``ValidateEventCreate`` counts bytes)."""
    metadata = section(workload, "metadata")
    moment = (info.occurred_at or now).astimezone(UTC)
    note = info.reason or info.phase.value
    if info.error is not None and info.error.message and info.error.message not in note:
        note = f"{note}: {info.error.message}"
    suffix = f"{int(now.timestamp() * 1e9):x}"
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{text(metadata, 'name')}.{suffix}",
            "namespace": text(metadata, "namespace"),
        },
        "eventTime": moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": component,
        "reportingInstance": instance,
        "action": "Reconcile",
        "reason": info.phase.value,
        "type": "Warning" if info.phase.is_failure else "Normal",
        "note": note.encode()[:_NOTE_BYTES].decode(errors="ignore"),
        "regarding": {
            "apiVersion": API_VERSION,
            "kind": WORKLOAD_KIND,
            "name": text(metadata, "name"),
            "namespace": text(metadata, "namespace"),
            "uid": text(metadata, "uid"),
        },
    }
