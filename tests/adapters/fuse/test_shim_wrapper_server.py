"""The shim and wrapper as installed (a zipapp that needs only the standard library), the
daemon's start-up checks and its wake-up on signals, and the client against a busy daemon; none
of these needs root or a FUSE device."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from podwright.adapters.fuse import shim
from podwright.adapters.fuse.bundle import build_bundle, install_bundle
from podwright.adapters.fuse.client import ProxyClient
from podwright.adapters.fuse.errors import ProxyRefusedError, ServerSetupError
from podwright.adapters.fuse.mounter import (
    HELPER_STOP_LIMIT,
    ForkServer,
    OperationCancelledError,
)
from podwright.adapters.fuse.server import FuseProxyServer, ServerConfig
from podwright.cli.main import cli
from podwright.core.fuse_proxy.mount_policy import ProxyPolicy
from podwright.core.fuse_proxy.protocol import (
    Done,
    Failed,
    FrameDecoder,
    Reply,
    decode_request,
    encode_reply,
)


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
        (
            ["--max-connections-per-uid", "300"],
            "max_connections_per_uid (300) must not exceed max_connections (256)",
        ),
        (
            ["--workers", "2"],
            "max_requests_per_uid (4) must not exceed workers (2)",
        ),
        (["--shutdown-grace", "21"], "Invalid value for '--shutdown-grace'"),
        (["--shutdown-grace", "-1"], "Invalid value for '--shutdown-grace'"),
    ],
)
def test_the_server_command_names_bad_settings(args: list[str], message: str) -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    result = CliRunner().invoke(cli, ["fuse-proxy", "server", *args])
    assert result.exit_code == 2
    assert message in result.output
    # The signals it holds for the daemon's start-up are held only around the exec: a command
    # that ends here (and every process started after it) may still be stopped.
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before


def test_a_server_command_that_cannot_become_the_daemon_holds_no_signal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def cannot_exec(*_: object) -> None:
        raise OSError(errno.ENOEXEC, "Exec format error")

    monkeypatch.setattr(os, "execv", cannot_exec)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    result = CliRunner().invoke(
        cli, ["fuse-proxy", "server", "--socket", str(tmp_path / "proxy.sock")]
    )
    assert result.exit_code != 0
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == before


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"request_timeout": 0}, "request_timeout must be positive, got 0"),
        ({"operation_timeout": -1}, "operation_timeout must be positive"),
        ({"workers": 0}, "workers must be at least 1, got 0"),
        ({"max_connections": 0}, "max_connections must be at least 1"),
        ({"shutdown_grace": -0.1}, "shutdown_grace must be between 0 and 20 seconds, got -0.1"),
        ({"shutdown_grace": float("nan")}, "shutdown_grace must be between 0 and 20 seconds"),
        (
            {"max_requests_per_uid": 5, "max_connections_per_uid": 4},
            r"max_requests_per_uid \(5\) must not exceed max_connections_per_uid \(4\)",
        ),
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


def test_a_server_config_survives_its_json_form() -> None:
    original = dataclasses.replace(
        config(Path("/run/x.sock")),
        max_connections_per_uid=8,
        max_requests_per_uid=2,
        shutdown_grace=0.25,
    )
    assert ServerConfig.from_json(original.to_json()) == original


def run_server(server: FuseProxyServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    return thread


def test_a_stop_signal_written_to_the_wakeup_descriptor_stops_the_server(tmp_path: Path) -> None:
    # What the C-level signal handler does when SIGTERM arrives just before the selector blocks:
    # the Python-level handler has not run yet, but the selector wakes and acts on the byte.
    server = FuseProxyServer(config(tmp_path / "proxy.sock"))
    server.bind()
    thread = run_server(server)
    try:
        assert ping(tmp_path / "proxy.sock")
        os.write(server.wakeup_fd, bytes([signal.SIGTERM]))
        thread.join(10)
        assert not thread.is_alive()
    finally:
        server.shutdown()
        thread.join(10)
        server.close()
    assert not (tmp_path / "proxy.sock").exists()


def ping(path: Path) -> bool:
    ProxyClient(str(path), timeout=5).ping()
    return True


def test_a_live_daemon_with_a_full_backlog_is_not_replaced(tmp_path: Path) -> None:
    # A flooded daemon does not accept at once; a second daemon must still not take its socket.
    path = tmp_path / "busy.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(0)
    queued = []
    try:
        while True:  # fill the backlog: the next connect would have to wait
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            try:
                client.connect(str(path))
            except BlockingIOError:
                client.close()
                break
            queued.append(client)
        with pytest.raises(ServerSetupError, match="another FUSE proxy daemon is listening on"):
            FuseProxyServer(config(path)).bind()
        assert path.exists()
    finally:
        for client in queued:
            client.close()
        listener.close()


@contextlib.contextmanager
def fake_daemon(path: Path, replies: list[Reply], *, at_once: bool = False) -> Iterator[list[str]]:
    """A daemon that answers its connections with ``replies`` in turn; what each asked.

    ``at_once``: it answers and closes before reading, as the real one refuses a caller over a
    connection limit.
    """
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(64)
    asked: list[str] = []

    def serve() -> None:
        for reply in replies:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                if not at_once:
                    decoder, frames = FrameDecoder(), []
                    while not frames:
                        frames = decoder.feed(connection.recv(4096))
                    asked.append(type(decode_request(frames[0])).__name__)
                connection.sendall(encode_reply(reply))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield asked
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(10)


BUSY = Failed(
    errno.EAGAIN,
    "the FUSE proxy is busy: user 7 already has 32 connections open, the most one user may have; retry later",
)


def test_the_client_retries_a_busy_daemon_until_it_answers(tmp_path: Path) -> None:
    path = tmp_path / "fake.sock"
    with fake_daemon(path, [BUSY, BUSY, Done()]) as asked:
        ProxyClient(str(path), timeout=10).ping()
    assert asked == ["PingRequest"] * 3


def test_the_client_reads_a_refusal_sent_before_its_request(tmp_path: Path) -> None:
    path = tmp_path / "fake.sock"
    with fake_daemon(path, [BUSY] * 3 + [Done()], at_once=True):
        ProxyClient(str(path), timeout=10).ping()


class FakeClock:
    """The machine's clock, on which the client's pauses pass at once (its socket deadlines,
    which the transport reads against the machine's clock, stay meaningful)."""

    def __init__(self) -> None:
        self.slept = 0.0
        self.pauses: list[float] = []

    def monotonic(self) -> float:
        return time.monotonic() + self.slept

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.slept += seconds


def test_the_client_gives_up_at_its_timeout_with_the_daemons_reason(tmp_path: Path) -> None:
    path = tmp_path / "fake.sock"
    clock = FakeClock()
    with fake_daemon(path, [BUSY] * 1000) as asked:
        client = ProxyClient(str(path), timeout=3.0, monotonic=clock.monotonic, sleep=clock.sleep)
        with pytest.raises(ProxyRefusedError) as refusal:
            client.ping()
    assert (refusal.value.errno, refusal.value.message) == (BUSY.errno, BUSY.message)
    assert len(asked) == len(clock.pauses) + 1  # a try after every pause
    # Growing pauses (each within the jitter of a doubling delay, at most 1 s), and never one
    # that would end past the timeout: the client gives up instead of sleeping beyond it.
    assert all(pause <= 1.0 for pause in clock.pauses)
    assert clock.pauses[-1] > clock.pauses[0]
    assert sum(clock.pauses) < 3.0


def test_other_refusals_are_not_retried(tmp_path: Path) -> None:
    path = tmp_path / "fake.sock"
    with (
        fake_daemon(path, [Failed(errno.EPERM, "not yours"), Done()]) as asked,
        pytest.raises(ProxyRefusedError, match="not yours"),
    ):
        ProxyClient(str(path), timeout=10).unmount("/mnt/x")
    assert asked == ["UnmountRequest"]


def test_the_shim_reports_a_daemon_that_stays_busy_as_fusermount_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "fake.sock"
    monkeypatch.setattr(shim, "ProxyClient", functools.partial(ProxyClient, timeout=0.3))
    errors = io.StringIO()
    with fake_daemon(path, [BUSY] * 1000):
        status = shim.main(
            ["fusermount3", "-u", "/mnt/x"], {"PODWRIGHT_FUSE_PROXY_SOCKET": str(path)}, errors
        )
    assert (status, errors.getvalue()) == (1, f"fusermount3: {BUSY.message}\n")


def test_a_mount_helper_that_does_not_exit_is_killed_with_its_process_group() -> None:
    fork_server = ForkServer()
    fork_server.start()
    pid = fork_server.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # it will never see its channel close
    started = time.monotonic()
    fork_server.close()
    assert time.monotonic() - started < HELPER_STOP_LIMIT + 1.0
    assert not Path(f"/proc/{pid}").exists()  # killed and reaped
    with pytest.raises(OperationCancelledError, match="shutting down; retry later"):
        fork_server.submit(b"job", [])
