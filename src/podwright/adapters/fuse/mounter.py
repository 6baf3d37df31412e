"""The privileged work: mount and unmount in the caller's mount namespace, in a forked child.

setns(2) into a mount namespace needs a single-threaded process, and the daemon has threads,
so each operation forks a child that enters the caller's namespace (the descriptor the daemon
opened, never one the caller sent), takes the caller's uid, gid and groups as its effective ids
to walk the mountpoint one component at a time with ``O_PATH|O_NOFOLLOW`` (so a symbolic link
anywhere is refused, and directory permissions are the caller's), checks that the caller owns
or may write the directory, moves into it with fchdir (so nothing can be swapped between the
check and the call), returns to root and calls mount(2) on ``.``. The ``/dev/fuse`` descriptor
is opened by the daemon before the fork. Nothing from the caller's file system is executed: the
child only makes system calls, and imports are sealed off before setns so that no module can be
loaded from the caller's tree.

The child reports over a pipe: a byte before mount(2) and, at the end, an errno and a message.
The parent waits up to the operation timeout, then kills and reaps the child; a child killed
after its marker may have mounted, so that mount is lazily detached before refusing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import select
import signal
import stat
import struct
import sys
import time
from collections.abc import Callable, Sequence

from podwright.adapters.fuse import syscalls
from podwright.adapters.fuse.callers import Caller
from podwright.core.fuse_proxy.mount_policy import MountEntry, MountPlan, RequestRefusedError

_ABOUT_TO_MOUNT = b"M"
_RESULT = struct.Struct(">cI")
_RESULT_TAG = b"R"
_MAX_REPORT = 8192
_WALK_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_DIRECTORY_ROOT_MODE = 0o40000


class _ChildRefusalError(Exception):
    def __init__(self, error_number: int, message: str) -> None:
        super().__init__(message)
        self.errno = error_number


@dataclasses.dataclass(frozen=True)
class Mounter:
    """Performs checked mounts and unmounts for callers; each call is bounded by ``timeout``."""

    fuse_device: str = "/dev/fuse"
    timeout: float = 10.0

    def mount(
        self,
        caller: Caller,
        components: Sequence[str],
        plan: MountPlan,
        mounts_before: Sequence[MountEntry],
    ) -> int:
        """Mount for ``caller`` at ``/components``; the mounted ``/dev/fuse`` descriptor.

        ``mounts_before`` is the caller's mount table read before the call: should the child be
        killed after it may have mounted, a mount not in it is detached before refusing.
        """
        try:
            device = os.open(self.fuse_device, os.O_RDWR | os.O_CLOEXEC)
        except OSError as error:
            raise RequestRefusedError(
                error.errno or errno.EIO,
                f"the daemon cannot open {self.fuse_device}: {error.strerror}",
            ) from error
        try:
            self._in_child(
                caller,
                lambda report: _mount_child(caller, components, plan, device, report),
                keep=(device,),
            )
        except _MaybeMountedError as refusal:
            os.close(device)
            self._detach_new_mount(caller, components, mounts_before)
            raise RequestRefusedError(refusal.errno, refusal.message) from None
        except BaseException:
            os.close(device)
            raise
        return device

    def unmount(self, caller: Caller, components: Sequence[str], lazy: bool) -> None:
        """Unmount the top mount at ``/components`` (mountinfo shows the caller's FUSE mount)."""
        self._in_child(caller, lambda _report: _unmount_child(caller, components, lazy))

    def _detach_new_mount(
        self, caller: Caller, components: Sequence[str], mounts_before: Sequence[MountEntry]
    ) -> None:
        path = "/" + "/".join(components)
        known = {entry.mount_id for entry in mounts_before}
        try:
            fresh = [
                entry
                for entry in caller.mountinfo()
                if entry.mount_point == path
                and entry.mount_id not in known
                and entry.is_fuse
                and entry.user_id == caller.uid
            ]
            if fresh:
                self.unmount(caller, components, lazy=True)
        except RequestRefusedError:
            pass  # the caller is gone, and its namespace with it

    def _in_child(
        self,
        caller: Caller,
        work: Callable[[Callable[[], None]], None],
        keep: tuple[int, ...] = (),
    ) -> None:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:  # pragma: no cover - runs in the forked child; its outcome is reported
            _child_main(read_end, write_end, work, (*keep, write_end, caller.namespace_fd))
        os.close(write_end)
        try:
            report, timed_out = _read_report(read_end, self.timeout)
        finally:
            os.close(read_end)
            _reap(pid)
        _raise_for(report, timed_out, self.timeout, caller)


class _MaybeMountedError(RequestRefusedError):
    """The child was killed after it announced mount(2): a mount may exist."""


def _child_main(
    read_end: int,
    write_end: int,
    work: Callable[[Callable[[], None]], None],
    keep: tuple[int, ...],
) -> None:
    """The forked child: never returns, never raises, never prints (that could import)."""
    code, message = 0, ""
    try:
        os.close(read_end)
        _close_all_but(keep)
        _seal_imports()

        def announce_mount() -> None:
            os.write(write_end, _ABOUT_TO_MOUNT)

        work(announce_mount)
    except _ChildRefusalError as refusal:
        code, message = refusal.errno or errno.EIO, str(refusal)
    except OSError as error:
        code, message = error.errno or errno.EIO, error.strerror or str(error)
    except BaseException:
        code, message = errno.EIO, "the mount helper failed unexpectedly"
    try:
        os.write(
            write_end, _RESULT.pack(_RESULT_TAG, code) + message.encode("utf-8", "replace")[:4096]
        )
    finally:
        os._exit(0)


def _close_all_but(keep: tuple[int, ...]) -> None:
    """Drop every descriptor inherited from the daemon (other callers' sockets and devices)."""
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def _seal_imports() -> None:
    """After setns, '/' is the caller's: make any import fail instead of reading its files."""
    sys.meta_path[:] = []
    sys.path_hooks[:] = []
    sys.path[:] = []
    sys.path_importer_cache.clear()


def _read_report(fd: int, timeout: float) -> tuple[bytes, bool]:
    """What the child wrote, and whether it timed out; announcing mount(2) earns more time."""
    deadline = time.monotonic() + timeout
    report = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return bytes(report), True
        readable, _, _ = select.select([fd], [], [], remaining)
        if not readable:
            continue
        chunk = os.read(fd, _MAX_REPORT)
        if not chunk:
            return bytes(report), False
        if not report and chunk.startswith(_ABOUT_TO_MOUNT):
            deadline = time.monotonic() + timeout
        report += chunk
        if len(report) > _MAX_REPORT:
            return bytes(report[:_MAX_REPORT]), False


def _reap(pid: int) -> None:
    """Kill the child if it still runs, and wait for it: no zombie, no straggler."""
    done, _ = os.waitpid(pid, os.WNOHANG)
    if done:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _raise_for(report: bytes, timed_out: bool, timeout: float, caller: Caller) -> None:
    marker = report.startswith(_ABOUT_TO_MOUNT)
    result = report[1:] if marker else report
    if len(result) >= _RESULT.size and result[:1] == _RESULT_TAG:
        _, code = _RESULT.unpack_from(result)
        if code == 0:
            return
        raise RequestRefusedError(code, result[_RESULT.size :].decode("utf-8", "replace"))
    if timed_out:
        message = f"the operation for {caller.describe()} did not finish within {timeout:g}s"
        if marker:
            raise _MaybeMountedError(errno.ETIMEDOUT, message)
        raise RequestRefusedError(errno.ETIMEDOUT, message)
    raise RequestRefusedError(errno.EIO, "the mount helper ended without a result")


def _enter_as_caller(caller: Caller) -> None:
    syscalls.setns(caller.namespace_fd, syscalls.CLONE_NEWNS)
    os.setgroups(list(caller.groups))
    os.setegid(caller.gid)
    os.seteuid(caller.uid)


def _back_to_root() -> None:
    os.seteuid(0)
    os.setegid(0)
    os.setgroups([])


def _walk(components: Sequence[str], path: str) -> int:
    """An O_PATH descriptor of ``/components``, refusing symbolic links and non-directories."""
    current = os.open("/", _WALK_FLAGS)
    walked = ""
    try:
        for name in components:
            walked += "/" + name
            try:
                following = os.open(name, _WALK_FLAGS, dir_fd=current)
            except OSError as error:
                raise _walk_refusal(error, name, current, walked, path) from None
            os.close(current)
            current = following
        return current
    except BaseException:
        os.close(current)
        raise


def _walk_refusal(
    error: OSError, name: str, parent: int, walked: str, path: str
) -> _ChildRefusalError:
    if error.errno in (errno.ENOTDIR, errno.ELOOP):
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        if is_link:
            return _ChildRefusalError(
                errno.ELOOP,
                f"mountpoint {path}: {walked} is a symbolic link; "
                "the FUSE proxy does not follow symbolic links",
            )
        return _ChildRefusalError(errno.ENOTDIR, f"mountpoint {path}: {walked} is not a directory")
    return _ChildRefusalError(
        error.errno or errno.EIO, f"mountpoint {path}: {walked}: {error.strerror}"
    )


def _mount_child(
    caller: Caller,
    components: Sequence[str],
    plan: MountPlan,
    device: int,
    report: Callable[[], None],
) -> None:
    path = "/" + "/".join(components)
    _enter_as_caller(caller)
    directory = _walk(components, path)
    status = os.fstat(directory)
    os.fchdir(directory)
    if status.st_uid != caller.uid:
        if status.st_mode & stat.S_ISVTX:
            raise _ChildRefusalError(
                errno.EPERM, f"mountpoint {path} is sticky and not owned by user {caller.uid}"
            )
        if not os.access(".", os.W_OK, effective_ids=True):
            raise _ChildRefusalError(
                errno.EACCES,
                f"mountpoint {path} is neither owned nor writable by user {caller.uid}",
            )
    _back_to_root()
    report()
    syscalls.mount(
        plan.source, ".", plan.fstype, plan.flags, plan.data(device, _DIRECTORY_ROOT_MODE)
    )


def _unmount_child(caller: Caller, components: Sequence[str], lazy: bool) -> None:
    """Detach the top mount at ``/components``: mountinfo showed it is the caller's FUSE mount.

    The mount root itself is never touched: FUSE refuses every process but its owner (real,
    effective and saved uid), and the child's real uid is root. Only the daemon and privileged
    processes can change the caller's mounts, so the mount checked is the mount removed; and
    ``UMOUNT_NOFOLLOW`` refuses a last component that is a symbolic link.
    """
    path = "/" + "/".join(components)
    _enter_as_caller(caller)
    parent = _walk(components[:-1], path)
    os.fchdir(parent)
    _back_to_root()
    flags = syscalls.UMOUNT_NOFOLLOW | (syscalls.MNT_DETACH if lazy else 0)
    syscalls.umount2(components[-1], flags)
