"""The operator's loop: Workloads in, the lifecycle engine's rounds over their tasks.

The operator is the executor of ``podwright executor`` run on another task store: each
Workload's status (:mod:`podwright.engine.workload_tasks`). A round, taken only while this
replica leads, does for every Workload what :func:`~podwright.engine.workload_tasks.next_action`
decides from what the cache holds (level-triggered: the same whichever change woke it):

* a new Workload is held with podwright's finalizer, rendered (its spec is its effective spec:
  the mutating webhook wrote the defaults at admission) and its task recorded; one that cannot be
  rendered on this cluster is recorded PermanentFailure at once, with the renderer's reasons;
* a Workload whose task is finalized, or that was deleted before it had one, is let go (its
  finalizer removed);

then runs one executor round over the tasks that are due: launching, following, aborting (a
deleted Workload's task is aborted, its grace period honoured) and finalizing. Nothing in a
steady round sends a request: the Workloads, their resources and their events come from watch
caches.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.engine.executor import Executor, RoundReport
from podwright.engine.task_store import (
    StaleRevisionError,
    TaskExistsError,
    TaskNotFoundError,
    TaskRecord,
    TaskStore,
    TaskStoreError,
)
from podwright.engine.workload_tasks import (
    WorkloadAction,
    new_task,
    next_action,
    task_id_of,
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

    def record(self, workload: JsonObject) -> TaskRecord | None:
        """``workload``'s task record (None before its submission; ValueError: unreadable)."""

    def hold(self, workload: JsonObject) -> JsonObject:
        """Add podwright's finalizer (conditional on the version read); the Workload as
        stored."""

    def release(self, workload: JsonObject) -> None:
        """Remove podwright's finalizer (conditional on the version read)."""

    def refuse(self, workload: JsonObject, task_id: str, message: str, now: datetime) -> None:
        """Record the task PermanentFailure and finalized: it cannot run."""


@dataclasses.dataclass(frozen=True)
class OperatorRound:
    """What one operator round did."""

    submitted: int
    refused: int
    released: int
    errors: int
    tasks: RoundReport
    seconds: float


class WorkloadOperator:
    """Submits new Workloads, lets finished ones go, and runs the executor's rounds, while
    ``leads()`` says this replica leads."""

    def __init__(
        self,
        store: WorkloadStore,
        executor: Executor,
        render: Render,
        *,
        clock: Callable[[], datetime],
        leads: Callable[[], bool],
        submissions_per_round: int = 256,
    ) -> None:
        """``submissions_per_round``: the most new Workloads a round submits, so that a burst
        of thousands is taken in turns with the rounds of the tasks already running (the rest
        wait for the next round, a moment later)."""
        if submissions_per_round < 1:
            raise ValueError(
                f"submissions_per_round: must be at least 1, got {submissions_per_round}"
            )
        self._store = store
        self._executor = executor
        self._render = render
        self._clock = clock
        self._leads = leads
        self._submissions_per_round = submissions_per_round

    def run_round(self) -> OperatorRound | None:
        """One round (None: this replica does not lead, and did nothing)."""
        if not self._leads():
            return None
        started = time.monotonic()
        chosen: list[tuple[WorkloadAction, JsonObject]] = []
        submissions = 0
        for workload in self._store.workloads():
            try:
                record = self._store.record(workload)
            except ValueError as error:
                logger.error("%s: %s", _describe(workload), error)
                continue
            action = next_action(workload, record)
            if action is WorkloadAction.NOTHING:
                continue
            if action is WorkloadAction.SUBMIT:
                if submissions >= self._submissions_per_round:
                    continue  # its turn comes next round
                submissions += 1
            chosen.append((action, workload))
        if not self._leads():
            return None
        # Each Workload's writes (its finalizer, then its record) wait for the API server: the
        # executor's workers make them for many Workloads at once.
        outcomes = self._executor.in_parallel(self._act_safely, chosen)
        if not self._leads():
            return None  # lost meanwhile: the Workloads not yet reached were left alone
        counts = Counter({"submitted": 0, "refused": 0, "released": 0, "errors": 0})
        counts.update(outcome for outcome in outcomes if outcome)
        tasks = self._executor.run_round()
        return OperatorRound(tasks=tasks, seconds=time.monotonic() - started, **counts)

    def _act_safely(self, chosen: tuple[WorkloadAction, JsonObject]) -> str:
        """What :meth:`_act` did ("submitted", "refused", "released", "errors"; "" when the
        Workload changed meanwhile: the next round decides on a fresh read)."""
        action, workload = chosen
        if not self._leads():
            return ""
        try:
            return self._act(action, workload)
        except (StaleRevisionError, TaskExistsError, TaskNotFoundError):
            return ""
        except TaskStoreError as error:
            logger.warning("%s: %s", _describe(workload), error)
            return "errors"
        except Exception:  # a defect for one Workload must not stop the others' rounds
            logger.exception("%s: could not be handled", _describe(workload))
            return "errors"

    def _act(self, action: WorkloadAction, workload: JsonObject) -> str:
        if action is WorkloadAction.RELEASE:
            self._store.release(workload)
            logger.info("%s: released", _describe(workload))
            return "released"
        held = self._store.hold(workload)
        now = self._clock()
        try:
            manifests = self._render(held)
        except RenderRefusedError as error:
            self._store.refuse(held, task_id_of(held), str(error), now)
            logger.info("%s: cannot be rendered: %s", _describe(held), error)
            return "refused"
        task = new_task(held, manifests, now)
        self._store.submit(task)
        logger.info("%s: task %s submitted", _describe(held), task.task_id)
        return "submitted"


def _describe(workload: JsonObject) -> str:
    metadata = section(workload, "metadata")
    return f"Workload {text(metadata, 'namespace')}/{text(metadata, 'name')}"
