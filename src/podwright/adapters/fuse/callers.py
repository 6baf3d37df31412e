"""Who is asking: the caller's identity from the kernel, never from the message.

The uid, gid and pid come from SO_PEERCRED; the mount namespace is opened from
``/proc/<pid>/ns/mnt`` while a pidfd pins the process (SO_PEERPIDFD where the kernel has it, so a
pid reused after the caller died cannot be mistaken for it). A namespace descriptor the caller
sent is only checked against that namespace, never used. The daemon needs the node's pid
namespace (``hostPID``) to see its callers; a peer it cannot see is refused with that reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import select
import socket

from podwright.adapters.fuse import syscalls
from podwright.core.fuse_proxy.mount_policy import MountEntry, RequestRefusedError, parse_mountinfo


@dataclasses.dataclass
class Caller:
    """A connected caller: its ids, supplementary groups, and descriptors the daemon must close."""

    pid: int
    uid: int
    gid: int
    groups: tuple[int, ...]
    namespace_fd: int
    pidfd: int
    proc_root: str

    def mountinfo(self) -> list[MountEntry]:
        """The mounts of the caller's mount namespace, as the caller sees them."""
        try:
            with open(
                f"{self.proc_root}/{self.pid}/mountinfo", encoding="utf-8", errors="surrogateescape"
            ) as file:
                text = file.read()
        except OSError as error:
            raise RequestRefusedError(
                errno.ESRCH, f"cannot read the caller's mounts: {error.strerror}"
            ) from error
        self.check_alive()
        return parse_mountinfo(text)

    def check_alive(self) -> None:
        """Refuse when the caller exited: its pid may already name another process."""
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        if poller.poll(0):
            raise RequestRefusedError(errno.ESRCH, f"the caller (pid {self.pid}) exited")

    def describe(self) -> str:
        return f"pid={self.pid} uid={self.uid} gid={self.gid}"

    def close(self) -> None:
        for fd in (self.namespace_fd, self.pidfd):
            with contextlib.suppress(OSError):
                os.close(fd)


def identify(sock: socket.socket, proc_root: str, sent_namespace_fd: int | None) -> Caller:
    """The caller on ``sock``, with its mount namespace opened; checks a namespace fd it sent."""
    pid, uid, gid = syscalls.peer_credentials(sock)
    if pid <= 0:
        raise RequestRefusedError(
            errno.EPERM,
            "the caller's process is not visible from the daemon's pid namespace "
            "(run the daemon with hostPID)",
        )
    pidfd = syscalls.peer_pidfd(sock)
    if pidfd is None:
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as error:
            raise RequestRefusedError(errno.ESRCH, f"the caller (pid {pid}) is gone") from error
    else:
        os.set_inheritable(pidfd, False)
    namespace_fd = -1
    try:
        try:
            namespace_fd = os.open(f"{proc_root}/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            groups = _supplementary_groups(proc_root, pid)
        except OSError as error:
            raise RequestRefusedError(
                errno.ESRCH,
                f"cannot open the caller's (pid {pid}) mount namespace: {error.strerror}",
            ) from error
        caller = Caller(pid, uid, gid, groups, namespace_fd, pidfd, proc_root)
        caller.check_alive()
        if sent_namespace_fd is not None:
            _check_sent_namespace(caller, sent_namespace_fd)
        return caller
    except BaseException:
        for fd in (namespace_fd, pidfd):
            if fd >= 0:
                os.close(fd)
        raise


def _check_sent_namespace(caller: Caller, sent: int) -> None:
    ours = os.fstat(caller.namespace_fd)
    theirs = os.fstat(sent)
    if (ours.st_dev, ours.st_ino) != (theirs.st_dev, theirs.st_ino):
        raise RequestRefusedError(
            errno.EPERM,
            "the namespace descriptor sent with the request is not the caller's mount namespace",
        )


def _supplementary_groups(proc_root: str, pid: int) -> tuple[int, ...]:
    with open(f"{proc_root}/{pid}/status", encoding="ascii", errors="replace") as file:
        for line in file:
            if line.startswith("Groups:"):
                return tuple(int(value) for value in line.split()[1:])
    return ()
