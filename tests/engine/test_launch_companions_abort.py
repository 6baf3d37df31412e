"""The plugin manager's launch of what a task's pods need and its resource, its dependents, how it
classifies a missing namespace and an unreachable API server, how it keeps progress, and how it
tells that an aborted resource has stopped (in-memory port, fake clock)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from podwright.core.lifecycle import ManagerPhase, Phase, PluginState, decode_state
from podwright.engine.config import LifecycleConfig
from podwright.engine.kubernetes_port import (
    ApiConnectionError,
    InvalidError,
    NotFoundError,
    ObjectRef,
    PatchType,
    ServerError,
)
from podwright.engine.plugin import Plugin, TaskContext
from podwright.engine.plugins import JobPlugin, KnativeServicePlugin, KubeflowJobPlugin, PodPlugin
from tests.engine.conftest import NAMESPACE
from tests.engine.fake_kubernetes import FakeKubernetes, resource_of
from tests.engine.test_plugin_manager import NOW, Harness, podresource_of

LABELS = {"podwright.dev/task-id": "task-1"}
SERVER = "https://10.0.0.1:6443"


def claim(name: str = "work", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}},
    }


def service(name: str = "task-1", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"selector": {"podwright.dev/workload": "nb", **LABELS}},
    }


def a_task(resource: dict[str, Any] | None = None, **companions: Any) -> TaskContext:
    return TaskContext(
        "task-1", NAMESPACE, resource or podresource_of(), labels=LABELS, **companions
    )


def _state(harness: Harness) -> PluginState:
    return decode_state(harness.state)


# What the pods need comes first ------------------------------------------------------------------


def test_a_launch_creates_what_the_pods_need_before_the_resource(kube: FakeKubernetes) -> None:
    harness = Harness(kube)
    launched = harness.round(a_task(needs=(claim(**LABELS),)))
    assert launched.info.phase is Phase.QUEUED
    assert kube.created == ["PersistentVolumeClaim/work", "Pod/task-1"]
    work = kube.store.get(resource_of("v1", "PersistentVolumeClaim"), NAMESPACE, "work")
    assert "ownerReferences" not in work["metadata"]
    assert launched.info.additional_reasons == ()


def test_a_claim_of_an_earlier_round_is_the_tasks_own(kube: FakeKubernetes) -> None:
    kube.create(claim(**LABELS))  # created by a round whose outcome was lost
    launched = Harness(kube).round(a_task(needs=(claim(**LABELS),)))
    assert launched.info.phase is Phase.QUEUED
    assert launched.info.additional_reasons == ()


def test_a_claim_someone_else_made_is_used_and_the_user_is_told(kube: FakeKubernetes) -> None:
    kube.create(claim())
    launched = Harness(kube).round(a_task(needs=(claim(**LABELS),)))
    assert launched.info.phase is Phase.QUEUED
    assert [r.reason for r in launched.info.additional_reasons] == [
        f"PersistentVolumeClaim {NAMESPACE}/work already exists and was not created by this "
        "task: the task uses it as it is"
    ]


def test_what_the_pods_need_is_created_once_even_when_the_resource_waits(
    kube: FakeKubernetes,
) -> None:
    kube.store.create(
        resource_of("v1", "ResourceQuota"),
        NAMESPACE,
        {"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}}},
    )
    Harness(kube).round(TaskContext("first", NAMESPACE, podresource_of()))
    harness = Harness(kube)
    the_task = a_task(needs=(claim(**LABELS),))
    waiting = harness.round(the_task)
    assert waiting.info.phase is Phase.WAITING_FOR_RESOURCES
    assert _state(harness).needs_created
    creates = kube.calls["create"]
    harness.round(the_task, NOW + timedelta(seconds=11))
    assert kube.calls["create"] == creates + 1  # the pod again, not the claim


def test_an_object_of_the_resources_name_that_is_not_the_tasks_is_not_taken_over(
    kube: FakeKubernetes,
) -> None:
    squatter = podresource_of()
    squatter["metadata"] = {"name": "task-1", "annotations": {"podwright.dev/task-id": "other"}}
    kube.create({**squatter, "metadata": {**squatter["metadata"], "namespace": NAMESPACE}})
    failed = Harness(kube).round(a_task())
    assert failed.info.phase is Phase.PERMANENT_FAILURE
    assert failed.info.reason == "ResourceNameTaken"


def test_a_missing_namespace_fails_the_task_for_good_naming_it(kube: FakeKubernetes) -> None:
    the_task = TaskContext("task-1", "nowhere", podresource_of(), labels=LABELS)
    failed = Harness(kube).round(the_task)
    assert failed.info.phase is Phase.PERMANENT_FAILURE
    assert failed.info.reason == "NamespaceNotFound"
    assert failed.info.error is not None
    assert failed.info.error.message == (
        "namespace 'nowhere' does not exist: create it, or run the task in another namespace "
        '(namespaces "nowhere" not found)'
    )
    assert _never_created(failed.state)


@pytest.mark.parametrize(
    ("resource", "plugin", "served_by"),
    [
        pytest.param(
            lambda: copy.deepcopy(PYTORCH),
            lambda: KubeflowJobPlugin("PyTorchJob"),
            "install the Kubeflow training operator (its kubeflow.org/v1 CRDs), or",
            id="kubeflow",
        ),
        pytest.param(
            lambda: copy.deepcopy(KNATIVE),
            KnativeServicePlugin,
            "install Knative Serving (its serving.knative.dev CRDs), or",
            id="knative",
        ),
    ],
)
def test_a_kind_the_cluster_does_not_serve_fails_the_task_for_good_naming_what_serves_it(
    kube: FakeKubernetes, resource: Any, plugin: Any, served_by: str
) -> None:
    # A cluster without the CRD answers a create with 404 (the server could not find the
    # requested resource): retrying cannot help. ``kube`` serves no third-party kind.
    harness = Harness(kube, plugin=plugin())
    failed = harness.round(TaskContext("task-1", NAMESPACE, resource(), labels=LABELS))
    assert failed.info.phase is Phase.PERMANENT_FAILURE
    assert failed.info.reason == "KindNotServed"
    assert failed.info.error is not None
    assert served_by in failed.info.error.message
    assert failed.info.error.message.startswith("the cluster does not serve ")
    assert _never_created(failed.state)


def _never_created(state: PluginState) -> bool:
    return state.never_created


# An unreachable API server -----------------------------------------------------------------------


def _refused() -> ApiConnectionError:
    return ApiConnectionError(
        f"cannot reach the Kubernetes API server {SERVER}: connection refused",
        server=SERVER,
        cause="connection refused",
        may_have_reached=False,
    )


def test_an_unreachable_server_is_retried_with_backoff_then_fails_the_task_saying_why(
    kube: FakeKubernetes,
) -> None:
    config = LifecycleConfig()
    kube.fail("create", *[_refused() for _ in range(config.launch_attempts)])
    harness = Harness(kube, config)
    waits = []
    for attempt in range(config.launch_attempts - 1):
        retrying = harness.round(a_task())
        assert retrying.info.phase is Phase.NOT_READY
        assert retrying.api_error is not None
        assert retrying.retry_after is not None
        ceiling = min(config.launch_backoff_base * 2**attempt, config.launch_backoff_max)
        assert ceiling / 2 <= retrying.retry_after <= ceiling
        waits.append(retrying.retry_after)
    assert timedelta(seconds=15) <= sum(waits, timedelta()) <= timedelta(seconds=31)
    failed = harness.round(a_task())
    assert failed.info.phase is Phase.SYSTEM_RETRYABLE_FAILURE
    assert failed.info.reason == "ApiServerUnreachable"
    assert failed.info.error is not None
    assert failed.info.error.message == (
        f"cannot reach the Kubernetes API server {SERVER}: connection refused; "
        f"gave up after {config.launch_attempts} attempts"
    )
    assert failed.state.never_created


@pytest.mark.parametrize(
    ("error", "maybe_created"),
    [
        (_refused(), False),
        (ApiConnectionError("reset", server=SERVER, cause="reset", may_have_reached=True), True),
        (ServerError("etcd timeout", status=500), True),
    ],
)
def test_a_create_left_unanswered_after_it_was_sent_may_have_created_the_resource(
    kube: FakeKubernetes, error: ApiConnectionError | ServerError, maybe_created: bool
) -> None:
    kube.fail("create", error)
    retrying = Harness(kube).round(a_task())
    assert retrying.state.maybe_created is maybe_created
    assert retrying.state.never_created is not maybe_created


def test_a_need_left_unanswered_does_not_make_the_resource_maybe_created(
    kube: FakeKubernetes,
) -> None:
    kube.fail("create", ServerError("etcd timeout", status=500))
    retrying = Harness(kube).round(a_task(needs=(claim(**LABELS),)))
    assert retrying.info.phase is Phase.NOT_READY
    assert retrying.state.never_created
    assert not retrying.state.needs_created


# What depends on the resource comes after it ------------------------------------------------------


def _services(kube: FakeKubernetes) -> list[dict[str, Any]]:
    return kube.store.list(resource_of("v1", "Service"), NAMESPACE)[0]


def test_dependents_are_created_right_after_the_resource_owned_by_it(
    kube: FakeKubernetes,
) -> None:
    # Created in the launch round, with the uid the create answered: a Service exists as soon as
    # its pod does, even for a pod that ends before the next round.
    harness = Harness(kube)
    the_task = a_task(dependents=(service(**LABELS),))
    launched = harness.round(the_task)
    assert launched.info.phase is Phase.QUEUED
    assert kube.created == ["Pod/task-1", "Service/task-1"]
    pod = kube.store.get(resource_of("v1", "Pod"), NAMESPACE, "task-1")
    (exposed,) = _services(kube)
    assert exposed["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "task-1", "uid": pod["metadata"]["uid"]}
    ]
    assert _state(harness).dependents_created
    creates = kube.calls["create"]
    harness.round(the_task)
    assert kube.calls["create"] == creates


def test_a_dependent_of_an_earlier_round_is_the_tasks_own(kube: FakeKubernetes) -> None:
    kube.create(service(**LABELS))
    harness = Harness(kube)
    the_task = a_task(dependents=(service(**LABELS),))
    assert harness.round(the_task).info.phase is Phase.QUEUED
    assert harness.round(the_task).info.phase is Phase.QUEUED


def test_a_dependent_whose_name_another_holds_fails_the_task_and_cleans_up(
    kube: FakeKubernetes,
) -> None:
    kube.create(service(**{"podwright.dev/task-id": "another-task"}))
    failed = Harness(kube).round(a_task(dependents=(service(**LABELS),)))
    assert failed.info.phase is Phase.PERMANENT_FAILURE
    assert failed.info.reason == "CompanionNameTaken"
    assert failed.info.cleanup_on_failure


def test_a_dependent_the_api_refuses_fails_the_task_and_cleans_up(kube: FakeKubernetes) -> None:
    kube.fail_create_of(
        "Service", InvalidError('Service "task-1" is invalid: spec.ports', status=422)
    )
    failed = Harness(kube).round(a_task(dependents=(service(**LABELS),)))
    assert (failed.info.phase, failed.info.reason) == (Phase.PERMANENT_FAILURE, "CompanionRefused")
    assert failed.info.cleanup_on_failure


@pytest.mark.parametrize("launch_fails", [True, False], ids=["at-launch", "in-a-later-round"])
def test_a_dependent_that_meets_a_system_error_is_tried_again(
    kube: FakeKubernetes, launch_fails: bool
) -> None:
    harness = Harness(kube)
    the_task = a_task(dependents=(service(**LABELS),))
    kube.fail_create_of("Service", _refused(), *([_refused()] if launch_fails else []))
    launched = harness.round(the_task)
    assert launched.info.phase is Phase.QUEUED
    assert not _state(harness).dependents_created
    if launch_fails:
        later = harness.round(the_task)
        assert later.info.phase is Phase.QUEUED
        assert later.retry_after is not None
        assert later.api_error is not None
        assert not _state(harness).dependents_created
    harness.round(the_task)
    assert len(_services(kube)) == 1
    assert _state(harness).dependents_created


# The task's labels on every pod the resource makes ------------------------------------------------

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {},
    "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m"}]}}},
}
PYTORCH = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {},
    "spec": {
        "runPolicy": {"cleanPodPolicy": "None"},
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"metadata": {"labels": {"role": "m"}}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "p"}]}}},
        },
    },
}
KNATIVE = {
    "apiVersion": "serving.knative.dev/v1",
    "kind": "Service",
    "metadata": {},
    "spec": {
        "template": {
            "metadata": {"annotations": {"a": "b"}},
            "spec": {"containers": [{"image": "registry.invalid/none:1"}]},  # the CRD requires one
        }
    },
}


@pytest.mark.parametrize(
    ("plugin", "resource", "templates"),
    [
        (PodPlugin(), podresource_of(), [()]),
        (JobPlugin(), JOB, [("spec", "template")]),
        (
            KubeflowJobPlugin("PyTorchJob"),
            PYTORCH,
            [
                ("spec", "pytorchReplicaSpecs", "Master", "template"),
                ("spec", "pytorchReplicaSpecs", "Worker", "template"),
            ],
        ),
        (KnativeServicePlugin(), KNATIVE, [("spec", "template")]),
    ],
)
def test_the_tasks_labels_are_on_every_pod_template(
    kube: FakeKubernetes, plugin: Plugin, resource: dict[str, Any], templates: list[tuple[str, ...]]
) -> None:
    given = copy.deepcopy(resource)
    kube.serve(plugin.api_version, plugin.kind)
    Harness(kube, plugin=plugin).round(a_task(resource))
    created = kube.store.get(kube.resource(plugin.api_version, plugin.kind), NAMESPACE, "task-1")
    for path in templates:
        template: Any = created
        for key in path:
            template = template[key]
        assert template["metadata"]["labels"].items() >= LABELS.items(), path
    assert resource == given  # the task's manifest is not changed


# Progress never goes back without a cause, whichever the plugin -----------------------------------


def _conditions(**statuses: str) -> list[dict[str, str]]:
    return [{"type": kind, "status": status} for kind, status in statuses.items()]


@pytest.mark.parametrize(
    ("plugin", "resource", "statuses", "phases"),
    [
        pytest.param(
            PodPlugin(),
            podresource_of(),
            [{"phase": "Running"}, {"phase": "Pending"}],
            [Phase.RUNNING, Phase.RUNNING],
            id="pod",
        ),
        pytest.param(
            JobPlugin(),
            JOB,
            [
                {"active": 1, "ready": 1},
                {"active": 1, "ready": 0},
                {"failed": 1, "active": 0},
                {"conditions": _conditions(Suspended="True")},
            ],
            [Phase.RUNNING, Phase.RUNNING, Phase.RUNNING, Phase.QUEUED],
            id="job",
        ),
        pytest.param(
            KubeflowJobPlugin("PyTorchJob"),
            PYTORCH,
            [
                {"conditions": _conditions(Created="True", Running="True")},
                {"conditions": _conditions(Created="True", Running="False")},
                {"conditions": _conditions(Created="True", Suspended="True")},
            ],
            [Phase.RUNNING, Phase.RUNNING, Phase.QUEUED],
            id="kubeflow",
        ),
        pytest.param(
            KnativeServicePlugin(),
            KNATIVE,
            [
                {"observedGeneration": 1, "conditions": _conditions(Ready="True")},
                {"observedGeneration": 1, "conditions": _conditions(Ready="Unknown")},
            ],
            [Phase.RUNNING, Phase.RUNNING],
            id="knative",
        ),
    ],
)
def test_a_task_that_ran_is_running_until_a_cause_says_otherwise(
    kube: FakeKubernetes,
    plugin: Plugin,
    resource: dict[str, Any],
    statuses: list[dict[str, Any]],
    phases: list[Phase],
) -> None:
    kube.serve(plugin.api_version, plugin.kind)
    harness = Harness(kube, plugin=plugin)
    the_task = a_task(resource)
    harness.round(the_task)
    ref = harness.manager.object_ref(the_task)
    seen = []
    for status in statuses:
        kube.set_status(ref, status)
        seen.append(harness.round(the_task).info.phase)
    assert seen == phases


# An abort waits for the resource to stop ----------------------------------------------------------


def _bound_pod(grace: int = 30) -> dict[str, Any]:
    resource = podresource_of()
    resource["spec"].update(nodeName="node-1", terminationGracePeriodSeconds=grace)
    return resource


def test_an_aborted_pod_has_stopped_once_its_containers_have(kube: FakeKubernetes) -> None:
    harness = Harness(kube)
    the_task = a_task(_bound_pod())
    harness.round(the_task)
    ref = harness.manager.object_ref(the_task)
    kube.set_status(ref, {"phase": "Running", "containerStatuses": [_state_of("running")]})
    harness.manager.abort(the_task)
    assert kube.store.get(resource_of("v1", "Pod"), NAMESPACE, "task-1")["metadata"][
        "deletionTimestamp"
    ]
    waiting = harness.manager.abort_progress(the_task, NOW, NOW + timedelta(seconds=5))
    assert not waiting.stopped
    assert waiting.reason == "aborting: waiting for the pod's containers to stop (grace 30 s)"
    kube.set_status(ref, {"containerStatuses": [_state_of("terminated")]})
    stopped = harness.manager.abort_progress(the_task, NOW, NOW + timedelta(seconds=6))
    assert (stopped.stopped, stopped.reason) == (True, "aborted on request")


def _state_of(state: str) -> dict[str, Any]:
    return {"name": "main", "state": {state: {"exitCode": 143} if state == "terminated" else {}}}


def test_an_abort_is_recorded_anyway_after_the_grace_period_and_the_margin(
    kube: FakeKubernetes,
) -> None:
    harness = Harness(kube, LifecycleConfig(abort_margin=timedelta(seconds=10)))
    the_task = a_task(_bound_pod(grace=20))
    harness.round(the_task)
    kube.set_status(
        harness.manager.object_ref(the_task),
        {"phase": "Running", "containerStatuses": [_state_of("running")]},
    )
    harness.manager.abort(the_task)
    assert not harness.manager.abort_progress(the_task, NOW, NOW + timedelta(seconds=29)).stopped
    late = harness.manager.abort_progress(the_task, NOW, NOW + timedelta(seconds=30))
    assert late.stopped
    assert late.reason == (
        f"aborted on request; Pod {NAMESPACE}/task-1 did not confirm that the pod's containers "
        "stopped within 30 s (the grace period of 20 s and a margin of 10 s)"
    )


def test_an_aborted_job_has_stopped_once_the_garbage_collector_deleted_its_pods(
    kube: FakeKubernetes,
) -> None:
    harness = Harness(kube, plugin=JobPlugin())
    the_task = a_task(JOB)
    harness.round(the_task)
    harness.manager.abort(the_task)
    job = kube.store.get(resource_of("batch/v1", "Job"), NAMESPACE, "task-1")
    assert job["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert not harness.manager.abort_progress(the_task, NOW, NOW).stopped
    # The garbage collector, its pods gone, removes its finalizer: the Job goes.
    ref = ObjectRef("batch/v1", "Job", NAMESPACE, "task-1")
    kube.patch(ref, {"metadata": {"finalizers": []}}, PatchType.MERGE)
    assert harness.manager.abort_progress(the_task, NOW, NOW).stopped


def test_an_aborted_pod_is_deleted_in_the_background(kube: FakeKubernetes) -> None:
    harness = Harness(kube, LifecycleConfig(inject_finalizer=True))
    the_task = a_task(_bound_pod())
    harness.round(the_task)
    harness.manager.abort(the_task)
    held = kube.store.get(resource_of("v1", "Pod"), NAMESPACE, "task-1")
    assert held["metadata"]["finalizers"] == ["podwright.dev/finalizer"]


def test_an_unreadable_aborted_resource_is_waited_for_then_given_up_on(
    kube: FakeKubernetes,
) -> None:
    harness = Harness(kube)
    the_task = a_task(_bound_pod())
    harness.round(the_task)
    harness.manager.abort(the_task)
    kube.cache_enabled = False
    kube.fail("get", _refused(), _refused())
    waiting = harness.manager.abort_progress(the_task, NOW, NOW + timedelta(seconds=1))
    assert not waiting.stopped
    assert isinstance(waiting.error, ApiConnectionError)
    late = harness.manager.abort_progress(the_task, NOW, NOW + timedelta(minutes=5))
    assert late.stopped
    assert late.reason.startswith(f"aborted on request; could not confirm that Pod {NAMESPACE}")


def test_an_abort_of_a_resource_already_gone_has_stopped(kube: FakeKubernetes) -> None:
    harness = Harness(kube)
    the_task = a_task()
    harness.round(the_task)
    kube.store.delete(resource_of("v1", "Pod"), NAMESPACE, "task-1")
    with pytest.raises(NotFoundError):
        kube.get(harness.manager.object_ref(the_task))
    assert harness.manager.abort_progress(the_task, NOW, NOW).stopped
    assert decode_state(harness.state).manager_phase is ManagerPhase.STARTED
