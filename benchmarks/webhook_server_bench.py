"""The admission webhook server's own latency: AdmissionReviews at a fixed rate, a trivial handler.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/webhook_server_bench.py [--rate R]
[--seconds S] [--connections C]``). The server (``podwright.adapters.webhook_server``, its
certificate from a ``CertificateKeeper``) runs in a process of its own; this process sends
reviews over ``--connections`` kept-alive HTTPS connections, as an API server does, at ``--rate``
per second in all, on a fixed schedule (open loop: a review is timed from when it was due, so a
slow answer delays the ones after it and counts in their latency too). Prints p50, p99 and the
worst latency, and, last, one JSON object with the figures.

Target (issue 18): p99 at most 10 ms at 200 reviews/s on 2 cores. The handler answers at once:
this measures what the server adds; ``podwright webhook``'s own benchmark adds the decisions.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import multiprocessing
import ssl
import statistics
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from podwright.adapters.certificates import CertificateKeeper
from podwright.adapters.webhook_server import WebhookServer

HOST = "127.0.0.1"
TARGET_P99_MS = 10.0


def allow(review: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True},
    }


def serve(pipe: Connection) -> None:
    """The server process: tells its port and CA bundle, serves until told to stop."""
    keeper = CertificateKeeper([HOST], clock=lambda: datetime.datetime.now(datetime.UTC))
    keeper.refresh()
    with WebhookServer({"/validate": allow}, keeper, host=HOST) as server:
        pipe.send((server.address[1], keeper.ca_bundle))
        pipe.recv()


def review(uid: str) -> bytes:
    """A review of a realistic size: a Workload of some twenty fields."""
    spec = {f"field{index}": {"value": "x" * 40, "count": index} for index in range(20)}
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "podwright.dev", "version": "v1alpha1", "kind": "Workload"},
            "resource": {"group": "podwright.dev", "version": "v1alpha1", "resource": "workloads"},
            "namespace": "vision",
            "name": uid,
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "podwright.dev/v1alpha1",
                "kind": "Workload",
                "metadata": {"name": uid, "namespace": "vision"},
                "spec": {"type": "training", **spec},
            },
            "oldObject": None,
            "dryRun": False,
        },
    }
    return json.dumps(body).encode()


def load(
    port: int, bundle: bytes, *, rate: float, seconds: float, index: int, connections: int
) -> list[float]:
    """One connection's share of the schedule; the latency of each review, in milliseconds."""
    context = ssl.create_default_context(cadata=bundle.decode())
    connection = http.client.HTTPSConnection(HOST, port, context=context, timeout=10)
    interval = connections / rate
    start = time.perf_counter() + 0.5 + index * (1 / rate)
    latencies = []
    for sent in range(int(seconds * rate / connections)):
        due = start + sent * interval
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        connection.request(
            "POST",
            "/validate?timeout=5s",
            review(f"{index}-{sent}"),
            {"Content-Type": "application/json"},
        )
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"answered {response.status}")
        latencies.append((time.perf_counter() - due) * 1000)
    connection.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="reviews per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--connections", type=int, default=4)
    options = parser.parse_args()

    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(theirs,), daemon=True)
    server.start()
    port, bundle = ours.recv()
    results: list[list[float]] = [[] for _ in range(options.connections)]

    def run(index: int) -> None:
        results[index] = load(
            port,
            bundle,
            rate=options.rate,
            seconds=options.seconds,
            index=index,
            connections=options.connections,
        )

    threads = [threading.Thread(target=run, args=(index,)) for index in range(options.connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ours.send("stop")
    server.join(timeout=15)

    latencies = sorted(latency for share in results for latency in share)
    figures = {
        "reviews": len(latencies),
        "rate_per_second": options.rate,
        "connections": options.connections,
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 2),
        "max_ms": round(latencies[-1], 2),
        "target_p99_ms": TARGET_P99_MS,
    }
    print(f"{'reviews':>10} {'rate/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    print(
        f"{figures['reviews']:>10} {options.rate:>8.0f} {figures['p50_ms']:>8} "
        f"{figures['p99_ms']:>8} {figures['max_ms']:>8}"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
