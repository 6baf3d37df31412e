"""The event index (ordering, first occurrence only, TTL and cap, versions) and the engine
configuration."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.engine.config import ConfigError, LifecycleConfig, config_from_data, parse_duration
from podwright.engine.event_index import EventIndex, EventKey, ObjectEvent

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
KEY = EventKey("ns", "Pod", "p")


def _event(uid: str, created_s: int, recorded_s: int | None = None) -> ObjectEvent:
    created = NOW - timedelta(seconds=1000 - created_s)
    recorded = created if recorded_s is None else NOW - timedelta(seconds=1000 - recorded_s)
    return ObjectEvent(uid, created, recorded, "Reason", f"note {uid}")


def test_listing_is_ordered_and_after_is_strict() -> None:
    index = EventIndex(ttl=timedelta(hours=1), max_per_object=10)
    for event in (_event("c", 3), _event("a", 1), _event("b2", 2, 5), _event("b1", 2, 4)):
        index.add(KEY, event, NOW)
    assert [e.uid for e in index.list(KEY)] == ["a", "b1", "b2", "c"]
    b1 = _event("b1", 2, 4)
    after = index.list(KEY, b1.created, b1.recorded)
    assert [e.uid for e in after] == ["b2", "c"]


def test_first_occurrence_only_and_deletion() -> None:
    index = EventIndex(ttl=timedelta(hours=1), max_per_object=10)
    assert index.add(KEY, _event("a", 1), NOW)
    assert not index.add(KEY, _event("a", 9), NOW)  # a count update of the same Event
    assert len(index) == 1
    index.remove(KEY, "a")
    assert index.list(KEY) == []


def test_ttl_and_cap_bound_memory() -> None:
    index = EventIndex(ttl=timedelta(seconds=100), max_per_object=3)
    assert not index.add(KEY, _event("old", 800), NOW)  # 200 s old at NOW
    for i in range(5):
        index.add(KEY, _event(f"e{i}", 950 + i), NOW)
    assert [e.uid for e in index.list(KEY)] == ["e2", "e3", "e4"]
    assert index.expire(NOW + timedelta(seconds=100)) == 3
    assert len(index) == 0


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=30), st.integers(1, 8))
def test_listing_after_the_last_seen_never_repeats_or_skips(
    times: list[tuple[int, int]], cap: int
) -> None:
    index = EventIndex(ttl=timedelta(hours=1), max_per_object=cap)
    seen: list[str] = []
    last: tuple[datetime | None, datetime | None] = (None, None)
    for number, (created, recorded) in enumerate(times):
        index.add(KEY, _event(f"u{number:03}", 900 + created, 900 + recorded), NOW)
    for event in index.list(KEY, *last):
        seen.append(event.uid)
    assert len(seen) == len(set(seen)) == min(cap, len(times))
    orders = [e.order for e in index.list(KEY)]
    assert orders == sorted(orders)


def test_config_defaults_are_documented_values() -> None:
    config = LifecycleConfig()
    assert not config.inject_finalizer
    assert not config.delete_resource_on_finalize
    assert config.pod.create_container_error_grace == timedelta(minutes=3)
    assert config.pod.create_container_config_error_grace == timedelta(0)
    assert config.pod.image_pull_backoff_grace == timedelta(minutes=3)
    assert config.pod.pod_pending_timeout is None
    assert config.default_annotations == {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    # A launch gives up after 6 attempts, waiting 1 + 2 + 4 + 8 + 16 s (each jittered down to
    # half) in between: about half a minute.
    assert config.launch_attempts == 6
    assert (config.launch_backoff_base, config.launch_backoff_max) == (
        timedelta(seconds=1),
        timedelta(seconds=16),
    )
    assert config.abort_margin == timedelta(seconds=30)


def test_config_from_data() -> None:
    config = config_from_data(
        {
            "injectFinalizer": True,
            "gracePeriods": {"imagePullBackOff": "1m30s"},
            "podPendingTimeout": "1h",
            "events": {"ttl": "10m", "maxPerObject": 5},
            "launchAttempts": 4,
            "launchBackoff": {"base": "500ms", "max": "5s"},
            "abortMargin": "1m",
        }
    )
    assert config.launch_attempts == 4
    assert (config.launch_backoff_base, config.launch_backoff_max) == (
        timedelta(seconds=0.5),
        timedelta(seconds=5),
    )
    assert config.abort_margin == timedelta(minutes=1)
    assert config.inject_finalizer
    assert config.pod.image_pull_backoff_grace == timedelta(seconds=90)
    assert config.pod.create_container_error_grace == timedelta(minutes=3)
    assert config.pod.pod_pending_timeout == timedelta(hours=1)
    assert (config.event_ttl, config.events_per_object) == (timedelta(minutes=10), 5)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"injectFinalizers": True}, "injectFinalizers: unknown field; allowed:"),
        ({"injectFinalizer": "yes"}, "injectFinalizer: expected true or false"),
        ({"gracePeriods": {"imagePull": "1m"}}, "gracePeriods.imagePull: unknown field"),
        (
            {"gracePeriods": {"imagePullBackOff": "soon"}},
            "gracePeriods.imagePullBackOff: expected a duration",
        ),
        ({"events": {"maxPerObject": 0}}, "events.maxPerObject: expected an integer of at least 1"),
        ({"defaultLabels": {"a": 1}}, "defaultLabels: expected a mapping of strings to strings"),
        ({"launchBackoff": {"cap": "1m"}}, "launchBackoff.cap: unknown field; allowed: base, max"),
        (
            {"launchBackoff": {"base": "10s", "max": "1s"}},
            "launchBackoff.max: must be at least launchBackoff.base (10s), got 1s",
        ),
        ({"abortMargin": "a while"}, "abortMargin: expected a duration"),
    ],
)
def test_config_errors_name_the_field(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_data(data)


@pytest.mark.parametrize(
    ("text", "seconds"), [("3m", 180), ("0s", 0), ("1h30m", 5400), ("250ms", 0.25), (45, 45)]
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text, "x") == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["99999999999999h", 10.0**20])
def test_a_duration_longer_than_a_duration_can_be_is_an_error_naming_the_field(
    text: object,
) -> None:
    with pytest.raises(ConfigError, match=r"^--timeout: .* is longer than a duration can be"):
        parse_duration(text, "--timeout")


OTHER = EventKey("ns", "Pod", "q")
_PAST_A = NOW + timedelta(hours=1) - timedelta(seconds=998.5)
"""When event ``a`` (created at 1 s) is past the index's TTL of an hour, and ``b`` (at 2 s) not."""


_VERSION_CHANGES: dict[str, tuple[Callable[[EventIndex], object], bool]] = {
    "an event added": (lambda index: index.add(KEY, _event("c", 3), NOW), True),
    "a count update": (lambda index: index.add(KEY, _event("a", 9), NOW), False),
    "an expired event": (lambda index: index.add(KEY, _event("old", -5000), NOW), False),
    "another object's event": (lambda index: index.add(OTHER, _event("c", 3), NOW), False),
    "an event removed": (lambda index: index.remove(KEY, "a"), True),
    "an unknown event removed": (lambda index: index.remove(KEY, "unknown"), False),
    "a listing": (lambda index: index.list(KEY), False),
    "an event expired": (lambda index: index.expire(_PAST_A), True),
    "nothing expired": (lambda index: index.expire(NOW), False),
    "the object forgotten": (lambda index: index.forget(KEY), True),
}


@pytest.mark.parametrize(
    ("change", "changes_version"), _VERSION_CHANGES.values(), ids=list(_VERSION_CHANGES)
)
def test_the_version_of_an_objects_events_changes_with_them(
    change: Callable[[EventIndex], object], changes_version: bool
) -> None:
    index = EventIndex(ttl=timedelta(hours=1), max_per_object=10)
    assert index.version(KEY) == 0  # no events
    index.add(KEY, _event("a", 1), NOW)
    index.add(KEY, _event("b", 2), NOW)
    before = index.version(KEY)
    assert before != 0
    change(index)
    assert (index.version(KEY) != before) is changes_version


_OPERATIONS = st.one_of(
    st.tuples(st.just("add"), st.sampled_from([KEY, OTHER]), st.integers(0, 6), st.integers(0, 30)),
    st.tuples(st.just("remove"), st.sampled_from([KEY, OTHER]), st.integers(0, 6)),
    st.tuples(st.just("forget"), st.sampled_from([KEY, OTHER])),
    st.tuples(st.just("expire"), st.integers(0, 40)),
)


@given(st.lists(_OPERATIONS, max_size=40), st.integers(1, 4))
def test_an_equal_version_means_the_same_events(
    operations: list[tuple[Any, ...]], cap: int
) -> None:
    """What the executor relies on to skip a task: whenever an object's version is one seen
    before, its events are the ones it had then (0: none), whatever happened in between."""
    index = EventIndex(ttl=timedelta(seconds=100), max_per_object=cap)
    seen: dict[EventKey, dict[int, list[str]]] = {KEY: {0: []}, OTHER: {0: []}}
    for operation in operations:
        if operation[0] == "add":
            _name, key, uid, created = operation  # created 100 s to 70 s before NOW
            index.add(key, _event(f"u{uid}", 900 + created), NOW)
        elif operation[0] == "remove":
            index.remove(operation[1], f"u{operation[2]}")
        elif operation[0] == "forget":
            index.forget(operation[1])
        else:  # up to 40 s later: the oldest events are past the TTL
            index.expire(NOW + timedelta(seconds=operation[1]))
        for key, versions in seen.items():
            events = [event.uid for event in index.list(key)]
            assert versions.setdefault(index.version(key), events) == events
