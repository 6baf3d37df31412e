"""The ``kube`` fixture: the in-memory Kubernetes port, with the plugin manager tests' namespace."""

from __future__ import annotations

import pytest

from tests.engine.fake_kubernetes import FakeKubernetes

NAMESPACE = "team"


@pytest.fixture
def kube() -> FakeKubernetes:
    fake = FakeKubernetes()
    fake.namespace(NAMESPACE)
    return fake
