"""Files rewritten as the objects a cluster serves: what ``podwright convert`` does, for callers
of the API too.

A workload becomes a Workload object; a policy file of ``podwright.dev/v1`` (deprecated)
becomes the policy resources a cluster holds (a ClusterWorkloadPolicy, or for a project the
Namespace that is the project and a WorkloadPolicy in it: a file holds each Namespace once).
Documents that are such objects already are kept as written, and so are Run:ai policy
documents, which are not deprecated (:mod:`~podwright.core.policy_documents`).

Every document of a file is read and checked before anything is written, and a file is replaced
whole (:func:`~podwright.adapters.documents.replace_file`), so it either stays as it was or holds
every converted document.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence

from podwright.adapters.documents import (
    Document,
    DocumentError,
    document_files,
    dump_yaml,
    replace_file,
)
from podwright.api.errors import BackendError, InvalidInputError
from podwright.api.loading import documents_of, guard, workload_of, workload_type_of
from podwright.core.cluster_resources import (
    API_VERSION,
    CLUSTER_POLICY_KIND,
    NAMESPACE_KIND,
    POLICY_KIND,
    policy_objects,
)
from podwright.core.policies import RUNAI_REQUEST_FIELDS, RUNAI_SECTIONS, Policy
from podwright.core.policy_documents import is_policy_file, policy_from_document
from podwright.core.workload_documents import WorkloadForm
from podwright.core.workload_fields import WorkloadType

_KEPT = {(API_VERSION, POLICY_KIND), (API_VERSION, CLUSTER_POLICY_KIND), ("v1", NAMESPACE_KIND)}
"""The objects a cluster serves beside Workloads that a converted file may hold."""
_RUNAI_KEYS = {*RUNAI_SECTIONS, *RUNAI_REQUEST_FIELDS}
"""The keys of a Run:ai policy document (kept as written: it is not deprecated)."""


@dataclasses.dataclass(frozen=True)
class ConvertedFile:
    """A file's documents as the objects a cluster serves, how many documents it held and how
    many were converted, and the clusters the converted policies named (which those objects do
    not say)."""

    name: str
    objects: Sequence[object]
    changed: int
    documents: int
    clusters: tuple[str, ...] = ()


def workload_files(sources: Sequence[str | os.PathLike[str]]) -> list[str]:
    """``sources`` with each directory replaced by its ``.yaml``, ``.yml`` and ``.json``
    files, as ``kubectl apply -f DIR`` reads them."""
    try:
        return document_files([os.fspath(source) for source in sources])
    except DocumentError as error:
        raise InvalidInputError(str(error)) from None


def convert_file(name: str, workload_type: WorkloadType | str | None = None) -> ConvertedFile:
    """Every document of the file ``name`` (``-``: standard input) as the objects a cluster
    serves (see the module's docstring); ``workload_type`` is that of bare workload fields.
    Raises :class:`InvalidInputError` with every problem of every document."""
    kind = None if workload_type is None else workload_type_of(workload_type)
    objects: list[Mapping[str, object]] = []
    namespaces: dict[str, Mapping[str, object]] = {}
    clusters: dict[str, None] = {}
    changed = 0
    errors: list[str] = []
    documents = documents_of(name)
    for document in documents:
        data = document.data
        converted: list[Mapping[str, object]]
        try:
            if is_policy_file(data):
                policy = _policy_file(document)
                converted = list(policy_objects(policy))
                clusters.update(dict.fromkeys(policy.scope.names[:1]))  # the tenant names none
                changed += 1
            elif isinstance(data, Mapping) and (
                (data.get("apiVersion"), data.get("kind")) in _KEPT
                or (not {"apiVersion", "kind"} & set(data) and set(data) & _RUNAI_KEYS)
            ):
                converted = [data]
            else:
                workload = workload_of(document, kind)
                if workload.form is WorkloadForm.OBJECT:
                    assert isinstance(data, Mapping), "a Workload object is a mapping"
                    converted = [data]
                else:
                    converted = [workload.to_document()]
                    changed += 1
            for obj in converted:
                if obj.get("kind") != NAMESPACE_KIND or _once(obj, namespaces, document):
                    objects.append(obj)
        except InvalidInputError as error:
            errors.extend(error.problems)
    if errors:
        raise InvalidInputError(errors)
    return ConvertedFile(name, objects, changed, len(documents), tuple(clusters))


def _policy_file(document: Document) -> Policy:
    """The policy of the deprecated policy file ``document``."""
    return guard(
        lambda: policy_from_document(document.data, document.source),
        document,
        default_source=document.source,
    )


def _once(
    namespace: Mapping[str, object],
    namespaces: dict[str, Mapping[str, object]],
    document: Document,
) -> bool:
    """Whether ``namespace`` is new to the file (recorded in ``namespaces``, by name); the
    same one again is not, and another of its name is bad input."""
    metadata = namespace.get("metadata")
    name = str(metadata.get("name")) if isinstance(metadata, Mapping) else ""
    held = namespaces.setdefault(name, namespace)
    if held is namespace:
        return True
    if _labels(held) != _labels(namespace):
        raise InvalidInputError(
            f"{document.locate(())}: the file holds Namespace {name} labelled "
            f"{_labels(held)}, and this document needs it labelled {_labels(namespace)}: "
            "make them agree"
        )
    return False


def _labels(namespace: Mapping[str, object]) -> dict[str, object]:
    metadata = namespace.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return dict(labels) if isinstance(labels, Mapping) else {}


def converted_text(converted: ConvertedFile) -> str:
    """The file's new text, in its own format: JSON for a ``.json`` file, YAML otherwise."""
    if converted.name.endswith(".json"):
        return "---\n".join(json.dumps(obj, indent=2) + "\n" for obj in converted.objects)
    return "---\n".join(dump_yaml(obj) for obj in converted.objects)


def rewrite(converted: ConvertedFile) -> None:
    """Replace the file by its converted text at once; :class:`BackendError` when it cannot
    be written (the file is then left as it was)."""
    try:
        replace_file(converted.name, converted_text(converted))
    except OSError as error:
        raise BackendError(
            f"{converted.name}: cannot rewrite it: {error.strerror or error}"
        ) from None
