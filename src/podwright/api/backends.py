"""Where tasks run: choosing a backend and opening its Kubernetes port for the executor.

* ``kubernetes``: a cluster, from a kubeconfig (``--kubeconfig``, ``$KUBECONFIG``,
  ``~/.kube/config``; ``--context``) or, in a pod, its service account; the REST client with watch
  caches (:class:`ClusterPort`).
* ``local``: this machine (:class:`LocalCluster`), with state under ``<home>/local``. Its processes
  belong to the process that runs the backend, so one process at a time may: the one holding
  ``<home>/local/executor.lock`` (beside the executor lock of its task store and backend, which
  :mod:`podwright.api.executors` keeps; this one keeps two stores' executors out of one state
  directory).
* ``operator``: the cluster's operator runs the task, a Workload resource
  (:mod:`podwright.api.operator_tasks`); no executor of this machine serves it, so it is a
  choice of ``run`` and the task commands, never of ``podwright executor``
  (:data:`EXECUTOR_BACKENDS`).

Without ``--backend``, a configured cluster (a kubeconfig, or a pod's service account) means
``kubernetes``, and otherwise ``local``; ``operator`` is chosen only when asked for.

A task records its backend as a key: ``local``, or ``kubernetes/<context>#<server>`` with the
kubeconfig context it was submitted to, resolved then, and that context's API server
(``kubernetes/in-cluster`` from a pod), so switching kubectl's current context later does not move
a task to another cluster, and two kubeconfigs whose contexts share a name (every kubeadm cluster's
is ``kubernetes-admin@kubernetes``) never mix their tasks. An executor serves the tasks of exactly
one key, and a kubeconfig whose context names another server than a task's is refused for it.
``operator/<context>#<server>`` names the cluster of ``--backend operator`` the same way.

A cluster that cannot be configured (a kubeconfig that is missing, unreadable or invalid, a context
it does not have, a context that names another server) is the user's input to fix:
:func:`resolve_backend` and :func:`cluster_problem` say which argument is wrong and why, before
anything is recorded. Only :func:`check_reachable` talks to the cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from podwright.adapters.kubernetes import KubernetesClient, KubernetesConfigError, connect
from podwright.adapters.kubernetes.client import RequestObserver
from podwright.adapters.kubernetes.cluster_port import ClusterPort, connection_pool_size
from podwright.adapters.local.cluster import LOCK_NAME, LocalCluster
from podwright.api.errors import BackendError, BackendUnreachableError, InvalidInputError
from podwright.engine.config import LifecycleConfig
from podwright.engine.event_index import EventIndex
from podwright.engine.kubernetes_port import (
    ApiConnectionError,
    ForbiddenError,
    KubernetesError,
    KubernetesPort,
)
from podwright.engine.plugins import default_plugins

LOCAL = "local"
KUBERNETES = "kubernetes"
OPERATOR = "operator"
EXECUTOR_BACKENDS = (LOCAL, KUBERNETES)
"""The backends an executor of this machine runs."""
BACKENDS = (*EXECUTOR_BACKENDS, OPERATOR)
"""Every backend ``run`` and the task commands take (``operator``: the cluster's operator)."""
IN_CLUSTER = "in-cluster"


class LocalBackendBusyError(Exception):
    """Another process (the executor of another task store) runs the local backend of this state
    directory."""


@dataclasses.dataclass(frozen=True)
class Identity:
    """A person, as an authenticating proxy in front of a portal names them: what the portal
    acts as when it reaches the cluster for them (Kubernetes impersonation), so that their RBAC,
    not the portal's, decides."""

    user: str
    groups: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ClusterAccess:
    """How to reach a cluster (all None: the defaults); ``identity``: as whom, through
    impersonation (the kubeconfig's credentials must be allowed to impersonate them)."""

    kubeconfig: str | None = None
    context: str | None = None
    identity: Identity | None = None

    def connect(self, *, pool_size: int | None = None) -> k8s_client.ApiClient:
        """An API client of this access (:func:`~podwright.adapters.kubernetes.connect`)."""
        impersonate = None if self.identity is None else (self.identity.user, self.identity.groups)
        if pool_size is None:
            return connect(self.kubeconfig, self.context, impersonate=impersonate)
        return connect(self.kubeconfig, self.context, pool_size=pool_size, impersonate=impersonate)


def choose_backend(requested: str | None, access: ClusterAccess) -> str:
    """The backend asked for, else kubernetes when a cluster is configured, else local (never
    the operator unless asked for)."""
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


SERVER_MARK = "#"
"""Between a cluster backend key's context and its API server (neither a context name nor a server
URL has one)."""


def backend_key(name: str, access: ClusterAccess) -> str:
    """What a task records as its backend: ``local``, ``kubernetes/in-cluster``, or
    ``kubernetes/<context>#<server>`` (``operator/...`` alike for the operator's cluster);
    :class:`InvalidInputError` naming the argument at fault when the kubeconfig or its context
    cannot be used."""
    if name == LOCAL:
        return LOCAL
    if access.kubeconfig is None and access.context is None and _in_pod():
        return f"{name}/{IN_CLUSTER}"
    contexts, active = _kubeconfig_contexts(access)
    context = access.context if access.context is not None else active
    problem = _context_problem(dataclasses.replace(access, context=context), contexts)
    if problem is not None:
        raise InvalidInputError(problem)
    return f"{name}/{context}{SERVER_MARK}{_server(access.kubeconfig, context)}"


def context_of(key: str) -> str:
    """The kubeconfig context of a cluster backend key (``in-cluster`` for a pod's)."""
    return key.partition("/")[2].rpartition(SERVER_MARK)[0] or key.partition("/")[2]


def resolve_backend(requested: str | None, access: ClusterAccess) -> str:
    """The backend key of a command's ``--backend``, ``--kubeconfig`` and ``--context``, once the
    cluster's configuration is known to load; :class:`InvalidInputError` naming the argument
    otherwise."""
    key = backend_key(choose_backend(requested, access), access)
    problem = cluster_problem(key, access.kubeconfig)
    if problem is not None:
        raise InvalidInputError(problem)
    return key


def cluster_problem(key: str, kubeconfig: str | None) -> str | None:
    """Why the cluster of a backend key cannot be reached from here with ``kubeconfig`` (the
    argument at fault named), or None when it can (always, for the local backend)."""
    if key == LOCAL:
        return None
    access = access_for(key, kubeconfig)
    if key.partition("/")[2] == IN_CLUSTER:
        if _in_pod():
            return None
        return (
            f"the backend {key} is a pod's service account, and this is not a pod "
            "(no $KUBERNETES_SERVICE_HOST)"
        )
    try:
        contexts, _active = _kubeconfig_contexts(access)
    except InvalidInputError as error:
        return str(error)
    problem = _context_problem(access, contexts)
    if problem is not None:
        return problem
    server = key.rpartition(SERVER_MARK)[2]
    configured = _server(access.kubeconfig, str(access.context))
    if server != configured:
        return (
            f"--context {access.context}: in {_kubeconfig_source(access)} it names the API "
            f"server {configured}, and the task's cluster is {server}: give the kubeconfig "
            "the task was submitted with"
        )
    return None


def _context_problem(access: ClusterAccess, contexts: list[str]) -> str | None:
    """Why ``access.context`` of the kubeconfig (whose contexts are ``contexts``) is unusable."""
    if access.context not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        return (
            f"--context {access.context}: {_kubeconfig_source(access)} has no such context "
            f"(it has: {known})"
        )
    try:
        access.connect().close()
    except (KubernetesConfigError, yaml.YAMLError) as error:
        return f"--context {access.context}: {error}"
    return None


def _server(kubeconfig: str | None, context: str) -> str:
    """The API server a kubeconfig's context names (the context is known to load)."""
    api = connect(kubeconfig, context)
    try:
        return str(api.configuration.host)
    finally:
        api.close()


def check_reachable(key: str, kubeconfig: str | None) -> None:
    """That the API server of a cluster backend answers (``GET /version``, a few bounded retries
    with backoff), before anything is recorded that would need it:
    :class:`BackendUnreachableError` naming the server and the cause when it does not;
    :class:`InvalidInputError` naming the context when it refuses its credentials. Nothing to
    check for the local backend."""
    if key == LOCAL:
        return
    access = access_for(key, kubeconfig)
    try:
        client = KubernetesClient(access.connect(pool_size=1))
    except (KubernetesConfigError, yaml.YAMLError) as error:
        raise InvalidInputError(str(error)) from error
    try:
        client.server_version()
    except ApiConnectionError as error:
        raise BackendUnreachableError(f"{error.message}; nothing was recorded") from error
    except ForbiddenError as error:
        raise InvalidInputError(
            f"the API server {client.server} refused the credentials of the backend {key}: "
            f"{error.message}"
        ) from error
    except KubernetesError as error:
        raise BackendUnreachableError(
            f"the API server {client.server} cannot serve: {error.message}; nothing was recorded"
        ) from error
    finally:
        client.close()


@contextlib.contextmanager
def cluster_client(access: ClusterAccess) -> Iterator[KubernetesClient]:
    """A client of the cluster ``access`` names, closed after the block; the API server's
    failures in the block end the command: no answer is :class:`BackendUnreachableError`
    (exit 6), any other refusal :class:`BackendError` (exit 5), naming the server."""
    try:
        client = KubernetesClient(access.connect())
    except KubernetesConfigError as error:
        raise InvalidInputError(str(error)) from error
    try:
        yield client
    except ApiConnectionError as error:
        raise BackendUnreachableError(error.message) from error
    except KubernetesError as error:
        raise BackendError(f"the API server {client.server} refused: {error.message}") from error
    finally:
        client.close()


def _kubeconfig_contexts(access: ClusterAccess) -> tuple[list[str], str]:
    """The names of the kubeconfig's contexts, and its current one."""
    contexts, active = _read_contexts(access)
    names = [str(context.get("name")) for context in contexts]
    return names, str(active.get("name", ""))


def _read_contexts(access: ClusterAccess) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The kubeconfig's contexts, and its current one."""
    source = _kubeconfig_source(access)
    try:
        contexts, active = k8s_config.list_kube_config_contexts(access.kubeconfig)
    except (ConfigException, OSError, TypeError, ValueError, yaml.YAMLError) as error:
        reason = " ".join(str(error).split())
        raise InvalidInputError(f"{source}: not a usable kubeconfig: {reason}") from error
    if access.context is None and not active:
        raise InvalidInputError(f"{source}: has no current context: give one with --context")
    return list(contexts or []), dict(active or {})


def cluster_name(access: ClusterAccess) -> str:
    """The name the kubeconfig gives the cluster of its context (``in-cluster`` in a pod): the
    cluster's name in the scope tree unless told otherwise."""
    if access.kubeconfig is None and access.context is None and _in_pod():
        return IN_CLUSTER
    chosen = _chosen_context(access)
    return str((chosen.get("context") or {}).get("cluster") or chosen.get("name"))


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
FALLBACK_NAMESPACE = "default"


def context_namespace(access: ClusterAccess) -> str:
    """The namespace a command without ``-n`` works in, as kubectl chooses it: the kubeconfig
    context's ``namespace``; in a pod without a kubeconfig, the pod's own (its service account's
    namespace file); else ``default``."""
    if access.kubeconfig is None and access.context is None and _in_pod():
        try:
            return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or FALLBACK_NAMESPACE
        except OSError:
            return FALLBACK_NAMESPACE
    chosen = _chosen_context(access)
    return str((chosen.get("context") or {}).get("namespace") or FALLBACK_NAMESPACE)


def _chosen_context(access: ClusterAccess) -> dict[str, Any]:
    """The kubeconfig context ``access`` names (its current one if none)."""
    contexts, active = _read_contexts(access)
    chosen = active if access.context is None else None
    for context in contexts:
        if context.get("name") == access.context:
            chosen = context
    if chosen is None:
        raise InvalidInputError(
            f"--context {access.context}: {_kubeconfig_source(access)} has no such context"
        )
    return chosen


def _kubeconfig_source(access: ClusterAccess) -> str:
    """The kubeconfig in use, as the argument that named it."""
    if access.kubeconfig is not None:
        return f"--kubeconfig {access.kubeconfig}"
    if os.environ.get("KUBECONFIG"):
        return f"$KUBECONFIG ({os.environ['KUBECONFIG']})"
    return "~/.kube/config"


def access_for(key: str, kubeconfig: str | None) -> ClusterAccess:
    """How to reach the cluster of a backend key (with the kubeconfig file given, if any)."""
    context = context_of(key)
    if context == IN_CLUSTER:
        return ClusterAccess()
    return ClusterAccess(kubeconfig, context or None)


def _in_pod() -> bool:
    return "KUBERNETES_SERVICE_HOST" in os.environ


@dataclasses.dataclass
class OpenBackend:
    """A backend's port, ready for an executor; ``close`` releases everything it holds.

    ``name`` is the backend's key (``local``, ``kubernetes/<context>#<server>``)."""

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


def open_backend(
    key: str,
    *,
    home: Path,
    access: ClusterAccess,
    namespace: str | None = None,
    observer: RequestObserver | None = None,
    concurrency: int = 16,
    events: EventIndex | None = None,
) -> OpenBackend:
    """Open the backend of ``key`` for the executor that holds its executor lock.

    The local backend also takes ``<home>/local/executor.lock``, and raises
    :class:`LocalBackendBusyError` when the executor of another task store holds it.
    ``namespace`` limits a cluster's watches to one namespace; ``concurrency`` (the executor's
    workers) sizes the connection pool, with room for every watch stream. A cluster that cannot be
    configured is :class:`InvalidInputError`. ``events`` indexes the Kubernetes events the executor
    attaches (default: as the lifecycle configuration's defaults bound it).
    """
    if events is None:
        defaults = LifecycleConfig()
        events = EventIndex(ttl=defaults.event_ttl, max_per_object=defaults.events_per_object)
    if key == LOCAL:
        lock = _take_local_lock(home / LOCAL / LOCK_NAME)
        if lock is None:
            raise LocalBackendBusyError(
                f"the local backend of {home} is run by the executor of another task store "
                f"(pid {lock_holder(home / LOCAL / LOCK_NAME) or 'unknown'}); one state "
                "directory runs one store's local tasks at a time"
            )
        try:
            local = LocalCluster(home / LOCAL, events=events)
        except BaseException:
            lock.close()
            raise
        return OpenBackend(key, local, events, lambda: True, local=local, _lock=lock)
    plugins = default_plugins()
    pool_size = connection_pool_size(concurrency, plugins)
    try:
        api = access.connect(pool_size=pool_size)
    except (KubernetesConfigError, yaml.YAMLError) as error:
        raise InvalidInputError(str(error)) from error
    client = KubernetesClient(api, observer=observer)
    port = ClusterPort(client, plugins, events, namespace=namespace)
    return OpenBackend(key, port, events, port.synced, cluster=port)


def try_lock(path: Path) -> IO[str] | None:
    """An exclusive lock on the file ``path`` (created if need be), held while the returned file
    stays open, or None when another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def write_pid(lock: IO[str]) -> IO[str]:
    """Write this process's pid in a held lock's file, for others to name its holder."""
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def lock_holder(path: Path) -> int | None:
    """The pid a lock's holder wrote in its file (without checking that it is held)."""
    with contextlib.suppress(OSError, ValueError):
        return int(path.read_text().strip())
    return None


def _take_local_lock(path: Path) -> IO[str] | None:
    lock = try_lock(path)
    return None if lock is None else write_pid(lock)
