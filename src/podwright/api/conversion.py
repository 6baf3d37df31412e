"""Workload files rewritten as Workload objects: what ``podwright convert`` does, for callers of
the API too.

Every document of a file is read and checked before anything is written, and a file is replaced
whole (:func:`~podwright.adapters.documents.replace_file`), so it either stays as it was or holds
every converted document.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence

from podwright.adapters.documents import DocumentError, document_files, dump_yaml, replace_file
from podwright.api.errors import BackendError, InvalidInputError
from podwright.api.loading import load_workloads
from podwright.core.workload_documents import WorkloadForm
from podwright.core.workload_fields import WorkloadType


@dataclasses.dataclass(frozen=True)
class ConvertedFile:
    """A file's documents as Workload objects, and how many of them were converted."""

    name: str
    objects: Sequence[object]
    changed: int


def workload_files(sources: Sequence[str | os.PathLike[str]]) -> list[str]:
    """``sources`` with each directory replaced by its ``.yaml``, ``.yml`` and ``.json``
    files, as ``kubectl apply -f DIR`` reads them."""
    try:
        return document_files([os.fspath(source) for source in sources])
    except DocumentError as error:
        raise InvalidInputError(str(error)) from None


def convert_file(name: str, workload_type: WorkloadType | str | None = None) -> ConvertedFile:
    """Every document of the file ``name`` (``-``: standard input) as a Workload object; a
    document that is one already is kept as written. Raises :class:`InvalidInputError` with
    every problem of every document."""
    workloads = load_workloads(name, type=workload_type)
    objects = [
        workload.documents[workload.source].data
        if workload.form is WorkloadForm.OBJECT
        else workload.to_document()
        for workload in workloads
    ]
    changed = sum(workload.form is not WorkloadForm.OBJECT for workload in workloads)
    return ConvertedFile(name, objects, changed)


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
