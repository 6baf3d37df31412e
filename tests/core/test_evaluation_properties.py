"""Properties of evaluation over generated policies and submissions.

- An accepted effective workload satisfies every rule, whatever produced each value (submission,
  policy or attribute default, default instance, ``defaultFrom``), and its limit is not below its
  request (checked by an independent oracle, which also predicts exactly which rules a rejected
  submission breaks, and which policies do not load).
- Evaluation is deterministic, and the order of the keys of the submission and the policies
  changes nothing it says, nor the order it says it in (the field catalogue's).
- A submission equal to the defaults is accepted whenever the defaults satisfy the rules.
- What an admission writes (the effective workload with the submission's exclusions) is a fixed
  point: evaluated again under the same policy it gives the same workload and the same issues,
  as the validating webhook and the compliance status evaluate what the mutating one wrote.
- An effective workload is valid as it is: checking it again changes nothing (rendering an
  evaluation's workload does not check it again).
- The default instances a prepared policy evaluated once (those a submission leaves untouched)
  give exactly what evaluating them with the submission gives, and every evaluation's output is
  its own.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from podwright.core.admission import violation_text
from podwright.core.assets import catalogue_from_data
from podwright.core.evaluation import Evaluation, PreparedPolicy, evaluate, prepare
from podwright.core.policies import Policy, PolicyError
from podwright.core.quantities import parse
from podwright.core.workload_fields import SCHEMAS, WorkloadType, catalogue_rank
from podwright.core.workloads import check_spec, submission_from_data
from tests.policy_helpers import combine, make_policy, run

POLICY = "policy default (cluster prod)"


@dataclasses.dataclass(frozen=True)
class FieldKind:
    path: tuple[str, ...]
    kind: str
    values: st.SearchStrategy[Any]


FIELDS = [
    FieldKind(("backoffLimit",), "integer", st.integers(0, 20)),
    FieldKind(("compute", "gpuDevicesRequest"), "integer", st.integers(0, 16)),
    FieldKind(("compute", "cpuCoreRequest"), "number", st.integers(0, 40).map(lambda n: n / 4)),
    FieldKind(
        ("compute", "cpuMemoryRequest"),
        "quantity",
        st.one_of(
            st.integers(1, 64).map(lambda n: f"{n * 512}Mi"),
            st.integers(1, 32).map(lambda n: f"{n}Gi"),
            st.integers(1, 64).map(lambda n: n * 2**29),
        ),
    ),
    FieldKind(("image",), "string", st.sampled_from(["ubuntu", "debian", "alpine", "fedora"])),
    FieldKind(("imagePullPolicy",), "string", st.sampled_from(["Always", "IfNotPresent", "Never"])),
    FieldKind(
        ("nodePools",),
        "array",
        st.lists(st.sampled_from(["a100", "h100", "v100", "l4"]), max_size=3),
    ),
    FieldKind(("createHomeDir",), "boolean", st.booleans()),
]


def amount(kind: str, value: Any) -> Decimal:
    if isinstance(value, Decimal):
        return value
    return parse(value) if kind == "quantity" else Decimal(repr(value))


def breaks(field: FieldKind, rules: dict[str, Any], value: Any) -> set[str]:
    """The oracle: which value rules ``value`` breaks."""
    broken: set[str] = set()
    if field.kind in {"integer", "number", "quantity"}:
        number = amount(field.kind, value)
        if "min" in rules and number < amount(field.kind, rules["min"]):
            broken.add("min")
        if "max" in rules and number > amount(field.kind, rules["max"]):
            broken.add("max")
        if "step" in rules:
            base = amount(field.kind, rules["min"]) if "min" in rules else Decimal(0)
            if (number - base) % Decimal(repr(rules["step"])) != 0:
                broken.add("step")
    if "options" in rules:
        allowed = [option["value"] for option in rules["options"]]
        items = value if field.kind == "array" else [value]
        if any(item not in allowed for item in items):
            broken.add("options")
    return broken


@st.composite
def field_rules(draw: st.DrawFn, field: FieldKind) -> dict[str, Any]:
    rules: dict[str, Any] = {}
    if draw(st.booleans()):
        rules["required"] = draw(st.booleans())
    if draw(st.booleans()):
        rules["canEdit"] = draw(st.booleans())
    if field.kind in {"integer", "number", "quantity"}:
        bounds = sorted(
            draw(st.lists(field.values, min_size=2, max_size=2)),
            key=lambda v: amount(field.kind, v),
        )
        if draw(st.booleans()):
            rules["min"] = bounds[0]
        if draw(st.booleans()):
            rules["max"] = bounds[1]
        if field.kind != "quantity" and draw(st.booleans()):
            rules["step"] = draw(
                st.sampled_from([1, 2, 3])
                if field.kind == "integer"
                else st.sampled_from([0.25, 0.5, 1])
            )
    if field.kind in {"string", "array"} and draw(st.booleans()):
        sample = (
            field.values
            if field.kind == "string"
            else field.values.filter(bool).map(lambda items: items[0])
        )
        rules["options"] = [
            {"value": value}
            for value in draw(st.lists(sample, min_size=1, max_size=3, unique=True))
        ]
    return rules


def nested(path: tuple[str, ...], value: Any, into: dict[str, Any]) -> None:
    node = into
    for name in path[:-1]:
        node = node.setdefault(name, {})
    node[path[-1]] = value


@st.composite
def scenarios(
    draw: st.DrawFn, defaults_fit: bool = False
) -> tuple[
    dict[str, Any], dict[str, Any], dict[str, Any], list[tuple[FieldKind, dict[str, Any], Any, Any]]
]:
    """A policy body, the submission, and for each field (rules, default, submitted)."""
    defaults: dict[str, Any] = {}
    rules: dict[str, Any] = {}
    spec: dict[str, Any] = {}
    table: list[tuple[FieldKind, dict[str, Any], Any, Any]] = []
    for field in draw(st.lists(st.sampled_from(FIELDS), min_size=1, max_size=5, unique=True)):
        field_rule = draw(field_rules(field))
        default = draw(st.none() | field.values)
        if default is not None and breaks(field, field_rule, default):
            if defaults_fit:
                field_rule = {
                    name: rule
                    for name, rule in field_rule.items()
                    if name in {"required", "canEdit"}
                }
            else:
                default = None  # a policy whose default breaks its own rule does not load
        submitted = default if defaults_fit else draw(st.none() | field.values)
        if field_rule:
            nested(field.path, field_rule, rules)
        if default is not None:
            nested(field.path, default, defaults)
        if submitted is not None:
            nested(field.path, submitted, spec)
        table.append((field, field_rule, default, submitted))
    return {"defaults": defaults, "rules": rules}, spec, {}, table


def expected_issues(
    table: list[tuple[FieldKind, dict[str, Any], Any, Any]],
) -> set[tuple[str, str]]:
    expected: set[tuple[str, str]] = set()
    for field, rules, default, submitted in table:
        dotted = ".".join(field.path)
        value = submitted if submitted is not None else default
        if value is None:
            if rules.get("required"):
                expected.add((dotted, "required"))
            continue
        if (
            submitted is not None
            and rules.get("canEdit") is False
            and (default is None or not same(field, default, submitted))
        ):
            expected.add((dotted, "canEdit"))
        expected.update((dotted, rule) for rule in breaks(field, rules, value))
    return expected


def same(field: FieldKind, left: Any, right: Any) -> bool:
    if field.kind in {"integer", "number", "quantity"}:
        return amount(field.kind, left) == amount(field.kind, right)
    return bool(left == right)


@given(scenarios())
def test_effective_workloads_satisfy_every_rule(scenario: Any) -> None:
    body, spec, _, table = scenario
    evaluation = run([make_policy(body)], spec)
    assert {(issue.field, issue.rule) for issue in evaluation.violations} == expected_issues(table)
    if evaluation.accepted:
        for field, rules, default, submitted in table:
            dotted = ".".join(field.path)
            value = evaluation.values.get(dotted)
            assert (value is None) == (default is None and submitted is None)
            if value is not None:
                assert not breaks(field, rules, value)
                assert evaluation.sources[dotted] == (
                    "submission" if submitted is not None else "policy default (cluster prod)"
                )
            elif rules.get("required"):
                raise AssertionError(f"{dotted} is required but absent")


@given(scenarios())
def test_evaluation_is_deterministic(scenario: Any) -> None:
    body, spec, _, _ = scenario
    policy = make_policy(body)
    first = run([policy], spec)
    second = run([make_policy(copy.deepcopy(body))], copy.deepcopy(spec))
    assert first == second
    assert list(first.sources) == list(second.sources)


@given(scenarios(defaults_fit=True))
def test_submitting_the_defaults_is_accepted_when_they_satisfy_the_rules(scenario: Any) -> None:
    body, spec, _, table = scenario
    try:
        policy = make_policy(body)
    except PolicyError as error:  # pragma: no cover - the generator builds loadable policies
        raise AssertionError(f"generated an invalid policy: {error}") from error
    evaluation = run([policy], spec)
    required_without_default = {
        ".".join(field.path)
        for field, rules, default, _ in table
        if rules.get("required") and default is None
    }
    assert {issue.field for issue in evaluation.violations} == set(required_without_default)
    if not required_without_default:
        assert evaluation.accepted
        assert evaluation.values == {".".join(f.path): d for f, _, d, _ in table if d is not None}


KEYS = ["A", "B", "C", "D", "E", "F"]


@st.composite
def itemized_scenarios(draw: st.DrawFn) -> tuple[Any, ...]:
    """Default labels, a locked subset, canAdd, and a submission that adds, changes or excludes."""
    default_keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=4))
    defaults = [{"name": key, "value": "d"} for key in default_keys]
    locked = draw(st.lists(st.sampled_from(default_keys), unique=True)) if default_keys else []
    can_add = draw(st.none() | st.booleans())
    actions = draw(
        st.dictionaries(
            st.sampled_from(KEYS), st.sampled_from(["exclude", "same", "change"]), max_size=5
        )
    )
    submitted = [
        {"name": key, "exclude": True}
        if action == "exclude"
        else {"name": key, "value": "d" if action == "same" else "s"}
        for key, action in actions.items()
    ]
    return default_keys, locked, can_add, actions, defaults, submitted


def _labels_policy(
    defaults: list[dict[str, str]], locked: list[str], can_add: bool | None
) -> Policy:
    """The policy of an :func:`itemized_scenarios` scenario: default labels, locked keys,
    canAdd."""
    instance_rules: dict[str, Any] = {"locked": locked}
    if can_add is not None:
        instance_rules["canAdd"] = can_add
    body = {
        "defaults": {"labels": {"instances": defaults}} if defaults else {},
        "rules": {"labels": {"instances": instance_rules}},
    }
    return make_policy(body)


@given(itemized_scenarios())
def test_itemized_instances_follow_locked_and_can_add(scenario: Any) -> None:
    default_keys, locked, can_add, actions, defaults, submitted = scenario
    evaluation = run([_labels_policy(defaults, locked, can_add)], {"labels": submitted})
    expected_issues: set[tuple[str, str]] = set()
    expected_keys = list(default_keys)
    for key, action in actions.items():
        if key in default_keys:
            if key in locked and action != "same":
                expected_issues.add((f"labels[{key}]", "locked"))
            elif action == "exclude":
                expected_keys.remove(key)
        elif action != "exclude":
            if can_add is False:
                expected_issues.add((f"labels[{key}]", "canAdd"))
            else:
                expected_keys.append(key)
    assert {(issue.field, issue.rule) for issue in evaluation.violations} == expected_issues
    if not expected_issues:
        labels = evaluation.workload.get("labels", [])
        assert isinstance(labels, list)
        assert [label["name"] for label in labels] == expected_keys
        for label in labels:
            changed = actions.get(label["name"]) == "change"
            assert label["value"] == ("s" if changed else "d")
            source = evaluation.sources[f"labels[{label['name']}].name"]
            assert source == (
                "policy default (cluster prod)" if label["name"] in default_keys else "submission"
            )


LIMIT = FieldKind(("compute", "cpuCoreLimit"), "number", st.integers(0, 40).map(lambda n: n / 4))
REQUEST = FieldKind(("compute", "cpuCoreRequest"), "number", LIMIT.values)


@st.composite
def default_from_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """A request ruled by min, max and step that defaults from the limit; each of the two may
    be submitted, defaulted by the policy, or neither."""
    rules = draw(field_rules(REQUEST))
    rules.pop("canEdit", None)
    rules["defaultFrom"] = {
        "field": "compute.cpuCoreLimit",
        "factor": draw(st.sampled_from([0.25, 0.5, 1, 2])),
    }
    return {
        "rules": rules,
        "limit_default": draw(st.none() | LIMIT.values),
        "request_default": draw(st.none() | REQUEST.values),
        "limit": draw(st.none() | LIMIT.values),
        "request": draw(st.none() | REQUEST.values),
    }


def computed(limit: Any, factor: Any) -> Decimal:
    return Decimal(repr(limit)) * Decimal(repr(factor))


def _default_from_policy_and_spec(
    scenario: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The policy body and the submission of a :func:`default_from_scenarios` scenario."""
    defaults = {
        name: value
        for name, value in (
            ("cpuCoreLimit", scenario["limit_default"]),
            ("cpuCoreRequest", scenario["request_default"]),
        )
        if value is not None
    }
    body = {
        "defaults": {"compute": defaults},
        "rules": {"compute": {"cpuCoreRequest": scenario["rules"]}},
    }
    compute = {
        name: value
        for name, value in (
            ("cpuCoreLimit", scenario["limit"]),
            ("cpuCoreRequest", scenario["request"]),
        )
        if value is not None
    }
    return body, {"compute": compute} if compute else {}


@given(default_from_scenarios())
def test_accepted_values_satisfy_every_rule_whatever_their_source(scenario: Any) -> None:
    """The oracle predicts each final value and its source (submission, policy default or
    defaultFrom), which rules it breaks, whether the limit ends below the request, and whether
    the policy loads at all (a default computed from its own defaults must fit its rules)."""
    rules, factor = scenario["rules"], scenario["rules"]["defaultFrom"]["factor"]
    body, spec = _default_from_policy_and_spec(scenario)
    # The policy's own defaults, and what they compute, must fit its rules, or it does not load.
    own = [scenario["request_default"]]
    if scenario["limit_default"] is not None:
        own.append(computed(scenario["limit_default"], factor))
    if any(value is not None and breaks(REQUEST, rules, value) for value in own):
        with pytest.raises(PolicyError):
            make_policy(body)
        return
    evaluation = run([make_policy(body)], spec)

    limit = scenario["limit"] if scenario["limit"] is not None else scenario["limit_default"]
    limit_source = "submission" if scenario["limit"] is not None else POLICY
    if scenario["request"] is not None:
        request, request_source = Decimal(repr(scenario["request"])), "submission"
    elif limit is not None:
        request = computed(limit, factor)
        request_source = f"defaultFrom compute.cpuCoreLimit × {factor} (cluster prod)"
    elif scenario["request_default"] is not None:
        request, request_source = Decimal(repr(scenario["request_default"])), POLICY
    else:
        request, request_source = None, ""
    expected: set[tuple[str, str]] = set()
    if request is None:
        if rules.get("required"):
            expected.add(("compute.cpuCoreRequest", "required"))
    else:
        expected.update(
            ("compute.cpuCoreRequest", rule) for rule in breaks(REQUEST, rules, request)
        )
        if limit is not None and Decimal(repr(limit)) < request:
            expected.add(("compute.cpuCoreLimit", "consistency"))
    assert {(issue.field, issue.rule) for issue in evaluation.violations} == expected
    for issue in evaluation.violations:
        if issue.field == "compute.cpuCoreRequest" and issue.rule != "required":
            assert f"({request_source})" in issue.details
    if evaluation.accepted:
        values, sources = evaluation.values, evaluation.sources
        if request is not None:
            assert Decimal(repr(values["compute.cpuCoreRequest"])) == request
            assert sources["compute.cpuCoreRequest"] == request_source
            assert not breaks(REQUEST, rules, values["compute.cpuCoreRequest"])
        if limit is not None:
            assert sources["compute.cpuCoreLimit"] == limit_source
            if request is not None:
                assert Decimal(repr(values["compute.cpuCoreLimit"])) >= request


PORT = FieldKind(("ports", "container"), "integer", st.integers(1, 12).map(lambda n: n * 1000))


@st.composite
def attribute_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """Ports whose container port comes from a default instance, the attribute default, or
    the submission, under min, max and step rules on the attribute."""
    rules = {
        name: rule
        for name, rule in draw(field_rules(PORT)).items()
        if name in {"min", "max", "step"}
    }
    return {
        "rules": rules,
        "attribute_default": draw(st.none() | PORT.values),
        "instance": draw(st.none() | PORT.values),
        "submitted": draw(st.lists(st.none() | PORT.values, max_size=3)),
        "changed": draw(st.none() | PORT.values),
    }


@given(attribute_scenarios())
def test_attribute_values_satisfy_their_rules_whatever_their_source(scenario: Any) -> None:
    rules = scenario["rules"]
    defaults: dict[str, Any] = {}
    if scenario["attribute_default"] is not None:
        defaults["attributes"] = {"container": scenario["attribute_default"]}
    if scenario["instance"] is not None:
        defaults["instances"] = [{"name": "d", "container": scenario["instance"]}]
    body = {
        "defaults": {"ports": defaults},
        "rules": {"ports": {"attributes": {"container": rules}}},
    }
    policy_defaults = [scenario["attribute_default"], scenario["instance"]]
    if any(value is not None and breaks(PORT, rules, value) for value in policy_defaults):
        with pytest.raises(PolicyError):
            make_policy(body)
        return
    submitted: list[dict[str, Any]] = [
        {"name": f"s{index}", **({} if port is None else {"container": port})}
        for index, port in enumerate(scenario["submitted"])
    ]
    if scenario["instance"] is not None and scenario["changed"] is not None:
        submitted.append({"name": "d", "container": scenario["changed"]})
    evaluation = run([make_policy(body)], {"ports": submitted} if submitted else {})
    expected_values: dict[str, tuple[Any, str]] = {}
    if scenario["instance"] is not None:
        changed = scenario["changed"]
        expected_values["ports[d].container"] = (
            (scenario["instance"], POLICY) if changed is None else (changed, "submission")
        )
    for index, port in enumerate(scenario["submitted"]):
        if port is not None:
            expected_values[f"ports[s{index}].container"] = (port, "submission")
        elif scenario["attribute_default"] is not None:
            expected_values[f"ports[s{index}].container"] = (
                scenario["attribute_default"],
                "attribute default (cluster prod)",
            )
    expected = {
        (where, rule)
        for where, (value, _) in expected_values.items()
        for rule in breaks(PORT, rules, value)
    }
    assert {(issue.field, issue.rule) for issue in evaluation.violations} == expected
    if evaluation.accepted:
        for where, (value, source) in expected_values.items():
            assert evaluation.values[where] == value
            assert evaluation.sources[where] == source
            assert not breaks(PORT, rules, evaluation.values[where])


ASSETS = catalogue_from_data(
    {
        "apiVersion": "podwright.dev/v1",
        "kind": "AssetCatalogue",
        "assets": [
            {
                "id": "a1",
                "name": "datasets",
                "kind": "pvc",
                "spec": {"claimName": "ds", "path": "/data"},
            }
        ],
    }
)
PORT_KEYS = ["p", "q", "r"]
VARIABLE_KEYS = ["A", "B", "C"]
VARIABLE_VALUES = st.one_of(
    st.just({}),
    st.sampled_from(["x", "y"]).map(lambda value: {"value": value}),
    st.just({"secret": {"name": "s", "key": "k"}}),
)


@st.composite
def instance_scenarios(draw: st.DrawFn) -> dict[str, Any]:
    """Default instances of ports and environment variables (a nested section), an imposed
    storage instance, rules on their attributes (a defaultFrom among them) and on the instances,
    in any enforcement mode, for training or below a role of distributed training; and a
    submission that leaves each instance untouched, submits it again as it is, changes it,
    excludes it, or adds one."""
    ports = [
        {
            "name": key,
            **draw(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "container": PORT.values,
                        "serviceType": st.sampled_from(["ClusterIP", "NodePort"]),
                    },
                )
            ),
        }
        for key in draw(st.lists(st.sampled_from(PORT_KEYS), unique=True, max_size=3))
    ]
    variables = [
        {"name": key, **draw(VARIABLE_VALUES)}
        for key in draw(st.lists(st.sampled_from(VARIABLE_KEYS), unique=True, max_size=3))
    ]
    port_attributes: dict[str, Any] = {
        "container": {
            name: rule
            for name, rule in draw(field_rules(PORT)).items()
            if name in {"min", "max", "required"}
        }
    }
    if draw(st.booleans()):
        port_attributes["external"] = {"defaultFrom": {"field": "container", "factor": 1}}
    port_instances: dict[str, Any] = {
        "locked": draw(st.lists(st.sampled_from([port["name"] for port in ports]), unique=True))
        if ports
        else []
    }
    if draw(st.booleans()):
        port_instances["canAdd"] = draw(st.booleans())
    rules: dict[str, Any] = {
        "ports": {"instances": port_instances, "attributes": port_attributes},
        "environmentVariables": {"attributes": {"value": {"required": draw(st.booleans())}}},
        "storage": {
            "pvc": {
                "attributes": {
                    "path": {"options": [{"value": draw(st.sampled_from(["/data", "/other"]))}]}
                }
            }
        },
    }
    defaults: dict[str, Any] = {}
    if ports:
        defaults["ports"] = {"instances": ports}
    if variables:
        defaults["environmentVariables"] = {"instances": variables}
    role = draw(st.sampled_from([(), ("worker",)]))

    def submitted(
        instances: list[dict[str, Any]], keys: list[str], change: dict[str, Any]
    ) -> list[dict[str, Any]]:
        by_key = {instance["name"]: instance for instance in instances}
        items = []
        for key in keys:
            action = draw(st.sampled_from(["untouched", "same", "change", "exclude"]))
            if action == "same" and key in by_key:
                items.append(copy.deepcopy(by_key[key]))
            elif action == "change":
                items.append({"name": key, **change})
            elif action == "exclude":
                items.append({"name": key, "exclude": True})
        return items

    spec = {
        name: items
        for name, items in (
            ("ports", submitted(ports, PORT_KEYS, {"container": draw(PORT.values)})),
            ("environmentVariables", submitted(variables, VARIABLE_KEYS, {"value": "z"})),
            ("storage", {"pvc": submitted([], ["datasets"], {"path": "/elsewhere"})}),
        )
        if items and items != {"pvc": []}
    }

    def below_role(body: dict[str, Any]) -> dict[str, Any]:
        return {role[0]: body} if role else body

    return {
        "body": {
            "defaults": below_role(defaults),
            "rules": below_role(rules),
            "imposedAssets": ["a1"] if draw(st.booleans()) else [],
        },
        "enforcement": draw(st.sampled_from(["enforce", "warn", "audit"])),
        "workload_type": "distributed" if role else "training",
        "spec": below_role(spec),
    }


def _outcome(evaluation: Evaluation) -> tuple[object, ...]:
    """Everything an evaluation says, in order."""
    return (
        json.dumps(evaluation.workload),
        list(evaluation.sources.items()),
        list(evaluation.values.items()),
        evaluation.violations,
        evaluation.warnings,
        evaluation.audited,
    )


def _clear_sections(value: object) -> None:
    """Empty every mapping of an effective workload, as a careless caller might."""
    if isinstance(value, list):
        for item in value:
            _clear_sections(item)
    elif isinstance(value, dict):
        for item in value.values():
            _clear_sections(item)
        value.clear()


def _prepared(scenario: dict[str, Any]) -> tuple[WorkloadType, PreparedPolicy]:
    """The workload type of an :func:`instance_scenarios` scenario and its policy, prepared
    (a scenario whose default instance breaks its own policy's rules is not one)."""
    try:
        policy = make_policy(
            scenario["body"],
            workload_type=scenario["workload_type"],
            enforcement=scenario["enforcement"],
        )
    except PolicyError:
        assume(False)
    kind = WorkloadType(scenario["workload_type"])
    return kind, prepare(combine([policy], workload_type=kind.value), ASSETS)


@given(instance_scenarios())
def test_untouched_default_instances_evaluated_once_give_what_evaluating_them_gives(
    scenario: dict[str, Any],
) -> None:
    kind, prepared = _prepared(scenario)
    assert prepared.untouched.keys() == prepared.instances.keys()
    every_instance_evaluated = dataclasses.replace(prepared, untouched={})
    submission = submission_from_data(scenario["spec"], kind)
    expected = _outcome(evaluate(every_instance_evaluated, submission, kind, ASSETS))
    first = evaluate(prepared, submission, kind, ASSETS)
    assert _outcome(first) == expected
    _clear_sections(first.workload)
    assert _outcome(evaluate(prepared, submission, kind, ASSETS)) == expected


@st.composite
def reordered(draw: st.DrawFn, value: Any) -> Any:
    """``value`` with the keys of every mapping in it in another order (as an API server that
    re-encodes an object sends them), its lists as they are."""
    if isinstance(value, dict):
        keys = draw(st.permutations(list(value)))
        return {key: draw(reordered(value[key])) for key in keys}
    if isinstance(value, list):
        return [draw(reordered(item)) for item in value]
    return value


def _said(evaluation: Evaluation) -> tuple[object, ...]:
    """What every message, listing and report of an evaluation shows, in order."""
    listed = [
        [(issue.field, issue.rule, issue.details, issue.enforcement) for issue in issues]
        for issues in (evaluation.violations, evaluation.warnings, evaluation.audited)
    ]
    return (*listed, "; ".join(violation_text(issue) for issue in evaluation.violations))


@given(st.data(), scenarios())
def test_the_order_of_the_keys_never_changes_the_issues_or_their_order(
    data: st.DataObject, scenario: Any
) -> None:
    body, spec, _, _ = scenario
    first = run([make_policy(body)], spec)
    again = run([make_policy(data.draw(reordered(body)))], data.draw(reordered(spec)))
    assert _said(again) == _said(first)
    root = SCHEMAS[WorkloadType.WORKSPACE]
    ranks = [catalogue_rank(root, issue.field) for issue in first.violations]
    assert ranks == sorted(ranks)


@given(st.data(), instance_scenarios())
def test_the_order_of_the_keys_never_changes_the_issues_of_instances_or_their_order(
    data: st.DataObject, scenario: dict[str, Any]
) -> None:
    kind = WorkloadType(scenario["workload_type"])

    def evaluated(body: dict[str, Any], spec: dict[str, Any]) -> Evaluation:
        policy = make_policy(body, workload_type=kind.value, enforcement=scenario["enforcement"])
        prepared = prepare(combine([policy], workload_type=kind.value), ASSETS)
        return evaluate(prepared, submission_from_data(spec, kind), kind, ASSETS)

    try:
        first = evaluated(scenario["body"], scenario["spec"])
    except PolicyError:
        assume(False)  # a default instance that breaks its own policy's rules
    again = evaluated(
        data.draw(reordered(scenario["body"])), data.draw(reordered(scenario["spec"]))
    )
    assert _said(again) == _said(first)


def _issues(evaluation: Evaluation) -> list[tuple[str, str, object]]:
    """The issues, by field, rule and mode (their texts may name a value's source, which a
    written workload no longer tells)."""
    return [
        (issue.field, issue.rule, issue.enforcement)
        for issue in evaluation.violations + evaluation.warnings + evaluation.audited
    ]


def _evaluated_again(first: Evaluation, evaluate_spec: Any) -> None:
    """``first``'s written workload evaluated again gives ``first`` again; its workload is
    valid as it is, to the type of each value."""
    rechecked = check_spec(first.workload, first.workload_type, (), running=True)
    assert repr(rechecked) == repr(first.workload)
    again = evaluate_spec(dict(first.written))
    assert again.accepted, again.violations
    assert again.workload == first.workload
    assert again.written == first.written
    assert again.values == first.values
    assert _issues(again) == _issues(first)


@given(scenarios())
def test_what_an_admission_writes_evaluates_to_itself(scenario: Any) -> None:
    body, spec, _, _ = scenario
    policy = make_policy(body)
    first = run([policy], spec)
    assume(first.accepted)
    assert first.written == first.workload  # nothing excluded
    _evaluated_again(first, lambda written: run([policy], written))


@given(itemized_scenarios())
def test_what_an_admission_writes_keeps_the_exclusions(scenario: Any) -> None:
    _default_keys, locked, can_add, _actions, defaults, submitted = scenario
    policy = _labels_policy(defaults, locked, can_add)
    first = run([policy], {"labels": submitted})
    assume(first.accepted)
    excluded = [item["name"] for item in submitted if item.get("exclude")]
    written = first.written.get("labels", [])
    assert isinstance(written, list)
    assert [item["name"] for item in written if item.get("exclude")] == excluded
    assert [item for item in written if not item.get("exclude")] == first.workload.get("labels", [])
    _evaluated_again(first, lambda again: run([policy], again))


@given(instance_scenarios())
def test_what_an_admission_writes_evaluates_to_itself_with_instances_in_any_mode(
    scenario: dict[str, Any],
) -> None:
    """Default and imposed instances, excluded, restated or changed, under rules in enforce,
    warn or audit mode: a default instance whose default breaks a rule, which the submission
    excluded, does not come back when what was written is judged again."""
    kind, prepared = _prepared(scenario)

    def evaluated(spec: dict[str, Any]) -> Evaluation:
        return evaluate(prepared, submission_from_data(spec, kind), kind, ASSETS)

    first = evaluated(scenario["spec"])
    assume(first.accepted)
    _evaluated_again(first, evaluated)


@given(default_from_scenarios())
def test_what_an_admission_writes_evaluates_to_itself_with_computed_defaults(
    scenario: dict[str, Any],
) -> None:
    body, spec = _default_from_policy_and_spec(scenario)
    try:
        policy = make_policy(body)
    except PolicyError:
        assume(False)  # a default, or what it computes, that breaks the policy's own rules
    first = run([policy], spec)
    assume(first.accepted)
    _evaluated_again(first, lambda written: run([policy], written))
