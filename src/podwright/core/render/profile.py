"""The cluster profile: how this cluster does what a workload spec leaves open.

A workload says "priority high", "node pool a100", "mount this bucket"; only the cluster knows
which PriorityClass is "high", which node label holds the pool, and whether a pod may mount FUSE.
The profile says so, once per cluster, with safe defaults (no FUSE, the default scheduler)::

    apiVersion: podwright.dev/v1
    kind: ClusterProfile
    metadata: {name: prod}
    spec:
      labelDomain: podwright.dev            # prefix of the labels podwright writes
      scheduler: {type: kai, name: kai-scheduler, queue: research}
      nodeLabels: {nodeType: podwright.dev/node-type, nodePool: podwright.dev/node-pool}
      priorityClasses:                      # level -> PriorityClass (null: not offered here)
        low: {name: podwright-low, value: 40, preemptible: true}
      fuse: {grant: privileged}             # none | device-plugin | privileged | proxy
      git: {image: docker.io/alpine/git:v2.47.2}
      s3: {adapter: s3fs, image: docker.io/efrecon/s3fs:1.94}
      knative: {features: [kubernetes.podspec-affinity, ...]}
      authorizationTypes: [public]          # URL access the cluster's gateway can enforce
      helperResources:                      # of every container podwright adds (clones, FUSE)
        requests: {cpu: 100m, memory: 128Mi}
        limits: {cpu: "1", memory: 512Mi}

Reading a profile reports every problem at its path, like every other reader in the core.

**Priority levels.** The workload spec names seven levels, very-low to very-high; by default each
is the PriorityClass ``podwright-<level>``, which ``podwright priority-classes`` creates (see
:mod:`.priority_classes`). Their values are Run:ai's priority dictionary (very-low 25, low 40,
medium-low 65, medium 80, medium-high 90, high 125, very-high 150), the platform the workload
spec comes from, so a cluster moving between the two keeps its ordering. A level is preemptible
when its value is below 100: that is the KAI scheduler's rule (its own classes are train 50 and
build-preemptible 75, build 100 and inference 125), so the KAI preemptibility label podwright
writes and the value KAI would judge by agree. Training (low) is preemptible, and workspaces
(high) and inference (very-high) are not, as in Run:ai. A profile may name other classes, and
give a level another ``value`` (and ``preemptible``, which then defaults from the value).

**Helper containers.** ``helperResources`` gives the cpu and memory requests and limits of the
containers podwright adds to a pod (a git clone, an S3 adapter): a namespace's ResourceQuota on
cpu or memory refuses a pod any container of which leaves them out (see
:mod:`podwright.core.helper_resources`, which also says why the defaults are what they are). A
key left out keeps its default; a request above its limit is refused, as the API server would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import TypeVar

from podwright.core import quantities
from podwright.core.field_paths import FieldPath
from podwright.core.helper_resources import (
    DEFAULT_HELPER_RESOURCES,
    RESOURCE_NAMES,
    Amounts,
    HelperResources,
)
from podwright.core.k8s_names import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
    qualified_name_problem,
)
from podwright.core.problems import FieldProblem, ProblemsError, describe, one_of, unknown_field

API_VERSION = "podwright.dev/v1"
KIND = "ClusterProfile"

PRIORITY_LEVELS = ("very-low", "low", "medium-low", "medium", "medium-high", "high", "very-high")
"""The workload spec's priority levels, lowest first."""

PRIORITY_VALUES: Mapping[str, int] = MappingProxyType(
    {
        "very-low": 25,
        "low": 40,
        "medium-low": 65,
        "medium": 80,
        "medium-high": 90,
        "high": 125,
        "very-high": 150,
    }
)
"""Each level's PriorityClass value by default: Run:ai's priority dictionary."""

NON_PREEMPTIBLE_VALUE = 100
"""The KAI scheduler's rule: a PriorityClass of this value or more is not preemptible."""

HIGHEST_USER_PRIORITY = 1_000_000_000
"""The highest value Kubernetes allows a PriorityClass that is not a system one."""

AUTHORIZATION_TYPES = ("public", "authenticatedUsers", "authorizedUsersOrGroups")


class SchedulerType(StrEnum):
    """Which scheduler places the pods; only KAI understands fractional GPUs."""

    DEFAULT = "default"
    KAI = "kai"


class FuseGrantMode(StrEnum):
    """How a pod that mounts a FUSE filesystem gets the right to: ``none`` refuses such pods."""

    NONE = "none"
    DEVICE_PLUGIN = "device-plugin"
    PRIVILEGED = "privileged"
    PROXY = "proxy"


class S3Adapter(StrEnum):
    """The FUSE program that mounts an S3 bucket; it decides the adapter's command line."""

    S3FS = "s3fs"
    MOUNTPOINT_S3 = "mountpoint-s3"


KNATIVE_FEATURES = (
    "kubernetes.podspec-affinity",
    "kubernetes.podspec-nodeselector",
    "kubernetes.podspec-tolerations",
    "kubernetes.podspec-priorityclassname",
    "kubernetes.podspec-schedulername",
    "kubernetes.podspec-securitycontext",
    "kubernetes.containerspec-addcapabilities",
    "kubernetes.podspec-fieldref",
    "kubernetes.podspec-init-containers",
    "kubernetes.podspec-volumes-emptydir",
    "kubernetes.podspec-volumes-hostpath",
    "kubernetes.podspec-persistent-volume-claim",
    "kubernetes.podspec-persistent-volume-write",
)
"""Knative Serving's pod-spec feature flags (the ``config-features`` ConfigMap) podwright uses."""

DEFAULT_KNATIVE_FEATURES = frozenset(KNATIVE_FEATURES) - {
    "kubernetes.containerspec-addcapabilities",
    "kubernetes.podspec-volumes-hostpath",
}


@dataclasses.dataclass(frozen=True)
class PriorityLevel:
    """What one priority level is on this cluster."""

    class_name: str
    """The PriorityClass pods of this level name."""
    value: int
    """The PriorityClass's value: the higher, the sooner its pods are scheduled."""
    preemptible: bool
    """Whether its pods may be preempted (the KAI scheduler's ``kai.scheduler/preemptibility``)."""

    @property
    def preemption_policy(self) -> str:
        """The PriorityClass's ``preemptionPolicy``: preemptible work never preempts others.

        A preemptible level is ``Never``: its pods go ahead of lower ones in the queue but evict
        nobody, so training does not kill other training's progress (the use Kubernetes
        documents for non-preempting classes). The other levels (workspaces, inference)
        ``PreemptLowerPriority``: they take their place from preemptible work.
        """
        return "Never" if self.preemptible else "PreemptLowerPriority"


def _default_priority_classes() -> Mapping[str, PriorityLevel | None]:
    return MappingProxyType(
        {
            level: PriorityLevel(f"podwright-{level}", value, value < NON_PREEMPTIBLE_VALUE)
            for level, value in PRIORITY_VALUES.items()
        }
    )


@dataclasses.dataclass(frozen=True)
class ClusterProfile:
    """What the cluster offers; the defaults grant nothing beyond plain Kubernetes."""

    name: str = "default"
    label_domain: str = "podwright.dev"
    scheduler_type: SchedulerType = SchedulerType.DEFAULT
    scheduler_name: str = "default-scheduler"
    queue: str | None = None
    """The KAI queue (``kai.scheduler/queue`` label) pods join."""
    node_type_label: str = "podwright.dev/node-type"
    node_pool_label: str = "podwright.dev/node-pool"
    priority_classes: Mapping[str, PriorityLevel | None] = dataclasses.field(
        default_factory=_default_priority_classes
    )
    """Each level's PriorityClass; None when the cluster does not offer the level."""
    fuse_grant: FuseGrantMode = FuseGrantMode.NONE
    git_image: str = "docker.io/alpine/git:v2.47.2"
    s3_adapter: S3Adapter = S3Adapter.S3FS
    s3_image: str = "docker.io/efrecon/s3fs:1.94"
    knative_features: frozenset[str] = DEFAULT_KNATIVE_FEATURES
    authorization_types: frozenset[str] = frozenset({"public"})
    helper_resources: HelperResources = DEFAULT_HELPER_RESOURCES
    """The requests and limits of every container podwright adds to a pod."""

    def label(self, name: str) -> str:
        """A label or annotation key in podwright's domain: ``podwright.dev/<name>``."""
        return f"{self.label_domain}/{name}"


DEFAULT_PROFILE = ClusterProfile()


class ProfileError(ProblemsError):
    """The profile cannot be used; ``problems`` lists every reason."""


SPEC_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "labelDomain": (),
        "scheduler": ("type", "name", "queue"),
        "nodeLabels": ("nodeType", "nodePool"),
        "priorityClasses": PRIORITY_LEVELS,
        "fuse": ("grant",),
        "git": ("image",),
        "s3": ("adapter", "image"),
        "knative": ("features",),
        "authorizationTypes": (),
        "helperResources": ("requests", "limits"),
    }
)
"""The keys of a profile's ``spec``, each with the keys of the mapping it holds (none for a
value), as the reader accepts them and the ClusterProfile resource's schema lists them."""

PRIORITY_CLASS_FIELDS = ("name", "value", "preemptible")
"""The keys of one level's entry under ``priorityClasses``."""

HELPER_AMOUNT_FIELDS = RESOURCE_NAMES
"""The keys of ``helperResources.requests`` and ``helperResources.limits``."""


_E = TypeVar("_E", bound=StrEnum)


class _Reader:
    """Reads the profile's plain data, recording a problem for each bad value."""

    def __init__(self, source: str | None) -> None:
        self.source = source
        self.problems: list[FieldProblem] = []

    def problem(self, path: FieldPath, message: str) -> None:
        self.problems.append(FieldProblem(path, message, self.source))

    def mapping(
        self, data: object, path: FieldPath, known: tuple[str, ...]
    ) -> Mapping[str, object]:
        if data is None:
            return {}
        if not isinstance(data, Mapping):
            self.problem(path, f"expected a mapping, got {describe(data)}")
            return {}
        for key in data:
            if key not in known:
                self.problem((*path, str(key)), unknown_field(key, known))
        return data

    def text(
        self,
        data: Mapping[str, object],
        key: str,
        path: FieldPath,
        default: str,
        check: Callable[[str], str | None] | None = None,
    ) -> str:
        value = data.get(key, default)
        if not isinstance(value, str) or not value:
            self.problem((*path, key), f"expected a non-empty string, got {describe(value)}")
            return default
        problem = check(value) if check else None
        if problem:
            self.problem((*path, key), f"{value!r} {problem}")
            return default
        return value

    def choice(self, data: Mapping[str, object], key: str, path: FieldPath, default: _E) -> _E:
        value = data.get(key, default.value)
        choices = [member.value for member in type(default)]
        if value not in choices:
            self.problem((*path, key), f"expected {one_of(choices)}, got {describe(value)}")
            return default
        return type(default)(value)

    def names(
        self, data: Mapping[str, object], key: str, path: FieldPath, allowed: tuple[str, ...]
    ) -> frozenset[str] | None:
        if key not in data:
            return None
        value = data[key]
        if not isinstance(value, list):
            self.problem((*path, key), f"expected a list, got {describe(value)}")
            return None
        for index, item in enumerate(value):
            if item not in allowed:
                self.problem(
                    (*path, key, index), f"expected {one_of(allowed)}, got {describe(item)}"
                )
        return frozenset(item for item in value if item in allowed)


def profile_from_data(data: object, source: str | None = None) -> ClusterProfile:
    """Read and check a ``ClusterProfile`` document; raises :class:`ProfileError`."""
    reader = _Reader(source)
    document = reader.mapping(data, (), ("apiVersion", "kind", "metadata", "spec"))
    if isinstance(data, Mapping):
        for key, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
            if document.get(key) != expected:
                reader.problem((key,), f"expected {expected!r}, got {describe(document.get(key))}")
    metadata = reader.mapping(document.get("metadata"), ("metadata",), ("name",))
    name = reader.text(metadata, "name", ("metadata",), "default", dns1123_subdomain_problem)
    spec = reader.mapping(document.get("spec"), ("spec",), tuple(SPEC_FIELDS))
    path: FieldPath = ("spec",)
    domain = reader.text(spec, "labelDomain", path, "podwright.dev", dns1123_subdomain_problem)

    scheduler = reader.mapping(
        spec.get("scheduler"), (*path, "scheduler"), SPEC_FIELDS["scheduler"]
    )
    scheduler_type = reader.choice(scheduler, "type", (*path, "scheduler"), SchedulerType.DEFAULT)
    default_name = "kai-scheduler" if scheduler_type is SchedulerType.KAI else "default-scheduler"
    scheduler_name = reader.text(
        scheduler, "name", (*path, "scheduler"), default_name, dns1123_subdomain_problem
    )
    queue = None
    if "queue" in scheduler or scheduler_type is SchedulerType.KAI:
        queue = reader.text(
            scheduler, "queue", (*path, "scheduler"), "default-queue", dns1123_label_problem
        )
        if scheduler_type is not SchedulerType.KAI:
            reader.problem((*path, "scheduler", "queue"), "a queue needs scheduler type 'kai'")

    node_labels = reader.mapping(
        spec.get("nodeLabels"), (*path, "nodeLabels"), SPEC_FIELDS["nodeLabels"]
    )
    node_type_label = reader.text(
        node_labels,
        "nodeType",
        (*path, "nodeLabels"),
        f"{domain}/node-type",
        qualified_name_problem,
    )
    node_pool_label = reader.text(
        node_labels,
        "nodePool",
        (*path, "nodeLabels"),
        f"{domain}/node-pool",
        qualified_name_problem,
    )

    priority_classes = _priority_classes(reader, spec.get("priorityClasses"), path)

    fuse = reader.mapping(spec.get("fuse"), (*path, "fuse"), SPEC_FIELDS["fuse"])
    fuse_grant = reader.choice(fuse, "grant", (*path, "fuse"), FuseGrantMode.NONE)
    git = reader.mapping(spec.get("git"), (*path, "git"), SPEC_FIELDS["git"])
    git_image = reader.text(git, "image", (*path, "git"), ClusterProfile.git_image)
    s3 = reader.mapping(spec.get("s3"), (*path, "s3"), SPEC_FIELDS["s3"])
    s3_adapter = reader.choice(s3, "adapter", (*path, "s3"), S3Adapter.S3FS)
    s3_image = reader.text(s3, "image", (*path, "s3"), ClusterProfile.s3_image)
    knative = reader.mapping(spec.get("knative"), (*path, "knative"), SPEC_FIELDS["knative"])
    features = reader.names(knative, "features", (*path, "knative"), KNATIVE_FEATURES)
    authorization = reader.names(spec, "authorizationTypes", path, AUTHORIZATION_TYPES)
    helper_resources = _helper_resources(reader, spec.get("helperResources"), path)

    if reader.problems:
        raise ProfileError(reader.problems)
    return ClusterProfile(
        name=name,
        label_domain=domain,
        scheduler_type=scheduler_type,
        scheduler_name=scheduler_name,
        queue=queue,
        node_type_label=node_type_label,
        node_pool_label=node_pool_label,
        priority_classes=priority_classes,
        fuse_grant=fuse_grant,
        git_image=git_image,
        s3_adapter=s3_adapter,
        s3_image=s3_image,
        knative_features=DEFAULT_KNATIVE_FEATURES if features is None else features,
        authorization_types=frozenset({"public"}) if authorization is None else authorization,
        helper_resources=helper_resources,
    )


def _helper_resources(reader: _Reader, data: object, path: FieldPath) -> HelperResources:
    """``helperResources``: each amount a positive quantity (its default when left out), each
    request at most its limit."""
    path = (*path, "helperResources")
    sections = reader.mapping(data, path, SPEC_FIELDS["helperResources"])
    default = DEFAULT_HELPER_RESOURCES
    chosen: dict[str, dict[str, Decimal | None]] = {}
    for section, defaults in (("requests", default.requests), ("limits", default.limits)):
        amounts = reader.mapping(sections.get(section), (*path, section), HELPER_AMOUNT_FIELDS)
        chosen[section] = {
            resource: _positive_amount(
                reader, amounts, resource, (*path, section), getattr(defaults, resource)
            )
            for resource in HELPER_AMOUNT_FIELDS
        }
    for resource in HELPER_AMOUNT_FIELDS:
        request, limit = chosen["requests"][resource], chosen["limits"][resource]
        if request is not None and limit is not None and request > limit:
            reader.problem(
                (*path, "requests", resource),
                f"{quantities.format_quantity(request)} is above limits.{resource} "
                f"({quantities.format_quantity(limit)}); a request may not exceed its limit",
            )
    valid: dict[str, dict[str, Decimal]] = {}
    for section, amounts in chosen.items():
        valid[section] = {name: amount for name, amount in amounts.items() if amount is not None}
        if len(valid[section]) < len(amounts):
            return default  # the problem is recorded: the profile is refused
    return HelperResources(requests=Amounts(**valid["requests"]), limits=Amounts(**valid["limits"]))


def _positive_amount(
    reader: _Reader,
    data: Mapping[str, object],
    key: str,
    path: FieldPath,
    default: Decimal,
) -> Decimal | None:
    """The quantity at ``key`` (``default`` when absent); None, with a problem, when it is no
    quantity above zero."""
    if key not in data:
        return default
    value = data[key]
    try:
        amount = quantities.parse(value)
    except quantities.QuantityError as error:
        reader.problem((*path, key), str(error))
        return None
    if amount <= 0:
        reader.problem((*path, key), f"expected a quantity above zero, got {describe(value)}")
        return None
    return amount


def _priority_classes(
    reader: _Reader, data: object, path: FieldPath
) -> Mapping[str, PriorityLevel | None]:
    priority_classes = dict(_default_priority_classes())
    levels = reader.mapping(data, (*path, "priorityClasses"), SPEC_FIELDS["priorityClasses"])
    named: dict[str, tuple[str, PriorityLevel]] = {}
    for level, entry in levels.items():
        level_path = (*path, "priorityClasses", level)
        if level not in PRIORITY_LEVELS:
            continue
        if entry is None:
            priority_classes[level] = None
            continue
        fields = reader.mapping(entry, level_path, PRIORITY_CLASS_FIELDS)
        default = priority_classes[level]
        assert default is not None
        class_name = reader.text(
            fields, "name", level_path, default.class_name, _priority_class_name_problem
        )
        value = fields.get("value", PRIORITY_VALUES[level])
        if not _is_priority_value(value):
            reader.problem(
                (*level_path, "value"),
                f"expected an integer of at most {HIGHEST_USER_PRIORITY}, got {describe(value)}",
            )
            value = PRIORITY_VALUES[level]
        assert isinstance(value, int)
        preemptible = fields.get("preemptible", value < NON_PREEMPTIBLE_VALUE)
        if not isinstance(preemptible, bool):
            reader.problem(
                (*level_path, "preemptible"), f"expected true or false, got {describe(preemptible)}"
            )
            preemptible = value < NON_PREEMPTIBLE_VALUE
        priority_classes[level] = PriorityLevel(class_name, value, preemptible)
    for level in PRIORITY_LEVELS:
        chosen = priority_classes[level]
        if chosen is None:
            continue
        first = named.setdefault(chosen.class_name, (level, chosen))
        if first[1] != chosen:
            reader.problem(
                (*path, "priorityClasses", level),
                f"PriorityClass {chosen.class_name!r} is also level {first[0]}'s, with another "
                "value or preemptibility; one class has one value",
            )
    return MappingProxyType(priority_classes)


def _priority_class_name_problem(name: str) -> str | None:
    if name.startswith("system-"):
        return "starts with 'system-', which Kubernetes keeps for its own classes"
    return dns1123_subdomain_problem(name)


def _is_priority_value(value: object) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and -(2**31) <= value <= HIGHEST_USER_PRIORITY
    )
