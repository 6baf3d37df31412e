"""The privileged work, as the daemon asks for it: checked mounts and unmounts for a caller.

The work itself happens in a child of the fork server (:mod:`podwright.adapters.fuse.mount_helper`),
a small single-threaded process the daemon starts once and restarts if it dies. For each
operation the daemon sends a job with the caller's mount-namespace descriptor (and for a mount
the ``/dev/fuse`` descriptor it opened) and the write end of a result pipe, then waits for the
child's report: a byte before mount(2) and, at the end, an errno and a message. The helper kills
a child that overruns the timeout; a child killed after announcing mount(2) may have mounted,
so the FUSE mount at that path is detached again before the request is refused.
"""

from __future__ import annotations

import array
import contextlib
import errno
import logging
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from podwright.adapters.fuse import mount_helper
from podwright.adapters.fuse.callers import Caller
from podwright.adapters.fuse.errors import ServerSetupError
from podwright.core.fuse_proxy.mount_policy import MountPlan, RequestRefusedError

LOG = logging.getLogger("podwright.fuse_proxy")
_MAX_REPORT = 8192
_REPORT_GRACE = 5.0
"""How much longer than the job's timeout the daemon waits for the helper to end a child."""


class _MaybeMountedError(RequestRefusedError):
    """The child was killed after it announced mount(2): a mount may exist."""


class ForkServer:
    """The helper process: started on first use, restarted when it died, stopped on close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None

    def start(self) -> None:
        with self._lock:
            self._ensure_running()

    def submit(self, job: bytes, fds: Sequence[int]) -> None:
        """Send one job; restart the helper once if it is gone."""
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        with self._lock:
            for attempt in range(2):
                channel = self._ensure_running()
                try:
                    channel.sendmsg([job], rights)
                    return
                except OSError as error:
                    LOG.warning("the mount helper is gone (%s); restarting it", error)
                    self._stop()
                    if attempt:
                        raise RequestRefusedError(
                            errno.EIO, "the daemon's mount helper cannot be started"
                        ) from error

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ensure_running(self) -> socket.socket:
        if self._process is not None and self._process.poll() is None and self._channel:
            return self._channel
        self._stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-m", mount_helper.__name__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except OSError as error:
            ours.close()
            raise ServerSetupError(f"cannot start the mount helper: {error}") from error
        finally:
            theirs.close()
        ours.set_inheritable(False)
        self._channel = ours
        return ours

    def _stop(self) -> None:
        if self._channel is not None:
            self._channel.close()  # the helper sees the end, kills its children, exits
            self._channel = None
        if self._process is not None:
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


class Mounter:
    """Checked mounts and unmounts for callers, each bounded by ``timeout`` seconds."""

    def __init__(self, fuse_device: str = "/dev/fuse", timeout: float = 10.0) -> None:
        self.fuse_device = fuse_device
        self.timeout = timeout
        self.fork_server = ForkServer()

    def mount(self, caller: Caller, components: Sequence[str], plan: MountPlan) -> int:
        """Mount for ``caller`` at ``/components``; the mounted ``/dev/fuse`` descriptor.

        Should the child be killed after it announced mount(2), the mount it may have made is
        detached (:meth:`undo_mount`) before the request is refused.
        """
        try:
            device = os.open(self.fuse_device, os.O_RDWR | os.O_CLOEXEC)
        except OSError as error:
            raise RequestRefusedError(
                error.errno or errno.EIO,
                f"the daemon cannot open {self.fuse_device}: {error.strerror}",
            ) from error
        job = self._job(mount_helper.MOUNT, caller, components, plan=plan)
        try:
            self._run(caller, job, [caller.namespace_fd, device])
        except _MaybeMountedError as refusal:
            os.close(device)
            with contextlib.suppress(RequestRefusedError):
                self.undo_mount(caller, components)
            raise RequestRefusedError(refusal.errno, refusal.message) from None
        except BaseException:
            os.close(device)
            raise
        return device

    def undo_mount(self, caller: Caller, components: Sequence[str]) -> None:
        """Lazily detach the FUSE mount just made at ``/components``, even if the caller is gone.

        Unlike :meth:`unmount` this needs no mountinfo (no live pid): the namespace descriptor
        is enough, and the child checks that the top mount there is a FUSE mount.
        """
        job = self._job(mount_helper.UNDO_MOUNT, caller, components, lazy=True)
        self._run(caller, job, [caller.namespace_fd])

    def unmount(self, caller: Caller, components: Sequence[str], lazy: bool) -> None:
        """Unmount the top mount at ``/components`` (mountinfo shows the caller's FUSE mount)."""
        job = self._job(mount_helper.UNMOUNT, caller, components, lazy=lazy)
        self._run(caller, job, [caller.namespace_fd])

    def close(self) -> None:
        self.fork_server.close()

    def _job(
        self,
        operation: int,
        caller: Caller,
        components: Sequence[str],
        *,
        lazy: bool = False,
        plan: MountPlan | None = None,
    ) -> bytes:
        mount = (
            {}
            if plan is None
            else {
                "flags": plan.flags,
                "source": plan.source,
                "fstype": plan.fstype,
                "kernel_options": plan.kernel_options,
            }
        )
        return mount_helper.encode_job(
            operation,
            mountpoint="/" + "/".join(components),
            uid=caller.uid,
            gid=caller.gid,
            groups=caller.groups,
            timeout=self.timeout,
            lazy=lazy,
            **mount,  # type: ignore[arg-type]
        )

    def _run(self, caller: Caller, job: bytes, fds: list[int]) -> None:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        try:
            try:
                self.fork_server.submit(job, [write_end, *fds])
            finally:
                os.close(write_end)
            report, timed_out = _read_report(read_end, self.timeout + _REPORT_GRACE)
        finally:
            os.close(read_end)
        _raise_for(report, timed_out, self.timeout, caller)


def _read_report(fd: int, timeout: float) -> tuple[bytes, bool]:
    """What the child wrote, up to its complete result (no need to wait for it to exit) or the
    end of the pipe (it died); and whether that took longer than ``timeout``."""
    deadline = time.monotonic() + timeout
    report = bytearray()
    while not _complete(report):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bytes(report), True
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            continue
        chunk = os.read(fd, _MAX_REPORT)
        if not chunk:
            break
        report += chunk
        if len(report) > _MAX_REPORT:
            break
    return bytes(report), False


def _complete(report: bytearray) -> bool:
    result = report[1:] if report.startswith(mount_helper.ABOUT_TO_MOUNT) else report
    size = mount_helper.RESULT.size
    if len(result) < size:
        return False
    length: int = mount_helper.RESULT.unpack_from(result)[2]
    return len(result) >= size + length


def _raise_for(report: bytes, timed_out: bool, timeout: float, caller: Caller) -> None:
    marker = report.startswith(mount_helper.ABOUT_TO_MOUNT)
    result = report[1:] if marker else report
    size = mount_helper.RESULT.size
    if len(result) >= size and result[:1] == mount_helper.RESULT_TAG:
        _, code, length = mount_helper.RESULT.unpack_from(result)
        if code == 0:
            return
        raise RequestRefusedError(code, result[size : size + length].decode("utf-8", "replace"))
    message = f"the operation for {caller.describe()} did not finish within {timeout:g}s"
    if marker:
        raise _MaybeMountedError(errno.ETIMEDOUT, message)
    if timed_out or not report:
        raise RequestRefusedError(errno.ETIMEDOUT, message)
    raise RequestRefusedError(errno.EIO, "the mount helper ended without a result")
