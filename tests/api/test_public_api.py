"""The public Python API: what a notebook does, and the README's examples, run as written."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import os
import re
from pathlib import Path

import pytest
import yaml

import podwright
from podwright import api
from podwright.api.loading import labelled_namespace
from tests.cli.background import no_executor_left
from tests.manifests import schema_errors

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
POLICIES = [
    EXAMPLES / "policies" / name
    for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
]
ASSETS = EXAMPLES / "assets.yaml"


@pytest.fixture(autouse=True)
def _in_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _readme_examples() -> list[str]:
    """The Python examples of the README's Python API section (and its subsections)."""
    readme = (ROOT / "README.md").read_text()
    section = re.split(r"^## ", readme.split("## Python API", 1)[1], flags=re.M)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


@pytest.mark.parametrize("index", [0, 1], ids=["workloads", "tasks"])
def test_the_readme_examples_run_as_written(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    examples = _readme_examples()
    assert len(examples) == 2, "the README's Python API section has two examples"
    code = examples[index]
    home = tmp_path / "home"
    monkeypatch.setenv("PODWRIGHT_HOME", str(home))  # the task example's state directory
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        no_executor_left(home / "tasks.db")
    expected = [
        line.split("# prints: ", 1)[1] for line in code.splitlines() if "# prints: " in line
    ]
    assert output.getvalue().splitlines() == expected


def _docstring_example(module: object) -> str:
    """The example of a module's docstring: the indented block after its ``::``."""
    doc = str(getattr(module, "__doc__", ""))
    block = doc.split("::\n", 1)[1]
    lines = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    return "\n".join(lines)


@pytest.mark.parametrize("module", ["podwright.api", "podwright.api.client"])
def test_the_docstring_examples_run(
    module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = _docstring_example(importlib.import_module(module))
    assert "podwright." in code
    home = tmp_path / "home"
    monkeypatch.setenv("PODWRIGHT_HOME", str(home))
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output):
            exec(compile(code, module, "exec"), {})
    finally:
        no_executor_left(home / "tasks.db")
    # The task's last phase is Success; an event that came after its end (a Job's "Completed")
    # is attached before it is finalized, and may be printed after it.
    phases = [line for line in output.getvalue().splitlines() if "  event: " not in line]
    assert re.fullmatch(r"\d\d:\d\d:\d\d  Success", phases[-1]), output.getvalue()


def test_the_package_offers_exactly_the_api() -> None:
    assert set(api.__all__) <= set(podwright.__all__)
    for name in api.__all__:
        assert getattr(podwright, name) is getattr(api, name)
    assert issubclass(api.InvalidInputError, api.PodwrightError)
    assert issubclass(api.InvalidInputError, ValueError)
    assert issubclass(api.BackendError, api.PodwrightError)
    assert issubclass(api.TaskNotFoundError, api.InvalidInputError)
    assert issubclass(api.BackendUnreachableError, api.BackendError)
    assert issubclass(api.TaskStoreUnavailableError, api.BackendError)
    assert issubclass(api.AdmissionDeniedError, api.PodwrightError)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = api.nothing  # type: ignore[attr-defined]


WORKLOAD = {
    "apiVersion": "podwright.dev/v1alpha1",
    "kind": "Workload",
    "metadata": {"name": "trainer", "namespace": "vision", "labels": {"team": "vision"}},
    "spec": {"type": "training", "image": "busybox", "compute": {"gpuDevicesRequest": 2}},
}


def test_a_workload_from_data_and_back() -> None:
    workload = api.load(WORKLOAD)
    assert (workload.name, workload.namespace, workload.type) == (
        "trainer",
        "vision",
        api.WorkloadType.TRAINING,
    )
    assert dict(workload.labels) == {"team": "vision"}
    assert workload.notes == ()
    assert workload.to_document() == WORKLOAD


def test_the_old_form_is_read_with_a_note_showing_the_new_one() -> None:
    old = {"type": "training", "name": "trainer", "spec": {"image": "busybox"}}
    workload = api.load(old)
    (note,) = workload.notes
    assert note.startswith("<data>: a workload written as {type, name, spec} is deprecated")
    assert "  apiVersion: podwright.dev/v1alpha1\n  kind: Workload\n" in note
    assert workload.to_document()["spec"] == {"type": "training", "image": "busybox"}


def test_every_workload_of_a_stream_and_of_a_directory(tmp_path: Path) -> None:
    stream = tmp_path / "two.yaml"
    stream.write_text(
        "apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {name: a}\n"
        "spec: {type: training, image: x}\n---\n"
        "apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {name: b}\n"
        "spec: {type: workspace, image: y}\n"
    )
    (tmp_path / "notes.txt").write_text("not read")
    assert [w.name for w in api.load_workloads(tmp_path)] == ["a", "b"]
    assert [w.source for w in api.load_workloads(stream)] == [f"{stream}#1", f"{stream}#2"]
    with pytest.raises(api.InvalidInputError, match="expected one workload, found 2"):
        api.load(stream)


def test_bad_input_names_the_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        "apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {name: a}\n"
        "spec:\n  type: training\n  image: 5\n"
    )
    with pytest.raises(api.InvalidInputError) as raised:
        api.load(path)
    assert raised.value.problems == (f"{path}:6:3: spec.image: expected a string, got 5 (integer)",)


RUNAI_POLICY = {"rules": {"compute": {"gpuDevicesRequest": {"max": 1}}}}


def test_a_run_ai_policy_document_takes_its_type_and_scope_from_the_caller() -> None:
    policies = api.load_policies(RUNAI_POLICY, type="training", scope="cluster=prod")
    (policy,) = policies.policies
    assert (policy.workload_type, policy.scope.to_text()) == (
        api.WorkloadType.TRAINING,
        "cluster=prod",
    )
    evaluation = api.evaluate(api.load(WORKLOAD), policies, cluster="prod")
    assert not evaluation.accepted
    data = evaluation.to_data()
    assert (data["code"], data["details"]) == (400, "1 compliance issue")
    assert data["complianceIssues"] == [
        {
            "field": "compute.gpuDevicesRequest",
            "details": "2 (submission) is above the maximum 1",
            "rule": "max",
            "enforcement": "enforce",
            "policy": {"name": policy.name, "scope": "cluster=prod", "source": "<data>"},
        }
    ]
    with pytest.raises(api.PolicyViolationError) as raised:
        api.render(evaluation)
    assert raised.value.evaluation is evaluation


def test_the_scope_is_the_namespace_s_project_unless_an_administrator_previews_one() -> None:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "vision",
            "labels": {"podwright.dev/department": "research", "podwright.dev/project": "cv"},
        },
    }
    project_policy = {
        "apiVersion": "podwright.dev/v1",
        "kind": "WorkloadPolicy",
        "metadata": {"name": "cv"},
        "spec": {
            "scope": {"cluster": "prod", "department": "research", "project": "cv"},
            "workloadType": "training",
            "rules": {"compute": {"gpuDevicesRequest": {"max": 1}}},
        },
    }
    policies = api.load_policies(namespace, project_policy)
    workload = api.load(WORKLOAD)
    judged = api.evaluate(workload, policies)
    assert (judged.scope.to_text(), judged.chosen_by) == (
        "cluster=prod,department=research,project=cv",
        "namespace vision",
    )
    assert not judged.accepted
    preview = api.evaluate(workload, policies, scope="cluster=prod")
    assert preview.accepted
    assert preview.notes == (
        "a preview in cluster prod (the scope given); a submission is judged in the scope of "
        "its namespace",
    )


def test_render_gives_manifests_the_api_server_accepts() -> None:
    policies = api.load_policies(*POLICIES)
    workload = api.load(EXAMPLES / "workload-training.yaml")
    manifests = api.render(workload, policies, namespace="vision", assets=ASSETS)
    assert [manifest["kind"] for manifest in manifests] == ["Job"]
    for manifest in manifests:
        assert schema_errors(manifest) == []
        assert manifest["metadata"]["namespace"] == "vision"  # type: ignore[index]


def test_paths_may_be_text_or_path_like() -> None:
    path = EXAMPLES / "workload-inference.yaml"
    assert api.load(path).name == api.load(os.fspath(path)).name == "sentiment"


def _namespace(labels: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "vision", "labels": labels},
    }


IMAGE_RULE = {
    "apiVersion": "podwright.dev/v1alpha1",
    "kind": "WorkloadPolicy",
    "metadata": {"name": "images", "namespace": "vision"},
    "spec": {
        "workloadType": "training",
        "rules": {"image": {"options": [{"value": "allowed"}]}},
    },
}
"""The namespace's own policy, as the cluster holds it: it lies where the namespace is."""


@pytest.mark.parametrize(
    ("labels", "department"),
    [
        pytest.param({}, "default", id="no-label"),
        pytest.param({"podwright.dev/department": ""}, "default", id="empty-label"),
        pytest.param({"podwright.dev/department": "research"}, "research", id="labelled"),
    ],
)
def test_a_namespace_s_own_policy_judges_its_workloads_as_in_the_cluster(
    labels: dict[str, object], department: str
) -> None:
    """The workload is judged where the admission webhook would judge it, the namespace's
    WorkloadPolicy lying in the same scope: a namespace is read as the cluster reads it."""
    policies = api.load_policies(_namespace(labels), IMAGE_RULE)
    (policy,) = policies.policies
    assert policy.scope.to_text() == f"cluster=default,department={department},project=vision"
    evaluation = api.evaluate(api.load(WORKLOAD), policies)
    assert evaluation.scope == policy.scope
    assert [issue.rule for issue in evaluation.violations] == ["options"]


def test_a_cluster_s_namespace_places_the_policies_before_they_judge() -> None:
    """``namespaces=`` (a cluster's own Namespace, as ``run`` reads it) places the namespace's
    policy and the workload alike."""
    cluster_namespace = _namespace({"podwright.dev/department": "research"})
    policies = api.load_policies(IMAGE_RULE, namespaces={"vision": cluster_namespace})
    evaluation = api.evaluate(api.load(WORKLOAD), policies)
    assert evaluation.scope.to_text() == "cluster=default,department=research,project=vision"
    assert not evaluation.accepted


def test_the_cluster_is_the_one_the_policy_files_name_and_stays_one() -> None:
    cluster_policy = {
        "apiVersion": "podwright.dev/v1",
        "kind": "WorkloadPolicy",
        "metadata": {"name": "prod"},
        "spec": {"scope": {"cluster": "prod"}, "workloadType": "training"},
    }
    policies = api.load_policies(cluster_policy, IMAGE_RULE, _namespace({}))
    assert policies.cluster == "prod"
    assert [policy.scope.to_text() for policy in policies.policies] == [
        "cluster=prod",
        "cluster=prod,department=default,project=vision",
    ]
    with pytest.raises(api.InvalidInputError, match="cluster other: the policies were read"):
        api.evaluate(api.load(WORKLOAD), policies, cluster="other")
    other = dict(cluster_policy, metadata={"name": "other"})
    other["spec"] = {"scope": {"cluster": "other"}, "workloadType": "training"}
    with pytest.raises(api.InvalidInputError, match="name clusters other, prod: say which"):
        api.load_policies(cluster_policy, other, IMAGE_RULE, _namespace({}))
    chosen = api.load_policies(cluster_policy, other, IMAGE_RULE, _namespace({}), cluster="prod")
    assert chosen.cluster == "prod"


def test_a_namespace_s_policy_needs_the_namespace_s_labels() -> None:
    """A file does not say its namespace's department: placing its WorkloadPolicy in
    ``default`` would leave the department's own policies out of its branch unsaid."""
    with pytest.raises(api.InvalidInputError) as raised:
        api.load_policies(IMAGE_RULE)
    assert raised.value.problems == (
        "<data>: metadata.namespace: the policy of namespace vision, whose department (and "
        "project) a file does not say: give its Namespace object with the policies "
        "(apiVersion: v1, labels podwright.dev/department and, when the project is not named "
        "vision, podwright.dev/project), or say them (-n vision --department NAME "
        "[--project NAME]; namespaces= in Python)",
    )
    unnamed = {**IMAGE_RULE, "metadata": {"name": "images"}}
    with pytest.raises(api.InvalidInputError, match="the policy of namespace default"):
        api.load_policies(unnamed)
    (policy,) = api.load_policies(
        unnamed,
        namespace="nlp",
        namespaces={"nlp": labelled_namespace("nlp", department="research")},
    )
    assert policy.scope.to_text() == "cluster=default,department=research,project=nlp"


def test_a_labelled_namespace_is_checked_as_the_api_server_checks_labels() -> None:
    assert labelled_namespace("nlp", department="research", project="text") == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "nlp",
            "labels": {"podwright.dev/department": "research", "podwright.dev/project": "text"},
        },
    }
    with pytest.raises(api.InvalidInputError) as raised:
        labelled_namespace("NLP", department="r&d")
    assert raised.value.problems == (
        "namespace 'NLP' must consist of lower-case letters, digits and '-', and start and "
        "end with a letter or digit",
        "department 'r&d': a label's value, which must consist of letters, digits, '-', '_' or "
        "'.', and start and end with a letter or digit",
    )


def test_a_deprecated_policy_file_is_read_with_a_warning_showing_the_objects_to_write() -> None:
    project_policy = {
        "apiVersion": "podwright.dev/v1",
        "kind": "WorkloadPolicy",
        "metadata": {"name": "cv"},
        "spec": {
            "scope": {"cluster": "prod", "department": "research", "project": "cv"},
            "workloadType": "training",
            "rules": {"compute": {"gpuDevicesRequest": {"max": 1}}},
        },
    }
    policies = api.load_policies(project_policy)
    assert policies.warnings == (
        "<data>: a WorkloadPolicy of podwright.dev/v1 (its scope in spec.scope) is deprecated: "
        "no cluster serves it; write it as the objects a cluster serves, a WorkloadPolicy in "
        "the project's namespace, and the Namespace labelled podwright.dev/department=research "
        "(apiVersion: podwright.dev/v1alpha1); 'podwright convert --in-place FILE' rewrites the "
        "file. Those objects do not name their cluster (prod here): they lie in the cluster "
        "they are applied to, and offline in the one --cluster-name names (--cluster-name "
        "prod; cluster= in Python); as cluster objects:\n"
        "  apiVersion: v1\n"
        "  kind: Namespace\n"
        "  metadata:\n"
        "    name: cv\n"
        "    labels:\n"
        "      podwright.dev/department: research\n"
        "---\n"
        "  apiVersion: podwright.dev/v1alpha1\n"
        "  kind: WorkloadPolicy\n"
        "  metadata:\n"
        "    name: cv\n"
        "    namespace: cv\n"
        "  spec:\n"
        "    workloadType: training\n"
        "    enforcement: enforce\n"
        "    rules:\n"
        "      compute:\n"
        "        gpuDevicesRequest:\n"
        "          max: 1\n",
    )
    # What it says to write is the same policy, in the same cluster.
    objects = yaml.safe_load_all(
        "\n".join(line.removeprefix("  ") for line in policies.warnings[0].splitlines()[1:])
    )
    rewritten = api.load_policies(*objects, cluster="prod")
    assert rewritten.warnings == ()
    assert rewritten.policies == tuple(
        dataclasses.replace(policy, source="<data>#2") for policy in policies.policies
    )


def test_a_namespace_s_labels_are_strings_as_the_api_server_takes_them(tmp_path: Path) -> None:
    path = tmp_path / "ns.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: vision\n"
        "  labels:\n    podwright.dev/department: 2024\n"
    )
    with pytest.raises(api.InvalidInputError) as raised:
        api.load_policies(path)
    assert raised.value.problems == (
        f"{path}:6:5: metadata.labels.podwright.dev/department: expected a string: quote it",
    )


def test_a_department_inferred_from_the_policies_is_said() -> None:
    project_policy = {
        "apiVersion": "podwright.dev/v1",
        "kind": "WorkloadPolicy",
        "metadata": {"name": "vision"},
        "spec": {
            "scope": {"cluster": "prod", "department": "research", "project": "vision"},
            "workloadType": "training",
        },
    }
    evaluation = api.evaluate(api.load(WORKLOAD), api.load_policies(project_policy))
    assert evaluation.scope.to_text() == "cluster=prod,department=research,project=vision"
    assert evaluation.notes == (
        "namespace vision: department research, where the policies place project vision; a "
        "cluster reads it from the namespace's podwright.dev/department label (none: default)",
    )


def test_an_evaluation_renders_into_the_namespace_it_was_judged_for() -> None:
    evaluation = api.evaluate(api.load(WORKLOAD))
    (manifest,) = api.render(evaluation)
    assert manifest["metadata"]["namespace"] == "vision"  # type: ignore[index]
    with pytest.raises(api.InvalidInputError, match="judged for namespace vision"):
        api.render(evaluation, namespace="audio")
    with pytest.raises(api.InvalidInputError, match="scope: an evaluation was judged already"):
        api.render(evaluation, scope="tenant")
    with pytest.raises(api.InvalidInputError, match=r"says metadata\.namespace vision"):
        api.evaluate(api.load(WORKLOAD), namespace="audio")


@pytest.mark.parametrize(
    ("file", "name"),
    [
        pytest.param("gpu_limits.yaml", "gpu-limits", id="underscore"),
        pytest.param("Team Rules.yml", "team-rules", id="space-and-case"),
        pytest.param("___.yaml", "policy", id="nothing-left"),
    ],
)
def test_a_run_ai_document_is_named_after_its_file(tmp_path: Path, file: str, name: str) -> None:
    path = tmp_path / file
    path.write_text("rules: {compute: {gpuDevicesRequest: {max: 1}}}\n")
    (policy,) = api.load_policies(path, type="training").policies
    assert policy.name == name
