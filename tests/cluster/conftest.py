"""Fixtures of the cluster tier: every test runs against the emulator and, marked ``cluster``,
against the real API server named by ``PODWRIGHT_TEST_KUBECONFIG``.

``server`` is one API server per session, with what the session installed in it removed at the
end (``installs``); ``webhooks`` is ``podwright webhook`` serving the session (``webhook``: a
test's view of it, serving); ``namespace`` is a test's own, deleted after it; ``kube_cluster`` adds the pods'
driver and the CLI, and, once the test is over, fails it if an executor it started outlives its
tasks (stopping it) or a task was left active, before the driver stops and the namespace goes.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.core.cluster_resources import API_VERSION
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef
from tests.cli.background import no_executor_left
from tests.cluster.nodes import PodDriver, driving_pods
from tests.cluster.support import (
    ClusterUnderTest,
    Podwright,
    RealCluster,
    Server,
    SessionInstalls,
    runnable_profile,
)
from tests.cluster.webhooks import WebhookProcess, webhook_address, webhook_process
from tests.k8s_emulator import Emulator
from tests.kube.support import cluster_namespace, write_kubeconfig
from tests.node_sim import register_unrelated_node


def _server(kubeconfig: Path, emulator: Emulator | None, kubectl_cache: Path) -> Iterator[Server]:
    api_client = connect(str(kubeconfig))
    client = KubernetesClient(connect(str(kubeconfig)))
    try:
        yield Server(kubeconfig, emulator, client, api_client, kubectl_cache)
    finally:
        client.close()
        api_client.close()


@pytest.fixture(
    scope="session", params=["emulator", pytest.param("cluster", marks=pytest.mark.cluster)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The session's API server: the real cluster's (``real_cluster``), or an emulator with a
    node that is not the simulator's, as every real cluster has."""
    kubectl_cache = tmp_path_factory.mktemp("kubectl-cache")
    if request.param == "cluster":
        cluster: RealCluster = request.getfixturevalue("real_cluster")
        yield from _server(cluster.kubeconfig, None, kubectl_cache)
        return
    with Emulator() as emulator:
        kubeconfig = write_kubeconfig(
            tmp_path_factory.mktemp("emulator") / "kubeconfig", emulator.url
        )
        for server in _server(kubeconfig, emulator, kubectl_cache):
            register_unrelated_node(server.api_client)
            yield server


@pytest.fixture(scope="session")
def installs(
    server: Server, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SessionInstalls]:
    """What the session installs; on a real cluster, podwright's CRDs are the session's
    (``real_cluster``, shared with ``tests/kube``)."""
    crds = request.getfixturevalue("real_cluster").crds if server.is_real else None
    installed = SessionInstalls(server, tmp_path_factory.mktemp("installs"), crds)
    try:
        yield installed
    finally:
        installed.remove()


@pytest.fixture(scope="session")
def profile_name(server: Server, installs: SessionInstalls, profile: Path) -> Iterator[str]:
    """The tests' cluster profile as a ClusterProfile of a unique name (and its PriorityClasses),
    for the session; deleted afterwards."""
    installs.podwright_crds()
    installs.priority_classes(profile)
    data = yaml.safe_load(profile.read_text())
    name = f"podwright-test-{uuid.uuid4().hex[:8]}"
    try:  # a create that failed may have happened: the clean-up covers it too
        server.client.create(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterProfile",
                "metadata": {"name": name},
                "spec": data["spec"],
            }
        )
        yield name
    finally:
        with contextlib.suppress(NotFoundError):
            server.client.delete(ObjectRef(API_VERSION, "ClusterProfile", "", name))


@pytest.fixture(scope="session")
def webhooks(
    server: Server,
    installs: SessionInstalls,
    profile_name: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WebhookProcess]:
    """podwright's CRDs installed from ``deploy/crds`` and ``podwright webhook`` serving them
    from this process's machine, for the session; then stopped (exit 0) and its webhook
    configurations deleted. The API server reaches it at 127.0.0.1 (the emulator), or at
    ``PODWRIGHT_TEST_WEBHOOK_HOST`` (a real cluster; 127.0.0.1 without it). It judges Workloads
    on the operators' cluster profile (``profile_name``), as an operator's webhooks do."""
    host = webhook_address(real=server.is_real)
    installs.podwright_crds()
    directory = tmp_path_factory.mktemp("webhook")
    with webhook_process(server, host, directory, profile_name) as process:
        yield process


@pytest.fixture
def webhook(webhooks: WebhookProcess) -> WebhookProcess:
    """The session's webhook process, serving (started again when a test before stopped it or
    pointed the configurations elsewhere)."""
    webhooks.ensure()
    return webhooks


@pytest.fixture(scope="session")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return runnable_profile(tmp_path_factory.mktemp("profile"))


@pytest.fixture
def namespace(server: Server) -> Iterator[str]:
    """A namespace of the test's own, deleted after it (also on failure)."""
    yield from cluster_namespace(server.client)


@pytest.fixture
def pods(server: Server, namespace: str) -> Iterator[PodDriver]:
    with driving_pods(server, namespace) as driver:
        yield driver


@pytest.fixture
def kube_cluster(
    *,
    server: Server,
    namespace: str,
    pods: PodDriver,
    installs: SessionInstalls,
    profile: Path,
    tmp_path: Path,
) -> Iterator[ClusterUnderTest]:
    podwright = Podwright(server.kubeconfig, namespace, tmp_path / "home")
    yield ClusterUnderTest(server, namespace, podwright, pods, installs, profile, tmp_path)
    no_executor_left(podwright.store)
