"""A Job's phase from its pods as well as its status (pure): the Job controller counts its pods
late on a busy control plane, and a task whose pod runs is Running whatever the count says."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.lifecycle import Phase
from podwright.core.lifecycle.resource_status import job_phase, pod_progress_fields

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JOB_UID = "job-uid-1"
PROGRESS = [Phase.QUEUED, Phase.INITIALIZING, Phase.RUNNING, Phase.SUCCESS]


def _job(
    *, conditions: list[dict[str, Any]] | None = None, restart: str = "Never", **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "train", "uid": JOB_UID},
        "spec": {"backoffLimit": 3, "template": {"spec": {"restartPolicy": restart}}},
        "status": {"conditions": conditions or [], **status},
    }


def _pod(
    name: str = "train-abcde",
    *,
    phase: str = "Running",
    ready: str | None = "True",
    owner: str = JOB_UID,
    controller: bool = True,
    deleting: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "team-a",
        "uid": f"{name}-uid",
        "resourceVersion": "7",
        "labels": {"podwright.dev/task-id": "t-1", "job-name": "train"},
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "train",
                "uid": owner,
                "controller": controller,
                "blockOwnerDeletion": True,
            }
        ],
        "managedFields": [{"manager": "kubelet"}],
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-29T11:59:59Z"
    status: dict[str, Any] = {
        "phase": phase,
        "podIP": "10.0.0.7",
        "containerStatuses": [{"name": "main", "ready": ready == "True", "restartCount": 0}],
        "conditions": [{"type": "PodScheduled", "status": "True"}],
    }
    if ready is not None:
        status["conditions"].append({"type": "Ready", "status": ready})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "status": status}


@pytest.mark.parametrize(
    ("job", "pods", "phase", "reason"),
    [
        pytest.param(
            _job(active=1, ready=0),
            [_pod()],
            Phase.RUNNING,
            "",
            id="a ready pod the status has not counted",
        ),
        pytest.param(
            _job(),
            [_pod()],
            Phase.RUNNING,
            "",
            id="a ready pod before the status counts it active",
        ),
        pytest.param(
            _job(active=1, ready=0),
            [_pod(phase="Succeeded", ready="False")],
            Phase.RUNNING,
            "",
            id="a succeeded pod the status has not counted",
        ),
        pytest.param(
            _job(active=0, uncountedTerminatedPods={"succeeded": ["train-abcde-uid"]}),
            [_pod(phase="Succeeded", ready="False")],
            Phase.RUNNING,
            "",
            id="a succeeded pod the status lists as uncounted",
        ),
        pytest.param(
            _job(active=1, ready=0),
            [_pod(ready="False")],
            Phase.INITIALIZING,
            "1 pod(s) starting",
            id="a running pod not ready yet",
        ),
        pytest.param(
            _job(active=1, ready=0),
            [_pod(owner="another-job")],
            Phase.INITIALIZING,
            "1 pod(s) starting",
            id="a pod of another Job of the task is not read",
        ),
        pytest.param(
            _job(active=1, ready=0),
            [_pod(controller=False)],
            Phase.INITIALIZING,
            "1 pod(s) starting",
            id="a pod the Job owns but does not control is not read",
        ),
        pytest.param(
            _job(active=1, ready=0),
            [_pod(deleting=True)],
            Phase.INITIALIZING,
            "1 pod(s) starting",
            id="a pod being deleted is not running",
        ),
        pytest.param(
            _job(conditions=[{"type": "Suspended", "status": "True", "message": "by Kueue"}]),
            [_pod()],
            Phase.QUEUED,
            "Suspended: by Kueue",
            id="a suspended Job stays queued",
        ),
        pytest.param(
            _job(conditions=[{"type": "Complete", "status": "True"}], succeeded=1),
            [_pod(phase="Succeeded", ready="False")],
            Phase.SUCCESS,
            "",
            id="a complete Job goes by its status",
        ),
        pytest.param(
            _job(active=1, succeeded=1),
            [_pod("train-a", phase="Succeeded", ready="False"), _pod("train-b", ready="False")],
            Phase.RUNNING,
            "1 of 1 completions; 1 pod(s) starting",
            id="a succeeded pod the status counts goes by the status",
        ),
        pytest.param(
            _job(active=1, ready=1, failed=1),
            [_pod()],
            Phase.RUNNING,
            "1 failed pod(s) of a backoff limit of 3",
            id="a counted ready pod goes by the status",
        ),
        pytest.param(
            _job(active=1, ready=0, failed=1),
            [_pod("train-b")],
            Phase.RUNNING,
            "1 failed pod(s) of a backoff limit of 3",
            id="a retry's ready pod keeps the retries in the reason",
        ),
    ],
)
def test_a_jobs_pods_show_it_running_before_its_status_does(
    job: dict[str, Any], pods: list[dict[str, Any]], phase: Phase, reason: str
) -> None:
    info = job_phase(job, NOW, pods=pods)
    assert (info.phase, info.reason) == (phase, reason)


def test_a_task_that_ran_whose_pod_is_ready_is_not_retrying_while_the_status_lags() -> None:
    """Once Running (seen in its pod), a Job restarting failed containers in place reads as
    retrying when its status shows an active pod and none ready: not while its pod is ready."""
    job = _job(restart="OnFailure", active=1, ready=0)
    assert job_phase(job, NOW, ran=True).reason.startswith("retrying: 1 active pod(s), 0 ready")
    info = job_phase(job, NOW, ran=True, pods=[_pod()])
    assert (info.phase, info.reason) == (Phase.RUNNING, "")


_STATUSES = st.fixed_dictionaries(
    {},
    optional={
        "active": st.integers(0, 2),
        "ready": st.integers(0, 2),
        "succeeded": st.integers(0, 2),
        "failed": st.integers(0, 2),
        "terminating": st.integers(0, 1),
        "startTime": st.just("2026-11-29T11:00:00Z"),
    },
)
_PODS = st.lists(
    st.builds(
        _pod,
        st.sampled_from(["train-a", "train-b", "train-c"]),
        phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
        ready=st.sampled_from([None, "True", "False"]),
        owner=st.sampled_from([JOB_UID, "other"]),
        controller=st.booleans(),
        deleting=st.booleans(),
    ),
    max_size=3,
)


@given(status=_STATUSES, pods=_PODS, ran=st.booleans())
def test_pods_only_ever_bring_a_job_forward(
    status: dict[str, Any], pods: list[dict[str, Any]], ran: bool
) -> None:
    """Whatever its pods show, a Job is never judged further back than its status alone says,
    and its pods move it to Running at most (its end is its status's to say)."""
    job = _job(**status)
    alone = job_phase(job, NOW, ran=ran)
    seen = job_phase(job, NOW, ran=ran, pods=pods)
    if alone.phase in PROGRESS and seen.phase in PROGRESS:
        assert PROGRESS.index(seen.phase) >= PROGRESS.index(alone.phase)
    if seen != alone:
        assert seen.phase is Phase.RUNNING


@given(status=_STATUSES, ready=st.integers(1, 2), ran=st.booleans())
def test_a_pod_seen_ready_reads_as_the_count_of_it_will(
    status: dict[str, Any], ready: int, ran: bool
) -> None:
    """When the Job's status comes to count the pod ready, the task's phase and reason stay as
    its pod made them: the count's arrival is no new reason to write."""
    status = {**status, "ready": 0}
    seen = job_phase(_job(**status), NOW, ran=ran, pods=[_pod()])
    counted = job_phase(_job(**{**status, "ready": ready}), NOW, ran=ran, pods=[_pod()])
    if seen.phase is Phase.RUNNING:
        assert counted == seen


@given(status=_STATUSES, pods=_PODS, ran=st.booleans())
def test_a_pod_trimmed_for_the_cache_is_judged_as_the_whole_pod(
    status: dict[str, Any], pods: list[dict[str, Any]], ran: bool
) -> None:
    job = _job(**status)
    trimmed = [pod_progress_fields(pod) for pod in pods]
    assert job_phase(job, NOW, ran=ran, pods=trimmed) == job_phase(job, NOW, ran=ran, pods=pods)


def test_the_cache_keeps_only_what_the_phase_reads() -> None:
    assert pod_progress_fields(_pod(deleting=True)) == {
        "metadata": {
            "name": "train-abcde",
            "deletionTimestamp": "2026-11-29T11:59:59Z",
            "ownerReferences": [{"uid": JOB_UID, "controller": True}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
