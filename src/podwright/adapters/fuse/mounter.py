"""The privileged work, as the daemon asks for it: checked mounts and unmounts for a caller.

The work itself happens in a child of the fork server (:mod:`podwright.adapters.fuse.mount_helper`),
a small single-threaded process the daemon starts once and restarts if it dies. For each
operation the daemon sends a job with the caller's mount-namespace descriptor (and for a mount
the ``/dev/fuse`` descriptor it opened) and the write end of a result pipe, then waits for the
child's report: a byte before mount(2) and, at the end, an errno and a message. The helper kills
a child that overruns the timeout (:class:`OperationTimedOutError`). A child killed after it
announced mount(2) may have mounted: :class:`MaybeMountedError` tells the daemon to detach the
FUSE mount at that path (:meth:`Mounter.undo_mount`) before it refuses the request.

Shutting down is bounded: :meth:`Mounter.cancel` refuses new mounts and unmounts, has the helper
kill every running child at once (their waiting workers see :class:`OperationCancelledError`)
and gives the undo jobs that may follow a short timeout; :meth:`Mounter.close` ends the helper,
and kills its process group should it not exit in time. Nothing waits on the helper unbounded:
sending a job has a deadline, and so has waiting for its report.
"""

from __future__ import annotations

import array
import contextlib
import errno
import logging
import os
import select
import signal
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
_SEND_TIMEOUT = 0.5
"""Seconds to hand a job to the helper (it reads its channel at once; longer means it is stuck)."""
HELPER_STOP_LIMIT = 0.5
"""Seconds the helper has to exit once its channel is closed, before its process group is
killed; it spends at most ``mount_helper.EXIT_REAP_LIMIT`` of them reaping its children."""
CANCELLED_JOB_TIMEOUT = 0.3
"""The timeout of the undo jobs sent after :meth:`Mounter.cancel`."""
SHUTTING_DOWN = "the FUSE proxy is shutting down; retry later"


class OperationTimedOutError(RequestRefusedError):
    """The child overran the operation timeout and the helper killed it."""


class OperationCancelledError(RequestRefusedError):
    """The daemon is shutting down: the operation was refused, or its child killed."""


class MaybeMountedError(RequestRefusedError):
    """The child was killed (timed out, or cancelled) after it announced mount(2): a mount may
    exist at the path, and must be detached before the request is refused."""

    def __init__(self, cause: RequestRefusedError) -> None:
        super().__init__(cause.errno, cause.message)
        self.cause = cause


class ForkServer:
    """The helper process: started on first use, restarted when it died, ended on close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None
        self._closed = False

    def start(self) -> None:
        with self._lock:
            self._ensure_running()

    def submit(self, job: bytes, fds: Sequence[int]) -> None:
        """Send one job; restart the helper once if it is gone or does not take the job."""
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        with self._lock:
            for attempt in range(2):
                channel = self._ensure_running()
                try:
                    channel.sendmsg([job], rights)
                    return
                except OSError as error:
                    problem = "does not take jobs" if isinstance(error, TimeoutError) else "is gone"
                    LOG.warning("the mount helper %s (%s); restarting it", problem, error)
                    self._stop(HELPER_STOP_LIMIT)
                    if attempt:
                        raise RequestRefusedError(
                            errno.EIO, "the daemon's mount helper cannot be started"
                        ) from error

    def cancel(self) -> None:
        """Have the helper kill every running child; no new helper is started for it."""
        with self._lock:
            if self._channel is None or self._process is None or self._process.poll() is not None:
                return
            try:
                self._channel.sendmsg([mount_helper.encode_cancel()], [], socket.MSG_DONTWAIT)
            except OSError as error:
                LOG.warning("cannot tell the mount helper to cancel its operations: %s", error)

    def close(self) -> None:
        """End the helper (else kill its process group, see :data:`HELPER_STOP_LIMIT`); no
        restarts after it."""
        with self._lock:
            self._closed = True
            self._stop(HELPER_STOP_LIMIT)

    @property
    def pid(self) -> int | None:
        """The helper's process id, while it runs."""
        return None if self._process is None else self._process.pid

    def _ensure_running(self) -> socket.socket:
        if self._process is not None and self._process.poll() is None and self._channel:
            return self._channel
        if self._closed:
            raise OperationCancelledError(errno.EAGAIN, SHUTTING_DOWN)
        self._stop(HELPER_STOP_LIMIT)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-m", mount_helper.__name__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                process_group=0,  # its own group, with its children: killed together if need be
            )
        except OSError as error:
            ours.close()
            raise ServerSetupError(f"cannot start the mount helper: {error}") from error
        finally:
            theirs.close()
        ours.set_inheritable(False)
        ours.settimeout(_SEND_TIMEOUT)
        self._channel = ours
        LOG.info("started the mount helper (pid %d)", self._process.pid)
        return ours

    def _stop(self, limit: float) -> None:
        if self._channel is not None:
            self._channel.close()  # the helper sees the end, kills its children, exits
            self._channel = None
        if self._process is not None:
            try:
                self._process.wait(limit)
            except subprocess.TimeoutExpired:
                LOG.warning(
                    "the mount helper did not exit within %gs; killing it and its children", limit
                )
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
            self._process = None


class Mounter:
    """Checked mounts and unmounts for callers, each bounded by ``timeout`` seconds."""

    def __init__(self, fuse_device: str = "/dev/fuse", timeout: float = 10.0) -> None:
        self.fuse_device = fuse_device
        self.timeout = timeout
        self.fork_server = ForkServer()
        self._cancelled = threading.Event()

    def mount(self, caller: Caller, components: Sequence[str], plan: MountPlan) -> int:
        """Mount for ``caller`` at ``/components``; the mounted ``/dev/fuse`` descriptor.

        Raises :class:`MaybeMountedError` when the child was killed after it announced mount(2):
        the caller must then :meth:`undo_mount` before it refuses the request.
        """
        self._refuse_when_cancelled()
        try:
            device = os.open(self.fuse_device, os.O_RDWR | os.O_CLOEXEC)
        except OSError as error:
            raise RequestRefusedError(
                error.errno or errno.EIO,
                f"the daemon cannot open {self.fuse_device}: {error.strerror}",
            ) from error
        job = self._job(mount_helper.MOUNT, caller, components, self.timeout, plan=plan)
        try:
            self._run(caller, job, [caller.namespace_fd, device], self.timeout)
        except BaseException:
            os.close(device)
            raise
        return device

    def undo_mount(self, caller: Caller, components: Sequence[str]) -> None:
        """Lazily detach the FUSE mount just made at ``/components``, even if the caller is gone.

        Unlike :meth:`unmount` this needs no mountinfo (no live pid): the namespace descriptor
        is enough, and the child checks that the top mount there is a FUSE mount. After
        :meth:`cancel` it still runs, with a short timeout.
        """
        timeout = CANCELLED_JOB_TIMEOUT if self._cancelled.is_set() else self.timeout
        job = self._job(mount_helper.UNDO_MOUNT, caller, components, timeout, lazy=True)
        self._run(caller, job, [caller.namespace_fd], timeout)

    def unmount(self, caller: Caller, components: Sequence[str], lazy: bool) -> None:
        """Unmount the top mount at ``/components`` (mountinfo shows the caller's FUSE mount)."""
        self._refuse_when_cancelled()
        job = self._job(mount_helper.UNMOUNT, caller, components, self.timeout, lazy=lazy)
        self._run(caller, job, [caller.namespace_fd], self.timeout)

    def start(self) -> None:
        """Start the fork server (before the daemon starts any thread)."""
        self.fork_server.start()

    def cancel(self) -> None:
        """Shutting down: refuse new operations and kill the running ones (see the module)."""
        self._cancelled.set()
        self.fork_server.cancel()

    def close(self) -> None:
        self._cancelled.set()
        self.fork_server.close()

    def _refuse_when_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise OperationCancelledError(errno.EAGAIN, SHUTTING_DOWN)

    def _job(
        self,
        operation: int,
        caller: Caller,
        components: Sequence[str],
        timeout: float,
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
            timeout=timeout,
            lazy=lazy,
            **mount,  # type: ignore[arg-type]
        )

    def _run(self, caller: Caller, job: bytes, fds: list[int], timeout: float) -> None:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        try:
            try:
                self.fork_server.submit(job, [write_end, *fds])
            finally:
                os.close(write_end)
            report, timed_out = _read_report(read_end, timeout + _REPORT_GRACE)
        finally:
            os.close(read_end)
        _raise_for(report, timed_out, timeout, caller, self._cancelled.is_set())


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


def _raise_for(
    report: bytes, timed_out: bool, timeout: float, caller: Caller, cancelled: bool
) -> None:
    marker = report.startswith(mount_helper.ABOUT_TO_MOUNT)
    result = report[1:] if marker else report
    size = mount_helper.RESULT.size
    if len(result) >= size and result[:1] == mount_helper.RESULT_TAG:
        _, code, length = mount_helper.RESULT.unpack_from(result)
        if code == 0:
            return
        raise RequestRefusedError(code, result[size : size + length].decode("utf-8", "replace"))
    # No result: the child was killed (by the helper at the timeout, or by a cancel), or the
    # helper died with it.
    cause: RequestRefusedError
    if cancelled:
        cause = OperationCancelledError(errno.EAGAIN, SHUTTING_DOWN)
    elif timed_out or not report or marker:
        cause = OperationTimedOutError(
            errno.ETIMEDOUT,
            f"the operation for {caller.describe()} did not finish within {timeout:g}s",
        )
    else:
        cause = RequestRefusedError(errno.EIO, "the mount helper ended without a result")
    if marker:
        raise MaybeMountedError(cause)
    raise cause
