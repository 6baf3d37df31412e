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
  run on, when the kubelet will not restart it: under ``restartPolicy: Never``, or ``OnFailure``
  with exit code 0.
* Restarts are not ends. The kubelet restarts a container that exits under ``restartPolicy:
  Always`` (a bare Pod's default) and one that fails under ``OnFailure``, an init container that
  fails unless the policy is ``Never``, and a native sidecar (an init container with its own
  ``restartPolicy: Always``) whatever it does; it shows the container ``terminated`` for a moment,
  then ``waiting`` in ``CrashLoopBackOff`` with its back-off, then running again, with its
  ``restartCount`` and ``lastState.terminated``, while the pod stays Running (``getPhase`` in
  ``pkg/kubelet/kubelet_pods.go``; ``doBackOff`` in ``pkg/kubelet/kuberuntime/
  kuberuntime_manager.go``). So a Running pod is Running, and a Pending pod whose init container
  crash-loops is Initializing (``podPendingTimeout`` bounds the wait), each with a reason that
  says which containers restarted, how many times, how the last run ended, and the back-off.
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
from podwright.core.lifecycle.phases import Phase, PhaseInfo
from podwright.core.pod_template import PRIMARY_CONTAINER_ANNOTATION

# Pod status reasons set when the node the pod ran on shut down, was drained, or stopped matching.
NODE_LOSS_REASONS = frozenset({"Shutdown", "Terminated", "NodeShutdown", "NodeAffinity"})
# Exit codes of a SIGKILLed process: 128 + 9, and 247 as some runtimes report it.
SIGKILL_EXIT_CODES = frozenset({137, 247})
OOM_KILLED = "OOMKilled"
INITIALIZING_REASONS = frozenset({"ErrImagePull", "ContainerCreating", "PodInitializing"})
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
# The API server defaults a pod's restartPolicy to Always (pkg/apis/core/v1/defaults.go).
DEFAULT_RESTART_POLICY = "Always"
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
        return phases.running(now, _restarts(pod))
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


def pod_failed_at(pod: JsonObject) -> datetime | None:
    """When the failure :func:`pod_phase` reports happened: the primary container's end when it
    failed, else the earliest end of a container that failed (a non-zero exit code, or
    OOM-killed); None when no failed container's end is dated (a pod the kubelet refused, say).

    A container that failed first decides the pod's failure: the others may be stopped later by
    the pod's deletion without making the failure the deletion's (see ``deletion.py``).
    """
    primary = text(section(pod, "metadata", "annotations"), PRIMARY_CONTAINER_ANNOTATION)
    failures: dict[str, datetime] = {}
    for container in _container_statuses(section(pod, "status")):
        terminated = section(container, "state", "terminated")
        finished = timestamp(terminated, "finishedAt")
        failed = integer(terminated, "exitCode") != 0 or text(terminated, "reason") == OOM_KILLED
        if terminated and failed and finished is not None:
            failures[text(container, "name")] = finished
    if primary in failures:
        return failures[primary]
    return min(failures.values(), default=None)


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
        if exit_code == 0 and reason != OOM_KILLED:
            continue  # a container that completed is not why the pod failed (as Flyte's reading)
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
        exit_code = integer(terminated, "exitCode")
        if not terminated or _RestartRules.of(pod).restarts(primary, exit_code):
            return phases.running(now, _restarts(pod))
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
    restarted = _restart_clauses(pod)
    for container in _container_statuses(status):
        waiting = section(container, "state", "waiting")
        reason = text(waiting, "reason")
        if not reason or reason == CRASH_LOOP_BACK_OFF:
            # The kubelet retries a crash-looping container: its restarts say what happens.
            continue
        name = text(container, "name")
        message = f"[{name}] {describe(reason, text(waiting, 'message'))}"
        decided = _waiting_container(reason, message, waited, now, config)
        if decided is None:
            continue
        if decided.phase is not Phase.INITIALIZING:
            return decided
        if name not in restarted:  # else its restarts say it
            return phases.initializing(now, "; ".join([*restarted.values(), message]))
    return phases.initializing(
        now, "; ".join(restarted.values()) or text(ready, "reason") or "ContainersNotReady"
    )


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


def _restarts(pod: JsonObject) -> str:
    """What the kubelet restarts in ``pod``, as a reason (see :func:`_restart_clauses`)."""
    return "; ".join(_restart_clauses(pod).values())


def _restart_clauses(pod: JsonObject) -> dict[str, str]:
    """By container, in the pod's order, a clause for each container that restarted or is about
    to: how many times, how its last run ended, and what it waits for between two runs (the
    back-off), e.g. ``[main] restarted 1 time, last exit code 1 (Error), CrashLoopBackOff:
    back-off 10s restarting failed container=main pod=…``.

    An init container that completed is left out: its restarts were the pod's initialization.
    """
    rules = _RestartRules.of(pod)
    status = section(pod, "status")
    clauses = {}
    for container in _container_statuses(status):
        name = text(container, "name")
        completed = section(container, "state", "terminated")
        if (
            name in rules.init
            and name not in rules.sidecars
            and completed
            and integer(completed, "exitCode") == 0
        ):
            continue
        clause = _restart_clause(container, rules)
        if clause:
            clauses[name] = clause
    return clauses


def _restart_clause(container: JsonObject, rules: _RestartRules) -> str:
    name = text(container, "name")
    count = integer(container, "restartCount") or 0
    parts = [f"restarted {count} time{'' if count == 1 else 's'}"] if count else []
    state = section(container, "state")
    terminated = section(state, "terminated")
    waiting = section(state, "waiting")
    last = section(container, "lastState", "terminated")
    if terminated and rules.restarts(name, integer(terminated, "exitCode")):
        # The kubelet shows the exit for a moment, then restarts the container or backs off.
        parts += [f"ended with {_exit(terminated)}", f"restarting ({rules.describe(name)})"]
    elif waiting and (count or last):
        # Between two runs: in CrashLoopBackOff with its back-off, or being created again.
        parts += [f"last {_exit(last)}"] if last else []
        parts.append(describe(text(waiting, "reason"), text(waiting, "message")))
    elif count:
        ended = terminated or last
        parts += [f"last {_exit(ended)}"] if ended else []
    return f"[{name}] {', '.join(parts)}" if parts else ""


def _exit(terminated: JsonObject) -> str:
    """How a container's run ended: ``exit code 137 (OOMKilled)``."""
    reason = text(terminated, "reason")
    line = f"exit code {integer(terminated, 'exitCode')}"
    return f"{line} ({reason})" if reason else line


@dataclass(frozen=True, slots=True)
class _RestartRules:
    """Whether the kubelet restarts a container that exited, as ``pkg/kubelet/kuberuntime``
    decides it (``ShouldContainerBeRestarted``, ``computeInitContainerActions``): a native
    sidecar always; an init container that failed unless the pod's policy is ``Never``; a
    container as the pod's ``restartPolicy`` says (``Always``: whatever its exit; ``OnFailure``:
    a non-zero one). A pod being deleted restarts nothing."""

    policy: str
    init: frozenset[str]
    sidecars: frozenset[str]
    deleting: bool

    @classmethod
    def of(cls, pod: JsonObject) -> _RestartRules:
        spec = section(pod, "spec")
        init = items(spec, "initContainers")
        return cls(
            text(spec, "restartPolicy") or DEFAULT_RESTART_POLICY,
            frozenset(text(c, "name") for c in init),
            frozenset(text(c, "name") for c in init if text(c, "restartPolicy") == "Always"),
            bool(section(pod, "metadata").get("deletionTimestamp")),
        )

    def restarts(self, name: str, exit_code: int | None) -> bool:
        if self.deleting:
            return False
        if name in self.sidecars:
            return True
        if name in self.init:
            return exit_code != 0 and self.policy != "Never"
        return self.policy == "Always" or (self.policy == "OnFailure" and exit_code != 0)

    def describe(self, name: str) -> str:
        if name in self.sidecars:
            return "a sidecar: restartPolicy Always"
        return f"restartPolicy {self.policy}"


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
