"""The daemon's manifests and the pod grant: schema-valid, least privilege, conflicts refused."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from kubernetes.client import (
    V1Container,
    V1EnvVar,
    V1PodSpec,
    V1SecurityContext,
    V1Volume,
    V1VolumeMount,
)

from podwright.cli.main import cli
from podwright.core.fuse_proxy.admission import DaemonLimits
from podwright.core.fuse_proxy.manifests import (
    DaemonSetOptions,
    FuseProxySetup,
    daemon_manifests,
)
from podwright.core.fuse_proxy.mount_policy import ProxyPolicy
from podwright.core.helper_resources import DEFAULT_HELPER_RESOURCES
from podwright.core.pod_template import PodTemplate, PodTemplateError
from tests.manifests import assert_accepted_as_printed, assert_valid_pod, schema_errors

IMAGE = "ghcr.io/podwright/podwright:0.1.0"
SETUP = FuseProxySetup(shim_image=IMAGE)


def test_the_daemon_manifests_are_schema_valid_and_privileged_only_where_needed() -> None:
    documents = daemon_manifests(
        DaemonSetOptions(
            image=IMAGE,
            policy=ProxyPolicy(("/mnt", "/data"), allow_other=True),
            limits=DaemonLimits(
                workers=6, max_connections=100, max_connections_per_uid=10, max_requests_per_uid=3
            ),
        )
    )
    assert [doc["kind"] for doc in documents] == ["Namespace", "ServiceAccount", "DaemonSet"]
    for document in documents:
        assert schema_errors(document) == []
    pod = documents[2]["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    assert pod["automountServiceAccountToken"] is False
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    (container,) = pod["containers"]
    # Root, as the daemon must be to mount: the image runs as 65532 otherwise.
    assert container["securityContext"] == {"privileged": True, "runAsUser": 0, "runAsGroup": 0}
    assert container["command"] == [
        "podwright",
        "fuse-proxy",
        "server",
        "--socket",
        "/var/run/fusermount/podwright-fuse-proxy.sock",
        "--allow-prefix",
        "/mnt",
        "--allow-prefix",
        "/data",
        "--max-mounts-per-user",
        "1000",
        "--allow-other",
        *("--workers", "6"),
        *("--max-connections", "100"),
        *("--max-connections-per-uid", "10"),
        *("--max-requests-per-uid", "3"),
    ]
    assert pod["volumes"] == [
        {
            "name": "podwright-fuse-proxy-socket",
            "hostPath": {"path": "/var/run/fusermount", "type": "DirectoryOrCreate"},
        }
    ]
    assert container["livenessProbe"]["exec"]["command"][:3] == ["podwright", "fuse-proxy", "ping"]


def pod_of(template: PodTemplate) -> dict[str, Any]:
    pod = template.to_k8s_pod(name="reader")
    assert_valid_pod(pod)
    return pod


def test_the_proxy_grant_gives_no_privilege_no_capability_and_no_device() -> None:
    pod = pod_of(PodTemplate().allow_fuse_via_proxy(SETUP))
    assert pod["metadata"]["annotations"]["podwright.dev/capability-fuse"] == "proxy"
    (primary,) = pod["spec"]["containers"]
    assert "securityContext" not in primary
    assert "resources" not in primary
    assert primary["env"] == [
        {
            "name": "PODWRIGHT_FUSE_PROXY_SOCKET",
            "value": "/var/run/fusermount/podwright-fuse-proxy.sock",
        }
    ]
    assert primary["volumeMounts"] == [
        {
            "name": "podwright-fuse-proxy-socket",
            "mountPath": "/var/run/fusermount",
            "readOnly": True,
        },
        {"name": "podwright-fuse-shim", "mountPath": "/opt/podwright-fuse", "readOnly": True},
        {
            "name": "podwright-fuse-shim",
            "mountPath": "/usr/bin/fusermount",
            "subPath": "fusermount",
            "readOnly": True,
        },
        {
            "name": "podwright-fuse-shim",
            "mountPath": "/usr/bin/fusermount3",
            "subPath": "fusermount3",
            "readOnly": True,
        },
    ]
    (installer,) = pod["spec"]["initContainers"]
    assert installer["command"] == ["podwright", "fuse-proxy", "install-shim", "/shim"]
    assert installer["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert installer["securityContext"]["runAsNonRoot"] is True
    # cpu and memory stated, so that a ResourceQuota on either admits the pod.
    assert installer["resources"] == DEFAULT_HELPER_RESOURCES.manifest()
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    assert volumes["podwright-fuse-proxy-socket"]["hostPath"] == {
        "path": "/var/run/fusermount",
        "type": "Directory",
    }
    assert "/dev/fuse" not in str(pod)


def test_the_proxy_grant_is_idempotent_and_composes_with_nested_sandboxing() -> None:
    once = PodTemplate().allow_fuse_via_proxy(SETUP)
    assert pod_of(once.allow_fuse_via_proxy(SETUP)) == pod_of(once)
    both = pod_of(once.allow_nested_sandboxing())
    assert both["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_proxy_grant_keeps_existing_init_containers_after_its_installer() -> None:
    spec = V1PodSpec(
        containers=[V1Container(name="main", image="x")],
        init_containers=[V1Container(name="fetch", image="y")],
    )
    pod = pod_of(PodTemplate.from_spec(spec).allow_fuse_via_proxy(SETUP))
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["podwright-fuse-shim", "fetch"]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (
            PodTemplate().allow_fuse(),
            "annotation podwright.dev/capability-fuse is already 'device-plugin'",
        ),
        (PodTemplate().allow_fuse(privileged=True), "is already 'privileged'"),
        (
            PodTemplate.from_spec(
                V1PodSpec(
                    containers=[
                        V1Container(
                            name="primary",
                            volume_mounts=[
                                V1VolumeMount(name="tools", mount_path="/usr/bin/fusermount3")
                            ],
                        )
                    ]
                )
            ),
            "already mounts volume 'tools' at /usr/bin/fusermount3",
        ),
        (
            PodTemplate.from_spec(
                V1PodSpec(
                    containers=[V1Container(name="primary")],
                    volumes=[V1Volume(name="podwright-fuse-shim")],
                )
            ),
            "already has a volume named 'podwright-fuse-shim'",
        ),
        (
            PodTemplate.from_spec(
                V1PodSpec(
                    containers=[
                        V1Container(
                            name="primary",
                            env=[V1EnvVar(name="PODWRIGHT_FUSE_PROXY_SOCKET", value="/elsewhere")],
                        )
                    ]
                )
            ),
            "already sets PODWRIGHT_FUSE_PROXY_SOCKET",
        ),
        (
            PodTemplate.from_spec(
                V1PodSpec(
                    containers=[V1Container(name="primary")],
                    init_containers=[V1Container(name="podwright-fuse-shim", image="other")],
                )
            ),
            "init container named 'podwright-fuse-shim' that is not the FUSE proxy's",
        ),
    ],
)
def test_the_proxy_grant_refuses_what_it_would_override(
    template: PodTemplate, message: str
) -> None:
    with pytest.raises(PodTemplateError, match=message):
        template.allow_fuse_via_proxy(SETUP)


def test_other_fuse_grants_refuse_after_the_proxy_grant() -> None:
    with pytest.raises(PodTemplateError, match="is already 'proxy'"):
        PodTemplate().allow_fuse_via_proxy(SETUP).allow_fuse()


def test_the_proxy_grant_composes_with_a_pinned_unprivileged_context() -> None:
    spec = V1PodSpec(
        containers=[
            V1Container(
                name="primary",
                security_context=V1SecurityContext(privileged=False, run_as_non_root=True),
            )
        ]
    )
    pod = pod_of(PodTemplate.from_spec(spec).allow_fuse_via_proxy(SETUP))
    assert pod["spec"]["containers"][0]["securityContext"] == {
        "privileged": False,
        "runAsNonRoot": True,
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"shim_image": ""}, "shim_image must be an image reference"),
        (
            {"shim_image": IMAGE, "socket_dir": "run/x"},
            "socket_dir: 'run/x' must be a normalized absolute path",
        ),
        (
            {"shim_image": IMAGE, "fusermount_paths": ("/usr/bin/../fusermount",)},
            "fusermount_paths",
        ),
        ({"shim_image": IMAGE, "fusermount_paths": ()}, "at least one path"),
    ],
)
def test_a_setup_is_checked(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FuseProxySetup(**arguments)


def manifests(*options: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli, ["fuse-proxy", "manifests", "--image", IMAGE, *options])
    assert result.exit_code == 0, result.output
    return list(yaml.safe_load_all(result.output))


@pytest.mark.parametrize(
    "options",
    [
        pytest.param([], id="defaults"),
        pytest.param(["--example-pod"], id="example-pod"),
        pytest.param(
            ["--example-pod", "--example-image", "ghcr.io/x/gcsfuse:3"], id="example-image"
        ),
        pytest.param(
            ["--allow-other", "--allow-prefix", "/data", "--allow-prefix", "/scratch"],
            id="policy",
        ),
        pytest.param(
            ["--namespace", "fuse", "--socket-dir", "/run/fuse-proxy", "--example-pod"],
            id="namespace-and-socket-dir",
        ),
        pytest.param(
            [
                *("--workers", "4", "--max-connections", "64"),
                *("--max-connections-per-uid", "8", "--max-requests-per-uid", "2"),
                *("--max-mounts-per-user", "10"),
            ],
            id="limits",
        ),
    ],
)
def test_every_manifest_the_command_prints_is_accepted_as_printed(options: list[str]) -> None:
    documents = manifests(*options)
    kinds = ["Namespace", "ServiceAccount", "DaemonSet"]
    assert [doc["kind"] for doc in documents] == kinds + ["Pod"] * ("--example-pod" in options)
    assert_accepted_as_printed(documents)


def test_the_example_pod_runs_the_daemons_image_unless_told_otherwise() -> None:
    *_, pod = manifests("--example-pod")
    (primary,) = pod["spec"]["containers"]
    assert (primary["image"], pod["spec"]["initContainers"][0]["image"]) == (IMAGE, IMAGE)
    assert primary["command"][:2] == ["sh", "-c"]
    assert primary["command"][2].startswith("fusermount3 -V || exit 1;")
    *_, pod = manifests("--example-pod", "--example-image", "ghcr.io/x/gcsfuse:3")
    assert pod["spec"]["containers"][0]["image"] == "ghcr.io/x/gcsfuse:3"
    assert pod["spec"]["initContainers"][0]["image"] == IMAGE  # the shim comes from podwright's


def test_the_example_image_needs_the_example_pod() -> None:
    result = CliRunner().invoke(
        cli, ["fuse-proxy", "manifests", "--image", IMAGE, "--example-image", "x"]
    )
    assert (result.exit_code, result.output) == (
        2,
        "podwright: error: --example-image needs --example-pod\n",
    )


def test_the_daemon_sets_command_line_is_what_the_server_command_accepts() -> None:
    from podwright.cli.fuse_proxy_commands import server_command

    (_, _, daemon_set) = manifests(
        "--allow-other", "--max-connections-per-uid", "8", "--max-requests-per-uid", "2"
    )
    command = daemon_set["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["podwright", "fuse-proxy", "server"]
    # Parsed and checked by the server command itself, without running it.
    parameters = server_command.make_context("server", command[3:]).params
    assert {key: parameters[key] for key in ("allow_other", "max_connections_per_uid")} == {
        "allow_other": True,
        "max_connections_per_uid": 8,
    }
    assert parameters["max_requests_per_uid"] == 2


def test_the_manifests_command_names_a_bad_prefix() -> None:
    result = CliRunner().invoke(
        cli, ["fuse-proxy", "manifests", "--image", IMAGE, "--allow-prefix", "/"]
    )
    assert result.exit_code == 2
    assert "mount prefix '/' would allow mounting over any directory" in result.output
