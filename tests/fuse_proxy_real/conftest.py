"""Fixtures for the real FUSE tests: one daemon per module, checked after every test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fuse_proxy_real.harness import (
    Daemon,
    Workspace,
    daemon_checked,
    kill_callers,
    mounts_below,
    require_real_fuse,
)


@pytest.fixture(scope="module")
def workspace() -> Iterator[Workspace]:
    require_real_fuse()
    space = Workspace()
    yield space
    kill_callers()
    assert mounts_below(space.root) == [], "a test left a mount in the test process's namespace"
    space.remove()


@pytest.fixture(scope="module")
def daemon(workspace: Workspace) -> Iterator[Daemon]:
    server = Daemon(workspace)
    # One request first, so that lazily opened descriptors are part of the baseline.
    assert server.answers()
    yield server
    server.stop()  # fails the last test, saying why, unless the daemon exits 0 leaving nothing


@pytest.fixture(autouse=True)
def daemon_still_serves(request: pytest.FixtureRequest) -> Iterator[None]:
    if "daemon" not in request.fixturenames:
        yield
        return
    server: Daemon = request.getfixturevalue("daemon")
    with daemon_checked(server, server.fd_count()):
        yield
