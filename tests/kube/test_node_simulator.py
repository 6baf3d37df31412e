"""The node simulator drives pods as a kubelet would, against the emulator and a real cluster.

Its pods select the simulator's own nodes (``sim.podwright.dev/simulator``) and tolerate their
taint, so on a real cluster no real node runs them; there the cluster's scheduler binds them,
elsewhere the simulator does.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from podwright.engine.kubernetes_port import NotFoundError, PatchType
from tests.kube.support import ApiServer, eventually, pod
from tests.node_sim import (
    EXIT_CODE,
    GPU,
    IMAGE_PULL_ERROR,
    OOM_KILLED,
    RUN_SECONDS,
    SIMULATOR_LABEL,
    STEERED_TO_SIMULATED_NODES,
    NodeShape,
    NodeSimulator,
)
from tests.node_sim.kubelet import Placement, Pod, SimulatedPod
from tests.node_sim.rest import NODES, call, leases_path
from tests.node_sim.scheduling import Candidate, Look, add_requests, choose_node, pod_requests
from tests.node_sim.simulator import SHORT_CRASH_LOOP

FINALIZER = "podwright.dev/test-hold"


@pytest.fixture
def sim(api: ApiServer) -> Iterator[NodeSimulator]:
    with api.simulate_nodes(lease_renew_seconds=0.2) as running:
        yield running


def _pod(
    api: ApiServer,
    sim: NodeSimulator,
    name: str,
    annotations: dict[str, str],
    *,
    restart_policy: str = "Never",
    **spec: Any,
) -> dict[str, Any]:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": api.namespace, "annotations": annotations},
        "spec": {
            "restartPolicy": restart_policy,
            "nodeSelector": {SIMULATOR_LABEL: sim.run_id},
            "tolerations": STEERED_TO_SIMULATED_NODES["tolerations"],
            "containers": [{"name": "main", "image": "registry.invalid/main:1"}],
            **spec,
        },
    }
    return api.client.create(manifest)


def _status(api: ApiServer, name: str) -> dict[str, Any]:
    status: dict[str, Any] = api.client.get(api.ref("Pod", name)).get("status") or {}
    return status


def _in_phase(api: ApiServer, name: str, phase: str) -> dict[str, Any] | None:
    status = _status(api, name)
    return status if status.get("phase") == phase else None


def _ended(api: ApiServer, name: str) -> dict[str, Any] | None:
    status = _status(api, name)
    return status if status.get("phase") in ("Succeeded", "Failed") else None


def _main(status: dict[str, Any]) -> dict[str, Any]:
    assert "containerStatuses" in status, "no status from the kubelet yet"
    (main,) = status["containerStatuses"]
    return dict(main)


def _events(api: ApiServer, name: str) -> list[dict[str, Any]]:
    events, _ = api.client.list_objects(
        "events.k8s.io/v1",
        "Event",
        namespace=api.namespace,
        field_selector=f"regarding.name={name}",
    )
    return sorted(events, key=lambda event: event.get("eventTime") or "")


def _reasons(api: ApiServer, name: str) -> list[str]:
    return [event["reason"] for event in _events(api, name)]


@pytest.mark.parametrize(
    ("code", "phase", "reason"), [("0", "Succeeded", "Completed"), ("3", "Failed", "Error")]
)
def test_a_pod_runs_then_ends_with_the_exit_code_its_annotation_chose(
    api: ApiServer, sim: NodeSimulator, code: str, phase: str, reason: str
) -> None:
    created = _pod(api, sim, "ends", {EXIT_CODE: code, RUN_SECONDS: "0.3"})
    # Every status the pod went through, from a watch: a poll could miss the short Running one.
    statuses: list[dict[str, Any]] = []
    for event in api.client.watch(
        "v1",
        "Pod",
        resource_version=created["metadata"]["resourceVersion"],
        namespace=api.namespace,
        field_selector="metadata.name=ends",
        timeout_seconds=60,
    ):
        if event["type"] == "BOOKMARK":
            continue
        statuses.append(event["object"].get("status") or {})
        if statuses[-1].get("phase") in ("Succeeded", "Failed"):
            break
    running = [status for status in statuses if status.get("phase") == "Running"][-1]
    assert [bool(running.get(key)) for key in ("podIP", "hostIP", "startTime")] == [True] * 3
    conditions = {c["type"]: c["status"] for c in running["conditions"]}
    for condition in ("PodScheduled", "Initialized", "ContainersReady", "Ready"):
        assert conditions[condition] == "True", condition
    assert _main(running)["state"]["running"]["startedAt"]
    assert _main(running)["ready"] is True
    ended = eventually(lambda: _ended(api, "ends"))
    assert ended["phase"] == phase
    terminated = _main(ended)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (int(code), reason)
    pod = api.client.get(api.ref("Pod", "ends"))
    assert pod["spec"]["nodeName"] in sim.nodes


def test_the_kubelet_events_name_the_kubelet_and_the_node(
    api: ApiServer, sim: NodeSimulator
) -> None:
    _pod(api, sim, "evented", {})
    eventually(lambda: _ended(api, "evented"))
    expected = ["Scheduled", "Pulling", "Pulled", "Created", "Started"]
    eventually(lambda: _reasons(api, "evented") == expected)
    node = api.client.get(api.ref("Pod", "evented"))["spec"]["nodeName"]
    for event in _events(api, "evented")[1:]:
        assert (event["reportingController"], event["reportingInstance"]) == ("kubelet", node)
        assert event["regarding"]["fieldPath"] == "spec.containers{main}"
    assert _events(api, "evented")[0]["note"].endswith(f"/evented to {node}")


def test_init_containers_run_first_one_after_the_other(api: ApiServer, sim: NodeSimulator) -> None:
    init = [{"name": f"init-{n}", "image": "registry.invalid/init:1"} for n in (1, 2)]
    _pod(api, sim, "initialized", {}, initContainers=init)
    ended = eventually(lambda: _ended(api, "initialized"))
    assert ended["phase"] == "Succeeded"
    assert [s["state"]["terminated"]["exitCode"] for s in ended["initContainerStatuses"]] == [0, 0]
    started = [
        event["regarding"]["fieldPath"]
        for event in _events(api, "initialized")
        if event["reason"] == "Started"
    ]
    assert started == [
        "spec.initContainers{init-1}",
        "spec.initContainers{init-2}",
        "spec.containers{main}",
    ]


def test_an_oom_killed_container_fails_the_pod_with_137(api: ApiServer, sim: NodeSimulator) -> None:
    _pod(api, sim, "oom", {OOM_KILLED: "true"})
    ended = eventually(lambda: _ended(api, "oom"))
    assert ended["phase"] == "Failed"
    terminated = _main(ended)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


def test_an_image_that_cannot_be_pulled_waits_in_back_off(
    api: ApiServer, sim: NodeSimulator
) -> None:
    _pod(api, sim, "unpulled", {IMAGE_PULL_ERROR: "true"})

    def waiting() -> str:
        return str(_main(_status(api, "unpulled"))["state"].get("waiting", {}).get("reason"))

    eventually(lambda: waiting() == "ImagePullBackOff")
    assert _status(api, "unpulled")["phase"] == "Pending"
    notes = [(e["reason"], e["note"]) for e in _events(api, "unpulled")]
    assert ("Failed", "Error: ErrImagePull") in notes
    assert ("Failed", "Error: ImagePullBackOff") in notes
    assert ("BackOff", 'Back-off pulling image "registry.invalid/main:1"') in notes


def test_on_failure_restarts_a_failed_container_after_a_back_off(
    api: ApiServer, sim: NodeSimulator
) -> None:
    _pod(api, sim, "retried", {EXIT_CODE: "1,1,0"}, restart_policy="OnFailure")
    ended = eventually(lambda: _ended(api, "retried"))
    assert ended["phase"] == "Succeeded"
    main = _main(ended)
    assert main["restartCount"] == 2
    assert main["lastState"]["terminated"]["exitCode"] == 1
    assert main["state"]["terminated"]["exitCode"] == 0
    assert "BackOff" in _reasons(api, "retried")


def test_always_restarts_even_a_container_that_succeeded(
    api: ApiServer, sim: NodeSimulator
) -> None:
    _pod(api, sim, "looping", {}, restart_policy="Always")
    eventually(lambda: _main(_status(api, "looping"))["restartCount"] >= 2)
    assert _status(api, "looping")["phase"] == "Running"


def test_a_deleted_pod_gets_sigterm_then_the_kubelet_confirms_its_deletion(
    api: ApiServer, sim: NodeSimulator
) -> None:
    _pod(api, sim, "stopped", {RUN_SECONDS: "inf"}, terminationGracePeriodSeconds=30)
    api.client.patch(
        api.ref("Pod", "stopped"), {"metadata": {"finalizers": [FINALIZER]}}, PatchType.MERGE
    )
    eventually(lambda: _in_phase(api, "stopped", "Running"))
    api.client.delete(api.ref("Pod", "stopped"))
    # The finalizer keeps it once the kubelet confirmed (grace 0): its status can be read.
    eventually(
        lambda: (
            api.client.get(api.ref("Pod", "stopped"))["metadata"]["deletionGracePeriodSeconds"] == 0
        )
    )
    status = _status(api, "stopped")
    assert status["phase"] == "Failed"
    assert _main(status)["state"]["terminated"]["exitCode"] == 143
    assert "Killing" in _reasons(api, "stopped")
    api.client.patch(api.ref("Pod", "stopped"), {"metadata": {"finalizers": None}}, PatchType.MERGE)
    eventually(lambda: _absent(api, "stopped"))


def test_stops_held_keep_a_deleted_pod_running_until_released(
    api: ApiServer, sim: NodeSimulator
) -> None:
    _pod(api, sim, "held", {RUN_SECONDS: "inf"}, terminationGracePeriodSeconds=30)
    eventually(lambda: _in_phase(api, "held", "Running"))
    sim.hold_stops()
    api.client.delete(api.ref("Pod", "held"))
    eventually(lambda: "Killing" in _reasons(api, "held"))
    held = api.client.get(api.ref("Pod", "held"))
    assert held["metadata"]["deletionGracePeriodSeconds"] == 30
    assert "running" in _main(held["status"])["state"]
    sim.release_stops()
    eventually(lambda: _absent(api, "held"))


def _absent(api: ApiServer, name: str) -> bool:
    try:
        api.client.get(api.ref("Pod", name))
    except NotFoundError:
        return True
    return False


def test_a_pod_that_requests_a_gpu_is_bound_to_the_gpu_node(
    api: ApiServer, sim: NodeSimulator
) -> None:
    gpu = {"limits": {GPU: "1"}}
    too_many = {"limits": {GPU: "99"}}
    container = {"name": "main", "image": "registry.invalid/main:1"}
    _pod(api, sim, "greedy", {}, containers=[{**container, "resources": too_many}])
    _pod(api, sim, "gpu", {}, containers=[{**container, "resources": gpu}])
    bound = eventually(lambda: api.client.get(api.ref("Pod", "gpu"))["spec"].get("nodeName"))
    assert bound == sim.nodes[1]
    assert not api.client.get(api.ref("Pod", "greedy"))["spec"].get("nodeName")


def test_a_pod_bound_to_another_node_is_left_alone(api: ApiServer, sim: NodeSimulator) -> None:
    api.client.create(pod("elsewhere", api.namespace))
    api.bind("elsewhere")
    _pod(api, sim, "mine", {})
    eventually(lambda: _ended(api, "mine"))
    elsewhere = _status(api, "elsewhere")
    assert elsewhere["phase"] == "Pending"
    assert "containerStatuses" not in elsewhere


def test_nodes_register_ready_with_their_capacity_and_heartbeat_through_leases(
    api: ApiServer, sim: NodeSimulator
) -> None:
    nodes = [call(api.api_client, "GET", f"{NODES}/{name}") for name in sim.nodes]
    assert [n["status"]["allocatable"].get(GPU) for n in nodes] == [None, "8"]
    assert all(n["status"]["allocatable"]["smarter-devices/fuse"] == "20" for n in nodes)
    for node in nodes:
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True"
    lease_path = f"{leases_path('kube-node-lease')}/{sim.nodes[0]}"
    first = call(api.api_client, "GET", lease_path)
    assert first["spec"]["holderIdentity"] == sim.nodes[0]
    assert first["metadata"]["ownerReferences"][0]["uid"] == nodes[0]["metadata"]["uid"]
    eventually(
        lambda: (
            call(api.api_client, "GET", lease_path)["spec"]["renewTime"]
            > first["spec"]["renewTime"]
        )
    )


def test_the_simulator_removes_its_nodes_and_leases_and_stops_its_threads_on_exit(
    api: ApiServer,
) -> None:
    before = set(threading.enumerate())
    with api.simulate_nodes() as sim:
        _pod(api, sim, "last", {})
        eventually(lambda: _ended(api, "last"))
        names = list(sim.nodes)
    for name in names:
        for path in (f"{NODES}/{name}", f"{leases_path('kube-node-lease')}/{name}"):
            with pytest.raises(NotFoundError):
                call(api.api_client, "GET", path)
    left = [thread.name for thread in set(threading.enumerate()) - before]
    assert [n for n in left if n.startswith("node-simulator") or n == "reflector-Pod"] == []


def _scheduled_then_run(api: ApiServer, name: str) -> tuple[list[str], list[str]]:
    """A pod's event reasons in order, split at the kubelet's first: the scheduler's before it,
    and from it on, every event's reason if each is the kubelet's (else the test fails)."""
    events = _events(api, name)
    by_kubelet = [event["reportingController"] == "kubelet" for event in events]
    first = by_kubelet.index(True) if True in by_kubelet else len(events)
    assert all(by_kubelet[first:]), [(e["reportingController"], e["reason"]) for e in events]
    reasons = [event["reason"] for event in events]
    return reasons[:first], reasons[first:]


def test_many_pods_on_several_nodes_all_succeed_with_their_events_in_order(
    api: ApiServer,
) -> None:
    """More pods than workers, stepped concurrently: each pod's writes keep their order. The
    pods are created before any node exists: a real cluster's scheduler reports
    ``FailedScheduling`` for them first (``handleSchedulingFailure`` in pkg/scheduler/
    schedule_one.go), until a node takes them (``Scheduled``; the emulator has no scheduler: the
    simulator binds them at its first look); the kubelet's events all come after."""
    room_for_ten = NodeShape({"cpu": "16", "memory": "64Gi", "pods": "10"})
    sim = api.simulate_nodes(nodes=[room_for_ten] * 3, workers=4)
    names = [f"many-{index}" for index in range(24)]
    for name in names:
        _pod(api, sim, name, {RUN_SECONDS: "0.2"})
    with sim:
        for name in names:
            assert eventually(lambda name=name: _ended(api, name))["phase"] == "Succeeded"
    for name in names:
        scheduling, running = _scheduled_then_run(api, name)
        assert scheduling[-1:] == ["Scheduled"], (name, scheduling)
        assert set(scheduling[:-1]) <= {"FailedScheduling"}, (name, scheduling)
        assert running == ["Pulling", "Pulled", "Created", "Started"], (name, running)
    assert {name: len(uids) for name, uids in sim.pod_uids.items()} == dict.fromkeys(names, 1)


def test_pods_are_bound_only_while_their_nodes_have_room(api: ApiServer) -> None:
    room_for_four = NodeShape({"cpu": "16", "memory": "64Gi", "pods": "4"})
    sim = api.simulate_nodes(nodes=[room_for_four] * 3)
    names = [f"full-{index}" for index in range(14)]
    for name in names:  # before the nodes exist: bound at once (by the emulator's first look)
        _pod(api, sim, name, {RUN_SECONDS: "inf"})
    with sim:
        eventually(
            lambda: sum(bool(_in_phase(api, name, "Running")) for name in names) == 12,
            timeout=60,
        )
        pods = [api.client.get(api.ref("Pod", name)) for name in names]
    on_nodes = Counter(pod["spec"].get("nodeName") for pod in pods)
    assert on_nodes == {**dict.fromkeys(sim.nodes, 4), None: 2}


def _candidate(name: str, labels: dict[str, str], **allocatable: str) -> Candidate:
    return Candidate(name, labels, {key: Decimal(value) for key, value in allocatable.items()})


def _requesting(selector: dict[str, str], **requests: str) -> dict[str, Any]:
    container = {"name": "main", "resources": {"requests": requests}}
    return {"spec": {"nodeSelector": selector, "containers": [container]}}


def test_choose_node_takes_the_first_matching_node_whose_used_total_leaves_room() -> None:
    nodes = [
        _candidate("a", {"pool": "x"}, cpu="2", pods="10"),
        _candidate("b", {"pool": "y"}, cpu="8", pods="10"),
        _candidate("c", {"pool": "x"}, cpu="2", pods="10"),
    ]
    pod = _requesting({"pool": "x"}, cpu="1500m")
    used: dict[str, dict[str, Decimal]] = {name: {} for name in ("a", "b", "c")}
    assert choose_node(pod, nodes, used) == "a"
    add_requests(used["a"], pod_requests(pod))
    assert used["a"] == {"pods": Decimal(1), "cpu": Decimal("1.5")}
    assert choose_node(pod, nodes, used) == "c"
    add_requests(used["c"], pod_requests(pod))
    assert choose_node(pod, nodes, used) is None
    assert choose_node(_requesting({"pool": "x"}, cpu="500m"), nodes, used) == "a"


def test_choose_node_counts_the_pods_slot_and_extended_resources() -> None:
    nodes = [_candidate("cpu", {}, pods="1"), _candidate("gpu", {}, pods="2", **{GPU: "1"})]
    used = {"cpu": {"pods": Decimal(1)}, "gpu": {}}
    assert choose_node(_requesting({}), nodes, used) == "gpu"
    assert choose_node(_requesting({}), nodes, {}) == "cpu"
    assert choose_node(_requesting({}, **{GPU: "2"}), nodes, {}) is None


def _copy(uid: str, node: str = "", phase: str = "Pending", **metadata: str) -> dict[str, Any]:
    """A pod as the simulator's watch shows it, asking for one cpu."""
    return {
        "metadata": {"uid": uid, "name": uid, **metadata},
        "spec": {**_requesting({}, cpu="1")["spec"], "nodeName": node},
        "status": {"phase": phase},
    }


def test_a_pod_the_simulator_bound_is_on_its_node_before_the_watch_shows_it() -> None:
    bound_unseen = _copy("bound-unseen")
    running = _copy("running", "n2", "Running")
    ended = _copy("ended", "n2", "Succeeded")
    waiting = _copy("waiting")
    leaving = _copy("leaving", deletionTimestamp="2026-01-01T00:00:00Z")
    elsewhere = _copy("elsewhere", "another-node", "Running")
    pods = [bound_unseen, running, ended, waiting, leaving, elsewhere]
    look = Look.of(pods, ["n1", "n2"], {"bound-unseen": "n1"})
    assert look.on_nodes == [(bound_unseen, "n1"), (running, "n2"), (ended, "n2")]
    assert look.pending == [waiting]
    one_cpu = {"pods": Decimal(1), "cpu": Decimal(1)}
    assert look.used == {"n1": one_cpu, "n2": one_cpu}


class _RecordingHost:
    """A node that records what a simulated pod writes: event reasons, phases, confirmations."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def event(
        self, pod: Pod, reason: str, note: str, kind: str = "Normal", field_path: str = ""
    ) -> None:
        self.writes.append(reason)

    def write_status(self, pod: Pod, status: dict[str, Any]) -> None:
        self.writes.append(status["phase"])

    def confirm_deletion(self, pod: Pod) -> None:
        self.writes.append("deletion confirmed")

    def log(self, pod: Pod, container: str, line: str) -> None:
        pass

    def stops_held(self) -> bool:
        return False


def test_a_finished_pod_is_idle_until_it_is_deleted_and_its_deletion_confirmed() -> None:
    pod = {
        "metadata": {"name": "finished", "namespace": "default", "uid": "uid-1"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "i:1"}]},
    }
    start = datetime(2026, 1, 1, tzinfo=UTC)
    placement = Placement("node", "192.0.2.10", "10.244.0.2")
    back_off = timedelta(seconds=0.2)
    simulated = SimulatedPod(
        pod, placement, start, crash_loop=SHORT_CRASH_LOOP, image_pull_back_off=back_off
    )
    host = _RecordingHost()
    for second in range(3):
        assert not simulated.idle(pod)
        simulated.step(pod, start + timedelta(seconds=second), host)
    to_success = ["Pending", "Pulling", "Pulled", "Created", "Started", "Running", "Succeeded"]
    assert host.writes == to_success
    assert simulated.idle(pod)
    simulated.step(pod, start + timedelta(seconds=3), host)
    assert host.writes == to_success, "the step of an idle pod wrote something"
    deleted = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:04Z"}}
    assert not simulated.idle(deleted)
    simulated.step(deleted, start + timedelta(seconds=4), host)
    assert host.writes[-1] == "deletion confirmed"
    assert simulated.idle(deleted)
