"""What a Pod's status means for its task.

A Pod reports its own phase (Pending, Running, Succeeded, Failed, Unknown), but a task needs more:
whether a Pending pod waits for the scheduler or for an image, whether a failure was the user's
code, the user's spec, or the node it ran on, and when a container stuck in creation has waited long
enough. The rules are those of Flyte's pod plugin, learned by its users the hard way:

* Succeeded, but a container was OOM-killed: the user's failure (a sidecar the pod outlived).
* Failed because the node shut down or went away, or the primary container was SIGKILLed (137, or
  247 from a runtime that reports the signal that way): the platform's failure, retried for free.
* Pending and unschedulable: Queued, with the scheduler's reason (see
  :func:`scheduler_message` for the one word of it that is dropped).
* Pending while images pull and containers are created: Initializing. A container that cannot be
  created (CreateContainerError, CreateContainerConfigError) or an image that cannot be pulled
  (ImagePullBackOff) is given a grace period from the Ready condition's last transition, because
  these often resolve themselves (a Secret or ConfigMap created a moment later, a registry that
  recovers); after it the pod is failed and cleaned up.
* With a primary container (the ``podwright.dev/primary-container`` annotation written by
  ``PodTemplate.to_k8s_pod()``), that container's termination decides the task while sidecars
  run on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from podwright.core.lifecycle import phases
from podwright.core.lifecycle.objects import (
    JsonObject,
    condition,
    condition_is,
    describe,
    integer,
    items,
    section,
    text,
    timestamp,
)
from podwright.core.lifecycle.phases import PhaseInfo
from podwright.core.pod_template import PRIMARY_CONTAINER_ANNOTATION

# Pod status reasons set when the node the pod ran on shut down, was drained, or stopped matching.
NODE_LOSS_REASONS = frozenset({"Shutdown", "Terminated", "NodeShutdown", "NodeAffinity"})
# Exit codes of a SIGKILLed process: 128 + 9, and 247 as some runtimes report it.
SIGKILL_EXIT_CODES = frozenset({137, 247})
OOM_KILLED = "OOMKilled"
INITIALIZING_REASONS = frozenset({"ErrImagePull", "ContainerCreating", "PodInitializing"})
# The scheduler's FitError message ("0/N nodes are available: <why>.") ends with the message of its
# PostFilter plugins. When a PreFilter plugin rejects a pod outright (VolumeBinding: a claim that
# does not exist yet, or an unbound Immediate claim), the PreFilter plugins after it never run,
# and DynamicResources' PostFilter, reading a cycle state its PreFilter never wrote, fails with
# the state's bare error "not found" (framework.ErrNotFound, pkg/scheduler/framework/
# cycle_state.go), which FitError.Error() appends (pkg/scheduler/framework/types.go).
_STRAY_POSTFILTER_ERROR = re.compile(r"(0/\d+ nodes are available: .*\.) not found", re.DOTALL)


@dataclass(frozen=True, slots=True)
class PodPhaseConfig:
    """The grace periods and timeouts of the pod phase decisions (see ``LifecycleConfig``)."""

    create_container_error_grace: timedelta = timedelta(minutes=3)
    create_container_config_error_grace: timedelta = timedelta(0)
    image_pull_backoff_grace: timedelta = timedelta(minutes=3)
    pod_pending_timeout: timedelta | None = None


def pod_phase(pod: JsonObject, now: datetime, config: PodPhaseConfig) -> PhaseInfo:
    """The task phase of ``pod`` as observed at ``now``."""
    status = section(pod, "status")
    pod_phase_name = text(status, "phase")
    primary = text(section(pod, "metadata", "annotations"), PRIMARY_CONTAINER_ANNOTATION)
    if pod_phase_name == "Succeeded":
        return _succeeded(status, now)
    if pod_phase_name == "Failed":
        return _failed(status, primary, now)
    if pod_phase_name == "Running":
        if primary:
            return _primary_container_phase(pod, primary, now)
        return phases.running(now)
    if pod_phase_name == "Pending" or not pod_phase_name:
        info = _pending(pod, now, config)
        timeout = config.pod_pending_timeout
        created = timestamp(section(pod, "metadata"), "creationTimestamp")
        if (
            timeout is not None
            and not info.phase.is_terminal
            and created is not None
            and now - created > timeout
        ):
            return phases.system_retryable_failure(
                now,
                "PodPendingTimeout",
                f"pod stayed pending for more than {timeout}: {info.reason}",
                cleanup=True,
            )
        return info
    # Unknown: the node stopped reporting. Nothing can be concluded until it reports again.
    return phases.undefined()


def scheduler_message(message: str) -> str:
    """The scheduler's unschedulable message (a PodScheduled condition's, a FailedScheduling
    event's note) without the stray " not found" its DynamicResources plugin appends when an
    earlier plugin rejected the pod: it says nothing about the pod, and reads as if it did."""
    stray = _STRAY_POSTFILTER_ERROR.fullmatch(message)
    return stray.group(1) if stray else message


def _succeeded(status: JsonObject, now: datetime) -> PhaseInfo:
    for container in _container_statuses(status):
        terminated = section(container, "state", "terminated")
        if text(terminated, "reason") == OOM_KILLED:
            return phases.retryable_failure(
                now,
                OOM_KILLED,
                f"pod succeeded, but container {text(container, 'name')!r} was OOM-killed",
            )
    return phases.success(now)


def _failed(status: JsonObject, primary: str, now: datetime) -> PhaseInfo:
    code = text(status, "reason") or "Error"
    message = describe(text(status, "reason"), text(status, "message")) or "pod failed"
    terminations = []
    interrupted = code in NODE_LOSS_REASONS
    oom_killed = False
    for container in _container_statuses(status):
        terminated = section(container, "state", "terminated")
        if not terminated:
            continue
        name = text(container, "name")
        exit_code = integer(terminated, "exitCode")
        reason = text(terminated, "reason")
        terminations.append(_termination(name, exit_code, reason, text(terminated, "message")))
        if reason == OOM_KILLED:
            oom_killed = True
        elif exit_code in SIGKILL_EXIT_CODES and (not primary or name == primary):
            interrupted = True
    if terminations:
        message = "\n".join([message, *terminations])
    if interrupted:
        return phases.system_retryable_failure(now, "Interrupted", message)
    if oom_killed:
        return phases.retryable_failure(now, OOM_KILLED, message)
    return phases.retryable_failure(now, code, message)


def _termination(name: str, exit_code: int | None, reason: str, message: str) -> str:
    line = f"[{name}] terminated with exit code {exit_code}"
    if reason:
        line += f", reason {reason}"
    return f"{line}: {message}" if message else line


def _primary_container_phase(pod: JsonObject, primary: str, now: datetime) -> PhaseInfo:
    status = section(pod, "status")
    for container in items(status, "containerStatuses"):
        if text(container, "name") != primary:
            continue
        terminated = section(container, "state", "terminated")
        if not terminated:
            return phases.running(now)
        exit_code = integer(terminated, "exitCode")
        reason = text(terminated, "reason")
        message = _termination(primary, exit_code, reason, text(terminated, "message"))
        if reason == OOM_KILLED:
            return phases.retryable_failure(now, OOM_KILLED, message)
        if exit_code in SIGKILL_EXIT_CODES:
            return phases.system_retryable_failure(now, "Interrupted", message)
        if exit_code != 0:
            return phases.retryable_failure(now, reason or "ContainerFailed", message)
        return phases.success(now)
    spec_names = {text(c, "name") for c in items(section(pod, "spec"), "containers")}
    if primary in spec_names:
        return phases.running(now, "primary container has no status yet")
    return phases.permanent_failure(
        now,
        "PrimaryContainerNotFound",
        f"primary container {primary!r} is neither in the pod's spec nor in its status",
    )


def _pending(pod: JsonObject, now: datetime, config: PodPhaseConfig) -> PhaseInfo:
    scheduled = condition(pod, "PodScheduled")
    if scheduled is None or scheduled.get("status") != "True":
        if scheduled is not None and text(scheduled, "reason") == "Unschedulable":
            message = scheduler_message(text(scheduled, "message"))
            return phases.queued(now, describe("Unschedulable", message))
        return phases.queued(now, "waiting for the scheduler")
    ready = condition_is(pod, "Ready", "False") or {}
    since = (
        timestamp(ready, "lastTransitionTime")
        or timestamp(section(pod, "metadata"), "creationTimestamp")
        or now
    )
    waited = now - since
    status = section(pod, "status")
    for container in _container_statuses(status):
        waiting = section(container, "state", "waiting")
        reason = text(waiting, "reason")
        if not reason:
            continue
        message = describe(reason, text(waiting, "message"))
        message = f"[{text(container, 'name')}] {message}"
        decided = _waiting_container(reason, message, waited, now, config)
        if decided is not None:
            return decided
    return phases.initializing(now, text(ready, "reason") or "ContainersNotReady")


def _waiting_container(
    reason: str, message: str, waited: timedelta, now: datetime, config: PodPhaseConfig
) -> PhaseInfo | None:
    """The phase a container waiting for ``reason`` decides, or None when it decides nothing."""
    if reason in INITIALIZING_REASONS:
        return phases.initializing(now, message)
    if reason == "CreateContainerError":
        return _after_grace(waited, config.create_container_error_grace, now, reason, message)
    if reason == "CreateContainerConfigError":
        grace = config.create_container_config_error_grace
        return _after_grace(waited, grace, now, reason, message)
    if reason == "InvalidImageName":
        return phases.permanent_failure(now, reason, message)
    if reason == "ImagePullBackOff":
        if waited < config.image_pull_backoff_grace:
            return phases.initializing(now, message)
        if "429" in message or "Too Many Requests" in message:
            return phases.system_retryable_failure(now, reason, message, cleanup=True)
        return phases.retryable_failure(now, reason, message, cleanup=True)
    return phases.system_retryable_failure(now, reason, message, cleanup=True)


def _after_grace(
    waited: timedelta, grace: timedelta, now: datetime, reason: str, message: str
) -> PhaseInfo:
    """Initializing while the grace period lasts; then a permanent failure that frees the node."""
    if waited < grace:
        return phases.initializing(now, message)
    return phases.permanent_failure(now, reason, message, cleanup=True)


def _container_statuses(status: JsonObject) -> list[JsonObject]:
    return [*items(status, "initContainerStatuses"), *items(status, "containerStatuses")]


def preemption_ends_task(
    pod: JsonObject, info: PhaseInfo, now: datetime, label_domain: str = "podwright.dev"
) -> PhaseInfo:
    """A workload rendered with ``terminateAfterPreemption`` ends when its pod is preempted.

    The renderer records the field as the ``<label domain>/terminate-after-preemption`` annotation;
    a pod that the scheduler or a node drain disrupted (the ``DisruptionTarget`` condition) would
    otherwise be an interruption, retried for free.
    """
    annotations = section(pod, "metadata", "annotations")
    if (
        info.phase is not phases.Phase.SYSTEM_RETRYABLE_FAILURE
        or annotations.get(f"{label_domain}/terminate-after-preemption") != "true"
    ):
        return info
    disruption = condition_is(pod, "DisruptionTarget", "True")
    if disruption is None:
        return info
    cause = describe(text(disruption, "reason"), text(disruption, "message")) or "preempted"
    return phases.permanent_failure(
        now,
        "Preempted",
        f"{cause}; the workload asks to end when preempted (terminateAfterPreemption)",
        kind=phases.ErrorKind.SYSTEM,
    )
