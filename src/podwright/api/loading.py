"""Reading podwright's documents for the public API: workloads, policies, asset catalogues and
cluster profiles, from files, directories, standard input or plain Python data.

Every reader reports every problem of its input at once, each at its ``file:line:column``, as an
:class:`~podwright.api.errors.InvalidInputError`. What is read remembers the documents it came
from, so a problem found later (a policy's rule broken by a workload, a conflict between two
policies' scopes) is reported at the line that caused it too.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

from podwright.adapters.documents import (
    Document,
    DocumentError,
    document_files,
    dump_yaml,
    read_document,
    read_documents,
)
from podwright.api.errors import InvalidInputError
from podwright.core.assets import AssetCatalogue, catalogue_from_data
from podwright.core.cluster_resources import API_VERSION as RESOURCE_API_VERSION
from podwright.core.cluster_resources import (
    DEPARTMENT_LABEL,
    NAMESPACE_KIND,
    POLICY_KIND,
    PROJECT_LABEL,
    ClusterScopes,
    namespace_resource,
    policy_objects,
)
from podwright.core.k8s_names import dns1123_label_problem, label_value_problem
from podwright.core.policies import Policy, Scope, scope_from_text
from podwright.core.policy_documents import (
    DEFAULT_NAMESPACE,
    deprecation,
    is_policy_file,
    policy_from_document,
)
from podwright.core.problems import FieldProblem, ProblemsError
from podwright.core.workload_documents import (
    WorkloadDocument,
    WorkloadForm,
    read_workload_document,
)
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import Submission

if TYPE_CHECKING:
    from podwright.core.render import ClusterProfile

T = TypeVar("T")

Source = str | os.PathLike[str] | Mapping[str, object]
"""Where a document comes from: a file or directory path (``-``: standard input), or the
document itself as Python data (``source`` names it ``<data>`` in messages)."""

DATA_SOURCE = "<data>"

DEFAULT_CLUSTER = "default"
"""The cluster's name in the scope tree when nothing names it (``cluster=``, ``--cluster-name``,
or the scopes that policy files give)."""

Documents = Mapping[str, Document]
"""The documents something was read from, by the name problems give them."""


@dataclasses.dataclass(frozen=True)
class Workload:
    """A workload read and checked: its type, its fields as submitted, and its metadata.

    ``spec`` holds only known fields with valid values; the policies have not been applied
    (:func:`~podwright.api.evaluate` does that)."""

    submission: Submission
    form: WorkloadForm
    """How it was written: a Workload object, the deprecated ``{type, name, spec}``, or bare."""
    namespace: str | None
    generate_name: str | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    source: str
    """The document it was read from (``file``, ``file#N`` for one of several, ``<data>``)."""
    documents: Documents
    notes: tuple[str, ...] = ()
    """What the reader noticed without refusing (an old form of the document, deprecated)."""

    @property
    def name(self) -> str | None:
        return self.submission.name

    @property
    def type(self) -> WorkloadType:
        return self.submission.workload_type

    @property
    def spec(self) -> Mapping[str, object]:
        return self.submission.spec

    def to_document(self) -> dict[str, object]:
        """The workload as a Kubernetes object (``apiVersion: podwright.dev/v1alpha1``,
        ``kind: Workload``), the form ``kubectl apply`` takes."""
        from podwright.core.workload_documents import workload_document  # noqa: PLC0415

        return workload_document(
            self.submission,
            namespace=self.namespace,
            labels=self.labels,
            annotations=self.annotations,
            generate_name=self.generate_name,
        )


@dataclasses.dataclass(frozen=True)
class Policies:
    """Policies read and checked one by one (their combination is checked where a scope is
    known: :func:`~podwright.api.evaluate`, :func:`effective`)."""

    policies: tuple[Policy, ...]
    documents: Documents
    notes: tuple[str, ...] = ()
    """What the reader noticed without refusing, each ``file:line:column: path: message``."""
    warnings: tuple[str, ...] = ()
    """What the reader warns of: a document in a deprecated form, each with the objects to
    write instead."""
    namespaces: Mapping[str, Mapping[str, object]] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )
    """The Namespace objects read with the policies (or given, as a cluster has them): they
    name the project and department of their namespace, as in a cluster."""
    cluster: str | None = DEFAULT_CLUSTER
    """The cluster's name in the scope tree: where the policy objects lie, and where a workload
    is judged (None: the policy files name several, and nothing said which)."""

    def __iter__(self) -> Iterator[Policy]:
        return iter(self.policies)

    def __len__(self) -> int:
        return len(self.policies)


NO_POLICIES = Policies((), MappingProxyType({}))


def load(source: Source, *, type: WorkloadType | str | None = None) -> Workload:
    """The one workload of ``source`` (a file, ``-``, or a mapping); ``type`` for a bare list
    of fields, which does not say its type."""
    workloads = load_workloads(source, type=type)
    if len(workloads) != 1:
        raise InvalidInputError(
            f"{_name(source)}: expected one workload, found {len(workloads)}: "
            "load them with load_workloads"
        )
    return workloads[0]


def load_workloads(
    *sources: Source,
    type: WorkloadType | str | None = None,
) -> list[Workload]:
    """Every workload of ``sources``: files (every document of a multi-document file),
    directories (their ``.yaml``, ``.yml`` and ``.json`` files), ``-`` or mappings."""
    workload_type = _workload_type(type)
    workloads: list[Workload] = []
    errors: list[str] = []
    for document in _documents(sources):
        try:
            workloads.append(workload_of(document, workload_type))
        except InvalidInputError as error:
            errors.extend(error.problems)
    if errors:
        raise InvalidInputError(errors)
    return workloads


def workload_of(document: Document, workload_type: WorkloadType | None = None) -> Workload:
    """The workload ``document`` holds (see :func:`load_workloads`)."""
    read = guard(
        lambda: read_workload_document(document.data, workload_type),
        document,
        default_source=document.source,
    )
    return _workload(read, document)


def documents_of(*sources: Source) -> list[Document]:
    """Every document of ``sources`` (files, directories, ``-`` or mappings), in order, each
    able to say where a path of it lies."""
    return _documents(sources)


def load_policies(
    *sources: Source,
    type: WorkloadType | str | None = None,
    scope: Scope | str | None = None,
    cluster: str | None = None,
    namespaces: Mapping[str, Mapping[str, object]] | None = None,
    namespace: str | None = None,
) -> Policies:
    """Every policy of ``sources``, in any of its forms: a WorkloadPolicy or
    ClusterWorkloadPolicy object as a cluster holds it, a Run:ai policy document (its body,
    ``defaults``/``rules``/``imposedAssets``, or its API's ``{meta, policy}``), which says
    neither its workload type nor its scope: ``type`` and ``scope`` say them (the scope
    defaults to the tenant, which every scope lies below), and its name is its file's; or
    podwright's deprecated policy file (``podwright.dev/v1``), read with a warning
    (:attr:`Policies.warnings`) that shows the objects to write instead.

    ``v1`` Namespace objects among them, and ``namespaces`` (Namespace objects by name, as a
    cluster has them; they win), name the project and department of their namespace: where a
    WorkloadPolicy object lies, and where a workload in that namespace is judged. The
    namespace of a WorkloadPolicy must be one of them: a file does not say its labels, and
    guessing them would place its policy in another scope. A WorkloadPolicy that names no
    namespace is in ``namespace`` (kubectl's ``-n``), else in ``default``. ``cluster`` is the
    cluster's name in the scope tree, where the objects lie; by default the one cluster the
    other policies name (none: ``default``)."""
    workload_type = _workload_type(type)
    policy_scope = parse_scope(scope) or Scope(())
    read = _documents(sources)
    documents = {document.source: document for document in read}
    objects: dict[str, Mapping[str, object]] = {}
    errors: list[str] = []
    for document in read:
        try:
            found = namespace_object(document)
        except InvalidInputError as error:
            errors.extend(error.problems)
            continue
        if found is not None:
            objects[found[0]] = found[1]
    objects.update(namespaces or {})
    policies: dict[int, Policy] = {}
    notes: list[str] = []
    warnings: list[str] = []

    def read_policy(index: int, document: Document, scopes: ClusterScopes) -> None:
        says_nothing = isinstance(document.data, Mapping) and not (
            {"apiVersion", "kind"} & set(document.data)
        )
        unplaced = _unplaced_policy(document, objects, namespace)
        try:
            policy = policy_from_document(
                document.data,
                document.source,
                workload_type=workload_type if says_nothing else None,
                scope=policy_scope if says_nothing else None,
                name=runai_policy_name(document.source) if says_nothing else None,
                scopes=scopes,
                namespaces=objects,
                namespace=namespace,
            )
        except ProblemsError as error:
            errors.extend(_problem_line(problem, documents, None) for problem in unplaced)
            errors.extend(located(error, documents, document.source))
            return
        if unplaced:
            errors.extend(_problem_line(problem, documents, None) for problem in unplaced)
            return
        policies[index] = policy
        notes.extend(_problem_line(note, documents, document.source) for note in policy.notes)
        if is_policy_file(document.data):
            warnings.append(
                f"{document.source}: {deprecation(policy)}; as cluster objects:\n"
                + "---\n".join(
                    "".join(f"  {line}\n" for line in dump_yaml(obj).splitlines())
                    for obj in policy_objects(policy)
                )
            )

    resources = []
    for index, document in enumerate(read):
        data = document.data
        if isinstance(data, Mapping) and data.get("kind") == "Namespace":
            continue
        if isinstance(data, Mapping) and data.get("apiVersion") == RESOURCE_API_VERSION:
            resources.append((index, document))  # placed once the cluster is known
            continue
        read_policy(index, document, ClusterScopes(cluster or DEFAULT_CLUSTER))
    named = sorted({policy.scope.names[0] for policy in policies.values() if policy.scope.names})
    chosen = cluster or (named[0] if len(named) == 1 else None if named else DEFAULT_CLUSTER)
    if resources and chosen is None:
        errors.append(
            f"the policy files name clusters {', '.join(named)}: say which one the "
            "WorkloadPolicy and ClusterWorkloadPolicy objects lie in (cluster=, --cluster-name)"
        )
    for index, document in resources:
        read_policy(index, document, ClusterScopes(chosen or DEFAULT_CLUSTER))
    if errors:
        raise InvalidInputError(errors)
    return Policies(
        tuple(policy for _index, policy in sorted(policies.items())),
        MappingProxyType(documents),
        tuple(notes),
        tuple(warnings),
        MappingProxyType(objects),
        chosen,
    )


def _unplaced_policy(
    document: Document, namespaces: Mapping[str, object], namespace: str | None
) -> list[FieldProblem]:
    """Why the WorkloadPolicy ``document`` cannot be placed: its namespace is none of
    ``namespaces``, so the project and department it is the policy of are not known."""
    data = document.data
    if not (
        isinstance(data, Mapping)
        and data.get("apiVersion") == RESOURCE_API_VERSION
        and data.get("kind") == POLICY_KIND
    ):
        return []
    metadata = data.get("metadata")
    written = metadata.get("namespace") if isinstance(metadata, Mapping) else None
    where = written if isinstance(written, str) and written else namespace or DEFAULT_NAMESPACE
    if where in namespaces:
        return []
    return [
        FieldProblem(
            ("metadata", "namespace") if written else ("metadata",),
            f"the policy of namespace {where}, whose department (and project) a file does not "
            f"say: give its {NAMESPACE_KIND} object with the policies (apiVersion: v1, labels "
            f"{DEPARTMENT_LABEL} and, when the project is not named {where}, {PROJECT_LABEL}), "
            f"or say them (-n {where} --department NAME [--project NAME]; namespaces= in "
            "Python)",
            document.source,
        )
    ]


def namespace_object(document: Document) -> tuple[str, Mapping[str, object]] | None:
    """The name of a ``v1`` Namespace object, and the object (its name a DNS label, its labels
    strings, as the API server takes them); None for any other document."""
    data = document.data
    if not isinstance(data, Mapping) or data.get("kind") != "Namespace":
        return None
    metadata = data.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name, labels = metadata.get("name"), metadata.get("labels") or {}
    problems = []
    if data.get("apiVersion") != "v1":
        problems.append(f"{document.locate(('apiVersion',))}: apiVersion: a Namespace is v1")
    if not isinstance(name, str) or dns1123_label_problem(name):
        problems.append(
            f"{document.locate(('metadata', 'name'))}: metadata.name: a Namespace's name is a "
            "DNS label"
        )
    if not isinstance(labels, Mapping):
        problems.append(f"{document.locate(('metadata', 'labels'))}: expected a mapping")
    else:
        problems.extend(
            f"{document.locate(('metadata', 'labels', str(key)))}: metadata.labels.{key}: "
            "expected a string: quote it"
            for key, value in labels.items()
            if not isinstance(value, str)
        )
    if problems:
        raise InvalidInputError(problems)
    assert isinstance(name, str)
    return name, data


def labelled_namespace(
    name: str, *, department: str | None = None, project: str | None = None
) -> dict[str, object]:
    """The ``v1`` Namespace ``name`` as a cluster holding that project (``project``, else
    ``name``) in ``department`` has it: what ``namespaces=`` takes for a namespace whose object
    is not at hand (the command line's ``-n NAME --department D --project P``)."""
    problems = []
    if problem := dns1123_label_problem(name):
        problems.append(f"namespace {name!r} {problem}")
    for label, value in (("department", department), ("project", project)):
        if value is not None and (problem := label_value_problem(value)):
            problems.append(f"{label} {value!r}: a label's value, which {problem}")
    if problems:
        raise InvalidInputError(problems)
    return namespace_resource(name, department=department, project=project)


def runai_policy_name(source: str) -> str:
    """The name of a Run:ai policy document, which has none: its file's stem made a DNS
    subdomain (``gpu_limits.yaml``: ``gpu-limits``); ``policy`` (``policy-N``) for data."""
    if source.startswith(DATA_SOURCE):
        return "policy" if source == DATA_SOURCE else f"policy-{source.rsplit('#', 1)[1]}"
    stem = Path(source.split("#", 1)[0]).stem.lower()
    name = re.sub(r"[^a-z0-9.-]+", "-", stem).strip("-.")[:253].strip("-.")
    return name or "policy"


def load_assets(source: Source | AssetCatalogue) -> AssetCatalogue:
    """The asset catalogue of ``source`` (imposed assets come from it)."""
    if isinstance(source, AssetCatalogue):
        return source
    document = _one_document(source)
    return guard(lambda: catalogue_from_data(document.data, document.source), document)


def load_profile(source: Source | ClusterProfile | None) -> ClusterProfile:
    """The cluster profile of ``source``; None: the safe defaults."""
    from podwright.core.render import (  # noqa: PLC0415 (the renderer loads the k8s models)
        DEFAULT_PROFILE,
        ClusterProfile,
        profile_from_data,
    )

    if source is None:
        return DEFAULT_PROFILE
    if isinstance(source, ClusterProfile):
        return source
    document = _one_document(source)
    return guard(lambda: profile_from_data(document.data, document.source), document)


def to_yaml(data: object) -> str:
    """``data`` as block-style YAML, as kubectl prints it (and reads it back unchanged)."""
    return dump_yaml(data)


def parse_scope(scope: Scope | str | None) -> Scope | None:
    """A scope given as text (``tenant``, ``cluster=prod,department=research``) or already
    parsed."""
    if scope is None or isinstance(scope, Scope):
        return scope
    try:
        return scope_from_text(scope)
    except ValueError as error:
        raise InvalidInputError(f"scope {scope!r}: {error}") from None


def guard(
    action: Callable[[], T], *documents: Document | Documents, default_source: str | None = None
) -> T:
    """Run ``action``; a ProblemsError becomes an InvalidInputError located in ``documents``
    (a problem that names no document lies in ``default_source``)."""
    try:
        return action()
    except ProblemsError as error:
        raise InvalidInputError(located(error, _by_source(documents), default_source)) from None


def located(error: ProblemsError, documents: Documents, default_source: str | None) -> list[str]:
    """Each problem of ``error`` as ``file:line:column: path: message``."""
    return [_problem_line(problem, documents, default_source) for problem in error.problems]


def _problem_line(problem: FieldProblem, documents: Documents, default_source: str | None) -> str:
    source = problem.source or default_source
    document = documents.get(source) if source else None
    where = document.locate(problem.path) if document else (source or "")
    return f"{where}: {problem}" if where else str(problem)


def _by_source(documents: Sequence[Document | Documents]) -> dict[str, Document]:
    found: dict[str, Document] = {}
    for item in documents:
        if isinstance(item, Document):
            found[item.source] = item
        else:
            found.update(item)
    return found


def _workload(read: WorkloadDocument, document: Document) -> Workload:
    notes = tuple(
        f"{document.source}: {note}; as a Workload:\n"
        + "".join(f"  {line}\n" for line in dump_yaml(read.to_object()).splitlines())
        for note in read.notes
    )
    return Workload(
        submission=read.submission,
        form=read.form,
        namespace=read.namespace,
        generate_name=read.generate_name,
        labels=MappingProxyType(dict(read.labels)),
        annotations=MappingProxyType(dict(read.annotations)),
        source=document.source,
        documents=MappingProxyType({document.source: document}),
        notes=notes,
    )


def workload_type_of(given: WorkloadType | str) -> WorkloadType:
    """A workload type given as text or already parsed."""
    found = _workload_type(given)
    assert found is not None
    return found


def _workload_type(given: WorkloadType | str | None) -> WorkloadType | None:
    if given is None or isinstance(given, WorkloadType):
        return given
    try:
        return WorkloadType(given)
    except ValueError:
        allowed = ", ".join(kind.value for kind in WorkloadType)
        raise InvalidInputError(f"type {given!r}: expected one of {allowed}") from None


def _documents(sources: Sequence[Source]) -> list[Document]:
    """Every document of ``sources``, in order."""
    if not sources:
        raise InvalidInputError("no document given")
    documents: list[Document] = []
    data = sum(isinstance(source, Mapping) for source in sources)
    try:
        for source in sources:
            if isinstance(source, Mapping):
                number = sum(document.source.startswith(DATA_SOURCE) for document in documents)
                name = f"{DATA_SOURCE}#{number + 1}" if data > 1 else DATA_SOURCE
                documents.append(_data_document(source, name))
                continue
            for name in document_files([os.fspath(source)]):
                documents.extend(read_documents(name, sys.stdin))
    except DocumentError as error:
        raise InvalidInputError(str(error)) from None
    return documents


def _one_document(source: Source) -> Document:
    if isinstance(source, Mapping):
        return _data_document(source)
    try:
        return read_document(os.fspath(source), sys.stdin)
    except DocumentError as error:
        raise InvalidInputError(str(error)) from None


def _data_document(data: Mapping[str, object], name: str = DATA_SOURCE) -> Document:
    return Document(name, data, MappingProxyType({}))


def _name(source: Source) -> str:
    return DATA_SOURCE if isinstance(source, Mapping) else os.fspath(source)
