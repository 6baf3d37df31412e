"""``podwright run`` on the local backend, and the commands that read its task store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from podwright.cli.main import cli


def workload(tmp_path: Path, name: str, command: str, **spec: object) -> str:
    path = tmp_path / f"{name}.yaml"
    extra = "".join(f"  {key}: {value}\n" for key, value in spec.items())
    path.write_text(
        f"type: training\nname: {name}\nspec:\n  image: busybox:1\n  command: {command}\n{extra}"
    )
    return str(path)


def invoke(home: Path, *args: str) -> Result:
    # A kubeconfig on the machine would make a cluster the default: these tests run locally.
    backend = ["--backend", "local"] if args[0] == "run" else []
    return CliRunner().invoke(cli, [*args, *backend, "--home", str(home)])


def test_a_workload_runs_to_success_with_its_phases_events_and_output(tmp_path: Path) -> None:
    result = invoke(
        tmp_path / "home",
        "run",
        "--workload",
        workload(tmp_path, "hello", "sh -c 'echo epoch 1; echo epoch 2'"),
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("task hello-")
    assert lines[0].endswith(": training workload 'hello', local backend")
    assert lines[1] == "  image busybox:1 is recorded, not pulled: commands run on this machine"
    assert any(
        line.endswith("Queued  Job default/" + lines[0].split()[1].rstrip(":") + " created")
        for line in lines
    )
    assert "  | epoch 1" in lines
    assert "  | epoch 2" in lines
    assert any(line.endswith("s  Success") for line in lines), lines
    assert any("event: Completed: Job completed" in line for line in lines)


def test_a_failing_workload_exits_3_with_the_reason(tmp_path: Path) -> None:
    result = invoke(
        tmp_path / "home",
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


def test_policy_violations_exit_1_and_nothing_runs(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: podwright.dev/v1\nkind: WorkloadPolicy\nmetadata: {name: gpus}\n"
        "spec:\n  scope: {cluster: prod}\n  workloadType: training\n"
        "  rules:\n    compute:\n      gpuDevicesRequest: {max: 1}\n"
    )
    home = tmp_path / "home"
    greedy = workload(tmp_path, "rogue", "echo hi", compute="{gpuDevicesRequest: 8}")
    result = invoke(home, "run", "--workload", greedy, "--policy", str(policy))
    assert result.exit_code == 1, result.output
    assert "violation" in result.output
    assert invoke(home, "list").output == "no tasks\n"


def test_list_status_and_logs_read_the_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
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


def start_running(home: Path, tmp_path: Path, name: str) -> tuple[subprocess.Popen[str], str]:
    """``podwright run`` of a long task in its own process, once the task is Running."""
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "podwright",
            "run",
            "--workload",
            workload(tmp_path, name, "sleep 300"),
            "--backend",
            "local",
            "--home",
            str(home),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert runner.stdout is not None
    task_id = runner.stdout.readline().split()[1].rstrip(":")
    deadline = time.monotonic() + 30
    while "Running" not in invoke(home, "status", task_id).output:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    return runner, task_id


def test_abort_stops_a_running_task_from_another_process(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runner, task_id = start_running(home, tmp_path, "long")
    assert invoke(home, "abort", task_id).output == f"abort requested for task {task_id}\n"
    runner.communicate(timeout=30)
    assert runner.returncode == 4
    assert "phase:     Aborted (aborted on request)" in invoke(home, "status", task_id).output
    assert invoke(home, "abort", task_id).output == f"task {task_id} already ended: Aborted\n"


def test_ctrl_c_aborts_the_task(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runner, task_id = start_running(home, tmp_path, "interrupted")
    os.kill(runner.pid, signal.SIGINT)
    _, errors = runner.communicate(timeout=30)
    assert runner.returncode == 4
    assert "interrupted: aborting the task" in errors
    assert "phase:     Aborted" in invoke(home, "status", task_id).output


@pytest.mark.parametrize("command", ["status", "logs", "abort"])
def test_an_empty_store_is_reported(tmp_path: Path, command: str) -> None:
    args = [command] if command == "status" else [command, "some-task"]
    result = invoke(tmp_path / "home", *args)
    assert result.exit_code == 2
    assert ("no tasks in" if command == "status" else "no task 'some-task'") in result.output


def test_make_runs_example_runs_with_its_effective_workload_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repository)  # the example's command is relative to the repository
    result = invoke(
        tmp_path / "home",
        "run",
        "--workload",
        "examples/workload-local.yaml",
        "--policy",
        "examples/policies/local-dev.yaml",
    )
    assert result.exit_code == 0, result.output
    assert (
        "  backoffLimit                        0                                policy default (cluster local)"
        in result.output
    )
    assert (
        "  image                               python:3.11-slim                 submission"
        in result.output
    )
    assert "  | epoch 3/3  loss 0.4132" in result.output
    assert "  | done: model saved to the scratch directory (not really)" in result.output


def test_the_task_store_path_can_be_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "elsewhere" / "my-tasks.db"
    store.parent.mkdir()
    monkeypatch.setenv("PODWRIGHT_TASK_STORE", str(store))
    path = tmp_path / "pod.yaml"
    path.write_text(
        "type: workspace\nname: pair\nspec:\n  image: busybox:1\n"
        "  command: sh -c 'echo from main'\n  restartPolicy: Never\n"
    )
    home = tmp_path / "home"
    result = invoke(home, "run", "--workload", str(path))
    assert result.exit_code == 0, result.output
    assert "  | from main" in result.output
    assert store.is_file()
    assert not (home / "tasks.db").exists()
    assert "pair-" in invoke(home, "list").output
