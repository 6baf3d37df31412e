"""The ``api`` fixture: every test here runs against the emulator, and, marked ``cluster``, against
the real API server named by ``PODWRIGHT_TEST_KUBECONFIG``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kube.support import ApiServer, emulated, real


@pytest.fixture(params=["emulator", pytest.param("cluster", marks=pytest.mark.cluster)])
def api(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    yield from (emulated() if request.param == "emulator" else real())


@pytest.fixture
def emulator_api() -> Iterator[ApiServer]:
    yield from emulated()
