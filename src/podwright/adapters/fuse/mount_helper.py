"""The daemon's fork server: a small single-threaded process that forks one child per operation.

setns(2) into a mount namespace needs a single-threaded process. The daemon has threads, and a
fork of it costs what its memory and its at-fork handlers (threading, logging) cost, so the
daemon starts this helper once: it imports little, runs no thread, holds no caller's socket,
and for each job it receives (over a SOCK_SEQPACKET pair, with the job's descriptors) forks a
child and goes back to waiting. It reaps its children and SIGKILLs any that overrun the job's
timeout; when the daemon goes away, it kills what is left, reaps it (for at most
:data:`EXIT_REAP_LIMIT` seconds: a child stuck in the kernel must not keep it alive) and exits.
A cancel job (the daemon is shutting down) kills every running child at once; the daemon then
detaches what a child killed after mount(2) may have left, through this same helper.

The child does the privileged work and nothing else: it keeps only the job's descriptors,
seals off imports (after setns, ``/`` is the caller's file system, and no module may be loaded
from it), enters the caller's mount namespace (the descriptor the daemon opened from the
caller's pid, never one the caller sent), takes the caller's uid, gid and groups as effective
ids to walk the mountpoint one component at a time with ``O_PATH|O_NOFOLLOW`` (a symbolic link
anywhere is refused; directory permissions are the caller's), checks that the caller owns or may
write the directory, moves into it with fchdir (nothing can be swapped between the check and the
call), returns to root and calls mount(2) on ``.`` with the daemon's ``/dev/fuse`` descriptor.
Nothing from the caller's file system is executed. It writes a byte before mount(2) and, at the
end, an errno and a message to the job's result pipe.

A job is one datagram: a header (operation, lazy, uid, gid, mount flags, timeout in ms) and
NUL-separated strings (mountpoint, source, type, kernel options, groups), with descriptors
(result pipe, mount namespace, and for a mount the FUSE device) in SCM_RIGHTS. The operations
are mount, unmount, undo (detach a FUSE mount whose caller left without taking it), and cancel
(no strings, no descriptors).
"""

from __future__ import annotations

import array
import contextlib
import errno
import os
import select
import signal
import socket
import stat
import struct
import sys
import time

from podwright.adapters.fuse import syscalls

MOUNT = 1
UNMOUNT = 2
UNDO_MOUNT = 3
CANCEL = 4
FUSE_SUPER_MAGIC = 0x65735546
ABOUT_TO_MOUNT = b"M"
RESULT = struct.Struct(">cIH")
"""The result: tag, errno (0: done), length of the message that follows."""
RESULT_TAG = b"R"
JOB_HEADER = struct.Struct(">BBIIQI")
MAX_JOB = 64 * 1024
MAX_JOB_FDS = 3
_WALK_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_DIRECTORY_ROOT_MODE = 0o40000
_IDLE_REAP_INTERVAL = 0.1
EXIT_REAP_LIMIT = 0.3
"""Seconds the helper spends reaping its killed children before it exits without them."""


class Refusal(Exception):  # noqa: N818 (a refusal reported to the caller, not a failure)
    """A check failed in the child: reported as this errno and message."""

    def __init__(self, error_number: int, message: str) -> None:
        super().__init__(message)
        self.errno = error_number


def encode_job(
    operation: int,
    *,
    mountpoint: str,
    uid: int,
    gid: int,
    groups: tuple[int, ...],
    timeout: float,
    lazy: bool = False,
    flags: int = 0,
    source: str = "",
    fstype: str = "",
    kernel_options: tuple[str, ...] = (),
) -> bytes:
    """One job datagram (see the module docstring)."""
    header = JOB_HEADER.pack(operation, lazy, uid, gid, flags, round(timeout * 1000))
    strings = [mountpoint, source, fstype, ",".join(kernel_options), ",".join(map(str, groups))]
    return header + b"\0".join(text.encode("utf-8", "surrogateescape") for text in strings)


def encode_cancel() -> bytes:
    """The job that kills every running child (the daemon is shutting down)."""
    return encode_job(CANCEL, mountpoint="", uid=0, gid=0, groups=(), timeout=0)


class _Job:
    def __init__(self, data: bytes) -> None:
        operation, lazy, uid, gid, flags, timeout_ms = JOB_HEADER.unpack_from(data)
        fields = data[JOB_HEADER.size :].split(b"\0")
        mountpoint, source, fstype, options, groups = (
            field.decode("utf-8", "surrogateescape") for field in fields
        )
        self.operation, self.lazy, self.uid, self.gid = operation, bool(lazy), uid, gid
        self.flags, self.timeout = flags, timeout_ms / 1000
        self.path, self.source, self.fstype = mountpoint, source, fstype
        self.components = mountpoint.split("/")[1:]
        self.kernel_options = [option for option in options.split(",") if option]
        self.groups = [int(group) for group in groups.split(",") if group]


def serve(channel: socket.socket) -> None:
    """Fork a child per job until the daemon closes its end; then kill and reap what is left."""
    children: dict[int, float] = {}
    try:
        while True:
            wait = _IDLE_REAP_INTERVAL if children else None
            readable, _, _ = select.select([channel], [], [], wait)
            if readable:
                received = _receive(channel)
                if received is None:
                    return
                data, fds = received
                try:
                    job = _Job(data)
                    if job.operation == CANCEL:
                        for pid in children:
                            _kill(pid)
                        continue
                    pid = os.fork()
                    if pid == 0:  # pragma: no cover - the child reports through its pipe
                        _child(job, fds)
                    children[pid] = time.monotonic() + job.timeout
                except (ValueError, struct.error, OSError) as error:
                    print(f"mount helper: dropped a job: {error}", file=sys.stderr)
                finally:
                    for fd in fds:
                        os.close(fd)
            _reap(children, kill_overdue=True)
    finally:
        for pid in children:
            _kill(pid)
        give_up = time.monotonic() + EXIT_REAP_LIMIT
        while children and time.monotonic() < give_up:
            _reap(children, kill_overdue=True)
            time.sleep(0.01)


def _receive(channel: socket.socket) -> tuple[bytes, list[int]] | None:
    ancillary_size = socket.CMSG_SPACE(MAX_JOB_FDS * array.array("i").itemsize)
    data, ancillary, _, _ = channel.recvmsg(MAX_JOB, ancillary_size, socket.MSG_CMSG_CLOEXEC)
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    return data, list(fds)


def _reap(children: dict[int, float], kill_overdue: bool) -> None:
    while children:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            break
        children.pop(pid, None)
    if kill_overdue:
        now = time.monotonic()
        for pid, deadline in children.items():
            if deadline <= now:
                _kill(pid)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _child(job: _Job, fds: list[int]) -> None:
    """The forked child: never returns, never raises, never prints (printing could import)."""
    result = fds[0]
    code, message = 0, ""
    try:
        _close_all_but(fds)
        _seal_imports()
        if job.operation == MOUNT and len(fds) == 3:
            _mount(job, namespace=fds[1], device=fds[2], result=result)
        elif job.operation == UNMOUNT and len(fds) == 2:
            _unmount(job, namespace=fds[1])
        elif job.operation == UNDO_MOUNT and len(fds) == 2:
            _unmount(job, namespace=fds[1], only_fuse=True)
        else:
            raise Refusal(errno.EINVAL, "malformed job")
    except Refusal as refusal:
        code, message = refusal.errno or errno.EIO, str(refusal)
    except OSError as error:
        code, message = error.errno or errno.EIO, error.strerror or str(error)
    except BaseException:
        code, message = errno.EIO, "the mount helper failed unexpectedly"
    try:
        encoded = message.encode("utf-8", "replace")[:4096]
        os.write(result, RESULT.pack(RESULT_TAG, code, len(encoded)) + encoded)
    finally:
        os._exit(0)


def _close_all_but(keep: list[int]) -> None:
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


def _enter_as_caller(job: _Job, namespace: int) -> None:
    syscalls.setns(namespace, syscalls.CLONE_NEWNS)
    os.setgroups(job.groups)
    os.setegid(job.gid)
    os.seteuid(job.uid)


def _back_to_root() -> None:
    os.seteuid(0)
    os.setegid(0)
    os.setgroups([])


def _walk(components: list[str], path: str) -> int:
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


def _walk_refusal(error: OSError, name: str, parent: int, walked: str, path: str) -> Refusal:
    if error.errno in (errno.ENOTDIR, errno.ELOOP):
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        if is_link:
            return Refusal(
                errno.ELOOP,
                f"mountpoint {path}: {walked} is a symbolic link; "
                "the FUSE proxy does not follow symbolic links",
            )
        return Refusal(errno.ENOTDIR, f"mountpoint {path}: {walked} is not a directory")
    return Refusal(error.errno or errno.EIO, f"mountpoint {path}: {walked}: {error.strerror}")


def _mount(job: _Job, namespace: int, device: int, result: int) -> None:
    _enter_as_caller(job, namespace)
    directory = _walk(job.components, job.path)
    status = os.fstat(directory)
    os.fchdir(directory)
    if status.st_uid != job.uid:
        if status.st_mode & stat.S_ISVTX:
            raise Refusal(
                errno.EPERM, f"mountpoint {job.path} is sticky and not owned by user {job.uid}"
            )
        if not os.access(".", os.W_OK, effective_ids=True):
            raise Refusal(
                errno.EACCES,
                f"mountpoint {job.path} is neither owned nor writable by user {job.uid}",
            )
    _back_to_root()
    options = [
        f"fd={device}",
        f"rootmode={_DIRECTORY_ROOT_MODE:o}",
        f"user_id={job.uid}",
        f"group_id={job.gid}",
        *job.kernel_options,
    ]
    os.write(result, ABOUT_TO_MOUNT)
    syscalls.mount(job.source, ".", job.fstype, job.flags, ",".join(options))


def _unmount(job: _Job, namespace: int, only_fuse: bool = False) -> None:
    """Detach the top mount at the path: mountinfo showed the daemon it is the caller's FUSE mount.

    The mount root itself is never touched: FUSE refuses every process but its owner (real,
    effective and saved uid), and the child's real uid is root. Only the daemon and privileged
    processes can change the caller's mounts, so the mount checked is the mount removed; and
    ``UMOUNT_NOFOLLOW`` refuses a last component that is a symbolic link. With ``only_fuse``
    (undoing a mount whose caller left, when its mountinfo may be gone with it) the file system
    type is checked here instead: FUSE answers statfs with its magic without asking its server.
    """
    _enter_as_caller(job, namespace)
    parent = _walk(job.components[:-1], job.path)
    os.fchdir(parent)
    _back_to_root()
    if only_fuse and syscalls.filesystem_type(job.components[-1]) != FUSE_SUPER_MAGIC:
        raise Refusal(errno.EINVAL, f"{job.path} is not a FUSE mount")
    flags = syscalls.UMOUNT_NOFOLLOW | (syscalls.MNT_DETACH if job.lazy else 0)
    syscalls.umount2(job.components[-1], flags)


def main() -> int:
    """``python -m podwright.adapters.fuse.mount_helper FD``: serve jobs on descriptor FD."""
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        print("usage: python -m podwright.adapters.fuse.mount_helper FD", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides when the helper stops
    with socket.socket(fileno=int(sys.argv[1])) as channel:
        serve(channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
