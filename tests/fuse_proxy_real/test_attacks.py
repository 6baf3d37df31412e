"""Attacks on the daemon that must fail. After each, the daemon still answers, its descriptor
count is back to where it started and it has no child left (the autouse fixture checks)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import socket
import struct
import time

from podwright.core.fuse_proxy.protocol import (
    HEADER,
    MAX_PAYLOAD,
    Kind,
    MountRequest,
    encode_request,
)
from tests.fuse_proxy_real.harness import (
    CALLER,
    OTHER_CALLER,
    REQUEST_TIMEOUT,
    SYSTEM_PYTHON,
    Daemon,
    Workspace,
    as_caller,
    client_call,
    client_script,
    raw_exchange,
)


def mount_code(path: object, options: tuple[str, ...] = ()) -> str:
    return f"print(json.dumps(result(lambda: ProxyClient().mount({str(path)!r}, {options!r}))))\n"


def test_a_mountpoint_outside_the_allowed_prefixes_is_refused(
    workspace: Workspace, daemon: Daemon
) -> None:
    outside = workspace.owned_dir("mine-but-outside", parent=workspace.outside)
    for path in (outside, "/etc", "/proc/self", str(workspace.area)):
        reply = client_call(workspace, mount_code(path))
        assert reply["errno"] == errno.EPERM, reply
        assert "is not below an allowed prefix" in reply["message"]


def test_paths_that_are_not_normalized_are_refused(workspace: Workspace, daemon: Daemon) -> None:
    reply = client_call(workspace, mount_code(f"{workspace.area}/../outside"))
    assert (
        reply["errno"],
        reply["message"].endswith(
            "must be normalized (no empty, '.' or '..' components, no trailing '/')"
        ),
    ) == (errno.EINVAL, True)


def test_a_symbolic_link_that_escapes_the_prefix_is_refused(
    workspace: Workspace, daemon: Daemon
) -> None:
    target = workspace.owned_dir("escape-target", parent=workspace.outside)
    workspace.owned_dir("sub", parent=target)
    link = workspace.area / "escape"
    os.symlink(target, link)
    os.lchown(link, CALLER, CALLER)
    for path in (link, link / "sub"):
        reply = client_call(workspace, mount_code(path))
        assert reply["errno"] == errno.ELOOP, reply
        assert (
            reply["message"]
            == f"mountpoint {path}: {link} is a symbolic link; the FUSE proxy does not follow symbolic links"
        )
    # Through the shim, which resolves the link as fusermount does, the target is outside.
    result = as_caller(workspace, f"squashfuse -f $IMAGE {link}/sub", desktop_dev_fuse=True)
    assert f"fusermount3: mountpoint '{target}/sub' is not below an allowed prefix" in result.stderr


def test_a_link_swapped_in_by_the_caller_is_never_followed(
    workspace: Workspace, daemon: Daemon
) -> None:
    # The caller can change its own directories at any moment. The daemon walks the path with
    # O_NOFOLLOW and mounts on the directory it opened, so the mount is on that directory (under
    # whichever of its names it has by then), never on the target of a link swapped in.
    racing = workspace.owned_dir("racing")
    target = workspace.owned_dir("race-target", parent=workspace.outside)
    code = f"""
import threading
stop = False
def swap():
    while not stop:
        try:
            os.rename({str(racing)!r}, {str(racing)!r} + ".dir")
            os.symlink({str(target)!r}, {str(racing)!r})
            os.unlink({str(racing)!r})
            os.rename({str(racing)!r} + ".dir", {str(racing)!r})
        except OSError:
            pass
swapper = threading.Thread(target=swap)
swapper.start()
outcomes = []
for _ in range(40):
    outcome = result(lambda: ProxyClient().mount({str(racing)!r}))
    if outcome.get("ok"):
        os.close(outcome["value"])
        where = [line.split()[4] for line in open("/proc/self/mountinfo") if " fuse " in line]
        outcomes.append(where)
        for path in where:
            result(lambda: ProxyClient().unmount(path, lazy=True))
    else:
        outcomes.append(outcome.get("errno"))
stop = True
swapper.join()
print(json.dumps(outcomes))
"""
    outcomes = client_call(workspace, code)
    assert len(outcomes) == 40
    names = {str(racing), f"{racing}.dir"}
    for outcome in outcomes:
        if isinstance(outcome, list):
            assert set(outcome) <= names, outcomes
        else:
            assert outcome in (errno.ELOOP, errno.ENOENT, errno.ENOTDIR, errno.EINVAL), outcomes
    assert not any(str(target) in str(outcome) for outcome in outcomes)


def test_suid_and_dev_options_are_refused(workspace: Workspace, daemon: Daemon) -> None:
    mountpoint = workspace.owned_dir("options")
    for option in ("suid", "dev"):
        reply = client_call(workspace, mount_code(mountpoint, ("rw", option)))
        assert reply == {
            "errno": errno.EPERM,
            "message": f"mount option '{option}' is not allowed: the FUSE proxy always mounts nosuid,nodev",
        }
    for option, name in (("user_id=0", "user_id"), ("allow_other", "allow_other")):
        reply = client_call(workspace, mount_code(mountpoint, (option,)))
        assert reply["errno"] == errno.EPERM
        assert f"'{name}'" in reply["message"]


def test_a_directory_the_caller_may_not_write_is_refused(
    workspace: Workspace, daemon: Daemon
) -> None:
    others = workspace.owned_dir("belongs-to-other", uid=OTHER_CALLER)
    reply = client_call(workspace, mount_code(others))
    assert reply == {
        "errno": errno.EACCES,
        "message": f"mountpoint {others} is neither owned nor writable by user {CALLER}",
    }
    locked = workspace.owned_dir("locked", uid=OTHER_CALLER)
    inner = workspace.owned_dir("inner", parent=locked)
    locked.chmod(0o700)
    reply = client_call(workspace, mount_code(inner))
    assert reply["errno"] == errno.EACCES
    assert reply["message"] == f"mountpoint {inner}: {inner}: Permission denied"


def test_unmounting_a_mount_that_is_not_fuse_is_refused(
    workspace: Workspace, daemon: Daemon
) -> None:
    scratch = workspace.owned_dir("scratch")
    code = f"print(json.dumps(result(lambda: ProxyClient().unmount({str(scratch)!r}))))\n"
    reply = client_call(workspace, code, root_setup=f"mount -t tmpfs -o mode=777 tmpfs {scratch}")
    assert reply == {
        "errno": errno.EPERM,
        "message": f"{scratch}: not a FUSE mount (tmpfs); the proxy unmounts only FUSE mounts",
    }


def test_unmounting_another_users_fuse_mount_is_refused(
    workspace: Workspace, daemon: Daemon
) -> None:
    theirs = workspace.owned_dir("theirs", uid=OTHER_CALLER)
    ready = workspace.shared_dir("holder") / "ready"
    holder = workspace.script(
        "holder.py",
        f"""
import os, sys, time
sys.path.insert(0, os.environ["BUNDLE"])
from podwright.adapters.fuse.client import ProxyClient
fd = ProxyClient().mount({str(theirs)!r})
open({str(ready)!r}, "w").close()
time.sleep(60)
""",
    )
    code = f"""
import time
for _ in range(100):
    if os.path.exists({str(ready)!r}):
        break
    time.sleep(0.1)
held = any(" {theirs} " in line for line in open("/proc/self/mountinfo"))
print(json.dumps([held, result(lambda: ProxyClient().unmount({str(theirs)!r})), result(lambda: ProxyClient().unmount({str(theirs)!r}, lazy=True))]))
"""
    replies = client_call(
        workspace, code, root_setup=f"$AS_OTHER {SYSTEM_PYTHON} -I {holder} >/dev/null 2>&1 &"
    )
    message = f"{theirs}: mounted by user {OTHER_CALLER}, not by user {CALLER}; only the owner may unmount it"
    assert replies == [True] + [{"errno": errno.EPERM, "message": message}] * 2


def forged_namespace_code(workspace: Workspace, fd_expression: str) -> str:
    mountpoint = workspace.owned_dir(f"forged-{time.monotonic_ns()}")
    return f"""
from podwright.adapters.fuse.transport import FdTransport
from podwright.core.fuse_proxy.protocol import MountRequest, encode_request, decode_reply
import time
forged = {fd_expression}
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(os.environ["PODWRIGHT_FUSE_PROXY_SOCKET"])
transport = FdTransport(sock)
transport.send(encode_request(MountRequest({str(mountpoint)!r}), fd_attached=True), forged, 5)
frame, fd = transport.receive(time.monotonic() + 10)
reply = decode_reply(frame)
print(json.dumps({{"fd": fd, "errno": getattr(reply, "errno", None), "message": getattr(reply, "message", None)}}))
"""


def test_a_forged_namespace_descriptor_is_refused(workspace: Workspace, daemon: Daemon) -> None:
    # The root part of the setup opens the test's mount namespace and leaves it open as fd 7.
    code = forged_namespace_code(workspace, "7")
    reply = client_call(workspace, code, root_setup=f"exec 7</proc/{os.getpid()}/ns/mnt")
    expected = "the namespace descriptor sent with the request is not the caller's mount namespace"
    assert reply == {"fd": None, "errno": errno.EPERM, "message": expected}
    reply = client_call(
        workspace, forged_namespace_code(workspace, "os.open('/etc/hostname', os.O_RDONLY)")
    )
    assert reply == {"fd": None, "errno": errno.EPERM, "message": expected}


def test_an_oversized_message_is_refused_from_its_header(
    daemon: Daemon, workspace: Workspace
) -> None:
    header = HEADER.pack(b"PWFP", 1, Kind.MOUNT, 0, 0, MAX_PAYLOAD + 1)
    reply = raw_exchange(workspace.socket, header)
    assert reply.startswith(b"PWFP\x01\x83")
    assert b"exceeds the 16384-byte limit" in reply


def test_malformed_messages_are_refused(daemon: Daemon, workspace: Workspace) -> None:
    for data, expected in [
        (b"GET / HTTP/1.1\r\n\r\n", b"bad magic"),
        (HEADER.pack(b"PWFP", 9, Kind.PING, 0, 0, 0), b"protocol version 9 is not supported"),
        (
            HEADER.pack(b"PWFP", 1, Kind.MOUNT, 0, 0, 3) + struct.pack(">BH", 1, 0),
            b"the mountpoint is empty",
        ),
        (HEADER.pack(b"PWFP", 1, Kind.DONE, 0, 0, 0), b"a done frame is not a request"),
        (encode_request(MountRequest("/x")) * 2, b"one frame per connection"),
        (encode_request(MountRequest("/x")) + b"trailing", b"bad magic b'trai'"),
    ]:
        reply = raw_exchange(workspace.socket, data)
        assert expected in reply, (data, reply)


def test_a_client_that_connects_and_says_nothing_is_closed(
    daemon: Daemon, workspace: Workspace
) -> None:
    started = time.monotonic()
    silent = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(50)]
    try:
        for sock in silent:
            sock.connect(str(workspace.socket))
        assert daemon.answers()  # silent clients do not hold up the others
        for sock in silent:
            sock.settimeout(10)
            reply = sock.recv(4096)
            assert b"no complete request within 1s" in reply
            assert sock.recv(4096) == b""
    finally:
        for sock in silent:
            sock.close()
    assert time.monotonic() - started < REQUEST_TIMEOUT + 5


def test_a_caller_that_dies_mid_request_leaves_nothing_behind(
    daemon: Daemon, workspace: Workspace
) -> None:
    mountpoints = [workspace.owned_dir(f"dying-{index}") for index in range(10)]
    request = encode_request(MountRequest(str(mountpoints[0])))
    code = f"""
import signal
children = []
for index, data in enumerate([{request[:7]!r}, {request!r}] * 5):
    pid = os.fork()
    if pid == 0:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(os.environ["PODWRIGHT_FUSE_PROXY_SOCKET"])
        sock.sendall(data.replace({str(mountpoints[0]).encode()!r}, {[str(m).encode() for m in mountpoints]!r}[index]))
        os.kill(os.getpid(), signal.SIGKILL)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
time.sleep(3)  # the daemon finishes what it started
print(json.dumps([line for line in open("/proc/self/mountinfo") if " fuse" in line]))
"""
    assert client_call(workspace, "import time\n" + code) == []


def test_a_hundred_concurrent_requests_all_succeed(daemon: Daemon, workspace: Workspace) -> None:
    mountpoints = [workspace.owned_dir(f"flood-{index}") for index in range(100)]
    code = f"""
from concurrent.futures import ThreadPoolExecutor
paths = {[str(path) for path in mountpoints]!r}
def cycle(path):
    fd = ProxyClient(timeout=60).mount(path, ("ro",))
    os.close(fd)
    ProxyClient(timeout=60).unmount(path, lazy=True)
    return "ok"
with ThreadPoolExecutor(100) as pool:
    outcomes = list(pool.map(lambda path: result(lambda: cycle(path)), paths))
left = [line for line in open("/proc/self/mountinfo") if " fuse" in line]
print(json.dumps({{"failures": [o for o in outcomes if not o.get("ok")], "left": left}}))
"""
    assert client_call(workspace, code, timeout=120) == {"failures": [], "left": []}


HOLD_CONNECTIONS = """
import socket, time
from podwright.core.fuse_proxy.protocol import FrameDecoder, decode_reply
notes = {notes!r}
while not os.path.exists(notes + "/{after}"):  # the first user starts at once
    time.sleep(0.002)
held = []
for _ in range({count}):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["PODWRIGHT_FUSE_PROXY_SOCKET"])
    held.append(sock)
open(notes + "/{uid}-connected", "w").close()
answers = []
for sock in held:  # a refusal comes at once; a silent connection is closed after 1 s
    sock.settimeout(10)
    (frame,) = FrameDecoder().feed(sock.recv(4096))
    answers.append(decode_reply(frame).message)
with open(notes + "/{uid}.json", "w") as file:
    json.dump(answers, file)
"""


def test_a_flood_beyond_the_connection_limits_is_told_to_retry_later(
    daemon: Daemon, workspace: Workspace
) -> None:
    # One user may hold 32 connections (the default); both together, 48 (the harness's global
    # limit). The second user, already running, connects as soon as the first's connections
    # are queued (the daemon accepts them in order), well within their 1 s request timeout.
    mark = daemon.log_mark()
    notes = workspace.shared_dir("limits")
    (notes / "start").touch()
    first = HOLD_CONNECTIONS.format(notes=str(notes), after="start", count=40, uid=OTHER_CALLER)
    second = HOLD_CONNECTIONS.format(
        notes=str(notes), after=f"{OTHER_CALLER}-connected", count=20, uid=CALLER
    )
    # The first user's process writes to the caller's output: as_caller returns after it ends.
    as_caller(
        workspace,
        client_script(workspace, second),
        root_setup=f"$AS_OTHER {client_script(workspace, first)} &",
    )
    answers = {
        uid: json.loads((notes / f"{uid}.json").read_text()) for uid in (OTHER_CALLER, CALLER)
    }
    silent = "no complete request within 1s"
    retry_per_user = (
        f"the FUSE proxy is busy: user {OTHER_CALLER} already has 32 connections open, "
        "the most one user may have; retry later"
    )
    assert answers[OTHER_CALLER] == [silent] * 32 + [retry_per_user] * 8
    retry_all = "the FUSE proxy is busy: 48 connections are open, the most it holds; retry later"
    assert answers[CALLER] == [silent] * 16 + [retry_all] * 4
    assert daemon.log_lines("refusing user", since=mark) == [
        f"WARNING podwright.fuse_proxy: refusing user {OTHER_CALLER}: {retry_per_user} "
        "(--max-connections-per-uid); more refusals are counted every 10s",
        f"WARNING podwright.fuse_proxy: refusing user {CALLER}: {retry_all} "
        "(--max-connections); more refusals are counted every 10s",
    ]


def test_the_daemon_restarts_its_mount_helper_when_it_dies(
    daemon: Daemon, workspace: Workspace
) -> None:
    (helper,) = daemon.children()
    os.kill(helper, signal.SIGKILL)
    mountpoint = workspace.owned_dir("after-helper-death")
    code = f"""
fd = ProxyClient().mount({str(mountpoint)!r})
os.close(fd)
print(json.dumps(result(lambda: ProxyClient().unmount({str(mountpoint)!r}))))
"""
    assert client_call(workspace, code) == {"ok": True, "value": None}
    (restarted,) = daemon.children()
    assert restarted != helper


def test_a_mount_the_caller_never_acknowledges_is_detached(
    daemon: Daemon, workspace: Workspace
) -> None:
    unacknowledged = workspace.owned_dir("unacknowledged")
    mark = daemon.log_mark()
    code = f"""
from podwright.adapters.fuse.transport import FdTransport
from podwright.core.fuse_proxy.protocol import MountRequest, Received, encode_request, decode_reply
import time

def exchange(path, first=None):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["PODWRIGHT_FUSE_PROXY_SOCKET"])
    transport = FdTransport(sock)
    transport.send(first or encode_request(MountRequest(path)), None, 5)
    frame, fd = transport.receive(time.monotonic() + 10)
    reply = type(decode_reply(frame)).__name__
    if fd is not None:
        os.close(fd)  # takes the descriptor, but never says so
    transport.close()
    return reply

replies = [exchange({str(unacknowledged)!r}), exchange("/", encode_request(Received()))]
time.sleep(3)  # the daemon waits up to its request timeout for the acknowledgement
print(json.dumps({{"replies": replies, "left": [l for l in open("/proc/self/mountinfo") if " fuse" in l]}}))
"""
    assert client_call(workspace, code) == {"replies": ["Mounted", "Failed"], "left": []}
    # The log tells what happened, in order, each step with its own duration.
    mounted, detached = daemon.wait_for_log_lines(repr(str(unacknowledged)), 2, since=mark)
    assert re.fullmatch(
        rf"WARNING podwright\.fuse_proxy: mount '{unacknowledged}' -o \(none\) for pid=\d+ "
        rf"uid={CALLER} gid={CALLER}: mounted in [\d.]+ ms, but the descriptor was not taken "
        r"after [\d.]+ ms: the caller closed the connection",
        mounted,
    ), mounted
    assert re.fullmatch(
        rf"INFO podwright\.fuse_proxy: mount '{unacknowledged}' -o \(none\) for pid=\d+ "
        rf"uid={CALLER} gid={CALLER}: detached {unacknowledged} in [\d.]+ ms",
        detached,
    ), detached


def test_an_operation_that_never_completes_is_killed_and_refused(
    daemon: Daemon, workspace: Workspace
) -> None:
    # Root mounts a FUSE file system with allow_other in the caller's namespace and stops its
    # server: looking anything up in it blocks. A mount below it makes the daemon's child wait
    # on that lookup until the helper kills it at the operation timeout (5 s here).
    frozen = workspace.owned_dir("frozen", uid=0)
    pidfile = workspace.scripts / "frozen.pid"
    setup = (
        f"squashfuse -f -o allow_other $IMAGE {frozen} </dev/null >/dev/null 2>&1 & echo $! > {pidfile}\n"
        f"for _ in $(seq 100); do [ -e {frozen}/hello.txt ] && break; sleep 0.1; done\n"
        f"kill -STOP $(cat {pidfile})"
    )
    started = time.monotonic()
    mark = daemon.log_mark()
    try:
        reply = client_call(workspace, mount_code(frozen / "docs"), root_setup=setup)
    finally:
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
    assert reply["errno"] == errno.ETIMEDOUT, reply
    assert "did not finish within 5s" in reply["message"]
    assert time.monotonic() - started < 30
    (logged,) = daemon.log_lines(repr(str(frozen / "docs")), since=mark)
    assert re.fullmatch(
        rf"WARNING podwright\.fuse_proxy: mount '{frozen}/docs' -o \(none\) for pid=\d+ "
        rf"uid={CALLER} gid={CALLER}: timed out after \d+ ms; the mount helper killed it",
        logged,
    ), logged
