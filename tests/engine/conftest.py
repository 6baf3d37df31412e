"""The ``kube`` fixture: the in-memory Kubernetes port, with the plugin manager tests' namespace;
and the executor tests' clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.engine.fake_kubernetes import FakeKubernetes

NAMESPACE = "team"


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def kube() -> FakeKubernetes:
    fake = FakeKubernetes()
    fake.namespace(NAMESPACE)
    return fake
