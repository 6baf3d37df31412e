"""Kubernetes manifests for the FUSE proxy: the node daemon, and what a pod needs to use it.

The daemon is a DaemonSet in its own namespace: privileged (it opens ``/dev/fuse``, enters other
mount namespaces and calls mount(2)), in the node's pid namespace (it finds a caller's mount
namespace from its pid), on every Linux node whatever its taints, with the shared socket
directory from the host, and its policy and limits (per caller uid) on its command line. Its
liveness probe is ``podwright fuse-proxy ping`` in its own container, which the daemon answers
whatever its callers do. It needs no Kubernetes API access, so its service account carries no
token.

A pod that uses it gets no privilege at all: the socket directory, read-only; an init container
that installs the shim bundle into an ``emptyDir``; the shim mounted (``subPath``) over
``fusermount`` and ``fusermount3``, so that unmodified adapters run it; and
``$PODWRIGHT_FUSE_PROXY_SOCKET``. :func:`apply_fuse_proxy` adds these to a pod spec for
:meth:`podwright.core.pod_template.PodTemplate.allow_fuse_via_proxy`. The installer states cpu and
memory requests and limits (``FuseProxySetup.resources``), as every container podwright adds
does, so that a namespace's ResourceQuota on them admits the pod
(:mod:`podwright.core.helper_resources`).
"""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Any, TypeVar

from kubernetes.client import (
    V1Capabilities,
    V1Container,
    V1DaemonSet,
    V1DaemonSetSpec,
    V1DaemonSetUpdateStrategy,
    V1EmptyDirVolumeSource,
    V1EnvVar,
    V1ExecAction,
    V1HostPathVolumeSource,
    V1LabelSelector,
    V1Namespace,
    V1ObjectMeta,
    V1PodSpec,
    V1PodTemplateSpec,
    V1Probe,
    V1ResourceRequirements,
    V1RollingUpdateDaemonSet,
    V1SecurityContext,
    V1ServiceAccount,
    V1Toleration,
    V1Volume,
    V1VolumeMount,
)

from podwright.core.fuse_proxy.admission import DaemonLimits
from podwright.core.fuse_proxy.mount_policy import DEFAULT_MOUNT_PREFIXES, ProxyPolicy
from podwright.core.fuse_proxy.protocol import (
    DEFAULT_NAMESPACE,
    DEFAULT_SOCKET_DIR,
    SOCKET_ENV,
    SOCKET_NAME,
)
from podwright.core.helper_resources import DEFAULT_HELPER_RESOURCES, HelperResources

DAEMON_NAME = "podwright-fuse-proxy"
DEFAULT_FUSERMOUNT_PATHS = ("/usr/bin/fusermount", "/usr/bin/fusermount3")
SHIM_DIR = "/opt/podwright-fuse"
SHIM_VOLUME = "podwright-fuse-shim"
SOCKET_VOLUME = "podwright-fuse-proxy-socket"
SHIM_INIT_CONTAINER = "podwright-fuse-shim"
_SHIM_INSTALL_DIR = "/shim"
_NOBODY = 65534


_Item = TypeVar("_Item", V1Volume, V1Container, V1VolumeMount, V1EnvVar)


class FuseProxyPodConflictError(ValueError):
    """The pod spec already uses a name, path or variable the proxy's pieces need."""


@dataclasses.dataclass(frozen=True)
class DaemonSetOptions:
    """What varies between installations of the daemon."""

    image: str
    policy: ProxyPolicy = dataclasses.field(
        default_factory=lambda: ProxyPolicy(DEFAULT_MOUNT_PREFIXES)
    )
    limits: DaemonLimits = dataclasses.field(default_factory=DaemonLimits)
    namespace: str = DEFAULT_NAMESPACE
    socket_dir: str = DEFAULT_SOCKET_DIR
    priority_class_name: str | None = "system-node-critical"
    image_pull_policy: str = "IfNotPresent"


def daemon_manifests(options: DaemonSetOptions) -> list[dict[str, Any]]:
    """The Namespace, ServiceAccount and DaemonSet of the daemon, as the API server expects them."""
    labels = {"app.kubernetes.io/name": DAEMON_NAME, "app.kubernetes.io/part-of": "podwright"}
    socket_path = posixpath.join(options.socket_dir, SOCKET_NAME)
    command = ["podwright", "fuse-proxy", "server", "--socket", socket_path]
    for prefix in options.policy.mount_prefixes:
        command += ["--allow-prefix", prefix]
    command += ["--max-mounts-per-user", str(options.policy.max_mounts_per_user)]
    if options.policy.allow_other:
        command.append("--allow-other")
    limits = options.limits
    command += [
        *("--workers", str(limits.workers)),
        *("--max-connections", str(limits.max_connections)),
        *("--max-connections-per-uid", str(limits.max_connections_per_uid)),
        *("--max-requests-per-uid", str(limits.max_requests_per_uid)),
    ]
    container = V1Container(
        name="server",
        image=options.image,
        image_pull_policy=options.image_pull_policy,
        command=command,
        # Root, whatever the image's user (podwright's runs as 65532): a privileged container's
        # process has no capability unless it is root, and the daemon mounts and enters mount
        # namespaces.
        security_context=V1SecurityContext(privileged=True, run_as_user=0, run_as_group=0),
        volume_mounts=[V1VolumeMount(name=SOCKET_VOLUME, mount_path=options.socket_dir)],
        resources=V1ResourceRequirements(
            requests={"cpu": "10m", "memory": "64Mi"}, limits={"memory": "256Mi"}
        ),
        liveness_probe=V1Probe(
            _exec=V1ExecAction(
                command=["podwright", "fuse-proxy", "ping", "--socket", socket_path]
            ),
            period_seconds=30,
            timeout_seconds=10,
            failure_threshold=3,
        ),
    )
    pod_spec = V1PodSpec(
        service_account_name=DAEMON_NAME,
        automount_service_account_token=False,
        host_pid=True,
        node_selector={"kubernetes.io/os": "linux"},
        tolerations=[V1Toleration(operator="Exists")],
        priority_class_name=options.priority_class_name,
        termination_grace_period_seconds=30,
        containers=[container],
        volumes=[
            V1Volume(
                name=SOCKET_VOLUME,
                host_path=V1HostPathVolumeSource(path=options.socket_dir, type="DirectoryOrCreate"),
            )
        ],
    )
    daemon_set = V1DaemonSet(
        api_version="apps/v1",
        kind="DaemonSet",
        metadata=V1ObjectMeta(name=DAEMON_NAME, namespace=options.namespace, labels=labels),
        spec=V1DaemonSetSpec(
            selector=V1LabelSelector(match_labels=labels),
            update_strategy=V1DaemonSetUpdateStrategy(
                type="RollingUpdate", rolling_update=V1RollingUpdateDaemonSet(max_unavailable=1)
            ),
            template=V1PodTemplateSpec(metadata=V1ObjectMeta(labels=labels), spec=pod_spec),
        ),
    )
    namespace = V1Namespace(
        api_version="v1",
        kind="Namespace",
        metadata=V1ObjectMeta(
            name=options.namespace,
            labels={"pod-security.kubernetes.io/enforce": "privileged"},
        ),
    )
    account = V1ServiceAccount(
        api_version="v1",
        kind="ServiceAccount",
        metadata=V1ObjectMeta(name=DAEMON_NAME, namespace=options.namespace, labels=labels),
        automount_service_account_token=False,
    )
    return [_dump(namespace), _dump(account), _dump(daemon_set)]


def _dump(model: V1Namespace | V1ServiceAccount | V1DaemonSet) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


@dataclasses.dataclass(frozen=True)
class FuseProxySetup:
    """How a pod reaches the daemon: the image holding ``podwright``, and the paths involved."""

    shim_image: str
    socket_dir: str = DEFAULT_SOCKET_DIR
    fusermount_paths: tuple[str, ...] = DEFAULT_FUSERMOUNT_PATHS
    resources: HelperResources = DEFAULT_HELPER_RESOURCES
    """The shim installer's requests and limits."""

    def __post_init__(self) -> None:
        if not self.shim_image or self.shim_image.strip() != self.shim_image:
            raise ValueError(f"shim_image must be an image reference, got {self.shim_image!r}")
        for argument, path in [("socket_dir", self.socket_dir)] + [
            ("fusermount_paths", path) for path in self.fusermount_paths
        ]:
            if not path.startswith("/") or posixpath.normpath(path) != path:
                raise ValueError(f"{argument}: {path!r} must be a normalized absolute path")
        if not self.fusermount_paths:
            raise ValueError("fusermount_paths: at least one path is needed")

    @property
    def socket_path(self) -> str:
        return posixpath.join(self.socket_dir, SOCKET_NAME)


def apply_fuse_proxy(spec: V1PodSpec, primary: V1Container, setup: FuseProxySetup) -> None:
    """Add the proxy's pieces to ``spec`` (a private copy) and its ``primary`` container."""
    _ensure_volume(
        spec,
        V1Volume(
            name=SOCKET_VOLUME,
            host_path=V1HostPathVolumeSource(path=setup.socket_dir, type="Directory"),
        ),
    )
    _ensure_volume(
        spec, V1Volume(name=SHIM_VOLUME, empty_dir=V1EmptyDirVolumeSource(size_limit="16Mi"))
    )
    _ensure_init_container(spec, _shim_installer(setup.shim_image, setup.resources))
    mounts = [
        V1VolumeMount(name=SOCKET_VOLUME, mount_path=setup.socket_dir, read_only=True),
        V1VolumeMount(name=SHIM_VOLUME, mount_path=SHIM_DIR, read_only=True),
    ] + [
        V1VolumeMount(
            name=SHIM_VOLUME, mount_path=path, sub_path=posixpath.basename(path), read_only=True
        )
        for path in setup.fusermount_paths
    ]
    for mount in mounts:
        _ensure_mount(primary, mount)
    _ensure_env(primary, V1EnvVar(name=SOCKET_ENV, value=setup.socket_path))


def _shim_installer(image: str, resources: HelperResources) -> V1Container:
    amounts = resources.manifest()
    return V1Container(
        name=SHIM_INIT_CONTAINER,
        image=image,
        command=["podwright", "fuse-proxy", "install-shim", _SHIM_INSTALL_DIR],
        volume_mounts=[V1VolumeMount(name=SHIM_VOLUME, mount_path=_SHIM_INSTALL_DIR)],
        security_context=V1SecurityContext(
            run_as_user=_NOBODY,
            run_as_group=_NOBODY,
            run_as_non_root=True,
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=V1Capabilities(drop=["ALL"]),
        ),
        resources=V1ResourceRequirements(requests=amounts["requests"], limits=amounts["limits"]),
    )


def _ensure(existing: list[_Item] | None, item: _Item, same: str, conflict: str) -> list[_Item]:
    """``existing`` with ``item`` added, unless an equal one is there; a different one with the
    same ``same`` attribute (name or path) is a conflict, described by ``conflict``."""
    items: list[_Item] = [] if existing is None else list(existing)
    for other in items:
        if posixpath.normpath(getattr(other, same)) == getattr(item, same):
            if other != item:
                raise FuseProxyPodConflictError(conflict.format(other=other))
            return items
    items.append(item)
    return items


def _ensure_volume(spec: V1PodSpec, volume: V1Volume) -> None:
    spec.volumes = _ensure(
        spec.volumes,
        volume,
        "name",
        f"the pod already has a volume named {volume.name!r} that is not the FUSE proxy's",
    )


def _ensure_init_container(spec: V1PodSpec, container: V1Container) -> None:
    before = list(spec.init_containers or [])
    ensured = _ensure(
        before,
        container,
        "name",
        f"the pod already has an init container named {container.name!r} that is not the FUSE "
        "proxy's shim installer",
    )
    # The installer runs first, so that later init containers can mount FUSE too.
    spec.init_containers = [container, *before] if len(ensured) > len(before) else ensured


def _ensure_mount(primary: V1Container, mount: V1VolumeMount) -> None:
    primary.volume_mounts = _ensure(
        primary.volume_mounts,
        mount,
        "mount_path",
        f"primary container {primary.name!r} already mounts volume {{other.name!r}} at "
        f"{mount.mount_path}, which the FUSE proxy needs",
    )


def _ensure_env(primary: V1Container, variable: V1EnvVar) -> None:
    primary.env = _ensure(
        primary.env,
        variable,
        "name",
        f"primary container {primary.name!r} already sets {variable.name}, and the FUSE proxy "
        f"needs it to be {variable.value!r}",
    )
