"""Where tasks run: choosing a backend and opening its Kubernetes port for the executor.

* ``kubernetes``: a cluster, from a kubeconfig (``--kubeconfig``, ``$KUBECONFIG``,
  ``~/.kube/config``; ``--context``) or, in a pod, its service account; the REST client with watch
  caches (:class:`ClusterPort`).
* ``local``: this machine (:class:`LocalCluster`), with state under ``<home>/local``. Its processes
  belong to the process that runs the backend, so one process at a time may: the one holding
  ``<home>/local/executor.lock``.

Without ``--backend``, a configured cluster (a kubeconfig, or a pod's service account) means
``kubernetes``, and otherwise ``local``.

A task records its backend as a key: ``local``, or ``kubernetes/<context>`` with the kubeconfig
context it was submitted to resolved then (``kubernetes/in-cluster`` from a pod), so switching
kubectl's current context later does not move a task to another cluster. An executor serves the
tasks of exactly one key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import IO, TypeVar

import click
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from podwright.adapters.kubernetes import KubernetesClient, KubernetesConfigError, connect
from podwright.adapters.kubernetes.client import RequestObserver
from podwright.adapters.kubernetes.cluster_port import ClusterPort
from podwright.adapters.local.cluster import LOCK_NAME, LocalCluster
from podwright.engine.event_index import EventIndex
from podwright.engine.kubernetes_port import KubernetesPort
from podwright.engine.plugins import default_plugins

LOCAL = "local"
KUBERNETES = "kubernetes"
BACKENDS = (LOCAL, KUBERNETES)
IN_CLUSTER = "in-cluster"


class LocalBackendBusyError(click.ClickException):
    """Another process runs the local backend on this state directory."""


@dataclasses.dataclass(frozen=True)
class ClusterAccess:
    """How to reach a cluster (all None: the defaults)."""

    kubeconfig: str | None = None
    context: str | None = None


F = TypeVar("F", bound=Callable[..., object])


def cluster_options(command: F) -> F:
    """``--backend``, ``--kubeconfig`` and ``--context``."""
    command = click.option(
        "--context", default=None, help="The kubeconfig context to use (default: its current one)."
    )(command)
    command = click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False),
        default=None,
        help="The kubeconfig file (default: $KUBECONFIG, else ~/.kube/config; in a pod, its "
        "service account).",
    )(command)
    return click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=None,
        help="Where tasks run (default: kubernetes when a cluster is configured, else local).",
    )(command)


def choose_backend(requested: str | None, access: ClusterAccess) -> str:
    """The backend asked for, else kubernetes when a cluster is configured, else local."""
    if requested is not None:
        return requested
    configured = (
        access.kubeconfig is not None
        or access.context is not None
        or bool(os.environ.get("KUBECONFIG"))
        or _in_pod()
        or Path("~/.kube/config").expanduser().is_file()
    )
    return KUBERNETES if configured else LOCAL


def backend_key(name: str, access: ClusterAccess) -> str:
    """What a task records as its backend: ``local``, or ``kubernetes/<context>``."""
    if name == LOCAL:
        return LOCAL
    if access.kubeconfig is None and access.context is None and _in_pod():
        return f"{KUBERNETES}/{IN_CLUSTER}"
    if access.context is not None:
        return f"{KUBERNETES}/{access.context}"
    try:
        _contexts, active = k8s_config.list_kube_config_contexts(access.kubeconfig)
    except (ConfigException, OSError, TypeError, ValueError) as error:
        source = access.kubeconfig or "the kubeconfig"
        raise click.ClickException(f"cannot read {source}: {error}") from error
    return f"{KUBERNETES}/{active['name']}"


def access_for(key: str, kubeconfig: str | None) -> ClusterAccess:
    """How to reach the cluster of a backend key (with the kubeconfig file given, if any)."""
    context = key.partition("/")[2]
    if context == IN_CLUSTER:
        return ClusterAccess()
    return ClusterAccess(kubeconfig, context or None)


def _in_pod() -> bool:
    return "KUBERNETES_SERVICE_HOST" in os.environ


@dataclasses.dataclass
class OpenBackend:
    """A backend's port, ready for an executor; ``close`` releases everything it holds.

    ``name`` is the backend's key (``local``, ``kubernetes/<context>``)."""

    name: str
    port: KubernetesPort
    events: EventIndex
    synced: Callable[[], bool]
    local: LocalCluster | None = None
    cluster: ClusterPort | None = None
    _lock: IO[str] | None = None

    def close(self) -> None:
        if self.local is not None:
            self.local.close()
        if self.cluster is not None:
            self.cluster.close()
        if self._lock is not None:
            self._lock.close()


def event_index() -> EventIndex:
    return EventIndex(ttl=timedelta(hours=1), max_per_object=200)


def open_backend(
    key: str,
    *,
    home: Path,
    access: ClusterAccess,
    namespace: str | None = None,
    workdir: Path | None = None,
    observer: RequestObserver | None = None,
) -> OpenBackend:
    """Open the backend of ``key`` for an executor, holding its executor lock when free.

    The local backend raises :class:`LocalBackendBusyError` when another process holds its lock;
    a cluster's may be served by several executors at once (their writes are conditional), so
    its lock only tells ``run --detach`` whether one is running. ``namespace`` limits a
    cluster's watches to one namespace.
    """
    events = event_index()
    lock = take_executor_lock(home, key)
    if key == LOCAL:
        if lock is None:
            raise LocalBackendBusyError(
                f"another podwright process runs the local backend of {home} "
                f"(pid {executor_lock_holder(home, key) or 'unknown'})"
            )
        local = LocalCluster(home / LOCAL, events=events, default_workdir=workdir)
        return OpenBackend(key, local, events, lambda: True, local=local, _lock=lock)
    try:
        api = connect(access.kubeconfig, access.context)
    except KubernetesConfigError as error:
        if lock is not None:
            lock.close()
        raise click.ClickException(str(error)) from error
    client = KubernetesClient(api, observer=observer)
    port = ClusterPort(client, default_plugins(), events, namespace=namespace)
    return OpenBackend(key, port, events, port.synced, cluster=port, _lock=lock)


def _file_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key)


def _lock_path(home: Path, key: str) -> Path:
    if key == LOCAL:
        return home / LOCAL / LOCK_NAME
    return home / "executors" / f"{_file_name(key)}.lock"


def _try_lock(home: Path, key: str) -> IO[str] | None:
    path = _lock_path(home, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def take_executor_lock(home: Path, key: str) -> IO[str] | None:
    """The executor lock of a backend (held while the file stays open), with this process's
    pid written in it; None if another process holds it."""
    handle = _try_lock(home, key)
    if handle is None:
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def executor_lock_holder(home: Path, key: str) -> int | None:
    """The pid written by the holder of a backend's executor lock, if readable."""
    with contextlib.suppress(OSError, ValueError):
        return int(_lock_path(home, key).read_text().strip())
    return None


def executor_running(home: Path, key: str) -> bool:
    """Whether an executor holds the backend's lock now."""
    lock = _try_lock(home, key)
    if lock is None:
        return True
    lock.close()
    return False


_DAEMON_LAUNCHER = """
import subprocess, sys
process = subprocess.Popen(
    sys.argv[1:], stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr,
    start_new_session=True,
)
print(process.pid)
"""


def start_background_executor(home: Path, key: str, kubeconfig: str | None) -> int | None:
    """Start ``podwright executor --until-idle`` for the backend in its own session, unless one
    is running; its output goes to ``<home>/executor-<backend key>.log``. The new pid, or None."""
    if executor_running(home, key):
        return None
    command = [sys.executable, "-m", "podwright", "executor", "--until-idle"]
    command += ["--metrics-address", "off", "--home", str(home)]
    if key == LOCAL:
        command += ["--backend", LOCAL]
    else:
        access = access_for(key, kubeconfig)
        command += ["--backend", KUBERNETES]
        if access.kubeconfig:
            command += ["--kubeconfig", access.kubeconfig]
        if access.context:
            command += ["--context", access.context]
    log = home / f"executor-{_file_name(key)}.log"
    # A short-lived intermediate process starts the executor and exits, so the executor is
    # nobody's child here: it outlives this command and is never left a zombie.
    with log.open("ab") as output:
        launcher = subprocess.run(
            [sys.executable, "-W", "ignore", "-c", _DAEMON_LAUNCHER, *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=output,
            check=False,
        )
    if launcher.returncode != 0:
        raise click.ClickException(f"could not start a background executor: see {log}")
    return int(launcher.stdout)
