"""The admission webhook server's own latency: AdmissionReviews at a fixed rate, a trivial handler.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/webhook_server_bench.py [--rate R]
[--seconds S] [--connections C]``). The server (``podwright.adapters.webhook_server``, its
certificate from a ``CertificateKeeper``) runs in a process of its own; this process sends
reviews over ``--connections`` kept-alive HTTPS connections, as an API server does, at ``--rate``
per second in all, on a fixed schedule (open loop: a review is timed from when it was due, so a
slow answer delays the ones after it and counts in their latency too; see ``admission_load.py``).
Prints p50, p99 and the worst latency, and, last, one JSON object with the figures.

Target (issue 31): p99 at most 5 ms at 200 reviews/s on 2 cores. The handler answers at once:
this measures what the server adds; ``webhook_bench.py`` adds podwright's decisions.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.admission_load import (
    TARGET_P99_MS,
    UID,
    Call,
    Routes,
    allow,
    latency_figures,
    print_latency_table,
    run_load,
    server_process,
)

PATH = "/validate"


def routes() -> Routes:
    return {PATH: allow}, ()


def review() -> bytes:
    """A review of a realistic size: a Workload of some twenty fields."""
    spec = {f"field{index}": {"value": "x" * 40, "count": index} for index in range(20)}
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": UID,
            "kind": {"group": "podwright.dev", "version": "v1alpha1", "kind": "Workload"},
            "resource": {"group": "podwright.dev", "version": "v1alpha1", "resource": "workloads"},
            "namespace": "vision",
            "name": "resnet",
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {
                "apiVersion": "podwright.dev/v1alpha1",
                "kind": "Workload",
                "metadata": {"name": "resnet", "namespace": "vision"},
                "spec": {"type": "training", **spec},
            },
            "oldObject": None,
            "dryRun": False,
        },
    }
    return json.dumps(body).encode()


def allowed(response: Mapping[str, Any]) -> str | None:
    return None if response.get("allowed") is True else f"not allowed: {response}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="reviews per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--connections", type=int, default=4)
    options = parser.parse_args()

    with server_process(routes) as (port, bundle):
        share = run_load(
            port,
            bundle,
            [Call(PATH, review(), allowed)],
            rate=options.rate,
            seconds=options.seconds,
            connections=options.connections,
        )
    if share.wrong:
        raise SystemExit(f"{len(share.wrong)} wrong answers, the first: {share.wrong[0]}")
    figures = {
        "reviews": len(share.latencies),
        "rate_per_second": options.rate,
        "connections": options.connections,
        **latency_figures(share.latencies),
        "target_p99_ms": TARGET_P99_MS,
    }
    print_latency_table(figures)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
