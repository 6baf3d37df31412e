"""``podwright policy check|effective|evaluate``: output shapes, exit codes, located errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from podwright.cli.main import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POLICIES = [
    str(EXAMPLES / "policies" / name)
    for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
]
ASSETS = str(EXAMPLES / "assets.yaml")
WORKLOAD = str(EXAMPLES / "workload-training.yaml")
VISION = "cluster=default,department=research,project=vision"
"""The examples' project: they lie in the cluster --cluster-name names, else ``default``."""


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin)


def write(tmp_path: Path, name: str, data: Any) -> str:
    """``data`` in the file ``name``: text as it is, a list as its documents."""
    path = tmp_path / name
    if isinstance(data, str):
        path.write_text(data)
    elif isinstance(data, list):
        path.write_text(yaml.safe_dump_all(data, sort_keys=False))
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def namespace(name: str, department: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"podwright.dev/department": department}},
    }


def project_policy(name: str, rules: dict[str, Any]) -> dict[str, Any]:
    """The WorkloadPolicy of the project the namespace ``name`` is."""
    return {
        "apiVersion": "podwright.dev/v1alpha1",
        "kind": "WorkloadPolicy",
        "metadata": {"name": name, "namespace": name},
        "spec": {"workloadType": "training", "rules": rules},
    }


def test_check_the_example_tree() -> None:
    result = run("policy", "check", *POLICIES, "--assets", ASSETS)
    assert result.exit_code == 0, result.stderr
    assert "3 policies checked: no problems" in result.stdout
    assert "department research" in result.stdout


def test_check_reports_every_problem_with_file_and_line(tmp_path: Path) -> None:
    text = (
        "apiVersion: podwright.dev/v1\n"
        "kind: WorkloadPolicy\n"
        "metadata: {name: broken}\n"
        "spec:\n"
        "  scope: {cluster: prod}\n"
        "  workloadType: training\n"
        "  rules:\n"
        "    image:\n"
        "      min: 1\n"
        "    compute:\n"
        "      gpuDevicesRequest: {min: 4, max: 2}\n"
    )
    broken = write(tmp_path, "broken.yaml", text)
    result = run("policy", "check", broken)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"podwright: error: {broken}:9:7: spec.rules.image.min: a string field cannot carry the rule 'min' "
        "(string fields take required, canEdit, options)",
        f"podwright: error: {broken}:11:27: spec.rules.compute.gpuDevicesRequest.min: min 4 is above max 2",
    ]


def test_check_finds_a_default_that_default_from_computes_against_a_step(tmp_path: Path) -> None:
    text = (
        "apiVersion: podwright.dev/v1\n"
        "kind: WorkloadPolicy\n"
        "metadata: {name: halves}\n"
        "spec:\n"
        "  scope: {cluster: prod}\n"
        "  workloadType: training\n"
        "  defaults:\n"
        "    compute: {cpuCoreLimit: 1.5}\n"
        "  rules:\n"
        "    compute:\n"
        "      cpuCoreRequest:\n"
        "        step: 0.5\n"
        "        defaultFrom: {field: compute.cpuCoreLimit, factor: 0.5}\n"
    )
    halves = write(tmp_path, "halves.yaml", text)
    result = run("policy", "check", halves)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"podwright: error: {halves}:8:15: spec.defaults.compute.cpuCoreLimit: this default makes "
        "compute.cpuCoreRequest default to 0.75 (defaultFrom compute.cpuCoreLimit × 0.5), which "
        "breaks this policy's own 'step' rule: 0.75 is not a multiple of the step 0.5 counted "
        "from 0",
    ]


def test_a_catalogue_reports_its_envelope_with_its_assets(tmp_path: Path) -> None:
    text = (
        "apiVersion: podwright.dev/v1\n"
        "kind: Catalog\n"
        "assets:\n"
        "  - name: data\n"
        "    kind: pvc\n"
        "    spec: {claimNam: data}\n"
    )
    catalogue = write(tmp_path, "assets.yaml", text)
    result = run("policy", "check", *POLICIES, "--assets", catalogue)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"podwright: error: {catalogue}:2:1: kind: expected 'AssetCatalogue', got 'Catalog' "
        "(string)",
        f"podwright: error: {catalogue}:4:5: assets[0].id: expected a non-empty string, got None "
        "(null)",
        f"podwright: error: {catalogue}:6:12: assets[0].spec.claimNam: unknown field 'claimNam' "
        "(did you mean 'claimName'?)",
    ]


def test_check_finds_a_rule_owned_by_another_scope(tmp_path: Path) -> None:
    project = write(
        tmp_path,
        "project.yaml",
        project_policy("greedy", {"compute": {"gpuDevicesRequest": {"max": 64}}}),
    )
    result = run("policy", "check", *POLICIES, project, "-n", "greedy", "--department", "research")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"podwright: error: {project}:")
    assert (
        "the rules of compute.gpuDevicesRequest are owned by cluster default (policy "
        "'prod-training')" in line
    )


def test_check_refuses_an_imposed_asset_with_credentials(tmp_path: Path) -> None:
    policy = yaml.safe_load(Path(POLICIES[0]).read_text())
    policy["spec"]["imposedAssets"] = ["0b7e1c2a-private-bucket"]
    path = write(tmp_path, "cluster.yaml", policy)
    result = run("policy", "check", path, "--assets", ASSETS)
    assert result.exit_code == 2
    assert "references credentials and cannot be imposed" in result.stderr


def test_effective_policy_with_sources() -> None:
    result = run(
        "policy", "effective", "--scope", VISION, "--type", "training", "-o", "json", *POLICIES
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["scope"] == {"cluster": "default", "department": "research", "project": "vision"}
    assert data["policies"] == ["prod-training", "research-training", "vision-training"]
    assert data["defaults"]["image"] == "nvcr.io/nvidia/pytorch:24.08-py3"
    assert data["rules"]["compute"]["gpuDevicesRequest"] == {"max": 8}
    assert data["sources"]["defaults.image"] == "project vision"
    assert data["sources"]["rules.compute.gpuDevicesRequest"] == "cluster default"
    assert (
        data["sources"]["defaults.environmentVariables.instances[HF_HOME]"] == "department research"
    )
    table = run(
        "policy", "effective", "--scope", "cluster=default", "--type", "training", *POLICIES
    )
    assert table.exit_code == 0
    entries = [line.split()[0] for line in table.stdout.splitlines()]
    assert "defaults.image" not in entries  # the project's default is below this scope
    assert "rules.compute.gpuDevicesRequest" in table.stdout


def test_evaluate_json_on_success() -> None:
    result = run(
        "policy", "evaluate", "--workload", WORKLOAD, "--assets", ASSETS, "-o", "json", *POLICIES
    )
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {
        "accepted",
        "workload",
        "sources",
        "scope",
        "scopeChosenBy",
        "warnings",
        "audited",
    }
    assert (data["accepted"], data["audited"]) == (True, [])
    assert (data["scope"], data["scopeChosenBy"]) == (
        VISION,
        "the policies' deepest scope",
    )
    assert data["workload"]["compute"]["extendedResources"] == [
        {"resource": "default/cpu", "quantity": 5},
        {"resource": "added/cpu", "quantity": 3},
        {"resource": "added/memory", "quantity": "5M"},
    ]
    assert (
        data["sources"]["compute.extendedResources[added/cpu].quantity"]
        == "attribute default (cluster default)"
    )
    assert (
        data["sources"]["compute.cpuCoreRequest"]
        == "defaultFrom compute.cpuCoreLimit × 0.5 (cluster default)"
    )
    assert data["sources"]["storage.pvc[team-datasets].claimName"].startswith(
        "imposed asset f12c965b"
    )
    # The project's warn-mode rule is in the JSON, and on standard error.
    (warning,) = data["warnings"]
    assert warning["field"] == "nodePools"
    assert (warning["rule"], warning["enforcement"]) == ("options", "warn")
    assert warning["policy"] == {
        "name": "vision-training",
        "scope": VISION,
        "source": f"{EXAMPLES / 'policies' / 'project-vision.yaml'}#2",  # after its Namespace
    }
    assert (
        'podwright: warning: nodePools: item 1, \'v100\', of ["a100", "v100"] (submission) '
        "is not among the options" in result.stderr
    )


def test_evaluate_violations_exit_1_with_compliance_issues(tmp_path: Path) -> None:
    workload = write(
        tmp_path,
        "w.yaml",
        {
            "type": "training",
            "spec": {
                "compute": {
                    "gpuDevicesRequest": 16,
                    "extendedResources": [{"resource": "default/cpu", "exclude": True}],
                }
            },
        },
    )
    result = run(
        "policy", "evaluate", "--workload", workload, "--assets", ASSETS, "-o", "json", *POLICIES
    )
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    # As Run:ai's API reports a refused submission: code, message, details, complianceIssues
    # of field, details and rule; podwright's extras beside them.
    assert {key: data[key] for key in ("accepted", "code", "message", "details")} == {
        "accepted": False,
        "code": 400,
        "message": "the workload does not comply with the policies of project vision",
        "details": "2 compliance issues",
    }
    cluster_policy = {
        "name": "prod-training",
        "scope": "cluster=default",
        "source": str(EXAMPLES / "policies" / "cluster-prod.yaml"),
    }
    assert data["complianceIssues"] == [
        {
            "field": "compute.gpuDevicesRequest",
            "details": "16 (submission) is above the maximum 8",
            "rule": "max",
            "enforcement": "enforce",
            "policy": cluster_policy,
        },
        {
            "field": "compute.extendedResources[default/cpu]",
            "details": "'default/cpu' is locked by cluster default and cannot be excluded",
            "rule": "locked",
            "enforcement": "enforce",
            "policy": cluster_policy,
        },
    ]
    assert data["scope"] == VISION
    table = run("policy", "evaluate", "--workload", workload, "--assets", ASSETS, *POLICIES)
    assert table.exit_code == 1
    assert table.stdout.splitlines()[0].split() == ["FIELD", "RULE", "DETAILS"]
    assert "2 violations: the workload is rejected" in table.stderr


def test_evaluate_yaml_and_table_outputs() -> None:
    result = run(
        "policy", "evaluate", "--workload", WORKLOAD, "--assets", ASSETS, "-o", "yaml", *POLICIES
    )
    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout)["workload"]["image"] == "nvcr.io/nvidia/pytorch:24.08-py3"
    table = run("policy", "evaluate", "--workload", WORKLOAD, "--assets", ASSETS, *POLICIES)
    assert table.exit_code == 0
    rows = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
    assert rows["image"].split()[1:] == [
        "nvcr.io/nvidia/pytorch:24.08-py3",
        "policy",
        "default",
        "(project",
        "vision)",
    ]


def test_evaluate_bad_workload_is_bad_input_with_location(tmp_path: Path) -> None:
    workload = write(
        tmp_path, "w.yaml", "type: training\nspec:\n  compute:\n    gpuDevicesRequest: many\n"
    )
    result = run("policy", "evaluate", "--workload", workload, *POLICIES)
    assert result.exit_code == 2
    assert result.stderr == (
        f"podwright: error: {workload}:4:5: spec.compute.gpuDevicesRequest: expected an integer, got 'many' (string)\n"
    )


def test_evaluate_reads_the_workload_from_stdin_with_an_explicit_type() -> None:
    result = run(
        "policy",
        "evaluate",
        "--workload",
        "-",
        "--type",
        "training",
        "--assets",
        ASSETS,
        "-o",
        "json",
        *POLICIES,
        stdin="image: x\n",
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["workload"]["image"] == "x"


def test_evaluate_needs_a_scope_when_policies_span_branches(tmp_path: Path) -> None:
    _namespace, other = yaml.safe_load_all(Path(POLICIES[2]).read_text())
    other["metadata"] = {"name": "other", "namespace": "audio"}
    path = write(tmp_path, "other.yaml", [namespace("audio", "research"), other])
    result = run("policy", "evaluate", "--workload", WORKLOAD, *POLICIES, path)
    assert result.exit_code == 2
    assert "give the workload's namespace (metadata.namespace), or preview a scope" in (
        result.stderr
    )
    scoped = run(
        "policy",
        "evaluate",
        "--workload",
        WORKLOAD,
        "--scope",
        VISION,
        "--assets",
        ASSETS,
        *POLICIES,
        path,
    )
    assert scoped.exit_code == 0, scoped.stderr


def test_bad_scope_and_type_are_usage_errors() -> None:
    result = run("policy", "effective", "--scope", "prod", "--type", "training", *POLICIES)
    assert result.exit_code == 2
    assert "expected 'tenant' or level=name pairs" in result.stderr
    result = run("policy", "effective", "--scope", "tenant", "--type", "batch", *POLICIES)
    assert result.exit_code == 2
    assert "'batch' is not one of" in result.stderr


def test_unreadable_policy_file(tmp_path: Path) -> None:
    result = run("policy", "check", str(tmp_path / "missing.yaml"))
    assert result.exit_code == 2
    assert "missing.yaml: No such file or directory" in result.stderr


def test_evaluate_asks_for_the_catalogue_when_assets_are_imposed() -> None:
    result = run("policy", "evaluate", "--workload", WORKLOAD, *POLICIES)
    assert result.exit_code == 2
    assert result.stderr == (
        "podwright: error: the policies of project vision impose assets "
        "(f12c965b-44e9-4ff6-8b43-01d8f9e630cc); give the asset catalogue they come from (assets=, --assets FILE)\n"
    )


def test_evaluate_audit_mode_is_silent_unless_asked(tmp_path: Path) -> None:
    vision, policy = yaml.safe_load_all(Path(POLICIES[2]).read_text())
    policy["spec"]["enforcement"] = "audit"
    path = write(tmp_path, "audit.yaml", [vision, policy])
    arguments = [
        "policy",
        "evaluate",
        "--workload",
        WORKLOAD,
        "--assets",
        ASSETS,
        *POLICIES[:2],
        path,
    ]
    quiet = run(*arguments, "-o", "json")
    assert quiet.exit_code == 0
    assert quiet.stderr == ""
    shown = run(*arguments, "-o", "json", "--show-audited")
    assert shown.stderr.startswith(
        'podwright: audit: nodePools: item 1, \'v100\', of ["a100", "v100"] (submission) '
        "is not among the options"
    )


def test_no_policy_of_the_workloads_type_means_no_rules_apply() -> None:
    """As in Run:ai: policies exist for other types only, so the submission is the effective
    workload, every value from the submission; a note says why."""
    inference = str(EXAMPLES / "workload-inference.yaml")
    result = run("policy", "evaluate", "--workload", inference, "-o", "json", *POLICIES)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    submitted = yaml.safe_load(Path(inference).read_text())["spec"]
    assert data["workload"] == {key: value for key, value in submitted.items() if key != "type"}
    assert set(data["sources"].values()) == {"submission"}
    assert result.stderr == (
        "podwright: note: no inference policy among the policies given, so no rules apply\n"
    )
    scoped = run("policy", "evaluate", "--workload", inference, "--scope", VISION, *POLICIES)
    assert scoped.exit_code == 0, scoped.stderr


# -- the cluster's objects, read offline --------------------------------------------------------


def test_effective_for_a_namespace_reads_the_files_as_the_cluster_reads_its_objects() -> None:
    """``-n`` with POLICY files: the project of that namespace, placed by its Namespace object
    among the files, as ``-n`` alone shows it from a cluster."""
    by_namespace = run(
        "policy", "effective", "-n", "vision", "--type", "training", "-o", "json", *POLICIES
    )
    assert by_namespace.exit_code == 0, by_namespace.stderr
    by_scope = run(
        "policy", "effective", "--scope", VISION, "--type", "training", "-o", "json", *POLICIES
    )
    assert json.loads(by_namespace.stdout) == json.loads(by_scope.stdout)
    both = run(
        "policy", "effective", "-n", "vision", "--scope", VISION, "--type", "training", *POLICIES
    )
    assert both.exit_code == 2
    assert "give POLICY files and one of --scope and -n" in both.stderr


def test_a_namespace_s_policy_without_its_namespace_names_the_options_that_place_it(
    tmp_path: Path,
) -> None:
    project = write(
        tmp_path, "nlp.yaml", project_policy("nlp", {"nodePools": {"options": [{"value": "a100"}]}})
    )
    refused = run("policy", "check", *POLICIES[:2], project)
    assert refused.exit_code == 2
    assert refused.stderr == (
        f"podwright: error: {project}:5:3: metadata.namespace: the policy of namespace nlp, "
        "whose department (and project) a file does not say: give its Namespace object with "
        "the policies (apiVersion: v1, labels podwright.dev/department and, when the project "
        "is not named nlp, podwright.dev/project), or say them (-n nlp --department NAME "
        "[--project NAME]; namespaces= in Python)\n"
    )
    placed = run(
        "policy",
        "check",
        *POLICIES[:2],
        project,
        "-n",
        "nlp",
        "--department",
        "research",
        "--project",
        "text",
    )
    assert placed.exit_code == 0, placed.stderr
    assert "project text" in placed.stdout
    alone = run("policy", "check", project, "--department", "research")
    assert alone.exit_code == 2
    assert "--department describes a namespace: name it (-n/--namespace" in alone.stderr


def test_evaluate_judges_the_workload_in_the_namespace_the_options_describe(tmp_path: Path) -> None:
    project = write(
        tmp_path, "nlp.yaml", project_policy("nlp", {"nodePools": {"options": [{"value": "a100"}]}})
    )
    arguments = ["policy", "evaluate", "--workload", WORKLOAD, "--assets", ASSETS, "-o", "json"]
    result = run(*arguments, "-n", "nlp", "--department", "research", *POLICIES[:2], project)
    assert result.exit_code == 1, result.stderr
    data = json.loads(result.stdout)
    assert data["scope"] == "cluster=default,department=research,project=nlp"
    # The cluster's rule (no image: the project vision's default is not this project's), and
    # the project's own.
    assert {issue["field"] for issue in data["complianceIssues"]} == {"image", "nodePools"}


def test_a_deprecated_policy_file_is_read_with_a_warning_that_shows_what_to_write(
    tmp_path: Path,
) -> None:
    old = write(
        tmp_path,
        "old.yaml",
        {
            "apiVersion": "podwright.dev/v1",
            "kind": "WorkloadPolicy",
            "metadata": {"name": "gpus"},
            "spec": {
                "scope": {"cluster": "prod", "department": "research"},
                "workloadType": "training",
                "rules": {"compute": {"gpuDevicesRequest": {"max": 2}}},
            },
        },
    )
    result = run("policy", "check", old)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == (
        f"podwright: warning: {old}: a WorkloadPolicy of podwright.dev/v1 (its scope in "
        "spec.scope) is deprecated: no cluster serves it; write it as the objects a cluster "
        "serves, a ClusterWorkloadPolicy of scope department (apiVersion: "
        "podwright.dev/v1alpha1); 'podwright convert --in-place FILE' rewrites the file. Those "
        "objects do not name their cluster (prod here): they lie in the cluster they are "
        "applied to, and offline in the one --cluster-name names (--cluster-name prod; "
        "cluster= in Python); as cluster objects:\n"
        "  apiVersion: podwright.dev/v1alpha1\n"
        "  kind: ClusterWorkloadPolicy\n"
        "  metadata:\n"
        "    name: gpus\n"
        "  spec:\n"
        "    scope: department\n"
        "    department: research\n"
        "    workloadType: training\n"
        "    enforcement: enforce\n"
        "    rules:\n"
        "      compute:\n"
        "        gpuDevicesRequest:\n"
        "          max: 2\n"
    )
    assert "department research" in result.stdout
