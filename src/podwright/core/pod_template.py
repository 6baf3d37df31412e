"""Pod templates whose security posture grants exactly what a workload needs, and nothing more.

Every podwright workload runs in a pod built from a :class:`PodTemplate`: a ``V1PodSpec`` from the
official Kubernetes client, the name of its *primary* container (the one that runs the user's
code), and pod labels and annotations. Grants return a new template that carries one capability
(an in-process FUSE mount, nested sandboxes) applied to the primary container only; they never
mutate the template they are called on, re-applying one is a no-op, and every field a grant does
not own is preserved. A grant that would contradict a posture the template already pins raises
:class:`PodTemplateError` (a ``ValueError``) rather than silently weakening or overriding it.

This module is pure: every method is a function of the template and its arguments.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Callable, Mapping
from datetime import timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from kubernetes.client import (
    V1Capabilities,
    V1Container,
    V1HostPathVolumeSource,
    V1ObjectMeta,
    V1PodSpec,
    V1ResourceRequirements,
    V1SecurityContext,
    V1Volume,
    V1VolumeMount,
)

from podwright.core import quantities
from podwright.core.fuse_proxy.manifests import (
    FuseProxyPodConflictError,
    FuseProxySetup,
    apply_fuse_proxy,
)
from podwright.core.k8s_names import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)

DEFAULT_PRIMARY_CONTAINER_NAME = "primary"

FUSE_DEVICE_RESOURCE = "smarter-devices/fuse"
"""Extended resource advertised by the FUSE device plugin (smarter-device-manager and kin)."""

FUSE_CAPABILITY_ANNOTATION = "podwright.dev/capability-fuse"
NESTED_SANDBOXING_CAPABILITY_ANNOTATION = "podwright.dev/capability-nested-sandboxing"
PRIMARY_CONTAINER_ANNOTATION = "podwright.dev/primary-container"
KUBECTL_DEFAULT_CONTAINER_ANNOTATION = "kubectl.kubernetes.io/default-container"
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"

DEV_FUSE = "/dev/fuse"
DEV_FUSE_VOLUME_NAME = "podwright-dev-fuse"
SYS_ADMIN = "SYS_ADMIN"
APPARMOR_UNCONFINED = "unconfined"
MAX_GRACE_PERIOD_SECONDS = 2**63 - 1


class FuseGrant(StrEnum):
    """How a template was granted FUSE; the value of the ``capability-fuse`` audit annotation."""

    DEVICE_PLUGIN = "device-plugin"
    PRIVILEGED = "privileged"
    PROXY = "proxy"


NESTED_SANDBOXING_GRANTED = "true"

ProblemCheck = Callable[[str], str | None]
"""A naming rule: why a value breaks it, or None (see :mod:`podwright.core.k8s_names`)."""


class PodTemplateError(ValueError):
    """A request a template cannot honour: a conflicting posture, a missing container."""


@dataclasses.dataclass(frozen=True)
class PodTemplate:
    """A pod spec, its primary container, and pod metadata; grants return modified copies.

    The constructor keeps what it is given (use :meth:`from_spec` for a defensive copy and for
    choosing the primary container). A template whose spec is ``None`` or lacks the primary
    container is valid: every method that returns a spec synthesizes the primary container,
    named ``primary_container_name``, for later stages to fill with an image and a command.
    """

    pod_spec: V1PodSpec | None = None
    primary_container_name: str = DEFAULT_PRIMARY_CONTAINER_NAME
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None

    def __post_init__(self) -> None:
        if self.pod_spec is not None and not isinstance(self.pod_spec, V1PodSpec):
            raise TypeError(
                f"pod_spec must be a kubernetes.client.V1PodSpec or None, "
                f"not {type(self.pod_spec).__name__}"
            )
        _check_container_name("primary_container_name", self.primary_container_name)
        _check_string_map("labels", self.labels, check_value=label_value_problem)
        _check_string_map("annotations", self.annotations, check_value=None)

    @classmethod
    def from_spec(
        cls,
        pod_spec: V1PodSpec,
        primary_container_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> PodTemplate:
        """Wrap a deep copy of ``pod_spec``, choosing its primary container.

        The primary container is, in order: the container named ``primary_container_name`` (which
        must exist); else the container named ``primary``; else the only container; a spec with
        several containers and none named ``primary`` is an error. A spec with no containers gets
        a synthesized ``primary`` container.
        """
        if not isinstance(pod_spec, V1PodSpec):
            raise TypeError(
                f"pod_spec must be a kubernetes.client.V1PodSpec, not {type(pod_spec).__name__}"
            )
        primary = _chosen_primary(pod_spec, primary_container_name)
        return cls(
            pod_spec=_copy_spec(pod_spec),
            primary_container_name=primary,
            labels=None if labels is None else dict(labels),
            annotations=None if annotations is None else dict(annotations),
        )

    @classmethod
    def from_manifest(
        cls,
        pod_spec: Mapping[str, object],
        primary_container_name: str | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> PodTemplate:
        """Wrap the ``V1PodSpec`` that ``pod_spec`` (a manifest's spec, camelCase) validates
        to, choosing its primary container as :meth:`from_spec` does; a pydantic
        ``ValidationError`` says what is invalid. The template is the one
        ``from_spec(V1PodSpec.model_validate(pod_spec))`` makes, for one validation instead of
        two (from_spec's copy validates again): for a renderer that builds specs as manifests."""
        spec = V1PodSpec.model_validate(pod_spec)
        return cls(
            pod_spec=spec,
            primary_container_name=_chosen_primary(spec, primary_container_name),
            labels=None if labels is None else dict(labels),
            annotations=None if annotations is None else dict(annotations),
        )

    def allow_fuse(self, privileged: bool = False) -> PodTemplate:
        """Grant the primary container an in-process FUSE mount.

        By default, through the FUSE device plugin: the ``smarter-devices/fuse`` extended
        resource as request and limit (the plugin then admits ``/dev/fuse`` through the devices
        cgroup) and ``SYS_ADMIN`` for mount(2); no privilege, no hostPath. ``privileged=True`` is
        the escape hatch for clusters without the plugin: a ``/dev/fuse`` hostPath volume of
        type CharDevice mounted at ``/dev/fuse`` and ``privileged: true``; it refuses a primary
        container that pins ``privileged: false`` or ``allowPrivilegeEscalation: false`` (which
        nested sandboxing sets). The two modes exclude each other. Both stamp the
        ``podwright.dev/capability-fuse`` annotation with the mode.
        """
        if not isinstance(privileged, bool):
            raise TypeError(f"privileged must be a bool, not {type(privileged).__name__}")
        grant = FuseGrant.PRIVILEGED if privileged else FuseGrant.DEVICE_PLUGIN
        spec, primary = self._working_copy()
        annotations = dict(self.annotations or {})
        _record_annotation(annotations, FUSE_CAPABILITY_ANNOTATION, grant.value, "grant FUSE")
        if privileged:
            _grant_privileged_fuse(spec, primary)
        else:
            _request_fuse_device(primary)
            _add_sys_admin(primary, "grant FUSE")
        return dataclasses.replace(self, pod_spec=spec, annotations=annotations)

    def allow_fuse_via_proxy(self, setup: FuseProxySetup) -> PodTemplate:
        """Grant FUSE mounts through podwright's per-node FUSE proxy: no privilege at all.

        The primary container gets no ``privileged``, no ``SYS_ADMIN`` and no ``/dev/fuse``:
        it mounts the proxy's socket directory read-only, and the shim (installed by an init
        container from ``setup.shim_image``) is mounted over ``fusermount`` and ``fusermount3``,
        so FUSE adapters that fall back to fusermount (libfuse does when it cannot mount) work
        unmodified; adapters that open ``/dev/fuse`` themselves run under
        ``/opt/podwright-fuse/fusermount-wrapper``. The shim needs a ``python3`` in the image.
        Stamps ``podwright.dev/capability-fuse: proxy``; excludes the other FUSE grants, and
        composes with nested sandboxing.
        """
        if not isinstance(setup, FuseProxySetup):
            raise TypeError(f"setup must be a FuseProxySetup, not {type(setup).__name__}")
        spec, primary = self._working_copy()
        annotations = dict(self.annotations or {})
        action = "grant FUSE through the FUSE proxy"
        _record_annotation(annotations, FUSE_CAPABILITY_ANNOTATION, FuseGrant.PROXY.value, action)
        try:
            apply_fuse_proxy(spec, primary, setup)
        except FuseProxyPodConflictError as conflict:
            raise PodTemplateError(f"cannot {action}: {conflict}") from None
        return dataclasses.replace(self, pod_spec=spec, annotations=annotations)

    def allow_nested_sandboxing(self) -> PodTemplate:
        """Grant the primary container what nested sandboxes (bubblewrap and kin) need, only that.

        ``SYS_ADMIN`` (so the runtime's default seccomp profile admits mount, pivot_root, setns
        and unshare), ``allowPrivilegeEscalation: false``, the AppArmor ``unconfined`` pod
        annotation for the primary container, and the ``podwright.dev/capability-nested-
        sandboxing`` audit annotation. Refuses a primary container that pins ``privileged:
        true`` (Kubernetes rejects it together with ``allowPrivilegeEscalation: false``),
        ``allowPrivilegeEscalation: true``, or another AppArmor profile.
        """
        spec, primary = self._working_copy()
        action = "grant nested sandboxing"
        context = primary.security_context or V1SecurityContext()
        who = f"primary container {primary.name!r}"
        if context.privileged is True:
            raise PodTemplateError(
                f"cannot {action}: {who} is privileged (privileged: true), and Kubernetes rejects "
                "a privileged container with allowPrivilegeEscalation: false; privileged FUSE "
                "sets privileged: true, so use the device-plugin FUSE grant instead"
            )
        if context.allow_privilege_escalation is True:
            raise PodTemplateError(
                f"cannot {action}: {who} pins allowPrivilegeEscalation: true, "
                "and nested sandboxing sets it to false"
            )
        profile = context.app_armor_profile
        if profile is not None and profile.type != "Unconfined":
            raise PodTemplateError(
                f"cannot {action}: {who} pins securityContext.appArmorProfile type "
                f"{profile.type!r}, and nested sandboxing needs 'Unconfined'"
            )
        annotations = dict(self.annotations or {})
        _record_annotation(
            annotations, APPARMOR_ANNOTATION_PREFIX + primary.name, APPARMOR_UNCONFINED, action
        )
        _record_annotation(
            annotations, NESTED_SANDBOXING_CAPABILITY_ANNOTATION, NESTED_SANDBOXING_GRANTED, action
        )
        _add_sys_admin(primary, action)
        context = primary.security_context or V1SecurityContext()
        context.allow_privilege_escalation = False
        primary.security_context = context
        return dataclasses.replace(self, pod_spec=spec, annotations=annotations)

    def with_termination_grace_period(self, grace_period: int | timedelta) -> PodTemplate:
        """Set ``terminationGracePeriodSeconds``: a non-negative whole number of seconds."""
        if isinstance(grace_period, bool) or not isinstance(grace_period, int | timedelta):
            raise TypeError(
                "grace_period must be an int (seconds) or a datetime.timedelta, "
                f"not {type(grace_period).__name__}"
            )
        if isinstance(grace_period, timedelta):
            if grace_period % timedelta(seconds=1):
                raise ValueError(f"grace_period must be whole seconds, got {grace_period}")
            seconds = grace_period // timedelta(seconds=1)
        else:
            seconds = grace_period
        if not 0 <= seconds <= MAX_GRACE_PERIOD_SECONDS:
            raise ValueError(
                f"grace_period must be between 0 and {MAX_GRACE_PERIOD_SECONDS} seconds, "
                f"got {seconds}"
            )
        spec, _ = self._with_primary()
        update = {"termination_grace_period_seconds": seconds}
        return dataclasses.replace(self, pod_spec=spec.model_copy(update=update))

    def to_k8s_pod(
        self,
        *,
        name: str | None = None,
        generate_name: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """The complete Pod manifest, as the API server expects it (camelCase, JSON-ready).

        The primary container's name is recorded in the ``podwright.dev/primary-container``
        annotation so later stages can find it, and offered to kubectl as the default container
        for ``logs`` and ``exec`` unless the template already names one.
        """
        if name is not None:
            _check_name("name", name, dns1123_subdomain_problem)
        if generate_name is not None:
            # The API server appends a random suffix; a trailing '-' is how prefixes end.
            prefix = generate_name.removesuffix("-") or generate_name
            _check_name("generate_name", prefix, dns1123_subdomain_problem)
        if namespace is not None:
            _check_name("namespace", namespace, dns1123_label_problem)
        spec, primary = self._with_primary()
        annotations = dict(self.annotations or {})
        _record_annotation(
            annotations, PRIMARY_CONTAINER_ANNOTATION, primary.name, "build the pod manifest"
        )
        annotations.setdefault(KUBECTL_DEFAULT_CONTAINER_ANNOTATION, primary.name)
        metadata = V1ObjectMeta(
            name=name,
            generate_name=generate_name,
            namespace=namespace,
            labels=dict(self.labels) if self.labels else None,
            annotations=annotations,
        )
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata.model_dump(by_alias=True, exclude_none=True, mode="json"),
            "spec": spec.model_dump(by_alias=True, exclude_none=True, mode="json"),
        }

    def _working_copy(self) -> tuple[V1PodSpec, V1Container]:
        """A private deep copy of the spec, holding the primary container, and that container."""
        spec = V1PodSpec(containers=[]) if self.pod_spec is None else _copy_spec(self.pod_spec)
        primary = self._primary_of(spec)
        if primary is not None:
            return spec, primary
        primary = V1Container(name=self.primary_container_name)
        spec.containers.append(primary)
        return spec, primary

    def _with_primary(self) -> tuple[V1PodSpec, V1Container]:
        """The spec holding the primary container, and that container, to read or to copy with
        an update (never to change in place): the template's own spec when it holds it (no
        copy), else a shallow copy with the container synthesized."""
        spec = V1PodSpec(containers=[]) if self.pod_spec is None else self.pod_spec
        primary = self._primary_of(spec)
        if primary is not None:
            return spec, primary
        primary = V1Container(name=self.primary_container_name)
        return spec.model_copy(update={"containers": [*spec.containers, primary]}), primary

    def _primary_of(self, spec: V1PodSpec) -> V1Container | None:
        """The primary container of ``spec`` (None: it has none); a PodTemplateError when it is
        declared twice or among the init or ephemeral containers."""
        name = self.primary_container_name
        for other, field in (
            (spec.init_containers, "initContainers"),
            (spec.ephemeral_containers, "ephemeralContainers"),
        ):
            if any(container.name == name for container in other or ()):
                raise PodTemplateError(
                    f"primary container {name!r} is declared in {field}; the primary container "
                    "must be one of the pod's containers"
                )
        matches = [container for container in spec.containers if container.name == name]
        if len(matches) > 1:
            raise PodTemplateError(
                f"the pod spec declares {len(matches)} containers named {name!r}; "
                "container names must be unique"
            )
        return matches[0] if matches else None


def _chosen_primary(pod_spec: V1PodSpec, primary_container_name: str | None) -> str:
    """The primary container of ``pod_spec``, as :meth:`PodTemplate.from_spec` chooses it."""
    names = [container.name for container in pod_spec.containers]
    if primary_container_name is not None:
        if primary_container_name not in names:
            raise PodTemplateError(
                f"primary_container_name {primary_container_name!r} names no container of "
                f"the pod spec; {_describe_containers(names)}"
            )
        return primary_container_name
    if DEFAULT_PRIMARY_CONTAINER_NAME in names or not names:
        return DEFAULT_PRIMARY_CONTAINER_NAME
    if len(names) == 1:
        return names[0]
    raise PodTemplateError(
        f"cannot choose the primary container: the pod spec has {len(names)} containers "
        f"and none is named {DEFAULT_PRIMARY_CONTAINER_NAME!r} "
        f"({_quoted(names)}); pass primary_container_name to choose one"
    )


def _copy_spec(spec: V1PodSpec) -> V1PodSpec:
    # A dump and re-validation is a deep copy that also re-checks the spec; it is several times
    # cheaper than pydantic's deep model_copy.
    return V1PodSpec.model_validate(spec.model_dump(by_alias=True, exclude_none=True))


def _grant_privileged_fuse(spec: V1PodSpec, primary: V1Container) -> None:
    context = primary.security_context or V1SecurityContext()
    action = f"grant privileged FUSE to primary container {primary.name!r}"
    if context.privileged is False:
        raise PodTemplateError(f"cannot {action}: it pins privileged: false")
    if context.allow_privilege_escalation is False:
        raise PodTemplateError(
            f"cannot {action}: it pins allowPrivilegeEscalation: false, and Kubernetes rejects "
            "a privileged container with it (nested sandboxing sets it; the device-plugin FUSE "
            "grant composes with nested sandboxing)"
        )
    volume_name = _ensure_dev_fuse_volume(spec)
    mounts = list(primary.volume_mounts or [])
    existing = [m for m in mounts if posixpath.normpath(m.mount_path) == DEV_FUSE]
    if existing and existing[0].name != volume_name:
        raise PodTemplateError(
            f"cannot {action}: it already mounts volume {existing[0].name!r} at {DEV_FUSE}"
        )
    if not existing:
        mounts.append(V1VolumeMount(name=volume_name, mount_path=DEV_FUSE))
    primary.volume_mounts = mounts
    context.privileged = True
    primary.security_context = context


def _ensure_dev_fuse_volume(spec: V1PodSpec) -> str:
    """The name of the pod's /dev/fuse hostPath volume, adding one when there is none."""
    volumes = list(spec.volumes or [])
    for volume in volumes:
        host_path = volume.host_path
        if host_path is not None and posixpath.normpath(host_path.path) == DEV_FUSE:
            if host_path.type not in (None, "", "CharDevice"):
                raise PodTemplateError(
                    f"cannot grant privileged FUSE: volume {volume.name!r} mounts {DEV_FUSE} from "
                    f"the host with type {host_path.type!r}; it must be CharDevice"
                )
            return volume.name
    if any(volume.name == DEV_FUSE_VOLUME_NAME for volume in volumes):
        raise PodTemplateError(
            f"cannot grant privileged FUSE: the volume name {DEV_FUSE_VOLUME_NAME!r} is taken by "
            f"a volume that is not the host's {DEV_FUSE}"
        )
    volumes.append(
        V1Volume(
            name=DEV_FUSE_VOLUME_NAME,
            host_path=V1HostPathVolumeSource(path=DEV_FUSE, type="CharDevice"),
        )
    )
    spec.volumes = volumes
    return DEV_FUSE_VOLUME_NAME


def _request_fuse_device(primary: V1Container) -> None:
    """Request and limit one FUSE device, keeping an amount the container already pins."""
    resources = primary.resources or V1ResourceRequirements()
    requests = dict(resources.requests or {})
    limits = dict(resources.limits or {})
    pinned = {
        where: amount
        for where, amount in (
            ("requests", requests.get(FUSE_DEVICE_RESOURCE)),
            ("limits", limits.get(FUSE_DEVICE_RESOURCE)),
        )
        if amount is not None
    }
    action = f"grant FUSE to primary container {primary.name!r}"
    values = {where: _device_count(amount) for where, amount in pinned.items()}
    for where, value in values.items():
        if value is None or value < 1:
            raise PodTemplateError(
                f"cannot {action}: resources.{where}[{FUSE_DEVICE_RESOURCE!r}] is "
                f"{pinned[where]!r}; it must be a whole number of devices, at least 1"
            )
    if len(set(values.values())) > 1:
        raise PodTemplateError(
            f"cannot {action}: its request ({pinned['requests']!r}) and limit "
            f"({pinned['limits']!r}) of {FUSE_DEVICE_RESOURCE!r} differ; an extended resource's "
            "request must equal its limit"
        )
    amount = pinned.get("limits") or pinned.get("requests") or "1"
    requests[FUSE_DEVICE_RESOURCE] = amount
    limits[FUSE_DEVICE_RESOURCE] = amount
    resources.requests = requests
    resources.limits = limits
    primary.resources = resources


def _device_count(amount: str) -> Decimal | None:
    """A quantity of devices if ``amount`` is a whole-number quantity, else None."""
    try:
        value = quantities.parse(amount)
    except quantities.QuantityError:
        return None
    return value if value == value.to_integral_value() else None


def _is_sys_admin(capability: str) -> bool:
    return capability.upper().removeprefix("CAP_") == SYS_ADMIN


def _add_sys_admin(primary: V1Container, action: str) -> None:
    """Add SYS_ADMIN to the primary container's capabilities, spelled ``SYS_ADMIN`` once.

    Runtimes treat ``CAP_SYS_ADMIN`` and ``SYS_ADMIN`` alike, but the API server refuses the
    ``CAP_`` spelling next to ``allowPrivilegeEscalation: false``, so any spelling is rewritten.
    """
    context = primary.security_context or V1SecurityContext()
    capabilities = context.capabilities or V1Capabilities()
    if any(_is_sys_admin(dropped) for dropped in capabilities.drop or ()):
        raise PodTemplateError(
            f"cannot {action}: primary container {primary.name!r} drops SYS_ADMIN "
            "(securityContext.capabilities.drop), which the grant needs"
        )
    added: list[str] = []
    for capability in capabilities.add or ():
        if not _is_sys_admin(capability):
            added.append(capability)
        elif SYS_ADMIN not in added:
            added.append(SYS_ADMIN)
    if SYS_ADMIN not in added:
        added.append(SYS_ADMIN)
    capabilities.add = added
    context.capabilities = capabilities
    primary.security_context = context


def _record_annotation(annotations: dict[str, str], key: str, value: str, action: str) -> None:
    """Set ``key`` to ``value``, refusing to overwrite a different value someone else chose."""
    existing = annotations.setdefault(key, value)
    if existing != value:
        raise PodTemplateError(
            f"cannot {action}: annotation {key} is already {existing!r}, and this needs {value!r}"
        )


def _check_container_name(argument: str, name: object) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{argument} must be a str, not {type(name).__name__}")
    _check_name(argument, name, dns1123_label_problem)


def _check_name(argument: str, name: str, problem_of: ProblemCheck) -> None:
    problem = problem_of(name)
    if problem:
        raise PodTemplateError(f"{argument} {name!r} {problem}")


def _check_string_map(argument: str, values: object, check_value: ProblemCheck | None) -> None:
    if values is None:
        return
    if not isinstance(values, Mapping):
        raise TypeError(f"{argument} must be a mapping of str to str, not {type(values).__name__}")
    for key, value in values.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(
                f"{argument} must map str to str; {key!r}: {value!r} is "
                f"{type(key).__name__}: {type(value).__name__}"
            )
        problem = qualified_name_problem(key)
        if problem:
            raise PodTemplateError(f"{argument} key {key!r} {problem}")
        problem = check_value(value) if check_value is not None else None
        if problem:
            raise PodTemplateError(f"{argument}[{key!r}] value {value!r} {problem}")


def _quoted(names: list[str]) -> str:
    return ", ".join(repr(name) for name in names)


def _describe_containers(names: list[str]) -> str:
    return f"its containers are {_quoted(names)}" if names else "it has no containers"
