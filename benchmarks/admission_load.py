"""What the admission webhook benchmarks share: the server in a process of its own, the load.

``webhook_server_bench.py`` measures the bare server (a trivial handler), ``webhook_bench.py``
podwright's webhooks (their decisions over 50 policies). Both run the server
(``podwright.adapters.webhook_server``, its certificate from a ``CertificateKeeper``) in a process
of its own, so that the load's own work is not counted in the server's time, and send it
AdmissionReviews as an API server does: over kept-alive HTTPS connections, each review with a uid
of its own, at a fixed rate in all (open loop: a review is timed from when it was due, so a slow
answer delays the ones after it and counts in their latency too). Every answer is checked: a
benchmark that times wrong answers measures nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import http.client
import json
import multiprocessing
import ssl
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from multiprocessing.connection import Connection
from typing import Any

from podwright.adapters.certificates import CertificateKeeper
from podwright.adapters.webhook_server import Handler, WebhookServer

HOST = "127.0.0.1"
TARGET_P99_MS = 5.0
"""Issue 31's target at 200 reviews/s on 2 cores (issue 18's was 10 ms)."""
UID = "REVIEW-UID"
"""The placeholder each review's template carries where its uid goes."""

Routes = tuple[Mapping[str, Handler], tuple[type[Exception], ...]]
"""The server's routes, and the exceptions of its handlers that mean a bad review (400)."""

Check = Callable[[Mapping[str, Any]], str | None]
"""What is wrong with an answer's ``response`` (None: it is what it should be)."""


def allow(review: Mapping[str, Any]) -> dict[str, Any]:
    """A handler that answers at once: allowed, nothing patched (what the server alone costs)."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": review["request"]["uid"], "allowed": True},
    }


@dataclasses.dataclass(frozen=True)
class Call:
    """One AdmissionReview to send: its path, its JSON with :data:`UID` where its uid goes,
    and the check of its answer."""

    path: str
    review: bytes
    check: Check


def _serve(pipe: Connection, make_routes: Callable[[], Routes], answer_inline: bool) -> None:
    """The server process: tells its port and CA bundle, serves until told to stop (its
    handlers on the loop's thread, as ``podwright webhook`` and the operator run theirs, unless
    not ``answer_inline``)."""
    routes, bad_review_errors = make_routes()
    keeper = CertificateKeeper([HOST], clock=lambda: datetime.datetime.now(datetime.UTC))
    keeper.refresh()
    with WebhookServer(
        routes, keeper, host=HOST, bad_review_errors=bad_review_errors, answer_inline=answer_inline
    ) as server:
        pipe.send((server.address[1], keeper.ca_bundle))
        pipe.recv()


@contextlib.contextmanager
def server_process(
    make_routes: Callable[[], Routes], *, answer_inline: bool = True
) -> Iterator[tuple[int, bytes]]:
    """A webhook server in a process of its own, serving what ``make_routes`` (a module-level
    function: the process is spawned) gives, its handlers on the loop's thread
    (``answer_inline``) or on its thread pool; its port and CA bundle (PEM)."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    server = context.Process(target=_serve, args=(theirs, make_routes, answer_inline), daemon=True)
    server.start()
    try:
        if not ours.poll(60):
            raise RuntimeError("the webhook server process did not start within 60 s")
        yield ours.recv()
        ours.send("stop")
        server.join(timeout=15)
    finally:
        if server.is_alive():
            server.terminate()
            server.join(timeout=5)


@dataclasses.dataclass
class Share:
    """One connection's share of a run: each review's latency (ms) and each wrong answer."""

    latencies: list[float] = dataclasses.field(default_factory=list)
    wrong: list[str] = dataclasses.field(default_factory=list)


def _load(
    port: int,
    bundle: bytes,
    calls: Sequence[Call],
    *,
    rate: float,
    seconds: float,
    index: int,
    connections: int,
) -> Share:
    """One connection's share of the schedule: review ``n`` of the run is ``calls[n %
    len(calls)]``, this connection sends every ``connections``-th from ``index`` on."""
    context = ssl.create_default_context(cadata=bundle.decode())
    connection = http.client.HTTPSConnection(HOST, port, context=context, timeout=10)
    interval = connections / rate
    start = time.perf_counter() + 0.5 + index * (1 / rate)
    share = Share()
    for sent in range(int(seconds * rate / connections)):
        number = sent * connections + index
        call = calls[number % len(calls)]
        uid = f"{index}-{sent}"
        due = start + sent * interval
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        connection.request(
            "POST",
            f"{call.path}?timeout=5s",
            call.review.replace(UID.encode(), uid.encode()),
            {"Content-Type": "application/json", "Accept": "application/json"},
        )
        response = connection.getresponse()
        body = response.read()
        share.latencies.append((time.perf_counter() - due) * 1000)
        problem = _problem(response.status, body, uid, call)
        if problem is not None:
            share.wrong.append(f"{call.path} #{number}: {problem}")
    connection.close()
    return share


def _problem(status: int, body: bytes, uid: str, call: Call) -> str | None:
    if status != 200:
        return f"answered {status}: {body[:300]!r}"
    answer = json.loads(body)
    response = answer.get("response") or {}
    if response.get("uid") != uid:
        return f"the answer's uid is {response.get('uid')!r}, not {uid!r}"
    return call.check(response)


def run_load(
    port: int,
    bundle: bytes,
    calls: Sequence[Call],
    *,
    rate: float,
    seconds: float,
    connections: int,
) -> Share:
    """``calls`` over and over at ``rate`` per second for ``seconds``, over ``connections``
    kept-alive connections; every latency, and every wrong answer."""
    shares = [Share() for _ in range(connections)]

    def run(index: int) -> None:
        shares[index] = _load(
            port,
            bundle,
            calls,
            rate=rate,
            seconds=seconds,
            index=index,
            connections=connections,
        )

    threads = [threading.Thread(target=run, args=(index,)) for index in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Share(
        sorted(latency for share in shares for latency in share.latencies),
        [wrong for share in shares for wrong in share.wrong],
    )


def latency_figures(latencies: Sequence[float]) -> dict[str, float]:
    """p50, p99 and the worst of sorted ``latencies`` (ms), rounded to 0.01 ms."""
    return {
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(latencies[max(int(len(latencies) * 0.99) - 1, 0)], 2),
        "max_ms": round(latencies[-1], 2),
    }


def print_latency_table(figures: Mapping[str, Any]) -> None:
    """The latency figures as the webhook benchmarks print them: one header, one row."""
    print(f"{'reviews':>10} {'rate/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    print(
        f"{figures['reviews']:>10} {figures['rate_per_second']:>8.0f} {figures['p50_ms']:>8} "
        f"{figures['p99_ms']:>8} {figures['max_ms']:>8}"
    )
