"""The executor on the kubernetes backend, over HTTP against the emulator and the node simulator.

* ``podwright run --backend kubernetes``: a workspace (a Pod, its claim and Service) from submit
  to Success under the background executor it starts, its phases, events and log shown, the
  companions owned by the pod; an executor killed while ``run`` follows is replaced;
* ``podwright executor``: metrics, health and a graceful stop on SIGTERM; a second one for the
  same store and cluster exits at once;
* restart safety: the executor is SIGKILLed at random moments while tasks launch, run and finish;
  after the last restart every task has its right terminal phase, no pod was created twice, and
  nothing is left behind (no pod, no finalizer).
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from podwright.adapters.kubernetes import KubernetesClient
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.cli.main import cli
from podwright.core.lifecycle.phases import Phase
from podwright.engine.config import MANAGED_BY, MANAGED_BY_LABEL
from podwright.engine.kubernetes_port import ObjectRef, PatchType
from podwright.engine.task_store import NewTask
from tests.cli.background import no_executor_left, serving_executors, wait_until_gone
from tests.k8s_emulator import Emulator
from tests.kube.support import OUTCOMES, emulator_with_namespace, eventually, write_kubeconfig
from tests.node_sim import CPU_NODE, RUN_SECONDS, NodeShape, simulate_nodes

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NAMESPACE = "test"
CONTEXT = "emulator"


def backend_of(emulator: Emulator) -> str:
    """The backend key of a task on the emulator: its context, and its server."""
    return f"kubernetes/{CONTEXT}#{emulator.url}"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with emulator_with_namespace(NAMESPACE) as running:
        yield running


@pytest.fixture
def kubeconfig(tmp_path: Path, emulator: Emulator) -> Path:
    """The emulator's kubeconfig, on a cluster prepared as the README says: the default
    profile's PriorityClasses applied (else the Priority admission plugin refuses the pods)."""
    path = write_kubeconfig(tmp_path / "kubeconfig", emulator.url, CONTEXT)
    _apply_priority_classes(path)
    return path


def _apply_priority_classes(kubeconfig: Path, *profile: str) -> None:
    chosen = ["--profile", *profile] if profile else []
    applied = CliRunner().invoke(
        cli, ["priority-classes", *chosen, "--apply", "--kubeconfig", str(kubeconfig)]
    )
    assert applied.exit_code == 0, applied.output


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """The state directory; no background executor of its store may outlive the test."""
    path = tmp_path / "home"
    path.mkdir()
    yield path
    no_executor_left(path / "tasks.db")


@pytest.fixture
def store(home: Path) -> Iterator[SQLiteTaskStore]:
    opened = SQLiteTaskStore(home / "tasks.db")
    yield opened
    opened.close()


def _ending_workspace(tmp_path: Path) -> Path:
    """The example workspace, made to end: it restarts Never, its containers run 1 s and exit 0
    (under the default restartPolicy Always, the kubelet would restart them for ever)."""
    workload = yaml.safe_load((EXAMPLES / "workload-workspace.yaml").read_text())
    workload["spec"]["restartPolicy"] = "Never"
    workload["spec"]["annotations"].append({"name": RUN_SECONDS, "value": "1"})
    path = tmp_path / "workload-workspace.yaml"
    path.write_text(yaml.safe_dump(workload))
    return path


def test_run_on_a_cluster_shows_the_workspace_to_success_with_its_companions(
    tmp_path: Path, emulator: Emulator, kubeconfig: Path, home: Path
) -> None:
    # The example's profile names KAI as the scheduler, and its shared-GPU node type; its
    # PriorityClasses must exist, or the Priority admission plugin refuses the pod.
    profile = str(EXAMPLES / "cluster-profile.yaml")
    _apply_priority_classes(kubeconfig, profile)
    shared_gpu = NodeShape(CPU_NODE.capacity, {"node.example.com/type": "gpu-shared"})
    with simulate_nodes(
        emulator.url,
        namespace=NAMESPACE,
        nodes=[shared_gpu],
        schedulers=["kai-scheduler"],
        write_log=emulator.write_log,
    ):
        result = CliRunner().invoke(
            cli,
            [
                "run",
                "--workload",
                str(_ending_workspace(tmp_path)),
                "--profile",
                profile,
                "--backend",
                "kubernetes",
                "--kubeconfig",
                str(kubeconfig),
                "--namespace",
                NAMESPACE,
                "--home",
                str(home),
            ],
        )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert re.fullmatch(
        r"task notebook-ada-\w{6}: workspace workload 'notebook-ada', cluster emulator", lines[0]
    )
    task_id = lines[0].split()[1].rstrip(":")
    assert "recorded, not pulled" not in result.output
    assert any(line.endswith(f"Queued  Pod {NAMESPACE}/{task_id} created") for line in lines)
    assert any("event: Scheduled: Successfully assigned" in line for line in lines)
    assert any(line.endswith("event: Started: Started container main") for line in lines)
    assert f"  | hello from {task_id}/main" in lines
    assert lines[-1].endswith("s  Success"), lines

    client = KubernetesClient.for_host(emulator.url)
    pod = client.get(ObjectRef("v1", "Pod", NAMESPACE, task_id))
    claims, _ = client.list_objects("v1", "PersistentVolumeClaim", namespace=NAMESPACE)
    services, _ = client.list_objects("v1", "Service", namespace=NAMESPACE)
    client.close()
    owner = {"apiVersion": "v1", "kind": "Pod", "name": task_id, "uid": pod["metadata"]["uid"]}
    # The claim keeps the user's name and outlives the task; the Service is the task's own.
    assert [c["metadata"]["name"] for c in claims] == ["notebook-ada-work"]
    assert "ownerReferences" not in claims[0]["metadata"]
    assert [s["metadata"]["name"] for s in services] == [task_id]
    assert services[0]["metadata"]["ownerReferences"] == [owner]
    assert services[0]["spec"]["selector"] == {
        "podwright.dev/workload": "notebook-ada",
        "podwright.dev/task-id": task_id,
    }
    for companion in (claims[0], services[0]):
        assert companion["metadata"]["labels"]["podwright.dev/task-id"] == task_id
    assert pod["metadata"]["labels"]["podwright.dev/task-id"] == task_id
    assert "podwright.dev/finalizer" not in (pod["metadata"].get("finalizers") or [])

    listing = CliRunner().invoke(cli, ["list", "--home", str(home)])
    assert f"{task_id}  workspace  {backend_of(emulator)}  Success" in listing.output


def _pod_manifest(outcome: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"annotations": OUTCOMES[outcome]},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox:1", "command": ["true"]}],
        },
    }


def _submit(store: SQLiteTaskStore, emulator: Emulator, task_id: str, outcome: str) -> None:
    store.submit(
        NewTask(
            task_id=task_id,
            workload_type="training",
            name=task_id,
            namespace=NAMESPACE,
            backend=backend_of(emulator),
            workload={},
            effective={},
            manifests=(_pod_manifest(outcome),),
            submitted_at=datetime.now(UTC),
        )
    )


def _executor(
    home: Path, kubeconfig: Path, *extra: str, stderr: Any = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    config = home / "lifecycle.yaml"
    config.write_text("injectFinalizer: true\ndeleteResourceOnFinalize: true\n")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "podwright",
            "executor",
            "--backend",
            "kubernetes",
            "--kubeconfig",
            str(kubeconfig),
            "--home",
            str(home),
            "--round-interval",
            "100ms",
            "--lifecycle-config",
            str(config),
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        text=True,
        cwd=ROOT,
    )


KILL_WHEN = (Phase.QUEUED, Phase.RUNNING)


def _any_in(store: SQLiteTaskStore, phase: Phase) -> bool:
    return any(record.phase is phase for record in store.list_tasks())


def test_executor_killed_at_random_moments_finishes_every_task_once_and_leaks_nothing(
    tmp_path: Path, emulator: Emulator, kubeconfig: Path, home: Path, store: SQLiteTaskStore
) -> None:
    outcomes = {f"task-{n:02}": ("fail" if n % 4 == 1 else "succeed") for n in range(12)}
    outcomes.update({"task-hang-1": "hang", "task-hang-2": "hang"})
    for task_id, outcome in outcomes.items():
        _submit(store, emulator, task_id, outcome)
    rng = random.Random(7)
    phases: list[list[str]] = []
    with simulate_nodes(emulator.url, namespace=NAMESPACE) as nodes:
        for life in range(8):
            log = tmp_path / f"life-{life}.log"
            with log.open("w") as output:
                executor = _executor(home, kubeconfig, "--metrics-address", "off", stderr=output)
            eventually(lambda log=log: "started" in log.read_text())
            if life < len(KILL_WHEN):  # first while tasks launch, then while they run
                eventually(lambda phase=KILL_WHEN[life]: _any_in(store, phase), interval=0.01)
            else:  # then anywhere from the first round to a few rounds in
                time.sleep(rng.uniform(0.0, 0.8))
            executor.send_signal(signal.SIGKILL)
            executor.wait(10)
            phases.append(sorted(record.phase.value for record in store.list_tasks()))
            if life == 3:  # the hanging tasks are running by now: abort them, between lives
                for task_id in ("task-hang-1", "task-hang-2"):
                    store.request_abort(task_id, datetime.now(UTC))
        last = _executor(home, kubeconfig, "--metrics-address", "off", "--until-idle")
        assert last.wait(60) == 0

    expected = {
        "succeed": Phase.SUCCESS,
        "fail": Phase.RETRYABLE_FAILURE,
        "hang": Phase.ABORTED,
    }
    records = {record.task_id: record for record in store.list_tasks()}
    # The kills fell while tasks were launching, running and finishing.
    seen = {phase for snapshot in phases for phase in snapshot}
    assert {"Queued", "Running", "Success"} <= seen, phases
    assert {task_id: records[task_id].phase for task_id in outcomes} == {
        task_id: expected[outcome] for task_id, outcome in outcomes.items()
    }
    assert all(record.finalized for record in records.values())
    assert {name: len(uids) for name, uids in nodes.pod_uids.items()} == dict.fromkeys(outcomes, 1)
    client = KubernetesClient.for_host(emulator.url)
    left, _ = client.list_objects(
        "v1", "Pod", namespace=NAMESPACE, label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}"
    )
    client.close()
    assert left == []


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_executor_serves_metrics_and_health_and_stops_gracefully_on_sigterm(
    tmp_path: Path, emulator: Emulator, kubeconfig: Path, home: Path, store: SQLiteTaskStore
) -> None:
    _submit(store, emulator, "metered", "succeed")
    log = tmp_path / "executor.log"
    with (
        simulate_nodes(emulator.url, namespace=NAMESPACE),
        log.open("w") as output,
    ):
        executor = _executor(home, kubeconfig, "--metrics-address", "127.0.0.1:0", stderr=output)
        try:
            address = eventually(
                lambda: re.search(r"metrics on (http://[\d.:]+)/metrics", log.read_text())
            ).group(1)
            eventually(lambda: store.get("metered").finalized, timeout=30)
            assert _get(f"{address}/healthz")[0] == 200
            assert _get(f"{address}/readyz") == (200, "ready\n")
            status, metrics = _get(f"{address}/metrics")
            assert status == 200
            assert re.search(
                r'podwright_executor_rounds_total\{backend="kubernetes/emulator#http://[\d.:]+"\} '
                r"[1-9]",
                metrics,
            )
            assert 'podwright_kubernetes_requests_total{code="201",verb="create"} 1.0' in metrics
            assert (
                f'podwright_executor_finalized_tasks_total{{backend="{backend_of(emulator)}",'
                'phase="Success"} 1.0' in metrics
            )
            assert "podwright_executor_round_seconds_bucket" in metrics
            assert _get(f"{address}/nothing")[0] == 404
            executor.send_signal(signal.SIGTERM)
            assert executor.wait(20) == 0
        finally:
            if executor.poll() is None:
                executor.kill()
                executor.wait()
    assert "SIGTERM: stopping after this round" in log.read_text()
    assert log.read_text().rstrip().endswith("executor stopped")


def test_a_second_executor_of_a_store_and_cluster_exits_at_once_naming_the_first(
    tmp_path: Path, emulator: Emulator, kubeconfig: Path, home: Path, store: SQLiteTaskStore
) -> None:
    for n in range(4):
        _submit(store, emulator, f"shared-{n}", "succeed")
    _submit(store, emulator, "keeps-it-busy", "hang")
    log = tmp_path / "first.log"
    with simulate_nodes(emulator.url, namespace=NAMESPACE) as nodes, log.open("w") as output:
        first = _executor(
            home, kubeconfig, "--metrics-address", "off", "--until-idle", stderr=output
        )
        eventually(lambda: "started" in log.read_text())
        second = _executor(
            home, kubeconfig, "--metrics-address", "off", "--until-idle", stderr=subprocess.PIPE
        )
        _, said = second.communicate(timeout=60)
        assert second.returncode == 0
        assert (
            f"the {backend_of(emulator)} tasks of {home / 'tasks.db'} are served by the executor with pid "
            f"{first.pid}: nothing to do"
        ) in said
        store.request_abort("keeps-it-busy", datetime.now(UTC))
        assert first.wait(60) == 0
    phases = {record.task_id: record.phase for record in store.list_tasks()}
    assert phases.pop("keeps-it-busy") is Phase.ABORTED
    assert set(phases.values()) == {Phase.SUCCESS}
    assert {len(uids) for uids in nodes.pod_uids.values()} == {1}


def test_run_replaces_an_executor_that_dies_while_it_follows(
    tmp_path: Path, emulator: Emulator, kubeconfig: Path, home: Path
) -> None:
    spec = tmp_path / "hanging.yaml"
    spec.write_text(
        "type: workspace\nname: hanging\nspec:\n  image: busybox:1\n  command: sleep 1d\n"
        f"  annotations:\n    - name: {RUN_SECONDS}\n      value: inf\n"
    )
    with simulate_nodes(emulator.url, namespace=NAMESPACE):
        runner = subprocess.Popen(
            [
                *(sys.executable, "-m", "podwright", "run", "--workload", str(spec)),
                *("--backend", "kubernetes", "--kubeconfig", str(kubeconfig)),
                *("--namespace", NAMESPACE, "--home", str(home)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        try:
            opened = SQLiteTaskStore(home / "tasks.db")
            try:
                eventually(lambda: _any_in(opened, Phase.RUNNING), timeout=60)
                (task,) = opened.list_tasks()
            finally:
                opened.close()
            first = serving_executors(home / "tasks.db")[backend_of(emulator)]
            os.kill(first, signal.SIGKILL)
            assert wait_until_gone(first)

            # Its threads may still be closing its files (and its lock) a moment after it is a
            # zombie: wait for another pid, not just for a serving one.
            def replaced() -> int | None:
                pid = serving_executors(home / "tasks.db").get(backend_of(emulator))
                return None if pid == first else pid

            replacement = eventually(replaced, timeout=60)
            aborted = CliRunner().invoke(
                cli, ["abort", task.task_id, "--kubeconfig", str(kubeconfig), "--home", str(home)]
            )
            assert f"the executor (pid {replacement}) stops it" in aborted.output
            output, errors = runner.communicate(timeout=60)
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.communicate()
    assert runner.returncode == 4, output + errors
    assert output.splitlines()[-1].endswith("s  Aborted  aborted on request")


def test_run_on_a_cluster_judges_the_workload_in_its_namespace_s_department(
    tmp_path: Path, emulator: Emulator, kubeconfig: Path, home: Path
) -> None:
    """The namespace's labels, as the cluster has them, name its department: the research
    department's policy refuses the workload, and nothing is recorded. Without reading them,
    the namespace would be a project of the default department, which has no policy."""
    client = KubernetesClient.for_host(emulator.url)
    client.patch(
        ObjectRef("v1", "Namespace", "", NAMESPACE),
        {"metadata": {"labels": {"podwright.dev/department": "research"}}},
        PatchType.MERGE,
    )
    client.close()
    policy = tmp_path / "research.yaml"
    policy.write_text(
        "apiVersion: podwright.dev/v1\nkind: WorkloadPolicy\nmetadata: {name: research}\n"
        "spec:\n  scope: {cluster: prod, department: research}\n  workloadType: training\n"
        "  rules: {compute: {gpuDevicesRequest: {max: 0}}}\n"
    )
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {name: greedy}\n"
        "spec: {type: training, image: busybox, compute: {gpuDevicesRequest: 1}}\n"
    )
    result = CliRunner().invoke(
        cli,
        [
            *("run", "--workload", str(workload), "--policy", str(policy)),
            *("--backend", "kubernetes", "--kubeconfig", str(kubeconfig)),
            *("--namespace", NAMESPACE, "--home", str(home), "--detach"),
        ],
    )
    assert result.exit_code == 1, result.output
    assert (
        "podwright: violation: compute.gpuDevicesRequest: 1 (submission) is above the maximum 0 "
        "(rule max, policy 'research' (department research))" in result.output
    )
    assert not (home / "tasks.db").exists() or SQLiteTaskStore(home / "tasks.db").list_tasks() == []
