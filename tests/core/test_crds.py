"""podwright's CRDs: structural, valid CRD objects, and holding what the loaders read.

Objects are checked as an API server checks a custom resource under ``fieldValidation=Strict``
(kubectl's default): a field the schema does not name is an error, then the object is pruned,
defaulted and validated (the emulator's ``openapi_schema``, in the server's words), and the
schema's CEL rules (``x-kubernetes-validations``) are evaluated (cel-python) on what remains.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.assets import AssetKind, catalogue_from_data, spec_fields
from podwright.core.cluster_resources import (
    API_VERSION,
    ClusterScopes,
    catalogue_from_resources,
    policy_from_resource,
    submission_from_resource,
)
from podwright.core.crds import custom_resource_definitions
from podwright.core.policies import RULES_BY_TYPE, policy_from_data
from podwright.core.policy_documents import policy_from_document
from podwright.core.render.profile import profile_from_data
from podwright.core.workload_documents import read_workload_document
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
from podwright.core.workloads import submission_from_data
from tests.k8s_emulator.custom_resources import check_definition
from tests.k8s_emulator.openapi_schema import (
    apply_defaults,
    prune,
    structural_errors,
    validate,
)
from tests.manifests import schema_errors

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORKLOAD_EXAMPLES = sorted(EXAMPLES.glob("workload-*.yaml"))
POLICY_EXAMPLES = sorted((EXAMPLES / "policies").glob("*.yaml"))
Obj = dict[str, Any]


@functools.cache
def _definitions() -> dict[str, Obj]:
    return {crd["spec"]["names"]["kind"]: crd for crd in custom_resource_definitions()}


def definition(kind: str) -> Obj:
    return copy.deepcopy(_definitions()[kind])


def schema_of(kind: str) -> Obj:
    schema: Obj = _definitions()[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def resource(kind: str, name: str, spec: Mapping[str, Any]) -> Obj:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


# -- an object checked as the API server checks it --------------------------------------------


def unknown_fields(value: Any, schema: Obj, path: str = "") -> list[str]:
    """The fields pruning would drop: those ``fieldValidation=Strict`` refuses (``strict
    decoding error: unknown field "spec.x"``)."""
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [
            field
            for index, item in enumerate(value)
            for field in unknown_fields(item, schema["items"], f"{path}[{index}]")
        ]
    if not isinstance(value, dict) or schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    properties = schema.get("properties") or {}
    found = []
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if not path and key in ("apiVersion", "kind", "metadata"):
            continue  # the server's own (ObjectMeta is checked apart)
        if key in properties:
            found.extend(unknown_fields(item, properties[key], child))
        else:
            found.append(child)
    return found


_CEL = celpy.Environment()
"""Made at import: a celpy Environment raises the interpreter's recursion limit (to 2500) when
made, and Hypothesis fails a test during which the limit changed, so it must not be made first
inside one (which it was, depending on which test a worker ran first)."""


@functools.cache
def _cel_program(rule: str) -> celpy.Runner:
    return _CEL.program(_CEL.compile(rule))


def cel_failures(value: Any, schema: Obj, path: str = "") -> list[str]:
    """The messages of the CEL rules ``value`` breaks, as ``<path>: Invalid value: "object":
    <message>`` (apiextensions ``pkg/apiserver/schema/cel/validation.go``)."""
    failures = []
    for rule in schema.get("x-kubernetes-validations") or []:
        result = _cel_program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        if not isinstance(result, celpy.celtypes.BoolType) or not result:
            failures.append(f'{path}: Invalid value: "object": {rule["message"]}')
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            failures.extend(cel_failures(item, schema["items"], f"{path}[{index}]"))
    elif isinstance(value, dict):
        for key, item in value.items():
            child_schema = (schema.get("properties") or {}).get(key)
            if child_schema is not None and item is not None:
                child = f"{path}.{key}" if path else key
                failures.extend(cel_failures(item, child_schema, child))
    return failures


def server_errors(obj: Obj) -> list[str]:
    """Everything a server (fieldValidation=Strict) refuses in ``obj``, or [] if it takes it."""
    schema = schema_of(obj["kind"])
    unknown = [f"unknown field {field!r}" for field in unknown_fields(obj, schema)]
    shaped = apply_defaults(prune(obj, schema), schema)
    errors = [str(error) for error in validate(shaped, schema)]
    return unknown + errors + (cel_failures(shaped, schema) if not errors else [])


def stored(obj: Obj) -> Obj:
    """``obj`` as the server stores it (pruned and defaulted)."""
    schema = schema_of(obj["kind"])
    shaped: Obj = apply_defaults(prune(obj, schema), schema)
    return shaped


# -- the definitions themselves ---------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(_definitions()))
def test_every_definition_is_structural_and_a_valid_crd(kind: str) -> None:
    """Structural (the emulator's checker, the server's ``validateStructuralInvariants``), a
    valid ``apiextensions.k8s.io/v1`` object for Kubernetes 1.25 and the newest
    (kubernetes-validate, strict), and what the emulator's CRD validation takes."""
    crd = definition(kind)
    for index, version in enumerate(crd["spec"]["versions"]):
        schema = version["schema"]["openAPIV3Schema"]
        assert structural_errors(schema, f"spec.versions[{index}]") == []
    assert schema_errors(crd) == []
    check_definition(crd)


def test_the_definitions_are_the_same_on_every_call() -> None:
    assert custom_resource_definitions() == custom_resource_definitions()
    assert [crd["metadata"]["name"] for crd in custom_resource_definitions()] == [
        "assets.podwright.dev",
        "clusterassets.podwright.dev",
        "clusterprofiles.podwright.dev",
        "clusterworkloadpolicies.podwright.dev",
        "workloadpolicies.podwright.dev",
        "workloads.podwright.dev",
    ]


def test_names_scopes_columns_and_status() -> None:
    workload = definition("Workload")["spec"]
    assert workload["scope"] == "Namespaced"
    assert workload["names"]["shortNames"] == ["pwl"]
    assert workload["names"]["categories"] == ["podwright"]
    version = workload["versions"][0]
    assert (version["name"], version["subresources"]) == ("v1alpha1", {"status": {}})
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Type", ".spec.type"),
        ("Submitter", r".metadata.annotations.podwright\.dev/submitted-by"),
        ("Phase", ".status.phase"),
        ("Reason", ".status.reason"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status) == {
        "observedGeneration",
        "phase",
        "reason",
        "message",
        "conditions",
        "resources",
        "urls",
        "startTime",
        "completionTime",
        "compliance",
        "task",
    }
    assert definition("ClusterWorkloadPolicy")["spec"]["scope"] == "Cluster"
    assert definition("WorkloadPolicy")["spec"]["names"]["shortNames"] == ["pwp"]
    assert definition("ClusterWorkloadPolicy")["spec"]["names"]["shortNames"] == ["pcwp"]
    columns = definition("ClusterWorkloadPolicy")["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == ["Type", "Enforcement", "Scope", "Age"]
    assert "scope" not in schema_of("WorkloadPolicy")["properties"]["spec"]["properties"]


def test_a_status_as_the_operator_writes_it_is_valid() -> None:
    obj = resource("Workload", "w", {"type": "training", "image": "ubuntu"})
    obj["status"] = {
        "observedGeneration": 1,
        "phase": "Running",
        "reason": "PodRunning",
        "message": "",
        "conditions": [
            {
                "type": "PolicyCompliant",
                "status": "True",
                "reason": "Compliant",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
        "resources": [{"apiVersion": "batch/v1", "kind": "Job", "name": "w", "uid": "u-1"}],
        "urls": [{"name": "jupyter", "url": "https://w.example.com"}],
        "startTime": "2025-01-01T00:00:00Z",
        "compliance": {
            "enforcement": "audit",
            "findings": [
                {
                    "field": "spec.compute.gpuDevicesRequest",
                    "rule": "max",
                    "message": "16 is above the maximum 8",
                    "enforcement": "audit",
                    "policy": "WorkloadPolicy vision/training",
                    "scope": "project vision",
                }
            ],
        },
    }
    assert server_errors(obj) == []
    obj["status"]["conditions"][0]["status"] = "Maybe"
    assert server_errors(obj) == [
        'status.conditions[0].status: Unsupported value: "Maybe": supported values: '
        '"True", "False", "Unknown"'
    ]


# -- what the files hold, as resources --------------------------------------------------------


@pytest.mark.parametrize("path", WORKLOAD_EXAMPLES, ids=lambda path: path.name)
def test_every_example_workload_is_a_valid_workload(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    obj = resource("Workload", data["metadata"]["name"], data["spec"])
    assert server_errors(obj) == []
    assert stored(obj) == obj
    assert submission_from_resource(obj).spec == read_workload_document(data).submission.spec


@pytest.mark.parametrize("path", POLICY_EXAMPLES, ids=lambda path: path.name)
def test_every_example_policy_is_what_the_cluster_serves_as_written(path: Path) -> None:
    """Every document of every example policy file is an object of a kind the cluster serves,
    taken as written: a WorkloadPolicy or ClusterWorkloadPolicy by podwright's CRDs (the same
    as ``deploy/crds/``, which ``tests/cli/test_crds_command.py`` keeps equal) and stored
    unchanged, a Namespace by the API server's own schema. What the offline reader makes of it
    is the policy the cluster's reading (:class:`ClusterScopes`) makes."""
    documents = list(yaml.safe_load_all(path.read_text()))
    namespaces = {doc["metadata"]["name"]: doc for doc in documents if doc["kind"] == "Namespace"}
    resources = [doc for doc in documents if doc["kind"] != "Namespace"]
    assert resources, f"{path.name} holds no policy"
    for namespace in namespaces.values():
        assert schema_errors(namespace) == []
    scopes = ClusterScopes("default")
    for obj in resources:
        assert obj["apiVersion"] == API_VERSION
        assert server_errors(obj) == []
        assert stored(obj) == obj
        spec = obj["spec"]
        scope = (
            scopes.of_namespace(namespaces[obj["metadata"]["namespace"]])
            if obj["kind"] == "WorkloadPolicy"
            else scopes.of_cluster_policy(spec)
        )
        read = policy_from_document(obj, "example", scopes=scopes, namespaces=namespaces)
        assert read == policy_from_resource(obj, scope, "example")


def test_a_policy_is_enforced_and_of_the_cluster_unless_it_says() -> None:
    obj = resource("ClusterWorkloadPolicy", "p", {"workloadType": "training"})
    assert server_errors(obj) == []
    assert stored(obj)["spec"] == {
        "workloadType": "training",
        "scope": "cluster",
        "enforcement": "enforce",
    }


REFERENCE_DOCUMENTS = {
    "itemized": {
        "defaults": {
            "compute": {
                "extendedResources": {
                    "instances": [
                        {"resource": "default/cpu", "quantity": 5},
                        {"resource": "default/memory", "quantity": "4M"},
                    ],
                    "attributes": {"quantity": 3},
                }
            }
        },
        "rules": {
            "compute": {
                "extendedResources": {
                    "instances": {"locked": ["default/cpu"]},
                    "attributes": {"quantity": {"required": True}},
                }
            }
        },
    },
    "rules": {
        "rules": {
            "compute": {"gpuDevicesRequest": {"max": 8}},
            "security": {"runAsUid": {"min": 500}},
        }
    },
    "defaults": {
        "defaults": {
            "imagePullPolicy": "Always",
            "security": {"runAsNonRoot": True, "runAsUid": 500},
        }
    },
    "storage": {
        "defaults": {
            "storage": {
                "pvc": {
                    "instances": [
                        {
                            "claimName": "pvc-staging-researcher1-home",
                            "existingPvc": True,
                            "path": "/myhome",
                            "readOnly": False,
                            "claimInfo": {"accessModes": {"readWriteMany": True}},
                        }
                    ]
                },
                "nfs": {
                    "instances": [
                        {
                            "path": "nfs-path",
                            "readOnly": True,
                            "server": "nfs-server",
                            "mountPath": "nfs-mount",
                        }
                    ]
                },
                "s3": {
                    "instances": [
                        {
                            "bucket": "bucket-opt-1",
                            "path": "/s3/path",
                            "accessKeySecret": "s3-access-key",
                            "secretKeyOfAccessKeyId": "s3-secret-id",
                            "secretKeyOfSecretKey": "s3-secret-key",
                        }
                    ],
                    "attributes": {"url": "https://amazonaws.s3.com"},
                },
            }
        },
        "rules": {"storage": {"nfs": {"instances": {"canAdd": False}}}},
    },
    "imposed assets": {
        "defaults": None,
        "rules": None,
        "imposedAssets": ["f12c965b-44e9-4ff6-8b43-01d8f9e630cc"],
    },
    "rule types": {
        "rules": {
            "imagePullPolicy": {"canEdit": False},
            "image": {"required": True, "options": [{"value": "image-1"}, {"value": "image-2"}]},
            "compute": {
                "gpuDevicesRequest": {"min": 3},
                "gpuMemoryRequest": {"max": "2G"},
                "cpuCoreRequest": {
                    "min": 1,
                    "max": 7,
                    "step": 2,
                    "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": 0.5},
                },
            },
            "storage": {"hostPath": {"instances": {"canAdd": False, "locked": ["HOME", "USER"]}}},
        }
    },
}
"""Policy bodies from the Run:ai policy reference (``../shared/reference/workload-policy-yaml.md``),
as written there: its Rules, Defaults and Imposed Assets sections, its itemized example, its PVC,
NFS and S3 examples (default instances without names), and its rule type examples put together
(in podwright's spelling: a resource's schema is exact, ``policy apply`` writes what it read)."""


@pytest.mark.parametrize("body", REFERENCE_DOCUMENTS.values(), ids=list(REFERENCE_DOCUMENTS))
@pytest.mark.parametrize("kind", ["WorkloadPolicy", "ClusterWorkloadPolicy"])
def test_a_runai_policy_pasted_into_spec_is_accepted(kind: str, body: Obj) -> None:
    spec = {"workloadType": "workspace", **body}
    policy_from_data(
        {
            "apiVersion": "podwright.dev/v1",
            "kind": "WorkloadPolicy",
            "metadata": {"name": "p"},
            "spec": {"scope": "tenant", **spec},
        }
    )
    assert server_errors(resource(kind, "runai", spec)) == []


def test_the_asset_catalogue_entries_are_assets() -> None:
    catalogue = yaml.safe_load((EXAMPLES / "assets.yaml").read_text())
    objects = []
    for kind in ("Asset", "ClusterAsset"):
        for entry in catalogue["assets"]:
            spec = {key: value for key, value in entry.items() if key != "name"}
            obj = resource(kind, entry["name"], spec)
            assert server_errors(obj) == []
            objects.append(stored(obj))
    assert catalogue_from_resources(objects[:2]) == catalogue_from_data(catalogue)


def test_an_asset_spec_holds_only_its_kinds_fields() -> None:
    """A CEL rule per kind keeps the other kinds' attributes out (the union of every kind's
    attributes is the structural schema)."""
    pvc = resource(
        "Asset", "a", {"id": "x", "kind": "pvc", "spec": {"claimName": "c", "bucket": "b"}}
    )
    assert server_errors(pvc) == [
        'spec: Invalid value: "object": an asset of kind pvc takes only these spec fields: '
        + ", ".join(spec_fields(AssetKind.PVC).fields)
    ]
    s3 = resource("Asset", "a", {"id": "x", "kind": "s3", "spec": {"bucket": "b"}})
    assert server_errors(s3) == []
    assert server_errors(resource("Asset", "a", {"id": "x", "kind": "git"})) == []


def test_the_cluster_profile_is_a_cluster_profile() -> None:
    data = yaml.safe_load((EXAMPLES / "cluster-profile.yaml").read_text())
    obj = resource("ClusterProfile", data["metadata"]["name"], data["spec"])
    assert server_errors(obj) == []
    assert profile_from_data({**data, "spec": stored(obj)["spec"]}) == profile_from_data(data)


def test_a_level_the_cluster_does_not_offer_stays_null() -> None:
    """``priorityClasses.<level>: null`` means "not offered": ``nullable`` keeps it, where a
    server drops the null of a field that is not nullable."""
    obj = resource("ClusterProfile", "p", {"priorityClasses": {"very-low": None}})
    assert server_errors(obj) == []
    assert stored(obj)["spec"] == {"priorityClasses": {"very-low": None}}
    assert (
        profile_from_data(
            {
                "apiVersion": "podwright.dev/v1",
                "kind": "ClusterProfile",
                "spec": stored(obj)["spec"],
            }
        ).priority_classes["very-low"]
        is None
    )


@pytest.mark.parametrize(
    ("spec", "failures"),
    [
        pytest.param({"scope": "department", "department": "research"}, [], id="department named"),
        pytest.param({"scope": "cluster"}, [], id="cluster"),
        pytest.param({"scope": "tenant"}, [], id="tenant"),
        pytest.param({}, [], id="cluster by default"),
        pytest.param({"scope": "department"}, ["department"], id="department unnamed"),
        pytest.param(
            {"scope": "tenant", "department": "research"},
            ["department"],
            id="tenant with a department",
        ),
        pytest.param({"department": "research"}, ["department"], id="cluster with a department"),
    ],
)
def test_a_cluster_policy_names_a_department_exactly_when_its_scope_is_one(
    spec: Obj, failures: list[str]
) -> None:
    obj = resource("ClusterWorkloadPolicy", "p", {"workloadType": "training", **spec})
    expected = (
        [
            'spec: Invalid value: "object": a policy of scope department names its department, and only it does'
        ]
        if failures
        else []
    )
    assert server_errors(obj) == expected


def test_what_the_schemas_refuse_they_name() -> None:
    obj = resource(
        "Workload",
        "w",
        {
            "type": "batch",
            "compute": {"gpuDevicesRequest": "two", "cpuMemoryRequest": "2 GB"},
            "imagePullPolicy": "Sometimes",
        },
    )
    assert sorted(server_errors(obj)) == [
        'spec.compute.cpuMemoryRequest: Invalid value: "2 GB": spec.compute.cpuMemoryRequest in body should match '
        f"'{schema_of('Workload')['properties']['spec']['properties']['compute']['properties']['cpuMemoryRequest']['pattern']}'",
        'spec.compute.gpuDevicesRequest: Invalid value: "string": spec.compute.gpuDevicesRequest in body must be of type integer: "string"',
        'spec.imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"',
        'spec.type: Unsupported value: "batch": supported values: "workspace", "training", "distributed", "inference"',
    ]


@pytest.mark.parametrize(
    ("rules", "unknown"),
    [
        pytest.param({"image": {"requird": True}}, "spec.rules.image.requird", id="misspelt rule"),
        pytest.param(
            {"createHomeDir": {"min": 1}},
            "spec.rules.createHomeDir.min",
            id="rule its type cannot carry",
        ),
        pytest.param(
            {"compute": {"gpuDevices": {"max": 1}}},
            "spec.rules.compute.gpuDevices",
            id="unknown field",
        ),
        pytest.param(
            {"storage": {"pvc": {"instances": {"canEdit": False}}}},
            "spec.rules.storage.pvc.instances.canEdit",
            id="instance rule",
        ),
    ],
)
def test_a_rule_the_loader_refuses_as_unknown_is_an_unknown_field(rules: Obj, unknown: str) -> None:
    obj = resource("WorkloadPolicy", "p", {"workloadType": "workspace", "rules": rules})
    assert server_errors(obj) == [f"unknown field {unknown!r}"]


def test_each_leaf_takes_exactly_the_rules_of_its_type() -> None:
    rules = schema_of("WorkloadPolicy")["properties"]["spec"]["properties"]["rules"]["properties"]
    assert list(rules["image"]["properties"]) == list(RULES_BY_TYPE[ValueType.STRING])
    assert list(rules["createHomeDir"]["properties"]) == list(RULES_BY_TYPE[ValueType.BOOLEAN])
    compute = rules["compute"]["properties"]
    assert list(compute["cpuMemoryRequest"]["properties"]) == list(
        RULES_BY_TYPE[ValueType.QUANTITY]
    )
    assert list(compute["extendedResources"]["properties"]) == ["instances", "attributes"]
    assert set(rules["master"]["properties"]) == set(rules["worker"]["properties"]) - {
        "numWorkers",
        "distributedFramework",
        "minReplicas",
        "maxReplicas",
        "slotsPerWorker",
        "sshAuthMountPath",
        "mpiLauncherCreationPolicy",
        "cleanPodPolicy",
    }


# -- properties: what the loaders accept, the schemas accept -----------------------------------

_QUANTITIES = st.one_of(
    st.integers(0, 2**40),
    st.builds(
        lambda number, suffix: f"{number}{suffix}",
        st.decimals(0, 10**6, places=3, allow_nan=False, allow_infinity=False),
        st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "E-2"]),
    ),
)
"""Quantities a resource can hold: integers and strings (not floats: see core/crds.py)."""


def _number(leaf: Leaf, *, integer: bool) -> st.SearchStrategy[Any]:
    low = int(leaf.minimum) if leaf.minimum is not None else -(10**6)
    high = int(leaf.maximum) if leaf.maximum is not None else 10**6
    if integer:
        return st.integers(low, high)
    return st.one_of(st.integers(low, high), st.floats(float(low), float(high), allow_nan=False))


def _leaf_values(leaf: Leaf) -> st.SearchStrategy[Any]:
    kind = leaf.value_type
    if kind is ValueType.BOOLEAN:
        return st.booleans()
    if kind is ValueType.STRING:
        return st.sampled_from(leaf.choices) if leaf.choices else st.text(max_size=8)
    if kind is ValueType.QUANTITY:
        return _QUANTITIES
    if kind in (ValueType.INTEGER, ValueType.NUMBER):
        return _number(leaf, integer=kind is ValueType.INTEGER)
    assert leaf.item is not None
    item = leaf.item
    items = _field_values(item) if isinstance(item, Section) else _leaf_values(Leaf(item))
    return st.lists(items, max_size=3)


def _field_values(field: Field, *, excludable: bool = True) -> st.SearchStrategy[Any]:
    """Values of ``field`` as a submission writes them, drawn from the catalogue."""
    if isinstance(field, Section):
        return st.fixed_dictionaries(
            {},
            optional={
                name: st.one_of(st.none(), _field_values(child))
                if isinstance(child, Leaf)
                else _field_values(child)
                for name, child in field.fields.items()
            },
        )
    if isinstance(field, Itemized):
        return _instances(field, excludable=excludable)
    return _leaf_values(field)


def _instances(field: Itemized, *, excludable: bool) -> st.SearchStrategy[Any]:
    attributes = Section(
        {name: child for name, child in field.attributes.fields.items() if name != field.key}
    )
    extra = {EXCLUDE: st.booleans()} if excludable else {}

    def instance(key: str) -> st.SearchStrategy[Obj]:
        return st.builds(
            lambda values, flags: {field.key: key, **values, **flags},
            _field_values(attributes),
            st.fixed_dictionaries({}, optional=extra),
        )

    keys = st.lists(st.text("abcdef/-", min_size=1, max_size=4), unique=True, max_size=3)
    return keys.flatmap(lambda names: st.tuples(*(instance(key) for key in names)).map(list))


@given(
    st.sampled_from(list(WorkloadType)).flatmap(
        lambda kind: st.tuples(st.just(kind), _field_values(SCHEMAS[kind]))
    )
)
def test_any_submission_the_loader_accepts_is_a_valid_workload(
    case: tuple[WorkloadType, Obj],
) -> None:
    workload_type, spec = case
    submission_from_data({"type": workload_type.value, "spec": spec})  # the loader accepts it
    obj = resource("Workload", "w", {"type": workload_type.value, **spec})
    assert server_errors(obj) == []


def _with_unknown_key(value: Any, data: st.DataObject, path: str) -> str:
    """Put a key no schema names into one of the mappings of ``value``; its path."""
    candidates: list[tuple[Any, str]] = []

    def walk(node: Any, at: str) -> None:
        if isinstance(node, dict):
            candidates.append((node, at))
            for key, item in node.items():
                walk(item, f"{at}.{key}")
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, f"{at}[{index}]")

    walk(value, path)
    node, at = data.draw(st.sampled_from(candidates))
    node["zzUnknown"] = 1
    return f"{at}.zzUnknown"


@given(
    st.sampled_from(list(WorkloadType)).flatmap(
        lambda kind: st.tuples(st.just(kind), _field_values(SCHEMAS[kind]))
    ),
    st.data(),
)
def test_an_unknown_key_anywhere_in_a_workload_is_refused(
    case: tuple[WorkloadType, Obj], data: st.DataObject
) -> None:
    workload_type, spec = case
    obj = resource("Workload", "w", {"type": workload_type.value, **spec})
    unknown = _with_unknown_key(obj["spec"], data, "spec")
    assert server_errors(obj)[:1] == [f"unknown field {unknown!r}"]


def _rule_values(leaf: Leaf) -> st.SearchStrategy[Obj]:
    """Rules ``leaf`` can carry, as the loader accepts them on their own (no min above max)."""
    choices: dict[str, st.SearchStrategy[Any]] = {
        "required": st.booleans(),
        "canEdit": st.booleans(),
    }
    allowed = RULES_BY_TYPE[leaf.value_type]
    if "min" in allowed:
        choices["min"] = _leaf_values(leaf)
    if "step" in allowed:
        choices["step"] = (
            st.integers(1, 5)
            if leaf.value_type is ValueType.INTEGER
            else st.sampled_from([0.25, 1, 2.5])
        )
    if "options" in allowed:
        item = leaf.item if leaf.value_type is ValueType.ARRAY else None
        values = (
            (_field_values(item) if isinstance(item, Section) else _leaf_values(Leaf(item)))
            if item is not None
            else _leaf_values(leaf)
        )
        choices["options"] = st.lists(
            st.builds(
                lambda value, shown: {"value": value} | shown,
                values,
                st.fixed_dictionaries({}, optional={"displayed": st.text(max_size=5)}),
            ),
            min_size=1,
            max_size=2,
        )
    return st.fixed_dictionaries({}, optional=choices)


def _rules(field: Field) -> st.SearchStrategy[Any]:
    if isinstance(field, Section):
        return st.fixed_dictionaries(
            {}, optional={name: _rules(child) for name, child in field.fields.items()}
        )
    if isinstance(field, Itemized):
        instance_rules = st.fixed_dictionaries(
            {},
            optional={
                "canAdd": st.booleans(),
                "locked": st.lists(st.text("ab", min_size=1, max_size=2), max_size=2),
            },
        )
        return st.fixed_dictionaries(
            {}, optional={"instances": instance_rules, "attributes": _rules(field.attributes)}
        )
    return _rule_values(field)


def _defaults(field: Field) -> st.SearchStrategy[Any]:
    if isinstance(field, Section):
        return st.fixed_dictionaries(
            {}, optional={name: _defaults(child) for name, child in field.fields.items()}
        )
    if isinstance(field, Itemized):
        attributes = Section(
            {name: child for name, child in field.attributes.fields.items() if name != field.key}
        )
        return st.fixed_dictionaries(
            {},
            optional={
                "instances": _instances(field, excludable=False),
                "attributes": _defaults(attributes),
            },
        )
    return _leaf_values(field)


@given(
    st.sampled_from(list(WorkloadType)).flatmap(
        lambda kind: st.tuples(st.just(kind), _defaults(SCHEMAS[kind]), _rules(SCHEMAS[kind]))
    ),
    st.sampled_from(["WorkloadPolicy", "ClusterWorkloadPolicy"]),
)
def test_any_policy_the_loader_accepts_is_a_valid_policy_resource(
    case: tuple[WorkloadType, Obj, Obj], kind: str
) -> None:
    """Defaults and rules drawn from the catalogue and the rule table; the loader refuses some
    (a default its own rules break): the schema must take every one it accepts."""
    workload_type, defaults, rules = case
    spec = {"workloadType": workload_type.value, "defaults": defaults, "rules": rules}
    try:
        policy_from_data(
            {
                "apiVersion": "podwright.dev/v1",
                "kind": "WorkloadPolicy",
                "metadata": {"name": "p"},
                "spec": {"scope": "tenant", **spec},
            }
        )
    except ValueError:
        return
    assert server_errors(resource(kind, "p", spec)) == []
