"""SIGTERM ends the daemon with status 0 within 2 s, whatever its callers and children do, and
leaves nothing behind: no socket, no process, no mount. Each test starts its own daemon."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from podwright.core.fuse_proxy.protocol import FrameDecoder, decode_reply
from tests.fuse_proxy_real.harness import (
    Daemon,
    Workspace,
    caller_command,
    children_of,
    client_script,
    kill_callers,
    wait_until_gone,
)

EXIT_LIMIT = 2.0
"""What the issue asks for. The daemon's default grace is 0.5 s and it needs a few tens of
milliseconds after it, so the margin holds on a loaded machine."""


def wait_for(condition: object, what: str, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


@pytest.fixture
def frozen_file_system(workspace: Workspace) -> Iterator[tuple[Path, str]]:
    """A directory and the root setup that mounts a FUSE file system on it in the caller's
    namespace and stops its server: a lookup below it blocks until the looker is killed."""
    frozen = workspace.owned_dir(f"frozen-{time.monotonic_ns()}", uid=0)
    pidfile = workspace.scripts / f"{frozen.name}.pid"
    setup = (
        f"squashfuse -f -o allow_other $IMAGE {frozen} </dev/null >/dev/null 2>&1 & echo $! > {pidfile}\n"
        f"for _ in $(seq 100); do [ -e {frozen}/hello.txt ] && break; sleep 0.1; done\n"
        f"kill -STOP $(cat {pidfile})\n"
    )
    yield frozen, setup
    with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
        os.kill(int(pidfile.read_text()), signal.SIGKILL)
    kill_callers()


CALLER_DURING_SHUTDOWN = """
import threading, time
from podwright.adapters.fuse.transport import FdTransport
from podwright.core.fuse_proxy.protocol import MountRequest, encode_request, decode_reply

socket_path = os.environ["PODWRIGHT_FUSE_PROXY_SOCKET"]
silent = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(10)]
for sock in silent:
    sock.connect(socket_path)

# A mount whose descriptor arrives but is never acknowledged: the daemon waits for it.
unacknowledged = FdTransport(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
unacknowledged.sock.connect(socket_path)
unacknowledged.send(encode_request(MountRequest({unacknowledged!r})), None, 5)
frame, fd = unacknowledged.receive(time.monotonic() + 10)
first_reply = type(decode_reply(frame)).__name__

# A mount that never completes: its child waits on a stopped FUSE server.
stuck = {{}}
def mount_below_frozen():
    stuck.update(result(lambda: ProxyClient(timeout=10).mount({stuck_path!r})))
thread = threading.Thread(target=mount_below_frozen)
thread.start()
open({ready!r}, "w").close()

thread.join(30)
unacknowledged.sock.settimeout(10)
closed_by_daemon = unacknowledged.sock.recv(4096) == b""
os.close(fd)
answers = []
for sock in silent:
    sock.settimeout(10)
    data = sock.recv(4096)
    answers.append(data)
print(json.dumps({{
    "first_reply": first_reply,
    "stuck": stuck,
    "closed_by_daemon": closed_by_daemon,
    "silent_answers": [data.hex() for data in answers],
    "fuse_mounts_left": [
        line.split()[4] for line in open("/proc/self/mountinfo")
        if " fuse" in line and line.split()[4] in ({unacknowledged!r}, {stuck_path!r})
    ],
}}))
"""


def test_sigterm_with_silent_clients_and_mounts_in_flight_exits_0_within_2s_leaving_nothing(
    workspace: Workspace, frozen_file_system: tuple[Path, str]
) -> None:
    frozen, setup = frozen_file_system
    daemon = Daemon(workspace)
    silent = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(10)]
    for sock in silent:
        sock.connect(str(workspace.socket))
    ready = workspace.shared_dir(f"ready-{time.monotonic_ns()}") / "ready"
    code = CALLER_DURING_SHUTDOWN.format(
        unacknowledged=str(workspace.owned_dir(f"unacknowledged-{time.monotonic_ns()}")),
        stuck_path=str(frozen / "docs"),
        ready=str(ready),
    )
    command, env = caller_command(workspace, client_script(workspace, code), root_setup=setup)
    caller = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(ready.exists, "the caller has its requests in flight")
        (helper,) = daemon.children()
        wait_for(lambda: stuck_in_fuse(children_of(helper)), "the stuck mount's child waits")
        mark = daemon.log_mark()
        elapsed = daemon.stop()  # asserts status 0, no socket, no process left
        answers = [sock_answer(sock) for sock in silent]
        output, errors = caller.communicate(timeout=60)
    finally:
        caller.kill()
        caller.wait()
        for sock in silent:
            sock.close()
    assert elapsed < EXIT_LIMIT, daemon.log.read_text()[-3000:]
    lines = output.strip().splitlines()
    assert lines, errors
    outcome = json.loads(lines[-1])
    assert outcome["first_reply"] == "Mounted"
    assert outcome["closed_by_daemon"] is True
    assert outcome["fuse_mounts_left"] == []
    # The stuck mount was cancelled ("retry later"); the client retried, and found no daemon.
    assert "cannot reach the FUSE proxy" in outcome["stuck"].get("error", ""), outcome
    shutting_down = "the FUSE proxy is shutting down; retry later"
    for data in [bytes.fromhex(answer) for answer in outcome["silent_answers"]] + answers:
        (frame,) = FrameDecoder().feed(data)
        assert decode_reply(frame).message == shutting_down  # type: ignore[union-attr]
    log = daemon.log_lines(since=mark)
    assert log[:2] == [
        "INFO podwright.fuse_proxy: stopping: no longer accepting; closing 20 connection(s) "
        "still sending their request; 2 request(s) in progress",
        "INFO podwright.fuse_proxy: cancelling 2 request(s) still in progress "
        "after the 0.5s shutdown grace",
    ], log
    (stuck,) = [line for line in log if repr(str(frozen / "docs")) in line]
    assert stuck.endswith("ms: the daemon is shutting down"), log
    assert ": cancelled after " in stuck, log
    mounted, detached = [line for line in log if "unacknowledged" in line]
    assert ": mounted in " in mounted, log
    assert mounted.endswith("ms: cancelled: the daemon is shutting down"), log
    assert ": detached " in detached, log
    assert log[-1].startswith("INFO podwright.fuse_proxy: stopped in "), log


def stuck_in_fuse(pids: list[int]) -> bool:
    """Whether one of ``pids`` waits for a FUSE server's answer."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/wchan").read_text() == "request_wait_answer":
                return True
    return False


def sock_answer(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    return sock.recv(4096)


def signal_state(pid: int, number: int) -> str:
    """Whether ``pid`` has ``number`` blocked, caught (a handler), or neither (it would die)."""
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    bit = 1 << (number - 1)
    if int(fields["SigBlk"], 16) & bit:
        return "blocked"
    return "caught" if int(fields["SigCgt"], 16) & bit else "fatal"


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("moment", ["as soon as its process runs", "once it starts its helper"])
def test_a_signal_during_start_up_ends_the_daemon_with_status_0(
    workspace: Workspace, number: int, moment: str
) -> None:
    daemon = Daemon(workspace, wait=False)
    if moment == "as soon as its process runs":
        # The command line has become the daemon's own small process (the exec): its
        # interpreter starts, and no handler of its own can exist yet.
        wait_for(
            lambda: (
                b"podwright.adapters.fuse.server"
                in Path(f"/proc/{daemon.pid}/cmdline").read_bytes()
            ),
            "the daemon's process runs",
        )
    else:
        wait_for(daemon.children, "the daemon starts its mount helper")
    # Frozen, so that what it does with the signal is known when it is sent.
    os.kill(daemon.pid, signal.SIGSTOP)
    wait_for(
        lambda: Path(f"/proc/{daemon.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T",
        "it stops",
    )
    state, family = signal_state(daemon.pid, number), daemon.process_family()
    started = time.monotonic()
    os.kill(daemon.pid, number)
    os.kill(daemon.pid, signal.SIGCONT)
    daemon.stop(number)  # asserts status 0, no socket left
    assert time.monotonic() - started < EXIT_LIMIT
    assert wait_until_gone(family) == []
    assert state != "fatal"
    if state == "blocked":  # held until its handlers were in place, then acted on at once
        assert daemon.log_lines("serv") == ["INFO podwright.fuse_proxy: stopping before serving"]


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_burst_of_signals_ends_the_daemon_with_status_0(
    workspace: Workspace, number: int
) -> None:
    # A second signal runs the handler again inside the first one (Ctrl-C pressed twice, or
    # SIGTERM then SIGINT): the handler must hold no lock that its second run would wait for.
    daemon = Daemon(workspace)
    family = daemon.process_family()
    started = time.monotonic()
    with contextlib.suppress(ProcessLookupError):
        while daemon.process.poll() is None and time.monotonic() - started < EXIT_LIMIT:
            os.kill(daemon.pid, number)
    daemon.stop(number)  # asserts status 0, no socket left
    assert time.monotonic() - started < EXIT_LIMIT
    assert wait_until_gone(family) == []
