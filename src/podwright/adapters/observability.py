"""What a running executor tells its operators: Prometheus metrics and health, over HTTP.

:class:`ExecutorMetrics` counts rounds, their latency, tasks per phase, finalized tasks and API
requests (by verb and status code) in its own Prometheus registry, so two executors in one process
(tests) do not share counters. :class:`StatusServer` serves:

* ``/metrics``: the registry, in the Prometheus text format;
* ``/healthz``: 200 while the reconcile loop is alive (a round finished within the allowed
  silence), 503 otherwise: for a liveness probe;
* ``/readyz``: 200 once the executor's watches have listed, its last round could read the task
  store and got an answer from the Kubernetes API server for every request, 503 otherwise (saying
  which): for a readiness probe.

``podwright_executor_api_unreachable`` is 1 while the last round had a request that got no answer
from the API server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from podwright.core.lifecycle.phases import Phase
from podwright.engine.executor import RoundReport

_ROUND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ExecutorMetrics:
    """The executor's Prometheus metrics; a ``RoundObserver`` and a request observer."""

    def __init__(self, backend: str, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._backend = backend
        self._monotonic = monotonic
        self._rounds = Counter(
            "podwright_executor_rounds",
            "Reconcile rounds run.",
            ["backend"],
            registry=self.registry,
        )
        self._round_seconds = Histogram(
            "podwright_executor_round_seconds",
            "Time of one reconcile round over the due tasks.",
            ["backend"],
            buckets=_ROUND_BUCKETS,
            registry=self.registry,
        )
        self._round_errors = Counter(
            "podwright_executor_task_errors",
            "Task reconciles that failed (the store or the API unavailable) and were backed off.",
            ["backend"],
            registry=self.registry,
        )
        self._active = Gauge(
            "podwright_executor_active_tasks",
            "Active (not finalized) tasks by phase, as the last round found them.",
            ["backend", "phase"],
            registry=self.registry,
        )
        self._finalized = Counter(
            "podwright_executor_finalized_tasks",
            "Tasks finalized, by their terminal phase.",
            ["backend", "phase"],
            registry=self.registry,
        )
        self._requests = Counter(
            "podwright_kubernetes_requests",
            "Kubernetes API requests, by verb and status code.",
            ["verb", "code"],
            registry=self.registry,
        )
        self._unreachable = Gauge(
            "podwright_executor_api_unreachable",
            "1 while the last round had a request that got no answer from the API server.",
            ["backend"],
            registry=self.registry,
        )
        self._lock = threading.Lock()
        self.last_round_at: float | None = None
        self.last_round_read_store = False
        self.last_connection_error = ""

    def round_finished(self, report: RoundReport) -> None:
        labels = {"backend": self._backend}
        self._rounds.labels(**labels).inc()
        self._round_seconds.labels(**labels).observe(report.seconds)
        self._round_errors.labels(**labels).inc(report.errors)
        for phase in Phase:
            count = report.active_by_phase.get(phase.value, 0)
            self._active.labels(backend=self._backend, phase=phase.value).set(count)
        for phase_name, count in report.finalized_by_phase.items():
            self._finalized.labels(backend=self._backend, phase=phase_name).inc(count)
        self._unreachable.labels(**labels).set(1 if report.connection_error else 0)
        with self._lock:
            self.last_round_at = self._monotonic()
            self.last_round_read_store = report.store_read
            self.last_connection_error = report.connection_error

    def api_request(self, verb: str, code: str) -> None:
        self._requests.labels(verb=verb, code=code).inc()

    def seconds_since_round(self) -> float | None:
        with self._lock:
            if self.last_round_at is None:
                return None
            return self._monotonic() - self.last_round_at


class OperatorMetrics(ExecutorMetrics):
    """The executor's metrics, and the operator's own: Workloads per phase, submit-to-running
    latency per workload type, whether this replica leads, and the admission webhooks'
    latency."""

    def __init__(self, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        super().__init__("operator", monotonic=monotonic)
        self._workloads = Gauge(
            "podwright_workloads",
            "Workloads by phase (every Workload the operator sees, finished ones included).",
            ["phase"],
            registry=self.registry,
        )
        self._to_running = Histogram(
            "podwright_workload_submit_to_running_seconds",
            "From a Workload's submission to its task running, per workload type.",
            ["type"],
            buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800),
            registry=self.registry,
        )
        self._leader = Gauge(
            "podwright_operator_leader",
            "1 while this replica leads (runs the lifecycle engine), 0 on standby.",
            registry=self.registry,
        )
        self._webhook_seconds = Histogram(
            "podwright_webhook_request_seconds",
            "Time to answer one AdmissionReview, by webhook path.",
            ["path"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=self.registry,
        )
        self._queue_latency = Histogram(
            "podwright_operator_queue_latency_seconds",
            "From a Workload's key becoming ready in the work queue to a worker taking it.",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=self.registry,
        )
        self._queue_keys = Gauge(
            "podwright_operator_queue_keys",
            "Workload keys in the work queue: ready (the queue's depth), waiting for their "
            "time, or in a worker's hand.",
            ["state"],
            registry=self.registry,
        )

    def workloads_by_phase(self, counts: Mapping[str, int]) -> None:
        for phase in ("", *(phase.value for phase in Phase)):
            self._workloads.labels(phase=phase or "Pending").set(counts.get(phase, 0))

    def reached_running(self, workload_type: str, seconds: float) -> None:
        self._to_running.labels(type=workload_type).observe(max(0.0, seconds))

    def leading(self, leads: bool) -> None:
        self._leader.set(1 if leads else 0)

    def standby(self) -> None:
        """A loop turn of a replica that does not lead: alive, with nothing to reconcile."""
        with self._lock:
            self.last_round_at = self._monotonic()
            self.last_round_read_store = True
            self.last_connection_error = ""

    def queue_latency(self, seconds: float) -> None:
        self._queue_latency.observe(seconds)

    def queue_depth(self, ready: int, waiting: int, in_hand: int) -> None:
        for state, count in (("ready", ready), ("waiting", waiting), ("in_hand", in_hand)):
            self._queue_keys.labels(state=state).set(count)

    def webhook_answered(self, path: str, seconds: float) -> None:
        self._webhook_seconds.labels(path=path).observe(seconds)


class StatusServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on a background thread."""

    def __init__(
        self,
        metrics: ExecutorMetrics,
        *,
        host: str,
        port: int,
        max_silence_seconds: float,
        watches_synced: Callable[[], bool] = lambda: True,
    ) -> None:
        self._metrics = metrics
        self._max_silence = max_silence_seconds
        self._watches_synced = watches_synced
        handler = _handler_for(self)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="status-server", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> StatusServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def health(self) -> tuple[bool, str]:
        silence = self._metrics.seconds_since_round()
        if silence is None:
            return True, "starting: no round finished yet"
        if silence > self._max_silence:
            return False, f"no round finished for {silence:.0f}s (allowed {self._max_silence:.0f}s)"
        return True, f"last round {silence:.1f}s ago"

    def readiness(self) -> tuple[bool, str]:
        if not self._watches_synced():
            return False, "the watches have not listed yet"
        if self._metrics.seconds_since_round() is None:
            return False, "no round finished yet"
        if not self._metrics.last_round_read_store:
            return False, "the last round could not read the task store"
        if self._metrics.last_connection_error:
            return False, self._metrics.last_connection_error
        return True, "ready"

    def metrics_text(self) -> bytes:
        return generate_latest(self._metrics.registry)


def _handler_for(server: StatusServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Scrapes and probes are not worth a log line each."""

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, server.metrics_text(), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/readyz"):
                ok, why = server.health() if path == "/healthz" else server.readiness()
                self._send(200 if ok else 503, f"{why}\n".encode(), "text/plain; charset=utf-8")
            else:
                self._send(404, b"not found: try /metrics, /healthz or /readyz\n", "text/plain")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler
