"""fusermount's command line, parsed the way fusermount (2 and 3) parses it.

FUSE adapters run ``fusermount`` or ``fusermount3`` with a fixed vocabulary (libfuse2 and
libfuse3 both): ``-o OPTS -- MOUNTPOINT`` to mount, ``-u -q -z -- MOUNTPOINT`` to unmount,
``--auto-unmount -- MOUNTPOINT`` to watch a mount made by root. The shim must accept exactly
that, including getopt's clustered (``-uqz``) and attached (``-oro``) forms and long names, so
unmodified adapters work. Several ``-o`` are all kept (fusermount itself keeps only the last,
which silently drops options). Pure and standard-library only: it runs inside the shim.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

USAGE = """\
usage: {prog} [options] mountpoint

Mounts and unmounts FUSE file systems through podwright's FUSE proxy daemon; a drop-in
replacement for fusermount, for containers without CAP_SYS_ADMIN or /dev/fuse.

Options:
 -h, --help             print this help and exit
 -V, --version          print the version and exit
 -o OPTS, --options OPTS
                        mount options (comma-separated; may be repeated, all are kept)
 -u, --unmount          unmount
 -q, --quiet            quiet: no error messages
 -z, --lazy             lazy unmount (with -u)
 --auto-unmount         unmount the mount when the file system process exits
"""

_LONG_FLAGS = {
    "--help": "h",
    "--version": "V",
    "--unmount": "u",
    "--quiet": "q",
    "--lazy": "z",
    "--auto-unmount": "U",
}
_SHORT_FLAGS = frozenset("hVuqz")


class UsageError(ValueError):
    """A command line fusermount would refuse; the message is fusermount-like."""


@dataclasses.dataclass(frozen=True)
class Mount:
    """Mount at ``mountpoint`` with ``options``; hand the descriptor over ``_FUSE_COMMFD``."""

    mountpoint: str
    options: tuple[str, ...]
    auto_unmount: bool
    quiet: bool


@dataclasses.dataclass(frozen=True)
class Unmount:
    """Unmount ``mountpoint`` (``lazy``: detach now, clean up when no longer busy)."""

    mountpoint: str
    lazy: bool
    quiet: bool


@dataclasses.dataclass(frozen=True)
class WatchForUnmount:
    """``--auto-unmount`` without mount options: wait for the file system to exit, unmount."""

    mountpoint: str
    quiet: bool


@dataclasses.dataclass(frozen=True)
class ShowHelp:
    """``-h``: print :data:`USAGE`."""


@dataclasses.dataclass(frozen=True)
class ShowVersion:
    """``-V``: print the version."""


Command = Mount | Unmount | WatchForUnmount | ShowHelp | ShowVersion


def parse_fusermount_args(args: Sequence[str]) -> Command:
    """The command that ``args`` (without the program name) asks for."""
    flags: set[str] = set()
    options: list[str] = []
    positional: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            positional.extend(args[index:])
            break
        if arg.startswith("--"):
            name, has_value, value = arg.partition("=")
            if name == "--options":
                if not has_value:
                    if index >= len(args):
                        raise UsageError("option '--options' requires an argument")
                    value = args[index]
                    index += 1
                options.append(value)
            elif name in _LONG_FLAGS and not has_value:
                flags.add(_LONG_FLAGS[name])
            else:
                raise UsageError(f"unrecognized option '{arg}'")
        elif arg.startswith("-") and arg != "-":
            index = _parse_short_cluster(arg, args, index, flags, options)
        else:
            positional.append(arg)
    if "h" in flags:
        return ShowHelp()
    if "V" in flags:
        return ShowVersion()
    if not positional:
        raise UsageError("missing mountpoint argument")
    if len(positional) > 1:
        raise UsageError(f"extra arguments after the mountpoint: {' '.join(positional[1:])}")
    mountpoint = positional[0]
    quiet = "q" in flags
    if "u" in flags:
        if options or "U" in flags:
            raise UsageError("-u cannot be combined with -o or --auto-unmount")
        return Unmount(mountpoint, lazy="z" in flags, quiet=quiet)
    if "z" in flags:
        raise UsageError("-z can only be used with -u")
    split = tuple(option for group in options for option in group.split(",") if option)
    if "U" in flags and not options:
        return WatchForUnmount(mountpoint, quiet)
    auto_unmount = "U" in flags or "auto_unmount" in split
    return Mount(mountpoint, split, auto_unmount=auto_unmount, quiet=quiet)


def _parse_short_cluster(
    arg: str, args: Sequence[str], index: int, flags: set[str], options: list[str]
) -> int:
    """Parse ``-uqz`` or ``-oOPTS`` or ``-o OPTS``; return the index of the next argument."""
    position = 1
    while position < len(arg):
        letter = arg[position]
        position += 1
        if letter == "o":
            value = arg[position:]
            if not value:
                if index >= len(args):
                    raise UsageError("option requires an argument -- 'o'")
                value = args[index]
                index += 1
            options.append(value)
            return index
        if letter not in _SHORT_FLAGS:
            raise UsageError(f"invalid option -- '{letter}'")
        flags.add(letter)
    return index
