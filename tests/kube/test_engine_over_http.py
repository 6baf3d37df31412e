"""The lifecycle engine through the real adapter over HTTP: against the emulator, and marked
``cluster`` against a real API server (launch, status driven through the status subresource,
external deletion, finalize with and without finalizers). Emulator-only scenarios inject the
faults a real server shows under stress: dropped watches, 410 on resume, 429, 5xx bursts."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import urllib3

from podwright.adapters.kubernetes import EventWatcher, KubernetesClient, Reflector, WatchCache
from podwright.adapters.kubernetes.retry import DEFAULT_RETRIES
from podwright.core.lifecycle import ManagerPhase, Phase
from podwright.engine.config import FINALIZER, MANAGED_BY, MANAGED_BY_LABEL, LifecycleConfig
from podwright.engine.event_index import EventIndex
from podwright.engine.kubernetes_port import NotFoundError, PatchType
from podwright.engine.plugin import TaskContext
from podwright.engine.plugin_manager import PluginManager, Transition
from podwright.engine.plugins import PodPlugin
from tests.k8s_emulator import Emulator, Fault
from tests.kube.support import UNSCHEDULABLE, ApiServer, eventually


@dataclass
class Engine:
    api: ApiServer
    manager: PluginManager
    cache: WatchCache
    pods: Reflector
    events: Reflector
    index: EventIndex
    state: dict[str, Any] | None = None

    def round(self, task: TaskContext) -> Transition:
        transition = self.manager.handle(task, self.state, datetime.now(UTC))
        if transition.state_changed:
            self.state = transition.encoded_state()
        return transition

    def until(self, task: TaskContext, phase: Phase) -> Transition:
        def reached() -> Transition | None:
            transition = self.round(task)
            return transition if transition.info.phase is phase else None

        return eventually(reached)


def _engine(api: ApiServer, config: LifecycleConfig) -> Iterator[Engine]:
    plugin = PodPlugin()
    cache = WatchCache(plugin.trim)
    pods = Reflector(
        api.client,
        "v1",
        "Pod",
        cache,
        namespace=api.namespace,
        label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}",
        watch_timeout_seconds=30,
    ).start()
    api.client.add_cache("v1", "Pod", cache)
    index = EventIndex(ttl=config.event_ttl, max_per_object=config.events_per_object)
    events = Reflector(
        api.client,
        "events.k8s.io/v1",
        "Event",
        EventWatcher(index),
        namespace=api.namespace,
        field_selector="regarding.kind=Pod",
        watch_timeout_seconds=30,
    ).start()
    assert pods.wait_synced(20)
    assert events.wait_synced(20)
    manager = PluginManager(
        plugin, api.client, config, events=index, sleep=lambda _s: None, rng=random.Random(1)
    )
    try:
        yield Engine(api, manager, cache, pods, events, index)
    finally:
        pods.stop()
        events.stop()


@pytest.fixture
def engine(api: ApiServer) -> Iterator[Engine]:
    yield from _engine(api, LifecycleConfig())


@pytest.fixture
def engine_with_finalizer(api: ApiServer) -> Iterator[Engine]:
    yield from _engine(
        api, LifecycleConfig(inject_finalizer=True, delete_resource_on_finalize=True)
    )


@pytest.fixture
def emulated_engine(emulator_api: ApiServer) -> Iterator[Engine]:
    yield from _engine(emulator_api, LifecycleConfig())


def _task(api: ApiServer, task_id: str = "task-1") -> TaskContext:
    resource = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"annotations": {"podwright.dev/primary-container": "main"}},
        "spec": {
            "schedulerName": UNSCHEDULABLE,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.invalid/none:1"}],
        },
    }
    return TaskContext(task_id, api.namespace, resource)


def _status(phase: str, **extra: Any) -> dict[str, Any]:
    return {"status": {"phase": phase, **extra}}


def test_a_pod_is_followed_through_its_phases(engine: Engine) -> None:
    api, task = engine.api, _task(engine.api)
    launched = engine.round(task)
    assert launched.info.phase is Phase.QUEUED
    assert launched.state.manager_phase is ManagerPhase.STARTED
    ref = engine.manager.object_ref(task)
    created = api.client.get(ref)
    assert created["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    api.client.patch_status(
        ref,
        _status(
            "Pending",
            conditions=[
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "ContainersNotReady",
                    "lastTransitionTime": now,
                },
            ],
            containerStatuses=[_container("waiting", {"reason": "ContainerCreating"})],
        ),
        PatchType.MERGE,
    )
    engine.until(task, Phase.INITIALIZING)
    api.client.patch_status(
        ref,
        _status("Running", containerStatuses=[_container("running", {"startedAt": now})]),
        PatchType.MERGE,
    )
    engine.until(task, Phase.RUNNING)
    api.client.patch_status(
        ref,
        _status(
            "Running",
            containerStatuses=[
                _container(
                    "terminated",
                    {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now},
                )
            ],
        ),
        PatchType.MERGE,
    )
    done = engine.until(task, Phase.SUCCESS)
    assert done.info.version > launched.info.version
    engine.manager.finalize(task)


def _container(state: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "main",
        "image": "registry.invalid/none:1",
        "imageID": "",
        "ready": state == "running",
        "restartCount": 0,
        "state": {state: detail},
    }


def test_a_pod_deleted_behind_the_engines_back(engine: Engine) -> None:
    """Deleted with a grace period of 0 and no finalizer, the pod is gone (the API server writes
    its deletion, then removes it): once the engine's cache saw it go, the task fails
    ResourceDeletedExternally. (A round between the two writes would see it being deleted:
    ``test_a_pod_held_by_a_finalizer_and_deleted_behind_the_engines_back``.)"""
    task = _task(engine.api)
    engine.round(task)
    ref = engine.manager.object_ref(task)
    engine.api.client.delete(ref, grace_period_seconds=0)
    eventually(lambda: engine.api.gone(ref) and engine.cache.get(ref.namespace, ref.name) is None)
    failed = engine.round(task)
    assert (failed.info.phase, failed.info.reason) == (
        Phase.SYSTEM_RETRYABLE_FAILURE,
        "ResourceDeletedExternally",
    )


def test_a_pod_held_by_a_finalizer_and_deleted_behind_the_engines_back(
    engine_with_finalizer: Engine,
) -> None:
    """Deleted with a grace period of 0, the pod stays while podwright's finalizer holds it, with
    its ``deletionTimestamp`` (the API server never removes an object a finalizer holds): the
    engine sees it being deleted, not by podwright, and fails the task UnexpectedObjectDeletion
    (``core.lifecycle.deletion``); finalizing the task lets the pod go."""
    engine = engine_with_finalizer
    task = _task(engine.api)
    engine.round(task)
    ref = engine.manager.object_ref(task)
    engine.api.client.delete(ref, grace_period_seconds=0)
    assert engine.api.client.get(ref)["metadata"]["deletionGracePeriodSeconds"] == 0
    failed = engine.until(task, Phase.SYSTEM_RETRYABLE_FAILURE)
    assert failed.info.reason == "UnexpectedObjectDeletion"
    engine.manager.finalize(task)
    eventually(lambda: engine.api.gone(ref))


def test_finalize_with_a_finalizer_removes_it_and_deletes(engine_with_finalizer: Engine) -> None:
    engine = engine_with_finalizer
    task = _task(engine.api)
    engine.round(task)
    ref = engine.manager.object_ref(task)
    assert engine.api.client.get(ref)["metadata"]["finalizers"] == [FINALIZER]
    engine.manager.abort(task)
    held = engine.api.client.get(ref)
    assert held["metadata"]["deletionTimestamp"]
    engine.manager.finalize(task)

    def gone() -> bool:
        try:
            engine.api.client.get(ref)
        except NotFoundError:
            return True
        return False

    eventually(gone)


def test_finalize_without_a_finalizer_leaves_the_object(engine: Engine) -> None:
    task = _task(engine.api)
    engine.round(task)
    engine.manager.finalize(task)
    assert engine.api.client.get(engine.manager.object_ref(task))["metadata"]["name"] == "task-1"


def _event(
    api: ApiServer, pod: dict[str, Any], name: str, reason: str, note: str
) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": api.namespace},
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": "podwright.dev/tests",
        "reportingInstance": "tests",
        "action": "Binding" if reason == "Scheduled" else "Scheduling",
        "reason": reason,
        "type": "Normal" if reason == "Scheduled" else "Warning",
        "note": note,
        "regarding": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod["metadata"]["name"],
            "namespace": api.namespace,
            "uid": pod["metadata"]["uid"],
        },
    }


def test_kubernetes_events_are_attached(engine: Engine) -> None:
    api, task = engine.api, _task(engine.api)
    engine.round(task)
    pod = api.client.get(engine.manager.object_ref(task))
    api.client.create(_event(api, pod, "task-1.scheduled", "Scheduled", "assigned to node-1"))

    def attached() -> list[str]:
        return [reason.reason for reason in engine.round(task).info.additional_reasons]

    assert eventually(attached) == ["Scheduled: assigned to node-1"]
    assert engine.round(task).info.additional_reasons == ()


def test_a_failed_scheduling_event_is_attached_without_the_schedulers_stray_not_found(
    engine: Engine,
) -> None:
    # The note a v1.36 scheduler writes for a pod whose claim does not exist yet: FitError's
    # PreFilter message, then DynamicResources' PostFilter error on its missing cycle state.
    api, task = engine.api, _task(engine.api)
    engine.round(task)
    pod = api.client.get(engine.manager.object_ref(task))
    unschedulable = '0/1 nodes are available: persistentvolumeclaim "nb-work" not found.'
    api.client.create(
        _event(api, pod, "task-1.unschedulable", "FailedScheduling", f"{unschedulable} not found")
    )

    def attached() -> list[str]:
        return [reason.reason for reason in engine.round(task).info.additional_reasons]

    assert eventually(attached) == [f"FailedScheduling: {unschedulable}"]


# Emulator-only: faults a real server cannot be made to show on demand. --------------------------


def test_watch_dropped_and_resumed_without_relisting(emulated_engine: Engine) -> None:
    engine = emulated_engine
    emulator = engine.api.emulator
    assert emulator is not None
    task = _task(engine.api)
    engine.round(task)
    eventually(lambda: engine.cache.get(engine.api.namespace, "task-1"))
    lists, watches = engine.pods.lists, engine.pods.watches
    emulator.drop_watches()
    engine.api.client.patch_status(
        engine.manager.object_ref(task), _status("Running"), PatchType.MERGE
    )
    engine.until(task, Phase.RUNNING)
    assert engine.pods.watches > watches
    assert engine.pods.lists == lists
    assert emulator.requests("get") == 0  # every read came from the cache


def test_410_on_resume_relists(emulated_engine: Engine) -> None:
    engine = emulated_engine
    emulator = engine.api.emulator
    assert emulator is not None
    task = _task(engine.api)
    engine.round(task)
    eventually(lambda: engine.cache.get(engine.api.namespace, "task-1"))
    lists = engine.pods.lists
    # The watch breaks and cannot come back at once; meanwhile the pod changes and the history is
    # compacted, so the resume from the last version seen answers 410.
    emulator.inject(Fault(500, times=2, method="GET", path="/pods$"))
    emulator.drop_watches()
    engine.api.client.patch_status(
        engine.manager.object_ref(task), _status("Running"), PatchType.MERGE
    )
    emulator.store.compact()
    engine.until(task, Phase.RUNNING)
    assert engine.pods.lists > lists


@pytest.fixture
def throttled_engine(emulator_api: ApiServer) -> Iterator[tuple[Engine, list[float]]]:
    """An engine whose client records the Retry-After waits it makes instead of sleeping."""
    assert emulator_api.emulator is not None
    waits: list[float] = []
    client = KubernetesClient.for_host(emulator_api.emulator.url, sleep=waits.append)
    try:
        for engine in _engine(replace(emulator_api, client=client), LifecycleConfig()):
            yield engine, waits
    finally:
        client.close()


def test_429_with_retry_after_on_create_is_retried_by_the_client(
    throttled_engine: tuple[Engine, list[float]],
) -> None:
    """The client retries what the server did not do and asked to be asked again (client-go's
    ``checkWait``, rest/request.go): the round creates the pod, once."""
    engine, waits = throttled_engine
    emulator = engine.api.emulator
    assert emulator is not None
    emulator.inject(Fault(429, times=2, method="POST", retry_after=3))
    creates = emulator.requests("create")
    task = _task(engine.api)
    assert engine.round(task).info.phase is Phase.QUEUED
    assert waits == [3, 3]
    assert emulator.requests("create") == creates + 3
    assert engine.api.client.list_objects("v1", "Pod", namespace=engine.api.namespace)[0]


def test_429_the_client_gave_up_on_is_retried_by_the_engine_after_retry_after(
    throttled_engine: tuple[Engine, list[float]],
) -> None:
    engine, waits = throttled_engine
    emulator = engine.api.emulator
    assert emulator is not None
    emulator.inject(Fault(429, times=DEFAULT_RETRIES.max_retries + 1, method="POST", retry_after=3))
    task = _task(engine.api)
    throttled = engine.round(task)
    assert throttled.info.phase is Phase.NOT_READY
    assert throttled.retry_after is not None
    assert throttled.retry_after >= timedelta(seconds=3)
    assert waits == [3] * DEFAULT_RETRIES.max_retries
    assert engine.round(task).info.phase is Phase.QUEUED


def test_5xx_burst_on_create_is_retried_then_fails(emulated_engine: Engine) -> None:
    engine = emulated_engine
    emulator = engine.api.emulator
    assert emulator is not None
    emulator.inject(Fault(503, times=2, method="POST"))
    task = _task(engine.api, "burst")
    assert engine.round(task).info.phase is Phase.NOT_READY
    assert engine.round(task).info.phase is Phase.NOT_READY
    assert engine.round(task).info.phase is Phase.QUEUED
    attempts = LifecycleConfig().launch_attempts
    emulator.inject(Fault(500, times=attempts, method="POST"))
    other = _task(engine.api, "doomed")
    engine.state = None
    phases = [engine.round(other).info.phase for _ in range(attempts)]
    assert phases == [Phase.NOT_READY] * (attempts - 1) + [Phase.SYSTEM_RETRYABLE_FAILURE]


def test_5xx_burst_on_the_watch_is_survived(emulated_engine: Engine) -> None:
    engine = emulated_engine
    emulator = engine.api.emulator
    assert emulator is not None
    emulator.inject(Fault(500, times=3, method="GET", path="/pods$"))
    emulator.drop_watches()
    task = _task(engine.api)
    engine.round(task)
    engine.api.client.patch_status(
        engine.manager.object_ref(task), _status("Running"), PatchType.MERGE
    )
    eventually(
        lambda: (
            (engine.cache.get(engine.api.namespace, "task-1") or {}).get("status", {}).get("phase")
            == "Running"
        )
    )


def test_engine_restart_in_the_middle_of_a_launch(emulated_engine: Engine) -> None:
    engine = emulated_engine
    emulator = engine.api.emulator
    assert emulator is not None
    task = _task(engine.api)
    engine.manager.handle(task, None, datetime.now(UTC))  # created, but the state was never saved
    restarted = PluginManager(
        PodPlugin(), engine.api.client, LifecycleConfig(), sleep=lambda _s: None
    )
    transition = restarted.handle(task, None, datetime.now(UTC))
    assert transition.info.phase is Phase.QUEUED
    assert transition.state.manager_phase is ManagerPhase.STARTED
    pods, _ = engine.api.client.list_objects("v1", "Pod", namespace=engine.api.namespace)
    assert [p["metadata"]["name"] for p in pods] == ["task-1"]


def test_a_reflector_whose_server_went_away_stops_cleanly() -> None:
    emulator = Emulator().start()
    client = KubernetesClient.for_host(emulator.url)
    reflector = Reflector(client, "v1", "Pod", WatchCache(), namespace="default").start()
    try:
        assert reflector.wait_synced(20)
        eventually(lambda: reflector.watches > 0)
        emulator.stop()  # the watch stream breaks; the reflector backs off and retries
        eventually(lambda: reflector.error.startswith("cannot reach the Kubernetes API server"))
        # Stopping while the stream it last held is closed already (a race the executor met).
        reflector._streams.append(urllib3.HTTPResponse(body=b"", preload_content=False))
    finally:
        reflector.stop()
        client.close()
        emulator.stop()
