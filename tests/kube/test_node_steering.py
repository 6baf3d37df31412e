"""The tier's pods run on the node simulator's nodes and on no other: against the emulator and,
marked ``cluster``, a real cluster, whose own nodes' kubelets would run a pod for real (a pod
scripted to fail succeeded there).

A dedicated simulator's nodes carry a label and a ``NoSchedule`` taint; a pod gets there by
selecting the one and tolerating the other, as kwok's nodes are kept for the pods meant for them.
Its decision filters nodes as kube-scheduler's ``TaintToleration``, ``NodeAffinity`` and
``NodeUnschedulable`` plugins do (``pkg/scheduler/framework/plugins/tainttoleration/
taint_toleration.go``, ``Filter``; ``staging/src/k8s.io/api/core/v1/toleration.go``,
``ToleratesTaint``; ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``), and a pod of
its namespace that a node which is not a simulated one could run is a stray that fails the test.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.kube.support import ApiServer, eventually
from tests.node_sim import (
    CPU_NODE,
    SIMULATED_NODE_LABEL,
    SIMULATED_NODE_TAINT,
    STEERED_TO_SIMULATED_NODES,
    NodeSimulator,
)
from tests.node_sim.scheduling import Candidate, choose_node, selects, toleration_matches

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _node(name: str, labels: dict[str, str] | None = None, **spec: Any) -> Candidate:
    return Candidate.of(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": spec,
            "status": {"allocatable": {"cpu": "4", "pods": "10"}},
        }
    )


def _pod(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main"}], **spec}}


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        pytest.param(
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}, True, id="equal"
        ),
        pytest.param({"key": "dedicated", "operator": "Equal", "value": "cpu"}, False, id="value"),
        pytest.param({"key": "dedicated", "operator": "Exists"}, True, id="exists-any-effect"),
        pytest.param({"operator": "Exists"}, True, id="exists-every-key"),
        pytest.param({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        pytest.param({"key": "other", "operator": "Exists"}, False, id="other-key"),
        pytest.param({"key": "dedicated"}, False, id="equal-no-value"),
    ],
)
def test_a_toleration_matches_a_taint_as_tolerates_taint_says(
    toleration: dict[str, str], tolerated: bool
) -> None:
    assert toleration_matches(toleration, TAINT) is tolerated


def test_a_tainted_node_takes_only_the_pods_that_tolerate_its_filtering_taints() -> None:
    tainted = _node("tainted", taints=[TAINT])
    preferred = _node("preferred", taints=[{**TAINT, "effect": "PreferNoSchedule"}])
    tolerating = _pod(tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert choose_node(_pod(), [tainted], {}) is None
    assert choose_node(tolerating, [tainted], {}) == "tainted"
    assert choose_node(_pod(), [preferred], {}) == "preferred"  # a preference, not a filter


def test_a_cordoned_node_takes_only_pods_that_tolerate_being_unschedulable() -> None:
    cordoned = _node("cordoned", unschedulable=True)
    unschedulable = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}
    assert choose_node(_pod(), [cordoned], {}) is None
    assert choose_node(_pod(tolerations=[unschedulable]), [cordoned], {}) == "cordoned"


def _requiring(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": [{"matchExpressions": term} for term in terms]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }


@pytest.mark.parametrize(
    ("spec", "selected"),
    [
        pytest.param(_requiring([{"key": "pool", "operator": "In", "values": ["a100"]}]), True),
        pytest.param(_requiring([{"key": "pool", "operator": "NotIn", "values": ["a100"]}]), False),
        pytest.param(_requiring([{"key": "gpus", "operator": "Gt", "values": ["4"]}]), True),
        pytest.param(_requiring([{"key": "gpus", "operator": "Lt", "values": ["4"]}]), False),
        pytest.param(_requiring([{"key": "zone", "operator": "DoesNotExist"}]), True),
        pytest.param(
            _requiring(
                [{"key": "pool", "operator": "Exists"}, {"key": "zone", "operator": "Exists"}]
            ),
            False,
            id="a-terms-expressions-all-hold",
        ),
        pytest.param(
            _requiring(
                [{"key": "zone", "operator": "Exists"}], [{"key": "pool", "operator": "Exists"}]
            ),
            True,
            id="one-term-is-enough",
        ),
        pytest.param({"nodeSelector": {"pool": "a100"}, **_requiring()}, False, id="no-term"),
        pytest.param({"nodeSelector": {"pool": "v100"}}, False, id="selector"),
    ],
)
def test_a_pods_required_node_affinity_selects_the_nodes(
    spec: dict[str, Any], selected: bool
) -> None:
    assert selects(spec, {"pool": "a100", "gpus": "8"}) is selected


def test_a_pod_steered_to_the_simulated_nodes_fits_them_and_no_other_node() -> None:
    simulated = _node("simulated", {SIMULATED_NODE_LABEL: "true"}, taints=[SIMULATED_NODE_TAINT])
    unrelated = _node("unrelated")
    steered = _pod(**STEERED_TO_SIMULATED_NODES)
    assert choose_node(steered, [unrelated, simulated], {}) == "simulated"
    assert choose_node(_pod(), [simulated, unrelated], {}) == "unrelated"
    only_tolerating = _pod(tolerations=STEERED_TO_SIMULATED_NODES["tolerations"])
    assert choose_node(only_tolerating, [unrelated], {}) == "unrelated"
    assert Candidate.of({"metadata": {"name": "n"}}).allocatable == {}
    assert simulated.allocatable["cpu"] == Decimal(4)


def test_a_pod_that_is_not_steered_to_the_simulated_nodes_fails_the_test(api: ApiServer) -> None:
    """A node that is not the simulator's (on the emulator, also the unrelated node the tier
    registers; on a real cluster, also the cluster's own), and a pod of the default scheduler
    with neither the selector nor the toleration: a stray, named when the block ends; a steered
    pod beside it runs on a simulated node."""
    unrelated = NodeSimulator(
        api.client, api.api_client, nodes=[CPU_NODE], namespace=api.namespace, schedulers=()
    )
    sim = api.simulate_nodes()
    with unrelated, pytest.raises(AssertionError) as caught:
        _a_stray_beside_a_steered_pod(api, sim)
    assert list(sim.strays) == [f"{api.namespace}/stray"]
    assert "pods that a node other than the simulated ones could run" in str(caught.value)
    assert f"{api.namespace}/stray " in str(caught.value)


def _a_stray_beside_a_steered_pod(api: ApiServer, sim: NodeSimulator) -> None:
    container = {"name": "main", "image": "registry.invalid/main:1"}
    with sim:
        for name, steering in (("stray", {}), ("steered", STEERED_TO_SIMULATED_NODES)):
            api.client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": api.namespace},
                    "spec": {"restartPolicy": "Never", "containers": [container], **steering},
                }
            )
        eventually(lambda: sim.strays, timeout=60)
        steered = eventually(
            lambda: api.client.get(api.ref("Pod", "steered"))["spec"].get("nodeName"),
            timeout=60,
        )
        assert steered in sim.nodes
