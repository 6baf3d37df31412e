"""Properties over random valid workloads of every type: they render, to manifests the API server
(and each CRD's schema) accepts, the same way every time.

The strategies build workloads that are valid by construction: every field group in each of its
shapes (GPU whole, fractional by portion or memory; claims existing, new or ephemeral; every
environment source; every toleration form), combined freely. Rendering runs on a profile that
offers everything, so any refusal would be the renderer's fault; and on profiles that offer less,
the validating webhook's check (``check_renders``) refuses exactly what rendering refuses.
"""

from __future__ import annotations

import itertools
import shlex
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from podwright.core.assets import EMPTY_CATALOGUE
from podwright.core.render import DEFAULT_PROFILE, ClusterProfile, RenderError, render
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import check_spec
from tests.manifests import assert_valid_manifests
from tests.render_helpers import KAI_PROFILE, PERMISSIVE_PROFILE, checked_problems

NAME = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)
WORD = st.from_regex(r"[A-Za-z0-9_./=-]{1,10}", fullmatch=True)
LABEL_VALUE = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)
IMAGES = st.sampled_from(["busybox", "registry.example.com/team/train:1.2", "python:3.12-slim"])

Draw = Any


def _maybe(draw: Draw, fields: dict[str, Any], name: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        fields[name] = draw(strategy)


def _names(draw: Draw, count: int) -> list[str]:
    return draw(st.lists(NAME, min_size=count, max_size=count, unique=True))


def _command(draw: Draw) -> str:
    return shlex.join(draw(st.lists(WORD, min_size=1, max_size=4)))


@st.composite
def _compute(draw: Draw) -> dict[str, Any]:
    compute: dict[str, Any] = {}
    cpu = draw(st.sampled_from([None, 0.1, 0.5, 1, 4]))
    if cpu is not None:
        compute["cpuCoreRequest"] = cpu
        _maybe(draw, compute, "cpuCoreLimit", st.sampled_from([cpu, cpu * 2]))
    memory = draw(st.sampled_from([None, ("512Mi", "1Gi"), ("1G", "1G"), ("2Gi", "8Gi")]))
    if memory is not None:
        compute["cpuMemoryRequest"] = memory[0]
        _maybe(draw, compute, "cpuMemoryLimit", st.just(memory[1]))
    gpu = draw(
        st.sampled_from(
            [
                {},
                {"gpuDevicesRequest": 1},
                {"gpuDevicesRequest": 8},
                {"gpuPortionRequest": 2},
                {"gpuRequestType": "portion", "gpuPortionRequest": 0.5},
                {"gpuPortionRequest": 0.25, "gpuPortionLimit": 0.75},
                {"gpuDevicesRequest": 2, "gpuPortionRequest": 0.5},
                {"gpuRequestType": "memory", "gpuMemoryRequest": "4Gi"},
                {"gpuMemoryRequest": "2G", "gpuMemoryLimit": "8G"},
            ]
        )
    )
    compute.update(gpu)
    resources = draw(st.lists(NAME, max_size=2, unique=True))
    if resources:
        compute["extendedResources"] = [
            {"resource": f"example.com/{resource}", "quantity": draw(st.integers(0, 4))}
            for resource in resources
        ]
    _maybe(draw, compute, "largeShmRequest", st.booleans())
    return compute


@st.composite
def _security(draw: Draw, workload_type: WorkloadType) -> dict[str, Any]:
    security: dict[str, Any] = {}
    if draw(st.booleans()):
        security["runAsUid"] = draw(st.integers(1, 65535))
        _maybe(draw, security, "runAsGid", st.integers(0, 65535))
        _maybe(draw, security, "uidGidSource", st.just("custom"))
        _maybe(draw, security, "runAsNonRoot", st.booleans())
    else:
        _maybe(draw, security, "uidGidSource", st.just("fromTheImage"))
        _maybe(draw, security, "runAsNonRoot", st.just(False))
    _maybe(draw, security, "supplementalGroups", st.lists(st.integers(1, 70000), max_size=3))
    _maybe(draw, security, "seccompProfileType", st.sampled_from(["RuntimeDefault", "Unconfined"]))
    _maybe(
        draw,
        security,
        "capabilities",
        st.lists(st.sampled_from(["NET_ADMIN", "cap_sys_ptrace", "NET_BIND_SERVICE"]), max_size=2),
    )
    _maybe(draw, security, "readOnlyRootFilesystem", st.booleans())
    if workload_type is not WorkloadType.INFERENCE:
        _maybe(draw, security, "allowPrivilegeEscalation", st.booleans())
        _maybe(draw, security, "hostIpc", st.booleans())
        _maybe(draw, security, "hostNetwork", st.booleans())
    return security


@st.composite
def _storage(draw: Draw, workload_type: WorkloadType, role: str) -> dict[str, Any]:
    inference = workload_type is WorkloadType.INFERENCE
    mount_paths = (f"/mnt/{role}-{index}" for index in itertools.count())
    storage: dict[str, Any] = {}
    claims = []
    for name in _names(draw, draw(st.integers(0, 3))):
        claim: dict[str, Any] = {
            "name": name,
            "claimName": f"{role}-{name}",
            "path": next(mount_paths),
        }
        shape = draw(
            st.sampled_from(["existing", "new"] if inference else ["existing", "new", "ephemeral"])
        )
        if shape != "existing":
            claim["claimInfo"] = {
                "size": draw(st.sampled_from(["1Gi", "500G", "2Ti"])),
                "accessModes": {"readWriteMany": draw(st.booleans())},
            }
            _maybe(draw, claim["claimInfo"], "storageClass", LABEL_VALUE)
        if shape == "ephemeral":
            claim["ephemeral"] = True
        else:
            _maybe(draw, claim, "existingPvc", st.just(shape == "existing"))
        _maybe(draw, claim, "readOnly", st.booleans())
        claims.append(claim)
    if claims:
        storage["pvc"] = claims
    if not inference and draw(st.booleans()):
        storage["nfs"] = [
            {
                "name": "n",
                "server": "nfs.example.com",
                "path": "/export",
                "mountPath": next(mount_paths),
            }
        ]
        storage["s3"] = [
            {
                "name": name,
                "bucket": name,
                "path": next(mount_paths),
                **draw(st.sampled_from([{}, {"accessKeySecret": "s3"}])),
            }
            for name in _names(draw, draw(st.integers(0, 2)))
        ]
    if draw(st.booleans()):
        storage["hostPath"] = [
            {
                "name": "h",
                "path": "/var/cache",
                "mountPath": next(mount_paths),
                "mountPropagation": "HostToContainer",
            }
        ]
        storage["configMapVolumes"] = [
            {"name": "c", "configMap": "settings", "mountPath": next(mount_paths)}
        ]
        storage["secretVolume"] = [
            {"name": "s", "secret": "tls", "mountPath": next(mount_paths), "defaultMode": 0o440}
        ]
        storage["emptyDir"] = [
            {"name": "Scratch Area", "mountPath": next(mount_paths), "medium": "Memory"}
        ]
    repositories = []
    for name in _names(draw, draw(st.integers(0, 2))):
        repository: dict[str, Any] = {
            "name": name,
            "repository": f"https://git.example.com/{name}.git",
            "path": next(mount_paths),
        }
        _maybe(draw, repository, "branch", WORD)
        _maybe(draw, repository, "revision", WORD)
        repository.update(
            draw(
                st.sampled_from(
                    [{}, {"secretName": "git"}, {"passwordSecret": "token", "username": "ada"}]
                )
            )
        )
        repositories.append(repository)
    if repositories:
        storage["git"] = repositories
    return storage


@st.composite
def _scheduling(draw: Draw) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    _maybe(draw, fields, "nodeType", LABEL_VALUE)
    _maybe(draw, fields, "nodePools", st.lists(LABEL_VALUE, min_size=1, max_size=4, unique=True))
    _maybe(
        draw,
        fields,
        "priorityClass",
        st.sampled_from(
            ["very-low", "low", "medium-low", "medium", "medium-high", "high", "very-high"]
        ),
    )
    _maybe(draw, fields, "category", LABEL_VALUE)
    tolerations = draw(
        st.lists(
            st.sampled_from(
                [
                    {"operator": "Exists"},
                    {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "team", "value": "ml", "effect": "PreferNoSchedule"},
                    {"key": "spot", "operator": "Exists", "effect": "NoExecute", "seconds": 60},
                ]
            ),
            max_size=3,
        )
    )
    if tolerations:
        fields["tolerations"] = [{"name": f"t{index}", **t} for index, t in enumerate(tolerations)]
    expressions = draw(
        st.lists(
            st.sampled_from(
                [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                    {"key": "example.com/spot", "operator": "DoesNotExist"},
                    {"key": "gpu.count", "operator": "Gt", "values": ["2"]},
                ]
            ),
            max_size=2,
        )
    )
    if expressions:
        fields["nodeAffinityRequired"] = [{"matchExpressions": expressions}]
    if draw(st.booleans()):
        fields["podAffinityTopology"] = "kubernetes.io/hostname"
        _maybe(
            draw, fields, "podAffinitySchedulingRule", st.sampled_from(["required", "preferred"])
        )
    return fields


@st.composite
def _exposure(draw: Draw, workload_type: WorkloadType) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if workload_type is not WorkloadType.INFERENCE:
        numbers = draw(st.lists(st.integers(1, 65535), max_size=3, unique=True))
        ports = []
        for index, number in enumerate(numbers):
            port: dict[str, Any] = {
                "name": draw(st.sampled_from([f"p{index}", f"Port {index}"])),
                "container": number,
            }
            _maybe(
                draw,
                port,
                "serviceType",
                st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer"]),
            )
            _maybe(draw, port, "toolType", st.sampled_from(["jupyter", "tensorboard"]))
            ports.append(port)
        if ports:
            fields["ports"] = ports
    access = st.sampled_from(
        [
            {},
            {"authorizationType": "public"},
            {"authorizationType": "authenticatedUsers"},
            {"authorizationType": "authorizedUsersOrGroups", "authorizedUsers": ["ada"]},
            {"authorizationType": "authorizedUsersOrGroups", "authorizedGroups": ["ml"]},
        ]
    )
    urls = draw(st.lists(access, max_size=2))
    if urls:
        fields["exposedUrls"] = [
            {"url": f"https://example.com/{i}", **a} for i, a in enumerate(urls)
        ]
    _maybe(
        draw,
        fields,
        "relatedUrls",
        st.just([{"url": "https://wandb.example.com", "type": "wandb"}]),
    )
    return fields


@st.composite
def _environment(draw: Draw) -> list[dict[str, Any]]:
    sources = st.sampled_from(
        [
            {},
            {"value": "1"},
            {"secret": {"name": "creds", "key": "token"}},
            {"configMap": {"name": "settings", "key": "mode"}},
            {"podFieldRef": {"path": "metadata.name"}},
        ]
    )
    names = draw(
        st.lists(st.from_regex(r"[A-Z][A-Z0-9_]{0,6}", fullmatch=True), max_size=3, unique=True)
    )
    return [{"name": name, **draw(sources)} for name in names if name != "HOME"]


@st.composite
def _role(draw: Draw, workload_type: WorkloadType, role: str) -> dict[str, Any]:
    section: dict[str, Any] = {"image": draw(IMAGES)}
    _maybe(
        draw,
        section,
        "command",
        st.builds(shlex.join, st.lists(WORD, min_size=1, max_size=4)),
    )
    _maybe(draw, section, "args", st.builds(shlex.join, st.lists(WORD, max_size=3)))
    _maybe(draw, section, "imagePullPolicy", st.sampled_from(["Always", "IfNotPresent", "Never"]))
    _maybe(draw, section, "workingDir", st.just("/workspace"))
    _maybe(draw, section, "createHomeDir", st.booleans())
    _maybe(draw, section, "imagePullSecrets", st.just([{"name": "registry"}]))
    _maybe(draw, section, "environmentVariables", _environment())
    _maybe(
        draw,
        section,
        "labels",
        st.lists(LABEL_VALUE, max_size=2, unique=True).map(
            lambda vs: [{"name": f"example.com/{v}", "value": v} for v in vs]
        ),
    )
    _maybe(draw, section, "annotations", st.just([{"name": "owner", "value": "Ada Lovelace"}]))
    section["compute"] = draw(_compute())
    section["security"] = draw(_security(workload_type))
    section["storage"] = draw(_storage(workload_type, role))
    section.update(draw(_scheduling()))
    section.update(draw(_exposure(workload_type)))
    if draw(st.booleans()):
        probe_port = (
            8080 if workload_type is WorkloadType.INFERENCE else draw(st.integers(1, 65535))
        )
        section["probes"] = {
            "readiness": {
                "periodSeconds": 5,
                "handler": {"httpGet": {"path": "/ready", "port": probe_port}},
            }
        }
    if workload_type is not WorkloadType.INFERENCE:
        if draw(st.booleans()):
            section["stdin"] = True
            _maybe(draw, section, "tty", st.booleans())
        _maybe(draw, section, "terminationGracePeriodSeconds", st.integers(0, 600))
    return section


@st.composite
def workloads(draw: Draw) -> tuple[WorkloadType, dict[str, Any]]:
    workload_type = draw(st.sampled_from(list(WorkloadType)))
    if workload_type is WorkloadType.DISTRIBUTED:
        framework = draw(st.sampled_from(["PyTorch", "MPI", "TF", "XGBoost", "JAX"]))
        worker = draw(_role(workload_type, "worker"))
        workers = draw(st.integers(1, 16))
        worker.update({"distributedFramework": framework, "numWorkers": workers})
        _maybe(draw, worker, "cleanPodPolicy", st.sampled_from(["Running", "All", "None"]))
        _maybe(draw, worker, "backoffLimit", st.integers(0, 10))
        _maybe(draw, worker, "restartPolicy", st.sampled_from(["Always", "Never", "OnFailure"]))
        if framework == "PyTorch" and draw(st.booleans()):
            worker["minReplicas"] = draw(st.integers(1, workers))
            worker["maxReplicas"] = draw(st.integers(workers, 32))
        if framework == "MPI":
            _maybe(draw, worker, "slotsPerWorker", st.integers(1, 8))
            _maybe(draw, worker, "mpiLauncherCreationPolicy", st.just("WaitForWorkersReady"))
        workload = {"worker": worker}
        if framework != "JAX":
            workload["master"] = draw(_role(workload_type, "master"))
        return workload_type, workload
    workload = draw(_role(workload_type, "main"))
    if workload_type is WorkloadType.TRAINING:
        policy = draw(st.sampled_from([None, "Never", "OnFailure"]))
        if policy:
            workload["restartPolicy"] = policy
        if policy != "OnFailure":
            _maybe(draw, workload, "terminateAfterPreemption", st.booleans())
        for field in (
            "completions",
            "parallelism",
            "backoffLimit",
            "autoDeletionTimeAfterCompletionSeconds",
        ):
            _maybe(draw, workload, field, st.integers(0, 20))
    if workload_type is WorkloadType.WORKSPACE:
        _maybe(draw, workload, "restartPolicy", st.sampled_from(["Always", "Never", "OnFailure"]))
        _maybe(draw, workload, "backoffLimit", st.integers(0, 5))
    if workload_type is WorkloadType.INFERENCE:
        workload["servingPort"] = {
            "container": 8080,
            "protocol": draw(st.sampled_from(["http", "grpc"])),
        }
        _maybe(draw, workload["servingPort"], "clusterLocalAccessOnly", st.booleans())
        minimum = draw(st.integers(0, 3))
        maximum = draw(st.integers(max(minimum, 1), 10))
        autoscaling: dict[str, Any] = {"minReplicas": minimum, "maxReplicas": maximum}
        if draw(st.booleans()) or (minimum < maximum and (minimum, maximum) != (0, 1)):
            autoscaling["metric"] = draw(st.sampled_from(["throughput", "concurrency"]))
            autoscaling["metricThreshold"] = draw(st.integers(1, 100))
            _maybe(draw, autoscaling, "metricThresholdPercentage", st.integers(1, 100))
        if minimum == 0:
            _maybe(draw, autoscaling, "scaleToZeroRetentionSeconds", st.integers(0, 600))
        _maybe(draw, autoscaling, "concurrencyHardLimit", st.integers(0, 100))
        _maybe(draw, autoscaling, "scaleDownDelaySeconds", st.integers(0, 600))
        workload["autoscaling"] = autoscaling
        workload["servingConfiguration"] = {"requestTimeoutSeconds": draw(st.integers(1, 600))}
    return workload_type, workload


@given(workloads())
def test_valid_workloads_render_to_valid_manifests(
    case: tuple[WorkloadType, dict[str, Any]],
) -> None:
    workload_type, workload = case
    check_spec(workload, workload_type, ())  # the strategy makes valid workloads
    rendering = render(workload_type, "job", workload, profile=PERMISSIVE_PROFILE)
    assert_valid_manifests(list(rendering.manifests))
    again = render(workload_type, "job", workload, profile=PERMISSIVE_PROFILE)
    assert again.manifests == rendering.manifests
    for template in rendering.pod_templates.values():
        pod = template.to_k8s_pod()
        primary = next(
            c for c in pod["spec"]["containers"] if c["name"] == template.primary_container_name
        )
        assert primary["image"]
        # Every container podwright adds states cpu and memory, so a quota on them admits it.
        added = [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]
        for helper in [c for c in added if c is not primary]:
            assert helper["resources"] == PERMISSIVE_PROFILE.helper_resources.manifest(), helper


@given(workloads(), st.sampled_from([DEFAULT_PROFILE, KAI_PROFILE, PERMISSIVE_PROFILE]))
def test_checking_that_a_workload_renders_decides_as_rendering_it(
    case: tuple[WorkloadType, dict[str, Any]], profile: ClusterProfile
) -> None:
    """What the validating webhook asks (check_renders, no manifests built) refuses exactly what
    rendering refuses, with the same problems, on clusters that offer less than the workload
    needs (no KAI scheduler, no Knative features, no privileged FUSE) and on one that offers
    everything."""
    workload_type, workload = case
    try:
        render(workload_type, "job", workload, profile=profile)
        expected: list[str] = []
    except RenderError as error:
        expected = [str(problem) for problem in error.problems]
    checked = checked_problems(
        workload_type, workload, "job", profile=profile, catalogue=EMPTY_CATALOGUE
    )
    assert checked == expected
