"""``podwright console`` run as a user runs it: a process of its own, its URL read from what it
prints, stopped with Ctrl-C (SIGINT) at the end, as a person stops it."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

STARTUP_SECONDS = 60.0
STOP_SECONDS = 20.0
REPOSITORY = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class RunningConsole:
    """A console that serves: its URL with the token, its base, the token."""

    url: str
    output: list[str]

    @property
    def base(self) -> str:
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def token(self) -> str:
        return self.url.rsplit("token=", 1)[1]


@contextlib.contextmanager
def running_console(arguments: Sequence[str], cwd: Path = REPOSITORY) -> Iterator[RunningConsole]:
    """``podwright console ARGUMENTS --listen 127.0.0.1:0``, until the block ends; the test
    fails when it does not start, or does not stop at SIGINT within :data:`STOP_SECONDS`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "podwright", "console", *arguments, "--listen", "127.0.0.1:0"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    output: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line.rstrip("\n"))
            match = re.search(r"open (https?://\S+)", line)
            if match and not url:
                url.append(match.group(1))
                found.set()
        found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        found.wait(STARTUP_SECONDS)
        if not url:
            raise AssertionError("podwright console did not start:\n" + "\n".join(output))
        yield RunningConsole(url[0], output)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError(
                "podwright console did not stop at SIGINT:\n" + "\n".join(output)
            ) from None
        reader.join(5)
        assert process.stdout is not None
        process.stdout.close()
        assert code == 0, f"podwright console ended with {code}:\n" + "\n".join(output)
        assert not any("Traceback" in line for line in output), "\n".join(output)
