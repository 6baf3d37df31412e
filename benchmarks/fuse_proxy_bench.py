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
  through the proxy (the wrapper): the daemon is not in the data path, so they should be equal.

Run: ``python benchmarks/fuse_proxy_bench.py [--cycles 200]``.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
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
REQUIRED = ("fusermount3", "squashfuse", "mksquashfs", "unshare")


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
    client.unmount(mountpoint)
    os.close(fd)
    return time.perf_counter() - started


def start_daemon(socket_path: Path, prefix: Path, log: Path) -> subprocess.Popen[bytes]:
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


def run(cycles: int = 200, concurrent_callers: int = 50, file_mib: int = 64) -> dict[str, Any]:
    """Every figure of the benchmark; must run as root inside a private mount namespace."""
    work = Path(tempfile.mkdtemp(prefix="podwright-fuse-bench-"))
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
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
        direct_summary, proxied_summary = summary(direct), summary(proxied)
        return {
            "cycles": cycles,
            "direct_fusermount3": direct_summary,
            "through_proxy": proxied_summary,
            "p50_overhead_ms": round(proxied_summary["p50_ms"] - direct_summary["p50_ms"], 2),
            "through_shim_end_to_end": summary(shim),
            **concurrency,
            **reads,
        }
    finally:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--file-mib", type=int, default=64)
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
    results = run(args.cycles, args.callers, args.file_mib)
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


if __name__ == "__main__":
    main()
