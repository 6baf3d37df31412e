"""podwright's CustomResourceDefinitions, generated from the model the policy engine reads.

In a cluster, workloads, policies, assets and the cluster profile are objects of the API group
``podwright.dev`` (version ``v1alpha1``). Their schemas are not written by hand: they are walked
out of the same field catalogue (:mod:`~podwright.core.workload_fields`), rule table
(:data:`~podwright.core.policies.RULES_BY_TYPE`), asset kinds and profile keys that the loaders
check files against, so a field added to the catalogue is a field of the CRDs, and nothing here
names a workload field. :func:`custom_resource_definitions` returns them as
``apiextensions.k8s.io/v1`` objects, the same on every call; ``podwright crds`` prints them and
``deploy/crds/`` holds them.

What the schemas say, and why:

* They are *structural* (the "Specifying a structural schema" section of
  https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/):
  every node is typed, objects list their ``properties`` (never with ``additionalProperties``),
  and ``x-kubernetes-preserve-unknown-fields`` appears nowhere a person writes, for no value of
  podwright's is free-form; only the operator's own record in ``status.task`` keeps the rendered
  manifests and the engine's versioned plugin state as they are.
* Unknown fields are **refused, not pruned**. An API server prunes what a schema does not name;
  under ``fieldValidation=Strict``, which ``kubectl`` sends by default, it refuses the request
  instead (``strict decoding error: unknown field "spec.rules.image.requird"``). Because every
  object here lists its properties, a misspelt rule or field is an error at ``kubectl apply``
  rather than a rule that silently vanished. (A client that sends ``Ignore`` or ``Warn`` gets
  the field pruned; the loaders still read what was stored.)
* The loaders stay the authority: a schema never refuses what they accept (with the two
  exceptions below) and may accept what they refuse (a default above a rule's maximum, a field
  the workload type does not support, a name that is no DNS label): the admission webhook
  reports those, with the loaders' messages. The Workload and policy schemas are the union over
  workload types: ``master``/``worker`` (distributed training) beside the fields of the others.
* Values: booleans, strings (enumerations as ``enum``), integers and numbers with the field's
  own ``minimum``/``maximum``, quantities as ``x-kubernetes-int-or-string`` with the core's
  quantity grammar as ``pattern`` (:data:`~podwright.core.quantities.QUANTITY_PATTERN`).
  Itemized fields are lists keyed by their key attribute (``x-kubernetes-list-type: map``, so
  server-side apply merges instances by key and a key given twice is refused, as the loader
  refuses it), except a policy's default storage instances, which may be unnamed (the
  reference's examples are): those lists are ``atomic``, and the loader refuses a name given
  twice.
* Two spellings the files allow are not structural, so a resource must write them the
  Kubernetes way: a fractional quantity as a string (``"0.5"`` or ``500m``, not ``0.5``: an
  int-or-string holds no float, as in every Kubernetes Quantity field), and
  ``security.supplementalGroups`` as a list (not the reference's ``"1000,2000"``).
* Cross-field rules are CEL (``x-kubernetes-validations``, the "Validation rules" section of the
  same page), kept to ``has()`` and comparisons: a ClusterWorkloadPolicy names a department
  exactly when its scope is ``department``; an asset's ``spec`` holds only its kind's fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from types import MappingProxyType

from podwright.core.assets import ASSET_FIELDS, AssetKind, spec_fields
from podwright.core.cluster_resources import (
    ASSET_KIND,
    CLUSTER_ASSET_KIND,
    CLUSTER_POLICY_KIND,
    CLUSTER_SCOPES,
    GROUP,
    POLICY_KIND,
    SUBMITTED_BY_ANNOTATION,
    VERSION,
    WORKLOAD_KIND,
)
from podwright.core.policies import (
    INSTANCE_RULES,
    ITEMIZED_SECTIONS,
    RULES_BY_TYPE,
    Enforcement,
    plain_number,
)
from podwright.core.quantities import QUANTITY_PATTERN
from podwright.core.render.profile import (
    AUTHORIZATION_TYPES,
    HELPER_AMOUNT_FIELDS,
    HIGHEST_USER_PRIORITY,
    KNATIVE_FEATURES,
    PRIORITY_CLASS_FIELDS,
    SPEC_FIELDS,
    FuseGrantMode,
    S3Adapter,
    SchedulerType,
)
from podwright.core.render.profile import KIND as PROFILE_KIND
from podwright.core.workload_fields import (
    EXCLUDE,
    SCHEMAS,
    Field,
    Itemized,
    Leaf,
    Section,
    ValueType,
    WorkloadType,
)

Schema = dict[str, object]
"""One node of an OpenAPI v3 schema, as JSON."""

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CATEGORY = "podwright"
"""Every kind's category: ``kubectl get podwright`` lists them all."""

CONDITION_TYPES = ("PolicyCompliant", "Launched", "Ready", "Finished")
"""The conditions a Workload's status reports."""


def custom_resource_definitions() -> list[dict[str, object]]:
    """Every CRD of ``podwright.dev/v1alpha1``, ordered by name; fresh objects on every call
    (no node is shared, so a YAML dump has no anchors)."""
    definitions = [
        _workload(),
        _policy(POLICY_KIND, "workloadpolicies", namespaced=True, short_name="pwp"),
        _policy(
            CLUSTER_POLICY_KIND, "clusterworkloadpolicies", namespaced=False, short_name="pcwp"
        ),
        _asset(ASSET_KIND, "assets", namespaced=True, short_name="pwas"),
        _asset(CLUSTER_ASSET_KIND, "clusterassets", namespaced=False, short_name="pcas"),
        _cluster_profile(),
    ]
    return sorted(definitions, key=lambda crd: str(_metadata_name(crd)))


def definition_file_name(crd: Mapping[str, object]) -> str:
    """Where ``crd`` is kept in ``deploy/crds/``: controller-gen's ``<group>_<plural>.yaml``."""
    plural = str(_metadata_name(crd)).split(".", 1)[0]
    return f"{GROUP}_{plural}.yaml"


# -- the resources ----------------------------------------------------------------------------


def _workload() -> dict[str, object]:
    fields = _submission(_every_type_root())
    properties = _properties(fields)
    if "type" in properties:
        raise ValueError("a workload field named 'type' would hide the Workload's spec.type")
    spec = _object(
        {
            "type": _enum(
                [kind.value for kind in WorkloadType],
                "The workload type; the other fields are those of a workload file's spec.",
            ),
            **properties,
        },
        required=["type"],
        description="The workload, as a workload file's spec, with its type beside it.",
    )
    return _definition(
        WORKLOAD_KIND,
        "workloads",
        namespaced=True,
        short_name="pwl",
        description="A workload: a workspace, training, distributed training or inference job, "
        "admitted under the policies of its namespace's scopes.",
        spec=spec,
        status=_workload_status(),
        columns=[
            _column("Type", ".spec.type"),
            # Who submitted it, as the mutating webhook records it (JSONPath escapes the dot of
            # the annotation's key).
            _column(
                "Submitter", ".metadata.annotations." + SUBMITTED_BY_ANNOTATION.replace(".", "\\.")
            ),
            _column("Phase", ".status.phase"),
            _column("Reason", ".status.reason"),
        ],
    )


def _policy(kind: str, plural: str, *, namespaced: bool, short_name: str) -> dict[str, object]:
    root = _every_type_root()
    properties: dict[str, Schema] = {
        "workloadType": _enum(
            [workload_type.value for workload_type in WorkloadType],
            "The workload type the policy governs.",
        ),
        "enforcement": {
            **_enum(
                [mode.value for mode in Enforcement],
                "What a violation does: enforce refuses the workload, warn admits it with "
                "warnings, audit admits it and records the findings.",
            ),
            "default": Enforcement.ENFORCE.value,
        },
        "defaults": _described(
            _defaults(root),
            "Defaults per field; itemized fields take {instances: [...], attributes: {...}}.",
        ),
        "rules": _described(
            _rules(root),
            "Rules per field; itemized fields take {instances: {canAdd, locked}, "
            "attributes: {...}}.",
        ),
        "imposedAssets": _described(
            _array(_string(min_length=1)), "Asset ids every workload in scope gets."
        ),
    }
    validations: list[Schema] = []
    if namespaced:
        description = "A workload policy of the project its namespace is."
        columns = [
            _column("Type", ".spec.workloadType"),
            _column("Enforcement", ".spec.enforcement"),
        ]
    else:
        description = "A workload policy of the tenant, this cluster, or one of its departments."
        properties = {
            "scope": {
                **_enum(list(CLUSTER_SCOPES), "The scope the policy governs."),
                "default": "cluster",
            },
            "department": _string(min_length=1, description="The department of scope department."),
            **properties,
        }
        validations.append(
            {
                "rule": "self.scope == 'department' ? has(self.department) : !has(self.department)",
                "message": "a policy of scope department names its department, and only it does",
            }
        )
        columns = [
            _column("Type", ".spec.workloadType"),
            _column("Enforcement", ".spec.enforcement"),
            _column("Scope", ".spec.scope"),
        ]
    spec = _object(
        properties,
        required=["workloadType"],
        description="The policy body: Run:ai's workloadType, defaults, rules and imposedAssets, "
        "and podwright's enforcement.",
    )
    if validations:
        spec["x-kubernetes-validations"] = validations
    return _definition(
        kind,
        plural,
        namespaced=namespaced,
        short_name=short_name,
        description=description,
        spec=spec,
        columns=columns,
    )


def _asset(kind: str, plural: str, *, namespaced: bool, short_name: str) -> dict[str, object]:
    kinds = list(AssetKind)
    attributes = _union([spec_fields(asset_kind) for asset_kind in kinds])
    assert isinstance(attributes, Section)
    entry: dict[str, Schema] = {
        "id": _string(min_length=1, description="The id policies impose the asset by."),
        "kind": _enum([asset_kind.value for asset_kind in kinds], "The kind of data source."),
        "spec": _described(
            _submission(attributes),
            "The storage instance's attributes for the asset's kind (its name is the asset's).",
        ),
        "credentials": _string(
            description="The credential asset it references (such an asset cannot be imposed)."
        ),
        "description": _string(),
    }
    properties = _listed([name for name in ASSET_FIELDS if name != "name"], entry, "an asset")
    spec = _object(
        properties,
        required=["id", "kind"],
        description="One entry of an asset catalogue, but its name (the object's).",
    )
    spec["x-kubernetes-validations"] = [
        rule for asset_kind in kinds if (rule := _own_fields_only(asset_kind, attributes))
    ]
    scope = "a namespace" if namespaced else "the cluster"
    return _definition(
        kind,
        plural,
        namespaced=namespaced,
        short_name=short_name,
        description=f"A data source of {scope} that policies impose on workloads by id.",
        spec=spec,
        columns=[_column("Kind", ".spec.kind"), _column("ID", ".spec.id")],
    )


def _own_fields_only(kind: AssetKind, attributes: Section) -> Schema | None:
    """The CEL rule that keeps another kind's attributes out of an asset's ``spec``."""
    own = spec_fields(kind).fields
    foreign = [name for name in attributes.fields if name not in own]
    if not foreign:
        return None
    present = " || ".join(f"has(self.spec.{name})" for name in foreign)
    return {
        "rule": f"self.kind != '{kind.value}' || !has(self.spec) || !({present})",
        "message": f"an asset of kind {kind.value} takes only these spec fields: " + ", ".join(own),
    }


def _cluster_profile() -> dict[str, object]:
    def level() -> Schema:
        fields: dict[str, Schema] = {
            "name": _string(min_length=1, description="The PriorityClass of the level."),
            "value": {
                "type": "integer",
                "minimum": -(2**31),
                "maximum": HIGHEST_USER_PRIORITY,
                "description": "Its value.",
            },
            "preemptible": {"type": "boolean", "description": "Whether its pods may be preempted."},
        }
        # null: the cluster does not offer the level (kept, not pruned, by nullable)
        return {
            **_object(_listed(PRIORITY_CLASS_FIELDS, fields, "a priority level")),
            "nullable": True,
        }

    values: dict[str, Schema] = {
        "labelDomain": _string(min_length=1),
        "authorizationTypes": _array(_enum(list(AUTHORIZATION_TYPES))),
    }
    mappings: dict[str, dict[str, Schema]] = {
        "scheduler": {
            "type": _enum([choice.value for choice in SchedulerType]),
            "name": _string(min_length=1),
            "queue": _string(min_length=1),
        },
        "nodeLabels": {"nodeType": _string(min_length=1), "nodePool": _string(min_length=1)},
        "priorityClasses": {name: level() for name in SPEC_FIELDS["priorityClasses"]},
        "fuse": {"grant": _enum([choice.value for choice in FuseGrantMode])},
        "git": {"image": _string(min_length=1)},
        "s3": {
            "adapter": _enum([choice.value for choice in S3Adapter]),
            "image": _string(min_length=1),
        },
        "knative": {"features": _array(_enum(list(KNATIVE_FEATURES)))},
        "helperResources": {
            section: _object(
                _listed(
                    HELPER_AMOUNT_FIELDS,
                    {name: _value(Leaf(ValueType.QUANTITY)) for name in HELPER_AMOUNT_FIELDS},
                    f"spec.helperResources.{section}",
                )
            )
            for section in SPEC_FIELDS["helperResources"]
        },
    }
    properties = _listed(
        SPEC_FIELDS,
        {
            **values,
            **{
                key: _object(_listed(SPEC_FIELDS[key], fields, f"spec.{key}"))
                for key, fields in mappings.items()
            },
        },
        "a cluster profile",
    )
    return _definition(
        PROFILE_KIND,
        "clusterprofiles",
        namespaced=False,
        short_name="pcp",
        description="How this cluster does what workloads leave open; every key is optional.",
        spec=_object(properties, description="The spec of a cluster profile file."),
        columns=[],
        spec_required=False,
    )


def _workload_status() -> Schema:
    condition = _object(
        {
            "type": {
                "type": "string",
                "maxLength": 316,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            },
            "status": _enum(["True", "False", "Unknown"]),
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            },
            "message": {"type": "string", "maxLength": 32768},
        },
        required=["type", "status", "lastTransitionTime", "reason", "message"],
    )
    finding = _object(
        {
            name: _string()
            for name in ("field", "rule", "allowed", "given", "policy", "scope", "message")
        }
        | {"enforcement": _enum([mode.value for mode in Enforcement])},
        required=["field", "rule"],
    )
    resource = _object(
        {name: _string() for name in ("apiVersion", "kind", "name", "uid")},
        required=["apiVersion", "kind", "name"],
    )
    url = _object({"name": _string(), "url": _string()}, required=["name", "url"])
    return _object(
        {
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "phase": _string(),
            "reason": _string(),
            "message": _string(),
            "conditions": {
                **_array(condition),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "description": "Conditions (metav1.Condition): " + ", ".join(CONDITION_TYPES) + ".",
            },
            "resources": _described(_array(resource), "The objects the workload owns."),
            "urls": _described(_array(url), "The URLs the workload exposes."),
            "startTime": {"type": "string", "format": "date-time"},
            "completionTime": {"type": "string", "format": "date-time"},
            "compliance": _described(
                _object(
                    {
                        "enforcement": _enum([mode.value for mode in Enforcement]),
                        "findings": _array(finding),
                    }
                ),
                "What the current policies find, in warn and audit mode.",
            ),
            "task": _task_status(),
        },
        description="What podwright observed of the workload.",
    )


def _task_status() -> Schema:
    """The operator's record of the workload's task: its task store in the cluster."""

    def time() -> Schema:
        return {"type": "string", "format": "date-time"}

    def opaque() -> Schema:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

    history_entry = _object(
        {
            "phase": _string(),
            "version": {"type": "integer", "minimum": 0},
            "reason": _string(),
            "occurredAt": time(),
            "errorCode": _string(),
            "errorMessage": _string(),
            "errorKind": _string(),
        },
        required=["phase", "version", "occurredAt"],
    )
    event = _object({"reason": _string(), "occurredAt": time()}, required=["reason"])
    return _described(
        _object(
            {
                "id": _string(description="The task's id: the workload's name and uid."),
                "revision": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Grows by one with every write of the record.",
                },
                "submittedAt": time(),
                "updatedAt": time(),
                "manifests": _described(
                    _array(opaque()), "The manifests rendered when the workload was admitted."
                ),
                "pluginState": _described(
                    opaque(), "The lifecycle engine's state of the task's resource (versioned)."
                ),
                "phaseVersion": {"type": "integer", "minimum": 0},
                "abortRequested": {"type": "boolean"},
                "finalized": {"type": "boolean"},
                "history": _described(_array(history_entry), "Every phase, in order."),
                "events": _described(
                    _array(event), "The latest Kubernetes events attached, in order."
                ),
            },
            required=["id", "revision"],
        ),
        "The operator's task record (plugin state, phase history, events), written with "
        "resourceVersion preconditions.",
    )


def _definition(
    kind: str,
    plural: str,
    *,
    namespaced: bool,
    short_name: str,
    description: str,
    spec: Schema,
    columns: Sequence[Schema],
    status: Schema | None = None,
    spec_required: bool = True,
) -> dict[str, object]:
    properties: dict[str, Schema] = {
        "apiVersion": _string(),
        "kind": _string(),
        "metadata": {"type": "object"},
        "spec": spec,
    }
    version: dict[str, object] = {"name": VERSION, "served": True, "storage": True}
    if status is not None:
        properties["status"] = status
        version["subresources"] = {"status": {}}
    version["schema"] = {
        "openAPIV3Schema": _object(
            properties,
            required=["spec"] if spec_required else [],
            description=description,
        )
    }
    version["additionalPrinterColumns"] = [
        *columns,
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short_name],
                "categories": [CATEGORY],
            },
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [version],
        },
    }


# -- the field model as schemas ---------------------------------------------------------------


def _every_type_root() -> Section:
    """The fields of every workload type together (distributed training's roles beside the
    others' fields)."""
    root = _union([SCHEMAS[workload_type] for workload_type in WorkloadType])
    assert isinstance(root, Section)
    return root


def _union(fields: Sequence[Field]) -> Field:
    """One field holding what each of ``fields`` (the same field, as different workload types
    or asset kinds narrow it) holds."""
    first = fields[0]
    if all(isinstance(field, Section) for field in fields):
        sections = [field for field in fields if isinstance(field, Section)]
        names = dict.fromkeys(name for section in sections for name in section.fields)
        return Section(
            MappingProxyType(
                {
                    name: _union([s.fields[name] for s in sections if name in s.fields])
                    for name in names
                }
            )
        )
    if isinstance(first, Itemized) and all(
        isinstance(field, Itemized) and field.key == first.key for field in fields
    ):
        attributes = _union([field.attributes for field in fields if isinstance(field, Itemized)])
        assert isinstance(attributes, Section)
        return Itemized(first.key, attributes, unnamed_defaults=first.unnamed_defaults)
    if all(field == first for field in fields):
        return first
    raise ValueError(f"one field cannot hold both {first} and {fields[1:]}")


def _submission(field: Field, *, excludable: bool = True) -> Schema:
    """A field as a submission writes it (an itemized field a list of instances, each of which
    may carry ``exclude`` when ``excludable``); asset specs and default instances too."""
    if isinstance(field, Section):
        return _object({name: _submission(child) for name, child in field.fields.items()})
    if isinstance(field, Itemized):
        return _instances(field, excludable=excludable)
    return _value(field)


def _instances(field: Itemized, *, excludable: bool, unnamed: bool = False) -> Schema:
    """A list of instances keyed by ``field.key``; with ``unnamed`` (a policy's default
    instances of a field whose key they may leave out), a list replaced whole, since a list
    keyed by an attribute needs it in every item."""
    attributes = {
        name: _string(min_length=1) if name == field.key else _submission(child)
        for name, child in field.attributes.fields.items()
    }
    if excludable:
        attributes[EXCLUDE] = {"type": "boolean"}
    if unnamed:
        return {**_array(_object(attributes)), "x-kubernetes-list-type": "atomic"}
    return {
        **_array(_object(attributes, required=[field.key])),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [field.key],
    }


def _defaults(field: Field) -> Schema:
    """A field's defaults as a policy writes them."""
    if isinstance(field, Section):
        return _object({name: _defaults(child) for name, child in field.fields.items()})
    if isinstance(field, Itemized):
        attributes = Section(
            MappingProxyType(
                {
                    name: child
                    for name, child in field.attributes.fields.items()
                    if name != field.key
                }
            )
        )
        return _object(
            _listed(
                ITEMIZED_SECTIONS,
                {
                    "instances": _instances(
                        field, excludable=False, unnamed=field.unnamed_defaults
                    ),
                    "attributes": _defaults(attributes),
                },
                "an itemized field's defaults",
            )
        )
    return _value(field)


def _rules(field: Field) -> Schema:
    """A field's rules as a policy writes them: per leaf, exactly the rules its type takes."""
    if isinstance(field, Section):
        return _object({name: _rules(child) for name, child in field.fields.items()})
    if isinstance(field, Itemized):
        instance_rules = _listed(
            INSTANCE_RULES,
            {"canAdd": {"type": "boolean"}, "locked": _array(_string())},
            "an itemized field's instance rules",
        )
        return _object(
            _listed(
                ITEMIZED_SECTIONS,
                {"instances": _object(instance_rules), "attributes": _rules(field.attributes)},
                "an itemized field's rules",
            )
        )
    return _object({rule: _rule(rule, field) for rule in RULES_BY_TYPE[field.value_type]})


def _rule(rule: str, leaf: Leaf) -> Schema:
    """The value one rule takes on ``leaf``, as the policy loader reads it."""
    if rule in ("required", "canEdit"):
        return {"type": "boolean"}
    if rule in ("min", "max"):
        return _value(leaf)
    if rule == "step":
        return {
            "type": "integer" if leaf.value_type is ValueType.INTEGER else "number",
            "minimum": 0,
            "exclusiveMinimum": True,
        }
    if rule == "options":
        # An array's options are the values each of its items may take.
        item = leaf.item if leaf.value_type is ValueType.ARRAY else None
        value = _item(item) if item is not None else _value(leaf)
        return {
            **_array(_object({"value": value, "displayed": _string()}, required=["value"])),
            "minItems": 1,
        }
    if rule == "defaultFrom":
        return _object(
            {
                "field": _string(min_length=1, description="A sibling field's dotted path."),
                "factor": {"type": "number"},
            },
            required=["field"],
        )
    raise ValueError(f"no schema for the rule {rule!r}: describe it in core/crds.py")


def _value(leaf: Leaf) -> Schema:
    """One value of ``leaf``, as the submission checker accepts it."""
    kind = leaf.value_type
    if kind is ValueType.BOOLEAN:
        return {"type": "boolean"}
    if kind is ValueType.STRING:
        return _enum(list(leaf.choices)) if leaf.choices else _string()
    if kind is ValueType.QUANTITY:
        return {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
        }
    if kind is ValueType.ARRAY:
        assert leaf.item is not None
        return _array(_item(leaf.item))
    schema: Schema = {"type": "integer" if kind is ValueType.INTEGER else "number"}
    for bound, limit in (("minimum", leaf.minimum), ("maximum", leaf.maximum)):
        if limit is not None:
            schema[bound] = plain_number(Decimal(limit))
    return schema


def _item(item: ValueType | Section) -> Schema:
    if isinstance(item, Section):
        return _submission(item)
    return _value(Leaf(item))


# -- schema nodes -----------------------------------------------------------------------------


def _object(
    properties: Mapping[str, Schema],
    *,
    required: Iterable[str] = (),
    description: str | None = None,
) -> Schema:
    schema: Schema = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = dict(properties)
    if required := list(required):
        schema["required"] = required
    return schema


def _listed(names: Iterable[str], schemas: Mapping[str, Schema], what: str) -> dict[str, Schema]:
    """``schemas`` in the order of ``names``, the keys a loader reads, which they must be
    exactly: the loaders are the authority, and a key described here alone (or there alone)
    is drift to fix, not to paper over."""
    names = list(names)
    if set(names) != set(schemas):
        raise ValueError(
            f"{what}: the loader reads {', '.join(names)}; core/crds.py describes "
            f"{', '.join(schemas)}"
        )
    return {name: schemas[name] for name in names}


def _properties(schema: Schema) -> dict[str, Schema]:
    properties = schema["properties"]
    assert isinstance(properties, dict)
    return properties


def _string(*, min_length: int = 0, description: str | None = None) -> Schema:
    schema: Schema = {"type": "string"}
    if description:
        schema["description"] = description
    if min_length:
        schema["minLength"] = min_length
    return schema


def _enum(choices: list[str], description: str | None = None) -> Schema:
    return {**_string(description=description), "enum": choices}


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def _described(schema: Schema, description: str) -> Schema:
    return {"description": description, **schema}


def _column(name: str, json_path: str) -> Schema:
    return {"name": name, "type": "string", "jsonPath": json_path}


def _metadata_name(crd: Mapping[str, object]) -> object:
    metadata = crd["metadata"]
    assert isinstance(metadata, Mapping)
    return metadata["name"]
