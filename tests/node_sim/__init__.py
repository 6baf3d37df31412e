"""A node simulator for tests, in the spirit of kwok: Nodes with GPU and FUSE-device capacity
that register, heartbeat through Leases, and run the pods bound to them as a kubelet would, with
what each container does scripted by the pod's annotations (:mod:`tests.node_sim.kubelet`). It
works over HTTP through the API only, against the emulator and a real API server alike
(:mod:`tests.node_sim.simulator`)."""

from tests.node_sim.kubelet import (
    EXIT_CODE,
    IMAGE_PULL_ERROR,
    OOM_KILLED,
    RUN_SECONDS,
    STOP_SECONDS,
)
from tests.node_sim.simulator import (
    CPU_NODE,
    FUSE,
    GPU,
    GPU_NODE,
    SIMULATED_NODE_LABEL,
    SIMULATED_NODE_TAINT,
    SIMULATOR_LABEL,
    STEERED_TO_SIMULATED_NODES,
    UNRELATED_NODE,
    NodeShape,
    NodeSimulator,
    register_unrelated_node,
    simulate_nodes,
)

__all__ = [
    "CPU_NODE",
    "EXIT_CODE",
    "FUSE",
    "GPU",
    "GPU_NODE",
    "IMAGE_PULL_ERROR",
    "OOM_KILLED",
    "RUN_SECONDS",
    "SIMULATED_NODE_LABEL",
    "SIMULATED_NODE_TAINT",
    "SIMULATOR_LABEL",
    "STEERED_TO_SIMULATED_NODES",
    "STOP_SECONDS",
    "UNRELATED_NODE",
    "NodeShape",
    "NodeSimulator",
    "register_unrelated_node",
    "simulate_nodes",
]
