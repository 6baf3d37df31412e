"""Background executors in tests: none may outlive the test that caused it.

``run``, ``abort`` and ``delete`` start ``podwright executor --until-idle`` in the background; it
exits by itself once its tasks are finalized. :func:`no_executor_left` is the check every such
test ends with: it waits (generously) for the executors of a task store to exit, and when one is
still running after its tasks ended, or tasks were left active, it stops it and fails the test.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pytest

from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.api.executors import ExecutorSlot, process_start_time

_EXIT_SECONDS = 30.0


def serving_executors(store: Path) -> dict[str, int]:
    """The pid of the executor serving each backend of ``store``, by backend key."""
    found = {}
    suffix = ".lock"
    for lock in store.parent.glob(f"{store.name}.executor-*{suffix}"):
        key = unquote(lock.name[len(f"{store.name}.executor-") : -len(suffix)])
        pid = ExecutorSlot(store, key).serving()
        if pid is not None:
            found[key] = pid
    return found


def wait_until_gone(pid: int, timeout: float = _EXIT_SECONDS) -> bool:
    """Whether the process (not a child of ours) exited within ``timeout``."""
    deadline = time.monotonic() + timeout
    while process_start_time(pid) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def no_executor_left(store: Path) -> None:
    """Fail the test if an executor of ``store`` outlives its tasks (stopping it first), or if the
    test left tasks active (aborting them first)."""
    if not store.is_file():
        return
    problems = []
    opened = SQLiteTaskStore(store)
    try:
        # A task that just ended is finalized by its executor's next round.
        deadline = time.monotonic() + _EXIT_SECONDS
        while True:
            records = opened.list_tasks(active_only=True)
            ending = [record for record in records if record.phase.is_terminal]
            if not ending or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        active = [record.task_id for record in records]
        if active:
            problems.append(f"the test left active tasks: {active}")
            for task_id in active:
                opened.request_abort(task_id, datetime.now(UTC))
    finally:
        opened.close()
    for key, pid in serving_executors(store).items():
        if pid == os.getpid():
            # The test ran the executor in its own process and left its slot held (it failed
            # before it let it go): a signal would stop this test process, not an executor.
            problems.append(f"the {key} executor's slot is still held by this test's process")
            continue
        if wait_until_gone(pid):
            continue
        problems.append(f"the {key} executor (pid {pid}) still runs after its tasks ended")
        os.kill(pid, signal.SIGTERM)
        if not wait_until_gone(pid):
            os.kill(pid, signal.SIGKILL)
            wait_until_gone(pid)
    if problems:
        pytest.fail("; ".join(problems))
