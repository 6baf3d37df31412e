"""The container image: ``make image`` builds it from the Dockerfile with buildah, and it runs.

``make image`` makes the base image from Debian's packages when it is missing (no image registry
is reachable), builds the Dockerfile with ``buildah bud --isolation chroot`` and runs its own two
checks in a working container. This test runs it, then looks at the image itself: its
configuration (a user that is not root, the entry point, the labels) and, in a working container
of its own, what ``podwright --version`` and ``podwright operator --help`` print there. Every
working container made meanwhile is removed, whatever happens.

It needs root, make, mmdebstrap, podman and buildah (``make test`` installs the Debian packages),
and Debian's mirrors and PyPI; without the first, it skips, and under ``CI=true`` it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from podwright._version import __version__

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parents[2]
IMAGE = f"podwright:{__version__}"
COMMANDS = ("make", "mmdebstrap", "podman", "buildah")
BUILD_TIMEOUT = 840
"""Seconds for ``make image``: about 100 from nothing (the base image included), 20 when warm."""
RUN_TIMEOUT = 60


def require_image_tools() -> None:
    """Skip where root or the tools are missing; under CI=true, fail instead."""
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root")
    problems += [f"needs {command}" for command in COMMANDS if shutil.which(command) is None]
    if problems:
        message = "image test: " + "; ".join(problems)
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: this test must run, not skip)")
        pytest.skip(message)


def working_containers() -> set[str]:
    listed = subprocess.run(
        ["buildah", "containers", "--all", "--quiet", "--notruncate"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=True,
    )
    return set(listed.stdout.split())


def buildah(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["buildah", *args], capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )


def make_image() -> None:
    # A make above pytest (make check) must not hand its jobserver to this one.
    env = {key: value for key, value in os.environ.items() if key not in {"MAKEFLAGS", "MFLAGS"}}
    env.pop("MAKELEVEL", None)
    built = subprocess.run(
        ["make", "--no-print-directory", "image"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    tail = "\n".join(built.stdout.splitlines()[-60:])
    assert built.returncode == 0, f"make image exited {built.returncode}:\n{tail}"
    assert f"podwright, version {__version__}" in built.stdout, tail


@pytest.mark.timeout(900)
def test_make_image_builds_an_image_whose_podwright_runs_as_a_user_that_is_not_root() -> None:
    require_image_tools()
    before = working_containers()
    container = None
    try:
        make_image()

        inspected = buildah("inspect", "--type", "image", IMAGE)
        assert inspected.returncode == 0, inspected.stderr
        config = json.loads(inspected.stdout)["OCIv1"]["config"]
        assert config["User"] == "65532:65532"
        assert config["Entrypoint"] == ["/opt/podwright/bin/podwright"]
        assert config["Cmd"] == ["operator"]
        assert config["Labels"]["org.opencontainers.image.version"] == __version__
        assert config["Labels"]["org.opencontainers.image.title"] == "podwright"

        made = buildah("from", "--pull-never", "--quiet", IMAGE)
        assert made.returncode == 0, made.stderr
        container = made.stdout.strip()

        def run(*command: str) -> subprocess.CompletedProcess[str]:
            return buildah("run", "--isolation", "chroot", container, "--", *command)

        user = run("id", "-u")
        assert (user.returncode, user.stdout.strip()) == (0, "65532"), user.stderr
        version = run("podwright", "--version")
        assert version.returncode == 0, version.stderr
        assert version.stdout.strip() == f"podwright, version {__version__}"
        operator = run("podwright", "operator", "--help")
        assert operator.returncode == 0, operator.stderr
        assert "Usage: podwright operator" in operator.stdout, operator.stdout
    finally:
        if container is not None:
            buildah("rm", container)
        left = working_containers() - before
        for leftover in left:
            buildah("rm", leftover)
    assert not left, f"working containers left behind: {sorted(left)}"
