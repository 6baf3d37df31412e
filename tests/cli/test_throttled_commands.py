"""A command against an API server that asks to be asked again later: ``podwright install``
against the emulator answering ``429 storage is (re)initializing`` with ``Retry-After``, as a real
server answers while a new kind's watch cache starts. Every command talks to the server through
the one client, which retries such answers (tests/kube/test_throttled_requests.py has the
policy's every case); here the command's own outcome: done, or refused with the retries said.

The client's waits are real here (a command makes its own client): one second each, as little
as a server asks for.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from podwright.cli import main
from podwright.core.install_manifests import InstallSettings, install_manifests
from tests.k8s_emulator import Emulator, Fault
from tests.kube.support import write_kubeconfig

CRDS = "/customresourcedefinitions/"
INITIALIZING = "storage is (re)initializing"


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


def _install(emulator: Emulator, tmp_path: Path) -> tuple[int, str, str]:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", emulator.url)
    result = CliRunner().invoke(main.cli, ["install", "--kubeconfig", str(kubeconfig), "--no-wait"])
    return result.exit_code, result.stdout, result.stderr


def test_an_install_answered_429_with_retry_after_completes(
    emulator: Emulator, tmp_path: Path
) -> None:
    fault = emulator.inject(
        Fault(429, times=2, method="PATCH", path=CRDS, retry_after=1, message=INITIALIZING)
    )
    code, stdout, stderr = _install(emulator, tmp_path)
    assert (code, stderr) == (0, "")
    assert fault.times == 0
    assert len(stdout.splitlines()) == len(install_manifests(InstallSettings()))
    assert all(line.endswith(" applied") for line in stdout.splitlines())


def test_an_install_asked_to_wait_past_the_bound_stops_saying_so(
    emulator: Emulator, tmp_path: Path
) -> None:
    emulator.inject(
        Fault(429, times=1, method="PATCH", path=CRDS, retry_after=120, message=INITIALIZING)
    )
    code, stdout, stderr = _install(emulator, tmp_path)
    assert code == 5
    assert stdout == ""
    assert stderr.startswith("podwright: error: customresourcedefinition.apiextensions.k8s.io/")
    assert stderr.endswith(
        f": the API server refused it: {INITIALIZING} (not retried: waiting the 120 s "
        "Retry-After asks for would pass the 60 s bound on Retry-After waits)\n"
    )
