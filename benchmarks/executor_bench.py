"""Executor benchmark: tasks from submit to finalize, through the store, the executor and a backend.

1. **Cluster**: N pod tasks (default 5,000) in a SQLite task store, run by one executor against
   the API-server emulator (its own process), with a fake kubelet (another process) that schedules
   each pod, runs it and lets it succeed. The lifecycle is the full one: podwright's finalizer
   injected, removed at finalization, the pod deleted. Reported: throughput (tasks/s from the
   first submit to the last finalize), the executor's API requests per task by verb (counted by
   its own client, so the kubelet's are not in them), the connections its client opened (per
   request: a pool that fits the executor's workers and watches reuses a handful), round latency,
   and the executor's memory (peak RSS growth over the run, store, watch caches and event index
   included).
2. **Local**: 50 tasks on the local backend (each a ``sleep 1`` pod run as a process), submitted at
   once; reported: the submit-to-Running latency per task.

Run: ``python benchmarks/executor_bench.py [--tasks 5000] [--local-tasks 50]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from podwright.adapters.kubernetes import KubernetesClient  # noqa: E402
from podwright.adapters.kubernetes.cluster_port import (  # noqa: E402
    ClusterPort,
    connection_pool_size,
)
from podwright.adapters.local.cluster import LocalCluster  # noqa: E402
from podwright.adapters.sqlite_store import SQLiteTaskStore  # noqa: E402
from podwright.core.lifecycle.phases import Phase  # noqa: E402
from podwright.engine.config import LifecycleConfig  # noqa: E402
from podwright.engine.event_index import EventIndex  # noqa: E402
from podwright.engine.executor import Executor, ExecutorConfig, RoundReport  # noqa: E402
from podwright.engine.plugins import default_plugins  # noqa: E402
from podwright.engine.task_store import NewTask  # noqa: E402

NAMESPACE = "bench"
CONCURRENCY = 16
KUBELET = """
import sys, time
from tests.node_sim import simulate_nodes
with simulate_nodes(sys.argv[1], namespace=sys.argv[2], poll_seconds=0.5):
    sys.stdin.read()
"""


def _pod(command: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"annotations": {"podwright.dev/primary-container": "main"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": "ghcr.io/example/train:1", "command": command}
            ],
        },
    }


def _submit(store: SQLiteTaskStore, task_id: str, backend: str, command: list[str]) -> None:
    store.submit(
        NewTask(
            task_id=task_id,
            workload_type="training",
            name=task_id,
            namespace=NAMESPACE,
            backend=backend,
            workload={},
            effective={},
            manifests=(_pod(command),),
            submitted_at=datetime.now(UTC),
        )
    )


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class _Rounds:
    def __init__(self) -> None:
        self.reports: list[RoundReport] = []

    def round_finished(self, report: RoundReport) -> None:
        self.reports.append(report)


def bench_cluster(count: int, workdir: Path) -> dict[str, Any]:
    emulator = subprocess.Popen(
        [sys.executable, "-m", "tests.k8s_emulator"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    kubelet: subprocess.Popen[str] | None = None
    try:
        assert emulator.stdout is not None
        url = emulator.stdout.readline().strip()
        setup = KubernetesClient.for_host(url)
        setup.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        setup.close()
        kubelet = subprocess.Popen(
            [sys.executable, "-c", KUBELET, url, NAMESPACE],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            text=True,
        )
        requests: Counter[tuple[str, str]] = Counter()
        rss_before = _max_rss_bytes()
        store = SQLiteTaskStore(workdir / "cluster.db")
        events = EventIndex(ttl=timedelta(hours=1), max_per_object=50)
        client = KubernetesClient.for_host(
            url,
            observer=lambda verb, code: requests.update([(verb, code)]),
            pool_size=connection_pool_size(CONCURRENCY, default_plugins()),
        )
        port = ClusterPort(client, default_plugins(), events, namespace=NAMESPACE)
        rounds = _Rounds()
        executor = Executor(
            store,
            port,
            ExecutorConfig(
                backend="kubernetes/bench",
                concurrency=CONCURRENCY,
                round_interval=timedelta(seconds=0.5),
            ),
            LifecycleConfig(inject_finalizer=True, delete_resource_on_finalize=True),
            clock=lambda: datetime.now(UTC),
            sleep=time.sleep,
            events=events,
            observer=rounds,
        )
        started = time.perf_counter()
        for number in range(count):
            _submit(store, f"task-{number:05}", "kubernetes/bench", ["python", "train.py"])
        submitted = time.perf_counter() - started
        while True:
            report = executor.run_round()
            if not report.active_by_phase:
                break
            time.sleep(executor.seconds_until_due())
        elapsed = time.perf_counter() - started
        phases = Counter(record.phase.value for record in store.list_tasks())
        memory = _max_rss_bytes() - rss_before
        connections = client.connections_opened()
        executor.close()
        port.close()
        store.close()
    finally:
        if kubelet is not None:
            kubelet.communicate("", timeout=30)
        emulator.terminate()
        emulator.wait(10)
        if emulator.stdout is not None:
            emulator.stdout.close()
    by_verb: Counter[str] = Counter()
    for (verb, _code), number in requests.items():
        by_verb[verb] += number
    busy = [r.seconds for r in rounds.reports if r.due]
    return {
        "tasks": count,
        "submit_seconds": submitted,
        "seconds": elapsed,
        "tasks_per_second": count / elapsed,
        "phases": dict(phases),
        "requests_per_task": sum(by_verb.values()) / count,
        "requests_per_task_by_verb": {verb: n / count for verb, n in sorted(by_verb.items())},
        "requests_by_code": dict(Counter(code for (_verb, code) in requests.elements())),
        "connections_opened": connections,
        "connections_per_request": connections / max(1, sum(by_verb.values())),
        "rounds": len(rounds.reports),
        "round_p50_seconds": _percentile(busy, 0.5),
        "round_p95_seconds": _percentile(busy, 0.95),
        "round_max_seconds": max(busy),
        "memory_bytes": memory,
        "memory_per_task_bytes": memory / count,
    }


def bench_local(count: int, workdir: Path) -> dict[str, Any]:
    store = SQLiteTaskStore(workdir / "local.db")
    events = EventIndex(ttl=timedelta(hours=1), max_per_object=50)
    cluster = LocalCluster(workdir / "local", events=events)
    executor = Executor(
        store,
        cluster,
        ExecutorConfig(backend="local", concurrency=16, round_interval=timedelta(seconds=0.1)),
        LifecycleConfig(inject_finalizer=True, delete_resource_on_finalize=True),
        clock=lambda: datetime.now(UTC),
        sleep=time.sleep,
        events=events,
    )
    try:
        for number in range(count):
            _submit(store, f"local-{number:03}", "local", ["sleep", "1"])
        while True:
            report = executor.run_round()
            if not report.active_by_phase:
                break
            time.sleep(executor.seconds_until_due())
        latencies = []
        for record in store.list_tasks():
            running = next(e for e in store.history(record.task_id) if e.phase is Phase.RUNNING)
            latencies.append((running.occurred_at - record.task.submitted_at).total_seconds())
        phases = Counter(record.phase.value for record in store.list_tasks())
    finally:
        executor.close()
        cluster.close()
        store.close()
    return {
        "tasks": count,
        "phases": dict(phases),
        "running_p50_seconds": statistics.median(latencies),
        "running_p95_seconds": _percentile(latencies, 0.95),
        "running_max_seconds": max(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--local-tasks", type=int, default=50)
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="podwright-bench-") as directory:
        cluster = bench_cluster(options.tasks, Path(directory))
        local = bench_local(options.local_tasks, Path(directory))
    if options.json:
        print(json.dumps({"cluster": cluster, "local": local}, indent=2))
        return
    print(f"executor benchmark, cluster: {cluster['tasks']} pod tasks against the emulator")
    print(f"  phases:                {cluster['phases']}")
    print(f"  submit to the store:   {cluster['submit_seconds']:.2f} s")
    print(
        f"  submit to finalized:   {cluster['seconds']:.1f} s  "
        f"({cluster['tasks_per_second']:.0f} tasks/s)"
    )
    print(
        f"  API requests per task: {cluster['requests_per_task']:.2f} "
        f"{ {verb: round(n, 2) for verb, n in cluster['requests_per_task_by_verb'].items()} }"
    )
    print(f"  answers by code:       {cluster['requests_by_code']}")
    print(
        f"  connections opened:    {cluster['connections_opened']} "
        f"({cluster['connections_per_request']:.4f} per request)"
    )
    print(
        f"  round latency:         p50 {cluster['round_p50_seconds'] * 1000:.0f} ms, "
        f"p95 {cluster['round_p95_seconds'] * 1000:.0f} ms, "
        f"max {cluster['round_max_seconds'] * 1000:.0f} ms over {cluster['rounds']} rounds"
    )
    print(
        f"  memory:                {cluster['memory_bytes'] / 2**20:.1f} MiB peak RSS growth "
        f"({cluster['memory_per_task_bytes'] / 1024:.1f} KiB per task)"
    )
    print(f"executor benchmark, local: {local['tasks']} 'sleep 1' tasks submitted at once")
    print(f"  phases:                {local['phases']}")
    print(
        f"  submit to Running:     p50 {local['running_p50_seconds'] * 1000:.0f} ms, "
        f"p95 {local['running_p95_seconds'] * 1000:.0f} ms, "
        f"max {local['running_max_seconds'] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
