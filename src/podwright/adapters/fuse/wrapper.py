"""``fusermount-wrapper``: mount through the daemon first, then run an adapter on the mounted fd.

Some adapters open ``/dev/fuse`` and call mount(2) themselves (blobfuse2, and any libfuse
program when it can open the device) and only fall back to fusermount when mount(2) fails — but
in an unprivileged container opening ``/dev/fuse`` already fails. libfuse3 (3.3 and later)
accepts ``/dev/fd/N`` as the mountpoint of an already-mounted descriptor, so the wrapper asks the
daemon for the mount, passes the descriptor to the command as ``/dev/fd/N`` (every argument equal
to the mountpoint is replaced, and ``$PODWRIGHT_FUSE_FD`` holds ``N``), waits for the command,
forwards SIGINT/SIGTERM/SIGHUP to it, unmounts when it exits, and exits with its status.

Usage: ``fusermount-wrapper -m MOUNTPOINT [-o OPTS]... [--socket PATH] -- CMD [ARGS...]``
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TextIO

from podwright.adapters.fuse.client import ProxyClient, socket_path_from_env
from podwright.adapters.fuse.errors import FuseProxyError
from podwright.adapters.fuse.shim import resolve_mountpoint

FD_ENV = "PODWRIGHT_FUSE_FD"
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_CANNOT_RUN = 127


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} -m MOUNTPOINT [-o OPTS]... [--socket PATH] -- CMD [ARGS...]",
        description="Mount a FUSE file system through podwright's FUSE proxy and run CMD on the "
        "mounted descriptor (/dev/fd/N replaces every argument equal to MOUNTPOINT).",
    )
    parser.add_argument("-m", "--mountpoint", required=True, help="where to mount")
    parser.add_argument(
        "-o",
        "--options",
        action="append",
        default=[],
        metavar="OPTS",
        help="mount options, comma-separated; may be repeated and all are kept",
    )
    parser.add_argument(
        "--socket", help="the daemon's socket (default: $PODWRIGHT_FUSE_PROXY_SOCKET)"
    )
    return parser


def main(argv: Sequence[str], stderr: TextIO | None = None) -> int:
    """Run the wrapper with ``argv`` (``argv[0]`` is the program name); the exit status."""
    err = sys.stderr if stderr is None else stderr
    prog = os.path.basename(argv[0]) if argv else "fusermount-wrapper"
    args = list(argv[1:])
    parser = _parser(prog)
    if "--" not in args:
        if any(arg in ("-h", "--help") for arg in args):
            parser.print_help()
            return 0
        print(f"{prog}: error: the command to run must follow '--'", file=err)
        return 2
    split = args.index("--")
    options = parser.parse_args(args[:split])
    command = args[split + 1 :]
    if not command:
        print(f"{prog}: error: no command after '--'", file=err)
        return 2
    client = ProxyClient(options.socket or socket_path_from_env(dict(os.environ)))
    mountpoint = resolve_mountpoint(options.mountpoint)
    mount_options = tuple(item for group in options.options for item in group.split(",") if item)
    try:
        fuse_fd = client.mount(mountpoint, mount_options)
    except FuseProxyError as error:
        print(f"{prog}: {error}", file=err)
        return 1
    try:
        status = _run_on_fd(
            prog, command, given=options.mountpoint, mountpoint=mountpoint, fuse_fd=fuse_fd, err=err
        )
    finally:
        with contextlib.suppress(FuseProxyError):
            client.unmount(mountpoint, lazy=True)
    return status


def _run_on_fd(
    prog: str, command: list[str], *, given: str, mountpoint: str, fuse_fd: int, err: TextIO
) -> int:
    device = f"/dev/fd/{fuse_fd}"
    argv = [device if arg in (given, mountpoint) else arg for arg in command]
    env = dict(os.environ, **{FD_ENV: str(fuse_fd)})
    try:
        child = subprocess.Popen(argv, pass_fds=(fuse_fd,), env=env)
    except OSError as error:
        print(f"{prog}: cannot run {command[0]}: {error.strerror or error}", file=err)
        return _CANNOT_RUN
    finally:
        os.close(fuse_fd)

    def forward(number: int, _frame: FrameType | None) -> None:
        child.send_signal(number)

    previous = {number: signal.signal(number, forward) for number in _FORWARDED}
    try:
        status = child.wait()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    return status if status >= 0 else 128 - status
