"""``podwright render``: output formats, exit codes, and errors that say where a value came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from podwright.cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICIES = [
    f"--policy={EXAMPLES / 'policies' / name}"
    for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
]
ASSETS = f"--assets={EXAMPLES / 'assets.yaml'}"
TRAINING = str(EXAMPLES / "workload-training.yaml")
PROFILE = str(EXAMPLES / "cluster-profile.yaml")


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["render", *args], input=stdin)


def write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_json_is_a_v1_list() -> None:
    result = run("--workload", TRAINING, *POLICIES, ASSETS, "-o", "json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["apiVersion"], document["kind"]) == ("v1", "List")
    assert [item["kind"] for item in document["items"]] == ["Job"]


def test_without_policies_the_submission_renders_as_written(tmp_path: Path) -> None:
    workload = write(
        tmp_path, "w.yaml", {"type": "workspace", "name": "ws", "spec": {"image": "busybox"}}
    )
    result = run("--workload", workload)
    assert result.exit_code == 0, result.stderr
    (pod,) = yaml.safe_load_all(result.stdout)
    assert pod["spec"]["containers"][0]["image"] == "busybox"
    assert pod["spec"]["priorityClassName"] == "podwright-high"


def test_without_policies_a_limit_below_its_request_is_bad_input(tmp_path: Path) -> None:
    text = (
        "apiVersion: podwright.dev/v1alpha1\n"
        "kind: Workload\n"
        "metadata: {name: tight}\n"
        "spec:\n"
        "  type: training\n"
        "  image: busybox\n"
        "  compute: {cpuCoreRequest: 2, cpuCoreLimit: 1, cpuMemoryRequest: 2Gi, "
        "cpuMemoryLimit: 1Gi}\n"
    )
    workload = write(tmp_path, "tight.yaml", text)
    result = run("--workload", workload)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"podwright: error: {workload}:7:32: spec.compute.cpuCoreLimit: cpuCoreLimit 1 is below "
        "cpuCoreRequest 2",
        f"podwright: error: {workload}:7:72: spec.compute.cpuMemoryLimit: cpuMemoryLimit '1Gi' is "
        "below cpuMemoryRequest '2Gi'",
    ]


def test_envelope_and_spec_problems_are_reported_together(tmp_path: Path) -> None:
    text = "type: training\nname: Bad_Name\nlabels: {}\nspec:\n  imagePulPolicy: Always\n"
    workload = write(tmp_path, "w.yaml", text)
    result = run("--workload", workload)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"podwright: error: {workload}:3:1: labels: unknown field 'labels'",
        f"podwright: error: {workload}:5:3: spec.imagePulPolicy: unknown field 'imagePulPolicy' "
        "(did you mean 'imagePullPolicy'?)",
        f"podwright: error: {workload}:2:1: name: 'Bad_Name' must consist of lower-case letters, "
        "digits and '-', and start and end with a letter or digit",
    ]


def test_standard_input_name_and_type_options() -> None:
    result = run(
        "--workload", "-", "--type", "training", "--name", "from-cli", stdin="image: busybox\n"
    )
    assert result.exit_code == 0, result.stderr
    (job,) = yaml.safe_load_all(result.stdout)
    assert job["metadata"]["name"] == "from-cli"


def test_a_workload_without_a_name(tmp_path: Path) -> None:
    workload = write(tmp_path, "w.yaml", {"type": "training", "spec": {"image": "busybox"}})
    result = run("--workload", workload)
    assert result.exit_code == 2
    assert "w.yaml: the workload has no name: give it one (metadata.name)" in result.stderr


def test_violations_render_nothing(tmp_path: Path) -> None:
    workload = write(
        tmp_path,
        "w.yaml",
        {"type": "training", "name": "t", "spec": {"compute": {"gpuDevicesRequest": 64}}},
    )
    result = run("--workload", workload, *POLICIES, ASSETS)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "podwright: violation: compute.gpuDevicesRequest:" in result.stderr
    assert "nothing rendered" in result.stderr


def test_a_field_the_profile_cannot_honour_names_its_source(tmp_path: Path) -> None:
    profile = write(
        tmp_path,
        "p.yaml",
        {
            "apiVersion": "podwright.dev/v1",
            "kind": "ClusterProfile",
            "metadata": {"name": "lean"},
            "spec": {"priorityClasses": {"low": None}},
        },
    )
    result = run("--workload", TRAINING, *POLICIES, ASSETS, "--profile", profile)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        'podwright: warning: nodePools: item 1, \'v100\', of ["a100", "v100"] (submission) '
        'is not among the options ["a100", "h100"] '
        "(rule options, policy 'vision-training' (project vision))",
        "podwright: error: cannot render on cluster profile 'lean':",
        "podwright: error: priorityClass: the cluster profile offers no PriorityClass for priority "
        "'low' (value from policy default (cluster default))",
    ]


def test_the_namespace_s_department_may_be_given_where_its_object_is_not(tmp_path: Path) -> None:
    """Rendered into ``nlp``, a project of the research department by ``--department``: the
    department's defaults apply, as they would in a cluster whose namespace is so labelled."""
    workload = yaml.safe_load(Path(TRAINING).read_text())
    workload["spec"]["image"] = "pytorch/pytorch:2.4"  # the project vision's default is not here
    path = write(tmp_path, "w.yaml", workload)
    options = ["--workload", path, *POLICIES[:2], ASSETS, "--namespace", "nlp", "-o", "json"]
    result = run(*options, "--department", "research")
    assert result.exit_code == 0, result.stderr
    (job,) = json.loads(result.stdout)["items"]
    assert job["metadata"]["namespace"] == "nlp"
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_HOME", "value": "/data/hf-cache"} in env
    unplaced = run(*options)
    assert unplaced.exit_code == 0, unplaced.stderr
    assert "HF_HOME" not in unplaced.stdout  # a namespace without labels: department default
    assert unplaced.stderr == ""


def test_a_bad_profile_is_located(tmp_path: Path) -> None:
    profile = write(
        tmp_path,
        "p.yaml",
        "apiVersion: podwright.dev/v1\nkind: ClusterProfile\nspec:\n  fuse:\n    grant: always\n",
    )
    result = run("--workload", TRAINING, "--profile", profile)
    assert result.exit_code == 2
    assert f"{profile}:5:5: spec.fuse.grant: expected one of" in result.stderr


def test_an_invalid_workload_is_located(tmp_path: Path) -> None:
    workload = write(tmp_path, "w.yaml", "type: training\nname: t\nspec:\n  image: 5\n")
    result = run("--workload", workload)
    assert result.exit_code == 2
    assert f"{workload}:4:3: spec.image: expected a string" in result.stderr


def test_namespace_option(tmp_path: Path) -> None:
    result = run("--workload", TRAINING, *POLICIES, ASSETS, "--namespace", "vision")
    assert result.exit_code == 0, result.stderr
    assert all(
        doc["metadata"]["namespace"] == "vision" for doc in yaml.safe_load_all(result.stdout)
    )
    result = run("--workload", TRAINING, *POLICIES, ASSETS, "--namespace", "Vision!")
    assert result.exit_code == 2
    assert "namespace: 'Vision!' must consist of lower-case letters" in result.stderr


def test_help_names_every_kind() -> None:
    result = CliRunner().invoke(cli, ["render", "--help"])
    assert result.exit_code == 0
    for kind in ("Pod", "Job", "PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "JAXJob", "Knative"):
        assert kind in result.stdout


TWO_WORKLOADS = (
    "apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {name: first}\n"
    "spec: {type: training, image: busybox}\n---\n"
    "apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {name: second}\n"
    "spec: {type: workspace, image: busybox}\n"
)


def test_a_file_of_several_workloads_renders_each_as_kubectl_apply_f_reads_it(
    tmp_path: Path,
) -> None:
    workloads = write(tmp_path, "two.yaml", TWO_WORKLOADS)
    result = run("-f", workloads, "-o", "json")
    assert result.exit_code == 0, result.stderr
    items = json.loads(result.stdout)["items"]
    assert [(item["kind"], item["metadata"]["name"]) for item in items] == [
        ("Job", "first"),
        ("Pod", "second"),
    ]
    named = run("-f", workloads, "--name", "x")
    assert named.exit_code == 2
    assert f"--name names one workload, and {workloads} holds 2" in named.stderr
    policy = str(EXAMPLES / "policies" / "cluster-prod.yaml")
    evaluated = CliRunner().invoke(cli, ["policy", "evaluate", "-f", workloads, policy])
    assert evaluated.exit_code == 2
    assert f"{workloads} holds 2 workloads, and this command takes one" in evaluated.stderr
