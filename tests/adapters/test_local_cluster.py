"""The local backend: Pods and Jobs as processes, behind the engine's Kubernetes port."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.local.cluster import LocalCluster
from podwright.core.lifecycle.phases import Phase
from podwright.core.lifecycle.pod_status import PodPhaseConfig, pod_phase
from podwright.core.local_runtime import Backoff
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex, EventKey
from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ConflictError,
    InvalidError,
    NotFoundError,
    ObjectRef,
    PatchType,
)
from podwright.engine.plugin import TaskContext
from podwright.engine.plugin_manager import PluginManager
from podwright.engine.plugins import JobPlugin
from tests.kube.support import eventually

QUICK = Backoff(timedelta(milliseconds=200), timedelta(milliseconds=800))


@pytest.fixture
def quick(tmp_path: Path, events: EventIndex) -> Iterator[LocalCluster]:
    """The local backend with short back-offs (a crash loop waits 0.2 s, then 0.4 s...)."""
    local = LocalCluster(
        tmp_path / "quick", events=events, restart_backoff=QUICK, job_backoff=QUICK
    )
    yield local
    local.close()


@pytest.fixture
def record() -> Iterator[Recording]:
    """Start recording an object's status versions; every recorder stops after the test."""
    started: list[Recorder] = []

    def start(cluster: LocalCluster, target: ObjectRef) -> Recorder:
        started.append(Recorder(cluster, target))
        return started[-1]

    yield start
    for recorder in started:
        recorder.stop()


def pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "research",
            "annotations": {"podwright.dev/primary-container": "main"},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1", "command": ["sh", "-c", script]}],
            **spec,
        },
    }


def container(name: str, script: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1", "command": ["sh", "-c", script], **fields}


def ref(name: str, kind: str = "Pod") -> ObjectRef:
    return ObjectRef("v1" if kind == "Pod" else "batch/v1", kind, "research", name)


def status_of(cluster: LocalCluster, name: str, kind: str = "Pod") -> dict[str, Any]:
    found = cluster.cached(ref(name, kind))
    return dict((found or {}).get("status") or {})


def phase_of(cluster: LocalCluster, name: str, kind: str = "Pod") -> str:
    return str(status_of(cluster, name, kind).get("phase"))


def container_status(cluster: LocalCluster, name: str, container_name: str = "main") -> Any:
    status = status_of(cluster, name)
    every = [*status.get("initContainerStatuses", []), *status.get("containerStatuses", [])]
    return next((s for s in every if s["name"] == container_name), {})


def container_state(cluster: LocalCluster, name: str) -> dict[str, Any]:
    state: dict[str, Any] = container_status(cluster, name).get("state") or {}
    return state


def reasons(events: EventIndex, name: str, kind: str = "Pod") -> list[str]:
    return [event.reason for event in events.list(EventKey("research", kind, name))]


def notes(events: EventIndex, name: str, reason: str) -> list[str]:
    return [e.note for e in events.list(EventKey("research", "Pod", name)) if e.reason == reason]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def pids_of(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def gone(cluster: LocalCluster, name: str, kind: str = "Pod") -> bool:
    return cluster.cached(ref(name, kind)) is None


class Recorder:
    """Every status version of one object that a fast poll sees, in order (a poll can miss a
    version, never reorder two)."""

    def __init__(self, cluster: LocalCluster, target: ObjectRef) -> None:
        self.seen: list[tuple[datetime, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, args=(cluster, target))
        self._thread.start()

    def _poll(self, cluster: LocalCluster, target: ObjectRef) -> None:
        version = None
        while not self._stop.is_set():
            found = cluster.cached(target)
            if found is not None and found["metadata"]["resourceVersion"] != version:
                version = found["metadata"]["resourceVersion"]
                self.seen.append((datetime.now(UTC), dict(found)))
            time.sleep(0.002)

    def stop(self) -> list[tuple[datetime, dict[str, Any]]]:
        self._stop.set()
        self._thread.join()
        return self.seen


Recording = Callable[[LocalCluster, ObjectRef], Recorder]


# Running -------------------------------------------------------------------------------------


def test_a_pod_runs_its_command_with_its_environment_and_its_output_is_kept(
    cluster: LocalCluster, events: EventIndex
) -> None:
    created = cluster.create(
        pod(
            "hello",
            "",
            containers=[
                container(
                    "main",
                    'echo "hello from $HOSTNAME"; echo "$GREETING"',
                    env=[{"name": "GREETING", "value": "hi"}],
                )
            ],
        )
    )
    assert created["metadata"]["uid"]
    assert created["metadata"]["resourceVersion"]
    assert created["status"] == {"phase": "Pending"}
    eventually(lambda: phase_of(cluster, "hello") == "Succeeded")
    status = cluster.get(ref("hello"))["status"]
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert cluster.log_path("research", "hello", "main").read_text() == "hello from hello\nhi\n"
    assert reasons(events, "hello") == ["Scheduled", "Pulled", "Created", "Started"]
    assert notes(events, "hello", "Created") == ["Created container: main"]
    assert "is recorded, not pulled" in notes(events, "hello", "Pulled")[0]


def test_a_failing_container_fails_the_pod_with_its_exit_code(cluster: LocalCluster) -> None:
    cluster.create(pod("fails", "echo oops >&2; exit 3"))
    eventually(lambda: phase_of(cluster, "fails") == "Failed")
    terminated = container_state(cluster, "fails")["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert cluster.log_path("research", "fails", "main").read_text() == "oops\n"


def test_init_containers_run_first_in_order(cluster: LocalCluster, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    init = [container(f"init-{n}", f"echo init-{n} >> {trace}") for n in (1, 2)]
    cluster.create(pod("ordered", f"echo main >> {trace}", initContainers=init))
    eventually(lambda: phase_of(cluster, "ordered") == "Succeeded")
    assert trace.read_text() == "init-1\ninit-2\nmain\n"


def test_what_cannot_run_here_waits_with_the_kubelets_reason(
    cluster: LocalCluster, events: EventIndex
) -> None:
    cluster.create(pod("no-command", "", containers=[{"name": "main", "image": "trainer:1"}]))
    waiting = eventually(
        lambda: (
            container_state(cluster, "no-command").get("waiting", {}).get("reason")
            == "CreateContainerError"
            and container_state(cluster, "no-command")["waiting"]
        )
    )
    assert "cannot run the image's entrypoint" in waiting["message"]
    assert phase_of(cluster, "no-command") == "Pending"
    assert "Failed" in reasons(events, "no-command")
    cluster.create(
        pod("missing", "", containers=[{"name": "main", "image": "x", "command": ["no-such-cmd"]}])
    )
    eventually(lambda: phase_of(cluster, "missing") == "Failed")
    terminated = container_state(cluster, "missing")["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (128, "StartError")


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            pod("bad-policy", "true", restartPolicy="Sometimes"),
            'Pod "bad-policy" is invalid: spec.restartPolicy: Unsupported value: "Sometimes"',
        ),
        (
            pod("twins", "true", containers=[container("a", "true"), container("a", "true")]),
            'spec.containers[1].name: Duplicate value: "a"',
        ),
        (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "always"},
                "spec": {"template": {"spec": {"containers": [container("main", "true")]}}},
            },
            'spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
            '"OnFailure", "Never"',
        ),
    ],
)
def test_specs_the_api_server_refuses_are_refused(
    cluster: LocalCluster, manifest: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidError, match=message.replace("[", r"\[").replace("]", r"\]")):
        cluster.create(manifest)


def test_names_conflicts_and_unsupported_kinds_as_the_api_server_answers(
    cluster: LocalCluster,
) -> None:
    generated = cluster.create(
        pod("", "true") | {"metadata": {"generateName": "gen-", "namespace": "research"}}
    )
    assert generated["metadata"]["name"].startswith("gen-")
    assert len(generated["metadata"]["name"]) == len("gen-") + 5
    cluster.create(pod("twice", "true"))
    with pytest.raises(AlreadyExistsError, match='pods "twice" already exists'):
        cluster.create(pod("twice", "true"))
    with pytest.raises(NotFoundError, match='pods "nope" not found'):
        cluster.get(ref("nope"))
    with pytest.raises(
        InvalidError, match=r"the local backend runs Pods and Jobs, not kubeflow\.org/v1/PyTorchJob"
    ):
        cluster.create(
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"}}
        )


def test_a_containers_output_is_complete_when_its_status_says_it_terminated(
    cluster: LocalCluster,
) -> None:
    # The main process exits at once; what it left behind would go on writing. In a container
    # those processes die with it: the log must not grow once the status says terminated.
    script = "(for i in $(seq 1 200); do echo line $i; sleep 0.01; done) & echo started"
    cluster.create(pod("chatty", script))
    eventually(lambda: "terminated" in container_state(cluster, "chatty"))
    log = cluster.log_path("research", "chatty", "main")
    seen = log.read_text()
    time.sleep(0.5)  # time for a survivor to write (there must be none)
    assert log.read_text() == seen
    assert seen.startswith("started\n")


# Restarts ------------------------------------------------------------------------------------


def test_on_failure_restarts_a_failed_container_in_place_with_the_crash_loop_back_off(
    quick: LocalCluster, events: EventIndex, tmp_path: Path, record: Recording
) -> None:
    attempts = tmp_path / "attempts"
    # Fails twice, then succeeds: restarted at once, then after 0.2 s.
    script = f"echo run >> {attempts}; echo attempt; [ $(wc -l < {attempts}) -ge 3 ]"
    recorder = record(quick, ref("flaky"))
    quick.create(pod("flaky", script, restartPolicy="OnFailure"))
    eventually(lambda: phase_of(quick, "flaky") == "Succeeded")
    seen = recorder.stop()
    main = container_status(quick, "flaky")
    assert main["restartCount"] == 2
    assert main["state"]["terminated"]["exitCode"] == 0
    assert main["lastState"]["terminated"]["exitCode"] == 1
    assert quick.log_path("research", "flaky", "main").read_text() == "attempt\n" * 3
    assert reasons(events, "flaky").count("Started") == 3
    assert notes(events, "flaky", "BackOff") == [
        f"Back-off restarting failed container main in pod flaky_research("
        f"{quick.get(ref('flaky'))['metadata']['uid']})"
    ]
    waiting = [
        s["state"]["waiting"]
        for _, obj in seen
        for s in obj["status"].get("containerStatuses", [])
        if s["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff"
    ]
    assert waiting, "the back-off was never shown"
    assert waiting[0]["message"].startswith("back-off 200ms restarting failed container=main pod=")
    assert_moves_forward(seen)


def test_always_restarts_a_container_whatever_its_exit(quick: LocalCluster) -> None:
    quick.create(pod("loop", "echo once", restartPolicy="Always"))
    eventually(lambda: container_status(quick, "loop").get("restartCount", 0) >= 3)
    assert phase_of(quick, "loop") == "Running"
    assert container_status(quick, "loop")["lastState"]["terminated"]["reason"] == "Completed"


def test_a_bare_pod_restarts_always_by_default(quick: LocalCluster) -> None:
    manifest = pod("bare", "exit 0")
    del manifest["spec"]["restartPolicy"]
    quick.create(manifest)
    assert quick.get(ref("bare"))["spec"]["restartPolicy"] == "Always"
    eventually(lambda: container_status(quick, "bare").get("restartCount", 0) >= 1)


def test_never_leaves_an_ended_container_ended(quick: LocalCluster) -> None:
    quick.create(pod("once", "exit 1"))
    eventually(lambda: phase_of(quick, "once") == "Failed")
    time.sleep(0.5)  # longer than the back-off: a restart would have happened
    assert container_status(quick, "once")["restartCount"] == 0


def test_an_init_container_is_retried_unless_the_policy_is_never(
    quick: LocalCluster, tmp_path: Path
) -> None:
    tries = tmp_path / "tries"
    init = [container("fetch", f"echo x >> {tries}; [ $(wc -l < {tries}) -ge 2 ]")]
    quick.create(pod("retried", "echo main", restartPolicy="OnFailure", initContainers=init))
    eventually(lambda: phase_of(quick, "retried") == "Succeeded")
    assert container_status(quick, "retried", "fetch")["restartCount"] == 1
    quick.create(pod("failed-init", "echo main", initContainers=[container("fetch", "exit 2")]))
    eventually(lambda: phase_of(quick, "failed-init") == "Failed")
    assert container_state(quick, "failed-init") == {"waiting": {"reason": "PodInitializing"}}
    assert not quick.log_path("research", "failed-init", "main").exists()


def test_a_native_sidecar_runs_beside_the_containers_and_is_stopped_when_they_are_done(
    quick: LocalCluster, events: EventIndex, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    sidecar = container("mount", f"echo $$$$ >> {pids}; exec sleep 300", restartPolicy="Always")
    quick.create(pod("with-sidecar", "echo working", initContainers=[sidecar]))
    eventually(lambda: phase_of(quick, "with-sidecar") == "Succeeded")
    (pid,) = pids_of(pids)
    eventually(lambda: not alive(pid))
    assert container_state(quick, "with-sidecar")["terminated"]["exitCode"] == 0
    mount = container_status(quick, "with-sidecar", "mount")["state"]["terminated"]
    assert (mount["exitCode"], mount["reason"]) == (143, "Error")
    assert notes(events, "with-sidecar", "Killing") == ["Stopping container mount"]


def test_statuses_of_a_pod_with_init_containers_move_forward(
    cluster: LocalCluster, record: Recording
) -> None:
    recorder = record(cluster, ref("staged"))
    init = [container(f"step-{n}", "sleep 0.2") for n in (1, 2)]
    extra = container("logger", "sleep 0.3")
    cluster.create(
        pod(
            "staged",
            "sleep 0.3",
            initContainers=init,
            containers=[container("main", "sleep 0.3"), extra],
        )
    )
    eventually(lambda: phase_of(cluster, "staged") == "Succeeded")
    seen = recorder.stop()
    assert_moves_forward(seen)
    assert len(seen) >= 4


_POD_ORDER = {"Pending": 0, "Running": 1, "Succeeded": 2, "Failed": 2}
_TASK_ORDER = {Phase.QUEUED: 0, Phase.INITIALIZING: 1, Phase.RUNNING: 2}


def assert_moves_forward(seen: list[tuple[datetime, dict[str, Any]]]) -> None:
    """Neither the pod's phase nor the task phase the engine reads from it ever goes back."""
    pod_phases = [_POD_ORDER[obj["status"]["phase"]] for _, obj in seen]
    assert pod_phases == sorted(pod_phases), [obj["status"]["phase"] for _, obj in seen]
    task_phases = []
    for when, obj in seen:
        phase = pod_phase(obj, when, PodPhaseConfig()).phase
        if phase.is_terminal:
            break
        task_phases.append(phase)
    order = [_TASK_ORDER[phase] for phase in task_phases]
    assert order == sorted(order), task_phases


# Deletion ------------------------------------------------------------------------------------

TRAPS_TERM = (
    "trap 'echo stopping; sleep 1; echo stopped; exit 0' TERM; echo ready; "
    "while true; do sleep 0.1; done"
)


def test_a_deleted_pod_stays_with_its_deletion_timestamp_until_its_processes_are_gone(
    cluster: LocalCluster, events: EventIndex, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = TRAPS_TERM.replace("sleep 1;", f"while [ ! -e {gate} ]; do sleep 0.05; done;")
    cluster.create(pod("graceful", script, terminationGracePeriodSeconds=20))
    log = cluster.log_path("research", "graceful", "main")
    eventually(lambda: log.exists() and "ready" in log.read_text())
    before = datetime.now(UTC).replace(microsecond=0)
    cluster.delete(ref("graceful"))
    deleting = cluster.get(ref("graceful"))
    metadata = deleting["metadata"]
    assert metadata["deletionGracePeriodSeconds"] == 20
    deadline = datetime.fromisoformat(metadata["deletionTimestamp"])
    assert before + timedelta(seconds=19) <= deadline <= before + timedelta(seconds=21)
    # Still there, its container still running, while the process is in its trap (held there
    # by the gate, so no machine is too slow to see it).
    eventually(lambda: "stopping" in log.read_text())
    assert "running" in container_state(cluster, "graceful")
    assert notes(events, "graceful", "Killing") == ["Stopping container main"]
    gate.touch()  # the trap ends
    eventually(lambda: gone(cluster, "graceful"), timeout=30)
    # The shell reports its SIGTERMed sleep; then the trap runs to its end.
    assert log.read_text().startswith("ready\n")
    assert log.read_text().endswith("stopping\nstopped\n")


def test_a_finalizer_keeps_a_deleted_pod_with_its_terminated_containers_until_removed(
    cluster: LocalCluster,
) -> None:
    manifest = pod("kept", TRAPS_TERM)
    manifest["metadata"]["finalizers"] = ["podwright.dev/finalizer"]
    cluster.create(manifest)
    eventually(lambda: phase_of(cluster, "kept") == "Running")
    cluster.delete(ref("kept"))
    eventually(lambda: "terminated" in container_state(cluster, "kept"), timeout=30)
    current = cluster.get(ref("kept"))
    terminated = current["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    assert current["status"]["phase"] == "Succeeded"
    assert current["metadata"]["deletionGracePeriodSeconds"] == 0
    with pytest.raises(InvalidError, match="no new finalizers can be added"):
        cluster.patch(
            ref("kept"),
            {"metadata": {"finalizers": ["a", "podwright.dev/finalizer"]}},
            PatchType.MERGE,
        )
    with pytest.raises(ConflictError, match="the object has been modified"):
        cluster.patch(
            ref("kept"), {"metadata": {"finalizers": None, "resourceVersion": "1"}}, PatchType.MERGE
        )
    version = current["metadata"]["resourceVersion"]
    cluster.patch(
        ref("kept"), {"metadata": {"finalizers": None, "resourceVersion": version}}, PatchType.MERGE
    )
    assert gone(cluster, "kept")


def test_a_container_that_ignores_sigterm_is_killed_after_the_grace_period(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """The container goes on after SIGTERM (it says so in its log: a beat after the TERM), and
    is killed once the grace period is over; the pod is gone only with its process. Nothing here
    depends on how fast the machine is: the grace (3 s) only has to outlast one 0.1 s beat."""
    pids, log = tmp_path / "pids", tmp_path / "log"
    script = (
        f"trap 'echo term >> {log}' TERM; echo $$$$ > {pids}; "
        f"while true; do echo beat >> {log}; sleep 0.1; done"
    )
    cluster.create(pod("stubborn", script, terminationGracePeriodSeconds=3))
    eventually(lambda: pids_of(pids))
    cluster.delete(ref("stubborn"))
    eventually(lambda: gone(cluster, "stubborn"), timeout=30)
    assert not alive(pids_of(pids)[0])
    lines = log.read_text().split()
    assert "term" in lines
    assert "beat" in lines[lines.index("term") + 1 :]


def test_a_grace_period_of_zero_kills_at_once_and_returns_when_the_processes_are_gone(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    script = f"trap '' TERM; sleep 300 & echo $$$$ $! > {pids}; wait"
    cluster.create(pod("forced", script))
    eventually(lambda: len(pids_of(pids)) == 2)
    cluster.delete(ref("forced"), grace_period_seconds=0)
    assert gone(cluster, "forced")
    assert not any(alive(pid) for pid in pids_of(pids))


def test_a_second_deletion_may_only_shorten_the_grace_period(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    cluster.create(pod("shortened", f"trap '' TERM; echo $$$$ > {pids}; sleep 300"))
    eventually(lambda: pids_of(pids))
    cluster.delete(ref("shortened"), grace_period_seconds=60)
    cluster.delete(ref("shortened"), grace_period_seconds=90)
    assert cluster.get(ref("shortened"))["metadata"]["deletionGracePeriodSeconds"] == 60
    cluster.delete(ref("shortened"), grace_period_seconds=1)
    assert cluster.get(ref("shortened"))["metadata"]["deletionGracePeriodSeconds"] == 1
    eventually(lambda: gone(cluster, "shortened"), timeout=30)
    assert not alive(pids_of(pids)[0])


def test_an_ended_pod_is_deleted_at_once(cluster: LocalCluster) -> None:
    cluster.create(pod("ended", "true"))
    eventually(lambda: phase_of(cluster, "ended") == "Succeeded")
    cluster.delete(ref("ended"))
    assert gone(cluster, "ended")


def test_deleting_a_running_pod_stops_its_whole_process_group(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    cluster.create(
        pod("sleeper", f"sleep 300 & echo $! > {pids}; wait", terminationGracePeriodSeconds=1)
    )
    eventually(lambda: pids_of(pids))
    eventually(lambda: phase_of(cluster, "sleeper") == "Running")
    cluster.delete(ref("sleeper"))
    eventually(lambda: gone(cluster, "sleeper"))
    eventually(lambda: not alive(pids_of(pids)[0]))


def test_closing_stops_every_process_with_its_grace_period_before_returning(
    tmp_path: Path,
) -> None:
    local = LocalCluster(tmp_path / "local")
    pids = tmp_path / "pids"
    ignores = f"trap '' TERM; echo $$$$ >> {pids}; while true; do sleep 0.1; done"
    try:
        local.create(pod("stubborn", ignores, terminationGracePeriodSeconds=1))
        # In a command, $$ is an escaped $ (Kubernetes' expansion): $$$$ reaches the shell as $$.
        local.create(pod("forever", f"echo $$$$ >> {pids}; exec sleep 300"))
        eventually(lambda: len(pids_of(pids)) == 2)
    finally:
        started = time.monotonic()
        local.close()
    assert time.monotonic() - started >= 0.9  # the stubborn one had its second of grace
    assert not any(alive(pid) for pid in pids_of(pids))
    assert list((tmp_path / "local" / "running").iterdir()) == []
    with pytest.raises(Exception, match="the local backend is closed"):
        local.create(pod("late", "true"))


def test_dependents_go_with_their_owner(cluster: LocalCluster) -> None:
    owner = cluster.create(pod("owner", "sleep 300", terminationGracePeriodSeconds=0))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "owner",
            "namespace": "research",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                }
            ],
        },
    }
    cluster.create(service)
    cluster.delete(ref("owner"))
    eventually(lambda: gone(cluster, "owner") and gone(cluster, "owner", "Service"))


# Jobs ----------------------------------------------------------------------------------------


def job(name: str, script: str, backoff_limit: int = 6, policy: str = "Never") -> dict[str, Any]:
    template = pod("ignored", script, restartPolicy=policy)
    del template["metadata"]["name"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "research"},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {"metadata": template["metadata"], "spec": template["spec"]},
        },
    }


def conditions(cluster: LocalCluster, name: str) -> dict[str, str]:
    status = status_of(cluster, name, "Job")
    return {c["type"]: c.get("reason", "") for c in status.get("conditions") or []}


def test_a_job_runs_a_pod_from_its_template_to_completion(
    cluster: LocalCluster, events: EventIndex
) -> None:
    cluster.create(job("train", "echo epoch 1"))
    eventually(lambda: "Complete" in conditions(cluster, "train"))
    assert conditions(cluster, "train") == {
        "SuccessCriteriaMet": "CompletionsReached",
        "Complete": "CompletionsReached",
    }
    (pod_name,) = cluster.pods_of_job("research", "train")
    assert pod_name.startswith("train-")
    labels = cluster.get(ref(pod_name))["metadata"]["labels"]
    assert labels["job-name"] == labels["batch.kubernetes.io/job-name"] == "train"
    status = cluster.get(ref("train", "Job"))["status"]
    assert (status["succeeded"], status["ready"], status["terminating"]) == (1, 0, 0)
    assert "active" not in status
    assert "failed" not in status
    assert reasons(events, "train", "Job") == ["SuccessfulCreate", "Completed"]
    assert cluster.log_path("research", pod_name, "main").read_text() == "epoch 1\n"


def test_a_job_replaces_failed_pods_after_its_back_off_up_to_its_limit(
    quick: LocalCluster, events: EventIndex, record: Recording
) -> None:
    recorder = record(quick, ref("flaky", "Job"))
    quick.create(job("flaky", "exit 1", backoff_limit=2))
    eventually(lambda: "Failed" in conditions(quick, "flaky"), timeout=30)
    seen = recorder.stop()
    assert len(quick.pods_of_job("research", "flaky")) == 3
    status = quick.get(ref("flaky", "Job"))["status"]
    assert status["failed"] == 3
    assert conditions(quick, "flaky") == {
        "FailureTarget": "BackoffLimitExceeded",
        "Failed": "BackoffLimitExceeded",
    }
    assert reasons(events, "flaky", "Job")[-1] == "BackoffLimitExceeded"
    # Between two pods the Job has none active, as the Job controller writes it.
    between = [obj["status"] for _, obj in seen if obj["status"].get("failed")]
    assert any("active" not in status for status in between)


def test_with_on_failure_a_jobs_pod_restarts_in_place_and_restarts_count_to_the_limit(
    quick: LocalCluster, events: EventIndex
) -> None:
    quick.create(job("crashing", "exit 1", backoff_limit=2, policy="OnFailure"))
    eventually(lambda: "Failed" in conditions(quick, "crashing"), timeout=30)
    assert quick.pods_of_job("research", "crashing") == []  # its pod was deleted, and is gone
    status = quick.get(ref("crashing", "Job"))["status"]
    assert status["failed"] == 1
    assert reasons(events, "crashing", "Job") == [
        "SuccessfulCreate",
        "SuccessfulDelete",
        "BackoffLimitExceeded",
    ]


def test_the_lifecycle_engine_drives_a_local_job_to_success(
    cluster: LocalCluster, events: EventIndex
) -> None:
    manager = PluginManager(
        JobPlugin(), cluster, LifecycleConfig(), events=events, sleep=time.sleep
    )
    resource = job("ignored", "echo trained")
    task = TaskContext("task-1", "research", resource)
    state: dict[str, Any] | None = None
    seen: list[Phase] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        transition = manager.handle(task, state, datetime.now(UTC))
        if transition.state_changed:
            state = transition.encoded_state()
        if not seen or seen[-1] is not transition.info.phase:
            seen.append(transition.info.phase)
        if transition.info.phase.is_terminal:
            break
        time.sleep(0.05)
    assert seen[-1] is Phase.SUCCESS, seen


def job_with_finalizer(name: str) -> dict[str, Any]:
    manifest = job(name, "sleep 300")
    manifest["metadata"]["finalizers"] = ["podwright.dev/finalizer"]
    return manifest


def running_pod_of(cluster: LocalCluster, name: str) -> str:
    return str(
        eventually(
            lambda: next(
                (
                    p
                    for p in cluster.pods_of_job("research", name)
                    if phase_of(cluster, p) == "Running"
                ),
                None,
            )
        )
    )


def test_a_foreground_deletion_keeps_the_job_until_its_pods_are_gone(
    cluster: LocalCluster,
) -> None:
    cluster.create(job("fg", "sleep 300"))
    pod_name = running_pod_of(cluster, "fg")
    cluster.delete(ref("fg", "Job"), propagation="Foreground")
    metadata = cluster.get(ref("fg", "Job"))["metadata"]
    assert "deletionTimestamp" in metadata
    assert "foregroundDeletion" in metadata["finalizers"]
    assert "deletionTimestamp" in cluster.get(ref(pod_name))["metadata"]
    eventually(lambda: gone(cluster, pod_name) and gone(cluster, "fg", "Job"))


def test_a_background_deletion_removes_the_job_then_its_pods(cluster: LocalCluster) -> None:
    cluster.create(job("bg", "sleep 300"))
    pod_name = running_pod_of(cluster, "bg")
    cluster.delete(ref("bg", "Job"))
    assert gone(cluster, "bg", "Job")
    eventually(lambda: gone(cluster, pod_name))


def test_a_finalizer_on_a_job_deleted_in_the_background_keeps_its_pods_running(
    cluster: LocalCluster,
) -> None:
    # As the garbage collector does: dependents of an owner that still exists are not deleted.
    cluster.create(job_with_finalizer("held"))
    pod_name = running_pod_of(cluster, "held")
    cluster.delete(ref("held", "Job"))  # the garbage collector decides within the delete
    assert phase_of(cluster, pod_name) == "Running"
    assert "deletionTimestamp" not in cluster.get(ref(pod_name))["metadata"]
    version = cluster.get(ref("held", "Job"))["metadata"]["resourceVersion"]
    cluster.patch(
        ref("held", "Job"),
        {"metadata": {"finalizers": None, "resourceVersion": version}},
        PatchType.MERGE,
    )
    assert gone(cluster, "held", "Job")
    eventually(lambda: gone(cluster, pod_name))


def test_an_unknown_propagation_policy_is_refused(cluster: LocalCluster) -> None:
    cluster.create(pod("p", "sleep 300", terminationGracePeriodSeconds=0))
    with pytest.raises(InvalidError, match='propagationPolicy: Unsupported value: "Sideways"'):
        cluster.delete(ref("p"), propagation="Sideways")


def test_a_finished_job_goes_after_its_ttl(cluster: LocalCluster) -> None:
    manifest = job("short-lived", "true")
    manifest["spec"]["ttlSecondsAfterFinished"] = 0
    cluster.create(manifest)
    eventually(lambda: gone(cluster, "short-lived", "Job"))
    assert cluster.pods_of_job("research", "short-lived") == []
