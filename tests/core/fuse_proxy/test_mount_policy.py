"""What the daemon agrees to: mountpoints, options, unmounts and quotas, as pure decisions."""

from __future__ import annotations

import errno

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.fuse_proxy.mount_policy import (
    MS_NOATIME,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_RDONLY,
    MountEntry,
    ProxyPolicy,
    RequestRefusedError,
    check_mount_quota,
    check_mountpoint,
    find_unmount_target,
    parse_mountinfo,
    plan_mount,
)

POLICY = ProxyPolicy(mount_prefixes=("/mnt", "/home/"))


@pytest.mark.parametrize(
    ("path", "components"),
    [
        ("/mnt/data", ("mnt", "data")),
        ("/mnt/a/b c/ü", ("mnt", "a", "b c", "ü")),
        ("/home/alice/bucket", ("home", "alice", "bucket")),
    ],
)
def test_normalized_paths_below_a_prefix_are_accepted(
    path: str, components: tuple[str, ...]
) -> None:
    assert check_mountpoint(path, POLICY.mount_prefixes) == components


@pytest.mark.parametrize(
    ("path", "code", "message"),
    [
        ("mnt/data", errno.EINVAL, "must be an absolute path"),
        ("/mnt/../etc", errno.EINVAL, "must be normalized"),
        ("/mnt/./data", errno.EINVAL, "must be normalized"),
        ("/mnt//data", errno.EINVAL, "must be normalized"),
        ("/mnt/data/", errno.EINVAL, "must be normalized"),
        ("/mnt/" + "a" * 256, errno.EINVAL, "component longer than 255 bytes"),
        ("/mnt/" + "a/" * 2100 + "a", errno.EINVAL, "longer than 4095 bytes"),
        ("/", errno.EINVAL, "is the root directory"),
        ("/mnt", errno.EPERM, "not below an allowed prefix (/mnt, /home)"),
        ("/mntx/data", errno.EPERM, "not below an allowed prefix"),
        ("/etc/passwd", errno.EPERM, "not below an allowed prefix"),
        ("/home", errno.EPERM, "not below an allowed prefix"),
    ],
)
def test_other_mountpoints_are_refused(path: str, code: int, message: str) -> None:
    with pytest.raises(
        RequestRefusedError, match=message.replace("(", r"\(").replace(")", r"\)")
    ) as refused:
        check_mountpoint(path, POLICY.mount_prefixes)
    assert refused.value.errno == code


@given(st.lists(st.sampled_from(["mnt", "..", ".", "", "x", "etc"]), min_size=1, max_size=6))
def test_an_accepted_mountpoint_is_always_strictly_inside_a_prefix(parts: list[str]) -> None:
    path = "/" + "/".join(parts)
    try:
        components = check_mountpoint(path, ("/mnt",))
    except RequestRefusedError:
        return
    assert components[0] == "mnt"
    assert len(components) >= 2
    assert not {"", ".", ".."} & set(components)


@pytest.mark.parametrize(
    ("prefixes", "message"),
    [
        ((), "at least one prefix"),
        (("/",), "would allow mounting over any directory"),
        (("mnt",), "must be an absolute path"),
        (("/mnt/../etc",), "must be normalized"),
    ],
)
def test_a_policy_needs_sound_prefixes(prefixes: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ProxyPolicy(mount_prefixes=prefixes)


def test_a_policy_needs_a_positive_mount_limit() -> None:
    with pytest.raises(ValueError, match="max_mounts_per_user must be at least 1, got 0"):
        ProxyPolicy(("/mnt",), max_mounts_per_user=0)


def test_nosuid_and_nodev_are_forced_and_ids_are_the_callers() -> None:
    plan = plan_mount([], POLICY, uid=1000, gid=100)
    assert plan.flags == MS_NOSUID | MS_NODEV
    assert (plan.source, plan.fstype) == ("/dev/fuse", "fuse")
    assert plan.data(fd=7, root_mode=0o40000) == "fd=7,rootmode=40000,user_id=1000,group_id=100"


def test_libfuse3_options_become_flags_and_kernel_options() -> None:
    options = "rw,nosuid,nodev,noatime,ro,noexec,default_permissions,max_read=131072,fsname=bucket:/data,subtype=s3fs,auto_unmount,x-gvfs-show,nonempty"
    plan = plan_mount(options.split(","), POLICY, uid=1, gid=2)
    assert plan.flags == MS_NOSUID | MS_NODEV | MS_NOATIME | MS_RDONLY | MS_NOEXEC
    assert plan.kernel_options == ("default_permissions", "max_read=131072")
    assert (plan.source, plan.fstype, plan.auto_unmount) == ("bucket:/data", "fuse.s3fs", True)


def test_later_flag_options_win_like_mount_8() -> None:
    assert plan_mount(["ro", "rw"], POLICY, 1, 1).flags & MS_RDONLY == 0
    assert plan_mount(["max_read=1", "max_read=2"], POLICY, 1, 1).kernel_options == ("max_read=2",)


def test_allow_other_needs_the_daemons_consent() -> None:
    with pytest.raises(
        RequestRefusedError, match="'allow_other' is not allowed by this FUSE proxy"
    ) as refused:
        plan_mount(["allow_other"], POLICY, 1, 1)
    assert refused.value.errno == errno.EPERM
    permissive = ProxyPolicy(("/mnt",), allow_other=True)
    assert plan_mount(["allow_root", "allow_other"], permissive, 1, 1).kernel_options == (
        "allow_other",
    )


@pytest.mark.parametrize(
    ("option", "code", "message"),
    [
        ("suid", errno.EPERM, "'suid' is not allowed: the FUSE proxy always mounts nosuid,nodev"),
        ("dev", errno.EPERM, "'dev' is not allowed"),
        ("user_id=0", errno.EPERM, "'user_id' is set by the FUSE proxy"),
        ("group_id=0", errno.EPERM, "'group_id' is set by the FUSE proxy"),
        ("fd=3", errno.EPERM, "'fd' is set by the FUSE proxy"),
        ("rootmode=40000", errno.EPERM, "'rootmode' is set"),
        ("blksize=4096", errno.EINVAL, "'blksize=4096' is not allowed; allowed: async, atime"),
        ("context=system_u", errno.EINVAL, "not allowed"),
        ("ro=1", errno.EINVAL, "'ro=1' is not allowed"),
        ("max_read=0", errno.EINVAL, "must be a whole number from 1"),
        ("max_read=-5", errno.EINVAL, "must be a whole number from 1"),
        ("max_read=99999999999", errno.EINVAL, "must be a whole number from 1"),
        ("fsname=a b", errno.EINVAL, "printable characters without spaces"),
        ("fsname=", errno.EINVAL, "printable characters"),
        ("subtype=s3/fs", errno.EINVAL, "1 to 64 letters, digits"),
    ],
)
def test_options_off_the_allowlist_are_refused_by_name(
    option: str, code: int, message: str
) -> None:
    with pytest.raises(RequestRefusedError, match=message) as refused:
        plan_mount(["rw", option], POLICY, 1, 1)
    assert refused.value.errno == code


@given(
    st.lists(
        st.sampled_from(
            ["ro", "rw", "nosuid", "nodev", "exec", "noexec", "sync", "relatime", "dirsync"]
        ),
        max_size=8,
    )
)
def test_no_option_list_ever_drops_nosuid_or_nodev(options: list[str]) -> None:
    flags = plan_mount(options, POLICY, 1, 1).flags
    assert flags & MS_NOSUID
    assert flags & MS_NODEV


MOUNTINFO = r"""22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/root rw
36 22 0:34 / /mnt/ext rw,relatime shared:5 - tmpfs tmpfs rw,size=1024k
41 22 0:40 / /mnt/mine rw,nosuid,nodev,relatime - fuse.squashfuse squashfuse rw,user_id=1000,group_id=1000
42 22 0:41 / /mnt/theirs rw,nosuid,nodev,relatime - fuse sshfs rw,user_id=2000,group_id=2000
43 41 0:42 / /mnt/mine/with\040space rw,nosuid,nodev,relatime master:3 - fuse.rclone remote:x rw,user_id=1000,group_id=1000,allow_other
44 36 0:43 / /mnt/ext rw,nosuid,nodev - fuse /dev/fuse rw,user_id=1000,group_id=1000
45 22 0:44 / /mnt/blk rw - fuseblk /dev/sda1 rw,user_id=1000,group_id=1000
"""


def test_mountinfo_is_read_with_its_escapes_and_optional_fields() -> None:
    entries = parse_mountinfo(MOUNTINFO)
    assert [entry.mount_point for entry in entries][3:5] == ["/mnt/theirs", "/mnt/mine/with space"]
    rclone = entries[4]
    assert rclone == MountEntry(
        43,
        41,
        (0, 42),
        "/mnt/mine/with space",
        "fuse.rclone",
        "remote:x",
        ("rw", "user_id=1000", "group_id=1000", "allow_other"),
    )
    assert (rclone.is_fuse, rclone.user_id) == (True, 1000)
    assert (entries[1].is_fuse, entries[1].user_id) == (False, None)
    assert entries[6].is_fuse is False


def test_malformed_mountinfo_names_its_line() -> None:
    with pytest.raises(ValueError, match="mountinfo line 2 is malformed"):
        parse_mountinfo("22 1 0:21 / / rw - ext4 /dev/root rw\n22 1 nonsense\n")


@pytest.mark.parametrize(
    ("path", "uid", "code", "message"),
    [
        ("/mnt/nowhere", 1000, errno.EINVAL, "/mnt/nowhere: not mounted"),
        ("/", 1000, errno.EPERM, "not a FUSE mount \\(ext4\\)"),
        (
            "/mnt/theirs",
            1000,
            errno.EPERM,
            "mounted by user 2000, not by user 1000; only the owner",
        ),
        ("/mnt/blk", 1000, errno.EPERM, "not a FUSE mount \\(fuseblk\\)"),
    ],
)
def test_only_the_owners_fuse_mounts_can_be_unmounted(
    path: str, uid: int, code: int, message: str
) -> None:
    with pytest.raises(RequestRefusedError, match=message) as refused:
        find_unmount_target(parse_mountinfo(MOUNTINFO), path, uid)
    assert refused.value.errno == code


def test_the_top_of_a_mount_stack_is_what_an_unmount_removes() -> None:
    entries = parse_mountinfo(MOUNTINFO)
    assert find_unmount_target(entries, "/mnt/ext", 1000).mount_id == 44
    assert find_unmount_target(entries, "/mnt/mine", 1000).mount_id == 41


def test_a_user_at_the_mount_limit_is_refused() -> None:
    entries = parse_mountinfo(MOUNTINFO)
    check_mount_quota(entries, 1000, ProxyPolicy(("/mnt",), max_mounts_per_user=4))
    with pytest.raises(
        RequestRefusedError,
        match="too many FUSE file systems mounted by user 1000 \\(3\\); this FUSE proxy allows 3",
    ) as refused:
        check_mount_quota(entries, 1000, ProxyPolicy(("/mnt",), max_mounts_per_user=3))
    assert refused.value.errno == errno.EUSERS
