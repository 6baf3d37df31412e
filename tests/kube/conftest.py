"""The ``api`` fixture: every test here runs against the emulator, and, marked ``cluster``, against
the real API server named by ``PODWRIGHT_TEST_KUBECONFIG`` (the session's, ``real_cluster``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.support import PodwrightCrds, RealCluster
from tests.kube.support import ApiServer, emulated, real


@pytest.fixture(params=["emulator", pytest.param("cluster", marks=pytest.mark.cluster)])
def api(request: pytest.FixtureRequest) -> Iterator[ApiServer]:
    if request.param == "cluster":
        request.getfixturevalue("real_cluster")
        yield from real()
    else:
        yield from emulated()


@pytest.fixture
def emulator_api() -> Iterator[ApiServer]:
    yield from emulated()


@pytest.fixture
def podwright_crds(api: ApiServer, request: pytest.FixtureRequest) -> None:
    """podwright's CRDs of ``deploy/crds/`` in place: on a real cluster, the session's install
    (made once, kept until the session ends, shared with the cluster tier); on the emulator,
    in the test's own."""
    if api.is_real:
        cluster: RealCluster = request.getfixturevalue("real_cluster")
        cluster.crds.install()
    else:
        PodwrightCrds(api.api_client).install()
