"""One caller cannot starve the others: a uid holding hundreds of connections (reconnecting as
they are dropped) is told to retry later beyond its limit, while another uid mounts and pings."""

from __future__ import annotations

from pathlib import Path

from tests.fuse_proxy_real.harness import (
    CALLER,
    OTHER_CALLER,
    SYSTEM_PYTHON,
    Daemon,
    Workspace,
    client_call,
)

FLOOD = """
import collections, json, os, selectors, socket, sys, time
sys.path.insert(0, os.environ["BUNDLE"])
from podwright.core.fuse_proxy.protocol import FrameDecoder, decode_reply

notes = sys.argv[1]
path = os.environ["PODWRIGHT_FUSE_PROXY_SOCKET"]
selector = selectors.DefaultSelector()
answers = collections.Counter()
connections = queue_full = 0
started = time.monotonic()
give_up = started + 60
while not os.path.exists(notes + "/stop") and time.monotonic() < give_up:
    while len(selector.get_map()) < 300:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(path)
        except BlockingIOError:  # the daemon's queue of new connections is full for now
            sock.close()
            queue_full += 1
            break
        connections += 1
        selector.register(sock, selectors.EVENT_READ)
    # Flooding: longer than the daemon's request timeout, so the held ones are recycled too.
    if time.monotonic() - started > 1.5 and not os.path.exists(notes + "/flooding"):
        open(notes + "/flooding", "w").close()
    for key, _ in selector.select(0.05):
        try:
            data = key.fileobj.recv(4096)
        except OSError:
            data = b""
        frames = FrameDecoder().feed(data) if data else []
        answers[decode_reply(frames[0]).message if frames else "(closed)"] += 1
        selector.unregister(key.fileobj)
        key.fileobj.close()  # and reconnect in the next round
# Written whole, then renamed: the victim waits for the name and must never read half a file.
with open(notes + "/flood.json.partial", "w") as file:
    json.dump({"connections": connections, "queue_full": queue_full, "answers": answers}, file)
os.replace(notes + "/flood.json.partial", notes + "/flood.json")
"""

VICTIM = """
import subprocess, time
notes = {notes!r}
mountpoint = {mountpoint!r}
for _ in range(600):
    if os.path.exists(notes + "/flooding"):
        break
    time.sleep(0.05)
flooding = os.path.exists(notes + "/flooding")

def timed(call):
    started = time.monotonic()
    value = call()
    return value, time.monotonic() - started

_, first_ping = timed(lambda: ProxyClient(timeout=10).ping())

def mount_and_read():
    fd = ProxyClient(timeout=10).mount(mountpoint, ("ro",))
    adapter = subprocess.Popen(
        ["squashfuse", "-f", os.environ["IMAGE"], f"/dev/fd/{{fd}}"], pass_fds=(fd,)
    )
    os.close(fd)
    while not os.path.exists(mountpoint + "/hello.txt"):
        time.sleep(0.005)
    return adapter, open(mountpoint + "/hello.txt").read()

(adapter, content), mounted = timed(mount_and_read)
_, second_ping = timed(lambda: ProxyClient(timeout=10).ping())
_, unmounted = timed(lambda: ProxyClient(timeout=10).unmount(mountpoint))
adapter.wait(10)
open(notes + "/stop", "w").close()
for _ in range(200):
    if os.path.exists(notes + "/flood.json"):
        break
    time.sleep(0.05)
print(json.dumps({{
    "flooding": flooding,
    "content": content,
    "seconds": {{"ping": first_ping, "mount and read": mounted, "ping again": second_ping, "unmount": unmounted}},
    "flood": json.load(open(notes + "/flood.json")),
}}))
"""


def test_one_uid_flooding_cannot_keep_another_from_mounting_and_pinging(
    daemon: Daemon, workspace: Workspace
) -> None:
    notes = workspace.shared_dir("flood")
    flood = workspace.script("flood.py", FLOOD)
    mountpoint = workspace.owned_dir("flood-victim")
    mark = daemon.log_mark()
    outcome = client_call(
        workspace,
        VICTIM.format(notes=str(notes), mountpoint=str(mountpoint)),
        root_setup=f"$AS_OTHER {SYSTEM_PYTHON} -I {flood} {notes} >/dev/null 2>&1 &",
        timeout=110,
    )
    assert outcome["flooding"], "the flood never got going"
    assert outcome["content"] == "hello from squashfs\n"
    assert all(seconds < 1 for seconds in outcome["seconds"].values()), outcome["seconds"]
    if int(Path("/proc/sys/net/core/somaxconn").read_text()) > 300:
        # The daemon's queue of new connections is longer than the flood: it never fills, and
        # no caller is turned away before the daemon knows who it is.
        assert outcome["flood"]["queue_full"] == 0, outcome["flood"]
    answers = outcome["flood"]["answers"]
    retry_later = (
        f"the FUSE proxy is busy: user {OTHER_CALLER} already has 32 connections open, "
        "the most one user may have; retry later"
    )
    assert answers[retry_later] >= 300, answers
    # The 32 it may hold were closed after the request timeout, and taken again.
    assert answers["no complete request within 1s"] >= 32, answers
    assert set(answers) <= {retry_later, "no complete request within 1s"}, answers
    refusals = daemon.log_lines("refusing user", since=mark)
    assert refusals[:1] == [
        f"WARNING podwright.fuse_proxy: refusing user {OTHER_CALLER}: {retry_later} "
        "(--max-connections-per-uid); more refusals are counted every 10s"
    ], refusals
    assert not [line for line in refusals if f"user {CALLER}" in line]
