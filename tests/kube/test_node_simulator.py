"""The node simulator drives pods as a kubelet would, against the emulator and a real cluster.

Its pods select the simulator's own nodes (``sim.podwright.dev/simulator``), so on a real cluster
no real node runs them; there the cluster's scheduler binds them, elsewhere the simulator does.
"""

from __future__ import annotations

from collections.abc import Iterator
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
    NodeSimulator,
)
from tests.node_sim.rest import NODES, call, leases_path

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


def test_the_simulator_removes_its_nodes_and_leases_on_exit(api: ApiServer) -> None:
    with api.simulate_nodes() as sim:
        names = list(sim.nodes)
    for name in names:
        for path in (f"{NODES}/{name}", f"{leases_path('kube-node-lease')}/{name}"):
            with pytest.raises(NotFoundError):
                call(api.api_client, "GET", path)
