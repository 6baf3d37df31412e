"""What the status of a Job, a Kubeflow training job, or a Knative Service means for its task.

Each of these kinds reports progress through status conditions; these functions read them the way
their controllers write them:

* ``batch/v1`` Job: ``Complete`` and ``Failed`` are final (``FailureTarget`` and
  ``SuccessCriteriaMet`` announce them while pods terminate); ``Suspended`` means a queueing system
  (Kueue, KAI) holds the job; otherwise its pod counts tell whether it runs. A Job that has had a
  pod fail or end (``failed``, ``uncountedTerminatedPods``, ``terminating``) runs on between two
  pods: the Job controller replaces a failed pod after a backoff of 10 s, doubling with each
  failure, at most 10 min (``DefaultJobPodFailureBackOff`` and ``MaxJobPodFailureBackOff`` in
  ``pkg/controller/job/job_controller.go``), and the task is Running, retrying, meanwhile. With
  ``restartPolicy: OnFailure`` a failed container restarts in place instead, after the kubelet's
  crash-loop back-off, and its pod stays active but not ready meanwhile: a Job whose task ran
  and that has an active pod and none ready is retrying too. The Job carries no restart count
  (its pods do); its reason says what it carries: active, ready, failed and terminating pods.
  The Job controller counts a pod some time after the kubelet reports it: it batches a pod's
  updates for a second (``syncJobBatchPeriod``), and every Job's status write waits for the
  controller manager's one client rate limit (``--kube-api-qps``, 20 by default), so on a busy
  control plane the count comes minutes late. When the task's pods are at hand (a watch cache of
  them), a pod of the Job that is ready, or has succeeded, and that the status has not counted
  yet, makes the Job Running at once, as the count will.
* Kubeflow ``kubeflow.org/v1`` jobs (PyTorchJob, MPIJob, TFJob, XGBoostJob, JAXJob): ``Succeeded``
  and ``Failed`` are final, ``Suspended`` holds the job, ``Restarting`` and ``Running`` run,
  ``Created`` waits for its pods.
* Knative ``serving.knative.dev/v1`` Service: it never finishes; ``Ready`` True serves, Unknown
  deploys, False has failed (most often a revision that cannot start).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from podwright.core.lifecycle import phases
from podwright.core.lifecycle.objects import (
    JsonObject,
    condition,
    condition_is,
    controller_of,
    describe,
    integer,
    section,
    text,
    timestamp,
)
from podwright.core.lifecycle.phases import PhaseInfo

JOB_POD_FAILURE_BACKOFF = timedelta(seconds=10)
JOB_POD_FAILURE_BACKOFF_MAX = timedelta(minutes=10)
JOB_DEFAULT_BACKOFF_LIMIT = 6


def job_phase(
    job: JsonObject, now: datetime, *, ran: bool = False, pods: Sequence[JsonObject] = ()
) -> PhaseInfo:
    """The task phase of a ``batch/v1`` Job; ``ran``: the task was Running before (a pod of the
    Job was ready), so a pod that is not ready now is not one starting for the first time;
    ``pods``: the task's pods as a watch cache holds them (those the Job does not control are
    not read), which may show a pod running that the Job's status has yet to count."""
    if condition_is(job, "Complete", "True") is not None:
        return phases.success(now)
    failed = condition_is(job, "Failed", "True")
    if failed is not None:
        return _failed(failed, now, "JobFailed", _retries(job))
    if condition_is(job, "FailureTarget", "True") is not None:
        return phases.running(now, "job is failing; its pods are terminating")
    if condition_is(job, "SuccessCriteriaMet", "True") is not None:
        return phases.running(now, "job met its success criteria; its pods are terminating")
    suspended = condition_is(job, "Suspended", "True")
    if suspended is not None or section(job, "spec").get("suspend") is True:
        reason = describe("Suspended", text(suspended or {}, "message"))
        return phases.queued(now, reason, setback=True)
    status = section(job, "status")
    active = integer(status, "active") or 0
    ready = integer(status, "ready") or 0
    terminating = integer(status, "terminating") or 0
    if ready > 0 or _runs_uncounted(job, pods):
        return phases.running(now, _retries(job))
    if _failed_pods(job) or terminating:
        return phases.running(now, _between_pods(job, active, terminating))
    succeeded = integer(status, "succeeded") or 0
    completions = integer(section(job, "spec"), "completions") or 1
    done = f"{succeeded} of {completions} completions" if succeeded else ""
    if active > 0:
        if done:
            return phases.running(now, f"{done}; {active} pod(s) starting")
        if ran:
            return phases.running(now, _not_ready(job, active))
        return phases.initializing(now, f"{active} pod(s) starting")
    if done:
        return phases.running(now, f"{done}; the next pod is being created")
    if status.get("startTime"):
        return phases.queued(now, "job started, but has no pod (see the job's events)")
    return phases.queued(now, "job created; no pod yet")


def _runs_uncounted(job: JsonObject, pods: Sequence[JsonObject]) -> bool:
    """Whether a pod of the Job shows it runs though its status counts no pod ready: a pod that
    is ready, or more pods succeeded than the status counts (one in ``uncountedTerminatedPods``
    is yet to be counted too). A pod being deleted is on its way out, not running. It runs as
    it would once counted, with the same reason: the count's arrival costs no write."""
    uid = text(section(job, "metadata"), "uid")
    if not uid:
        return False
    own = [
        pod
        for pod in pods
        if (controller_of(pod) or {}).get("uid") == uid
        and not section(pod, "metadata").get("deletionTimestamp")
    ]
    succeeded = sum(1 for pod in own if text(section(pod, "status"), "phase") == "Succeeded")
    return succeeded > (integer(section(job, "status"), "succeeded") or 0) or any(
        condition_is(pod, "Ready", "True") is not None for pod in own
    )


def pod_progress_fields(pod: JsonObject) -> dict[str, Any]:
    """What :func:`job_phase` reads of a task's pod, all a watch cache of the task's pods needs
    to keep (it holds one for every task): its name and deletion, the uids of its
    owners and which controls it, its phase and its Ready condition (not its resourceVersion:
    a change of anything else leaves what is kept the same)."""
    metadata = section(pod, "metadata")
    kept = {key: metadata[key] for key in ("name", "deletionTimestamp") if key in metadata}
    owners = metadata.get("ownerReferences")
    if isinstance(owners, list):
        kept["ownerReferences"] = [
            {key: owner[key] for key in ("uid", "controller") if key in owner}
            for owner in owners
            if isinstance(owner, Mapping)
        ]
    ready = condition(pod, "Ready")
    conditions = [] if ready is None else [{"type": "Ready", "status": ready.get("status")}]
    phase = text(section(pod, "status"), "phase")
    return {"metadata": kept, "status": {"phase": phase, "conditions": conditions}}


def _failed_pods(job: JsonObject) -> int:
    """Failed pods, those the Job controller has not counted in ``status.failed`` yet included."""
    status = section(job, "status")
    uncounted = section(status, "uncountedTerminatedPods").get("failed")
    return (integer(status, "failed") or 0) + (len(uncounted) if isinstance(uncounted, list) else 0)


def _backoff_limit(job: JsonObject) -> int:
    limit = integer(section(job, "spec"), "backoffLimit")
    return JOB_DEFAULT_BACKOFF_LIMIT if limit is None else limit


def _retries(job: JsonObject) -> str:
    failed = _failed_pods(job)
    if not failed:
        return ""
    return f"{failed} failed pod(s) of a backoff limit of {_backoff_limit(job)}"


def _between_pods(job: JsonObject, active: int, terminating: int) -> str:
    """Why a Job that has run has no ready pod: which pod comes next, and when."""
    failed = _failed_pods(job)
    done = f"retrying: {_retries(job)}" if failed else "replacing a pod"
    if active:
        return f"{done}; a new pod is starting"
    if terminating:
        return f"{done}; waiting for {terminating} terminating pod(s) to stop"
    delay = min(JOB_POD_FAILURE_BACKOFF * 2 ** min(failed - 1, 30), JOB_POD_FAILURE_BACKOFF_MAX)
    return (
        f"{done}; next pod after the Job controller's backoff "
        f"({_duration(delay)} after the last failure)"
    )


def _not_ready(job: JsonObject, active: int) -> str:
    """Why a Job that ran has active pods and none ready, in what its status carries."""
    counts = f"{active} active pod(s), 0 ready"
    policy = text(section(job, "spec", "template", "spec"), "restartPolicy")
    if policy != "OnFailure":
        return counts
    return (
        f"retrying: {counts}: a failed container restarts in place after the kubelet's back-off "
        f"(restartPolicy OnFailure; restarts count toward the backoff limit of "
        f"{_backoff_limit(job)})"
    )


def _duration(delay: timedelta) -> str:
    """A whole number of seconds as Go writes a duration: ``40s``, ``1m20s``, ``10m0s``."""
    seconds = int(delay.total_seconds())
    return f"{seconds}s" if seconds < 60 else f"{seconds // 60}m{seconds % 60}s"


def kubeflow_job_phase(job: JsonObject, now: datetime) -> PhaseInfo:
    """The task phase of a Kubeflow training job (kubeflow.org/v1)."""
    if condition_is(job, "Succeeded", "True") is not None:
        return phases.success(now)
    failed = condition_is(job, "Failed", "True")
    if failed is not None:
        return _failed(failed, now, "JobFailed", "")
    suspended = condition_is(job, "Suspended", "True")
    if suspended is not None:
        return phases.queued(now, describe("Suspended", text(suspended, "message")), setback=True)
    restarting = condition_is(job, "Restarting", "True")
    if restarting is not None:
        return phases.running(now, describe("Restarting", text(restarting, "message")))
    if condition_is(job, "Running", "True") is not None:
        return phases.running(now)
    created = condition_is(job, "Created", "True")
    if created is not None:
        return phases.queued(now, describe("Created", text(created, "message")))
    return phases.queued(now, "waiting for the training operator")


def knative_service_phase(service: JsonObject, now: datetime) -> PhaseInfo:
    """The task phase of a Knative Service: it runs until aborted, or fails."""
    generation = integer(section(service, "metadata"), "generation")
    observed = integer(section(service, "status"), "observedGeneration")
    ready = condition(service, "Ready")
    if ready is None or (generation is not None and observed != generation):
        return phases.queued(now, "waiting for the Knative controller")
    status = ready.get("status")
    if status == "True":
        return phases.running(now, "serving")
    if status == "False":
        # The revision's failure (an image that cannot be pulled, a container that exits) is what
        # ConfigurationsReady reports; Ready only repeats it.
        configuration = condition_is(service, "ConfigurationsReady", "False")
        return _failed(configuration or ready, now, "ServiceFailed", "")
    return phases.initializing(now, describe(text(ready, "reason"), text(ready, "message")))


def failed_at(obj: JsonObject) -> datetime | None:
    """When a Job or a Kubeflow job failed: its ``Failed`` condition's last transition to True,
    or None when it has not failed or the time is not recorded."""
    failed = condition_is(obj, "Failed", "True")
    return None if failed is None else timestamp(failed, "lastTransitionTime")


def _failed(failed: JsonObject, now: datetime, default_code: str, detail: str) -> PhaseInfo:
    code = text(failed, "reason") or default_code
    message = describe(code, text(failed, "message"))
    if detail:
        message = f"{message} ({detail})"
    return phases.retryable_failure(now, code, message)
