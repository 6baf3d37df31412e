"""Restarting containers and retrying Jobs, read as a cluster shows them (pure).

The statuses are written as the kubelet and the Job controller write them:

* the kubelet restarts a container that exits under ``restartPolicy: Always``, one that fails
  under ``OnFailure``, an init container that fails unless the policy is ``Never``, and a native
  sidecar whatever it does (``ShouldContainerBeRestarted``, ``computeInitContainerActions`` in
  pkg/kubelet/kuberuntime); the first restart is immediate, the next ones wait the crash-loop
  back-off (``doBackOff`` in pkg/kubelet/kuberuntime/kuberuntime_manager.go: 10 s doubling to
  5 min), during which the container is ``waiting`` with reason ``CrashLoopBackOff`` and the
  message ``back-off <delay> restarting failed container=<name> pod=<name>_<namespace>(<uid>)``,
  its ``lastState.terminated`` the run that just ended and its ``restartCount`` unchanged; between
  the exit and the restart it shows ``terminated`` for a moment;
* the pod's phase stays Running meanwhile (``getPhase`` in pkg/kubelet/kubelet_pods.go: a waiting
  container with a last termination counts as stopped, and stopped containers under Always, or
  OnFailure with a failure, are "in the process of restarting"); a pod whose init container
  crash-loops stays Pending;
* the Job controller counts a pod whose container restarts as active, and not ready
  (``syncJob``: ``active`` is ``FilterActivePods``, ``ready`` ``countReadyPods``); its restarts
  count toward the backoff limit (``pastBackoffLimitOnFailure``), in no field of the Job.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.lifecycle import Phase
from podwright.core.lifecycle.phases import hold_progress
from podwright.core.lifecycle.pod_status import PodPhaseConfig, pod_phase
from podwright.core.lifecycle.resource_status import job_phase

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
UID = "0f6c2a4e-5d1b-4c8e-9a37-2b6f0e1d9c55"
POD = f"ws_research({UID})"  # format.Pod: <name>_<namespace>(<uid>)


def _time(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(code: int, reason: str, *, ended_ago: float = 5) -> dict[str, Any]:
    """One run of a container, as ``state.terminated`` and ``lastState.terminated`` show it."""
    return {
        "exitCode": code,
        "reason": reason,
        "startedAt": _time(ended_ago + 3),
        "finishedAt": _time(ended_ago),
        "containerID": "containerd://6a1f",
    }


ERROR = _run(1, "Error")
OOM = _run(137, "OOMKilled")
DONE = _run(0, "Completed")


def running(name: str, restarts: int = 0, last: dict[str, Any] | None = None) -> dict[str, Any]:
    return _status(name, {"running": {"startedAt": _time(2)}}, restarts, last, ready=True)


def ended(name: str, run: dict[str, Any], restarts: int = 0, last: Any = None) -> dict[str, Any]:
    """A container the runtime reports exited: the kubelet has not restarted it (yet)."""
    return _status(name, {"terminated": run}, restarts, last)


def backing_off(
    name: str, restarts: int, last: dict[str, Any], delay: str = "10s"
) -> dict[str, Any]:
    message = f"back-off {delay} restarting failed container={name} pod={POD}"
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
    return _status(name, waiting, restarts, last)


def initializing(name: str) -> dict[str, Any]:
    return _status(name, {"waiting": {"reason": "PodInitializing"}}, 0, None)


def recreating(name: str, restarts: int, last: dict[str, Any]) -> dict[str, Any]:
    """Its back-off over, the container is being created again."""
    return _status(name, {"waiting": {"reason": "ContainerCreating"}}, restarts, last)


def _status(
    name: str,
    state: dict[str, Any],
    restarts: int,
    last: dict[str, Any] | None,
    ready: bool = False,
) -> dict[str, Any]:
    return {
        "name": name,
        "image": "python:3.12",
        "imageID": "docker.io/library/python@sha256:1f",
        "state": state,
        "lastState": {"terminated": last} if last else {},
        "ready": ready,
        "restartCount": restarts,
        "started": ready,
    }


def pod(
    phase: str,
    policy: str | None,
    containers: list[dict[str, Any]],
    *,
    init: list[dict[str, Any]] | None = None,
    sidecars: tuple[str, ...] = (),
    primary: str | None = "main",
    deleting: bool = False,
    created_ago: float = 60,
) -> dict[str, Any]:
    """A pod as the API server shows it (``policy`` None: the field absent, as in a manifest the
    API server has not defaulted)."""
    metadata: dict[str, Any] = {
        "name": "ws",
        "namespace": "research",
        "uid": UID,
        "creationTimestamp": _time(created_ago),
        "annotations": {"podwright.dev/primary-container": primary} if primary else {},
    }
    if deleting:
        metadata["deletionTimestamp"] = _time(-30)
    spec: dict[str, Any] = {"containers": [{"name": c["name"]} for c in containers]}
    if policy is not None:
        spec["restartPolicy"] = policy
    init = init or []
    if init:
        spec["initContainers"] = [
            {"name": c["name"], **({"restartPolicy": "Always"} if c["name"] in sidecars else {})}
            for c in init
        ]
    ready = phase == "Running" and all(c["ready"] for c in [*init, *containers])
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": _time(created_ago)},
            {"type": "Ready", "status": str(ready), "lastTransitionTime": _time(created_ago)},
        ],
        "containerStatuses": containers,
    }
    if init:
        status["initContainerStatuses"] = init
    return {"metadata": metadata, "spec": spec, "status": status}


def phase_of(observed: dict[str, Any]) -> Any:
    info = pod_phase(observed, NOW, PodPhaseConfig())
    return info.phase, (info.error.code if info.error else info.reason)


SIDE = running("side")


# A primary container that exited: the task's end only when the kubelet will not restart it -------


@pytest.mark.parametrize(
    ("policy", "main", "phase", "why"),
    [
        pytest.param("Never", ended("main", DONE), Phase.SUCCESS, "", id="never-done"),
        pytest.param(
            "Never", ended("main", ERROR), Phase.RETRYABLE_FAILURE, "Error", id="never-failed"
        ),
        pytest.param(
            "Never", ended("main", OOM), Phase.RETRYABLE_FAILURE, "OOMKilled", id="never-oom"
        ),
        pytest.param("OnFailure", ended("main", DONE), Phase.SUCCESS, "", id="on-failure-done"),
        pytest.param(
            "OnFailure",
            ended("main", ERROR),
            Phase.RUNNING,
            "[main] ended with exit code 1 (Error), restarting (restartPolicy OnFailure)",
            id="on-failure-failed-restarts",
        ),
        pytest.param(
            "OnFailure",
            ended("main", OOM, restarts=2, last=ERROR),
            Phase.RUNNING,
            "[main] restarted 2 times, ended with exit code 137 (OOMKilled), restarting "
            "(restartPolicy OnFailure)",
            id="on-failure-oom-restarts",
        ),
        pytest.param(
            "Always",
            ended("main", DONE),
            Phase.RUNNING,
            "[main] ended with exit code 0 (Completed), restarting (restartPolicy Always)",
            id="always-done-restarts",
        ),
        pytest.param(
            "Always",
            ended("main", ERROR),
            Phase.RUNNING,
            "[main] ended with exit code 1 (Error), restarting (restartPolicy Always)",
            id="always-failed-restarts",
        ),
        pytest.param(
            None,
            ended("main", DONE),
            Phase.RUNNING,
            "[main] ended with exit code 0 (Completed), restarting (restartPolicy Always)",
            id="unset-is-always",
        ),
    ],
)
def test_a_primary_container_ends_the_task_only_when_it_is_not_restarted(
    policy: str | None, main: dict[str, Any], phase: Phase, why: str
) -> None:
    # The pod is Running: its sidecar runs, and getPhase keeps a restarting pod Running anyway.
    assert phase_of(pod("Running", policy, [main, SIDE])) == (phase, why)


def test_a_pod_being_deleted_restarts_nothing() -> None:
    # The kubelet stops a deleted pod's containers and restarts none: the exit is the end.
    observed = pod("Running", "Always", [ended("main", _run(143, "Error")), SIDE], deleting=True)
    assert phase_of(observed) == (Phase.RETRYABLE_FAILURE, "Error")


# A running pod says what restarted, how often, how the last run ended, and the back-off ---------


@pytest.mark.parametrize(
    ("observed", "reason"),
    [
        pytest.param(pod("Running", "Always", [running("main")]), "", id="no-restart"),
        pytest.param(
            pod("Running", "Always", [running("main", 1, ERROR)]),
            "[main] restarted 1 time, last exit code 1 (Error)",
            id="restarted-once",
        ),
        pytest.param(
            pod("Running", "Always", [backing_off("main", 1, ERROR)]),
            "[main] restarted 1 time, last exit code 1 (Error), CrashLoopBackOff: back-off 10s "
            f"restarting failed container=main pod={POD}",
            id="crash-loop-back-off",
        ),
        pytest.param(
            pod("Running", "Always", [recreating("main", 1, ERROR)]),
            "[main] restarted 1 time, last exit code 1 (Error), ContainerCreating",
            id="back-off-over",
        ),
        pytest.param(
            pod("Running", "Always", [running("main", 2, ERROR)]),
            "[main] restarted 2 times, last exit code 1 (Error)",
            id="restarted-twice",
        ),
        pytest.param(
            pod("Running", "OnFailure", [backing_off("main", 4, OOM, "2m40s")]),
            "[main] restarted 4 times, last exit code 137 (OOMKilled), CrashLoopBackOff: "
            f"back-off 2m40s restarting failed container=main pod={POD}",
            id="oom-killed-backing-off",
        ),
        pytest.param(
            pod("Running", "Always", [running("main"), backing_off("side", 3, ERROR, "40s")]),
            "[side] restarted 3 times, last exit code 1 (Error), CrashLoopBackOff: back-off 40s "
            f"restarting failed container=side pod={POD}",
            id="a-second-container",
        ),
        pytest.param(
            pod(
                "Running",
                "Always",
                [running("main", 1, DONE), running("side", 5, ERROR)],
                primary=None,
            ),
            "[main] restarted 1 time, last exit code 0 (Completed); "
            "[side] restarted 5 times, last exit code 1 (Error)",
            id="without-a-primary-container",
        ),
        pytest.param(
            pod(
                "Running",
                "Never",
                [running("main")],
                init=[ended("fetch", DONE, 2, ERROR), running("proxy", 1, _run(2, "Error"))],
                sidecars=("proxy",),
            ),
            "[proxy] restarted 1 time, last exit code 2 (Error)",
            id="sidecar-restarted-init-done",
        ),
        pytest.param(
            pod(
                "Running",
                "Never",
                [running("main")],
                init=[ended("proxy", DONE)],
                sidecars=("proxy",),
            ),
            "[proxy] ended with exit code 0 (Completed), restarting (a sidecar: restartPolicy "
            "Always)",
            id="sidecar-restarts-whatever-the-policy",
        ),
    ],
)
def test_a_running_pods_reason_shows_its_restarts(observed: dict[str, Any], reason: str) -> None:
    assert phase_of(observed) == (Phase.RUNNING, reason)


# An init container the kubelet retries keeps the pod Initializing ---------------------------------


def _initializing_pod(policy: str, fetch: dict[str, Any], **options: Any) -> dict[str, Any]:
    return pod("Pending", policy, [initializing("main")], init=[fetch], **options)


@pytest.mark.parametrize(
    ("observed", "reason"),
    [
        pytest.param(
            _initializing_pod("OnFailure", backing_off("fetch", 2, ERROR, "20s")),
            "[fetch] restarted 2 times, last exit code 1 (Error), CrashLoopBackOff: back-off 20s "
            f"restarting failed container=fetch pod={POD}; [main] PodInitializing",
            id="crash-loop-back-off",
        ),
        pytest.param(
            _initializing_pod("Always", ended("fetch", ERROR)),
            "[fetch] ended with exit code 1 (Error), restarting (restartPolicy Always); "
            "[main] PodInitializing",
            id="about-to-restart",
        ),
        pytest.param(
            _initializing_pod("Always", recreating("fetch", 2, ERROR)),
            "[fetch] restarted 2 times, last exit code 1 (Error), ContainerCreating; "
            "[main] PodInitializing",
            id="back-off-over",
        ),
        pytest.param(
            _initializing_pod("Always", running("fetch", 1, ERROR)),
            "[fetch] restarted 1 time, last exit code 1 (Error); [main] PodInitializing",
            id="running-again",
        ),
        pytest.param(
            # A workspace whose init container never succeeds: visible as such, for hours.
            _initializing_pod("Always", backing_off("fetch", 40, ERROR, "5m0s"), created_ago=7200),
            "[fetch] restarted 40 times, last exit code 1 (Error), CrashLoopBackOff: back-off "
            f"5m0s restarting failed container=fetch pod={POD}; [main] PodInitializing",
            id="never-succeeds",
        ),
    ],
)
def test_an_init_container_the_kubelet_retries_keeps_the_task_initializing(
    observed: dict[str, Any], reason: str
) -> None:
    assert phase_of(observed) == (Phase.INITIALIZING, reason)


def test_an_init_container_that_failed_under_never_fails_the_pod() -> None:
    # getPhase: a failed init container with restartPolicy Never makes the pod Failed.
    observed = pod("Failed", "Never", [initializing("main")], init=[ended("fetch", ERROR)])
    assert phase_of(observed) == (Phase.RETRYABLE_FAILURE, "Error")


def test_the_pending_timeout_bounds_an_init_container_that_crash_loops() -> None:
    observed = _initializing_pod("Always", backing_off("fetch", 9, ERROR, "5m0s"), created_ago=900)
    config = PodPhaseConfig(pod_pending_timeout=timedelta(minutes=10))
    info = pod_phase(observed, NOW, config)
    assert (info.phase, info.reason) == (Phase.SYSTEM_RETRYABLE_FAILURE, "PodPendingTimeout")
    assert info.error is not None
    assert "[fetch] restarted 9 times" in info.error.message


# Whatever its containers do, a pod the kubelet restarts is Running ---------------------------------

_RUNS = st.sampled_from([ERROR, OOM, DONE, _run(2, "Error"), _run(128, "StartError")])


@st.composite
def _restarting_containers(draw: st.DrawFn, name: str) -> dict[str, Any]:
    restarts = draw(st.integers(0, 50))
    last = draw(_RUNS) if restarts else None
    shape = draw(st.sampled_from(["running", "ended", "backing-off"]))
    if shape == "running":
        return running(name, restarts, last)
    if shape == "backing-off":
        return backing_off(name, max(restarts, 1), last or draw(_RUNS))
    return ended(name, draw(_RUNS), restarts, last)


@given(
    st.sampled_from(["Always", "OnFailure"]),
    _restarting_containers("main"),
    _restarting_containers("side"),
)
def test_a_pod_the_kubelet_restarts_is_running_and_names_every_restart(
    policy: str, main: dict[str, Any], side: dict[str, Any]
) -> None:
    def restarts_now(container: dict[str, Any]) -> bool:
        terminated = container["state"].get("terminated")
        return terminated is not None and (policy == "Always" or terminated["exitCode"] != 0)

    if "terminated" in main["state"] and not restarts_now(main):
        # OnFailure and exit code 0: the task's end (the table above); here main runs instead.
        main = running("main", main["restartCount"], main["lastState"].get("terminated"))
    info = pod_phase(pod("Running", policy, [main, side]), NOW, PodPhaseConfig())
    assert info.phase is Phase.RUNNING
    for container in (main, side):
        name, count = container["name"], container["restartCount"]
        named = count > 0 or restarts_now(container) or "waiting" in container["state"]
        assert (f"[{name}] " in info.reason) is named
        if count:
            assert f"[{name}] restarted {count} time{'s' if count > 1 else ''}," in info.reason


# A Job that retries says what its status carries ---------------------------------------------------


def job(policy: str = "OnFailure", completions: int = 1, **status: Any) -> dict[str, Any]:
    """A Job as the Job controller writes its status (``ready`` and ``terminating`` always,
    zero counters otherwise omitted)."""
    return {
        "spec": {
            "backoffLimit": 6,
            "completions": completions,
            "template": {"spec": {"restartPolicy": policy, "containers": [{"name": "main"}]}},
        },
        "status": {
            "startTime": _time(120),
            "ready": 0,
            "terminating": 0,
            "uncountedTerminatedPods": {},
            **status,
        },
    }


ON_FAILURE_RETRY = (
    "retrying: 1 active pod(s), 0 ready: a failed container restarts in place after the "
    "kubelet's back-off (restartPolicy OnFailure; restarts count toward the backoff limit of 6)"
)


@pytest.mark.parametrize(
    ("observed", "ran", "phase", "reason"),
    [
        pytest.param(job(active=1), False, Phase.INITIALIZING, "1 pod(s) starting", id="starting"),
        pytest.param(job(active=1, ready=1), False, Phase.RUNNING, "", id="running"),
        pytest.param(job(active=1), True, Phase.RUNNING, ON_FAILURE_RETRY, id="on-failure-retry"),
        pytest.param(
            job("Never", active=1),
            True,
            Phase.RUNNING,
            "1 active pod(s), 0 ready",
            id="never-not-ready",
        ),
        pytest.param(
            job("Never", active=1, failed=1),
            True,
            Phase.RUNNING,
            "retrying: 1 failed pod(s) of a backoff limit of 6; a new pod is starting",
            id="never-replacement-pod",
        ),
        pytest.param(
            job(completions=3, active=1, succeeded=1),
            True,
            Phase.RUNNING,
            "1 of 3 completions; 1 pod(s) starting",
            id="next-completion",
        ),
        pytest.param(job(active=1, ready=1), True, Phase.RUNNING, "", id="ready-again"),
    ],
)
def test_a_job_whose_pod_is_not_ready_after_it_ran_is_retrying(
    observed: dict[str, Any], ran: bool, phase: Phase, reason: str
) -> None:
    info = job_phase(observed, NOW, ran=ran)
    assert (info.phase, info.reason) == (phase, reason)


def test_a_retrying_job_is_never_shown_going_back() -> None:
    # What a task whose OnFailure pod crash-loops shows, round after round (hold_progress and
    # the reached phase, as the plugin manager applies them).
    reached, shown = Phase.UNDEFINED, []
    for status in ({"active": 1}, {"active": 1, "ready": 1}, {"active": 1}, {"active": 1}):
        info = hold_progress(reached, job_phase(job(**status), NOW, ran=reached is Phase.RUNNING))
        reached = info.phase
        shown.append((info.phase, info.reason))
    assert shown == [
        (Phase.INITIALIZING, "1 pod(s) starting"),
        (Phase.RUNNING, ""),
        (Phase.RUNNING, ON_FAILURE_RETRY),
        (Phase.RUNNING, ON_FAILURE_RETRY),
    ]
