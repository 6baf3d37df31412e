"""The work queue: client-go's workqueue semantics (``k8s.io/client-go/util/workqueue``:
``queue.go`` Add/Get/Done/ShutDown, ``delaying_queue.go`` AddAfter and ``insert``,
``rate_limiting_queue.go`` with ``default_rate_limiters.go``'s
``ItemExponentialFailureRateLimiter``), with the clock a fake one the test moves and ``get`` never
waiting (``timeout=0``), except where another thread is what is tested.
"""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.engine.work_queue import RetryBackoff, WorkQueue


class FakeClock:
    """Monotonic seconds the test moves."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def queue_with_clock(**options: Any) -> tuple[WorkQueue[str], FakeClock]:
    clock = FakeClock()
    return WorkQueue[str](clock=clock, **options), clock


# A scenario is a list of steps, applied in order; the keys the gets returned (None for a get that
# found nothing ready) are compared with the expected list.
Step = tuple[Any, ...]


def run_steps(queue: WorkQueue[str], clock: FakeClock, steps: list[Step]) -> list[str | None]:
    got: list[str | None] = []
    for step in steps:
        match step:
            case ("add", str(key)):
                queue.add(key)
            case ("add_after", str(key), float() | int() as delay):
                queue.add_after(key, delay)
            case ("get",):
                got.append(queue.get(timeout=0))
            case ("done", str(key)):
                queue.done(key)
            case ("advance", float() | int() as seconds):
                clock.advance(seconds)
            case _:
                raise AssertionError(f"unknown step {step!r}")
    return got


SCENARIOS: dict[str, tuple[list[Step], list[str | None]]] = {
    "a burst of adds of one key makes it ready once": (
        [("add", "a"), ("add", "a"), ("add", "b"), ("add", "a"), ("get",), ("get",), ("get",)],
        ["a", "b", None],
    ),
    "ready keys come out first in, first out": (
        [("add", "c"), ("add", "a"), ("add", "b"), ("get",), ("get",), ("get",)],
        ["c", "a", "b"],
    ),
    "a key added while in hand is not handed out again before done, and is after it": (
        [
            ("add", "a"),
            ("get",),
            ("add", "a"),
            ("add", "a"),
            ("get",),
            ("done", "a"),
            ("get",),
            ("done", "a"),
            ("get",),
        ],
        ["a", None, "a", None],
    ),
    "a key in hand and not added again is not ready after done": (
        [("add", "a"), ("get",), ("done", "a"), ("get",)],
        ["a", None],
    ),
    "add_after: a later time after an earlier one keeps the earlier": (
        [
            ("add_after", "a", 5),
            ("add_after", "a", 10),
            ("advance", 5),
            ("get",),
            ("done", "a"),
            ("advance", 5),
            ("get",),
        ],
        ["a", None],
    ),
    "add_after: an earlier time after a later one replaces it": (
        [
            ("add_after", "a", 10),
            ("add_after", "a", 5),
            ("advance", 4.5),
            ("get",),
            ("advance", 0.5),
            ("get",),
            ("done", "a"),
            ("advance", 5),
            ("get",),
        ],
        [None, "a", None],
    ),
    "waiting keys become ready in the order of their times": (
        [
            ("add_after", "a", 3),
            ("add_after", "b", 1),
            ("add_after", "c", 2),
            ("advance", 3),
            ("get",),
            ("get",),
            ("get",),
            ("get",),
        ],
        ["b", "c", "a", None],
    ),
    "waiting keys of one time become ready in the order they were added": (
        [("add_after", "b", 1), ("add_after", "a", 1), ("advance", 1), ("get",), ("get",)],
        ["b", "a"],
    ),
    "a waiting key whose time came is ahead of a key added after that time": (
        [("add_after", "a", 1), ("advance", 2), ("add", "b"), ("get",), ("get",)],
        ["a", "b"],
    ),
    "a key is not ready before its time": (
        [("add_after", "a", 2), ("get",), ("advance", 1.5), ("get",), ("advance", 0.5), ("get",)],
        [None, None, "a"],
    ),
    "add of a waiting key makes it ready now and drops its later time": (
        [("add_after", "a", 5), ("add", "a"), ("get",), ("done", "a"), ("advance", 5), ("get",)],
        ["a", None],
    ),
    "add_after of a ready key leaves it ready, once": (
        [("add", "a"), ("add_after", "a", 5), ("get",), ("done", "a"), ("advance", 5), ("get",)],
        ["a", None],
    ),
    "add_after of a key in hand waits, then it is ready at done": (
        [
            ("add", "a"),
            ("get",),
            ("add_after", "a", 5),
            ("advance", 5),
            ("get",),
            ("done", "a"),
            ("get",),
        ],
        ["a", None, "a"],
    ),
    "add_after of a key added while in hand does not delay it": (
        [("add", "a"), ("get",), ("add", "a"), ("add_after", "a", 5), ("done", "a"), ("get",)],
        ["a", "a"],
    ),
    "a waiting key whose time came before a done is ahead of the key that done puts back": (
        [
            ("add", "a"),
            ("get",),
            ("add", "a"),
            ("add_after", "b", 1),
            ("advance", 1),
            ("done", "a"),
            ("get",),
            ("get",),
        ],
        ["a", "b", "a"],
    ),
    "a delay of zero or less is an add": (
        [("add_after", "a", 0), ("add_after", "b", -1), ("get",), ("get",)],
        ["a", "b"],
    ),
}


@pytest.mark.parametrize(
    ("steps", "expected"), list(SCENARIOS.values()), ids=list(SCENARIOS.keys())
)
def test_scenario(steps: list[Step], expected: list[str | None]) -> None:
    queue, clock = queue_with_clock()
    assert run_steps(queue, clock, steps) == expected


def test_counts_ready_waiting_and_in_hand() -> None:
    queue, clock = queue_with_clock()
    run_steps(queue, clock, [("add", "a"), ("add", "b"), ("add_after", "c", 2), ("get",)])
    assert (queue.ready(), queue.waiting(), queue.in_hand()) == (1, 1, 1)
    clock.advance(2)
    assert (queue.ready(), queue.waiting(), queue.in_hand()) == (2, 0, 1)


DEFAULT_DELAYS = [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24]


@pytest.mark.parametrize(
    ("backoff", "expected_delays"),
    [
        pytest.param(RetryBackoff(), [*DEFAULT_DELAYS, 20.48, 40.96, 60.0, 60.0], id="default"),
        pytest.param(
            RetryBackoff(base=0.005, cap=0.03), [0.005, 0.01, 0.02, 0.03, 0.03], id="low cap"
        ),
        pytest.param(RetryBackoff(base=1, cap=1), [1, 1, 1], id="cap equal to base"),
    ],
)
def test_add_rate_limited_waits_exponentially_capped(
    backoff: RetryBackoff, expected_delays: list[float]
) -> None:
    queue, clock = queue_with_clock(backoff=backoff)
    for failures, expected in enumerate(expected_delays):
        assert queue.failures("a") == failures
        start = clock.now
        queue.add_rate_limited("a")
        assert queue.failures("a") == failures + 1
        clock.now = start + expected * 0.999
        assert queue.get(timeout=0) is None
        clock.now = start + expected
        assert queue.get(timeout=0) == "a"
        queue.done("a")


def test_forget_resets_the_backoff() -> None:
    queue, clock = queue_with_clock()
    for _ in range(3):
        queue.add_rate_limited("a")
        clock.advance(1)
        assert queue.get(timeout=0) == "a"
        queue.done("a")
    queue.add_rate_limited("b")
    queue.forget("a")
    queue.forget("never seen")
    assert (queue.failures("a"), queue.failures("b")) == (0, 1)
    start = clock.now
    queue.add_rate_limited("a")
    clock.now = start + 0.004
    assert queue.get(timeout=0) is None
    clock.now = start + 0.005
    assert queue.get(timeout=0) == "b"
    assert queue.get(timeout=0) == "a"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"base": 0},
            r"RetryBackoff.base must be a finite number of seconds of at least 0.000001 "
            r"\(one microsecond\), got 0$",
            id="base zero",
        ),
        pytest.param({"base": -1}, "RetryBackoff.base must be .* got -1$", id="base negative"),
        pytest.param(
            {"base": float("nan")}, "RetryBackoff.base must be .* got nan$", id="base nan"
        ),
        pytest.param({"base": 1e-9}, "RetryBackoff.base must be .* got 1e-09$", id="base 1 ns"),
        pytest.param(
            {"base": 2, "cap": 1},
            r"RetryBackoff.cap must be a finite number of seconds of at least base \(2\), got 1$",
            id="cap below base",
        ),
        pytest.param({"cap": float("inf")}, "RetryBackoff.cap must be .* got inf$", id="cap inf"),
    ],
)
def test_retry_backoff_refuses_bad_values(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryBackoff(**options)


@pytest.mark.parametrize("delay", [float("nan"), float("inf"), float("-inf")])
def test_add_after_refuses_a_delay_that_is_not_a_finite_number(delay: float) -> None:
    queue, _ = queue_with_clock()
    with pytest.raises(
        ValueError,
        match=rf"add_after\('a', {delay!r}\): the delay must be a finite number of seconds$",
    ):
        queue.add_after("a", delay)
    assert (queue.ready(), queue.waiting()) == (0, 0)


def test_latency_is_the_time_from_ready_to_get() -> None:
    latencies: list[float] = []
    queue, clock = queue_with_clock(latency=latencies.append)
    queue.add("added")
    clock.advance(2.5)
    assert queue.get(timeout=0) == "added"
    queue.add_after("delayed", 1)
    clock.advance(4)  # ready 1 s after it was added: 3 s before the get
    assert queue.get(timeout=0) == "delayed"
    queue.add("added")  # while in hand: ready from now, handed out after done
    clock.advance(0.5)
    queue.done("added")
    clock.advance(0.25)
    assert queue.get(timeout=0) == "added"
    assert latencies == [2.5, 3.0, 0.75]


def test_done_of_a_key_not_in_hand_names_it() -> None:
    queue, _ = queue_with_clock()
    queue.add("a")
    with pytest.raises(ValueError, match=r"done\('a'\): the key is not in hand"):
        queue.done("a")
    with pytest.raises(ValueError, match=r"done\('b'\): the key is not in hand"):
        queue.done("b")


def test_shut_down_hands_out_what_is_ready_then_none_and_ignores_adds() -> None:
    queue, clock = queue_with_clock()
    run_steps(queue, clock, [("add", "a"), ("add", "b"), ("get",), ("add", "a")])
    queue.add_after("c", 1)
    queue.shut_down()
    queue.add("d")
    queue.add_after("e", 1)
    queue.add_rate_limited("f")
    clock.advance(1)
    assert (queue.ready(), queue.waiting(), queue.in_hand()) == (1, 0, 1)
    assert queue.get(timeout=0) == "b"
    queue.done("a")  # added while in hand, before the shutdown: ready again
    assert queue.get(timeout=0) == "a"
    assert queue.get() is None
    assert queue.failures("f") == 0


class SignallingClock(FakeClock):
    """A fake clock that sets ``read_elsewhere`` when a thread other than the test's reads it. A
    get reads the clock under the queue's lock just before it waits, so whatever takes the lock
    once the event is set finds that get waiting: no sleep, no race."""

    def __init__(self) -> None:
        super().__init__()
        self.read_elsewhere = threading.Event()
        self._test_thread = threading.current_thread()

    def __call__(self) -> float:
        if threading.current_thread() is not self._test_thread:
            self.read_elsewhere.set()
        return self.now


def add_after_earlier_than_the_waiting_key(queue: WorkQueue[str], clock: FakeClock) -> None:
    queue.add_after("a", 0.01)
    clock.advance(0.01)


@pytest.mark.parametrize(
    ("wake", "expected"),
    [
        pytest.param(lambda queue, _: queue.shut_down(), None, id="shut_down"),
        pytest.param(lambda queue, _: queue.add("a"), "a", id="add"),
        pytest.param(lambda queue, _: queue.add_after("a", -1), "a", id="add_after now"),
        pytest.param(
            add_after_earlier_than_the_waiting_key, "a", id="add_after before the waiting key"
        ),
    ],
)
def test_a_blocked_get_is_woken_from_another_thread(
    wake: Callable[[WorkQueue[str], FakeClock], None], expected: str | None
) -> None:
    """The get waits for a key an hour away: only the other thread's call can wake it in time."""
    clock = SignallingClock()
    queue = WorkQueue[str](clock=clock)
    queue.add_after("in an hour", 3600)
    result: list[str | None] = []
    thread = threading.Thread(target=lambda: result.append(queue.get()), daemon=True)
    thread.start()
    assert clock.read_elsewhere.wait(timeout=30)
    wake(queue, clock)
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert result == [expected]


def test_a_blocked_get_wakes_when_a_waiting_key_is_due() -> None:
    """With the real clock: a get that waits forever must wake at the waiting key's time, as
    nothing else will wake it."""
    queue = WorkQueue[str]()
    queue.add_after("a", 0.01)
    assert queue.get() == "a"


def test_get_with_a_timeout_returns_none_when_nothing_is_ready() -> None:
    queue = WorkQueue[str]()
    queue.add_after("a", 3600)
    assert queue.get(timeout=0.01) is None


def traced_bytes_of(action: Callable[[], None]) -> int:
    """The bytes that ``action`` allocated and that are still allocated after it."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        action()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        if not was_tracing:
            tracemalloc.stop()


def test_a_key_timed_again_and_again_does_not_grow_the_queue() -> None:
    """Each new time of a waiting key (an add, an earlier add_after) leaves its old heap entry
    behind; the heap is rebuilt without them, so the queue's memory follows its keys, not the
    number of adds (10,000 entries left would be over 1 MB)."""
    queue, clock = queue_with_clock()

    def time_again_and_again() -> None:
        for _ in range(10_000):
            queue.add_after("a", 100)
            queue.add_after("a", 99)
            queue.add("a")
            assert queue.get(timeout=0) == "a"
            queue.done("a")

    assert traced_bytes_of(time_again_and_again) < 20_000
    queue.add_after("a", 100)
    queue.add_after("a", 50)
    clock.advance(50)
    assert queue.get(timeout=0) == "a"
    queue.done("a")
    clock.advance(50)
    assert queue.get(timeout=0) is None


@pytest.mark.parametrize("waiting", [True, False], ids=["waiting", "ready"])
def test_memory_per_key_is_well_under_a_kibibyte(waiting: bool) -> None:
    """Each key waiting (or ready) with a failure counted; the keys themselves are the caller's.
    Measured: about 180 bytes a waiting key, 70 a ready one."""
    keys = [("namespace", f"workload-{index}") for index in range(10_000)]
    queue = WorkQueue[tuple[str, str]](clock=FakeClock())

    def add_every_key() -> None:
        for key in keys:
            queue.add_rate_limited(key)
            if not waiting:
                queue.add(key)

    per_key = traced_bytes_of(add_every_key) / len(keys)
    assert (queue.ready(), queue.waiting()) == ((0, 10_000) if waiting else (10_000, 0))
    assert per_key < 1024


# The property test: any sequence of operations against a model of the semantics.


@dataclass
class Model:
    """What the queue should hold: ready keys in order, keys added (ready, in the queue or in
    hand), keys in hand, and waiting keys with their time and order of arrival."""

    queue: list[str] = field(default_factory=list)
    ready: set[str] = field(default_factory=set)
    in_hand: set[str] = field(default_factory=set)
    waiting: dict[str, tuple[float, int]] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    arrivals: int = 0

    def promote(self, now: float) -> None:
        for key, _ in sorted(self.waiting.items(), key=lambda item: item[1]):
            if self.waiting[key][0] <= now:
                del self.waiting[key]
                self.make_ready(key)

    def make_ready(self, key: str) -> None:
        if key not in self.ready:
            self.ready.add(key)
            if key not in self.in_hand:
                self.queue.append(key)

    def add(self, key: str) -> None:
        self.waiting.pop(key, None)
        self.make_ready(key)

    def add_after(self, key: str, delay: float, now: float) -> None:
        if delay <= 0:
            self.add(key)
        elif key not in self.ready:
            at = now + delay
            if key not in self.waiting or at < self.waiting[key][0]:
                self.arrivals += 1
                self.waiting[key] = (at, self.arrivals)


KEYS = ["a", "b", "c", "d"]
DELAYS = st.sampled_from([-1.0, 0.0, 0.5, 1.0, 1.5, 3.0])
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(KEYS)),
        st.tuples(st.just("add_after"), st.sampled_from(KEYS), DELAYS),
        st.tuples(st.just("add_rate_limited"), st.sampled_from(KEYS)),
        st.tuples(st.just("forget"), st.sampled_from(KEYS)),
        st.tuples(st.just("get")),
        st.tuples(st.just("done"), st.integers(min_value=0, max_value=3)),
        st.tuples(st.just("advance"), st.sampled_from([0.25, 0.5, 1.0, 2.0])),
    ),
    max_size=60,
)


@given(OPERATIONS)
def test_any_sequence_of_operations_matches_the_model(operations: list[tuple[object, ...]]) -> None:
    backoff = RetryBackoff(base=0.25, cap=2.0)
    queue, clock = queue_with_clock(backoff=backoff)
    model = Model()
    for operation in operations:
        model.promote(clock.now)
        match operation:
            case ("add", str(key)):
                queue.add(key)
                model.add(key)
            case ("add_after", str(key), float(delay)):
                queue.add_after(key, delay)
                model.add_after(key, delay, clock.now)
            case ("add_rate_limited", str(key)):
                queue.add_rate_limited(key)
                failures = model.failures.get(key, 0)
                model.failures[key] = failures + 1
                model.add_after(key, backoff.delay(failures), clock.now)
            case ("forget", str(key)):
                queue.forget(key)
                model.failures.pop(key, None)
            case ("get",):
                got = queue.get(timeout=0)
                expected = model.queue.pop(0) if model.queue else None
                assert got == expected
                if got is not None:
                    assert got not in model.in_hand  # never two gets of a key before its done
                    model.in_hand.add(got)
                    model.ready.remove(got)
            case ("done", int(index)):
                if model.in_hand:
                    key = sorted(model.in_hand)[index % len(model.in_hand)]
                    queue.done(key)
                    model.in_hand.remove(key)
                    if key in model.ready:
                        model.queue.append(key)
            case ("advance", float(seconds)):
                clock.advance(seconds)
            case _:
                raise AssertionError(f"unknown operation {operation!r}")
        model.promote(clock.now)
        assert (queue.ready(), queue.waiting(), queue.in_hand()) == (
            len(model.queue),
            len(model.waiting),
            len(model.in_hand),
        )
        assert all(queue.failures(key) == model.failures.get(key, 0) for key in KEYS)

    # Drained: every key added and not handled since comes out once, after every delay passed.
    pending = model.ready | set(model.waiting)
    for key in sorted(model.in_hand):
        queue.done(key)
    clock.advance(max((at for at, _ in model.waiting.values()), default=clock.now) - clock.now)
    drained: list[str] = []
    while (next_key := queue.get(timeout=0)) is not None:
        drained.append(next_key)
        queue.done(next_key)
    assert sorted(drained) == sorted(pending)
    assert (queue.ready(), queue.waiting(), queue.in_hand()) == (0, 0, 0)
