"""The console's hub: one feed read for every page, its changes told to each listener, a
task's status read once per revision and its output followed once for all its pages."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from podwright.api import PodwrightError, TaskStatus
from podwright.console.hub import QUEUE_LIMIT, RESYNC, Change, TaskHub
from podwright.core.lifecycle.phases import Phase
from podwright.engine.task_store import NewTask, TaskRecord

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def record(task_id: str, phase: Phase = Phase.RUNNING, revision: int = 1) -> TaskRecord:
    task = NewTask(
        task_id=task_id,
        workload_type="training",
        name=task_id,
        namespace="vision",
        backend="local",
        workload={},
        effective={},
        manifests=(),
        submitted_at=AT,
    )
    return TaskRecord(task, revision, AT, {}, phase, 0, "", False, phase.is_terminal)


class FakeFeed:
    """A feed whose tasks the test sets; each change wakes the hub's reader."""

    def __init__(self) -> None:
        self.tasks: list[TaskRecord] = []
        self.statuses_read = 0
        self.changed = threading.Event()
        self.lock = threading.Lock()

    def set(self, *tasks: TaskRecord) -> None:
        with self.lock:
            self.tasks = list(tasks)
        self.changed.set()

    def records(self) -> list[TaskRecord]:
        with self.lock:
            return list(self.tasks)

    def status(self, task: TaskRecord) -> TaskStatus:
        self.statuses_read += 1
        return TaskStatus(task, [], [], "local")

    def wait(self, timeout: float) -> bool:
        changed = self.changed.wait(timeout)
        self.changed.clear()
        return changed


@dataclasses.dataclass
class FakeClient:
    feed_of: FakeFeed
    output: list[str]
    fail: bool = False

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass

    @contextlib.contextmanager
    def feed(self) -> Iterator[FakeFeed]:
        if self.fail:
            raise PodwrightError("the API server does not answer")
        yield self.feed_of

    def logs(self, task_id: str, *, follow: bool, stop: object) -> Iterator[str]:
        yield from self.output


@contextlib.contextmanager
def started(feed: FakeFeed, output: tuple[str, ...] = ()) -> Iterator[TaskHub]:
    hub = TaskHub(lambda: FakeClient(feed, list(output)))  # type: ignore[arg-type,return-value]
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()
    assert not [thread for thread in threading.enumerate() if "podwright-console" in thread.name]


async def next_change(queue: asyncio.Queue[object]) -> object:
    return await asyncio.wait_for(queue.get(), 10)


def test_each_listener_is_told_what_appeared_changed_and_went() -> None:
    feed = FakeFeed()
    feed.set(record("a"), record("b"))
    with started(feed) as hub:
        assert list(hub.records) == ["a", "b"]

        async def listen() -> list[object]:
            with hub.listening() as first, hub.listening() as second:
                feed.set(record("a", Phase.SUCCESS, 2), record("c"))
                return [await next_change(first), await next_change(second)]

        told = asyncio.run(listen())
    expected = Change(frozenset({"a", "c"}), frozenset({"b"}))
    assert told == [expected, expected]


def test_a_status_is_read_once_per_revision_for_every_page() -> None:
    feed = FakeFeed()
    feed.set(record("a"))
    with started(feed) as hub:
        first = hub.status(hub.records["a"])
        assert hub.status(hub.records["a"]) is first
        assert feed.statuses_read == 1
        assert hub.status(record("a", revision=2)).record.revision == 2
        assert feed.statuses_read == 2


def test_a_listener_that_falls_behind_is_told_to_read_afresh() -> None:
    feed = FakeFeed()
    with started(feed) as hub:

        async def fall_behind() -> list[object]:
            with hub.listening() as queue:
                for revision in range(1, QUEUE_LIMIT + 10):
                    feed.set(record("a", revision=revision))
                    while hub.records.get("a") is None or hub.records["a"].revision != revision:
                        await asyncio.sleep(0.01)
                await asyncio.sleep(0.05)  # the last calls from the reader's thread
                return [queue.get_nowait() for _ in range(queue.qsize())]

        pending = asyncio.run(fall_behind())
    assert RESYNC in pending
    assert len(pending) < QUEUE_LIMIT


def test_a_feed_that_cannot_be_opened_is_shown_as_an_error_not_raised() -> None:
    feed = FakeFeed()
    hub = TaskHub(lambda: FakeClient(feed, [], fail=True))  # type: ignore[arg-type,return-value]
    hub.start()
    try:
        assert hub.error == "the API server does not answer"
        assert hub.records == {}
    finally:
        hub.stop()


def test_a_task_s_output_is_followed_once_for_all_its_pages_to_its_end() -> None:
    feed = FakeFeed()
    feed.set(record("a", Phase.SUCCESS))
    with started(feed, output=("one", "two")) as hub:
        follower = hub.logs("a")
        assert hub.logs("a") is follower
        follower.join(10)
        assert follower.ended

        async def read() -> tuple[list[str], object]:
            with follower.listening() as (lines, queue):
                return lines, await next_change(queue)

        lines, end = asyncio.run(read())
        hub.left(follower)
        assert hub.logs("a") is not follower  # forgotten once no page shows it
    assert lines == ["one", "two"]
    assert end is None


def test_every_line_of_a_long_output_reaches_a_page_in_order() -> None:
    """Output lines are never dropped for a page that is slow to read them (a page that
    opens late is shown the last LOG_LINES_KEPT first)."""
    feed = FakeFeed()
    feed.set(record("a"))
    lines = tuple(f"line {number}" for number in range(3000))
    hub = TaskHub(lambda: SlowStartClient(feed, list(lines)))  # type: ignore[arg-type,return-value]
    hub.start()
    try:

        async def read_all() -> list[object]:
            follower = hub.logs("a")
            with follower.listening() as (before, queue):
                got: list[object] = list(before)
                while True:
                    item = await next_change(queue)
                    if item is None:
                        return got
                    got.append(item)

        got = asyncio.run(read_all())
    finally:
        hub.stop()
    assert got == list(lines)


class SlowStartClient(FakeClient):
    """A client whose output starts once the page listens (as a cluster's log stream does)."""

    def logs(self, task_id: str, *, follow: bool, stop: object) -> Iterator[str]:
        time.sleep(0.2)
        yield from self.output


class CountingFeed(FakeFeed):
    """A feed that counts its reads and its waits; a wait ends at once unless told of a
    change."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.waits = 0

    def records(self) -> list[TaskRecord]:
        self.reads += 1
        return super().records()

    def wait(self, timeout: float) -> bool:
        self.waits += 1
        return super().wait(0.005)


def until(check: Callable[[], bool]) -> None:
    """Wait for the hub's thread to get somewhere (a guard against a hang, not a timing)."""
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "the hub's thread never got there"
        time.sleep(0.005)


def test_the_hub_reads_the_feed_again_only_when_it_may_have_changed() -> None:
    feed = CountingFeed()
    with started(feed) as hub:
        until(lambda: feed.waits >= 20)  # twenty waits that saw no change
        assert feed.reads == hub.reads == 1
        feed.set(record("a"))
        until(lambda: feed.reads == 2)
        until(lambda: feed.waits >= 40)
        assert feed.reads == hub.reads == 2
