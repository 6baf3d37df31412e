"""``podwright executor`` and ``run --detach`` on the local backend: one process runs it at a time,
a detached task runs to its end in a background executor, a stopped executor aborts what it runs,
and the processes a killed backend left behind are killed by the next one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner, Result

from podwright.adapters.local.cluster import LocalCluster
from podwright.cli.backends import executor_lock_holder
from podwright.cli.main import cli
from tests.cli.test_run_commands import workload
from tests.kube.support import eventually


def invoke(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--home", str(home)])


def detach(home: Path, path: str) -> tuple[str, int]:
    """``run --detach`` on the local backend: the task's id, and the executor's pid."""
    result = invoke(home, "run", "--workload", path, "--backend", "local", "--detach")
    assert result.exit_code == 0, result.output
    found = re.search(r"left to a background executor \(pid (\d+)\)", result.output)
    assert found is not None, result.output
    return result.output.splitlines()[0].split()[1].rstrip(":"), int(found.group(1))


def wait_for_exit(pid: int, timeout: float = 30) -> None:
    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie of ours counts as gone (the background executor is not our child).
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"

    eventually(gone, timeout=timeout)


def test_a_detached_task_runs_to_success_in_a_background_executor_that_then_exits(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    task_id, pid = detach(home, workload(tmp_path, "offline", "sh -c 'echo working; echo done'"))
    eventually(lambda: executor_lock_holder(home, "local") == pid)
    eventually(lambda: "phase:     Success" in invoke(home, "status", task_id).output)
    assert invoke(home, "logs", task_id).output == "working\ndone\n"
    wait_for_exit(pid)  # --until-idle: nothing left to do
    log = (home / "executor-local.log").read_text()
    assert "no active local task left: exiting" in log


def test_the_local_backend_runs_in_one_process_at_a_time_and_run_follows_the_others(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    long, _ = detach(home, workload(tmp_path, "long", "sleep 300"))
    eventually(lambda: "phase:     Running" in invoke(home, "status", long).output)
    busy = invoke(home, "executor", "--backend", "local", "--metrics-address", "off")
    assert busy.exit_code == 1
    assert "another podwright process runs the local backend of" in busy.output
    # 'run' while the background executor holds the backend: that executor runs it, this follows.
    quick = invoke(
        home, "run", "--workload", workload(tmp_path, "quick", "echo hi"), "--backend", "local"
    )
    assert quick.exit_code == 0, quick.output
    assert "  | hi" in quick.output
    invoke(home, "abort", long)
    eventually(lambda: "phase:     Aborted" in invoke(home, "status", long).output)


def test_sigterm_stops_a_local_executor_after_aborting_its_tasks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    task_id, pid = detach(home, workload(tmp_path, "endless", "sleep 300"))
    eventually(lambda: "phase:     Running" in invoke(home, "status", task_id).output)
    assert executor_lock_holder(home, "local") == pid
    running = list((home / "local" / "running").iterdir())
    assert len(running) == 1
    sleeper = int(running[0].name)
    os.kill(pid, signal.SIGTERM)
    wait_for_exit(pid)
    status = invoke(home, "status", task_id).output
    assert "phase:     Aborted (aborted on request)" in status
    assert "finalized" in status
    wait_for_exit(sleeper)
    assert list((home / "local" / "running").iterdir()) == []
    assert "aborting 1 local task(s)" in (home / "executor-local.log").read_text()


def test_processes_left_by_a_killed_backend_are_killed_by_the_next(tmp_path: Path) -> None:
    state = tmp_path / "local"
    script = textwrap.dedent(
        f"""
        import os, signal, sys, time
        from podwright.adapters.local.cluster import LocalCluster
        cluster = LocalCluster({str(state)!r})
        cluster.create({{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "left"}},
            "spec": {{"containers": [{{"name": "main", "image": "x", "command": ["sleep", "300"]}}]}}}})
        while not (os.path.isdir({str(state / "running")!r}) and os.listdir({str(state / "running")!r})):
            time.sleep(0.05)
        print(os.listdir({str(state / "running")!r})[0], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    crashed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30, check=False
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    orphan = int(crashed.stdout.strip())
    os.kill(orphan, 0)  # still running, reparented
    successor = LocalCluster(state)
    try:
        assert successor.orphans_killed == 1
        wait_for_exit(orphan, timeout=10)
        assert list((state / "running").iterdir()) == []
    finally:
        successor.close()


def test_a_pid_reused_by_another_process_is_not_killed(tmp_path: Path) -> None:
    state = tmp_path / "local"
    (state / "running").mkdir(parents=True)
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        (state / "running" / str(bystander.pid)).write_text("1")  # another start time
        successor = LocalCluster(state)
        successor.close()
        assert successor.orphans_killed == 0
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
