"""What runs the cluster tier's pods: the one seam between its tests and the node simulator.

A test says how a pod's containers end (:class:`PodOutcome`) and puts the annotations that
:meth:`PodDriver.annotations` gives on the pod (through the workload's ``annotations``); the
:class:`~tests.node_sim.NodeSimulator` that :func:`driving_pods` starts does the rest, on the
emulator and on a real cluster alike (on a real one, the cluster's scheduler binds the pods to
the simulated nodes, or the simulator does after a few seconds). Its nodes carry the labels the
examples' cluster profile selects on (a node type and a pool), so every example can be placed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tests.kube.support import SCHEDULER_GRACE_SECONDS
from tests.node_sim import (
    CPU_NODE,
    EXIT_CODE,
    GPU_NODE,
    IMAGE_PULL_ERROR,
    OOM_KILLED,
    RUN_SECONDS,
    NodeShape,
    NodeSimulator,
)

if TYPE_CHECKING:
    from tests.cluster.support import Server

PRIMARY_CONTAINER = "main"
PROFILE_NODE_LABELS = {"node.example.com/type": "gpu-shared", "node.example.com/pool": "a100"}
"""The labels the examples' cluster profile turns ``nodeType``/``nodePools`` into."""


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
    ) as simulator:
        yield PodDriver(simulator)
