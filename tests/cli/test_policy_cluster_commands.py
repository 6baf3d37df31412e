"""``podwright policy apply`` and ``policy effective --namespace`` against the API-server
emulator with podwright's CRDs (and no webhook: what the webhook adds is the cluster tier's,
tests/cluster/test_admission.py): documents read and refused before the cluster is touched,
policies placed at their scopes, a project's policy in its namespace, all or nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.cli.main import cli
from podwright.core.cluster_resources import API_VERSION
from podwright.core.crds import custom_resource_definitions
from podwright.engine.kubernetes_port import ObjectRef
from tests.k8s_emulator import Emulator
from tests.kube.support import write_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "examples" / "policies"
EXAMPLES = [str(POLICIES / f"{name}.yaml") for name in ("cluster-prod", "department-research")]
PROJECT = str(POLICIES / "project-vision.yaml")

RUNAI_DOCUMENT = "rules:\n  compute:\n    gpuDevicesRequest: {max: 4}\n"


def old_policy_file(tmp_path: Path, name: str, **scope: str) -> Path:
    """A policy file of podwright.dev/v1 (deprecated, still applied): its scope in its spec."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "podwright.dev/v1",
                "kind": "WorkloadPolicy",
                "metadata": {"name": name},
                "spec": {
                    "scope": scope,
                    "workloadType": "training",
                    "rules": {"compute": {"gpuDevicesRequest": {"max": 4}}},
                },
            },
            sort_keys=False,
        )
    )
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["policy", *args])


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KubernetesClient, str]]:
    """An emulator with podwright's CRDs and a namespace ``vision`` of department research."""
    with Emulator() as emulator:
        kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", emulator.url))
        client = KubernetesClient(connect(kubeconfig))
        try:
            for crd in custom_resource_definitions():
                client.apply(crd, field_manager="test")
            client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": "vision",
                        "labels": {"podwright.dev/department": "research"},
                    },
                }
            )
            yield client, kubeconfig
        finally:
            client.close()


def policies(client: KubernetesClient) -> list[tuple[str, str, Any]]:
    found = []
    for kind in ("ClusterWorkloadPolicy", "WorkloadPolicy"):
        objects, _version = client.list_objects(API_VERSION, kind)
        for obj in objects:
            spec = obj["spec"]
            where = obj["metadata"].get("namespace") or (spec["scope"], spec.get("department"))
            found.append((kind, obj["metadata"]["name"], where))
    return sorted(found, key=str)


# Documents refused before the cluster is touched -------------------------------------------------


@pytest.mark.parametrize(
    ("document", "options", "error"),
    [
        (
            RUNAI_DOCUMENT,
            ["--type", "training"],
            "{path}: a Run:ai policy document says neither its workload type nor its scope: "
            "give --scope",
        ),
        (
            RUNAI_DOCUMENT + "meta: {scope: project}\n",
            ["--type", "training", "--scope", "tenant"],
            "{path}:4:1: meta: unknown field 'meta': a Run:ai policy document holds defaults, "
            "rules and imposedAssets (a podwright policy file has apiVersion podwright.dev/v1 and "
            "kind WorkloadPolicy; Run:ai's API request body holds meta and policy)",
        ),
        (
            "apiVersion: v1\nkind: ConfigMap\n",
            [],
            "{path}:1:1: apiVersion: apiVersion v1, kind ConfigMap: expected a policy "
            "resource (podwright.dev/v1alpha1 WorkloadPolicy or ClusterWorkloadPolicy), a Run:ai "
            "policy document (defaults, rules, imposedAssets, with no apiVersion or kind) or a "
            "deprecated policy file (podwright.dev/v1 WorkloadPolicy)",
        ),
        (
            "apiVersion: podwright.dev/v1alpha1\nkind: WorkloadPolicy\nmetadata: {name: p}\n"
            "spec: {workloadType: training}\n",
            ["--scope", "tenant", "--cluster-name", "prod"],
            "{path}:2:1: kind: the resource says project default, and --scope says tenant: "
            "leave --scope out",
        ),
        (
            "apiVersion: podwright.dev/v1alpha1\nkind: ClusterWorkloadPolicy\n"
            "metadata: {name: p}\nspec: {workloadType: training, scope: tenant}\n",
            ["--type", "inference", "--cluster-name", "prod"],
            "{path}:4:8: spec.workloadType: the resource says training, and --type says "
            "inference: leave --type out",
        ),
    ],
    ids=["no-scope", "unknown-section", "other-kind", "resource-in-another-scope", "resource-type"],
)
def test_a_document_that_is_no_policy_is_refused_naming_the_file(
    tmp_path: Path, document: str, options: list[str], error: str
) -> None:
    """No kubeconfig is needed to find these: the cluster is not touched (a resource's scope is
    read with the cluster's name, which --cluster-name gives)."""
    path = tmp_path / "policy.yaml"
    path.write_text(document)
    result = run("apply", "-f", str(path), *options, "--kubeconfig", str(tmp_path / "none"))
    assert result.exit_code == 2, result.output
    assert result.stderr == f"podwright: error: {error.format(path=path)}\n"


def test_a_runai_document_wraps_its_policy_in_the_api_body(
    tmp_path: Path, cluster: tuple[KubernetesClient, str]
) -> None:
    """Run:ai's policy API body, ``{meta, policy}``, is read too; its ``meta`` (ids of Run:ai
    scopes) means nothing here, so --scope says where it goes."""
    client, kubeconfig = cluster
    path = tmp_path / "gpu-limits.yaml"
    path.write_text(
        "meta: {scope: tenant}\npolicy:\n"
        + "".join(f"  {line}\n" for line in RUNAI_DOCUMENT.splitlines())
    )
    result = run(
        "apply", "-f", str(path), "--type", "training", "--scope", "tenant",
        "--kubeconfig", kubeconfig,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == "clusterworkloadpolicy.podwright.dev/gpu-limits applied\n"
    assert policies(client) == [("ClusterWorkloadPolicy", "gpu-limits", ("tenant", None))]


def test_a_runai_document_is_applied_as_read_with_notes(
    tmp_path: Path, cluster: tuple[KubernetesClient, str]
) -> None:
    """Unnamed storage instances and Run:ai's spellings, as the policy reference writes them:
    the resource holds what was read (the CRD's structural schema would refuse ``Step``), and
    each correction is a note at its line."""
    client, kubeconfig = cluster
    path = tmp_path / "runai-storage.yaml"
    path.write_text(
        "defaults:\n"
        "  storage:\n"
        "    hostPath:\n"
        "      instances:\n"
        "        - {path: h3-path-1, mountPath: h3-mount-1}\n"
        "      attributes:\n"
        "        - readOnly: true\n"
        "rules:\n"
        "  compute:\n"
        "    cpuCoreRequest:\n"
        "      min: 1\n"
        "      Step: 2\n"
    )
    result = run(
        "apply", "-f", str(path), "--type", "workspace", "--scope", "tenant",
        "--kubeconfig", kubeconfig,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == "clusterworkloadpolicy.podwright.dev/runai-storage applied\n"
    assert result.stderr.splitlines() == [
        f"podwright: note: {path}:6:7: defaults.storage.hostPath.attributes: a list of one-key "
        "mappings, read as one mapping of 'readOnly'",
        f"podwright: note: {path}:12:7: rules.compute.cpuCoreRequest.Step: read as 'step'",
    ]
    stored = client.get(ObjectRef(API_VERSION, "ClusterWorkloadPolicy", "", "runai-storage"))
    assert stored["spec"] == {
        "scope": "tenant",
        "workloadType": "workspace",
        "enforcement": "enforce",
        "defaults": {
            "storage": {
                "hostPath": {
                    "instances": [{"path": "h3-path-1", "mountPath": "h3-mount-1"}],
                    "attributes": {"readOnly": True},
                }
            }
        },
        "rules": {"compute": {"cpuCoreRequest": {"min": 1, "step": 2}}},
    }


def test_a_policy_file_that_breaks_the_policy_rules_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(
        "apiVersion: podwright.dev/v1\nkind: WorkloadPolicy\nmetadata: {name: broken}\n"
        "spec:\n  scope: tenant\n  workloadType: training\n"
        "  rules:\n    compute:\n      gpuDevicesRequest: {most: 2}\n"
    )
    result = run("apply", "-f", str(path))
    assert result.exit_code == 2
    assert f"{path}:9:" in result.stderr
    assert "spec.rules.compute.gpuDevicesRequest.most" in result.stderr


def test_the_scope_option_must_agree_with_a_file_that_says_its_own(tmp_path: Path) -> None:
    path = old_policy_file(tmp_path, "prod-training", cluster="prod")
    result = run("apply", "-f", str(path), "--scope", "tenant")
    assert result.exit_code == 2
    assert result.stderr == (
        f"podwright: error: {path}:6:3: spec.scope: the file says cluster prod, and "
        "--scope says tenant: leave --scope out\n"
    )


# Policies placed at their scopes ---------------------------------------------------------------


def test_policy_files_become_resources_at_their_scopes(
    cluster: tuple[KubernetesClient, str],
) -> None:
    client, kubeconfig = cluster
    result = run(
        "apply", *(f"-f{file}" for file in [*EXAMPLES, PROJECT]), "--kubeconfig", kubeconfig
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "clusterworkloadpolicy.podwright.dev/prod-training applied",
        "clusterworkloadpolicy.podwright.dev/research-training applied",
        "workloadpolicy.podwright.dev/vision-training applied",
    ]
    # The project's Namespace, beside its policy in the file, is kubectl's to apply.
    assert result.stderr == (
        f"podwright: note: {PROJECT}#1: Namespace vision: not applied (policy apply applies "
        "policies; kubectl apply -f creates or labels a namespace)\n"
    )
    assert policies(client) == [
        ("ClusterWorkloadPolicy", "prod-training", ("cluster", None)),
        ("ClusterWorkloadPolicy", "research-training", ("department", "research")),
        ("WorkloadPolicy", "vision-training", "vision"),
    ]
    # Applied again: updated in place, nothing duplicated.
    assert run("apply", "-f", PROJECT, "--kubeconfig", kubeconfig).exit_code == 0
    assert len(policies(client)) == 3


def test_a_project_is_the_namespace_its_label_names(
    tmp_path: Path, cluster: tuple[KubernetesClient, str]
) -> None:
    client, kubeconfig = cluster
    client.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-cv", "labels": {"podwright.dev/project": "cv"}},
        }
    )
    project_cv = old_policy_file(
        tmp_path, "vision-training", cluster="prod", department="default", project="cv"
    )
    result = run("apply", f"-f{project_cv}", "--kubeconfig", kubeconfig)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(
        f"podwright: warning: {project_cv}: a WorkloadPolicy of podwright.dev/v1 (its scope in "
        "spec.scope) is deprecated"
    )
    assert policies(client) == [("WorkloadPolicy", "vision-training", "team-cv")]
    effective = run("effective", "-n", "team-cv", "--type", "training", "--kubeconfig", kubeconfig)
    assert effective.exit_code == 0, effective.output
    assert effective.stdout.splitlines()[1].split()[-2:] == ["project", "cv"]


def test_nothing_is_applied_when_a_project_has_no_namespace(
    tmp_path: Path, cluster: tuple[KubernetesClient, str]
) -> None:
    client, kubeconfig = cluster
    elsewhere = old_policy_file(
        tmp_path, "nlp-training", cluster="prod", department="research", project="nlp"
    )
    result = run("apply", f"-f{EXAMPLES[0]}", f"-f{elsewhere}", "--kubeconfig", kubeconfig)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1:] == [
        f"podwright: error: {elsewhere}: project nlp: no namespace is this project (a namespace "
        "named nlp, or labelled podwright.dev/project=nlp): create it, or give --namespace",
        "podwright: error: nothing was applied",
    ]
    assert policies(client) == []


def test_a_file_never_replaces_another_scopes_policy_of_the_same_name(
    tmp_path: Path, cluster: tuple[KubernetesClient, str]
) -> None:
    """A ClusterWorkloadPolicy's name is the cluster's: two departments' files may both say
    ``research-training``. The second is refused, not applied over the first."""
    client, kubeconfig = cluster
    assert run("apply", f"-f{EXAMPLES[1]}", "--kubeconfig", kubeconfig).exit_code == 0
    other = old_policy_file(tmp_path, "research-training", cluster="prod", department="ml")
    result = run("apply", f"-f{other}", "--kubeconfig", kubeconfig)
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1:] == [
        f"podwright: error: {other}: ClusterWorkloadPolicy research-training: it exists already "
        "as another policy (department 'research' (this file: 'ml')): give this one another "
        "name (--name), or delete the other first",
        "podwright: error: nothing was applied",
    ]
    assert policies(client) == [
        ("ClusterWorkloadPolicy", "research-training", ("department", "research"))
    ]
    renamed = run("apply", f"-f{other}", "--name", "ml-training", "--kubeconfig", kubeconfig)
    assert renamed.exit_code == 0, renamed.output
    assert len(policies(client)) == 2


def test_a_dry_run_stores_nothing(cluster: tuple[KubernetesClient, str]) -> None:
    client, kubeconfig = cluster
    result = run("apply", f"-f{EXAMPLES[0]}", "--dry-run", "--kubeconfig", kubeconfig)
    assert result.exit_code == 0, result.output
    assert result.stdout == "clusterworkloadpolicy.podwright.dev/prod-training checked (dry run)\n"
    assert policies(client) == []


# The effective policy of a namespace ------------------------------------------------------------


def test_a_namespaces_effective_policy_names_each_entrys_scope(
    cluster: tuple[KubernetesClient, str],
) -> None:
    _client, kubeconfig = cluster
    applied = run(
        "apply", *(f"-f{file}" for file in [*EXAMPLES, PROJECT]), "--kubeconfig", kubeconfig
    )
    assert applied.exit_code == 0, applied.output
    result = run(
        "effective", "-n", "vision", "--type", "training", "--kubeconfig", kubeconfig,
        "--cluster-name", "prod",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split()[-2:] for line in result.stdout.splitlines()[1:]}
    assert rows["rules.compute.gpuDevicesRequest"] == ["cluster", "prod"]
    assert rows["rules.priorityClass"] == ["department", "research"]
    assert rows["rules.nodePools"] == ["project", "vision"]
    # The same as the files give for the same namespace, the cluster's own objects read
    # offline.
    from_files = run(
        "effective", *EXAMPLES, PROJECT, "-n", "vision", "--type", "training",
        "--cluster-name", "prod",
    )  # fmt: skip
    assert from_files.exit_code == 0, from_files.output
    assert from_files.stdout == result.stdout


def test_an_unknown_namespace_is_bad_input(cluster: tuple[KubernetesClient, str]) -> None:
    _client, kubeconfig = cluster
    result = run("effective", "-n", "nowhere", "--type", "training", "--kubeconfig", kubeconfig)
    assert result.exit_code == 2
    assert "--namespace nowhere: no such namespace in http://127.0.0.1:" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-n", "vision", "--scope", "tenant", EXAMPLES[0]],
            "give POLICY files and one of --scope and -n, or -n alone",
        ),
        ([EXAMPLES[0]], "give POLICY files and one of --scope and -n, or -n alone"),
        (
            [EXAMPLES[0], "--scope", "tenant", "--kubeconfig", "k"],
            "--kubeconfig and --context go with -n without POLICY files",
        ),
        (
            ["-n", "vision", "--department", "research"],
            "-n without POLICY files reads the policies and the namespace from the cluster",
        ),
    ],
)
def test_effective_reads_files_or_the_cluster(args: list[str], message: str) -> None:
    result = run("effective", "--type", "training", *args)
    assert result.exit_code == 2
    assert message in result.stderr


# The compliance report --------------------------------------------------------------------------


def workload_object(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "vision"},
        "spec": {"type": "training", "image": "pytorch", **spec},
    }


def install_example_assets(client: KubernetesClient) -> None:
    """The example catalogue's entries as ClusterAssets (the cluster policy imposes one)."""
    catalogue = yaml.safe_load((ROOT / "examples" / "assets.yaml").read_text())
    for entry in catalogue["assets"]:
        spec = {key: value for key, value in entry.items() if key != "name"}
        client.create(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterAsset",
                "metadata": {"name": entry["name"]},
                "spec": spec,
            }
        )


def test_the_report_lists_the_workloads_the_current_policies_would_refuse(
    cluster: tuple[KubernetesClient, str],
) -> None:
    """Workloads admitted before a policy (created here with no webhook in the way) are judged
    by the policies of now: each refused one with every issue, exit status 1."""
    client, kubeconfig = cluster
    install_example_assets(client)
    client.create(workload_object("fine"))
    client.create(workload_object("greedy", compute={"gpuDevicesRequest": 12}, nodePools=["x"]))
    assert run("report", "--kubeconfig", kubeconfig).exit_code == 0  # no policy yet
    applied = run(
        "apply", *(f"-f{file}" for file in [*EXAMPLES, PROJECT]), "--kubeconfig", kubeconfig
    )
    assert applied.exit_code == 0, applied.output
    result = run("report", "--kubeconfig", kubeconfig, "--cluster-name", "prod")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAMESPACE", "WORKLOAD", "REASON", "ISSUE"]
    assert lines[1].split()[:4] == [
        "vision",
        "greedy",
        "Noncompliant",
        "spec.compute.gpuDevicesRequest:",
    ]
    assert lines[1].endswith("(rule max, policy 'prod-training' of cluster prod)")
    assert len(lines) == 2  # nodePools is warn mode (the project's): admitted, not listed
    assert result.stderr == "1 of 2 Workloads would be refused by the current policies\n"
    as_json = run("report", "-n", "vision", "-o", "json", "--kubeconfig", kubeconfig)
    assert as_json.exit_code == 1
    (entry,) = json.loads(as_json.stdout)
    assert (entry["namespace"], entry["name"], entry["reason"]) == (
        "vision",
        "greedy",
        "Noncompliant",
    )
    assert len(entry["issues"]) == 1
