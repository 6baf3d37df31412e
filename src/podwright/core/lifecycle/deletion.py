"""A task's resource deleted by someone else: whether the task's end is the deletion's.

podwright deletes a task's resource only on the executor's abort path (an abort asked for, a
failure that asks for cleanup, a finished task finalized), and that path never asks the plugin
for a phase. So a resource that the plugin manager sees carrying a ``deletionTimestamp`` was
deleted by someone else: a person (``kubectl delete pod``), a controller, a drain. That is not the
user's failure. Flyte reports such a resource as ``UnexpectedObjectDeletion`` while it runs, a
system retryable failure (``checkResourcePhase`` in flytepropeller's
``pkg/controller/nodes/task/k8s/plugin_manager.go``), and keeps any terminal phase. But a
deletion stops what it deletes: the kubelet sends a deleted pod's containers SIGTERM (exit code
143), SIGKILL once the grace period is over (137), and reports the pod Failed while it still
carries its ``deletionTimestamp`` (podwright's finalizer keeps it); a Job deleted in the
foreground has its pods deleted, and may turn Failed. Whether the task would be blamed on the
user then depends on when the executor looks. :func:`judge_deletion` decides it from the object:

=================================================  =========================================
the plugin's phase while the object is deleted     the task's phase
=================================================  =========================================
Success (a container that exits 0 on SIGTERM too)  kept: the work was done
PermanentFailure (an invalid image, a workload     kept: no retry can help, whatever stopped
that asks to end when preempted: the scheduler     the resource
preempts by deleting)
not terminal                                       SystemRetryableFailure UnexpectedObjectDeletion
a (system) retryable failure that ended at or      SystemRetryableFailure UnexpectedObjectDeletion
after the deletion was requested, or whose end
the plugin cannot date
one that ended before the deletion was requested   kept: the failure predates the deletion
=================================================  =========================================

When the deletion was requested (:func:`deletion_of`): the API server writes ``deletionTimestamp``
and ``deletionGracePeriodSeconds`` (``BeforeDelete`` in ``staging/src/k8s.io/apiserver/pkg/
registry/rest/delete.go``). Only Pods are deleted gracefully (the pod strategy's
``CheckGracefulDelete``): the timestamp is the request plus the grace period, and a later delete
with a shorter period moves it by the difference, so the timestamp minus the period is still the
first request, unless the moved deadline would lie in the past: then the API server sets it to
now, with a period of 1 s (0 for the kubelet's final delete, once the containers stopped, when a
finalizer keeps the pod). A pod's deletion recorded with a period of 2 s or more is therefore
dated exactly; with 0 or 1 s (also a pod deleted once it had ended, or never bound to a node,
which the API server deletes with a period of 0) the timestamp minus the period is only the
latest the request can have been, and a failure dated before it cannot be told from one the
deletion caused: it is judged the deletion's, as an undated one is. Other kinds get the
timestamp of the first request and a period of 0 (``markAsDeleting`` in ``staging/src/k8s.io/
apiserver/pkg/registry/generic/registry/store.go`` never moves it later): dated exactly.

Times are compared to the second, the resolution of the API's timestamps (a container's
``finishedAt``, a condition's ``lastTransitionTime``): a failure in the very second the deletion
was requested counts as the deletion's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from podwright.core.lifecycle import phases
from podwright.core.lifecycle.objects import JsonObject, integer, rfc3339, section, timestamp
from podwright.core.lifecycle.phases import Phase, PhaseInfo

UNEXPECTED_OBJECT_DELETION = "UnexpectedObjectDeletion"
GRACEFULLY_DELETED_KINDS = frozenset({"Pod"})
# The grace periods the API server may have set itself when a shortened deadline lay in the past.
_CLAMPED_GRACE_PERIODS = frozenset({0, 1})


@dataclass(frozen=True, slots=True)
class Deletion:
    """When an object's deletion was requested, as its metadata records it: ``requested_at``
    exactly when ``exact``, else the latest it can have been; None when the timestamp is
    unreadable."""

    requested_at: datetime | None
    exact: bool

    def caused(self, ended_at: datetime | None) -> bool:
        """Whether an end at ``ended_at`` (None: the plugin cannot date it) may be the
        deletion's: it is not provably earlier than the request."""
        if ended_at is None or self.requested_at is None:
            return True
        if _to_second(ended_at) >= _to_second(self.requested_at):
            return True
        return not self.exact

    def describe(self) -> str:
        if self.requested_at is None:
            return "at a time its deletionTimestamp does not tell"
        when = rfc3339(self.requested_at)
        return f"at {when}" if self.exact else f"at {when} or earlier"


def deletion_of(obj: JsonObject, kind: str) -> Deletion | None:
    """The deletion of ``obj`` (an object of ``kind``), or None when it is not being deleted."""
    metadata = section(obj, "metadata")
    if not metadata.get("deletionTimestamp"):
        return None
    deadline = timestamp(metadata, "deletionTimestamp")
    grace = integer(metadata, "deletionGracePeriodSeconds") or 0
    if deadline is None:
        return Deletion(None, exact=False)
    clamped = kind in GRACEFULLY_DELETED_KINDS and grace in _CLAMPED_GRACE_PERIODS
    return Deletion(deadline - timedelta(seconds=grace), exact=not clamped)


def judge_deletion(
    info: PhaseInfo,
    deletion: Deletion,
    ended_at: datetime | None,
    *,
    subject: str,
    reached: Phase,
    now: datetime,
) -> PhaseInfo:
    """The phase of a task whose resource (``subject``) someone else is deleting, from the
    plugin's ``info``, when its end happened (``ended_at``, None when the plugin cannot say),
    and the phase the task had ``reached``: the module's table."""
    if info.phase in (Phase.SUCCESS, Phase.ABORTED, Phase.PERMANENT_FAILURE):
        return info
    deleted = f"{subject} was deleted {deletion.describe()}, not by podwright"
    if info.phase.is_failure:
        if not deletion.caused(ended_at):
            return info
        stopped = info.error.message if info.error is not None else info.reason
        message = f"{deleted}, and stopped: {stopped}"
    else:
        task_phase = reached if info.phase is Phase.UNDEFINED else info.phase
        message = f"{deleted}, while its task was {task_phase.value}"
    return phases.system_retryable_failure(now, UNEXPECTED_OBJECT_DELETION, message)


def _to_second(value: datetime) -> datetime:
    return value.replace(microsecond=0)
