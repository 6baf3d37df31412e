"""Leader election over a ``coordination.k8s.io`` Lease: the decisions, as pure functions.

Two or more operator replicas run; one acts. They agree through one Lease, the way client-go's
``leaderelection`` package does (``k8s.io/client-go/tools/leaderelection/leaderelection.go``),
so that a Kubernetes engineer reads nothing new:

* A candidate holds the lease by writing its identity and a renew time into it, each write
  conditional on the resourceVersion it read (the API server refuses a stale one with 409), so
  of two candidates writing at once exactly one wins.
* The holder renews every retry period. It acts as leader only while its last successful
  renewal is younger than the *renew deadline*, which is shorter than the lease duration: a
  holder that cannot renew stops acting before anyone else may take over
  (:func:`leads`).
* Another candidate takes the lease over only once it has seen the same record, unchanged, for
  a whole lease duration measured on *its own* clock from when it first saw it (client-go's
  ``observedTime``): no candidate trusts another's clock (:func:`observe`, :func:`next_record`).
* A holder that stops cleanly releases the lease (no holder, a one-second duration), so a
  successor takes over at once (client-go's ``ReleaseOnCancel``).

No I/O and no clock here: ``now`` is passed in; the Kubernetes adapter
(``podwright.adapters.kubernetes.leader_election``) reads and writes the Lease.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from collections.abc import Mapping

MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
"""``metav1.MicroTime`` as the API server writes it."""


class ElectionSettingsError(ValueError):
    """Settings no election can run with (names the setting and what is allowed)."""


@dataclasses.dataclass(frozen=True)
class ElectionSettings:
    """client-go's defaults for controllers (kube-controller-manager's: 15 s, 10 s, 2 s)."""

    lease_duration: datetime.timedelta = datetime.timedelta(seconds=15)
    """How long a candidate waits, from when it saw the holder's last renewal, before taking
    the lease over."""
    renew_deadline: datetime.timedelta = datetime.timedelta(seconds=10)
    """How long the holder acts after its last successful renewal."""
    retry_period: datetime.timedelta = datetime.timedelta(seconds=2)
    """How often a candidate tries to take, and the holder to renew, the lease."""

    def __post_init__(self) -> None:
        if self.retry_period <= datetime.timedelta(0):
            raise ElectionSettingsError(f"retry_period: must be positive, got {self.retry_period}")
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ElectionSettingsError(
                "renew_deadline: must lie between retry_period and lease_duration (a holder "
                "retries within its deadline, and stops acting before a successor may take "
                f"over), got retry_period {self.retry_period}, renew_deadline "
                f"{self.renew_deadline}, lease_duration {self.lease_duration}"
            )
        if self.lease_duration.total_seconds() != int(self.lease_duration.total_seconds()):
            raise ElectionSettingsError(
                "lease_duration: must be whole seconds (the Lease's leaseDurationSeconds), got "
                f"{self.lease_duration}"
            )


@dataclasses.dataclass(frozen=True)
class LeaseRecord:
    """What a Lease's ``spec`` says of its holder."""

    holder: str | None
    lease_duration_seconds: int
    acquire_time: datetime.datetime | None = None
    renew_time: datetime.datetime | None = None
    transitions: int = 0

    @classmethod
    def from_spec(cls, spec: Mapping[str, object]) -> LeaseRecord:
        """A Lease's ``spec``; missing or malformed fields read as absent (a lease anyone wrote
        must not stop the election: a record nobody holds is taken over)."""
        holder = spec.get("holderIdentity")
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        return cls(
            holder=holder if isinstance(holder, str) and holder else None,
            lease_duration_seconds=_positive_int(duration, 1),
            acquire_time=_micro_time(spec.get("acquireTime")),
            renew_time=_micro_time(spec.get("renewTime")),
            transitions=_positive_int(transitions, 0),
        )

    def to_spec(self) -> dict[str, object]:
        spec: dict[str, object] = {
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.holder is not None:
            spec["holderIdentity"] = self.holder
        for name, moment in (("acquireTime", self.acquire_time), ("renewTime", self.renew_time)):
            if moment is not None:
                spec[name] = moment.astimezone(datetime.UTC).strftime(MICRO_TIME_FORMAT)
        return spec


def _positive_int(value: object, otherwise: int) -> int:
    """``value`` when it is a positive integer, else ``otherwise``."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return otherwise


def _micro_time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)


@dataclasses.dataclass(frozen=True)
class Observation:
    """A lease record, and when this candidate first saw it (on its own clock)."""

    record: LeaseRecord
    observed_at: datetime.datetime


def observe(
    previous: Observation | None, record: LeaseRecord, now: datetime.datetime
) -> Observation:
    """The observation after reading ``record`` at ``now``: the time it was first seen stays
    while the record is the same."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


class Step(enum.Enum):
    """What a candidate does with the lease."""

    CREATE = "create the lease, holding it"
    TAKE = "take the lease over"
    RENEW = "renew the lease it holds"
    WAIT = "wait: another holds the lease"


def next_record(
    observation: Observation | None,
    identity: str,
    now: datetime.datetime,
    settings: ElectionSettings,
) -> tuple[Step, LeaseRecord | None]:
    """What ``identity`` writes at ``now`` given what it observed of the lease (None: there is
    no lease), and the record to write (None: nothing)."""
    duration = int(settings.lease_duration.total_seconds())
    if observation is None:
        return Step.CREATE, LeaseRecord(identity, duration, now, now, 0)
    record = observation.record
    if record.holder == identity:
        return Step.RENEW, dataclasses.replace(
            record, lease_duration_seconds=duration, renew_time=now
        )
    expires = observation.observed_at + datetime.timedelta(seconds=record.lease_duration_seconds)
    if record.holder is None or now >= expires:
        return Step.TAKE, LeaseRecord(identity, duration, now, now, record.transitions + 1)
    return Step.WAIT, None


def released(record: LeaseRecord, now: datetime.datetime) -> LeaseRecord:
    """The record a holder that stops writes: no holder, and a lease that ends in a second, so
    a successor takes over at once."""
    return LeaseRecord(None, 1, now, now, record.transitions)


def leads(
    last_renewal: datetime.datetime | None, now: datetime.datetime, settings: ElectionSettings
) -> bool:
    """Whether a holder whose last successful write of the lease was at ``last_renewal`` acts
    as leader at ``now``: only within the renew deadline, which ends before any other
    candidate may take the lease over."""
    return last_renewal is not None and now < last_renewal + settings.renew_deadline
