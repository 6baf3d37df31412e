"""Test settings shared by every tier, and the fixtures several tiers use.

The suite runs on every core (``pytest -n 2 --dist loadgroup``, the README's ``make test``):
tests that must not overlap are put in one ``xdist_group``, so that one worker runs them one
after the other (:data:`SERIAL_GROUPS`), and every test of a real cluster (marked ``cluster``) is
in the group ``real-cluster``. pytest-xdist 3.8 does not group them by itself under pytest 9.2 (it
marks a group in the test's id, which pytest now builds apart: pytest-dev/pytest-xdist#1386), so
:func:`pytest_xdist_make_scheduler` gives ``loadgroup`` a scheduler that reads the group from the
test's path and parameters (:func:`group_of_test`, checked against the markers at collection).
A real cluster's tests share one worker, so that what a session installs there (CRDs, webhook
configurations, the operator's install) is installed and removed by one process, and what one
test installs cluster-wide is never in another's way. There, a skipped test
is a failed one (:func:`skip_on_a_real_cluster`): it did not test what it is there for. Soak tests
run :func:`soak_rounds` rounds.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from podwright.adapters.local.cluster import LocalCluster
from podwright.engine.event_index import EventIndex
from tests.cluster.support import RealCluster, real_cluster_session
from tests.kube.support import KUBECONFIG_VARIABLE

# CI explores more examples; locally the suite stays quick. Deadlines are off: timing belongs in
# benchmarks/, and a loaded CI machine must not turn a slow example into a failure.
settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")

TESTS = Path(__file__).resolve().parent
SERIAL_GROUPS = {
    # The callers are fixed uids (40001, 40002) whose every process is killed after each test,
    # and the shutdown tests time the daemon's exit: two workers would kill each other's callers.
    TESTS / "fuse_proxy_real": "real-fuse",
    # buildah's storage and the base image are the machine's: one build at a time.
    TESTS / "image": "image",
}
"""Directories whose tests one worker runs, one after the other, with the group's name."""
STARTED_FIRST = "image"
"""The group of the longest test (a minute and a half to several, the image's build): put first,
so that it runs from the start on one worker while the others share the rest."""
REAL_CLUSTER_GROUP = "real-cluster"
CLUSTER_TIERS = ("kube", "cluster")
"""The directories of the tests that run against a real cluster too (``[cluster]``)."""
SOAK_ROUNDS_VARIABLE = "PODWRIGHT_TEST_SOAK_ROUNDS"
SOAK_ROUNDS = 8
"""The rounds of a soak test unless ``--soak-rounds`` or ``PODWRIGHT_TEST_SOAK_ROUNDS`` says
otherwise: what CI runs, enough for every kind of round to come up more than once."""
_SOAK_ROUNDS = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak-rounds",
        type=int,
        default=None,
        help=f"rounds of each soak test (default: ${SOAK_ROUNDS_VARIABLE}, else {SOAK_ROUNDS})",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "xdist_group(name): tests one pytest-xdist worker runs one after the other"
    )
    config.stash[_SOAK_ROUNDS] = chosen_soak_rounds(
        config.getoption("--soak-rounds"), os.environ.get(SOAK_ROUNDS_VARIABLE)
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Name the threads that would keep this process from exiting (a worker that cannot exit
    hangs the whole session): what a hung CI run needs to say where it hangs."""
    lingering = [
        thread.name
        for thread in threading.enumerate()
        if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()
    ]
    if lingering:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "the session")
        print(f"{worker}: threads still running at its end: {lingering}", file=sys.stderr)


def chosen_soak_rounds(option: int | None, variable: str | None) -> int:
    """The soak rounds ``--soak-rounds`` (``option``) or else ``PODWRIGHT_TEST_SOAK_ROUNDS``
    (``variable``) asks for, else :data:`SOAK_ROUNDS`; a usage error for anything but a whole
    number of at least 1."""
    if option is None and variable:
        if not variable.isdigit():
            raise pytest.UsageError(
                f"{SOAK_ROUNDS_VARIABLE} must be a whole number of rounds, not {variable!r}"
            )
        return chosen_soak_rounds(int(variable), None)
    if option is not None and option < 1:
        raise pytest.UsageError(f"soak rounds must be at least 1, not {option}")
    return SOAK_ROUNDS if option is None else option


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its loadgroup hook)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    groups = {}
    for item in items:
        group = serial_group(item.path, cluster=item.get_closest_marker("cluster") is not None)
        if group != group_of_test(item.nodeid):
            raise pytest.UsageError(
                f"{item.nodeid}: its id says group {group_of_test(item.nodeid)}, its place and "
                f"marks {group} (a first parameter id 'cluster' is for the real cluster's tests alone)"
            )
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        groups[item.nodeid] = group
    items.sort(key=lambda item: groups[item.nodeid] != STARTED_FIRST)


def group_of_test(nodeid: str) -> str | None:
    """:func:`serial_group` of a test by its id alone (all the scheduler sees): its file, and
    whether it is a test of the tiers whose first parameter's id is ``cluster`` (that of the
    ``api`` and ``server`` fixtures, which pytest puts first)."""
    path, _, name = nodeid.partition("::")
    parameters = name[name.index("[") + 1 : -1] if name.endswith("]") and "[" in name else ""
    file = TESTS.parent / path
    tier = any(file.is_relative_to(TESTS / directory) for directory in CLUSTER_TIERS)
    return serial_group(file, cluster=tier and parameters.split("-")[0] == "cluster")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """For ``--dist loadgroup``: pytest-xdist's scheduler, with the groups read from each
    test's id (:func:`group_of_test`) where xdist did not mark one there itself."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling  # only under pytest-xdist

    class TierScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope: str = super()._split_scope(nodeid)
            return scope if scope != nodeid else (group_of_test(nodeid) or nodeid)

    return TierScheduling(config, log)


def serial_group(path: Path, *, cluster: bool) -> str | None:
    """The ``xdist_group`` of a test in ``path`` (``cluster``: it runs against a real cluster),
    None for a test any worker may run beside any other."""
    if cluster:
        return REAL_CLUSTER_GROUP
    for directory, group in SERIAL_GROUPS.items():
        if path.is_relative_to(directory):
            return group
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[None]:
    report: pytest.TestReport = yield
    if report.skipped and not hasattr(report, "wasxfail"):
        failure = skip_on_a_real_cluster(
            cluster=item.get_closest_marker("cluster") is not None,
            kubeconfig=os.environ.get(KUBECONFIG_VARIABLE),
            reason=str(report.longrepr[2] if isinstance(report.longrepr, tuple) else ""),
        )
        if failure is not None:
            report.outcome = "failed"
            report.longrepr = failure
    return report


def skip_on_a_real_cluster(*, cluster: bool, kubeconfig: str | None, reason: str) -> str | None:
    """Why a test skipped for ``reason`` fails instead: it is one of a real cluster's
    (``cluster``) and ``PODWRIGHT_TEST_KUBECONFIG`` names one (``kubeconfig``); None when the
    skip stands."""
    if not cluster or not kubeconfig:
        return None
    return f"a test of the real cluster ({KUBECONFIG_VARIABLE}={kubeconfig}) skipped: {reason}"


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    """The real cluster of ``PODWRIGHT_TEST_KUBECONFIG``, for the session and both tiers
    (skipped without it): podwright's CRDs installed once, and at the end every namespace the
    session made deleted and the CRDs it installed removed."""
    with real_cluster_session() as cluster:
        yield cluster


@pytest.fixture
def soak_rounds(request: pytest.FixtureRequest) -> int:
    """How many rounds a soak test runs (``--soak-rounds``, ``PODWRIGHT_TEST_SOAK_ROUNDS``)."""
    return request.config.stash[_SOAK_ROUNDS]


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
