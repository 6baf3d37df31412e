"""The node simulator: Nodes that register, heartbeat and run pods, over the API only.

In the spirit of kwok: :class:`NodeSimulator` registers Nodes (cpu, memory, pods, and the
``nvidia.com/gpu`` and ``smarter-devices/fuse`` extended resources, Ready), keeps a heartbeat
Lease per node in ``kube-node-lease`` (renewed every ``lease_renew_seconds``, 10 s as a kubelet's
lease controller: a quarter of its 40 s duration), and plays the kubelet for every pod bound to
its nodes (:mod:`tests.node_sim.kubelet`). It binds a pending pod that names one of
``schedulers`` to one of its nodes (:mod:`tests.node_sim.scheduling`) when no scheduler did within
``bind_after`` seconds: at once on the emulator, which has no scheduler; after a few seconds on a
real cluster, whose scheduler binds pods to these nodes itself. It only ever touches its own
nodes, their leases, and pods bound to them or that it binds (in ``namespace`` when one is
given). On exit it deletes its Leases and Nodes.

A ``dedicated`` simulator's nodes are kept for the pods meant for them, as kwok's are: they carry
the label :data:`SIMULATED_NODE_LABEL` and the taint :data:`SIMULATED_NODE_TAINT`, and a pod runs
there only if it selects the one and tolerates the other (:data:`STEERED_TO_SIMULATED_NODES`).
On a real cluster that keeps the tests' pods off the cluster's own nodes, whose kubelets would run
them for real (a pod scripted to fail would succeed there). So that a pod that is not steered so
cannot pass unnoticed, a dedicated simulator also plays the check: a pod of its namespace that the
cluster's scheduler takes and that a node which is not a simulated one could run (the cluster's
own nodes, or on the emulator the unrelated node of :func:`register_unrelated_node`), or that was
bound to such a node, is a stray: not bound, and named in the AssertionError the block ends with.

It follows the pods through a watch (podwright's list-and-watch
:class:`~podwright.adapters.kubernetes.reflector.Reflector`, which re-lists when its version is
gone) and looks at its copies every ``poll_seconds`` from one background thread: listing every pod
at each look was, with thousands of pods, the heaviest load on the emulator. A look's pod steps and
bindings run on ``workers`` threads, so that their requests (about nine per pod) overlap instead
of their latencies adding up; a look gives a pod to one worker at most and waits for all of them
before the next, so each pod's writes stay in order. The watch shows the simulator's own writes
only when their events arrive, so its copies may be older than what it wrote: the kubelet's state
is the simulator's own (:class:`~tests.node_sim.kubelet.SimulatedPod` never reads a copy's
status), and a pod it bound counts as on its node from the binding on, not once the watch shows it
(else it would bind the pod again, and place others on room the pod took). It talks to the API
over HTTP like any client, so the same simulator serves the emulator and a real API server.

Events are written through ``events.k8s.io/v1`` (which a real server shows through core/v1 too):
a kubelet's events (client-go's ``tools/record``, ``generateEvent``) have ``reportingController``
``kubelet`` and its node as ``reportingInstance``, the scheduler's its name and
``<name>-<host>``; ``events.k8s.io/v1`` also requires an ``action``, which a kubelet's core/v1
events leave empty: the simulator repeats the reason there.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any

from kubernetes import client as k8s_client
from kubernetes.utils.quantity import parse_quantity

from podwright.adapters.kubernetes import KubernetesClient
from podwright.adapters.kubernetes.reflector import Reflector, WatchCache
from podwright.core.local_runtime import Backoff
from podwright.engine.kubernetes_port import ConflictError, NotFoundError, ObjectRef, PatchType
from tests.k8s_emulator.leases import NODE_LEASE_NAMESPACE
from tests.node_sim.kubelet import Placement, Pod, SimulatedPod
from tests.node_sim.rest import NODES, bind_pod, call, leases_path
from tests.node_sim.scheduling import (
    Amounts,
    Candidate,
    Look,
    add_requests,
    choose_node,
    pod_requests,
)

DEFAULT_SCHEDULER = "default-scheduler"
SIMULATED_NODE_LABEL = "sim.podwright.dev/simulated-node"
"""On every node of a dedicated simulator, with the value ``"true"``."""
SIMULATED_NODE_TAINT = {"key": SIMULATED_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
"""On every node of a dedicated simulator: only pods that tolerate it are scheduled there."""
STEERED_TO_SIMULATED_NODES: dict[str, Any] = {
    "nodeSelector": {SIMULATED_NODE_LABEL: "true"},
    "tolerations": [{"operator": "Equal", **SIMULATED_NODE_TAINT}],
}
"""What a pod spec needs to run on a dedicated simulator's nodes, and on no other node."""
UNRELATED_NODE = "unrelated-node"
GPU = "nvidia.com/gpu"
FUSE = "smarter-devices/fuse"
SIMULATOR_LABEL = "sim.podwright.dev/simulator"
"""On every node of a simulator: its run id (pods select its nodes with it)."""
LEASE_SECONDS = 40
SHORT_CRASH_LOOP = Backoff(timedelta(milliseconds=200), timedelta(seconds=1))
"""The simulator's crash-loop back-off: the kubelet's is 10 s doubling to 5 min, too slow for
tests; the shape is the same."""
DEFAULT_WORKERS = 8
"""Pods stepped at once: enough for their requests' latencies to overlap; more would only take
turns at the GIL, here and in the emulator."""
SYNC_SECONDS = 60.0
"""How long entering waits for the watch's first list of the pods."""
LogWriter = Callable[[str, str, str, str, str], None]
"""``(namespace, pod, container, line, at)``: :meth:`tests.k8s_emulator.Emulator.write_log`."""


@dataclass(frozen=True)
class NodeShape:
    """One node to simulate: its capacity (all of it allocatable) and labels of its own."""

    capacity: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)


_BASE_CAPACITY = {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"}
CPU_NODE = NodeShape({**_BASE_CAPACITY, FUSE: "20"})
GPU_NODE = NodeShape({**_BASE_CAPACITY, FUSE: "20", GPU: "8"}, {"nvidia.com/gpu.present": "true"})


def micro_time(moment: datetime) -> str:
    """``metav1.MicroTime`` as the API server writes it: ``2006-01-02T15:04:05.000000Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeSimulator:
    """Simulated nodes and their kubelets, for a ``with`` block."""

    def __init__(
        self,
        client: KubernetesClient,
        api: k8s_client.ApiClient,
        *,
        nodes: Sequence[NodeShape] = (CPU_NODE, GPU_NODE),
        namespace: str | None = None,
        schedulers: Sequence[str] = (DEFAULT_SCHEDULER,),
        bind_after: float = 0.0,
        poll_seconds: float = 0.05,
        lease_renew_seconds: float = 10.0,
        crash_loop: Backoff = SHORT_CRASH_LOOP,
        image_pull_back_off: float = 0.2,
        write_log: LogWriter | None = None,
        workers: int | None = None,
        dedicated: bool = False,
    ) -> None:
        """``workers``: the threads that step pods and bind them; None: :data:`DEFAULT_WORKERS`,
        or fewer when ``client``'s connection pool has no room for them beside the watch (a
        request beyond the pool opens a connection of its own and throws it away).
        ``dedicated``: the nodes are labelled and tainted for the pods steered to them, and
        strays are caught (see the module)."""
        self.run_id = uuid.uuid4().hex[:6]
        self.nodes = [f"podwright-sim-{self.run_id}-{index}" for index in range(len(nodes))]
        self.pod_uids: dict[str, set[str]] = {}
        """Pod name → the uids this simulator ran under it (two: the pod was created twice)."""
        self._shapes = dict(zip(self.nodes, nodes, strict=True))
        self._dedicated = dedicated
        self._candidates = [
            Candidate(
                name,
                self._labels(name),
                {key: parse_quantity(value) for key, value in shape.capacity.items()},
                self._taints(),
            )
            for name, shape in self._shapes.items()
        ]
        self._others: list[Candidate] = []
        """The nodes of the cluster that are not simulated ones (listed on entering)."""
        self._other_names: frozenset[str] = frozenset()
        self.strays: dict[str, str] = {}
        """``namespace/name`` → how a pod not steered to the simulated nodes could escape them
        (a dedicated simulator's; written by its loop)."""
        self._api = api
        self._writer = _Api(client, api)
        self._schedulers = tuple(schedulers)
        self._bind_after = timedelta(seconds=bind_after)
        self._poll = poll_seconds
        self._lease_renewal = timedelta(seconds=lease_renew_seconds)
        self._crash_loop = crash_loop
        self._image_pull_back_off = timedelta(seconds=image_pull_back_off)
        self._stops_allowed = threading.Event()
        self._stops_allowed.set()
        self._hosts = {
            name: _Host(self._writer, name, write_log, self._stops_allowed) for name in self.nodes
        }
        self._leases: dict[str, dict[str, Any]] = {}
        self._renewed = datetime.min.replace(tzinfo=UTC)
        self._pods: dict[str, SimulatedPod] = {}
        self._pending_since: dict[str, datetime] = {}
        self._bound: dict[str, str] = {}
        """Pod uid → the node this simulator bound it to, which the watch may not show yet
        (written by the workers, read between looks)."""
        self._pod_ips = 0
        self._pod_cache = WatchCache()
        self._watch = Reflector(client, "v1", "Pod", self._pod_cache, namespace=namespace)
        self._worker_count = (
            workers if workers is not None else min(DEFAULT_WORKERS, max(1, client.pool_size - 1))
        )
        self._workers = ThreadPoolExecutor(self._worker_count, "node-simulator-worker")
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="node-simulator", daemon=True)

    # The test's side ----------------------------------------------------------------------

    def __enter__(self) -> NodeSimulator:
        try:
            if self._dedicated:
                listed = call(self._api, "GET", NODES)["items"]
                self._others = [
                    Candidate.of(node)
                    for node in listed
                    if SIMULATED_NODE_LABEL not in (node["metadata"].get("labels") or {})
                ]
                self._other_names = frozenset(other.name for other in self._others)
            for index, name in enumerate(self.nodes):
                node = call(self._api, "POST", NODES, self._node(name, index))
                self._leases[name] = call(
                    self._api, "POST", leases_path(NODE_LEASE_NAMESPACE), self._lease(node)
                )
            self._watch.start()
            if not self._watch.wait_synced(SYNC_SECONDS):
                failure = self._watch.error or f"no answer within {SYNC_SECONDS:g} s"
                raise RuntimeError(f"the node simulator cannot list the pods: {failure}")
        except BaseException:
            self._shut_down()
            raise
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._shut_down()
        if self.strays:  # the cause of whatever else went wrong: said first
            taint = "{key}={value}:{effect}".format(**SIMULATED_NODE_TAINT)
            raise AssertionError(
                "pods that a node other than the simulated ones could run (each pod must "
                f"require the label {SIMULATED_NODE_LABEL}=true and tolerate the taint {taint}): "
                + "; ".join(sorted(self.strays.values()))
            )
        if self._failure is not None and exc_type is None:
            raise AssertionError(f"the node simulator failed: {self._failure!r}") from self._failure

    def hold_stops(self) -> None:
        """Keep containers asked to stop (SIGTERM) running, until :meth:`release_stops` (the
        end of a pod's grace period still kills them)."""
        self._stops_allowed.clear()

    def release_stops(self) -> None:
        self._stops_allowed.set()

    def host_ip(self, node: str) -> str:
        return f"192.0.2.{10 + self.nodes.index(node)}"

    # The loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        # A look starts poll_seconds after the last one started, not after it ended: after a look
        # that took long (thousands of pods to write), the pods' next steps are due already.
        started = time.monotonic()
        while not self._stop.wait(max(0.0, started + self._poll - time.monotonic())):
            started = time.monotonic()
            try:
                self._tick(datetime.now(UTC))
            except Exception as error:  # the test learns of it on exit
                self._failure = error
                return

    def _tick(self, now: datetime) -> None:
        if now - self._renewed >= self._lease_renewal:
            self._renew_leases(now)
            self._renewed = now
        pods = self._pod_cache.values()
        self._forget_all_but({pod["metadata"]["uid"] for pod in pods})
        look = Look.of(pods, self.nodes, self._bound)
        if self._dedicated:
            for pod in pods:
                self._catch_stray(pod)
        work: list[Callable[[], None]] = []
        for pod, node in look.on_nodes:
            simulated = self._simulated(pod, node, now)
            if not simulated.idle(pod):
                work.append(partial(self._step, simulated, pod, node, now))
        for pod in look.pending:
            chosen = self._place(pod, look.used, now)
            if chosen is not None:
                add_requests(look.used[chosen], pod_requests(pod))
                work.append(partial(self._bind, pod, chosen))
        self._do(work)

    def _forget_all_but(self, uids: set[str]) -> None:
        """Drop what the simulator keeps about pods that are gone."""
        self._pods = {uid: sim for uid, sim in self._pods.items() if uid in uids}
        self._pending_since = {u: t for u, t in self._pending_since.items() if u in uids}
        self._bound = {uid: node for uid, node in self._bound.items() if uid in uids}

    def _simulated(self, pod: Pod, node: str, now: datetime) -> SimulatedPod:
        """The kubelet's state for a pod on one of the nodes, from the first look at it there."""
        metadata = pod["metadata"]
        simulated = self._pods.get(metadata["uid"])
        if simulated is None:
            self.pod_uids.setdefault(metadata["name"], set()).add(metadata["uid"])
            self._pod_ips += 1
            ip = f"10.244.{self.nodes.index(node)}.{self._pod_ips % 250 + 2}"
            placement = Placement(node, self.host_ip(node), ip)
            simulated = SimulatedPod(
                pod,
                placement,
                now,
                crash_loop=self._crash_loop,
                image_pull_back_off=self._image_pull_back_off,
            )
            self._pods[metadata["uid"]] = simulated
        return simulated

    def _place(self, pod: Pod, used: dict[str, Amounts], now: datetime) -> str | None:
        """The node to bind a pending pod to now: None when that is not this simulator's to do
        (yet), or no node has room."""
        scheduler = pod["spec"].get("schedulerName") or DEFAULT_SCHEDULER
        if scheduler not in self._schedulers or self._key(pod) in self.strays:
            return None
        first_seen = self._pending_since.setdefault(pod["metadata"]["uid"], now)
        if now - first_seen < self._bind_after:
            return None
        return choose_node(pod, self._candidates, used)

    @staticmethod
    def _key(pod: Pod) -> str:
        return f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"

    def _catch_stray(self, pod: Pod) -> None:
        """Note ``pod`` as a stray when the cluster's scheduler takes it and a node that is not a
        simulated one could run it, or it was bound to such a node."""
        spec, key = pod["spec"], self._key(pod)
        if key in self.strays or not self._others:
            return
        if (spec.get("schedulerName") or DEFAULT_SCHEDULER) not in self._schedulers:
            return
        node = spec.get("nodeName")
        if node:
            if node in self._other_names:
                self.strays[key] = f"{key} was bound to node {node}"
        elif not pod["metadata"].get("deletionTimestamp"):
            other = choose_node(pod, self._others, {})
            if other is not None:
                self.strays[key] = f"{key} fits node {other}"

    # The workers' side --------------------------------------------------------------------

    def _do(self, work: list[Callable[[], None]]) -> None:
        """Run a look's work on the workers and wait for all of it; raise the first failure.
        The workers take each piece from one queue, so a pod with much to write holds up only
        the worker that took it."""
        queue: SimpleQueue[Callable[[], None]] = SimpleQueue()
        for piece in work:
            queue.put(piece)
        working = [
            self._workers.submit(self._work_through, queue)
            for _ in range(min(self._worker_count, len(work)))
        ]
        wait(working)
        for worker in working:
            worker.result()

    def _work_through(self, queue: SimpleQueue[Callable[[], None]]) -> None:
        while not self._stop.is_set():  # on exit, the rest of the look is left undone
            try:
                piece = queue.get_nowait()
            except Empty:
                return
            piece()

    def _step(self, simulated: SimulatedPod, pod: Pod, node: str, now: datetime) -> None:
        with contextlib.suppress(NotFoundError, ConflictError):  # deleted or gone meanwhile
            simulated.step(pod, now, self._hosts[node])

    def _bind(self, pod: Pod, node: str) -> None:
        metadata = pod["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        try:
            bind_pod(self._api, namespace, name, node)
        except (ConflictError, NotFoundError):  # a scheduler was quicker, or it went
            return
        self._bound[metadata["uid"]] = node
        scheduler = pod["spec"].get("schedulerName") or DEFAULT_SCHEDULER
        self._writer.event(
            pod,
            reason="Scheduled",
            note=f"Successfully assigned {namespace}/{name} to {node}",
            controller=scheduler,
            instance=f"{scheduler}-podwright-sim-{self.run_id}",
            action="Binding",
        )

    def _shut_down(self) -> None:
        """Stop the watch and the workers, and take the nodes away."""
        self._watch.stop()
        self._workers.shutdown(cancel_futures=True)
        self._unregister()

    # Nodes and leases ---------------------------------------------------------------------

    def _labels(self, name: str) -> dict[str, str]:
        return {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            SIMULATOR_LABEL: self.run_id,
            **({SIMULATED_NODE_LABEL: "true"} if self._dedicated else {}),
            **self._shapes[name].labels,
        }

    def _taints(self) -> tuple[dict[str, str], ...]:
        return (SIMULATED_NODE_TAINT,) if self._dedicated else ()

    def _node(self, name: str, index: int) -> dict[str, Any]:
        now = micro_time(datetime.now(UTC))[:19] + "Z"
        capacity = self._shapes[name].capacity
        pressure = {
            "MemoryPressure": "KubeletHasSufficientMemory",
            "DiskPressure": "KubeletHasNoDiskPressure",
            "PIDPressure": "KubeletHasSufficientPID",
        }
        conditions = [
            {"type": kind, "status": "False", "reason": reason} for kind, reason in pressure.items()
        ]
        conditions.append(
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
            }
        )
        for condition in conditions:
            condition.update(lastHeartbeatTime=now, lastTransitionTime=now)
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": self._labels(name)},
            "spec": {
                "podCIDR": f"10.244.{index}.0/24",
                "podCIDRs": [f"10.244.{index}.0/24"],
                **({"taints": list(self._taints())} if self._dedicated else {}),
            },
            "status": {
                "capacity": dict(capacity),
                "allocatable": dict(capacity),
                "conditions": conditions,
                "addresses": [
                    {"type": "InternalIP", "address": self.host_ip(name)},
                    {"type": "Hostname", "address": name},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "operatingSystem": "linux",
                    "kubeletVersion": "v1.36.0-podwright-sim",
                    "kubeProxyVersion": "",
                    "containerRuntimeVersion": "podwright-sim://0",
                    "kernelVersion": "",
                    "osImage": "podwright node simulator",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                },
            },
        }

    def _lease(self, node: dict[str, Any]) -> dict[str, Any]:
        """The node's heartbeat Lease, held and owned by the node, as the kubelet's lease
        controller makes it (``k8s.io/component-helpers/apimachinery/lease``, with the
        kubelet's ``setNodeOwnerFunc``)."""
        name = node["metadata"]["name"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": NODE_LEASE_NAMESPACE,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "name": name,
                        "uid": node["metadata"]["uid"],
                    }
                ],
            },
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": micro_time(datetime.now(UTC)),
            },
        }

    def _renew_leases(self, now: datetime) -> None:
        for name, lease in self._leases.items():
            path = f"{leases_path(NODE_LEASE_NAMESPACE)}/{name}"
            renewed = {**lease, "spec": {**lease["spec"], "renewTime": micro_time(now)}}
            try:
                self._leases[name] = call(self._api, "PUT", path, renewed)
            except ConflictError:  # someone else wrote it: start from theirs next time
                self._leases[name] = call(self._api, "GET", path)

    def _unregister(self) -> None:
        for name in self.nodes:
            with contextlib.suppress(NotFoundError):
                call(self._api, "DELETE", f"{leases_path(NODE_LEASE_NAMESPACE)}/{name}")
            with contextlib.suppress(NotFoundError):
                call(self._api, "DELETE", f"{NODES}/{name}")


@dataclass(frozen=True)
class _Api:
    """The simulator's clients, and the events it writes with them."""

    client: KubernetesClient
    raw: k8s_client.ApiClient

    def event(
        self,
        pod: Pod,
        *,
        reason: str,
        note: str,
        controller: str,
        instance: str,
        action: str,
        kind: str = "Normal",
        field_path: str = "",
    ) -> None:
        metadata = pod["metadata"]
        regarding = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": metadata["name"],
            "namespace": metadata["namespace"],
            "uid": metadata["uid"],
        }
        if field_path:
            regarding["fieldPath"] = field_path
        self.client.create(
            {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                # Named as client-go's recorders name events: the object's name, a nanosecond clock.
                "metadata": {
                    "name": f"{metadata['name']}.{time.time_ns():x}",
                    "namespace": metadata["namespace"],
                },
                "eventTime": micro_time(datetime.now(UTC)),
                "reportingController": controller,
                "reportingInstance": instance,
                "action": action,
                "reason": reason,
                "type": kind,
                "note": note,
                "regarding": regarding,
            }
        )


@dataclass(frozen=True)
class _Host:
    """A pod's node, as :class:`~tests.node_sim.kubelet.SimulatedPod` sees it."""

    api: _Api
    node: str
    write_log: LogWriter | None
    stops_allowed: threading.Event

    def event(
        self, pod: Pod, reason: str, note: str, kind: str = "Normal", field_path: str = ""
    ) -> None:
        self.api.event(
            pod,
            reason=reason,
            note=note,
            controller="kubelet",
            instance=self.node,
            action=reason,
            kind=kind,
            field_path=field_path,
        )

    def write_status(self, pod: Pod, status: dict[str, Any]) -> None:
        ref = ObjectRef("v1", "Pod", pod["metadata"]["namespace"], pod["metadata"]["name"])
        self.api.client.patch_status(ref, {"status": status}, PatchType.MERGE)

    def confirm_deletion(self, pod: Pod) -> None:
        metadata = pod["metadata"]
        path = f"/api/v1/namespaces/{metadata['namespace']}/pods/{metadata['name']}"
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": metadata["uid"]},
        }
        call(self.api.raw, "DELETE", path, options)

    def log(self, pod: Pod, container: str, line: str) -> None:
        if self.write_log is not None:
            at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
            self.write_log(
                pod["metadata"]["namespace"], pod["metadata"]["name"], container, line, at
            )

    def stops_held(self) -> bool:
        return not self.stops_allowed.is_set()


def register_unrelated_node(api: k8s_client.ApiClient) -> None:
    """A Ready node that is nobody's, with room for any pod, untainted and without the
    simulated nodes' label, as every real cluster has nodes that are not the simulator's: on
    the emulator, a dedicated simulator then catches a pod that is not steered to its nodes
    (the emulator has no kubelet for it: nothing runs there)."""
    now = micro_time(datetime.now(UTC))[:19] + "Z"
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    ready.update(lastHeartbeatTime=now, lastTransitionTime=now)
    capacity = {**_BASE_CAPACITY, GPU: "8", FUSE: "20"}
    labels = {"kubernetes.io/hostname": UNRELATED_NODE, "kubernetes.io/os": "linux"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": UNRELATED_NODE, "labels": labels},
        "status": {"capacity": capacity, "allocatable": capacity, "conditions": [ready]},
    }
    call(api, "POST", NODES, node)


@contextlib.contextmanager
def simulate_nodes(url: str, **options: Any) -> Iterator[NodeSimulator]:
    """A :class:`NodeSimulator` for the API server at ``url`` (no credentials: the emulator),
    with clients of its own."""
    client = KubernetesClient.for_host(url)
    api = k8s_client.ApiClient(k8s_client.Configuration(host=url))
    try:
        with NodeSimulator(client, api, **options) as simulator:
            yield simulator
    finally:
        client.close()
        api.close()
