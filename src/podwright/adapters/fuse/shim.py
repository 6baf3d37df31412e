"""The ``fusermount`` shim: fusermount's command line and protocol; the daemon does the mount.

Installed as ``fusermount`` and ``fusermount3`` in a container, it is what libfuse2/libfuse3
adapters (squashfuse, gcsfuse, s3fs, sshfs, rclone, fuse-zip…) run when they cannot mount
themselves. Like fusermount it receives a unix socket in ``$_FUSE_COMMFD``, and sends the mounted
``/dev/fuse`` descriptor over it with a one-byte message; errors go to standard error as
``<program>: <message>`` with exit status 1. ``auto_unmount`` works as in fusermount: the shim
stays alive holding the other end of ``_FUSE_COMMFD``, and when the adapter exits (the socket
closes) it asks the daemon to unmount lazily.
"""

from __future__ import annotations

import array
import errno
import os
import signal
import socket
import sys
from collections.abc import Sequence
from typing import TextIO

from podwright.adapters.fuse.client import ProxyClient, socket_path_from_env
from podwright.adapters.fuse.errors import FuseProxyError, ProxyRefusedError
from podwright.core.fuse_proxy.fusermount_cli import (
    USAGE,
    Mount,
    ShowHelp,
    ShowVersion,
    Unmount,
    UsageError,
    WatchForUnmount,
    parse_fusermount_args,
)

SHIM_VERSION = "podwright fuse-proxy shim, protocol 1"
COMMFD_ENV = "_FUSE_COMMFD"


class ShimError(Exception):
    """A failure to report the way fusermount does."""


def main(
    argv: Sequence[str], environ: dict[str, str] | None = None, stderr: TextIO | None = None
) -> int:
    """Run as fusermount with ``argv`` (``argv[0]`` is the program name); the exit status."""
    env = dict(os.environ if environ is None else environ)
    err = sys.stderr if stderr is None else stderr
    prog = os.path.basename(argv[0]) if argv else "fusermount3"
    try:
        command = parse_fusermount_args(argv[1:])
    except UsageError as error:
        print(f"{prog}: {error}\nTry '{prog} -h' for more information.", file=err)
        return 1
    if isinstance(command, ShowHelp):
        print(USAGE.format(prog=prog), end="")
        return 0
    if isinstance(command, ShowVersion):
        print(f"{prog} version: {SHIM_VERSION}")
        return 0
    client = ProxyClient(socket_path_from_env(env))
    try:
        if isinstance(command, Mount):
            _mount(client, command, env)
        elif isinstance(command, Unmount):
            client.unmount(resolve_mountpoint(command.mountpoint), command.lazy)
        else:
            _watch_for_unmount(client, command, env)
    except (ShimError, FuseProxyError) as error:
        if not command.quiet:
            print(f"{prog}: {error}", file=err)
        return 1
    return 0


def resolve_mountpoint(path: str) -> str:
    """An absolute path whose parent has no symbolic links, as fusermount resolves it.

    The last component is kept as given (the daemon refuses it if it is a symbolic link).
    """
    absolute = os.path.abspath(path)
    parent, name = os.path.split(absolute)
    if not name:
        return absolute
    return os.path.join(os.path.realpath(parent), name)


def _commfd(env: dict[str, str]) -> int:
    raw = env.get(COMMFD_ENV)
    if raw is None:
        raise ShimError(f"old style mounting not supported (${COMMFD_ENV} is not set)")
    if not raw.isdigit():
        raise ShimError(f"invalid ${COMMFD_ENV} {raw!r}: must be a file descriptor number")
    fd = int(raw)
    try:
        os.fstat(fd)
    except OSError as error:
        raise ShimError(f"${COMMFD_ENV} {fd}: {error.strerror}") from error
    return fd


def _mount(client: ProxyClient, command: Mount, env: dict[str, str]) -> None:
    commfd = _commfd(env)
    mountpoint = resolve_mountpoint(command.mountpoint)
    fuse_fd = client.mount(mountpoint, command.options)
    try:
        _send_fd(commfd, fuse_fd)
    except OSError as error:
        _unmount_quietly(client, mountpoint)
        raise ShimError(f"cannot hand the FUSE descriptor over ${COMMFD_ENV}: {error}") from error
    finally:
        os.close(fuse_fd)
    if command.auto_unmount:
        _wait_for_close(commfd)
        _unmount_quietly(client, mountpoint)


def _watch_for_unmount(client: ProxyClient, command: WatchForUnmount, env: dict[str, str]) -> None:
    commfd = _commfd(env)
    _wait_for_close(commfd)
    _unmount_quietly(client, resolve_mountpoint(command.mountpoint))


def _send_fd(commfd: int, fd: int) -> None:
    """fusermount's send_fd: one zero byte, with ``fd`` in SCM_RIGHTS."""
    channel = socket.socket(fileno=os.dup(commfd))
    try:
        rights = array.array("i", [fd]).tobytes()
        channel.sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)])
    finally:
        channel.close()


def _wait_for_close(commfd: int) -> None:
    """Block until the adapter's end of ``_FUSE_COMMFD`` is closed (it exited or unmounted).

    Interrupts meant for the adapter's process group must not end the wait early: the mount
    would then outlive its file system.
    """
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(number, signal.SIG_IGN)
    channel = socket.socket(fileno=os.dup(commfd))
    try:
        channel.settimeout(None)
        while True:
            try:
                if not channel.recv(1):
                    return
            except OSError:
                return
    finally:
        channel.close()


def _unmount_quietly(client: ProxyClient, mountpoint: str) -> None:
    """Lazily unmount what this shim mounted; already gone is fine."""
    try:
        client.unmount(mountpoint, lazy=True)
    except ProxyRefusedError as error:
        if error.errno != errno.EINVAL:
            raise
