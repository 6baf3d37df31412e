"""Test settings shared by every tier, and the fixtures several tiers use."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from podwright.adapters.local.cluster import LocalCluster
from podwright.engine.event_index import EventIndex

# CI explores more examples; locally the suite stays quick. Deadlines are off: timing belongs in
# benchmarks/, and a loaded CI machine must not turn a slow example into a failure.
settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")


@pytest.fixture
def events() -> EventIndex:
    """An event index, as the engine keeps one."""
    return EventIndex(ttl=timedelta(hours=1), max_per_object=50)


@pytest.fixture
def cluster(tmp_path: Path, events: EventIndex) -> Iterator[LocalCluster]:
    """The local backend, its events in ``events``; every process it started is killed after."""
    local = LocalCluster(tmp_path / "local", events=events)
    yield local
    local.close()
