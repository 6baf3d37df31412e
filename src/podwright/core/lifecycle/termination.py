"""Whether an aborted task's resource has really stopped, and how long stopping may take.

An abort deletes the task's resource, and Kubernetes stops it gracefully: the task must not be
recorded Aborted while its containers still run. What "stopped" means is read from the object as
the API server shows it, kind by kind:

* **A Pod** bound to a node is not removed when deleted: the API server sets its
  ``deletionTimestamp`` (now + the grace period) and ``deletionGracePeriodSeconds``, the kubelet
  sends its containers SIGTERM, then SIGKILL once the grace period is over, and removes the pod
  (a second delete with a grace period of 0) once they have stopped (``CheckGracefulDelete`` in
  ``pkg/registry/core/pod/strategy.go``). A pod not bound to a node, or already Succeeded or
  Failed, is removed at once. It has stopped once it is gone, or once its phase is Succeeded or
  Failed, or none of its containers runs any more (podwright's finalizer may keep the object a
  while longer).
* **Everything else** (a Job, a Kubeflow job, a Knative Service) is deleted in the foreground: the
  API server adds the ``foregroundDeletion`` finalizer, the garbage collector deletes the
  object's dependents (a Job's pods; a Kubeflow job's pods and services; a Knative Service's
  configuration, revisions, deployments and their pods, each in the foreground too) and removes
  the finalizer only once every dependent that blocks its owner's deletion is gone. The resource
  has stopped once it is gone, or once it carries a ``deletionTimestamp`` and no
  ``foregroundDeletion`` finalizer any more.
* **A Job** has stopped, besides, only once its status counts no active and no terminating pod:
  the finalizer says nothing when the Job was deleted another way (in the background, by a
  person, while a finalizer holds it: the garbage collector leaves its pods running while it
  exists), and the Job controller goes on counting a deleted Job's pods (``syncJob`` in
  ``pkg/controller/job/job_controller.go`` writes ``active`` and, since Kubernetes 1.29,
  ``terminating``) until they are gone.

How long to wait is the pods' grace period (``terminationGracePeriodSeconds``, 30 s by default),
plus a margin the engine's configuration sets; past it, the abort is recorded anyway, saying the
resource did not confirm.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from podwright.core.lifecycle.objects import JsonObject, integer, items, section, text

FOREGROUND_DELETION = "foregroundDeletion"
DEFAULT_GRACE = timedelta(seconds=30)
"""A pod's termination grace period when its spec sets none (the API server's default)."""


def pod_stopped(pod: JsonObject) -> bool:
    """Whether a deleted pod's containers have all stopped: its phase is Succeeded or Failed, or
    the kubelet reports every container and none of them running (after a deletion the kubelet
    starts no container again; one still waiting never will)."""
    status = section(pod, "status")
    if text(status, "phase") in ("Succeeded", "Failed"):
        return True
    reported = items(status, "containerStatuses")
    if not reported or len(reported) < len(items(section(pod, "spec"), "containers")):
        return False
    statuses = [*items(status, "initContainerStatuses"), *reported]
    return not any("running" in section(container, "state") for container in statuses)


def dependents_deleted(obj: JsonObject) -> bool:
    """Whether an object deleted in the foreground has seen its dependents deleted."""
    metadata = section(obj, "metadata")
    finalizers = metadata.get("finalizers")
    pending = isinstance(finalizers, list) and FOREGROUND_DELETION in finalizers
    return bool(metadata.get("deletionTimestamp")) and not pending


def job_stopped(job: JsonObject) -> bool:
    """Whether a deleted Job has stopped: its foreground deletion is done, and its status counts
    no active and no terminating pod (absent counts are zero, as the API omits them)."""
    status = section(job, "status")
    return (
        dependents_deleted(job)
        and not integer(status, "active")
        and not integer(status, "terminating")
    )


def grace_period(
    pod_specs: Sequence[JsonObject], *, default: timedelta = DEFAULT_GRACE
) -> timedelta:
    """The longest termination grace period of ``pod_specs`` (``default`` where one sets none)."""
    periods = [
        timedelta(seconds=seconds)
        if (seconds := integer(spec, "terminationGracePeriodSeconds")) is not None
        else default
        for spec in pod_specs
    ]
    return max(periods, default=default)
