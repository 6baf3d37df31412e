"""The compliance status writer over a cluster: what ``podwright webhook`` runs beside its server.

The engine's :class:`~podwright.engine.compliance_monitor.ComplianceMonitor` decides and writes;
this module gives it the cluster: a reflector keeps the Workloads in a watch cache (a round reads
the cache, never the API server), each change of a Workload or of the policy state wakes it, and
the statuses go through the client's ``workloads/status`` merge patch.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.adapters.kubernetes.policy_state import ClusterPolicyState
from podwright.adapters.kubernetes.reflector import NotifyingCache, Reflector, WatchCache
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND
from podwright.core.lifecycle.objects import JsonObject
from podwright.engine.admission_service import AdmissionService
from podwright.engine.compliance_monitor import ComplianceMonitor, ComplianceSettings


class ComplianceStatusWriter:
    """Keeps every Workload's ``PolicyCompliant`` condition and ``status.compliance`` current.

    ``state`` and ``service`` are the ones the webhooks use (so the status and the webhooks
    read the same prepared policies); ``state`` is started by its owner. :meth:`start` starts
    watching the Workloads and the monitor's thread, :meth:`stop` stops both.
    """

    def __init__(
        self,
        client: KubernetesClient,
        state: ClusterPolicyState,
        service: AdmissionService,
        *,
        clock: Callable[[], datetime],
        settings: ComplianceSettings | None = None,
    ) -> None:
        self._workloads = WatchCache(trim=_without_managed_fields)
        self.monitor = ComplianceMonitor(
            client,
            state,
            service,
            self._workloads,
            clock=clock,
            settings=settings,
            ready=state.synced,
        )
        state.subscribe(self.monitor.notify)
        self._reflector = Reflector(
            client,
            API_VERSION,
            WORKLOAD_KIND,
            NotifyingCache(self._workloads, self.monitor.notify),
        )

    def start(self, timeout: float) -> bool:
        """Start watching the Workloads and writing their statuses; whether the Workloads were
        listed within ``timeout`` seconds (the writer starts either way, and catches up)."""
        self._reflector.start()
        synced = self._reflector.wait_synced(timeout)
        self.monitor.start()
        return synced

    def stop(self) -> None:
        self.monitor.stop()
        self._reflector.stop()


def _without_managed_fields(obj: JsonObject) -> dict[str, object]:
    """A Workload as the monitor reads it: server-side apply's bookkeeping left out."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or "managedFields" not in metadata:
        return dict(obj)
    return {**obj, "metadata": {k: v for k, v in metadata.items() if k != "managedFields"}}
