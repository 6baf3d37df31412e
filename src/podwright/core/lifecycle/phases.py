"""Task phases and the phase info a plugin reports each round.

The vocabulary is Flyte's (the engine's users know it from there): a task is Queued, Initializing,
Running, and ends in Success, a failure, or Aborted. Failures say who is to blame and what the
engine may do next: a *retryable* failure is the user's (a crash, an OOM kill) and may be retried
under the task's retry budget; a *system retryable* failure is the platform's (a node went away, the
object was deleted behind our back) and is retried without charging the user; a *permanent* failure
must not be retried (a bad image name, a spec the API server refuses).

Progress does not go back without a cause: Kubernetes status flaps (a Job between two pods has
none active; a Knative Service rolling out a revision is not Ready for a moment), and a task that
ran is still running then. :func:`hold_progress` keeps the phase a task reached unless the plugin
names a cause for going back (``PhaseInfo.setback``: a suspension, a preemption).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class Phase(enum.StrEnum):
    UNDEFINED = "Undefined"
    NOT_READY = "NotReady"
    WAITING_FOR_RESOURCES = "WaitingForResources"
    QUEUED = "Queued"
    INITIALIZING = "Initializing"
    RUNNING = "Running"
    SUCCESS = "Success"
    RETRYABLE_FAILURE = "RetryableFailure"
    SYSTEM_RETRYABLE_FAILURE = "SystemRetryableFailure"
    PERMANENT_FAILURE = "PermanentFailure"
    ABORTED = "Aborted"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def is_failure(self) -> bool:
        return self in _FAILURES


_FAILURES = frozenset(
    {Phase.RETRYABLE_FAILURE, Phase.SYSTEM_RETRYABLE_FAILURE, Phase.PERMANENT_FAILURE}
)
_TERMINAL = _FAILURES | {Phase.SUCCESS, Phase.ABORTED}


class ErrorKind(enum.StrEnum):
    """Whose fault a failure is: the user's workload, or the platform."""

    USER = "user"
    SYSTEM = "system"


@dataclass(frozen=True, slots=True)
class ExecutionError:
    code: str
    message: str
    kind: ErrorKind = ErrorKind.USER


@dataclass(frozen=True, slots=True)
class ReasonInfo:
    """One line of a task's history beside its phase: an attached Kubernetes event."""

    reason: str
    occurred_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class PhaseInfo:
    """What a task is doing now, and why.

    ``version`` distinguishes two reports of the same phase (a new reason, new events attached);
    the plugin manager makes it grow and never decrease. ``cleanup_on_failure`` asks the engine to
    delete the resource at once rather than keep it for inspection (it would otherwise hold
    resources, such as a pod stuck on a container it can never create). ``setback`` says the
    plugin knows why the task went back to an earlier phase (its job was suspended to be queued
    again), so the report stands even after the task ran (see :func:`hold_progress`).
    """

    phase: Phase
    version: int = 0
    reason: str = ""
    error: ExecutionError | None = None
    cleanup_on_failure: bool = False
    occurred_at: datetime | None = None
    additional_reasons: tuple[ReasonInfo, ...] = ()
    setback: bool = False


_PROGRESS = {
    Phase.NOT_READY: 1,
    Phase.WAITING_FOR_RESOURCES: 1,
    Phase.QUEUED: 2,
    Phase.INITIALIZING: 3,
    Phase.RUNNING: 4,
}


def hold_progress(reached: Phase, info: PhaseInfo) -> PhaseInfo:
    """``info``, unless it reports an earlier phase than ``reached`` without a cause: then the
    phase reached, with the report's reason (what is happening now is still worth saying).

    A pure rule over the last phase reported and the new report, applied by the plugin manager
    to every plugin's report, so no plugin has to remember where its task was.
    """
    before, now = _PROGRESS.get(reached), _PROGRESS.get(info.phase)
    if before is None or now is None or now >= before or info.setback:
        return info
    return PhaseInfo(reached, reason=info.reason, occurred_at=info.occurred_at)


def as_launched(reached: Phase, reason: str, info: PhaseInfo, *, status_written: bool) -> PhaseInfo:
    """``info``, or, while no controller has written the resource's status and the task is still
    Queued as its launch left it, Queued with the reason it has (the launch's, naming what it
    created): the plugin's reading of an untouched object (a Job "created; no pod yet") says no
    more than that, and would cost a write of its own for every task."""
    queued = reached is Phase.QUEUED and info.phase is Phase.QUEUED
    if status_written or info.setback or not queued:
        return info
    return PhaseInfo(Phase.QUEUED, reason=reason, occurred_at=info.occurred_at)


def undefined() -> PhaseInfo:
    return PhaseInfo(Phase.UNDEFINED)


def not_ready(now: datetime, reason: str) -> PhaseInfo:
    return PhaseInfo(Phase.NOT_READY, reason=reason, occurred_at=now)


def waiting_for_resources(now: datetime, reason: str) -> PhaseInfo:
    return PhaseInfo(Phase.WAITING_FOR_RESOURCES, reason=reason, occurred_at=now)


def queued(now: datetime, reason: str, *, setback: bool = False) -> PhaseInfo:
    """Waiting to run; ``setback``: sent back to wait after it ran, for a reason the plugin
    names (a suspended job)."""
    return PhaseInfo(Phase.QUEUED, reason=reason, occurred_at=now, setback=setback)


def initializing(now: datetime, reason: str) -> PhaseInfo:
    return PhaseInfo(Phase.INITIALIZING, reason=reason, occurred_at=now)


def running(now: datetime, reason: str = "") -> PhaseInfo:
    return PhaseInfo(Phase.RUNNING, reason=reason, occurred_at=now)


def success(now: datetime, reason: str = "") -> PhaseInfo:
    return PhaseInfo(Phase.SUCCESS, reason=reason, occurred_at=now)


def aborted(now: datetime, reason: str) -> PhaseInfo:
    return PhaseInfo(Phase.ABORTED, reason=reason, occurred_at=now)


def retryable_failure(
    now: datetime, code: str, message: str, *, cleanup: bool = False
) -> PhaseInfo:
    """The user's workload failed; the task may be retried under its retry budget."""
    phase = Phase.RETRYABLE_FAILURE
    return _failure(phase, now, code, message, kind=ErrorKind.USER, cleanup=cleanup)


def system_retryable_failure(
    now: datetime, code: str, message: str, *, cleanup: bool = False
) -> PhaseInfo:
    """The platform failed the task; retrying it does not charge the user's retry budget."""
    phase = Phase.SYSTEM_RETRYABLE_FAILURE
    return _failure(phase, now, code, message, kind=ErrorKind.SYSTEM, cleanup=cleanup)


def permanent_failure(
    now: datetime,
    code: str,
    message: str,
    *,
    kind: ErrorKind = ErrorKind.USER,
    cleanup: bool = False,
) -> PhaseInfo:
    """The task can never succeed as submitted; retrying it is pointless."""
    return _failure(Phase.PERMANENT_FAILURE, now, code, message, kind=kind, cleanup=cleanup)


def _failure(
    phase: Phase, now: datetime, code: str, message: str, *, kind: ErrorKind, cleanup: bool
) -> PhaseInfo:
    return PhaseInfo(
        phase,
        reason=code,
        error=ExecutionError(code, message, kind),
        cleanup_on_failure=cleanup,
        occurred_at=now,
    )
