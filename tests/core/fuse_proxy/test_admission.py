"""Admission per uid: what one caller may hold of the daemon, and the refusals beyond it."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.fuse_proxy.admission import Admission, Busy, DaemonLimits

LIMITS = DaemonLimits(
    workers=4, max_connections=5, max_connections_per_uid=3, max_requests_per_uid=2
)


def busy_message(limit: str, uid: int = 1000, held: int = 3) -> str:
    return {
        "max_connections_per_uid": f"the FUSE proxy is busy: user {uid} already has {held} "
        "connections open, the most one user may have; retry later",
        "max_connections": f"the FUSE proxy is busy: {held} connections are open, the most it "
        "holds; retry later",
        "max_requests_per_uid": f"the FUSE proxy is busy: user {uid} already has {held} requests "
        "in progress, the most one user may have; retry later",
    }[limit]


@pytest.mark.parametrize(
    ("held", "uid", "expected"),
    [
        pytest.param({}, 1000, None, id="nothing held"),
        pytest.param({1000: 2}, 1000, None, id="below the per-uid limit"),
        pytest.param(
            {1000: 3},
            1000,
            Busy("max_connections_per_uid", busy_message("max_connections_per_uid")),
            id="at the per-uid limit",
        ),
        pytest.param({1000: 3}, 1001, None, id="another uid at its limit does not matter"),
        pytest.param(
            {1000: 3, 1001: 2},
            1002,
            Busy("max_connections", busy_message("max_connections", held=5)),
            id="at the global limit",
        ),
        pytest.param(
            {1000: 3, 1001: 2},
            1000,
            Busy("max_connections_per_uid", busy_message("max_connections_per_uid")),
            id="both: the uid's own limit is named",
        ),
    ],
)
def test_a_connection_is_admitted_below_the_limits(
    held: dict[int, int], uid: int, expected: Busy | None
) -> None:
    admission = Admission(LIMITS)
    for holder, count in held.items():
        for _ in range(count):
            assert admission.open_connection(holder) is None
    assert admission.open_connection(uid) == expected
    assert admission.connections(uid) == held.get(uid, 0) + (expected is None)


def test_a_refusal_is_eagain_and_says_to_retry_later() -> None:
    admission = Admission(DaemonLimits(max_connections_per_uid=1, max_requests_per_uid=1))
    assert admission.open_connection(7) is None
    refusal = admission.open_connection(7)
    assert refusal is not None
    assert (refusal.errno, refusal.message.endswith("; retry later")) == (errno.EAGAIN, True)


def test_requests_are_limited_per_uid_and_released() -> None:
    admission = Admission(LIMITS)
    assert admission.start_request(1000) is None
    assert admission.start_request(1000) is None
    assert admission.start_request(1000) == Busy(
        "max_requests_per_uid", busy_message("max_requests_per_uid", held=2)
    )
    assert admission.start_request(1001) is None
    admission.finish_request(1000)
    assert admission.start_request(1000) is None


def test_exempt_callers_are_asked_only_when_a_limit_would_refuse_and_are_counted() -> None:
    asked: list[int] = []

    def exempt() -> bool:
        asked.append(1)
        return True

    admission = Admission(
        DaemonLimits(max_connections=2, max_connections_per_uid=1, max_requests_per_uid=1)
    )
    assert admission.open_connection(0, exempt) is None
    assert asked == []
    assert admission.open_connection(0, exempt) is None
    assert asked == [1]
    assert (admission.connections(0), admission.total_connections) == (2, 2)
    assert admission.open_connection(5) == Busy(
        "max_connections", busy_message("max_connections", held=2)
    )
    assert admission.start_request(0, exempt) is None
    assert admission.start_request(0, exempt) is None
    assert admission.requests(0) == 2


def test_releasing_what_was_never_counted_is_an_error() -> None:
    admission = Admission(LIMITS)
    with pytest.raises(ValueError, match="no connection of uid 3 is counted"):
        admission.close_connection(3)
    with pytest.raises(ValueError, match="no request of uid 3 is counted"):
        admission.finish_request(3)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"workers": 0}, "workers must be at least 1, got 0"),
        ({"max_connections": True}, "max_connections must be an integer, got True"),
        ({"max_connections_per_uid": 0}, "max_connections_per_uid must be at least 1, got 0"),
        (
            {"max_connections": 10, "max_connections_per_uid": 11},
            r"max_connections_per_uid \(11\) must not exceed max_connections \(10\)",
        ),
        (
            {"max_connections_per_uid": 3, "max_requests_per_uid": 4},
            r"max_requests_per_uid \(4\) must not exceed max_connections_per_uid \(3\): "
            "every request holds a connection",
        ),
        (
            {"workers": 2, "max_requests_per_uid": 3},
            r"max_requests_per_uid \(3\) must not exceed workers \(2\)",
        ),
    ],
)
def test_limits_are_checked(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DaemonLimits(**values)


def test_the_defaults_keep_one_uid_well_below_the_daemons_capacity() -> None:
    limits = DaemonLimits()
    assert limits.max_connections_per_uid * 4 <= limits.max_connections
    assert limits.max_requests_per_uid < limits.workers


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["open", "close", "start", "finish"]),
        st.integers(min_value=0, max_value=3),
        st.booleans(),
    ),
    max_size=200,
)


@given(OPERATIONS)
def test_no_uid_exceeds_its_limits_and_only_full_ones_are_refused(
    operations: list[tuple[str, int, bool]],
) -> None:
    # An independent model: plain counts per uid, and what each operation should do.
    admission = Admission(LIMITS)
    connections = dict.fromkeys(range(4), 0)
    requests = dict.fromkeys(range(4), 0)
    for operation, uid, exempt in operations:
        if operation == "open":
            full = (
                connections[uid] >= LIMITS.max_connections_per_uid
                or sum(connections.values()) >= LIMITS.max_connections
            )
            refusal = admission.open_connection(uid, lambda exempt=exempt: exempt)
            assert (refusal is not None) == (full and not exempt)
            connections[uid] += refusal is None
        elif operation == "start" and requests[uid] < connections[uid]:
            full = requests[uid] >= LIMITS.max_requests_per_uid
            refusal = admission.start_request(uid, lambda exempt=exempt: exempt)
            assert (refusal is not None) == (full and not exempt)
            requests[uid] += refusal is None
        elif operation == "finish" and requests[uid]:
            admission.finish_request(uid)
            requests[uid] -= 1
        elif operation == "close" and connections[uid] > requests[uid]:
            admission.close_connection(uid)
            connections[uid] -= 1
        assert all(admission.connections(u) == connections[u] for u in connections)
        assert all(admission.requests(u) == requests[u] for u in requests)
        assert admission.total_connections == sum(connections.values())
