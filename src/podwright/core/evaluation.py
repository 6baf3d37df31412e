"""Evaluate a submission against an effective policy: the effective workload, or every violation.

For each field the policy speaks of or the submission gives, the effective value is the
submitted one, else the policy's default: an itemized instance's own attribute, a ``defaultFrom``
computed from a sibling (source × factor), or the scope's default. Rules then judge the result:

- ``required``: a value must exist (a policy default satisfies it);
- ``canEdit: false``: a submitted value must equal the default;
- ``min``, ``max``, ``step`` (counted from ``min``, or 0), ``options``: the value must fit;
- itemized ``locked`` keys (and imposed assets, and the instances a policy leaves unnamed,
  which evaluation names ``unnamed-<digest>``) cannot be excluded or changed (restating one as
  it is in effect is no change), and with ``canAdd: false`` a submission cannot add instances
  of its own.

A rule in ``warn`` or ``audit`` mode accepts what it judges: the submitted value, the instance
added, changed or excluded stands, with the violation (so the protection of an imposed asset or
an unnamed instance is as strong as its policy's mode). Always enforced, whatever the modes: the
final workload's consistency, and a value ``defaultFrom`` computes that its field cannot take.

What the mutating webhook writes into a Workload's spec is the effective workload with the
submission's exclusions kept (:attr:`Evaluation.written`), so that it is a fixed point: evaluated
again under the same policy, as the validating webhook and the compliance status evaluate it, it
gives the same workload and the same issues (their texts aside, which can no longer tell a
default from a submitted value). Without them a default instance the submission excluded would
come back.

Rules judge every value of the effective workload, whatever produced it: the submission, a
policy or attribute default, an imposed asset, or a ``defaultFrom``; a violation names the value
and where it came from. Beyond the policy, the final workload must be runnable
(:func:`~podwright.core.workloads.inconsistencies`: a limit not below its request, maximum
replicas not below minimum ones, no field of another distributed framework), the same check a
submission rendered without policies gets.

Every violation is reported, never only the first, in the field catalogue's order
(:func:`in_catalogue_order`), whatever order the submission and the policies gave their keys
in. Each carries the policy that owns the rule,
whose enforcement mode decides its fate: ``enforce`` rejects, ``warn`` accepts with a warning,
``audit`` accepts and records it.

The admission webhook evaluates every submission under the policy of its scope, so the work that
depends on the policy alone is done once, when it is prepared (:func:`prepare`): imposed assets
resolved, each ruled field's rules looked up with its default's breaches
(:meth:`~podwright.core.effective_policy.EffectivePolicy.slots_of`), and each default instance
evaluated as every submission that leaves it untouched gets it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from podwright.core.assets import AssetCatalogue
from podwright.core.effective_policy import (
    DefaultInstance,
    EffectivePolicy,
    Slot,
    instance_key,
)
from podwright.core.policies import (
    Enforcement,
    Policy,
    PolicyError,
    SchemaPath,
    flatten,
    rule_breaches,
    same_value,
)
from podwright.core.problems import FieldProblem, shown
from podwright.core.workload_fields import (
    EXCLUDE,
    FRAMEWORK_FIELD,
    ROLES,
    SCHEMAS,
    Itemized,
    Leaf,
    Section,
    WorkloadType,
    catalogue_rank,
    field_at,
)
from podwright.core.workloads import (
    InvalidValue,
    Submission,
    check_leaf,
    inconsistencies,
    is_mapping,
)

SUBMISSION = "submission"


@dataclasses.dataclass(frozen=True)
class Violation:
    """A rule the effective workload breaks, at a dotted field path (instances named by key)."""

    field: str
    rule: str
    details: str
    policy: Policy | None = None
    """The policy that owns the rule; None for the workload's own consistency, and for a
    computed value its field cannot take (always enforced)."""

    @property
    def enforcement(self) -> Enforcement:
        """What the violation does: the owning policy's mode (consistency is always enforced)."""
        return Enforcement.ENFORCE if self.policy is None else self.policy.enforcement

    def to_json(self) -> dict[str, str]:
        """``{"field", "details", "rule"}``, as a submission error lists it."""
        return {"field": self.field, "details": self.details, "rule": self.rule}


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The outcome: an accepted effective workload with sources, or the violations."""

    workload_type: WorkloadType
    workload: Mapping[str, object]
    """Every effective value, nested as submitted (empty when rejected)."""
    sources: Mapping[str, str]
    """Where each effective leaf value came from, by dotted path."""
    values: Mapping[str, object]
    """Each effective leaf value, by the same dotted paths."""
    violations: tuple[Violation, ...]
    """Violations of enforced rules: when any, the submission is rejected."""
    warnings: tuple[Violation, ...]
    """Violations of rules in ``warn`` mode: returned to the submitter."""
    audited: tuple[Violation, ...]
    """Violations of rules in ``audit`` mode: kept for the record, not shown."""
    written: Mapping[str, object]
    """``workload`` as an admission writes it: with the submission's exclusions
    (``{key: …, exclude: true}``, after the instances in effect), which rendering drops, so
    that evaluating it again under the same policy gives ``workload`` again."""

    @property
    def accepted(self) -> bool:
        """Whether the workload may run."""
        return not self.violations

    def to_json(self) -> dict[str, object]:
        """``{"workload", "sources"}`` when accepted, else ``{"complianceIssues": [...]}``."""
        if self.accepted:
            return {"workload": dict(self.workload), "sources": dict(self.sources)}
        return {"complianceIssues": [violation.to_json() for violation in self.violations]}


def evaluate(
    policy: EffectivePolicy | PreparedPolicy,
    submission: Submission,
    workload_type: WorkloadType,
    catalogue: AssetCatalogue,
) -> Evaluation:
    """Evaluate ``submission`` (of ``workload_type``) under ``policy``.

    ``policy`` may be prepared once with :func:`prepare` (for the same catalogue) when many
    submissions are evaluated under it. Raises :class:`ValueError` if the types disagree and
    :class:`PolicyError` if an imposed asset is missing from the catalogue, references
    credentials, or cannot be mounted by this workload type: those are faults of the policy,
    not of the submission.
    """
    prepared = policy if isinstance(policy, PreparedPolicy) else prepare(policy, catalogue)
    effective = prepared.policy
    if (
        submission.workload_type is not workload_type
        or effective.workload_type is not workload_type
    ):
        raise ValueError(
            f"the submission is {submission.workload_type.value}, the policy "
            f"{effective.workload_type.value}, and {workload_type.value} was asked for"
        )
    evaluator = _Evaluator(prepared)
    written = evaluator.section(
        SCHEMAS[workload_type], submission.spec, (), "", instance=_NO_INSTANCE
    )
    workload = without_exclusions(written) if evaluator.excludes else written
    assert isinstance(workload, dict)
    for problem in inconsistencies(workload_type, workload, evaluator.sources.get):
        evaluator.violation(".".join(problem.path), problem.rule, problem.message, None)
    issues = in_catalogue_order(evaluator.issues, workload_type)
    by_mode = {
        mode: tuple(issue for issue in issues if issue.enforcement is mode) for mode in Enforcement
    }
    rejected = bool(by_mode[Enforcement.ENFORCE])
    return Evaluation(
        workload_type=workload_type,
        workload={} if rejected else workload,
        sources={} if rejected else evaluator.sources,
        values={} if rejected else evaluator.values,
        violations=by_mode[Enforcement.ENFORCE],
        warnings=by_mode[Enforcement.WARN],
        audited=by_mode[Enforcement.AUDIT],
        written={} if rejected else written,
    )


def without_exclusions(value: object) -> object:
    """``value`` (a workload, or any part of one) without the exclusions it states: what it
    runs with (only itemized instances can say ``exclude``)."""
    if type(value) is dict:
        return {name: without_exclusions(item) for name, item in value.items()}
    if type(value) is list:
        return [
            without_exclusions(item)
            for item in value
            if not (type(item) is dict and item.get(EXCLUDE) is True)
        ]
    return value


def in_catalogue_order(
    issues: Sequence[Violation], workload_type: WorkloadType
) -> tuple[Violation, ...]:
    """``issues`` in the field catalogue's order (:func:`catalogue_rank`), the issues of one
    field in the order its rules are judged: what every message, listing and report shows, so
    that it never depends on the order of the keys of the submission or the policies (an API
    server re-encodes the objects it is sent)."""
    if len(issues) < 2:
        return tuple(issues)
    root = SCHEMAS[workload_type]
    return tuple(sorted(issues, key=lambda issue: catalogue_rank(root, issue.field)))


@dataclasses.dataclass(frozen=True)
class PreparedPolicy:
    """An effective policy with its imposed assets resolved in a catalogue."""

    policy: EffectivePolicy
    names: Mapping[SchemaPath, Mapping[str, None]]
    """For each section, the fields the policy or its imposed assets speak of, in order."""
    instances: Mapping[SchemaPath, Mapping[str, DefaultInstance]]
    """Default instances (the policy's and imposed assets'), by field and key."""
    untouched: Mapping[SchemaPath, Mapping[str, EvaluatedInstance]] = dataclasses.field(
        default_factory=dict
    )
    """Each default instance evaluated as a submission that does not mention it gets it (the
    same for every such submission), by field and key; evaluation evaluates any other."""


@dataclasses.dataclass(frozen=True)
class EvaluatedInstance:
    """What evaluating one instance of an itemized field adds to an evaluation."""

    instance: Mapping[str, object]
    """The effective instance: its key and attributes."""
    sources: Mapping[str, str]
    values: Mapping[str, object]
    issues: tuple[Violation, ...]


def prepare(policy: EffectivePolicy, catalogue: AssetCatalogue) -> PreparedPolicy:
    """Resolve ``policy``'s imposed assets in ``catalogue``, and evaluate each default instance
    as a submission that leaves it untouched gets it; raises :class:`PolicyError` as
    :func:`evaluate` does. Evaluating many submissions, prepare once."""
    resolved = _with_imposed_assets(policy, catalogue)
    root = SCHEMAS[policy.workload_type]
    untouched: dict[SchemaPath, dict[str, EvaluatedInstance]] = {}
    for path, by_key in resolved.instances.items():
        field = field_at(root, path)
        assert isinstance(field, Itemized)
        for key, default in by_key.items():
            evaluator = _Evaluator(resolved)
            instance = evaluator.instance(
                field, path, ".".join(path), key, default=default, change=None
            )
            untouched.setdefault(path, {})[key] = EvaluatedInstance(
                instance, evaluator.sources, evaluator.values, tuple(evaluator.issues)
            )
    return dataclasses.replace(resolved, untouched=untouched)


def _with_imposed_assets(policy: EffectivePolicy, catalogue: AssetCatalogue) -> PreparedPolicy:
    """``policy`` with its imposed assets resolved in ``catalogue`` (see :func:`prepare`)."""
    imposed = resolve_imposed_assets(policy, catalogue)
    if not imposed:
        return PreparedPolicy(policy, policy.names, policy.instance_entries)
    root = SCHEMAS[policy.workload_type]
    names = {path: dict(children) for path, children in policy.names.items()}
    instances = {path: dict(by_key) for path, by_key in policy.instance_entries.items()}
    for path, imposed_instances in imposed.items():
        field = field_at(root, path)
        assert isinstance(field, Itemized)
        by_key = instances.setdefault(path, {})
        for instance in imposed_instances:
            by_key[instance_key(field, instance.attributes)] = instance
        for length in range(len(path)):
            names.setdefault(path[:length], {})[path[length]] = None
    return PreparedPolicy(policy, names, instances)


@dataclasses.dataclass(slots=True)
class _Instance:
    """The itemized instance being evaluated: its default attributes and their source.

    A :class:`DefaultInstance` serves as one too.
    """

    attributes: Mapping[str, object] | None
    source: str | None


_NO_INSTANCE = _Instance(None, None)
_SUBMITTED_INSTANCE = _Instance({}, SUBMISSION)
_NOTHING_PLANNED: Mapping[str, None] = {}
_NOTHING_EVALUATED: Mapping[str, EvaluatedInstance] = {}
_ABSENT = object()


def resolve_imposed_assets(
    policy: EffectivePolicy, catalogue: AssetCatalogue
) -> dict[SchemaPath, list[DefaultInstance]]:
    """The storage instances the policy's imposed assets become, by storage field path.

    Raises :class:`PolicyError` for an asset missing from the catalogue, one that references
    credentials, or one of a kind the workload type cannot mount.
    """
    imposed: dict[SchemaPath, list[DefaultInstance]] = {}
    problems: list[FieldProblem] = []
    root = SCHEMAS[policy.workload_type]
    prefixes: list[SchemaPath] = (
        [(role,) for role in ROLES] if policy.workload_type is WorkloadType.DISTRIBUTED else [()]
    )
    for sourced in policy.imposed_assets:
        owner = sourced.policy
        location = (
            *owner.document_prefix,
            "imposedAssets",
            owner.imposed_assets.index(sourced.value),
        )
        asset = catalogue.assets.get(sourced.value)
        if asset is None:
            problems.append(
                FieldProblem(
                    location, f"asset {sourced.value!r} is not in the catalogue", owner.source
                )
            )
            continue
        if asset.references_credentials:
            problems.append(
                FieldProblem(
                    location,
                    f"asset {asset.id!r} ({asset.name}) references credentials and cannot be "
                    "imposed",
                    owner.source,
                )
            )
            continue
        for prefix in prefixes:
            path = (*prefix, *asset.storage_field)
            if field_at(root, path) is None:
                problems.append(
                    FieldProblem(
                        location,
                        f"asset {asset.id!r} is a {asset.kind.value} source, which "
                        f"{policy.workload_type.value} workloads cannot mount",
                        owner.source,
                    )
                )
                break
            imposed.setdefault(path, []).append(
                DefaultInstance(
                    asset.instance(), f"imposed asset {asset.id} ({owner.scope})", owner, True
                )
            )
    if problems:
        raise PolicyError(problems)
    return imposed


@dataclasses.dataclass
class _Evaluator:
    prepared: PreparedPolicy
    sources: dict[str, str] = dataclasses.field(default_factory=dict)
    values: dict[str, object] = dataclasses.field(default_factory=dict)
    issues: list[Violation] = dataclasses.field(default_factory=list)
    excludes: bool = False
    """Whether the output states an exclusion."""

    def violation(self, field: str, rule: str, details: str, policy: Policy | None) -> bool:
        """Record a violation; whether it is enforced (else what it judges stands, as the
        rule's warn or audit mode accepts it)."""
        violation = Violation(field, rule, details, policy)
        self.issues.append(violation)
        return violation.enforcement is Enforcement.ENFORCE

    def section(
        self,
        section: Section,
        submitted: Mapping[str, object] | None,
        schema_path: SchemaPath,
        display: str,
        *,
        instance: _Instance | DefaultInstance,
        framework: str | None = None,
    ) -> dict[str, object]:
        planned = self.prepared.names.get(schema_path, _NOTHING_PLANNED)
        names: Mapping[str, object] = planned
        if submitted or instance.attributes:
            # The union, in order; only the keys matter.
            names = {**planned, **(submitted or _NOTHING_PLANNED), **(instance.attributes or {})}
        output: dict[str, object] = {}
        slots = self.prepared.policy.slots_of(schema_path, section)
        prefix = f"{display}." if display else ""
        instance_defaults = instance.attributes
        sources, values = self.sources, self.values
        for name in names:
            slot = slots.get(name)
            if slot is None:
                continue
            given = submitted.get(name, _ABSENT) if submitted else _ABSENT
            field, path, default_entry, ruling, plain = slot
            if plain:
                # The common case, inline: no rule, so the submitted value or a default.
                if given is not _ABSENT:
                    value, source = given, SUBMISSION
                elif instance_defaults is not None and name in instance_defaults:
                    value, source = instance_defaults[name], instance.source or SUBMISSION
                elif default_entry is not None:
                    value, source = default_entry
                else:
                    continue
                where = prefix + name
                sources[where] = source
                values[where] = output[name] = value
                if name == FRAMEWORK_FIELD and isinstance(value, str):
                    framework = value
                continue
            if ruling is not None:
                if (
                    ruling.idle
                    and given is _ABSENT
                    and (instance_defaults is None or name not in instance_defaults)
                ):
                    continue  # nothing gives it a value, and none is required
                value = self.leaf(
                    slot,
                    prefix + name,
                    given,
                    siblings=output,
                    instance=instance,
                    framework=framework,
                )
            else:
                assert not isinstance(field, Leaf)
                value = self.field(
                    field,
                    name,
                    path,
                    prefix + name,
                    given=given,
                    instance=instance,
                    framework=framework,
                )
            if value is not _ABSENT:
                output[name] = value
                if name == FRAMEWORK_FIELD and isinstance(value, str):
                    framework = value
        if not submitted or instance_defaults is not None:
            return output
        # Nested as submitted: the submission's fields first, in its order.
        ordered = {name: output[name] for name in submitted if name in output}
        return ordered | output

    def field(
        self,
        field: Section | Itemized,
        name: str,
        path: SchemaPath,
        where: str,
        *,
        given: object,
        instance: _Instance | DefaultInstance,
        framework: str | None,
    ) -> object:
        if isinstance(field, Itemized):
            items = given if isinstance(given, list) else None
            instances = self.itemized(field, path, where, items)
            return instances if instances or items is not None else _ABSENT
        inner_defaults = instance.attributes.get(name) if instance.attributes else None
        nested = _Instance(inner_defaults if is_mapping(inner_defaults) else None, instance.source)
        result = self.section(
            field,
            given if is_mapping(given) else None,
            path,
            where,
            instance=nested,
            framework=framework if name in ROLES else None,
        )
        return result if result or given is not _ABSENT else _ABSENT

    def leaf(
        self,
        slot: Slot,
        where: str,
        given: object,
        *,
        siblings: Mapping[str, object],
        instance: _Instance | DefaultInstance,
        framework: str | None,
    ) -> object:
        field, path, _, ruling, _ = slot
        assert isinstance(field, Leaf)
        assert ruling is not None
        name = path[-1]
        rules = ruling.rules
        if (
            field.frameworks
            and given is _ABSENT
            and framework is not None
            and framework not in field.frameworks
        ):
            # A policy's default for another framework's field does not apply; a submitted
            # one is refused with the final workload's inconsistencies.
            return _ABSENT
        breaches: Sequence[tuple[str, str]] | None = None  # None: the value is to be judged
        if given is not _ABSENT:
            value: object = given
            source: str | None = SUBMISSION
            if rules.can_edit is False:
                default, _, _ = self.default(slot, siblings, instance)
                if default is _ABSENT or not same_value(field, given, default):
                    details = (
                        f"the policy gives no default and allows no value; got {shown(given)}"
                        if default is _ABSENT
                        else f"the policy's default is {shown(default)} and cannot be changed; "
                        f"got {shown(given)}"
                    )
                    self.violation(where, "canEdit", details, ruling.owner)
        elif instance.attributes is not None and name in instance.attributes:
            value, source = instance.attributes[name], instance.source
        else:
            value, source, breaches = self.default(slot, siblings, instance)
            if value is _ABSENT or source is None:
                if rules.required:
                    self.violation(
                        where,
                        "required",
                        "a value is required, and neither the submission nor the policy gives one",
                        ruling.owner,
                    )
                return _ABSENT
            if breaches is None:
                # Computed (defaultFrom) from a sibling's value: one the field cannot take (a
                # GPU portion above 1, a negative amount) is refused whatever the policy's mode,
                # as the final workload's inconsistencies are.
                try:
                    check_leaf(field, value)
                except InvalidValue as error:
                    self.violation(
                        where, "defaultFrom", f"{shown(value)} ({source}): {error}", None
                    )
        if rules.judges_values:
            if breaches is None:
                breaches = rule_breaches(field, rules, value, source or SUBMISSION)
            for rule, details in breaches:
                self.violation(where, rule, details, ruling.owner)
        self.sources[where] = source or SUBMISSION
        self.values[where] = value
        return value

    def default(
        self,
        slot: Slot,
        siblings: Mapping[str, object],
        instance: _Instance | DefaultInstance,
    ) -> tuple[object, str | None, Sequence[tuple[str, str]] | None]:
        """The value a leaf gets when none is submitted, its source, and the rules it breaches
        when they are known already (the policy default's), else None."""
        _, path, entry, ruling, _ = slot
        assert ruling is not None
        name = path[-1]
        if instance.attributes is not None and name in instance.attributes:
            return instance.attributes[name], instance.source, None
        default_from = ruling.rules.default_from
        if default_from is not None and default_from.field[-1] in siblings:
            computed = default_from.compute(siblings[default_from.field[-1]])
            return computed, ruling.default_from_source, None
        if entry is None:
            return _ABSENT, None, None
        return entry[0], entry[1], ruling.default_breaches

    def itemized(
        self,
        field: Itemized,
        path: SchemaPath,
        where: str,
        submitted: Sequence[object] | None,
    ) -> list[dict[str, object]]:
        defaults = self.prepared.instances.get(path, {})
        sourced_rules = self.prepared.policy.instance_rules.get(path)
        owner = sourced_rules.policy if sourced_rules else None
        locked = sourced_rules.value.locked if sourced_rules else ()
        can_add = sourced_rules.value.can_add if sourced_rules else None
        order = list(defaults)
        changes: dict[str, Mapping[str, object]] = {}
        excluded: list[str] = []
        for item in submitted or ():
            assert is_mapping(item)
            key = instance_key(field, item)
            default = defaults.get(key)
            if default is None:
                if item.get(EXCLUDE):
                    excluded.append(key)  # nothing to exclude today; the exclusion stands
                    continue
                if can_add is False and self.violation(
                    f"{where}[{key}]",
                    "canAdd",
                    f"the policy allows no instances but its own "
                    f"({_listed(defaults) or 'none'}); {key!r} is added",
                    owner,
                ):
                    continue
                order.append(key)
                changes[key] = item
                continue
            protected = key in locked or default.imposed or default.unnamed
            rule_owner = default.policy if default.imposed or default.unnamed else owner
            if item.get(EXCLUDE):
                if not protected or not self.violation(
                    f"{where}[{key}]",
                    "locked",
                    f"{key!r} is {_why_locked(default)} and cannot be excluded",
                    rule_owner,
                ):
                    order.remove(key)
                    excluded.append(key)
                continue
            if protected:
                # Restating the instance as it is in effect (attribute defaults included, as
                # an effective workload written back states it) changes nothing.
                in_effect = self.untouched_instance(field, path, where, key, default)
                changed = _changed_attributes(field, item, in_effect)
                if changed and self.violation(
                    f"{where}[{key}]",
                    "locked",
                    f"{key!r} is {_why_locked(default)} and cannot be modified "
                    f"(changed: {', '.join(changed)})",
                    rule_owner,
                ):
                    continue
            changes[key] = item
        instances = self.instances(field, path, where, order, changes)
        if excluded:
            self.excludes = True
            instances.extend({field.key: key, EXCLUDE: True} for key in excluded)
        return instances

    def instances(
        self,
        field: Itemized,
        path: SchemaPath,
        where: str,
        order: Sequence[str],
        changes: Mapping[str, Mapping[str, object]],
    ) -> list[dict[str, object]]:
        """The effective instances of ``order``: each default with the submission's change,
        or as the submission gives it."""
        defaults = self.prepared.instances.get(path, {})
        untouched = self.prepared.untouched.get(path, _NOTHING_EVALUATED)
        instances: list[dict[str, object]] = []
        for key in order:
            change = changes.get(key)
            evaluated = untouched.get(key) if change is None else None
            if evaluated is None:
                instances.append(
                    self.instance(field, path, where, key, default=defaults.get(key), change=change)
                )
            else:
                self.sources.update(evaluated.sources)
                self.values.update(evaluated.values)
                self.issues.extend(evaluated.issues)
                instances.append(_fresh(evaluated.instance))
        return instances

    def untouched_instance(
        self, field: Itemized, path: SchemaPath, where: str, key: str, default: DefaultInstance
    ) -> Mapping[str, object]:
        """The default instance ``key`` as a submission that leaves it untouched gets it."""
        evaluated = self.prepared.untouched.get(path, _NOTHING_EVALUATED).get(key)
        if evaluated is not None:
            return evaluated.instance
        return _Evaluator(self.prepared).instance(
            field, path, where, key, default=default, change=None
        )

    def instance(
        self,
        field: Itemized,
        path: SchemaPath,
        where: str,
        key: str,
        *,
        default: DefaultInstance | None,
        change: Mapping[str, object] | None,
    ) -> dict[str, object]:
        """The effective instance ``key`` of the itemized ``field`` at ``where``: ``default``
        (if any) with the submission's ``change`` (if any)."""
        item_where = f"{where}[{key}]"
        instance = default or _SUBMITTED_INSTANCE
        key_where = f"{item_where}.{field.key}"
        self.sources[key_where] = instance.source or SUBMISSION
        self.values[key_where] = key
        attributes = self.section(field.attributes, change, path, item_where, instance=instance)
        # The key is an attribute too, which a change names: the instance's source stays.
        self.sources[key_where] = instance.source or SUBMISSION
        return {field.key: key, **attributes}


def _fresh(data: Mapping[str, object]) -> dict[str, object]:
    """A copy of an effective section, down to its nested sections (an evaluation's output is
    its caller's)."""
    return {name: _fresh(value) if type(value) is dict else value for name, value in data.items()}


def _why_locked(default: DefaultInstance) -> str:
    if default.imposed:
        return f"an {default.source}"
    if default.unnamed:
        return f"an unnamed {default.source}"
    return f"locked by {default.policy.scope}"


def _changed_attributes(
    field: Itemized, item: Mapping[str, object], defaults: Mapping[str, object]
) -> list[str]:
    changed: list[str] = []
    for path, value in flatten(
        {name: v for name, v in item.items() if name not in (field.key, EXCLUDE)}
    ):
        attribute = field_at(field.attributes, path)
        default: object = defaults
        for name in path:
            default = default.get(name, _ABSENT) if isinstance(default, Mapping) else _ABSENT
        if (
            default is _ABSENT
            or not isinstance(attribute, Leaf)
            or not same_value(attribute, value, default)
        ):
            changed.append(".".join(path))
    return changed


def _listed(keys: Mapping[str, object]) -> str:
    return ", ".join(repr(key) for key in keys)
