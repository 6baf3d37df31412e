"""Console benchmark: ``podwright console --backend operator`` over a namespace of 5,000
Workloads, driven by a real browser.

The issue's goals: with 5,000 Workloads in a namespace, the first page rendered within 1 s, a
phase change visible in the browser within 1 s of the status write, and the console's API
requests per minute independent of the number of open browsers (one watch shared by all).

Four processes: the API-server emulator (``python -m tests.k8s_emulator``, with the operator
benchmark's cost model unless ``--no-cost-model``: each write waits its commit latency in a
bounded number of slots), ``podwright console --backend operator --kubeconfig K --listen
127.0.0.1:0`` (started as a user starts it: ``tests/console/console_process.py``), Debian's
chromium driven by Playwright (no browser download), and this one.

1. **Setup.** podwright's CRDs and a namespace; ``--workloads`` Workloads (training, some asking
   for GPUs) created from ``--threads`` threads, each given the status the operator writes when
   it launches a task (``engine.workload_tasks``: the task recorded with its rendered Job, then
   its phases), one update of its status subresource as the operator's ``submit_launched``
   makes, Running, Success, Queued, Initializing and PermanentFailure mixed; an ended task is
   finalized as the operator finalizes it (the merge patch that names it).
2. **Readiness.** From starting the console's process to the URL it prints (it has listed the
   Workloads and read them once by then).
3. **First page.** ``/workloads?namespace=NS`` (100 rows a page): in a new browser context each
   time (the token's cookie set, a cold cache), from ``page.goto`` to the table holding its 100
   rows, ``--loads`` times; with the navigation's own timing (first byte, DOMContentLoaded, first
   contentful paint). And the server's part: a plain HTTP GET of the page (``Authorization:
   Bearer TOKEN``), timed to its last byte. Each load and each GET starts in a second of the
   clock of its own: the console shares a table's rendering among the requests of one second
   and one state of the tasks, and each is to be rendered afresh here.
4. **Phase change latency.** With the page open, ``--changes`` status updates of rows of its
   first page, one at a time, as the operator writes a new phase (Queued -> Initializing ->
   Running -> Queued again, a setback: a suspended job queued again), each timed from the
   update's return to the row showing the new phase: a MutationObserver in the page notes when
   each row's ``data-phase`` changes (``Date.now()``, the same machine's clock as the
   benchmark's ``time.time()``). 200 ms of it is the console's own wait for more changes to
   show together (``podwright.console.app.ROWS_EVERY_SECONDS``). Then ``--idle`` seconds of no
   change: the console's CPU time meanwhile.
5. **Requests per minute.** The requests the emulator served that carried the console's token
   (its kubeconfig's; the benchmark writes with another), over ``--window`` seconds of phase
   changes at ``--rate`` a second, with 1 open page and then with ``--pages`` open pages (each in
   a context of its own: a browser holds at most 6 connections to one server per context, and
   each page keeps one open for its stream); and the phase changes' latency in every open page
   meanwhile, and the console's CPU time. The console's one watch is renewed only when the API
   server ends it (every 5 minutes), which no window sees: the requests of the whole run, every
   page load included, are printed too.

Prints a table of the figures with the goals beside them (``--json``: the figures as JSON).
``--quick``: a smoke run (300 Workloads, fewer repeats, shorter windows). ``--profile DIR``
samples the console with py-spy from the first browser load to the end and prints its hottest
functions.

Run: ``python benchmarks/console_bench.py [--workloads 5000] [--quick] [--no-cost-model]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import inspect
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.console.console_process import running_console  # noqa: E402
from tests.k8s_emulator.cost_model import (  # noqa: E402
    CostModel,
    add_cost_model_arguments,
    cost_model_from_arguments,
)

from benchmarks import webhook_bench  # noqa: E402
from benchmarks.operator_bench import BENCH_COST_MODEL, Profiler, hottest, install  # noqa: E402
from podwright.adapters.kubernetes import KubernetesClient, connect  # noqa: E402
from podwright.adapters.kubernetes.reflector import Reflector  # noqa: E402
from podwright.console.gate import TOKEN_COOKIE  # noqa: E402
from podwright.core.cluster_resources import (  # noqa: E402
    API_VERSION,
    WORKLOAD_KIND,
    submission_from_resource,
)
from podwright.core.lifecycle import phases as lifecycle  # noqa: E402
from podwright.core.lifecycle.phases import ExecutionError, Phase, PhaseInfo  # noqa: E402
from podwright.core.render import DEFAULT_PROFILE, render  # noqa: E402
from podwright.engine.kubernetes_port import ObjectRef, PatchType  # noqa: E402
from podwright.engine.workload_tasks import (  # noqa: E402
    advanced_workload,
    finalized_patch,
    launched_workload,
    new_task,
    record_of,
    task_id_of,
)

NAMESPACE = "console-bench"
CONSOLE_TOKEN = "podwright-console"
"""The token of the console's kubeconfig: the emulator counts the requests that carry it."""
WRITER_TOKEN = "console-bench-writer"
"""The token of the benchmark's own kubeconfig (the Workloads' creates and status writes)."""
GOAL_SECONDS = 1.0
WATCH_TIMEOUT_SECONDS: int = (
    inspect.signature(Reflector).parameters["watch_timeout_seconds"].default
)
"""The ``timeoutSeconds`` of the console's watch (its reflector's default): one request per
that many seconds is its steady load, which no window here is long enough to see."""
ROWS = 100
"""Rows on the table's first page (``podwright.console.views.PAGE_SIZE``)."""
MIX = (
    *(Phase.RUNNING,) * 8,
    *(Phase.SUCCESS,) * 6,
    *(Phase.QUEUED,) * 3,
    Phase.INITIALIZING,
    Phase.PERMANENT_FAILURE,
    Phase.SUCCESS,
)
"""The phases of the Workloads, one after the other (a fifth of them ended)."""
STEPS: Mapping[Phase, tuple[Phase, ...]] = {
    Phase.QUEUED: (Phase.QUEUED,),
    Phase.INITIALIZING: (Phase.QUEUED, Phase.INITIALIZING),
    Phase.RUNNING: (Phase.QUEUED, Phase.INITIALIZING, Phase.RUNNING),
    Phase.SUCCESS: (Phase.QUEUED, Phase.INITIALIZING, Phase.RUNNING, Phase.SUCCESS),
    Phase.PERMANENT_FAILURE: (
        Phase.QUEUED,
        Phase.INITIALIZING,
        Phase.RUNNING,
        Phase.PERMANENT_FAILURE,
    ),
}
"""The phases the operator reports on the way to each (the task's history)."""
NEXT: Mapping[Phase, Phase] = {
    Phase.QUEUED: Phase.INITIALIZING,
    Phase.INITIALIZING: Phase.RUNNING,
    Phase.RUNNING: Phase.QUEUED,
}
"""The phase changes the benchmark writes: a running task whose job is suspended is queued
again (a setback), so a row of the first page changes as often as the benchmark needs."""

OBSERVER = """
(() => {
  window.__phaseLog = [];
  const shown = {};
  const note = () => {
    const now = Date.now();
    for (const row of document.querySelectorAll('#rows tr[id^="task-"]')) {
      const id = row.id.slice(5), phase = row.dataset.phase;
      if (shown[id] !== phase) { shown[id] = phase; window.__phaseLog.push([id, phase, now]); }
    }
  };
  document.addEventListener('DOMContentLoaded', () => {
    const rows = document.getElementById('rows');
    if (!rows) return;
    note();
    new MutationObserver(note).observe(rows, {
      childList: true, subtree: true, attributes: true, attributeFilter: ['data-phase'],
    });
  });
})();
"""
"""Notes in ``window.__phaseLog`` each row's phase as the page shows it: [task id, phase,
Date.now()] when the page is parsed and at every change of the table (the stream's swaps)."""
ROWS_SHOWN = f"document.querySelectorAll('#rows tr[id^=\"task-\"]').length >= {ROWS}"
NAVIGATION = """() => {
  const entry = performance.getEntriesByType('navigation')[0];
  const paint = performance.getEntriesByName('first-contentful-paint')[0];
  return {
    first_byte: entry.responseStart - entry.startTime,
    last_byte: entry.responseEnd - entry.startTime,
    dom_content_loaded: entry.domContentLoadedEventEnd - entry.startTime,
    first_contentful_paint: paint ? paint.startTime : null,
    transfer_size: entry.transferSize,
  };
}"""


# The scenario ---------------------------------------------------------------------------------


def workload(namespace: str, index: int) -> dict[str, Any]:
    """The ``index``-th Workload: a small training job, one in four asking for GPUs."""
    compute: dict[str, Any] = {
        "cpuCoreRequest": 0.5,
        "cpuMemoryRequest": "1Gi",
        "cpuMemoryLimit": "2Gi",
    }
    if index % 4 == 0:
        compute["gpuDevicesRequest"] = 1 + index % 3
    return {
        "apiVersion": API_VERSION,
        "kind": WORKLOAD_KIND,
        "metadata": {
            "name": f"train-{index:05d}",
            "namespace": namespace,
            "labels": {"team": ("vision", "speech", "search")[index % 3]},
        },
        "spec": {
            "type": "training",
            "image": "registry.example/train:1.4",
            "command": "python train.py --epochs 10",
            "compute": compute,
        },
    }


def phase_of(index: int) -> Phase:
    return MIX[index % len(MIX)]


def _info(phase: Phase, now: datetime) -> PhaseInfo:
    """What the operator's plugins report for ``phase`` (the reasons they give)."""
    if phase is Phase.QUEUED:
        return lifecycle.queued(now, "job created; no pod yet")
    if phase is Phase.INITIALIZING:
        return lifecycle.initializing(now, "pod scheduled; pulling image")
    if phase is Phase.RUNNING:
        return lifecycle.running(now)
    if phase is Phase.SUCCESS:
        return lifecycle.success(now, "job completed")
    if phase is Phase.PERMANENT_FAILURE:
        error = ExecutionError("ExitCode", "container main exited with code 1")
        return PhaseInfo(phase, reason="job failed", error=error, occurred_at=now)
    raise ValueError(f"no report for {phase}")


def launched_status(created: Mapping[str, Any], phase: Phase, now: datetime) -> dict[str, Any]:
    """The status update that records ``created``'s task with its rendered Job, as the operator
    writes it at launch, then advanced through :data:`STEPS` to ``phase`` (the history of a task
    the operator ran there; the object is written once)."""
    submission = submission_from_resource(created)
    metadata = created["metadata"]
    rendering = render(
        submission.workload_type,
        metadata["name"],
        submission.spec,
        profile=DEFAULT_PROFILE,
        namespace=metadata["namespace"],
    )
    task = new_task(created, rendering.manifests, now)
    steps = STEPS[phase]
    body = launched_workload(created, task, {}, _info(steps[0], now), now)
    for number, step in enumerate(steps[1:], start=1):
        at = now + timedelta(seconds=number)
        record = record_of(body)
        assert record is not None
        body = advanced_workload(body, record, {}, _info(step, at), at).workload
    return body


def changed_status(current: Mapping[str, Any], now: datetime) -> tuple[dict[str, Any], Phase]:
    """The status update that moves ``current``'s task to its :data:`NEXT` phase, as the
    operator writes a round's outcome; and that phase."""
    record = record_of(current)
    if record is None or record.phase not in NEXT:
        raise ValueError(f"{current['metadata']['name']}: no next phase from {record}")
    phase = NEXT[record.phase]
    if phase is Phase.QUEUED:
        info = lifecycle.queued(now, "job suspended: queued again", setback=True)
    else:
        info = _info(phase, now)
    return advanced_workload(current, record, {}, info, now).workload, phase


def _ref(obj: Mapping[str, Any]) -> ObjectRef:
    metadata = obj["metadata"]
    return ObjectRef(API_VERSION, WORKLOAD_KIND, metadata["namespace"], metadata["name"])


def kubeconfig_text(url: str, token: str) -> str:
    """A kubeconfig of the emulator whose user carries ``token`` (which the emulator counts by,
    and checks not)."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": url}}],
            "users": [{"name": "bench", "user": {"token": token}}],
            "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "bench"}}],
            "current-context": "emulator",
        }
    )


class Workloads:
    """The benchmark's Workloads as last written (each write's answer), and their writes."""

    def __init__(self, client: KubernetesClient, namespace: str) -> None:
        self.client, self.namespace = client, namespace
        self._lock = threading.Lock()
        self.latest: dict[str, dict[str, Any]] = {}

    def populate(self, count: int, threads: int) -> float:
        """Create ``count`` Workloads, each with its launched status (and an ended one
        finalized), from ``threads`` threads; the seconds it took."""
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(self._one, range(count)))
        return time.perf_counter() - started

    def _one(self, index: int) -> None:
        created = self.client.create(workload(self.namespace, index))
        phase = phase_of(index)
        stored = self.client.replace_status(
            _ref(created), launched_status(created, phase, datetime.now(UTC))
        )
        if phase.is_terminal:
            patch = finalized_patch(stored, task_id_of(stored))
            stored = self.client.patch(_ref(stored), patch, PatchType.MERGE)
        with self._lock:
            self.latest[stored["metadata"]["name"]] = stored

    def change(self, name: str) -> Change:
        """Move ``name``'s task to its next phase (one status update, as the operator's); when
        the update was sent and when it returned (``time.time()``)."""
        with self._lock:
            current = self.latest[name]
        body, phase = changed_status(current, datetime.now(UTC))
        sent = time.time()
        stored = self.client.replace_status(_ref(current), body)
        returned = time.time()
        with self._lock:
            self.latest[name] = stored
        return Change(task_id_of(stored), phase.value, sent, returned)

    def phases(self) -> Counter[str]:
        with self._lock:
            return Counter((obj.get("status") or {}).get("phase") for obj in self.latest.values())


@dataclasses.dataclass(frozen=True)
class Change:
    """A phase change the benchmark wrote: the task, its new phase, when the write was sent and
    when it returned (epoch seconds)."""

    task_id: str
    phase: str
    sent: float
    returned: float

    def seen_in(self, log: Sequence[Sequence[Any]]) -> float | None:
        """When a page's phase log first showed this change (epoch seconds), else None."""
        since = self.sent * 1000 - 1
        for task_id, phase, at in log:
            if task_id == self.task_id and phase == self.phase and at >= since:
                return float(at) / 1000
        return None


# The emulator ---------------------------------------------------------------------------------


class Emulator(webhook_bench.Emulator):
    """The emulator in a process of its own (``webhook_bench``'s), and its requests by token."""

    def requests(self) -> dict[str, Counter[str]]:
        """The requests served so far by each client's token, by verb."""
        with urllib.request.urlopen(f"{self.url}/_emulator/requests?by=token", timeout=30) as a:
            return {token: Counter(verbs) for token, verbs in json.load(a).items()}


# Measuring ------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Options:
    workloads: int = 5000
    threads: int = 8
    loads: int = 10
    changes: int = 20
    window: float = 30.0
    idle: float = 10.0
    """Seconds of no change (one page open), the console's CPU time counted."""
    rate: float = 2.0
    pages: int = 10
    cost_model: CostModel | None = BENCH_COST_MODEL
    profile: Path | None = None
    py_spy: str | None = None


def spread(values: Sequence[float]) -> dict[str, float] | None:
    """p50, p95 (nearest rank) and max of ``values``; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p95": ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))],
        "max": ordered[-1],
        "count": len(ordered),
    }


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def console_pid() -> int:
    """The pid of the ``podwright console`` this process started (its child)."""
    mine = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == mine and b"podwright" in command and b"console" in command:
            return int(entry.name)
    raise RuntimeError("the console's process is not a child of this one")


def plain_get(url: str, token: str) -> tuple[float, int, int]:
    """GET ``url`` with the bearer token: seconds to its last byte, its size, its rows (a page
    load renders its table afresh: only the live streams share renderings)."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = answer.read()
    return time.perf_counter() - started, len(body), body.count(b'<tr id="task-')


@contextlib.contextmanager
def browser_page(browser: Any, base: str, token: str) -> Iterator[Any]:
    """A page of a new context (its own connections, a cold cache) with the console's cookie
    and the phase observer."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        port = urlsplit(base).port
        context.add_cookies([{"name": f"{TOKEN_COOKIE}_{port}", "value": token, "url": base + "/"}])
        context.add_init_script(OBSERVER)
        yield context.new_page()
    finally:
        context.close()


def first_page_load(browser: Any, url: str, base: str, token: str) -> dict[str, Any]:
    """One load of the table's first page in a new context: seconds from ``goto`` to its rows,
    and the navigation's own timing (ms)."""
    with browser_page(browser, base, token) as page:
        started = time.perf_counter()
        page.goto(url, wait_until="commit")
        page.wait_for_function(ROWS_SHOWN, polling=10, timeout=60_000)
        seconds = time.perf_counter() - started
        page.wait_for_load_state("load")
        timing = page.evaluate(NAVIGATION)
    return {"seconds": seconds, **timing}


def wait_seen(pages: Sequence[Any], change: Change, timeout: float) -> list[float | None]:
    """Wait until every page shows ``change`` (at most ``timeout`` s); when each did."""
    script = "([id, phase, since]) => window.__phaseLog.some(e => e[0] === id && e[1] === phase && e[2] >= since)"
    argument = [change.task_id, change.phase, change.sent * 1000 - 1]
    deadline = time.monotonic() + timeout
    for page in pages:
        left = max(0.001, deadline - time.monotonic())
        with contextlib.suppress(Exception):  # a timeout: counted as not seen
            page.wait_for_function(script, arg=argument, polling=20, timeout=left * 1000)
    logs = [page.evaluate("window.__phaseLog") for page in pages]
    return [change.seen_in(log) for log in logs]


def rows_of(page: Any) -> list[tuple[str, str]]:
    """The (task id, phase) of each row the page shows."""
    return [
        (row[0], row[1])
        for row in page.evaluate(
            "() => [...document.querySelectorAll('#rows tr[id^=\"task-\"]')]"
            ".map(r => [r.id.slice(5), r.dataset.phase])"
        )
    ]


class Rotation:
    """The first page's rows whose tasks can change phase (:data:`NEXT`), in turn."""

    def __init__(self, rows: Sequence[tuple[str, str]]) -> None:
        self.names = [task_id.rsplit("-", 1)[0] for task_id, phase in rows if Phase(phase) in NEXT]
        if not self.names:
            raise RuntimeError("no row of the first page can change phase")
        self._next = 0

    def __call__(self) -> str:
        name = self.names[self._next % len(self.names)]
        self._next += 1
        return name


def steady_window(
    workloads: Workloads,
    rotation: Rotation,
    pages: Sequence[Any],
    *,
    emulator: Emulator,
    pid: int,
    seconds: float,
    rate: float,
) -> dict[str, Any]:
    """Phase changes at ``rate`` a second for ``seconds``: the console's requests (and the
    benchmark's) meanwhile, its CPU time, and each change's latency in every page."""
    before, cpu_before = emulator.requests(), _cpu_seconds(pid)
    changes: list[Change] = []
    started = time.monotonic()
    for number in range(max(1, int(seconds * rate))):
        delay = started + number / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        changes.append(workloads.change(rotation()))
    left = started + seconds - time.monotonic()
    if left > 0:
        time.sleep(left)
    elapsed = time.monotonic() - started
    after, cpu_after = emulator.requests(), _cpu_seconds(pid)
    console = after.get(CONSOLE_TOKEN, Counter()) - before.get(CONSOLE_TOKEN, Counter())
    writer = after.get(WRITER_TOKEN, Counter()) - before.get(WRITER_TOKEN, Counter())
    wait_seen(pages, changes[-1], 10.0)  # the last change shown everywhere, or given up on
    logs = [page.evaluate("window.__phaseLog") for page in pages]
    latencies, worst, missed = [], [], 0
    for change in changes:
        seen = [change.seen_in(log) for log in logs]
        missed += sum(at is None for at in seen)
        shown = [at - change.returned for at in seen if at is not None]
        latencies += shown
        if shown:
            worst.append(max(shown))
    return {
        "pages": len(pages),
        "seconds": elapsed,
        "changes": len(changes),
        "console_requests": dict(console),
        "console_requests_total": sum(console.values()),
        "console_requests_per_minute": sum(console.values()) * 60 / elapsed,
        "writer_requests": dict(writer),
        "console_cpu_seconds": cpu_after - cpu_before,
        "latency_seconds": spread(latencies),
        "latency_worst_page_seconds": spread(worst),
        "not_seen": missed,
    }


def idle_window(emulator: Emulator, pid: int, seconds: float) -> dict[str, Any]:
    """Nothing changes for ``seconds`` (one page open): the console's CPU time and requests."""
    before, cpu_before = emulator.requests(), _cpu_seconds(pid)
    time.sleep(seconds)
    after, cpu_after = emulator.requests(), _cpu_seconds(pid)
    console = after.get(CONSOLE_TOKEN, Counter()) - before.get(CONSOLE_TOKEN, Counter())
    return {
        "seconds": seconds,
        "console_cpu_seconds": cpu_after - cpu_before,
        "console_requests": dict(console),
    }


def run(options: Options, workdir: Path) -> dict[str, Any]:
    """The benchmark (see the module's docstring); its figures."""
    from playwright.sync_api import sync_playwright  # noqa: PLC0415
    from tests.browser import CHROMIUM, CHROMIUM_ARGS, CHROMIUM_VARIABLE  # noqa: PLC0415

    executable = shutil.which(os.environ.get(CHROMIUM_VARIABLE) or CHROMIUM)
    if executable is None:
        raise SystemExit("the console benchmark needs chromium (make debian-packages)")
    figures: dict[str, Any] = {
        "workloads": options.workloads,
        "namespace": NAMESPACE,
        "cost_model": None
        if options.cost_model is None
        else dataclasses.asdict(options.cost_model),
        "load": Path("/proc/loadavg").read_text().split()[:3],
    }
    with contextlib.ExitStack() as stack:
        emulator = Emulator(options.cost_model)
        stack.callback(emulator.stop)
        writer_config = workdir / "kubeconfig-writer"
        writer_config.write_text(kubeconfig_text(emulator.url, WRITER_TOKEN))
        console_config = workdir / "kubeconfig-console"
        console_config.write_text(kubeconfig_text(emulator.url, CONSOLE_TOKEN))
        client = KubernetesClient(connect(str(writer_config), pool_size=options.threads + 2))
        stack.callback(client.close)
        install(client, NAMESPACE)
        workloads = Workloads(client, NAMESPACE)
        seconds = workloads.populate(options.workloads, options.threads)
        figures["setup"] = {
            "seconds": seconds,
            "workloads_per_second": options.workloads / seconds,
            "phases": dict(workloads.phases()),
        }
        print(
            f"  {options.workloads} Workloads with their statuses in {seconds:.1f} s",
            file=sys.stderr,
        )

        started = time.perf_counter()
        console = stack.enter_context(
            running_console(["--backend", "operator", "--kubeconfig", str(console_config)])
        )
        figures["ready_seconds"] = time.perf_counter() - started
        pid = console_pid()
        figures["console_rss_mib_at_start"] = _rss_mib(pid)
        figures["console_requests_at_start"] = dict(
            emulator.requests().get(CONSOLE_TOKEN, Counter())
        )
        table = f"{console.base}/workloads?namespace={NAMESPACE}"

        gets = [plain_get(table, console.token) for _ in range(options.loads)]
        assert all(rows == ROWS for _s, _size, rows in gets), [g[2] for g in gets]
        figures["plain_get_seconds"] = spread([s for s, _size, _rows in gets])
        figures["page_bytes"] = gets[0][1]

        profiler = None
        if options.profile is not None:
            options.profile.mkdir(parents=True, exist_ok=True)
            py_spy = (
                options.py_spy
                or shutil.which("py-spy")
                or str(Path(sys.executable).parent / "py-spy")
            )
            profiler = Profiler(py_spy, pid, options.profile / "console.txt")
            stack.callback(profiler.stop)

        playwright = stack.enter_context(sync_playwright())
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=list(CHROMIUM_ARGS)
        )
        stack.callback(browser.close)

        loads = [
            first_page_load(browser, table, console.base, console.token)
            for _ in range(options.loads)
        ]
        figures["first_page"] = {
            "seconds": spread([load["seconds"] for load in loads]),
            **{
                key: spread([load[key] / 1000 for load in loads if load[key] is not None])
                for key in ("first_byte", "dom_content_loaded", "first_contentful_paint")
            },
        }

        with contextlib.ExitStack() as pages_stack:
            main = pages_stack.enter_context(browser_page(browser, console.base, console.token))
            main.goto(table)
            main.wait_for_function(ROWS_SHOWN, timeout=60_000)
            rotation = Rotation(rows_of(main))
            main.wait_for_timeout(1000)  # its stream open

            latencies, writes, missed = [], [], 0
            for _ in range(options.changes):
                change = workloads.change(rotation())
                writes.append(change.returned - change.sent)
                (seen,) = wait_seen([main], change, 10.0)
                if seen is None:
                    missed += 1
                else:
                    latencies.append(seen - change.returned)
                time.sleep(0.3)
            figures["phase_change"] = {
                "latency_seconds": spread(latencies),
                "not_seen_within_10_s": missed,
                "write_seconds": spread(writes),
            }
            figures["idle"] = idle_window(emulator, pid, options.idle)

            steady: dict[str, Any] = {
                "emulator": emulator,
                "pid": pid,
                "seconds": options.window,
                "rate": options.rate,
            }
            windows = [steady_window(workloads, rotation, [main], **steady)]
            pages = [main]
            for _ in range(options.pages - 1):
                page = pages_stack.enter_context(browser_page(browser, console.base, console.token))
                page.goto(table)
                page.wait_for_function(ROWS_SHOWN, timeout=60_000)
                pages.append(page)
            # Every page's stream open: a change that every page shows.
            for _ in range(3):
                if all(at is not None for at in wait_seen(pages, workloads.change(rotation()), 10)):
                    break
            windows.append(steady_window(workloads, rotation, pages, **steady))
            figures["windows"] = windows
        figures["console_rss_mib_at_end"] = _rss_mib(pid)
        figures["console_cpu_seconds"] = _cpu_seconds(pid)
        figures["console_requests_in_all"] = dict(emulator.requests().get(CONSOLE_TOKEN, Counter()))
        if profiler is not None:
            profiler.stop()
            figures["profile"] = str(options.profile / "console.txt")
    return figures


# The report -----------------------------------------------------------------------------------


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.0f} ms"


def _within(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "met" if value <= GOAL_SECONDS else "MISSED"


def report(figures: Mapping[str, Any]) -> None:
    setup = figures["setup"]
    cost = figures["cost_model"]
    print(
        f"console benchmark: {figures['workloads']} Workloads in namespace {figures['namespace']}"
    )
    print(f"  machine load before:   {' '.join(figures['load'])}")
    print(
        "  emulator cost model:   "
        + (
            "none"
            if cost is None
            else f"{cost['write_latency'] * 1000:g} ms a write, "
            f"{cost['max_writes_in_flight']} at once"
        )
    )
    print(
        f"  setup:                 {setup['seconds']:.1f} s "
        f"({setup['workloads_per_second']:.0f} Workloads/s: each created, its status written, "
        f"finalized when ended); phases {setup['phases']}"
    )
    print(
        f"  console:               ready {figures['ready_seconds']:.2f} s after its start "
        f"(requests {figures['console_requests_at_start']}); RSS "
        f"{figures['console_rss_mib_at_start']:.0f} -> {figures['console_rss_mib_at_end']:.0f} MiB; "
        f"CPU {figures['console_cpu_seconds']:.1f} s in all"
    )
    plain = figures["plain_get_seconds"]
    print(
        f"  plain GET of the page: {_s(plain['p50'])} median, {_s(plain['max'])} max "
        f"({figures['page_bytes'] / 1024:.0f} KiB, {plain['count']} times)"
    )
    first = figures["first_page"]
    print(
        "  first page in chromium (new context each): goto -> 100 rows "
        f"{_s(first['seconds']['p50'])} median, {_s(first['seconds']['max'])} max; "
        + ", ".join(
            f"{label} {_s(first[key]['p50'])}"
            for label, key in (
                ("first byte", "first_byte"),
                ("DOMContentLoaded", "dom_content_loaded"),
                ("first contentful paint", "first_contentful_paint"),
            )
            if first[key]
        )
        + " (medians)"
    )
    change = figures["phase_change"]
    latency = change["latency_seconds"] or {}
    print(
        f"  phase change -> shown: p50 {_s(latency.get('p50'))}, p95 {_s(latency.get('p95'))}, "
        f"max {_s(latency.get('max'))} ({latency.get('count', 0)} changes, one page; "
        f"{change['not_seen_within_10_s']} not seen within 10 s); the status writes themselves "
        f"{_s((change['write_seconds'] or {}).get('p50'))} median"
    )
    idle = figures["idle"]
    print(
        f"  idle {idle['seconds']:.0f} s (1 page):      console CPU {idle['console_cpu_seconds']:.2f} s, "
        f"requests {idle['console_requests'] or 0}"
    )
    for window in figures["windows"]:
        shown = window["latency_seconds"] or {}
        print(
            f"  {window['pages']:>2} open page(s), {window['seconds']:.0f} s, "
            f"{window['changes']} changes: console requests {window['console_requests_total']} "
            f"{window['console_requests'] or ''} = {window['console_requests_per_minute']:.1f}/min; "
            f"console CPU {window['console_cpu_seconds']:.1f} s; shown p50 {_s(shown.get('p50'))}, "
            f"p95 {_s(shown.get('p95'))}, max {_s(shown.get('max'))} over every page "
            f"({window['not_seen']} not seen)"
        )
    print(
        f"  console requests in all: {figures['console_requests_in_all']} (its one watch is "
        f"renewed when the API server ends it: every {WATCH_TIMEOUT_SECONDS // 60} minutes, "
        "however many pages are open)"
    )
    one, many = figures["windows"][0], figures["windows"][-1]
    print()
    print(f"  {'goal':<52} {'figure':<34} verdict")
    print(
        f"  {'first page rendered <= 1 s':<52} "
        f"{_s(first['seconds']['p50']) + ' median, ' + _s(first['seconds']['max']) + ' max':<34} "
        f"{_within(first['seconds']['max'])}"
    )
    print(
        f"  {'phase change visible <= 1 s after the write':<52} "
        f"{'p95 ' + _s(latency.get('p95')) + ', max ' + _s(latency.get('max')):<34} "
        f"{_within(latency.get('max'))}"
    )
    alone, shared = one["console_requests_per_minute"], many["console_requests_per_minute"]
    same = abs(alone - shared) <= 2
    requests = f"{alone:.1f} (1 page) vs {shared:.1f} ({many['pages']} pages)"
    print(
        f"  {'API requests/min independent of open browsers':<52} {requests:<34} "
        f"{'met' if same else 'MISSED'}"
    )
    if figures.get("profile"):
        hot = hottest(Path(figures["profile"]))
        print(
            f"  profile of the console ({figures['profile']}, {hot['samples'][0][1]:.0f} samples):"
        )
        print("    by itself:  " + "; ".join(f"{f} {p}%" for f, p in hot["self_percent"]))
        print("    inclusive:  " + "; ".join(f"{f} {p}%" for f, p in hot["inclusive_percent"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join((__doc__ or "").split("\n\n")[0].split()))
    parser.add_argument("--workloads", type=int, default=None, help="Default 5000 (--quick: 300).")
    parser.add_argument("--threads", type=int, default=8, help="Threads creating Workloads.")
    parser.add_argument("--loads", type=int, default=None, help="First-page loads (10).")
    parser.add_argument("--changes", type=int, default=None, help="Timed phase changes (20).")
    parser.add_argument("--window", type=float, default=None, help="Seconds of each window (30).")
    parser.add_argument("--rate", type=float, default=2.0, help="Phase changes a second then.")
    parser.add_argument("--pages", type=int, default=10, help="Open pages of the second window.")
    parser.add_argument("--idle", type=float, default=None, help="Seconds of no change (10).")
    parser.add_argument("--quick", action="store_true", help="A smoke run: fewer, shorter.")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the console into DIR.")
    parser.add_argument("--py-spy", default=None, help="The py-spy executable.")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    add_cost_model_arguments(parser, BENCH_COST_MODEL, on=True)
    arguments = parser.parse_args()
    quick = arguments.quick
    options = Options(
        workloads=arguments.workloads or (300 if quick else 5000),
        threads=arguments.threads,
        loads=arguments.loads or (3 if quick else 10),
        changes=arguments.changes or (5 if quick else 20),
        window=arguments.window or (5.0 if quick else 30.0),
        idle=arguments.idle or (3.0 if quick else 10.0),
        rate=arguments.rate,
        pages=arguments.pages,
        cost_model=cost_model_from_arguments(parser, arguments),
        profile=arguments.profile,
        py_spy=arguments.py_spy,
    )
    with tempfile.TemporaryDirectory(prefix="podwright-console-bench-") as directory:
        figures = run(options, Path(directory))
    if arguments.json:
        print(json.dumps(figures, indent=2))
    else:
        report(figures)


if __name__ == "__main__":
    main()
