"""Workload submissions, read from plain data and checked against the field catalogue.

A researcher's submission names fields in the catalogue's camelCase dotted paths. Before any
policy looks at it, every field must exist, be supported by the workload type, and hold a value of
its type; this module reports every problem at once, each at the path written in the file. The
same value checks read policy defaults, option values and asset specs, so a value means the same
thing wherever it is written.

A submission is written bare (the fields themselves), or in a document that states its type and
name: a ``Workload`` object (read by :mod:`~podwright.core.workload_documents`, through
:func:`submission_from_fields`), or the deprecated wrapped form this module reads::

    type: training          # workspace | training | distributed | inference
    name: resnet-50         # optional
    spec:
      image: pytorch/pytorch:2.4
      compute: {gpuDevicesRequest: 2}

A document's problems are all reported together: those of its envelope (the type, the name,
unknown keys) and those of its fields.

Beyond each value on its own, a workload *as it will run* must be consistent:
:func:`inconsistencies` finds the fields that contradict each other (a limit below its request,
a field of another distributed framework). It judges the final values, whatever produced them,
and every path to a running workload calls it: evaluation under policies, and rendering a
submission taken as written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, TypeGuard

from podwright.core import quantities
from podwright.core.field_paths import FieldPath
from podwright.core.k8s_names import dns1123_label_problem
from podwright.core.problems import (
    FieldProblem,
    ProblemsError,
    describe,
    one_of,
    shown,
    unknown_field,
)
from podwright.core.workload_fields import (
    BOUNDED_PAIRS,
    EXCLUDE,
    FRAMEWORK_FIELD,
    ROLES,
    SCHEMAS,
    Field,
    Itemized,
    Leaf,
    Section,
    ValueType,
    WorkloadType,
    field_at,
    supporting_types,
)

WRAPPED_FIELDS = ("type", "name", "spec")
_ROLE_NAMES = frozenset(ROLES)
CONSISTENCY = "consistency"
"""The rule an inconsistency between two bounded fields breaks."""


class InvalidValue(ValueError):  # noqa: N818 (a value, not an error, is invalid)
    """A value that cannot stand for its field; the message says what was given and allowed."""


class WorkloadInputError(ProblemsError):
    """The submission is not a valid workload of its type; ``problems`` lists every reason."""


@dataclasses.dataclass(frozen=True)
class Submission:
    """A checked submission: ``spec`` holds only known, supported fields with valid values."""

    workload_type: WorkloadType
    spec: Mapping[str, object]
    name: str | None = None
    spec_path: FieldPath = ()
    """Where ``spec`` sits in the document it was read from: ``("spec",)`` when wrapped."""


def parse_workload_type(value: object) -> WorkloadType:
    """``"training"`` → :attr:`WorkloadType.TRAINING`; anything else is a ValueError."""
    if isinstance(value, str) and value in WorkloadType.__members__.values():
        return WorkloadType(value)
    raise ValueError(
        f"expected {one_of([kind.value for kind in WorkloadType])}, got {describe(value)}"
    )


def submission_from_data(data: object, workload_type: WorkloadType | None = None) -> Submission:
    """Read a submission, bare or wrapped; ``workload_type`` is required unless the file says.

    Every problem is reported at once: the envelope's (an unknown key, a bad type or name) with
    the spec's, which is checked whenever the workload type is known.
    """
    if not isinstance(data, Mapping):
        raise WorkloadInputError(
            [FieldProblem((), f"expected a workload (a mapping), got {describe(data)}")]
        )
    if "spec" not in data:
        if workload_type is None:
            raise WorkloadInputError(
                [
                    FieldProblem(
                        (),
                        "the workload type is not given: write the workload as a Workload "
                        "(its spec.type beside its fields), or pass the type",
                    )
                ]
            )
        return Submission(workload_type, check_spec(data, workload_type, ()))
    problems = [
        FieldProblem((key,), unknown_field(key, WRAPPED_FIELDS))
        for key in data
        if key not in WRAPPED_FIELDS
    ]
    try:
        submission = submission_from_fields(
            data.get("type"),
            data.get("name"),
            data["spec"],
            workload_type,
            type_path=("type",),
            name_path=("name",),
            spec_path=("spec",),
        )
    except WorkloadInputError as error:
        raise WorkloadInputError([*problems, *error.problems]) from None
    if problems:
        raise WorkloadInputError(problems)
    return submission


def submission_from_fields(
    written_type: object,
    name: object,
    fields: object,
    workload_type: WorkloadType | None = None,
    *,
    type_path: FieldPath,
    name_path: FieldPath,
    spec_path: FieldPath,
) -> Submission:
    """A submission from its parts, wherever a document keeps them: the type it states (None:
    not stated), its name (None: none) and its fields, at ``type_path``, ``name_path`` and
    ``spec_path``; ``workload_type`` is the type asked for (a different stated type is a
    problem naming both). Raises :class:`WorkloadInputError` with every problem; the fields are
    checked whenever the type is known, the name once the fields are.
    """
    problems: list[FieldProblem] = []
    if written_type is not None:
        try:
            stated = parse_workload_type(written_type)
        except ValueError as error:
            problems.append(FieldProblem(type_path, str(error)))
        else:
            if workload_type is not None and workload_type is not stated:
                problems.append(
                    FieldProblem(
                        type_path,
                        f"the file says {stated.value!r} but {workload_type.value!r} was asked for",
                    )
                )
            workload_type = stated
    elif workload_type is None:
        problems.append(
            FieldProblem(type_path[:-1], "the workload type is not given: add 'type: ...'")
        )
    if name is not None and not isinstance(name, str):
        problems.append(FieldProblem(name_path, f"expected a string, got {describe(name)}"))
    spec: dict[str, object] | None = None
    if workload_type is not None:
        checker = FieldChecker(workload_type, submission=True)
        spec = checker.section(SCHEMAS[workload_type], fields, spec_path, ())
        problems.extend(checker.problems)
        if isinstance(name, str) and (
            problem := workload_name_problem(name, workload_type, spec or {})
        ):
            problems.append(FieldProblem(name_path, f"{name!r} {problem}"))
    if problems:
        raise WorkloadInputError(problems)
    assert workload_type is not None
    assert spec is not None
    return Submission(
        workload_type, spec, name if isinstance(name, str) else None, spec_path=spec_path
    )


def workload_name_problem(
    name: str, workload_type: WorkloadType, workload: Mapping[str, object]
) -> str | None:
    """Why ``name`` cannot name a workload of ``workload_type``, or None.

    A workload's name names its resource and Services, and pods take it as their host name:
    an RFC 1035 label (a letter first). The training operator appends ``-worker-<index>`` to a
    distributed job's name for each replica's Service, so those names are shorter still.
    """
    limit = 63
    if workload_type is WorkloadType.DISTRIBUTED:
        worker = workload.get("worker")
        workers = worker.get("numWorkers") if isinstance(worker, Mapping) else None
        count = workers if isinstance(workers, int) and not isinstance(workers, bool) else 1
        limit -= len("-worker-") + len(str(max(count - 1, 0)))
    problem = dns1123_label_problem(name)
    if problem is None and not name[0].isalpha():
        problem = "must start with a letter (it names Services)"
    if problem is None and len(name) > limit:
        problem = f"must be at most {limit} characters for a {workload_type.value} workload"
    return problem


def check_spec(
    data: object, workload_type: WorkloadType, path: FieldPath, *, running: bool = False
) -> dict[str, object]:
    """The submitted fields, checked against ``workload_type``; raises with every problem.
    ``running``: the workload as it runs, without the instances it excludes (else they are
    kept, marked, for an evaluation to exclude them from the policy's defaults)."""
    checker = FieldChecker(workload_type, submission=True, running=running)
    checked = checker.section(SCHEMAS[workload_type], data, path, ())
    if checker.problems:
        raise WorkloadInputError(checker.problems)
    assert checked is not None
    return checked


@dataclasses.dataclass
class FieldChecker:
    """Checks values against the catalogue, collecting every problem in ``problems``.

    ``workload_type`` (when known) tells an unsupported field from an unknown one;
    ``submission`` allows ``exclude`` in the instances of itemized fields, which ``running``
    drops (what runs has no excluded instance). Each method returns
    the checked value, or None when the value is unusable (and its problems are recorded).
    Null values in a mapping are dropped: YAML's ``field:`` means "not given".
    """

    workload_type: WorkloadType | None
    submission: bool
    running: bool = False
    problems: list[FieldProblem] = dataclasses.field(default_factory=list)

    def section(
        self, section: Section, data: object, path: FieldPath, schema_path: tuple[str, ...]
    ) -> dict[str, object] | None:
        """Check a mapping of fields; ``schema_path`` is its place in the catalogue."""
        if not is_mapping(data):
            self.problems.append(
                FieldProblem(path, f"expected a mapping of fields, got {describe(data)}")
            )
            return None
        fields = section.fields
        checked: dict[str, object] = {}
        for name, raw in data.items():
            field = fields.get(name) if isinstance(name, str) else None
            if field is None:
                message = missing_field_message(section, name, schema_path, self.workload_type)
                self.problems.append(FieldProblem((*path, name), message))
                continue
            if raw is None:
                continue
            if type(field) is Leaf and field.value_type is not ValueType.ARRAY:
                # The common case, inline: a scalar, whose path is only built for a problem.
                try:
                    checked[name] = check_leaf(field, raw)
                except InvalidValue as error:
                    self.problems.append(FieldProblem((*path, name), str(error)))
                continue
            inner = schema_path if _is_roles(section) else (*schema_path, name)
            value = self.field(field, raw, (*path, name), inner)
            if value is not None:
                checked[name] = value
        return checked

    def field(
        self, field: Field, raw: object, path: FieldPath, schema_path: tuple[str, ...]
    ) -> object | None:
        """Check one field's value, of any kind."""
        if isinstance(field, Section):
            return self.section(field, raw, path, schema_path)
        if isinstance(field, Itemized):
            return self.instances(field, raw, path, schema_path)
        try:
            return self.leaf(field, raw, path, schema_path)
        except InvalidValue as error:
            self.problems.append(FieldProblem(path, str(error)))
            return None

    def instances(
        self, field: Itemized, raw: object, path: FieldPath, schema_path: tuple[str, ...]
    ) -> list[dict[str, object]] | None:
        """Check an itemized field's list of instances: keys present and unique."""
        if not isinstance(raw, list):
            self.problems.append(
                FieldProblem(
                    path,
                    f"expected a list of instances, each with its {field.key!r}, "
                    f"got {describe(raw)}",
                )
            )
            return None
        instances: list[dict[str, object]] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(raw):
            item_path = (*path, index)
            if not is_mapping(item):
                self.problems.append(
                    FieldProblem(
                        item_path, f"expected an instance (a mapping), got {describe(item)}"
                    )
                )
                continue
            key = item.get(field.key)
            # A policy's default storage instance may go unnamed (Itemized.unnamed_defaults).
            unnamed = key is None and field.unnamed_defaults and not self.submission
            if not unnamed and (not isinstance(key, str) or not key):
                got = "" if key is None else f", got {describe(key)}"
                self.problems.append(
                    FieldProblem(
                        item_path,
                        f"every instance needs its key {field.key!r} (a non-empty string){got}",
                    )
                )
                continue
            if key in seen:
                self.problems.append(
                    FieldProblem(
                        (*item_path, field.key),
                        f"{key!r} is given twice (first at index {seen[key]}); "
                        f"{field.key!r} identifies an instance",
                    )
                )
                continue
            if isinstance(key, str):
                seen[key] = index
            marked = EXCLUDE in item
            attributes = (
                {name: value for name, value in item.items() if name != EXCLUDE} if marked else item
            )
            checked = self.section(field.attributes, attributes, item_path, schema_path)
            excluded = marked and self._exclude(item[EXCLUDE], (*item_path, EXCLUDE))
            if checked is not None and not (excluded and self.running):
                if excluded:
                    checked[EXCLUDE] = True
                instances.append(checked)
        return instances

    def _exclude(self, value: object, path: FieldPath) -> bool:
        if not self.submission:
            self.problems.append(
                FieldProblem(
                    path, "only a submission can exclude an instance; a policy leaves it out"
                )
            )
            return False
        if not isinstance(value, bool):
            self.problems.append(
                FieldProblem(path, f"expected true or false, got {describe(value)}")
            )
            return False
        return value

    def leaf(
        self, leaf: Leaf, raw: object, path: FieldPath, schema_path: tuple[str, ...]
    ) -> object | None:
        """Check a one-value field; raises :class:`InvalidValue` for a scalar's problem."""
        if leaf.value_type is not ValueType.ARRAY:
            return check_leaf(leaf, raw)
        items = _as_list(leaf, raw)
        if not isinstance(leaf.item, Section):
            return check_leaf(leaf, items)
        before = len(self.problems)
        checked = [
            self.section(leaf.item, entry, (*path, index), schema_path)
            for index, entry in enumerate(items)
        ]
        return None if len(self.problems) > before else checked


def check_leaf(leaf: Leaf, raw: object) -> object:
    """``raw`` as a value of ``leaf``, or :class:`InvalidValue` saying what the field allows."""
    kind = leaf.value_type
    if kind is ValueType.BOOLEAN:
        if not isinstance(raw, bool):
            raise InvalidValue(f"expected true or false, got {describe(raw)}")
        return raw
    if kind is ValueType.STRING:
        if not isinstance(raw, str):
            raise InvalidValue(f"expected a string, got {describe(raw)}")
        if leaf.choices and raw not in leaf.choices:
            raise InvalidValue(f"expected {one_of(leaf.choices)}, got {describe(raw)}")
        return raw
    if kind is ValueType.ARRAY:
        items = _as_list(leaf, raw)
        if isinstance(leaf.item, Section):
            checker = FieldChecker(None, submission=False)
            checked = checker.leaf(leaf, items, (), ())
            if checker.problems:
                raise InvalidValue(str(checker.problems[0]))
            return checked
        assert leaf.item is not None
        element = Leaf(leaf.item)
        for index, entry in enumerate(items):
            try:
                check_leaf(element, entry)
            except InvalidValue as error:
                raise InvalidValue(f"item {index}: {error}") from None
        return items
    amount = numeric_value(kind, raw)
    if leaf.minimum is not None and amount < leaf.minimum:
        raise InvalidValue(f"must be at least {leaf.minimum}, got {describe(raw)}")
    if leaf.maximum is not None and amount > leaf.maximum:
        raise InvalidValue(f"must be at most {leaf.maximum}, got {describe(raw)}")
    return raw


def numeric_value(kind: ValueType, raw: object) -> Decimal:
    """The exact amount of an integer, number or quantity value; InvalidValue if it is none."""
    if type(raw) is int:  # the common case, whatever the kind (a bool's type is bool)
        return Decimal(raw)
    if kind is ValueType.QUANTITY:
        try:
            return quantities.parse(raw)
        except quantities.QuantityError as error:
            raise InvalidValue(str(error)) from None
    if isinstance(raw, bool) or not isinstance(raw, int | float | Decimal):
        expected = "an integer" if kind is ValueType.INTEGER else "a number"
        raise InvalidValue(f"expected {expected}, got {describe(raw)}")
    if kind is ValueType.INTEGER and not isinstance(raw, int):
        raise InvalidValue(f"expected an integer, got {describe(raw)}")
    amount = Decimal(repr(raw)) if isinstance(raw, float) else Decimal(raw)
    if not amount.is_finite():
        raise InvalidValue(f"expected a finite number, got {describe(raw)}")
    return amount


def is_mapping(value: object) -> TypeGuard[Mapping[Any, Any]]:
    """Whether ``value`` is a mapping; a dict is told first, cheaply (an isinstance check
    against the ABC is slow, and every mapping of parsed data is a dict)."""
    return type(value) is dict or isinstance(value, Mapping)


def _as_list(leaf: Leaf, raw: object) -> list[object]:
    if (
        isinstance(raw, str)
        and leaf.item is ValueType.INTEGER
        and all(part.strip().isdigit() for part in raw.split(","))
    ):
        # The reference's own spelling of a list of group ids: "1000,2000".
        return [int(part) for part in raw.split(",")]
    if not isinstance(raw, list):
        raise InvalidValue(f"expected a list, got {describe(raw)}")
    return raw


def _is_roles(section: Section) -> bool:
    return section.fields.keys() == _ROLE_NAMES


def missing_field_message(
    section: Section,
    name: object,
    schema_path: tuple[str, ...],
    workload_type: WorkloadType | None,
) -> str:
    """Why ``section`` has no field ``name``: unknown, unsupported by the type, or misplaced."""
    if not isinstance(name, str):
        return f"field names are strings, got {describe(name)}"
    if _is_roles(section):
        return f"distributed training puts every field under 'master' or 'worker', not {name!r}"
    supported = supporting_types((*schema_path, name))
    if not supported or workload_type is None:
        return unknown_field(name, section.fields)
    if workload_type in supported:
        return f"{name!r} belongs in the 'worker' section of distributed training"
    names = ", ".join(kind.value for kind in WorkloadType if kind in supported)
    return f"{name!r} is not supported for {workload_type.value} workloads (only for {names})"


@dataclasses.dataclass(frozen=True)
class Inconsistency:
    """Fields of a workload that contradict each other, so that it cannot run as it is."""

    path: tuple[str, ...]
    """The field at fault, below the workload's root (``("worker", "slotsPerWorker")``)."""
    rule: str
    """:data:`CONSISTENCY` (a bound below its pair) or ``distributedFramework``."""
    message: str


Origin = Callable[[str], str | None]
"""Where the value at a dotted path came from (``policy default (cluster prod)``), if known."""


def inconsistencies(
    workload_type: WorkloadType,
    workload: Mapping[str, object],
    origin: Origin | None = None,
) -> list[Inconsistency]:
    """Everything that keeps ``workload`` (of valid values) from running as it is.

    ``workload`` is final: the submission as written, or the effective workload of an
    evaluation, whatever produced each value. Wherever both fields of a
    :data:`~podwright.core.workload_fields.BOUNDED_PAIRS` pair are set, the upper may not be
    below the lower; a field of one distributed framework may not be set for another.
    ``origin`` names where a value came from, for the messages.
    """
    root = SCHEMAS[workload_type]
    roles: tuple[tuple[str, ...], ...] = (
        tuple((role,) for role in ROLES) if workload_type is WorkloadType.DISTRIBUTED else ((),)
    )
    found: list[Inconsistency] = []

    def described(path: tuple[str, ...], value: object) -> str:
        source = origin(".".join(path)) if origin else None
        return f"{shown(value)} ({source})" if source else shown(value)

    for role in roles:
        role_data = _mapping_at(workload, role)
        for section_path, pairs in BOUNDED_PAIRS.items():
            data = _mapping_at(role_data, section_path)
            for lower, upper in pairs:
                if lower not in data or upper not in data:
                    continue
                field = field_at(root, (*role, *section_path, upper))
                if not isinstance(field, Leaf):
                    continue
                if numeric_value(field.value_type, data[upper]) < numeric_value(
                    field.value_type, data[lower]
                ):
                    at = (*role, *section_path)
                    found.append(
                        Inconsistency(
                            (*at, upper),
                            CONSISTENCY,
                            f"{upper} {described((*at, upper), data[upper])} is below "
                            f"{lower} {described((*at, lower), data[lower])}",
                        )
                    )
        framework = role_data.get(FRAMEWORK_FIELD)
        if not isinstance(framework, str):
            continue
        for name, value in role_data.items():
            field = field_at(root, (*role, name))
            if isinstance(field, Leaf) and field.frameworks and framework not in field.frameworks:
                found.append(
                    Inconsistency(
                        (*role, name),
                        FRAMEWORK_FIELD,
                        f"{name} {described((*role, name), value)} applies only to "
                        f"{' and '.join(sorted(field.frameworks))}; the framework is "
                        f"{described((*role, FRAMEWORK_FIELD), framework)}",
                    )
                )
    return found


def check_runnable(
    workload_type: WorkloadType, workload: Mapping[str, object], path: FieldPath = ()
) -> None:
    """Raise :class:`WorkloadInputError` with every :func:`inconsistencies` of ``workload``,
    each at its field below ``path`` (where the workload sits in its document)."""
    found = inconsistencies(workload_type, workload)
    if found:
        raise WorkloadInputError(
            [FieldProblem((*path, *problem.path), problem.message) for problem in found]
        )


def _mapping_at(data: Mapping[str, object], path: tuple[str, ...]) -> Mapping[str, object]:
    for name in path:
        child = data.get(name)
        if not isinstance(child, Mapping):
            return {}
        data = child
    return data
