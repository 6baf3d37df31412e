"""The compliance monitor (engine/compliance_monitor.py) over in-memory ports: it writes a
Workload's compliance status when the policies or the Workload change, only then, a bounded
number per round, and retries what the API server refuses with a growing delay."""

from __future__ import annotations

import copy
import itertools
import random
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from podwright.core.assets import AssetCatalogue
from podwright.core.cluster_resources import API_VERSION, policy_from_resource
from podwright.core.json_patch import apply_merge_patch
from podwright.core.lifecycle.objects import JsonObject, condition
from podwright.core.policies import Policy, Scope
from podwright.core.problems import FieldProblem, ProblemsError
from podwright.engine.admission_service import AdmissionService, PolicySnapshot
from podwright.engine.compliance_monitor import ComplianceMonitor, ComplianceSettings
from podwright.engine.kubernetes_port import (
    ConflictError,
    KubernetesError,
    NotFoundError,
    ObjectRef,
    PatchType,
    ServerError,
    ThrottledError,
)
from tests.engine.test_admission_service import SCOPES, MemoryState, workload
from tests.kube.support import eventually

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at_most_8_gpus(enforcement: str = "enforce") -> Policy:
    obj = {
        "apiVersion": API_VERSION,
        "kind": "ClusterWorkloadPolicy",
        "metadata": {"name": "prod-training"},
        "spec": {
            "workloadType": "training",
            "enforcement": enforcement,
            "rules": {"compute": {"gpuDevicesRequest": {"max": 8}}},
        },
    }
    return policy_from_resource(obj, Scope(("prod",)))


class Workloads:
    """Workloads as the API server keeps them (the status writer) and as a watch cache last saw
    them (the source); ``stale`` keeps the cache behind the server, as a watch can be."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.seen: dict[tuple[str, str], dict[str, Any]] = {}
        self.patches: list[tuple[ObjectRef, Any]] = []
        self.failures: list[KubernetesError] = []
        self.stale = False
        self._version = 0

    def add(self, name: str, namespace: str = "vision", **spec: Any) -> None:
        obj = workload(namespace, **spec)
        obj["metadata"].update(name=name, generation=1)
        self._store((namespace, name), obj)

    def status(self, name: str, namespace: str = "vision") -> dict[str, Any]:
        return dict(self.stored[(namespace, name)].get("status") or {})

    def compliant(self, name: str) -> str:
        found = condition(self.stored[("vision", name)], "PolicyCompliant")
        return "" if found is None else f"{found['status']} {found['reason']}"

    def update_elsewhere(self, name: str, status: Mapping[str, Any]) -> None:
        """Another writer (the operator) changes the Workload's status."""
        key = ("vision", name)
        self._store(key, apply_merge_patch(self.stored[key], {"status": dict(status)}))

    def _store(self, key: tuple[str, str], obj: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self.stored[key] = obj
        if not self.stale:
            self.seen[key] = copy.deepcopy(obj)
        return obj

    def values(self) -> list[JsonObject]:
        return list(self.seen.values())

    def patch_status(self, ref: ObjectRef, body: Any, patch_type: PatchType) -> dict[str, Any]:
        assert patch_type is PatchType.MERGE
        assert ref.kind == "Workload"
        self.patches.append((ref, body))
        if self.failures:
            raise self.failures.pop(0)
        key = (ref.namespace, ref.name)
        current = self.stored.get(key)
        if current is None:
            raise NotFoundError(f'workloads "{ref.name}" not found', status=404)
        if body["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise ConflictError("the object has been modified", status=409)
        return copy.deepcopy(
            self._store(key, apply_merge_patch(current, {"status": body["status"]}))
        )


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def state() -> MemoryState:
    return MemoryState()


@pytest.fixture
def cluster() -> Workloads:
    return Workloads()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def monitor_of(
    state: MemoryState, cluster: Workloads, clock: Clock, **settings: Any
) -> ComplianceMonitor:
    return ComplianceMonitor(
        cluster,
        state,
        AdmissionService(state, SCOPES),
        cluster,
        clock=clock,
        settings=ComplianceSettings(**settings),
        rng=random.Random(7),
    )


def test_statuses_are_written_once_then_rewritten_only_when_the_policies_change(
    state: MemoryState, cluster: Workloads, clock: Clock
) -> None:
    cluster.add("small", compute={"gpuDevicesRequest": 2})
    cluster.add("large", compute={"gpuDevicesRequest": 16})
    monitor = monitor_of(state, cluster, clock)

    first = monitor.run_round()
    assert (first.due, first.written) == (2, 2)
    assert (cluster.compliant("small"), cluster.compliant("large")) == (
        "True Compliant",
        "True Compliant",
    )
    assert monitor.run_round().due == 0  # settled: nothing read again, nothing written

    clock.advance(60)
    state.set_policies(at_most_8_gpus())
    changed = monitor.run_round()
    assert (changed.due, changed.written) == (2, 1)
    assert cluster.compliant("large") == "False Noncompliant"
    large = condition(cluster.stored[("vision", "large")], "PolicyCompliant")
    assert large is not None
    assert large["lastTransitionTime"] == "2026-03-01T12:01:00Z"
    assert (
        "spec.compute.gpuDevicesRequest: 16 (submission) is above the maximum 8"
        in (large["message"])
    )
    assert monitor.run_round().due == 0

    clock.advance(60)
    state.set_policies()
    assert monitor.run_round().written == 1
    assert cluster.compliant("large") == "True Compliant"
    assert len(cluster.patches) == 4


def test_audit_findings_are_written_into_status(
    state: MemoryState, cluster: Workloads, clock: Clock
) -> None:
    cluster.add("w", compute={"gpuDevicesRequest": 16})
    state.set_policies(at_most_8_gpus("audit"))
    monitor_of(state, cluster, clock).run_round()
    status = cluster.status("w")
    assert cluster.compliant("w") == "True Compliant"
    assert status["compliance"]["enforcement"] == "audit"
    assert [(f["field"], f["rule"], f["policy"]) for f in status["compliance"]["findings"]] == [
        ("spec.compute.gpuDevicesRequest", "max", "ClusterWorkloadPolicy prod-training")
    ]


def test_a_round_assesses_at_most_a_batch(
    state: MemoryState, cluster: Workloads, clock: Clock
) -> None:
    for number in range(5):
        cluster.add(f"w{number}")
    monitor = monitor_of(state, cluster, clock, batch=2)
    rounds = [monitor.run_round() for _ in range(4)]
    assert [(r.due, r.assessed, r.written) for r in rounds] == [
        (5, 2, 2),
        (3, 2, 2),
        (1, 1, 1),
        (0, 0, 0),
    ]


@pytest.mark.parametrize(
    ("failure", "earliest_retry"),
    [
        pytest.param(ServerError("etcdserver: timeout", status=500), 5.0, id="server-error"),
        pytest.param(
            ThrottledError("slow down", retry_after=120), 120.0, id="throttled-retry-after"
        ),
    ],
)
def test_a_failed_write_is_retried_after_a_delay(
    state: MemoryState,
    cluster: Workloads,
    clock: Clock,
    failure: KubernetesError,
    earliest_retry: float,
) -> None:
    """The first retry waits between half and all of ``retry_base`` (jittered), or the
    Retry-After the server asked for when that is longer."""
    cluster.add("w")
    monitor = monitor_of(state, cluster, clock, retry_base=timedelta(seconds=10))
    cluster.failures.append(failure)
    assert monitor.run_round().failed == 1
    clock.advance(earliest_retry - 0.5)
    assert monitor.run_round().due == 0
    assert 0 < monitor.seconds_until_due() <= 5.0
    clock.advance(10)
    assert monitor.run_round().written == 1
    assert cluster.compliant("w") == "True Compliant"


def test_failures_in_a_row_wait_longer_each_time_up_to_the_cap(
    state: MemoryState, cluster: Workloads, clock: Clock
) -> None:
    cluster.add("w")
    monitor = monitor_of(
        state, cluster, clock, retry_base=timedelta(seconds=1), retry_cap=timedelta(seconds=4)
    )
    cluster.failures.extend(ServerError("down", status=503) for _ in range(5))
    attempts = []
    while cluster.compliant("w") == "":
        if monitor.run_round().due:
            attempts.append(clock.now)
        clock.advance(0.25)
    waits = [(b - a).total_seconds() for a, b in itertools.pairwise(attempts)]
    assert len(waits) == 5
    for failures, wait in enumerate(waits):
        longest = min(4.0, 2.0**failures)  # 1 s doubling, at most 4 s; jittered down to half
        assert longest / 2 <= wait <= longest + 0.25, waits


def test_a_conflict_keeps_what_another_writer_wrote(
    state: MemoryState, cluster: Workloads, clock: Clock
) -> None:
    """The write is conditional on the resourceVersion read: a status the operator wrote
    meanwhile is never overwritten by a condition list that lacks its condition."""
    cluster.add("w")
    monitor = monitor_of(state, cluster, clock, retry_base=timedelta(seconds=1))
    cluster.stale = True
    launched = {
        "type": "Launched",
        "status": "True",
        "reason": "JobCreated",
        "message": "",
        "lastTransitionTime": "2026-03-01T11:00:00Z",
    }
    cluster.update_elsewhere("w", {"conditions": [launched], "phase": "Running"})
    assert monitor.run_round().failed == 1
    cluster.stale = False
    cluster.update_elsewhere("w", {"phase": "Running"})  # the watch catches up
    clock.advance(1)
    assert monitor.run_round().written == 1
    status = cluster.status("w")
    assert [c["type"] for c in status["conditions"]] == ["Launched", "PolicyCompliant"]
    assert status["conditions"][0] == launched
    assert status["phase"] == "Running"


def test_a_workload_deleted_before_its_write_is_let_go(
    state: MemoryState, cluster: Workloads, clock: Clock
) -> None:
    cluster.add("w")
    monitor = monitor_of(state, cluster, clock)
    del cluster.stored[("vision", "w")]
    report = monitor.run_round()
    assert (report.written, report.failed) == (0, 0)
    assert monitor.run_round().due == 0
    del cluster.seen[("vision", "w")]
    assert monitor.run_round().due == 0


def test_a_workload_of_an_unknown_namespace_is_retried_later(
    state: MemoryState, cluster: Workloads, clock: Clock
) -> None:
    cluster.add("w", namespace="elsewhere")
    monitor = monitor_of(state, cluster, clock, retry_base=timedelta(seconds=10))
    assert monitor.run_round().failed == 1
    assert cluster.patches == []
    assert monitor.run_round().due == 0


class BrokenAssets(MemoryState):
    def catalogue(self, namespace: str) -> AssetCatalogue:
        raise ProblemsError([FieldProblem(("metadata", "name"), "duplicate asset", "Asset a")])


def test_unreadable_assets_make_the_workloads_of_the_namespace_noncompliant(
    cluster: Workloads, clock: Clock
) -> None:
    cluster.add("w")
    monitor_of(BrokenAssets(), cluster, clock).run_round()
    found = condition(cluster.stored[("vision", "w")], "PolicyCompliant")
    assert found is not None
    assert (found["status"], found["reason"]) == ("False", "PolicyUnreadable")
    assert found["message"].endswith("there: Asset a: metadata.name: duplicate asset")


def test_nothing_is_judged_before_the_policies_are_known(
    state: MemoryState, cluster: Workloads, clock: Clock
) -> None:
    cluster.add("w")
    ready = False
    monitor = ComplianceMonitor(
        cluster, state, AdmissionService(state, SCOPES), cluster, clock=clock, ready=lambda: ready
    )
    assert monitor.run_round().due == 0
    assert cluster.patches == []
    ready = True
    assert monitor.run_round().written == 1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"batch": 0}, "batch: must be at least 1, got 0"),
        ({"poll_interval": timedelta(0)}, "poll_interval: must be positive, got 0:00:00"),
        (
            {"retry_base": timedelta(seconds=10), "retry_cap": timedelta(seconds=1)},
            "retry_cap: must be at least retry_base (0:00:10), got 0:00:01",
        ),
    ],
)
def test_settings_out_of_range_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ComplianceSettings(**settings)


# The thread ---------------------------------------------------------------------------------


class FlakyState(MemoryState):
    """A policy state that fails its first reads (a fault of the state, not of the cluster)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def snapshot(self) -> PolicySnapshot:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the policy state is broken")
        return super().snapshot()


def test_the_thread_survives_failed_rounds_and_stops_promptly(
    cluster: Workloads, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.add("w")
    state = FlakyState(failures=2)
    monitor = ComplianceMonitor(
        cluster,
        state,
        AdmissionService(state, SCOPES),
        cluster,
        clock=lambda: datetime.now(UTC),
        settings=ComplianceSettings(
            poll_interval=timedelta(hours=1), retry_base=timedelta(milliseconds=10)
        ),
    ).start()
    try:
        eventually(lambda: cluster.compliant("w") == "True Compliant")
        assert "compliance round failed" in caplog.text
        cluster.add("v")
        monitor.notify()  # a watch saw a change: the hour's wait ends
        eventually(lambda: cluster.compliant("v") == "True Compliant")
    finally:
        started = time.monotonic()
        monitor.stop()
        assert time.monotonic() - started < 2
    assert not any(t.name == "compliance-monitor" for t in threading.enumerate())


def test_a_monitor_starts_once(state: MemoryState, cluster: Workloads, clock: Clock) -> None:
    monitor = monitor_of(state, cluster, clock).start()
    try:
        with pytest.raises(RuntimeError, match="started already"):
            monitor.start()
    finally:
        monitor.stop()
