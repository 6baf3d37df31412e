"""The Linux system calls the daemon needs and Python 3.11 does not wrap: mount, umount2, setns.

Also the peer credentials of a unix socket: SO_PEERCRED (pid, uid, gid, fixed at connect time)
and, on Linux 6.5 and later, SO_PEERPIDFD, a pidfd for the peer that cannot be confused with a
later process reusing the pid. Errors are ``OSError`` with the errno, as ``os`` raises them.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct

CLONE_NEWNS = 0x00020000
MNT_DETACH = 0x2
UMOUNT_NOFOLLOW = 0x8
SO_PEERPIDFD = 77

# The C library the interpreter already links (dlopen(NULL)); ctypes.util would start processes.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
_STATFS_SIZE = 256
"""Room for struct statfs (120 bytes on 64-bit Linux); ``f_type`` is its first field."""
_UCRED = struct.Struct("3i")


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def mount(source: str, target: str, fstype: str, flags: int, data: str) -> None:
    """mount(2)."""
    _check(
        _libc.mount(
            os.fsencode(source), os.fsencode(target), fstype.encode(), flags, data.encode()
        ),
        "mount",
    )


def umount2(target: str, flags: int) -> None:
    """umount2(2)."""
    _check(_libc.umount2(os.fsencode(target), flags), "umount2")


def setns(fd: int, nstype: int) -> None:
    """setns(2): move the calling (single-threaded) process into the namespace ``fd`` refers to."""
    _check(_libc.setns(fd, nstype), "setns")


def filesystem_type(path: str) -> int:
    """statfs(2)'s ``f_type`` (the file system's magic number) of ``path``."""
    buffer = ctypes.create_string_buffer(_STATFS_SIZE)
    _check(_libc.statfs(os.fsencode(path), buffer), "statfs")
    return ctypes.c_long.from_buffer(buffer).value


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """The (pid, uid, gid) the kernel recorded when the peer connected."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def peer_pidfd(sock: socket.socket) -> int | None:
    """A pidfd for the peer process (Linux 6.5+), or None where the kernel lacks SO_PEERPIDFD."""
    try:
        return sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError as error:
        if error.errno in (errno.ENOPROTOOPT, errno.EINVAL):
            return None
        raise
