"""Leader election's decisions (core/leader_election.py): what a candidate writes, when it acts,
and, over any interleaving of candidates reading and writing one lease through resourceVersion
preconditions while a shared clock moves, never two leaders at once."""

from __future__ import annotations

import dataclasses
import datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from podwright.core.leader_election import (
    ElectionSettings,
    ElectionSettingsError,
    LeaseRecord,
    Observation,
    Step,
    leads,
    next_record,
    observe,
    released,
)

T0 = datetime.datetime(2026, 11, 25, 6, 0, tzinfo=datetime.UTC)
SETTINGS = ElectionSettings()


def seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=value)


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "message"),
    [
        (15, 10, 0, "retry_period: must be positive"),
        (15, 15, 2, "renew_deadline: must lie between retry_period and lease_duration"),
        (15, 2, 2, "renew_deadline: must lie between retry_period and lease_duration"),
        (15.5, 10, 2, "lease_duration: must be whole seconds"),
    ],
)
def test_settings_that_would_let_two_lead_are_refused(
    lease: float, renew: float, retry: float, message: str
) -> None:
    with pytest.raises(ElectionSettingsError, match=message):
        ElectionSettings(seconds(lease), seconds(renew), seconds(retry))


def test_without_a_lease_a_candidate_creates_one_holding_it() -> None:
    step, record = next_record(None, "a", T0, SETTINGS)
    assert step is Step.CREATE
    assert record == LeaseRecord("a", 15, T0, T0, 0)


def test_the_holder_renews_keeping_when_it_acquired_the_lease() -> None:
    held = Observation(LeaseRecord("a", 15, T0, T0, 3), T0)
    step, record = next_record(held, "a", T0 + seconds(2), SETTINGS)
    assert step is Step.RENEW
    assert record == LeaseRecord("a", 15, T0, T0 + seconds(2), 3)


def test_another_holders_lease_is_taken_over_only_a_whole_duration_after_it_was_seen() -> None:
    """The holder's renew time says nothing (its clock is not ours): what counts is when this
    candidate saw the record, and that it has not changed since."""
    long_ago = T0 - datetime.timedelta(days=1)
    seen = Observation(LeaseRecord("a", 15, long_ago, long_ago, 2), T0)
    assert next_record(seen, "b", T0 + seconds(14.9), SETTINGS) == (Step.WAIT, None)
    step, record = next_record(seen, "b", T0 + seconds(15), SETTINGS)
    assert step is Step.TAKE
    assert record == LeaseRecord("b", 15, T0 + seconds(15), T0 + seconds(15), 3)


def test_a_released_lease_is_taken_over_at_once() -> None:
    record = released(LeaseRecord("a", 15, T0, T0, 2), T0 + seconds(1))
    assert record == LeaseRecord(None, 1, T0 + seconds(1), T0 + seconds(1), 2)
    step, taken = next_record(Observation(record, T0 + seconds(1)), "b", T0 + seconds(1), SETTINGS)
    assert step is Step.TAKE
    assert taken is not None
    assert taken.holder == "b"


def test_an_observation_keeps_the_time_a_record_was_first_seen() -> None:
    record = LeaseRecord("a", 15, T0, T0, 0)
    first = observe(None, record, T0)
    assert observe(first, record, T0 + seconds(5)) is first
    renewed = dataclasses.replace(record, renew_time=T0 + seconds(2))
    assert observe(first, renewed, T0 + seconds(5)) == Observation(renewed, T0 + seconds(5))


def test_a_holder_acts_only_within_the_renew_deadline_of_its_last_renewal() -> None:
    assert not leads(None, T0, SETTINGS)
    assert leads(T0, T0 + seconds(9.99), SETTINGS)
    assert not leads(T0, T0 + seconds(10), SETTINGS)


def test_a_record_round_trips_through_a_lease_spec_in_micro_time() -> None:
    record = LeaseRecord("a", 15, T0, T0 + datetime.timedelta(microseconds=123456), 4)
    spec = record.to_spec()
    assert spec == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "leaseTransitions": 4,
        "acquireTime": "2026-11-25T06:00:00.000000Z",
        "renewTime": "2026-11-25T06:00:00.123456Z",
    }
    assert LeaseRecord.from_spec(spec) == record


def test_a_lease_anyone_wrote_badly_reads_as_held_by_nobody() -> None:
    assert LeaseRecord.from_spec(
        {"holderIdentity": "", "leaseDurationSeconds": "x", "renewTime": "never"}
    ) == LeaseRecord(None, 1, None, None, 0)


# Never two leaders --------------------------------------------------------------------------


@dataclasses.dataclass
class Candidate:
    """A candidate as the adapter runs it: what it observed, its last successful write."""

    identity: str
    observation: Observation | None = None
    last_renewal: datetime.datetime | None = None
    read_version: int | None = None
    """The resourceVersion it read and has yet to act on."""
    alive: bool = True


@dataclasses.dataclass
class Lease:
    """The API server's Lease: a write succeeds only from the resourceVersion it holds."""

    version: int = 0
    record: LeaseRecord | None = None

    def write(self, read_version: int, record: LeaseRecord) -> bool:
        if read_version != self.version:
            return False
        self.version += 1
        self.record = record
        return True


ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["try", "try", "read", "write", "advance", "advance", "crash", "release"]),
        st.integers(min_value=0, max_value=2),
        st.floats(min_value=0.0, max_value=12.0),
    ),
    max_size=120,
)


TAKEOVER = [("try", 0, 0.0), ("try", 1, 0.0), ("advance", 0, 12.0), ("advance", 0, 4.0)]
"""a leads, b sees it, a stops renewing (its thread stalls, say) and b takes over."""


@settings(max_examples=300, deadline=None)
@given(ACTIONS)
@example([*TAKEOVER, ("try", 1, 0.0)])
@example([("try", 0, 0.0), ("try", 1, 0.0), ("advance", 0, 6.0), ("try", 1, 0.0)])
@example([*TAKEOVER, ("try", 1, 0.0), ("try", 0, 0.0), ("advance", 0, 1.0), ("try", 0, 0.0)])
@example([("try", 0, 0.0), ("read", 1, 0.0), ("try", 0, 0.0), ("advance", 0, 12.0)] * 3)
def test_never_two_leaders_at_once(actions: list[tuple[str, int, float]]) -> None:
    """Three candidates read the lease and write it, at once (as the adapter does) or later
    (any interleaving, so a candidate may act on what it read long ago); the clock moves; a candidate may crash (stop writing,
    but its last renewal stays its own) or release the lease. At every moment, at most one
    candidate leads."""
    lease = Lease()
    candidates = [Candidate(name) for name in "abc"]
    now = T0
    for action, index, amount in actions:
        candidate = candidates[index]
        if action == "advance":
            now += seconds(amount)
        elif not candidate.alive:
            pass
        elif action in ("read", "try"):
            if lease.record is not None:
                candidate.observation = observe(candidate.observation, lease.record, now)
                if lease.record.holder != candidate.identity:
                    candidate.last_renewal = None
            else:
                candidate.observation = None
            candidate.read_version = lease.version
        if candidate.alive and action in ("write", "try") and candidate.read_version is not None:
            _step, record = next_record(candidate.observation, candidate.identity, now, SETTINGS)
            if record is not None and lease.write(candidate.read_version, record):
                candidate.observation = Observation(record, now)
                candidate.last_renewal = now
            candidate.read_version = None
        if action == "crash":
            candidate.alive = False
        elif action == "release" and candidate.alive and candidate.last_renewal is not None:
            candidate.last_renewal = None
            if lease.record is not None and lease.record.holder == candidate.identity:
                lease.write(lease.version, released(lease.record, now))
        leaders = [c.identity for c in candidates if leads(c.last_renewal, now, SETTINGS)]
        assert len(leaders) <= 1, (leaders, now)
