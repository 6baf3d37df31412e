"""One reader of the tasks for every open page: the console's load on the API server does not
grow with its readers.

A :class:`TaskHub` keeps every task of its client in memory from one
:meth:`~podwright.api.Client.feed` (one watch of the operator's Workloads, or one reader of
this machine's store), read in a thread of its own, and tells each page that listens what
changed, through an :class:`asyncio.Queue` per listener. A page's table is then filtered, sorted
and paged from memory, however many browsers show it. A task's history and events are read once
per change for all the pages that show that task, and its output is followed by one
:class:`LogFollower` for all of them (as ``kubectl logs -f`` would be once per reader).

The thread reading the feed is the only one that touches it, but for the reads of a status the
pages ask for (under the same lock).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator

from podwright.api import Client, PodwrightError, TaskFeed, TaskRecord, TaskStatus

LOG = logging.getLogger("podwright.console")

WAKE_SECONDS = 0.25
"""The longest the reader waits for a change before it looks whether it should stop."""
ERROR_WAIT_SECONDS = 1.0
"""How long the reader waits before it opens a feed that failed again."""
QUEUE_LIMIT = 64
"""How many changes a slow listener may have pending; past that it is told to read afresh."""
LOG_LINES_KEPT = 5000
"""How many of a task's last output lines a page that opens late is shown first."""


@dataclasses.dataclass(frozen=True)
class Change:
    """What changed in one read of the feed: the tasks that appeared, changed or went."""

    changed: frozenset[str]
    removed: frozenset[str]


RESYNC = Change(frozenset(), frozenset())
"""Sent to a listener that fell behind: read everything afresh."""


class _Listeners:
    """The queues of the pages that listen, fed from another thread; ``limit``: how many items
    a queue may hold before it is emptied and told to read afresh (None: no limit, for what
    must all arrive in order, such as output lines)."""

    def __init__(self, limit: int | None = QUEUE_LIMIT) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._queues: dict[asyncio.Queue[object], asyncio.AbstractEventLoop] = {}

    def add(self, queue: asyncio.Queue[object]) -> None:
        with self._lock:
            self._queues[queue] = asyncio.get_running_loop()

    def remove(self, queue: asyncio.Queue[object]) -> int:
        with self._lock:
            self._queues.pop(queue, None)
            return len(self._queues)

    def __len__(self) -> int:
        with self._lock:
            return len(self._queues)

    def send(self, item: object, overflow: object = None) -> None:
        """``item`` to every queue; a queue at its limit is emptied and given ``overflow``."""
        with self._lock:
            queues = list(self._queues.items())
        for queue, loop in queues:
            with contextlib.suppress(RuntimeError):  # its loop closed: the page went
                loop.call_soon_threadsafe(_offer, queue, item, overflow, self._limit)


def _offer(queue: asyncio.Queue[object], item: object, overflow: object, limit: int | None) -> None:
    if limit is not None and queue.qsize() >= limit - 1:
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(overflow)
        return
    queue.put_nowait(item)


class LogFollower:
    """A task's output followed once for every page that shows it: the lines so far (the last
    :data:`LOG_LINES_KEPT`) and each new one. It stops when its last listener leaves, or when
    the task is finalized and its output read to the end."""

    def __init__(self, client_factory: Callable[[], Client], task_id: str) -> None:
        self.task_id = task_id
        self._client_factory = client_factory
        self._lock = threading.Lock()
        self._lines: collections.deque[str] = collections.deque(maxlen=LOG_LINES_KEPT)
        self._listeners = _Listeners(limit=None)  # every line, in order
        self._stopping = threading.Event()
        self.ended = False
        self.error: str | None = None
        self._thread = threading.Thread(
            target=self._follow, name=f"podwright-console-logs-{task_id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    @contextlib.contextmanager
    def listening(self) -> Iterator[tuple[list[str], asyncio.Queue[object]]]:
        """The lines so far, and a queue of those that follow (then None at the end)."""
        queue: asyncio.Queue[object] = asyncio.Queue()
        with self._lock:
            self._listeners.add(queue)
            lines = list(self._lines)
            if self.ended:
                queue.put_nowait(None)
        try:
            yield lines, queue
        finally:
            self._listeners.remove(queue)

    @property
    def listeners(self) -> int:
        return len(self._listeners)

    def stop(self) -> None:
        self._stopping.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _follow(self) -> None:
        try:
            with self._client_factory() as client:
                for line in client.logs(self.task_id, follow=True, stop=self._stopping.is_set):
                    with self._lock:
                        self._lines.append(line)
                        self._listeners.send(line)
        except PodwrightError as error:
            self.error = str(error)
            with self._lock:
                self._listeners.send(f"(the output cannot be read: {error})")
        finally:
            with self._lock:
                self.ended = True
                self._listeners.send(None)


class TaskHub:
    """Every task of a client in memory, from one feed read in a thread of its own (see the
    module's docstring). Start it, then read :attr:`records`; listen for changes with
    :meth:`listening`."""

    def __init__(self, client_factory: Callable[[], Client]) -> None:
        self._client_factory = client_factory
        self.records: dict[str, TaskRecord] = {}
        """Every task by id, the oldest submission first; replaced whole at each change."""
        self.reads = 0
        """How many times the feed was read (each a list of every task): once at first, then
        once each time it may have changed."""
        self.version = 0
        """Grows by one with every change published (and every failure to read): what a page
        rendered from :attr:`records` at one version shows is the same until the next."""
        self.error: str | None = None
        """Why the feed cannot be read, while it cannot."""
        self._ready = threading.Event()
        self._published = threading.Condition()
        self._stopping = threading.Event()
        self._feed_lock = threading.Lock()
        self._feed: TaskFeed | None = None
        self._listeners = _Listeners()
        self._statuses: dict[str, tuple[int, TaskStatus]] = {}
        self._followers: dict[str, LogFollower] = {}
        self._followers_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="podwright-console-hub", daemon=True)

    def start(self, timeout: float = 30.0) -> None:
        """Start reading; return once the tasks were read once (or could not be)."""
        self._thread.start()
        self._ready.wait(timeout)

    def stop(self) -> None:
        self._stopping.set()
        with self._followers_lock:
            followers = list(self._followers.values())
        for follower in followers:
            follower.stop()
        self._thread.join(WAKE_SECONDS * 5)
        for follower in followers:
            follower.join(WAKE_SECONDS * 5)

    @contextlib.contextmanager
    def listening(self) -> Iterator[asyncio.Queue[object]]:
        """A queue of the :class:`Change` s from now on (:data:`RESYNC` when it fell behind)."""
        queue: asyncio.Queue[object] = asyncio.Queue()
        self._listeners.add(queue)
        try:
            yield queue
        finally:
            self._listeners.remove(queue)

    def wait_for(self, task_id: str, timeout: float) -> TaskRecord | None:
        """``task_id``'s task once the feed has shown it (one just submitted), or None after
        ``timeout`` seconds. Call it from a thread of its own, not from the event loop."""
        with self._published:
            self._published.wait_for(lambda: task_id in self.records, timeout)
            return self.records.get(task_id)

    def status(self, record: TaskRecord) -> TaskStatus:
        """``record``'s task with its history and events, read once per revision for every page
        that shows it."""
        cached = self._statuses.get(record.task_id)
        if cached is not None and cached[0] == record.revision:
            return cached[1]
        with self._feed_lock:
            feed = self._feed
            if feed is None:
                raise PodwrightError(self.error or "the console's feed of tasks is not open")
            status = feed.status(record)
        self._statuses[record.task_id] = (record.revision, status)
        return status

    def logs(self, task_id: str) -> LogFollower:
        """The follower of ``task_id``'s output, started for the first page that shows it."""
        with self._followers_lock:
            follower = self._followers.get(task_id)
            if follower is None or (follower.ended and follower.error is not None):
                follower = LogFollower(self._client_factory, task_id)
                self._followers[task_id] = follower
                follower.start()
            return follower

    def left(self, follower: LogFollower) -> None:
        """A page stopped showing ``follower``'s output: stop it when none shows it, and
        forget it (a finished task's output is read again by the next page, from the end)."""
        with self._followers_lock:
            if follower.listeners == 0:
                follower.stop()
                if self._followers.get(follower.task_id) is follower:
                    del self._followers[follower.task_id]

    # The reading thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                with self._client_factory() as client, client.feed() as feed:
                    self._read_feed(feed)
            except Exception as error:  # shown on every page, and read again
                self.error = str(error) if isinstance(error, PodwrightError) else repr(error)
                if not isinstance(error, PodwrightError):
                    LOG.exception("the console's reader of the tasks failed; reading again")
                else:
                    LOG.warning("the tasks cannot be read: %s", error)
                self.version += 1
                self._ready.set()
                self._listeners.send(RESYNC, RESYNC)
                self._stopping.wait(ERROR_WAIT_SECONDS)

    def _read_feed(self, feed: TaskFeed) -> None:
        with self._feed_lock:
            self._feed = feed
        try:
            changed = True  # the first read
            while not self._stopping.is_set():
                if changed:
                    with self._feed_lock:
                        records = feed.records()
                    self.reads += 1
                    recovered = self.error is not None
                    self.error = None
                    self._publish({record.task_id: record for record in records}, recovered)
                    self._ready.set()
                # Read again only when the feed may have changed: every task read is a task
                # converted (5,000 Workloads: some 40 ms), and nothing else changes them.
                changed = feed.wait(WAKE_SECONDS)
        finally:
            with self._feed_lock:
                self._feed = None

    def _publish(self, records: dict[str, TaskRecord], recovered: bool) -> None:
        before = self.records
        changed = frozenset(
            task_id
            for task_id, record in records.items()
            if (old := before.get(task_id)) is None
            or (old.revision, old.phase, old.reason, old.finalized, old.abort_requested)
            != (
                record.revision,
                record.phase,
                record.reason,
                record.finalized,
                record.abort_requested,
            )
        )
        removed = frozenset(before.keys() - records.keys())
        with self._published:
            self.records = records
            if changed or removed or recovered:
                self.version += 1
            self._published.notify_all()
        for task_id in removed:
            self._statuses.pop(task_id, None)
        if changed or removed or recovered:
            self._listeners.send(RESYNC if recovered else Change(changed, removed), RESYNC)
