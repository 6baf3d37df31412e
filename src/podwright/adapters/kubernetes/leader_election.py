"""Leader election among operator replicas, over a Lease in the cluster.

The decisions are the core's (:mod:`podwright.core.leader_election`); this module reads and
writes the Lease, each write conditional on the resourceVersion read, every retry period on a
thread of its own. What the operator does as leader it does only while :meth:`LeaderElector.
leads` says so: the answer turns False the moment the last successful renewal is older than
the renew deadline, or a read shows another holder, whatever the thread is doing then.
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable

from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.core.leader_election import (
    ElectionSettings,
    LeaseRecord,
    Observation,
    Step,
    leads,
    next_record,
    observe,
    released,
)
from podwright.core.lifecycle.objects import section
from podwright.engine.kubernetes_port import (
    ConflictError,
    KubernetesError,
    NotFoundError,
    ObjectRef,
)

LOG = logging.getLogger("podwright.leader")

LEASE_API_VERSION = "coordination.k8s.io/v1"

Clock = Callable[[], datetime.datetime]


class LeaderElector:
    """One candidate, ``identity``, for the Lease ``namespace/name``. :meth:`start` campaigns
    on a background thread; :meth:`stop` stops, releasing the lease when held."""

    def __init__(
        self,
        client: KubernetesClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        clock: Clock,
        settings: ElectionSettings | None = None,
    ) -> None:
        self._client = client
        self._ref = ObjectRef(LEASE_API_VERSION, "Lease", namespace, name)
        self.identity = identity
        self._clock = clock
        self._settings = settings or ElectionSettings()
        self._observation: Observation | None = None
        self._last_renewal: datetime.datetime | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._changed = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def leads(self) -> bool:
        """Whether this candidate acts as leader now."""
        with self._lock:
            last_renewal = self._last_renewal
        return leads(last_renewal, self._clock(), self._settings)

    def wait_for_leadership(self, timeout: float) -> bool:
        """Wait until this candidate leads, at most ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(
                lambda: leads(self._last_renewal, self._clock(), self._settings), timeout
            )

    def try_once(self) -> Step:
        """Read the lease and take the step the core decides (a lost race is a wait)."""
        now = self._clock()
        try:
            current = self._client.get(self._ref)
        except NotFoundError:
            current = None
        with self._lock:
            if current is None:
                self._observation = None
            else:
                record = LeaseRecord.from_spec(section(current, "spec"))
                self._observation = observe(self._observation, record, now)
                if record.holder != self.identity:
                    self._last_renewal = None  # another holds it: stop acting at once
            step, wanted = next_record(self._observation, self.identity, now, self._settings)
        if wanted is None:
            return step
        try:
            self._write(current, wanted)
        except ConflictError:
            return Step.WAIT  # another candidate wrote first (AlreadyExists is a Conflict)
        with self._changed:
            self._observation = Observation(wanted, now)
            if self._last_renewal is None:
                LOG.info(
                    "%s leads (Lease %s/%s)", self.identity, self._ref.namespace, self._ref.name
                )
            self._last_renewal = now  # the time before the write: never later than the server's
            self._changed.notify_all()
        return step

    def _write(self, current: dict[str, object] | None, record: LeaseRecord) -> None:
        if current is None:
            self._client.create(
                {
                    "apiVersion": LEASE_API_VERSION,
                    "kind": "Lease",
                    "metadata": {"name": self._ref.name, "namespace": self._ref.namespace},
                    "spec": record.to_spec(),
                }
            )
            return
        metadata = current.get("metadata")
        assert isinstance(metadata, dict), "a Lease read from the API server has metadata"
        self._client.replace(
            self._ref,
            {
                "apiVersion": LEASE_API_VERSION,
                "kind": "Lease",
                "metadata": {
                    "name": self._ref.name,
                    "namespace": self._ref.namespace,
                    "resourceVersion": metadata.get("resourceVersion"),
                },
                "spec": record.to_spec(),
            },
        )

    def start(self) -> LeaderElector:
        self._thread.start()
        return self

    def stop(self, *, release: bool = True) -> None:
        """Stop campaigning; a holder stops acting at once and, with ``release``, clears the
        lease so a successor takes over without waiting for it to expire."""
        self._stopping.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=10)
        with self._lock:
            held, self._last_renewal = self._last_renewal is not None, None
        if release and held:
            try:
                current = self._client.get(self._ref)
                record = LeaseRecord.from_spec(section(current, "spec"))
                if record.holder == self.identity:
                    self._write(current, released(record, self._clock()))
            except KubernetesError as error:
                LOG.warning("could not release the lease: %s", error)

    def _run(self) -> None:
        interval = self._settings.retry_period.total_seconds()
        while not self._stopping.is_set():
            try:
                self.try_once()
            except KubernetesError as error:
                LOG.warning("leader election: %s", error)
            self._stopping.wait(interval)
