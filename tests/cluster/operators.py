"""``podwright operator`` replicas run as a test runs them: subprocesses on this machine, each
with its own log, against the cluster under test.

The replicas of one :class:`OperatorReplicas` share the installed operator's Lease and watch the
Workloads of the test's namespace only (``--watch-namespace``), so the tests of a session never
see each other's Workloads. The lease is short (3 s) so that a failover happens within a test's
patience; the admission webhooks are the session's (``podwright webhook``), so replicas serve
none (``--no-webhooks``). :meth:`OperatorReplicas.kill` is ``kill -9``; :meth:`stop` is SIGTERM,
after which a replica must exit 0 within its grace. At the end every Workload of the namespace is
deleted while a replica still runs (its finalizer is released by the operator, as in a cluster),
then every replica is stopped.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from podwright.core.cluster_resources import API_VERSION, WORKLOAD_FINALIZER
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType
from tests.cluster.support import ROOT, Server
from tests.kube.support import eventually

LEASE = "podwright-operator"
LEASE_NAMESPACE = "podwright-system"
"""The Lease is the installed operator's (its Role grants that one): one test's replicas at a
time hold it, each test's released (or, after a kill -9, expired) before the next starts."""
START_SECONDS = 60.0
STOP_SECONDS = 30.0
ELECTION = ("--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "500ms")
_STARTED = re.compile(r"operator (\S+) started")
_METRICS = re.compile(r"metrics on http://127\.0\.0\.1:(\d+)/metrics")


class Replica:
    """One ``podwright operator`` process."""

    def __init__(self, identity: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.identity = identity
        self.process = process
        self.log_path = log

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def metrics_port(self) -> int:
        found = _METRICS.search(self.log)
        assert found, f"replica {self.identity} announced no metrics address:\n{self.log}"
        return int(found.group(1))


class OperatorReplicas:
    """Operator replicas for one test's namespace (see the module's docstring)."""

    def __init__(
        self,
        server: Server,
        namespace: str,
        directory: Path,
        *,
        profile_name: str,
        kubeconfig: Path | None = None,
    ) -> None:
        self.server = server
        self.namespace = namespace
        self._kubeconfig = kubeconfig or server.kubeconfig
        self._directory = directory
        self._profile_name = profile_name
        self.replicas: list[Replica] = []
        self._logs: list[IO[bytes]] = []

    def start(self, identity: str, *options: str) -> Replica:
        """A replica named ``identity``, once it has started (listed and campaigning)."""
        log_path = self._directory / f"operator-{identity}.log"
        log = log_path.open("ab")
        self._logs.append(log)
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "podwright", "operator"),
                *("--kubeconfig", str(self._kubeconfig)),
                *("--namespace", LEASE_NAMESPACE, "--watch-namespace", self.namespace),
                *("--identity", identity, "--lease-name", LEASE, *ELECTION),
                *("--no-webhooks", "--profile", self._profile_name),
                *("--round-interval", "200ms", "--metrics-address", "127.0.0.1:0"),
                *options,
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        replica = Replica(identity, process, log_path)
        self.replicas.append(replica)

        def started() -> bool:
            assert replica.running, f"operator {identity} exited:\n{replica.log}"
            return bool(_STARTED.search(replica.log))

        eventually(started, timeout=START_SECONDS)
        return replica

    def holder(self) -> str | None:
        """Who holds the Lease now, as it says."""
        try:
            lease = self.server.client.get(
                ObjectRef("coordination.k8s.io/v1", "Lease", LEASE_NAMESPACE, LEASE)
            )
        except NotFoundError:
            return None
        return (lease.get("spec") or {}).get("holderIdentity") or None

    def leader(self) -> Replica:
        """The replica that holds the Lease (once one does)."""

        def held() -> Replica | None:
            holder = self.holder()
            return next((r for r in self.replicas if r.identity == holder and r.running), None)

        return eventually(held, timeout=START_SECONDS)

    def kill(self, replica: Replica) -> None:
        """``kill -9``: no round finishes, no lease is released."""
        replica.process.send_signal(signal.SIGKILL)
        replica.process.wait(timeout=STOP_SECONDS)

    def stop(self, replica: Replica) -> int:
        """SIGTERM; the exit status (a replica that ignores it fails the test)."""
        if replica.running:
            replica.process.send_signal(signal.SIGTERM)
        try:
            return replica.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            replica.process.kill()
            replica.process.wait()
            message = f"operator {replica.identity} ignored SIGTERM:\n{replica.log}"
            raise AssertionError(message) from None

    def workloads(self) -> list[dict[str, Any]]:
        found, _ = self.server.client.list_objects(
            API_VERSION, "Workload", namespace=self.namespace
        )
        return found

    def close(self) -> None:
        """Delete the namespace's Workloads with a replica running (it releases them), then stop
        every replica; a Workload still held after that is released here, and fails the test."""
        stranded: list[str] = []
        try:
            if not any(r.running for r in self.replicas):
                self.start("closing")
            for workload in self.workloads():
                with contextlib.suppress(NotFoundError):
                    self.server.client.delete(_ref(workload))
            eventually(lambda: not self.workloads(), timeout=START_SECONDS)
        except AssertionError:
            stranded = self._release_all()
        finally:
            for replica in self.replicas:
                if replica.running:
                    self.stop(replica)
            for log in self._logs:
                log.close()
        assert not stranded, f"Workloads left holding {WORKLOAD_FINALIZER}: {stranded}"

    def _release_all(self) -> list[str]:
        released = []
        for workload in self.workloads():
            metadata = workload["metadata"]
            if WORKLOAD_FINALIZER in (metadata.get("finalizers") or []):
                kept = [f for f in metadata["finalizers"] if f != WORKLOAD_FINALIZER]
                patch = {"metadata": {"finalizers": kept or None}}
                self.server.client.patch(_ref(workload), patch, PatchType.MERGE)
                released.append(metadata["name"])
        return released


def _ref(workload: dict[str, Any]) -> ObjectRef:
    metadata = workload["metadata"]
    return ObjectRef(API_VERSION, "Workload", metadata["namespace"], metadata["name"])


@contextlib.contextmanager
def operator_replicas(
    server: Server,
    namespace: str,
    directory: Path,
    *,
    profile_name: str,
    kubeconfig: Path | None = None,
) -> Iterator[OperatorReplicas]:
    replicas = OperatorReplicas(
        server, namespace, directory, profile_name=profile_name, kubeconfig=kubeconfig
    )
    try:
        yield replicas
    finally:
        replicas.close()
