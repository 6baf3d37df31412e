"""``podwright.read_cluster_policies`` and ``podwright.compliance_report``: the policies a cluster
holds, read through the public API as ``policy effective -n`` and ``policy report`` read them,
against the API-server emulator with podwright's CRDs (the fixtures of the commands' tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

import podwright
from podwright import ClusterAccess, InvalidInputError, ReportEntry, Scope
from podwright.adapters.kubernetes import KubernetesClient
from podwright.core.cluster_resources import API_VERSION
from tests.cli.test_policy_cluster_commands import (
    EXAMPLES,
    PROJECT,
    cluster,
    install_example_assets,
    run,
    workload_object,
)

__all__ = ["cluster"]  # the emulator's fixture, with a namespace vision of department research

ROOT = Path(__file__).resolve().parents[2]
IMPOSED_ASSET = "f12c965b-44e9-4ff6-8b43-01d8f9e630cc"
"""The asset the example cluster policy imposes."""


def apply_example_policies(kubeconfig: str) -> None:
    """The example policies of cluster prod, department research and project vision."""
    applied = run(
        "apply", *(f"-f{file}" for file in [*EXAMPLES, PROJECT]), "--kubeconfig", kubeconfig
    )
    assert applied.exit_code == 0, applied.output


def test_a_namespace_is_read_with_its_scope_the_policies_and_its_assets(
    cluster: tuple[KubernetesClient, str],
) -> None:
    client, kubeconfig = cluster
    install_example_assets(client)
    apply_example_policies(kubeconfig)
    held = podwright.read_cluster_policies(ClusterAccess(kubeconfig), "vision", cluster_name="prod")
    assert held.scope == Scope(("prod", "research", "vision"))
    assert held.cluster == held.policies.cluster == "prod"
    assert {(policy.name, policy.scope) for policy in held.policies} == {
        ("prod-training", Scope(("prod",))),
        ("research-training", Scope(("prod", "research"))),
        ("vision-training", Scope(("prod", "research", "vision"))),
    }
    assert set(held.assets.assets) == {IMPOSED_ASSET, "0b7e1c2a-private-bucket"}
    # What the webhook would decide: the imposed asset resolved from the cluster's catalogue.
    workload = podwright.load(ROOT / "examples" / "workload-training.yaml")
    evaluation = podwright.evaluate(workload, held.policies, scope=held.scope, assets=held.assets)
    assert evaluation.accepted, evaluation.violations
    assert evaluation.scope == held.scope
    combined = podwright.effective(held.policies, held.scope, "training")
    assert [asset.value for asset in combined.imposed_assets] == [IMPOSED_ASSET]


def test_an_unknown_namespace_is_invalid_input_naming_it(
    cluster: tuple[KubernetesClient, str],
) -> None:
    _client, kubeconfig = cluster
    with pytest.raises(InvalidInputError, match=r"^--namespace nowhere: no such namespace in "):
        podwright.read_cluster_policies(ClusterAccess(kubeconfig), "nowhere", cluster_name="prod")


def test_unreadable_assets_are_invalid_input_naming_the_namespace(
    cluster: tuple[KubernetesClient, str],
) -> None:
    """Two ClusterAssets of one id: the CRD's schema admits each, the catalogue neither."""
    client, kubeconfig = cluster
    for name in ("first", "second"):
        client.create(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterAsset",
                "metadata": {"name": name},
                "spec": {"id": "shared", "kind": "pvc", "spec": {"claimName": name}},
            }
        )
    with pytest.raises(InvalidInputError) as raised:
        podwright.read_cluster_policies(ClusterAccess(kubeconfig), "vision", cluster_name="prod")
    assert str(raised.value).startswith("the assets of namespace vision cannot be read: ")
    assert "asset id 'shared' is given twice" in str(raised.value)


def test_the_report_names_each_workload_the_current_policies_would_refuse(
    cluster: tuple[KubernetesClient, str],
) -> None:
    client, kubeconfig = cluster
    install_example_assets(client)
    client.create(workload_object("fine"))
    client.create(workload_object("greedy", compute={"gpuDevicesRequest": 12}))
    apply_example_policies(kubeconfig)
    access = ClusterAccess(kubeconfig)
    report = podwright.compliance_report(access, "vision", cluster_name="prod")
    assert report.judged == 2
    (entry,) = report.entries
    (issue,) = entry.issues
    assert entry == ReportEntry("vision", "greedy", "Noncompliant", (issue,))
    assert issue.startswith("spec.compute.gpuDevicesRequest:")
    assert issue.endswith("(rule max, policy 'prod-training' of cluster prod)")
    assert entry.to_data() == {
        "namespace": "vision",
        "name": "greedy",
        "reason": "Noncompliant",
        "issues": [issue],
    }
    assert podwright.compliance_report(access, None, cluster_name="prod") == report
    assert podwright.compliance_report(access, "default", cluster_name="prod") == (
        podwright.ComplianceReport((), 0)
    )
