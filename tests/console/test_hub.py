"""The console's :class:`TaskHub` on a feed of its own making: it reads every task once at
first, then only when the feed says they may have changed."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from podwright.console.hub import TaskHub


class Feed:
    """A feed of no task that says when it changed; each wait ends at once unless told of a
    change."""

    def __init__(self) -> None:
        self.reads = 0
        self.waits = 0
        self.changed = threading.Event()

    def records(self) -> list[Any]:
        self.reads += 1
        return []

    def status(self, record: Any) -> Any:
        raise AssertionError("no status is asked for")

    def wait(self, timeout: float) -> bool:
        self.waits += 1
        changed = self.changed.wait(0.005)
        self.changed.clear()
        return changed


class Client:
    def __init__(self, feed: Feed) -> None:
        self._feed = feed

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass

    @contextlib.contextmanager
    def feed(self) -> Iterator[Feed]:
        yield self._feed


def until(check: Any) -> None:
    """Wait for the hub's thread to get somewhere (a guard against a hang, not a timing)."""
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "the hub's thread never got there"
        time.sleep(0.005)


def test_the_hub_reads_the_feed_again_only_when_it_may_have_changed() -> None:
    feed = Feed()
    hub = TaskHub(lambda: Client(feed))  # type: ignore[arg-type, return-value]
    hub.start()
    try:
        until(lambda: feed.waits >= 20)  # twenty waits that saw no change
        assert feed.reads == hub.reads == 1
        feed.changed.set()
        until(lambda: feed.reads == 2)
        until(lambda: feed.waits >= 40)
        assert feed.reads == hub.reads == 2
    finally:
        hub.stop()
