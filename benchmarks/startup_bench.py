"""How long podwright's commands take to start, as a multiple of a bare Python start.

Run: ``make bench`` (or ``.venv/bin/python benchmarks/startup_bench.py [--runs N]``). Every
command below is started ``--runs`` times (default 21), interleaved with the others so that a
passing load on the machine touches them all alike, and the median wall time of each is divided
by the median of ``python -c pass`` measured in the same run. Prints a table and, last, one JSON
object with the figures.

Targets (issue 16): ``--version`` and ``--help`` at most 6x a bare start, ``policy evaluate`` of
an example at most 15x. A command's cost is what it imports: the entry point loads a command's
module only when that command runs, and the Kubernetes client, its models and the schema
validator only where they are used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PODWRIGHT = str(Path(sys.executable).with_name("podwright"))

POLICIES = [
    str(EXAMPLES / "policies" / name)
    for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
]
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "python -c pass": ([sys.executable, "-c", "pass"], None),
    "podwright --version": ([PODWRIGHT, "--version"], 6.0),
    "podwright --help": ([PODWRIGHT, "--help"], 6.0),
    "podwright policy evaluate": (
        [
            PODWRIGHT,
            "policy",
            "evaluate",
            "--workload",
            str(EXAMPLES / "workload-training.yaml"),
            "--assets",
            str(EXAMPLES / "assets.yaml"),
            *POLICIES,
        ],
        15.0,
    ),
    "podwright render": (
        [PODWRIGHT, "render", "--workload", str(EXAMPLES / "workload-distributed-pytorch.yaml")],
        None,
    ),
}
BASELINE = "python -c pass"


def time_once(argv: list[str]) -> float:
    """Wall seconds from spawning ``argv`` to its exit (it must succeed)."""
    started = time.perf_counter()
    completed = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, cwd=ROOT
    )
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {completed.returncode}: {completed.stderr!r}")
    return elapsed


def measure(runs: int) -> dict[str, object]:
    """Median seconds per command over ``runs`` interleaved starts, and ratios to the baseline."""
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for argv, _target in COMMANDS.values():
        time_once(argv)  # warm the page cache once, outside the samples
    for _ in range(runs):
        for name, (argv, _target) in COMMANDS.items():
            samples[name].append(time_once(argv))
    baseline = statistics.median(samples[BASELINE])
    figures: dict[str, object] = {"runs": runs, "cpus": os.cpu_count()}
    for name, (_argv, target) in COMMANDS.items():
        median = statistics.median(samples[name])
        figures[name] = {
            "median_ms": round(median * 1000, 1),
            "p90_ms": round(_p90(samples[name]) * 1000, 1),
            "ratio": round(median / baseline, 2),
            "target_ratio": target,
            "met": None if target is None else median / baseline <= target,
        }
    return figures


def _p90(samples: list[float]) -> float:
    if len(samples) < 2:
        return samples[0]
    return statistics.quantiles(samples, n=10)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="starts per command")
    options = parser.parse_args()
    if not os.access(PODWRIGHT, os.X_OK):
        raise SystemExit(f"{PODWRIGHT} not found: run this with the virtualenv's python")
    figures = measure(options.runs)
    print(f"start-up time, median of {options.runs} starts each ({figures['cpus']} CPUs)")
    print(f"{'command':<28} {'median':>9} {'p90':>9} {'ratio':>7}  target")
    for name in COMMANDS:
        row = figures[name]
        assert isinstance(row, dict)
        target = "" if row["target_ratio"] is None else f"<= {row['target_ratio']:g}x"
        verdict = "" if row["met"] is None else ("met" if row["met"] else "MISSED")
        print(
            f"{name:<28} {row['median_ms']:>7.1f}ms {row['p90_ms']:>7.1f}ms "
            f"{row['ratio']:>6.2f}x  {target} {verdict}"
        )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
