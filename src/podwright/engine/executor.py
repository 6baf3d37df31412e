"""The executor: one reconcile loop over every active task in the task store.

A round takes the active tasks of the executor's backend that are due, and handles each (at most
``concurrency`` at once):

* an abort was requested and the task is not terminal: the plugin manager aborts the resource
  (its override, else a delete), and the task keeps its phase, its reason saying what the abort
  waits for, until the plugin manager sees the resource has really stopped (or its grace period
  and a margin are over); then the task is written as Aborted;
* the task is terminal and not finalized: the plugin manager finalizes it (removes podwright's
  finalizer, deletes the resource when configured), then the task leaves the active set;
* otherwise one plugin manager round, whose outcome (plugin state, phase, attached events) is
  written to the store, conditional on the task's revision, before anything else is done for the
  task. A crash between a create and its write is harmless: the next round's create finds the
  object already there, carrying the task's id, and carries on with it.

A task's other manifests (a workspace's PersistentVolumeClaim and Service) are its *companions*,
made the task's own (``core.lifecycle.companions``): what its pods need (claims) is created before
the resource and outlives the task; what depends on it (Services, named and selecting per task) is
created once it exists, owned by it, so Kubernetes' garbage collector removes it with it. A
terminal task whose resource carries the renderer's ``ttl-seconds-after-finished`` annotation is
finalized, and its resource deleted, that long after it ended. A task whose resource provably
never existed (never started; every create refused or never sent) is aborted and finalized without
a request, so an unreachable API server leaves no task unfinished.

A task's next round is due after the round interval, after the plugin manager's ``retry_after``
when it asks for more, or after a per-task backoff that grows with consecutive errors (the store
or the API unavailable); a write that lost a race (:class:`StaleRevisionError`) is retried at
once on a fresh read in the next round. A round's report says when the API server could not be
reached. The wall clock and sleeping are the caller's: it passes ``clock`` and ``sleep`` (and
``run`` waits on its stop event).

Rounds are change-driven, and still level-triggered. Most tasks, most rounds, follow a resource
that did not change, and handling one anyway (a worker, a plugin manager round) is most of what
an operator over thousands of tasks spends. So a due task on the plugin manager's path (not
terminal, no abort requested) is skipped, in the round's own thread and without a worker, when
all of these hold:

* its last handle changed nothing: no state or phase written, no error, no ``retry_after``;
* its *fingerprint* is the one that handle saw: the record's revision (every store write raises
  it), the ``metadata.resourceVersion`` of its resource in the port's watch cache, the version
  of its resource's events in the event index (``EventIndex.version``), and its pods as the
  port's watch cache holds them when its plugin reads them (``Plugin.follows_pods``);
* its resource is in the watch cache (a task whose resource is not is handled: the plugin manager
  then reads it from the API server), with a resourceVersion;
* less than ``resync_interval`` has passed since that handle: the plugin's decisions depend on the
  time too (an image pull backing off fails the task once its grace period is over), so an
  unchanged task is still handled at least that often.

The fingerprint is taken before the handle it is recorded for, so a change that lands while the
task is handled shows in the next round's fingerprint: it is never mistaken for one the handle saw.
A skipped task is due again after the round interval, like one handled without change.

A new reason within the task's phase that brings nothing else (no error, no event to attach, no
other plugin state) is written only once it has lasted ``reason_settle``: a reason that passes in
less (queued: created, then waiting for the scheduler; a Job that met its success criteria, then
complete) costs no write of its own, and one that lasts is shown.

Rounds are the local executor's way. The operator hands the executor one task at a time instead
(:meth:`Executor.handle_task`, the same rules, with when the task is due again), and launches a
new task before it is in the store, recording it with what the launch did in one write
(:meth:`Executor.launch`).
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from podwright.core.lifecycle.companions import task_companions, task_label_value
from podwright.core.lifecycle.names import task_object_name
from podwright.core.lifecycle.objects import section, text
from podwright.core.lifecycle.phases import Phase, PhaseInfo
from podwright.core.lifecycle.plugin_state import (
    CorruptedPluginStateError,
    ManagerPhase,
    PluginState,
    decode_state,
    encode_state,
)
from podwright.engine.backoff import QuotaBackoff, exponential_delay
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex, EventKey
from podwright.engine.kubernetes_port import (
    ApiConnectionError,
    KubernetesError,
    KubernetesPort,
    ObjectRef,
)
from podwright.engine.plugin import Plugin, PluginError, TaskContext
from podwright.engine.plugin_manager import PluginManager, Transition
from podwright.engine.plugins import default_plugins, plugin_for
from podwright.engine.task_store import (
    JsonData,
    NewTask,
    StaleRevisionError,
    StoreUnavailableError,
    TaskRecord,
    TaskStore,
    TaskStoreError,
    is_new_phase,
    unsubmitted_record,
)

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


@dataclasses.dataclass(frozen=True)
class ExecutorConfig:
    """Which tasks this executor serves, and how it paces them."""

    backend: str
    concurrency: int = 16
    round_interval: timedelta = timedelta(seconds=1)
    error_backoff_base: timedelta = timedelta(seconds=1)
    error_backoff_max: timedelta = timedelta(minutes=1)
    events_settle: timedelta = timedelta(seconds=1)
    """How long after a task ended its events are still attached before it is finalized: the
    event watch lags behind the object's, and the last events (Completed, a late Scheduled of a
    quick pod) would be lost."""
    reason_settle: timedelta = timedelta(seconds=1)
    """How long a new reason within the same phase (and nothing else new: no error, no event to
    attach, no other state) must last, from the handle that first saw it, before it is written:
    a reason that lasts less (queued: created, then waiting for the scheduler, then
    initializing) costs no write of its own, one that lasts is written then."""
    resync_interval: timedelta = timedelta(seconds=10)
    """How long a task whose fingerprint has not changed since a handle that changed nothing is
    skipped at most: the plugin's phase decisions depend on the time too (an image pull backing
    off fails the task once its grace period of 3 minutes is over), so such a task is still
    handled at least this often."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.round_interval <= timedelta(0):
            raise ValueError(f"round_interval must be positive, got {self.round_interval}")
        if self.resync_interval <= timedelta(0):
            raise ValueError(f"resync_interval must be positive, got {self.resync_interval}")
        if self.reason_settle < timedelta(0):
            raise ValueError(f"reason_settle must not be negative, got {self.reason_settle}")


@dataclasses.dataclass(frozen=True)
class RoundReport:
    """What one round did."""

    due: int
    advanced: int
    finalized: int
    errors: int
    seconds: float
    skipped: int = 0
    """Of the due tasks, those not handled: nothing they depend on changed since a handle that
    changed nothing, less than ``resync_interval`` ago."""
    active_by_phase: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """The executor's active tasks by phase, as the round found them."""
    finalized_by_phase: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """The tasks this round finalized, by their terminal phase."""
    store_read: bool = True
    """False when the round could not list the store's tasks (and so did nothing)."""
    connection_error: str = ""
    """The last request of the round that got no answer from the API server ("cannot reach the
    Kubernetes API server https://10.0.0.1:6443: connection refused"), if any: the server is
    unreachable, or was for a moment. (A cluster port's watches report their own.)"""


@dataclasses.dataclass(frozen=True)
class TaskTurn:
    """What handling one task on its own did (:meth:`Executor.handle_task`, the operator's work
    queue), and when the task is due again."""

    due_in: timedelta
    """When to handle the task again if nothing it depends on changes meanwhile: at once after a
    write whose next step is due now, the plugin's ``retry_after``, an error's backoff, or, once a
    handle changed nothing and the task's resource is in the watch cache, the rest of the resync
    interval (a change to its record, resource or events is told by the watches instead)."""
    skipped: bool = False
    """Nothing the task depends on changed since a handle that changed nothing."""
    advanced: bool = False
    finalized: Phase | None = None
    error: bool = False
    connection_error: str = ""


RecordLaunch = Callable[[JsonData, PhaseInfo, datetime], object]
"""Writes a new task's first record with what its launch did: its plugin state and phase."""


def only_a_new_reason(record: TaskRecord, transition: Transition) -> bool:
    """Whether ``transition`` brings nothing new to ``record`` but another reason (or its
    version) within the same phase: no error, no event to attach, and no other plugin state."""
    info = transition.info
    if info.phase is not record.phase or info.error is not None or info.additional_reasons:
        return False
    try:
        before = decode_state(record.plugin_state)
    except CorruptedPluginStateError:
        return False
    after = transition.state
    return (
        dataclasses.replace(before, phase_version=after.phase_version, reason=after.reason) == after
    )


class RoundObserver(Protocol):
    """Told about every round (the metrics adapter counts them)."""

    def round_finished(self, report: RoundReport) -> None: ...


@dataclasses.dataclass
class _Outcome:
    advanced: bool = False
    finalized: Phase | None = None
    error: bool = False
    delay: timedelta | None = None
    connection_error: str = ""
    unchanged: bool = False
    """A plugin manager round that wrote nothing, met no error and asked for no earlier round."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Fingerprint:
    """What a task's handle reads besides the clock: its record, its resource in the watch cache,
    its resource's events, and its pods in the watch cache when its plugin reads them."""

    revision: int
    resource_version: str
    events_version: int
    pods: tuple[str, ...] = ()
    """The task's pods as the watch cache holds them (canonical JSON): what the plugin reads of
    them, which a pod's change that the cache's trim drops leaves the same."""


@dataclasses.dataclass(frozen=True, slots=True)
class _UnchangedHandle:
    """A handle that changed nothing: the fingerprint taken before it, and when it ran."""

    fingerprint: _Fingerprint
    at: datetime


class Executor:
    """Reconciles the store's active tasks of ``config.backend`` through the plugin managers.

    Its worker threads live as long as it does: :meth:`close` (or leaving a ``with`` block)
    stops them, after the round in progress. ``may_act`` (the operator's leadership) is asked
    before each task is handled: once it says no, the round touches no further task.
    """

    def __init__(
        self,
        store: TaskStore,
        kubernetes: KubernetesPort,
        config: ExecutorConfig,
        lifecycle: LifecycleConfig,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], None],
        plugins: Mapping[tuple[str, str], Plugin] | None = None,
        events: EventIndex | None = None,
        rng: random.Random | None = None,
        observer: RoundObserver | None = None,
        may_act: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self._kubernetes = kubernetes
        self._lifecycle = lifecycle
        self._clock = clock
        self._sleep = sleep
        self._plugins = plugins if plugins is not None else default_plugins()
        self._events = events
        self._rng = rng or random.Random()
        self._quota_backoff = QuotaBackoff(
            base=lifecycle.quota_backoff_base, cap=lifecycle.quota_backoff_max
        )
        self._managers: dict[tuple[str, str], PluginManager] = {}
        self._due: dict[str, datetime] = {}
        self._errors: dict[str, int] = {}
        self._refs: dict[str, ObjectRef] = {}
        self._unchanged: dict[str, _UnchangedHandle] = {}
        self._new_reasons: dict[str, tuple[str, datetime]] = {}
        """Per task, a new reason not written yet, and when a handle first saw it."""
        self._observer = observer
        self._may_act = may_act
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(config.concurrency, thread_name_prefix="reconcile")

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker threads (a round in progress finishes first)."""
        self._pool.shutdown(wait=True)

    def run(self, stop: threading.Event, *, until_idle: bool = False) -> None:
        """Run rounds until ``stop`` is set (or, ``until_idle``, until a round finds no active
        task of the backend); between rounds wait until the next task is due."""
        while not stop.is_set():
            report = self.run_round()
            if until_idle and not report.active_by_phase and report.errors == 0:
                return
            stop.wait(self.seconds_until_due())

    def run_round(self) -> RoundReport:
        """One round over the due active tasks."""
        started = time.monotonic()
        now = self._clock()
        try:
            active = self.store.list_tasks(active_only=True)
        except TaskStoreError:
            seconds = time.monotonic() - started
            return self._report(RoundReport(0, 0, 0, 1, seconds, store_read=False))
        mine = [record for record in active if record.task.backend == self.config.backend]
        due = [record for record in mine if self._due.get(record.task_id, now) <= now]
        handled: list[TaskRecord] = []
        fingerprints: list[_Fingerprint | None] = []
        skipped: list[str] = []
        for record in due:
            fingerprint = self._fingerprint(record)
            if self._may_skip(record.task_id, fingerprint, now):
                skipped.append(record.task_id)
            else:
                handled.append(record)
                fingerprints.append(fingerprint)
        with self._lock:
            for task_id in skipped:
                self._due[task_id] = now + self.config.round_interval
        outcomes = list(
            self._pool.map(
                lambda record, fingerprint: self._reconcile(record, fingerprint, now),
                handled,
                fingerprints,
            )
        )
        known = {record.task_id for record in mine}
        with self._lock:
            gone = set(self._due).union(self._refs) - known
        for task_id in gone:
            self.forget_task(task_id)
        finalized = [outcome.finalized for outcome in outcomes if outcome.finalized is not None]
        unanswered = [outcome.connection_error for outcome in outcomes if outcome.connection_error]
        return self._report(
            RoundReport(
                due=len(due),
                advanced=sum(outcome.advanced for outcome in outcomes),
                finalized=len(finalized),
                errors=sum(outcome.error for outcome in outcomes),
                seconds=time.monotonic() - started,
                skipped=len(skipped),
                active_by_phase=Counter(record.phase.value for record in mine),
                finalized_by_phase=Counter(phase.value for phase in finalized),
                connection_error=unanswered[-1] if unanswered else "",
            )
        )

    def handle_task(self, record: TaskRecord) -> TaskTurn:
        """Handle one of the executor's active tasks now, outside a round, as a round would
        (skipped when nothing it depends on changed since a handle that changed nothing): what
        the operator's workers do for the Workload the work queue hands them. Tasks of one id
        must not be handled by two threads at once (the queue never hands a key out twice)."""
        now = self._clock()
        fingerprint = self._fingerprint(record)
        if self._may_skip(record.task_id, fingerprint, now):
            with self._lock:
                last = self._unchanged[record.task_id]
            return TaskTurn(due_in=last.at + self.config.resync_interval - now, skipped=True)
        outcome = self._reconcile(record, fingerprint, now)
        if outcome.delay is not None:
            due_in = outcome.delay
        elif outcome.unchanged and fingerprint is not None:
            due_in = self.config.resync_interval
        else:
            due_in = self.config.round_interval
        return TaskTurn(
            due_in=due_in,
            advanced=outcome.advanced,
            finalized=outcome.finalized,
            error=outcome.error,
            connection_error=outcome.connection_error,
        )

    def forget_task(self, task_id: str) -> None:
        """Drop what the executor remembers of a task that is no longer active (its Workload
        let go or gone; a task a round no longer lists)."""
        with self._lock:
            self._due.pop(task_id, None)
            self._errors.pop(task_id, None)
            self._refs.pop(task_id, None)
            self._unchanged.pop(task_id, None)
            self._new_reasons.pop(task_id, None)

    def _report(self, report: RoundReport) -> RoundReport:
        if self._observer is not None:
            self._observer.round_finished(report)
        return report

    def in_parallel(
        self, work: Callable[[_Item], _Result], items: Sequence[_Item]
    ) -> list[_Result]:
        """``work`` done for each of ``items`` on the executor's workers (at most
        ``concurrency`` at once), the results in the items' order: the operator's writes to
        Workloads between two rounds."""
        return list(self._pool.map(work, items))

    def seconds_until_due(self) -> float:
        """How long until the next task is due; at most the round interval, so that tasks
        submitted meanwhile wait no longer than that."""
        now = self._clock()
        with self._lock:
            upcoming = [due for due in self._due.values() if due > now]
        interval = self.config.round_interval.total_seconds()
        if not upcoming:
            return interval
        return min(interval, max(0.0, (min(upcoming) - now).total_seconds()))

    def _fingerprint(self, record: TaskRecord) -> _Fingerprint | None:
        """The task's fingerprint; None when it cannot be skipped whatever its last handle: it
        goes another way than the plugin manager's round (terminal, or an abort requested), or its
        resource is not in the watch cache, or the resource is not one a plugin launches (the
        handle reports that)."""
        if record.phase.is_terminal or record.abort_requested:
            return None
        try:
            ref = self.resource_ref(record)
        except PluginError:
            return None
        cached = self._kubernetes.cached(ref)
        resource_version = text(section(cached, "metadata"), "resourceVersion") if cached else ""
        if not resource_version:
            return None
        key = EventKey(ref.namespace, ref.kind, ref.name)
        events_version = 0 if self._events is None else self._events.version(key)
        plugin = self._plugins.get((ref.api_version, ref.kind))
        pods = (
            [] if plugin is None else self._manager(plugin).pods_of(ref.namespace, record.task_id)
        )
        seen = tuple(sorted(json.dumps(pod, sort_keys=True) for pod in pods))
        return _Fingerprint(record.revision, resource_version, events_version, seen)

    def _may_skip(self, task_id: str, fingerprint: _Fingerprint | None, now: datetime) -> bool:
        """Whether the task's last handle changed nothing, saw ``fingerprint``, and ran less than
        the resync interval before ``now``."""
        with self._lock:
            last = self._unchanged.get(task_id)
        return (
            fingerprint is not None
            and last is not None
            and last.fingerprint == fingerprint
            and timedelta(0) <= now - last.at < self.config.resync_interval
        )

    def _reconcile(
        self, record: TaskRecord, fingerprint: _Fingerprint | None, now: datetime
    ) -> _Outcome:
        if self._may_act is not None and not self._may_act():
            return _Outcome(delay=timedelta(0))  # no longer the leader: touch nothing
        try:
            outcome = self._step(record, now)
        except StaleRevisionError:
            outcome = _Outcome(delay=timedelta(0))
        except (TaskStoreError, KubernetesError, PluginError) as exc:
            outcome = _Outcome(error=True)
            if isinstance(exc, ApiConnectionError):
                outcome.connection_error = exc.message
            with self._lock:
                failures = self._errors.get(record.task_id, 0)
                self._errors[record.task_id] = failures + 1
            outcome.delay = exponential_delay(
                failures, self.config.error_backoff_base, self.config.error_backoff_max
            )
        else:
            with self._lock:
                self._errors.pop(record.task_id, None)
        with self._lock:
            delay = self.config.round_interval if outcome.delay is None else outcome.delay
            self._due[record.task_id] = now + delay
            if outcome.unchanged and fingerprint is not None:
                self._unchanged[record.task_id] = _UnchangedHandle(fingerprint, now)
            else:
                self._unchanged.pop(record.task_id, None)
        return outcome

    def _step(self, record: TaskRecord, now: datetime) -> _Outcome:
        task, manager = self._task(record)
        if record.phase.is_terminal:
            return self._finalize(record, task, manager, now)
        if record.abort_requested:
            return self._abort(record, task, manager, now)
        transition = manager.handle(task, record.plugin_state, now)
        changed = transition.state_changed or is_new_phase(record, transition.info)
        if changed and only_a_new_reason(record, transition):
            settled_at = self._reason_seen_at(record.task_id, transition.info.reason, now)
            settled_at += self.config.reason_settle
            if now < settled_at:
                return _Outcome(delay=settled_at - now)  # written then, unless overtaken
        with self._lock:
            self._new_reasons.pop(record.task_id, None)
        if changed:
            self.store.advance(
                record.task_id, record.revision, transition.encoded_state(), transition.info, now
            )
        return self._handled(task, manager, transition, changed=changed)

    def _reason_seen_at(self, task_id: str, reason: str, now: datetime) -> datetime:
        """When a handle first saw the task's new ``reason`` (``now`` when this one is first)."""
        with self._lock:
            seen = self._new_reasons.get(task_id)
            if seen is None or seen[0] != reason:
                seen = self._new_reasons[task_id] = (reason, now)
            return seen[1]

    def launch(self, task: NewTask, record: RecordLaunch) -> TaskTurn:
        """Launch a task that is not in the store yet, then have ``record`` write it with what
        the launch did (its plugin state and phase) in one write: the operator's submission,
        which saves the write that would record the task before its launch. A launch whose
        record is not written (the store refused it, or the process died) is harmless: the next
        launch of the task finds its resource (AlreadyExists, carrying the task's id) and carries
        on with it. Errors of the store (:class:`TaskStoreError`) are the caller's."""
        if self._may_act is not None and not self._may_act():
            raise StoreUnavailableError(f"task {task.task_id}: this replica may not act now")
        now = self._clock()
        unsubmitted = unsubmitted_record(task)
        context, manager = self._task(unsubmitted)
        transition = manager.handle(context, unsubmitted.plugin_state, now)
        record(transition.encoded_state(), transition.info, now)
        outcome = self._handled(context, manager, transition, changed=True)
        return TaskTurn(
            due_in=self.config.round_interval if outcome.delay is None else outcome.delay,
            advanced=True,
            connection_error=outcome.connection_error,
        )

    def _handled(
        self, task: TaskContext, manager: PluginManager, transition: Transition, *, changed: bool
    ) -> _Outcome:
        """What a plugin manager round came to, once written: a failure whose resource is to
        be cleaned up at once is aborted, and when the task is due again."""
        delay = None
        if transition.info.phase.is_terminal:
            if transition.info.cleanup_on_failure and not transition.state.never_created:
                manager.abort(task)
            delay = timedelta(0)  # finalize in the next round, after the write
        elif transition.retry_after is not None:
            delay = max(transition.retry_after, self.config.round_interval)
        error = transition.api_error
        unanswered = error.message if isinstance(error, ApiConnectionError) else ""
        unchanged = not changed and delay is None and error is None
        return _Outcome(
            advanced=changed, delay=delay, connection_error=unanswered, unchanged=unchanged
        )

    def _abort(
        self, record: TaskRecord, task: TaskContext, manager: PluginManager, now: datetime
    ) -> _Outcome:
        """Stop the task's resource, and record the task Aborted once it has stopped."""
        state = _state(record)
        if state.never_created:
            reason = "aborted on request; its resource was never created"
            return self._write_abort(record, state, PhaseInfo(Phase.ABORTED, reason=reason), now)
        since = state.aborting_since
        if since is None:
            manager.abort(task)
            since = now
        progress = manager.abort_progress(task, since, now)
        state = dataclasses.replace(state, aborting_since=since)
        phase = Phase.ABORTED if progress.stopped else record.phase
        outcome = self._write_abort(record, state, PhaseInfo(phase, reason=progress.reason), now)
        if progress.error is not None:
            raise progress.error  # written first: the wait's bound counts from the delete
        return outcome

    def _write_abort(
        self, record: TaskRecord, state: PluginState, info: PhaseInfo, now: datetime
    ) -> _Outcome:
        """Write an abort's progress: Aborted, or the phase the task had with the reason it
        waits for, versioned as a new report when either changed."""
        changed = (info.phase, info.reason) != (record.phase, record.reason)
        version = record.phase_version + 1 if changed else record.phase_version
        info = dataclasses.replace(info, version=version, occurred_at=now)
        new_state = dataclasses.replace(
            state, phase=info.phase, phase_version=version, reason=info.reason
        )
        if changed or encode_state(new_state) != record.plugin_state:
            self.store.advance(record.task_id, record.revision, encode_state(new_state), info, now)
        if info.phase is Phase.ABORTED:
            return _Outcome(advanced=True, delay=timedelta(0))  # finalize in the next round
        return _Outcome(advanced=changed)

    def _finalize(
        self, record: TaskRecord, task: TaskContext, manager: PluginManager, now: datetime
    ) -> _Outcome:
        state = _state(record)
        if state.never_created:
            # Nothing was ever created: nothing to clean up, and no request to make.
            self.store.mark_finalized(record.task_id, record.revision, now)
            return _Outcome(finalized=record.phase)
        late = manager.late_events(task, state, now)
        if late is not None:
            self.store.advance(
                record.task_id, record.revision, late.encoded_state(), late.info, now
            )
            return _Outcome(advanced=True, delay=self.config.events_settle)
        settled_at = record.updated_at + self.config.events_settle
        if now < settled_at:
            return _Outcome(delay=settled_at - now)
        ttl = _ttl_after_finished(task.resource, self._lifecycle.label_domain)
        if ttl is not None:
            ends_at = record.updated_at + ttl
            if now < ends_at:
                return _Outcome(delay=ends_at - now)
        manager.finalize(task)
        if ttl is not None:
            manager.delete(task)
        self.store.mark_finalized(record.task_id, record.revision, now)
        return _Outcome(finalized=record.phase)

    def resource_ref(self, record: TaskRecord) -> ObjectRef:
        """The object the task's resource is created as; remembered while the task is active
        (its manifests never change, and working it out builds the task's context)."""
        ref = self._refs.get(record.task_id)
        if ref is None:
            ref = resource_ref(record, self._plugins, self._lifecycle)
            self._refs[record.task_id] = ref
        return ref

    def _task(self, record: TaskRecord) -> tuple[TaskContext, PluginManager]:
        plugin = plugin_for(workload_resource(record, self._plugins), self._plugins)
        return task_context(record, self._plugins, self._lifecycle), self._manager(plugin)

    def _manager(self, plugin: Plugin) -> PluginManager:
        """The plugin manager of ``plugin``'s kind (made on first use)."""
        key = (plugin.api_version, plugin.kind)
        with self._lock:
            manager = self._managers.get(key)
            if manager is None:
                manager = PluginManager(
                    plugin,
                    self._kubernetes,
                    self._lifecycle,
                    events=self._events,
                    quota_backoff=self._quota_backoff,
                    sleep=self._sleep,
                    rng=self._rng,
                )
                self._managers[key] = manager
            return manager


def workload_resource(
    record: TaskRecord, plugins: Mapping[tuple[str, str], Plugin]
) -> Mapping[str, Any]:
    """The task's manifest that a plugin launches (its other manifests go with it)."""
    for manifest in record.task.manifests:
        if (str(manifest.get("apiVersion")), str(manifest.get("kind"))) in plugins:
            return manifest
    raise PluginError(f"task {record.task_id!r} has no resource any plugin launches")


def companion_manifests(
    record: TaskRecord, plugins: Mapping[tuple[str, str], Plugin]
) -> list[Mapping[str, Any]]:
    """The task's manifests other than the one its plugin launches."""
    resource = workload_resource(record, plugins)
    return [manifest for manifest in record.task.manifests if manifest is not resource]


def _ttl_after_finished(resource: Mapping[str, Any], label_domain: str) -> timedelta | None:
    """The renderer's ``ttl-seconds-after-finished`` annotation, if the resource carries one.

    Only a bare Pod (a workspace) carries it: Jobs and Kubeflow jobs have the field in their spec,
    and their controllers honour it."""
    annotations = section(section(resource, "metadata"), "annotations")
    value = annotations.get(f"{label_domain}/ttl-seconds-after-finished")
    try:
        seconds = int(str(value))
    except ValueError:
        return None
    return timedelta(seconds=max(0, seconds))


def stop_grace(record: TaskRecord, plugins: Mapping[tuple[str, str], Plugin]) -> timedelta:
    """How long the task's pods may take to stop once its resource is deleted."""
    resource = workload_resource(record, plugins)
    return plugin_for(resource, plugins).stop_grace(resource)


def resource_ref(
    record: TaskRecord, plugins: Mapping[tuple[str, str], Plugin], lifecycle: LifecycleConfig
) -> ObjectRef:
    """The object a task's resource is created as (whether or not it exists now)."""
    plugin = plugin_for(workload_resource(record, plugins), plugins)
    return plugin.build_identity(
        task_context(record, plugins, lifecycle), _object_name(record, plugin)
    )


def task_context(
    record: TaskRecord, plugins: Mapping[tuple[str, str], Plugin], lifecycle: LifecycleConfig
) -> TaskContext:
    """The task as the plugin manager launches it: its resource, its labels, and its companions
    made its own (``core.lifecycle.companions``)."""
    resource = workload_resource(record, plugins)
    labels = {lifecycle.task_id_label: task_label_value(record.task_id)}
    companions = task_companions(
        companion_manifests(record, plugins),
        object_name=_object_name(record, plugin_for(resource, plugins)),
        workload_name=record.task.name,
        namespace=record.task.namespace,
        labels=labels,
    )
    return TaskContext(
        record.task_id,
        record.task.namespace,
        resource,
        labels=labels,
        owner=record.task.owner,
        needs=companions.needed,
        dependents=companions.dependent,
    )


def _object_name(record: TaskRecord, plugin: Plugin) -> str:
    return task_object_name(record.task_id, plugin.properties.generated_name_max_length)


def _state(record: TaskRecord) -> PluginState:
    """The task's plugin state; one that cannot be read counts as a started task's (its
    resource may exist), in the phase the record shows."""
    try:
        return decode_state(record.plugin_state)
    except CorruptedPluginStateError:
        return PluginState(
            ManagerPhase.STARTED,
            record.phase,
            record.phase_version,
            record.reason,
            maybe_created=True,
        )
