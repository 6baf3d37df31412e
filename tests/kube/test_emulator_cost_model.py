"""The emulator's cost model (``tests/k8s_emulator/cost_model.py``): client-go's token bucket
(``k8s.io/client-go/util/flowcontrol/throttle.go``) and the bounded, slow writes, with an
injected clock and sleep (no time passes), and its wiring (off unless asked for)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from podwright.adapters.kubernetes import KubernetesClient
from podwright.engine.kubernetes_port import ObjectRef
from tests.k8s_emulator import ApiStore, Emulator
from tests.k8s_emulator.controllers import ControlPlane
from tests.k8s_emulator.cost_model import ControllerClient, CostModel, WriteGate


def test_a_write_waits_its_latency_before_it_is_applied() -> None:
    events: list[str] = []

    def apply() -> str:
        events.append("applied")
        return "answer"

    gate = WriteGate(0.004, 1, sleep=lambda seconds: events.append(f"slept {seconds}"))
    assert gate.write(apply) == "answer"
    assert events == ["slept 0.004", "applied"]


def _until(check: Callable[[], bool]) -> None:
    """Wait for another thread to get somewhere (a guard against a hang, not a timing)."""
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, "the other threads never got there"
        time.sleep(0.001)


def test_writes_beyond_the_slots_wait_until_a_slot_is_freed() -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    def held(_seconds: float) -> None:
        entered.release()
        release.wait(10)

    gate = WriteGate(0.005, 2, sleep=held)
    applied: list[int] = []
    writers = [
        threading.Thread(target=gate.write, args=(lambda n=n: applied.append(n),)) for n in range(3)
    ]
    for writer in writers:
        writer.start()
    assert entered.acquire(timeout=10)
    assert entered.acquire(timeout=10)
    _until(lambda: gate.waiting == 1)
    assert (gate.in_flight, applied) == (2, [])
    release.set()
    for writer in writers:
        writer.join(10)
    assert sorted(applied) == [0, 1, 2]
    assert (gate.in_flight, gate.waiting) == (0, 0)


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("write_latency", -0.001, "0 or more seconds"),
        ("max_writes_in_flight", 0, "1 or more"),
        ("controller_qps", 0.0, "more than 0"),
        ("controller_burst", 0, "1 or more"),
    ],
)
def test_a_cost_model_refuses_a_parameter_out_of_range_naming_it(
    field: str, value: float, allowed: str
) -> None:
    parameters: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=f"{field} must be {allowed}"):
        CostModel(**parameters)


def test_the_emulator_charges_nothing_unless_given_a_cost_model() -> None:
    with Emulator() as plain:
        assert plain.controls.write_gate is None
    with Emulator(cost_model=CostModel(controller_qps=100, controller_burst=200)) as costly:
        assert costly.controls.write_gate is not None


def test_each_controller_gets_a_client_of_its_own_sharing_the_servers_write_slots() -> None:
    """kube-controller-manager builds a client (and a rate limiter) per controller."""
    store = ApiStore()
    gate = WriteGate(0.0, 4)
    plane = ControlPlane(store, cost_model=CostModel(), write_gate=gate)
    clients = [vars(controller)["_store"] for controller in plane.controllers]
    assert all(isinstance(client, ControllerClient) for client in clients)
    assert len({id(vars(client)["_bucket"]) for client in clients}) == len(clients)
    assert {id(vars(client)["_gate"]) for client in clients} == {id(gate)}
    assert all(vars(c)["_store"] is store for c in ControlPlane(store).controllers)


def test_under_a_cost_model_each_write_over_http_waits_for_the_gate_and_a_read_does_not() -> None:
    waited: list[float] = []
    with Emulator(cost_model=CostModel()) as emulator:
        emulator.controls.write_gate = WriteGate(0.003, 1, sleep=waited.append)
        client = KubernetesClient.for_host(emulator.url)
        try:
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "costly"}})
            assert waited == [0.003]
            client.get(ObjectRef("v1", "Namespace", "", "costly"))
            assert waited == [0.003]
        finally:
            client.close()
