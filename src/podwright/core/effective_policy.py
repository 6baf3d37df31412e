"""The effective policy of a scope: its branch of the scope tree, combined, with sources.

Policies are set at any scope of the tree tenant → cluster → department → project. The policy
that governs a workload in a project combines every policy of one workload type on the branch
from the tenant down to that project:

- **defaults**: the nearest scope's default for a field wins; default instances of an itemized
  field are merged by key, the nearest scope's instance replacing a farther one's whole (an
  instance a policy leaves unnamed is keyed by the name :func:`instance_key` derives from its
  attributes: it is added whatever other scopes give, and an equal one is the same instance);
- **rules**: the rules on a field are owned by one policy of the branch; a second policy that
  sets rules on the same field is an error naming the field and the owning scope (so a project
  cannot loosen what its department decided, and nobody has to guess which rule applies);
- **imposed assets**: every scope's assets apply;
- every default, rule and asset records the policy (hence scope and enforcement) it came from.

Combining also checks what no single policy could: a default from one scope that breaks a rule
of another (directly, or through a ``defaultFrom`` that computes another field's default from
it), and ``defaultFrom`` cycles across scopes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

from podwright.core.field_paths import FieldPath
from podwright.core.policies import (
    FieldRules,
    InstanceRules,
    Policy,
    PolicyError,
    SchemaPath,
    Scope,
    computed_default_phrase,
    computed_defaults,
    default_from_cycles,
    flatten,
    rule_breaches,
)
from podwright.core.problems import FieldProblem
from podwright.core.workload_fields import (
    FRAMEWORK_FIELD,
    SCHEMAS,
    Field,
    Itemized,
    Leaf,
    Section,
    WorkloadType,
    field_at,
)

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Sourced(Generic[T]):
    """A default, rule or asset, and the policy it came from."""

    value: T
    policy: Policy


@dataclasses.dataclass(frozen=True)
class EffectivePolicy:
    """The combined policy of one scope for one workload type (see the module's docstring)."""

    workload_type: WorkloadType
    scope: Scope
    policies: tuple[Policy, ...]
    """The branch's policies, from the tenant down."""
    defaults: Mapping[SchemaPath, Sourced[object]]
    instances: Mapping[SchemaPath, tuple[Sourced[Mapping[str, object]], ...]]
    rules: Mapping[SchemaPath, Sourced[FieldRules]]
    instance_rules: Mapping[SchemaPath, Sourced[InstanceRules]]
    imposed_assets: tuple[Sourced[str], ...]
    names: Mapping[SchemaPath, Mapping[str, None]]
    """For each section (or itemized field), the fields below it the policy speaks of, in the
    order evaluation must visit them (a ``defaultFrom`` source before its target)."""
    default_entries: Mapping[SchemaPath, tuple[object, str]]
    """Each leaf and attribute default with its source, as evaluation reports it."""
    instance_entries: Mapping[SchemaPath, Mapping[str, DefaultInstance]]
    """Default instances of itemized fields by key, with their source."""
    slots: dict[SchemaPath, Mapping[str, Slot]] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )
    """A memo for :meth:`slots_of`, filled as sections are first evaluated."""

    def slots_of(self, schema_path: SchemaPath, section: Section) -> Mapping[str, Slot]:
        """Each field of the section at ``schema_path``: the field, its path, its default, its
        :class:`Ruling` (for a leaf with a rule or a framework condition), and whether it is
        plain (a leaf with neither)."""
        slots = self.slots.get(schema_path)
        if slots is None:
            slots = {}
            for name, field in section.fields.items():
                path = (*schema_path, name)
                default = self.default_entries.get(path)
                ruling = None
                if isinstance(field, Leaf) and (field.frameworks or path in self.rules):
                    ruling = self._ruling(field, path, default)
                plain = isinstance(field, Leaf) and ruling is None
                slots[name] = (field, path, default, ruling, plain)
            self.slots[schema_path] = slots
        return slots

    def _ruling(self, field: Leaf, path: SchemaPath, default: tuple[object, str] | None) -> Ruling:
        sourced = self.rules.get(path)
        rules = FieldRules() if sourced is None else sourced.value
        owner = None if sourced is None else sourced.policy
        default_from = rules.default_from
        return Ruling(
            rules,
            owner,
            None
            if default_from is None or owner is None
            else f"{default_from.describe()} ({owner.scope})",
            () if default is None else tuple(rule_breaches(field, rules, *default)),
            idle=default is None and default_from is None and not rules.required,
        )


@dataclasses.dataclass(frozen=True)
class DefaultInstance:
    """A policy's default instance of an itemized field, or an imposed asset's."""

    attributes: Mapping[str, object]
    source: str
    policy: Policy
    imposed: bool
    unnamed: bool = False
    """Whether the policy left it unnamed (:attr:`~podwright.core.workload_fields.Itemized.
    unnamed_defaults`): like an imposed asset's, no submission changes or excludes it."""


@dataclasses.dataclass(frozen=True, slots=True)
class Ruling:
    """How evaluation applies the rules of one leaf, worked out once per policy."""

    rules: FieldRules
    owner: Policy | None
    """The policy that owns the rules (None for a leaf with only a framework condition)."""
    default_from_source: str | None
    """The source of a value ``defaultFrom`` computes: ``defaultFrom compute.cpuCoreLimit ×
    0.5 (cluster prod)``."""
    default_breaches: tuple[tuple[str, str], ...]
    """The (rule, details) pairs of the value rules the field's policy default breaks."""
    idle: bool
    """Whether the field has no value unless one is submitted or an instance gives it (no
    default, no ``defaultFrom``), and none is required."""


Slot = tuple[Field, SchemaPath, tuple[object, str] | None, Ruling | None, bool]
"""What evaluation needs of a field: the field, its path, its default entry, its ruling (a leaf
with a rule or a framework condition), plainness (a leaf without)."""


def effective_policy(
    policies: Iterable[Policy], scope: Scope, workload_type: WorkloadType
) -> EffectivePolicy:
    """Combine the policies of ``workload_type`` on the branch from the tenant to ``scope``.

    Policies of other types or other branches are ignored. Raises :class:`PolicyError` with
    every conflict found.
    """
    branch = sorted(
        (
            policy
            for policy in policies
            if policy.workload_type is workload_type and policy.scope.contains(scope)
        ),
        key=lambda policy: len(policy.scope.names),
    )
    problems: list[FieldProblem] = []
    for farther, nearer in itertools.pairwise(branch):
        if farther.scope == nearer.scope:
            problems.append(
                FieldProblem(
                    (),
                    f"a second {workload_type.value} policy for {nearer.scope} "
                    f"({nearer.name!r}; the first is {farther.name!r})",
                    nearer.source,
                )
            )
    if problems:
        raise PolicyError(problems)
    defaults: dict[SchemaPath, Sourced[object]] = {}
    instances: dict[SchemaPath, dict[str, Sourced[Mapping[str, object]]]] = {}
    rules: dict[SchemaPath, Sourced[FieldRules]] = {}
    instance_rules: dict[SchemaPath, Sourced[InstanceRules]] = {}
    imposed: dict[str, Sourced[str]] = {}
    root = SCHEMAS[workload_type]
    for policy in branch:
        for path, value in policy.defaults.items():
            defaults[path] = Sourced(value, policy)
        for path, default_instances in policy.instances.items():
            field = field_at(root, path)
            assert isinstance(field, Itemized)
            merged = instances.setdefault(path, {})
            for instance in default_instances:
                merged[instance_key(field, instance)] = Sourced(instance, policy)
        for path, field_rules in policy.rules.items():
            _take_ownership(rules, path, Sourced(field_rules, policy), problems, "rules")
        for path, own_instance_rules in policy.instance_rules.items():
            _take_ownership(
                instance_rules,
                path,
                Sourced(own_instance_rules, policy),
                problems,
                "instance rules",
            )
        for asset in policy.imposed_assets:
            imposed.setdefault(asset, Sourced(asset, policy))
    problems.extend(_defaults_against_rules(root, defaults, instances, rules))
    combined_rules = {path: sourced.value for path, sourced in rules.items()}
    for cycle in default_from_cycles(combined_rules):
        owner = rules[cycle[0]].policy
        problems.append(
            FieldProblem(
                (*document_path(owner, "rules", cycle[0]), "defaultFrom"),
                "defaultFrom forms a cycle across scopes: "
                + " → ".join(".".join(path) for path in cycle),
                owner.source,
            )
        )
    if problems:
        raise PolicyError(problems)
    plan = _plan(root, [*defaults, *instances, *rules, *instance_rules], combined_rules)
    return EffectivePolicy(
        workload_type=workload_type,
        scope=scope,
        policies=tuple(branch),
        defaults=defaults,
        instances={path: tuple(merged.values()) for path, merged in instances.items()},
        rules=rules,
        instance_rules=instance_rules,
        imposed_assets=tuple(imposed.values()),
        names={path: dict.fromkeys(children) for path, children in plan.items()},
        default_entries={
            path: (
                sourced.value,
                f"{'attribute' if _in_itemized(root, path) else 'policy'} default "
                f"({sourced.policy.scope})",
            )
            for path, sourced in defaults.items()
        },
        instance_entries={
            path: _default_instances(field_at(root, path), merged)
            for path, merged in instances.items()
        },
    )


UNNAMED_PREFIX = "unnamed-"


def instance_key(field: Itemized, instance: Mapping[str, object]) -> str:
    """The key of an instance of ``field``: its own (checked present and a string when it was
    read), or, for a policy's default instance written without one
    (:attr:`~podwright.core.workload_fields.Itemized.unnamed_defaults`), the name evaluation
    gives it: ``unnamed-`` and a digest of its attributes.

    The name depends on nothing but the instance, so the effective workload, stored with it
    (the mutating webhook writes it into the Workload) and evaluated again, is the same
    workload: the instance is found under its name, not added twice. Two unnamed instances
    with the same attributes are one instance.
    """
    key = instance.get(field.key)
    if key is None:
        assert field.unnamed_defaults, f"an instance without its {field.key!r}: {instance!r}"
        canonical = json.dumps(instance, sort_keys=True, separators=(",", ":"), default=str)
        return UNNAMED_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:8]
    assert isinstance(key, str)
    return key


def _default_instances(
    field: Field | None, merged: Mapping[str, Sourced[Mapping[str, object]]]
) -> dict[str, DefaultInstance]:
    assert isinstance(field, Itemized)
    return {
        key: DefaultInstance(
            sourced.value,
            f"policy default ({sourced.policy.scope})",
            sourced.policy,
            imposed=False,
            unnamed=field.key not in sourced.value,
        )
        for key, sourced in merged.items()
    }


def _in_itemized(root: Section, path: SchemaPath) -> bool:
    return any(isinstance(field_at(root, path[:length]), Itemized) for length in range(len(path)))


def document_path(policy: Policy, section: str, schema_path: SchemaPath) -> FieldPath:
    """Where a schema path is written in ``policy``'s ``defaults`` or ``rules`` section."""
    return (
        *policy.document_prefix,
        section,
        *_document_names(SCHEMAS[policy.workload_type], schema_path),
    )


def _take_ownership(
    owned: dict[SchemaPath, Sourced[T]],
    path: SchemaPath,
    claim: Sourced[T],
    problems: list[FieldProblem],
    what: str,
) -> None:
    owner = owned.get(path)
    if owner is None:
        owned[path] = claim
        return
    location = document_path(claim.policy, "rules", path)
    if what == "instance rules":
        location = (*location, "instances")
    problems.append(
        FieldProblem(
            location,
            f"the {what} of {'.'.join(path)} are owned by {owner.policy.scope} "
            f"(policy {owner.policy.name!r}); a field's rules are set by one scope of a branch",
            claim.policy.source,
        )
    )


def _defaults_against_rules(
    root: Section,
    defaults: Mapping[SchemaPath, Sourced[object]],
    instances: Mapping[SchemaPath, Mapping[str, Sourced[Mapping[str, object]]]],
    rules: Mapping[SchemaPath, Sourced[FieldRules]],
) -> list[FieldProblem]:
    """A default of one scope that breaks a rule another scope owns, itself or through the
    defaults ``defaultFrom`` computes from it (breaches within one policy were refused when the
    policy was loaded)."""
    problems: list[FieldProblem] = []
    field_rules = {path: sourced.value for path, sourced in rules.items()}
    values = {path: sourced.value for path, sourced in defaults.items()}

    def check(path: SchemaPath, value: object, default: Policy, location: FieldPath) -> None:
        rule = rules.get(path)
        field = field_at(root, path)
        if rule is None or rule.policy is default or not isinstance(field, Leaf):
            return
        for name, details in rule_breaches(field, rule.value, value):
            problems.append(
                FieldProblem(
                    location,
                    f"this default of {default.scope} breaks the {name!r} rule of "
                    f"{rule.policy.scope} (policy {rule.policy.name!r}): {details}",
                    default.source,
                )
            )

    def check_computed(
        fixed: Mapping[SchemaPath, object],
        default: Callable[[SchemaPath], tuple[Policy, FieldPath]],
    ) -> None:
        for target, computed in computed_defaults(field_rules, values, fixed).items():
            if fixed and computed.origin not in fixed:
                continue  # judged with the scope's plain defaults
            owner, location = default(computed.origin)
            if all(rules[path].policy is owner for path in computed.chain[1:]):
                continue  # one policy's own defaults: refused when it was loaded
            rule = rules[target]
            field = field_at(root, target)
            assert isinstance(field, Leaf)
            for name, details in rule_breaches(field, rule.value, computed.value):
                phrase = computed_default_phrase(target, computed, rule.value).replace(
                    "this default", f"this default of {owner.scope}", 1
                )
                problems.append(
                    FieldProblem(
                        location,
                        f"{phrase}, which breaks the {name!r} rule of {rule.policy.scope} "
                        f"(policy {rule.policy.name!r}): {details}",
                        owner.source,
                    )
                )

    for path, sourced in defaults.items():
        check(path, sourced.value, sourced.policy, document_path(sourced.policy, "defaults", path))

    def at_default(origin: SchemaPath) -> tuple[Policy, FieldPath]:
        owner = defaults[origin].policy
        return owner, document_path(owner, "defaults", origin)

    check_computed({}, at_default)
    for path, by_key in instances.items():
        for instance in by_key.values():
            location = (*document_path(instance.policy, "defaults", path), "instances")
            index = instance.policy.instances[path].index(instance.value)
            fixed: dict[SchemaPath, object] = {}
            for attribute, value in flatten(instance.value):
                fixed[(*path, *attribute)] = value
                check((*path, *attribute), value, instance.policy, (*location, index, *attribute))

            def in_instance(
                origin: SchemaPath,
                policy: Policy = instance.policy,
                at: FieldPath = (*location, index),
                prefix: int = len(path),
            ) -> tuple[Policy, FieldPath]:
                return policy, (*at, *origin[prefix:])

            check_computed(fixed, in_instance)
    return problems


def _plan(
    root: Section, paths: Iterable[SchemaPath], rules: Mapping[SchemaPath, FieldRules]
) -> dict[SchemaPath, tuple[str, ...]]:
    """Which children of each section the policy speaks of, sources of defaults first."""
    children: dict[SchemaPath, dict[str, None]] = {}
    for path in paths:
        for length in range(len(path)):
            children.setdefault(path[:length], {})[path[length]] = None
    plan: dict[SchemaPath, tuple[str, ...]] = {}
    for parent, names in children.items():
        ordered: list[str] = []

        def visit(name: str, parent: SchemaPath = parent, ordered: list[str] = ordered) -> None:
            if name in ordered:
                return
            default_from = rules.get((*parent, name), FieldRules()).default_from
            if default_from is not None:
                visit(default_from.field[-1])
            ordered.append(name)

        if isinstance(field_at(root, (*parent, FRAMEWORK_FIELD)), Leaf):
            # Framework-specific fields of distributed training depend on the framework.
            visit(FRAMEWORK_FIELD)
        for name in names:
            visit(name)
        plan[parent] = tuple(ordered)
    return plan


@dataclasses.dataclass(frozen=True)
class PolicyEntry:
    """One default, rule set, instance or imposed asset of an effective policy."""

    path: str
    """Its dotted document path: ``rules.compute.gpuDevicesRequest``,
    ``defaults.storage.pvc.instances[home]``, ``imposedAssets[0]``."""
    value: object
    scope: Scope


def effective_policy_document(
    policy: EffectivePolicy,
) -> tuple[dict[str, object], list[PolicyEntry]]:
    """The effective policy as a policy file writes it, and its entries with their scopes."""
    document: dict[str, object] = {}
    entries: list[PolicyEntry] = []
    root = SCHEMAS[policy.workload_type]

    def place(section: str, path: SchemaPath, value: object, *tail: str) -> str:
        location = [section, *_document_names(root, path), *tail]
        node = document
        for name in location[:-1]:
            child = node.setdefault(name, {})
            assert isinstance(child, dict)
            node = child
        node[location[-1]] = value
        return ".".join(location)

    for path, default in policy.defaults.items():
        location = place("defaults", path, default.value)
        entries.append(PolicyEntry(location, default.value, default.policy.scope))
    for path, instances in policy.instances.items():
        field = field_at(root, path)
        assert isinstance(field, Itemized)
        location = place("defaults", path, [dict(item.value) for item in instances], "instances")
        for instance in instances:
            key = instance_key(field, instance.value)
            entries.append(
                PolicyEntry(f"{location}[{key}]", dict(instance.value), instance.policy.scope)
            )
    for path, rules in policy.rules.items():
        location = place("rules", path, rules.value.to_data())
        entries.append(PolicyEntry(location, rules.value.to_data(), rules.policy.scope))
    for path, instance_rules in policy.instance_rules.items():
        data = instance_rules.value.to_data()
        location = place("rules", path, data, "instances")
        entries.append(PolicyEntry(location, data, instance_rules.policy.scope))
    if policy.imposed_assets:
        document["imposedAssets"] = [asset.value for asset in policy.imposed_assets]
        entries.extend(
            PolicyEntry(f"imposedAssets[{index}]", asset.value, asset.policy.scope)
            for index, asset in enumerate(policy.imposed_assets)
        )
    return document, entries


def _document_names(root: Section, path: SchemaPath) -> list[str]:
    names: list[str] = []
    field: Field = root
    for name in path:
        if isinstance(field, Itemized):
            names.append("attributes")
            field = field.attributes
        assert isinstance(field, Section)
        names.append(name)
        field = field.fields[name]
    return names
