"""The executor lock of a task store's backend, the start lock that records an executor being
started, and the keeper that restarts an executor which exited (and gives up on one that cannot
serve)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from podwright.api.errors import BackendError
from podwright.api.executors import ExecutorKeeper, ExecutorLaunch, ExecutorSlot


def dead_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def test_the_lock_lives_by_the_store_one_per_backend_key(tmp_path: Path) -> None:
    store = tmp_path / "shared" / "tasks.db"
    local, cluster = ExecutorSlot(store, "local"), ExecutorSlot(store, "kubernetes/a/b")
    assert local.lock_path == tmp_path / "shared" / "tasks.db.executor-local.lock"
    assert cluster.lock_path.name == "tasks.db.executor-kubernetes%2Fa%2Fb.lock"
    assert ExecutorSlot(store, "kubernetes/a_b").lock_path != cluster.lock_path
    held = local.take()
    assert held is not None
    assert local.take() is None  # another open file of this process: as another executor
    assert local.serving() == os.getpid()
    assert cluster.serving() is None
    held.release()
    assert local.serving() is None


def test_an_executor_being_started_counts_as_serving_until_it_dies(tmp_path: Path) -> None:
    slot = ExecutorSlot(tmp_path / "tasks.db", "local")
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        started = slot.ensure(lambda: sleeper.pid)
        assert (started.pid, started.started) == (sleeper.pid, True)
        again = slot.ensure(lambda: pytest.fail("a second executor was started"))
        assert (again.pid, again.started) == (sleeper.pid, False)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert slot.serving() is None
    replacement = slot.ensure(dead_pid)
    assert replacement.started


def test_an_executor_that_took_the_lock_is_no_longer_starting(tmp_path: Path) -> None:
    slot = ExecutorSlot(tmp_path / "tasks.db", "local")
    slot.ensure(os.getpid)  # this process plays the executor just started
    assert slot.start_lock_path.read_text().split()[0] == str(os.getpid())
    held = slot.take()
    assert held is not None
    assert slot.start_lock_path.read_text() == ""
    held.release()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


STARTED: list[int] = []


@pytest.fixture
def launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ExecutorLaunch:
    """A launch whose executors exit at once, having said why in their log."""
    launch = ExecutorLaunch(tmp_path / "home", tmp_path / "home" / "tasks.db", "kubernetes/x")
    launch.home.mkdir()
    launch.log.write_text("podwright: error: cannot configure a Kubernetes client\n")
    STARTED.clear()

    def start(_launch: ExecutorLaunch) -> int:
        STARTED.append(dead_pid())
        return STARTED[-1]

    monkeypatch.setattr(ExecutorLaunch, "start", start)
    return launch


def test_the_keeper_restarts_executors_and_gives_up_on_three_that_did_not_move_the_task(
    launch: ExecutorLaunch,
) -> None:
    clock = Clock()
    keeper = ExecutorKeeper(launch, monotonic=clock)
    keeper.keep("t", 1, now=True)
    keeper.keep("t", 1)  # checked at most once a second
    assert len(STARTED) == 1
    assert keeper.pid == STARTED[-1]
    for _ in range(2):
        clock.now += 1
        keeper.keep("t", 1)
    assert len(STARTED) == 3
    clock.now += 1
    with pytest.raises(BackendError) as raised:
        keeper.keep("t", 1)
    assert str(raised.value) == (
        f"no executor keeps serving the kubernetes/x tasks of {launch.store}: 3 started in a row "
        "exited without moving task t; the last one said: podwright: error: cannot configure a "
        f"Kubernetes client (see {launch.log}). The task is kept: podwright status t; "
        "podwright delete t"
    )


def test_the_keeper_goes_on_while_the_task_moves(launch: ExecutorLaunch) -> None:
    keeper = ExecutorKeeper(launch)
    for revision in range(1, 10):
        keeper.keep("t", revision, now=True)
    assert len(STARTED) == 9
