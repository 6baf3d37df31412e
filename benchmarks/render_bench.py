"""Rendering cost per example workload: how long one effective workload takes to become manifests.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/render_bench.py``). For each example in
``examples/workload-*.yaml``, on the example cluster profile, one core, sequentially: renders per
second and p50/p99 latency of ``render`` alone (the workload is read and checked once, outside
the timing). No target is set for rendering; the figures size the executor's budget per task.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import sys
import time
from pathlib import Path

import yaml

from podwright.core.render import profile_from_data, render
from podwright.core.workload_documents import read_workload_document
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import Submission

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def example_submissions() -> dict[str, Submission]:
    """Each example workload (the training one without its policies' defaults)."""
    submissions = {}
    for path in sorted(EXAMPLES.glob("workload-*.yaml")):
        submission = read_workload_document(yaml.safe_load(path.read_text())).submission
        if submission.workload_type is not WorkloadType.DISTRIBUTED:
            # The training example leaves its image to the policies.
            spec = {"image": "registry.example.com/app:1", **submission.spec}
            submission = dataclasses.replace(submission, spec=spec)
        submissions[path.stem.removeprefix("workload-")] = submission
    return submissions


def example_profile_data() -> object:
    return yaml.safe_load((EXAMPLES / "cluster-profile.yaml").read_text())


def main(rounds: int = 2_000) -> None:
    profile = profile_from_data(example_profile_data())
    print(f"render, {rounds} rounds per example, one core, Python {sys.version.split()[0]}")
    print(f"{'example':<24} {'renders/s':>10} {'p50 µs':>8} {'p99 µs':>8} {'manifests':>10}")
    for name, submission in example_submissions().items():
        spec = submission.spec
        assert submission.name is not None
        latencies = []
        gc.collect()
        for _ in range(rounds):
            start = time.perf_counter()
            rendering = render(submission.workload_type, submission.name, spec, profile=profile)
            latencies.append(time.perf_counter() - start)
        latencies.sort()
        p50 = statistics.median(latencies) * 1e6
        p99 = latencies[int(len(latencies) * 0.99)] * 1e6
        rate = len(latencies) / sum(latencies)
        print(f"{name:<24} {rate:>10,.0f} {p50:>8.0f} {p99:>8.0f} {len(rendering.manifests):>10}")


if __name__ == "__main__":
    main()
