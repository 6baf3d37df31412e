"""``podwright executor`` and ``run --detach`` on the local backend: one executor per task store
and backend (a second one exits at once; quick concurrent submissions start one), a detached task
runs to its end in a background executor that then exits, an idle executor takes its lock again
for a task that arrived as it was leaving, a stopped executor aborts what it runs (recording
Aborted only once the task's process, given its grace period, is gone), and the processes a killed
backend left behind are killed by the next one."""

from __future__ import annotations

import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from podwright.adapters.local.cluster import LocalCluster
from podwright.adapters.proc import start_time
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.api.executors import ExecutorSlot, HeldSlot
from podwright.cli.main import cli
from podwright.core.lifecycle import Phase
from podwright.engine.task_store import TaskRecord
from tests.cli.background import no_executor_left, serving_executors, wait_until_gone
from tests.cli.records import pod_task
from tests.cli.test_run_commands import task_id_of, waiting_for, workload
from tests.kube.support import eventually


def invoke(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--home", str(home)])


def detach(home: Path, path: str) -> tuple[str, int]:
    """``run --detach`` on the local backend: the task's id, and the executor's pid."""
    result = invoke(home, "run", "--workload", path, "--backend", "local", "--detach")
    assert result.exit_code == 0, result.output
    found = re.search(r"left to (?:a background|the running) executor \(pid (\d+)\)", result.output)
    assert found is not None, result.output
    return task_id_of(result.output), int(found.group(1))


def status(home: Path, task_id: str) -> str:
    return invoke(home, "status", task_id).output


def test_a_detached_task_runs_to_success_in_a_background_executor_that_then_exits(
    tmp_path: Path, home: Path
) -> None:
    task_id, pid = detach(home, workload(tmp_path, "offline", "sh -c 'echo working; echo done'"))
    eventually(lambda: "phase:     Success" in status(home, task_id), timeout=60)
    assert invoke(home, "logs", task_id).output == "working\ndone\n"
    assert wait_until_gone(pid)  # --until-idle: nothing left to do
    log = (home / "executor-local.log").read_text()
    assert f"executor for the local backend of {home / 'tasks.db'} started (pid {pid})" in log
    assert "no active local task left: exiting" in log


def test_a_second_executor_of_a_store_and_backend_exits_at_once_naming_the_first(
    tmp_path: Path, home: Path
) -> None:
    go = tmp_path / "go"
    long, pid = detach(home, workload(tmp_path, "long", waiting_for(go)))
    eventually(lambda: "phase:     Running" in status(home, long), timeout=60)
    second = subprocess.run(
        [
            *(sys.executable, "-m", "podwright", "executor", "--backend", "local"),
            *("--metrics-address", "off", "--home", str(home)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 0, second.stderr
    assert (
        f"the local tasks of {home / 'tasks.db'} are served by the executor with pid {pid}: "
        "nothing to do"
    ) in second.stderr
    assert "started" not in second.stderr
    # 'run' while that executor serves the backend: it runs this task too, and 'run' follows.
    quick = invoke(
        home, "run", "--workload", workload(tmp_path, "quick", "echo hi"), "--backend", "local"
    )
    assert quick.exit_code == 0, quick.output
    assert "  | hi" in quick.output
    assert (home / "executor-local.log").read_text().count("started") == 1
    go.touch()
    eventually(lambda: "phase:     Success" in status(home, long), timeout=60)


_RELEASED_TOGETHER = """
import os, sys, time
from podwright.cli.main import main
while not os.path.exists(sys.argv[1]):
    time.sleep(0.005)
main(sys.argv[2:])
"""


def test_concurrent_submissions_start_one_executor_and_every_task_succeeds(
    tmp_path: Path, home: Path
) -> None:
    go, start = tmp_path / "go", tmp_path / "start"
    runs = [
        subprocess.Popen(
            [
                *(sys.executable, "-c", _RELEASED_TOGETHER, str(start), "run", "--detach"),
                *("--workload", workload(tmp_path, f"burst{n}", waiting_for(go, f"echo {n}"))),
                *("--backend", "local", "--home", str(home)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    start.touch()  # every process has imported podwright by the time it sees the file
    results = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0] * 4, "\n".join(
        f"run {n}: exit {run.returncode}\n{out}{err}"
        for n, (run, (out, err)) in enumerate(zip(runs, results, strict=True))
    )
    pids = {int(re.findall(r"executor \(pid (\d+)\)", out)[0]) for out, _ in results}
    task_ids = [task_id_of(out) for out, _ in results]
    assert len(pids) == 1, results
    go.touch()
    for task_id in task_ids:
        eventually(
            lambda task_id=task_id: "phase:     Success" in status(home, task_id), timeout=60
        )
    assert wait_until_gone(pids.pop())
    log = (home / "executor-local.log").read_text()
    assert len(re.findall(r"executor for the local backend of .* started", log)) == 1, log


def test_an_idle_executor_serves_a_task_submitted_as_it_leaves(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The moment an --until-idle executor releases its lock, a 'run' may record a task and find
    it still held: the executor re-reads the store and serves the task."""
    submitted: list[str] = []
    release = HeldSlot.release

    def release_then_submit(held: HeldSlot) -> None:
        release(held)
        if not submitted:  # a task is recorded now, by a 'run' that saw the lock still held
            submitted.append(_submit_directly(home, "late"))

    monkeypatch.setattr(HeldSlot, "release", release_then_submit)
    caplog.set_level(logging.INFO, "podwright.executor")
    result = invoke(
        home, "executor", "--backend", "local", "--until-idle", "--metrics-address", "off"
    )
    assert result.exit_code == 0, result.output
    assert "a new local task arrived: serving again" in caplog.messages
    assert "phase:     Success" in status(home, submitted[0])
    assert "finalized" in status(home, submitted[0])
    assert sum("started" in message for message in caplog.messages) == 1


def test_an_idle_executor_leaves_a_new_task_to_the_executor_that_took_the_lock(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    taken: list[HeldSlot] = []
    release = HeldSlot.release

    def release_then_lose_the_lock(held: HeldSlot) -> None:
        release(held)
        if not taken:  # a task arrives, and another executor takes the lock first
            _submit_directly(home, "contested")
            other = ExecutorSlot(home / "tasks.db", "local").take()
            assert other is not None
            taken.append(other)

    monkeypatch.setattr(HeldSlot, "release", release_then_lose_the_lock)
    caplog.set_level(logging.INFO, "podwright.executor")
    result = invoke(
        home, "executor", "--backend", "local", "--until-idle", "--metrics-address", "off"
    )
    assert result.exit_code == 0, result.output
    assert (
        f"a new local task is served by the executor with pid {os.getpid()}: exiting"
        in caplog.messages
    )
    assert "phase:     Undefined" in status(home, "contested")
    release(taken[0])
    invoke(home, "delete", "contested")  # served by a background executor, which then exits


def _submit_directly(home: Path, name: str) -> str:
    """A task recorded as 'run' records one (a pod that exits at once), without 'run'."""
    store = SQLiteTaskStore(home / "tasks.db")
    try:
        store.submit(
            pod_task(
                name,
                {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox:1", "command": ["true"]}],
                },
            )
        )
    finally:
        store.close()
    return name


def test_sigterm_stops_a_local_executor_after_aborting_its_tasks(
    tmp_path: Path, home: Path
) -> None:
    task_id, pid = detach(home, workload(tmp_path, "endless", "sleep 300"))
    eventually(lambda: "phase:     Running" in status(home, task_id), timeout=60)
    assert serving_executors(home / "tasks.db") == {"local": pid}
    running = list((home / "local" / "running").iterdir())
    assert len(running) == 1
    sleeper = int(running[0].name)
    os.kill(pid, signal.SIGTERM)
    assert wait_until_gone(pid)
    state = status(home, task_id)
    assert "phase:     Aborted (aborted on request)" in state
    assert "finalized" in state
    assert wait_until_gone(sleeper)
    assert list((home / "local" / "running").iterdir()) == []
    assert "aborting 1 local task(s)" in (home / "executor-local.log").read_text()


_STUBBORN = """
import os, signal, sys, time
from pathlib import Path

marks = Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda _number, _frame: (marks / "sigterm").touch())
(marks / "started").write_text(f"{os.getpid()}\\n")
while not (marks / "sigterm").exists():
    time.sleep(0.02)
(marks / "alive-after-sigterm").touch()
while not (marks / "go").exists():
    time.sleep(0.02)
(marks / "exited").touch()
"""
"""A container that survives SIGTERM (noting it got it and still runs) and exits only once the
test creates ``go``: the executor's stop cannot end it early, only its grace period's SIGKILL."""

_WAIT_SECONDS = 60.0
"""Generous (the machine may be loaded), and within the tests' timeout of 120 s."""


class Stubborn:
    """The marks a :data:`_STUBBORN` container leaves in its directory, and its process."""

    def __init__(self, marks: Path) -> None:
        self.marks = marks

    def command(self) -> str:
        script = self.marks.parent / "stubborn.py"
        script.write_text(_STUBBORN)
        return shlex.join([sys.executable, str(script), str(self.marks)])

    def started(self) -> tuple[int, str]:
        """Once it runs: its pid and start time (which name it across pid reuse)."""
        pid = int(eventually(self._written_pid, timeout=_WAIT_SECONDS))
        started = start_time(pid)
        assert started is not None
        return pid, started

    def _written_pid(self) -> str:
        """The pid it wrote, once the line is whole ('' until then)."""
        written = self.marks / "started"
        line = written.read_text() if written.exists() else ""
        return line if line.endswith("\n") else ""

    def has(self, mark: str) -> bool:
        return (self.marks / mark).exists()


@pytest.fixture
def stubborn(tmp_path: Path) -> Iterator[Stubborn]:
    """A :class:`Stubborn` container's marks; whatever happened, it exits by the end of the test."""
    marks = tmp_path / "marks"
    marks.mkdir()
    yield Stubborn(marks)
    (marks / "sigterm").touch()
    (marks / "go").touch()


@pytest.fixture
def executor(home: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``podwright executor`` on the local backend of ``home``, serving (its log in tmp_path)."""
    with (tmp_path / "executor.log").open("wb") as log:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "podwright", "executor", "--backend", "local"),
                *("--metrics-address", "off", "--home", str(home)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        eventually(
            lambda: serving_executors(home / "tasks.db") == {"local": process.pid},
            timeout=_WAIT_SECONDS,
        )
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def _gone(pid: int, started: str) -> bool:
    """Whether the process is gone, reaped too (a zombie is still there)."""
    return start_time(pid) != started


def _first_record(home: Path, task_id: str, wanted: Callable[[TaskRecord], bool]) -> TaskRecord:
    """The task's record as soon as the store holds one that is ``wanted``."""
    store = SQLiteTaskStore(home / "tasks.db")
    try:
        return eventually(
            lambda: wanted(found := store.get(task_id)) and found, timeout=_WAIT_SECONDS
        )
    finally:
        store.close()


def _first_seen_aborted(home: Path, task_id: str, pid: int, started: str) -> str:
    """Read the task's record until it is Aborted; the process must be gone by then. Its reason."""
    record = _first_record(home, task_id, lambda record: record.phase is Phase.ABORTED)
    assert _gone(pid, started), f"recorded Aborted while its process {pid} still runs"
    return record.reason


def _running(home: Path, task_id: str) -> None:
    _first_record(home, task_id, lambda record: record.phase is Phase.RUNNING)


def _stopped(executor: subprocess.Popen[bytes], tmp_path: Path) -> None:
    """The executor exited 0, and nothing it ran is left running."""
    assert executor.wait(timeout=_WAIT_SECONDS) == 0, (tmp_path / "executor.log").read_text()
    assert list((tmp_path / "home" / "local" / "running").iterdir()) == []


def test_a_stopping_executor_records_aborted_only_once_the_process_exited_within_its_grace(
    tmp_path: Path, home: Path, stubborn: Stubborn, executor: subprocess.Popen[bytes]
) -> None:
    """The container goes on after SIGTERM (a grace period of 10 minutes lets it) until the test
    lets it exit: until then the task is not Aborted and the executor waits for it."""
    path = workload(tmp_path, "stubborn", stubborn.command(), terminationGracePeriodSeconds=600)
    task_id, pid = detach(home, path)
    assert pid == executor.pid
    container, started = stubborn.started()
    _running(home, task_id)
    executor.send_signal(signal.SIGTERM)
    eventually(lambda: stubborn.has("alive-after-sigterm"), timeout=_WAIT_SECONDS)
    aborting = _first_record(home, task_id, lambda record: record.reason.startswith("abort"))
    assert aborting.phase is Phase.RUNNING, aborting
    assert aborting.reason == "aborting: waiting for the job's pods to stop (grace 600 s)"
    assert not _gone(container, started)  # it waits for 'go'
    assert executor.poll() is None  # waiting for the task it aborted
    (stubborn.marks / "go").touch()
    assert _first_seen_aborted(home, task_id, container, started) == "aborted on request"
    assert stubborn.has("exited")
    _stopped(executor, tmp_path)


def test_a_stopping_executor_records_aborted_only_once_its_grace_periods_sigkill_is_done(
    tmp_path: Path, home: Path, stubborn: Stubborn, executor: subprocess.Popen[bytes]
) -> None:
    """The container survives SIGTERM and never exits by itself: SIGKILL ends it once its grace
    period of 2 s is over, and only then is the task Aborted."""
    path = workload(tmp_path, "stubborn", stubborn.command(), terminationGracePeriodSeconds=2)
    task_id, _ = detach(home, path)
    container, started = stubborn.started()
    _running(home, task_id)
    executor.send_signal(signal.SIGTERM)
    assert _first_seen_aborted(home, task_id, container, started) == "aborted on request"
    assert stubborn.has("alive-after-sigterm")
    assert not stubborn.has("exited")  # killed
    _stopped(executor, tmp_path)


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
        assert wait_until_gone(orphan, timeout=10)
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


def test_a_slot_a_failed_test_left_held_in_its_own_process_is_reported_not_signalled(
    tmp_path: Path,
) -> None:
    """A test that ran the executor in its own process and failed before it let its slot go
    leaves this process as the slot's holder: the check after it reports that, and must not
    send the test process SIGTERM (which killed a pytest-xdist worker and hung the run)."""
    store = tmp_path / "tasks.db"
    SQLiteTaskStore(store).close()
    held = ExecutorSlot(store, "local").take()
    assert held is not None
    try:
        with pytest.raises(pytest.fail.Exception, match="still held by this test's process"):
            no_executor_left(store)
    finally:
        held.release()
