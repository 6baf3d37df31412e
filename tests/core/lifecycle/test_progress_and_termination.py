"""Progress that does not go back without a cause, the scheduler's message, whether a deleted
resource has stopped, and a task's companions made its own (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.k8s_names import dns1123_label_problem
from podwright.core.lifecycle import Phase, PhaseInfo
from podwright.core.lifecycle.companions import (
    carries,
    companion_name,
    task_companions,
    task_label_value,
)
from podwright.core.lifecycle.phases import as_launched, hold_progress
from podwright.core.lifecycle.pod_status import PodPhaseConfig, pod_phase, scheduler_message
from podwright.core.lifecycle.termination import (
    dependents_deleted,
    grace_period,
    job_stopped,
    pod_stopped,
)

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
P = Phase


@pytest.mark.parametrize(
    ("reached", "reported", "setback", "kept"),
    [
        (P.RUNNING, P.QUEUED, False, P.RUNNING),
        (P.RUNNING, P.INITIALIZING, False, P.RUNNING),
        (P.RUNNING, P.QUEUED, True, P.QUEUED),
        (P.INITIALIZING, P.QUEUED, False, P.INITIALIZING),
        (P.QUEUED, P.WAITING_FOR_RESOURCES, False, P.QUEUED),
        (P.QUEUED, P.INITIALIZING, False, P.INITIALIZING),
        (P.INITIALIZING, P.RUNNING, False, P.RUNNING),
        (P.RUNNING, P.RUNNING, False, P.RUNNING),
        (P.RUNNING, P.RETRYABLE_FAILURE, False, P.RETRYABLE_FAILURE),
        (P.RUNNING, P.SUCCESS, False, P.SUCCESS),
        (P.RUNNING, P.UNDEFINED, False, P.UNDEFINED),
        (P.UNDEFINED, P.QUEUED, False, P.QUEUED),
        (P.NOT_READY, P.QUEUED, False, P.QUEUED),
    ],
)
def test_progress_goes_back_only_for_a_cause(
    reached: Phase, reported: Phase, setback: bool, kept: Phase
) -> None:
    info = PhaseInfo(reported, reason="now this", occurred_at=NOW, setback=setback)
    held = hold_progress(reached, info)
    assert held.phase is kept
    assert held.reason == "now this"
    assert held.occurred_at == NOW


# What a real v1.36 scheduler writes (PodScheduled's message, FailedScheduling's note) for a pod
# whose claim does not exist yet, and for one whose Immediate claim is not bound yet: FitError's
# "0/N nodes are available: <PreFilter message>." then the PostFilter message, here the
# DynamicResources plugin's cycle-state error "not found" (pkg/scheduler/framework/types.go,
# cycle_state.go; plugins/volumebinding/volume_binding.go; plugins/dynamicresources).
MISSING_CLAIM = '0/1 nodes are available: persistentvolumeclaim "notebook-ada-work" not found.'
UNBOUND_CLAIM = "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims."
PREEMPTION = (
    "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. no new "
    "claims to deallocate, preemption: 0/3 nodes are available: 1 Preemption is not helpful for "
    "scheduling, 2 No preemption victims found for incoming pod."
)


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        pytest.param(MISSING_CLAIM + " not found", MISSING_CLAIM, id="claim-not-found"),
        pytest.param(UNBOUND_CLAIM + " not found", UNBOUND_CLAIM, id="claim-unbound"),
        pytest.param(PREEMPTION, PREEMPTION, id="preemption-message-kept"),
        pytest.param(MISSING_CLAIM, MISSING_CLAIM, id="nothing-stray"),
        pytest.param(
            "persistentvolumeclaim not found", "persistentvolumeclaim not found", id="other"
        ),
    ],
)
def test_the_schedulers_stray_not_found_is_dropped(written: str, shown: str) -> None:
    assert scheduler_message(written) == shown


def test_an_unschedulable_pods_reason_ends_where_the_scheduler_meant_it_to() -> None:
    pod = {
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": UNBOUND_CLAIM + " not found",
                }
            ],
        }
    }
    info = pod_phase(pod, NOW, PodPhaseConfig())
    assert (info.phase, info.reason) == (P.QUEUED, f"Unschedulable: {UNBOUND_CLAIM}")


def _container(name: str, state: str) -> dict[str, Any]:
    return {"name": name, "state": {state: {}}}


def _pod(phase: str, *containers: dict[str, Any], declared: int = 1, **status: Any) -> Any:
    return {
        "metadata": {"deletionTimestamp": "2026-11-21T12:00:30Z"},
        "spec": {"containers": [{"name": f"c{n}"} for n in range(declared)]},
        "status": {"phase": phase, "containerStatuses": list(containers), **status},
    }


@pytest.mark.parametrize(
    ("pod", "stopped"),
    [
        pytest.param(_pod("Running", _container("c0", "running")), False, id="running"),
        pytest.param(_pod("Running", _container("c0", "terminated")), True, id="terminated"),
        pytest.param(_pod("Failed"), True, id="failed"),
        pytest.param(_pod("Succeeded"), True, id="succeeded"),
        pytest.param(_pod("Pending"), False, id="not-reported-yet"),
        pytest.param(
            _pod("Running", _container("c0", "terminated"), declared=2),
            False,
            id="one-of-two-reported",
        ),
        pytest.param(
            _pod(
                "Running",
                _container("c0", "terminated"),
                initContainerStatuses=[_container("sidecar", "running")],
            ),
            False,
            id="sidecar-still-running",
        ),
        pytest.param(
            _pod("Pending", _container("c0", "waiting")), True, id="never-started-never-will"
        ),
    ],
)
def test_a_deleted_pod_has_stopped_once_no_container_runs(pod: Any, stopped: bool) -> None:
    assert pod_stopped(pod) is stopped


@pytest.mark.parametrize(
    ("metadata", "deleted"),
    [
        ({}, False),
        (
            {"deletionTimestamp": "2026-11-21T12:00:00Z", "finalizers": ["foregroundDeletion"]},
            False,
        ),
        ({"deletionTimestamp": "2026-11-21T12:00:00Z", "finalizers": ["podwright.dev/f"]}, True),
        ({"deletionTimestamp": "2026-11-21T12:00:00Z"}, True),
    ],
)
def test_a_foreground_deletion_is_done_once_its_finalizer_is_gone(
    metadata: dict[str, Any], deleted: bool
) -> None:
    assert dependents_deleted({"metadata": metadata}) is deleted


DELETED = "2026-11-21T12:00:00Z"


def _deleted_job(finalizers: list[str], **status: Any) -> dict[str, Any]:
    """A deleted Job, its status as the Job controller goes on writing it (``syncJob``: ``active``
    counts pods not being deleted, ``terminating`` those being deleted; ``ready`` and
    ``terminating`` are always written, zero counters otherwise omitted)."""
    return {
        "metadata": {"deletionTimestamp": DELETED, "finalizers": finalizers},
        "status": {"ready": 0, "terminating": 0, "uncountedTerminatedPods": {}, **status},
    }


@pytest.mark.parametrize(
    ("job", "stopped"),
    [
        pytest.param(
            _deleted_job(["foregroundDeletion"], terminating=1),
            False,
            id="foreground-pods-terminating",
        ),
        pytest.param(
            _deleted_job(["podwright.dev/finalizer"], terminating=1),
            False,
            id="finalizer-gone-count-not-updated-yet",
        ),
        pytest.param(
            # Deleted in the background (kubectl delete) while podwright's finalizer holds it:
            # the garbage collector leaves its pod running as long as the Job exists.
            _deleted_job(["podwright.dev/finalizer"], active=1, ready=1),
            False,
            id="background-pod-still-running",
        ),
        pytest.param(_deleted_job(["podwright.dev/finalizer"]), True, id="pods-gone"),
        pytest.param(
            _deleted_job(["podwright.dev/finalizer"], succeeded=1), True, id="finished-job"
        ),
        pytest.param(
            {"metadata": {"deletionTimestamp": DELETED}, "status": {}},
            True,
            id="counts-omitted",
        ),
        pytest.param({"metadata": {}, "status": {}}, False, id="not-deleted"),
    ],
)
def test_a_deleted_job_has_stopped_once_no_pod_is_active_or_terminating(
    job: dict[str, Any], stopped: bool
) -> None:
    assert job_stopped(job) is stopped


def test_the_grace_period_is_the_longest_of_the_pods() -> None:
    specs = [{"terminationGracePeriodSeconds": 5}, {}, {"terminationGracePeriodSeconds": 90}]
    assert grace_period(specs) == timedelta(seconds=90)
    assert grace_period([{}]) == timedelta(seconds=30)
    assert grace_period([]) == timedelta(seconds=30)


LABELS = {"podwright.dev/task-id": "notebook-ada-x7k2pq"}
CLAIM = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {"name": "notebook-ada-work"},
    "spec": {"resources": {"requests": {"storage": "1Gi"}}},
}


def _service(name: str, service_type: str = "ClusterIP") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": {"podwright.dev/workload": "notebook-ada"}},
        "spec": {"type": service_type, "selector": {"podwright.dev/workload": "notebook-ada"}},
    }


def test_claims_keep_their_name_services_become_the_tasks_own() -> None:
    companions = task_companions(
        [CLAIM, _service("notebook-ada-clusterip"), _service("notebook-ada-nodeport", "NodePort")],
        object_name="notebook-ada-x7k2pq",
        workload_name="notebook-ada",
        namespace="research",
        labels=LABELS,
    )
    (claim,) = companions.needed
    assert claim["metadata"] == {
        "name": "notebook-ada-work",
        "namespace": "research",
        "labels": LABELS,
    }
    assert [s["metadata"]["name"] for s in companions.dependent] == [
        "notebook-ada-x7k2pq-clusterip",
        "notebook-ada-x7k2pq-nodeport",
    ]
    for service in companions.dependent:
        assert service["spec"]["selector"] == {"podwright.dev/workload": "notebook-ada", **LABELS}
        assert service["metadata"]["labels"] == {"podwright.dev/workload": "notebook-ada", **LABELS}
        assert "ownerReferences" not in service["metadata"]
    assert CLAIM["metadata"] == {"name": "notebook-ada-work"}  # the task's manifests untouched


@pytest.mark.parametrize(
    ("rendered", "name"),
    [
        ("notebook-ada", "notebook-ada-x7k2pq"),
        ("notebook-ada-nodeport", "notebook-ada-x7k2pq-nodeport"),
        ("notebook-ada-master", "notebook-ada-x7k2pq-master"),
        ("metrics", "notebook-ada-x7k2pq-metrics"),
    ],
)
def test_a_dependent_is_named_after_the_task_keeping_the_renderers_suffix(
    rendered: str, name: str
) -> None:
    assert companion_name("notebook-ada-x7k2pq", "notebook-ada", rendered) == name


@given(
    st.from_regex(r"[a-z][a-z0-9-]{0,61}[a-z0-9]", fullmatch=True),
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?", fullmatch=True),
)
def test_a_dependents_name_is_a_dns1035_label_distinct_per_task(
    object_name: str, suffix: str
) -> None:
    name = companion_name(object_name, "web", f"web-{suffix}")
    assert dns1123_label_problem(name) is None
    assert name[0].isalpha()
    assert companion_name(object_name + "x", "web", f"web-{suffix}") != name


@pytest.mark.parametrize(
    ("task_id", "value"),
    [
        ("notebook-ada-x7k2pq", "notebook-ada-x7k2pq"),
        ("a/b c", "a-b-c"),
        ("ünï", "n"),
        ("-" * 3, "task"),
        ("x" * 70, "x" * 63),
    ],
)
def test_a_task_id_as_a_label_value(task_id: str, value: str) -> None:
    assert task_label_value(task_id) == value


def test_an_object_is_the_tasks_when_it_carries_the_tasks_labels() -> None:
    assert carries({"metadata": {"labels": {**LABELS, "other": "x"}}}, LABELS)
    assert not carries({"metadata": {"labels": {"podwright.dev/task-id": "another"}}}, LABELS)
    assert not carries({"metadata": {}}, LABELS)


LAUNCHED = "Job team/train created"


@pytest.mark.parametrize(
    ("reached", "info", "status_written", "expected"),
    [
        pytest.param(
            Phase.QUEUED,
            PhaseInfo(Phase.QUEUED, reason="job created; no pod yet", occurred_at=NOW),
            False,
            PhaseInfo(Phase.QUEUED, reason=LAUNCHED, occurred_at=NOW),
            id="untouched: the launch's reason",
        ),
        pytest.param(
            Phase.QUEUED,
            PhaseInfo(Phase.QUEUED, reason="job started, but has no pod", occurred_at=NOW),
            True,
            PhaseInfo(Phase.QUEUED, reason="job started, but has no pod", occurred_at=NOW),
            id="a controller wrote its status: its reading",
        ),
        pytest.param(
            Phase.QUEUED,
            PhaseInfo(Phase.INITIALIZING, reason="1 pod(s) starting", occurred_at=NOW),
            False,
            PhaseInfo(Phase.INITIALIZING, reason="1 pod(s) starting", occurred_at=NOW),
            id="another phase: as read",
        ),
        pytest.param(
            Phase.RUNNING,
            PhaseInfo(Phase.QUEUED, reason="Suspended", occurred_at=NOW, setback=True),
            False,
            PhaseInfo(Phase.QUEUED, reason="Suspended", occurred_at=NOW, setback=True),
            id="a task past Queued: as read",
        ),
        pytest.param(
            Phase.QUEUED,
            PhaseInfo(Phase.QUEUED, reason="Suspended", occurred_at=NOW, setback=True),
            False,
            PhaseInfo(Phase.QUEUED, reason="Suspended", occurred_at=NOW, setback=True),
            id="a setback: its cause",
        ),
    ],
)
def test_an_untouched_resource_reads_as_its_launch_left_it(
    reached: Phase, info: PhaseInfo, status_written: bool, expected: PhaseInfo
) -> None:
    assert as_launched(reached, LAUNCHED, info, status_written=status_written) == expected
