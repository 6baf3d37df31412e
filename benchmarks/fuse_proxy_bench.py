"""FUSE proxy benchmark: mount+unmount latency and concurrency through the proxy, read throughput.

Needs root, /dev/fuse, fusermount3, squashfuse and mksquashfs; it runs itself in a private mount
namespace (``unshare --mount``), so every mount it makes disappears with it. Reported:

* mount+unmount latency (p50, p99) of plain ``fusermount3`` run directly as root (exec, mount,
  hand the descriptor over ``_FUSE_COMMFD``; exec ``fusermount3 -u``), against the same through
  the daemon from a client (connect, identify, fork into the namespace, mount(2), descriptor
  back; then unmount). Target: the p50 difference under 5 ms.
* the same through the installed shim, end to end: what an adapter waits for, including the
  start of a Python interpreter for each of the two shim runs;
* 50 concurrent callers doing mount+unmount cycles: operations per second, and errors (target 0);
* sequential read throughput of a 64 MiB file through a squashfuse mount made directly and
  through the proxy (the wrapper): the daemon is not in the data path, so they should be equal;
* ping latency (p50, p99) while one uid floods the daemon (300 silent connections, reconnecting
  as they are dropped, from its own mount namespace as ``nobody``): from the daemon's own
  namespace (where its liveness probe runs) and from another uid in another namespace, against
  the same pings without the flood. Target: p99 under 100 ms;
* SIGTERM to exit while work is in flight (50 silent connections, 8 callers cycling mounts, one
  mount stuck on a stopped FUSE server): p50 and max over several runs, and the exit statuses.
  Target: every exit 0, and under 2 s (the grace is 0.5 s).

Run: ``python benchmarks/fuse_proxy_bench.py [--cycles 200]``.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from podwright.adapters.fuse.bundle import install_bundle  # noqa: E402
from podwright.adapters.fuse.client import ProxyClient  # noqa: E402
from podwright.adapters.fuse.errors import FuseProxyError  # noqa: E402

_IN_NAMESPACE = "PODWRIGHT_FUSE_BENCH_IN_NAMESPACE"
REQUIRED = ("fusermount3", "squashfuse", "mksquashfs", "unshare", "setpriv")


def missing_requirements() -> list[str]:
    problems = [f"{command} is not installed" for command in REQUIRED if not shutil.which(command)]
    if os.geteuid() != 0:
        problems.append("must run as root")
    if not os.path.exists("/dev/fuse"):
        problems.append("needs /dev/fuse")
    return problems


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def summary(samples_s: list[float]) -> dict[str, float]:
    milliseconds = [sample * 1000 for sample in samples_s]
    return {
        "p50_ms": round(statistics.median(milliseconds), 2),
        "p99_ms": round(percentile(milliseconds, 0.99), 2),
    }


def fusermount_cycle(program: str, mountpoint: str, env: dict[str, str]) -> float:
    """Mount with ``program`` as libfuse does (socket in _FUSE_COMMFD), then ``program -u``."""
    started = time.perf_counter()
    ours, theirs = socket.socketpair()
    with ours, theirs:
        environment = dict(env, _FUSE_COMMFD=str(theirs.fileno()))
        subprocess.run(
            [program, "-o", "ro,subtype=bench", "--", mountpoint],
            env=environment,
            pass_fds=(theirs.fileno(),),
            check=True,
        )
        _, ancillary, _, _ = ours.recvmsg(1, socket.CMSG_SPACE(4))
        fd = array.array("i", ancillary[0][2])[0]
    subprocess.run([program, "-u", "--", mountpoint], env=env, check=True)
    os.close(fd)
    return time.perf_counter() - started


def client_cycle(client: ProxyClient, mountpoint: str) -> float:
    started = time.perf_counter()
    fd = client.mount(mountpoint, ("ro", "subtype=bench"))
    try:
        client.unmount(mountpoint)
    finally:
        os.close(fd)  # nobody serves this mount: held open, a stat of it would wait forever
    return time.perf_counter() - started


def start_daemon(socket_path: Path, prefix: Path, log: Path) -> subprocess.Popen[bytes]:
    """The daemon, serving on ``socket_path``."""
    command = [
        sys.executable, "-m", "podwright", "fuse-proxy", "server",
        "--socket", str(socket_path), "--allow-prefix", str(prefix),
        "--workers", "8", "--max-connections", "512", "--log-level", "warning",
    ]  # fmt: skip
    with log.open("wb") as output:
        daemon = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 60
    while True:
        try:
            ProxyClient(str(socket_path), timeout=2).ping()
            return daemon
        except FuseProxyError:
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the daemon did not start: {log.read_text()}") from None
            time.sleep(0.05)


def read_throughput(path: Path) -> float:
    """MiB/s of one sequential read of ``path``."""
    size = 0
    started = time.perf_counter()
    with path.open("rb", buffering=0) as file:
        while chunk := file.read(1 << 20):
            size += len(chunk)
    return size / (1 << 20) / (time.perf_counter() - started)


def wait_for(path: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear")
        time.sleep(0.02)


def squashfuse_read(mountpoint: Path, command: list[str], env: dict[str, str]) -> float:
    adapter = subprocess.Popen(command, env=env)
    try:
        wait_for(mountpoint / "data.bin")
        return read_throughput(mountpoint / "data.bin")
    finally:
        adapter.send_signal(signal.SIGTERM)
        adapter.wait(20)
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True, check=False)


def run(
    cycles: int = 200,
    concurrent_callers: int = 50,
    file_mib: int = 64,
    ping_count: int = 300,
    stop_runs: int = 5,
) -> dict[str, Any]:
    """Every figure of the benchmark; must run as root inside a private mount namespace."""
    work = Path(tempfile.mkdtemp(prefix="podwright-fuse-bench-"))
    work.chmod(0o755)  # the flooding and pinging users reach the socket and the shim bundle
    try:
        area = work / "area"
        area.mkdir()
        bin_dir = work / "bin"
        install_bundle(str(bin_dir), f"{sys.executable} -I")
        socket_path = work / "run" / "proxy.sock"
        env = {"PATH": os.environ["PATH"], "PODWRIGHT_FUSE_PROXY_SOCKET": str(socket_path)}
        daemon = start_daemon(socket_path, area, work / "daemon.log")
        try:
            client = ProxyClient(str(socket_path))
            mountpoint = area / "latency"
            mountpoint.mkdir()
            for _ in range(5):  # warm both paths
                fusermount_cycle("fusermount3", str(mountpoint), env)
                client_cycle(client, str(mountpoint))
            direct, proxied = [], []
            for _ in range(cycles):  # interleaved, so machine noise hits both alike
                direct.append(fusermount_cycle("fusermount3", str(mountpoint), env))
                proxied.append(client_cycle(client, str(mountpoint)))
            shim = [
                fusermount_cycle(str(bin_dir / "fusermount3"), str(mountpoint), env)
                for _ in range(max(5, cycles // 10))
            ]
            concurrency = concurrent_cycles(client, area, concurrent_callers)
            reads = read_comparison(work, area, bin_dir, env, file_mib)
            flood = ping_during_flood(socket_path, bin_dir, ping_count)
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
        stopping = sigterm_to_exit(work, area, stop_runs)
        direct_summary, proxied_summary = summary(direct), summary(proxied)
        return {
            "cycles": cycles,
            "direct_fusermount3": direct_summary,
            "through_proxy": proxied_summary,
            "p50_overhead_ms": round(proxied_summary["p50_ms"] - direct_summary["p50_ms"], 2),
            "through_shim_end_to_end": summary(shim),
            **concurrency,
            **reads,
            **flood,
            **stopping,
        }
    finally:
        detach_mounts_below(work)  # whatever a failed step left: rmtree cannot remove a mountpoint
        shutil.rmtree(work, ignore_errors=True)


def concurrent_cycles(
    client: ProxyClient, area: Path, callers: int, per_caller: int = 10
) -> dict[str, Any]:
    directories = []
    for index in range(callers):
        directory = area / f"concurrent-{index}"
        directory.mkdir()
        directories.append(str(directory))
    errors: list[str] = []

    def caller(path: str) -> None:
        for _ in range(per_caller):
            try:
                client_cycle(client, path)
            except FuseProxyError as error:
                errors.append(str(error))

    started = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:
        list(pool.map(caller, directories))
    elapsed = time.perf_counter() - started
    return {
        "concurrent_callers": callers,
        "concurrent_cycles_per_s": round(callers * per_caller / elapsed, 1),
        "concurrent_errors": len(errors),
        "concurrent_error_examples": errors[:3],
    }


def read_comparison(
    work: Path, area: Path, bin_dir: Path, env: dict[str, str], file_mib: int
) -> dict[str, Any]:
    source = work / "image-source"
    source.mkdir()
    with (source / "data.bin").open("wb") as file:
        for _ in range(file_mib):
            file.write(os.urandom(1 << 20))
    image = work / "image.sqfs"
    subprocess.run(
        ["mksquashfs", str(source), str(image), "-quiet", "-no-progress", "-noappend"], check=True
    )
    read_throughput(image)  # the image itself in the page cache, for both runs alike
    direct_mount, proxied_mount = area / "read-direct", area / "read-proxied"
    direct_mount.mkdir()
    proxied_mount.mkdir()
    direct, proxied = [], []
    for _ in range(3):
        direct.append(
            squashfuse_read(direct_mount, ["squashfuse", "-f", str(image), str(direct_mount)], env)
        )
        wrapper = [str(bin_dir / "fusermount-wrapper"), "-m", str(proxied_mount), "--"]
        proxied.append(
            squashfuse_read(
                proxied_mount, [*wrapper, "squashfuse", "-f", str(image), str(proxied_mount)], env
            )
        )
    best_direct, best_proxied = max(direct), max(proxied)
    return {
        "read_file_mib": file_mib,
        "read_direct_mib_s": round(best_direct, 1),
        "read_proxied_mib_s": round(best_proxied, 1),
        "read_proxied_over_direct": round(best_proxied / best_direct, 3),
    }


AS_ANOTHER_USER = ["unshare", "--mount", "--", "setpriv", "--clear-groups"]

FLOOD = """
import selectors, socket, sys
path = sys.argv[1]
selector = selectors.DefaultSelector()
selector.register(sys.stdin, selectors.EVENT_READ)  # the flood lasts until it is closed
connections = 0
while True:
    while len(selector.get_map()) < 301:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            break
        connections += 1
        selector.register(sock, selectors.EVENT_READ)
    for key, _ in selector.select(0.05):
        if key.fileobj is sys.stdin:
            print(connections)
            sys.exit(0)
        try:
            key.fileobj.recv(4096)
        except OSError:
            pass
        selector.unregister(key.fileobj)
        key.fileobj.close()
"""

PINGS = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from podwright.adapters.fuse.client import ProxyClient
samples = []
for _ in range(int(sys.argv[3])):
    started = time.perf_counter()
    ProxyClient(sys.argv[2], timeout=10).ping()
    samples.append(time.perf_counter() - started)
print(json.dumps(samples))
"""


def as_user(uid: int, *command: str) -> list[str]:
    """``command`` as ``uid``, without capabilities, in a mount namespace of its own."""
    return [*AS_ANOTHER_USER, "--reuid", str(uid), "--regid", str(uid), "--", *command]


def pings(socket_path: Path, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        ProxyClient(str(socket_path), timeout=10).ping()
        samples.append(time.perf_counter() - started)
    return samples


def ping_during_flood(socket_path: Path, bin_dir: Path, count: int = 300) -> dict[str, Any]:
    """Pings from the daemon's namespace and from another uid, without and during a flood."""
    quiet = pings(socket_path, count)
    python = [sys.executable, "-I", "-c"]
    flooder = subprocess.Popen(
        as_user(65534, *python, FLOOD, str(socket_path)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)  # the flood is going, and its first silent connections time out
        other = subprocess.Popen(
            as_user(
                65533, *python, PINGS, str(bin_dir / "fusermount3"), str(socket_path), str(count)
            ),
            stdout=subprocess.PIPE,
            text=True,
        )
        local = pings(socket_path, count)
        other_output, _ = other.communicate(timeout=60)
        flood_output, _ = flooder.communicate(timeout=60)  # closes its stdin: the flood ends
    finally:
        flooder.kill()
        flooder.wait()
    return {
        "ping_without_flood": summary(quiet),
        "ping_during_flood_from_daemon_namespace": summary(local),
        "ping_during_flood_from_another_uid": summary(json.loads(other_output)),
        "flood_connections": int(flood_output),
    }


def sigterm_to_exit(work: Path, area: Path, runs: int = 5) -> dict[str, Any]:
    """Seconds from SIGTERM to the daemon's exit, with work in flight; and the exit statuses."""
    source = work / "small-image"
    source.mkdir()
    (source / "hello.txt").write_text("hello\n")
    (source / "docs").mkdir()
    image = work / "small.sqfs"
    subprocess.run(
        ["mksquashfs", str(source), str(image), "-quiet", "-no-progress", "-noappend"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    frozen = area / "frozen"
    frozen.mkdir()
    server = subprocess.Popen(["squashfuse", "-f", "-o", "allow_other", str(image), str(frozen)])
    wait_for(frozen / "hello.txt")
    server.send_signal(signal.SIGSTOP)  # a lookup below it now blocks until its caller dies
    elapsed, statuses = [], []
    try:
        for run_index in range(runs):
            socket_path = work / f"stop-{run_index}" / "proxy.sock"
            daemon = start_daemon(socket_path, area, work / f"stop-{run_index}.log")
            seconds, status = stop_while_busy(daemon, socket_path, area, frozen, run_index)
            elapsed.append(seconds)
            statuses.append(status)
    finally:
        server.kill()
        server.wait()
        subprocess.run(["umount", "-l", str(frozen)], capture_output=True, check=False)
    return {
        "sigterm_to_exit": {**summary(elapsed), "max_ms": round(max(elapsed) * 1000, 1)},
        "sigterm_exit_statuses": statuses,
    }


def stop_while_busy(
    daemon: subprocess.Popen[bytes], socket_path: Path, area: Path, frozen: Path, run_index: int
) -> tuple[float, int]:
    silent = []
    for _ in range(50):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(socket_path))
        silent.append(sock)
    client = ProxyClient(str(socket_path), timeout=2)
    stop = False

    def cycle(index: int) -> None:
        directory = area / f"stop-{run_index}-{index}"
        directory.mkdir()
        while not stop:
            try:
                client_cycle(client, str(directory))
            except FuseProxyError:
                return

    def stuck() -> None:
        with contextlib.suppress(FuseProxyError):
            os.close(client.mount(str(frozen / "docs")))

    threads = [threading.Thread(target=cycle, args=(index,)) for index in range(8)]
    threads.append(threading.Thread(target=stuck))
    for thread in threads:
        thread.start()
    time.sleep(0.3)  # everything is in flight
    started = time.perf_counter()
    daemon.send_signal(signal.SIGTERM)
    status = daemon.wait(30)
    elapsed = time.perf_counter() - started
    stop = True
    for thread in threads:
        thread.join(30)
    for sock in silent:
        sock.close()
    detach_mounts_below(area, keep=frozen)  # what a cycle could not unmount once the daemon left
    return elapsed, status


def detach_mounts_below(directory: Path, keep: Path | None = None) -> None:
    """Lazily detach every mount below ``directory`` (in this, the benchmark's own namespace)."""
    with open("/proc/self/mountinfo") as mountinfo:
        mountpoints = [line.split()[4] for line in mountinfo]
    for mountpoint in reversed(mountpoints):  # the innermost first
        if mountpoint.startswith(f"{directory}/") and mountpoint != str(keep):
            subprocess.run(["umount", "-l", mountpoint], capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--file-mib", type=int, default=64)
    parser.add_argument("--pings", type=int, default=300, help="pings per ping figure")
    parser.add_argument("--stop-runs", type=int, default=5, help="runs of SIGTERM to exit")
    args = parser.parse_args()
    problems = missing_requirements()
    if problems:
        sys.exit("fuse_proxy_bench: " + "; ".join(problems))
    if os.environ.get(_IN_NAMESPACE) != "1":
        env = dict(os.environ, **{_IN_NAMESPACE: "1"})
        command = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            sys.executable,
            *sys.argv,
        ]
        sys.exit(subprocess.run(command, env=env, check=False).returncode)
    results = run(args.cycles, args.callers, args.file_mib, args.pings, args.stop_runs)
    print(json.dumps(results, indent=2))
    print(
        f"mount+unmount p50: direct fusermount3 {results['direct_fusermount3']['p50_ms']} ms, "
        f"through the proxy {results['through_proxy']['p50_ms']} ms "
        f"(overhead {results['p50_overhead_ms']} ms; target < 5 ms); "
        f"shim end to end {results['through_shim_end_to_end']['p50_ms']} ms"
    )
    print(
        f"{results['concurrent_callers']} concurrent callers: {results['concurrent_cycles_per_s']} "
        f"cycles/s, {results['concurrent_errors']} errors (target 0)"
    )
    print(
        f"read {results['read_file_mib']} MiB: direct {results['read_direct_mib_s']} MiB/s, "
        f"proxied {results['read_proxied_mib_s']} MiB/s "
        f"(ratio {results['read_proxied_over_direct']})"
    )
    quiet, local = results["ping_without_flood"], results["ping_during_flood_from_daemon_namespace"]
    other = results["ping_during_flood_from_another_uid"]
    print(
        f"ping p50/p99: {quiet['p50_ms']}/{quiet['p99_ms']} ms without a flood; during one uid's "
        f"flood ({results['flood_connections']} connections) {local['p50_ms']}/{local['p99_ms']} "
        f"ms from the daemon's namespace, {other['p50_ms']}/{other['p99_ms']} ms from another uid "
        "(target p99 < 100 ms)"
    )
    stopping = results["sigterm_to_exit"]
    print(
        f"SIGTERM to exit with work in flight: p50 {stopping['p50_ms']} ms, max "
        f"{stopping['max_ms']} ms, statuses {results['sigterm_exit_statuses']} "
        "(target: 0, under 2000 ms)"
    )


if __name__ == "__main__":
    main()
