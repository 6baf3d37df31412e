"""The submission form of the public API: built from a scope's effective policy, turned back into
a Workload, and the form's constraints are what evaluation judges."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import podwright
from podwright import api
from podwright.api import forms
from podwright.api.forms import SubmissionForm
from podwright.core.quantities import parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
POLICY_FILES = [
    EXAMPLES / "policies" / name
    for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
]
ASSETS = EXAMPLES / "assets.yaml"
VISION = "cluster=default,department=research,project=vision"
"""The scope of namespace vision (its Namespace object, among the policies, names the
department; the cluster is the one nothing names)."""
JUDGED_RULES = frozenset({"min", "max", "step", "options"})
"""The rules a form shows as input constraints."""


@cache
def policies() -> api.Policies:
    return api.load_policies(*POLICY_FILES)


@cache
def training_form() -> SubmissionForm:
    return api.submission_form(policies(), VISION, "training", assets=ASSETS)


def test_the_form_of_a_scope() -> None:
    form = training_form()
    assert (form.workload_type, form.scope) == ("training", VISION)
    assert [(policy.name, policy.scope) for policy in form.policies] == [
        ("prod-training", "cluster default"),
        ("research-training", "department research"),
        ("vision-training", "project vision"),
    ]
    gpus = next(field for field in form.fields if field.path == "compute.gpuDevicesRequest")
    assert (gpus.default, gpus.maximum, gpus.rule_source) == (1, 8, "cluster default")
    assert [asset.asset for asset in form.imposed_assets] == [
        "f12c965b-44e9-4ff6-8b43-01d8f9e630cc"
    ]
    assert ("storage.pvc", "team-datasets") in [(item.path, item.key) for item in form.instances]
    json.dumps(dataclasses.asdict(form))  # JSON-ready throughout


def test_without_the_catalogue_the_imposed_assets_are_listed_unresolved() -> None:
    form = api.submission_form(policies(), api.Scope(("default", "research", "vision")), "training")
    assert len(form.imposed_assets) == 1
    assert "storage.pvc" not in {item.path for item in form.instances}
    assert form.fields == training_form().fields


@pytest.mark.parametrize(
    ("scope", "workload_type", "assets", "message"),
    [
        pytest.param("project=vision", "training", None, "scope 'project=vision': a project scope must name its cluster", id="bad-scope"),
        pytest.param(VISION, "batch", None, "type 'batch': expected one of workspace, training, distributed, inference", id="bad-type"),
        pytest.param(VISION, "training", {"apiVersion": "podwright.dev/v1", "kind": "AssetCatalogue", "assets": []}, "asset 'f12c965b-44e9-4ff6-8b43-01d8f9e630cc' is not in the catalogue", id="asset-missing"),
    ],
)  # fmt: skip
def test_bad_input_to_the_form(
    scope: str, workload_type: str, assets: dict[str, object] | None, message: str
) -> None:
    with pytest.raises(api.InvalidInputError) as raised:
        api.submission_form(policies(), scope, workload_type, assets=assets)
    assert message in str(raised.value)
    assert raised.value.field_problems == ()


def test_a_workload_from_a_form() -> None:
    workload = api.workload_from_form(
        "training",
        {"image": "busybox", "compute.gpuDevicesRequest": "2", "nodePools": "a100", "tty": ""},
        name="trainer",
        namespace="vision",
    )
    assert isinstance(workload, api.Workload)
    assert workload.to_document() == {
        "apiVersion": "podwright.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "trainer", "namespace": "vision"},
        "spec": {
            "type": "training",
            "image": "busybox",
            "nodePools": ["a100"],
            "compute": {"gpuDevicesRequest": 2},
        },
    }
    evaluation = api.evaluate(workload, policies(), assets=ASSETS)
    assert (evaluation.accepted, str(evaluation.scope)) == (True, "project vision")
    assert evaluation.sources["compute.gpuDevicesRequest"] == "submission"
    assert evaluation.sources["priorityClass"] == "policy default (cluster default)"


def test_every_problem_of_a_form_is_named_at_its_field() -> None:
    with pytest.raises(api.InvalidInputError) as raised:
        api.workload_from_form(
            "training",
            {"compute.gpuDevicesRequest": "two", "priorityClass": "urgent", "imagge": "x"},
            name="9-lives",
            namespace="Vision",
        )
    error = raised.value
    assert [path for path, _message in error.field_problems] == [
        "priorityClass",
        "compute.gpuDevicesRequest",
        "imagge",
        "metadata.name",
        "metadata.namespace",
    ]
    assert error.problems == tuple(f"{path}: {message}" for path, message in error.field_problems)
    messages = dict(error.field_problems)
    assert messages["compute.gpuDevicesRequest"] == "expected a whole number, got 'two'"
    assert messages["imagge"] == "unknown field 'imagge' (did you mean 'image'?)"
    assert messages["metadata.name"] == "'9-lives' must start with a letter (it names Services)"
    assert messages["metadata.namespace"].startswith("'Vision' ")


def test_other_bad_input_has_no_field_problems() -> None:
    assert api.InvalidInputError("no document given").field_problems == ()
    with pytest.raises(api.InvalidInputError) as raised:
        api.workload_from_form("batch", {}, name="trainer", namespace="vision")
    assert raised.value.field_problems == ()


def test_the_functions_are_not_hidden_by_their_module() -> None:
    # Importing podwright.api.forms sets the attribute ``forms`` of podwright.api, never the
    # names of the functions it offers.
    assert callable(podwright.submission_form)
    assert callable(api.workload_from_form)
    assert podwright.workload_from_form is forms.workload_from_form


def test_the_docstring_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    lines = []
    for line in str(forms.__doc__).split("::\n", 1)[1].splitlines()[1:]:
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    code = "\n".join(lines)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, "podwright.api.forms", "exec"), {})
    expected = [line.split("# prints: ", 1)[1] for line in lines if "# prints: " in line]
    assert len(expected) == 3
    assert output.getvalue().splitlines() == expected


# -- the form's constraints are what evaluation judges -------------------------------------------


def _breaks(field: api.FormField, value: object) -> set[str]:
    """The rules ``value`` breaks by the form's constraints alone (an independent oracle)."""
    broken: set[str] = set()
    if field.value_type in ("integer", "number", "quantity"):
        amount = parse(value)
        low = None if field.minimum is None else parse(field.minimum)
        if low is not None and amount < low:
            broken.add("min")
        if field.maximum is not None and amount > parse(field.maximum):
            broken.add("max")
        if field.step is not None and (amount - (low or 0)) % Decimal(str(field.step)) != 0:
            broken.add("step")
    allowed = [option for option, _shown in field.options]
    items = value if isinstance(value, list) else [value]
    if allowed and any(item not in allowed for item in items):
        broken.add("options")
    return broken


def _candidates(field: api.FormField) -> st.SearchStrategy[object]:
    """Values on both sides of the field's constraints."""
    if field.value_type == "integer":
        return st.integers(0, 2 * int(field.maximum or field.minimum or 10))
    if field.value_type == "number":
        return st.integers(0, 80).map(lambda quarters: quarters / 4)
    if field.value_type == "quantity":
        return st.integers(0, 512).map("{}Gi".format)
    if field.value_type == "array":
        return st.lists(st.sampled_from(["a100", "h100", "v100"]), min_size=1, max_size=3)
    return st.sampled_from(field.choices)


@cache
def constrained() -> list[api.FormField]:
    """The fields of the training form with constraints of values."""
    return [
        field
        for field in training_form().fields
        if {field.minimum, field.maximum, field.step} != {None} or field.options
    ]


@given(st.data())
def test_evaluation_judges_the_constraints_the_form_shows(data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from(constrained()), unique_by=lambda f: f.path))
    values = {field.path: data.draw(_candidates(field), label=field.path) for field in chosen}
    form_values = {"image": "busybox"} | {
        path: "\n".join(value) if isinstance(value, list) else str(value)
        for path, value in values.items()
    }
    workload = api.workload_from_form("training", form_values, name="trainer", namespace="vision")
    evaluation = api.evaluate(workload, policies(), assets=ASSETS)
    expected = {"enforce": set(), "warn": set(), "audit": set()}
    for field in chosen:
        assert field.enforcement is not None
        expected[field.enforcement] |= {
            (field.path, rule) for rule in _breaks(field, values[field.path])
        }
    found = {
        mode: {(issue.field, issue.rule) for issue in issues if issue.rule in JUDGED_RULES}
        for mode, issues in (
            ("enforce", evaluation.violations),
            ("warn", evaluation.warnings),
            ("audit", evaluation.audited),
        )
    }
    assert found == expected
