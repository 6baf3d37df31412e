"""What runs the cluster tier's pods: the one seam between its tests and whatever plays the
kubelets.

A test says how a pod's containers end (:class:`PodOutcome`) and puts the annotations that
:meth:`PodDriver.annotations` gives on the pod (through the workload's ``annotations``); the driver
that :func:`driving_pods` starts does the rest. Today the driver is the emulator's
:class:`~tests.k8s_emulator.kubelet.FakeKubelet`: it binds and runs podwright's pods of one
namespace, ends them a poll after they started running (``run_seconds`` is not honoured), with
exit code 0 or 1 only, and knows no OOM kill, no image pull and no real API server. The node
simulator (Nodes of their own, the pods bound to them driven as a kubelet would, against a real
API server too) takes its place here, and nowhere else: an outcome the driver cannot play fails
the test, naming what it needs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import pytest

from tests.k8s_emulator import Emulator
from tests.k8s_emulator.kubelet import OUTCOME_ANNOTATION, FakeKubelet

NEEDS_NODE_SIMULATOR = "needs the node simulator (branch issue17-nodesim)"


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


class PodDriver(Protocol):
    """Whatever binds and runs the pods of the tests."""

    def annotations(self, outcome: PodOutcome) -> dict[str, str]:
        """The pod annotations that make the driver play ``outcome``."""
        ...


class FakeKubeletDriver:
    """The emulator's fake kubelet: success, exit code 1, or running until deleted."""

    def annotations(self, outcome: PodOutcome) -> dict[str, str]:
        if outcome.oom_killed or outcome.image_pull_error or outcome.exit_code not in (0, 1):
            pytest.fail(
                f"{outcome}: the fake kubelet cannot play it; this test {NEEDS_NODE_SIMULATOR}"
            )
        if outcome.run_seconds is None:
            return {OUTCOME_ANNOTATION: "hang"}
        return {OUTCOME_ANNOTATION: "fail"} if outcome.exit_code else {}


@contextlib.contextmanager
def driving_pods(emulator: Emulator | None, namespace: str) -> Iterator[PodDriver]:
    """A driver of the pods of ``namespace`` on the emulator (``emulator``) or a real cluster
    (None), running while the block runs."""
    if emulator is None:
        pytest.fail(f"running pods on a real cluster {NEEDS_NODE_SIMULATOR}")
    with FakeKubelet(emulator.url, namespace):
        yield FakeKubeletDriver()
