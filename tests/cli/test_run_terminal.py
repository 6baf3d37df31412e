"""``podwright run`` on a terminal: the live display, and Ctrl-C asking what to do."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_run_commands import workload

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


def test_ctrl_c_on_a_terminal_asks_then_continues_or_aborts(tmp_path: Path) -> None:
    terminal = Terminal(
        sys.executable,
        "-m",
        "podwright",
        "run",
        "--workload",
        workload(tmp_path, "asked", "sleep 300"),
        "--backend",
        "local",
        "--home",
        str(tmp_path / "home"),
        cwd=tmp_path,
    )
    try:
        terminal.expect(r"Running")
        terminal.expect(r"training asked: \d+\.\ds")  # the timeline's running clock
        terminal.interrupt()
        terminal.expect(r"interrupted: abort the task, or continue\? \(abort, continue\)")
        assert "start it with --detach to leave it running" in terminal.text()
        terminal.type("continue\n")
        time.sleep(0.5)
        assert terminal.process.poll() is None
        terminal.interrupt()
        terminal.expect(r"continue\?.*continue\?", timeout=30)
        terminal.type("abort\n")
        terminal.expect(r"Aborted")
        assert terminal.close() == 4
    finally:
        if terminal.process.poll() is None:
            terminal.process.kill()
            terminal.close()
    assert re.search(r"training asked: Aborted after \d+\.\ds", terminal.text())
