"""What runs the cluster tier's pods: the one seam between its tests and the node simulator.

A test says how a pod's containers end (:class:`PodOutcome`) and puts the annotations that
:meth:`PodDriver.annotations` gives on the pod (through the workload's ``annotations``); the
:class:`~tests.node_sim.NodeSimulator` that :func:`driving_pods` starts does the rest, on the
emulator and on a real cluster alike (on a real one, the cluster's scheduler binds the pods to
the simulated nodes, or the simulator does after a few seconds). Its nodes carry the labels the
examples' cluster profile selects on (a node type and a pool), so every example can be placed,
and are dedicated (a label, a taint): :meth:`PodDriver.workload_spec` steers a Workload's pods
there and nowhere else, and the simulator fails the test when one of its namespace's pods could
land on a node of the cluster's own (on the emulator, the unrelated node the tier registers).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from podwright.core.workload_fields import ROLES, WorkloadType
from tests.kube.support import SCHEDULER_GRACE_SECONDS
from tests.node_sim import (
    CPU_NODE,
    EXIT_CODE,
    GPU_NODE,
    IMAGE_PULL_ERROR,
    OOM_KILLED,
    RUN_SECONDS,
    SIMULATED_NODE_LABEL,
    SIMULATED_NODE_TAINT,
    NodeShape,
    NodeSimulator,
)

if TYPE_CHECKING:
    from tests.cluster.support import Server

PRIMARY_CONTAINER = "main"
PROFILE_NODE_LABELS = {"node.example.com/type": "gpu-shared", "node.example.com/pool": "a100"}
"""The labels the examples' cluster profile turns ``nodeType``/``nodePools`` into."""
SIMULATED_NODES_TOLERATION = {
    "name": "simulated-nodes",
    "operator": "Equal",
    **SIMULATED_NODE_TAINT,
}
"""A Workload's ``tolerations`` item for the taint of the simulated nodes."""
ON_SIMULATED_NODES = {"key": SIMULATED_NODE_LABEL, "operator": "In", "values": ["true"]}
"""A Workload's ``nodeAffinityRequired`` expression for the label of the simulated nodes."""


@dataclass(frozen=True)
class PodOutcome:
    """How a pod's containers end, as the test chooses."""

    exit_code: int = 0
    run_seconds: float | None = 0.0
    """How long the containers run; None: until the pod is deleted."""
    oom_killed: bool = False
    """The primary container is killed for exceeding its memory limit (exit code 137)."""
    image_pull_error: bool = False
    """The image cannot be pulled: the containers never start (ErrImagePull, ImagePullBackOff)."""


SUCCEEDS = PodOutcome()
RUNS_UNTIL_DELETED = PodOutcome(run_seconds=None)


class PodDriver:
    """The node simulator, as the tests script it."""

    def __init__(self, simulator: NodeSimulator) -> None:
        self.simulator = simulator

    def annotations(self, outcome: PodOutcome) -> dict[str, str]:
        """The pod annotations that make the simulated kubelet play ``outcome`` in the primary
        container (``main``); the others (init containers, sidecars) run as the simulator's
        defaults have them: they start, and init containers end at once with exit code 0."""
        scripted = {
            RUN_SECONDS: "inf" if outcome.run_seconds is None else str(outcome.run_seconds),
            EXIT_CODE: str(outcome.exit_code),
        }
        if outcome.oom_killed:
            scripted[OOM_KILLED] = "true"
        if outcome.image_pull_error:
            scripted[IMAGE_PULL_ERROR] = "true"
        return {f"{key}.{PRIMARY_CONTAINER}": value for key, value in scripted.items()}

    def workload_spec(
        self, spec: Mapping[str, Any], outcome: PodOutcome | None = SUCCEEDS
    ) -> dict[str, Any]:
        """A Workload's ``spec`` whose pods only the simulator's nodes run
        (:func:`steered_to_simulated_nodes`), and whose annotations make them end as
        ``outcome`` says (None: as the simulator's defaults have them)."""
        steered = steered_to_simulated_nodes(spec)
        if outcome is not None:
            added = [{"name": k, "value": v} for k, v in self.annotations(outcome).items()]
            steered["annotations"] = [*spec.get("annotations", []), *added]
        return steered


def steered_to_simulated_nodes(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A Workload's ``spec`` whose pods tolerate the simulated nodes' taint and require their
    label, added to each of its ``nodeAffinityRequired`` terms (terms are ORed: a term of its own
    would let the others escape); a distributed workload's in each role's section, where its
    pods' fields are."""
    if spec.get("type") == WorkloadType.DISTRIBUTED.value:
        return {
            **spec,
            **{role: _steered(spec[role]) for role in ROLES if role in spec},
        }
    return _steered(spec)


def _steered(section: Mapping[str, Any]) -> dict[str, Any]:
    steered = dict(section)
    steered["tolerations"] = [*section.get("tolerations", []), SIMULATED_NODES_TOLERATION]
    terms = section.get("nodeAffinityRequired") or [{"matchExpressions": []}]
    steered["nodeAffinityRequired"] = [
        {**term, "matchExpressions": [*term.get("matchExpressions", []), ON_SIMULATED_NODES]}
        for term in terms
    ]
    return steered


@contextlib.contextmanager
def driving_pods(server: Server, namespace: str) -> Iterator[PodDriver]:
    """Simulated nodes running the pods of ``namespace`` while the block runs."""
    nodes = [
        NodeShape(shape.capacity, {**shape.labels, **PROFILE_NODE_LABELS})
        for shape in (CPU_NODE, GPU_NODE)
    ]
    emulator = server.emulator
    with NodeSimulator(
        server.client,
        server.api_client,
        nodes=nodes,
        namespace=namespace,
        bind_after=SCHEDULER_GRACE_SECONDS if emulator is None else 0.0,
        write_log=None if emulator is None else emulator.write_log,
        dedicated=True,
    ) as simulator:
        yield PodDriver(simulator)
