"""Properties of PodTemplate grants over generated pod specs (hypothesis)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from kubernetes.client import (
    V1Capabilities,
    V1ConfigMapVolumeSource,
    V1Container,
    V1EmptyDirVolumeSource,
    V1HostPathVolumeSource,
    V1PodSpec,
    V1ResourceRequirements,
    V1SecurityContext,
    V1Volume,
    V1VolumeMount,
)

from podwright import PodTemplate, PodTemplateError
from podwright.core.pod_template import (
    APPARMOR_ANNOTATION_PREFIX,
    FUSE_CAPABILITY_ANNOTATION,
    FUSE_DEVICE_RESOURCE,
    NESTED_SANDBOXING_CAPABILITY_ANNOTATION,
    PRIMARY_CONTAINER_ANNOTATION,
)
from tests.manifests import api_server_errors, assert_valid_pod, schema_errors

Grant = Callable[[PodTemplate], PodTemplate]
GRANTS: dict[str, Grant] = {
    "fuse": lambda t: t.allow_fuse(),
    "fuse-privileged": lambda t: t.allow_fuse(privileged=True),
    "nested-sandboxing": lambda t: t.allow_nested_sandboxing(),
    "grace-period": lambda t: t.with_termination_grace_period(7),
}

Check = Callable[[dict[str, Any], dict[str, str], dict[str, Any]], bool]
GRANTED: dict[str, Check] = {
    "fuse": lambda primary, annotations, _: (
        primary["resources"]["limits"][FUSE_DEVICE_RESOURCE]
        == primary["resources"]["requests"][FUSE_DEVICE_RESOURCE]
        and "SYS_ADMIN" in primary["securityContext"]["capabilities"]["add"]
        and annotations[FUSE_CAPABILITY_ANNOTATION] == "device-plugin"
    ),
    "fuse-privileged": lambda primary, annotations, spec: (
        primary["securityContext"]["privileged"] is True
        and any(m["mountPath"] == "/dev/fuse" for m in primary["volumeMounts"])
        and any(v.get("hostPath", {}).get("path") == "/dev/fuse" for v in spec["volumes"])
        and annotations[FUSE_CAPABILITY_ANNOTATION] == "privileged"
    ),
    "nested-sandboxing": lambda primary, annotations, _: (
        primary["securityContext"]["allowPrivilegeEscalation"] is False
        and "SYS_ADMIN" in primary["securityContext"]["capabilities"]["add"]
        and annotations[APPARMOR_ANNOTATION_PREFIX + primary["name"]] == "unconfined"
        and annotations[NESTED_SANDBOXING_CAPABILITY_ANNOTATION] == "true"
    ),
    "grace-period": lambda _, __, spec: spec["terminationGracePeriodSeconds"] == 7,
}


def _primary_of(pod: dict[str, Any]) -> dict[str, Any]:
    name = pod["metadata"]["annotations"][PRIMARY_CONTAINER_ANNOTATION]
    (primary,) = [c for c in pod["spec"]["containers"] if c["name"] == name]
    return primary  # type: ignore[no-any-return]


CONTAINER_NAMES = ["primary", "main", "sidecar", "proxy"]
VOLUMES = {
    "data": V1Volume(name="data", empty_dir=V1EmptyDirVolumeSource(size_limit="1Gi")),
    "config": V1Volume(name="config", config_map=V1ConfigMapVolumeSource(name="settings")),
    "host-fuse": V1Volume(name="host-fuse", host_path=V1HostPathVolumeSource(path="/dev/fuse")),
    "podwright-dev-fuse": V1Volume(name="podwright-dev-fuse", empty_dir=V1EmptyDirVolumeSource()),
}


@st.composite
def security_contexts(draw: st.DrawFn) -> V1SecurityContext:
    privileged = draw(st.sampled_from([None, True, False]))
    escalation = draw(st.sampled_from([None, True, False]))
    added = draw(
        st.lists(
            st.sampled_from(["NET_ADMIN", "SYS_ADMIN", "CAP_SYS_ADMIN", "NET_RAW"]), unique=True
        )
    )
    dropped = draw(st.lists(st.sampled_from(["ALL", "NET_RAW", "SYS_ADMIN"]), unique=True))
    capabilities = draw(
        st.one_of(st.none(), st.just(V1Capabilities(add=added or None, drop=dropped or None)))
    )
    return V1SecurityContext(
        privileged=privileged,
        allow_privilege_escalation=escalation,
        capabilities=capabilities,
        run_as_user=draw(st.one_of(st.none(), st.integers(0, 65535))),
        read_only_root_filesystem=draw(st.one_of(st.none(), st.booleans())),
    )


@st.composite
def resource_requirements(draw: st.DrawFn) -> V1ResourceRequirements:
    requests = draw(
        st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from(["1", "500m", "2Gi"]))
    )
    limits = draw(
        st.dictionaries(st.sampled_from(["cpu", "memory"]), st.sampled_from(["2", "4Gi"]))
    )
    for extended in ("nvidia.com/gpu", FUSE_DEVICE_RESOURCE):
        amount = draw(st.sampled_from([None, "1", "2"]))
        if amount is not None:
            limits[extended] = amount
            if draw(st.booleans()):
                requests[extended] = amount
    return V1ResourceRequirements(requests=requests or None, limits=limits or None)


@st.composite
def containers(draw: st.DrawFn, name: str, volumes: list[str]) -> V1Container:
    mounted = draw(st.lists(st.sampled_from(volumes), unique=True)) if volumes else []
    mount_paths = {"host-fuse": "/dev/fuse"}
    return V1Container(
        name=name,
        image=draw(st.sampled_from([None, "busybox:1.36"])),
        args=draw(st.one_of(st.none(), st.lists(st.text("abc -", max_size=4), max_size=2))),
        security_context=draw(st.one_of(st.none(), security_contexts())),
        resources=draw(st.one_of(st.none(), resource_requirements())),
        volume_mounts=[
            V1VolumeMount(name=v, mount_path=mount_paths.get(v, f"/mnt/{v}")) for v in mounted
        ]
        or None,
    )


@st.composite
def templates(draw: st.DrawFn) -> PodTemplate:
    """Pod templates the API server would accept, with or without their primary container."""
    names = draw(st.lists(st.sampled_from(CONTAINER_NAMES), unique=True, max_size=3))
    volumes = draw(st.lists(st.sampled_from(list(VOLUMES)), unique=True, max_size=3))
    spec = None
    if names or draw(st.booleans()):
        spec = V1PodSpec(
            containers=[draw(containers(name, volumes)) for name in names],
            init_containers=[draw(containers("setup", volumes))] if draw(st.booleans()) else None,
            volumes=[VOLUMES[v] for v in volumes] or None,
            host_ipc=draw(st.one_of(st.none(), st.booleans())),
        )
    annotations = draw(
        st.dictionaries(st.sampled_from(["owner", "example.com/team"]), st.sampled_from(["a", ""]))
    )
    for name in names:
        profile = draw(st.sampled_from([None, "runtime/default", "unconfined"]))
        if profile:
            annotations[APPARMOR_ANNOTATION_PREFIX + name] = profile
    template = PodTemplate(
        pod_spec=spec,
        primary_container_name=draw(st.sampled_from([*names, "primary", "worker"])),
        labels=draw(
            st.one_of(
                st.none(),
                st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["x", "y-1"])),
            )
        ),
        annotations=annotations or None,
    )
    # Keep only inputs the API server itself would accept.
    pod = template.to_k8s_pod()
    assume(not schema_errors(pod) and not api_server_errors(pod))
    return template


def _sys_admin_free(capabilities: list[str]) -> list[str]:
    return [c for c in capabilities if c.upper().removeprefix("CAP_") != "SYS_ADMIN"]


def _prune(node: Any) -> Any:
    if isinstance(node, dict):
        pruned = {k: _prune(v) for k, v in node.items()}
        return {k: v for k, v in pruned.items() if v not in ({}, [], None)}
    if isinstance(node, list):
        return [_prune(v) for v in node]
    return node


def _without_grant_owned_fields(pod: dict[str, Any], primary: str) -> dict[str, Any]:
    """The manifest minus every field a grant may legitimately set on the primary container."""
    pod = copy.deepcopy(pod)
    annotations = pod["metadata"].get("annotations", {})
    for key in (
        FUSE_CAPABILITY_ANNOTATION,
        NESTED_SANDBOXING_CAPABILITY_ANNOTATION,
        APPARMOR_ANNOTATION_PREFIX + primary,
    ):
        annotations.pop(key, None)
    spec = pod["spec"]
    spec.pop("terminationGracePeriodSeconds", None)
    spec["volumes"] = [
        v for v in spec.get("volumes", []) if v.get("hostPath", {}).get("path") != "/dev/fuse"
    ]
    for container in spec["containers"]:
        if container["name"] != primary:
            continue
        context = container.get("securityContext", {})
        context.pop("privileged", None)
        context.pop("allowPrivilegeEscalation", None)
        capabilities = context.get("capabilities", {})
        capabilities["add"] = _sys_admin_free(capabilities.get("add", []))
        for amounts in container.get("resources", {}).values():
            amounts.pop(FUSE_DEVICE_RESOURCE, None)
        container["volumeMounts"] = [
            m for m in container.get("volumeMounts", []) if m["mountPath"] != "/dev/fuse"
        ]
    return _prune(pod)  # type: ignore[no-any-return]


@pytest.mark.parametrize("grant_name", list(GRANTS))
@given(template=templates())
def test_a_grant_refuses_or_yields_a_valid_idempotent_pod_and_never_mutates(
    grant_name: str, template: PodTemplate
) -> None:
    grant = GRANTS[grant_name]
    original = copy.deepcopy(template)
    try:
        once = grant(template)
    except PodTemplateError:
        assert template == original
        return
    pod = once.to_k8s_pod()
    assert_valid_pod(pod)
    assert GRANTED[grant_name](_primary_of(pod), pod["metadata"]["annotations"], pod["spec"])
    assert grant(once) == once
    assert template == original


@pytest.mark.parametrize("grant_name", list(GRANTS))
@given(template=templates())
def test_a_grant_preserves_every_field_it_does_not_own(
    grant_name: str, template: PodTemplate
) -> None:
    try:
        granted = GRANTS[grant_name](template)
    except PodTemplateError:
        assume(False)
        return
    primary = template.primary_container_name
    assert _without_grant_owned_fields(granted.to_k8s_pod(), primary) == (
        _without_grant_owned_fields(template.to_k8s_pod(), primary)
    )


def _outcome(chain: Grant, template: PodTemplate) -> PodTemplate | None:
    try:
        return chain(template)
    except PodTemplateError:
        return None


@given(template=templates())
def test_device_plugin_fuse_and_nested_sandboxing_commute(template: PodTemplate) -> None:
    fuse_first = _outcome(lambda t: t.allow_fuse().allow_nested_sandboxing(), template)
    sandbox_first = _outcome(lambda t: t.allow_nested_sandboxing().allow_fuse(), template)
    assert fuse_first == sandbox_first
    if fuse_first is not None:
        assert_valid_pod(fuse_first.to_k8s_pod())


@given(template=templates())
def test_privileged_fuse_and_nested_sandboxing_never_compose(template: PodTemplate) -> None:
    for chain in (
        lambda t: t.allow_fuse(privileged=True).allow_nested_sandboxing(),
        lambda t: t.allow_nested_sandboxing().allow_fuse(privileged=True),
    ):
        with pytest.raises(PodTemplateError):
            chain(template)
