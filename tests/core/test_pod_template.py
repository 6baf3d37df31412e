"""Decision matrices for PodTemplate: primary container, grants, their conflicts and composition."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kubernetes.client import (
    V1AppArmorProfile,
    V1Capabilities,
    V1Container,
    V1HostPathVolumeSource,
    V1PodSpec,
    V1ResourceRequirements,
    V1SecurityContext,
    V1Volume,
    V1VolumeMount,
)

import podwright
from podwright import PodTemplate, PodTemplateError
from podwright.core.pod_template import (
    APPARMOR_ANNOTATION_PREFIX,
    DEV_FUSE_VOLUME_NAME,
    FUSE_CAPABILITY_ANNOTATION,
    FUSE_DEVICE_RESOURCE,
    KUBECTL_DEFAULT_CONTAINER_ANNOTATION,
    NESTED_SANDBOXING_CAPABILITY_ANNOTATION,
    PRIMARY_CONTAINER_ANNOTATION,
)
from tests.manifests import APPARMOR_FIELD_SINCE, assert_valid_pod

UNSET: Any = None
APPARMOR = APPARMOR_ANNOTATION_PREFIX + "primary"


def spec_of(*containers: V1Container, **fields: Any) -> V1PodSpec:
    return V1PodSpec(containers=list(containers), **fields)


def with_context(**context: Any) -> PodTemplate:
    """A template whose primary container pins the given security-context fields."""
    return PodTemplate.from_spec(
        spec_of(
            V1Container(
                name="primary", image="busybox", security_context=V1SecurityContext(**context)
            )
        )
    )


def primary(template: PodTemplate) -> V1Container:
    assert template.pod_spec is not None
    (found,) = [
        c for c in template.pod_spec.containers if c.name == template.primary_container_name
    ]
    return found


def checked(template: PodTemplate, oldest: str | None = None) -> PodTemplate:
    assert_valid_pod(template.to_k8s_pod(name="checked"), oldest)
    return template


# Every pinned (privileged, allowPrivilegeEscalation) pair the API server accepts as input.
POSTURES = [
    pytest.param(privileged, escalation, id=f"privileged-{privileged}-escalation-{escalation}")
    for privileged in (True, False, UNSET)
    for escalation in (True, False, UNSET)
    if not (privileged is True and escalation is False)
]


def test_the_public_api_is_exactly_this() -> None:
    from podwright import api

    assert sorted(podwright.__all__) == sorted(
        ["PodTemplate", "PodTemplateError", "__version__", *api.__all__]
    )
    assert podwright.PodTemplate is PodTemplate
    assert issubclass(PodTemplateError, ValueError)


def test_the_fields_and_their_defaults() -> None:
    template = PodTemplate()
    assert template.pod_spec is None
    assert template.primary_container_name == "primary"
    assert template.labels is None
    assert template.annotations is None


# --- from_spec: the four primary-container rules -------------------------------------------


@pytest.mark.parametrize(
    ("names", "requested", "expected"),
    [
        pytest.param(["a", "b"], "b", "b", id="rule1-explicit-name-that-exists"),
        pytest.param(["primary"], "primary", "primary", id="rule1-explicit-primary"),
        pytest.param(["a", "primary"], None, "primary", id="rule2-container-named-primary"),
        pytest.param(["sidecar", "primary", "x"], None, "primary", id="rule2-among-three"),
        pytest.param(["main"], None, "main", id="rule3-single-container-adopted"),
        pytest.param([], None, "primary", id="no-containers-primary-is-synthesized"),
    ],
)
def test_from_spec_chooses_the_primary_container(
    names: list[str], requested: str | None, expected: str
) -> None:
    template = PodTemplate.from_spec(
        spec_of(*(V1Container(name=n) for n in names)), primary_container_name=requested
    )
    assert template.primary_container_name == expected
    assert [c.name for c in checked(template.allow_fuse()).pod_spec.containers] == (  # type: ignore[union-attr]
        names if expected in names else [*names, expected]
    )


@pytest.mark.parametrize(
    ("names", "requested", "message"),
    [
        pytest.param(
            ["a", "b"],
            "c",
            "primary_container_name 'c' names no container of the pod spec; "
            "its containers are 'a', 'b'",
            id="rule1-missing-name-lists-the-containers",
        ),
        pytest.param(
            [], "c", "names no container of the pod spec; it has no containers", id="rule1-empty"
        ),
        pytest.param(
            ["a", "b"],
            None,
            "the pod spec has 2 containers and none is named 'primary' ('a', 'b'); "
            "pass primary_container_name to choose one",
            id="rule4-ambiguous",
        ),
    ],
)
def test_from_spec_refuses(names: list[str], requested: str | None, message: str) -> None:
    with pytest.raises(PodTemplateError, match=message.replace("(", r"\(").replace(")", r"\)")):
        PodTemplate.from_spec(
            spec_of(*(V1Container(name=n) for n in names)), primary_container_name=requested
        )


def test_from_spec_deep_copies_both_ways() -> None:
    original = spec_of(V1Container(name="primary", args=["a"]))
    labels = {"team": "vision"}
    template = PodTemplate.from_spec(original, labels=labels)
    original.containers[0].args.append("leaked")  # type: ignore[union-attr]
    original.containers.append(V1Container(name="late"))
    labels["team"] = "leaked"
    assert primary(template).args == ["a"]
    assert [c.name for c in template.pod_spec.containers] == ["primary"]  # type: ignore[union-attr]
    assert template.labels == {"team": "vision"}
    primary(template).args.append("back")  # type: ignore[union-attr]
    assert original.containers[0].args == ["a", "leaked"]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        pytest.param(
            {"pod_spec": {"containers": []}}, TypeError, "pod_spec must be", id="spec-dict"
        ),
        pytest.param({"primary_container_name": 3}, TypeError, "must be a str", id="name-int"),
        pytest.param(
            {"primary_container_name": "Main"}, PodTemplateError, "lower-case", id="name-case"
        ),
        pytest.param({"labels": {"a": 1}}, TypeError, "must map str to str", id="label-value-int"),
        pytest.param({"labels": ["a"]}, TypeError, "must be a mapping", id="labels-list"),
        pytest.param(
            {"labels": {"a": "has space"}},
            PodTemplateError,
            r"labels\['a'\] value",
            id="label-value",
        ),
        pytest.param(
            {"annotations": {"bad key!": "x"}}, PodTemplateError, "annotations key", id="ann-key"
        ),
    ],
)
def test_the_constructor_names_the_bad_argument(
    arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        PodTemplate(**arguments)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            spec_of(V1Container(name="a"), init_containers=[V1Container(name="primary")]),
            "'primary' is declared in initContainers",
            id="primary-is-an-init-container",
        ),
        pytest.param(
            spec_of(V1Container(name="primary"), V1Container(name="primary")),
            "declares 2 containers named 'primary'",
            id="duplicate-primary",
        ),
    ],
)
def test_a_spec_whose_primary_cannot_be_used_is_refused(spec: V1PodSpec, message: str) -> None:
    with pytest.raises(PodTemplateError, match=message):
        PodTemplate(pod_spec=spec).allow_fuse()


def test_no_pod_spec_synthesizes_the_primary_container_everywhere() -> None:
    template = PodTemplate(primary_container_name="worker")
    for result in (
        template.allow_fuse(),
        template.allow_fuse(privileged=True),
        template.allow_nested_sandboxing(),
        template.with_termination_grace_period(5),
    ):
        assert [c.name for c in checked(result).pod_spec.containers] == ["worker"]  # type: ignore[union-attr]
    pod = template.to_k8s_pod()
    assert pod["spec"] == {"containers": [{"name": "worker"}]}


def test_a_missing_primary_container_is_added_after_the_others() -> None:
    template = PodTemplate(pod_spec=spec_of(V1Container(name="sidecar", image="envoy")))
    granted = checked(template.allow_fuse())
    assert [c.name for c in granted.pod_spec.containers] == ["sidecar", "primary"]  # type: ignore[union-attr]
    assert granted.pod_spec.containers[0] == V1Container(name="sidecar", image="envoy")  # type: ignore[union-attr]


# --- allow_fuse(): the device-plugin grant ---------------------------------------------------


@pytest.mark.parametrize(("privileged", "escalation"), POSTURES)
def test_device_plugin_fuse_composes_with_any_pinned_posture(
    privileged: bool | None, escalation: bool | None
) -> None:
    granted = checked(
        with_context(privileged=privileged, allow_privilege_escalation=escalation).allow_fuse()
    )
    container = primary(granted)
    assert container.resources == V1ResourceRequirements(
        requests={FUSE_DEVICE_RESOURCE: "1"}, limits={FUSE_DEVICE_RESOURCE: "1"}
    )
    context = container.security_context
    assert context is not None
    assert context.capabilities == V1Capabilities(add=["SYS_ADMIN"])
    assert (context.privileged, context.allow_privilege_escalation) == (privileged, escalation)
    assert granted.annotations == {FUSE_CAPABILITY_ANNOTATION: "device-plugin"}
    assert granted.pod_spec.volumes is None  # type: ignore[union-attr]
    assert container.volume_mounts is None


def test_device_plugin_fuse_merges_into_existing_resources_and_capabilities() -> None:
    template = PodTemplate.from_spec(
        spec_of(
            V1Container(
                name="primary",
                resources=V1ResourceRequirements(
                    requests={"cpu": "2", "memory": "4Gi"}, limits={"nvidia.com/gpu": "1"}
                ),
                security_context=V1SecurityContext(
                    run_as_user=1000,
                    read_only_root_filesystem=True,
                    capabilities=V1Capabilities(add=["NET_ADMIN"], drop=["ALL"]),
                ),
            )
        ),
        labels={"team": "vision"},
        annotations={"owner": "ana"},
    )
    granted = checked(template.allow_fuse())
    container = primary(granted)
    assert container.resources == V1ResourceRequirements(
        requests={"cpu": "2", "memory": "4Gi", FUSE_DEVICE_RESOURCE: "1"},
        limits={"nvidia.com/gpu": "1", FUSE_DEVICE_RESOURCE: "1"},
    )
    assert container.security_context == V1SecurityContext(
        run_as_user=1000,
        read_only_root_filesystem=True,
        capabilities=V1Capabilities(add=["NET_ADMIN", "SYS_ADMIN"], drop=["ALL"]),
    )
    assert granted.labels == {"team": "vision"}
    assert granted.annotations == {"owner": "ana", FUSE_CAPABILITY_ANNOTATION: "device-plugin"}


@pytest.mark.parametrize(
    ("requests", "limits", "expected"),
    [
        pytest.param({}, {}, "1", id="none-pinned"),
        pytest.param(
            {FUSE_DEVICE_RESOURCE: "2"}, {FUSE_DEVICE_RESOURCE: "2"}, "2", id="both-pinned"
        ),
        pytest.param({}, {FUSE_DEVICE_RESOURCE: "2"}, "2", id="limit-pinned"),
        pytest.param({FUSE_DEVICE_RESOURCE: "3"}, {}, "3", id="request-pinned"),
    ],
)
def test_a_pinned_device_count_is_kept(
    requests: dict[str, str], limits: dict[str, str], expected: str
) -> None:
    template = PodTemplate.from_spec(
        spec_of(
            V1Container(
                name="c", resources=V1ResourceRequirements(requests=requests, limits=limits)
            )
        )
    )
    resources = primary(checked(template.allow_fuse())).resources
    assert resources is not None
    assert resources.requests == {FUSE_DEVICE_RESOURCE: expected}
    assert resources.limits == {FUSE_DEVICE_RESOURCE: expected}


@pytest.mark.parametrize(
    ("requests", "limits", "message"),
    [
        pytest.param(
            {FUSE_DEVICE_RESOURCE: "1"}, {FUSE_DEVICE_RESOURCE: "2"}, "differ", id="unequal"
        ),
        pytest.param({}, {FUSE_DEVICE_RESOURCE: "0"}, "at least 1", id="zero"),
        pytest.param({}, {FUSE_DEVICE_RESOURCE: "500m"}, "whole number", id="fraction"),
        pytest.param({FUSE_DEVICE_RESOURCE: "lots"}, {}, "whole number", id="not-a-quantity"),
    ],
)
def test_a_contradictory_device_count_is_refused(
    requests: dict[str, str], limits: dict[str, str], message: str
) -> None:
    template = PodTemplate.from_spec(
        spec_of(
            V1Container(
                name="c", resources=V1ResourceRequirements(requests=requests, limits=limits)
            )
        )
    )
    with pytest.raises(PodTemplateError, match=message):
        template.allow_fuse()


@pytest.mark.parametrize(
    ("added", "expected"),
    [
        pytest.param(["SYS_ADMIN"], ["SYS_ADMIN"], id="already-there"),
        pytest.param(["CAP_SYS_ADMIN"], ["SYS_ADMIN"], id="cap-prefix-respelled"),
        pytest.param(
            ["NET_RAW", "sys_admin", "CAP_SYS_ADMIN"], ["NET_RAW", "SYS_ADMIN"], id="dupes"
        ),
    ],
)
def test_sys_admin_is_spelled_once_the_way_the_api_server_accepts(
    added: list[str], expected: list[str]
) -> None:
    template = with_context(capabilities=V1Capabilities(add=added))
    for granted in (template.allow_fuse(), template.allow_nested_sandboxing()):
        context = primary(checked(granted)).security_context
        assert context is not None
        assert context.capabilities == V1Capabilities(add=expected)


@pytest.mark.parametrize("dropped", ["SYS_ADMIN", "CAP_SYS_ADMIN"])
@pytest.mark.parametrize("grant", ["allow_fuse", "allow_nested_sandboxing"])
def test_a_grant_needing_sys_admin_refuses_a_container_that_drops_it(
    dropped: str, grant: str
) -> None:
    template = with_context(capabilities=V1Capabilities(drop=[dropped]))
    with pytest.raises(PodTemplateError, match="drops SYS_ADMIN"):
        getattr(template, grant)()


def test_dropping_all_capabilities_does_not_block_an_added_one() -> None:
    # Runtimes drop ALL first and then add, so SYS_ADMIN survives drop: [ALL].
    granted = with_context(capabilities=V1Capabilities(drop=["ALL"])).allow_fuse()
    assert primary(granted).security_context.capabilities == V1Capabilities(  # type: ignore[union-attr]
        add=["SYS_ADMIN"], drop=["ALL"]
    )


# --- allow_fuse(privileged=True): the escape hatch -------------------------------------------


@pytest.mark.parametrize(("privileged", "escalation"), POSTURES)
def test_privileged_fuse_against_pinned_postures(
    privileged: bool | None, escalation: bool | None
) -> None:
    template = with_context(privileged=privileged, allow_privilege_escalation=escalation)
    if privileged is False or escalation is False:
        pinned = "privileged: false" if privileged is False else "allowPrivilegeEscalation: false"
        with pytest.raises(PodTemplateError, match=f"it pins {pinned}"):
            template.allow_fuse(privileged=True)
        return
    granted = checked(template.allow_fuse(privileged=True))
    container = primary(granted)
    assert container.security_context == V1SecurityContext(
        privileged=True, allow_privilege_escalation=escalation
    )
    assert granted.pod_spec.volumes == [  # type: ignore[union-attr]
        V1Volume(
            name=DEV_FUSE_VOLUME_NAME,
            host_path=V1HostPathVolumeSource(path="/dev/fuse", type="CharDevice"),
        )
    ]
    assert container.volume_mounts == [
        V1VolumeMount(name=DEV_FUSE_VOLUME_NAME, mount_path="/dev/fuse")
    ]
    assert container.resources is None
    assert granted.annotations == {FUSE_CAPABILITY_ANNOTATION: "privileged"}


def test_privileged_fuse_keeps_existing_volumes_mounts_and_sidecars() -> None:
    sidecar = V1Container(
        name="proxy", image="envoy", volume_mounts=[V1VolumeMount(name="cache", mount_path="/c")]
    )
    template = PodTemplate.from_spec(
        spec_of(
            V1Container(
                name="primary", volume_mounts=[V1VolumeMount(name="cache", mount_path="/cache")]
            ),
            sidecar,
            volumes=[V1Volume(name="cache", empty_dir={})],
        )
    )
    granted = checked(template.allow_fuse(privileged=True))
    assert [v.name for v in granted.pod_spec.volumes] == ["cache", DEV_FUSE_VOLUME_NAME]  # type: ignore[union-attr]
    assert [m.mount_path for m in primary(granted).volume_mounts] == ["/cache", "/dev/fuse"]  # type: ignore[union-attr]
    assert granted.pod_spec.containers[1] == sidecar  # type: ignore[union-attr]


def test_privileged_fuse_reuses_a_dev_fuse_volume_the_spec_already_has() -> None:
    template = PodTemplate.from_spec(
        spec_of(
            V1Container(
                name="primary", volume_mounts=[V1VolumeMount(name="fuse", mount_path="/dev/fuse")]
            ),
            volumes=[V1Volume(name="fuse", host_path=V1HostPathVolumeSource(path="/dev/fuse"))],
        )
    )
    granted = checked(template.allow_fuse(privileged=True))
    assert [v.name for v in granted.pod_spec.volumes] == ["fuse"]  # type: ignore[union-attr]
    assert [m.name for m in primary(granted).volume_mounts] == ["fuse"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("volumes", "mounts", "message"),
    [
        pytest.param(
            [V1Volume(name=DEV_FUSE_VOLUME_NAME, empty_dir={})],
            [],
            "is taken by a volume that is not the host's /dev/fuse",
            id="volume-name-taken",
        ),
        pytest.param(
            [
                V1Volume(
                    name="f", host_path=V1HostPathVolumeSource(path="/dev/fuse", type="Directory")
                )
            ],
            [],
            "with type 'Directory'; it must be CharDevice",
            id="dev-fuse-with-wrong-type",
        ),
        pytest.param(
            [V1Volume(name="other", empty_dir={})],
            [V1VolumeMount(name="other", mount_path="/dev/fuse")],
            "already mounts volume 'other' at /dev/fuse",
            id="mount-path-taken",
        ),
    ],
)
def test_privileged_fuse_refuses_a_clash(
    volumes: list[V1Volume], mounts: list[V1VolumeMount], message: str
) -> None:
    template = PodTemplate.from_spec(
        spec_of(V1Container(name="primary", volume_mounts=mounts), volumes=volumes)
    )
    with pytest.raises(PodTemplateError, match=message):
        template.allow_fuse(privileged=True)


def test_the_two_fuse_modes_exclude_each_other() -> None:
    with pytest.raises(PodTemplateError, match="capability-fuse is already 'device-plugin'"):
        PodTemplate().allow_fuse().allow_fuse(privileged=True)
    with pytest.raises(PodTemplateError, match="capability-fuse is already 'privileged'"):
        PodTemplate().allow_fuse(privileged=True).allow_fuse()


def test_allow_fuse_wants_a_bool() -> None:
    with pytest.raises(TypeError, match="privileged must be a bool, not str"):
        PodTemplate().allow_fuse(privileged="yes")  # type: ignore[arg-type]


# --- allow_nested_sandboxing() ---------------------------------------------------------------


@pytest.mark.parametrize(("privileged", "escalation"), POSTURES)
def test_nested_sandboxing_against_pinned_postures(
    privileged: bool | None, escalation: bool | None
) -> None:
    template = with_context(privileged=privileged, allow_privilege_escalation=escalation)
    if privileged:
        with pytest.raises(PodTemplateError, match=r"is privileged \(privileged: true\)"):
            template.allow_nested_sandboxing()
        return
    if escalation:
        with pytest.raises(PodTemplateError, match="pins allowPrivilegeEscalation: true"):
            template.allow_nested_sandboxing()
        return
    granted = checked(template.allow_nested_sandboxing())
    assert primary(granted).security_context == V1SecurityContext(
        privileged=privileged,
        allow_privilege_escalation=False,
        capabilities=V1Capabilities(add=["SYS_ADMIN"]),
    )
    assert granted.annotations == {
        APPARMOR: "unconfined",
        NESTED_SANDBOXING_CAPABILITY_ANNOTATION: "true",
    }
    assert primary(granted).resources is None


@pytest.mark.parametrize(
    ("annotation", "field", "refused"),
    [
        pytest.param(None, None, None, id="nothing-pinned"),
        pytest.param("unconfined", None, None, id="annotation-unconfined"),
        pytest.param(None, "Unconfined", None, id="field-unconfined"),
        pytest.param("unconfined", "Unconfined", None, id="both-unconfined"),
        pytest.param("runtime/default", None, "'runtime/default'", id="annotation-runtime-default"),
        pytest.param("localhost/strict", None, "'localhost/strict'", id="annotation-localhost"),
        pytest.param(None, "RuntimeDefault", "type 'RuntimeDefault'", id="field-runtime-default"),
        pytest.param(None, "Localhost", "type 'Localhost'", id="field-localhost"),
    ],
)
def test_nested_sandboxing_against_a_pinned_apparmor_profile(
    annotation: str | None, field: str | None, refused: str | None
) -> None:
    profile = None
    if field is not None:
        profile = V1AppArmorProfile(
            type=field, localhost_profile="strict" if field == "Localhost" else None
        )
    template = PodTemplate.from_spec(
        spec_of(
            V1Container(
                name="primary", security_context=V1SecurityContext(app_armor_profile=profile)
            )
        ),
        annotations={APPARMOR: annotation} if annotation else None,
    )
    if refused:
        with pytest.raises(PodTemplateError, match=refused):
            template.allow_nested_sandboxing()
        return
    granted = checked(template.allow_nested_sandboxing(), oldest=APPARMOR_FIELD_SINCE)
    assert granted.annotations is not None
    assert granted.annotations[APPARMOR] == "unconfined"


def test_a_pod_level_apparmor_profile_is_overridden_for_the_primary_only() -> None:
    # The per-container annotation wins over the pod's default; the sidecar keeps the default.
    template = PodTemplate.from_spec(
        spec_of(
            V1Container(name="primary"),
            V1Container(name="sidecar"),
            security_context={"appArmorProfile": {"type": "RuntimeDefault"}},
        ),
    )
    granted = checked(template.allow_nested_sandboxing(), oldest=APPARMOR_FIELD_SINCE)
    assert granted.annotations == {
        APPARMOR: "unconfined",
        NESTED_SANDBOXING_CAPABILITY_ANNOTATION: "true",
    }


# --- composition ------------------------------------------------------------------------------


def test_device_plugin_fuse_and_nested_sandboxing_compose_in_either_order() -> None:
    template = PodTemplate.from_spec(spec_of(V1Container(name="primary", image="trainer")))
    fuse_first = checked(template.allow_fuse().allow_nested_sandboxing())
    sandbox_first = checked(template.allow_nested_sandboxing().allow_fuse())
    assert fuse_first == sandbox_first
    context = primary(fuse_first).security_context
    assert context == V1SecurityContext(
        allow_privilege_escalation=False, capabilities=V1Capabilities(add=["SYS_ADMIN"])
    )
    assert fuse_first.annotations == {
        FUSE_CAPABILITY_ANNOTATION: "device-plugin",
        APPARMOR: "unconfined",
        NESTED_SANDBOXING_CAPABILITY_ANNOTATION: "true",
    }


def test_privileged_fuse_and_nested_sandboxing_refuse_each_other_in_either_order() -> None:
    with pytest.raises(PodTemplateError, match="use the device-plugin FUSE grant instead"):
        PodTemplate().allow_fuse(privileged=True).allow_nested_sandboxing()
    with pytest.raises(PodTemplateError, match="allowPrivilegeEscalation: false"):
        PodTemplate().allow_nested_sandboxing().allow_fuse(privileged=True)


@pytest.mark.parametrize(
    "grant",
    [
        pytest.param(lambda t: t.allow_fuse(), id="fuse"),
        pytest.param(lambda t: t.allow_fuse(privileged=True), id="fuse-privileged"),
        pytest.param(lambda t: t.allow_nested_sandboxing(), id="nested-sandboxing"),
        pytest.param(lambda t: t.allow_fuse().allow_nested_sandboxing(), id="fuse-and-nested"),
        pytest.param(lambda t: t.with_termination_grace_period(30), id="grace-period"),
    ],
)
def test_grants_are_idempotent_and_never_mutate(grant: Any) -> None:
    template = PodTemplate.from_spec(
        spec_of(V1Container(name="primary", image="x"), V1Container(name="side")),
        labels={"a": "b"},
        annotations={"c": "d"},
    )
    before = template.pod_spec.model_dump()  # type: ignore[union-attr]
    once = grant(template)
    assert grant(once) == once
    assert template.pod_spec.model_dump() == before  # type: ignore[union-attr]
    assert template.labels == {"a": "b"}
    assert template.annotations == {"c": "d"}
    checked(once)


# --- with_termination_grace_period ------------------------------------------------------------


@pytest.mark.parametrize(
    ("grace_period", "seconds"),
    [
        pytest.param(0, 0, id="zero"),
        pytest.param(30, 30, id="int"),
        pytest.param(timedelta(minutes=2), 120, id="timedelta"),
        pytest.param(timedelta(0), 0, id="timedelta-zero"),
    ],
)
def test_termination_grace_period(grace_period: int | timedelta, seconds: int) -> None:
    result = checked(PodTemplate().with_termination_grace_period(grace_period))
    assert result.pod_spec.termination_grace_period_seconds == seconds  # type: ignore[union-attr]
    assert result.to_k8s_pod()["spec"]["terminationGracePeriodSeconds"] == seconds


@pytest.mark.parametrize(
    ("grace_period", "error", "message"),
    [
        pytest.param(True, TypeError, "not bool", id="bool"),
        pytest.param(1.5, TypeError, "not float", id="float"),
        pytest.param("30", TypeError, "not str", id="str"),
        pytest.param(None, TypeError, "not NoneType", id="none"),
        pytest.param(-1, ValueError, "got -1", id="negative-int"),
        pytest.param(timedelta(seconds=-5), ValueError, "got -5", id="negative-timedelta"),
        pytest.param(timedelta(milliseconds=1500), ValueError, "whole seconds", id="fractional"),
        pytest.param(2**63, ValueError, "between 0 and", id="beyond-int64"),
    ],
)
def test_termination_grace_period_refuses(
    grace_period: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        PodTemplate().with_termination_grace_period(grace_period)


# --- to_k8s_pod -------------------------------------------------------------------------------


def test_to_k8s_pod_is_the_complete_manifest() -> None:
    template = PodTemplate.from_spec(
        spec_of(
            V1Container(name="main", image="trainer", image_pull_policy="Always"),
            host_ipc=True,
            termination_grace_period_seconds=10,
        ),
        labels={"app": "train"},
        annotations={"owner": "ana"},
    )
    pod = template.to_k8s_pod(name="train-1", namespace="research")
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-1",
            "namespace": "research",
            "labels": {"app": "train"},
            "annotations": {
                "owner": "ana",
                PRIMARY_CONTAINER_ANNOTATION: "main",
                KUBECTL_DEFAULT_CONTAINER_ANNOTATION: "main",
            },
        },
        "spec": {
            "containers": [{"name": "main", "image": "trainer", "imagePullPolicy": "Always"}],
            "hostIPC": True,
            "terminationGracePeriodSeconds": 10,
        },
    }
    assert_valid_pod(pod)


def test_to_k8s_pod_keeps_a_default_container_the_template_chose() -> None:
    template = PodTemplate(annotations={KUBECTL_DEFAULT_CONTAINER_ANNOTATION: "sidecar"})
    annotations = template.to_k8s_pod()["metadata"]["annotations"]
    assert annotations[KUBECTL_DEFAULT_CONTAINER_ANNOTATION] == "sidecar"
    assert annotations[PRIMARY_CONTAINER_ANNOTATION] == "primary"


def test_to_k8s_pod_refuses_a_contradicting_primary_annotation() -> None:
    template = PodTemplate(annotations={PRIMARY_CONTAINER_ANNOTATION: "other"})
    with pytest.raises(PodTemplateError, match="primary-container is already 'other'"):
        template.to_k8s_pod()


def test_to_k8s_pod_generate_name() -> None:
    assert PodTemplate().to_k8s_pod(generate_name="train-")["metadata"]["generateName"] == "train-"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param({"name": "Train"}, "name 'Train' must consist", id="name-case"),
        pytest.param({"name": "a" * 254}, "at most 253", id="name-length"),
        pytest.param({"namespace": "a.b"}, "namespace 'a.b' must consist", id="namespace-dot"),
        pytest.param({"generate_name": "-x-"}, "generate_name '-x' must", id="generate-name"),
    ],
)
def test_to_k8s_pod_names_the_bad_argument(arguments: dict[str, str], message: str) -> None:
    with pytest.raises(PodTemplateError, match=message):
        PodTemplate().to_k8s_pod(**arguments)
