"""Answers that ask to be retried later, through the Kubernetes client over HTTP.

A real API server answers ``429`` with ``Retry-After`` when priority and fairness sheds a request
and while a watch cache starts (``storage is (re)initializing`` right after a CRD becomes
Established: ``Cacher.Watch``, k8s.io/apiserver/pkg/storage/cacher/cacher.go). It cannot be made
to on demand, so these tests run against the emulator, whose injected faults answer as
``errors.NewTooManyRequests`` does (the first test pins the answer). The client retries such an
answer as client-go does (``checkWait`` in k8s.io/client-go/rest/request.go, ``IsNextRetry`` in
rest/with_retry.go), for every verb and for watches; the waits are recorded, not slept. The
real-server side is tests/kube/test_custom_resources.py, whose first LIST of a fresh CRD goes
through these retries.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from podwright.adapters.kubernetes import KubernetesClient, Reflector, WatchCache
from podwright.adapters.kubernetes.retry import DEFAULT_RETRIES, RetryAfterPolicy
from podwright.engine.kubernetes_port import ServerError, ThrottledError
from tests.k8s_emulator import Emulator, Fault
from tests.kube.support import config_map, emulator_with_namespace

NAMESPACE = "throttled"
CONFIG_MAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps$"
INITIALIZING = "storage is (re)initializing"


@dataclass
class Throttled:
    """An emulator, and a client of it that records the waits it makes and its requests."""

    emulator: Emulator
    client: KubernetesClient
    waits: list[float]
    answers: list[tuple[str, str]]
    """The verb and status of every request, each retry included."""

    def inject(self, times: int, retry_after: int, *, method: str = "GET") -> Fault:
        return self.emulator.inject(
            Fault(
                429,
                times=times,
                method=method,
                path=CONFIG_MAPS,
                retry_after=retry_after,
                message=INITIALIZING,
            )
        )


def _throttled(emulator: Emulator, retries: RetryAfterPolicy) -> Iterator[Throttled]:
    waits: list[float] = []
    answers: list[tuple[str, str]] = []
    client = KubernetesClient.for_host(
        emulator.url,
        retries=retries,
        sleep=waits.append,
        observer=lambda verb, code: answers.append((verb, code)),
    )
    try:
        yield Throttled(emulator, client, waits, answers)
    finally:
        client.close()


@pytest.fixture
def throttled() -> Iterator[Throttled]:
    with emulator_with_namespace(NAMESPACE) as emulator:
        yield from _throttled(emulator, DEFAULT_RETRIES)


@pytest.fixture
def bounded() -> Iterator[Throttled]:
    """A client that waits 5 s at most for one request."""
    with emulator_with_namespace(NAMESPACE) as emulator:
        yield from _throttled(emulator, RetryAfterPolicy(max_total_wait_seconds=5))


def _raw_get(url: str) -> tuple[int, dict[str, str], dict[str, object]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, dict(answer.headers), json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.load(error)


@pytest.mark.parametrize(
    ("retry_after", "header", "details"),
    [
        pytest.param(3, "3", {"details": {"retryAfterSeconds": 3}}, id="asking-for-a-wait"),
        pytest.param(0, None, {}, id="asking-for-none"),
    ],
)
def test_the_emulator_answers_a_throttled_request_as_the_api_server_does(
    throttled: Throttled, retry_after: int, header: str | None, details: dict[str, object]
) -> None:
    """``errors.NewTooManyRequests(message, retryAfterSeconds)``
    (k8s.io/apimachinery/pkg/api/errors/errors.go) puts the seconds in ``details``
    (``omitempty``: not when 0), and ``ErrorNegotiated``
    (k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go) into ``Retry-After``
    when they are more than 0."""
    throttled.inject(1, retry_after)
    url = throttled.emulator.url + CONFIG_MAPS.rstrip("$")
    status, headers, body = _raw_get(url)
    assert status == 429
    assert headers.get("Retry-After") == header
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": INITIALIZING,
        "reason": "TooManyRequests",
        "code": 429,
        **details,
    }
    assert _raw_get(url)[0] == 200  # the fault answered once


def test_a_list_answered_429_twice_is_answered_on_the_third_try(throttled: Throttled) -> None:
    """Each throttled answer is read whole before the retry, so the retry goes over the same
    connection (client-go's ``readAndCloseResponseBody``, rest/with_retry.go)."""
    throttled.client.create(config_map("kept", NAMESPACE, app="t"))
    throttled.inject(2, 2)
    items, _version = throttled.client.list_objects(
        "v1", "ConfigMap", namespace=NAMESPACE, label_selector="app=t"
    )
    assert [item["metadata"]["name"] for item in items] == ["kept"]
    assert throttled.waits == [2, 2]
    assert throttled.answers[-3:] == [("list", "429"), ("list", "429"), ("list", "200")]
    assert throttled.client.connections_opened() == 1


def test_a_create_answered_429_is_made_once_on_its_retry(throttled: Throttled) -> None:
    """A 429 says the server did not carry the request out: client-go retries it whatever the
    verb (only a connection failure is retried for GETs alone, ``request`` in request.go)."""
    throttled.inject(1, 1, method="POST")
    throttled.client.create(config_map("once", NAMESPACE, app="t"))
    assert throttled.waits == [1]
    items, _version = throttled.client.list_objects(
        "v1", "ConfigMap", namespace=NAMESPACE, label_selector="app=t"
    )
    assert [item["metadata"]["name"] for item in items] == ["once"]
    assert throttled.answers[:2] == [("create", "429"), ("create", "201")]


def test_retries_stop_after_ten_and_the_error_says_so(throttled: Throttled) -> None:
    throttled.inject(DEFAULT_RETRIES.max_retries + 1, 1)
    with pytest.raises(ThrottledError) as raised:
        throttled.client.list_objects("v1", "ConfigMap", namespace=NAMESPACE)
    assert raised.value.message == (
        f"{INITIALIZING} (gave up after 10 retries over 10.0 s (Retry-After): 10 retries at most)"
    )
    assert (raised.value.status, raised.value.retry_after) == (429, 1)
    assert throttled.waits == [1] * 10


def test_retries_stop_before_a_wait_that_passes_the_bound(bounded: Throttled) -> None:
    bounded.inject(5, 2)
    with pytest.raises(ThrottledError) as raised:
        bounded.client.list_objects("v1", "ConfigMap", namespace=NAMESPACE)
    assert raised.value.message == (
        f"{INITIALIZING} (gave up after 2 retries over 4.0 s (Retry-After): waiting 2 s more "
        "would pass the 5 s bound on Retry-After waits)"
    )
    assert bounded.waits == [2, 2]


@pytest.mark.parametrize(
    ("status", "retry_after", "waits", "error"),
    [
        pytest.param(503, 1, [1], None, id="5xx-with-retry-after-retried"),
        pytest.param(503, None, [], ServerError, id="5xx-without-retry-after-raised"),
        pytest.param(429, 0, [], ThrottledError, id="429-without-retry-after-raised"),
    ],
)
def test_only_an_answer_with_retry_after_is_retried(
    throttled: Throttled,
    status: int,
    retry_after: int | None,
    waits: list[float],
    error: type[Exception] | None,
) -> None:
    """client-go's ``checkWait`` retries a 429 or a 5xx only when ``Retry-After`` says when; the
    engine backs off from the others on its own."""
    throttled.emulator.inject(Fault(status, path=CONFIG_MAPS, retry_after=retry_after))
    if error is None:
        throttled.client.list_objects("v1", "ConfigMap", namespace=NAMESPACE)
    else:
        with pytest.raises(error) as raised:
            throttled.client.list_objects("v1", "ConfigMap", namespace=NAMESPACE)
        assert raised.value.args == (f"injected fault {status}",)
    assert throttled.waits == waits


def test_a_watch_answered_429_is_retried_then_streams(throttled: Throttled) -> None:
    """client-go's ``Watch`` asks ``IsNextRetry`` with the answer as ``Do`` does."""
    _items, version = throttled.client.list_objects("v1", "ConfigMap", namespace=NAMESPACE)
    throttled.client.create(config_map("seen", NAMESPACE))
    throttled.inject(2, 1)
    events = throttled.client.watch(
        "v1", "ConfigMap", resource_version=version, namespace=NAMESPACE, timeout_seconds=5
    )
    first = next(event for event in events if event["type"] != "BOOKMARK")
    events.close()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "seen")
    assert throttled.waits == [1, 1]
    assert throttled.answers[-3:] == [("watch", "429"), ("watch", "429"), ("watch", "200")]


def test_a_reflector_syncs_through_throttled_answers_without_an_error(
    throttled: Throttled,
) -> None:
    """The reflector's own backoff on a ThrottledError is left for a client that gave up."""
    throttled.client.create(config_map("cached", NAMESPACE))
    throttled.inject(2, 1)
    cache = WatchCache()
    reflector = Reflector(throttled.client, "v1", "ConfigMap", cache, namespace=NAMESPACE).start()
    try:
        assert reflector.wait_synced(10)
        assert cache.get(NAMESPACE, "cached") is not None
        assert (reflector.lists, reflector.error) == (1, "")
    finally:
        reflector.stop()
    assert throttled.waits[:2] == [1, 1]
