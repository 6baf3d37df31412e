"""What the status of a Job, a Kubeflow training job, or a Knative Service means for its task.

Each of these kinds reports progress through status conditions; these functions read them the way
their controllers write them:

* ``batch/v1`` Job: ``Complete`` and ``Failed`` are final (``FailureTarget`` and
  ``SuccessCriteriaMet`` announce them while pods terminate); ``Suspended`` means a queueing system
  (Kueue, KAI) holds the job; otherwise its active and ready pod counts tell whether it runs.
* Kubeflow ``kubeflow.org/v1`` jobs (PyTorchJob, MPIJob, TFJob, XGBoostJob, JAXJob): ``Succeeded``
  and ``Failed`` are final, ``Restarting`` and ``Running`` run, ``Created`` waits for its pods.
* Knative ``serving.knative.dev/v1`` Service: it never finishes; ``Ready`` True serves, Unknown
  deploys, False has failed (most often a revision that cannot start).
"""

from __future__ import annotations

from datetime import datetime

from podwright.core.lifecycle import phases
from podwright.core.lifecycle.objects import (
    JsonObject,
    condition,
    condition_is,
    describe,
    integer,
    section,
    text,
)
from podwright.core.lifecycle.phases import PhaseInfo


def job_phase(job: JsonObject, now: datetime) -> PhaseInfo:
    """The task phase of a ``batch/v1`` Job."""
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
        return phases.queued(now, reason)
    status = section(job, "status")
    active = integer(status, "active") or 0
    ready = integer(status, "ready") or 0
    if ready > 0:
        return phases.running(now, _retries(job))
    if active > 0:
        return phases.initializing(now, f"{active} pod(s) starting")
    return phases.queued(now, "job created; no pod yet")


def _retries(job: JsonObject) -> str:
    failed = integer(section(job, "status"), "failed") or 0
    if not failed:
        return ""
    limit = integer(section(job, "spec"), "backoffLimit")
    limit = 6 if limit is None else limit
    return f"{failed} failed pod(s) of a backoff limit of {limit}"


def kubeflow_job_phase(job: JsonObject, now: datetime) -> PhaseInfo:
    """The task phase of a Kubeflow training job (kubeflow.org/v1)."""
    if condition_is(job, "Succeeded", "True") is not None:
        return phases.success(now)
    failed = condition_is(job, "Failed", "True")
    if failed is not None:
        return _failed(failed, now, "JobFailed", "")
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


def _failed(failed: JsonObject, now: datetime, default_code: str, detail: str) -> PhaseInfo:
    code = text(failed, "reason") or default_code
    message = describe(code, text(failed, "message"))
    if detail:
        message = f"{message} ({detail})"
    return phases.retryable_failure(now, code, message)
