"""Workload documents in each form (a Workload object, the deprecated ``{type, name, spec}``,
bare fields), every problem at the document's own path, and the Workload object written back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.cluster_resources import API_VERSION, submission_from_resource
from podwright.core.k8s_names import (
    ANNOTATIONS_MAX_SIZE,
    annotation_key_problem,
    annotations_size_problem,
    generated_name_sample,
)
from podwright.core.workload_documents import (
    WorkloadForm,
    read_workload_document,
    workload_document,
)
from podwright.core.workload_fields import (
    EXCLUDE,
    SCHEMAS,
    Field,
    Itemized,
    Leaf,
    Section,
    ValueType,
    WorkloadType,
)
from podwright.core.workloads import Submission, WorkloadInputError, submission_from_data


def workload(
    spec: dict[str, Any] | None = None, workload_type: str = "training", **metadata: Any
) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": "resnet", **metadata},
        "spec": {"type": workload_type, "image": "pytorch", **(spec or {})},
    }


# -- the forms --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "asked", "form", "expected"),
    [
        pytest.param(workload(), None, WorkloadForm.OBJECT, workload(), id="object"),
        pytest.param(
            workload(), "training", WorkloadForm.OBJECT, workload(), id="object-type-agrees"
        ),
        pytest.param(
            workload(
                namespace="vision",
                labels={"team": "vision", "example.com/tier": ""},
                annotations={"Example.com/Owner": "ada", "note": "x" * 1000},
            ),
            None,
            WorkloadForm.OBJECT,
            workload(
                namespace="vision",
                labels={"team": "vision", "example.com/tier": ""},
                annotations={"Example.com/Owner": "ada", "note": "x" * 1000},
            ),
            id="object-with-metadata",
        ),
        pytest.param(
            {
                "apiVersion": API_VERSION,
                "kind": "Workload",
                "metadata": {"generateName": "resnet-"},
                "spec": {"type": "training"},
            },
            None,
            WorkloadForm.OBJECT,
            {
                "apiVersion": API_VERSION,
                "kind": "Workload",
                "metadata": {"generateName": "resnet-"},
                "spec": {"type": "training"},
            },
            id="object-generate-name",
        ),
        pytest.param(
            {
                "apiVersion": API_VERSION,
                "kind": "Workload",
                "metadata": None,
                "spec": {"type": "workspace"},
            },
            None,
            WorkloadForm.OBJECT,
            {
                "apiVersion": API_VERSION,
                "kind": "Workload",
                "metadata": {},
                "spec": {"type": "workspace"},
            },
            id="object-null-metadata",
        ),
        pytest.param(
            {"type": "training", "name": "resnet", "spec": {"image": "pytorch"}},
            None,
            WorkloadForm.WRAPPED,
            workload(),
            id="wrapped",
        ),
        pytest.param(
            {"name": "resnet", "spec": {"image": "pytorch"}},
            "training",
            WorkloadForm.WRAPPED,
            workload(),
            id="wrapped-type-asked",
        ),
        pytest.param(
            {"image": "pytorch"},
            "training",
            WorkloadForm.BARE,
            {
                "apiVersion": API_VERSION,
                "kind": "Workload",
                "metadata": {},
                "spec": {"type": "training", "image": "pytorch"},
            },
            id="bare",
        ),
        pytest.param(
            {
                "type": "training",
                "name": "resnet",
                "spec": {
                    "image": "pytorch",
                    "compute": {
                        "cpuMemoryRequest": 0.5,
                        "cpuCoreRequest": 0.5,
                        "gpuDevicesRequest": None,
                    },
                    "security": {"supplementalGroups": "1000,2000"},
                },
            },
            None,
            WorkloadForm.WRAPPED,
            workload(
                {
                    "compute": {"cpuMemoryRequest": "0.5", "cpuCoreRequest": 0.5},
                    "security": {"supplementalGroups": [1000, 2000]},
                }
            ),
            id="wrapped-spelt-as-the-crd-takes-it",
        ),
        pytest.param(
            {
                "type": "distributed",
                "name": "ddp",
                "spec": {
                    "master": {"image": "m"},
                    "worker": {
                        "numWorkers": 2,
                        "nodePools": None,
                        "compute": {"extendedResources": [{"resource": "r", "quantity": 1.5}]},
                        "exposedUrls": [{"container": 80}],
                    },
                },
            },
            None,
            WorkloadForm.WRAPPED,
            {
                "apiVersion": API_VERSION,
                "kind": "Workload",
                "metadata": {"name": "ddp"},
                "spec": {
                    "type": "distributed",
                    "master": {"image": "m"},
                    "worker": {
                        "numWorkers": 2,
                        "compute": {"extendedResources": [{"resource": "r", "quantity": "1.5"}]},
                        "exposedUrls": [{"container": 80}],
                    },
                },
            },
            id="wrapped-distributed",
        ),
    ],
)
def test_every_form_reads_and_writes_a_workload_object(
    data: dict[str, Any], asked: str | None, form: WorkloadForm, expected: dict[str, Any]
) -> None:
    read = read_workload_document(data, WorkloadType(asked) if asked else None)
    assert read.form is form
    assert read.to_object() == expected
    assert list(read.to_object()) == ["apiVersion", "kind", "metadata", "spec"]
    assert next(iter(expected["spec"])) == "type"
    if form is WorkloadForm.WRAPPED:
        (note,) = read.notes
        assert note.startswith("a workload written as {type, name, spec} is deprecated")
        assert "podwright convert --in-place FILE" in note
    else:
        assert read.notes == ()


def test_an_object_keeps_its_metadata_and_its_spec_path() -> None:
    read = read_workload_document(
        workload(namespace="vision", labels={"team": "vision"}, annotations={"a": "b"})
    )
    assert (read.submission.name, read.submission.workload_type) == (
        "resnet",
        WorkloadType.TRAINING,
    )
    assert read.submission.spec == {"image": "pytorch"}
    assert read.submission.spec_path == ("spec",)
    assert (read.namespace, read.labels, read.annotations) == (
        "vision",
        {"team": "vision"},
        {"a": "b"},
    )
    assert read.generate_name is None


def test_the_object_is_read_as_the_webhook_and_the_operator_read_it() -> None:
    obj = workload({"compute": {"gpuDevicesRequest": 2}}, namespace="vision")
    assert read_workload_document(obj).submission == submission_from_resource(obj)


def test_the_written_object_shares_nothing_with_the_submission() -> None:
    submission = Submission(
        WorkloadType.WORKSPACE, {"nodePools": ["a"], "compute": {"cpuCoreRequest": 1}}, "w"
    )
    written = workload_document(submission, labels={"a": "b"})
    written["spec"]["nodePools"].append("b")  # type: ignore[index]
    written["spec"]["compute"]["cpuCoreRequest"] = 2  # type: ignore[index]
    assert submission.spec == {"nodePools": ["a"], "compute": {"cpuCoreRequest": 1}}


# -- problems ---------------------------------------------------------------------------------

LABEL_RULE = (
    "must consist of letters, digits, '-', '_' or '.', and start and end with a letter or digit"
)


@pytest.mark.parametrize(
    ("data", "asked", "expected"),
    [
        pytest.param(
            ["image: x"],
            None,
            [
                (
                    (),
                    "expected a workload: a Workload object (apiVersion, kind, metadata, spec), got ['image: x'] (list)",
                )
            ],
            id="not-a-mapping",
        ),
        pytest.param(
            {"image": "x"},
            None,
            [
                (
                    (),
                    "the workload type is not given: write the workload as a Workload (apiVersion: podwright.dev/v1alpha1, kind: Workload, spec.type beside its fields), or pass the type",
                )
            ],
            id="bare-without-type",
        ),
        pytest.param(
            {"imag": "x"},
            "workspace",
            [(("imag",), "unknown field 'imag' (did you mean 'image'?)")],
            id="bare-field",
        ),
        pytest.param(
            {"type": "training", "spec": {}},
            "workspace",
            [(("type",), "the file says 'training' but 'workspace' was asked for")],
            id="wrapped-type-disagrees",
        ),
        pytest.param(
            workload(),
            "workspace",
            [(("spec", "type"), "the file says 'training' but 'workspace' was asked for")],
            id="object-type-disagrees",
        ),
        pytest.param(
            {**workload(), "spec": {"image": "x"}},
            "training",
            [
                (
                    ("spec",),
                    "a Workload states its type, as the cluster requires: add 'type: training'",
                )
            ],
            id="object-type-only-asked",
        ),
        pytest.param(
            {**workload(), "spec": {"image": "x"}},
            None,
            [(("spec",), "the workload type is not given: add 'type: ...'")],
            id="object-without-type",
        ),
        pytest.param(
            {**workload(), "spec": {"type": "batch"}},
            None,
            [
                (
                    ("spec", "type"),
                    "expected one of 'workspace', 'training', 'distributed', 'inference', got 'batch' (string)",
                )
            ],
            id="object-bad-type",
        ),
        pytest.param(
            {key: value for key, value in workload().items() if key != "spec"},
            None,
            [(("spec",), "expected a mapping of the workload's type and fields, got None (null)")],
            id="object-without-spec",
        ),
        pytest.param(
            {**workload(), "apiVersion": "podwright.dev/v1", "kind": "Workloads"},
            None,
            [
                (
                    ("apiVersion",),
                    "expected 'podwright.dev/v1alpha1', got 'podwright.dev/v1' (string)",
                ),
                (("kind",), "expected 'Workload', got 'Workloads' (string)"),
            ],
            id="object-envelope",
        ),
        pytest.param(
            {"metadata": {"name": "resnet"}, "spec": {"type": "training"}},
            None,
            [
                (("apiVersion",), "expected 'podwright.dev/v1alpha1', got None (null)"),
                (("kind",), "expected 'Workload', got None (null)"),
            ],
            id="object-without-apiversion-and-kind",
        ),
        pytest.param(
            {**workload(), "type": "training", "name": "resnet", "status": {}},
            None,
            [
                (("type",), "unknown field 'type': a Workload states its type as spec.type"),
                (("name",), "unknown field 'name': a Workload's name is metadata.name"),
                (
                    ("status",),
                    "unknown field 'status': a Workload's status is written in the cluster, not in a file",
                ),
            ],
            id="object-misplaced-keys",
        ),
        pytest.param(
            {**workload(), "metadata": ["resnet"]},
            None,
            [
                (
                    ("metadata",),
                    "expected a mapping (name, generateName, namespace, labels, annotations), got ['resnet'] (list)",
                )
            ],
            id="metadata-not-a-mapping",
        ),
        pytest.param(
            workload(lables={}, uid="1234"),
            None,
            [
                (
                    ("metadata", "lables"),
                    "unknown field 'lables' (did you mean 'labels'?); a workload file's metadata holds name, generateName, namespace, labels, annotations",
                ),
                (
                    ("metadata", "uid"),
                    "'uid' is the cluster's to set, not a workload file's; a workload file's metadata holds name, generateName, namespace, labels, annotations",
                ),
            ],
            id="metadata-unknown-keys",
        ),
        pytest.param(
            workload(name="Res_Net"),
            None,
            [
                (
                    ("metadata", "name"),
                    "'Res_Net' must consist of lower-case letters, digits and '-', and start and end with a letter or digit",
                )
            ],
            id="name",
        ),
        pytest.param(
            workload(name=7),
            None,
            [(("metadata", "name"), "expected a string, got 7 (integer)")],
            id="name-not-a-string",
        ),
        pytest.param(
            workload(name="7up"),
            None,
            [(("metadata", "name"), "'7up' must start with a letter (it names Services)")],
            id="name-not-a-letter-first",
        ),
        pytest.param(
            workload(namespace="Vision"),
            None,
            [
                (
                    ("metadata", "namespace"),
                    "'Vision' must consist of lower-case letters, digits and '-', and start and end with a letter or digit",
                )
            ],
            id="namespace",
        ),
        pytest.param(
            workload(namespace="a.b"),
            None,
            [
                (
                    ("metadata", "namespace"),
                    "'a.b' must consist of lower-case letters, digits and '-'",
                )
            ],
            id="namespace-is-a-label-not-a-subdomain",
        ),
        pytest.param(
            workload(namespace=["vision"]),
            None,
            [(("metadata", "namespace"), "expected a string, got ['vision'] (list)")],
            id="namespace-not-a-string",
        ),
        pytest.param(
            workload(labels=["team=vision"]),
            None,
            [
                (
                    ("metadata", "labels"),
                    "expected a mapping of strings to strings, got ['team=vision'] (list)",
                )
            ],
            id="labels-not-a-mapping",
        ),
        pytest.param(
            workload(labels={"a b": "x", "Example.com/team": "x", "team": "a b", "long": "x" * 64}),
            None,
            [
                (("metadata", "labels", "a b"), f"the label key name part {LABEL_RULE}"),
                (
                    ("metadata", "labels", "Example.com/team"),
                    "the label key prefix 'Example.com' must consist of lower-case letters",
                ),
                (("metadata", "labels", "team"), f"the label value {LABEL_RULE}"),
                (("metadata", "labels", "long"), "the label value must be at most 63 characters"),
            ],
            id="labels",
        ),
        pytest.param(
            workload(labels={"version": 2, "gpu": True, "team": None}),
            None,
            [
                (("metadata", "labels", "version"), "expected a string, got 2 (integer): quote it"),
                (("metadata", "labels", "gpu"), "expected a string, got True (boolean): quote it"),
                (("metadata", "labels", "team"), "expected a string, got None (null)"),
            ],
            id="labels-not-strings",
        ),
        pytest.param(
            workload(labels={1: "x"}),
            None,
            [(("metadata", "labels"), "keys are strings, got 1 (integer)")],
            id="label-key-not-a-string",
        ),
        pytest.param(
            workload(annotations={"a b": "x", "/x": "y", "note": 1}),
            None,
            [
                (("metadata", "annotations", "a b"), f"the annotation key name part {LABEL_RULE}"),
                (
                    ("metadata", "annotations", "/x"),
                    "the annotation key has an empty prefix before '/'",
                ),
                (
                    ("metadata", "annotations", "note"),
                    "expected a string, got 1 (integer): quote it",
                ),
            ],
            id="annotations",
        ),
        pytest.param(
            workload(annotations={"a": "x" * ANNOTATIONS_MAX_SIZE}),
            None,
            [
                (
                    ("metadata", "annotations"),
                    "keys and values together hold 262145 bytes, above the limit of 262144 (256 KiB)",
                )
            ],
            id="annotations-too-large",
        ),
        pytest.param(
            {**workload(), "metadata": {"generateName": "Res_"}},
            None,
            [
                (
                    ("metadata", "generateName"),
                    "'Res_' gives names such as 'Res_xxxxx', which must consist of lower-case letters",
                )
            ],
            id="generate-name",
        ),
        pytest.param(
            {
                **workload({}, "distributed"),
                "metadata": {"generateName": "d" * 60},
                "spec": {"type": "distributed", "worker": {"numWorkers": 12}},
            },
            None,
            [
                (
                    ("metadata", "generateName"),
                    f"{'d' * 60!r} gives names such as {'d' * 58 + 'xxxxx'!r}, which must be at most 53 characters for a distributed workload",
                )
            ],
            id="generate-name-too-long-for-distributed",
        ),
        pytest.param(
            {
                "apiVersion": "v1",
                "kind": "Workload",
                "metadata": {"name": "Bad_Name", "namespace": "Vision", "labels": {"a b": "x"}},
                "spec": {"type": "training", "imag": "x", "compute": {"gpuDevicesRequest": -1}},
            },
            None,
            [
                (("apiVersion",), "expected 'podwright.dev/v1alpha1'"),
                (("metadata", "namespace"), "'Vision' must consist"),
                (("metadata", "labels", "a b"), "the label key"),
                (("spec", "imag"), "unknown field 'imag'"),
                (("spec", "compute", "gpuDevicesRequest"), "must be at least 0"),
                (("metadata", "name"), "'Bad_Name' must consist"),
            ],
            id="every-problem-at-once",
        ),
    ],
)
def test_every_problem_is_reported_at_the_documents_own_path(
    data: Any, asked: str | None, expected: list[tuple[tuple[Any, ...], str]]
) -> None:
    with pytest.raises(WorkloadInputError) as caught:
        read_workload_document(data, WorkloadType(asked) if asked else None)
    found = [(problem.path, problem.message) for problem in caught.value.problems]
    assert [path for path, _ in found] == [path for path, _ in expected]
    for (path, message), (_, fragment) in zip(found, expected, strict=True):
        assert message.startswith(fragment), path


# -- the naming rules of metadata -------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        pytest.param("Example.COM/Owner", True, id="any-case"),
        pytest.param("kubectl.kubernetes.io/last-applied-configuration", True, id="kubectl"),
        pytest.param("a b", False, id="space"),
        pytest.param("a/b/c", False, id="two-slashes"),
        pytest.param("x/" + "a" * 64, False, id="long-name"),
    ],
)
def test_annotation_keys_are_label_keys_of_either_case(key: str, valid: bool) -> None:
    assert (annotation_key_problem(key) is None) is valid


@pytest.mark.parametrize(
    ("annotations", "valid"),
    [
        pytest.param({"a": "x" * (ANNOTATIONS_MAX_SIZE - 1)}, True, id="at-the-limit"),
        pytest.param({"a": "x" * ANNOTATIONS_MAX_SIZE}, False, id="one-byte-above"),
        pytest.param({"a": "é" * (ANNOTATIONS_MAX_SIZE // 2)}, False, id="utf8-bytes-count"),
        pytest.param({}, True, id="none"),
    ],
)
def test_annotations_are_limited_in_bytes(annotations: dict[str, str], valid: bool) -> None:
    assert (annotations_size_problem(annotations) is None) is valid


@pytest.mark.parametrize(
    ("prefix", "sample"),
    [
        pytest.param("train-", "train-xxxxx", id="short"),
        pytest.param("t" * 70, "t" * 58 + "xxxxx", id="cut-to-leave-room"),
    ],
)
def test_generated_names_have_at_most_63_characters(prefix: str, sample: str) -> None:
    assert generated_name_sample(prefix) == sample


# -- properties -------------------------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
LABEL_NAME = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?", fullmatch=True)
PREFIX = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\.[a-z0-9]{1,5}){0,2}", fullmatch=True)
LABEL_KEY = st.one_of(LABEL_NAME, st.tuples(PREFIX, LABEL_NAME).map("/".join))
LABEL_VALUE = st.one_of(st.just(""), LABEL_NAME)
QUANTITIES = st.one_of(
    st.integers(0, 2**40),
    st.builds(
        lambda n, unit: f"{n}{unit}",
        st.integers(0, 4096),
        st.sampled_from(["", "m", "Mi", "Gi", "G", "k"]),
    ),
)


def values(field: Field) -> st.SearchStrategy[Any]:
    """Any valid value of ``field``, written as the Workload's CRD takes it."""
    if isinstance(field, Section):
        return sections(field)
    if isinstance(field, Itemized):
        return st.lists(instances(field), max_size=2, unique_by=lambda item: item[field.key])
    return leaves(field)


def sections(section: Section) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {}, optional={name: values(field) for name, field in section.fields.items()}
    )


def instances(field: Itemized) -> st.SearchStrategy[dict[str, Any]]:
    others = {
        name: attribute for name, attribute in field.attributes.fields.items() if name != field.key
    }
    return st.builds(
        lambda key, attributes, excluded: {
            field.key: key,
            **attributes,
            **({EXCLUDE: True} if excluded else {}),
        },
        st.text(min_size=1, max_size=6),
        sections(Section(others)),
        st.booleans(),
    )


def leaves(leaf: Leaf) -> st.SearchStrategy[Any]:
    low = None if leaf.minimum is None else int(leaf.minimum)
    high = 2**31 - 1 if leaf.maximum is None else int(leaf.maximum)
    if leaf.value_type is ValueType.BOOLEAN:
        return st.booleans()
    if leaf.value_type is ValueType.STRING:
        return st.sampled_from(leaf.choices) if leaf.choices else TEXT
    if leaf.value_type is ValueType.INTEGER:
        return st.integers(low, high)
    if leaf.value_type is ValueType.NUMBER:
        return st.integers(low, high) | st.floats(low, high, allow_nan=False, allow_infinity=False)
    if leaf.value_type is ValueType.QUANTITY:
        return QUANTITIES
    assert leaf.value_type is ValueType.ARRAY
    assert leaf.item is not None
    item = values(leaf.item) if isinstance(leaf.item, Section) else leaves(Leaf(leaf.item))
    return st.lists(item, max_size=2)


@st.composite
def workload_objects(draw: st.DrawFn) -> dict[str, Any]:
    workload_type = draw(st.sampled_from(list(WorkloadType)))
    metadata: dict[str, Any] = {}
    if draw(st.booleans()):
        metadata["name"] = draw(st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True))
    else:
        metadata["generateName"] = draw(st.from_regex(r"[a-z][-a-z0-9]{0,20}", fullmatch=True))
    if draw(st.booleans()):
        metadata["namespace"] = draw(
            st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
        )
    labels = draw(st.dictionaries(LABEL_KEY, LABEL_VALUE, max_size=3))
    if labels:
        metadata["labels"] = labels
    annotations = draw(st.dictionaries(LABEL_KEY, TEXT, max_size=3))
    if annotations:
        metadata["annotations"] = annotations
    spec = draw(sections(SCHEMAS[workload_type]))
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": metadata,
        "spec": {"type": workload_type.value, **spec},
    }


@given(workload_objects())
def test_a_workload_object_is_written_back_as_it_was_read(obj: dict[str, Any]) -> None:
    read = read_workload_document(obj)
    assert read.form is WorkloadForm.OBJECT
    # Compared as JSON: the same keys in the same order, and the same values of the same types.
    assert json.dumps(read.to_object()) == json.dumps(obj)


@given(workload_objects())
def test_the_deprecated_form_converts_to_the_same_workload(obj: dict[str, Any]) -> None:
    fields = {key: value for key, value in obj["spec"].items() if key != "type"}
    wrapped = {"type": obj["spec"]["type"], "name": obj["metadata"].get("name"), "spec": fields}
    submission = submission_from_data(wrapped)
    converted = read_workload_document(wrapped).to_object()
    assert read_workload_document(converted).submission == submission
    assert converted["metadata"] == ({"name": submission.name} if submission.name else {})
