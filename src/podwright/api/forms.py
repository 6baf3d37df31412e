"""The submission form of a scope, for a web console: what to show, and the workload it submits.

A console (or any portal) builds its submission form from the effective policy of a scope,
and turns what the form submits into a :class:`~podwright.api.loading.Workload` to evaluate
and run (run from the repository's root)::

    import podwright

    policies = podwright.load_policies(
        "examples/policies/cluster-prod.yaml",
        "examples/policies/department-research.yaml",
        "examples/policies/project-vision.yaml",
    )
    scope = "cluster=default,department=research,project=vision"
    form = podwright.submission_form(policies, scope, "training", assets="examples/assets.yaml")
    gpus = next(field for field in form.fields if field.path == "compute.gpuDevicesRequest")
    print(gpus.default, gpus.maximum, gpus.rule_source)  # prints: 1 8 cluster default
    values = {"image": "busybox", "compute.gpuDevicesRequest": "2", "command": ""}
    workload = podwright.workload_from_form("training", values, name="trainer", namespace="vision")
    print(workload.spec["compute"])  # prints: {'gpuDevicesRequest': 2}
    evaluation = podwright.evaluate(workload, policies, assets="examples/assets.yaml")
    print(evaluation.accepted, evaluation.values["image"])  # prints: True busybox

The form's fields, how a form spells each value type, and which fields a console edits as
YAML instead are described in :mod:`podwright.core.submission_form`, which builds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

import yaml

from podwright.api.errors import InvalidInputError
from podwright.api.loading import (
    DATA_SOURCE,
    Policies,
    Workload,
    guard,
    load,
    load_assets,
    parse_scope,
    workload_type_of,
)
from podwright.api.pipeline import effective
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND
from podwright.core.k8s_names import dns1123_label_problem
from podwright.core.policies import Scope
from podwright.core.problems import ProblemsError
from podwright.core.submission_form import (
    FormField,
    FormInstance,
    FormPolicy,
    ImposedAsset,
    form_fields,
    form_instances,
    form_policies,
    imposed_assets,
)
from podwright.core.submission_form import workload_from_form as form_workload
from podwright.core.workloads import workload_name_problem

if TYPE_CHECKING:
    from podwright.api.loading import Source
    from podwright.core.assets import AssetCatalogue


@dataclasses.dataclass(frozen=True)
class SubmissionForm:
    """What a submission form of one scope and workload type shows (JSON-ready:
    ``json.dumps(dataclasses.asdict(form))`` serializes it)."""

    workload_type: str
    scope: str
    """The scope whose effective policy the form shows, as ``--scope`` spells it
    (``cluster=prod,department=research,project=vision``)."""
    policies: tuple[FormPolicy, ...]
    """The policies of the scope's branch, from the tenant's down."""
    fields: tuple[FormField, ...]
    """The form's inputs, in the field catalogue's order."""
    instances: tuple[FormInstance, ...]
    """The default instances of the itemized fields (edited as YAML), with those imposed
    assets become when the asset catalogue was given."""
    imposed_assets: tuple[ImposedAsset, ...]


def submission_form(
    policies: Policies,
    scope: Scope | str,
    workload_type: str,
    assets: Source | AssetCatalogue | None = None,
) -> SubmissionForm:
    """The submission form of ``scope`` for ``workload_type`` under ``policies``.

    ``assets``, the catalogue the imposed assets come from, adds the storage instances they
    become to :attr:`SubmissionForm.instances`. Raises :class:`InvalidInputError` for policies
    that conflict in the scope, and for imposed assets the catalogue lacks or cannot impose.
    """
    chosen = parse_scope(scope)
    assert chosen is not None
    combined = effective(policies, chosen, workload_type)
    catalogue = None if assets is None else load_assets(assets)
    return SubmissionForm(
        workload_type=combined.workload_type.value,
        scope=chosen.to_text(),
        policies=form_policies(combined),
        fields=form_fields(combined),
        instances=guard(lambda: form_instances(combined, catalogue), policies.documents),
        imposed_assets=imposed_assets(combined),
    )


EXTRA_FIELD = "extra"
"""The name :func:`workload_from_form` gives, in ``field_problems``, to its ``extra`` YAML."""


def workload_from_form(
    workload_type: str,
    values: Mapping[str, str],
    *,
    name: str,
    namespace: str,
    extra: str = "",
) -> Workload:
    """The workload a submission form gives: ``values`` are the form's strings by field path
    (:attr:`~podwright.core.submission_form.FormField.path`; empty: not given, so the policy's
    default applies), ``name`` and ``namespace`` its metadata, and ``extra`` the fields the
    form does not show (itemized ones: environment variables, storage, ports) as YAML of the
    spec, under the form's values (a field in both takes the form's value).

    Raises :class:`InvalidInputError` with every problem, each on a line that starts with its
    field's path; its ``field_problems`` pair each with that path (``metadata.name`` and
    ``metadata.namespace`` for those two, :data:`EXTRA_FIELD` for the YAML), for a console to
    show beside its input.
    """
    kind = workload_type_of(workload_type)
    problems: list[tuple[str, str]] = []
    spec: dict[str, object] = {}
    try:
        spec = form_workload(kind, values)
    except ProblemsError as error:
        problems.extend(
            (".".join(str(part) for part in problem.path), problem.message)
            for problem in error.problems
        )
    more = _extra_spec(extra, problems)
    if problem := workload_name_problem(name, kind, spec):
        problems.append(("metadata.name", f"{name!r} {problem}"))
    if problem := dns1123_label_problem(namespace):
        problems.append(("metadata.namespace", f"{namespace!r} {problem}"))
    if problems:
        raise InvalidInputError(
            [f"{path}: {message}" for path, message in problems], field_problems=problems
        )
    document = {
        "apiVersion": API_VERSION,
        "kind": WORKLOAD_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": _merged(more, spec),
    }
    if not more:
        return load(document)
    try:
        return load(document)
    except InvalidInputError as error:  # the form's own values were read already
        lines = [line.removeprefix(f"{DATA_SOURCE}: ") for line in str(error).splitlines()]
        raise InvalidInputError(
            [f"{EXTRA_FIELD}: {line}" for line in lines],
            field_problems=tuple((EXTRA_FIELD, line) for line in lines),
        ) from None


def _extra_spec(text: str, problems: list[tuple[str, str]]) -> dict[str, object]:
    """The spec fields of ``extra``'s YAML (a mapping); what is wrong with it, in
    ``problems``."""
    if not text.strip():
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        problems.append((EXTRA_FIELD, f"not YAML: {' '.join(str(error).split())}"))
        return {}
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append((EXTRA_FIELD, f"a mapping of spec fields, not {type(data).__name__}"))
        return {}
    if "type" in data:
        problems.append((EXTRA_FIELD, "type: the form chooses the type; leave it out here"))
        return {}
    return data


def _merged(under: Mapping[str, object], over: Mapping[str, object]) -> dict[str, object]:
    """``over``'s fields on ``under``'s, sections merged field by field."""
    merged = dict(under)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = _merged(below, value)
        else:
            merged[key] = value
    return merged
