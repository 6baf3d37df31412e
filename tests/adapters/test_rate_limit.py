"""The client-side rate limit: client-go's token bucket (a burst, then one request a token, waiters
served in order), its settings checked, and the Kubernetes client waiting on it before every
request it sends, over HTTP against the emulator."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from podwright.adapters.kubernetes import KubernetesClient
from podwright.adapters.kubernetes.rate_limit import TokenBucket
from podwright.engine.kubernetes_port import ObjectRef
from tests.k8s_emulator import Emulator


class FakeTime:
    """A clock that moves only when slept on (``advances``) or never (the waits are recorded)."""

    def __init__(self, *, advances: bool) -> None:
        self.now = 100.0
        self.slept: list[float] = []
        self._advances = advances

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if self._advances:
            self.now += seconds


def test_the_token_bucket_lets_a_burst_through_then_one_request_per_token() -> None:
    time_ = FakeTime(advances=True)
    bucket = TokenBucket(2.0, 3, clock=time_.clock, sleep=time_.sleep)
    waits = [bucket.take() for _ in range(5)]
    assert waits == [0.0, 0.0, 0.0, 0.5, 0.5]
    assert time_.slept == [0.5, 0.5]


def test_the_token_bucket_saves_at_most_a_burst_while_idle() -> None:
    time_ = FakeTime(advances=True)
    bucket = TokenBucket(10.0, 2, clock=time_.clock, sleep=time_.sleep)
    time_.now += 60.0
    assert [bucket.take() for _ in range(3)] == [0.0, 0.0, 0.1]


def test_the_token_bucket_reserves_tokens_in_order_for_concurrent_waiters() -> None:
    """Each waiter reserves its token before it sleeps (``rate.Limiter.Wait``): the second
    waiter waits for the token after the first's."""
    time_ = FakeTime(advances=False)
    bucket = TokenBucket(4.0, 1, clock=time_.clock, sleep=time_.sleep)
    assert [bucket.take() for _ in range(3)] == [0.0, 0.25, 0.5]


@pytest.mark.parametrize(
    ("qps", "burst", "message"),
    [
        (0.0, 1, "qps must be more than 0, not 0.0"),
        (-5.0, 1, "qps must be more than 0, not -5.0"),
        (float("nan"), 1, "qps must be more than 0, not nan"),
        (1.0, 0, "burst must be 1 or more, not 0"),
    ],
)
def test_bad_settings_are_refused_naming_them(qps: float, burst: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TokenBucket(qps, burst)


class CountingBucket(TokenBucket):
    def __init__(self) -> None:
        super().__init__(1000.0, 1000)
        self.taken = 0

    def take(self) -> float:
        self.taken += 1
        return super().take()


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


def test_the_client_waits_on_its_rate_limit_before_every_request(emulator: Emulator) -> None:
    bucket = CountingBucket()
    client = KubernetesClient.for_host(emulator.url, rate_limit=bucket)
    try:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "limited"}})
        client.get(ObjectRef("v1", "Namespace", "", "limited"))
        client.list_objects("v1", "Namespace")
    finally:
        client.close()
    assert bucket.taken == 3
