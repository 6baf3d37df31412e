"""The plugin manager: one task's Kubernetes resource, from launch to cleanup.

Each reconcile round calls :meth:`PluginManager.handle` with the task's persisted state. A task not
yet started is launched: first what its pods need (its claims: ``TaskContext.needs``), then its
resource, built by the plugin, given a name derived from the task id, podwright's labels and
annotations (the task's labels on its pod templates too), an owner reference and (when configured)
podwright's finalizer. A started task is checked: its object is read from the watch cache (a
direct GET only when the cache has not seen it yet), the plugin decides its phase (never going
back to an earlier one without a cause the plugin names: ``phases.hold_progress``; a resource
without pods whose controller's pod create a quota refused for good fails as that create would:
``quota.pod_creation_refused``), and Kubernetes events that arrived since the last round are
attached. A resource someone else deleted fails the task as the platform's failure, not the
user's: ResourceDeletedExternally when it is gone, UnexpectedObjectDeletion while it is being
deleted, unless it had succeeded or its failure predates the deletion
(``core.lifecycle.deletion``). What depends on the resource (its Services:
``TaskContext.dependents``) is created once, owned by it: right after the resource, or in a later
round when that fails. The state that comes back is written only when it changed.

:meth:`abort` stops a task (the plugin's override, else a delete in the foreground, or in the
background for a Pod); :meth:`abort_progress` then tells whether the resource has really stopped;
:meth:`finalize` removes podwright's finalizer and, when configured, deletes the resource. All are
safe to repeat. A claim a task needed is left alone by all three: it outlives the task.

How each create refusal is classified (Flyte's rules, extended), for the resource and what its
pods need alike:

=====================================  =============================================================
AlreadyExists, the task's own object   success: a restarted engine relaunches the same name
AlreadyExists, another's resource      PermanentFailure ResourceNameTaken
AlreadyExists, another's claim         success: claims are shared by name; the task uses it, and
                                       an attached reason says so
404 namespace not found                PermanentFailure NamespaceNotFound, naming the namespace
other 404                              PermanentFailure KindNotServed: the cluster does not serve
                                       the kind (its CRD is not installed); names what serves it
quota exceeded                         WaitingForResources, backing off per (kind, namespace);
                                       PermanentFailure ResourceRequestsExceedLimits when the
                                       request alone exceeds the quota's hard limit
403 quota's "must specify"             PermanentFailure ResourcesNotSpecified: containers leave
                                       out resources the quota tracks; names each container and
                                       what it leaves out
other 403                              RetryableFailure (the user's permissions or an admission
                                       policy)
400, 422                               PermanentFailure BadTaskSpecification
413                                    PermanentFailure EntityTooLarge
429                                    NotReady, retried after Retry-After (not counted)
no answer (ApiConnectionError)         NotReady, retried after ``launch_backoff_base`` doubling up
                                       to ``launch_backoff_max``, jittered; after
                                       ``launch_attempts`` in a row, SystemRetryableFailure
                                       ApiServerUnreachable, naming the server and the cause
anything else (5xx...)                 the same, failing as SystemRetryableFailure LaunchFailed
=====================================  =============================================================

The pods a controller creates (a Job's) are refused the same way, but podwright learns of it from
the controller's ``FailedCreate`` Warning on the resource: while the resource has no pod, a "must
specify" refusal, or a request above the quota's hard limit, fails the task permanently as above,
and the resource is deleted (its controller would retry for ever); "exceeded quota" leaves it
waiting, the event attached.

A create that may have reached the server unanswered (a 5xx, a connection broken after the request
was sent) may have created the resource: the state says so (``maybe_created``). A task that was
never started and whose creates were all refused or never sent provably has no resource: its
cleanup needs no request (``PluginState.never_created``).

A dependent (a Service) that cannot be created fails the task permanently when the API refuses it
(CompanionRefused) or another object holds its name (CompanionNameTaken), cleaning the resource up;
a quota refusal or a system error is retried in a later round.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Mapping, Sequence
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
from podwright.core.lifecycle.companions import carries, task_label_value
from podwright.core.lifecycle.deletion import deletion_of, judge_deletion
from podwright.core.lifecycle.names import task_object_name
from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.core.lifecycle.phases import as_launched, hold_progress
from podwright.core.lifecycle.quota import pod_creation_refused, quota_failure
from podwright.engine.backoff import BackoffKey, QuotaBackoff, jittered_delay
from podwright.engine.config import (
    FINALIZER,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    TASK_ID_ANNOTATION,
    LifecycleConfig,
)
from podwright.engine.event_index import EventIndex, EventKey, ObjectEvent
from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ApiConnectionError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    KubernetesError,
    KubernetesPort,
    NamespaceNotFoundError,
    NotFoundError,
    ObjectRef,
    PatchType,
    QuotaExceededError,
    ServerError,
    ThrottledError,
    TooLargeError,
)
from podwright.engine.plugin import AbortAction, Plugin, TaskContext


@dataclass(frozen=True, slots=True)
class Transition:
    """The outcome of one round: the phase to report, the state to persist, how long to wait
    at least before the next round (a backoff, a Retry-After), if any, and the error the round
    met and carried on from (the executor reports an unreachable API server)."""

    info: PhaseInfo
    state: PluginState
    state_changed: bool
    retry_after: timedelta | None = None
    api_error: KubernetesError | None = None

    def encoded_state(self) -> dict[str, Any]:
        return encode_state(self.state)


@dataclass(frozen=True, slots=True)
class AbortProgress:
    """Whether an aborted resource has stopped, the reason to report either way, and the error
    that kept the resource from being read this time (the wait goes on)."""

    stopped: bool
    reason: str
    error: KubernetesError | None = None


API_SERVER_UNREACHABLE = "ApiServerUnreachable"
"""The error code of a launch that never got an answer from the API server."""


class _NameTakenError(Exception):
    """An object of the name the task needs exists, and is not the task's."""


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
            broken = PluginState(
                ManagerPhase.STARTED, info.phase, 1, info.reason, maybe_created=True
            )
            return Transition(replace(info, version=1), broken, state_changed=True)
        if state.phase.is_terminal:
            info = PhaseInfo(state.phase, state.phase_version, state.reason)
            return Transition(info, state, state_changed=False)
        if state.manager_phase is ManagerPhase.NOT_STARTED:
            transition = self._launch(task, state, now)
        else:
            transition = self._check(task, state, now)
        return replace(transition, state_changed=transition.state != state)

    def _launch(self, task: TaskContext, state: PluginState, now: datetime) -> Transition:
        ref = self.object_ref(task)
        blocked_until = self._quota_backoff.blocked_until(BackoffKey(ref.kind, ref.namespace), now)
        if blocked_until is not None:
            info = phases.waiting_for_resources(
                now, f"the quota for {ref.kind} in namespace {ref.namespace} is full; waiting"
            )
            return self._settle(state, info, now, retry_after=blocked_until - now)
        notes: list[ReasonInfo] = []
        creating = ref
        try:
            if not state.needs_created:
                for need in task.needs:
                    creating = ObjectRef.of(need)
                    notes.extend(self._create_need(need, task, now))
            creating = ref
            created = self._create_resource(task, ref)
        except KubernetesError as exc:
            # What its pods need is there once the resource's own create was tried.
            state = replace(state, needs_created=state.needs_created or creating == ref)
            return self._create_failed(
                state, exc, now, ref=creating, is_resource=creating == ref, notes=notes
            )
        except _NameTakenError as exc:
            info = phases.permanent_failure(now, "ResourceNameTaken", str(exc))
            return self._settle(state, info, now, notes=notes)
        self._quota_backoff.admitted(BackoffKey(ref.kind, ref.namespace))
        info = phases.queued(now, f"{ref} created")
        started = replace(
            state,
            manager_phase=ManagerPhase.STARTED,
            launch_failures=0,
            maybe_created=True,
            needs_created=True,
        )
        if not task.dependents:
            return self._settle(started, info, now, notes=notes)
        # The resource's uid is known now: its dependents (Services) exist as soon as it does,
        # even for a pod that ends before the next round. Errors worth retrying leave them to it.
        try:
            refused = self._create_dependents(task, ref, created, now)
        except KubernetesError:
            return self._settle(started, info, now, notes=notes)
        if refused is not None:
            return self._settle(started, refused, now, notes=notes)
        return self._settle(replace(started, dependents_created=True), info, now, notes=notes)

    def _create_need(self, need: JsonObject, task: TaskContext, now: datetime) -> list[ReasonInfo]:
        """Create what the task's pods need; a note for the user when an object of its name
        exists that another task or a person made (the task uses it as it is)."""
        try:
            self._kubernetes.create(need)
        except AlreadyExistsError:
            ref = ObjectRef.of(need)
            if carries(self._kubernetes.get(ref), task.labels):
                return []  # created by an earlier round whose outcome was lost
            return [
                ReasonInfo(
                    f"{ref} already exists and was not created by this task: the task uses it "
                    "as it is",
                    now,
                )
            ]
        return []

    def _create_resource(self, task: TaskContext, ref: ObjectRef) -> JsonObject:
        """Create the resource; the object as the server has it (ours from an earlier round
        whose outcome was lost, when it exists already)."""
        try:
            return self._kubernetes.create(self._prepare(task, ref))
        except AlreadyExistsError:
            existing = self._kubernetes.cached(ref) or self._kubernetes.get(ref)
            owner = section(section(existing, "metadata"), "annotations").get(TASK_ID_ANNOTATION)
            if owner != task.task_id:
                raise _NameTakenError(
                    f"{ref} already exists and is not this task's (its {TASK_ID_ANNOTATION} "
                    f"annotation is {owner!r}); podwright does not take over another's object"
                ) from None
            # Created by an earlier round whose outcome was lost: carry on with it.
            return existing

    def _create_failed(
        self,
        state: PluginState,
        exc: KubernetesError,
        now: datetime,
        *,
        ref: ObjectRef,
        is_resource: bool,
        notes: Sequence[ReasonInfo],
    ) -> Transition:
        """The outcome of a launch whose create of ``ref`` (the resource, or something its pods
        need) failed with ``exc``, classified as the module's table says."""
        refused = replace(state, launch_failures=0)  # an answer ends a run of system errors
        if isinstance(exc, NamespaceNotFoundError):
            namespace = exc.namespace or ref.namespace
            message = (
                f"namespace {namespace!r} does not exist: create it, or run the task in another "
                f"namespace ({exc.message})"
            )
            info = phases.permanent_failure(now, "NamespaceNotFound", message)
        elif isinstance(exc, NotFoundError):
            # A create is never 404 for the object itself: the server has no such resource type.
            info = phases.permanent_failure(now, "KindNotServed", self._not_served(ref, exc))
        elif isinstance(exc, QuotaExceededError):
            return self._quota_refused(
                refused, BackoffKey(ref.kind, ref.namespace), exc, now, notes
            )
        elif isinstance(exc, ForbiddenError):
            info = quota_failure(exc.message, now) or phases.retryable_failure(
                now, "Forbidden", exc.message
            )
        elif isinstance(exc, InvalidError):
            info = phases.permanent_failure(now, "BadTaskSpecification", exc.message)
        elif isinstance(exc, TooLargeError):
            info = phases.permanent_failure(now, "EntityTooLarge", exc.message)
        elif isinstance(exc, ThrottledError):
            info = phases.not_ready(now, f"the API server is throttling requests: {exc.message}")
            wait = self._retry_delay(0, exc)
            return self._settle(refused, info, now, retry_after=wait, notes=notes)
        else:
            return self._launch_failed(
                state, exc, now, ref=ref, is_resource=is_resource, notes=notes
            )
        return self._settle(refused, info, now, notes=notes)

    def _launch_failed(
        self,
        state: PluginState,
        exc: KubernetesError,
        now: datetime,
        *,
        ref: ObjectRef,
        is_resource: bool,
        notes: Sequence[ReasonInfo],
    ) -> Transition:
        """A system error: retried with backoff, until ``launch_attempts`` in a row fail."""
        failures = state.launch_failures + 1
        state = replace(
            state,
            launch_failures=failures,
            maybe_created=state.maybe_created or (is_resource and _may_have_created(exc)),
        )
        if failures >= self._config.launch_attempts:
            if isinstance(exc, ApiConnectionError):
                code = API_SERVER_UNREACHABLE
                message = f"{exc.message}; gave up after {failures} attempts"
            else:
                code = "LaunchFailed"
                message = f"creating {ref} failed {failures} times in a row; last: {exc.message}"
            info = phases.system_retryable_failure(now, code, message)
            return self._settle(state, info, now, notes=notes, api_error=exc)
        info = phases.not_ready(now, f"creating {ref} failed, will retry: {exc.message}")
        wait = jittered_delay(
            failures - 1,
            self._config.launch_backoff_base,
            self._config.launch_backoff_max,
            self._rng,
        )
        return self._settle(state, info, now, retry_after=wait, notes=notes, api_error=exc)

    def _not_served(self, ref: ObjectRef, exc: KubernetesError) -> str:
        served_by = self.plugin.properties.served_by if ref.kind == self.plugin.kind else ""
        needs = f": install {served_by}, or" if served_by else ";"
        return (
            f"the cluster does not serve {ref.api_version} {ref.kind}{needs} run the workload on "
            f"a cluster that does ({exc.message})"
        )

    def _quota_refused(
        self,
        state: PluginState,
        key: BackoffKey,
        exc: QuotaExceededError,
        now: datetime,
        notes: Sequence[ReasonInfo],
    ) -> Transition:
        failure = quota_failure(exc.message, now)
        if failure is not None:
            return self._settle(state, failure, now, notes=notes)
        until = self._quota_backoff.refused(key, now)
        info = phases.waiting_for_resources(now, f"resource quota exceeded: {exc.message}")
        return self._settle(state, info, now, retry_after=until - now, notes=notes)

    def _prepare(self, task: TaskContext, ref: ObjectRef) -> dict[str, Any]:
        resource = self.plugin.build_resource(task)
        for template in self.plugin.pod_templates(resource):
            template_metadata = template.setdefault("metadata", {})
            template_metadata["labels"] = {**section(template_metadata, "labels"), **task.labels}
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
            return Transition(info, state, False, self._retry_delay(0, exc), exc)
        pods = self.pods_of(task.namespace, task.task_id)
        info = self.plugin.phase(observed, state, now, self._config, pods)
        info = pod_creation_refused(info, lambda: self._indexed_events(ref), now)
        deletion = deletion_of(observed, ref.kind)
        if deletion is not None:
            # Not podwright's: an abort never comes here (the executor's abort path).
            info = judge_deletion(
                info,
                deletion,
                self.plugin.failed_at(observed),
                subject=str(ref),
                reached=state.phase,
                now=now,
            )
        info = as_launched(
            state.phase, state.reason, info, status_written=bool(section(observed, "status"))
        )
        info = hold_progress(state.phase, info)
        if info.phase.is_terminal or state.dependents_created or not task.dependents:
            return self._settle(state, info, now, events_of=ref)
        try:
            refused = self._create_dependents(task, ref, observed, now)
        except KubernetesError as exc:
            # A quota, throttling or system error: the dependents are tried again next round.
            wait = self._retry_delay(0, exc)
            return self._settle(state, info, now, events_of=ref, retry_after=wait, api_error=exc)
        if refused is not None:
            return self._settle(state, refused, now, events_of=ref)
        return self._settle(replace(state, dependents_created=True), info, now, events_of=ref)

    def pods_of(self, namespace: str, task_id: str) -> list[JsonObject]:
        """The task's pods as the port's watch cache holds them, for a plugin that reads them
        (none when it does not, or no cache answers): what its phase reads, and what the
        executor's fingerprint of the task holds."""
        if not self.plugin.follows_pods:
            return []
        label, value = self._config.task_id_label, task_label_value(task_id)
        return self._kubernetes.cached_pods(namespace, label, value) or []

    def _create_dependents(
        self, task: TaskContext, ref: ObjectRef, observed: JsonObject, now: datetime
    ) -> PhaseInfo | None:
        """Create what depends on the resource, owned by it; the failure that ends the task when
        one is refused or its name is another's, else None. Errors worth retrying are raised."""
        owner = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            "uid": text(section(observed, "metadata"), "uid"),
        }
        for dependent in task.dependents:
            metadata = dict(section(dependent, "metadata"))
            metadata["ownerReferences"] = [*(metadata.get("ownerReferences") or []), owner]
            body = {**dependent, "metadata": metadata}
            target = ObjectRef.of(body)
            try:
                self._kubernetes.create(body)
            except AlreadyExistsError:
                if not carries(self._kubernetes.get(target), task.labels):
                    return phases.permanent_failure(
                        now,
                        "CompanionNameTaken",
                        f"{target} already exists and is not this task's: another task or a "
                        "person made it; podwright does not take it over",
                        cleanup=True,
                    )
            except (InvalidError, TooLargeError) as exc:
                return self._companion_refused(target, exc, now)
            except ForbiddenError as exc:
                if isinstance(exc, QuotaExceededError):
                    raise
                return self._companion_refused(target, exc, now)
        return None

    def _companion_refused(self, ref: ObjectRef, exc: KubernetesError, now: datetime) -> PhaseInfo:
        return phases.permanent_failure(
            now, "CompanionRefused", f"creating {ref} was refused: {exc.message}", cleanup=True
        )

    def _settle(
        self,
        state: PluginState,
        info: PhaseInfo,
        now: datetime,
        *,
        retry_after: timedelta | None = None,
        events_of: ObjectRef | None = None,
        notes: Sequence[ReasonInfo] = (),
        api_error: KubernetesError | None = None,
    ) -> Transition:
        """Version ``info`` against ``state`` (whose launch fields the caller already set),
        attach ``notes`` and new events, and build the new state (whether it changed is
        :meth:`handle`'s to tell, against the state it read)."""
        if info.phase is Phase.UNDEFINED:
            info = PhaseInfo(state.phase, reason=state.reason, occurred_at=now)
        attached = list(notes)
        last_created, last_recorded = state.last_event_created, state.last_event_recorded
        if events_of is not None:
            events, last_created, last_recorded = self._new_events(events_of, state)
            attached.extend(events)
        changed = (info.phase, info.reason) != (state.phase, state.reason) or bool(attached)
        version = state.phase_version + 1 if changed else state.phase_version
        info = replace(info, version=version, additional_reasons=tuple(attached))
        new_state = replace(
            state,
            phase=info.phase,
            phase_version=version,
            reason=info.reason,
            last_event_created=last_created,
            last_event_recorded=last_recorded,
        )
        return Transition(info, new_state, new_state != state, retry_after, api_error)

    def _new_events(
        self, ref: ObjectRef, state: PluginState
    ) -> tuple[list[ReasonInfo], datetime | None, datetime | None]:
        """The events of ``ref`` indexed since ``state``'s last, and the new last times."""
        last_created, last_recorded = state.last_event_created, state.last_event_recorded
        attached: list[ReasonInfo] = []
        if self._events is not None:
            for event in self._events.list(_event_key(ref), last_created, last_recorded):
                attached.append(ReasonInfo(event.describe(), event.created))
                last_created, last_recorded = event.created, event.recorded
        return attached, last_created, last_recorded

    def _indexed_events(self, ref: ObjectRef) -> list[ObjectEvent]:
        """Every event of ``ref`` the index keeps, oldest first."""
        return [] if self._events is None else self._events.list(_event_key(ref))

    def late_events(
        self, task: TaskContext, state: PluginState, now: datetime
    ) -> Transition | None:
        """The events of a finished task's resource that arrived after its last round (the
        event watch lags behind the object's), attached to its final phase report without a new
        phase version; None when there are none. The executor asks before it finalizes."""
        if state.never_created:
            return None
        attached, last_created, last_recorded = self._new_events(self.object_ref(task), state)
        if not attached:
            return None
        info = PhaseInfo(
            state.phase,
            state.phase_version,
            state.reason,
            occurred_at=now,
            additional_reasons=tuple(attached),
        )
        new_state = replace(
            state, last_event_created=last_created, last_event_recorded=last_recorded
        )
        return Transition(info, new_state, state_changed=True)

    def _retry_delay(self, attempt: int, exc: KubernetesError) -> timedelta:
        base = self._config.system_error_backoff_base
        delay = jittered_delay(attempt, base, base * 64, self._rng)
        if isinstance(exc, ThrottledError) and exc.retry_after is not None:
            delay = max(delay, timedelta(seconds=exc.retry_after))
        return delay

    # Cleanup -------------------------------------------------------------------------------

    def abort(self, task: TaskContext) -> None:
        """Stop the task's resource: the plugin's abort override, else a delete (propagated as
        the plugin says: in the foreground unless it is a Pod).

        A resource already gone is not an error; finalizers are left for :meth:`finalize`.
        Whether the resource has stopped is :meth:`abort_progress`'s to tell.
        """
        ref = self.object_ref(task)
        override = self.plugin.abort_override(task, ref)
        try:
            if override is None or override.action is AbortAction.DELETE:
                self._kubernetes.delete(ref, propagation=self.plugin.properties.abort_propagation)
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

    def abort_progress(self, task: TaskContext, since: datetime, now: datetime) -> AbortProgress:
        """Whether the resource :meth:`abort` stopped at ``since`` has stopped by ``now``: it is
        gone, or the plugin judges the deleted object stopped (``Plugin.stopped``). The wait is
        bounded by the pods' termination grace period plus the configured margin; past it the
        abort counts as done, and the reason says the resource did not confirm it. An error
        reading the object before then leaves the wait on, and comes back with it."""
        ref = self.object_ref(task)
        grace = self.plugin.stop_grace(task.resource)
        deadline = since + grace + self._config.abort_margin
        waiting = (
            f"aborting: waiting for {self.plugin.stop_subject} to stop (grace {_seconds(grace)})"
        )
        try:
            observed = self._kubernetes.cached(ref) or self._kubernetes.get(ref)
        except (NotFoundError, GoneError):
            return AbortProgress(True, "aborted on request")
        except KubernetesError as exc:
            if now < deadline:
                return AbortProgress(False, waiting, exc)
            return AbortProgress(
                True, f"aborted on request; could not confirm that {ref} stopped: {exc.message}"
            )
        if self.plugin.stopped(observed):
            return AbortProgress(True, "aborted on request")
        if now >= deadline:
            return AbortProgress(
                True,
                f"aborted on request; {ref} did not confirm that {self.plugin.stop_subject} "
                f"stopped within {_seconds(deadline - since)} (the grace period of "
                f"{_seconds(grace)} and a margin of {_seconds(self._config.abort_margin)})",
            )
        return AbortProgress(False, waiting)

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
            self._events.forget(_event_key(ref))


def _event_key(ref: ObjectRef) -> EventKey:
    return EventKey(ref.namespace, ref.kind, ref.name)


def _may_have_created(exc: KubernetesError) -> bool:
    """Whether a create that failed with ``exc`` may still have created its object: a server
    error (a timeout after the write, say), or a request sent that got no answer."""
    if isinstance(exc, ApiConnectionError):
        return exc.may_have_reached
    return isinstance(exc, ServerError) or exc.status is None


def _seconds(duration: timedelta) -> str:
    return f"{round(duration.total_seconds())} s"
