"""The plugin manager against the in-memory Kubernetes port (fake clock, no sleeping)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podwright.core.lifecycle import ErrorKind, ManagerPhase, Phase, encode_state
from podwright.engine.config import FINALIZER, LifecycleConfig
from podwright.engine.event_index import EventIndex, EventKey, ObjectEvent
from podwright.engine.kubernetes_port import (
    ApiConnectionError,
    ConflictError,
    ForbiddenError,
    InvalidError,
    NotFoundError,
    ObjectRef,
    PatchType,
    ServerError,
    ThrottledError,
    TooLargeError,
)
from podwright.engine.plugin import (
    AbortAction,
    AbortOverride,
    OwnerReference,
    PluginProperties,
    TaskContext,
)
from podwright.engine.plugin_manager import PluginManager, Transition
from podwright.engine.plugins import JobPlugin, PodPlugin
from tests.engine.conftest import NAMESPACE
from tests.engine.fake_kubernetes import FakeKubernetes, resource_of

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def podresource_of(**annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "rendered-name",
            "labels": {"from-object": "object", "shared": "object"},
            "annotations": {
                "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
                **annotations,
            },
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    }


def task(task_id: str = "task-1", **kwargs: Any) -> TaskContext:
    return TaskContext(task_id, NAMESPACE, kwargs.pop("resource", podresource_of()), **kwargs)


class Harness:
    def __init__(
        self, kube: FakeKubernetes, config: LifecycleConfig | None = None, plugin: Any = None
    ) -> None:
        self.kube = kube
        self.events = EventIndex(ttl=timedelta(hours=1), max_per_object=50)
        self.sleeps: list[float] = []
        self.manager = PluginManager(
            plugin or PodPlugin(),
            kube,
            config or LifecycleConfig(),
            events=self.events,
            sleep=self.sleeps.append,
            rng=random.Random(7),
        )
        self.state: dict[str, Any] | None = None

    def round(self, the_task: TaskContext, now: datetime = NOW) -> Transition:
        transition = self.manager.handle(the_task, self.state, now)
        if transition.state_changed:
            self.state = transition.encoded_state()
        return transition


def test_launch_creates_the_named_labelled_object_and_starts(kube: FakeKubernetes) -> None:
    harness = Harness(kube)
    owner = OwnerReference("podwright.dev/v1", "Task", "t", "uid-1")
    the_task = task(
        labels={"shared": "task", "from-task": "task"}, annotations={"note": "task"}, owner=owner
    )
    transition = harness.round(the_task)
    assert transition.info.phase is Phase.QUEUED
    assert transition.state.manager_phase is ManagerPhase.STARTED
    assert transition.info.version == 1
    created = kube.store.get(_pods(), NAMESPACE, "task-1")
    metadata = created["metadata"]
    assert metadata["labels"] == {
        "app.kubernetes.io/managed-by": "podwright",
        "from-object": "object",
        "shared": "task",
        "from-task": "task",
    }
    # config defaults < the object's own < the task's
    assert metadata["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "true"
    assert metadata["annotations"]["note"] == "task"
    assert metadata["annotations"]["podwright.dev/task-id"] == "task-1"
    assert metadata["ownerReferences"] == [owner.to_json()]
    assert "finalizers" not in metadata
    assert kube.calls == {"create": 1}


def _pods() -> Any:
    return resource_of("v1", "Pod")


def test_default_annotation_applies_when_the_object_has_none(kube: FakeKubernetes) -> None:
    resource = podresource_of()
    del resource["metadata"]["annotations"]
    Harness(kube).round(task(resource=resource))
    annotations = kube.store.get(_pods(), NAMESPACE, "task-1")["metadata"]["annotations"]
    assert annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


@pytest.mark.parametrize(
    ("inject", "plugin_disables", "expected"),
    [(True, False, [FINALIZER]), (True, True, None), (False, False, None)],
)
def test_finalizer_injection(
    kube: FakeKubernetes, inject: bool, plugin_disables: bool, expected: list[str] | None
) -> None:
    plugin = PodPlugin()
    if plugin_disables:
        plugin.properties = PluginProperties(disable_finalizer_injection=True)
    Harness(kube, LifecycleConfig(inject_finalizer=inject), plugin).round(task())
    assert kube.store.get(_pods(), NAMESPACE, "task-1")["metadata"].get("finalizers") == expected


def test_owner_reference_disabled_by_the_plugin(kube: FakeKubernetes) -> None:
    plugin = PodPlugin()
    plugin.properties = PluginProperties(disable_owner_references=True)
    owner = OwnerReference("podwright.dev/v1", "Task", "t", "uid-1")
    Harness(kube, plugin=plugin).round(task(owner=owner))
    assert "ownerReferences" not in kube.store.get(_pods(), NAMESPACE, "task-1")["metadata"]


def test_relaunch_after_a_lost_create_is_idempotent(kube: FakeKubernetes) -> None:
    first = Harness(kube)
    first.round(task())
    restarted = Harness(kube)  # the state of the first round was never written
    transition = restarted.round(task())
    assert transition.info.phase is Phase.QUEUED
    assert transition.state.manager_phase is ManagerPhase.STARTED
    assert len(kube.store.list(_pods(), NAMESPACE)[0]) == 1


def _quota(kube: FakeKubernetes, hard: dict[str, str]) -> None:
    kube.store.create(
        resource_of("v1", "ResourceQuota"),
        NAMESPACE,
        {"metadata": {"name": "q"}, "spec": {"hard": hard}},
    )


def test_quota_exceeded_waits_with_backoff_per_kind_and_namespace(kube: FakeKubernetes) -> None:
    _quota(kube, {"pods": "1"})
    harness = Harness(kube)
    assert harness.round(task("running")).info.phase is Phase.QUEUED
    waiting = Harness(kube)
    first = waiting.round(task("waiting"))
    assert first.info.phase is Phase.WAITING_FOR_RESOURCES
    assert first.retry_after == timedelta(seconds=10)
    assert first.state.manager_phase is ManagerPhase.NOT_STARTED
    creates = kube.calls["create"]
    # Another task of the same kind and namespace does not even ask while the window lasts.
    other = PluginManager(
        PodPlugin(),
        kube,
        LifecycleConfig(),
        sleep=lambda _s: None,
        quota_backoff=waiting.manager._quota_backoff,
    )
    assert (
        other.handle(task("other"), None, NOW + timedelta(seconds=5)).info.phase
        is Phase.WAITING_FOR_RESOURCES
    )
    assert kube.calls["create"] == creates
    # After the window the next refusal doubles it.
    second = waiting.round(task("waiting"), NOW + timedelta(seconds=11))
    assert second.retry_after == timedelta(seconds=20)
    # When the quota has room again, the launch goes through and the backoff resets.
    kube.store.delete(_pods(), NAMESPACE, "running")
    third = waiting.round(task("waiting"), NOW + timedelta(seconds=40))
    assert third.info.phase is Phase.QUEUED


def test_request_above_the_quotas_hard_limit_fails_permanently(kube: FakeKubernetes) -> None:
    _quota(kube, {"pods": "5", "limits.cpu": "2"})
    resource = podresource_of()
    resource["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "4"}}
    transition = Harness(kube).round(task(resource=resource))
    assert transition.info.phase is Phase.PERMANENT_FAILURE
    assert transition.info.reason == "ResourceRequestsExceedLimits"
    assert transition.info.error is not None
    assert "limits.cpu: requested 4, limit 2" in transition.info.error.message


def test_containers_that_leave_out_what_the_quota_tracks_fail_permanently_naming_them(
    kube: FakeKubernetes,
) -> None:
    """The quota admission plugin refuses the pod before comparing amounts ("must specify"):
    retrying cannot help, so the task fails at once, naming each container and what it lacks."""
    _quota(kube, {"requests.cpu": "2", "limits.memory": "1Gi"})
    resource = podresource_of()
    resource["spec"]["initContainers"] = [
        {"name": "clone", "image": "git", "resources": {"requests": {"cpu": "100m"}}}
    ]
    transition = Harness(kube).round(task(resource=resource))
    assert transition.info.phase is Phase.PERMANENT_FAILURE
    assert transition.info.reason == "ResourcesNotSpecified"
    assert transition.state.manager_phase is ManagerPhase.NOT_STARTED
    assert transition.info.error is not None
    message = transition.info.error.message
    assert "ResourceQuota q needs every container to specify" in message
    assert "clone (limits.memory); main (limits.memory, requests.cpu)" in message
    assert "failed quota: q: must specify limits.memory for: clone,main" in message


@pytest.mark.parametrize(
    ("error", "phase", "code"),
    [
        (ForbiddenError("denied by policy", status=403), Phase.RETRYABLE_FAILURE, "Forbidden"),
        (
            InvalidError("spec.containers: Required value", status=422),
            Phase.PERMANENT_FAILURE,
            "BadTaskSpecification",
        ),
        (InvalidError("bad request", status=400), Phase.PERMANENT_FAILURE, "BadTaskSpecification"),
        (TooLargeError("too large", status=413), Phase.PERMANENT_FAILURE, "EntityTooLarge"),
    ],
)
def test_create_refusals(kube: FakeKubernetes, error: Exception, phase: Phase, code: str) -> None:
    kube.fail("create", error)  # type: ignore[arg-type]
    transition = Harness(kube).round(task())
    assert transition.info.phase is phase
    assert transition.info.reason == code
    assert transition.state.manager_phase is ManagerPhase.NOT_STARTED


def test_system_errors_are_retried_with_backoff_then_fail_after_the_configured_attempts(
    kube: FakeKubernetes,
) -> None:
    harness = Harness(kube, LifecycleConfig(launch_attempts=3))
    kube.fail(
        "create",
        ServerError("etcd", status=500),
        ApiConnectionError("reset"),
        ServerError("x", status=503),
    )
    first = harness.round(task())
    assert first.info.phase is Phase.NOT_READY
    assert first.retry_after is not None
    second = harness.round(task())
    assert second.info.phase is Phase.NOT_READY
    assert second.state.launch_failures == 2
    third = harness.round(task())
    assert third.info.phase is Phase.SYSTEM_RETRYABLE_FAILURE
    assert third.info.reason == "LaunchFailed"


def test_a_success_resets_the_count_of_system_errors(kube: FakeKubernetes) -> None:
    harness = Harness(kube)
    kube.fail("create", ServerError("etcd", status=500), ServerError("etcd", status=500))
    harness.round(task())
    harness.round(task())
    launched = harness.round(task())
    assert launched.info.phase is Phase.QUEUED
    assert launched.state.launch_failures == 0


def test_throttling_waits_for_retry_after_without_counting(kube: FakeKubernetes) -> None:
    harness = Harness(kube)
    for _ in range(5):
        kube.fail("create", ThrottledError("slow down", retry_after=7))
        transition = harness.round(task())
        assert transition.info.phase is Phase.NOT_READY
        assert transition.retry_after is not None
        assert transition.retry_after >= timedelta(seconds=7)
    assert harness.round(task()).info.phase is Phase.QUEUED


def _launched(
    kube: FakeKubernetes, config: LifecycleConfig | None = None
) -> tuple[Harness, TaskContext]:
    harness = Harness(kube, config)
    the_task = task()
    harness.round(the_task)
    return harness, the_task


def test_check_follows_status_with_growing_versions_and_writes_only_changes(
    kube: FakeKubernetes,
) -> None:
    harness, the_task = _launched(kube)
    ref = harness.manager.object_ref(the_task)
    versions = []
    steps: list[tuple[dict[str, Any], Phase]] = [
        ({"phase": "Pending"}, Phase.QUEUED),
        (
            {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
            Phase.INITIALIZING,
        ),
        ({"phase": "Running"}, Phase.RUNNING),
        ({"phase": "Succeeded"}, Phase.SUCCESS),
    ]
    for status, phase in steps:
        kube.set_status(ref, status)
        transition = harness.round(the_task)
        assert transition.info.phase is phase
        versions.append(transition.info.version)
        again = harness.round(the_task)
        assert not again.state_changed
        assert again.info.version == transition.info.version
    assert versions == sorted(set(versions))
    # Steady state: the watch cache answered every read.
    assert kube.calls == {"create": 1}


def test_a_terminal_task_costs_no_request(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube)
    kube.set_status(harness.manager.object_ref(the_task), {"phase": "Succeeded"})
    harness.round(the_task)
    kube.store.delete(_pods(), NAMESPACE, "task-1")
    kube.calls.clear()
    transition = harness.round(the_task)
    assert transition.info.phase is Phase.SUCCESS
    assert not kube.calls


def test_cache_miss_falls_back_to_a_direct_read(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube)
    kube.cache_enabled = False
    assert harness.round(the_task).info.phase is Phase.QUEUED
    assert kube.calls["get"] == 1


def test_object_deleted_behind_the_engines_back(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube)
    kube.store.delete(_pods(), NAMESPACE, "task-1")
    transition = harness.round(the_task)
    assert transition.info.phase is Phase.SYSTEM_RETRYABLE_FAILURE
    assert transition.info.reason == "ResourceDeletedExternally"
    assert transition.info.error is not None
    assert transition.info.error.kind is ErrorKind.SYSTEM


def test_object_being_deleted_while_running(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube, LifecycleConfig(inject_finalizer=True))
    kube.set_status(harness.manager.object_ref(the_task), {"phase": "Running"})
    kube.store.delete(_pods(), NAMESPACE, "task-1")
    transition = harness.round(the_task)
    assert transition.info.reason == "UnexpectedObjectDeletion"
    assert transition.info.phase is Phase.SYSTEM_RETRYABLE_FAILURE


def test_a_read_error_keeps_the_phase_and_retries(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube)
    kube.cache_enabled = False
    kube.fail("get", ServerError("boom", status=500))
    transition = harness.round(the_task)
    assert transition.info.phase is Phase.QUEUED
    assert not transition.state_changed
    assert transition.retry_after is not None


def test_new_events_are_attached_once_and_bump_the_version(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube)
    key = EventKey(NAMESPACE, "Pod", "task-1")
    base = NOW - timedelta(seconds=30)
    harness.events.add(key, ObjectEvent("e1", base, base, "Scheduled", "assigned to node-1"), NOW)
    harness.events.add(
        key, ObjectEvent("e2", base, base + timedelta(seconds=1), "Pulling", "image"), NOW
    )
    first = harness.round(the_task)
    assert [r.reason for r in first.info.additional_reasons] == [
        "Scheduled: assigned to node-1",
        "Pulling: image",
    ]
    assert first.state_changed
    quiet = harness.round(the_task)
    assert quiet.info.additional_reasons == ()
    assert not quiet.state_changed
    harness.events.add(
        key, ObjectEvent("e3", base, base + timedelta(seconds=2), "Pulled", "image"), NOW
    )
    later = harness.round(the_task)
    assert [r.reason for r in later.info.additional_reasons] == ["Pulled: image"]
    assert later.info.version == quiet.info.version + 1


def test_corrupted_state_is_a_permanent_system_failure_with_cleanup(kube: FakeKubernetes) -> None:
    manager = Harness(kube).manager
    transition = manager.handle(task(), {"version": 99}, NOW)
    assert transition.info.phase is Phase.PERMANENT_FAILURE
    assert transition.info.reason == "CorruptedPluginState"
    assert transition.info.cleanup_on_failure
    assert transition.info.error is not None
    assert transition.info.error.kind is ErrorKind.SYSTEM
    assert transition.state_changed
    assert (
        manager.handle(task(), encode_state(transition.state), NOW).info.phase
        is Phase.PERMANENT_FAILURE
    )


def test_abort_deletes_and_ignores_an_object_already_gone(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube)
    harness.manager.abort(the_task)
    with pytest.raises(Exception, match="not found"):
        kube.store.get(_pods(), NAMESPACE, "task-1")
    harness.manager.abort(the_task)  # again: nothing to do, no error


def test_abort_leaves_finalizers_alone(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube, LifecycleConfig(inject_finalizer=True))
    harness.manager.abort(the_task)
    held = kube.store.get(_pods(), NAMESPACE, "task-1")
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == [FINALIZER]


class _PatchingPlugin(JobPlugin):
    def __init__(self, delete_on_error: bool) -> None:
        self.delete_on_error = delete_on_error

    def abort_override(self, task: TaskContext, ref: Any) -> AbortOverride:
        return AbortOverride(
            AbortAction.PATCH,
            patch={"spec": {"suspend": True}},
            delete_on_error=self.delete_on_error,
        )


def _job_task() -> TaskContext:
    resource = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}
            }
        },
    }
    return TaskContext("job-1", NAMESPACE, resource)


def _job_round_after_a_refused_pod(kube: FakeKubernetes, refusal: str) -> Transition:
    """The round after the Job controller recorded its ``FailedCreate`` Warning (``refusal``)
    on the task's Job: how a refusal of the Job's pod reaches podwright."""
    harness = Harness(kube, plugin=JobPlugin())
    the_task = _job_task()
    harness.round(the_task)
    event = ObjectEvent("e1", NOW, NOW, "FailedCreate", f"Error creating: {refusal}", "Warning")
    harness.events.add(EventKey(NAMESPACE, "Job", "job-1"), event, NOW)
    return harness.round(the_task, NOW + timedelta(seconds=1))


def test_a_job_whose_pod_a_quota_refuses_for_good_fails_with_cleanup(
    kube: FakeKubernetes,
) -> None:
    """As the refusal of a pod of its own would, naming the containers; the Job is cleaned up,
    for its controller would try again for ever."""
    refusal = (
        'pods "job-1-x7k2p" is forbidden: failed quota: strict: must specify limits.cpu for: m'
    )
    transition = _job_round_after_a_refused_pod(kube, refusal)
    assert transition.info.phase is Phase.PERMANENT_FAILURE
    assert transition.info.reason == "ResourcesNotSpecified"
    assert transition.info.cleanup_on_failure
    assert transition.info.error is not None
    message = transition.info.error.message
    assert message.startswith("ResourceQuota strict needs every container to specify"), message
    assert "these do not: m (limits.cpu)" in message
    assert message.endswith(f"(Error creating: {refusal})")
    attached = [r.reason for r in transition.info.additional_reasons]
    assert attached == [f"FailedCreate: Error creating: {refusal}"]


def test_a_job_whose_pod_the_quota_has_no_room_for_yet_waits_with_the_event(
    kube: FakeKubernetes,
) -> None:
    refusal = (
        'pods "job-1-x7k2p" is forbidden: exceeded quota: compute, requested: limits.cpu=1, '
        "used: limits.cpu=2, limited: limits.cpu=2"
    )
    transition = _job_round_after_a_refused_pod(kube, refusal)
    assert transition.info.phase is Phase.QUEUED
    assert transition.info.error is None
    attached = [r.reason for r in transition.info.additional_reasons]
    assert attached == [f"FailedCreate: Error creating: {refusal}"]


def test_abort_override_patches_instead_of_deleting(kube: FakeKubernetes) -> None:
    harness = Harness(kube, plugin=_PatchingPlugin(delete_on_error=False))
    the_task = _job_task()
    harness.round(the_task)
    harness.manager.abort(the_task)
    assert (
        kube.store.get(resource_of("batch/v1", "Job"), NAMESPACE, "job-1")["spec"]["suspend"]
        is True
    )


@pytest.mark.parametrize("delete_on_error", [True, False])
def test_abort_override_failure(kube: FakeKubernetes, delete_on_error: bool) -> None:
    harness = Harness(kube, plugin=_PatchingPlugin(delete_on_error=delete_on_error))
    the_task = _job_task()
    harness.round(the_task)
    kube.fail("patch", ServerError("no", status=500))
    if delete_on_error:
        harness.manager.abort(the_task)
        assert kube.calls["delete"] == 1
    else:
        with pytest.raises(ServerError):
            harness.manager.abort(the_task)
        assert kube.calls["delete"] == 0


def test_finalize_removes_our_finalizer_even_when_injection_is_now_off(
    kube: FakeKubernetes,
) -> None:
    harness, the_task = _launched(kube, LifecycleConfig(inject_finalizer=True))
    ref = harness.manager.object_ref(the_task)
    kube.patch(ref, {"metadata": {"finalizers": [FINALIZER, "other.io/keep"]}}, PatchType.MERGE)
    later = Harness(kube, LifecycleConfig(inject_finalizer=False))
    later.manager.finalize(the_task)
    assert kube.store.get(_pods(), NAMESPACE, "task-1")["metadata"]["finalizers"] == [
        "other.io/keep"
    ]


def test_finalize_retries_conflicts_with_jittered_backoff(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube, LifecycleConfig(inject_finalizer=True))
    kube.fail("patch", ConflictError("modified", status=409), ConflictError("modified", status=409))
    harness.manager.finalize(the_task)
    assert not kube.store.get(_pods(), NAMESPACE, "task-1")["metadata"].get("finalizers")
    assert len(harness.sleeps) == 2
    assert 0.5 <= harness.sleeps[0] <= 1.0
    assert 1.0 <= harness.sleeps[1] <= 2.0


def test_finalize_with_a_stale_cache_conflicts_then_succeeds(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube, LifecycleConfig(inject_finalizer=True))
    stale = kube.cached(harness.manager.object_ref(the_task))
    kube.set_status(harness.manager.object_ref(the_task), {"phase": "Succeeded"})
    kube.cached = lambda _ref: stale  # type: ignore[method-assign]
    harness.manager.finalize(the_task)
    assert kube.calls["patch"] == 2
    assert kube.calls["get"] == 1


@pytest.mark.parametrize(
    ("delete_configured", "plugin_disables", "deleted"),
    [(True, False, True), (True, True, False), (False, False, False)],
)
def test_finalize_deletes_when_configured_and_allowed(
    kube: FakeKubernetes, delete_configured: bool, plugin_disables: bool, deleted: bool
) -> None:
    plugin = PodPlugin()
    if plugin_disables:
        plugin.properties = PluginProperties(disable_delete_on_finalize=True)
    harness = Harness(
        kube,
        LifecycleConfig(inject_finalizer=True, delete_resource_on_finalize=delete_configured),
        plugin,
    )
    the_task = task()
    harness.round(the_task)
    harness.manager.finalize(the_task)
    remaining = kube.store.list(_pods(), NAMESPACE)[0]
    assert (not remaining) is deleted


def test_finalize_of_a_missing_object_is_done(kube: FakeKubernetes) -> None:
    harness = Harness(kube, LifecycleConfig(delete_resource_on_finalize=True))
    harness.manager.finalize(task())
    assert kube.calls["patch"] == 0
    assert kube.calls["delete"] == 0


def test_finalize_gives_up_after_the_configured_attempts(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube, LifecycleConfig(inject_finalizer=True, finalize_attempts=2))
    kube.fail("patch", *[ConflictError("modified", status=409)] * 2)
    with pytest.raises(ConflictError):
        harness.manager.finalize(the_task)


def test_the_resource_must_be_the_plugins_kind(kube: FakeKubernetes) -> None:
    with pytest.raises(ValueError, match=r"plugin pod\.v1 launches v1/Pod"):
        Harness(kube).round(_job_task())


def test_missing_object_on_finalize_patch_is_done(kube: FakeKubernetes) -> None:
    harness, the_task = _launched(kube, LifecycleConfig(inject_finalizer=True))
    kube.fail("patch", NotFoundError("gone", status=404))
    harness.manager.finalize(the_task)


def test_a_job_no_controller_has_written_reads_as_its_launch_left_it(kube: FakeKubernetes) -> None:
    """A Job untouched since its create (an empty status) is still Queued with the launch's
    reason, which names it: the Job plugin's "job created; no pod yet" would say no more, and
    cost every task a status write. The Job controller's first write moves it on."""
    harness = Harness(kube, plugin=JobPlugin())
    the_task = _job_task()
    launched = harness.round(the_task)
    assert (launched.info.phase, launched.info.reason) == (
        Phase.QUEUED,
        f"Job {NAMESPACE}/job-1 created",
    )
    untouched = harness.round(the_task, NOW + timedelta(seconds=1))
    assert (untouched.info.phase, untouched.info.reason) == (Phase.QUEUED, launched.info.reason)
    assert not untouched.state_changed
    kube.set_status(
        ObjectRef("batch/v1", "Job", NAMESPACE, "job-1"), {"startTime": "2026-11-21T12:00:01Z"}
    )
    started = harness.round(the_task, NOW + timedelta(seconds=2))
    assert (started.info.phase, started.info.reason) == (
        Phase.QUEUED,
        "job started, but has no pod (see the job's events)",
    )
