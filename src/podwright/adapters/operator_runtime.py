"""The operator process, assembled: watches, leader election, the engine's loop, the webhooks.

``podwright operator`` runs one :class:`OperatorRuntime`. Every replica watches the Workloads
(one list+watch), the cluster profile and, through the ClusterPort, the kinds its tasks create and
their events, serves the admission webhooks (every replica: the Service spreads the reviews) and
``/metrics``, ``/healthz`` and ``/readyz``, and campaigns for the Lease. Every change a watch
shows is told to the operator (:class:`~podwright.engine.operator.WorkloadOperator`) as the key of
the Workload it concerns: the Workload itself, or the owner of a task's resource, or of the object
an event is about. Only the leader's workers (``concurrency`` threads) handle the queued
Workloads; a replica that loses the lease stops writing at once (the store and the executor ask
the elector before every write and every task), and one that takes over queues every Workload and
continues each from its status. A control loop, once a round interval, keeps the metrics (the
Workloads by phase, what the workers did, the queue's depth) and the liveness the probes read.

Stopping (SIGTERM) lets the Workloads in hand finish, releases the lease (so a successor takes over
at once instead of after a lease duration), stops serving the webhooks (their configurations stay:
the other replicas answer, and without any the cluster fails closed) and closes the watches.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from podwright.adapters.admission_webhooks import AdmissionWebhooks, WebhookSettings
from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.adapters.kubernetes.cluster_port import ClusterPort
from podwright.adapters.kubernetes.leader_election import LeaderElector
from podwright.adapters.kubernetes.policy_state import ClusterPolicyState
from podwright.adapters.kubernetes.reflector import Reflector
from podwright.adapters.kubernetes.workload_store import WorkloadCache, WorkloadTaskStore
from podwright.adapters.observability import OperatorMetrics
from podwright.core.assets import AssetCatalogue
from podwright.core.cluster_resources import (
    API_VERSION,
    WORKLOAD_KIND,
    ClusterScopes,
    submission_from_resource,
)
from podwright.core.leader_election import ElectionSettings
from podwright.core.lifecycle.objects import JsonObject, section, text
from podwright.core.lifecycle.phases import Phase, PhaseInfo
from podwright.core.problems import ProblemsError
from podwright.core.render import RenderError, refusal_lines, refusal_message
from podwright.core.render import render as render_workload
from podwright.engine.admission_service import AdmissionService
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex
from podwright.engine.executor import Executor, ExecutorConfig
from podwright.engine.kubernetes_port import KubernetesError
from podwright.engine.operator import RenderRefusedError, WorkloadOperator, owning_workload
from podwright.engine.plugins import default_plugins
from podwright.engine.task_store import TaskRecord
from podwright.engine.work_queue import WorkQueue
from podwright.engine.workload_tasks import (
    OPERATOR_BACKEND,
    WorkloadKey,
    phase_event,
    worth_an_event,
)

logger = logging.getLogger("podwright.operator")

COMPONENT = "podwright-operator"


class OperatorStartError(Exception):
    """The operator could not start: its watches did not list in time."""


@dataclasses.dataclass(frozen=True)
class OperatorSettings:
    """How one operator replica runs."""

    namespace: str
    """Where its Lease lives (and its webhook CA Secret, when kept in one)."""
    identity: str
    """This replica's name in the Lease (its pod's name)."""
    lease_name: str = "podwright-operator"
    profile_name: str = "default"
    """The ClusterProfile the Workloads are rendered with (absent: the safe defaults)."""
    concurrency: int = 16
    round_interval: timedelta = timedelta(seconds=1)
    election: ElectionSettings = dataclasses.field(default_factory=ElectionSettings)
    watch_namespace: str | None = None
    """Run the Workloads of this namespace only (None: every namespace)."""
    webhooks: WebhookSettings | None = None
    """None: no webhooks served by this process (another serves them)."""
    sync_timeout_seconds: float = 60.0


class OperatorRuntime:
    """One operator replica (see the module's docstring); :meth:`start`, then :meth:`stop`."""

    def __init__(
        self,
        client: KubernetesClient,
        settings: OperatorSettings,
        lifecycle: LifecycleConfig,
        metrics: OperatorMetrics,
        *,
        clock: Callable[[], datetime],
    ) -> None:
        self._client = client
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._stop = threading.Event()
        self.queue: WorkQueue[WorkloadKey] = WorkQueue(latency=metrics.queue_latency)
        self.cache = WorkloadCache(changed=self.queue.add)
        self._workloads = Reflector(
            client, API_VERSION, WORKLOAD_KIND, self.cache, namespace=settings.watch_namespace
        )
        self._events = EventIndex(
            ttl=lifecycle.event_ttl, max_per_object=lifecycle.events_per_object
        )
        plugins = default_plugins()
        self.port = ClusterPort(
            client,
            plugins,
            self._events,
            namespace=settings.watch_namespace,
            changed=self._resource_changed,
        )
        self.elector = LeaderElector(
            client,
            settings.namespace,
            settings.lease_name,
            settings.identity,
            clock=clock,
            settings=settings.election,
        )
        self.webhooks: AdmissionWebhooks | None = None
        self._policies: ClusterPolicyState | None = None
        # The webhooks judge Workloads on the profile this replica renders them with.
        if settings.webhooks is not None:
            self.webhooks = AdmissionWebhooks(
                client,
                dataclasses.replace(settings.webhooks, profile_name=settings.profile_name),
                clock=clock,
                answered=metrics.webhook_answered,
            )
            self._service = self.webhooks.service
        else:
            scopes = ClusterScopes("cluster")
            self._policies = ClusterPolicyState(client, scopes, settings.profile_name)
            self._service = AdmissionService(self._policies, scopes)
        self.store = WorkloadTaskStore(
            client, self.cache, may_write=self.elector.leads, on_phase=self._phase_changed
        )
        self.executor = Executor(
            self.store,
            self.port,
            ExecutorConfig(
                backend=OPERATOR_BACKEND,
                concurrency=settings.concurrency,
                round_interval=settings.round_interval,
            ),
            lifecycle,
            clock=clock,
            sleep=time.sleep,
            events=self._events,
            observer=metrics,
            may_act=self.elector.leads,
        )
        self.operator = WorkloadOperator(
            self.store,
            self.executor,
            self._render,
            self.queue,
            clock=clock,
            leads=self.elector.leads,
        )
        self._thread = threading.Thread(target=self._loop, name="operator", daemon=True)
        self._workers = [
            threading.Thread(
                target=self.operator.work,
                args=(self._stop,),
                name=f"operator-worker-{number}",
                daemon=True,
            )
            for number in range(settings.concurrency)
        ]
        self._started: list[Callable[[], None]] = []

    # Starting and stopping ---------------------------------------------------------------------

    def start(self) -> OperatorRuntime:
        try:
            timeout = self._settings.sync_timeout_seconds
            self._start(self._workloads.start, self._workloads.stop)
            if self._policies is not None:
                policies = self._policies
                self._start(lambda: policies.start(timeout), policies.stop)
                if not policies.synced():
                    raise OperatorStartError(
                        "the policies, namespaces, assets and cluster profiles were not listed "
                        f"within {timeout:g} s"
                    )
            if self.webhooks is not None:
                webhooks = self.webhooks
                self._start(webhooks.start, webhooks.stop)
            if not self._workloads.wait_synced(timeout):
                raise OperatorStartError(
                    f"the Workloads were not listed within {timeout:g} s: {self._workloads.error}"
                )
            self._start(self.elector.start, lambda: self.elector.stop(release=True))
            self._start(self._start_workers, self._join_workers)
            self._start(self._thread.start, self._join)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, start: Callable[[], object], stop: Callable[[], None]) -> None:
        start()
        self._started.append(stop)

    def stop(self) -> None:
        """Finish the Workloads in hand, release the lease, stop serving, close the watches."""
        self._stop.set()
        self.queue.shut_down()
        while self._started:
            stop = self._started.pop()
            try:
                stop()
            except Exception:  # a stop that fails must not keep the others from running
                logger.exception("stopping the operator")
        self.executor.close()
        self.port.close()

    def _join(self) -> None:
        self._thread.join(timeout=60)

    def _start_workers(self) -> None:
        for worker in self._workers:
            worker.start()

    def _join_workers(self) -> None:
        """Wait for the Workloads in hand (a minute in all at most: a worker is a daemon)."""
        deadline = time.monotonic() + 60
        for worker in self._workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))

    def ready(self) -> tuple[bool, str]:
        """Whether this replica can serve: its watches listed (and its webhooks serving)."""
        if not self._workloads.wait_synced(0):
            return False, "the Workloads have not been listed yet"
        if not self.port.synced():
            return False, "the watches of the tasks' resources have not listed yet"
        return True, "ready"

    # The loop ---------------------------------------------------------------------------------

    def _loop(self) -> None:
        """Once a round interval: follow the leadership (queue every Workload on taking the
        lead), and keep the metrics and the liveness the probes read."""
        interval = self._settings.round_interval.total_seconds()
        led = False
        while not self._stop.is_set():
            leads = self.elector.leads()
            self._metrics.leading(leads)
            if not leads:
                led = False
                self._metrics.standby()
                self.elector.wait_for_leadership(interval)
                continue
            started = time.monotonic()
            if not led:
                led = True
                queued = self.operator.enqueue_all()
                logger.info("leading: %d Workloads queued", queued)
            try:
                self._report(time.monotonic() - started)
            except Exception:
                logger.exception("operator metrics failed")
            self._stop.wait(interval)

    def _report(self, seconds: float) -> None:
        phases = self._phases()
        self._metrics.workloads_by_phase(phases)
        tally = self.operator.take_tally()
        active = {
            phase.value: phases.get(phase.value, 0) for phase in Phase if not phase.is_terminal
        }
        self._metrics.round_finished(tally.report(active, seconds))
        self._metrics.queue_depth(self.queue.ready(), self.queue.waiting(), self.queue.in_hand())

    def _phases(self) -> Mapping[str, int]:
        return Counter(text(section(obj, "status"), "phase") for obj in self.cache.workloads())

    # What the engine calls back ---------------------------------------------------------------

    def _resource_changed(self, resource: JsonObject) -> None:
        """A task's resource, or one of its events, changed: queue the Workload that owns it."""
        key = owning_workload(resource)
        if key is not None:
            self.queue.add(key)

    def _render(self, workload: JsonObject) -> Sequence[Mapping[str, Any]]:
        metadata = section(workload, "metadata")
        namespace = text(metadata, "namespace")
        try:
            submission = submission_from_resource(workload)
            catalogue = self._catalogue(namespace)
            profile = self._service.profile()
            rendering = render_workload(
                submission.workload_type,
                text(metadata, "name"),
                submission.spec,
                profile=profile,
                catalogue=catalogue,
                namespace=namespace,
            )
        except RenderError as error:
            # What the validating webhook and ``podwright render`` say of it.
            lines = refusal_lines(profile.name, error.problems, {})
            raise RenderRefusedError(refusal_message(lines)) from error
        except ProblemsError as error:
            raise RenderRefusedError("; ".join(map(str, error.problems))) from error
        return rendering.manifests

    def _catalogue(self, namespace: str) -> AssetCatalogue:
        try:
            return self._service.policies_of_namespace(namespace).catalogue
        except LookupError as error:
            raise RenderRefusedError(f"namespace {namespace} not found") from error

    def _phase_changed(self, workload: JsonObject, record: TaskRecord, info: PhaseInfo) -> None:
        now = self._clock()
        if info.phase is Phase.RUNNING:
            seconds = ((info.occurred_at or now) - record.task.submitted_at).total_seconds()
            self._metrics.reached_running(record.task.workload_type, seconds)
        if not worth_an_event(info.phase):
            return
        event = phase_event(
            workload, info, now, component=COMPONENT, instance=self._settings.identity
        )
        try:
            self._client.create(event)
        except KubernetesError as error:
            logger.warning(
                "could not record the %s event of task %s: %s", info.phase, record.task_id, error
            )
