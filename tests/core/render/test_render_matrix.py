"""Decision matrices, one per field group: what each field becomes, and when it cannot render.

Every successful render here is checked against the Kubernetes and CRD schemas and the API
server's cross-field rules (``tests/render_helpers.rendered``).
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from podwright.core.assets import catalogue_from_data
from podwright.core.helper_resources import Amounts, HelperResources
from podwright.core.render import DEFAULT_PROFILE, RenderError, render
from podwright.core.render.profile import FuseGrantMode, PriorityLevel, S3Adapter
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import WorkloadInputError
from tests.render_helpers import (
    KAI_PROFILE,
    PERMISSIVE_PROFILE,
    kinds,
    main_container,
    main_pod,
    render_problems,
    rendered,
)

IMAGE = {"image": "registry.example.com/team/app:1"}


def spec(**fields: Any) -> dict[str, Any]:
    return {**IMAGE, **fields}


# -- container ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"command": "python train.py --lr 0.1"},
            {"command": ["python", "train.py", "--lr", "0.1"]},
        ),
        ({"args": "--name 'two words'"}, {"args": ["--name", "two words"]}),
        ({"command": "", "args": ""}, {}),
        ({"imagePullPolicy": "Always"}, {"imagePullPolicy": "Always"}),
        ({"workingDir": "/work"}, {"workingDir": "/work"}),
        ({"tty": True, "stdin": True}, {"tty": True, "stdin": True}),
        ({"stdin": True}, {"stdin": True}),
    ],
)
def test_container_fields(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    container = main_container(rendered("training", spec(**fields)))
    assert {key: container[key] for key in expected} == expected
    assert not {"command", "args"} & (set(container) - set(expected))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"image": None}, "image: required"),
        ({"command": "python 'unclosed"}, "command: cannot split"),
        ({"tty": True}, "tty: a TTY needs stdin"),
        ({"labels": [{"name": "podwright.dev/workload", "value": "x"}]}, "podwright's own"),
        ({"labels": [{"name": "team", "value": "not valid!"}]}, "labels[team]: 'team': value"),
        ({"annotations": [{"name": "bad key!", "value": "x"}]}, "annotations[bad key!]"),
        ({"category": "Not Valid"}, "category: 'Not Valid'"),
    ],
)
def test_container_problems(fields: dict[str, Any], problem: str) -> None:
    workload = {key: value for key, value in spec(**fields).items() if value is not None}
    assert any(problem in line for line in render_problems("training", workload)), problem


def test_the_words_of_a_command_are_remembered_and_a_refusal_is_not() -> None:
    """The words of a command are remembered (pods.py's _words): a rendering gets them as its
    own list, and a command that cannot be split is refused every time, not only the first."""
    first = main_container(rendered("training", spec(command="python 'a b'")))
    first["command"].append("changed")
    again = main_container(rendered("training", spec(command="python 'a b'")))
    assert again["command"] == ["python", "a b"]
    for _ in range(2):
        problems = render_problems("training", spec(command="python 'unclosed"))
        assert any("command: cannot split" in line for line in problems)


def test_environment_sources() -> None:
    variables = [
        {"name": "PLAIN", "value": "1"},
        {"name": "EMPTY"},
        {"name": "TOKEN", "secret": {"name": "creds", "key": "token"}},
        {"name": "MODE", "configMap": {"name": "settings", "key": "mode"}},
        {"name": "POD", "podFieldRef": {"path": "metadata.name"}},
    ]
    container = main_container(rendered("training", spec(environmentVariables=variables)))
    assert container["env"] == [
        {"name": "PLAIN", "value": "1"},
        {"name": "EMPTY", "value": ""},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]


def test_an_instance_the_workload_excludes_is_not_rendered() -> None:
    """A workload taken as written (no policies), or as an admission wrote it, may say it
    excludes an instance: nothing of it runs."""
    workload = spec(
        environmentVariables=[{"name": "KEEP", "value": "1"}, {"name": "DROP", "exclude": True}],
        ports=[{"name": "web", "container": 80, "exclude": True}],
    )
    container = main_container(rendered("training", workload))
    assert container["env"] == [{"name": "KEEP", "value": "1"}]
    assert "ports" not in container


@pytest.mark.parametrize(
    ("variable", "problem"),
    [
        ({"name": "X", "value": "1", "secret": {"name": "s", "key": "k"}}, "give one of"),
        ({"name": "X", "secret": {"name": "s"}}, "environmentVariables[X].secret.key: required"),
        ({"name": "X", "podFieldRef": {}}, "podFieldRef.path: required"),
    ],
)
def test_environment_problems(variable: dict[str, Any], problem: str) -> None:
    lines = render_problems("training", spec(environmentVariables=[variable]))
    assert any(problem in line for line in lines), lines


HOME_VARIABLES: dict[str, dict[str, Any] | None] = {
    "no HOME": None,
    "HOME set": {"name": "HOME", "value": "/u/ada"},
    "HOME from a secret": {"name": "HOME", "secret": {"name": "s", "key": "home"}},
}


@pytest.mark.parametrize("home_variable", list(HOME_VARIABLES))
@pytest.mark.parametrize("create_home", [None, True, False], ids=["default", "true", "false"])
@pytest.mark.parametrize("uid", [None, 1000], ids=["image's user", "runAsUid"])
def test_home_directory(uid: int | None, create_home: bool | None, home_variable: str) -> None:
    """A temporary home only for a user the image does not know (runAsUid), or where the
    workload names one with HOME; the image's own user keeps its home."""
    fields: dict[str, Any] = {"security": {} if uid is None else {"runAsUid": uid}}
    if create_home is not None:
        fields["createHomeDir"] = create_home
    variable = HOME_VARIABLES[home_variable]
    if variable is not None:
        fields["environmentVariables"] = [variable]
    creates = create_home if create_home is not None else uid is not None
    if creates and home_variable == "HOME from a secret":
        (problem,) = render_problems("training", spec(**fields))
        assert problem.startswith(
            "environmentVariables[HOME]: a temporary home is mounted at $HOME (createHomeDir is "
            "true"
        )
        return
    container = main_container(rendered("training", spec(**fields)))
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    env = {v["name"]: v.get("value", v.get("valueFrom")) for v in container.get("env", [])}
    expected_home: str | None = None
    if creates and home_variable == "HOME set":
        expected_home = "/u/ada"
    elif creates and home_variable == "no HOME" and uid is not None:
        expected_home = "/home/podwright"
    assert mounts.get("home") == expected_home
    if expected_home is not None:
        assert env["HOME"] == expected_home
    elif variable is None:
        assert "HOME" not in env  # the image's user's HOME stands
    assert [v["name"] for v in container.get("env", [])].count("HOME") <= 1


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (
            {
                "security": {"runAsUid": 1000},
                "storage": {"emptyDir": [{"name": "h", "mountPath": "/home/podwright"}]},
            },
            "createHomeDir: needs /home/podwright, which is already the mount path of storage.emptyDir[h].mountPath",
        ),
        (
            {
                "compute": {"largeShmRequest": True},
                "storage": {"emptyDir": [{"name": "s", "mountPath": "/dev/shm"}]},
            },
            "compute.largeShmRequest: needs /dev/shm, which is already",
        ),
        (
            {"createHomeDir": True, "environmentVariables": [{"name": "HOME", "value": "home"}]},
            "createHomeDir: needs an absolute home directory, and HOME is 'home'",
        ),
        (
            {
                "storage": {
                    "pvc": [
                        {"name": "a", "claimName": "c", "path": "/a", "claimInfo": {"size": "1Gi"}},
                        {"name": "b", "claimName": "c", "path": "/b", "claimInfo": {"size": "2Gi"}},
                    ]
                }
            },
            "storage.pvc[b].claimName: another instance asks for a new claim 'c' with another spec",
        ),
    ],
)
def test_volumes_podwright_adds_do_not_clash(fields: dict[str, Any], problem: str) -> None:
    lines = render_problems("training", spec(**fields))
    assert any(line.startswith(problem) for line in lines), lines


def test_readiness_probe() -> None:
    probes = {
        "readiness": {
            "initialDelaySeconds": 5,
            "periodSeconds": 10,
            "failureThreshold": 3,
            "handler": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}},
        }
    }
    container = main_container(rendered("workspace", spec(probes=probes)))
    assert container["readinessProbe"] == {
        "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
        "initialDelaySeconds": 5,
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
    lines = render_problems("workspace", spec(probes={"readiness": {"periodSeconds": 10}}))
    assert lines == [
        "probes.readiness.handler.httpGet.port: required: a readiness probe checks an HTTP port "
        "(handler.httpGet.port)"
    ]


# -- compute --------------------------------------------------------------------------------------

GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("compute", "limits", "requests", "annotations"),
    [
        ({"cpuCoreRequest": 0.5, "cpuCoreLimit": 2}, {"cpu": "2"}, {"cpu": "500m"}, {}),
        (
            {"cpuMemoryRequest": "1G", "cpuMemoryLimit": "2Gi"},
            {"memory": "2Gi"},
            {"memory": "1G"},
            {},
        ),
        ({"gpuDevicesRequest": 2}, {GPU: "2"}, {GPU: "2"}, {}),
        ({"gpuDevicesRequest": 0}, {}, {}, {}),
        ({"gpuPortionRequest": 2}, {GPU: "2"}, {GPU: "2"}, {}),
        ({"gpuPortionRequest": 0.5}, {}, {}, {"gpu-fraction": "0.5"}),
        (
            {"gpuPortionRequest": 0.25, "gpuPortionLimit": 0.5, "gpuRequestType": "portion"},
            {},
            {},
            {"gpu-fraction": "0.25", "gpu-fraction.limit": "0.5"},
        ),
        (
            {"gpuDevicesRequest": 2, "gpuPortionRequest": 0.5},
            {},
            {},
            {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"},
        ),
        ({"gpuMemoryRequest": "4Gi"}, {}, {}, {"gpu-memory": "4096"}),
        (
            {"gpuMemoryRequest": "2G", "gpuMemoryLimit": "4G", "gpuRequestType": "memory"},
            {},
            {},
            {"gpu-memory": "1908", "gpu-memory.limit": "3815"},
        ),
        (
            {"extendedResources": [{"resource": "example.com/fpga", "quantity": 2}]},
            {"example.com/fpga": "2"},
            {"example.com/fpga": "2"},
            {},
        ),
    ],
)
def test_compute(
    compute: dict[str, Any],
    limits: dict[str, str],
    requests: dict[str, str],
    annotations: dict[str, str],
) -> None:
    pod = main_pod(rendered("training", spec(compute=compute), profile=KAI_PROFILE))
    resources = pod["spec"]["containers"][0].get("resources", {})
    assert resources.get("limits", {}) == limits
    assert resources.get("requests", {}) == requests
    gpu_annotations = {
        k: v for k, v in pod["metadata"]["annotations"].items() if k.startswith("gpu-")
    }
    assert gpu_annotations == annotations


@pytest.mark.parametrize(
    ("compute", "problem"),
    [
        (
            {"gpuPortionRequest": 0.5, "gpuMemoryRequest": "1Gi"},
            "gpuMemoryRequest: give a GPU portion",
        ),
        (
            {"gpuRequestType": "portion", "gpuPortionRequest": 0.5, "gpuMemoryRequest": "1Gi"},
            "gpuMemoryRequest: cannot apply",
        ),
        ({"gpuRequestType": "memory"}, "gpuRequestType memory needs gpuMemoryRequest"),
        ({"gpuPortionRequest": 1.5}, "a portion above 1 must be a whole number"),
        ({"gpuPortionRequest": 2, "gpuDevicesRequest": 3}, "disagree with gpuDevicesRequest 3"),
        ({"gpuPortionRequest": 0.5, "gpuDevicesRequest": 0}, "needs at least one device"),
        ({"gpuPortionLimit": 0.5}, "gpuPortionLimit: cannot apply"),
        ({"gpuMemoryRequest": "1Gi", "gpuPortionLimit": 0.5}, "gpuPortionLimit: cannot apply"),
        ({"extendedResources": [{"resource": "cpu", "quantity": 1}]}, "not an extended resource"),
        ({"extendedResources": [{"resource": "fpga", "quantity": 1}]}, "needs a domain prefix"),
        ({"extendedResources": [{"resource": "example.com/fpga", "quantity": 0.5}]}, "whole units"),
        (
            {"extendedResources": [{"resource": "kubernetes.io/x", "quantity": 1}]},
            "kubernetes.io domain",
        ),
        (
            {"gpuDevicesRequest": 1, "extendedResources": [{"resource": GPU, "quantity": 1}]},
            "already requested",
        ),
    ],
)
def test_compute_problems(compute: dict[str, Any], problem: str) -> None:
    lines = render_problems("training", spec(compute=compute), profile=KAI_PROFILE)
    assert any(problem in line for line in lines), lines


@pytest.mark.parametrize("field", ["gpuPortionRequest", "gpuMemoryRequest"])
def test_fractional_gpus_need_the_kai_scheduler(field: str) -> None:
    value = 0.5 if field == "gpuPortionRequest" else "1Gi"
    lines = render_problems("training", spec(compute={field: value}), profile=DEFAULT_PROFILE)
    assert lines == [
        f"compute.{field}: a fraction of a GPU needs the KAI scheduler; the cluster profile's "
        "scheduler is 'default-scheduler' (set scheduler.type: kai)"
    ]


def test_large_shm_is_a_memory_backed_dev_shm_sized_by_the_memory_limit() -> None:
    compute = {"largeShmRequest": True, "cpuMemoryLimit": "8Gi"}
    pod = main_pod(rendered("training", spec(compute=compute)))
    assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["spec"][
        "volumes"
    ]
    assert {"name": "shm", "mountPath": "/dev/shm"} in pod["spec"]["containers"][0]["volumeMounts"]


# -- security -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("security", "pod_context", "container_context"),
    [
        ({}, None, None),
        (
            {"runAsUid": 1000, "runAsGid": 100, "supplementalGroups": "5,6", "runAsNonRoot": True},
            {
                "runAsUser": 1000,
                "runAsGroup": 100,
                "supplementalGroups": [5, 6],
                "runAsNonRoot": True,
            },
            None,
        ),
        ({"uidGidSource": "custom", "runAsUid": 7}, {"runAsUser": 7}, None),
        (
            {"seccompProfileType": "RuntimeDefault"},
            {"seccompProfile": {"type": "RuntimeDefault"}},
            None,
        ),
        (
            {
                "capabilities": ["net_admin", "CAP_SYS_PTRACE", "NET_ADMIN"],
                "readOnlyRootFilesystem": True,
            },
            None,
            {"capabilities": {"add": ["NET_ADMIN", "SYS_PTRACE"]}, "readOnlyRootFilesystem": True},
        ),
        ({"allowPrivilegeEscalation": False}, None, {"allowPrivilegeEscalation": False}),
    ],
)
def test_security(
    security: dict[str, Any],
    pod_context: dict[str, Any] | None,
    container_context: dict[str, Any] | None,
) -> None:
    pod = main_pod(rendered("training", spec(security=security, createHomeDir=False)))
    assert pod["spec"].get("securityContext") == pod_context
    assert pod["spec"]["containers"][0].get("securityContext") == container_context


def test_host_namespaces() -> None:
    pod = main_pod(rendered("workspace", spec(security={"hostIpc": True, "hostNetwork": True})))
    assert pod["spec"]["hostIPC"] is True
    assert pod["spec"]["hostNetwork"] is True


@pytest.mark.parametrize(
    ("security", "problem"),
    [
        ({"uidGidSource": "idpToken"}, "idpToken takes the ids"),
        (
            {"uidGidSource": "fromTheImage", "runAsGid": 5},
            "security.runAsGid: uidGidSource is fromTheImage",
        ),
        ({"runAsUid": 0, "runAsNonRoot": True}, "0 is root"),
        ({"seccompProfileType": "Localhost"}, "Localhost needs the path"),
        ({"capabilities": ["NET ADMIN"]}, "security.capabilities[0]: 'NET ADMIN' is not"),
    ],
)
def test_security_problems(security: dict[str, Any], problem: str) -> None:
    lines = render_problems("training", spec(security=security))
    assert any(problem in line for line in lines), lines


# -- storage --------------------------------------------------------------------------------------


def storage_of(rendering_spec: dict[str, Any], **kwargs: Any) -> tuple[dict[str, Any], list[Any]]:
    rendering = rendered("training", spec(storage=rendering_spec), **kwargs)
    return main_pod(rendering), [
        m for m in rendering.manifests if m["kind"] == "PersistentVolumeClaim"
    ]


@pytest.mark.parametrize(
    ("pvc", "volume", "claims"),
    [
        (
            {"name": "d", "claimName": "data", "path": "/data", "readOnly": True},
            {"name": "pvc-d", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
            0,
        ),
        (
            {"name": "d", "claimName": "data", "path": "/data", "claimInfo": {"size": "10Gi"}},
            {"name": "pvc-d", "persistentVolumeClaim": {"claimName": "data"}},
            1,
        ),
        (
            {
                "name": "d",
                "claimName": "scratch",
                "path": "/scratch",
                "ephemeral": True,
                "claimInfo": {
                    "size": "1Ti",
                    "storageClass": "fast",
                    "volumeMode": "Filesystem",
                    "accessModes": {"readWriteOnce": True, "readOnlyMany": True},
                },
            },
            {
                "name": "pvc-d",
                "ephemeral": {
                    "volumeClaimTemplate": {
                        "spec": {
                            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                            "resources": {"requests": {"storage": "1Ti"}},
                            "storageClassName": "fast",
                            "volumeMode": "Filesystem",
                        }
                    }
                },
            },
            0,
        ),
    ],
)
def test_pvc(pvc: dict[str, Any], volume: dict[str, Any], claims: int) -> None:
    pod, claim_manifests = storage_of({"pvc": [pvc]})
    assert volume in pod["spec"]["volumes"]
    assert len(claim_manifests) == claims
    if claims:
        assert claim_manifests[0]["spec"] == {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
        }


@pytest.mark.parametrize(
    ("storage", "problem"),
    [
        ({"pvc": [{"name": "d", "path": "/d"}]}, "storage.pvc[d].claimName: required"),
        (
            {"pvc": [{"name": "d", "claimName": "c", "path": "/d", "existingPvc": False}]},
            "claimInfo.size: required",
        ),
        (
            {
                "pvc": [
                    {
                        "name": "d",
                        "claimName": "c",
                        "path": "/d",
                        "ephemeral": True,
                        "existingPvc": True,
                    }
                ]
            },
            "ephemeral claim is new",
        ),
        ({"pvc": [{"name": "d", "claimName": "c"}]}, "storage.pvc[d].path: required"),
        ({"pvc": [{"name": "d", "claimName": "c", "path": "rel"}]}, "must be an absolute path"),
        (
            {
                "nfs": [{"name": "a", "server": "s", "path": "/e", "mountPath": "/m"}],
                "hostPath": [{"name": "b", "path": "/h", "mountPath": "/m/"}],
            },
            "storage.hostPath[b].mountPath: '/m/' is already the mount path of storage.nfs[a].mountPath",
        ),
        (
            {"nfs": [{"name": "a", "path": "/e", "mountPath": "/m"}]},
            "storage.nfs[a].server: required",
        ),
        (
            {
                "git": [
                    {
                        "name": "g",
                        "repository": "r",
                        "path": "/g",
                        "secretName": "s",
                        "passwordSecret": "p",
                    }
                ]
            },
            "not both",
        ),
        (
            {"git": [{"name": "g", "repository": "r", "path": "/g", "username": "ada"}]},
            "no password",
        ),
        ({"configMapVolumes": [{"name": "c", "mountPath": "/c"}]}, "configMap: required"),
        ({"secretVolume": [{"name": "s", "mountPath": "/s"}]}, "secret: required"),
        ({"dataVolume": [{"id": "nope", "mountPath": "/d"}]}, "no asset with id 'nope'"),
    ],
)
def test_storage_problems(storage: dict[str, Any], problem: str) -> None:
    lines = render_problems("training", spec(storage=storage))
    assert any(problem in line for line in lines), lines


def test_plain_volumes() -> None:
    storage = {
        "nfs": [
            {
                "name": "n",
                "server": "nfs.example.com",
                "path": "/export",
                "mountPath": "/n",
                "readOnly": True,
            }
        ],
        "hostPath": [
            {
                "name": "h",
                "path": "/var/cache",
                "mountPath": "/h",
                "mountPropagation": "HostToContainer",
            }
        ],
        "configMapVolumes": [
            {
                "name": "c",
                "configMap": "settings",
                "mountPath": "/etc/app.yaml",
                "subPath": "app.yaml",
            }
        ],
        "secretVolume": [{"name": "s", "secret": "tls", "mountPath": "/tls", "defaultMode": 0o400}],
        "emptyDir": [
            {
                "name": "Scratch Space",
                "mountPath": "/scratch",
                "medium": "Memory",
                "sizeLimit": "1Gi",
            }
        ],
    }
    pod, _ = storage_of(storage)
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    mounts = {mount["name"]: mount for mount in pod["spec"]["containers"][0]["volumeMounts"]}
    assert volumes["nfs-n"]["nfs"] == {
        "server": "nfs.example.com",
        "path": "/export",
        "readOnly": True,
    }
    assert mounts["nfs-n"] == {"name": "nfs-n", "mountPath": "/n", "readOnly": True}
    assert volumes["host-h"]["hostPath"] == {"path": "/var/cache"}
    assert mounts["host-h"]["mountPropagation"] == "HostToContainer"
    assert volumes["cm-c"]["configMap"] == {"name": "settings"}
    assert mounts["cm-c"]["subPath"] == "app.yaml"
    assert volumes["secret-s"]["secret"] == {"secretName": "tls", "defaultMode": 0o400}
    scratch = next(name for name in volumes if name.startswith("empty-scratch-space-"))
    assert volumes[scratch]["emptyDir"] == {"medium": "Memory", "sizeLimit": "1Gi"}


@pytest.mark.parametrize(
    ("credentials", "variables"),
    [
        ({}, {}),
        (
            {"secretName": "git-creds"},
            {
                "GIT_USERNAME": {"secretKeyRef": {"name": "git-creds", "key": "username"}},
                "GIT_PASSWORD": {"secretKeyRef": {"name": "git-creds", "key": "password"}},
            },
        ),
        (
            {"secretName": "git-creds", "username": "user"},
            {
                "GIT_USERNAME": {"secretKeyRef": {"name": "git-creds", "key": "user"}},
                "GIT_PASSWORD": {"secretKeyRef": {"name": "git-creds", "key": "password"}},
            },
        ),
        (
            {"passwordSecret": "token", "username": "ada"},
            {
                "GIT_USERNAME": "ada",
                "GIT_PASSWORD": {"secretKeyRef": {"name": "token", "key": "password"}},
            },
        ),
    ],
)
def test_git_clone_credentials(credentials: dict[str, str], variables: dict[str, Any]) -> None:
    git = {
        "name": "code",
        "repository": "https://example.com/r.git",
        "revision": "abc123",
        "path": "/code",
        **credentials,
    }
    pod, _ = storage_of({"git": [git]})
    (clone,) = pod["spec"]["initContainers"]
    environment = {v["name"]: v.get("value", v.get("valueFrom")) for v in clone["env"]}
    assert environment["GIT_REPOSITORY"] == "https://example.com/r.git"
    assert environment["GIT_REVISION"] == "abc123"
    assert "GIT_BRANCH" not in environment
    assert {k: environment[k] for k in variables} == variables
    assert set(environment) - set(variables) == {
        "HOME",
        "GIT_REPOSITORY",
        "GIT_DESTINATION",
        "GIT_REVISION",
    }
    assert "abc123" not in clone["command"][2], "values reach the script as variables only"


def test_git_helper_runs_as_nobody_when_the_pod_must_not_run_as_root() -> None:
    git = {"name": "code", "repository": "https://example.com/r.git", "path": "/code"}
    pod = main_pod(
        rendered("training", spec(storage={"git": [git]}, security={"runAsNonRoot": True}))
    )
    assert pod["spec"]["initContainers"][0]["securityContext"]["runAsUser"] == 65534


S3 = {"name": "data", "bucket": "research", "path": "/data"}


def test_every_container_podwright_adds_takes_the_profiles_helper_resources() -> None:
    """A ResourceQuota on cpu or memory refuses a pod any container of which, init containers
    included, leaves them out: the clone and the FUSE adapter state both, from the profile."""
    helpers = HelperResources(
        requests=Amounts(cpu=Decimal("0.25"), memory=Decimal(2**28)),
        limits=Amounts(cpu=Decimal(2), memory=Decimal(2**30)),
    )
    git = {"name": "code", "repository": "https://example.com/r.git", "path": "/code"}
    profile = dataclasses.replace(PERMISSIVE_PROFILE, helper_resources=helpers)
    pod, _ = storage_of({"git": [git], "s3": [S3]}, profile=profile)
    expected = {
        "requests": {"cpu": "250m", "memory": "256Mi"},
        "limits": {"cpu": "2", "memory": "1Gi"},
    }
    assert [(c["name"], c["resources"]) for c in pod["spec"]["initContainers"]] == [
        ("clone-git-code", expected),
        ("fuse-s3-data", expected),
    ]
    assert "resources" not in pod["spec"]["containers"][0], "the workload's own: its compute's"


@pytest.mark.parametrize(
    ("adapter", "s3", "command", "variables"),
    [
        (
            S3Adapter.S3FS,
            S3,
            [
                "s3fs",
                "research",
                "/podwright/s3",
                "-f",
                "-o",
                "allow_other",
                "-o",
                "public_bucket=1",
            ],
            [],
        ),
        (
            S3Adapter.S3FS,
            {
                **S3,
                "url": "https://s3.example.com",
                "accessKeySecret": "key",
                "secretKeyOfAccessKeyId": "id",
            },
            [
                "s3fs",
                "research",
                "/podwright/s3",
                "-f",
                "-o",
                "allow_other",
                "-o",
                "url=https://s3.example.com",
            ],
            [("AWSACCESSKEYID", "key", "id"), ("AWSSECRETACCESSKEY", "key", "SecretKey")],
        ),
        (
            S3Adapter.MOUNTPOINT_S3,
            {**S3, "url": "https://s3.example.com"},
            [
                "mount-s3",
                "research",
                "/podwright/s3",
                "--foreground",
                "--allow-other",
                "--endpoint-url",
                "https://s3.example.com",
                "--no-sign-request",
            ],
            [],
        ),
        (
            S3Adapter.MOUNTPOINT_S3,
            {**S3, "accessKeySecret": "key"},
            ["mount-s3", "research", "/podwright/s3", "--foreground", "--allow-other"],
            [
                ("AWS_ACCESS_KEY_ID", "key", "AccessKeyId"),
                ("AWS_SECRET_ACCESS_KEY", "key", "SecretKey"),
            ],
        ),
    ],
)
def test_s3_sidecar(
    adapter: S3Adapter,
    s3: dict[str, Any],
    command: list[str],
    variables: list[tuple[str, str, str]],
) -> None:
    profile = dataclasses.replace(PERMISSIVE_PROFILE, s3_adapter=adapter)
    pod, _ = storage_of({"s3": [s3]}, profile=profile)
    (sidecar,) = pod["spec"]["initContainers"]
    assert sidecar["command"] == command
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["securityContext"]["privileged"] is True
    assert [
        (v["name"], v["valueFrom"]["secretKeyRef"]["name"], v["valueFrom"]["secretKeyRef"]["key"])
        for v in sidecar.get("env", [])
    ] == variables
    assert {"name": "s3-data", "mountPath": "/data", "mountPropagation": "HostToContainer"} in pod[
        "spec"
    ]["containers"][0]["volumeMounts"]


@pytest.mark.parametrize(
    "grant", [FuseGrantMode.NONE, FuseGrantMode.DEVICE_PLUGIN, FuseGrantMode.PROXY]
)
def test_s3_needs_a_privileged_fuse_grant(grant: FuseGrantMode) -> None:
    profile = dataclasses.replace(PERMISSIVE_PROFILE, fuse_grant=grant)
    (line,) = render_problems("training", spec(storage={"s3": [S3]}), profile=profile)
    assert line.startswith("storage.s3[data]: cannot mount the bucket: ")
    assert grant.value in line


def test_data_volume_takes_the_asset_of_its_id() -> None:
    catalogue = catalogue_from_data(
        {
            "apiVersion": "podwright.dev/v1",
            "kind": "AssetCatalogue",
            "assets": [
                {
                    "id": "a1",
                    "name": "sets",
                    "kind": "pvc",
                    "spec": {"claimName": "sets", "path": "/sets"},
                },
                {
                    "id": "b2",
                    "name": "bucket",
                    "kind": "s3",
                    "spec": {"bucket": "b", "path": "/b"},
                    "credentials": "s3-key",
                },
            ],
        }
    )
    storage = {
        "dataVolume": [{"id": "a1", "mountPath": "/mnt/sets", "readOnly": True}, {"id": "b2"}]
    }
    pod, _ = storage_of(storage, catalogue=catalogue)
    assert {
        "name": "data-a1",
        "persistentVolumeClaim": {"claimName": "sets", "readOnly": True},
    } in pod["spec"]["volumes"]
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "data-a1", "mountPath": "/mnt/sets", "readOnly": True} in mounts
    sidecar = pod["spec"]["initContainers"][0]
    assert sidecar["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "s3-key"


# -- scheduling -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("workload_type", "priority", "class_name", "preemptibility"),
    [
        ("workspace", None, "podwright-high", "non-preemptible"),
        ("training", None, "podwright-low", "preemptible"),
        ("inference", None, "podwright-very-high", "non-preemptible"),
        ("training", "medium", "podwright-medium", "preemptible"),
        ("workspace", "medium-high", "podwright-medium-high", "preemptible"),  # 90 < 100
        ("training", "high", "podwright-high", "non-preemptible"),
    ],
)
def test_priority(
    workload_type: str, priority: str | None, class_name: str, preemptibility: str
) -> None:
    fields = spec(priorityClass=priority) if priority else spec()
    pod = main_pod(rendered(workload_type, fields))
    assert pod["spec"]["priorityClassName"] == class_name
    assert pod["metadata"]["labels"]["kai.scheduler/preemptibility"] == preemptibility
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "research"
    assert pod["spec"]["schedulerName"] == "kai-scheduler"


def test_default_scheduler_sets_no_kai_labels() -> None:
    pod = main_pod(rendered("training", spec(), profile=DEFAULT_PROFILE))
    assert "schedulerName" not in pod["spec"]
    assert not any(key.startswith("kai.scheduler/") for key in pod["metadata"]["labels"])


@pytest.mark.parametrize("given", [True, False])
def test_a_priority_the_cluster_does_not_offer(given: bool) -> None:
    classes = {**PERMISSIVE_PROFILE.priority_classes, "low": None}
    profile = dataclasses.replace(PERMISSIVE_PROFILE, priority_classes=classes)
    fields = spec(priorityClass="low") if given else spec()
    (line,) = render_problems("training", fields, profile=profile)
    assert line.startswith(
        "priorityClass: the cluster profile offers no PriorityClass for priority 'low'"
    )
    assert line.endswith("(the training default)") != given


def test_priority_classes_keep_their_preemptibility() -> None:
    classes = {**PERMISSIVE_PROFILE.priority_classes, "high": PriorityLevel("gold", 125, True)}
    profile = dataclasses.replace(PERMISSIVE_PROFILE, priority_classes=classes)
    pod = main_pod(rendered("workspace", spec(), profile=profile))
    assert pod["spec"]["priorityClassName"] == "gold"
    assert pod["metadata"]["labels"]["kai.scheduler/preemptibility"] == "preemptible"


def test_node_type_pools_and_required_affinity() -> None:
    fields = spec(
        nodeType="dgx",
        nodePools=["h100", "a100", "l40"],
        nodeAffinityRequired=[
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
            {"matchExpressions": [{"key": "gpu.count", "operator": "Gt", "values": ["3"]}]},
        ],
    )
    pod = main_pod(rendered("training", fields))
    assert pod["spec"]["nodeSelector"] == {"podwright.dev/node-type": "dgx"}
    affinity = pod["spec"]["affinity"]["nodeAffinity"]
    pools = {"key": "podwright.dev/node-pool", "operator": "In", "values": ["h100", "a100", "l40"]}
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}, pools]},
        {"matchExpressions": [{"key": "gpu.count", "operator": "Gt", "values": ["3"]}, pools]},
    ]
    preferred = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [
        (term["weight"], term["preference"]["matchExpressions"][0]["values"]) for term in preferred
    ] == [
        (100, ["h100"]),
        (99, ["a100"]),
        (98, ["l40"]),
    ]


def test_one_node_pool_is_required_without_preference() -> None:
    affinity = main_pod(rendered("training", spec(nodePools=["a100"])))["spec"]["affinity"][
        "nodeAffinity"
    ]
    assert "preferredDuringSchedulingIgnoredDuringExecution" not in affinity


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ({"key": "k", "operator": "In"}, "In needs at least one value"),
        ({"key": "k", "operator": "Exists", "values": ["x"]}, "Exists takes no values"),
        ({"key": "k", "operator": "Lt", "values": ["x"]}, "Lt takes exactly one integer"),
        ({"operator": "Exists"}, "is not a node label key"),
        ({"key": "k"}, "operator: required"),
    ],
)
def test_node_affinity_problems(expression: dict[str, Any], problem: str) -> None:
    lines = render_problems(
        "training", spec(nodeAffinityRequired=[{"matchExpressions": [expression]}])
    )
    assert any(
        problem in line and "nodeAffinityRequired[0].matchExpressions[0]" in line for line in lines
    ), lines


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("required", "requiredDuringSchedulingIgnoredDuringExecution"),
        ("preferred", "preferredDuringSchedulingIgnoredDuringExecution"),
        (None, "preferredDuringSchedulingIgnoredDuringExecution"),
    ],
)
def test_pod_affinity(rule: str | None, expected: str) -> None:
    fields = spec(podAffinityTopology="kubernetes.io/hostname")
    if rule:
        fields["podAffinitySchedulingRule"] = rule
    affinity = main_pod(rendered("training", fields, name="train"))["spec"]["affinity"][
        "podAffinity"
    ]
    assert list(affinity) == [expected]
    assert "kubernetes.io/hostname" in str(affinity[expected])
    assert "'podwright.dev/workload': 'train'" in str(affinity[expected])


def test_pod_affinity_needs_a_topology() -> None:
    lines = render_problems("training", spec(podAffinitySchedulingRule="required"))
    assert lines[0].startswith("podAffinityTopology: required with podAffinitySchedulingRule")


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        (
            {"name": "t", "key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
        ),
        ({"name": "t", "key": "k", "value": "v"}, {"key": "k", "operator": "Equal", "value": "v"}),
        ({"name": "t", "operator": "Exists"}, {"operator": "Exists"}),
        (
            {"name": "t", "key": "k", "operator": "Exists", "effect": "NoExecute", "seconds": 30},
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        ),
        ({"name": "t", "key": "k", "value": "v", "operator": "Exists"}, "Exists matches any value"),
        ({"name": "t", "value": "v"}, "required with operator Equal"),
        (
            {"name": "t", "key": "k", "operator": "Exists", "seconds": 30},
            "only to effect NoExecute",
        ),
    ],
)
def test_tolerations(toleration: dict[str, Any], expected: dict[str, Any] | str) -> None:
    if isinstance(expected, str):
        lines = render_problems("training", spec(tolerations=[toleration]))
        assert any(expected in line and line.startswith("tolerations[t].") for line in lines), lines
    else:
        assert main_pod(rendered("training", spec(tolerations=[toleration])))["spec"][
            "tolerations"
        ] == [expected]


def test_category_is_a_label() -> None:
    pod = main_pod(rendered("training", spec(category="hpo")))
    assert pod["metadata"]["labels"]["podwright.dev/category"] == "hpo"


LABELS = [{"name": "team", "value": "vision"}, {"name": "app.kubernetes.io/part-of", "value": "x"}]
ANNOTATIONS = [{"name": "example.com/owner", "value": "Ada Lovelace"}]
NEW_CLAIM = {"name": "work", "claimName": "work", "path": "/work", "claimInfo": {"size": "1Gi"}}
PORTS = [{"name": "http", "container": 8080}]
OWN_FIELDS = {"labels": LABELS, "annotations": ANNOTATIONS, "storage": {"pvc": [NEW_CLAIM]}}
LABELLED: dict[str, dict[str, Any]] = {
    "workspace": spec(**OWN_FIELDS, ports=PORTS),
    "training": spec(**OWN_FIELDS, ports=PORTS),
    "distributed": {
        "master": spec(**OWN_FIELDS, ports=PORTS),
        "worker": spec(**OWN_FIELDS, distributedFramework="PyTorch", numWorkers=2),
    },
    "inference": spec(**OWN_FIELDS),
}


COMPANIONS = {"PersistentVolumeClaim", "Service"}
"""The kinds rendered beside a workload's resource, which hold no pods."""


def pod_metadata(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The metadata of the pods a manifest describes: a Pod's own, or its pod templates'."""
    if manifest["kind"] == "Pod":
        return [manifest["metadata"]]
    spec_ = manifest["spec"]
    if "template" in spec_:
        return [spec_["template"]["metadata"]]
    replicas = next(value for key, value in spec_.items() if key.endswith("ReplicaSpecs"))
    return [replica["template"]["metadata"] for replica in replicas.values()]


@pytest.mark.parametrize("workload_type", list(LABELLED))
def test_user_labels_go_on_every_object_and_annotations_on_pods(workload_type: str) -> None:
    rendering = rendered(workload_type, LABELLED[workload_type])
    expected = {"team": "vision", "app.kubernetes.io/part-of": "x"}
    objects = {manifest["kind"] for manifest in rendering.manifests}
    assert "PersistentVolumeClaim" in objects
    assert "Service" in objects
    for manifest in rendering.manifests:
        metadata = manifest["metadata"]
        assert expected.items() <= metadata["labels"].items(), manifest["kind"]
        companion = manifest["apiVersion"] == "v1" and manifest["kind"] in COMPANIONS
        pods = [] if companion else pod_metadata(manifest)
        for pod in pods:
            assert expected.items() <= pod["labels"].items()
            assert pod["annotations"]["example.com/owner"] == "Ada Lovelace"
        if manifest["kind"] != "Pod":
            assert "example.com/owner" not in metadata.get("annotations", {}), manifest["kind"]


def test_podwright_labels_keep_their_precedence() -> None:
    labels = [
        {"name": "kai.scheduler/queue", "value": "mine"},
        {"name": "networking.knative.dev/visibility", "value": "public"},
    ]
    serving = {"container": 8080, "clusterLocalAccessOnly": True}
    service = rendered("inference", spec(labels=labels, servingPort=serving)).manifests[0]
    assert service["metadata"]["labels"]["networking.knative.dev/visibility"] == "cluster-local"
    pod = main_pod(rendered("training", spec(labels=labels[:1]), profile=KAI_PROFILE))
    assert pod["metadata"]["labels"]["kai.scheduler/queue"] == "research"  # the profile's


def test_a_distributed_job_carries_both_roles_labels_which_must_agree() -> None:
    master = spec(labels=[{"name": "team", "value": "a"}, {"name": "only-master", "value": "m"}])
    worker = spec(
        distributedFramework="PyTorch", numWorkers=1, labels=[{"name": "team", "value": "a"}]
    )
    job = rendered("distributed", {"master": master, "worker": worker}).manifests[0]
    assert job["metadata"]["labels"]["team"] == "a"
    assert job["metadata"]["labels"]["only-master"] == "m"
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert "only-master" not in replicas["Worker"]["template"]["metadata"]["labels"]
    worker["labels"] = [{"name": "team", "value": "b"}]
    assert render_problems("distributed", {"master": master, "worker": worker}) == [
        "master.labels[team]: the job carries one value of label 'team': worker gives 'b' and "
        "master 'a'; give both roles the same value, or the label to one role only"
    ]


def test_master_and_worker_share_a_new_claim_only_when_they_ask_for_the_same() -> None:
    def storage(size: str) -> dict[str, Any]:
        claim = {"name": "d", "claimName": "shared", "path": "/data", "claimInfo": {"size": size}}
        return {"pvc": [claim]}

    master = spec(storage=storage("10Gi"))
    worker = spec(distributedFramework="PyTorch", numWorkers=1, storage=storage("10Gi"))
    manifests = rendered("distributed", {"master": master, "worker": worker}).manifests
    assert [m["kind"] for m in manifests].count("PersistentVolumeClaim") == 1
    worker["storage"] = storage("20Gi")
    assert render_problems("distributed", {"master": master, "worker": worker}) == [
        "storage.pvc: master and worker ask for claim 'shared' with different specs"
    ]


# -- lifecycle ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "job_spec"),
    [
        ({}, {}),
        (
            {
                "completions": 10,
                "parallelism": 2,
                "backoffLimit": 3,
                "autoDeletionTimeAfterCompletionSeconds": 60,
            },
            {"completions": 10, "parallelism": 2, "backoffLimit": 3, "ttlSecondsAfterFinished": 60},
        ),
        (
            {"terminateAfterPreemption": True},
            {
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "FailJob",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        }
                    ]
                }
            },
        ),
        (
            {"terminateAfterPreemption": False},
            {
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "Ignore",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        }
                    ]
                }
            },
        ),
    ],
)
def test_training_job(fields: dict[str, Any], job_spec: dict[str, Any]) -> None:
    rendering = rendered("training", spec(**fields))
    (job,) = rendering.manifests
    assert job["kind"] == "Job"
    assert {k: v for k, v in job["spec"].items() if k != "template"} == job_spec
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"restartPolicy": "Always"}, "restartPolicy: a Job's pods restart Never or OnFailure"),
        (
            {"restartPolicy": "OnFailure", "terminateAfterPreemption": True},
            "needs restartPolicy Never",
        ),
    ],
)
def test_training_problems(fields: dict[str, Any], problem: str) -> None:
    assert any(problem in line for line in render_problems("training", spec(**fields)))


def test_workspace_pod_lifecycle() -> None:
    fields = spec(
        restartPolicy="OnFailure",
        terminationGracePeriodSeconds=120,
        backoffLimit=2,
        autoDeletionTimeAfterCompletionSeconds=600,
        terminateAfterPreemption=True,
    )
    (pod,) = rendered("workspace", fields, name="ws").manifests
    assert pod["spec"]["restartPolicy"] == "OnFailure"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 120
    annotations = pod["metadata"]["annotations"]
    assert annotations["podwright.dev/backoff-limit"] == "2"
    assert annotations["podwright.dev/ttl-seconds-after-finished"] == "600"
    assert annotations["podwright.dev/terminate-after-preemption"] == "true"


# -- exposure -------------------------------------------------------------------------------------


def test_ports_become_one_service_per_type() -> None:
    ports = [
        {"name": "jupyter", "container": 8888, "toolType": "jupyter"},
        {"name": "Web UI", "container": 8080, "serviceType": "LoadBalancer", "external": 80},
        {"name": "ssh", "container": 22, "serviceType": "NodePort", "external": 30022},
    ]
    rendering = rendered("workspace", spec(ports=ports), name="ws")
    assert kinds(rendering) == ["Pod", "Service", "Service", "Service"]
    services = {s["metadata"]["name"]: s["spec"] for s in rendering.manifests[1:]}
    assert services["ws-clusterip"]["ports"] == [
        {"name": "jupyter", "protocol": "TCP", "targetPort": 8888, "port": 8888}
    ]
    assert services["ws-loadbalancer"]["ports"] == [
        {"name": "port-8080", "protocol": "TCP", "targetPort": 8080, "port": 80}
    ]
    assert services["ws-nodeport"]["ports"] == [
        {"name": "ssh", "protocol": "TCP", "targetPort": 22, "port": 22, "nodePort": 30022}
    ]
    assert all(s["selector"] == {"podwright.dev/workload": "ws"} for s in services.values())


def test_duplicate_container_ports() -> None:
    ports = [{"name": "a", "container": 80}, {"name": "b", "container": 80}]
    assert render_problems("workspace", spec(ports=ports)) == [
        "ports[b].container: port 80 is already ports[a]"
    ]


@pytest.mark.parametrize(
    ("url", "offered", "problem"),
    [
        ({"url": "https://x", "authorizationType": "public"}, {"public"}, None),
        (
            {"url": "https://x", "authorizationType": "authenticatedUsers"},
            {"public"},
            "cannot enforce 'authenticatedUsers'",
        ),
        (
            {
                "url": "https://x",
                "authorizationType": "authorizedUsersOrGroups",
                "authorizedUsers": ["ada"],
            },
            {"authorizedUsersOrGroups"},
            None,
        ),
        (
            {"url": "https://x", "authorizationType": "authorizedUsersOrGroups"},
            {"authorizedUsersOrGroups"},
            "needs authorizedUsers or authorizedGroups",
        ),
        (
            {
                "url": "https://x",
                "authorizationType": "authorizedUsersOrGroups",
                "authorizedUsers": ["a"],
                "authorizedGroups": ["g"],
            },
            {"authorizedUsersOrGroups"},
            "exclude each other",
        ),
        (
            {"url": "https://x", "authorizedUsers": ["a"]},
            {"public"},
            "applies only with authorizationType authorizedUsersOrGroups",
        ),
    ],
)
def test_exposed_url_access(url: dict[str, Any], offered: set[str], problem: str | None) -> None:
    profile = dataclasses.replace(PERMISSIVE_PROFILE, authorization_types=frozenset(offered))
    if problem is None:
        pod = main_pod(rendered("workspace", spec(exposedUrls=[url]), profile=profile))
        assert '"url": "https://x"' in pod["metadata"]["annotations"]["podwright.dev/exposed-urls"]
    else:
        lines = render_problems("workspace", spec(exposedUrls=[url]), profile=profile)
        assert any(problem in line and line.startswith("exposedUrls[0].") for line in lines), lines


def test_related_urls_annotation() -> None:
    pod = main_pod(
        rendered(
            "workspace",
            spec(relatedUrls=[{"url": "https://wandb.example.com/run", "type": "wandb"}]),
        )
    )
    assert (
        pod["metadata"]["annotations"]["podwright.dev/related-urls"]
        == '[{"type": "wandb", "url": "https://wandb.example.com/run"}]'
    )


# -- resource kinds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "kind", "replicas", "container"),
    [
        ("PyTorch", "PyTorchJob", ("pytorchReplicaSpecs", ["Master", "Worker"]), "pytorch"),
        ("MPI", "MPIJob", ("mpiReplicaSpecs", ["Launcher", "Worker"]), "mpi"),
        ("TF", "TFJob", ("tfReplicaSpecs", ["Chief", "Worker"]), "tensorflow"),
        ("XGBoost", "XGBoostJob", ("xgbReplicaSpecs", ["Master", "Worker"]), "xgboost"),
    ],
)
def test_distributed_kinds(
    framework: str, kind: str, replicas: tuple[str, list[str]], container: str
) -> None:
    workload = {"master": spec(), "worker": spec(distributedFramework=framework, numWorkers=3)}
    rendering = rendered("distributed", workload, name="dist")
    (job,) = rendering.manifests
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", kind)
    field, types = replicas
    assert list(job["spec"][field]) == types
    assert [job["spec"][field][t]["replicas"] for t in types] == [1, 3]
    for replica_type in types:
        pod = job["spec"][field][replica_type]["template"]
        assert pod["spec"]["containers"][0]["name"] == container
    assert set(rendering.pod_templates) == {"master", "worker"}
    assert rendering.pod_templates["worker"].labels["podwright.dev/role"] == "worker"


def test_jax_runs_workers_only() -> None:
    workload = {"worker": spec(distributedFramework="JAX", numWorkers=2)}
    (job,) = rendered("distributed", workload).manifests
    assert list(job["spec"]["jaxReplicaSpecs"]) == ["Worker"]
    lines = render_problems("distributed", {"master": spec(), **workload})
    assert lines[0].startswith("master: a JAXJob runs workers only")


@pytest.mark.parametrize(
    ("worker", "expected", "problem"),
    [
        (
            {"minReplicas": 2, "maxReplicas": 8},
            {"elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": 2, "maxReplicas": 8}},
            None,
        ),
        (
            {"maxReplicas": 6},
            {"elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": 4, "maxReplicas": 6}},
            None,
        ),
        ({"minReplicas": 5}, None, "4 workers lie outside the elastic range 5..5"),
        (
            {
                "cleanPodPolicy": "All",
                "backoffLimit": 2,
                "autoDeletionTimeAfterCompletionSeconds": 10,
            },
            {
                "runPolicy": {
                    "cleanPodPolicy": "All",
                    "backoffLimit": 2,
                    "ttlSecondsAfterFinished": 10,
                }
            },
            None,
        ),
    ],
)
def test_pytorch_job_fields(
    worker: dict[str, Any], expected: dict[str, Any] | None, problem: str | None
) -> None:
    workload = {
        "master": spec(),
        "worker": spec(distributedFramework="PyTorch", numWorkers=4, **worker),
    }
    if problem:
        assert any(problem in line for line in render_problems("distributed", workload))
        return
    assert expected is not None
    (job,) = rendered("distributed", workload).manifests
    assert {key: job["spec"][key] for key in expected} == expected


def test_run_policy_fields_must_agree_across_roles() -> None:
    workload = {
        "master": spec(backoffLimit=1),
        "worker": spec(distributedFramework="PyTorch", numWorkers=2, backoffLimit=3),
    }
    assert render_problems("distributed", workload) == [
        "worker.backoffLimit: the job has one backoffLimit, but master and worker give 3 and 1"
    ]


@pytest.mark.parametrize(
    ("worker", "expected", "problem"),
    [
        ({"slotsPerWorker": 4}, {"slotsPerWorker": 4, "mainContainer": "mpi"}, None),
        ({"mpiLauncherCreationPolicy": "WaitForWorkersReady"}, {"mainContainer": "mpi"}, None),
        (
            {"mpiLauncherCreationPolicy": "AtStartup"},
            None,
            "worker.mpiLauncherCreationPolicy: the kubeflow.org/v1 MPIJob always holds",
        ),
        (
            {"sshAuthMountPath": "/root/.ssh"},
            None,
            "worker.sshAuthMountPath: the training operator's kubeflow.org/v1 MPIJob starts ranks with kubectl exec",
        ),
    ],
)
def test_mpi_job_fields(
    worker: dict[str, Any], expected: dict[str, Any] | None, problem: str | None
) -> None:
    workload = {
        "master": spec(),
        "worker": spec(distributedFramework="MPI", numWorkers=2, **worker),
    }
    if problem:
        assert any(line.startswith(problem) for line in render_problems("distributed", workload))
        return
    assert expected is not None
    (job,) = rendered("distributed", workload).manifests
    assert {key: job["spec"][key] for key in expected} == expected


@pytest.mark.parametrize(
    ("worker", "problem"),
    [
        ({"numWorkers": 2}, "worker.distributedFramework: required"),
        ({"distributedFramework": "TF"}, "worker.numWorkers: required: at least 1 worker"),
        (
            {"distributedFramework": "TF", "numWorkers": 0},
            "worker.numWorkers: required: at least 1 worker",
        ),
    ],
)
def test_distributed_problems(worker: dict[str, Any], problem: str) -> None:
    lines = render_problems("distributed", {"master": spec(), "worker": spec(**worker)})
    assert any(line.startswith(problem) for line in lines), lines


def test_claims_of_both_roles_are_created_once() -> None:
    pvc = {
        "name": "shared",
        "claimName": "shared",
        "path": "/shared",
        "claimInfo": {"size": "1Ti", "accessModes": {"readWriteMany": True}},
    }
    workload = {
        "master": spec(storage={"pvc": [pvc]}),
        "worker": spec(distributedFramework="PyTorch", numWorkers=2, storage={"pvc": [pvc]}),
    }
    assert kinds(rendered("distributed", workload)) == ["PersistentVolumeClaim", "PyTorchJob"]


# -- inference ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("autoscaling", "annotations", "problem"),
    [
        ({}, {"min-scale": "1", "max-scale": "1"}, None),
        ({"minReplicas": 0}, {"min-scale": "0", "max-scale": "1"}, None),
        ({"minReplicas": 3}, {"min-scale": "3", "max-scale": "3"}, None),
        (
            {
                "minReplicas": 1,
                "maxReplicas": 5,
                "metric": "throughput",
                "metricThreshold": 50,
                "initialReplicas": 2,
                "activationReplicas": 2,
            },
            {
                "min-scale": "1",
                "max-scale": "5",
                "metric": "rps",
                "target": "50",
                "initial-scale": "2",
                "activation-scale": "2",
            },
            None,
        ),
        (
            {"minReplicas": 1, "maxReplicas": 5},
            None,
            "autoscaling.metric: required when minReplicas < maxReplicas",
        ),
        (
            {"minReplicas": 1, "maxReplicas": 5, "metric": "latency", "metricThreshold": 100},
            None,
            "'latency' cannot be honoured",
        ),
        ({"metric": "concurrency"}, None, "autoscaling.metricThreshold: required with metric"),
        ({"metricThreshold": 5}, None, "autoscaling.metricThreshold: applies only with a metric"),
        (
            {"minReplicas": 1, "scaleToZeroRetentionSeconds": 30},
            None,
            "applies only when minReplicas is 0",
        ),
    ],
)
def test_knative_autoscaling(
    autoscaling: dict[str, Any], annotations: dict[str, str] | None, problem: str | None
) -> None:
    fields = spec(autoscaling=autoscaling)
    if problem:
        assert any(problem in line for line in render_problems("inference", fields))
        return
    assert annotations is not None
    (service,) = rendered("inference", fields).manifests
    prefix = "autoscaling.knative.dev/"
    given = {
        key.removeprefix(prefix): value
        for key, value in service["spec"]["template"]["metadata"]["annotations"].items()
        if key.startswith(prefix)
    }
    assert given == annotations


def test_knative_serving_fields() -> None:
    fields = spec(
        servingPort={"container": 9000, "protocol": "grpc", "clusterLocalAccessOnly": True},
        autoscaling={"concurrencyHardLimit": 4},
        servingConfiguration={"initializationTimeoutSeconds": 300, "requestTimeoutSeconds": 20},
    )
    (service,) = rendered("inference", fields, name="serve").manifests
    assert (service["apiVersion"], service["kind"]) == ("serving.knative.dev/v1", "Service")
    assert service["metadata"]["labels"]["networking.knative.dev/visibility"] == "cluster-local"
    template = service["spec"]["template"]
    assert template["spec"]["containerConcurrency"] == 4
    assert template["spec"]["timeoutSeconds"] == 20
    assert template["metadata"]["annotations"]["serving.knative.dev/progress-deadline"] == "300s"
    assert template["spec"]["containers"][0]["ports"] == [{"name": "h2c", "containerPort": 9000}]


@pytest.mark.parametrize(
    ("access", "offered", "annotations", "problem"),
    [
        ({}, {"public"}, {}, None),
        (
            {"authorizationType": "authenticatedUsers"},
            {"public"},
            None,
            "cannot enforce 'authenticatedUsers'",
        ),
        (
            {"authorizationType": "authorizedUsersOrGroups", "authorizedGroups": ["ml", "ops"]},
            {"authorizedUsersOrGroups"},
            {
                "podwright.dev/authorization-type": "authorizedUsersOrGroups",
                "podwright.dev/authorized-groups": "ml,ops",
            },
            None,
        ),
    ],
)
def test_knative_access(
    access: dict[str, Any],
    offered: set[str],
    annotations: dict[str, str] | None,
    problem: str | None,
) -> None:
    profile = dataclasses.replace(PERMISSIVE_PROFILE, authorization_types=frozenset(offered))
    fields = spec(servingPort={"container": 8080, **access})
    if problem:
        assert any(
            problem in line for line in render_problems("inference", fields, profile=profile)
        )
        return
    (service,) = rendered("inference", fields, profile=profile).manifests
    assert service["metadata"].get("annotations", {}) == annotations


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"ports": [{"name": "a", "container": 80}]}, "ports: a Knative Service serves one port"),
        (
            {"storage": {"nfs": [{"name": "n", "server": "s", "path": "/e", "mountPath": "/m"}]}},
            "storage.nfs[n]: Knative Serving does not run pods with NFS",
        ),
        (
            {
                "storage": {
                    "pvc": [
                        {
                            "name": "e",
                            "claimName": "e",
                            "path": "/e",
                            "ephemeral": True,
                            "claimInfo": {"size": "1Gi"},
                        }
                    ]
                }
            },
            "ephemeral volumes",
        ),
        (
            {
                "servingPort": {"container": 8080},
                "probes": {"readiness": {"handler": {"httpGet": {"port": 9090}}}},
            },
            "Knative probes the serving port (8080), not 9090",
        ),
    ],
)
def test_knative_refusals(fields: dict[str, Any], problem: str) -> None:
    assert any(problem in line for line in render_problems("inference", spec(**fields)))


@pytest.mark.parametrize(
    ("fields", "feature", "field"),
    [
        ({"priorityClass": "high"}, "kubernetes.podspec-priorityclassname", "priorityClass"),
        ({"nodeType": "gpu"}, "kubernetes.podspec-nodeselector", "nodeType"),
        (
            {"tolerations": [{"name": "t", "operator": "Exists"}]},
            "kubernetes.podspec-tolerations",
            "tolerations",
        ),
        ({"security": {"runAsUid": 5}}, "kubernetes.podspec-securitycontext", "security"),
        (
            {"security": {"capabilities": ["SYS_PTRACE"]}},
            "kubernetes.containerspec-addcapabilities",
            "security.capabilities",
        ),
        (
            {"environmentVariables": [{"name": "P", "podFieldRef": {"path": "metadata.name"}}]},
            "kubernetes.podspec-fieldref",
            "environmentVariables[P].podFieldRef",
        ),
        (
            {"storage": {"hostPath": [{"name": "h", "path": "/h", "mountPath": "/h"}]}},
            "kubernetes.podspec-volumes-hostpath",
            "storage.hostPath[h]",
        ),
        (
            {"storage": {"pvc": [{"name": "p", "claimName": "p", "path": "/p"}]}},
            "kubernetes.podspec-persistent-volume-claim",
            "storage.pvc[p]",
        ),
    ],
)
def test_knative_features_the_profile_must_enable(
    fields: dict[str, Any], feature: str, field: str
) -> None:
    rendered("inference", spec(**fields))  # renders where every feature is enabled
    features = PERMISSIVE_PROFILE.knative_features - {feature}
    profile = dataclasses.replace(PERMISSIVE_PROFILE, knative_features=features)
    lines = render_problems("inference", spec(**fields), profile=profile)
    assert (
        f"{field}: needs Knative's {feature} feature, which the cluster profile does not enable (knative.features)"
        in lines
    )


# -- names and determinism ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("workload_type", "name", "problem"),
    [
        ("training", "Train", "must consist of lower-case letters"),
        ("training", "1train", "must start with a letter"),
        ("training", "t" * 64, "must be at most 63 characters"),
        ("distributed", "d" * 55, "must be at most 54 characters for a distributed workload"),
    ],
)
def test_workload_names(workload_type: str, name: str, problem: str) -> None:
    workload = (
        spec()
        if workload_type != "distributed"
        else {"worker": spec(distributedFramework="JAX", numWorkers=2)}
    )
    lines = render_problems(workload_type, workload, name=name)
    assert any(line.startswith("name: ") and problem in line for line in lines), lines


def test_namespace_goes_on_every_manifest() -> None:
    fields = spec(
        ports=[{"name": "http", "container": 80}],
        storage={
            "pvc": [{"name": "p", "claimName": "p", "path": "/p", "claimInfo": {"size": "1Gi"}}]
        },
    )
    rendering = rendered("workspace", fields, namespace="team-a")
    assert [m["metadata"]["namespace"] for m in rendering.manifests] == ["team-a"] * 3
    with pytest.raises(RenderError, match=r"namespace: 'Team A'"):
        render(WorkloadType.WORKSPACE, "ws", fields, namespace="Team A")


def test_an_invalid_workload_is_refused_before_rendering() -> None:
    with pytest.raises(WorkloadInputError, match=r"compute\.gpuDevicesRequest"):
        render(WorkloadType.TRAINING, "t", spec(compute={"gpuDevicesRequest": "two"}))
    # A pod's grace period is an int64: beyond it, the field is named (it was a ValueError of
    # the pod template's, which only a full rendering met).
    with pytest.raises(WorkloadInputError, match=r"terminationGracePeriodSeconds: must be at most"):
        render(WorkloadType.TRAINING, "t", spec(terminationGracePeriodSeconds=2**63))


def test_every_problem_is_reported() -> None:
    fields = spec(
        tty=True, security={"seccompProfileType": "Localhost"}, compute={"gpuPortionLimit": 0.5}
    )
    assert len(render_problems("training", fields)) == 3
