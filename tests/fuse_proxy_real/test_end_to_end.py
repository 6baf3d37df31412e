"""Real FUSE file systems mounted through the proxy by a caller without any privilege."""

from __future__ import annotations

import zipfile

from tests.fuse_proxy_real.harness import CALLER, SYSTEM_PYTHON, Daemon, Workspace, as_caller

WAIT_FOR = """
wait_for() {  # wait_for PATH: until PATH exists (the mount is up), at most 10 s
    for _ in $(seq 100); do [ -e "$1" ] && return 0; sleep 0.1; done
    echo "timed out waiting for $1"; return 1
}
mounted() { grep -c " $1 " /proc/self/mountinfo || true; }
"""


def test_squashfuse_mounts_through_libfuse3s_fallback_to_the_shim(
    workspace: Workspace, daemon: Daemon
) -> None:
    mountpoint = workspace.owned_dir("squash")
    result = as_caller(
        workspace,
        WAIT_FOR
        + f"""
id -u
grep CapEff /proc/self/status
squashfuse -f $IMAGE {mountpoint} &
adapter=$!
wait_for {mountpoint}/hello.txt
cat {mountpoint}/hello.txt
grep " {mountpoint} " /proc/self/mountinfo
fusermount3 -u {mountpoint}; echo "unmount status $?"
wait $adapter; echo "adapter status $?"
echo "mounts left $(mounted {mountpoint})"
""",
        desktop_dev_fuse=True,
    )
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert out.startswith(f"{CALLER}\nCapEff:\t0000000000000000\n")
    assert "hello from squashfs" in out
    assert (
        f"{mountpoint} rw,nosuid,nodev,relatime - fuse.squashfuse squashfuse rw,user_id={CALLER},group_id={CALLER}"
        in out
    )
    assert "unmount status 0\nadapter status 0\nmounts left 0" in out


def test_fuse_zip_reads_and_writes_through_libfuse2s_fusermount(
    workspace: Workspace, daemon: Daemon
) -> None:
    mountpoint = workspace.owned_dir("zip")
    archive = workspace.owned_dir("archives", parent=workspace.outside) / "data.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        # fuse-zip needs Unix modes in the archive (a mode of 0 reads as an I/O error).
        entry = zipfile.ZipInfo("inside.txt", date_time=(2026, 1, 1, 0, 0, 0))
        entry.create_system, entry.external_attr = 3, 0o100644 << 16
        bundle.writestr(entry, "zipped words\n")
    archive.chmod(0o666)
    result = as_caller(
        workspace,
        WAIT_FOR
        + f"""
fuse-zip -f {archive} {mountpoint} &
adapter=$!
wait_for {mountpoint}/inside.txt
cat {mountpoint}/inside.txt
echo "written through FUSE" > {mountpoint}/new.txt
mkdir {mountpoint}/folder
cat {mountpoint}/new.txt
fusermount -u {mountpoint}; echo "unmount status $?"
wait $adapter; echo "adapter status $?"
echo "mounts left $(mounted {mountpoint})"
""",
        desktop_dev_fuse=True,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "zipped words\nwritten through FUSE\nunmount status 0\nadapter status 0\nmounts left 0"
        in result.stdout
    )
    with zipfile.ZipFile(archive) as bundle:
        assert bundle.read("new.txt") == b"written through FUSE\n"
        assert "folder/" in bundle.namelist()


GO_STYLE_ADAPTER = """
import array, os, socket, subprocess, sys
# What gcsfuse and rclone do: run fusermount with a socket in _FUSE_COMMFD, receive the mounted
# descriptor, serve the file system on it. Here the serving is squashfuse on /dev/fd/N.
mountpoint, image = sys.argv[1], sys.argv[2]
ours, theirs = socket.socketpair()
env = dict(os.environ, _FUSE_COMMFD=str(theirs.fileno()))
status = subprocess.run(
    ["fusermount3", "-o", "ro,fsname=image,subtype=squashfuse", "--", mountpoint],
    env=env, pass_fds=(theirs.fileno(),),
).returncode
if status != 0:
    sys.exit(f"fusermount3 failed with status {status}")
_, ancillary, _, _ = ours.recvmsg(1, socket.CMSG_SPACE(4))
fd = array.array("i", ancillary[0][2])[0]
os.set_inheritable(fd, True)
os.execvp("squashfuse", ["squashfuse", "-f", image, f"/dev/fd/{fd}"])
"""


def test_an_adapter_that_runs_fusermount_itself_needs_no_dev_fuse_at_all(
    workspace: Workspace, daemon: Daemon
) -> None:
    mountpoint = workspace.owned_dir("gostyle")
    adapter = workspace.script("go_style_adapter.py", GO_STYLE_ADAPTER)
    result = as_caller(
        workspace,
        WAIT_FOR
        + f"""
cat /dev/fuse 2>/dev/null && echo "the caller can open /dev/fuse"
{SYSTEM_PYTHON} -I {adapter} {mountpoint} $IMAGE &
adapter=$!
wait_for {mountpoint}/hello.txt
cat {mountpoint}/hello.txt
cmp {mountpoint}/docs/big.bin {mountpoint}/docs/big.bin && echo "big file reads"
grep " {mountpoint} " /proc/self/mountinfo
fusermount3 -u {mountpoint}; echo "unmount status $?"
wait $adapter; echo "adapter status $?"
""",
    )
    assert result.returncode == 0, result.stderr
    assert "the caller can open" not in result.stdout
    assert "hello from squashfs\nbig file reads\n" in result.stdout
    assert (
        f"{mountpoint} ro,nosuid,nodev,relatime - fuse.squashfuse image ro,user_id={CALLER}"
        in result.stdout
    )
    assert "unmount status 0\nadapter status 0" in result.stdout


def test_the_wrapper_mounts_first_and_runs_the_adapter_on_the_fd(
    workspace: Workspace, daemon: Daemon
) -> None:
    mountpoint = workspace.owned_dir("wrapped")
    result = as_caller(
        workspace,
        WAIT_FOR
        + f"""
{workspace.bin}/fusermount-wrapper -m {mountpoint} -o ro -o noexec -- sh -c 'echo "fd $PODWRIGHT_FUSE_FD: $2"; exec squashfuse -f "$1" "$2"' sh $IMAGE {mountpoint} &
wrapper=$!
wait_for {mountpoint}/hello.txt
cat {mountpoint}/hello.txt
grep " {mountpoint} " /proc/self/mountinfo
kill -TERM $wrapper
wait $wrapper; echo "wrapper status $?"
echo "mounts left $(mounted {mountpoint})"
""",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "hello from squashfs" in out
    assert "fd " in out
    assert ": /dev/fd/" in out
    assert (
        f"{mountpoint} ro,nosuid,nodev,noexec,relatime - fuse /dev/fuse ro,user_id={CALLER}" in out
    )
    assert "mounts left 0" in out


def test_the_wrapper_reports_a_command_it_cannot_run_and_unmounts(
    workspace: Workspace, daemon: Daemon
) -> None:
    mountpoint = workspace.owned_dir("wrapped-missing")
    result = as_caller(
        workspace,
        WAIT_FOR
        + f"""
{workspace.bin}/fusermount-wrapper -m {mountpoint} -- no-such-adapter {mountpoint}
echo "wrapper status $?"
echo "mounts left $(mounted {mountpoint})"
""",
    )
    assert (
        "fusermount-wrapper: cannot run no-such-adapter: No such file or directory" in result.stderr
    )
    assert "wrapper status 127\nmounts left 0" in result.stdout


def test_auto_unmount_removes_the_mount_when_the_adapter_is_killed(
    workspace: Workspace, daemon: Daemon
) -> None:
    mountpoint = workspace.owned_dir("auto")
    result = as_caller(
        workspace,
        WAIT_FOR
        + f"""
squashfuse -f -o auto_unmount $IMAGE {mountpoint} &
adapter=$!
wait_for {mountpoint}/hello.txt
echo "mounted $(mounted {mountpoint})"
kill -KILL $adapter
for _ in $(seq 100); do [ "$(mounted {mountpoint})" = 0 ] && break; sleep 0.1; done
echo "mounts left $(mounted {mountpoint})"
""",
        desktop_dev_fuse=True,
    )
    assert result.returncode == 0, result.stderr
    assert "mounted 1\nmounts left 0" in result.stdout


def test_refusals_reach_the_adapter_as_fusermount_errors(
    workspace: Workspace, daemon: Daemon
) -> None:
    elsewhere = workspace.owned_dir("not-in-the-area", parent=workspace.outside)
    result = as_caller(
        workspace,
        f"""
squashfuse -f $IMAGE {elsewhere}
echo "adapter status $?"
fusermount3 -u {elsewhere}
echo "unmount status $?"
fusermount3 -V
fusermount3 --bogus; echo "usage status $?"
""",
        desktop_dev_fuse=True,
    )
    assert (
        f"fusermount3: mountpoint '{elsewhere}' is not below an allowed prefix ({workspace.area})"
        in result.stderr
    )
    assert "adapter status 0" not in result.stdout
    assert "unmount status 1" in result.stdout
    assert "fusermount3 version: podwright fuse-proxy shim, protocol 1" in result.stdout
    assert "fusermount3: unrecognized option '--bogus'" in result.stderr
    assert "usage status 1" in result.stdout
