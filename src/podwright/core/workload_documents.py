"""Workload documents in each of their forms, read into one record, and written as Workloads.

A workload file is a Kubernetes object, the same document ``kubectl apply`` accepts wherever
podwright's CustomResourceDefinitions are installed::

    apiVersion: podwright.dev/v1alpha1
    kind: Workload
    metadata:
      name: resnet-50
      namespace: vision            # optional, as for kubectl
      labels: {team: vision}       # the Workload's own; spec.labels label its Job and pods
    spec:
      type: training               # workspace | training | distributed | inference
      image: pytorch/pytorch:2.4
      compute: {gpuDevicesRequest: 2}

Two older forms are still read. The wrapped form ``{type, name, spec}`` is deprecated: kubectl
cannot use it, so it is read with a note (:attr:`WorkloadDocument.notes`) that says to write
what :meth:`WorkloadDocument.to_object` gives instead. Bare fields, with the type given by the
caller, are not deprecated: a bare body is how Run:ai's UI and API show a workload's spec and
how a policy's defaults are written, so people paste it as it is; it has no envelope to replace.

A Workload's metadata is checked as the API server checks it (namespace, label keys and values,
annotation keys and their total size, ``generateName``), so a file podwright accepts is one the
cluster accepts; its spec is read by
:func:`~podwright.core.cluster_resources.submission_from_resource`, the reading the admission
webhooks and the operator give the objects the cluster serves. Every problem of a document is
reported at once, at the document's own paths (``metadata.labels.team``, ``spec.compute``).
A file's metadata holds ``name``, ``generateName``, ``namespace``, ``labels`` and
``annotations``: what the cluster writes (``uid``, ``resourceVersion``, ``status``, ...) is
refused, since a file holding it was copied from a cluster and is not a submission. A Workload
states its type (``spec.type``, which the CRD requires); a type the caller asks for must agree.
``generateName`` is accepted, as ``kubectl create`` takes it, when every name the API server
may generate from it names the workload; the submission then has no name of its own.

:func:`workload_document` writes the Kubernetes form (apiVersion, kind, metadata, spec, the
type first in spec), each value spelt as the CustomResourceDefinition takes it (a fractional
quantity as a string).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND, submission_from_resource
from podwright.core.field_paths import FieldPath
from podwright.core.k8s_names import (
    annotation_key_problem,
    annotations_size_problem,
    dns1123_label_problem,
    generated_name_sample,
    label_value_problem,
    qualified_name_problem,
)
from podwright.core.problems import FieldProblem, describe, unknown_field
from podwright.core.workload_fields import (
    SCHEMAS,
    Field,
    Itemized,
    Leaf,
    Section,
    ValueType,
    WorkloadType,
)
from podwright.core.workloads import (
    Submission,
    WorkloadInputError,
    parse_workload_type,
    submission_from_data,
    workload_name_problem,
)

OBJECT_FIELDS = ("apiVersion", "kind", "metadata", "spec")
METADATA_FIELDS = ("name", "generateName", "namespace", "labels", "annotations")
"""What a workload file's metadata may hold: what a person writes, not what the cluster does."""

_CLUSTER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "ownerReferences",
    "finalizers",
    "managedFields",
)
_MISPLACED = {
    "type": "a Workload states its type as spec.type",
    "name": "a Workload's name is metadata.name",
    "status": "a Workload's status is written in the cluster, not in a file",
}


class WorkloadForm(StrEnum):
    """How a workload document is written."""

    OBJECT = "object"
    """A Kubernetes object: apiVersion, kind, metadata, spec (with its type)."""
    WRAPPED = "wrapped"
    """The deprecated ``{type, name, spec}``."""
    BARE = "bare"
    """The fields alone; the caller gives the type."""


def workload_form(data: Mapping[Any, Any]) -> WorkloadForm:
    """The form ``data`` is written in: an object when it has any of apiVersion, kind and
    metadata (so that a half-converted file is told what it lacks), wrapped when it has a
    ``spec``, bare otherwise."""
    if any(key in data for key in ("apiVersion", "kind", "metadata")):
        return WorkloadForm.OBJECT
    return WorkloadForm.WRAPPED if "spec" in data else WorkloadForm.BARE


@dataclasses.dataclass(frozen=True)
class WorkloadDocument:
    """A workload document, read and checked: the submission, the Workload metadata it gave
    beside the name (none in the older forms), and the form it was written in."""

    submission: Submission
    form: WorkloadForm
    namespace: str | None = None
    generate_name: str | None = None
    """The prefix the API server completes into a name when ``metadata.name`` is not given."""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the reader noticed without refusing: for the deprecated form, why, and what to
        write instead (the document :meth:`to_object` gives)."""
        if self.form is not WorkloadForm.WRAPPED:
            return ()
        return (
            "a workload written as {type, name, spec} is deprecated: write it as a Workload "
            f"(apiVersion: {API_VERSION}, kind: {WORKLOAD_KIND}, metadata.name, spec with its "
            "type); 'podwright convert --in-place FILE' rewrites the file",
        )

    def to_object(self) -> dict[str, object]:
        """The document as a Workload object (see :func:`workload_document`)."""
        return workload_document(
            self.submission,
            namespace=self.namespace,
            labels=self.labels,
            annotations=self.annotations,
            generate_name=self.generate_name,
        )


def read_workload_document(
    data: object, workload_type: WorkloadType | None = None
) -> WorkloadDocument:
    """Read a workload document in any form; ``workload_type`` is the type asked for (required
    for bare fields; a document that states another is a problem naming both).

    Raises :class:`~podwright.core.workloads.WorkloadInputError` with every problem, at the
    document's own paths: the envelope's and the metadata's first, then the spec's.
    """
    if not isinstance(data, Mapping):
        raise WorkloadInputError(
            [
                FieldProblem(
                    (),
                    f"expected a workload: a {WORKLOAD_KIND} object (apiVersion, kind, metadata, "
                    f"spec), got {describe(data)}",
                )
            ]
        )
    form = workload_form(data)
    if form is WorkloadForm.OBJECT:
        return _object(data, workload_type)
    if form is WorkloadForm.BARE and workload_type is None:
        raise WorkloadInputError(
            [
                FieldProblem(
                    (),
                    "the workload type is not given: write the workload as a "
                    f"{WORKLOAD_KIND} (apiVersion: {API_VERSION}, kind: {WORKLOAD_KIND}, "
                    "spec.type beside its fields), or pass the type",
                )
            ]
        )
    return WorkloadDocument(submission_from_data(data, workload_type), form)


def workload_document(
    submission: Submission,
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    generate_name: str | None = None,
) -> dict[str, object]:
    """``submission`` as a Workload object: apiVersion, kind, metadata (name, generateName,
    namespace, labels, annotations: those given), spec (its type first, then its fields as
    submitted).

    Each value is spelt as the CustomResourceDefinition takes it: a quantity given as a
    fractional number (``0.5``) becomes its string (``"0.5"``), since an int-or-string field
    holds no float; everything else is as submitted. The result shares nothing with
    ``submission``.
    """
    metadata: dict[str, object] = {}
    if submission.name is not None:
        metadata["name"] = submission.name
    if generate_name:
        metadata["generateName"] = generate_name
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    fields = _spelt(SCHEMAS[submission.workload_type], submission.spec)
    assert isinstance(fields, dict)
    return {
        "apiVersion": API_VERSION,
        "kind": WORKLOAD_KIND,
        "metadata": metadata,
        "spec": {"type": submission.workload_type.value, **fields},
    }


# -- the Kubernetes form ----------------------------------------------------------------------


@dataclasses.dataclass
class _Metadata:
    """A Workload's metadata beside its name, read with every problem recorded."""

    problems: list[FieldProblem] = dataclasses.field(default_factory=list)
    namespace: str | None = None
    generate_name: str | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)

    def read(self, metadata: Mapping[Any, Any]) -> None:
        for key in metadata:
            if key in METADATA_FIELDS:
                continue
            message = (
                f"{key!r} is the cluster's to set, not a workload file's"
                if key in _CLUSTER_METADATA
                else unknown_field(key, METADATA_FIELDS)
            )
            self.problems.append(
                FieldProblem(
                    ("metadata", str(key)),
                    f"{message}; a workload file's metadata holds {', '.join(METADATA_FIELDS)}",
                )
            )
        self.namespace = self._text(metadata, "namespace")
        if self.namespace is not None and (problem := dns1123_label_problem(self.namespace)):
            self.problems.append(
                FieldProblem(("metadata", "namespace"), f"{self.namespace!r} {problem}")
            )
        self.generate_name = self._text(metadata, "generateName")
        self.labels = self._strings(metadata, "labels", self._label_problem)
        self.annotations = self._strings(metadata, "annotations", _annotation_problem)
        if problem := annotations_size_problem(self.annotations):
            self.problems.append(FieldProblem(("metadata", "annotations"), problem))

    def _text(self, metadata: Mapping[Any, Any], key: str) -> str | None:
        value = metadata.get(key)
        if value is None or isinstance(value, str):
            return value or None
        self.problems.append(
            FieldProblem(("metadata", key), f"expected a string, got {describe(value)}")
        )
        return None

    def _strings(
        self,
        metadata: Mapping[Any, Any],
        key: str,
        problem_of: Callable[[str, str], str | None],
    ) -> dict[str, str]:
        """The string-to-string mapping ``metadata[key]``, each entry checked by
        ``problem_of(key, value)``; entries with problems are left out."""
        data = metadata.get(key)
        if data is None:
            return {}
        path: FieldPath = ("metadata", key)
        if not isinstance(data, Mapping):
            self.problems.append(
                FieldProblem(
                    path, f"expected a mapping of strings to strings, got {describe(data)}"
                )
            )
            return {}
        strings: dict[str, str] = {}
        for name, value in data.items():
            if not isinstance(name, str):
                self.problems.append(FieldProblem(path, f"keys are strings, got {describe(name)}"))
                continue
            if not isinstance(value, str):
                message = f"expected a string, got {describe(value)}"
                if isinstance(value, bool | int | float):
                    message += ": quote it"
                self.problems.append(FieldProblem((*path, name), message))
                continue
            problem = problem_of(name, value)
            if problem is not None:
                self.problems.append(FieldProblem((*path, name), problem))
                continue
            strings[name] = value
        return strings

    @staticmethod
    def _label_problem(key: str, value: str) -> str | None:
        if problem := qualified_name_problem(key):
            return f"the label key {problem}"
        if problem := label_value_problem(value):
            return f"the label value {problem}"
        return None


def _annotation_problem(key: str, _value: str) -> str | None:
    problem = annotation_key_problem(key)
    return f"the annotation key {problem}" if problem else None


def _object(data: Mapping[Any, Any], workload_type: WorkloadType | None) -> WorkloadDocument:
    problems: list[FieldProblem] = []
    for key in data:
        if key not in OBJECT_FIELDS:
            hint = _MISPLACED.get(key)
            message = unknown_field(key, OBJECT_FIELDS)
            problems.append(FieldProblem((str(key),), f"{message}: {hint}" if hint else message))
    if data.get("apiVersion") != API_VERSION:
        problems.append(
            FieldProblem(
                ("apiVersion",),
                f"expected {API_VERSION!r}, got {describe(data.get('apiVersion'))}",
            )
        )
    if data.get("kind") != WORKLOAD_KIND:
        problems.append(
            FieldProblem(("kind",), f"expected {WORKLOAD_KIND!r}, got {describe(data.get('kind'))}")
        )
    metadata = _Metadata()
    written = data.get("metadata")
    if isinstance(written, Mapping):
        metadata.read(written)
    elif written is not None:
        metadata.problems.append(
            FieldProblem(
                ("metadata",),
                f"expected a mapping ({', '.join(METADATA_FIELDS)}), got {describe(written)}",
            )
        )
    problems.extend(metadata.problems)
    if metadata.generate_name is not None:
        problem = _generate_name_problem(metadata.generate_name, data.get("spec"))
        if problem:
            problems.append(FieldProblem(("metadata", "generateName"), problem))
    spec = data.get("spec")
    if workload_type is not None and isinstance(spec, Mapping) and spec.get("type") is None:
        problems.append(
            FieldProblem(
                ("spec",),
                "a Workload states its type, as the cluster requires: add "
                f"'type: {workload_type.value}'",
            )
        )
    try:
        submission = submission_from_resource(data, workload_type)
    except WorkloadInputError as error:
        raise WorkloadInputError([*problems, *error.problems]) from None
    if problems:
        raise WorkloadInputError(problems)
    return WorkloadDocument(
        submission,
        WorkloadForm.OBJECT,
        namespace=metadata.namespace,
        generate_name=metadata.generate_name,
        labels=metadata.labels,
        annotations=metadata.annotations,
    )


def _generate_name_problem(prefix: str, spec: object) -> str | None:
    """Why the names the API server generates from ``prefix`` cannot name the workload of
    ``spec``, or None (also when its type is not known: that is the spec's problem)."""
    if not isinstance(spec, Mapping):
        return None
    try:
        workload_type = parse_workload_type(spec.get("type"))
    except ValueError:
        return None
    sample = generated_name_sample(prefix)
    problem = workload_name_problem(sample, workload_type, spec)
    return f"{prefix!r} gives names such as {sample!r}, which {problem}" if problem else None


def _spelt(field: Field, value: object) -> object:
    """``value`` of ``field``, copied, with each fractional quantity as its string."""
    if isinstance(field, Section) and isinstance(value, Mapping):
        return {
            name: _spelt(field.fields[name], item) if name in field.fields else item
            for name, item in value.items()
        }
    if isinstance(field, Itemized) and isinstance(value, list):
        return [_spelt(field.attributes, instance) for instance in value]
    if isinstance(field, Leaf) and isinstance(value, list):
        item = field.item
        return [_spelt(item, entry) if isinstance(item, Section) else entry for entry in value]
    if (
        isinstance(field, Leaf)
        and field.value_type is ValueType.QUANTITY
        and isinstance(value, float)
    ):
        return repr(value)
    return value
