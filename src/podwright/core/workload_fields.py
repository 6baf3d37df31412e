"""The catalogue of workload fields: every field's value type and the workload types it serves.

Workload submissions, policy defaults and policy rules all speak of the same fields, in the same
camelCase dotted paths (``compute.gpuDevicesRequest``, ``storage.pvc``). This module is the one
place that says which fields exist, what kind of value each takes (boolean, string, integer,
number, quantity, array, itemized), which workload types support it, and which values an
enumerated field allows. Everything else (the submission parser, the policy loader, the
evaluator) walks this tree and never names a field itself.

The field set follows the Run:ai workload API that the policy reference describes, completed where
the reference is silent (see the README's "Workloads and policies").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from decimal import Decimal
from enum import StrEnum
from types import MappingProxyType


class WorkloadType(StrEnum):
    """The four kinds of workload; the value is the name used in files, on the CLI and in APIs."""

    WORKSPACE = "workspace"
    TRAINING = "training"
    DISTRIBUTED = "distributed"
    INFERENCE = "inference"


class ValueType(StrEnum):
    """What a field holds; it decides which rules the field can carry."""

    BOOLEAN = "boolean"
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    QUANTITY = "quantity"
    ARRAY = "array"
    ITEMIZED = "itemized"
    SECTION = "section"


NUMERIC_TYPES = frozenset({ValueType.INTEGER, ValueType.NUMBER, ValueType.QUANTITY})

ALL_TYPES = frozenset(WorkloadType)
NOT_INFERENCE = ALL_TYPES - {WorkloadType.INFERENCE}


@dataclasses.dataclass(frozen=True)
class Leaf:
    """A field holding one value (an array is one value too: it is replaced, never merged).

    ``choices`` enumerates the allowed strings of an enumerated field. ``item`` is the type of an
    array's items: a value type, or a :class:`Section` for arrays of objects. ``minimum`` and
    ``maximum`` are what the value can be at all (a port number), not policy rules.
    ``frameworks`` limits a distributed-training field to some frameworks.
    """

    value_type: ValueType
    workload_types: frozenset[WorkloadType] = ALL_TYPES
    choices: tuple[str, ...] = ()
    item: ValueType | Section | None = None
    minimum: Decimal | None = None
    maximum: Decimal | None = None
    frameworks: frozenset[str] = frozenset()


@dataclasses.dataclass(frozen=True)
class Section:
    """A mapping of named fields (``compute``, ``security``, ``probes.readiness``, a role)."""

    fields: Mapping[str, Field]
    workload_types: frozenset[WorkloadType] = ALL_TYPES
    value_type: ValueType = ValueType.SECTION


@dataclasses.dataclass(frozen=True)
class Itemized:
    """A list of instances, each a :class:`Section` of attributes, identified by its ``key``.

    Policies give default instances and per-attribute defaults and rules; a submission may add
    instances, change a default instance, or drop one with ``exclude: true``.
    """

    key: str
    attributes: Section
    workload_types: frozenset[WorkloadType] = ALL_TYPES
    value_type: ValueType = ValueType.ITEMIZED
    unnamed_defaults: bool = False
    """Whether a policy's default instance may leave its key out, as the reference's storage
    examples do: there the key (a storage instance's ``name``) only names the instance for
    ``locked`` rules and a submission's changes. Nothing can name such an instance, so it is
    always added, and no submission changes or excludes it (under a policy that enforces;
    in warn or audit mode that is a finding, and the submission stands); evaluation names it
    after its
    attributes (:func:`~podwright.core.effective_policy.instance_key`)."""


Field = Leaf | Section | Itemized

EXCLUDE = "exclude"
"""The submission-only attribute that drops a policy's default instance of an itemized field."""

DISTRIBUTED_FRAMEWORKS = ("MPI", "PyTorch", "TF", "XGBoost", "JAX")
ROLES = ("master", "worker")
"""Distributed training puts every container field under one of these sections."""


def _section(workload_types: frozenset[WorkloadType] = ALL_TYPES, /, **fields: Field) -> Section:
    return Section(MappingProxyType(fields), workload_types)


def _items(
    key: str, workload_types: frozenset[WorkloadType] = ALL_TYPES, /, **fields: Field
) -> Itemized:
    return Itemized(key, _section(**{key: _STRING, **fields}), workload_types)


def _volumes(workload_types: frozenset[WorkloadType] = ALL_TYPES, /, **fields: Field) -> Itemized:
    """A storage field: instances keyed by a ``name`` that a policy's default may leave out."""
    return dataclasses.replace(_items("name", workload_types, **fields), unnamed_defaults=True)


_BOOLEAN = Leaf(ValueType.BOOLEAN)
_STRING = Leaf(ValueType.STRING)
_NUMBER = Leaf(ValueType.NUMBER, minimum=Decimal(0))
_QUANTITY = Leaf(ValueType.QUANTITY, minimum=Decimal(0))
_COUNT = Leaf(ValueType.INTEGER, minimum=Decimal(0))
_GRACE_SECONDS = dataclasses.replace(_COUNT, maximum=Decimal(2**63 - 1))
"""A pod's ``terminationGracePeriodSeconds``, an int64."""
_PORT = Leaf(ValueType.INTEGER, minimum=Decimal(1), maximum=Decimal(65535))
_ID = Leaf(ValueType.INTEGER, minimum=Decimal(0), maximum=Decimal(2**31 - 1))
_STRINGS = Leaf(ValueType.ARRAY, item=ValueType.STRING)
_FRACTION = Leaf(ValueType.NUMBER, minimum=Decimal(0), maximum=Decimal(1))


def _enum(*choices: str, workload_types: frozenset[WorkloadType] = ALL_TYPES) -> Leaf:
    return Leaf(ValueType.STRING, workload_types, choices=choices)


def _restricted(leaf: Leaf, workload_types: frozenset[WorkloadType]) -> Leaf:
    return dataclasses.replace(leaf, workload_types=workload_types)


_SECRET_KEY_REF = _section(name=_STRING, key=_STRING)

_STORAGE = _section(
    dataVolume=Itemized("id", _section(id=_STRING, mountPath=_STRING, readOnly=_BOOLEAN)),
    hostPath=_volumes(
        path=_STRING,
        mountPath=_STRING,
        readOnly=_BOOLEAN,
        mountPropagation=_enum("None", "HostToContainer"),
    ),
    git=_volumes(
        repository=_STRING,
        branch=_STRING,
        revision=_STRING,
        path=_STRING,
        secretName=_STRING,
        passwordSecret=_STRING,
        username=_STRING,
    ),
    pvc=_volumes(
        claimName=_STRING,
        path=_STRING,
        readOnly=_BOOLEAN,
        ephemeral=_BOOLEAN,
        existingPvc=_BOOLEAN,
        claimInfo=_section(
            size=_QUANTITY,
            storageClass=_STRING,
            volumeMode=_enum("Filesystem", "Block"),
            accessModes=_section(
                readWriteOnce=_BOOLEAN, readOnlyMany=_BOOLEAN, readWriteMany=_BOOLEAN
            ),
        ),
    ),
    nfs=_volumes(server=_STRING, path=_STRING, mountPath=_STRING, readOnly=_BOOLEAN),
    s3=_volumes(
        NOT_INFERENCE,
        bucket=_STRING,
        path=_STRING,
        url=_STRING,
        accessKeySecret=_STRING,
        secretKeyOfAccessKeyId=_STRING,
        secretKeyOfSecretKey=_STRING,
    ),
    configMapVolumes=_volumes(configMap=_STRING, mountPath=_STRING, subPath=_STRING),
    emptyDir=_volumes(
        mountPath=_STRING,
        sizeLimit=_QUANTITY,
        medium=_enum("Disk", "Memory"),
    ),
    secretVolume=_volumes(
        secret=_STRING,
        mountPath=_STRING,
        defaultMode=Leaf(ValueType.INTEGER, minimum=Decimal(0), maximum=Decimal(0o777)),
    ),
)

_SECURITY = _section(
    uidGidSource=_enum("fromTheImage", "custom", "idpToken"),
    capabilities=_STRINGS,
    seccompProfileType=_enum("RuntimeDefault", "Unconfined", "Localhost"),
    runAsNonRoot=_BOOLEAN,
    readOnlyRootFilesystem=_BOOLEAN,
    runAsUid=_ID,
    runAsGid=_ID,
    supplementalGroups=Leaf(ValueType.ARRAY, item=ValueType.INTEGER),
    allowPrivilegeEscalation=_restricted(_BOOLEAN, NOT_INFERENCE),
    hostIpc=_restricted(_BOOLEAN, NOT_INFERENCE),
    hostNetwork=_restricted(_BOOLEAN, NOT_INFERENCE),
)

_COMPUTE = _section(
    cpuCoreRequest=_NUMBER,
    cpuCoreLimit=_NUMBER,
    cpuMemoryRequest=_QUANTITY,
    cpuMemoryLimit=_QUANTITY,
    largeShmRequest=_BOOLEAN,
    gpuRequestType=_enum("portion", "memory"),
    gpuDevicesRequest=_COUNT,
    gpuPortionRequest=_NUMBER,
    gpuPortionLimit=_FRACTION,
    gpuMemoryRequest=_QUANTITY,
    gpuMemoryLimit=_QUANTITY,
    extendedResources=Itemized("resource", _section(resource=_STRING, quantity=_QUANTITY)),
)

_URL_ACCESS = {
    "authorizationType": _enum("public", "authenticatedUsers", "authorizedUsersOrGroups"),
    "authorizedUsers": _STRINGS,
    "authorizedGroups": _STRINGS,
}

_INFERENCE_ONLY = frozenset({WorkloadType.INFERENCE})

_CONTAINER_FIELDS: dict[str, Field] = {
    "command": _STRING,
    "args": _STRING,
    "image": _STRING,
    "imagePullPolicy": _enum("Always", "IfNotPresent", "Never"),
    "imagePullSecrets": _items("name"),
    "workingDir": _STRING,
    "createHomeDir": _BOOLEAN,
    "environmentVariables": _items(
        "name",
        value=_STRING,
        secret=_SECRET_KEY_REF,
        configMap=_SECRET_KEY_REF,
        podFieldRef=_section(path=_STRING),
    ),
    "nodeType": _STRING,
    "nodePools": _STRINGS,
    "annotations": _items("name", value=_STRING),
    "labels": _items("name", value=_STRING),
    "terminateAfterPreemption": _restricted(_BOOLEAN, NOT_INFERENCE),
    "autoDeletionTimeAfterCompletionSeconds": _restricted(_COUNT, NOT_INFERENCE),
    "terminationGracePeriodSeconds": _restricted(_GRACE_SECONDS, NOT_INFERENCE),
    "backoffLimit": _restricted(_COUNT, NOT_INFERENCE),
    "restartPolicy": _enum("Always", "Never", "OnFailure", workload_types=NOT_INFERENCE),
    "completions": _restricted(_COUNT, frozenset({WorkloadType.TRAINING})),
    "parallelism": _restricted(_COUNT, frozenset({WorkloadType.TRAINING})),
    "exposedUrls": Leaf(
        ValueType.ARRAY,
        item=_section(
            container=_PORT, url=_STRING, toolType=_STRING, toolName=_STRING, **_URL_ACCESS
        ),
    ),
    "relatedUrls": Leaf(ValueType.ARRAY, item=_section(url=_STRING, type=_STRING)),
    "podAffinitySchedulingRule": _enum("required", "preferred"),
    "podAffinityTopology": _STRING,
    "category": _STRING,
    "ports": _items(
        "name",
        container=_PORT,
        serviceType=_enum("LoadBalancer", "NodePort", "ClusterIP"),
        external=_PORT,
        toolType=_STRING,
        toolName=_STRING,
    ),
    "probes": _section(
        readiness=_section(
            initialDelaySeconds=_COUNT,
            periodSeconds=_COUNT,
            timeoutSeconds=_COUNT,
            successThreshold=_COUNT,
            failureThreshold=_COUNT,
            handler=_section(
                httpGet=_section(
                    path=_STRING, port=_PORT, host=_STRING, scheme=_enum("HTTP", "HTTPS")
                )
            ),
        )
    ),
    "tolerations": _items(
        "name",
        operator=_enum("Equal", "Exists"),
        key=_STRING,
        value=_STRING,
        effect=_enum("NoSchedule", "PreferNoSchedule", "NoExecute"),
        seconds=_COUNT,
    ),
    "priorityClass": _enum(
        "very-low", "low", "medium-low", "medium", "medium-high", "high", "very-high"
    ),
    "nodeAffinityRequired": Leaf(
        ValueType.ARRAY,
        item=_section(
            matchExpressions=Leaf(
                ValueType.ARRAY,
                item=_section(
                    key=_STRING,
                    operator=_enum("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"),
                    values=_STRINGS,
                ),
            )
        ),
    ),
    "storage": _STORAGE,
    "security": _SECURITY,
    "compute": _COMPUTE,
    "tty": _restricted(_BOOLEAN, NOT_INFERENCE),
    "stdin": _restricted(_BOOLEAN, NOT_INFERENCE),
    "servingPort": _section(
        _INFERENCE_ONLY,
        container=_PORT,
        protocol=_enum("http", "grpc"),
        clusterLocalAccessOnly=_BOOLEAN,
        **_URL_ACCESS,
    ),
    "autoscaling": _section(
        _INFERENCE_ONLY,
        metricThresholdPercentage=Leaf(ValueType.NUMBER, minimum=Decimal(0), maximum=Decimal(100)),
        minReplicas=_COUNT,
        maxReplicas=_COUNT,
        initialReplicas=_COUNT,
        activationReplicas=_COUNT,
        concurrencyHardLimit=_COUNT,
        scaleToZeroRetentionSeconds=_COUNT,
        scaleDownDelaySeconds=_COUNT,
        metric=_STRING,
        metricThreshold=_NUMBER,
    ),
    "servingConfiguration": _section(
        _INFERENCE_ONLY, initializationTimeoutSeconds=_COUNT, requestTimeoutSeconds=_COUNT
    ),
}

_DISTRIBUTED_ONLY = frozenset({WorkloadType.DISTRIBUTED})

_WORKER_FIELDS: dict[str, Field] = {
    "numWorkers": _restricted(_COUNT, _DISTRIBUTED_ONLY),
    "distributedFramework": _enum(*DISTRIBUTED_FRAMEWORKS, workload_types=_DISTRIBUTED_ONLY),
    "minReplicas": Leaf(
        ValueType.INTEGER, _DISTRIBUTED_ONLY, minimum=Decimal(0), frameworks=frozenset({"PyTorch"})
    ),
    "maxReplicas": Leaf(
        ValueType.INTEGER, _DISTRIBUTED_ONLY, minimum=Decimal(0), frameworks=frozenset({"PyTorch"})
    ),
    "slotsPerWorker": Leaf(
        ValueType.INTEGER, _DISTRIBUTED_ONLY, minimum=Decimal(1), frameworks=frozenset({"MPI"})
    ),
    "sshAuthMountPath": Leaf(ValueType.STRING, _DISTRIBUTED_ONLY, frameworks=frozenset({"MPI"})),
    "mpiLauncherCreationPolicy": Leaf(
        ValueType.STRING,
        _DISTRIBUTED_ONLY,
        choices=("AtStartup", "WaitForWorkersReady"),
        frameworks=frozenset({"MPI"}),
    ),
    "cleanPodPolicy": _enum("Running", "All", "None", workload_types=_DISTRIBUTED_ONLY),
}

FRAMEWORK_FIELD = "distributedFramework"

BOUNDED_PAIRS: Mapping[tuple[str, ...], tuple[tuple[str, str], ...]] = MappingProxyType(
    {
        ("compute",): (
            ("cpuCoreRequest", "cpuCoreLimit"),
            ("cpuMemoryRequest", "cpuMemoryLimit"),
            ("gpuPortionRequest", "gpuPortionLimit"),
            ("gpuMemoryRequest", "gpuMemoryLimit"),
        ),
        ("autoscaling",): (("minReplicas", "maxReplicas"),),
        (): (("minReplicas", "maxReplicas"),),
    }
)
"""Within each section (below a role for distributed), (lower, upper) fields: wherever both
are set, whatever set them, the upper may not be below the lower (a limit below its request,
fewer maximum replicas than minimum ones). Kubernetes, Knative and the KAI scheduler refuse or
misread such a pod, so no workload with one is rendered."""


def _for_type(field: Field, workload_type: WorkloadType) -> Field | None:
    """``field`` with only what ``workload_type`` supports, or None if it supports none of it."""
    if workload_type not in field.workload_types:
        return None
    if isinstance(field, Section):
        return Section(
            MappingProxyType(
                {
                    name: narrowed
                    for name, child in field.fields.items()
                    if (narrowed := _for_type(child, workload_type)) is not None
                }
            ),
            field.workload_types,
        )
    if isinstance(field, Itemized):
        attributes = _for_type(field.attributes, workload_type)
        assert isinstance(attributes, Section)
        return dataclasses.replace(field, attributes=attributes)
    return field


def _schema(workload_type: WorkloadType) -> Section:
    container = _for_type(_section(**_CONTAINER_FIELDS), workload_type)
    assert isinstance(container, Section)
    if workload_type is not WorkloadType.DISTRIBUTED:
        return container
    worker = _section(**container.fields, **_WORKER_FIELDS)
    return _section(master=container, worker=worker)


SCHEMAS: Mapping[WorkloadType, Section] = MappingProxyType(
    {workload_type: _schema(workload_type) for workload_type in WorkloadType}
)
"""The root section of each workload type's submission (for distributed: ``master``/``worker``)."""

_EVERY_FIELD = _section(**_CONTAINER_FIELDS, **_WORKER_FIELDS)


def field_at(root: Section, path: tuple[str, ...]) -> Field | None:
    """The field a dotted schema path names (an itemized field's attributes lie beneath it)."""
    field: Field = root
    for name in path:
        if isinstance(field, Itemized):
            field = field.attributes
        if not isinstance(field, Section) or name not in field.fields:
            return None
        field = field.fields[name]
    return field


CatalogueRank = tuple[tuple[int, int, str], ...]
"""Where a field comes in the catalogue: one (known, position, text) per step of its path."""


def catalogue_rank(root: Section, where: str) -> CatalogueRank:
    """The sort key that lists the fields of dotted paths (``compute.gpuDevicesRequest``,
    ``storage.pvc[home].claimName``, ``master.image``) in the catalogue's order, whatever order a
    submission or a policy gave them in: each field by its position in its section, an instance
    of an itemized field by its key, and a name the catalogue lacks after the known ones, by
    name. A path that is a prefix of another comes first (an instance before its attributes).

    An itemized field's attributes hold no itemized field, so an instance's key runs to the
    last ``]`` of the path (a key may hold dots and brackets itself)."""
    rank: list[tuple[int, int, str]] = []
    field: Field | None = root
    rest = where
    while rest:
        if rest.startswith("["):
            close = rest.rfind("]")
            rank.append((0, 0, rest[1:close]))
            rest = rest[close + 1 :].removeprefix(".")
            field = field.attributes if isinstance(field, Itemized) else None
            continue
        end = min((at for at in (rest.find("."), rest.find("[")) if at >= 0), default=len(rest))
        name, rest = rest[:end], rest[end:].removeprefix(".")
        fields = field.fields if isinstance(field, Section) else {}
        field = fields.get(name)
        rank.append((0, list(fields).index(name), "") if field is not None else (1, 0, name))
    return tuple(rank)


def supporting_types(path: tuple[str, ...]) -> frozenset[WorkloadType]:
    """The workload types that have the field at ``path`` (below a role for distributed).

    Empty when no type has it: the field is unknown rather than unsupported.
    """
    supported = ALL_TYPES
    field: Field = _EVERY_FIELD
    for name in path:
        if isinstance(field, Itemized):
            field = field.attributes
        if not isinstance(field, Section) or name not in field.fields:
            return frozenset()
        field = field.fields[name]
        supported &= field.workload_types
    return supported
