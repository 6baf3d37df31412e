"""The local backend: Pods and Jobs as processes, behind the engine's Kubernetes port."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.local.cluster import LocalCluster
from podwright.core.lifecycle.phases import Phase
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


def ref(name: str, kind: str = "Pod") -> ObjectRef:
    return ObjectRef("v1" if kind == "Pod" else "batch/v1", kind, "research", name)


def phase_of(cluster: LocalCluster, name: str, kind: str = "Pod") -> str:
    return str((cluster.get(ref(name, kind)).get("status") or {}).get("phase"))


def reasons(events: EventIndex, name: str, kind: str = "Pod") -> list[str]:
    return [event.reason for event in events.list(EventKey("research", kind, name))]


def test_a_pod_runs_its_command_with_its_environment_and_its_output_is_kept(
    cluster: LocalCluster, events: EventIndex
) -> None:
    created = cluster.create(
        pod(
            "hello",
            'echo "hello from $HOSTNAME in $(pwd)"; echo "$GREETING"',
            containers=[
                {
                    "name": "main",
                    "image": "busybox:1",
                    "command": ["sh", "-c", 'echo "hello from $HOSTNAME"; echo "$GREETING"'],
                    "env": [{"name": "GREETING", "value": "hi"}],
                }
            ],
        )
    )
    assert created["metadata"]["uid"]
    assert created["metadata"]["resourceVersion"]
    eventually(lambda: phase_of(cluster, "hello") == "Succeeded")
    status = cluster.get(ref("hello"))["status"]
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert cluster.log_path("research", "hello", "main").read_text() == "hello from hello\nhi\n"
    assert reasons(events, "hello") == ["Scheduled", "Pulled", "Created", "Started"]
    pulled = events.list(EventKey("research", "Pod", "hello"))[1]
    assert "is recorded, not pulled" in pulled.note


def test_a_failing_container_fails_the_pod_with_its_exit_code(cluster: LocalCluster) -> None:
    cluster.create(pod("fails", "echo oops >&2; exit 3"))
    eventually(lambda: phase_of(cluster, "fails") == "Failed")
    terminated = cluster.get(ref("fails"))["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert cluster.log_path("research", "fails", "main").read_text() == "oops\n"


def test_init_containers_run_first_in_order(cluster: LocalCluster, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    init = [
        {"name": f"init-{n}", "image": "x", "command": ["sh", "-c", f"echo init-{n} >> {trace}"]}
        for n in (1, 2)
    ]
    cluster.create(pod("ordered", f"echo main >> {trace}", initContainers=init))
    eventually(lambda: phase_of(cluster, "ordered") == "Succeeded")
    assert trace.read_text() == "init-1\ninit-2\nmain\n"


def container_state(cluster: LocalCluster, name: str) -> dict[str, Any]:
    statuses = (cluster.get(ref(name)).get("status") or {}).get("containerStatuses") or [{}]
    state: dict[str, Any] = statuses[0].get("state") or {}
    return state


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
        pod(
            "missing",
            "true",
            containers=[{"name": "main", "image": "x", "command": ["no-such-program-here"]}],
        )
    )
    eventually(lambda: phase_of(cluster, "missing") == "Failed")
    assert container_state(cluster, "missing")["terminated"]["exitCode"] == 128


def test_deleting_a_running_pod_stops_its_process_group(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    cluster.create(
        pod("sleeper", f"sleep 300 & echo $! > {pids}; wait", terminationGracePeriodSeconds=1)
    )
    eventually(lambda: pids.exists() and pids.read_text().strip())
    child = int(pids.read_text())
    eventually(lambda: phase_of(cluster, "sleeper") == "Running")
    cluster.delete(ref("sleeper"))
    eventually(lambda: cluster.cached(ref("sleeper")) is None)
    eventually(lambda: not _alive(child))


def test_a_finalizer_keeps_a_deleted_pod_until_it_is_removed(cluster: LocalCluster) -> None:
    cluster.create(
        pod("kept", "sleep 300", terminationGracePeriodSeconds=0)
        | {
            "metadata": {
                "name": "kept",
                "namespace": "research",
                "finalizers": ["podwright.dev/finalizer"],
            }
        }
    )
    eventually(lambda: phase_of(cluster, "kept") == "Running")
    cluster.delete(ref("kept"))
    eventually(lambda: phase_of(cluster, "kept") == "Failed")
    current = cluster.get(ref("kept"))
    assert "deletionTimestamp" in current["metadata"]
    with pytest.raises(ConflictError, match="the object has been modified"):
        cluster.patch(
            ref("kept"), {"metadata": {"finalizers": None, "resourceVersion": "1"}}, PatchType.MERGE
        )
    cluster.patch(
        ref("kept"),
        {
            "metadata": {
                "finalizers": None,
                "resourceVersion": current["metadata"]["resourceVersion"],
            }
        },
        PatchType.MERGE,
    )
    eventually(lambda: cluster.cached(ref("kept")) is None)


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


def job(name: str, script: str, backoff_limit: int = 6) -> dict[str, Any]:
    template = pod("ignored", script)
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
    status = cluster.get(ref(name, "Job")).get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}


def test_a_job_runs_a_pod_from_its_template_to_completion(
    cluster: LocalCluster, events: EventIndex
) -> None:
    cluster.create(job("train", "echo epoch 1"))
    eventually(lambda: conditions(cluster, "train") == {"Complete": "True"})
    (pod_name,) = cluster.pods_of_job("research", "train")
    assert pod_name.startswith("train-")
    labels = cluster.get(ref(pod_name))["metadata"]["labels"]
    assert labels["job-name"] == "train"
    assert cluster.get(ref("train", "Job"))["status"]["succeeded"] == 1
    assert reasons(events, "train", "Job") == ["SuccessfulCreate", "Completed"]
    assert cluster.log_path("research", pod_name, "main").read_text() == "epoch 1\n"


def test_a_job_retries_failed_pods_up_to_its_backoff_limit(
    cluster: LocalCluster, events: EventIndex
) -> None:
    cluster.create(job("flaky", "exit 1", backoff_limit=1))
    eventually(lambda: conditions(cluster, "flaky") == {"Failed": "True"}, timeout=30)
    assert len(cluster.pods_of_job("research", "flaky")) == 2
    assert cluster.get(ref("flaky", "Job"))["status"]["failed"] == 2
    assert reasons(events, "flaky", "Job")[-1] == "BackoffLimitExceeded"


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
    assert Phase.QUEUED in seen or Phase.INITIALIZING in seen or Phase.RUNNING in seen


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_closing_kills_every_process(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path / "local")
    pids = tmp_path / "pids"
    # In a command, $$ is an escaped $ (Kubernetes' expansion): $$$$ reaches the shell as $$.
    local.create(pod("forever", f"echo $$$$ > {pids}; exec sleep 300"))
    eventually(lambda: pids.exists() and pids.read_text().strip())
    local.close()
    eventually(lambda: not _alive(int(pids.read_text())))
