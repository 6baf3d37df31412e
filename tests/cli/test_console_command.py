"""``podwright console``: what it refuses before it serves anything, each naming the option
(serving itself is driven in tests/console/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from podwright.cli.main import cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--listen", "0.0.0.0:8080"],
            "--listen 0.0.0.0:8080: beyond loopback the console's token would cross the network "
            "in clear; give --tls-cert and --tls-key, or --insecure to accept that",
        ),
        (["--listen", "8080"], "--listen '8080': HOST:PORT"),
        (["--listen", "127.0.0.1:99999"], "a port from 0 (any free one) to 65535"),
        (["--tls-cert", "cert.pem"], "--tls-cert and --tls-key go together: give both"),
        (["-n", "vision"], "--namespace: goes with --backend operator"),
        (
            ["--backend", "operator", "--policy", "policy.yaml"],
            "--policy: with --backend operator the cluster's own policies and assets judge",
        ),
        (["--policy", "missing.yaml"], "missing.yaml"),
    ],
)
def test_what_cannot_be_served_is_refused_before_serving(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        cli, ["console", "--home", str(tmp_path / "home"), *args], catch_exceptions=False
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "open http" not in result.output
