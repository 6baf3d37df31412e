"""One role of an effective workload becomes a PodTemplate: container, compute, security, storage,
scheduling, and the Services that expose its ports.

A workspace, a training and an inference workload have one role; distributed training has two
(``master`` and ``worker``), each rendered from its own section. The resource kind around the pod
(Pod, Job, PyTorchJob, Knative Service) is :mod:`.kinds`' business; everything that lives in the
pod template is decided here, as a function of the section and the cluster profile.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shlex
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal

from pydantic import ValidationError

from podwright.core.assets import AssetCatalogue
from podwright.core.k8s_names import (
    derived_label,
    label_value_problem,
    qualified_name_problem,
)
from podwright.core.pod_template import PodTemplate
from podwright.core.quantities import format_quantity
from podwright.core.render.fields import Problems, Values
from podwright.core.render.profile import ClusterProfile, SchedulerType
from podwright.core.render.storage import (
    Manifest,
    Storage,
    StorageContext,
    empty_dir,
    render_storage,
)
from podwright.core.workload_fields import WorkloadType

DEFAULT_PRIORITY = {
    WorkloadType.WORKSPACE: "high",
    WorkloadType.TRAINING: "low",
    WorkloadType.DISTRIBUTED: "low",
    WorkloadType.INFERENCE: "very-high",
}
"""The priority level of each workload type when neither the submission nor a policy names one."""

HOME_DIRECTORY = "/home/podwright"
SHM_PATH = "/dev/shm"
MEBIBYTE = Decimal(2**20)

KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
KAI_GPU_FRACTION = "gpu-fraction"
KAI_GPU_FRACTION_LIMIT = "gpu-fraction.limit"
KAI_GPU_MEMORY = "gpu-memory"
KAI_GPU_MEMORY_LIMIT = "gpu-memory.limit"
KAI_GPU_DEVICES = "gpu-fraction-num-devices"
NVIDIA_GPU = "nvidia.com/gpu"

_CORE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "storage", "pods"})
_PROFILE_SCHEDULER = "(cluster profile) scheduler.name"


@dataclasses.dataclass(frozen=True)
class RoleContext:
    """What rendering one role needs besides its section."""

    workload_type: WorkloadType
    workload_name: str
    role: str | None
    container_name: str
    profile: ClusterProfile
    catalogue: AssetCatalogue


@dataclasses.dataclass(frozen=True)
class RolePod:
    """A role's pod template and what goes beside it."""

    pod_spec: Manifest
    """The pod spec as built (a manifest), which the template validates."""
    template: PodTemplate | None
    """None when only checked (:func:`render_role` with ``packaged=False``)."""
    services: tuple[Manifest, ...]
    claims: tuple[Manifest, ...]
    knative_features: Mapping[str, str]
    knative_refusals: Mapping[str, str]
    user_labels: Mapping[str, str]
    """The role's ``labels``, which every object rendered for the workload carries."""


def identity_labels(
    profile: ClusterProfile, workload_name: str, workload_type: WorkloadType
) -> dict[str, str]:
    """The labels every object of a workload carries: its name and its type."""
    return {
        profile.label("workload"): workload_name,
        profile.label("workload-type"): workload_type.value,
    }


def selector_labels(context: RoleContext) -> dict[str, str]:
    """The labels that select the pods of this workload's role."""
    labels = {context.profile.label("workload"): context.workload_name}
    if context.role:
        labels[context.profile.label("role")] = context.role
    return labels


def render_role(
    values: Values, context: RoleContext, problems: Problems, *, packaged: bool = True
) -> RolePod | None:
    """The pod template of one role, or None when ``problems`` got a reason it cannot render.
    Not ``packaged``: its spec only, as built, for a caller that only checks that it renders
    (the template's validation refuses nothing a user gives: only a bug in the renderer)."""
    before = problems.count
    pod = _PodBuilder(values, context, problems)
    pod.build()
    if problems.count > before:
        return None
    return RolePod(
        pod_spec=pod.spec,
        template=_packaged(pod, values, context) if packaged else None,
        services=tuple(pod.services()),
        claims=tuple(pod.storage.claims),
        knative_features=pod.knative_features,
        knative_refusals=pod.storage.knative_refusals,
        user_labels=pod.user_labels,
    )


def _packaged(pod: _PodBuilder, values: Values, context: RoleContext) -> PodTemplate:
    """The pod template of what ``pod`` built."""
    try:
        template = PodTemplate.from_manifest(
            pod.spec,
            primary_container_name=context.container_name,
            labels=pod.labels,
            annotations=pod.annotations,
        )
    except ValidationError as error:  # a bug in the renderer, never the user's input
        raise AssertionError(f"rendered an invalid pod spec: {error}") from error
    grace = values.count("terminationGracePeriodSeconds")
    if grace is not None:
        template = template.with_termination_grace_period(grace)
    return template


@functools.lru_cache(maxsize=1024)
def _words(text: str) -> tuple[str, ...]:
    """``text`` split into words as a shell splits them (a ValueError says why it cannot be).
    Cached: the Workloads of a cluster run the same few commands, and the validating webhook
    renders each."""
    return tuple(shlex.split(text))


class _PodBuilder:
    """Accumulates one pod's spec, labels and annotations, field group by field group."""

    def __init__(self, values: Values, context: RoleContext, problems: Problems) -> None:
        self.values = values
        self.context = context
        self.profile = context.profile
        self.problems = problems
        self.labels: dict[str, str] = {}
        self.user_labels: dict[str, str] = {}
        self.annotations: dict[str, str] = {}
        self.container: Manifest = {"name": context.container_name}
        self.spec: Manifest = {"containers": [self.container]}
        self.knative_features: dict[str, str] = {}
        self.ports: list[tuple[Values, str, int]] = []
        self.storage = Storage()
        self.home: str | None = None
        """Where a temporary home directory is mounted, if one is."""

    def need(self, feature: str, field: str) -> None:
        self.knative_features.setdefault(feature, field)

    def build(self) -> None:
        self.metadata()
        self.container_fields()
        self.environment()
        self.compute()
        self.security()
        self.volumes()
        self.scheduling()
        self.exposure()

    # -- metadata -------------------------------------------------------------------------------

    def metadata(self) -> None:
        values, profile = self.values, self.profile
        for field, target in (("labels", self.labels), ("annotations", self.annotations)):
            for entry in values.instances(field):
                key, value = entry.key(), entry.text("value") or ""
                problem = qualified_name_problem(key)
                if problem is None and field == "labels":
                    problem = label_value_problem(value)
                    problem = f"value {value!r} {problem}" if problem else None
                if problem is None and key.split("/")[0] == profile.label_domain:
                    problem = f"keys in {profile.label_domain}/ are podwright's own"
                if problem:
                    self.problems.add(entry.path(), f"{key!r}: {problem}")
                target[key] = value
        self.user_labels = dict(self.labels)
        context = self.context
        self.labels.update(identity_labels(profile, context.workload_name, context.workload_type))
        self.labels.update(selector_labels(context))
        category = values.text("category")
        if category is not None:
            problem = label_value_problem(category)
            if problem:
                self.problems.add(values.path("category"), f"{category!r} {problem} (a label)")
            self.labels[profile.label("category")] = category

    # -- container ------------------------------------------------------------------------------

    def container_fields(self) -> None:
        values, container = self.values, self.container
        image = values.text("image")
        if not image:
            self.problems.add(
                values.path("image"),
                "required: the container image (submit one, or have a policy default it)",
            )
        container["image"] = image
        for field in ("command", "args"):
            text = values.text(field)
            if text is None:
                continue
            try:
                words = list(_words(text))
            except ValueError as error:
                self.problems.add(values.path(field), f"cannot split {text!r} into words: {error}")
                continue
            if words:
                container[field] = words
        for field in ("imagePullPolicy", "workingDir"):
            if values.has(field):
                container[field] = values.text(field)
        if values.flag("tty") and not values.flag("stdin"):
            self.problems.add(values.path("tty"), "a TTY needs stdin: set stdin: true as well")
        for field in ("tty", "stdin"):
            if values.flag(field):
                container[field] = True
        secrets = [{"name": entry.key()} for entry in values.instances("imagePullSecrets")]
        if secrets:
            self.spec["imagePullSecrets"] = secrets
        self.readiness_probe()

    def readiness_probe(self) -> None:
        readiness = self.values.section("probes").section("readiness")
        if not readiness.data:
            return
        http_get = readiness.section("handler").section("httpGet")
        if not http_get.has("port"):
            self.problems.add(
                http_get.path("port"),
                "required: a readiness probe checks an HTTP port (handler.httpGet.port)",
            )
            return
        action: Manifest = {"port": http_get.count("port")}
        for field in ("path", "host", "scheme"):
            if http_get.has(field):
                action[field] = http_get.text(field)
        probe: Manifest = {"httpGet": action}
        for field in (
            "initialDelaySeconds",
            "periodSeconds",
            "timeoutSeconds",
            "successThreshold",
            "failureThreshold",
        ):
            amount = readiness.count(field)
            if amount is not None:
                if amount == 0 and field != "initialDelaySeconds":
                    self.problems.add(readiness.path(field), "must be at least 1")
                probe[field] = amount
        self.container["readinessProbe"] = probe

    def environment(self) -> None:
        variables: list[Manifest] = []
        names: set[str] = set()
        for entry in self.values.instances("environmentVariables"):
            name = entry.key()
            names.add(name)
            sources = [
                field
                for field in ("value", "secret", "configMap", "podFieldRef")
                if entry.has(field)
            ]
            if len(sources) > 1:
                self.problems.add(
                    entry.path(),
                    f"give one of value, secret, configMap, podFieldRef, not {', '.join(sources)}",
                )
                continue
            variable: Manifest = {"name": name}
            source = sources[0] if sources else "value"
            if source == "value":
                variable["value"] = entry.text("value") or ""
            elif source == "podFieldRef":
                path = entry.section("podFieldRef").text("path")
                if not path:
                    self.problems.add(entry.path("podFieldRef.path"), "required: the pod field")
                    continue
                variable["valueFrom"] = {"fieldRef": {"fieldPath": path}}
                self.need("kubernetes.podspec-fieldref", entry.path("podFieldRef"))
            else:
                reference = entry.section(source)
                missing = [field for field in ("name", "key") if not reference.has(field)]
                if missing:
                    self.problems.add(
                        reference.path(missing[0]), f"required: the {source}'s {missing[0]}"
                    )
                    continue
                kind = "secretKeyRef" if source == "secret" else "configMapKeyRef"
                variable["valueFrom"] = {
                    kind: {"name": reference.text("name"), "key": reference.text("key")}
                }
            variables.append(variable)
        self.home = self.home_directory()
        if self.home is not None and "HOME" not in names:
            variables.append({"name": "HOME", "value": self.home})
        if variables:
            self.container["env"] = variables

    def home_directory(self) -> str | None:
        """Where ``createHomeDir`` mounts a temporary home (an emptyDir), or None for none.

        The reference: the flag creates "a temporary home directory for the user", and "when
        runAsUser is set, this flag defaults to true". A uid chosen here (``runAsUid``) has no
        entry in the image's passwd, so no home (the runtime sets ``HOME=/``): it gets one at
        the ``HOME`` the workload sets, else at ``/home/podwright`` with ``HOME`` set. The
        image's own user has a home already, which is left alone: without ``runAsUid`` a home
        is created only where the workload names it with a ``HOME`` variable.
        """
        values = self.values
        runs_as_uid = values.section("security").has("runAsUid")
        explicit = values.has("createHomeDir")
        if not (values.flag("createHomeDir") if explicit else runs_as_uid):
            return None
        home = next(
            (entry for entry in values.instances("environmentVariables") if entry.key() == "HOME"),
            None,
        )
        if home is None:
            return HOME_DIRECTORY if runs_as_uid else None
        plain = not any(home.has(field) for field in ("secret", "configMap", "podFieldRef"))
        if not plain:
            why = "createHomeDir is true" if explicit else "createHomeDir is true with runAsUid"
            self.problems.add(
                home.path(),
                f"a temporary home is mounted at $HOME ({why}), so HOME needs a plain value "
                "that says where; or set createHomeDir: false",
            )
            return None
        return home.text("value") or ""

    # -- compute --------------------------------------------------------------------------------

    def compute(self) -> None:
        compute = self.values.section("compute")
        requests: dict[str, str] = {}
        limits: dict[str, str] = {}
        for field, resource, target in (
            ("cpuCoreRequest", "cpu", requests),
            ("cpuCoreLimit", "cpu", limits),
            ("cpuMemoryRequest", "memory", requests),
            ("cpuMemoryLimit", "memory", limits),
        ):
            amount = compute.amount(field)
            if amount is not None:
                if amount == 0:
                    continue
                target[resource] = _cpu(amount) if resource == "cpu" else format_quantity(amount)
        whole_gpus = self.gpu(compute)
        if whole_gpus:
            requests[NVIDIA_GPU] = limits[NVIDIA_GPU] = str(whole_gpus)
        for entry in compute.instances("extendedResources", key="resource"):
            resource = entry.key("resource")
            problem = self.extended_resource_problem(resource, requests)
            quantity = entry.amount("quantity")
            if (
                problem is None
                and quantity is not None
                and quantity != quantity.to_integral_value()
            ):
                problem = f"an extended resource is counted in whole units, got {quantity}"
            if problem:
                self.problems.add(entry.path(), problem)
                continue
            if quantity is None or quantity == 0:
                continue
            requests[resource] = limits[resource] = str(int(quantity))
        resources: Manifest = {}
        if requests:
            resources["requests"] = requests
        if limits:
            resources["limits"] = limits
        if resources:
            self.container["resources"] = resources

    def extended_resource_problem(self, resource: str, requests: Mapping[str, str]) -> str | None:
        if resource in _CORE_RESOURCES or resource.startswith("hugepages-"):
            return f"{resource!r} is not an extended resource; use the compute fields for it"
        if resource == NVIDIA_GPU and NVIDIA_GPU in requests:
            return f"{NVIDIA_GPU} is already requested by the GPU fields"
        problem = qualified_name_problem(resource)
        if problem is None and "/" not in resource:
            problem = "needs a domain prefix, as in example.com/fpga"
        if problem is None and resource.split("/", maxsplit=1)[0].endswith("kubernetes.io"):
            problem = "the kubernetes.io domain holds no extended resources"
        return f"resource {resource!r} {problem}" if problem else None

    def gpu(self, compute: Values) -> int:
        """Sets fractional GPU annotations; returns the number of whole GPUs to request."""
        devices = compute.count("gpuDevicesRequest")
        portion = compute.amount("gpuPortionRequest")
        memory = compute.amount("gpuMemoryRequest")
        request_type = compute.text("gpuRequestType")
        if portion is not None and memory is not None and request_type is None:
            self.problems.add(
                compute.path("gpuMemoryRequest"),
                "give a GPU portion or GPU memory, not both (or choose with gpuRequestType)",
            )
            return 0
        if request_type == "portion":
            memory = self.ignored(compute, "gpuMemoryRequest", "gpuRequestType is portion", memory)
        elif request_type == "memory":
            portion = self.ignored(
                compute, "gpuPortionRequest", "gpuRequestType is memory", portion
            )
        if request_type and portion is None and memory is None:
            self.problems.add(
                compute.path("gpuRequestType"),
                f"gpuRequestType {request_type} needs gpu{request_type.capitalize()}Request",
            )
            return 0
        if portion is not None and portion >= 1:
            if portion != portion.to_integral_value():
                self.problems.add(
                    compute.path("gpuPortionRequest"),
                    f"a portion above 1 must be a whole number of GPUs, got {portion}",
                )
                return 0
            if devices is not None and devices != int(portion):
                self.problems.add(
                    compute.path("gpuPortionRequest"),
                    f"{portion} whole GPUs disagree with gpuDevicesRequest {devices}",
                )
                return 0
            self.limit_without_fraction(compute)
            return int(portion)
        fractional = (portion is not None and portion > 0) or memory is not None
        if not fractional:
            self.limit_without_fraction(compute)
            return devices or 0
        field = compute.path("gpuPortionRequest" if portion else "gpuMemoryRequest")
        if self.profile.scheduler_type is not SchedulerType.KAI:
            self.problems.add(
                field,
                "a fraction of a GPU needs the KAI scheduler; the cluster profile's scheduler "
                f"is {self.profile.scheduler_name!r} (set scheduler.type: kai)",
            )
            return 0
        if devices == 0:
            self.problems.add(
                compute.path("gpuDevicesRequest"), "a GPU fraction needs at least one device"
            )
            return 0
        if devices is not None and devices > 1:
            self.annotations[KAI_GPU_DEVICES] = str(devices)
        if portion is not None and portion > 0:
            self.annotations[KAI_GPU_FRACTION] = _decimal(portion)
            limit = compute.amount("gpuPortionLimit")
            if limit is not None:
                self.annotations[KAI_GPU_FRACTION_LIMIT] = _decimal(limit)
            self.ignored(compute, "gpuMemoryLimit", "the request is a GPU portion", None)
        else:
            assert memory is not None
            self.annotations[KAI_GPU_MEMORY] = _mebibytes(memory)
            limit = compute.amount("gpuMemoryLimit")
            if limit is not None:
                self.annotations[KAI_GPU_MEMORY_LIMIT] = _mebibytes(limit)
            self.ignored(compute, "gpuPortionLimit", "the request is GPU memory", None)
        return 0

    def ignored(
        self, compute: Values, field: str, why: str, value: Decimal | None
    ) -> Decimal | None:
        """Report ``field`` when set: it cannot apply because of ``why``."""
        if compute.has(field):
            self.problems.add(compute.path(field), f"cannot apply: {why}")
        return None if compute.has(field) else value

    def limit_without_fraction(self, compute: Values) -> None:
        for field in ("gpuPortionLimit", "gpuMemoryLimit"):
            self.ignored(
                compute, field, "it limits a fraction of a GPU, and none is requested", None
            )

    # -- security -------------------------------------------------------------------------------

    def security(self) -> None:
        security = self.values.section("security")
        source = security.text("uidGidSource")
        ids = [field for field in ("runAsUid", "runAsGid") if security.has(field)]
        if source == "idpToken":
            self.problems.add(
                security.path("uidGidSource"),
                "idpToken takes the ids from the submitter's identity-provider token, which "
                "rendering does not have; use custom with runAsUid and runAsGid",
            )
        elif source == "fromTheImage" and ids:
            self.problems.add(
                security.path(ids[0]),
                "uidGidSource is fromTheImage, so the image decides the user; "
                "set uidGidSource: custom to choose it here",
            )
        pod: Manifest = {}
        for field, target in (
            ("runAsUid", "runAsUser"),
            ("runAsGid", "runAsGroup"),
        ):
            if security.has(field):
                pod[target] = security.count(field)
        groups = security.integers("supplementalGroups")
        if groups:
            pod["supplementalGroups"] = groups
        if security.has("runAsNonRoot"):
            pod["runAsNonRoot"] = security.flag("runAsNonRoot")
            if pod["runAsNonRoot"] and pod.get("runAsUser") == 0:
                self.problems.add(security.path("runAsUid"), "0 is root, and runAsNonRoot is true")
        seccomp = security.text("seccompProfileType")
        if seccomp == "Localhost":
            self.problems.add(
                security.path("seccompProfileType"),
                "Localhost needs the path of a profile on the node, which the workload spec "
                "cannot give; use RuntimeDefault or Unconfined",
            )
        elif seccomp:
            pod["seccompProfile"] = {"type": seccomp}
        if pod:
            self.spec["securityContext"] = pod
            self.need("kubernetes.podspec-securitycontext", security.path())
        for field, target in (("hostIpc", "hostIPC"), ("hostNetwork", "hostNetwork")):
            if security.flag(field):
                self.spec[target] = True
        container: Manifest = {}
        capabilities = []
        for index, capability in enumerate(security.texts("capabilities")):
            name = capability.upper().removeprefix("CAP_")
            if not name or not name.replace("_", "").isalnum():
                self.problems.add(
                    f"{security.path('capabilities')}[{index}]",
                    f"{capability!r} is not a Linux capability name (such as NET_ADMIN)",
                )
                continue
            if name not in capabilities:
                capabilities.append(name)
        if capabilities:
            container["capabilities"] = {"add": capabilities}
            if capabilities != ["NET_BIND_SERVICE"]:
                self.need("kubernetes.containerspec-addcapabilities", security.path("capabilities"))
        for field in ("readOnlyRootFilesystem", "allowPrivilegeEscalation"):
            if security.has(field):
                container[field] = security.flag(field)
        if container:
            self.container["securityContext"] = container

    # -- storage --------------------------------------------------------------------------------

    def volumes(self) -> None:
        security = self.spec.get("securityContext", {})
        assert isinstance(security, dict)
        context = StorageContext(
            profile=self.profile,
            catalogue=self.context.catalogue,
            problems=self.problems,
            needs_user_for_helpers=bool(security.get("runAsNonRoot"))
            and "runAsUser" not in security,
        )
        storage = render_storage(self.values.section("storage"), context)
        if self.home is not None:
            self.internal_volume(
                storage,
                {"name": "home", "emptyDir": {}},
                self.home,
                self.values.path("createHomeDir"),
            )
        compute = self.values.section("compute")
        if compute.flag("largeShmRequest"):
            volume: Manifest = {
                "name": "shm",
                "emptyDir": empty_dir("Memory", compute.amount("cpuMemoryLimit")),
            }
            self.internal_volume(storage, volume, SHM_PATH, compute.path("largeShmRequest"))
        self.storage = storage
        for feature, field in storage.knative_features.items():
            self.need(feature, field)
        if storage.volumes:
            self.spec["volumes"] = storage.volumes
        if storage.mounts:
            self.container["volumeMounts"] = storage.mounts
        if storage.init_containers:
            self.spec["initContainers"] = storage.init_containers

    def internal_volume(self, storage: Storage, volume: Manifest, path: str, field: str) -> None:
        """Add a volume podwright adds itself (home, /dev/shm), unless ``path`` is taken."""
        if not path.startswith("/"):
            self.problems.add(field, f"needs an absolute home directory, and HOME is {path!r}")
            return
        taken = storage.occupant(path)
        if taken is not None:
            self.problems.add(field, f"needs {path}, which is already the mount path of {taken}")
            return
        storage.volumes.append(volume)
        storage.add_mount({"name": volume["name"], "mountPath": path}, field)
        self.need("kubernetes.podspec-volumes-emptydir", field)

    # -- scheduling -----------------------------------------------------------------------------

    def scheduling(self) -> None:
        values, profile = self.values, self.profile
        if profile.scheduler_name != "default-scheduler":
            self.spec["schedulerName"] = profile.scheduler_name
            self.need("kubernetes.podspec-schedulername", _PROFILE_SCHEDULER)
        if profile.scheduler_type is SchedulerType.KAI and profile.queue:
            self.labels[KAI_QUEUE_LABEL] = profile.queue
        level = values.text("priorityClass") or DEFAULT_PRIORITY[self.context.workload_type]
        priority = profile.priority_classes.get(level)
        if priority is None:
            self.problems.add(
                values.path("priorityClass"),
                f"the cluster profile offers no PriorityClass for priority {level!r}"
                + (
                    ""
                    if values.has("priorityClass")
                    else f" (the {self.context.workload_type.value} default)"
                ),
            )
        else:
            self.spec["priorityClassName"] = priority.class_name
            self.need("kubernetes.podspec-priorityclassname", values.path("priorityClass"))
            if profile.scheduler_type is SchedulerType.KAI:
                self.labels[KAI_PREEMPTIBILITY_LABEL] = (
                    "preemptible" if priority.preemptible else "non-preemptible"
                )
        node_type = values.text("nodeType")
        if node_type is not None:
            problem = label_value_problem(node_type)
            if problem:
                self.problems.add(
                    values.path("nodeType"), f"{node_type!r} {problem} (a node label)"
                )
            self.spec["nodeSelector"] = {profile.node_type_label: node_type}
            self.need("kubernetes.podspec-nodeselector", values.path("nodeType"))
        affinity: Manifest = {}
        node_affinity = self.node_affinity()
        if node_affinity:
            affinity["nodeAffinity"] = node_affinity
        pod_affinity = self.pod_affinity()
        if pod_affinity:
            affinity["podAffinity"] = pod_affinity
        if affinity:
            self.spec["affinity"] = affinity
        tolerations = self.tolerations()
        if tolerations:
            self.spec["tolerations"] = tolerations

    def node_affinity(self) -> Manifest:
        values, profile = self.values, self.profile
        pools = values.texts("nodePools")
        for index, pool in enumerate(pools):
            problem = label_value_problem(pool)
            if problem:
                self.problems.add(f"{values.path('nodePools')}[{index}]", f"{pool!r} {problem}")
        if len(pools) > 100:
            self.problems.add(values.path("nodePools"), "at most 100 pools can be ranked")
            pools = pools[:100]
        pool_requirement = (
            [{"key": profile.node_pool_label, "operator": "In", "values": pools}] if pools else []
        )
        terms: list[Manifest] = []
        for term in values.objects("nodeAffinityRequired"):
            expressions = []
            for expression in term.objects("matchExpressions"):
                rendered = self.match_expression(expression)
                if rendered is not None:
                    expressions.append(rendered)
            if expressions:
                terms.append({"matchExpressions": expressions + pool_requirement})
        if pool_requirement and not terms:
            terms.append({"matchExpressions": pool_requirement})
        result: Manifest = {}
        if terms:
            result["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
            self.need(
                "kubernetes.podspec-affinity",
                values.path("nodePools" if pools else "nodeAffinityRequired"),
            )
        if len(pools) > 1:
            result["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {
                    "weight": 100 - rank,
                    "preference": {
                        "matchExpressions": [
                            {"key": profile.node_pool_label, "operator": "In", "values": [pool]}
                        ]
                    },
                }
                for rank, pool in enumerate(pools)
            ]
        return result

    def match_expression(self, expression: Values) -> Manifest | None:
        key, operator = expression.text("key"), expression.text("operator")
        expression_values = expression.texts("values")
        if not key or qualified_name_problem(key):
            self.problems.add(expression.path("key"), f"{key!r} is not a node label key")
            return None
        if not operator:
            self.problems.add(
                expression.path("operator"), "required: In, NotIn, Exists, DoesNotExist, Gt or Lt"
            )
            return None
        problem = None
        if operator in ("In", "NotIn") and not expression_values:
            problem = f"{operator} needs at least one value"
        elif operator in ("Exists", "DoesNotExist") and expression_values:
            problem = f"{operator} takes no values"
        elif operator in ("Gt", "Lt") and (
            len(expression_values) != 1 or not expression_values[0].lstrip("-").isdigit()
        ):
            problem = f"{operator} takes exactly one integer value"
        if problem:
            self.problems.add(expression.path("values"), problem)
            return None
        rendered: Manifest = {"key": key, "operator": operator}
        if expression_values:
            rendered["values"] = expression_values
        return rendered

    def pod_affinity(self) -> Manifest:
        values = self.values
        rule, topology = (
            values.text("podAffinitySchedulingRule"),
            values.text("podAffinityTopology"),
        )
        if rule is None and topology is None:
            return {}
        if not topology:
            self.problems.add(
                values.path("podAffinityTopology"),
                "required with podAffinitySchedulingRule: the node label that groups the pods "
                "(such as topology.kubernetes.io/zone)",
            )
            return {}
        if qualified_name_problem(topology):
            self.problems.add(
                values.path("podAffinityTopology"), f"{topology!r} is not a label key"
            )
            return {}
        term = {
            "labelSelector": {
                "matchLabels": {self.profile.label("workload"): self.context.workload_name}
            },
            "topologyKey": topology,
        }
        self.need("kubernetes.podspec-affinity", values.path("podAffinitySchedulingRule"))
        if rule == "required":
            return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        return {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": term}
            ]
        }

    def tolerations(self) -> list[Manifest]:
        tolerations: list[Manifest] = []
        for entry in self.values.instances("tolerations"):
            operator = entry.text("operator") or "Equal"
            key, value, effect = entry.text("key"), entry.text("value"), entry.text("effect")
            seconds = entry.count("seconds")
            problem = None
            if operator == "Exists" and value:
                problem = ("value", "Exists matches any value; give no value")
            elif operator == "Equal" and not key:
                problem = (
                    "key",
                    "required with operator Equal (Exists with no key tolerates every taint)",
                )
            elif seconds is not None and effect != "NoExecute":
                problem = ("seconds", "applies only to effect NoExecute")
            elif key and qualified_name_problem(key):
                problem = ("key", f"{key!r} is not a taint key")
            if problem:
                self.problems.add(entry.path(problem[0]), problem[1])
                continue
            toleration: Manifest = {"operator": operator}
            if key:
                toleration["key"] = key
            if value:
                toleration["value"] = value
            if effect:
                toleration["effect"] = effect
            if seconds is not None:
                toleration["tolerationSeconds"] = seconds
            tolerations.append(toleration)
        if tolerations:
            self.need("kubernetes.podspec-tolerations", self.values.path("tolerations"))
        return tolerations

    # -- exposure -------------------------------------------------------------------------------

    def exposure(self) -> None:
        values, profile = self.values, self.profile
        ports: list[Manifest] = []
        seen: dict[int, str] = {}
        for entry in values.instances("ports"):
            number = entry.count("container")
            if number is None:
                self.problems.add(entry.path("container"), "required: the container's port")
                continue
            if number in seen:
                self.problems.add(
                    entry.path("container"), f"port {number} is already {seen[number]}"
                )
                continue
            seen[number] = entry.path()
            name = _port_name(entry.key(), number)
            ports.append({"name": name, "containerPort": number, "protocol": "TCP"})
            self.ports.append((entry, name, number))
        if ports:
            self.container["ports"] = ports
        urls = []
        for entry in values.objects("exposedUrls"):
            check_url_access(entry, profile, self.problems, "the URL")
            urls.append(dict(entry.data))
        if urls:
            self.annotations[profile.label("exposed-urls")] = json.dumps(urls, sort_keys=True)
        related = [dict(entry.data) for entry in values.objects("relatedUrls")]
        if related:
            self.annotations[profile.label("related-urls")] = json.dumps(related, sort_keys=True)

    def services(self) -> list[Manifest]:
        """One Service per service type the ports ask for."""
        by_type: dict[str, list[Manifest]] = {}
        tools: dict[str, list[Manifest]] = {}
        for entry, name, number in self.ports:
            service_type = entry.text("serviceType") or "ClusterIP"
            external = entry.count("external")
            port: Manifest = {"name": name, "protocol": "TCP", "targetPort": number}
            if service_type == "NodePort":
                port["port"] = number
                if external is not None:
                    port["nodePort"] = external
            else:
                port["port"] = external if external is not None else number
            by_type.setdefault(service_type, []).append(port)
            tool = {
                field: entry.text(field) for field in ("toolType", "toolName") if entry.has(field)
            }
            if tool:
                tools.setdefault(service_type, []).append({"port": name, **tool})
        services: list[Manifest] = []
        base = self.context.workload_name
        if self.context.role:
            base = f"{base}-{self.context.role}"
        for service_type, ports in sorted(by_type.items()):
            name = base if len(by_type) == 1 else f"{base}-{service_type.lower()}"
            metadata: Manifest = {
                "name": derived_label(name),
                "labels": {**self.user_labels, **selector_labels(self.context)},
            }
            if service_type in tools:
                metadata["annotations"] = {
                    self.profile.label("tools"): json.dumps(tools[service_type], sort_keys=True)
                }
            services.append(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": metadata,
                    "spec": {
                        "type": service_type,
                        "selector": selector_labels(self.context),
                        "ports": ports,
                    },
                }
            )
        return services


def check_url_access(entry: Values, profile: ClusterProfile, problems: Problems, what: str) -> None:
    """Refuse URL access rules the cluster's gateway cannot enforce, or that contradict."""
    kind = entry.text("authorizationType") or "public"
    users, groups = entry.texts("authorizedUsers"), entry.texts("authorizedGroups")
    if kind not in profile.authorization_types:
        offered = ", ".join(sorted(profile.authorization_types))
        problems.add(
            entry.path("authorizationType"),
            f"the cluster cannot enforce {kind!r} access (the profile's authorizationTypes: "
            f"{offered}); {what} would be open to anyone",
        )
    if users and groups:
        problems.add(
            entry.path("authorizedGroups"),
            "authorizedUsers and authorizedGroups exclude each other",
        )
    if kind == "authorizedUsersOrGroups" and not (users or groups):
        problems.add(
            entry.path("authorizationType"),
            "authorizedUsersOrGroups needs authorizedUsers or authorizedGroups",
        )
    if kind != "authorizedUsersOrGroups" and (users or groups):
        problems.add(
            entry.path("authorizedUsers" if users else "authorizedGroups"),
            f"applies only with authorizationType authorizedUsersOrGroups, not {kind}",
        )


_PORT_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,13}[a-z0-9])?")


def _port_name(name: str, number: int) -> str:
    """The instance's name when it is a valid port name (an IANA service name), else port-N."""
    valid = (
        _PORT_NAME.fullmatch(name) is not None
        and "--" not in name
        and any(character.isalpha() for character in name)
    )
    return name if valid else f"port-{number}"


def _cpu(amount: Decimal) -> str:
    if amount == amount.to_integral_value():
        return str(int(amount))
    return f"{int((amount * 1000).to_integral_value(ROUND_CEILING))}m"


def _decimal(amount: Decimal) -> str:
    return format(amount.normalize(), "f")


def _mebibytes(amount: Decimal) -> str:
    """GPU memory in whole MiB, as the KAI scheduler's annotations read it (rounded up)."""
    return str(int((amount / MEBIBYTE).to_integral_value(ROUND_CEILING)))
