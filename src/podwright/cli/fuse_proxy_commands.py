"""``podwright fuse-proxy``: the node daemon, the fusermount shim and wrapper, and their manifests.

``server`` runs the privileged daemon; ``shim`` and ``wrapper`` are the in-container programs
(normally run from the bundle that ``install-shim`` writes, which needs only ``python3``);
``ping`` is the daemon's liveness probe; ``manifests`` prints the DaemonSet and an example pod.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from podwright.adapters.fuse import shim, wrapper
from podwright.adapters.fuse.bundle import DEFAULT_INTERPRETER, install_bundle
from podwright.adapters.fuse.client import ProxyClient
from podwright.adapters.fuse.errors import FuseProxyError
from podwright.adapters.fuse.server import (
    DEFAULT_SHUTDOWN_GRACE,
    MAX_SHUTDOWN_GRACE,
    STOP_SIGNALS,
    ServerConfig,
)
from podwright.cli.common import BadInput
from podwright.core.fuse_proxy.admission import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_UID,
    DEFAULT_MAX_REQUESTS_PER_UID,
    DEFAULT_WORKERS,
    DaemonLimits,
)
from podwright.core.fuse_proxy.mount_policy import DEFAULT_MOUNT_PREFIXES, ProxyPolicy
from podwright.core.fuse_proxy.protocol import (
    DEFAULT_NAMESPACE,
    DEFAULT_SOCKET_DIR,
    DEFAULT_SOCKET_PATH,
    SOCKET_ENV,
)

if TYPE_CHECKING:
    from podwright.core.fuse_proxy.manifests import FuseProxySetup

_RAW = {"ignore_unknown_options": True, "allow_interspersed_args": False, "help_option_names": []}


def _policy_options(command: Callable[..., None]) -> Callable[..., None]:
    """The daemon's policy options, for ``server`` and for the ``manifests`` that run it."""
    options = [
        click.option(
            "--allow-prefix",
            "prefixes",
            multiple=True,
            metavar="DIR",
            help="Mount only strictly below DIR (repeatable). "
            f"Default: {', '.join(DEFAULT_MOUNT_PREFIXES)}.",
        ),
        click.option("--allow-other", is_flag=True, help="Permit the allow_other mount option."),
        click.option(
            "--max-mounts-per-user",
            type=click.IntRange(min=1),
            default=1000,
            show_default=True,
            help="FUSE mounts one uid may hold in one mount namespace.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _limit_options(command: Callable[..., None]) -> Callable[..., None]:
    """The daemon's capacity and per-caller limits, for ``server`` and the ``manifests`` that
    run it."""
    count = click.IntRange(min=1)
    options = [
        click.option(
            "--workers",
            type=count,
            default=DEFAULT_WORKERS,
            show_default=True,
            help="Threads that carry out mounts and unmounts.",
        ),
        click.option(
            "--max-connections",
            type=count,
            default=DEFAULT_MAX_CONNECTIONS,
            show_default=True,
            help="Connections held at once, all callers together (the daemon's own clients, "
            "such as its liveness probe, are never refused).",
        ),
        click.option(
            "--max-connections-per-uid",
            type=count,
            default=DEFAULT_MAX_CONNECTIONS_PER_UID,
            show_default=True,
            help="Connections one user (uid) may hold at once; keep it well below "
            "--max-connections, so that one user never takes them all. Beyond it the caller "
            "is told the proxy is busy and to retry later.",
        ),
        click.option(
            "--max-requests-per-uid",
            type=count,
            default=DEFAULT_MAX_REQUESTS_PER_UID,
            show_default=True,
            help="Mounts and unmounts of one user in progress at once; keep it below --workers, "
            "so that one user's slow mounts never occupy every worker.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _limits(
    workers: int, max_connections: int, max_connections_per_uid: int, max_requests_per_uid: int
) -> DaemonLimits:
    try:
        return DaemonLimits(workers, max_connections, max_connections_per_uid, max_requests_per_uid)
    except ValueError as error:
        raise BadInput(str(error)) from error


def _policy(prefixes: tuple[str, ...], allow_other: bool, max_mounts_per_user: int) -> ProxyPolicy:
    try:
        return ProxyPolicy(prefixes or DEFAULT_MOUNT_PREFIXES, allow_other, max_mounts_per_user)
    except ValueError as error:
        raise BadInput(str(error)) from error


@click.group("fuse-proxy")
def fuse_proxy_group() -> None:
    """FUSE mounts for unprivileged containers, through a privileged per-node daemon."""


@fuse_proxy_group.command("server")
@click.option(
    "--socket",
    "socket_path",
    default=DEFAULT_SOCKET_PATH,
    show_default=True,
    help="Unix socket to listen on (its directory is shared with the pods).",
)
@_policy_options
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    help="Seconds a client has to send its whole request.",
)
@click.option(
    "--operation-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds one mount or unmount may take.",
)
@_limit_options
@click.option(
    "--shutdown-grace",
    type=click.FloatRange(min=0, max=MAX_SHUTDOWN_GRACE),
    default=DEFAULT_SHUTDOWN_GRACE,
    show_default=True,
    help="Seconds mounts and unmounts in progress have to finish after SIGTERM before they are "
    "cancelled; the daemon exits within this grace plus one second.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
def server_command(
    *,
    socket_path: str,
    prefixes: tuple[str, ...],
    allow_other: bool,
    max_mounts_per_user: int,
    request_timeout: float,
    operation_timeout: float,
    workers: int,
    max_connections: int,
    max_connections_per_uid: int,
    max_requests_per_uid: int,
    shutdown_grace: float,
    log_level: str,
) -> None:
    """Run the privileged FUSE proxy daemon (as root, in the node's pid namespace).

    SIGTERM or SIGINT stop it: it exits 0 within --shutdown-grace plus one second, even while
    it starts.
    """
    policy = _policy(prefixes, allow_other, max_mounts_per_user)
    limits = _limits(workers, max_connections, max_connections_per_uid, max_requests_per_uid)
    try:
        config = ServerConfig(
            socket_path=socket_path,
            policy=policy,
            request_timeout=request_timeout,
            operation_timeout=operation_timeout,
            workers=limits.workers,
            max_connections=limits.max_connections,
            max_connections_per_uid=limits.max_connections_per_uid,
            max_requests_per_uid=limits.max_requests_per_uid,
            shutdown_grace=shutdown_grace,
        )
    except ValueError as error:
        raise BadInput(str(error)) from error
    # Become a small process (see podwright.adapters.fuse.server.main): same pid, same options.
    sys.stdout.flush()
    sys.stderr.flush()
    # From here SIGTERM must stop the daemon cleanly, not kill it: it is held (the mask
    # survives the exec) until the daemon's handlers are in place, and the daemon unblocks it.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        os.execv(
            sys.executable,
            [sys.executable, "-m", "podwright.adapters.fuse.server", config.to_json(), log_level],
        )
    finally:  # reached only when the exec failed
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@fuse_proxy_group.command("shim", context_settings=_RAW, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def shim_command(args: tuple[str, ...]) -> None:
    """fusermount's command line, served by the daemon (see 'shim -h')."""
    sys.exit(shim.main(["fusermount3", *args]))


@fuse_proxy_group.command("wrapper", context_settings=_RAW, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def wrapper_command(args: tuple[str, ...]) -> None:
    """-m MOUNTPOINT [-o OPTS]... -- CMD ARGS: mount first, run CMD on /dev/fd/N."""
    sys.exit(wrapper.main(["fusermount-wrapper", *args]))


@fuse_proxy_group.command("install-shim")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option(
    "--interpreter",
    default=DEFAULT_INTERPRETER,
    show_default=True,
    help="The #! line's interpreter (with arguments) in the target image.",
)
def install_shim_command(directory: str, interpreter: str) -> None:
    """Write fusermount, fusermount3 and fusermount-wrapper (one zipapp) into DIRECTORY."""
    try:
        paths = install_bundle(directory, interpreter)
    except ValueError as error:
        raise BadInput(f"--interpreter: {error}") from error
    except OSError as error:
        raise click.ClickException(f"cannot write into {directory}: {error.strerror}") from error
    for path in paths:
        click.echo(path)


@fuse_proxy_group.command("ping")
@click.option(
    "--socket",
    "socket_path",
    envvar=SOCKET_ENV,
    default=DEFAULT_SOCKET_PATH,
    show_default=True,
    help=f"The daemon's socket (also ${SOCKET_ENV}).",
)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=5.0)
def ping_command(socket_path: str, timeout: float) -> None:
    """Exit 0 when the daemon answers (its liveness probe)."""
    try:
        ProxyClient(socket_path, timeout).ping()
    except FuseProxyError as error:
        raise click.ClickException(str(error)) from error
    click.echo(f"the FUSE proxy at {socket_path} answers")


@fuse_proxy_group.command("manifests")
@click.option("--image", required=True, help="Image with podwright installed (daemon and shim).")
@click.option("--namespace", default=DEFAULT_NAMESPACE, show_default=True)
@click.option("--socket-dir", default=DEFAULT_SOCKET_DIR, show_default=True)
@_policy_options
@_limit_options
@click.option(
    "--example-pod",
    is_flag=True,
    help="Also print a pod granted FUSE through the proxy (the pieces every such pod needs).",
)
@click.option(
    "--example-image",
    metavar="IMAGE",
    help="The example pod's image (default: --image). It needs python3 (the shim runs on it), "
    "the FUSE adapter the pod will run (gcsfuse, s3fs, rclone, squashfuse...), and sh and "
    "sleep for the example's command, which prints the shim's version and waits.",
)
def manifests_command(
    *,
    image: str,
    namespace: str,
    socket_dir: str,
    prefixes: tuple[str, ...],
    allow_other: bool,
    max_mounts_per_user: int,
    workers: int,
    max_connections: int,
    max_connections_per_uid: int,
    max_requests_per_uid: int,
    example_pod: bool,
    example_image: str | None,
) -> None:
    """Print the daemon's Namespace, ServiceAccount and DaemonSet as YAML (and an example pod),
    each as a real API server accepts it."""
    # The manifests' vocabulary (the Kubernetes client's models, PyYAML) is loaded here, not by
    # the daemon, the shim or 'ping', the DaemonSet's liveness probe.
    from podwright.adapters.documents import dump_yaml  # noqa: PLC0415
    from podwright.core.fuse_proxy.manifests import (  # noqa: PLC0415
        DaemonSetOptions,
        FuseProxySetup,
        daemon_manifests,
    )

    policy = _policy(prefixes, allow_other, max_mounts_per_user)
    limits = _limits(workers, max_connections, max_connections_per_uid, max_requests_per_uid)
    if example_image is not None and not example_pod:
        raise BadInput("--example-image needs --example-pod")
    try:
        options = DaemonSetOptions(
            image=image, policy=policy, limits=limits, namespace=namespace, socket_dir=socket_dir
        )
        documents = daemon_manifests(options)
        if example_pod:
            setup = FuseProxySetup(shim_image=image, socket_dir=socket_dir)
            documents.append(_example_pod(setup, example_image or image))
    except ValueError as error:
        raise BadInput(str(error)) from error
    click.echo("---\n".join(dump_yaml(document) for document in documents), nl=False)


EXAMPLE_POD_NAME = "fuse-proxy-example"
EXAMPLE_COMMAND = [
    "sh",
    "-c",
    "fusermount3 -V || exit 1; trap 'exit 0' TERM; sleep infinity & wait",
]
"""Shows that the shim is in place (``kubectl logs``), then waits for ``kubectl exec`` (and
ends at once on SIGTERM)."""


def _example_pod(setup: FuseProxySetup, image: str) -> dict[str, Any]:
    from kubernetes.client import V1Container, V1PodSpec  # noqa: PLC0415 (see manifests_command)

    from podwright.core.pod_template import PodTemplate  # noqa: PLC0415

    primary = V1Container(name="primary", image=image, command=EXAMPLE_COMMAND)
    template = PodTemplate.from_spec(V1PodSpec(containers=[primary]))
    return template.allow_fuse_via_proxy(setup).to_k8s_pod(name=EXAMPLE_POD_NAME)
