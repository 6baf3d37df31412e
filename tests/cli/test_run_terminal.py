"""``podwright run`` on a terminal: the live display, and Ctrl-C asking what to do."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from podwright.cli.main import cli
from tests.cli.background import serving_executors
from tests.cli.test_run_commands import waiting_for, workload
from tests.kube.support import eventually

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """A process on a pseudo-terminal, its screen output read as plain text."""

    def __init__(self, *command: str, cwd: Path) -> None:
        self._master, slave = pty.openpty()
        self.process = subprocess.Popen(
            command,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={**os.environ, "TERM": "xterm", "COLUMNS": "120"},
            start_new_session=True,
        )
        os.close(slave)
        self.seen = b""

    def _read(self, timeout: float) -> bool:
        """Read what the process wrote within ``timeout``; False once it closed the terminal."""
        ready, _, _ = select.select([self._master], [], [], timeout)
        if ready:
            try:
                self.seen += os.read(self._master, 65536)
            except OSError:
                return False
        return True

    def expect(self, pattern: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while re.search(pattern.encode(), _ANSI.sub(b"", self.seen), re.DOTALL) is None:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{pattern!r} not seen in:\n{self.text()}"
            if not self._read(remaining):
                pytest.fail(f"{pattern!r} not seen before exit:\n{self.text()}")

    def type(self, text: str) -> None:
        os.write(self._master, text.encode())

    def interrupt(self) -> None:
        os.killpg(self.process.pid, signal.SIGINT)  # as the terminal's Ctrl-C would

    def text(self) -> str:
        return _ANSI.sub(b"", self.seen).decode("utf-8", "replace")

    def close(self) -> int:
        """Wait for the process to exit, reading its output meanwhile; its exit status."""
        deadline = time.monotonic() + 30
        while self.process.poll() is None and time.monotonic() < deadline:
            if not self._read(0.1):
                break
        code = self.process.wait(30)
        os.close(self._master)
        return code


def run_on_a_terminal(tmp_path: Path, home: Path, name: str, command: str) -> Terminal:
    return Terminal(
        sys.executable,
        "-m",
        "podwright",
        "run",
        "--workload",
        workload(tmp_path, name, command),
        "--backend",
        "local",
        "--home",
        str(home),
        cwd=tmp_path,
    )


@contextlib.contextmanager
def closing_terminal(terminal: Terminal) -> Iterator[Terminal]:
    try:
        yield terminal
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.close()


def test_ctrl_c_on_a_terminal_asks_then_continues_or_aborts(tmp_path: Path, home: Path) -> None:
    with closing_terminal(run_on_a_terminal(tmp_path, home, "asked", "sleep 300")) as terminal:
        terminal.expect(r"Running")
        terminal.expect(r"training asked: \d+\.\ds")  # the timeline's running clock
        terminal.interrupt()
        terminal.expect(
            r"interrupted: abort the task, or detach or continue\? \(abort, detach, continue\)"
        )
        terminal.type("continue\n")
        terminal.expect(r"training asked: \d+\.\ds")  # the display goes on, clock running
        assert terminal.process.poll() is None
        terminal.interrupt()
        terminal.expect(r"continue\?.*continue\?", timeout=30)
        terminal.type("abort\n")
        terminal.expect(r"Aborted")
        assert terminal.close() == 4
    assert re.search(r"training asked: Aborted after \d+\.\ds", terminal.text())


def test_ctrl_c_on_a_terminal_can_detach_from_a_local_task(tmp_path: Path, home: Path) -> None:
    go = tmp_path / "go"
    command = waiting_for(go)
    with closing_terminal(run_on_a_terminal(tmp_path, home, "left", command)) as terminal:
        terminal.expect(r"Running")
        terminal.interrupt()
        terminal.expect(r"\(abort, detach, continue\)")
        terminal.type("detach\n")
        terminal.expect(r"detached: task (left-\w+) goes on with the executor \(pid \d+\)")
        assert terminal.close() == 0
    task_id = re.findall(r"task (left-\w+)", terminal.text())[0]
    go.touch()
    eventually(lambda: "phase:     Success" in status(home, task_id), timeout=60)


def test_a_second_ctrl_c_while_aborting_stops_following_at_once(tmp_path: Path, home: Path) -> None:
    with closing_terminal(run_on_a_terminal(tmp_path, home, "stubborn", "sleep 300")) as terminal:
        terminal.expect(r"Running")
        # The executor is held still: the abort cannot end before the second Ctrl-C.
        executor = serving_executors(home / "tasks.db")["local"]
        os.kill(executor, signal.SIGSTOP)
        try:
            terminal.interrupt()
            terminal.expect(r"\(abort, detach, continue\)")
            terminal.type("abort\n")
            terminal.expect(r"aborting the task \(Ctrl-C again stops following")
            terminal.interrupt()
            terminal.expect(r"stopped following; the executor finishes aborting task stubborn-\w+")
            assert terminal.close() == 4
        finally:
            os.kill(executor, signal.SIGCONT)
    task_id = re.findall(r"(stubborn-\w+)", terminal.text())[0]
    eventually(lambda: "phase:     Aborted" in status(home, task_id), timeout=60)


def status(home: Path, task_id: str) -> str:
    return CliRunner().invoke(cli, ["status", task_id, "--home", str(home)]).output
