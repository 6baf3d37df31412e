"""The executor's metrics and its /metrics, /healthz and /readyz endpoints."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from podwright.adapters.observability import ExecutorMetrics, StatusServer
from podwright.engine.executor import RoundReport


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def metrics(clock: Clock) -> ExecutorMetrics:
    return ExecutorMetrics("local", monotonic=clock)


@pytest.fixture
def synced() -> list[bool]:
    return [False]


@pytest.fixture
def server(metrics: ExecutorMetrics, synced: list[bool]) -> Iterator[StatusServer]:
    running = StatusServer(
        metrics,
        host="127.0.0.1",
        port=0,
        max_silence_seconds=60,
        watches_synced=lambda: synced[0],
    ).start()
    yield running
    running.stop()


def get(server: StatusServer, path: str) -> tuple[int, str]:
    host, port = server.address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def report(**fields: object) -> RoundReport:
    base: dict[str, object] = {
        "due": 2,
        "advanced": 1,
        "finalized": 0,
        "errors": 0,
        "seconds": 0.02,
    }
    return RoundReport(**{**base, **fields})  # type: ignore[arg-type]


def test_rounds_phases_finalized_tasks_and_requests_are_counted(
    metrics: ExecutorMetrics, server: StatusServer
) -> None:
    metrics.round_finished(report(active_by_phase={"Running": 2, "Queued": 1}))
    metrics.round_finished(
        report(errors=1, active_by_phase={"Running": 1}, finalized_by_phase={"Success": 2})
    )
    metrics.api_request("create", "201")
    metrics.api_request("create", "409")
    metrics.api_request("get", "connection-error")
    status, text = get(server, "/metrics")
    assert status == 200
    for line in (
        'podwright_executor_rounds_total{backend="local"} 2.0',
        'podwright_executor_task_errors_total{backend="local"} 1.0',
        'podwright_executor_round_seconds_count{backend="local"} 2.0',
        'podwright_executor_active_tasks{backend="local",phase="Running"} 1.0',
        'podwright_executor_active_tasks{backend="local",phase="Queued"} 0.0',
        'podwright_executor_finalized_tasks_total{backend="local",phase="Success"} 2.0',
        'podwright_kubernetes_requests_total{code="201",verb="create"} 1.0',
        'podwright_kubernetes_requests_total{code="409",verb="create"} 1.0',
        'podwright_kubernetes_requests_total{code="connection-error",verb="get"} 1.0',
    ):
        assert line in text.splitlines(), line


def test_health_follows_the_loop(
    metrics: ExecutorMetrics, server: StatusServer, clock: Clock
) -> None:
    assert get(server, "/healthz") == (200, "starting: no round finished yet\n")
    metrics.round_finished(report())
    clock.now += 30
    assert get(server, "/healthz") == (200, "last round 30.0s ago\n")
    clock.now += 31
    assert get(server, "/healthz") == (503, "no round finished for 61s (allowed 60s)\n")


def test_readiness_needs_synced_watches_a_round_and_a_readable_store(
    metrics: ExecutorMetrics, server: StatusServer, synced: list[bool]
) -> None:
    assert get(server, "/readyz") == (503, "the watches have not listed yet\n")
    synced[0] = True
    assert get(server, "/readyz") == (503, "no round finished yet\n")
    metrics.round_finished(report(due=0, errors=1, store_read=False))
    assert get(server, "/readyz") == (503, "the last round could not read the task store\n")
    metrics.round_finished(report())
    assert get(server, "/readyz") == (200, "ready\n")


def test_other_paths_are_404(server: StatusServer) -> None:
    assert get(server, "/")[0] == 404


def test_an_unreachable_api_server_shows_in_readiness_and_a_gauge(
    metrics: ExecutorMetrics, server: StatusServer, synced: list[bool]
) -> None:
    synced[0] = True
    unreachable = "cannot reach the Kubernetes API server https://10.0.0.1:6443: connection refused"
    metrics.round_finished(report(errors=1, connection_error=unreachable))
    assert get(server, "/readyz") == (503, f"{unreachable}\n")
    gauge = 'podwright_executor_api_unreachable{backend="local"}'
    assert f"{gauge} 1.0" in get(server, "/metrics")[1].splitlines()
    metrics.round_finished(report())
    assert get(server, "/readyz") == (200, "ready\n")
    assert f"{gauge} 0.0" in get(server, "/metrics")[1].splitlines()
