"""The submission form of a scope: the fields a web console shows, and the workload it submits.

A console builds its submission form from the effective policy of the submitter's scope:
defaults pre-filled and marked with where they come from, fields a policy locks
(``canEdit: false``) disabled with the owning policy named, ``min``/``max``/``step``/``options``
as input constraints, required fields marked, the default instances of itemized fields and the
imposed assets listed. This module describes that form from an
:class:`~podwright.core.effective_policy.EffectivePolicy`, so a console never reads policies
itself and shows what evaluation will do, in evaluation's own words (the sources are the texts
an evaluation reports); and it turns the strings a form submits back into a workload's fields.

**Which fields.** Every leaf of the workload type's catalogue that holds a scalar (boolean,
string, integer, number, quantity) or a list of strings, in the catalogue's order, at its dotted
path (for distributed training below its role: ``master.compute.gpuDevicesRequest``). Itemized
fields (``storage.pvc``, ``environmentVariables``, ``compute.extendedResources``), lists of
objects (``exposedUrls``) and of numbers (``security.supplementalGroups``) are not form fields:
a console edits them as YAML; their default instances are listed (:func:`form_instances`).

**How a form spells values.** Each value is one string (:func:`form_text` writes a default
so; :func:`workload_from_form` reads it back), with surrounding whitespace dropped:

- a boolean is ``true`` or ``false`` (any letter case), or ``on``, what a checked box sends;
- an integer is a whole number, a number a decimal one (``0.5``, ``1e-3``);
- a quantity is kept as written (``16Gi``, ``500m``), a whole number as an integer;
- a list of strings has one item per line (blank lines are skipped), since an item may hold a
  comma;
- an empty string is no value: the field is left out, so the policy's default applies (so a
  form cannot submit an empty list or an empty string).

Everything here is JSON-ready: ``json.dumps(dataclasses.asdict(x))`` serializes any record.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping

from podwright.core.assets import AssetCatalogue
from podwright.core.effective_policy import EffectivePolicy
from podwright.core.evaluation import prepare
from podwright.core.policies import Option, Policy, SchemaPath, plain_number
from podwright.core.problems import FieldProblem, ProblemsError, unknown_field
from podwright.core.workload_fields import (
    DISTRIBUTED_FRAMEWORKS,
    SCHEMAS,
    Leaf,
    Section,
    ValueType,
    WorkloadType,
    catalogue_rank,
    field_at,
)
from podwright.core.workloads import InvalidValue, check_leaf

_SCALAR_TYPES = frozenset(
    {
        ValueType.BOOLEAN,
        ValueType.STRING,
        ValueType.INTEGER,
        ValueType.NUMBER,
        ValueType.QUANTITY,
    }
)

_ACRONYMS = frozenset({"cpu", "gpu", "uid", "gid", "ipc", "ssh", "mpi", "tty", "shm", "http"})
"""Words a label writes in capitals: ``gpuDevicesRequest`` is "GPU devices request"."""

_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
_DECIMAL_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TRUE = frozenset({"true", "on"})
_FALSE = frozenset({"false"})


@dataclasses.dataclass(frozen=True)
class FormField:
    """One input of the submission form, with what the effective policy says of it."""

    path: str
    """The field's dotted path, as a workload writes it: ``compute.gpuDevicesRequest``,
    ``master.image``; the key :func:`workload_from_form` reads its value under."""
    value_type: str
    """``boolean``, ``string``, ``integer``, ``number``, ``quantity`` or ``array`` (of
    strings)."""
    label: str
    """The field's name in words: ``GPU devices request``."""
    group: str
    """The section the field lies in, dotted (``compute``, ``master.security``,
    ``probes.readiness.handler.httpGet``); ``""`` at the top."""
    default: object
    """The policy's default (None: none), as the policy wrote it."""
    default_text: str
    """``default`` as the form spells it (:func:`form_text`), to pre-fill the input with;
    ``""`` without one."""
    default_source: str | None
    """Where the default comes from, as evaluation reports it: ``policy default (cluster
    prod)``."""
    default_from: str | None
    """The ``defaultFrom`` that computes the default from a sibling field whenever that one
    has a value (and then wins over ``default``), as evaluation reports it:
    ``defaultFrom compute.cpuCoreLimit × 0.5 (cluster prod)``."""
    required: bool
    """Whether the workload needs a value (a default satisfies it)."""
    locked: bool
    """Whether the field cannot be edited (``canEdit: false``): only the default is allowed."""
    locked_by: str | None
    """The scope and policy that lock it: ``cluster prod (policy 'prod-training')``."""
    minimum: object
    """The policy's ``min`` (an int or float; a quantity's as written, ``1Gi``), or None."""
    maximum: object
    """The policy's ``max``, or None."""
    step: int | float | None
    """The policy's ``step``, counted from ``minimum`` (0 without one), or None."""
    options: tuple[tuple[object, str], ...]
    """The values the policy allows (for a list: each item), each with the text to show;
    empty when it sets no ``options``."""
    choices: tuple[str, ...]
    """The values an enumerated field can take at all (the catalogue's); empty for others."""
    frameworks: tuple[str, ...]
    """The distributed frameworks the field is for (``slotsPerWorker``: MPI); empty: any."""
    rule_source: str | None
    """The scope of the policy that owns the field's rules (``cluster prod``), or None."""
    enforcement: str | None
    """What breaking those rules does: ``enforce`` (refused), ``warn`` or ``audit``
    (accepted, with a warning or a record); None without rules."""


@dataclasses.dataclass(frozen=True)
class FormInstance:
    """A default instance of an itemized field: a policy's, or an imposed asset's."""

    path: str
    """The itemized field: ``environmentVariables``, ``compute.extendedResources``."""
    key: str
    """The instance's key (``HF_HOME``); ``unnamed-…`` for one its policy left unnamed."""
    attributes: dict[str, object]
    source: str
    """As evaluation reports it: ``policy default (department research)``, ``imposed asset
    f12c… (cluster prod)``."""
    imposed: bool
    """Whether an imposed asset gives it."""
    locked: bool
    """Whether a submission can neither exclude nor change it: its key is ``locked``, or an
    imposed asset or an unnamed default gives it."""
    locked_by: str | None
    """The scope and policy that protect it: ``department research (policy
    'research-training')``."""


@dataclasses.dataclass(frozen=True)
class ImposedAsset:
    """An asset the policies impose on every workload of the scope."""

    asset: str
    """The asset's id in the catalogue."""
    source: str
    """As evaluation reports it: ``imposed asset f12c… (cluster prod)``."""
    policy: str
    """The name of the policy that imposes it."""


@dataclasses.dataclass(frozen=True)
class FormPolicy:
    """A policy of the scope's branch."""

    name: str
    scope: str
    """``tenant``, ``cluster prod``, ``department research``, ``project vision``."""
    enforcement: str


def form_fields(policy: EffectivePolicy) -> tuple[FormField, ...]:
    """The form's fields for ``policy``'s workload type, in the catalogue's order."""
    fields: list[FormField] = []
    for schema_path, leaf in _FORM_LEAVES[policy.workload_type]:
        parent = schema_path[:-1]
        section = field_at(SCHEMAS[policy.workload_type], parent)
        assert isinstance(section, Section)
        _, _, entry, ruling, _ = policy.slots_of(parent, section)[schema_path[-1]]
        owner = ruling.owner if ruling is not None else None
        rules = ruling.rules if ruling is not None else None
        default, source = entry if entry is not None else (None, None)
        locked = rules is not None and rules.can_edit is False
        fields.append(
            FormField(
                path=".".join(schema_path),
                value_type=leaf.value_type.value,
                label=_label(schema_path[-1]),
                group=".".join(parent),
                default=_plain(default),
                default_text="" if default is None else form_text(default),
                default_source=source,
                default_from=ruling.default_from_source if ruling is not None else None,
                required=rules is not None and rules.required is True,
                locked=locked,
                locked_by=_owned_by(owner) if locked and owner is not None else None,
                minimum=None if rules is None else rules.minimum,
                maximum=None if rules is None else rules.maximum,
                step=None if rules is None or rules.step is None else plain_number(rules.step),
                options=_options(rules.options if rules is not None else None),
                choices=leaf.choices,
                frameworks=tuple(
                    name for name in DISTRIBUTED_FRAMEWORKS if name in leaf.frameworks
                ),
                rule_source=None if owner is None else str(owner.scope),
                enforcement=None if owner is None else owner.enforcement.value,
            )
        )
    return tuple(fields)


def form_instances(
    policy: EffectivePolicy, catalogue: AssetCatalogue | None = None
) -> tuple[FormInstance, ...]:
    """The default instances of ``policy``'s itemized fields, in the catalogue's order of the
    fields; with ``catalogue``, the storage instances its imposed assets become too, merged as
    evaluation merges them (raises :class:`~podwright.core.policies.PolicyError` for an asset
    the catalogue lacks or cannot impose, as evaluation does)."""
    root = SCHEMAS[policy.workload_type]
    by_field = (
        policy.instance_entries if catalogue is None else prepare(policy, catalogue).instances
    )
    instances: list[FormInstance] = []
    for path in sorted(by_field, key=lambda path: catalogue_rank(root, ".".join(path))):
        sourced_rules = policy.instance_rules.get(path)
        locked_keys = sourced_rules.value.locked if sourced_rules is not None else ()
        for key, default in by_field[path].items():
            protector: Policy | None = None
            if default.imposed or default.unnamed:
                protector = default.policy
            elif key in locked_keys and sourced_rules is not None:
                protector = sourced_rules.policy
            attributes = _plain(default.attributes)
            assert isinstance(attributes, dict)
            instances.append(
                FormInstance(
                    path=".".join(path),
                    key=key,
                    attributes=attributes,
                    source=default.source,
                    imposed=default.imposed,
                    locked=protector is not None,
                    locked_by=None if protector is None else _owned_by(protector),
                )
            )
    return tuple(instances)


def imposed_assets(policy: EffectivePolicy) -> tuple[ImposedAsset, ...]:
    """The assets ``policy`` imposes, from the tenant's down, each with its source."""
    return tuple(
        ImposedAsset(
            sourced.value,
            f"imposed asset {sourced.value} ({sourced.policy.scope})",
            sourced.policy.name,
        )
        for sourced in policy.imposed_assets
    )


def form_policies(policy: EffectivePolicy) -> tuple[FormPolicy, ...]:
    """The policies of ``policy``'s branch, from the tenant's down."""
    return tuple(
        FormPolicy(branch.name, str(branch.scope), branch.enforcement.value)
        for branch in policy.policies
    )


def form_text(value: object) -> str:
    """A field's value as the form spells it (see the module's docstring): what
    :func:`workload_from_form` reads back as the same value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "\n".join(str(item) for item in value)
    if isinstance(value, float):
        return repr(value)  # the shortest spelling that reads back as the same float
    return str(value)


def workload_from_form(workload_type: WorkloadType, values: Mapping[str, str]) -> dict[str, object]:
    """The workload's fields a form gives: ``{"type": "training", "compute": {...}}``.

    ``values`` holds the form's strings by field path (:attr:`FormField.path`); each is read
    by its field's value type (see the module's docstring) and checked as a workload's value
    is (an enumerated field's choices, a count not below 0, a quantity's spelling); an empty
    one is left out. Raises :class:`~podwright.core.problems.ProblemsError` with every problem,
    each at its field's path: a value its field cannot take, a path that is no form field.
    """
    leaves = dict(_FORM_LEAVES[workload_type])
    problems: list[FieldProblem] = []
    fields: dict[str, object] = {"type": workload_type.value}
    for schema_path, leaf in leaves.items():
        text = values.get(".".join(schema_path), "").strip()
        if not text:
            continue
        try:
            value = check_leaf(leaf, _read(leaf, text))
        except InvalidValue as error:
            problems.append(FieldProblem(schema_path, str(error)))
            continue
        section = fields
        for name in schema_path[:-1]:
            child = section.setdefault(name, {})
            assert isinstance(child, dict)
            section = child
        section[schema_path[-1]] = value
    known = [".".join(path) for path in leaves]
    root = SCHEMAS[workload_type]
    for path in values:
        if tuple(path.split(".")) in leaves:
            continue
        problems.append(FieldProblem(tuple(path.split(".")), _not_a_form_field(root, path, known)))
    if problems:
        raise ProblemsError(problems)
    return fields


def _not_a_form_field(root: Section, path: str, known: list[str]) -> str:
    field = field_at(root, tuple(path.split(".")))
    if field is None:
        return unknown_field(path, known)
    if isinstance(field, Section):
        return f"{path!r} is a section: give each of its fields by its own path ({path}.<field>)"
    return (
        f"{path!r} is not a form field: itemized fields and lists of objects or numbers are "
        "edited as YAML"
    )


def _read(leaf: Leaf, text: str) -> object:
    """``text`` (stripped, not empty) as a value of ``leaf``, checked by the caller."""
    kind = leaf.value_type
    if kind is ValueType.BOOLEAN:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InvalidValue(f"expected true or false (a checked box sends 'on'), got {text!r}")
    if kind is ValueType.INTEGER:
        if not _WHOLE_NUMBER.fullmatch(text):
            raise InvalidValue(f"expected a whole number, got {text!r}")
        return int(text)
    if kind is ValueType.NUMBER:
        if not _DECIMAL_NUMBER.fullmatch(text):
            raise InvalidValue(f"expected a number (such as 2, 0.5 or 1e-3), got {text!r}")
        if _WHOLE_NUMBER.fullmatch(text):
            return int(text)
        number = float(text)
        if not math.isfinite(number):
            raise InvalidValue(f"expected a finite number, got {text!r}")
        return number
    if kind is ValueType.QUANTITY:
        return int(text) if _WHOLE_NUMBER.fullmatch(text) else text
    if kind is ValueType.ARRAY:
        return [line.strip() for line in text.splitlines() if line.strip()]
    return text


def _form_leaves(section: Section, path: SchemaPath = ()) -> list[tuple[SchemaPath, Leaf]]:
    """The form's fields below ``section`` (see the module's docstring), in catalogue order."""
    leaves: list[tuple[SchemaPath, Leaf]] = []
    for name, field in section.fields.items():
        if isinstance(field, Section):
            leaves.extend(_form_leaves(field, (*path, name)))
        elif isinstance(field, Leaf) and (
            field.value_type in _SCALAR_TYPES
            or (field.value_type is ValueType.ARRAY and field.item is ValueType.STRING)
        ):
            leaves.append(((*path, name), field))
    return leaves


_FORM_LEAVES = {kind: tuple(_form_leaves(SCHEMAS[kind])) for kind in WorkloadType}


def _label(name: str) -> str:
    """``gpuDevicesRequest`` → ``GPU devices request``."""
    words = [
        word.upper() if word.lower() in _ACRONYMS else word.lower() for word in _WORD.findall(name)
    ]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def _options(options: tuple[Option, ...] | None) -> tuple[tuple[object, str], ...]:
    """Each option's value and the text to show: its ``displayed``, else the value."""
    return tuple(
        (option.value, str(option.value) if option.displayed is None else option.displayed)
        for option in options or ()
    )


def _owned_by(policy: Policy) -> str:
    return f"{policy.scope} (policy {policy.name!r})"


def _plain(value: object) -> object:
    """``value`` copied into plain dicts and lists (JSON-ready, shared with nothing)."""
    if isinstance(value, Mapping):
        return {str(name): _plain(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
