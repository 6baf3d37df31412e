"""Real FUSE mounts through the proxy: a daemon process, and callers that are nobody special.

Each caller runs in a new, private mount namespace (``unshare --mount``), where the shim bundle
is bind-mounted over ``/usr/bin/fusermount3`` (``fusermount`` links to it), then drops to its
own uid with no capabilities at all and ``no_new_privs`` (``setpriv``). Mounts made for it exist
only in that namespace, which disappears with its last process; every process of a caller uid
is killed after each test, so nothing outlives a test even when it fails.

The "desktop" layout gives the caller a world-openable ``/dev/fuse`` node, as desktop
distributions do: libfuse opens it, its own mount(2) fails for lack of privilege, and it falls
back to fusermount — the shim. Without it, only adapters that run fusermount themselves (as
gcsfuse and rclone do) or the wrapper can mount, which is the situation in a pod.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.fuse.bundle import install_bundle

SYSTEM_PYTHON = "/usr/bin/python3"
COMMANDS = ("unshare", "setpriv", "squashfuse", "fuse-zip", "mksquashfs", "mount", "fusermount3")
CALLER = 40001
OTHER_CALLER = 40002
CALLER_UIDS = (CALLER, OTHER_CALLER)
REQUEST_TIMEOUT = 1.0
OPERATION_TIMEOUT = 5.0
MAX_CONNECTIONS = 48
STOP_LIMIT = 5.0
"""Seconds the harness waits for the daemon to exit after a signal (the daemon needs under 2)."""


def require_real_fuse() -> None:
    """Skip where root, FUSE or namespaces are missing; under CI=true, fail instead."""
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root")
    if not os.path.exists("/dev/fuse"):
        problems.append("needs /dev/fuse")
    problems += [f"needs {command}" for command in COMMANDS if shutil.which(command) is None]
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        problems.append(f"needs {SYSTEM_PYTHON} (the callers' interpreter)")
    if not problems:
        probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, check=False)
        if probe.returncode != 0:
            problems.append(f"cannot create a mount namespace: {probe.stderr.decode().strip()}")
    if problems:
        message = "real FUSE tests: " + "; ".join(problems)
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: these tests must run, not skip)")
        pytest.skip(message)


class Workspace:
    """A directory every caller can traverse: the shim bundle, the socket, the mount area."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="podwright-fuse-", dir="/tmp"))
        self.root.chmod(0o755)
        self.bin = self.root / "bin"
        install_bundle(str(self.bin), f"{SYSTEM_PYTHON} -I")
        self.bin.chmod(0o755)
        self.socket = self.root / "run" / "proxy.sock"
        self.area = self.root / "area"
        self.area.mkdir(mode=0o755)
        self.area.chmod(0o755)
        self.outside = self.root / "outside"
        self.outside.mkdir()
        self.outside.chmod(0o755)
        self.scripts = self.root / "scripts"
        self.scripts.mkdir()
        self.scripts.chmod(0o755)
        self.devnode = self.root / "devnode"
        self.devnode.mkdir()
        self._build_images()

    def _build_images(self) -> None:
        source = self.root / "image-source"
        (source / "docs").mkdir(parents=True)
        (source / "hello.txt").write_text("hello from squashfs\n")
        (source / "docs" / "big.bin").write_bytes(os.urandom(256 * 1024))
        self.squashfs = self.root / "image.sqfs"
        subprocess.run(
            ["mksquashfs", str(source), str(self.squashfs), "-quiet", "-noappend"],
            check=True,
            capture_output=True,
        )
        self.squashfs.chmod(0o644)

    def owned_dir(self, name: str, uid: int = CALLER, parent: Path | None = None) -> Path:
        """A fresh directory ``name`` in the mount area (or ``parent``), owned by ``uid``."""
        path = (parent or self.area) / name
        path.mkdir()
        os.chown(path, uid, uid)
        return path

    def shared_dir(self, name: str) -> Path:
        """A fresh directory outside the mount area where every caller may write (their notes)."""
        path = self.outside / name
        path.mkdir()
        path.chmod(0o1777)
        return path

    def script(self, name: str, text: str) -> Path:
        path = self.scripts / name
        path.write_text(text)
        path.chmod(0o644)
        return path

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class Daemon:
    """``podwright fuse-proxy server`` in its own process, with small timeouts.

    The per-uid limits are the daemon's defaults; the global connection limit is low enough
    that the two caller uids can reach it together.
    """

    def __init__(self, workspace: Workspace, *, wait: bool = True) -> None:
        self.workspace = workspace
        self.log = workspace.root / f"daemon-{time.monotonic_ns()}.log"
        command = [
            sys.executable, "-m", "podwright", "fuse-proxy", "server",
            "--socket", str(workspace.socket),
            "--allow-prefix", str(workspace.area),
            "--request-timeout", str(REQUEST_TIMEOUT),
            "--operation-timeout", str(OPERATION_TIMEOUT),
            "--max-connections", str(MAX_CONNECTIONS),
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self.pid = self.process.pid
        if wait:
            self.wait_until_it_answers()

    def wait_until_it_answers(self) -> None:
        deadline = time.monotonic() + 60
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                problem = f"the daemon did not start (exit status {self.process.poll()})"
                with contextlib.suppress(AssertionError):
                    self.stop()
                raise RuntimeError(f"{problem}:\n{self.log.read_text()}")
            time.sleep(0.05)

    def log_mark(self) -> int:
        """Where the daemon's log ends now, for :meth:`log_lines`."""
        return len(self.log.read_bytes())

    def wait_for_log_lines(self, containing: str, count: int, since: int = 0) -> list[str]:
        """The first ``count`` log lines (from ``since``) with ``containing``, once written."""
        deadline = time.monotonic() + 10
        while len(lines := self.log_lines(containing, since)) < count:
            assert time.monotonic() < deadline, f"the daemon's log has {lines}"
            time.sleep(0.02)
        return lines[:count]

    def log_lines(self, containing: str = "", since: int = 0) -> list[str]:
        """The daemon's log lines (from ``since``) that contain ``containing``, without their
        time stamps."""
        text = self.log.read_bytes()[since:].decode(errors="replace")
        return [
            line.split(" ", 2)[2]
            for line in text.splitlines()
            if containing in line and line[:2] == "20"
        ]

    def answers(self) -> bool:
        from podwright.adapters.fuse.client import ProxyClient
        from podwright.adapters.fuse.errors import FuseProxyError

        try:
            ProxyClient(str(self.workspace.socket), timeout=5).ping()
        except FuseProxyError:
            return False
        return True

    def fd_count(self) -> int:
        """Open descriptors of the daemon and of its mount helper, together."""
        return sum(len(os.listdir(f"/proc/{pid}/fd")) for pid in (self.pid, *self.children()))

    def children(self) -> list[int]:
        return children_of(self.pid)

    def stray_processes(self) -> list[int]:
        """Children of the daemon other than its one mount helper, and any child of that helper."""
        children = self.children()
        helpers = [pid for pid in children if b"mount_helper" in _cmdline(pid)]
        return [pid for pid in children if pid not in helpers[:1]] + [
            grandchild for helper in helpers for grandchild in children_of(helper)
        ]

    def stop(self, number: int = signal.SIGTERM) -> float:
        """Send ``number`` and wait for the exit; the seconds it took.

        Fails, naming what is wrong, unless the daemon exits 0 within :data:`STOP_LIMIT`
        seconds leaving no process, socket or mount behind (a daemon that does not exit is
        killed, after its threads' kernel wait channels are recorded for the report).
        """
        started = time.monotonic()
        family = []
        if self.process.poll() is None:  # (it may have ended already: it is checked all the same)
            family = self.process_family()
            self.process.send_signal(number)
        try:
            self.process.wait(STOP_LIMIT)
        except subprocess.TimeoutExpired:
            stuck = describe_processes(self.process_family())
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"the daemon did not exit within {STOP_LIMIT}s of signal {number} and was "
                f"killed; its processes were:\n{stuck}\nits log:\n{self.log.read_text()[-3000:]}"
            ) from None
        elapsed = time.monotonic() - started
        problems = []
        if self.process.returncode != 0:
            problems.append(f"it exited with status {self.process.returncode}, not 0")
        if self.workspace.socket.exists():
            problems.append("it left its socket behind")
        left = wait_until_gone(family)
        if left:
            problems.append(f"processes it started are still there: {describe_processes(left)}")
        assert not problems, (
            "stopping the daemon: " + "; ".join(problems) + f"\nits log:\n"
            f"{self.log.read_text()[-3000:]}"
        )
        return elapsed

    def process_family(self) -> list[int]:
        """The daemon, its children and theirs."""
        family = [self.pid]
        for pid in family:
            family.extend(children_of(pid))
        return family


def wait_until_gone(pids: list[int], limit: float = 5.0) -> list[int]:
    """Wait until none of ``pids`` exists (a zombie counts as existing); those that remain."""
    deadline = time.monotonic() + limit
    while True:
        left = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def describe_processes(pids: list[int]) -> str:
    """Each process with its state, kernel wait channel and command line, for a failure report."""
    lines = []
    for pid in pids:
        with contextlib.suppress(OSError):
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            for task in os.listdir(f"/proc/{pid}/task"):
                wchan = Path(f"/proc/{pid}/task/{task}/wchan").read_text()
                command = _cmdline(pid).replace(b"\0", b" ")[:120].decode(errors="replace")
                lines.append(f"  {pid}/{task} state={state} wchan={wchan} {command}")
    return "\n".join(lines) or "  (none)"


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError):
                found += [
                    int(child)
                    for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
                ]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return b""


def processes_of(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{entry}").st_uid == uid:
                found.append(int(entry))
    return found


def kill_callers() -> None:
    """SIGKILL every process of the callers' uids, and wait until they are gone."""
    deadline = time.monotonic() + 10
    while True:
        remaining = [pid for uid in CALLER_UIDS for pid in processes_of(uid)]
        if not remaining:
            return
        for pid in remaining:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise RuntimeError(f"caller processes survive SIGKILL: {remaining}")
        time.sleep(0.05)


DESKTOP_DEV_FUSE = """
mount -t tmpfs -o mode=755 tmpfs {devnode}
mknod -m 666 {devnode}/fuse c 10 229
mount --bind {devnode}/fuse /dev/fuse
"""


def as_caller(
    workspace: Workspace,
    script: str,
    *,
    uid: int = CALLER,
    root_setup: str = "",
    desktop_dev_fuse: bool = False,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run the shell ``script`` as ``uid`` without capabilities in a new private mount namespace.

    ``root_setup`` runs first, as root, inside the namespace; ``$AS_CALLER`` there is the command
    prefix that drops to a caller (``$AS_CALLER sh -c ...``), for setups with several users.
    """
    command, env = caller_command(
        workspace, script, uid=uid, root_setup=root_setup, desktop_dev_fuse=desktop_dev_fuse
    )
    try:
        return subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    finally:
        kill_callers()


def caller_command(
    workspace: Workspace,
    script: str,
    *,
    uid: int = CALLER,
    root_setup: str = "",
    desktop_dev_fuse: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment :func:`as_caller` runs (to start it in the background)."""
    caller_script = workspace.script(f"caller-{time.monotonic_ns()}.sh", "set -u\n" + script)
    drop = (
        "setpriv --reuid {uid} --regid {uid} --clear-groups --inh-caps=-all "
        "--bounding-set=-all --no-new-privs --"
    )
    root_part = "\n".join(
        [
            "set -eu",
            f"mount --bind {workspace.bin}/fusermount3 /usr/bin/fusermount3",
            DESKTOP_DEV_FUSE.format(devnode=workspace.devnode) if desktop_dev_fuse else "",
            f'AS_CALLER="{drop.format(uid=uid)}"',
            f'AS_OTHER="{drop.format(uid=OTHER_CALLER)}"',
            root_setup,
            f"exec $AS_CALLER sh {caller_script}",
        ]
    )
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "PODWRIGHT_FUSE_PROXY_SOCKET": str(workspace.socket),
        "BUNDLE": str(workspace.bin / "fusermount3"),
        "AREA": str(workspace.area),
        "IMAGE": str(workspace.squashfs),
        "SCRIPTS": str(workspace.scripts),
        "LC_ALL": "C.UTF-8",
    }
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", root_part], env


CLIENT_SCRIPT = """
import json, os, socket, sys
sys.path.insert(0, os.environ["BUNDLE"])
from podwright.adapters.fuse.client import ProxyClient
from podwright.adapters.fuse.errors import FuseProxyError, ProxyRefusedError

def result(call):
    try:
        value = call()
    except ProxyRefusedError as error:
        return {"errno": error.errno, "message": error.message}
    except FuseProxyError as error:
        return {"error": str(error)}
    return {"ok": True, "value": value if isinstance(value, (int, str, type(None))) else None}
"""


def client_call(workspace: Workspace, code: str, **options: Any) -> Any:
    """Run Python ``code`` (with :data:`CLIENT_SCRIPT` in scope) as a caller; its JSON output."""
    completed = as_caller(workspace, client_script(workspace, code), **options)
    lines = completed.stdout.strip().splitlines()
    assert lines, f"no output; stderr:\n{completed.stderr}"
    return json.loads(lines[-1])


def client_script(workspace: Workspace, code: str) -> str:
    """A shell command that runs Python ``code`` with :data:`CLIENT_SCRIPT` in scope."""
    program = workspace.script(f"client-{time.monotonic_ns()}.py", CLIENT_SCRIPT + code)
    return f"{SYSTEM_PYTHON} -I {program}"


def raw_exchange(socket_path: Path, data: bytes, wait: float = 5) -> bytes:
    """Send ``data`` as root and read whatever comes back until the daemon closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(wait)
        sock.connect(str(socket_path))
        if data:
            sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def mounts_below(path: Path, mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    with open(mountinfo) as file:
        return [line for line in file if f" {path}/" in line or f" {path} " in line]


@contextlib.contextmanager
def daemon_checked(daemon: Daemon, baseline_fds: int) -> Iterator[None]:
    """After the body: the daemon still answers, its and its helper's descriptors are back to
    the baseline, and no process but the helper runs under it."""
    yield
    deadline = time.monotonic() + 10
    while True:
        answers = daemon.answers()
        fds, strays = daemon.fd_count(), daemon.stray_processes()
        if answers and fds <= baseline_fds and not strays:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"daemon answers={answers}, fds={fds} (baseline {baseline_fds}), strays={strays}"
                f"\n{daemon.log.read_text()[-3000:]}"
            )
        time.sleep(0.1)
