"""``podwright run`` on the local backend, and the commands that read its task store.

``run`` never runs the engine itself: a background executor does, and every test here ends with
no executor left running (the ``home`` fixture checks).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.cli.main import cli
from tests.cli.background import no_executor_left, serving_executors, wait_until_gone
from tests.cli.records import pod_task
from tests.kube.support import eventually
from tests.manifests import assert_valid_manifests

ROOT = Path(__file__).resolve().parents[2]


def workload(tmp_path: Path, name: str, command: str, **spec: object) -> str:
    path = tmp_path / f"{name}.yaml"
    extra = "".join(f"  {key}: {value}\n" for key, value in spec.items())
    path.write_text(
        f"apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {{name: {name}}}\n"
        f"spec:\n  type: training\n  image: busybox:1\n  command: {command}\n{extra}"
    )
    return str(path)


def waiting_for(go: Path, then: str = "echo finished") -> str:
    """A command that waits until the file ``go`` exists, then runs ``then``."""
    return f"sh -c 'while [ ! -e {go} ]; do sleep 0.05; done; {then}'"


def invoke(home: Path, *args: str) -> Result:
    # A kubeconfig on the machine would make a cluster the default: these tests run locally.
    backend = ["--backend", "local"] if args[0] == "run" else []
    return CliRunner().invoke(cli, [*args, *backend, "--home", str(home)])


def task_id_of(output: str) -> str:
    found = re.search(r"^task (\S+): ", output, re.MULTILINE)
    assert found is not None, output
    return found.group(1)


def phase_of(home: Path, task_id: str) -> str:
    return invoke(home, "status", task_id).output


def podwright(*args: str, cwd: Path, **options: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "podwright", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **options,  # type: ignore[call-overload]
    )


def test_a_workload_runs_to_success_with_its_phases_events_and_output_in_order(
    tmp_path: Path, home: Path
) -> None:
    result = invoke(
        home,
        "run",
        "--workload",
        workload(tmp_path, "hello", "sh -c 'echo epoch 1; echo epoch 2; printf saved'"),
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    task_id = task_id_of(result.output)
    assert lines[0] == f"task {task_id}: training workload 'hello', local backend"
    assert lines[1] == "  image busybox:1 is recorded, not pulled: commands run on this machine"
    queued = next(
        i for i, line in enumerate(lines) if line.endswith(f"Job default/{task_id} created")
    )
    success = next(i for i, line in enumerate(lines) if line.endswith("s  Success"))
    output = [i for i, line in enumerate(lines) if line.startswith("  | ")]
    assert [lines[i] for i in output] == ["  | epoch 1", "  | epoch 2", "  | saved"]
    assert queued < output[0] < output[-1] < success, lines
    running = [i for i, line in enumerate(lines) if line.endswith("s  Running")]
    assert all(i < output[0] for i in running), lines
    assert any("event: Completed: Job completed" in line for line in lines)
    assert success == len(lines) - 1


def test_a_failing_workload_exits_3_with_the_reason(tmp_path: Path, home: Path) -> None:
    result = invoke(
        home,
        "run",
        "--workload",
        workload(tmp_path, "broken", "sh -c 'echo bad >&2; exit 3'", backoffLimit=0),
    )
    assert result.exit_code == 3, result.output
    assert "  | bad" in result.output
    assert (
        "RetryableFailure  BackoffLimitExceeded: Job has reached the specified backoff limit"
        in result.output
    )


def test_policy_violations_exit_1_and_nothing_runs(tmp_path: Path, home: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: podwright.dev/v1\nkind: WorkloadPolicy\nmetadata: {name: gpus}\n"
        "spec:\n  scope: {cluster: prod}\n  workloadType: training\n"
        "  rules:\n    compute:\n      gpuDevicesRequest: {max: 1}\n"
    )
    greedy = workload(tmp_path, "rogue", "echo hi", compute="{gpuDevicesRequest: 8}")
    result = invoke(home, "run", "--workload", greedy, "--policy", str(policy))
    assert result.exit_code == 1, result.output
    assert "violation" in result.output
    assert invoke(home, "list").output == "no tasks\n"


@pytest.mark.parametrize(
    ("example", "message"),
    [
        (
            "workload-distributed-pytorch.yaml",
            "a distributed (PyTorch) workload renders a PyTorchJob; the local backend runs Pods "
            "and Jobs only: run it with --backend kubernetes on a cluster with the Kubeflow "
            "training operator (its kubeflow.org/v1 CRDs)",
        ),
        (
            "workload-distributed-mpi.yaml",
            "a distributed (MPI) workload renders a MPIJob; the local backend runs Pods and Jobs "
            "only: run it with --backend kubernetes on a cluster with the Kubeflow training "
            "operator (its kubeflow.org/v1 CRDs)",
        ),
        (
            "workload-inference.yaml",
            "an inference workload renders a Knative Service; the local backend runs Pods and "
            "Jobs only: run it with --backend kubernetes on a cluster with Knative Serving (its "
            "serving.knative.dev CRDs)",
        ),
    ],
    ids=["pytorch", "mpi", "inference"],
)
def test_a_workload_the_local_backend_cannot_run_is_refused_before_it_is_recorded(
    home: Path, example: str, message: str
) -> None:
    result = invoke(
        home,
        "run",
        "--workload",
        str(ROOT / "examples" / example),
        "--profile",
        str(ROOT / "examples" / "cluster-profile.yaml"),
    )
    assert result.exit_code == 2, result.output
    assert result.output == f"podwright: error: {message}\n"
    assert not (home / "tasks.db").exists()
    assert invoke(home, "list").output == "no tasks\n"


def test_list_status_and_logs_read_the_store(tmp_path: Path, home: Path) -> None:
    invoke(home, "run", "--workload", workload(tmp_path, "first", "echo one"))
    invoke(home, "run", "--workload", workload(tmp_path, "second", "echo two"))
    listing = invoke(home, "list").output.splitlines()
    assert listing[0].split() == ["ID", "TYPE", "BACKEND", "PHASE", "SUBMITTED", "ACTIVE"]
    assert [line.split()[0].rsplit("-", 1)[0] for line in listing[1:]] == ["first", "second"]
    assert all(line.split()[3] == "Success" and line.split()[-1] == "no" for line in listing[1:])
    second = listing[2].split()[0]
    status = invoke(home, "status").output  # the latest task
    assert f"task:      {second}\n" in status
    assert "phase:     Success\n" in status
    assert "finalized" in status
    assert "events:\n  SuccessfulCreate: Created pod: " in status
    assert invoke(home, "logs", second).output == "two\n"
    missing = invoke(home, "status", "nope")
    assert missing.exit_code == 2
    assert "no task 'nope'" in missing.output


def start_running(
    home: Path, tmp_path: Path, name: str, command: str = "sleep 300"
) -> tuple[subprocess.Popen[str], str]:
    """``podwright run`` of a task in its own process, once the task is Running."""
    runner = podwright(
        "run",
        "--workload",
        workload(tmp_path, name, command),
        "--backend",
        "local",
        "--home",
        str(home),
        cwd=tmp_path,
    )
    assert runner.stdout is not None
    task_id = task_id_of(runner.stdout.readline())
    eventually(lambda: "phase:     Running" in phase_of(home, task_id), timeout=60)
    return runner, task_id


def test_abort_stops_a_running_task_from_another_process(tmp_path: Path, home: Path) -> None:
    runner, task_id = start_running(home, tmp_path, "long")
    aborted = invoke(home, "abort", task_id)
    assert re.fullmatch(
        rf"abort requested for task {task_id}: the executor \(pid \d+\) stops it\n",
        aborted.output,
    )
    runner.communicate(timeout=60)
    assert runner.returncode == 4
    assert "phase:     Aborted (aborted on request)" in phase_of(home, task_id)
    assert invoke(home, "abort", task_id).output == f"task {task_id} already ended: Aborted\n"


def test_ctrl_c_off_a_terminal_aborts_the_task(tmp_path: Path, home: Path) -> None:
    runner, task_id = start_running(home, tmp_path, "interrupted")
    os.kill(runner.pid, signal.SIGINT)
    _, errors = runner.communicate(timeout=60)
    assert runner.returncode == 4
    assert "interrupted: aborting the task" in errors
    assert "phase:     Aborted" in phase_of(home, task_id)


@pytest.mark.parametrize(
    ("number", "status"),
    [(signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["SIGTERM", "SIGHUP"],
)
def test_a_run_stopped_by_a_signal_leaves_its_task_to_the_executor(
    tmp_path: Path, home: Path, number: int, status: int
) -> None:
    go = tmp_path / "go"
    runner, task_id = start_running(home, tmp_path, "stopped", waiting_for(go))
    os.kill(runner.pid, number)
    _, errors = runner.communicate(timeout=60)
    assert runner.returncode == status
    name = signal.Signals(number).name
    assert errors == (
        f"podwright: {name}: stopped following task {task_id}; it goes on with the executor "
        f"(podwright status {task_id})\n"
    )
    assert "phase:     Running" in phase_of(home, task_id)
    go.touch()
    eventually(lambda: "phase:     Success" in phase_of(home, task_id), timeout=60)
    assert invoke(home, "logs", task_id).output == "finished\n"


def test_a_run_whose_output_is_closed_stops_quietly_and_its_task_goes_on(
    tmp_path: Path, home: Path
) -> None:
    go = tmp_path / "go"
    command = waiting_for(go, "for n in 1 2 3; do echo line $n; done")
    runner = podwright(
        "run",
        "--workload",
        workload(tmp_path, "piped", command),
        "--backend",
        "local",
        "--home",
        str(home),
        cwd=tmp_path,
    )
    head = subprocess.Popen(["head", "-1"], stdin=runner.stdout, stdout=subprocess.PIPE, text=True)
    assert runner.stdout is not None
    runner.stdout.close()  # only 'head' reads it now
    first, _ = head.communicate(timeout=60)
    task_id = task_id_of(first)
    eventually(lambda: "phase:     Running" in phase_of(home, task_id), timeout=60)
    go.touch()  # the task writes output: 'run' finds its output closed
    _, errors = runner.communicate(timeout=60)
    assert runner.returncode == 141
    assert errors == ""
    eventually(lambda: "phase:     Success" in phase_of(home, task_id), timeout=60)


def test_logs_f_stops_quietly_on_ctrl_c(tmp_path: Path, home: Path) -> None:
    go = tmp_path / "go"
    command = f"sh -c 'echo waiting; while [ ! -e {go} ]; do sleep 0.05; done; echo done'"
    result = invoke(home, "run", "--detach", "--workload", workload(tmp_path, "followed", command))
    task_id = task_id_of(result.output)
    follower = podwright("logs", task_id, "-f", "--home", str(home), cwd=tmp_path)
    assert follower.stdout is not None
    assert follower.stdout.readline() == "waiting\n"  # it follows: its Ctrl-C handling is set
    follower.send_signal(signal.SIGINT)
    output, errors = follower.communicate(timeout=30)
    assert (follower.returncode, output, errors) == (0, "", "")
    go.touch()
    eventually(lambda: "phase:     Success" in phase_of(home, task_id), timeout=60)


def test_abort_starts_an_executor_when_none_runs(tmp_path: Path, home: Path) -> None:
    """A task recorded with nobody serving it (its executor was killed, say) is aborted."""
    store = SQLiteTaskStore(home / "tasks.db")
    try:
        store.submit(
            pod_task(
                "orphan",
                {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox:1", "command": ["sleep", "300"]}
                    ],
                },
                workload_type="training",
            )
        )
    finally:
        store.close()
    assert serving_executors(home / "tasks.db") == {}
    result = invoke(home, "abort", "orphan")
    assert result.exit_code == 0, result.output
    found = re.fullmatch(
        r"abort requested for task orphan: a background executor \(pid (\d+)\) stops it\n",
        result.output,
    )
    assert found is not None, result.output
    eventually(lambda: "phase:     Aborted" in phase_of(home, "orphan"), timeout=60)
    assert wait_until_gone(int(found.group(1)))


@pytest.mark.parametrize("command", ["status", "logs", "abort", "delete"])
def test_an_unknown_task_is_reported(home: Path, command: str) -> None:
    args = [command] if command == "status" else [command, "some-task"]
    result = invoke(home, *args)
    assert result.exit_code == 2
    assert ("no tasks in" if command == "status" else "no task 'some-task'") in result.output


def test_make_runs_example_runs_with_its_effective_workload_shown(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the example's command is relative to the repository
    result = invoke(
        home,
        "run",
        "--workload",
        "examples/workload-local.yaml",
        "--policy",
        "examples/policies/local-dev.yaml",
    )
    assert result.exit_code == 0, result.output
    assert (
        "  backoffLimit                        0                                policy default (cluster default)"
        in result.output
    )
    assert (
        "  image                               python:3.11-slim                 submission"
        in result.output
    )
    lines = result.output.splitlines()
    assert lines[-1].endswith("s  Success")
    epoch = lines.index("  | epoch 3/3  loss 0.4132")
    assert lines[epoch + 1] == "  | done: model saved to the scratch directory (not really)"


def test_a_local_task_runs_where_run_was_started_whoever_runs_the_executor(
    tmp_path: Path, home: Path
) -> None:
    """The executor serving a local task may have been started from anywhere: the directory
    'run' was started in is recorded, as the workingDir of the containers that have none."""
    go = tmp_path / "go"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = podwright(
        "run",
        "--detach",
        "--workload",
        workload(tmp_path, "holder", waiting_for(go)),
        "--backend",
        "local",
        "--home",
        str(home),
        cwd=tmp_path,
    )
    first.communicate(timeout=60)
    assert first.returncode == 0
    project = tmp_path / "project"
    project.mkdir()
    (project / "data.txt").write_text("found here\n")
    spec = workload(tmp_path, "reader", "cat data.txt")
    runner = podwright(
        "run", "--workload", spec, "--backend", "local", "--home", str(home), cwd=project
    )
    eventually(lambda: "reader-" in invoke(home, "list").output, timeout=60)
    go.touch()
    output, errors = runner.communicate(timeout=60)
    assert runner.returncode == 0, output + errors
    assert "  | found here" in output
    store = SQLiteTaskStore(home / "tasks.db")
    try:
        reader = next(r for r in store.list_tasks() if r.task.name == "reader")
    finally:
        store.close()
    (job,) = reader.task.manifests
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["workingDir"] == str(project)
    assert_valid_manifests([dict(job)])


def test_the_task_store_path_can_be_set(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "elsewhere" / "my-tasks.db"
    store.parent.mkdir()
    monkeypatch.setenv("PODWRIGHT_TASK_STORE", str(store))
    path = tmp_path / "pod.yaml"
    path.write_text(
        "apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {name: pair}\n"
        "spec:\n  type: workspace\n  image: busybox:1\n"
        "  command: sh -c 'echo from main'\n  restartPolicy: Never\n"
    )
    result = invoke(home, "run", "--workload", str(path))
    assert result.exit_code == 0, result.output
    assert "  | from main" in result.output
    assert store.is_file()
    assert not (home / "tasks.db").exists()
    assert "pair-" in invoke(home, "list").output
    no_executor_left(store)


def test_a_workload_s_labels_and_namespace_go_with_its_task(tmp_path: Path, home: Path) -> None:
    """The workload file's metadata: its labels label the task (``list -l`` selects by them), its
    namespace is the task's, and a ``-n`` that says another is refused before anything runs."""
    path = tmp_path / "labelled.yaml"
    path.write_text(
        "apiVersion: podwright.dev/v1alpha1\nkind: Workload\n"
        "metadata: {name: labelled, namespace: vision, labels: {team: vision}}\n"
        "spec:\n  type: training\n  image: busybox:1\n  command: echo labelled\n"
    )
    refused = invoke(home, "run", "--workload", str(path), "-n", "audio", "--detach")
    assert refused.exit_code == 2
    assert "--namespace audio: the workload file says metadata.namespace vision" in (refused.output)
    assert "no tasks" in invoke(home, "list").output
    result = invoke(home, "run", "--workload", str(path))
    assert result.exit_code == 0, result.output
    task_id = task_id_of(result.output)
    selected = json.loads(invoke(home, "list", "-l", "team=vision", "-o", "json").output)
    assert [(item["id"], item["namespace"], item["labels"]) for item in selected["items"]] == [
        (task_id, "vision", {"team": "vision"})
    ]
    other = json.loads(invoke(home, "list", "-l", "team!=vision", "-o", "json").output)
    assert other["items"] == []


def test_a_submitter_does_not_choose_the_scope(home: Path) -> None:
    """``run`` has no ``--scope``: a submission is judged in its namespace's scope; ``render``
    and ``policy evaluate`` keep it, for administrators previewing a policy."""
    result = invoke(home, "run", "--workload", "examples/workload-local.yaml", "--scope", "tenant")
    assert result.exit_code == 2
    assert "No such option '--scope'" in result.output
