"""What a real API server charges, for benchmarks: the emulator commits a write in microseconds,
a real one in milliseconds (etcd's commit, a disk's fsync), and a real control plane's
controllers wait for their clients' rate limits. Without these costs a benchmark through the
emulator hides where the time of a real cluster goes, so the :class:`CostModel` puts them back,
and is off by default: tests never pay it.

* ``write_latency`` and ``max_writes_in_flight`` (:class:`WriteGate`): each write (create,
  update, patch, delete, from a client or a controller) holds one of a bounded number of slots
  for the latency before it is applied, as a write waits for etcd's commit and a server takes a
  bounded number at once (kube-apiserver's ``--max-mutating-requests-inflight``, etcd's
  pipeline); the writes/s it allows is at most ``max_writes_in_flight / write_latency``.
* ``controller_qps`` and ``controller_burst`` (:class:`TokenBucket`): the client rate limit of
  each built-in controller, as kube-controller-manager gives every controller a client of its
  own (``ClientBuilder.ClientOrDie(<controller>)``,
  ``k8s.io/controller-manager/pkg/clientbuilder/client_builder.go``), limited by its
  ``--kube-api-qps`` and ``--kube-api-burst`` (20 and 30 by default:
  ``k8s.io/controller-manager/config/v1alpha1/defaults.go``), through client-go's token bucket
  (``NewTokenBucketRateLimiter`` in ``k8s.io/client-go/util/flowcontrol/throttle.go``: ``qps``
  tokens a second, at most ``burst`` saved up, each request waits for one). The controllers
  read from their informers' caches, so only what they send (their writes, the namespace
  controller's lists) waits.

The clock and the sleep are injected, so the mechanisms are tested without time passing.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from podwright.adapters.kubernetes.rate_limit import TokenBucket
from tests.k8s_emulator.resource_types import ResourceType
from tests.k8s_emulator.store import ApiStore, Obj

T = TypeVar("T")


@dataclass(frozen=True)
class CostModel:
    """The costs a real API server and control plane charge (see the module's docstring)."""

    write_latency: float = 0.005
    """Seconds each write takes before it is applied (etcd's commit)."""
    max_writes_in_flight: int = 8
    """Writes served at once; more wait for a slot."""
    controller_qps: float = 20.0
    """Requests a second each built-in controller may send (``--kube-api-qps``)."""
    controller_burst: int = 30
    """Requests a controller may send at once after an idle while (``--kube-api-burst``)."""

    def __post_init__(self) -> None:
        if self.write_latency < 0:
            raise ValueError(f"write_latency must be 0 or more seconds, not {self.write_latency}")
        if self.max_writes_in_flight < 1:
            raise ValueError(
                f"max_writes_in_flight must be 1 or more, not {self.max_writes_in_flight}"
            )
        if self.controller_qps <= 0:
            raise ValueError(f"controller_qps must be more than 0, not {self.controller_qps}")
        if self.controller_burst < 1:
            raise ValueError(f"controller_burst must be 1 or more, not {self.controller_burst}")


class WriteGate:
    """At most ``max_in_flight`` writes at once, each held ``latency`` seconds before it is
    applied (the object is seen once committed); the others wait for a slot, in no set order."""

    def __init__(
        self, latency: float, max_in_flight: int, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._latency = latency
        self._max_in_flight = max_in_flight
        self._sleep = sleep
        self._in_flight = 0
        self._waiting = 0
        self._slot_freed = threading.Condition()

    @property
    def in_flight(self) -> int:
        with self._slot_freed:
            return self._in_flight

    @property
    def waiting(self) -> int:
        """Writes waiting for a slot."""
        with self._slot_freed:
            return self._waiting

    def write(self, apply: Callable[[], T]) -> T:
        """``apply`` the write once it has a slot and its latency has passed."""
        with self._slot_freed:
            self._waiting += 1
            self._slot_freed.wait_for(lambda: self._in_flight < self._max_in_flight)
            self._waiting -= 1
            self._in_flight += 1
        try:
            if self._latency > 0:
                self._sleep(self._latency)
            return apply()
        finally:
            with self._slot_freed:
                self._in_flight -= 1
                self._slot_freed.notify()


class ControllerClient:
    """A built-in controller's way to the store under the cost model: each request it sends
    waits for its own :class:`TokenBucket`, each write for the shared :class:`WriteGate`."""

    def __init__(self, store: ApiStore, bucket: TokenBucket, gate: WriteGate) -> None:
        self._store = store
        self._bucket = bucket
        self._gate = gate

    def snapshot(
        self, *, namespace: str | None = None
    ) -> tuple[list[tuple[ResourceType, Obj]], int]:
        self._bucket.take()
        return self._store.snapshot(namespace=namespace)

    def create(self, resource: ResourceType, namespace: str, body: Mapping[str, Any]) -> Obj:
        self._bucket.take()
        return self._gate.write(lambda: self._store.create(resource, namespace, body))

    def replace(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
        *,
        subresource: str | None = None,
    ) -> Obj:
        self._bucket.take()
        return self._gate.write(
            lambda: self._store.replace(resource, namespace, name, body, subresource=subresource)
        )

    def patch(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        patch: Any,
        content_type: str,
        *,
        subresource: str | None = None,
    ) -> Obj:
        self._bucket.take()
        return self._gate.write(
            lambda: self._store.patch(
                resource, namespace, name, patch, content_type, subresource=subresource
            )
        )

    def delete(
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        *,
        preconditions: Mapping[str, Any] | None = None,
        grace_period_seconds: int | None = None,
        propagation: str | None = None,
    ) -> Obj:
        self._bucket.take()
        return self._gate.write(
            lambda: self._store.delete(
                resource,
                namespace,
                name,
                preconditions=preconditions,
                grace_period_seconds=grace_period_seconds,
                propagation=propagation,
            )
        )


ControllerStore = ApiStore | ControllerClient
"""What a built-in controller writes through: the store itself, or it under the cost model."""


def add_cost_model_arguments(
    parser: argparse.ArgumentParser, defaults: CostModel, *, on: bool
) -> None:
    """The options that choose a cost model (``--cost-model`` and its parameters), for the
    emulator's own command and the benchmarks; ``on``: charged unless ``--no-cost-model``."""
    parser.add_argument(
        "--cost-model",
        action=argparse.BooleanOptionalAction,
        default=on,
        help="The emulator charges what a real server does (tests/k8s_emulator/cost_model.py).",
    )
    parser.add_argument(
        "--write-latency-ms",
        type=float,
        default=defaults.write_latency * 1000,
        help="Each write's commit latency.",
    )
    parser.add_argument(
        "--max-writes-in-flight",
        type=int,
        default=defaults.max_writes_in_flight,
        help="Writes the emulator serves at once.",
    )
    parser.add_argument(
        "--controller-qps",
        type=float,
        default=defaults.controller_qps,
        help="Each emulated controller's --kube-api-qps.",
    )
    parser.add_argument(
        "--controller-burst",
        type=int,
        default=defaults.controller_burst,
        help="Each emulated controller's --kube-api-burst.",
    )


def cost_model_from_arguments(
    parser: argparse.ArgumentParser, arguments: argparse.Namespace
) -> CostModel | None:
    """The cost model the options of :func:`add_cost_model_arguments` chose (None: ``--no-cost-model``);
    a parameter out of range ends the command with the parser's usage error naming it."""
    if not arguments.cost_model:
        return None
    try:
        return CostModel(
            write_latency=arguments.write_latency_ms / 1000,
            max_writes_in_flight=arguments.max_writes_in_flight,
            controller_qps=arguments.controller_qps,
            controller_burst=arguments.controller_burst,
        )
    except ValueError as error:
        parser.error(str(error))


def cost_model_command_line(cost_model: CostModel | None) -> list[str]:
    """The options of :func:`add_cost_model_arguments` that choose ``cost_model`` (None: none),
    for a benchmark that runs ``python -m tests.k8s_emulator`` in a process of its own."""
    if cost_model is None:
        return ["--no-cost-model"]
    return [
        "--cost-model",
        f"--write-latency-ms={cost_model.write_latency * 1000}",
        f"--max-writes-in-flight={cost_model.max_writes_in_flight}",
        f"--controller-qps={cost_model.controller_qps}",
        f"--controller-burst={cost_model.controller_burst}",
    ]
