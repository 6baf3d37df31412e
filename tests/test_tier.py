"""The test tier's own rules: which tests one worker runs one after the other, a real cluster's
skips failing, the soak rounds, where the webhooks are served, and Workloads steered to the node
simulator's nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.nodes import steered_to_simulated_nodes
from tests.cluster.webhooks import webhook_address
from tests.conftest import (
    REAL_CLUSTER_GROUP,
    SOAK_ROUNDS,
    TESTS,
    chosen_soak_rounds,
    group_of_test,
    serial_group,
    skip_on_a_real_cluster,
)
from tests.node_sim import SIMULATED_NODE_LABEL, SIMULATED_NODE_TAINT
from tests.webhook_server import WEBHOOK_HOST_VARIABLE


@pytest.mark.parametrize(
    ("path", "cluster", "group"),
    [
        pytest.param(TESTS / "fuse_proxy_real" / "test_flood.py", False, "real-fuse", id="fuse"),
        pytest.param(TESTS / "image" / "test_image.py", False, "image", id="image"),
        pytest.param(TESTS / "kube" / "test_api_contract.py", True, REAL_CLUSTER_GROUP, id="kube"),
        pytest.param(TESTS / "cluster" / "test_runs.py", True, REAL_CLUSTER_GROUP, id="tier"),
        pytest.param(TESTS / "cluster" / "test_runs.py", False, None, id="emulated"),
        pytest.param(TESTS / "core" / "test_crds.py", False, None, id="core"),
    ],
)
def test_tests_that_must_not_overlap_share_a_group(
    path: Path, cluster: bool, group: str | None
) -> None:
    assert serial_group(path, cluster=cluster) == group


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("tests/kube/test_leases.py::test_a_lease[cluster]", REAL_CLUSTER_GROUP),
        ("tests/cluster/test_admission.py::test_x[cluster-kubectl]", REAL_CLUSTER_GROUP),
        ("tests/cluster/test_admission.py::test_x[emulator-kubectl]", None),
        ("tests/cluster/test_dry_run.py::test_x[emulator-workload-training.yaml]", None),
        ("tests/cluster/test_admission.py::test_x[emulator-cluster]", None),
        ("tests/fuse_proxy_real/test_attacks.py::test_x", "real-fuse"),
        ("tests/image/test_image.py::test_x", "image"),
        ("tests/core/test_crds.py::test_x", None),
        ("tests/core/test_crds.py::test_x[cluster-prod.yaml]", None),
    ],
    ids=["kube", "tier", "emulated", "example", "scope", "fuse", "image", "core", "core-example"],
)
def test_the_scheduler_reads_a_tests_group_from_its_id(nodeid: str, group: str | None) -> None:
    """What pytest-xdist's scheduler sees of a test is its id; collection checks that the id
    says what the test's place and marks do (``pytest_collection_modifyitems``)."""
    assert group_of_test(nodeid) == group


def test_a_skip_fails_only_a_real_clusters_test_when_a_real_cluster_is_named() -> None:
    assert skip_on_a_real_cluster(cluster=True, kubeconfig=None, reason="no kubeconfig") is None
    assert skip_on_a_real_cluster(cluster=False, kubeconfig="/k", reason="no FUSE") is None
    failure = skip_on_a_real_cluster(cluster=True, kubeconfig="/k", reason="the cluster has X")
    assert failure == (
        "a test of the real cluster (PODWRIGHT_TEST_KUBECONFIG=/k) skipped: the cluster has X"
    )


def test_soak_rounds_come_from_the_option_then_the_variable() -> None:
    assert chosen_soak_rounds(None, None) == SOAK_ROUNDS
    assert chosen_soak_rounds(None, "") == SOAK_ROUNDS
    assert chosen_soak_rounds(None, "20") == 20
    assert chosen_soak_rounds(3, "20") == 3
    with pytest.raises(pytest.UsageError, match="PODWRIGHT_TEST_SOAK_ROUNDS must be a whole"):
        chosen_soak_rounds(None, "many")
    with pytest.raises(pytest.UsageError, match="at least 1, not 0"):
        chosen_soak_rounds(None, "0")


def test_a_real_cluster_reaches_the_tests_webhooks_at_127_0_0_1_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(WEBHOOK_HOST_VARIABLE, raising=False)
    assert webhook_address(real=True) == "127.0.0.1"
    monkeypatch.setenv(WEBHOOK_HOST_VARIABLE, "192.0.2.7")
    assert webhook_address(real=True) == "192.0.2.7"
    assert webhook_address(real=False) == "127.0.0.1"  # the emulator runs on this machine


def test_a_workloads_pods_are_steered_to_the_simulated_nodes_in_every_affinity_term() -> None:
    gpu = {"name": "gpu", "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    pool = {"key": "pool", "operator": "Exists"}
    spec = {
        "type": "training",
        "tolerations": [gpu],
        "nodeAffinityRequired": [{"matchExpressions": [zone]}, {"matchExpressions": [pool]}],
    }
    steered = steered_to_simulated_nodes(spec)
    on_simulated = {"key": SIMULATED_NODE_LABEL, "operator": "In", "values": ["true"]}
    assert steered["nodeAffinityRequired"] == [
        {"matchExpressions": [zone, on_simulated]},
        {"matchExpressions": [pool, on_simulated]},
    ]
    assert steered["tolerations"] == [
        gpu,
        {"name": "simulated-nodes", "operator": "Equal", **SIMULATED_NODE_TAINT},
    ]
    assert spec["tolerations"] == [gpu]  # the given spec is left as it was
    bare = steered_to_simulated_nodes({"type": "training"})
    assert bare["nodeAffinityRequired"] == [{"matchExpressions": [on_simulated]}]


def test_a_distributed_workloads_pods_are_steered_in_each_role() -> None:
    spec = {"type": "distributed", "master": {"image": "m"}, "worker": {"image": "w"}}
    steered = steered_to_simulated_nodes(spec)
    for role in ("master", "worker"):
        assert steered[role] == steered_to_simulated_nodes({"image": spec[role]["image"]})
    assert "tolerations" not in steered
