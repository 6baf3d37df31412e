"""What the FUSE proxy daemon agrees to do for a caller: pure decisions over plain data.

The daemon is root on the node and its callers are not, so every request is judged here before
any system call is made: the mountpoint must be a normalized absolute path strictly below one of
the configured prefixes (symbolic links are refused later, while the path is walked in the
caller's mount namespace); mount options must be on an allowlist, ``nosuid,nodev`` are forced,
``suid``/``dev`` are refused rather than ignored, ``allow_other`` needs the daemon's consent, and
``user_id``/``group_id`` are always the caller's, from the kernel. An unmount must name a FUSE
mount, in the caller's namespace, mounted for the caller's uid. Every refusal is a
:class:`RequestRefusedError` with the errno fusermount would report and a message naming the value
and what is allowed.
"""

from __future__ import annotations

import dataclasses
import errno
import re
from collections.abc import Iterable, Sequence

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_SYNCHRONOUS = 0x10
MS_DIRSYNC = 0x80
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_RELATIME = 0x200000
MS_STRICTATIME = 0x1000000

FORCED_FLAGS = MS_NOSUID | MS_NODEV
"""Set on every proxied mount, whatever the caller asks: no set-uid binaries, no device nodes."""

_FLAG_OPTIONS = {
    "ro": (MS_RDONLY, True),
    "rw": (MS_RDONLY, False),
    "noexec": (MS_NOEXEC, True),
    "exec": (MS_NOEXEC, False),
    "sync": (MS_SYNCHRONOUS, True),
    "async": (MS_SYNCHRONOUS, False),
    "dirsync": (MS_DIRSYNC, True),
    "noatime": (MS_NOATIME, True),
    "atime": (MS_NOATIME, False),
    "nodiratime": (MS_NODIRATIME, True),
    "diratime": (MS_NODIRATIME, False),
    "relatime": (MS_RELATIME, True),
    "norelatime": (MS_RELATIME, False),
    "strictatime": (MS_STRICTATIME, True),
    "nostrictatime": (MS_STRICTATIME, False),
    "nosuid": (MS_NOSUID, True),
    "nodev": (MS_NODEV, True),
}
_USERSPACE_OPTIONS = frozenset({"auto_unmount", "nonempty"})
"""Options for libfuse or fusermount itself, never for the kernel; accepted and not passed on."""
_SET_BY_PROXY = frozenset({"fd", "rootmode", "user_id", "group_id"})
_NAME_PATTERN = re.compile(r"[^\s,\\\x00-\x1f\x7f]{1,256}\Z")
_NAME_RULE = "1 to 256 printable characters without spaces, commas or backslashes"
_SUBTYPE_PATTERN = re.compile(r"[A-Za-z0-9_.+-]{1,64}\Z")
_SUBTYPE_RULE = "1 to 64 letters, digits or any of _.+-"
_MAX_READ_LIMIT = 2**32 - 1
MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 4095

ALLOWED_OPTIONS = (
    *sorted(_FLAG_OPTIONS),
    *("allow_other", "allow_root", "default_permissions", "max_read=N"),
    *("fsname=NAME", "subtype=NAME"),
    *sorted(_USERSPACE_OPTIONS),
    "x-*",
)


class RequestRefusedError(Exception):
    """The daemon will not do what was asked; ``errno`` is what fusermount would report."""

    def __init__(self, error_number: int, message: str) -> None:
        super().__init__(message)
        self.errno = error_number
        self.message = message


DEFAULT_MOUNT_PREFIXES = ("/mnt", "/data", "/home", "/tmp", "/workspace")
"""Where mounts may go, unless the daemon is told otherwise."""


@dataclasses.dataclass(frozen=True)
class ProxyPolicy:
    """The daemon's rules: where mounts may go, whether ``allow_other`` is allowed, how many."""

    mount_prefixes: tuple[str, ...]
    allow_other: bool = False
    max_mounts_per_user: int = 1000

    def __post_init__(self) -> None:
        if not self.mount_prefixes:
            raise ValueError("mount_prefixes: at least one prefix is needed")
        trimmed = tuple(prefix.rstrip("/") or "/" for prefix in self.mount_prefixes)
        object.__setattr__(self, "mount_prefixes", trimmed)
        for prefix in self.mount_prefixes:
            if prefix == "/":
                raise ValueError("mount prefix '/' would allow mounting over any directory")
            problem = _path_problem(prefix)
            if problem is not None:
                raise ValueError(f"mount prefix {prefix!r}: {problem}")
        if self.max_mounts_per_user < 1:
            raise ValueError(
                f"max_mounts_per_user must be at least 1, got {self.max_mounts_per_user}"
            )


@dataclasses.dataclass(frozen=True)
class MountPlan:
    """How to call mount(2) for one request, but for the descriptor and root mode."""

    source: str
    fstype: str
    flags: int
    kernel_options: tuple[str, ...]
    uid: int
    gid: int
    auto_unmount: bool

    def data(self, fd: int, root_mode: int) -> str:
        """The mount data string: the descriptor, the root's file type, the caller's ids."""
        base = [
            f"fd={fd}",
            f"rootmode={root_mode:o}",
            f"user_id={self.uid}",
            f"group_id={self.gid}",
        ]
        return ",".join(base + list(self.kernel_options))


def check_mountpoint(path: str, prefixes: Sequence[str]) -> tuple[str, ...]:
    """The components of ``path``, a normalized absolute path strictly below one of ``prefixes``.

    ``prefixes`` are a :class:`ProxyPolicy`'s: normalized, without a trailing slash.
    """
    problem = _path_problem(path)
    if problem is not None:
        raise RequestRefusedError(errno.EINVAL, f"mountpoint {path!r}: {problem}")
    if not any(path.startswith(prefix + "/") for prefix in prefixes):
        raise RequestRefusedError(
            errno.EPERM,
            f"mountpoint {path!r} is not below an allowed prefix "
            f"({', '.join(prefixes)}); the proxy mounts only there",
        )
    return tuple(path.split("/")[1:])


def _path_problem(path: str) -> str | None:
    if not path.startswith("/"):
        return "must be an absolute path"
    encoded = path.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    if "\0" in path:
        return "contains a NUL character"
    if path == "/":
        return "is the root directory"
    for component in path.split("/")[1:]:
        if component in ("", ".", ".."):
            return "must be normalized (no empty, '.' or '..' components, no trailing '/')"
        if len(component.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES:
            return f"has a component longer than {MAX_COMPONENT_BYTES} bytes"
    return None


def plan_mount(options: Iterable[str], policy: ProxyPolicy, uid: int, gid: int) -> MountPlan:
    """The mount(2) call for fusermount ``-o`` options, or the first option that is refused."""
    flags = FORCED_FLAGS
    kernel: list[str] = []
    fsname: str | None = None
    subtype: str | None = None
    auto_unmount = False
    for option in options:
        name, has_value, value = option.partition("=")
        if name in _FLAG_OPTIONS and not has_value:
            flag, enable = _FLAG_OPTIONS[name]
            flags = flags | flag if enable else flags & ~flag
        elif name in ("suid", "dev") and not has_value:
            raise RequestRefusedError(
                errno.EPERM,
                f"mount option '{name}' is not allowed: the FUSE proxy always mounts nosuid,nodev",
            )
        elif name in ("allow_other", "allow_root") and not has_value:
            if not policy.allow_other:
                raise RequestRefusedError(
                    errno.EPERM,
                    f"mount option '{name}' is not allowed by this FUSE proxy "
                    "(start the daemon with --allow-other to permit it)",
                )
            _append_once(kernel, "allow_other")
        elif name == "default_permissions" and not has_value:
            _append_once(kernel, name)
        elif name == "max_read" and has_value:
            kernel = [item for item in kernel if not item.startswith("max_read=")]
            kernel.append(f"max_read={_max_read(value)}")
        elif name == "fsname" and has_value:
            fsname = _checked_name(option, value, _NAME_PATTERN, _NAME_RULE)
        elif name == "subtype" and has_value:
            subtype = _checked_name(option, value, _SUBTYPE_PATTERN, _SUBTYPE_RULE)
        elif name == "auto_unmount" and not has_value:
            auto_unmount = True
        elif (name in _USERSPACE_OPTIONS and not has_value) or name.startswith("x-"):
            continue
        elif name in _SET_BY_PROXY:
            raise RequestRefusedError(
                errno.EPERM,
                f"mount option '{name}' is set by the FUSE proxy (the caller's own ids and "
                "descriptor) and cannot be given",
            )
        else:
            raise RequestRefusedError(
                errno.EINVAL,
                f"mount option {option!r} is not allowed; allowed: {', '.join(ALLOWED_OPTIONS)}",
            )
    flags |= FORCED_FLAGS
    source = fsname or subtype or "/dev/fuse"
    fstype = f"fuse.{subtype}" if subtype else "fuse"
    return MountPlan(source, fstype, flags, tuple(kernel), uid, gid, auto_unmount)


def _append_once(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


def _max_read(value: str) -> int:
    if not value.isdigit() or not 0 < int(value) <= _MAX_READ_LIMIT:
        raise RequestRefusedError(
            errno.EINVAL, f"mount option 'max_read={value}': must be a whole number from 1"
        )
    return int(value)


def _checked_name(option: str, value: str, pattern: re.Pattern[str], rule: str) -> str:
    if not pattern.match(value):
        raise RequestRefusedError(
            errno.EINVAL, f"mount option {option!r}: the value must be {rule}"
        )
    return value


@dataclasses.dataclass(frozen=True)
class MountEntry:
    """One line of ``/proc/<pid>/mountinfo``."""

    mount_id: int
    parent_id: int
    device: tuple[int, int]
    mount_point: str
    fstype: str
    source: str
    super_options: tuple[str, ...]

    @property
    def is_fuse(self) -> bool:
        """A FUSE file system mount (``fuse`` or ``fuse.<subtype>``; not fuseblk or fusectl)."""
        return self.fstype == "fuse" or self.fstype.startswith("fuse.")

    @property
    def user_id(self) -> int | None:
        """The ``user_id`` a FUSE mount was made for, from its super-block options."""
        for option in self.super_options:
            name, _, value = option.partition("=")
            if name == "user_id" and value.isdigit():
                return int(value)
        return None


_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    raw = _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)
    return raw.encode("latin-1", "surrogateescape").decode("utf-8", "surrogateescape")


def parse_mountinfo(text: str) -> list[MountEntry]:
    """The entries of a mountinfo file (proc(5)), in the kernel's order; bad lines raise."""
    entries: list[MountEntry] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line:
            continue
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            major, minor = fields[2].split(":")
            entries.append(
                MountEntry(
                    mount_id=int(fields[0]),
                    parent_id=int(fields[1]),
                    device=(int(major), int(minor)),
                    mount_point=_unescape(fields[4]),
                    fstype=_unescape(fields[separator + 1]),
                    source=_unescape(fields[separator + 2]),
                    super_options=tuple(_unescape(fields[separator + 3]).split(",")),
                )
            )
        except (ValueError, IndexError) as error:
            raise ValueError(f"mountinfo line {number} is malformed: {line!r}") from error
    return entries


def find_unmount_target(entries: Sequence[MountEntry], mountpoint: str, uid: int) -> MountEntry:
    """The mount an unmount of ``mountpoint`` by ``uid`` would remove, if the caller may."""
    stacked = [entry for entry in entries if entry.mount_point == mountpoint]
    if not stacked:
        raise RequestRefusedError(errno.EINVAL, f"{mountpoint}: not mounted")
    top = stacked[-1]
    if not top.is_fuse:
        raise RequestRefusedError(
            errno.EPERM,
            f"{mountpoint}: not a FUSE mount ({top.fstype}); the proxy unmounts only FUSE mounts",
        )
    if top.user_id != uid:
        raise RequestRefusedError(
            errno.EPERM,
            f"{mountpoint}: mounted by user {top.user_id}, not by user {uid}; "
            "only the owner may unmount it",
        )
    return top


def count_user_mounts(entries: Iterable[MountEntry], uid: int) -> int:
    """How many FUSE mounts in a namespace were made for ``uid``."""
    return sum(1 for entry in entries if entry.is_fuse and entry.user_id == uid)


def check_mount_quota(entries: Iterable[MountEntry], uid: int, policy: ProxyPolicy) -> None:
    """Refuse a new mount when ``uid`` already holds the daemon's maximum in this namespace."""
    count = count_user_mounts(entries, uid)
    if count >= policy.max_mounts_per_user:
        raise RequestRefusedError(
            errno.EUSERS,
            f"too many FUSE file systems mounted by user {uid} ({count}); this FUSE proxy "
            f"allows {policy.max_mounts_per_user} (--max-mounts-per-user)",
        )
