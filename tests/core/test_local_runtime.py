"""The local backend's pure decisions: what a container runs with, when the kubelet restarts it,
what it does next for a pod, and the Pod status it writes at each step."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.lifecycle.phases import Phase
from podwright.core.lifecycle.pod_status import PodPhaseConfig, pod_phase
from podwright.core.local_runtime import (
    CRASH_LOOP_BACKOFF,
    JOB_POD_FAILURE_BACKOFF,
    Backoff,
    BackoffEntry,
    ContainerSpec,
    LaunchRefusal,
    PodRun,
    PodShape,
    go_duration,
    plan_launch,
    plan_pod,
    pod_spec_problems,
    pod_status,
)

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
POD = {
    "metadata": {
        "name": "train-1",
        "namespace": "research",
        "uid": "u-1",
        "labels": {"team": "vision"},
    },
    "spec": {},
}


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def at(value: float) -> datetime:
    return T0 + seconds(value)


# Launching -----------------------------------------------------------------------------------


def test_command_args_and_environment_as_the_kubelet_builds_them() -> None:
    container = {
        "name": "main",
        "image": "trainer:1",
        "command": ["python", "$(SCRIPT)"],
        "args": ["--epochs", "$(EPOCHS)", "$$(literal)", "$(UNKNOWN)"],
        "env": [
            {"name": "EPOCHS", "value": "90"},
            {"name": "SCRIPT", "value": "train-$(EPOCHS).py"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {
                "name": "MEMORY_MI",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
        ],
        "workingDir": "/work",
        "resources": {"limits": {"cpu": "1500m", "memory": "2Gi"}},
    }
    launch = plan_launch(container, POD)
    assert launch.argv == ("python", "train-90.py", "--epochs", "90", "$(literal)", "$(UNKNOWN)")
    assert dict(launch.env) == {
        "HOSTNAME": "train-1",
        "EPOCHS": "90",
        "SCRIPT": "train-90.py",
        "POD": "train-1",
        "TEAM": "vision",
        "IP": "127.0.0.1",
        "CPUS": "2",
        "MEMORY_MI": "2048",
    }
    assert (launch.working_dir, launch.memory_limit_bytes) == ("/work", 2 * 2**30)


@pytest.mark.parametrize(
    ("container", "reason", "message"),
    [
        (
            {"name": "main", "image": "trainer:1"},
            "CreateContainerError",
            "container 'main' has no command: the local backend runs commands on this machine and cannot run the image's entrypoint (trainer:1)",
        ),
        (
            {
                "name": "main",
                "command": ["x"],
                "env": [
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
                ],
            },
            "CreateContainerConfigError",
            "env TOKEN comes from secretKeyRef: the local backend has no Secrets or ConfigMaps",
        ),
        (
            {
                "name": "main",
                "command": ["x"],
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.priority"}}}],
            },
            "CreateContainerConfigError",
            "fieldRef 'spec.priority' is not supported",
        ),
        (
            {"name": "main", "command": ["x"], "resources": {"limits": {"memory": "lots"}}},
            "CreateContainerConfigError",
            "resources.limits.memory",
        ),
    ],
)
def test_what_one_machine_cannot_provide_is_refused_with_the_kubelets_reason(
    container: dict[str, Any], reason: str, message: str
) -> None:
    with pytest.raises(
        LaunchRefusal, match=message.replace("(", r"\(").replace(")", r"\)")
    ) as refused:
        plan_launch(container, POD)
    assert refused.value.reason == reason


@pytest.mark.parametrize(
    ("spec", "problems"),
    [
        pytest.param(
            {"containers": [{"name": "main"}], "restartPolicy": "Sometimes"},
            [
                'spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
                '"Always", "OnFailure", "Never"'
            ],
            id="unknown restart policy",
        ),
        pytest.param(
            {"containers": [{"name": "main", "restartPolicy": "Always"}]},
            ['spec.containers[0].restartPolicy: Forbidden: may not be set (got "Always")'],
            id="a regular container's own restart policy",
        ),
        pytest.param(
            {
                "initContainers": [{"name": "fetch", "restartPolicy": "Never"}],
                "containers": [{"name": "fetch"}],
            },
            [
                'spec.initContainers[0].restartPolicy: Unsupported value: "Never": supported '
                'values: "Always"',
                'spec.containers[0].name: Duplicate value: "fetch"',
            ],
            id="init container policy and duplicate names",
        ),
        pytest.param({}, ["spec.containers: Required value"], id="no containers"),
        pytest.param(
            {"containers": [{"name": "main"}], "terminationGracePeriodSeconds": "30"},
            ["spec.terminationGracePeriodSeconds: Invalid value: '30': must be an integer"],
            id="grace period not an integer",
        ),
        pytest.param(
            {"containers": [{"name": "main"}], "restartPolicy": "Never"}, [], id="a valid spec"
        ),
    ],
)
def test_pod_specs_are_validated_as_the_api_server_does(
    spec: dict[str, Any], problems: list[str]
) -> None:
    assert pod_spec_problems(spec) == problems


# Back-off ------------------------------------------------------------------------------------


def test_the_crash_loop_back_off_doubles_from_10s_to_5min_and_resets_after_10min() -> None:
    backoff = CRASH_LOOP_BACKOFF
    entry: BackoffEntry | None = None
    delays = []
    clock = T0
    for _ in range(8):
        # A container that exits at once: it waits its delay, then restarts.
        finished = clock
        assert backoff.waiting(entry, finished, finished) is (entry is not None)
        if entry is not None:
            assert not backoff.waiting(entry, finished, finished + entry.delay)
            clock = finished + entry.delay
        entry = backoff.next(entry, finished, clock)
        delays.append(entry.delay.total_seconds())
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]
    # After running 10 minutes (twice the cap) without exiting, an exit restarts at once.
    assert entry is not None
    long_run = entry.updated_at + timedelta(minutes=10, seconds=1)
    assert not backoff.waiting(entry, long_run, long_run)
    assert backoff.next(entry, long_run, long_run).delay == seconds(10)
    # Just under 10 minutes is not enough.
    short_run = entry.updated_at + timedelta(minutes=9)
    assert backoff.waiting(entry, short_run, short_run)


def test_the_job_controller_back_off_doubles_from_10s_to_10min() -> None:
    delays = [JOB_POD_FAILURE_BACKOFF.nth(n).total_seconds() for n in range(1, 9)]
    assert delays == [10, 20, 40, 80, 160, 320, 600, 600]


@pytest.mark.parametrize(
    ("initial", "cap", "message"),
    [
        (seconds(0), seconds(1), "back-off initial: must be positive"),
        (seconds(2), seconds(1), "back-off cap: must be at least initial"),
    ],
)
def test_a_back_off_is_checked(initial: timedelta, cap: timedelta, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Backoff(initial, cap)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (seconds(10), "10s"),
        (seconds(80), "1m20s"),
        (seconds(300), "5m0s"),
        (seconds(3600), "1h0m0s"),
        (seconds(0.05), "50ms"),
        (seconds(1.5), "1.5s"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(microseconds=7), "7µs"),
        (seconds(0), "0s"),
    ],
)
def test_durations_read_as_go_writes_them(value: timedelta, text: str) -> None:
    assert go_duration(value) == text


# What the kubelet does next --------------------------------------------------------------------

FAST = Backoff(seconds(10), seconds(300))


def shape(
    *,
    policy: str = "Always",
    init: tuple[str, ...] = (),
    sidecars: tuple[str, ...] = (),
    main: tuple[str, ...] = ("main",),
    grace: float = 30,
) -> PodShape:
    """A pod; ``init`` names regular init containers and ``sidecars`` native sidecars, which
    come after them in the spec."""
    return PodShape(
        "p",
        "research",
        "u-1",
        policy,  # type: ignore[arg-type]
        tuple(ContainerSpec(n, "img") for n in init)
        + tuple(ContainerSpec(n, "img", sidecar=True) for n in sidecars),
        tuple(ContainerSpec(n, "img") for n in main),
        seconds(grace),
    )


def started(pod: PodRun, name: str, when: float) -> PodRun:
    return pod.with_container(pod.containers[name].started(at(when), FAST))


def exited(pod: PodRun, name: str, code: int, when: float) -> PodRun:
    return pod.with_container(pod.containers[name].exited(code, at(when)))


def test_init_containers_run_one_at_a_time_then_every_container_together() -> None:
    pod = PodRun.new(shape(init=("fetch", "unpack"), main=("main", "logger")), T0)
    assert plan_pod(pod, at(0), FAST).start == ("fetch",)
    pod = started(pod, "fetch", 0)
    assert plan_pod(pod, at(1), FAST).start == ()
    pod = exited(pod, "fetch", 0, 2)
    assert plan_pod(pod, at(2), FAST).start == ("unpack",)
    pod = exited(started(pod, "unpack", 2), "unpack", 0, 3)
    assert plan_pod(pod, at(3), FAST).start == ("main", "logger")


def test_a_native_sidecar_starts_before_the_next_container_and_keeps_running() -> None:
    pod = PodRun.new(shape(init=("fetch",), sidecars=("mount",), policy="Never"), T0)
    pod = exited(started(pod, "fetch", 0), "fetch", 0, 1)
    assert plan_pod(pod, at(1), FAST).start == ("mount",)
    pod = started(pod, "mount", 1)
    assert plan_pod(pod, at(1), FAST).start == ("main",)
    pod = started(pod, "main", 1)
    # The sidecar crashes while main runs: restarted (at once the first time), main untouched.
    pod = exited(pod, "mount", 1, 5)
    assert plan_pod(pod, at(5), FAST).start == ("mount",)
    pod = started(pod, "mount", 5)
    # Main ends: the pod's work is done (restartPolicy Never), the sidecar is stopped.
    pod = exited(pod, "main", 0, 9)
    stopping = plan_pod(pod, at(9), FAST)
    assert stopping.stop_deadline == at(9) + seconds(30)
    pod = pod.stopping_by(at(39))
    assert plan_pod(pod, at(9), FAST).stop == ("mount",)


@pytest.mark.parametrize(
    ("policy", "container", "code", "restarts"),
    [
        ("Always", "main", 0, True),
        ("Always", "main", 1, True),
        ("OnFailure", "main", 0, False),
        ("OnFailure", "main", 1, True),
        ("Never", "main", 1, False),
        ("Always", "fetch", 1, True),
        ("OnFailure", "fetch", 1, True),
        ("Never", "fetch", 1, False),
        ("Always", "fetch", 0, False),
        ("Never", "mount", 0, True),
        ("Never", "mount", 1, True),
    ],
)
def test_which_exits_restart(policy: str, container: str, code: int, restarts: bool) -> None:
    pod = PodRun.new(shape(policy=policy, init=("fetch",), sidecars=("mount",)), T0)
    if container == "main":
        for name in ("fetch", "mount"):
            pod = started(pod, name, 0)
        pod = exited(pod, "fetch", 0, 0)
    pod = exited(started(pod, container, 0), container, code, 1)
    spec = next(s for s in pod.shape.containers if s.name == container)
    assert pod.restarts(spec, pod.containers[container]) is restarts


def test_a_crash_looping_container_restarts_at_once_then_after_its_back_off() -> None:
    pod = started(PodRun.new(shape(), T0), "main", 0)
    pod = exited(pod, "main", 1, 1)
    assert plan_pod(pod, at(1), FAST).start == ("main",)
    pod = exited(started(pod, "main", 1), "main", 1, 2)
    waiting = plan_pod(pod, at(2), FAST)
    assert (waiting.start, dict(waiting.back_off), waiting.wake_at) == (
        (),
        {"main": at(12)},
        at(12),
    )
    assert plan_pod(pod, at(12), FAST).start == ("main",)
    pod = exited(started(pod, "main", 12), "main", 1, 13)
    assert plan_pod(pod, at(13), FAST).wake_at == at(33)


def test_with_restart_policy_never_a_failed_init_container_fails_the_pod() -> None:
    pod = exited(
        started(PodRun.new(shape(policy="Never", init=("fetch",)), T0), "fetch", 0), "fetch", 2, 1
    )
    plan = plan_pod(pod, at(1), FAST)
    assert plan.stop_deadline == at(31)
    pod = pod.stopping_by(at(31))
    assert plan_pod(pod, at(1), FAST).done
    status = pod_status(pod, at(1), FAST)
    assert status["phase"] == "Failed"
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}


def test_stopping_sends_sigterm_to_regular_containers_then_sidecars_in_reverse_then_sigkill() -> (
    None
):
    pod = PodRun.new(shape(sidecars=("a", "b"), main=("main",)), T0)
    for name in ("a", "b", "main"):
        pod = started(pod, name, 0)
    pod = pod.stopping_by(at(30))
    assert plan_pod(pod, at(1), FAST).stop == ("main",)
    pod = pod.with_container(pod.containers["main"].signalled())
    assert plan_pod(pod, at(1), FAST).stop == ()
    pod = exited(pod, "main", 143, 2)
    assert plan_pod(pod, at(2), FAST).stop == ("b",)
    pod = exited(pod.with_container(pod.containers["b"].signalled()), "b", 143, 3)
    assert plan_pod(pod, at(3), FAST).stop == ("a",)
    pod = pod.with_container(pod.containers["a"].signalled())
    assert plan_pod(pod, at(30), FAST).kill == ("a",)
    pod = pod.with_container(pod.containers["a"].signalled(kill=True))
    assert plan_pod(pod, at(31), FAST).kill == ()
    # A deletion cannot lengthen the grace period, only shorten it.
    assert pod.stopping_by(at(60)).stop_deadline == at(30)
    assert pod.stopping_by(at(5)).stop_deadline == at(5)


# The status the kubelet writes --------------------------------------------------------------


def api_pod(pod: PodRun, now: datetime, previous: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "creationTimestamp": "2026-11-21T12:00:00Z",
            "annotations": {"podwright.dev/primary-container": "main"},
        },
        "spec": {
            "restartPolicy": pod.shape.restart_policy,
            "containers": [{"name": c.name} for c in pod.shape.main],
        },
        "status": pod_status(pod, now, FAST, previous),
    }


def engine_phase(pod: PodRun, now: datetime) -> Phase:
    return pod_phase(api_pod(pod, now), now, PodPhaseConfig()).phase


def statuses(pod: PodRun, now: datetime) -> dict[str, dict[str, Any]]:
    status = pod_status(pod, now, FAST)
    return {
        s["name"]: s
        for s in [*status.get("initContainerStatuses", []), *status["containerStatuses"]]
    }


INITIALIZED = [("start", "fetch"), ("exit", "fetch", 0), ("start", "main")]


@pytest.mark.parametrize(
    ("policy", "steps", "pod_phase_name", "task_phase"),
    [
        pytest.param("Always", [], "Pending", Phase.INITIALIZING, id="nothing started"),
        pytest.param(
            "Always", [("start", "fetch")], "Pending", Phase.INITIALIZING, id="init running"
        ),
        pytest.param(
            "Always",
            [("start", "fetch"), ("exit", "fetch", 0), ("start", "main")],
            "Running",
            Phase.RUNNING,
            id="main running",
        ),
        pytest.param(
            "Never",
            [("start", "fetch"), ("exit", "fetch", 0), ("start", "main"), ("exit", "main", 0)],
            "Succeeded",
            Phase.SUCCESS,
            id="done",
        ),
        pytest.param(
            "Never",
            [("start", "fetch"), ("exit", "fetch", 0), ("start", "main"), ("exit", "main", 1)],
            "Failed",
            Phase.RETRYABLE_FAILURE,
            id="failed",
        ),
        pytest.param(
            "OnFailure",
            [*INITIALIZED, ("exit", "main", 1), ("start", "main"), ("exit", "main", 1)],
            "Running",
            Phase.RUNNING,
            id="in back-off on failure",
        ),
        pytest.param(
            "Always",
            [*INITIALIZED, ("exit", "main", 0), ("start", "main"), ("exit", "main", 0)],
            "Running",
            Phase.RUNNING,
            id="in back-off always",
        ),
        pytest.param(
            "OnFailure",
            [("start", "fetch"), ("exit", "fetch", 1)],
            "Pending",
            Phase.INITIALIZING,
            id="init failed, retried",
        ),
        pytest.param(
            "Never",
            [("start", "fetch"), ("exit", "fetch", 1)],
            "Failed",
            Phase.RETRYABLE_FAILURE,
            id="init failed, never retried",
        ),
    ],
)
def test_statuses_read_by_the_pod_plugin_give_the_phases_a_cluster_would(
    policy: str, steps: list[tuple[Any, ...]], pod_phase_name: str, task_phase: Phase
) -> None:
    pod = PodRun.new(shape(policy=policy, init=("fetch",)), T0)
    for number, (action, name, *code) in enumerate(steps):
        pod = (
            started(pod, name, number) if action == "start" else exited(pod, name, code[0], number)
        )
    now = at(len(steps))
    assert pod_status(pod, now, FAST)["phase"] == pod_phase_name
    assert engine_phase(pod, now) == task_phase


def test_a_crash_looping_container_shows_its_back_off_restarts_and_last_termination() -> None:
    pod = started(PodRun.new(shape(policy="OnFailure"), T0), "main", 0)
    pod = exited(pod, "main", 1, 1)
    pod = exited(started(pod, "main", 1), "main", 1, 2)
    pod = exited(started(pod, "main", 12), "main", 3, 14)
    status = pod_status(pod, at(15), FAST)
    (main,) = status["containerStatuses"]
    assert main["state"] == {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": "back-off 20s restarting failed container=main pod=p_research(u-1)",
        }
    }
    assert main["lastState"] == {
        "terminated": {
            "exitCode": 3,
            "reason": "Error",
            "startedAt": "2026-11-21T12:00:12Z",
            "finishedAt": "2026-11-21T12:00:14Z",
        }
    }
    assert (main["restartCount"], main["ready"], main["started"]) == (2, False, False)
    assert status["phase"] == "Running"
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "ContainersNotReady",
        "containers with unready status: [main]",
    )
    assert engine_phase(pod, at(15)) is Phase.RUNNING
    # Restarted: running again, the last termination kept.
    pod = started(pod, "main", 34)
    (main,) = pod_status(pod, at(34), FAST)["containerStatuses"]
    assert (main["state"], main["restartCount"]) == (
        {"running": {"startedAt": "2026-11-21T12:00:34Z"}},
        3,
    )
    assert main["lastState"]["terminated"]["exitCode"] == 3


def test_conditions_keep_their_transition_times_until_their_status_changes() -> None:
    pod = PodRun.new(shape(init=("fetch",)), T0)
    first = pod_status(pod, at(1), FAST)
    pod = exited(started(pod, "fetch", 2), "fetch", 0, 3)
    second = pod_status(pod, at(3), FAST, first)
    pod = started(pod, "main", 4)
    third = pod_status(pod, at(4), FAST, second)
    times = [
        {c["type"]: (c["status"], c["lastTransitionTime"]) for c in s["conditions"]}
        for s in (first, second, third)
    ]
    assert [t["Initialized"] for t in times] == [
        ("False", "2026-11-21T12:00:01Z"),
        ("True", "2026-11-21T12:00:03Z"),
        ("True", "2026-11-21T12:00:03Z"),
    ]
    assert [t["Ready"] for t in times] == [
        ("False", "2026-11-21T12:00:01Z"),
        ("False", "2026-11-21T12:00:01Z"),
        ("True", "2026-11-21T12:00:04Z"),
    ]
    assert {t["PodScheduled"] for t in times} == {("True", "2026-11-21T12:00:00Z")}
    assert [c["type"] for c in third["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]


def test_a_stopped_pod_reports_the_containers_that_never_ran_as_terminated() -> None:
    pod = PodRun.new(shape(init=("fetch",), main=("main", "logger")), T0)
    pod = pod.with_container(pod.containers["fetch"].refused("CreateContainerError", "no command"))
    pod = pod.stopping_by(at(1))
    status = pod_status(pod, at(1), FAST)
    assert status["phase"] == "Failed"
    (fetch,) = status["initContainerStatuses"]
    assert fetch["state"]["terminated"] == {
        "exitCode": 137,
        "reason": "ContainerStatusUnknown",
        "message": "The container could not be located when the pod was terminated",
    }
    # The pod never initialized: its regular containers stay waiting.
    assert {s["state"]["waiting"]["reason"] for s in status["containerStatuses"]} == {
        "PodInitializing"
    }


def test_a_terminal_phase_is_never_left() -> None:
    pod = exited(started(PodRun.new(shape(policy="Never"), T0), "main", 0), "main", 0, 1)
    done = pod_status(pod, at(1), FAST)
    assert done["phase"] == "Succeeded"
    # Whatever the runtime says afterwards (here: a container running again), Succeeded stays.
    assert pod_status(started(pod, "main", 2), at(2), FAST, done)["phase"] == "Succeeded"


# Every sequence of statuses moves forward -----------------------------------------------------

_POD_PHASES = {"Pending": 0, "Running": 1, "Succeeded": 2, "Failed": 2}
_TASK_PHASES = {
    Phase.QUEUED: 0,
    Phase.INITIALIZING: 1,
    Phase.RUNNING: 2,
}


@dataclasses.dataclass
class Scenario:
    """A pod, what each run of each container does (seconds it runs, exit code; whether it traps
    SIGTERM), and when it is deleted (or never)."""

    pod: PodShape
    runs: dict[str, list[tuple[int, int]]]
    traps: frozenset[str]
    delete_at: int | None


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    policy = draw(st.sampled_from(["Always", "OnFailure", "Never"]))
    init = tuple(f"init{n}" for n in range(draw(st.integers(0, 2))))
    sidecars = tuple(f"side{n}" for n in range(draw(st.integers(0, 2))))
    main = tuple(f"main{n}" for n in range(draw(st.integers(1, 2))))
    pod = shape(policy=policy, init=init, sidecars=sidecars, main=("main", *main[1:]), grace=5)
    run = st.tuples(st.integers(0, 40), st.sampled_from([0, 0, 1, 2]))
    runs = {c.name: draw(st.lists(run, min_size=1, max_size=4)) for c in pod.containers}
    traps = frozenset(draw(st.sets(st.sampled_from([c.name for c in pod.containers]))))
    delete_at = draw(st.none() | st.integers(0, 400))
    return Scenario(pod, runs, traps, delete_at)


def simulate(scenario: Scenario, limit: int = 400) -> Iterator[tuple[datetime, dict[str, Any]]]:
    """Drive the planner as the adapter's worker does, in simulated time: act until nothing is
    left to do now, write the status, wait for the next exit, deadline or deletion."""
    pod = PodRun.new(scenario.pod, T0)
    attempts = {name: iter(runs) for name, runs in scenario.runs.items()}
    exits: dict[str, tuple[datetime, int]] = {}
    now = T0
    previous: dict[str, Any] | None = None
    for _ in range(limit):
        if scenario.delete_at is not None and now >= at(scenario.delete_at) and not pod.stopping:
            pod = pod.stopping_by(now + scenario.pod.grace)
        for name, (when, code) in list(exits.items()):
            if when <= now:
                del exits[name]
                pod = pod.with_container(pod.containers[name].exited(code, when))
        plan = plan_pod(pod, now, FAST)
        if plan.acts:
            if plan.stop_deadline is not None:
                pod = pod.stopping_by(plan.stop_deadline)
            for name in plan.kill:
                exits[name] = (now, 137)
                pod = pod.with_container(pod.containers[name].signalled(kill=True))
            for name in plan.stop:
                if name not in scenario.traps:
                    exits[name] = (now, 143)
                pod = pod.with_container(pod.containers[name].signalled())
            for name in plan.start:
                duration, code = next(attempts[name], (1000, 0))
                exits[name] = (now + seconds(duration), code)
                pod = pod.with_container(pod.containers[name].started(now, FAST))
            continue
        previous = pod_status(pod, now, FAST, previous)
        yield now, previous
        if plan.done:
            return
        upcoming = [when for when, _ in exits.values()]
        upcoming += [plan.wake_at] if plan.wake_at else []
        if scenario.delete_at is not None and not pod.stopping:
            upcoming.append(at(scenario.delete_at))
        if not upcoming:
            return
        now = max(now, min(upcoming))


@given(scenarios())
def test_pod_statuses_and_task_phases_never_go_back(scenario: Scenario) -> None:
    pod_phases, task_phases, restarts = [], [], []
    for now, status in simulate(scenario):
        observed = {
            "metadata": {
                "creationTimestamp": "2026-11-21T12:00:00Z",
                "annotations": {"podwright.dev/primary-container": "main"},
            },
            "spec": {"containers": [{"name": c.name} for c in scenario.pod.main]},
            "status": status,
        }
        pod_phases.append(_POD_PHASES[status["phase"]])
        phase = pod_phase(observed, now, PodPhaseConfig()).phase
        if phase.is_terminal:
            break  # the engine stops reading the pod
        task_phases.append(_TASK_PHASES[phase])
        restarts.append(
            [
                s["restartCount"]
                for s in [*status.get("initContainerStatuses", []), *status["containerStatuses"]]
            ]
        )
    assert pod_phases == sorted(pod_phases)
    assert task_phases == sorted(task_phases)
    for before, after in itertools.pairwise(restarts):
        assert all(b <= a for b, a in zip(before, after, strict=True))


@given(scenarios())
def test_a_deleted_pod_stops_within_its_grace_period_and_ends_terminal(scenario: Scenario) -> None:
    scenario.delete_at = scenario.delete_at or 0
    trace = list(simulate(scenario))
    last_time, last = trace[-1]
    assert last["phase"] in ("Succeeded", "Failed")
    assert last_time <= at(scenario.delete_at) + scenario.pod.grace
    every = [*last.get("initContainerStatuses", []), *last["containerStatuses"]]
    assert not any("running" in s["state"] for s in every)
