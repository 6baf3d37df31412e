"""Operator benchmark: N Workloads from create to Running and to finalized, run by
``podwright operator``.

Four processes, each with its own memory and CPU: the API-server emulator (``tests.k8s_emulator``,
which also counts the requests it serves by resource, so every request can be told whose it is),
the node simulator (``tests.node_sim``: nodes with room for every pod at once, whose kubelet runs
each pod about a second and lets it succeed, as the Workload's ``spec.annotations`` put on its pod
say), the operator (``podwright operator --no-webhooks --watch-namespace NS``, a 1 s round
interval, as deployed) and this one, which creates the Workloads from a few threads as fast as the
API server takes them and then lists them once a second until every one is Running (or past it)
and every one is finalized and released. With ``--kubeconfig`` the same runs against a real
cluster (its own namespace, podwright's CRDs and PriorityClasses created only when missing, the
node simulator against it; the cluster's scheduler binds the pods to the simulated nodes, which
only the benchmark's pods select).

Reported (``--json`` for the figures alone):

* creation time, time to all Running and to all finalized (from the first create), throughput;
* per Workload, the lag of each step (created -> submitted -> Running -> completed -> finalized),
  from the Workloads' own records (whole seconds, as the API server writes times);
* the operator's API requests per Workload by verb and code (its ``/metrics``), and its writes
  per Workload (status updates, and the others: creates, patches, Events), the leader
  election's Lease writes left out (on the emulator counted by resource; on a real cluster, a
  Lease renewal is a read and an update, and the operator reads nothing else); on the emulator,
  every request of the run by resource, so each figure is checked against the other;
* the steady window: the operator's requests over 10 s after everything finished (the leader
  election's Lease renewals, and watches started again after the server ended them, told apart:
  they are no Workload's requests);
* queue latency p50/p95/p99 from ``podwright_operator_queue_latency_seconds`` (interpolated
  linearly within the histogram's buckets, as Prometheus' ``histogram_quantile``; the run's
  only): from a Workload's key becoming ready in the operator's work queue (a change told, or
  its task due) to a worker taking it; and the same once every Workload was submitted (the
  burst of new ones absorbed, the operator following their tasks);
* the operator's memory (VmRSS before the first Workload and at the end, VmHWM) per Workload, and
  each process's CPU time (who used the machine's cores);
* the phases at the end.

On the emulator, a cost model (``tests/k8s_emulator/cost_model.py``; ``--no-cost-model`` leaves
it out) charges what a real control plane does: a latency per write in a bounded number of slots,
and the controllers' client rate limits (``--controller-qps``/``--controller-burst``, the
controller manager's ``--kube-api-qps``/``--kube-api-burst``); its defaults
(:data:`BENCH_COST_MODEL`) are calibrated against a real cluster (the README). After the
operator's run (the operator stopped), the floor: the same N Jobs ``podwright render`` makes of
the Workload, created straight from as many threads, timed to all Running (a pod of each Running
or past it) and all finished; the operator's figures are printed as ratios of it (``--no-floor``
skips it).

``--profile DIR`` samples the operator, the emulator and the node simulator with ``py-spy`` (its
``--py-spy`` path, else ``py-spy`` on PATH) for the whole run and prints each one's hottest
functions; the figures of a profiled run are slowed by the sampling.

Run: ``python benchmarks/operator_bench.py [--workloads 5000] [--kubeconfig K] [--json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.k8s_emulator.cost_model import (  # noqa: E402
    CostModel,
    add_cost_model_arguments,
    cost_model_from_arguments,
)

from podwright import api  # noqa: E402
from podwright.adapters.kubernetes import KubernetesClient, connect  # noqa: E402
from podwright.adapters.kubernetes.reflector import Reflector  # noqa: E402
from podwright.core.cluster_resources import (  # noqa: E402
    API_VERSION,
    WORKLOAD_FINALIZER,
    WORKLOAD_KIND,
)
from podwright.core.crds import custom_resource_definitions  # noqa: E402
from podwright.engine.kubernetes_port import (  # noqa: E402
    AlreadyExistsError,
    KubernetesError,
    NotFoundError,
    ObjectRef,
)
from podwright.engine.workload_tasks import record_of  # noqa: E402

NODE_TYPE_LABEL = "podwright.dev/node-type"
"""The label the default cluster profile turns a Workload's ``nodeType`` into (a nodeSelector)."""
NODE_TYPE = "podwright-bench-sim"
"""The benchmark's pods select the simulated nodes by it (on a real cluster, only them)."""
PODS_PER_NODE = 500
RUN_SECONDS = "1"
LEASE = "podwright-operator"
STEADY_SECONDS = 10.0
PRIORITY_CLASSES = ROOT / "deploy" / "priority-classes.yaml"
TERMINAL = {"Success", "PermanentFailure", "RetryableFailure", "SystemRetryableFailure", "Aborted"}
RUNNING_OR_PAST = TERMINAL | {"Running"}
WRITES = ("create", "patch", "update", "delete")
BENCH_COST_MODEL = CostModel(
    write_latency=0.005, max_writes_in_flight=8, controller_qps=100.0, controller_burst=200
)
"""The emulator's costs by default (``--cost-model``), calibrated against a real control plane
(the README's operator benchmark): the controller manager at ``--kube-api-qps=100
--kube-api-burst=200``, as the benchmark's real cluster ran it."""

EMULATOR = """
import json, sys, threading
from collections import Counter
from tests.k8s_emulator import server

counts, lock = Counter(), threading.Lock()
dispatch, watch = server._Handler._dispatch, server._Handler._watch

def counted_dispatch(self, method, verb, resource, *, namespace, name, subresource, query, body):
    what = resource.plural + (f"/{subresource}" if subresource else "")
    if resource.kind == "Event" and method == "POST" and isinstance(body, dict):
        what += "(" + str((body.get("regarding") or {}).get("kind")) + ")"
    if resource.kind == "Lease" and namespace:
        what += "(" + ("node" if namespace == "kube-node-lease" else "operator") + ")"
    with lock:
        counts[f"{verb} {what}"] += 1
    return dispatch(
        self, method, verb, resource, namespace=namespace, name=name,
        subresource=subresource, query=query, body=body,
    )

def counted_watch(self, resource, namespace, query):
    with lock:
        counts[f"watch {resource.plural}"] += 1
    return watch(self, resource, namespace, query)

server._Handler._dispatch = counted_dispatch
server._Handler._watch = counted_watch
from tests.k8s_emulator.cost_model import CostModel

cost = json.loads(sys.argv[2])
emulator = server.Emulator(cost_model=None if cost is None else CostModel(**cost))
if sys.argv[1] == "off":  # the garbage collector's passes left out (a diagnosis: --emulator-gc)
    for controller in emulator.control_plane.controllers:
        if controller.name == "garbage-collector":
            controller.sync = lambda view, key, now: None
emulator.start()
print(emulator.url, flush=True)
for line in sys.stdin:
    with lock:
        print(json.dumps(dict(counts)), flush=True)
"""

SIMULATOR = """
import json, sys, time
from podwright.adapters.kubernetes import KubernetesClient, connect
from tests.node_sim import NodeShape, NodeSimulator

kubeconfig, namespace, shapes, bind_after = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
nodes = [NodeShape(shape["capacity"], shape["labels"]) for shape in json.loads(shapes)]
api = connect(kubeconfig, pool_size=8)
client = KubernetesClient(api)
simulator = NodeSimulator(
    client, api, nodes=nodes, namespace=namespace, bind_after=float(bind_after), poll_seconds=0.5
)
with simulator:
    print("ready", flush=True)
    while sys.stdin.readline():  # any line: still there; end of input: stop
        if simulator._failure is not None:
            break
    failure = simulator._failure
if failure is not None:
    sys.exit(f"the node simulator failed: {failure!r}")
"""


# The scenario ---------------------------------------------------------------------------------


def workload(namespace: str, name: str) -> dict[str, Any]:
    """A tiny training Workload whose pod runs about a second on a simulated node and succeeds."""
    return {
        "apiVersion": API_VERSION,
        "kind": WORKLOAD_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "training",
            "image": "busybox:1.36",
            "command": f"sleep {RUN_SECONDS}",
            "nodeType": NODE_TYPE,
            "compute": {
                "cpuCoreRequest": 0.1,
                "cpuMemoryRequest": "64Mi",
                "cpuMemoryLimit": "128Mi",
            },
            "annotations": [
                {"name": "sim.podwright.dev/run-seconds.main", "value": RUN_SECONDS},
                {"name": "sim.podwright.dev/exit-code.main", "value": "0"},
            ],
        },
    }


def node_shapes(workloads: int) -> list[dict[str, Any]]:
    """Enough simulated nodes for every pod at once (cpu 100m and 64Mi each), and one more."""
    count = math.ceil(workloads / PODS_PER_NODE) + 1
    capacity = {
        "cpu": "64",
        "memory": "64Gi",
        "pods": str(PODS_PER_NODE),
        "ephemeral-storage": "1Ti",
    }
    return [{"capacity": capacity, "labels": {NODE_TYPE_LABEL: NODE_TYPE}}] * count


def install(client: KubernetesClient, namespace: str) -> None:
    """podwright's CRDs and the default profile's PriorityClasses, each only when missing, and
    the benchmark's namespace."""
    crds = cast(list[dict[str, Any]], custom_resource_definitions())
    for crd in crds:
        ref = ObjectRef(crd["apiVersion"], crd["kind"], "", crd["metadata"]["name"])
        try:
            client.get(ref)
        except NotFoundError:
            client.apply(crd, field_manager="podwright-bench")
    for crd in crds:
        ref = ObjectRef(crd["apiVersion"], crd["kind"], "", crd["metadata"]["name"])
        _until(lambda ref=ref: _established(client.get(ref)), 60, f"CRD {ref.name} established")
    for priority_class in yaml.safe_load_all(PRIORITY_CLASSES.read_text()):
        with contextlib.suppress(AlreadyExistsError):
            client.create(priority_class)
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _until(check: Any, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise TimeoutError(f"waited {seconds:g} s for {what}")


# The processes --------------------------------------------------------------------------------


class Emulator:
    """The emulator in its own process, counting the requests it serves by resource."""

    def __init__(self, garbage_collector: bool = True, cost_model: CostModel | None = None) -> None:
        cost = None if cost_model is None else dataclasses.asdict(cost_model)
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-c", EMULATOR, "on" if garbage_collector else "off"),
                json.dumps(cost),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url:
            raise RuntimeError("the emulator did not start")

    def counts(self) -> Counter[str]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        return Counter(json.loads(self.process.stdout.readline()))

    def close(self) -> None:
        _close_input(self.process)
        _end(self.process, 10)
        if self.process.stdout is not None:
            self.process.stdout.close()


class Simulator:
    """The node simulator in its own process."""

    def __init__(self, kubeconfig: Path, namespace: str, workloads: int, real: bool) -> None:
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-c", SIMULATOR, str(kubeconfig), namespace),
                *(json.dumps(node_shapes(workloads)), "5" if real else "0"),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the node simulator did not start")

    def alive(self) -> bool:
        """Whether it still runs (its loop stops at its first failure: then it exits)."""
        if self.process.poll() is not None:
            return False
        with contextlib.suppress(BrokenPipeError):
            assert self.process.stdin is not None
            self.process.stdin.write("\n")
            self.process.stdin.flush()
        return self.process.poll() is None

    def close(self) -> None:
        _close_input(self.process)
        _end(self.process, 60)
        if self.process.stdout is not None:
            self.process.stdout.close()


class Operator:
    """``podwright operator`` as deployed (1 s rounds), with no webhooks, in its own process."""

    _METRICS = re.compile(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")

    def __init__(self, kubeconfig: Path, namespace: str, log: Path) -> None:
        self.log_path = log
        self._log: IO[bytes] = log.open("wb")
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "podwright", "operator", "--kubeconfig", str(kubeconfig)),
                *("--namespace", namespace, "--watch-namespace", namespace),
                *("--identity", "bench", "--lease-name", LEASE, "--no-webhooks"),
                *("--round-interval", "1s", "--metrics-address", "127.0.0.1:0"),
            ],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        port = _until(self._port, 60, "the operator's metrics address")
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"
        _until(lambda: self.metrics().get("podwright_operator_leader") == 1.0, 60, "the lease")

    def _port(self) -> int | None:
        if self.process.poll() is not None:
            raise RuntimeError(f"the operator exited:\n{self.log_path.read_text()}")
        found = self._METRICS.search(self.log_path.read_text(errors="replace"))
        return int(found.group(1)) if found else None

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(self.metrics_url, timeout=30) as answer:
            return parse_metrics(answer.read().decode())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _end(self.process, 60)
        self._log.close()


def _close_input(process: subprocess.Popen[str]) -> None:
    if process.stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()


def _end(process: subprocess.Popen[Any], seconds: float) -> None:
    """Wait for ``process`` to exit, then SIGTERM, then SIGKILL: cleaning up never fails the
    run whose figures are already taken."""
    for stop in (None, process.terminate, process.kill):
        if stop is not None:
            stop()
        try:
            process.wait(seconds)
            return
        except subprocess.TimeoutExpired:
            continue


class Profiler:
    """py-spy sampling one process for the whole run (raw collapsed stacks)."""

    def __init__(self, py_spy: str, pid: int, output: Path) -> None:
        self.output = output
        self.process = subprocess.Popen(
            [
                *(py_spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "20"),
                *("--nonblocking", "--gil", "--threads", "--output", str(output)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        _end(self.process, 60)


# Reading what the processes tell --------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text: ``name{labels}`` -> value (labels as exposed, sorted by the client)."""
    samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        found = _SAMPLE.match(line)
        if found:
            samples[found.group(1) + (found.group(2) or "")] = float(found.group(3))
    return samples


def requests_of(metrics: Mapping[str, float]) -> Counter[tuple[str, str]]:
    """The operator's API requests by (verb, code)."""
    counts: Counter[tuple[str, str]] = Counter()
    pattern = re.compile(r'^podwright_kubernetes_requests_total\{code="([^"]*)",verb="([^"]*)"\}$')
    for key, value in metrics.items():
        found = pattern.match(key)
        if found:
            counts[(found.group(2), found.group(1))] += int(value)
    return counts


def queue_latency_buckets(metrics: Mapping[str, float]) -> list[tuple[float, float]]:
    """The operator's queue latency histogram's cumulative buckets: (upper bound, count)."""
    pattern = re.compile(r'^podwright_operator_queue_latency_seconds_bucket\{le="([^"]+)"\}$')
    buckets = []
    for key, value in metrics.items():
        found = pattern.match(key)
        if found:
            buckets.append((float(found.group(1)), value))
    return sorted(buckets)


def histogram_quantile(fraction: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' ``histogram_quantile``: linear interpolation within the bucket the rank falls
    in (the lowest bucket from 0; a rank in the +Inf bucket answers the highest finite bound)."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = fraction * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count
            )
        lower_bound, lower_count = bound, count
    return buckets[-1][0]


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _cpu_seconds(pid: int) -> float:
    """user + system CPU time of a running process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def _seconds(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        "max": ordered[-1],
    }


@dataclass
class Progress:
    """When the Workloads got where, in seconds from the first create."""

    polls: int = 0
    list_seconds: list[float] = field(default_factory=list)
    all_running: float | None = None
    all_finalized: float | None = None
    all_released: float | None = None
    timeline: list[dict[str, Any]] = field(default_factory=list)
    finalized_at: dict[str, float] = field(default_factory=dict)
    """When each Workload was first seen finalized (epoch seconds): a finalization is a patch of
    its metadata, which no time of its status records."""

    def note(self, states: Mapping[str, tuple[str, bool, bool]], now: float, count: int) -> bool:
        """Note where the Workloads are (name -> phase, finalized, released); whether every one
        is finalized and released."""
        seen = time.time()
        for name, (_phase, final, _released) in states.items():
            if final:
                self.finalized_at.setdefault(name, seen)
        phases = Counter(phase for phase, _finalized, _released in states.values())
        running = sum(phase in RUNNING_OR_PAST for phase, _f, _r in states.values())
        finalized = sum(final for _phase, final, _released in states.values())
        released = sum(released for _phase, _finalized, released in states.values())
        self.timeline.append(
            {"t": round(now, 1), "running_or_past": running, "finalized": finalized, **phases}
        )
        if running == count and self.all_running is None:
            self.all_running = now
        if finalized == count and self.all_finalized is None:
            self.all_finalized = now
        if released == count and self.all_released is None:
            self.all_released = now
        return released == count


def state_of(obj: Mapping[str, Any]) -> tuple[str, bool, bool]:
    """A Workload's phase, whether its task is finalized, and whether it is also released."""
    status = obj.get("status") or {}
    try:
        record = record_of(obj)
    except ValueError:
        record = None
    finalized = record is not None and record.finalized
    held = WORKLOAD_FINALIZER in ((obj.get("metadata") or {}).get("finalizers") or [])
    return status.get("phase") or "Pending", finalized, finalized and not held


class Tracker:
    """The benchmark's own watch of the Workloads (a reflector's handler): each one's state, as
    soon as the API server has it, for the price of one more watch stream."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._states: dict[str, tuple[str, bool, bool]] = {}

    def replace(self, objects: list[dict[str, Any]]) -> None:
        with self._lock:
            self._states = {obj["metadata"]["name"]: state_of(obj) for obj in objects}

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if event_type == "DELETED":
                self._states.pop(obj["metadata"]["name"], None)
            else:
                self._states[obj["metadata"]["name"]] = state_of(obj)

    def states(self) -> dict[str, tuple[str, bool, bool]]:
        with self._lock:
            return dict(self._states)


# The floor ------------------------------------------------------------------------------------


def floor_job(namespace: str, name: str) -> dict[str, Any]:
    """The Job ``podwright render`` makes of the benchmark's Workload (the default profile)."""
    (workload_,) = api.load_workloads(workload(namespace, name))
    (job,) = api.prepare(workload_, namespace=namespace).rendering.manifests
    return job


class Reached:
    """A reflector's handler: the Jobs some object of theirs has shown in a state, once
    (``job_of`` names an object's Job, None when it has none; ``reached`` says whether the
    object is in the state). It only grows: what the floor times has happened once."""

    def __init__(
        self,
        job_of: Callable[[Mapping[str, Any]], str | None],
        reached: Callable[[Mapping[str, Any]], bool],
    ) -> None:
        self._job_of = job_of
        self._reached = reached
        self._jobs: set[str] = set()
        self._lock = threading.Lock()

    def replace(self, objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            self.apply("ADDED", obj)

    def apply(self, event_type: str, obj: dict[str, Any]) -> None:
        job = self._job_of(obj)
        if job is not None and event_type != "DELETED" and self._reached(obj):
            with self._lock:
                self._jobs.add(job)

    def jobs(self) -> set[str]:
        with self._lock:
            return set(self._jobs)


def _owning_job(pod: Mapping[str, Any]) -> str | None:
    owners = pod["metadata"].get("ownerReferences") or []
    return next((str(o["name"]) for o in owners if o.get("kind") == "Job"), None)


def _running_or_past(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")


def _job_finished(job: Mapping[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions
    )


def floor(
    client: KubernetesClient,
    namespace: str,
    *,
    count: int,
    clients: int,
    timeout: float,
    poll_seconds: float = 0.1,
) -> dict[str, Any]:
    """What the cluster itself costs: ``count`` Jobs (:func:`floor_job`, named ``floor-N``)
    created straight from ``clients`` threads, timed (from the first create) until a pod of each
    is Running or past it, and until each has finished."""
    running = Reached(_owning_job, _running_or_past)
    finished = Reached(lambda job: str(job["metadata"]["name"]), _job_finished)
    reflectors = [
        Reflector(client, "v1", "Pod", running, namespace=namespace),
        Reflector(client, "batch/v1", "Job", finished, namespace=namespace),
    ]
    try:
        for reflector in reflectors:
            if not reflector.start().wait_synced(60):
                raise RuntimeError(f"the floor's watch: {reflector.error}")
        names = {f"floor-{number:05}" for number in range(count)}
        started = time.time()
        _create_all(
            client, lambda number: floor_job(namespace, f"floor-{number:05}"), count, clients
        )
        created = time.time() - started
        all_running = all_finished = None
        while all_finished is None and time.time() - started < timeout:
            now = time.time() - started
            done = finished.jobs() & names
            if all_running is None and names <= running.jobs() | done:
                all_running = now
            if done == names:
                all_finished = now
            else:
                time.sleep(poll_seconds)
    finally:
        for reflector in reflectors:
            reflector.stop()
    return {
        "jobs": count,
        "create_seconds": created,
        "all_running_seconds": all_running,
        "all_finished_seconds": all_finished,
    }


def ratio(value: float | None, floor_value: float | None) -> float | None:
    return None if value is None or not floor_value else value / floor_value


# The run --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    workloads: int = 5000
    clients: int = 4
    kubeconfig: Path | None = None
    timeout: float = 900.0
    poll_seconds: float = 1.0
    progress: str = "watch"
    profile: Path | None = None
    py_spy: str | None = None
    emulator_gc: bool = True
    cost_model: CostModel | None = None
    """What the emulator charges (``tests/k8s_emulator/cost_model.py``); None: nothing."""
    floor: bool = True
    """Time the same Jobs created straight, after the operator's run (the floor)."""


def run(options: Options, workdir: Path) -> dict[str, Any]:
    """The benchmark (see the module's docstring); its figures."""
    with contextlib.ExitStack() as stack:
        emulator: Emulator | None = None
        if options.kubeconfig is None:
            emulator = Emulator(options.emulator_gc, options.cost_model)
            stack.callback(emulator.close)
            kubeconfig = workdir / "kubeconfig"
            kubeconfig.write_text(_kubeconfig(emulator.url))
            namespace = "podwright-bench"
        else:
            kubeconfig = options.kubeconfig
            namespace = f"podwright-bench-{uuid.uuid4().hex[:6]}"
        client = KubernetesClient(connect(str(kubeconfig), pool_size=options.clients + 4))
        stack.callback(client.close)
        install(client, namespace)
        if options.kubeconfig is not None:
            stack.callback(_delete_namespace, client, namespace)
        simulator = Simulator(kubeconfig, namespace, options.workloads, emulator is None)
        stack.callback(simulator.close)
        operator = Operator(kubeconfig, namespace, workdir / "operator.log")
        stack.callback(operator.stop)
        profilers = _profilers(options, stack, operator, emulator, simulator)
        figures = _measure(
            options=options,
            client=client,
            namespace=namespace,
            emulator=emulator,
            simulator=simulator,
            operator=operator,
            profilers=profilers,
        )
        if options.floor:
            operator.stop()  # the floor is the cluster's alone
            served_before = emulator.counts() if emulator is not None else Counter()
            figures["floor"] = floor(
                client,
                namespace,
                count=options.workloads,
                clients=options.clients,
                timeout=options.timeout,
            )
            if emulator is not None:
                served = emulator.counts() - served_before
                writes = sum(n for key, n in served.items() if key.split()[0] in WRITES)
                figures["floor"]["served_writes_per_job"] = writes / options.workloads
            figures["versus_floor"] = {
                "all_running": ratio(
                    figures["all_running_seconds"], figures["floor"]["all_running_seconds"]
                ),
                "all_finished": ratio(
                    figures["all_finalized_seconds"], figures["floor"]["all_finished_seconds"]
                ),
            }
        figures["cost_model"] = (
            None
            if options.cost_model is None or emulator is None
            else dataclasses.asdict(options.cost_model)
        )
        (workdir / "figures.json").write_text(json.dumps(figures, indent=2))
    return figures


def _kubeconfig(url: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": url}}],
            "users": [{"name": "emulator", "user": {"token": "unused"}}],
            "contexts": [
                {"name": "emulator", "context": {"cluster": "emulator", "user": "emulator"}}
            ],
            "current-context": "emulator",
        }
    )


def _delete_namespace(client: KubernetesClient, namespace: str) -> None:
    with contextlib.suppress(KubernetesError):
        client.delete(ObjectRef("v1", "Namespace", "", namespace))


def _profilers(
    options: Options,
    stack: contextlib.ExitStack,
    operator: Operator,
    emulator: Emulator | None,
    simulator: Simulator,
) -> dict[str, Profiler]:
    if options.profile is None:
        return {}
    py_spy = options.py_spy or shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("--profile needs py-spy (pip install py-spy; or --py-spy PATH)")
    options.profile.mkdir(parents=True, exist_ok=True)
    pids = {"operator": operator.process.pid, "simulator": simulator.process.pid}
    if emulator is not None:
        pids["emulator"] = emulator.process.pid
    profilers = {
        name: Profiler(py_spy, pid, options.profile / f"{name}.txt") for name, pid in pids.items()
    }
    for profiler in profilers.values():
        stack.callback(profiler.stop)
    return profilers


def _create_all(
    client: KubernetesClient,
    make: Callable[[int], dict[str, Any]],
    count: int,
    clients: int,
) -> None:
    """Create ``make(0)`` .. ``make(count - 1)`` from ``clients`` threads, each retried a few
    times after an error."""

    def create(number: int) -> None:
        for attempt in range(10):
            try:
                client.create(make(number))
                return
            except AlreadyExistsError:
                return
            except KubernetesError:
                if attempt == 9:
                    raise
                time.sleep(0.1 * 2**attempt)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(create, range(count)))


def _measure(
    *,
    options: Options,
    client: KubernetesClient,
    namespace: str,
    emulator: Emulator | None,
    simulator: Simulator,
    operator: Operator,
    profilers: Mapping[str, Profiler],
) -> dict[str, Any]:
    count = options.workloads
    pids = {"operator": operator.process.pid, "simulator": simulator.process.pid}
    if emulator is not None:
        pids["emulator"] = emulator.process.pid
    time.sleep(2.0)  # the operator settles: its watches listed, a few idle rounds
    rss_before = _status_kib(operator.process.pid, "VmRSS")
    before = operator.metrics()
    served_before = emulator.counts() if emulator is not None else Counter()
    cpu_before = {name: _cpu_seconds(pid) for name, pid in pids.items()}
    own_before = resource.getrusage(resource.RUSAGE_SELF)
    load_before = _load()
    tracker = None
    if options.progress == "watch":
        tracker = Tracker()
        watching = Reflector(client, API_VERSION, WORKLOAD_KIND, tracker, namespace=namespace)
        watching.start()
        if not watching.wait_synced(60):
            raise RuntimeError(f"the benchmark's watch of the Workloads: {watching.error}")

    # The floor's own measure, taken of the operator's run too: when a pod of each Workload's
    # Job was Running or past (the Workloads' phases follow from what the Job controller writes).
    pods_running = Reached(_owning_job, _running_or_past)
    pods = Reflector(client, "v1", "Pod", pods_running, namespace=namespace)
    if not pods.start().wait_synced(60):
        raise RuntimeError(f"the benchmark's watch of the pods: {pods.error}")
    pods_all_running: float | None = None

    creating = threading.Thread(
        target=_create_all,
        args=(client, lambda n: workload(namespace, f"bench-{n:05}"), count, options.clients),
        daemon=True,
    )
    started = time.time()
    creating.start()
    creating.join()
    created = time.time() - started

    progress = Progress()
    done = False
    burst_over: Mapping[str, float] | None = None  # the metrics once every Workload is submitted
    while time.time() - started < options.timeout:
        if tracker is None:
            listed = time.perf_counter()
            items, _ = client.list_objects(API_VERSION, WORKLOAD_KIND, namespace=namespace)
            progress.list_seconds.append(time.perf_counter() - listed)
            states = {obj["metadata"]["name"]: state_of(obj) for obj in items}
        else:
            states = tracker.states()
        if (
            burst_over is None
            and len(states) == count
            and all(phase not in ("Pending", "Undefined") for phase, _f, _r in states.values())
        ):
            burst_over = operator.metrics()
        progress.polls += 1
        if pods_all_running is None and len(pods_running.jobs()) >= count:
            pods_all_running = time.time() - started
        if progress.note(states, time.time() - started, count):
            done = True
            break
        if operator.process.poll() is not None:
            raise RuntimeError(f"the operator exited:\n{operator.log_path.read_text()}")
        if not simulator.alive():
            raise RuntimeError("the node simulator stopped: see its output above")
        time.sleep(options.poll_seconds)
    finished = time.time() - started
    pods.stop()
    if tracker is not None:
        watching.stop()
    for profiler in profilers.values():
        profiler.stop()

    after = operator.metrics()
    served_after = emulator.counts() if emulator is not None else Counter()
    cpu_after = {name: _cpu_seconds(pid) for name, pid in pids.items()}
    own_after = resource.getrusage(resource.RUSAGE_SELF)
    load_after = _load()

    steady: dict[str, Any] = {}
    if done:
        time.sleep(2.0)  # the last release's watch event and round
        steady_before = operator.metrics()
        served_steady = emulator.counts() if emulator is not None else Counter()
        time.sleep(STEADY_SECONDS)
        steady_after = operator.metrics()
        served_steady_after = emulator.counts() if emulator is not None else Counter()
        moved = requests_of(steady_after) - requests_of(steady_before)
        steady = {
            "seconds": STEADY_SECONDS,
            "operator_requests": {f"{v} {c}": n for (v, c), n in sorted(moved.items())},
        }
        if emulator is not None:
            served = served_steady_after - served_steady
            lease = sum(n for key, n in served.items() if key.endswith("leases(operator)"))
            # A watch the server ended (its timeout) is started again: the reflectors' own
            # upkeep, like the Lease's, not a request for a Workload.
            renewals = sum(n for (verb, _code), n in moved.items() if verb == "watch")
            steady["operator_lease_requests"] = lease
            steady["operator_watch_renewals"] = renewals
            steady["operator_requests_besides_the_lease"] = sum(moved.values()) - lease - renewals
            steady["served_by_resource"] = dict(sorted(served.items()))
    rss_after = _status_kib(operator.process.pid, "VmRSS")
    hwm = _status_kib(operator.process.pid, "VmHWM")

    items, _ = client.list_objects(API_VERSION, WORKLOAD_KIND, namespace=namespace)
    figures = _figures(
        count=count,
        items=items,
        started=started,
        created=created,
        finished=finished,
        progress=progress,
        requests=requests_of(after) - requests_of(before),
        served=served_after - served_before,
        buckets=_bucket_delta(queue_latency_buckets(after), queue_latency_buckets(before)),
    )
    if burst_over is not None:
        # After the burst: every Workload submitted, the operator following their tasks.
        steady_buckets = _bucket_delta(
            queue_latency_buckets(after), queue_latency_buckets(burst_over)
        )
        figures["queue_latency_after_the_burst_p50_seconds"] = histogram_quantile(
            0.5, steady_buckets
        )
        figures["queue_latency_after_the_burst_p99_seconds"] = histogram_quantile(
            0.99, steady_buckets
        )
    own = (own_after.ru_utime + own_after.ru_stime) - (own_before.ru_utime + own_before.ru_stime)
    figures["pods_all_running_seconds"] = pods_all_running
    figures.update(
        namespace=namespace,
        emulator_gc=options.emulator_gc,
        against="a real cluster" if emulator is None else "the emulator",
        done=done,
        steady=steady,
        memory={
            "rss_before_kib": rss_before,
            "rss_after_kib": rss_after,
            "hwm_kib": hwm,
            "growth_per_workload_kib": (rss_after - rss_before) / count,
            "peak_growth_per_workload_kib": (hwm - rss_before) / count,
        },
        cpu_seconds={
            **{name: cpu_after[name] - cpu_before[name] for name in pids},
            "benchmark": own,
        },
        load={"before": load_before, "after": load_after},
    )
    if profilers:
        figures["profiles"] = {name: str(p.output) for name, p in profilers.items()}
    return figures


def _bucket_delta(
    after: list[tuple[float, float]], before: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    earlier = dict(before)
    return [(bound, value - earlier.get(bound, 0.0)) for bound, value in after]


def _figures(
    *,
    count: int,
    items: list[dict[str, Any]],
    started: float,
    created: float,
    finished: float,
    progress: Progress,
    requests: Counter[tuple[str, str]],
    served: Counter[str],
    buckets: list[tuple[float, float]],
) -> dict[str, Any]:
    phases = Counter((obj.get("status") or {}).get("phase") or "Pending" for obj in items)
    by_verb: Counter[str] = Counter()
    for (verb, _code), number in requests.items():
        by_verb[verb] += number
    if served:
        lease_writes = sum(
            n
            for key, n in served.items()
            if key.endswith("leases(operator)") and key.split()[0] in WRITES
        )
        status_updates = served["update workloads/status"]
    else:
        # A real cluster: the operator's only reads are its Lease's, each renewal a read and
        # an update; its other updates are the Workloads' status updates.
        lease_writes = by_verb["get"]
        status_updates = max(0, by_verb["update"] - lease_writes)
    writes = sum(by_verb[verb] for verb in WRITES)
    besides = writes - status_updates - lease_writes
    figures: dict[str, Any] = {
        "workloads": count,
        "create_seconds": created,
        "creates_per_second": count / created,
        "all_running_seconds": progress.all_running,
        "all_finalized_seconds": progress.all_finalized,
        "all_released_seconds": progress.all_released,
        "finished_seconds": finished,
        "workloads_per_second": count / progress.all_released if progress.all_released else None,
        "phases": dict(phases),
        "histories": dict(_histories(items).most_common(6)),
        "lags_seconds": _lags(items, progress.finalized_at),
        "polls": progress.polls,
        "list_seconds": _spread(progress.list_seconds),
        "requests_per_workload_by_verb": {v: n / count for v, n in sorted(by_verb.items())},
        "requests_by_verb_and_code": {f"{v} {c}": n for (v, c), n in sorted(requests.items())},
        "status_updates": status_updates,
        "status_updates_per_workload": status_updates / count,
        "writes_per_workload": (writes - lease_writes) / count,
        "lease_writes": lease_writes,
        "writes_per_workload_besides_status": besides / count,
        "queue_latency_buckets": buckets,
        "queue_latency_p50_seconds": histogram_quantile(0.5, buckets),
        "queue_latency_p95_seconds": histogram_quantile(0.95, buckets),
        "queue_latency_p99_seconds": histogram_quantile(0.99, buckets),
        "timeline": progress.timeline,
    }
    if served:
        figures["served_by_resource"] = dict(sorted(served.items()))
        figures["served_per_workload"] = sum(served.values()) / count
    return figures


def _histories(items: list[dict[str, Any]]) -> Counter[str]:
    """How many Workloads went through each sequence of phases (their records' history)."""
    return Counter(
        " > ".join(
            str(entry.get("phase"))
            for entry in ((obj.get("status") or {}).get("task") or {}).get("history") or []
        )
        for obj in items
    )


def _lags(items: list[dict[str, Any]], finalized_at: Mapping[str, float]) -> dict[str, Any]:
    """Per Workload, from its record: created -> submitted -> Running (history) -> completed ->
    finalized (when the benchmark first saw it finalized), and created -> finalized."""
    steps: dict[str, list[float]] = {
        "created_to_submitted": [],
        "submitted_to_running": [],
        "running_to_completed": [],
        "completed_to_finalized": [],
        "created_to_finalized": [],
    }
    for obj in items:
        status = obj.get("status") or {}
        task = status.get("task") or {}
        created = _seconds(obj["metadata"].get("creationTimestamp"))
        submitted = _seconds(task.get("submittedAt"))
        running = next(
            (
                _seconds(e.get("occurredAt"))
                for e in task.get("history") or []
                if e.get("phase") == "Running"
            ),
            None,
        )
        completed = _seconds(status.get("completionTime"))
        final = finalized_at.get(obj["metadata"]["name"])
        pairs = {
            "created_to_submitted": (created, submitted),
            "submitted_to_running": (submitted, running),
            "running_to_completed": (running, completed),
            "completed_to_finalized": (completed, final),
            "created_to_finalized": (created, final),
        }
        for step, (start, end) in pairs.items():
            if start is not None and end is not None:
                steps[step].append(end - start)
    return {step: _spread(values) for step, values in steps.items()}


# Profiles -------------------------------------------------------------------------------------


def hottest(raw: Path, top: int = 15) -> dict[str, list[tuple[str, float]]]:
    """From py-spy's raw output (one stack a line, ``frame;frame;... count``): each function's
    share of the samples, by itself (the leaf) and with what it calls (once per stack)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, number = line.rpartition(" ")
        if not stack or not number.isdigit():
            continue
        samples = int(number)
        frames = [_frame(frame) for frame in stack.split(";") if not frame.startswith("thread ")]
        if not frames:
            continue
        total += samples
        own[frames[-1]] += samples
        for frame in set(frames):
            inclusive[frame] += samples
    share = 100.0 / max(1, total)
    return {
        "samples": [("total", float(total))],
        "self_percent": [(f, round(n * share, 1)) for f, n in own.most_common(top)],
        "inclusive_percent": [(f, round(n * share, 1)) for f, n in inclusive.most_common(top)],
    }


def _frame(frame: str) -> str:
    """``function (path/to/file.py:12)`` -> ``function (file.py)``: lines apart, one entry."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").rsplit(":", 1)[0]
    return f"{name} ({'/'.join(where.split('/')[-2:])})"


# The report -----------------------------------------------------------------------------------


def _print(figures: Mapping[str, Any]) -> None:
    count = figures["workloads"]
    print(f"operator benchmark: {count} training Workloads against {figures['against']}")
    print(
        f"  machine load:          before {figures['load']['before']}, after {figures['load']['after']}"
    )
    cost = figures.get("cost_model")
    if cost:
        print(
            f"  emulator cost model:   {cost['write_latency'] * 1000:g} ms a write, "
            f"{cost['max_writes_in_flight']} at once; controllers at "
            f"{cost['controller_qps']:g} qps, burst {cost['controller_burst']}"
        )
    print(f"  phases at the end:     {figures['phases']}")
    print(f"  histories:             {figures['histories']}")
    if not figures["emulator_gc"]:
        print("  (the emulator's garbage collector did no passes: --emulator-gc off)")
    print(
        f"  created:               {figures['create_seconds']:.1f} s "
        f"({figures['creates_per_second']:.0f}/s)"
    )
    for label, key in (
        ("all Running (or past)", "all_running_seconds"),
        ("their pods all Running", "pods_all_running_seconds"),
        ("all finalized", "all_finalized_seconds"),
        ("all released", "all_released_seconds"),
    ):
        value = figures[key]
        print(f"  {label + ':':<23}{'not reached' if value is None else f'{value:.1f} s'}")
    if figures["workloads_per_second"]:
        print(f"  throughput:            {figures['workloads_per_second']:.1f} Workloads/s")
    print(
        "  lags per Workload (s): "
        + ", ".join(
            f"{step} {v['p50']:.0f}/{v['p99']:.0f}/{v['max']:.0f}"
            for step, v in figures["lags_seconds"].items()
            if v
        )
        + " (p50/p99/max)"
    )
    listed = figures["list_seconds"]
    if listed:
        print(
            f"  progress lists:        {figures['polls']}, each {listed['p50'] * 1000:.0f} ms "
            f"p50, {listed['max'] * 1000:.0f} ms max"
        )
    else:
        print("  progress:              the benchmark's own watch of the Workloads")
    print(
        "  operator requests per Workload: "
        + ", ".join(f"{v} {n:.2f}" for v, n in figures["requests_per_workload_by_verb"].items())
    )
    print(f"    by verb and code:    {figures['requests_by_verb_and_code']}")
    print(
        f"  writes per Workload:   {figures['writes_per_workload']:.2f}: status updates "
        f"{figures['status_updates_per_workload']:.2f}, others (creates, patches, Events) "
        f"{figures['writes_per_workload_besides_status']:.2f} "
        f"({figures['lease_writes']} Lease writes left out)"
    )
    if "served_by_resource" in figures:
        print(f"  served by the emulator ({figures['served_per_workload']:.1f} per Workload):")
        for key, number in figures["served_by_resource"].items():
            print(f"    {key:<40} {number:>8} ({number / count:.2f}/Workload)")
    steady = figures["steady"]
    if steady:
        print(
            f"  steady {steady['seconds']:.0f} s:             operator requests "
            f"{steady['operator_requests']}"
            + (
                f"; besides its Lease and its watches' renewals: "
                f"{steady['operator_requests_besides_the_lease']}"
                if "operator_requests_besides_the_lease" in steady
                else ""
            )
        )
    print(
        "  queue latency:         "
        + ", ".join(
            f"{label} {_ms(figures[key])}"
            for label, key in (
                ("p50", "queue_latency_p50_seconds"),
                ("p95", "queue_latency_p95_seconds"),
                ("p99", "queue_latency_p99_seconds"),
            )
        )
        + " (interpolated within the histogram's buckets)"
        + (
            f"; once every Workload was submitted: p50 "
            f"{_ms(figures['queue_latency_after_the_burst_p50_seconds'])}, p99 "
            f"{_ms(figures['queue_latency_after_the_burst_p99_seconds'])}"
            if "queue_latency_after_the_burst_p99_seconds" in figures
            else ""
        )
    )
    memory = figures["memory"]
    print(
        f"  operator memory:       VmRSS {memory['rss_before_kib'] / 1024:.0f} -> "
        f"{memory['rss_after_kib'] / 1024:.0f} MiB (peak {memory['hwm_kib'] / 1024:.0f} MiB): "
        f"{memory['growth_per_workload_kib']:.1f} KiB per Workload "
        f"({memory['peak_growth_per_workload_kib']:.1f} at the peak)"
    )
    print(
        "  CPU seconds:           "
        + ", ".join(f"{name} {seconds:.0f}" for name, seconds in figures["cpu_seconds"].items())
    )
    print("  timeline (s: Running or past / finalized, by phase):")
    shown = -math.inf
    for point in figures["timeline"]:
        if point["t"] - shown >= 30 or point is figures["timeline"][-1]:
            shown = point["t"]
            phases = {
                k: v for k, v in point.items() if k not in ("t", "running_or_past", "finalized")
            }
            print(
                f"    {point['t']:>6.0f}: {point['running_or_past']:>5} / {point['finalized']:>5}  "
                f"{phases}"
            )
    floor_ = figures.get("floor")
    if floor_:
        print(f"  the floor ({floor_['jobs']} Jobs created straight, after the operator's run):")
        print(
            f"    created {floor_['create_seconds']:.1f} s; "
            + "; ".join(
                f"{label} {'not reached' if v is None else f'{v:.1f} s'}"
                for label, v in (
                    ("all Running (or past)", floor_["all_running_seconds"]),
                    ("all finished", floor_["all_finished_seconds"]),
                )
            )
            + (
                f"; {floor_['served_writes_per_job']:.1f} writes per Job"
                if "served_writes_per_job" in floor_
                else ""
            )
        )
        versus = figures["versus_floor"]
        print(
            "    podwright's operator / the floor: "
            + ", ".join(
                f"{label} {'n/a' if v is None else f'{v:.2f}x'}"
                for label, v in (
                    ("all Running", versus["all_running"]),
                    ("all finalized / all finished", versus["all_finished"]),
                )
            )
        )
    for name, path in (figures.get("profiles") or {}).items():
        hot = hottest(Path(path))
        print(f"  profile of the {name} ({path}, {hot['samples'][0][1]:.0f} samples):")
        print("    by itself:  " + "; ".join(f"{f} {p}%" for f, p in hot["self_percent"]))
        print("    inclusive:  " + "; ".join(f"{f} {p}%" for f, p in hot["inclusive_percent"]))


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f} ms"


@contextlib.contextmanager
def _workdir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="podwright-operator-bench-") as directory:
        yield Path(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=5000)
    parser.add_argument("--clients", type=int, default=4, help="Threads creating Workloads.")
    parser.add_argument(
        "--kubeconfig", type=Path, default=None, help="A real cluster instead of the emulator."
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="Give up after (s).")
    parser.add_argument("--poll-seconds", type=float, default=1.0)
    parser.add_argument(
        "--progress",
        choices=("watch", "list"),
        default="watch",
        help="Follow the Workloads with a watch (default) or a list every --poll-seconds.",
    )
    parser.add_argument(
        "--profile", type=Path, default=None, help="Sample every process with py-spy, into DIR."
    )
    parser.add_argument("--py-spy", default=None, help="The py-spy executable.")
    parser.add_argument("--workdir", type=Path, default=None, help="Keep the operator's log here.")
    parser.add_argument(
        "--emulator-gc",
        choices=("on", "off"),
        default="on",
        help="off: the emulator's garbage collector does no passes (nothing is deleted during "
        "the run; a diagnosis of what its passes cost).",
    )
    parser.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="After the operator's run, time the same Jobs created straight (the floor).",
    )
    add_cost_model_arguments(parser, BENCH_COST_MODEL, on=True)
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    arguments = parser.parse_args()
    options = Options(
        workloads=arguments.workloads,
        clients=arguments.clients,
        kubeconfig=arguments.kubeconfig,
        timeout=arguments.timeout,
        poll_seconds=arguments.poll_seconds,
        progress=arguments.progress,
        profile=arguments.profile,
        py_spy=arguments.py_spy,
        emulator_gc=arguments.emulator_gc == "on",
        cost_model=cost_model_from_arguments(parser, arguments),
        floor=arguments.floor,
    )
    with _workdir(arguments.workdir) as directory:
        figures = run(options, directory)
    if arguments.json:
        print(json.dumps(figures, indent=2))
    else:
        _print(figures)


if __name__ == "__main__":
    main()
