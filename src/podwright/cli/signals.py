"""Stop signals for the long-running commands (``executor``, ``webhook``).

SIGTERM (the kubelet's, systemd's) and SIGINT (Ctrl-C) ask a long-running command to stop
cleanly; both are turned into a ``threading.Event`` its loops wait on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def stopping_on_signals(stop: threading.Event, what_happens: str) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` while the block runs (and log ``what_happens``).

    Not from the signal handler: it runs in the main thread, between two of its instructions,
    and ``stop.set()`` takes the lock that thread may hold in ``stop.wait()`` (a deadlock). The
    interpreter writes each signal's number to a pipe instead (``signal.set_wakeup_fd``, no lock
    taken), and a thread reading the pipe sets ``stop``."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def watch() -> None:
        received = os.read(read_end, 1)  # blocks until a signal, or the pipe is closed
        if received:
            logger.info("%s: %s", signal.Signals(received[0]).name, what_happens)
            stop.set()

    watcher = threading.Thread(target=watch, name="stop-signals", daemon=True)
    watcher.start()
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    previous = {number: signal.signal(number, _noted) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)
        signal.set_wakeup_fd(previous_fd)
        os.close(write_end)
        watcher.join()
        os.close(read_end)


def _noted(_number: int, _frame: FrameType | None) -> None:
    """A stop signal's Python handler: the wakeup pipe has carried it to the watcher already."""
