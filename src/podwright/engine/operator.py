"""The operator: each Workload handled on its own, when something it depends on changed.

The operator is the executor of ``podwright executor`` run on another task store: each
Workload's status (:mod:`podwright.engine.workload_tasks`). There is no round over every Workload
that waits for its slowest one. A Workload's key (namespace, name) goes into a de-duplicating,
delaying work queue (:class:`~podwright.engine.work_queue.WorkQueue`, client-go's workqueue)
whenever a watch shows that the Workload, its task's resource or that resource's events changed
(:meth:`WorkloadOperator.changed`), and when its task is due again; worker threads take keys from
the queue, and a key is never handled by two workers at once. Handling one Workload
(:meth:`WorkloadOperator.handle`) does what :func:`~podwright.engine.workload_tasks.next_action`
decides from what the cache holds (level-triggered: the same whichever change woke it):

* a new Workload is held with podwright's finalizer (unless the mutating webhook held it at
  admission), rendered (its spec is its effective spec: the mutating webhook wrote the defaults)
  and its task launched, then recorded with what the launch did, in one write
  (:meth:`~podwright.engine.executor.Executor.launch`); one that cannot be rendered on this
  cluster is recorded PermanentFailure at once, with the renderer's reasons;
* a Workload whose task is finalized, or that was deleted before it had one, is let go (its
  finalizer removed);
* a Workload whose task is active has its task handled by the executor
  (:meth:`~podwright.engine.executor.Executor.handle_task`: launching, following, aborting, a
  deleted Workload's task with its grace period honoured, and finalizing), and its key is put
  back to wait as long as the executor says the task may wait: a slow write delays only its own
  Workload.

The operator's own writes are not changes it is told of (the cache holds what they returned):
after a write, a Workload's next step comes when the executor says it is due, or when something
else changes; a failed write comes back after a backoff that grows with the Workload's
consecutive failures. New Workloads are submitted as they come; what bounds them is the
Kubernetes client's rate limit. Nothing is sent in a steady state: the Workloads, their
resources and their events come from watch caches, and an unchanged task's key waits for the
executor's resync interval.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND
from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.core.lifecycle.phases import PhaseInfo
from podwright.engine.executor import Executor, RoundReport, TaskTurn
from podwright.engine.task_store import (
    JsonData,
    NewTask,
    StaleRevisionError,
    TaskExistsError,
    TaskNotFoundError,
    TaskRecord,
    TaskStore,
    TaskStoreError,
)
from podwright.engine.work_queue import WorkQueue
from podwright.engine.workload_tasks import (
    WorkloadAction,
    WorkloadKey,
    describe_workload,
    new_task,
    next_action,
    task_id_of,
    workload_key,
)

logger = logging.getLogger("podwright.operator")


class RenderRefusedError(Exception):
    """The Workload cannot be rendered on this cluster (the message says why, field by field)."""


Render = Callable[[JsonObject], Sequence[Mapping[str, Any]]]
"""The manifests of an admitted Workload (raises :class:`RenderRefusedError`)."""


class WorkloadStore(TaskStore, Protocol):
    """The task store over Workloads, with what the operator does to the Workloads themselves."""

    def workloads(self) -> list[JsonObject]:
        """Every Workload, as the cache holds it."""

    def workload(self, namespace: str, name: str) -> JsonObject | None:
        """One Workload, as the cache holds it (None: there is none)."""

    def record(self, workload: JsonObject) -> TaskRecord | None:
        """``workload``'s task record (None before its submission; ValueError: unreadable)."""

    def hold(self, workload: JsonObject) -> JsonObject:
        """Add podwright's finalizer (conditional on the version read); the Workload as
        stored."""

    def release(self, workload: JsonObject) -> None:
        """Remove podwright's finalizer (conditional on the version read)."""

    def refuse(self, workload: JsonObject, task_id: str, message: str, now: datetime) -> None:
        """Record the task PermanentFailure and finalized: it cannot run."""

    def submit_launched(
        self, task: NewTask, plugin_state: JsonData, info: PhaseInfo, now: datetime
    ) -> TaskRecord:
        """Record a new task with what its launch did, in one write (conditional on the
        version read)."""


def owning_workload(resource: JsonObject) -> WorkloadKey | None:
    """The Workload that owns a task's resource (its ``ownerReferences``), None for another
    object: whose key a change of the resource, or of its events, queues."""
    metadata = section(resource, "metadata")
    for owner in metadata.get("ownerReferences") or ():
        if (
            isinstance(owner, Mapping)
            and owner.get("apiVersion") == API_VERSION
            and owner.get("kind") == WORKLOAD_KIND
            and owner.get("name")
        ):
            return text(metadata, "namespace"), str(owner["name"])
    return None


@dataclasses.dataclass
class OperatorTally:
    """What the operator's workers did since the tally was last taken."""

    handled: int = 0
    """Workloads handled (a key taken from the queue while this replica leads)."""
    submitted: int = 0
    refused: int = 0
    released: int = 0
    skipped: int = 0
    """Tasks handled without a plugin manager round: nothing they depend on had changed."""
    advanced: int = 0
    errors: int = 0
    finalized_by_phase: Counter[str] = dataclasses.field(default_factory=Counter)
    connection_error: str = ""
    """The last request that got no answer from the API server, if any."""

    def report(self, active_by_phase: Mapping[str, int], seconds: float) -> RoundReport:
        """The tally as the executor's metrics take a round's report."""
        return RoundReport(
            due=self.handled,
            advanced=self.advanced,
            finalized=sum(self.finalized_by_phase.values()),
            errors=self.errors,
            seconds=seconds,
            skipped=self.skipped,
            active_by_phase=active_by_phase,
            finalized_by_phase=dict(self.finalized_by_phase),
            connection_error=self.connection_error,
        )


class WorkloadOperator:
    """Handles the Workloads whose keys its work queue hands out, while ``leads()`` says this
    replica leads (see the module's docstring). :meth:`work` is a worker thread's loop;
    :meth:`drain` handles what is ready in the caller's thread."""

    def __init__(
        self,
        store: WorkloadStore,
        executor: Executor,
        render: Render,
        queue: WorkQueue[WorkloadKey],
        *,
        clock: Callable[[], datetime],
        leads: Callable[[], bool],
    ) -> None:
        self._store = store
        self._executor = executor
        self._render = render
        self.queue = queue
        self._clock = clock
        self._leads = leads
        self._tasks: dict[WorkloadKey, str] = {}
        """The task id of each Workload whose task the executor handled: forgotten with it."""
        self._tally = OperatorTally()
        self._lock = threading.Lock()

    # What the watches and the leader election call ---------------------------------------------

    def changed(self, key: WorkloadKey) -> None:
        """Something ``key``'s Workload depends on changed: handle it soon."""
        self.queue.add(key)

    def enqueue_all(self) -> int:
        """Queue every Workload the cache holds (this replica just took the lead, or its watch
        listed again); how many."""
        keys = [workload_key(workload) for workload in self._store.workloads()]
        for key in keys:
            self.queue.add(key)
        return len(keys)

    # The workers ------------------------------------------------------------------------------

    def work(self, stop: threading.Event, *, poll_seconds: float = 1.0) -> None:
        """A worker's loop: take a key, handle its Workload, until ``stop`` is set or the queue
        is shut down (``poll_seconds``: how often a worker with nothing to do looks at ``stop``)."""
        while not stop.is_set():
            key = self.queue.get(timeout=poll_seconds)
            if key is not None:
                self._handle_taken(key)

    def drain(self) -> int:
        """Handle, in the caller's thread, every key that is ready, until none is (a key that
        becomes ready meanwhile, its Workload written, is handled too); how many."""
        handled = 0
        while (key := self.queue.get(timeout=0)) is not None:
            self._handle_taken(key)
            handled += 1
        return handled

    def take_tally(self) -> OperatorTally:
        """What the workers did since the last call."""
        with self._lock:
            tally, self._tally = self._tally, OperatorTally()
        return tally

    def _handle_taken(self, key: WorkloadKey) -> None:
        try:
            self.handle(key)
        except Exception:  # a defect for one Workload must not stop the worker
            logger.exception("Workload %s/%s: could not be handled", *key)
            self._count(errors=1)
            self.queue.add_rate_limited(key)
        finally:
            self.queue.done(key)

    # One Workload -----------------------------------------------------------------------------

    def handle(self, key: WorkloadKey) -> None:
        """Do what ``key``'s Workload needs now, and queue it again for when its task is due
        (nothing at all while this replica does not lead: it queues every Workload again when it
        takes the lead)."""
        if not self._leads():
            return
        workload = self._store.workload(*key)
        if workload is None:
            self._forget(key)
            return
        try:
            record = self._store.record(workload)
        except ValueError as error:
            logger.error(
                "%s: %s", describe_workload(workload), error
            )  # its next change is read again
            return
        self._count(handled=1)
        action = next_action(workload, record)
        if action is not WorkloadAction.NOTHING:
            self._act_safely(key, action, workload)
            return
        if record is None or record.finalized:
            self._forget(key)  # nothing to follow until it changes
        elif record.task.backend == self._executor.config.backend:
            with self._lock:
                self._tasks[key] = record.task_id
            turn = self._executor.handle_task(record)
            self._count_turn(turn)
            self.queue.add_after(key, turn.due_in.total_seconds())

    def _count_turn(self, turn: TaskTurn) -> None:
        with self._lock:
            tally = self._tally
            tally.skipped += turn.skipped
            tally.advanced += turn.advanced
            tally.errors += turn.error
            if turn.finalized is not None:
                tally.finalized_by_phase[turn.finalized.value] += 1
            if turn.connection_error:
                tally.connection_error = turn.connection_error

    def _act_safely(self, key: WorkloadKey, action: WorkloadAction, workload: JsonObject) -> None:
        """Submit, refuse or release the Workload, and queue it for its next step. A write
        that lost a race is decided again on the Workload's next version (its change is on the
        way), a failed one after a backoff that grows with the Workload's consecutive
        failures."""
        try:
            self._act(key, action, workload)
        except (StaleRevisionError, TaskExistsError, TaskNotFoundError):
            return
        except TaskStoreError as error:
            logger.warning("%s: %s", describe_workload(workload), error)
            self._count(errors=1)
            self.queue.add_rate_limited(key)
            return
        self.queue.forget(key)

    def _act(self, key: WorkloadKey, action: WorkloadAction, workload: JsonObject) -> None:
        if action is WorkloadAction.RELEASE:
            self._store.release(workload)
            logger.info("%s: released", describe_workload(workload))
            self._count(released=1)
            return
        held = self._store.hold(workload)
        now = self._clock()
        try:
            manifests = self._render(held)
        except RenderRefusedError as error:
            self._store.refuse(held, task_id_of(held), str(error), now)
            logger.info("%s: cannot be rendered: %s", describe_workload(held), error)
            self._count(refused=1)
            self.queue.add(key)  # to be let go
            return
        task = new_task(held, manifests, now)
        with self._lock:
            self._tasks[key] = task.task_id

        def record(plugin_state: JsonData, info: PhaseInfo, at: datetime) -> TaskRecord:
            return self._store.submit_launched(task, plugin_state, info, at)

        turn = self._executor.launch(task, record)
        logger.info("%s: task %s submitted", describe_workload(held), task.task_id)
        self._count(submitted=1)
        self._count_turn(turn)
        self.queue.add_after(key, turn.due_in.total_seconds())

    def _forget(self, key: WorkloadKey) -> None:
        with self._lock:
            task_id = self._tasks.pop(key, None)
        if task_id is not None:
            self._executor.forget_task(task_id)
        self.queue.forget(key)

    def _count(self, **counts: int) -> None:
        with self._lock:
            for name, count in counts.items():
                setattr(self._tally, name, getattr(self._tally, name) + count)
