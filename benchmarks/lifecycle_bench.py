"""Lifecycle engine benchmark: N concurrent tasks against the API-server emulator.

The emulator runs in its own process, so the engine's memory and time are its own. Every task is a
pod launched by the plugin manager through the real Kubernetes adapter, followed through a watch
cache, given one Kubernetes event, driven to Succeeded (as a kubelet would, by status patches the
benchmark sends and subtracts from the counts), and finalized with an injected finalizer and
delete-on-finalize. Reported:

* API requests per task made by the engine over each task's life (target: create, delete, and at
  most one finalizer patch), and per steady-state reconcile round (target: zero);
* the time of one reconcile round over all tasks (target: < 1 s);
* memory per task, watch cache, event index and plugin state included (target: < 20 KB);
* the connections the engine's client opened over the run (target: about one per worker and
  watch, whatever the number of tasks).

Run: ``python benchmarks/lifecycle_bench.py [--tasks 5000]``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import tracemalloc
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from podwright.adapters.kubernetes import EventWatcher, KubernetesClient, Reflector, WatchCache  # noqa: E402
from podwright.engine.config import MANAGED_BY, MANAGED_BY_LABEL, LifecycleConfig  # noqa: E402
from podwright.engine.event_index import EventIndex  # noqa: E402
from podwright.engine.kubernetes_port import PatchType  # noqa: E402
from podwright.engine.plugin import TaskContext  # noqa: E402
from podwright.engine.plugin_manager import PluginManager  # noqa: E402
from podwright.engine.plugins import PodPlugin  # noqa: E402

NAMESPACE = "bench"
WORKERS = 8


def _requests(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/_emulator/requests") as answer:
        counts: dict[str, int] = json.load(answer)
    counts.pop("list", None)
    counts.pop("watch", None)
    return counts


def _task(number: int) -> TaskContext:
    resource = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"annotations": {"podwright.dev/primary-container": "main"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "ghcr.io/example/train:1",
                    "command": ["python", "train.py"],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }
    return TaskContext(f"task-{number:05}", NAMESPACE, resource)


def _wait(predicate: Any, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=5000)
    count = parser.parse_args().tasks

    server = subprocess.Popen(
        [sys.executable, "-m", "tests.k8s_emulator"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        run(url, count)
    finally:
        server.terminate()
        server.wait(10)


def run(url: str, count: int) -> dict[str, Any]:
    client = KubernetesClient.for_host(url)
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    # The kubelet's side: another client, so the engine's pool is not shared.
    kubelet = KubernetesClient.for_host(url)
    config = LifecycleConfig(inject_finalizer=True, delete_resource_on_finalize=True)
    plugin = PodPlugin()
    tasks = [_task(n) for n in range(count)]
    states: list[dict[str, Any] | None] = [None] * count

    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    cache = WatchCache(plugin.trim)
    index = EventIndex(ttl=config.event_ttl, max_per_object=config.events_per_object)
    pods = Reflector(
        client,
        "v1",
        "Pod",
        cache,
        namespace=NAMESPACE,
        label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}",
    ).start()
    events = Reflector(
        client,
        "events.k8s.io/v1",
        "Event",
        EventWatcher(index),
        namespace=NAMESPACE,
        field_selector="regarding.kind=Pod",
    ).start()
    client.add_cache("v1", "Pod", cache)
    pods.wait_synced(30)
    events.wait_synced(30)
    manager = PluginManager(
        plugin, client, config, events=index, sleep=time.sleep, rng=random.Random(1)
    )

    def reconcile(number: int) -> str:
        transition = manager.handle(tasks[number], states[number], datetime.now(UTC))
        if transition.state_changed:
            states[number] = transition.encoded_state()
        return transition.info.phase.value

    started = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        phases = list(pool.map(reconcile, range(count)))
    launch_seconds = time.perf_counter() - started
    assert phases.count("Queued") == count, set(phases)
    _wait(lambda: len(cache) == count, "the watch cache to see every pod")

    # The kubelet and the scheduler: one event and a terminal status per pod.
    def drive(number: int) -> None:
        name = tasks[number].task_id
        pod = cache.get(NAMESPACE, name)
        assert pod is not None
        kubelet.create(
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.scheduled", "namespace": NAMESPACE},
                "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "reportingController": "default-scheduler",
                "reportingInstance": "bench",
                "action": "Binding",
                "reason": "Scheduled",
                "type": "Normal",
                "note": f"Successfully assigned {NAMESPACE}/{name} to node-{number % 100}",
                "regarding": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": name,
                    "namespace": NAMESPACE,
                    "uid": pod["metadata"]["uid"],
                },
            }
        )
        kubelet.patch_status(
            manager.object_ref(tasks[number]),
            {
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": "main",
                            "ready": True,
                            "restartCount": 0,
                            "image": "x",
                            "imageID": "",
                            "state": {"running": {"startedAt": "2026-11-21T10:00:00Z"}},
                        }
                    ],
                }
            },
            PatchType.MERGE,
        )

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(drive, range(count)))
    _wait(lambda: len(index) == count, "the event index to hold every event")
    _wait(
        lambda: all(
            (cache.get(NAMESPACE, t.task_id) or {}).get("status", {}).get("phase") == "Running"
            for t in tasks
        ),
        "the watch cache to see every status",
    )
    for number in range(count):  # attach the events, record Running
        reconcile(number)
    memory = tracemalloc.get_traced_memory()[0] - baseline
    tracemalloc.stop()

    before_rounds = _requests(url)
    rounds = []
    for _ in range(5):
        started = time.perf_counter()
        for number in range(count):
            reconcile(number)
        rounds.append(time.perf_counter() - started)
    steady_requests = sum(_requests(url).values()) - sum(before_rounds.values())

    # Finish: the primary container exits 0; the engine sees Success and finalizes.
    def finish(number: int) -> None:
        kubelet.patch_status(
            manager.object_ref(tasks[number]),
            {
                "status": {
                    "phase": "Succeeded",
                    "containerStatuses": [
                        {
                            "name": "main",
                            "ready": False,
                            "restartCount": 0,
                            "image": "x",
                            "imageID": "",
                            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                        }
                    ],
                }
            },
            PatchType.MERGE,
        )

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(finish, range(count)))
    _wait(
        lambda: all(
            (cache.get(NAMESPACE, t.task_id) or {}).get("status", {}).get("phase") == "Succeeded"
            for t in tasks
        ),
        "the watch cache to see every pod succeed",
    )
    phases = [reconcile(number) for number in range(count)]
    assert phases.count("Success") == count, set(phases)
    started = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(lambda number: manager.finalize(tasks[number]), range(count)))
    finalize_seconds = time.perf_counter() - started
    pods.stop()
    events.stop()
    connections = client.connections_opened()

    # Take away the kubelet's requests (an event and two statuses per pod) and the namespace.
    engine = _requests(url)
    engine["patch"] = engine.get("patch", 0) - 2 * count
    engine["create"] = engine.get("create", 0) - count - 1
    engine_total = sum(engine.values()) - steady_requests

    rounds.sort()
    results = {
        "tasks": count,
        "launch_seconds": launch_seconds,
        "round_median_seconds": rounds[len(rounds) // 2],
        "round_best_seconds": rounds[0],
        "steady_state_requests": steady_requests,
        "finalize_seconds": finalize_seconds,
        "requests_per_task": engine_total / count,
        "requests_per_task_by_verb": {verb: n / count for verb, n in sorted(engine.items()) if n},
        "memory_per_task_bytes": memory / count,
        "connections_opened": connections,
    }
    _print(results)
    return results


def _print(results: dict[str, Any]) -> None:
    count = results["tasks"]
    print(
        f"lifecycle benchmark: {count} concurrent pod tasks against the emulator (separate process)"
    )
    print(
        f"  launch (create, {WORKERS} threads):        {results['launch_seconds']:6.2f} s  ({count / results['launch_seconds']:,.0f} tasks/s)"
    )
    print(
        f"  reconcile round over all {count}:      median {results['round_median_seconds'] * 1000:.0f} ms, best {results['round_best_seconds'] * 1000:.0f} ms (target < 1000 ms)"
    )
    print(f"  API requests per steady-state round:  {results['steady_state_requests']} (target 0)")
    print(f"  finalize (patch + delete, {WORKERS} threads): {results['finalize_seconds']:6.2f} s")
    print(
        f"  engine API requests per task, whole life: {results['requests_per_task']:.2f} {results['requests_per_task_by_verb']}"
    )
    print(
        "    (target: create, delete and at most one finalizer patch; list/watch excluded: one each per reflector)"
    )
    print(
        f"  memory per task (cache, events, state): {results['memory_per_task_bytes'] / 1024:.1f} KiB (target < 20 KB)"
    )
    print(
        f"  connections the engine opened:        {results['connections_opened']} "
        f"({WORKERS} workers and 2 watches)"
    )


if __name__ == "__main__":
    main()
