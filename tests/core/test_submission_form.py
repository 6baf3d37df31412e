"""The submission form of a scope: its fields, default instances and imposed assets, on the
example policies (combined as ``podwright policy effective -n vision --type training`` combines
them); and the workload a form's strings give, with every problem at its field."""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright import api
from podwright.api.pipeline import namespace_scope
from podwright.core.effective_policy import EffectivePolicy
from podwright.core.policies import same_value
from podwright.core.problems import ProblemsError
from podwright.core.submission_form import (
    FormField,
    FormInstance,
    FormPolicy,
    ImposedAsset,
    form_fields,
    form_instances,
    form_policies,
    form_text,
    imposed_assets,
    workload_from_form,
)
from podwright.core.workload_fields import (
    SCHEMAS,
    Itemized,
    Leaf,
    Section,
    ValueType,
    WorkloadType,
    field_at,
)
from podwright.core.workloads import check_spec
from tests.policy_helpers import combine, make_policy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICY_FILES = [
    EXAMPLES / "policies" / name
    for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
]
ASSET = "f12c965b-44e9-4ff6-8b43-01d8f9e630cc"


@cache
def vision(workload_type: str = "training") -> EffectivePolicy:
    """The effective policy of namespace vision's project, as ``policy effective`` gives it."""
    policies = api.load_policies(*POLICY_FILES)
    scope, _notes = namespace_scope("vision", policies)
    return api.effective(policies, scope, workload_type)


def field(path: str, workload_type: str = "training") -> FormField:
    (found,) = [item for item in form_fields(vision(workload_type)) if item.path == path]
    return found


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param(
            "compute.gpuDevicesRequest",
            {
                "value_type": "integer",
                "label": "GPU devices request",
                "group": "compute",
                "default": 1,
                "default_text": "1",
                "default_source": "policy default (department research)",
                "maximum": 8,
                "minimum": None,
                "rule_source": "cluster default",
                "enforcement": "enforce",
                "locked": False,
                "required": False,
            },
            id="gpu-devices-max-8-by-the-cluster",
        ),
        pytest.param(
            "priorityClass",
            {
                "value_type": "string",
                "group": "",
                "default": "low",
                "default_source": "policy default (cluster default)",
                "options": (
                    ("low", "low"),
                    ("medium-low", "medium-low"),
                    ("medium", "medium"),
                ),
                "choices": (
                    "very-low",
                    "low",
                    "medium-low",
                    "medium",
                    "medium-high",
                    "high",
                    "very-high",
                ),
                "rule_source": "department research",
            },
            id="priority-class-options-of-the-department",
        ),
        pytest.param(
            "image",
            {
                "required": True,
                "default": "nvcr.io/nvidia/pytorch:24.08-py3",
                "default_source": "policy default (project vision)",
                "rule_source": "cluster default",
            },
            id="image-required-by-the-cluster-default-by-the-project",
        ),
        pytest.param(
            "compute.cpuCoreRequest",
            {
                "value_type": "number",
                "label": "CPU core request",
                "default": None,
                "default_text": "",
                "default_source": None,
                "default_from": "defaultFrom compute.cpuCoreLimit × 0.5 (cluster default)",
                "minimum": 0.5,
                "maximum": 16,
            },
            id="cpu-core-request-default-from-the-limit",
        ),
        pytest.param(
            "compute.cpuMemoryRequest",
            {"value_type": "quantity", "default": "16Gi", "maximum": "256Gi"},
            id="cpu-memory-request-quantities-as-written",
        ),
        pytest.param(
            "nodePools",
            {
                "value_type": "array",
                "default": ["a100", "h100"],
                "default_text": "a100\nh100",
                "options": (("a100", "a100"), ("h100", "h100")),
                "rule_source": "project vision",
                "enforcement": "warn",
            },
            id="node-pools-advised-by-the-project",
        ),
        pytest.param(
            "security.runAsUid",
            {"label": "Run as UID", "group": "security", "default": 1000, "minimum": 500},
            id="run-as-uid-min-500",
        ),
        pytest.param(
            "security.runAsNonRoot",
            {"value_type": "boolean", "default": True, "default_text": "true"},
            id="boolean-default",
        ),
        pytest.param(
            "imagePullPolicy",
            {"choices": ("Always", "IfNotPresent", "Never"), "options": (), "rule_source": None},
            id="enumerated-without-rules",
        ),
        pytest.param(
            "probes.readiness.handler.httpGet.port",
            {"label": "Port", "group": "probes.readiness.handler.httpGet", "default": None},
            id="nested-sections-group",
        ),
    ],
)
def test_a_field_of_the_training_form(path: str, expected: dict[str, object]) -> None:
    found = dataclasses.asdict(field(path))
    assert {name: found[name] for name in expected} == expected


def test_the_fields_are_the_scalar_leaves_in_catalogue_order() -> None:
    paths = [item.path for item in form_fields(vision())]
    assert paths[:4] == ["command", "args", "image", "imagePullPolicy"]
    assert paths.index("priorityClass") < paths.index("security.runAsUid")
    assert paths.index("security.runAsUid") < paths.index("compute.gpuDevicesRequest")
    assert "security.capabilities" in paths  # a list of strings
    for left_out in (
        "environmentVariables",  # itemized
        "compute.extendedResources",
        "storage.pvc.claimName",  # an attribute of an itemized field
        "exposedUrls",  # a list of objects
        "security.supplementalGroups",  # a list of numbers
        "servingPort.container",  # inference only
    ):
        assert left_out not in paths
    assert len(paths) == len(set(paths))
    for item in form_fields(vision()):
        leaf = field_at(SCHEMAS[WorkloadType.TRAINING], tuple(item.path.split(".")))
        assert isinstance(leaf, Leaf)
        assert item.value_type == leaf.value_type.value


def test_distributed_fields_lie_below_their_role() -> None:
    paths = [item.path for item in form_fields(vision("distributed"))]
    assert "master.compute.gpuDevicesRequest" in paths
    assert "worker.compute.gpuDevicesRequest" in paths
    assert "worker.numWorkers" in paths
    assert "master.numWorkers" not in paths
    assert not [path for path in paths if path.split(".")[0] not in ("master", "worker")]
    slots = field("worker.slotsPerWorker", "distributed")
    assert (slots.frameworks, slots.group) == (("MPI",), "worker")
    assert field("worker.image", "distributed").frameworks == ()


def test_a_locked_field_names_the_policy_that_locks_it() -> None:
    policy = make_policy(
        {
            "defaults": {"compute": {"gpuDevicesRequest": 2}},
            "rules": {
                "compute": {
                    "gpuDevicesRequest": {"canEdit": False},
                    "gpuPortionRequest": {"min": 0.25, "max": 1, "step": 0.25},
                },
                "priorityClass": {
                    "options": [{"value": "low", "displayed": "Low (batch)"}, {"value": "high"}]
                },
            },
        },
        name="gpu-lock",
        enforcement="audit",
    )
    by_path = {item.path: item for item in form_fields(combine([policy]))}
    locked = by_path["compute.gpuDevicesRequest"]
    assert (locked.locked, locked.locked_by, locked.default) == (
        True,
        "cluster prod (policy 'gpu-lock')",
        2,
    )
    portion = by_path["compute.gpuPortionRequest"]
    assert (portion.minimum, portion.maximum, portion.step, portion.locked) == (
        0.25,
        1,
        0.25,
        False,
    )
    assert portion.locked_by is None
    assert portion.enforcement == "audit"
    assert by_path["priorityClass"].options == (("low", "Low (batch)"), ("high", "high"))


def test_default_instances_with_their_sources_and_locks() -> None:
    catalogue = api.load_assets(EXAMPLES / "assets.yaml")
    instances = form_instances(vision(), catalogue)
    assert [(item.path, item.key) for item in instances] == [
        ("environmentVariables", "HF_HOME"),
        ("environmentVariables", "WANDB_MODE"),
        ("storage.pvc", "team-datasets"),
        ("compute.extendedResources", "default/cpu"),
        ("compute.extendedResources", "default/memory"),
    ]
    by_key = {item.key: item for item in instances}
    assert by_key["HF_HOME"] == FormInstance(
        path="environmentVariables",
        key="HF_HOME",
        attributes={"name": "HF_HOME", "value": "/data/hf-cache"},
        source="policy default (department research)",
        imposed=False,
        locked=True,
        locked_by="department research (policy 'research-training')",
    )
    assert (by_key["WANDB_MODE"].locked, by_key["WANDB_MODE"].locked_by) == (False, None)
    assert by_key["default/cpu"].locked
    assert not by_key["default/memory"].locked
    datasets = by_key["team-datasets"]
    assert (datasets.imposed, datasets.locked, datasets.source, datasets.locked_by) == (
        True,
        True,
        f"imposed asset {ASSET} (cluster default)",
        "cluster default (policy 'prod-training')",
    )
    assert datasets.attributes["claimName"] == "team-datasets"
    # Without the catalogue, the asset is listed, not resolved.
    assert "team-datasets" not in {item.key for item in form_instances(vision())}


def test_imposed_assets_and_policies_of_the_branch() -> None:
    assert imposed_assets(vision()) == (
        ImposedAsset(ASSET, f"imposed asset {ASSET} (cluster default)", "prod-training"),
    )
    assert form_policies(vision()) == (
        FormPolicy("prod-training", "cluster default", "enforce"),
        FormPolicy("research-training", "department research", "enforce"),
        FormPolicy("vision-training", "project vision", "warn"),
    )


def test_everything_is_json_ready() -> None:
    catalogue = api.load_assets(EXAMPLES / "assets.yaml")
    records: list[Any] = [
        *form_fields(vision()),
        *form_instances(vision(), catalogue),
        *imposed_assets(vision()),
        *form_policies(vision()),
    ]
    for record in records:
        json.dumps(dataclasses.asdict(record))  # raises for anything but JSON's types


# -- from the form's strings to a workload -----------------------------------------------------


@pytest.mark.parametrize(
    ("workload_type", "values", "expected"),
    [
        pytest.param("training", {"compute.gpuDevicesRequest": "4"}, {"compute": {"gpuDevicesRequest": 4}}, id="integer"),
        pytest.param("training", {"compute.cpuCoreRequest": "0.5"}, {"compute": {"cpuCoreRequest": 0.5}}, id="number"),
        pytest.param("training", {"compute.cpuCoreRequest": " 2 "}, {"compute": {"cpuCoreRequest": 2}}, id="whole-number"),
        pytest.param("training", {"compute.cpuCoreLimit": "1e-3"}, {"compute": {"cpuCoreLimit": 0.001}}, id="exponent"),
        pytest.param("training", {"compute.cpuMemoryRequest": "16Gi"}, {"compute": {"cpuMemoryRequest": "16Gi"}}, id="quantity"),
        pytest.param("training", {"compute.gpuMemoryRequest": "5"}, {"compute": {"gpuMemoryRequest": 5}}, id="whole-quantity"),
        pytest.param("training", {"createHomeDir": "true", "tty": "on", "stdin": "False"}, {"createHomeDir": True, "tty": True, "stdin": False}, id="booleans"),
        pytest.param("training", {"nodePools": "a100\n\n  h100 \n"}, {"nodePools": ["a100", "h100"]}, id="one-item-per-line"),
        pytest.param("training", {"security.capabilities": "NET_ADMIN,SYS_TIME"}, {"security": {"capabilities": ["NET_ADMIN,SYS_TIME"]}}, id="a-comma-is-part-of-an-item"),
        pytest.param("training", {"command": "  python train.py  "}, {"command": "python train.py"}, id="string-stripped"),
        pytest.param("training", {"image": "", "compute.gpuDevicesRequest": "  ", "nodePools": "\n"}, {}, id="empty-means-not-given"),
        pytest.param("training", {"priorityClass": "medium"}, {"priorityClass": "medium"}, id="enumerated"),
        pytest.param("distributed", {"master.image": "a", "worker.numWorkers": "3"}, {"master": {"image": "a"}, "worker": {"numWorkers": 3}}, id="distributed-roles"),
        pytest.param("inference", {"autoscaling.minReplicas": "1"}, {"autoscaling": {"minReplicas": 1}}, id="inference-section"),
    ],
)  # fmt: skip
def test_a_form_gives_the_workload_s_fields(
    workload_type: str, values: dict[str, str], expected: dict[str, object]
) -> None:
    assert workload_from_form(WorkloadType(workload_type), values) == {
        "type": workload_type,
        **expected,
    }


@pytest.mark.parametrize(
    ("path", "text", "message"),
    [
        pytest.param("compute.gpuDevicesRequest", "1.5", "expected a whole number, got '1.5'", id="integer-fraction"),
        pytest.param("compute.gpuDevicesRequest", "1_000", "expected a whole number, got '1_000'", id="integer-underscore"),
        pytest.param("compute.gpuDevicesRequest", "-1", "must be at least 0, got -1 (integer)", id="integer-below-what-the-field-holds"),
        pytest.param("compute.cpuCoreRequest", "half", "expected a number (such as 2, 0.5 or 1e-3), got 'half'", id="number-words"),
        pytest.param("compute.cpuCoreRequest", "nan", "expected a number (such as 2, 0.5 or 1e-3), got 'nan'", id="number-nan"),
        pytest.param("compute.cpuCoreRequest", "1e999", "expected a finite number, got '1e999'", id="number-infinite"),
        pytest.param("compute.gpuPortionLimit", "1.5", "must be at most 1, got 1.5 (number)", id="number-above-what-the-field-holds"),
        pytest.param("compute.cpuMemoryRequest", "lots", "'lots' is not a quantity", id="quantity"),
        pytest.param("createHomeDir", "yes", "expected true or false (a checked box sends 'on'), got 'yes'", id="boolean"),
        pytest.param("priorityClass", "urgent", "expected one of 'very-low', 'low', 'medium-low', 'medium', 'medium-high', 'high', 'very-high', got 'urgent' (string)", id="enumerated"),
        pytest.param("compute.gpuDevicesReqest", "1", "unknown field 'compute.gpuDevicesReqest' (did you mean 'compute.gpuDevicesRequest'?)", id="unknown-path"),
        pytest.param("completions", "1", "unknown field 'completions'", id="a-field-of-another-type"),
        pytest.param("storage.pvc", "x", "'storage.pvc' is not a form field: itemized fields and lists of objects or numbers are edited as YAML", id="itemized"),
        pytest.param("compute", "x", "'compute' is a section: give each of its fields by its own path (compute.<field>)", id="section"),
        pytest.param("security.supplementalGroups", "1", "'security.supplementalGroups' is not a form field", id="list-of-numbers"),
    ],
)  # fmt: skip
def test_a_bad_value_is_named_at_its_field(path: str, text: str, message: str) -> None:
    workload_type = WorkloadType.INFERENCE if path == "completions" else WorkloadType.TRAINING
    with pytest.raises(ProblemsError) as raised:
        workload_from_form(workload_type, {path: text})
    (problem,) = raised.value.problems
    assert problem.path == tuple(path.split("."))
    assert problem.message.startswith(message)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ProblemsError) as raised:
        workload_from_form(
            WorkloadType.TRAINING,
            {
                "nodeType": "a100",
                "compute.gpuDevicesRequest": "two",
                "tty": "maybe",
                "imagge": "busybox",
                "compute.cpuCoreRequest": "1",
            },
        )
    assert {".".join(map(str, problem.path)) for problem in raised.value.problems} == {
        "compute.gpuDevicesRequest",
        "tty",
        "imagge",
    }


# -- properties ----------------------------------------------------------------------------------

_ONE_LINE = st.text(min_size=1, max_size=12).filter(
    lambda text: text == text.strip() and len(text.splitlines()) == 1
)
_QUANTITY_SUFFIXES = ("", "m", "k", "M", "G", "Ki", "Mi", "Gi")


def _values_of(leaf: Leaf) -> st.SearchStrategy[object]:
    """Any value ``leaf`` can take that a form can spell (see the module's docstring)."""
    low = None if leaf.minimum is None else int(leaf.minimum)
    high = None if leaf.maximum is None else int(leaf.maximum)
    kind = leaf.value_type
    if kind is ValueType.BOOLEAN:
        return st.booleans()
    if kind is ValueType.STRING:
        return st.sampled_from(leaf.choices) if leaf.choices else _ONE_LINE
    if kind is ValueType.INTEGER:
        return st.integers(low, high if high is not None else 2**40)
    if kind is ValueType.NUMBER:
        return st.integers(low, high) | st.floats(low, high, allow_nan=False, allow_infinity=False)
    if kind is ValueType.QUANTITY:
        return st.integers(0, 10**6) | st.builds(
            "{}{}".format, st.integers(0, 10**6), st.sampled_from(_QUANTITY_SUFFIXES)
        )
    return st.lists(_ONE_LINE, min_size=1, max_size=4)


def _form_leaves(section: Section, path: tuple[str, ...] = ()) -> list[tuple[str, Leaf]]:
    """The form's fields, found independently of the module: scalar leaves and lists of
    strings, outside itemized fields."""
    found: list[tuple[str, Leaf]] = []
    for name, child in section.fields.items():
        if isinstance(child, Section):
            found.extend(_form_leaves(child, (*path, name)))
        elif isinstance(child, Itemized):
            continue
        elif child.value_type is not ValueType.ARRAY or child.item is ValueType.STRING:
            found.append((".".join((*path, name)), child))
    return found


@given(st.data())
def test_form_values_read_back_as_the_same_values(data: st.DataObject) -> None:
    workload_type = data.draw(st.sampled_from(list(WorkloadType)))
    leaves = dict(_form_leaves(SCHEMAS[workload_type]))
    assert [item.path for item in form_fields(combine([], workload_type=workload_type))] == list(
        leaves
    )
    chosen = data.draw(st.lists(st.sampled_from(sorted(leaves)), unique=True, max_size=8))
    values = {path: data.draw(_values_of(leaves[path]), label=path) for path in chosen}
    fields = workload_from_form(workload_type, {path: form_text(v) for path, v in values.items()})
    assert fields.pop("type") == workload_type.value
    check_spec(fields, workload_type, ())  # a valid submission as it is
    for path, value in values.items():
        found: Any = fields
        for name in path.split("."):
            found = found[name]
        assert same_value(leaves[path], found, value), (path, value, found)
        # A quantity written as a whole number ("5") reads back as an integer.
        assert type(found) is type(value) or leaves[path].value_type is ValueType.QUANTITY
