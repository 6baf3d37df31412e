"""The local backend's Job controller, as pure decisions: what a ``batch/v1`` Job does next.

The local backend runs a Job's pods one at a time (its ``parallelism`` is not honoured: one machine)
until ``completions`` of them succeeded, and otherwise decides as the Job controller does
(pkg/controller/job/job_controller.go, ``syncJob``), so that the engine reads the same status
from this machine as from a cluster:

* a pod that fails counts in ``status.failed``; once more pods failed than ``backoffLimit``
  (default 6), or, with ``restartPolicy: OnFailure``, once the restarts of the running pod's
  containers reach it (``pastBackoffLimitOnFailure``, since Kubernetes 1.10:
  kubernetes/kubernetes#58972, fixing #54870), the Job fails: the interim ``FailureTarget``
  condition, its running pod deleted (and counted failed), then ``Failed`` once no pod remains,
  both with reason ``BackoffLimitExceeded``;
* a failed pod is replaced after the pod-failure back-off (10 s, doubling per failure since the
  last success);
* enough successes: ``SuccessCriteriaMet``, then ``Complete``, reason ``CompletionsReached``;
* a Job being deleted creates no pod (the garbage collector deletes its pods), its status still
  counts them;
* ``active``, ``ready``, ``terminating``, ``failed``, ``succeeded``, ``startTime``,
  ``completionTime`` and ``uncountedTerminatedPods`` as the controller writes them (zero counters
  that the API omits are omitted).

Events are the controller's: SuccessfulDelete, Completed, BackoffLimitExceeded (SuccessfulCreate is
the adapter's, once it has the new pod's name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from podwright.core.lifecycle.objects import (
    JsonObject,
    integer,
    items,
    parse_time,
    section,
    text,
)
from podwright.core.local_runtime import JOB_RESTART_POLICIES, Backoff, pod_spec_problems

DEFAULT_BACKOFF_LIMIT = 6
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"
COMPLETIONS_REACHED = "CompletionsReached"
COMPLETIONS_MESSAGE = "Reached expected number of succeeded pods"
_TERMINAL = ("Succeeded", "Failed")


@dataclasses.dataclass(frozen=True)
class JobEvent:
    """An event the Job controller records on its Job."""

    reason: str
    note: str
    type: str = "Normal"


@dataclasses.dataclass(frozen=True)
class JobSync:
    """One sync of a Job: the status to write, the pods already counted in it (by uid), whether to
    create a pod now, which pods to delete, the events, when to sync again at the latest, and
    whether the Job is finished (nothing more will happen to it)."""

    status: dict[str, Any]
    counted: frozenset[str]
    create_pod: bool = False
    delete_pods: tuple[str, ...] = ()
    events: tuple[JobEvent, ...] = ()
    wake_at: datetime | None = None
    finished: bool = False


def job_spec_problems(spec: JsonObject) -> list[str]:
    """What the API server's validation refuses in a Job spec the local controller relies on."""
    problems = []
    for field in ("backoffLimit", "completions"):
        value = spec.get(field)
        if value is not None and (integer(spec, field) is None or value < 0):
            problems.append(
                f"spec.{field}: Invalid value: {value!r}: must be greater than or equal to 0"
            )
    template = section(spec, "template", "spec")
    if not template:
        problems.append("spec.template.spec: Required value")
    else:
        problems += pod_spec_problems(template, "spec.template.spec", JOB_RESTART_POLICIES)
    return problems


def sync_job(
    job: JsonObject,
    pods: Sequence[JsonObject],
    counted: frozenset[str],
    now: datetime,
    backoff: Backoff,
) -> JobSync:
    """The next step of ``job``, whose pods (every pod it controls, oldest first) are ``pods`` and
    whose ``counted`` pods are already in its status counters."""
    status = section(job, "status")
    conditions = [dict(entry) for entry in items(status, "conditions")]
    if _find(conditions, "Complete") or _find(conditions, "Failed"):
        return JobSync(dict(status), counted, finished=True)
    spec = section(job, "spec")
    tally = _Tally.of(status, pods, counted)
    active = [pod for pod in pods if _active(pod)]
    terminating = [pod for pod in pods if _terminating(pod)]
    target = _find(conditions, "FailureTarget")
    limit = _int(spec, "backoffLimit", DEFAULT_BACKOFF_LIMIT)
    if target is None and (tally.failed > limit or _past_limit_on_failure(spec, pods, limit)):
        target = _job_condition("FailureTarget", BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE, now)
        conditions.append(target)
    outcome = _Outcome(completion_time=text(status, "completionTime"))
    if target is not None:
        # When the Job has failed, every pod that has not ended is considered failed.
        for pod in active + terminating:
            tally.count(pod, failed=True)
        outcome.delete = tuple(text(section(pod, "metadata"), "name") for pod in active)
        outcome.events += [
            JobEvent("SuccessfulDelete", f"Deleted pod: {n}") for n in outcome.delete
        ]
        terminating, active = terminating + active, []
        if not terminating:
            reason, message = text(target, "reason"), text(target, "message")
            conditions.append(_job_condition("Failed", reason, message, now))
            outcome.events.append(JobEvent(reason, message, "Warning"))
            outcome.finished = True
    elif tally.succeeded >= _int(spec, "completions", 1) and not active:
        for kind in ("SuccessCriteriaMet", "Complete"):
            conditions.append(_job_condition(kind, COMPLETIONS_REACHED, COMPLETIONS_MESSAGE, now))
        outcome.completion_time = _time(now)
        outcome.events.append(JobEvent("Completed", "Job completed"))
        outcome.finished = True
    elif not active and not terminating and "deletionTimestamp" not in section(job, "metadata"):
        retry_at = _retry_at(pods, backoff)
        if retry_at is None or retry_at <= now:
            outcome.create = True
        else:
            outcome.wake_at = retry_at
    written: dict[str, Any] = {"startTime": text(status, "startTime") or _time(now)}
    if outcome.completion_time:
        written["completionTime"] = outcome.completion_time
    if active:
        written["active"] = len(active)
    written["ready"] = sum(1 for pod in active if _ready(pod))
    written["terminating"] = len(terminating)
    if tally.failed:
        written["failed"] = tally.failed
    if tally.succeeded:
        written["succeeded"] = tally.succeeded
    if conditions:
        written["conditions"] = conditions
    written["uncountedTerminatedPods"] = {}
    return JobSync(
        written,
        frozenset(tally.counted),
        create_pod=outcome.create,
        delete_pods=outcome.delete,
        events=tuple(outcome.events),
        wake_at=outcome.wake_at,
        finished=outcome.finished,
    )


@dataclasses.dataclass
class _Tally:
    """The Job's succeeded and failed counters, and the pods (by uid) already in them."""

    succeeded: int
    failed: int
    counted: set[str]

    @classmethod
    def of(cls, status: JsonObject, pods: Sequence[JsonObject], counted: frozenset[str]) -> _Tally:
        tally = cls(integer(status, "succeeded") or 0, integer(status, "failed") or 0, set(counted))
        for pod in pods:
            phase = _phase(pod)
            if phase in _TERMINAL:
                tally.count(pod, failed=phase == "Failed")
        return tally

    def count(self, pod: JsonObject, *, failed: bool) -> None:
        uid = text(section(pod, "metadata"), "uid")
        if uid in self.counted:
            return
        self.counted.add(uid)
        if failed:
            self.failed += 1
        else:
            self.succeeded += 1


@dataclasses.dataclass
class _Outcome:
    create: bool = False
    delete: tuple[str, ...] = ()
    events: list[JobEvent] = dataclasses.field(default_factory=list)
    wake_at: datetime | None = None
    finished: bool = False
    completion_time: str = ""


def _int(spec: JsonObject, field: str, default: int) -> int:
    value = integer(spec, field)
    return default if value is None else value


def _has(conditions: Sequence[Mapping[str, Any]], kind: str) -> bool:
    return _find(conditions, kind) is not None


def _find(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    for entry in conditions:
        if entry.get("type") == kind and entry.get("status") == "True":
            return entry
    return None


def _job_condition(kind: str, reason: str, message: str, now: datetime) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": _time(now),
        "lastTransitionTime": _time(now),
    }


def _active(pod: JsonObject) -> bool:
    return text(
        section(pod, "status"), "phase"
    ) not in _TERMINAL and "deletionTimestamp" not in section(pod, "metadata")


def _terminating(pod: JsonObject) -> bool:
    return text(
        section(pod, "status"), "phase"
    ) not in _TERMINAL and "deletionTimestamp" in section(pod, "metadata")


def _ready(pod: JsonObject) -> bool:
    return any(
        entry.get("type") == "Ready" and entry.get("status") == "True"
        for entry in items(section(pod, "status"), "conditions")
    )


def _past_limit_on_failure(spec: JsonObject, pods: Sequence[JsonObject], limit: int) -> bool:
    """With restartPolicy OnFailure, the container restarts of running and pending pods count
    toward the backoff limit (``pastBackoffLimitOnFailure``)."""
    if text(section(spec, "template", "spec"), "restartPolicy") != "OnFailure":
        return False
    restarts = 0
    for pod in pods:
        status = section(pod, "status")
        if text(status, "phase") not in ("Running", "Pending"):
            continue
        for key in ("initContainerStatuses", "containerStatuses"):
            restarts += sum(integer(entry, "restartCount") or 0 for entry in items(status, key))
    return restarts > 0 if limit == 0 else restarts >= limit


def _retry_at(pods: Sequence[JsonObject], backoff: Backoff) -> datetime | None:
    """When the next pod may be created after the failures since the last success, or None."""
    successes = [at for pod in pods if _phase(pod) == "Succeeded" and (at := _finished(pod))]
    last_success = max(successes, default=None)
    failures = [
        finished
        for pod in pods
        if _phase(pod) == "Failed"
        and (finished := _finished(pod)) is not None
        and (last_success is None or finished > last_success)
    ]
    if not failures:
        return None
    return max(failures) + backoff.nth(len(failures))


def _phase(pod: JsonObject) -> str:
    return text(section(pod, "status"), "phase")


def _finished(pod: JsonObject) -> datetime | None:
    """When a pod ended: its last container's finish (``getFinishedTime``)."""
    status = section(pod, "status")
    times = [
        parse_time(section(entry, "state", "terminated").get("finishedAt"))
        for key in ("initContainerStatuses", "containerStatuses")
        for entry in items(status, key)
    ]
    return max((at for at in times if at is not None), default=None)


def _time(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
