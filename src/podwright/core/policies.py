"""Workload policies: one scope's defaults, rules and imposed assets for one workload type.

An administrator writes a policy as a document::

    apiVersion: podwright.dev/v1
    kind: WorkloadPolicy
    metadata: {name: research-training}
    spec:
      scope: {cluster: prod, department: research}   # or: tenant
      workloadType: training
      enforcement: enforce                            # enforce | warn | audit
      defaults: {imagePullPolicy: Always, compute: {cpuCoreRequest: 1}}
      rules: {compute: {gpuDevicesRequest: {max: 8}}}
      imposedAssets: [f12c965b-44e9-4ff6-8b43-01d8f9e630cc]

The same sections written alone, as the Run:ai reference writes every example (``defaults``,
``rules`` and ``imposedAssets`` at the top, or in the ``policy`` of Run:ai's API request body),
are read by :func:`policy_from_runai`, given the workload type, scope and name the document does
not say (:mod:`~podwright.core.policy_documents` reads every form). Either way the sections are
read as Run:ai's API server reads them: a key that differs from a field, rule or section only in
letter case is that one (Go's JSON decoding matches names so: the reference writes ``Step``,
``Instances``, ``Repository``), and ``attributes`` written as a list of one-key mappings is that
mapping; each such reading is a note (:attr:`Policy.notes`), and every problem below it is
reported where the key was written.

The loader checks everything that can be checked in one policy, and reports every problem at its
path, the envelope's (``apiVersion``, ``kind``, ``metadata.name``, unknown keys) together with
the spec's (whose fields need a valid ``workloadType``): unknown fields, values of the wrong
type, a rule its field's type cannot carry, ``min`` above ``max``, a default its own rules
forbid (itself, or a default a ``defaultFrom`` computes from it), a ``defaultFrom`` outside its
section or in a cycle. The result is flattened by *schema path*
(``("compute", "cpuCoreRequest")``; an itemized field's attributes lie beneath the field;
distributed training starts with the role), which is what combining scopes and evaluating
submissions work on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from types import MappingProxyType
from typing import TypeVar

from podwright.core import quantities
from podwright.core.field_paths import FieldPath
from podwright.core.k8s_names import dns1123_subdomain_problem
from podwright.core.problems import (
    FieldProblem,
    ProblemsError,
    describe,
    one_of,
    shown,
    unknown_field,
)
from podwright.core.workload_fields import (
    NUMERIC_TYPES,
    ROLES,
    SCHEMAS,
    Field,
    Itemized,
    Leaf,
    Section,
    ValueType,
    WorkloadType,
    field_at,
)
from podwright.core.workloads import (
    FieldChecker,
    InvalidValue,
    check_leaf,
    missing_field_message,
    numeric_value,
    parse_workload_type,
)

API_VERSION = "podwright.dev/v1"
KIND = "WorkloadPolicy"

SchemaPath = tuple[str, ...]
T = TypeVar("T")


class PolicyError(ProblemsError):
    """A policy, or a set of policies, cannot be used; ``problems`` lists every reason."""


class Enforcement(StrEnum):
    """What a violation of a policy's rules does to a submission."""

    ENFORCE = "enforce"
    """Reject the submission."""
    WARN = "warn"
    """Accept it, and return the violations as warnings."""
    AUDIT = "audit"
    """Accept it without a word, and record the violations."""


SCOPE_LEVELS = ("tenant", "cluster", "department", "project")


@dataclasses.dataclass(frozen=True)
class Scope:
    """A node of the tree tenant → cluster → department → project, as the names below the tenant.

    ``Scope(())`` is the tenant; ``Scope(("prod", "research"))`` the department ``research`` of
    cluster ``prod``.
    """

    names: tuple[str, ...] = ()

    @property
    def level(self) -> str:
        """``tenant``, ``cluster``, ``department`` or ``project``."""
        return SCOPE_LEVELS[len(self.names)]

    def contains(self, other: Scope) -> bool:
        """Whether ``other`` is this scope or lies below it."""
        return other.names[: len(self.names)] == self.names

    def __str__(self) -> str:
        return self.level if not self.names else f"{self.level} {self.names[-1]}"

    def to_text(self) -> str:
        """The ``--scope`` spelling: ``cluster=prod,department=research`` (``tenant`` alone)."""
        if not self.names:
            return "tenant"
        return ",".join(
            f"{level}={name}" for level, name in zip(SCOPE_LEVELS[1:], self.names, strict=False)
        )

    def to_data(self) -> str | dict[str, str]:
        """The policy-file spelling: ``tenant`` or ``{cluster: prod, department: research}``."""
        return "tenant" if not self.names else dict(zip(SCOPE_LEVELS[1:], self.names, strict=False))


def scope_from_data(data: object) -> Scope:
    """``tenant``, or a mapping ``{cluster, department, project}`` filled from the top down."""
    if data == "tenant":
        return Scope()
    if not isinstance(data, Mapping):
        raise ValueError(
            "expected 'tenant' or a mapping such as {cluster: prod, department: research}, "
            f"got {describe(data)}"
        )
    for key in data:
        if key not in SCOPE_LEVELS[1:]:
            raise ValueError(unknown_field(key, SCOPE_LEVELS[1:]))
    names: list[str] = []
    for level in SCOPE_LEVELS[1:]:
        name = data.get(level)
        if name is None:
            break
        if not isinstance(name, str) or not name:
            raise ValueError(f"{level}: expected a non-empty name, got {describe(name)}")
        names.append(name)
    if len(names) != len(data):
        missing = SCOPE_LEVELS[len(names) + 1]
        deepest = max(SCOPE_LEVELS.index(str(level)) for level in data)
        raise ValueError(f"a {SCOPE_LEVELS[deepest]} scope must name its {missing}")
    return Scope(tuple(names))


def scope_from_text(text: str) -> Scope:
    """Read the ``--scope`` spelling (see :meth:`Scope.to_text`)."""
    if text.strip() == "tenant":
        return Scope()
    pairs: dict[str, str] = {}
    for part in text.split(","):
        level, equals, name = part.partition("=")
        if not equals:
            raise ValueError(
                f"expected 'tenant' or level=name pairs such as "
                f"'cluster=prod,department=research', got {text!r}"
            )
        pairs[level.strip()] = name.strip()
    return scope_from_data(pairs)


@dataclasses.dataclass(frozen=True)
class Option:
    """One allowed value of a field, and how a form shows it."""

    value: object
    displayed: str | None = None


@dataclasses.dataclass(frozen=True)
class DefaultFrom:
    """A default computed from another field of the same section: ``field`` times ``factor``."""

    field: SchemaPath
    factor: Decimal
    source_type: ValueType = ValueType.NUMBER
    """The value type of ``field`` (integer, number or quantity)."""
    target_type: ValueType = ValueType.NUMBER
    """The value type of the field that gets the default."""

    def compute(self, source: object) -> object:
        """The default for a ``source`` value: a quantity stays a quantity, an integer is
        rounded half up."""
        amount = numeric_value(self.source_type, source) * self.factor
        if self.target_type is ValueType.QUANTITY:
            return quantities.format_quantity(amount)
        if self.target_type is ValueType.INTEGER:
            return int(amount.to_integral_value(rounding=ROUND_HALF_UP))
        return plain_number(amount)

    def describe(self) -> str:
        """``defaultFrom compute.cpuCoreLimit × 0.5``, as sources name it."""
        return f"defaultFrom {'.'.join(self.field)} × {plain_number(self.factor)}"


@dataclasses.dataclass(frozen=True)
class FieldRules:
    """The rules a policy sets on one field; None means the policy does not set that rule."""

    required: bool | None = None
    can_edit: bool | None = None
    minimum: object = None
    maximum: object = None
    step: Decimal | None = None
    options: tuple[Option, ...] | None = None
    default_from: DefaultFrom | None = None
    minimum_amount: Decimal | None = dataclasses.field(default=None, compare=False, repr=False)
    """``minimum`` as an exact amount (for integer, number and quantity fields)."""
    maximum_amount: Decimal | None = dataclasses.field(default=None, compare=False, repr=False)
    option_values: tuple[object, ...] = dataclasses.field(default=(), compare=False, repr=False)

    judges_values: bool = dataclasses.field(default=False, compare=False, repr=False)
    """Whether any rule here judges a value (min, max, step, options)."""

    def to_data(self) -> dict[str, object]:
        """The rules as written in a policy file."""
        data: dict[str, object] = {}
        if self.required is not None:
            data["required"] = self.required
        if self.can_edit is not None:
            data["canEdit"] = self.can_edit
        if self.minimum is not None:
            data["min"] = self.minimum
        if self.maximum is not None:
            data["max"] = self.maximum
        if self.step is not None:
            data["step"] = plain_number(self.step)
        if self.options is not None:
            data["options"] = [
                {"value": option.value}
                | ({} if option.displayed is None else {"displayed": option.displayed})
                for option in self.options
            ]
        if self.default_from is not None:
            data["defaultFrom"] = {
                "field": ".".join(self.default_from.field),
                "factor": plain_number(self.default_from.factor),
            }
        return data


@dataclasses.dataclass(frozen=True)
class InstanceRules:
    """Rules on an itemized field's instances as a whole."""

    can_add: bool | None = None
    locked: tuple[str, ...] = ()

    def to_data(self) -> dict[str, object]:
        """The rules as written in a policy file."""
        data: dict[str, object] = {}
        if self.can_add is not None:
            data["canAdd"] = self.can_add
        if self.locked:
            data["locked"] = list(self.locked)
        return data


@dataclasses.dataclass(frozen=True)
class Policy:
    """One scope's policy for one workload type, flattened by schema path."""

    name: str
    scope: Scope
    workload_type: WorkloadType
    enforcement: Enforcement
    defaults: Mapping[SchemaPath, object]
    """Leaf defaults, and attribute defaults of itemized fields (below the field's path)."""
    instances: Mapping[SchemaPath, tuple[Mapping[str, object], ...]]
    """Default instances of itemized fields."""
    rules: Mapping[SchemaPath, FieldRules]
    instance_rules: Mapping[SchemaPath, InstanceRules]
    imposed_assets: tuple[str, ...] = ()
    source: str | None = None
    """The document it was read from, to point at in errors."""
    document_prefix: FieldPath = ("spec",)
    """Where ``defaults``, ``rules`` and ``imposedAssets`` sit in that document: ``spec`` in a
    policy file or resource, nothing in a Run:ai document, ``policy`` in Run:ai's API body."""
    notes: tuple[FieldProblem, ...] = ()
    """What was read otherwise than written, each at its path as written in the document (and
    with its ``source``): a key in other letter case (``Step``: read as ``step``), ``attributes``
    as a list of one-key mappings. Worth telling the author; the policy is valid."""
    body: Mapping[str, object] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    """The document's ``defaults``, ``rules`` and ``imposedAssets`` as read, in podwright's
    spelling (what the notes say corrected): what a policy resource of this policy holds in its
    ``spec`` beside ``workloadType`` and ``enforcement``."""


RULES_BY_TYPE: Mapping[ValueType, tuple[str, ...]] = MappingProxyType(
    {
        ValueType.BOOLEAN: ("required", "canEdit"),
        ValueType.STRING: ("required", "canEdit", "options"),
        ValueType.INTEGER: ("required", "canEdit", "min", "max", "step", "defaultFrom"),
        ValueType.NUMBER: ("required", "canEdit", "min", "max", "step", "defaultFrom"),
        ValueType.QUANTITY: ("required", "canEdit", "min", "max", "defaultFrom"),
        ValueType.ARRAY: ("required", "canEdit", "options"),
    }
)
"""Which rules a field of each value type can carry."""

INSTANCE_RULES = ("canAdd", "locked")
ITEMIZED_SECTIONS = ("instances", "attributes")
OPTION_FIELDS = ("value", "displayed")
DEFAULT_FROM_FIELDS = ("field", "factor")
RUNAI_SECTIONS = ("defaults", "rules", "imposedAssets")
"""What a Run:ai policy document holds (each may be null)."""
RUNAI_REQUEST_FIELDS = ("meta", "policy")
"""What the request body of Run:ai's policy API holds: ``policy`` is the document."""
_SPEC_FIELDS = ("scope", "workloadType", "enforcement", *RUNAI_SECTIONS)
_TOP_FIELDS = ("apiVersion", "kind", "metadata", "spec")


def policy_from_data(data: object, source: str | None = None) -> Policy:
    """Read and check a ``WorkloadPolicy`` document; raises :class:`PolicyError` with every
    problem found."""
    loader = _Loader(source)
    return loader.finish(loader.load(data))


def policy_from_runai(
    data: object,
    source: str | None = None,
    *,
    name: str,
    scope: Scope,
    workload_type: WorkloadType,
) -> Policy:
    """Read and check a Run:ai policy document: the body ``{defaults, rules, imposedAssets}``,
    or its API's request body ``{meta, policy}`` (``meta`` holds Run:ai's ids of scopes, which
    mean nothing here: ``scope`` says where the policy applies). Its workload type, scope and
    name are not in it, so they are given; it is enforced. Raises :class:`PolicyError` with every
    problem found, at the document's own paths (``rules.compute...``, ``policy.rules...``)."""
    loader = _Loader(source, prefix=())
    return loader.finish(loader.runai(data, name, scope, workload_type))


def plain_number(amount: Decimal) -> int | float:
    """A decimal as the JSON/YAML number it spells (an int when it is whole)."""
    return int(amount) if amount == amount.to_integral_value() else float(amount)


def same_value(field: Leaf, left: object, right: object) -> bool:
    """Whether two valid values of ``field`` are the same value ("1G" is "1000M")."""
    if field.value_type in NUMERIC_TYPES:
        return numeric_value(field.value_type, left) == numeric_value(field.value_type, right)
    return left == right


def rule_breaches(
    field: Leaf, rules: FieldRules, value: object, origin: str | None = None
) -> list[tuple[str, str]]:
    """The (rule, details) pairs of the value rules (min, max, step, options) ``value`` breaks.

    ``required`` and ``canEdit`` concern where a value came from, not the value, so the caller
    checks them; ``step`` counts from ``min``, or from 0 when there is no ``min``. ``origin``
    (where the value came from) is named after the value in the details.
    """
    breaches: list[tuple[str, str]] = []
    if not rules.judges_values:
        return breaches
    kind = field.value_type

    def subject() -> str:  # only built for a breach
        return f"{shown(value)} ({origin})" if origin else shown(value)

    if kind in NUMERIC_TYPES:
        amount = numeric_value(kind, value)
        if rules.minimum_amount is not None and amount < rules.minimum_amount:
            breaches.append(("min", f"{subject()} is below the minimum {shown(rules.minimum)}"))
        if rules.maximum_amount is not None and amount > rules.maximum_amount:
            breaches.append(("max", f"{subject()} is above the maximum {shown(rules.maximum)}"))
        if rules.step is not None:
            base = rules.minimum_amount or Decimal(0)
            if (amount - base) % rules.step != 0:
                start = "0" if rules.minimum is None else f"min {shown(rules.minimum)}"
                breaches.append(
                    (
                        "step",
                        f"{subject()} is not a multiple of the step {plain_number(rules.step)} "
                        f"counted from {start}",
                    )
                )
    if rules.options is not None:
        allowed = rules.option_values
        if kind is ValueType.ARRAY:
            assert isinstance(value, list)
            for index, item in enumerate(value):
                if item not in allowed:
                    where = f" of {subject()}" if origin else ""
                    breaches.append(
                        (
                            "options",
                            f"item {index}, {shown(item)},{where} is not among the options "
                            f"{shown(list(allowed))}",
                        )
                    )
        elif value not in allowed:
            breaches.append(
                ("options", f"{subject()} is not among the options {shown(list(allowed))}")
            )
    return breaches


@dataclasses.dataclass
class _Loader:
    source: str | None
    prefix: FieldPath = ("spec",)
    """Where the policy's sections sit in the document."""
    workload_type: WorkloadType = WorkloadType.WORKSPACE
    problems: list[FieldProblem] = dataclasses.field(default_factory=list)
    notes: list[FieldProblem] = dataclasses.field(default_factory=list)
    written: dict[FieldPath, FieldPath] = dataclasses.field(default_factory=dict)
    """The path as written of every path whose spelling was corrected (:meth:`_respelled`)."""
    imposed: tuple[str, ...] = ()
    defaults: dict[SchemaPath, object] = dataclasses.field(default_factory=dict)
    default_paths: dict[SchemaPath, FieldPath] = dataclasses.field(default_factory=dict)
    instances: dict[SchemaPath, tuple[Mapping[str, object], ...]] = dataclasses.field(
        default_factory=dict
    )
    instance_paths: dict[SchemaPath, FieldPath] = dataclasses.field(default_factory=dict)
    rules: dict[SchemaPath, FieldRules] = dataclasses.field(default_factory=dict)
    rule_paths: dict[SchemaPath, FieldPath] = dataclasses.field(default_factory=dict)
    instance_rules: dict[SchemaPath, InstanceRules] = dataclasses.field(default_factory=dict)

    def problem(self, path: FieldPath, message: str) -> None:
        self.problems.append(FieldProblem(self._as_written(path), message, self.source))

    def finish(self, policy: Policy | None) -> Policy:
        """``policy``, or :class:`PolicyError` with every problem found."""
        if self.problems:
            raise PolicyError(self.problems)
        assert policy is not None
        return policy

    def load(self, data: object) -> Policy | None:
        if not isinstance(data, Mapping):
            self.problem((), f"expected a {KIND} document (a mapping), got {describe(data)}")
            return None
        self._unknown(data, (), _TOP_FIELDS)
        if data.get("apiVersion") != API_VERSION:
            self.problem(
                ("apiVersion",), f"expected {API_VERSION!r}, got {describe(data.get('apiVersion'))}"
            )
        if data.get("kind") != KIND:
            self.problem(("kind",), f"expected {KIND!r}, got {describe(data.get('kind'))}")
        name = self._name(data.get("metadata"))
        spec = data.get("spec")
        if not isinstance(spec, Mapping):
            self.problem(("spec",), f"expected a mapping, got {describe(spec)}")
            return None
        self._unknown(spec, ("spec",), _SPEC_FIELDS)
        scope = self._parsed(scope_from_data, spec.get("scope"), ("spec", "scope"))
        workload_type = self._parsed(
            parse_workload_type, spec.get("workloadType"), ("spec", "workloadType")
        )
        enforcement = self._enforcement(spec.get("enforcement", Enforcement.ENFORCE.value))
        self.imposed = self._imposed(spec.get("imposedAssets"))
        if workload_type is None:
            return None
        body = self._sections(spec, workload_type)
        if scope is None or enforcement is None or name is None:
            return None
        return self._policy(name, scope, workload_type, enforcement, body)

    def runai(
        self, data: object, name: str, scope: Scope, workload_type: WorkloadType
    ) -> Policy | None:
        if not isinstance(data, Mapping):
            self.problem(
                (),
                "expected a Run:ai policy document (a mapping of "
                f"{', '.join(RUNAI_SECTIONS)}), got {describe(data)}",
            )
            return None
        data = self._respelled(data, (*RUNAI_SECTIONS, *RUNAI_REQUEST_FIELDS), ())
        body: object = data
        holds = f"{', '.join(RUNAI_SECTIONS[:-1])} and {RUNAI_SECTIONS[-1]}"
        why = (
            f"a Run:ai policy document holds {holds} (a podwright policy file has apiVersion "
            f"{API_VERSION} and kind {KIND}; Run:ai's API request body holds meta and policy)"
        )
        if "policy" in data:
            self._unknown(
                data, (), RUNAI_REQUEST_FIELDS, "Run:ai's API request body holds meta and policy"
            )
            self.prefix = ("policy",)
            body = data["policy"]
            if not isinstance(body, Mapping):
                self.problem(self.prefix, f"expected a mapping of {holds}, got {describe(body)}")
                return None
            body = self._respelled(body, RUNAI_SECTIONS, self.prefix)
            why = f"the policy of Run:ai's API request body holds {holds}"
        assert isinstance(body, Mapping)
        self._unknown(body, self.prefix, RUNAI_SECTIONS, why)
        self.imposed = self._imposed(body.get("imposedAssets"))
        sections = self._sections(body, workload_type)
        return self._policy(name, scope, workload_type, Enforcement.ENFORCE, sections)

    def _sections(
        self, data: Mapping[object, object], workload_type: WorkloadType
    ) -> dict[str, object]:
        """Read the ``defaults`` and ``rules`` of ``data`` (spellings corrected) and check the
        whole policy; the three sections as read."""
        self.workload_type = workload_type
        root = SCHEMAS[workload_type]
        checker = FieldChecker(workload_type, submission=False)
        sections = {name: data[name] for name in RUNAI_SECTIONS if name in data}
        if sections.get("defaults") is not None:
            path = (*self.prefix, "defaults")
            sections["defaults"] = self._respell_defaults(root, sections["defaults"], path)
            self._defaults(root, sections["defaults"], path, (), checker)
        if sections.get("rules") is not None:
            path = (*self.prefix, "rules")
            sections["rules"] = self._respell_rules(root, sections["rules"], path)
            self._rules(root, sections["rules"], path, ())
        for problem in checker.problems:
            self.problem(problem.path, problem.message)
        self._defaults_within_rules(root)
        self._default_from_cycles()
        return sections

    def _policy(
        self,
        name: str,
        scope: Scope,
        workload_type: WorkloadType,
        enforcement: Enforcement,
        body: Mapping[str, object],
    ) -> Policy:
        return Policy(
            name=name,
            scope=scope,
            workload_type=workload_type,
            enforcement=enforcement,
            defaults=MappingProxyType(self.defaults),
            instances=MappingProxyType(self.instances),
            rules=MappingProxyType(self.rules),
            instance_rules=MappingProxyType(self.instance_rules),
            imposed_assets=self.imposed,
            source=self.source,
            document_prefix=self.prefix,
            notes=tuple(self.notes),
            body=MappingProxyType(dict(body)),
        )

    def _unknown(
        self,
        data: Mapping[object, object],
        path: FieldPath,
        known: Sequence[str],
        why: str | None = None,
    ) -> None:
        for key in data:
            if key not in known:
                message = unknown_field(key, known)
                self.problem((*path, str(key)), f"{message}: {why}" if why else message)

    def _name(self, metadata: object) -> str | None:
        if not isinstance(metadata, Mapping) or not metadata.get("name"):
            self.problem(("metadata",), "expected a mapping with the policy's name: {name: ...}")
            return None
        self._unknown(metadata, ("metadata",), ("name",))
        if not isinstance(metadata["name"], str):
            self.problem(
                ("metadata", "name"), f"expected a string, got {describe(metadata['name'])}"
            )
            return None
        name: str = metadata["name"]
        if problem := dns1123_subdomain_problem(name):
            # Policies become objects of the cluster (WorkloadPolicy) under this name.
            self.problem(("metadata", "name"), f"{name!r} {problem}")
            return None
        return name

    def _parsed(self, parse: Callable[[object], T], data: object, path: FieldPath) -> T | None:
        """``parse(data)``, or None with its ValueError recorded as a problem at ``path``."""
        try:
            return parse(data)
        except ValueError as error:
            self.problem(path, str(error))
            return None

    def _enforcement(self, data: object) -> Enforcement | None:
        if isinstance(data, str) and data in {mode.value for mode in Enforcement}:
            return Enforcement(data)
        choices = [mode.value for mode in Enforcement]
        self.problem(("spec", "enforcement"), f"expected {one_of(choices)}, got {describe(data)}")
        return None

    def _imposed(self, data: object) -> tuple[str, ...]:
        if data is None:
            return ()
        if not isinstance(data, list) or not all(isinstance(item, str) and item for item in data):
            self.problem(
                (*self.prefix, "imposedAssets"),
                f"expected a list of asset ids, got {describe(data)}",
            )
            return ()
        return tuple(data)

    # -- spellings --------------------------------------------------------------------------
    # Run:ai's API server decodes a policy with Go's encoding/json, which matches a key to a
    # field whatever its letter case; the reference's own examples rely on it (``Step``,
    # ``Instances``, ``Repository``), and write one ``attributes`` as a list of one-key
    # mappings. Both are read here as the API server reads them, before the sections are
    # checked, each with a note; problems found later are reported where the key was written.

    def _as_written(self, path: FieldPath) -> FieldPath:
        for length in range(len(path), 0, -1):
            written = self.written.get(path[:length])
            if written is not None:
                return (*written, *path[length:])
        return path

    def _note(self, path: FieldPath, message: str) -> None:
        self.notes.append(FieldProblem(path, message, self.source))

    def _respelled(
        self, data: Mapping[object, object], known: Collection[str], path: FieldPath
    ) -> dict[object, object]:
        """``data`` with each key that is a name of ``known`` in other letter case read as
        that name; a name given in both spellings is a problem (the right one is kept)."""
        respelled: dict[object, object] = {}
        for key, value in data.items():
            if not isinstance(key, str) or key in known:
                respelled[key] = value
                continue
            folded = key.casefold()
            name = next((name for name in known if name.casefold() == folded), None)
            if name is None:
                respelled[key] = value
                continue
            written = self._as_written((*path, key))
            if name in respelled or name in data:
                self.problems.append(
                    FieldProblem(
                        written,
                        f"{key!r} reads as {name!r}, which is given too: give it once",
                        self.source,
                    )
                )
                continue
            self.written[(*path, name)] = written
            self._note(written, f"read as {name!r}")
            respelled[name] = value
        return respelled

    def _one_mapping(self, data: object, path: FieldPath) -> object:
        """A list of one-key mappings, each key once (the reference's hostPath
        ``attributes: [readOnly: true]``), as the mapping it spells; anything else as is."""
        if not (
            isinstance(data, list)
            and data
            and all(isinstance(item, Mapping) and len(item) == 1 for item in data)
        ):
            return data
        keys = [next(iter(item)) for item in data]
        if not all(isinstance(key, str) for key in keys) or len(set(keys)) != len(keys):
            return data
        written = self._as_written(path)
        for index, key in enumerate(keys):
            self.written[(*path, key)] = (*written, index, key)
        self._note(
            written,
            "a list of one-key mappings, read as one mapping of "
            + ", ".join(repr(key) for key in keys),
        )
        return {key: item[key] for key, item in zip(keys, data, strict=True)}

    def _respell_defaults(self, field: Field, data: object, path: FieldPath) -> object:
        if isinstance(field, Leaf):
            if isinstance(field.item, Section) and isinstance(data, list):
                return [
                    self._respell_defaults(field.item, item, (*path, index))
                    for index, item in enumerate(data)
                ]
            return data
        if not isinstance(data, Mapping):
            return data
        if isinstance(field, Section):
            return {
                name: self._respell_defaults(field.fields[name], value, (*path, name))
                if isinstance(name, str) and name in field.fields
                else value
                for name, value in self._respelled(data, field.fields, path).items()
            }
        respelled = self._respelled(data, ITEMIZED_SECTIONS, path)
        instances = respelled.get("instances")
        if isinstance(instances, list):
            respelled["instances"] = [
                self._respell_defaults(field.attributes, item, (*path, "instances", index))
                for index, item in enumerate(instances)
            ]
        if "attributes" in respelled:
            where = (*path, "attributes")
            attributes = self._one_mapping(respelled["attributes"], where)
            respelled["attributes"] = self._respell_defaults(field.attributes, attributes, where)
        return respelled

    def _respell_rules(self, field: Field, data: object, path: FieldPath) -> object:
        if not isinstance(data, Mapping):
            return data
        if isinstance(field, Section):
            return {
                name: self._respell_rules(field.fields[name], value, (*path, name))
                if isinstance(name, str) and name in field.fields
                else value
                for name, value in self._respelled(data, field.fields, path).items()
            }
        if isinstance(field, Itemized):
            respelled = self._respelled(data, ITEMIZED_SECTIONS, path)
            instances = respelled.get("instances")
            if isinstance(instances, Mapping):
                respelled["instances"] = self._respelled(
                    instances, INSTANCE_RULES, (*path, "instances")
                )
            if "attributes" in respelled:
                where = (*path, "attributes")
                attributes = self._one_mapping(respelled["attributes"], where)
                respelled["attributes"] = self._respell_rules(field.attributes, attributes, where)
            return respelled
        respelled = self._respelled(data, _RULE_NAMES, path)
        options = respelled.get("options")
        if isinstance(options, list):
            respelled["options"] = [
                self._respelled(option, OPTION_FIELDS, (*path, "options", index))
                if isinstance(option, Mapping)
                else option
                for index, option in enumerate(options)
            ]
        default_from = respelled.get("defaultFrom")
        if isinstance(default_from, Mapping):
            respelled["defaultFrom"] = self._respelled(
                default_from, DEFAULT_FROM_FIELDS, (*path, "defaultFrom")
            )
        return respelled

    # -- defaults ---------------------------------------------------------------------------

    def _defaults(
        self,
        field: Field,
        data: object,
        path: FieldPath,
        schema_path: SchemaPath,
        checker: FieldChecker,
    ) -> None:
        if isinstance(field, Leaf):
            try:
                self.defaults[schema_path] = checker.leaf(field, data, path, _unroled(schema_path))
                self.default_paths[schema_path] = path
            except InvalidValue as error:
                self.problem(path, str(error))
            return
        if not isinstance(data, Mapping):
            expected = (
                "{instances: [...], attributes: {...}}"
                if isinstance(field, Itemized)
                else "a mapping of fields"
            )
            self.problem(path, f"expected {expected}, got {describe(data)}")
            return
        if isinstance(field, Itemized):
            self._itemized_defaults(field, data, path, schema_path, checker)
            return
        for child, value, child_path, child_schema_path in self._children(
            field, data, path, schema_path
        ):
            self._defaults(child, value, child_path, child_schema_path, checker)

    def _children(
        self,
        section: Section,
        data: Mapping[object, object],
        path: FieldPath,
        schema_path: SchemaPath,
    ) -> Iterator[tuple[Field, object, FieldPath, SchemaPath]]:
        """The given fields of ``section`` with their paths; reports the ones it does not have."""
        for name, value in data.items():
            child = section.fields.get(name) if isinstance(name, str) else None
            if child is None:
                message = _field_message(section, name, schema_path, self.workload_type)
                self.problem((*path, str(name)), message)
            elif value is not None:
                assert isinstance(name, str)
                yield child, value, (*path, name), (*schema_path, name)

    def _itemized_defaults(
        self,
        field: Itemized,
        data: Mapping[object, object],
        path: FieldPath,
        schema_path: SchemaPath,
        checker: FieldChecker,
    ) -> None:
        self._unknown(data, path, ITEMIZED_SECTIONS)
        if data.get("instances") is not None:
            instances = checker.instances(
                field, data["instances"], (*path, "instances"), _unroled(schema_path)
            )
            if instances is not None:
                self.instances[schema_path] = tuple(instances)
                self.instance_paths[schema_path] = (*path, "instances")
        attributes = data.get("attributes")
        if attributes is None:
            return
        if isinstance(attributes, Mapping) and field.key in attributes:
            self.problem(
                (*path, "attributes", field.key),
                f"{field.key!r} is the key of each instance; it cannot have a default",
            )
            attributes = {name: value for name, value in attributes.items() if name != field.key}
        self._defaults(field.attributes, attributes, (*path, "attributes"), schema_path, checker)

    # -- rules ------------------------------------------------------------------------------

    def _rules(
        self,
        field: Field,
        data: object,
        path: FieldPath,
        schema_path: SchemaPath,
    ) -> None:
        if not isinstance(data, Mapping):
            self.problem(path, f"expected a mapping, got {describe(data)}")
            return
        if isinstance(field, Leaf):
            rules = self._field_rules(field, data, path, schema_path)
            self.rules[schema_path] = rules
            self.rule_paths[schema_path] = path
            return
        if isinstance(field, Itemized):
            self._unknown(data, path, ITEMIZED_SECTIONS)
            if data.get("instances") is not None:
                self.instance_rules[schema_path] = self._instance_rules(
                    data["instances"], (*path, "instances")
                )
            if data.get("attributes") is not None:
                self._rules(
                    field.attributes,
                    data["attributes"],
                    (*path, "attributes"),
                    schema_path,
                )
            return
        for child, value, child_path, child_schema_path in self._children(
            field, data, path, schema_path
        ):
            self._rules(child, value, child_path, child_schema_path)

    def _instance_rules(self, data: object, path: FieldPath) -> InstanceRules:
        if not isinstance(data, Mapping):
            self.problem(path, f"expected {{canAdd: ..., locked: [...]}}, got {describe(data)}")
            return InstanceRules()
        self._unknown(data, path, INSTANCE_RULES)
        can_add = data.get("canAdd")
        if can_add is not None and not isinstance(can_add, bool):
            self.problem((*path, "canAdd"), f"expected true or false, got {describe(can_add)}")
            can_add = None
        locked = data.get("locked", [])
        if not isinstance(locked, list) or not all(isinstance(key, str) for key in locked):
            self.problem(
                (*path, "locked"), f"expected a list of instance keys, got {describe(locked)}"
            )
            locked = []
        return InstanceRules(can_add, tuple(locked))

    def _field_rules(
        self,
        field: Leaf,
        data: Mapping[object, object],
        path: FieldPath,
        schema_path: SchemaPath,
    ) -> FieldRules:
        allowed = RULES_BY_TYPE[field.value_type]
        values: dict[str, object] = {}
        for rule, value in data.items():
            if rule in allowed:
                values[str(rule)] = value
            elif rule in _ALL_RULES or rule in INSTANCE_RULES:
                self.problem(
                    (*path, str(rule)),
                    f"a {field.value_type.value} field cannot carry the rule {rule!r} "
                    f"({field.value_type.value} fields take {', '.join(allowed)})",
                )
            else:
                self.problem(
                    (*path, str(rule)), unknown_field(rule, allowed).replace("field", "rule", 1)
                )
        rules = FieldRules(
            required=self._flag(values, "required", path),
            can_edit=self._flag(values, "canEdit", path),
            minimum=self._bound(field, values, "min", path),
            maximum=self._bound(field, values, "max", path),
            step=self._step(field, values.get("step"), (*path, "step")),
            options=self._options(field, values.get("options"), (*path, "options")),
            default_from=self._default_from(
                field, values.get("defaultFrom"), (*path, "defaultFrom"), schema_path
            ),
        )
        if field.value_type in NUMERIC_TYPES:
            rules = dataclasses.replace(
                rules,
                minimum_amount=_amount(field, rules.minimum),
                maximum_amount=_amount(field, rules.maximum),
            )
        if rules.options is not None:
            rules = dataclasses.replace(
                rules, option_values=tuple(option.value for option in rules.options)
            )
        rules = dataclasses.replace(
            rules,
            judges_values=any(
                rule is not None
                for rule in (rules.minimum, rules.maximum, rules.step, rules.options)
            ),
        )
        if (
            rules.minimum_amount is not None
            and rules.maximum_amount is not None
            and rules.minimum_amount > rules.maximum_amount
        ):
            self.problem(
                (*path, "min"),
                f"min {shown(rules.minimum)} is above max {shown(rules.maximum)}",
            )
        return rules

    def _flag(self, values: Mapping[str, object], rule: str, path: FieldPath) -> bool | None:
        value = values.get(rule)
        if value is None or isinstance(value, bool):
            return value
        self.problem((*path, rule), f"expected true or false, got {describe(value)}")
        return None

    def _bound(
        self, field: Leaf, values: Mapping[str, object], rule: str, path: FieldPath
    ) -> object:
        value = values.get(rule)
        if value is None:
            return None
        try:
            return check_leaf(field, value)
        except InvalidValue as error:
            self.problem((*path, rule), str(error))
            return None

    def _step(self, field: Leaf, value: object, path: FieldPath) -> Decimal | None:
        if value is None:
            return None
        try:
            step = numeric_value(field.value_type, value)
        except InvalidValue as error:
            self.problem(path, str(error))
            return None
        if step <= 0:
            self.problem(path, f"the step must be above 0, got {describe(value)}")
            return None
        return step

    def _options(self, field: Leaf, value: object, path: FieldPath) -> tuple[Option, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            self.problem(
                path, f"expected a non-empty list of {{value, displayed}}, got {describe(value)}"
            )
            return None
        options: list[Option] = []
        for index, entry in enumerate(value):
            entry_path = (*path, index)
            if not isinstance(entry, Mapping) or "value" not in entry:
                self.problem(
                    entry_path, f"expected {{value: ..., displayed: ...}}, got {describe(entry)}"
                )
                continue
            self._unknown(entry, entry_path, OPTION_FIELDS)
            displayed = entry.get("displayed")
            if displayed is not None and not isinstance(displayed, str):
                self.problem(
                    (*entry_path, "displayed"), f"expected a string, got {describe(displayed)}"
                )
            try:
                if field.value_type is ValueType.ARRAY:
                    # An array's options are the values each of its items may take.
                    checked = check_leaf(field, [entry["value"]])
                    assert isinstance(checked, list)
                    option_value = checked[0]
                else:
                    option_value = check_leaf(field, entry["value"])
            except InvalidValue as error:
                self.problem((*entry_path, "value"), str(error).removeprefix("item 0: "))
                continue
            options.append(Option(option_value, displayed if isinstance(displayed, str) else None))
        return tuple(options)

    def _default_from(
        self,
        field: Leaf,
        value: object,
        path: FieldPath,
        schema_path: SchemaPath,
    ) -> DefaultFrom | None:
        if value is None:
            return None
        if not isinstance(value, Mapping) or not isinstance(value.get("field"), str):
            self.problem(
                path, f"expected {{field: <dotted path>, factor: <number>}}, got {describe(value)}"
            )
            return None
        self._unknown(value, path, DEFAULT_FROM_FIELDS)
        factor_value = value.get("factor", 1)
        try:
            factor = numeric_value(ValueType.NUMBER, factor_value)
        except InvalidValue as error:
            self.problem((*path, "factor"), str(error))
            return None
        if factor < 0:
            self.problem(
                (*path, "factor"),
                f"must be at least 0, got {plain_number(factor)}: it would compute a negative "
                "amount, which no field takes",
            )
            return None
        text: str = value["field"]
        parent = schema_path[:-1]
        workload_type = self.workload_type
        root = SCHEMAS[workload_type]
        written = tuple(text.split("."))
        candidates = [written, (*parent, *written)]
        if workload_type is WorkloadType.DISTRIBUTED and written[0] not in ROLES:
            candidates.insert(1, (schema_path[0], *written))
        source = next(
            (
                candidate
                for candidate in candidates
                if candidate[:-1] == parent and isinstance(field_at(root, candidate), Leaf)
            ),
            None,
        )
        if source is None:
            where = ".".join(parent) or "the top level"
            self.problem(
                (*path, "field"),
                f"{text!r} is not a field of the same section ({where}); defaultFrom reads a "
                "sibling field (inside an itemized field, an attribute of the same instance)",
            )
            return None
        source_field = field_at(root, source)
        assert isinstance(source_field, Leaf)
        if source == schema_path:
            self.problem((*path, "field"), "a field cannot default from itself")
            return None
        if not _compatible(field.value_type, source_field.value_type):
            self.problem(
                (*path, "field"),
                f"{text!r} holds a {source_field.value_type.value}; a "
                f"{field.value_type.value} field can default only from "
                + (
                    "a quantity"
                    if field.value_type is ValueType.QUANTITY
                    else "an integer or number"
                ),
            )
            return None
        return DefaultFrom(source, factor, source_field.value_type, field.value_type)

    # -- whole-policy checks ----------------------------------------------------------------

    def _defaults_within_rules(self, root: Section) -> None:
        for schema_path, value in self.defaults.items():
            rules = self.rules.get(schema_path)
            field = field_at(root, schema_path)
            if rules is None or not isinstance(field, Leaf):
                continue
            for rule, details in rule_breaches(field, rules, value):
                self.problem(
                    self.default_paths[schema_path],
                    f"the default breaks this policy's own {rule!r} rule: {details}",
                )
        for target, computed in computed_defaults(self.rules, self.defaults).items():
            self._computed_within_rules(root, target, computed, self.default_paths[computed.origin])
        for schema_path, instances in self.instances.items():
            field = field_at(root, schema_path)
            assert isinstance(field, Itemized)
            for index, instance in enumerate(instances):
                location = (*self.instance_paths[schema_path], index)
                fixed: dict[SchemaPath, object] = {}
                for attribute_path, value in flatten(instance):
                    fixed[(*schema_path, *attribute_path)] = value
                    rules = self.rules.get((*schema_path, *attribute_path))
                    attribute = field_at(field.attributes, attribute_path)
                    if rules is None or not isinstance(attribute, Leaf):
                        continue
                    for rule, details in rule_breaches(attribute, rules, value):
                        self.problem(
                            (*location, *attribute_path),
                            f"the default breaks this policy's own {rule!r} rule: {details}",
                        )
                # Defaults computed from the instance's own attributes (those computed from
                # attribute defaults were judged above, for every instance at once).
                for target, computed in computed_defaults(self.rules, self.defaults, fixed).items():
                    if computed.origin in fixed:
                        origin = computed.origin[len(schema_path) :]
                        self._computed_within_rules(root, target, computed, (*location, *origin))

    def _computed_within_rules(
        self, root: Section, target: SchemaPath, computed: ComputedDefault, location: FieldPath
    ) -> None:
        field = field_at(root, target)
        assert isinstance(field, Leaf)
        rules = self.rules[target]
        for rule, details in rule_breaches(field, rules, computed.value):
            self.problem(
                location,
                f"{computed_default_phrase(target, computed, rules)}, which breaks this "
                f"policy's own {rule!r} rule: {details}",
            )

    def _default_from_cycles(self) -> None:
        for cycle in default_from_cycles(self.rules):
            self.problem(
                (*self.rule_paths[cycle[0]], "defaultFrom"),
                "defaultFrom forms a cycle: " + " → ".join(".".join(path) for path in cycle),
            )


_ALL_RULES = frozenset(rule for rules in RULES_BY_TYPE.values() for rule in rules)
_RULE_NAMES = (*sorted(_ALL_RULES), *INSTANCE_RULES)
"""Every name a rule has (a rule on a field its type cannot carry is reported as such)."""


def default_from_cycles(rules: Mapping[SchemaPath, FieldRules]) -> list[list[SchemaPath]]:
    """Every cycle among ``defaultFrom`` rules, each as the paths around it (first repeated)."""
    cycles: list[list[SchemaPath]] = []
    reported: set[SchemaPath] = set()
    for start in rules:
        path = [start]
        seen = {start}
        current = start
        while (default_from := rules.get(current, FieldRules()).default_from) is not None:
            current = default_from.field
            if current in seen:
                loop = path[path.index(current) :]
                if not reported.intersection(loop):
                    reported.update(loop)
                    cycles.append([*loop, current])
                break
            seen.add(current)
            path.append(current)
    return cycles


@dataclasses.dataclass(frozen=True)
class ComputedDefault:
    """A default that ``defaultFrom`` computes when nothing is submitted, and how."""

    value: object
    chain: tuple[SchemaPath, ...]
    """The fields it is computed through: the one holding a given value first (its
    ``origin``), the field that gets the default last."""

    @property
    def origin(self) -> SchemaPath:
        return self.chain[0]


def computed_defaults(
    rules: Mapping[SchemaPath, FieldRules],
    defaults: Mapping[SchemaPath, object],
    fixed: Mapping[SchemaPath, object] = MappingProxyType({}),
) -> dict[SchemaPath, ComputedDefault]:
    """What each ``defaultFrom`` target defaults to when nothing is submitted, as evaluation
    computes it: ``fixed`` values (a default instance's own attributes) stand, a computed
    default replaces a plain one of its field (in ``defaults``), and a source may itself be
    computed. Targets whose source has no value are left out; cycles are broken (and reported
    elsewhere)."""
    computed: dict[SchemaPath, ComputedDefault] = {}

    def value_of(path: SchemaPath, seen: frozenset[SchemaPath]) -> ComputedDefault | None:
        if path in fixed:
            return ComputedDefault(fixed[path], (path,))
        if path in computed:
            return computed[path]
        default_from = rules[path].default_from if path in rules else None
        if default_from is not None and path not in seen:
            source = value_of(default_from.field, seen | {path})
            if source is not None:
                result = ComputedDefault(default_from.compute(source.value), (*source.chain, path))
                computed[path] = result
                return result
        return ComputedDefault(defaults[path], (path,)) if path in defaults else None

    for path, field_rules in rules.items():
        if field_rules.default_from is not None and path not in fixed:
            value_of(path, frozenset())
    return computed


def computed_default_phrase(
    target: SchemaPath, computed: ComputedDefault, rules: FieldRules
) -> str:
    """``this default makes compute.cpuCoreRequest default to 0.75 (defaultFrom ...)``."""
    assert rules.default_from is not None
    return (
        f"this default makes {'.'.join(target)} default to {shown(computed.value)} "
        f"({rules.default_from.describe()})"
    )


def flatten(data: Mapping[str, object], prefix: SchemaPath = ()) -> list[tuple[SchemaPath, object]]:
    """The leaves of nested mappings, each with its path: ``{a: {b: 1}}`` → ``[(("a","b"), 1)]``."""
    leaves: list[tuple[SchemaPath, object]] = []
    for name, value in data.items():
        if isinstance(value, Mapping):
            leaves.extend(flatten(value, (*prefix, name)))
        else:
            leaves.append(((*prefix, name), value))
    return leaves


def _amount(field: Leaf, value: object) -> Decimal | None:
    return None if value is None else numeric_value(field.value_type, value)


def _compatible(target: ValueType, source: ValueType) -> bool:
    if target is ValueType.QUANTITY:
        return source is ValueType.QUANTITY
    return source in {ValueType.INTEGER, ValueType.NUMBER}


def _unroled(schema_path: SchemaPath) -> SchemaPath:
    return schema_path[1:] if schema_path and schema_path[0] in ROLES else schema_path


def _field_message(
    section: Section, name: object, schema_path: SchemaPath, workload_type: WorkloadType
) -> str:
    message = missing_field_message(section, name, _unroled(schema_path), workload_type)
    if isinstance(name, str) and name in _ALL_RULES | set(INSTANCE_RULES) | set(ITEMIZED_SECTIONS):
        where = ".".join(schema_path) or "the top level"
        message += f"; rules and defaults are set on a field, and {where} is a section"
    elif isinstance(name, str) and message == unknown_field(name, ()):
        below = _below(section, name)
        if below is not None:
            # A field written a section too high, as the reference's defaultFrom example is.
            message += f" here (did you mean {'.'.join(below)!r}?)"
    return message


def _below(section: Section, name: str) -> SchemaPath | None:
    """The path, from ``section``, of the nearest field called ``name`` in a section below it."""
    level: list[tuple[SchemaPath, Section]] = [((), section)]
    while level:
        deeper: list[tuple[SchemaPath, Section]] = []
        for path, current in level:
            for child_name, child in current.fields.items():
                if path and child_name == name:
                    return (*path, name)
                if isinstance(child, Section):
                    deeper.append(((*path, child_name), child))
        level = deeper
    return None
