"""Leader election over a real Lease (adapters/kubernetes/leader_election.py), against the emulator
and, marked ``cluster``, a real API server: the first candidate creates the lease and leads; a
second waits while the holder renews; it takes over only once the holder has been silent for a
lease duration on its own clock, and the old holder stops leading the moment it reads that; a
holder that stops releases the lease, so a successor leads at once. The candidates' clocks are
manual and their rounds are called one by one, so nothing depends on timing."""

from __future__ import annotations

import datetime

from podwright.adapters.kubernetes.leader_election import LEASE_API_VERSION, LeaderElector
from podwright.core.leader_election import ElectionSettings, Step
from tests.kube.support import ApiServer
from tests.webhook_server import ManualClock

LEASE = "podwright-operator"


def candidate(api: ApiServer, identity: str, clock: ManualClock) -> LeaderElector:
    return LeaderElector(api.client, api.namespace, LEASE, identity, clock=clock)


def holder(api: ApiServer) -> str | None:
    spec = api.client.get(api.ref("Lease", LEASE, LEASE_API_VERSION))["spec"]
    return spec.get("holderIdentity")


def test_one_candidate_leads_and_another_takes_over_only_once_it_is_silent(
    api: ApiServer,
) -> None:
    clock = ManualClock()
    first, second = candidate(api, "replica-a", clock), candidate(api, "replica-b", clock)
    assert first.try_once() is Step.CREATE
    assert first.leads()
    assert second.try_once() is Step.WAIT
    assert not second.leads()
    for _round in range(10):  # the holder renews every retry period: nobody takes over
        clock.advance(datetime.timedelta(seconds=2))
        assert first.try_once() is Step.RENEW
        assert second.try_once() is Step.WAIT
    assert first.leads()
    # The holder falls silent (its thread stalls): it stops leading at its renew deadline...
    clock.advance(datetime.timedelta(seconds=10))
    assert not first.leads()
    assert second.try_once() is Step.WAIT  # ...15 s after the second saw its last renewal
    clock.advance(datetime.timedelta(seconds=5))
    assert second.try_once() is Step.TAKE
    assert second.leads()
    assert holder(api) == "replica-b"
    lease = api.client.get(api.ref("Lease", LEASE, LEASE_API_VERSION))["spec"]
    assert lease["leaseTransitions"] == 1
    # The old holder wakes: it reads another holder and does not lead, nor write.
    assert first.try_once() is Step.WAIT
    assert not first.leads()
    assert holder(api) == "replica-b"


def test_a_stopping_holder_releases_the_lease_and_a_successor_leads_at_once(
    api: ApiServer,
) -> None:
    clock = ManualClock()
    first, second = candidate(api, "replica-a", clock), candidate(api, "replica-b", clock)
    assert first.try_once() is Step.CREATE
    assert second.try_once() is Step.WAIT
    first.stop()
    assert not first.leads()
    assert holder(api) is None
    assert second.try_once() is Step.TAKE
    assert second.leads()


def test_the_election_thread_takes_the_lease_and_gives_it_up_on_stop(api: ApiServer) -> None:
    """Started, a candidate campaigns on its own thread (real clock, short retry period)."""
    settings = ElectionSettings(
        lease_duration=datetime.timedelta(seconds=15),
        renew_deadline=datetime.timedelta(seconds=10),
        retry_period=datetime.timedelta(seconds=0.1),
    )
    elector = LeaderElector(
        api.client,
        api.namespace,
        LEASE,
        "replica-a",
        clock=lambda: datetime.datetime.now(datetime.UTC),
        settings=settings,
    ).start()
    try:
        assert elector.wait_for_leadership(timeout=30)
        assert holder(api) == "replica-a"
    finally:
        elector.stop()
    assert not elector.leads()
    assert holder(api) is None
