"""The plugin manager: one task's Kubernetes resource, from launch to cleanup.

Each reconcile round calls :meth:`PluginManager.handle` with the task's persisted state. A task not
yet started is launched: its resource is built by the plugin, given a name derived from the task id,
podwright's labels and annotations, an owner reference and (when configured) podwright's finalizer,
and created. A started task is checked: its object is read from the watch cache (a direct GET
only when the cache has not seen it yet), the plugin decides its phase, and Kubernetes events that
arrived since the last round are attached. The state that comes back is written only when it
changed.

:meth:`abort` stops a task (the plugin's override, else a delete); :meth:`finalize` removes
podwright's finalizer and, when configured, deletes the resource. Both are safe to repeat.

How each create refusal is classified (Flyte's rules, extended):

=====================================  =============================================================
AlreadyExists                          success: a restarted engine relaunches the same name
quota exceeded                         WaitingForResources, backing off per (kind, namespace);
                                       PermanentFailure ResourceRequestsExceedLimits when the
                                       request alone exceeds the quota's hard limit
other 403                              RetryableFailure (the user's permissions or an admission
                                       policy)
400, 422                               PermanentFailure BadTaskSpecification
413                                    PermanentFailure EntityTooLarge
429                                    NotReady, retried after Retry-After (not counted)
anything else                          NotReady, retried with jittered backoff; after
                                       ``launch_attempts`` in a row, SystemRetryableFailure
=====================================  =============================================================
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from podwright.core.lifecycle import (
    CorruptedPluginStateError,
    ErrorKind,
    ManagerPhase,
    Phase,
    PhaseInfo,
    PluginState,
    ReasonInfo,
    decode_state,
    encode_state,
    phases,
)
from podwright.core.lifecycle.names import task_object_name
from podwright.core.lifecycle.objects import section
from podwright.core.lifecycle.quota import parse_quota_refusal
from podwright.engine.backoff import BackoffKey, QuotaBackoff, jittered_delay
from podwright.engine.config import (
    FINALIZER,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    TASK_ID_ANNOTATION,
    LifecycleConfig,
)
from podwright.engine.event_index import EventIndex, EventKey
from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    KubernetesError,
    KubernetesPort,
    NotFoundError,
    ObjectRef,
    PatchType,
    QuotaExceededError,
    ThrottledError,
    TooLargeError,
)
from podwright.engine.plugin import AbortAction, Plugin, TaskContext


@dataclass(frozen=True, slots=True)
class Transition:
    """The outcome of one round: the phase to report, the state to persist, and how long to wait
    at least before the next round (a backoff, a Retry-After), if any."""

    info: PhaseInfo
    state: PluginState
    state_changed: bool
    retry_after: timedelta | None = None

    def encoded_state(self) -> dict[str, Any]:
        return encode_state(self.state)


class PluginManager:
    """Launches, follows, aborts and finalizes the resources of one plugin's tasks."""

    def __init__(
        self,
        plugin: Plugin,
        kubernetes: KubernetesPort,
        config: LifecycleConfig,
        *,
        events: EventIndex | None = None,
        quota_backoff: QuotaBackoff | None = None,
        sleep: Callable[[float], None],
        rng: random.Random | None = None,
    ) -> None:
        self.plugin = plugin
        self._kubernetes = kubernetes
        self._config = config
        self._events = events
        self._quota_backoff = quota_backoff or QuotaBackoff(
            base=config.quota_backoff_base, cap=config.quota_backoff_max
        )
        self._sleep = sleep
        self._rng = rng or random.Random()

    def object_ref(self, task: TaskContext) -> ObjectRef:
        """The object the task's resource is created as and read back by."""
        name = task_object_name(task.task_id, self.plugin.properties.generated_name_max_length)
        return self.plugin.build_identity(task, name)

    # Reconcile -----------------------------------------------------------------------------

    def handle(
        self, task: TaskContext, persisted: Mapping[str, Any] | None, now: datetime
    ) -> Transition:
        """One reconcile round for ``task``, whose persisted plugin state is ``persisted``."""
        try:
            state = decode_state(persisted)
        except CorruptedPluginStateError as exc:
            info = phases.permanent_failure(
                now, "CorruptedPluginState", str(exc), kind=ErrorKind.SYSTEM, cleanup=True
            )
            broken = PluginState(ManagerPhase.STARTED, info.phase, 1, info.reason)
            return Transition(replace(info, version=1), broken, state_changed=True)
        if state.phase.is_terminal:
            info = PhaseInfo(state.phase, state.phase_version, state.reason)
            return Transition(info, state, state_changed=False)
        if state.manager_phase is ManagerPhase.NOT_STARTED:
            return self._launch(task, state, now)
        return self._check(task, state, now)

    def _launch(self, task: TaskContext, state: PluginState, now: datetime) -> Transition:
        ref = self.object_ref(task)
        backoff_key = BackoffKey(ref.kind, ref.namespace)
        blocked_until = self._quota_backoff.blocked_until(backoff_key, now)
        if blocked_until is not None:
            info = phases.waiting_for_resources(
                now, f"the quota for {ref.kind} in namespace {ref.namespace} is full; waiting"
            )
            return self._settle(state, info, now, retry_after=blocked_until - now)
        resource = self._prepare(task, ref)
        try:
            self._kubernetes.create(resource)
        except AlreadyExistsError:
            pass  # created by an earlier round whose outcome was lost: carry on with it
        except QuotaExceededError as exc:
            return self._quota_refused(state, backoff_key, exc, now)
        except ForbiddenError as exc:
            return self._settle(state, phases.retryable_failure(now, "Forbidden", exc.message), now)
        except InvalidError as exc:
            info = phases.permanent_failure(now, "BadTaskSpecification", exc.message)
            return self._settle(state, info, now)
        except TooLargeError as exc:
            info = phases.permanent_failure(now, "EntityTooLarge", exc.message)
            return self._settle(state, info, now)
        except ThrottledError as exc:
            info = phases.not_ready(now, f"the API server is throttling requests: {exc.message}")
            wait = self._retry_delay(0, exc)
            return self._settle(state, info, now, retry_after=wait)
        except KubernetesError as exc:
            failures = state.launch_failures + 1
            if failures >= self._config.launch_attempts:
                info = phases.system_retryable_failure(
                    now,
                    "LaunchFailed",
                    f"creating {ref} failed {failures} times in a row; last: {exc.message}",
                )
                return self._settle(state, info, now, launch_failures=failures)
            info = phases.not_ready(now, f"creating {ref} failed, will retry: {exc.message}")
            wait = self._retry_delay(failures - 1, exc)
            return self._settle(state, info, now, launch_failures=failures, retry_after=wait)
        self._quota_backoff.admitted(backoff_key)
        info = phases.queued(now, f"{ref} created")
        return self._settle(state, info, now, manager_phase=ManagerPhase.STARTED)

    def _quota_refused(
        self, state: PluginState, key: BackoffKey, exc: QuotaExceededError, now: datetime
    ) -> Transition:
        refusal = parse_quota_refusal(exc.message)
        over = refusal.exceeds_hard_limit() if refusal is not None else []
        if over:
            info = phases.permanent_failure(
                now,
                "ResourceRequestsExceedLimits",
                f"the request exceeds the quota's hard limit ({'; '.join(over)}): {exc.message}",
            )
            return self._settle(state, info, now)
        until = self._quota_backoff.refused(key, now)
        info = phases.waiting_for_resources(now, f"resource quota exceeded: {exc.message}")
        return self._settle(state, info, now, retry_after=until - now)

    def _prepare(self, task: TaskContext, ref: ObjectRef) -> dict[str, Any]:
        resource = self.plugin.build_resource(task)
        metadata = dict(section(resource, "metadata"))
        for server_owned in ("generateName", "resourceVersion", "uid", "creationTimestamp"):
            metadata.pop(server_owned, None)
        metadata["name"] = ref.name
        metadata["namespace"] = ref.namespace
        metadata["labels"] = {
            **self._config.default_labels,
            **section(metadata, "labels"),
            **task.labels,
            MANAGED_BY_LABEL: MANAGED_BY,
        }
        metadata["annotations"] = {
            **self._config.default_annotations,
            **section(metadata, "annotations"),
            **task.annotations,
            TASK_ID_ANNOTATION: task.task_id,
        }
        properties = self.plugin.properties
        if task.owner is not None and not properties.disable_owner_references:
            owners = list(metadata.get("ownerReferences") or [])
            if not any(o.get("uid") == task.owner.uid for o in owners):
                owners.append(task.owner.to_json())
            metadata["ownerReferences"] = owners
        if self._config.inject_finalizer and not properties.disable_finalizer_injection:
            finalizers = list(metadata.get("finalizers") or [])
            if FINALIZER not in finalizers:
                finalizers.append(FINALIZER)
            metadata["finalizers"] = finalizers
        resource["metadata"] = metadata
        return resource

    def _check(self, task: TaskContext, state: PluginState, now: datetime) -> Transition:
        ref = self.object_ref(task)
        try:
            observed = self._kubernetes.cached(ref)
            if observed is None:
                observed = self._kubernetes.get(ref)
        except (NotFoundError, GoneError) as exc:
            info = phases.system_retryable_failure(
                now, "ResourceDeletedExternally", f"resource not found, name [{ref}]: {exc.message}"
            )
            return self._settle(state, info, now, events_of=ref)
        except KubernetesError as exc:
            # The object could not be read this round: report what was known, and retry.
            info = PhaseInfo(state.phase, state.phase_version, state.reason)
            return Transition(info, state, False, self._retry_delay(0, exc))
        info = self.plugin.phase(observed, state, now, self._config)
        deleting = section(observed, "metadata").get("deletionTimestamp")
        if deleting and not info.phase.is_terminal:
            info = phases.system_retryable_failure(
                now,
                "UnexpectedObjectDeletion",
                f"{ref} is being deleted (since {deleting}) while its task is "
                f"{info.phase.value if info.phase is not Phase.UNDEFINED else state.phase.value}",
            )
        return self._settle(state, info, now, events_of=ref)

    def _settle(
        self,
        state: PluginState,
        info: PhaseInfo,
        now: datetime,
        *,
        manager_phase: ManagerPhase | None = None,
        launch_failures: int = 0,
        retry_after: timedelta | None = None,
        events_of: ObjectRef | None = None,
    ) -> Transition:
        """Version ``info`` against ``state``, attach new events, and build the new state."""
        if info.phase is Phase.UNDEFINED:
            info = PhaseInfo(state.phase, reason=state.reason, occurred_at=now)
        attached: list[ReasonInfo] = []
        last_created, last_recorded = state.last_event_created, state.last_event_recorded
        if events_of is not None and self._events is not None:
            key = EventKey(events_of.namespace, events_of.kind, events_of.name)
            for event in self._events.list(key, last_created, last_recorded):
                attached.append(ReasonInfo(event.describe(), event.created))
                last_created, last_recorded = event.created, event.recorded
        changed = (info.phase, info.reason) != (state.phase, state.reason) or bool(attached)
        version = state.phase_version + 1 if changed else state.phase_version
        info = replace(info, version=version, additional_reasons=tuple(attached))
        new_state = PluginState(
            manager_phase=manager_phase or state.manager_phase,
            phase=info.phase,
            phase_version=version,
            reason=info.reason,
            last_event_created=last_created,
            last_event_recorded=last_recorded,
            launch_failures=launch_failures,
        )
        return Transition(info, new_state, new_state != state, retry_after)

    def _retry_delay(self, attempt: int, exc: KubernetesError) -> timedelta:
        base = self._config.system_error_backoff_base
        delay = jittered_delay(attempt, base, base * 64, self._rng)
        if isinstance(exc, ThrottledError) and exc.retry_after is not None:
            delay = max(delay, timedelta(seconds=exc.retry_after))
        return delay

    # Cleanup -------------------------------------------------------------------------------

    def abort(self, task: TaskContext) -> None:
        """Stop the task's resource: the plugin's abort override, else a delete.

        A resource already gone is not an error; finalizers are left for :meth:`finalize`.
        """
        ref = self.object_ref(task)
        override = self.plugin.abort_override(task, ref)
        try:
            if override is None or override.action is AbortAction.DELETE:
                self._kubernetes.delete(ref)
            elif override.action is AbortAction.PATCH:
                self._kubernetes.patch(ref, override.patch, override.patch_type)
            else:
                if override.update is None:
                    raise ValueError(f"plugin {self.plugin.plugin_id}: no update to abort with")
                current = self._kubernetes.get(ref)
                self._kubernetes.replace(ref, override.update(current))
        except (NotFoundError, GoneError):
            return
        except KubernetesError:
            if override is None or not override.delete_on_error:
                raise
            self._delete_if_present(ref)

    def finalize(self, task: TaskContext) -> None:
        """Remove podwright's finalizer from the task's resource (whatever the configuration says
        now), then delete the resource when configured to and the plugin allows it.

        The finalizer is removed by a merge patch conditional on the object's resourceVersion;
        a conflict re-reads the object and retries after a jittered, growing delay.
        """
        ref = self.object_ref(task)
        observed: Mapping[str, Any] | None = self._kubernetes.cached(ref)
        for attempt in range(self._config.finalize_attempts):
            try:
                if observed is None:
                    observed = self._kubernetes.get(ref)
                metadata = section(observed, "metadata")
                finalizers = list(metadata.get("finalizers") or [])
                if FINALIZER in finalizers:
                    remaining = [f for f in finalizers if f != FINALIZER]
                    patch = {
                        "metadata": {
                            "finalizers": remaining,
                            "resourceVersion": metadata.get("resourceVersion"),
                        }
                    }
                    self._kubernetes.patch(ref, patch, PatchType.MERGE)
                break
            except (NotFoundError, GoneError):
                self._forget_events(ref)
                return
            except ConflictError:
                if attempt + 1 == self._config.finalize_attempts:
                    raise
                base = self._config.system_error_backoff_base
                self._sleep(jittered_delay(attempt, base, base * 16, self._rng).total_seconds())
                observed = None
        if (
            self._config.delete_resource_on_finalize
            and not self.plugin.properties.disable_delete_on_finalize
        ):
            self._delete_if_present(ref)
        self._forget_events(ref)

    def delete(self, task: TaskContext) -> None:
        """Delete the task's resource, if it is there."""
        self._delete_if_present(self.object_ref(task))

    def _delete_if_present(self, ref: ObjectRef) -> None:
        with contextlib.suppress(NotFoundError, GoneError):
            self._kubernetes.delete(ref)

    def _forget_events(self, ref: ObjectRef) -> None:
        if self._events is not None:
            self._events.forget(EventKey(ref.namespace, ref.kind, ref.name))
