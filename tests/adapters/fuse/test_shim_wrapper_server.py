"""The shim and wrapper as installed (a zipapp that needs only the standard library), and the
daemon's start-up checks; none of these needs root or a FUSE device."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from podwright.adapters.fuse.bundle import build_bundle, install_bundle
from podwright.adapters.fuse.errors import ServerSetupError
from podwright.adapters.fuse.server import FuseProxyServer, ServerConfig
from podwright.cli.main import cli
from podwright.core.fuse_proxy.mount_policy import ProxyPolicy


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bundle")
    # -S: no site-packages, so the bundle runs on the standard library alone.
    install_bundle(str(directory), f"{sys.executable} -IS")
    return directory


def run(
    program: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        "PATH": os.environ["PATH"],
        "PODWRIGHT_FUSE_PROXY_SOCKET": "/nonexistent/proxy.sock",
        **(env or {}),
    }
    return subprocess.run(
        [str(program), *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )


def test_the_bundle_is_installed_under_three_names_and_runs_without_site_packages(
    bundle: Path,
) -> None:
    assert sorted(path.name for path in bundle.iterdir()) == [
        "fusermount",
        "fusermount-wrapper",
        "fusermount3",
    ]
    for name in ("fusermount", "fusermount3"):
        result = run(bundle / name, "-V")
        assert (result.returncode, result.stdout) == (
            0,
            f"{name} version: podwright fuse-proxy shim, protocol 1\n",
        ), result.stderr
    assert "usage: fusermount3 [options] mountpoint" in run(bundle / "fusermount3", "-h").stdout
    assert "-m MOUNTPOINT" in run(bundle / "fusermount-wrapper", "--help").stdout


def test_the_shim_reports_like_fusermount(bundle: Path) -> None:
    usage = run(bundle / "fusermount3", "-x", "/mnt/a")
    assert (usage.returncode, usage.stderr) == (
        1,
        "fusermount3: invalid option -- 'x'\nTry 'fusermount3 -h' for more information.\n",
    )
    old_style = run(bundle / "fusermount", "-o", "ro", "/mnt/a")
    assert (old_style.returncode, old_style.stderr) == (
        1,
        "fusermount: old style mounting not supported ($_FUSE_COMMFD is not set)\n",
    )
    bad_fd = run(bundle / "fusermount3", "/mnt/a", env={"_FUSE_COMMFD": "99"})
    assert bad_fd.stderr == "fusermount3: $_FUSE_COMMFD 99: Bad file descriptor\n"
    unreachable = run(bundle / "fusermount3", "-u", "/mnt/a")
    assert unreachable.returncode == 1
    assert unreachable.stderr.startswith(
        "fusermount3: cannot reach the FUSE proxy at /nonexistent/proxy.sock: No such file or directory"
    )
    quiet = run(bundle / "fusermount3", "-u", "-q", "/mnt/a")
    assert (quiet.returncode, quiet.stderr) == (1, "")


def test_the_wrapper_checks_its_command_line_and_reports_an_unreachable_daemon(
    bundle: Path,
) -> None:
    no_separator = run(bundle / "fusermount-wrapper", "-m", "/mnt/a", "squashfuse")
    assert (no_separator.returncode, no_separator.stderr) == (
        2,
        "fusermount-wrapper: error: the command to run must follow '--'\n",
    )
    no_command = run(bundle / "fusermount-wrapper", "-m", "/mnt/a", "--")
    assert (no_command.returncode, no_command.stderr) == (
        2,
        "fusermount-wrapper: error: no command after '--'\n",
    )
    no_mountpoint = run(bundle / "fusermount-wrapper", "--", "true")
    assert no_mountpoint.returncode == 2
    assert "the following arguments are required: -m/--mountpoint" in no_mountpoint.stderr
    unreachable = run(bundle / "fusermount-wrapper", "-m", "/mnt/a", "--", "true")
    assert unreachable.returncode == 1
    assert "cannot reach the FUSE proxy at /nonexistent/proxy.sock" in unreachable.stderr


def test_a_bundle_needs_an_absolute_interpreter_with_one_argument_at_most() -> None:
    with pytest.raises(ValueError, match="interpreter must be an absolute path, got 'python3'"):
        build_bundle("python3")
    with pytest.raises(ValueError, match="has more than one argument; the kernel passes"):
        build_bundle("/usr/bin/python3 -I -S")


def test_install_shim_writes_the_bundle(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["fuse-proxy", "install-shim", str(tmp_path / "shim")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        str(tmp_path / "shim" / name)
        for name in ("fusermount", "fusermount3", "fusermount-wrapper")
    ]
    assert (tmp_path / "shim" / "fusermount3").read_bytes().startswith(b"#!/usr/bin/env python3\n")


def config(path: Path) -> ServerConfig:
    return ServerConfig(socket_path=str(path), policy=ProxyPolicy(("/mnt",)))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Path]:
    server = FuseProxyServer(config(tmp_path / "run" / "proxy.sock"))
    server.bind()
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    yield tmp_path / "run" / "proxy.sock"
    server.shutdown()
    thread.join(10)
    server.close()
    assert not thread.is_alive()


def test_the_daemon_answers_pings_and_removes_its_socket_when_stopped(tmp_path: Path) -> None:
    path = tmp_path / "run" / "proxy.sock"
    server = FuseProxyServer(config(path))
    server.bind()
    assert oct(path.stat().st_mode & 0o777) == "0o666"
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    result = CliRunner().invoke(cli, ["fuse-proxy", "ping", "--socket", str(path)])
    assert (result.exit_code, result.output) == (0, f"the FUSE proxy at {path} answers\n")
    server.shutdown()
    thread.join(10)
    server.close()
    assert not path.exists()


def test_the_daemon_will_not_replace_a_live_daemon_or_a_file(served: Path, tmp_path: Path) -> None:
    with pytest.raises(ServerSetupError, match="another FUSE proxy daemon is listening on"):
        FuseProxyServer(config(served)).bind()
    regular = tmp_path / "regular"
    regular.write_text("keep me")
    with pytest.raises(
        ServerSetupError, match="exists and is not a socket; refusing to replace it"
    ):
        FuseProxyServer(config(regular)).bind()
    assert regular.read_text() == "keep me"


def test_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "stale.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()
    server = FuseProxyServer(config(path))
    server.bind()
    server.shutdown()
    server.serve_forever()
    server.close()
    assert not path.exists()


def test_ping_reports_an_absent_daemon(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["fuse-proxy", "ping", "--socket", str(tmp_path / "none.sock"), "--timeout", "1"]
    )
    assert result.exit_code == 1
    assert "cannot reach the FUSE proxy at" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--allow-prefix", "/"], "mount prefix '/' would allow mounting over any directory"),
        (["--allow-prefix", "relative"], "mount prefix 'relative': must be an absolute path"),
        (["--socket", "relative.sock"], "socket_path must be absolute, got 'relative.sock'"),
        (["--workers", "0"], "Invalid value for '--workers'"),
    ],
)
def test_the_server_command_names_bad_settings(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["fuse-proxy", "server", *args])
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"request_timeout": 0}, "request_timeout must be positive, got 0"),
        ({"operation_timeout": -1}, "operation_timeout must be positive"),
        ({"workers": 0}, "workers must be at least 1, got 0"),
        ({"max_connections": 0}, "max_connections must be at least 1"),
    ],
)
def test_a_server_config_is_checked(values: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServerConfig(socket_path="/run/x.sock", policy=ProxyPolicy(("/mnt",)), **values)  # type: ignore[arg-type]


def test_the_shim_and_wrapper_commands_pass_their_arguments_through_untouched() -> None:
    runner = CliRunner()
    version = runner.invoke(cli, ["fuse-proxy", "shim", "-V"])
    assert (version.exit_code, version.output) == (
        0,
        "fusermount3 version: podwright fuse-proxy shim, protocol 1\n",
    )
    usage = runner.invoke(cli, ["fuse-proxy", "shim", "-o", "ro", "--help"])
    assert usage.exit_code == 0
    assert "usage: fusermount3 [options] mountpoint" in usage.output
    wrapper = runner.invoke(cli, ["fuse-proxy", "wrapper", "-m", "/mnt/x", "squashfuse"])
    assert wrapper.exit_code == 2
    assert "the command to run must follow '--'" in wrapper.output
