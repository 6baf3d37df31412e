"""fusermount's command line as libfuse2, libfuse3 and people write it."""

from __future__ import annotations

import pytest

from podwright.core.fuse_proxy.fusermount_cli import (
    Mount,
    ShowHelp,
    ShowVersion,
    Unmount,
    UsageError,
    WatchForUnmount,
    parse_fusermount_args,
)


@pytest.mark.parametrize(
    ("args", "command"),
    [
        # libfuse3's fuse_mount_fusermount
        (
            ["-o", "rw,nosuid,nodev,subtype=squashfuse", "--", "/mnt/x"],
            Mount("/mnt/x", ("rw", "nosuid", "nodev", "subtype=squashfuse"), False, False),
        ),
        # libfuse's unmount
        (["-u", "-q", "-z", "--", "/mnt/x"], Unmount("/mnt/x", lazy=True, quiet=True)),
        (["-uqz", "/mnt/x"], Unmount("/mnt/x", lazy=True, quiet=True)),
        (["--unmount", "--lazy", "/mnt/x"], Unmount("/mnt/x", lazy=True, quiet=False)),
        (["-u", "/mnt/x"], Unmount("/mnt/x", lazy=False, quiet=False)),
        # attached and long forms of -o; all -o are kept
        (["-oro", "-o", "allow_other", "/m"], Mount("/m", ("ro", "allow_other"), False, False)),
        (
            ["--options=ro", "--options", "noexec", "/m"],
            Mount("/m", ("ro", "noexec"), False, False),
        ),
        (["-qo", "ro,,", "/m"], Mount("/m", ("ro",), False, True)),
        # auto_unmount, in -o or as libfuse3's setup_auto_unmount asks for it
        (["-o", "ro,auto_unmount", "/m"], Mount("/m", ("ro", "auto_unmount"), True, False)),
        (["--auto-unmount", "-o", "ro", "/m"], Mount("/m", ("ro",), True, False)),
        (["--auto-unmount", "--", "/m"], WatchForUnmount("/m", quiet=False)),
        # a mountpoint that looks like an option, after --
        (["--", "-weird"], Mount("-weird", (), False, False)),
        (["-h"], ShowHelp()),
        (["--help", "/m"], ShowHelp()),
        (["-V"], ShowVersion()),
        (["--version"], ShowVersion()),
    ],
)
def test_what_adapters_run_is_understood(args: list[str], command: object) -> None:
    assert parse_fusermount_args(args) == command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "missing mountpoint argument"),
        (["-o"], "option requires an argument -- 'o'"),
        (["--options"], "option '--options' requires an argument"),
        (["-x", "/m"], "invalid option -- 'x'"),
        (["--frobnicate", "/m"], "unrecognized option '--frobnicate'"),
        (["--lazy=yes", "/m"], "unrecognized option '--lazy=yes'"),
        (["/a", "/b"], "extra arguments after the mountpoint: /b"),
        (["-u", "-o", "ro", "/m"], "-u cannot be combined with -o or --auto-unmount"),
        (["-z", "/m"], "-z can only be used with -u"),
    ],
)
def test_bad_command_lines_are_refused_like_fusermount(args: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_fusermount_args(args)
