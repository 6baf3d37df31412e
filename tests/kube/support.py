"""Shared set-up for tests that talk to an API server: the emulator, or a real cluster.

A real cluster is used when ``PODWRIGHT_TEST_KUBECONFIG`` names a kubeconfig; each test then works
in a fresh namespace that is deleted afterwards, labelled with the run (:data:`TEST_RUN_LABEL`) so
that the session's end deletes one that a failed set-up left (:func:`delete_run_namespaces`).
Objects made here never run: pods name a scheduler that does not exist, so no node picks them up
and their status is the test's to drive; the node simulator's pods tolerate its dedicated nodes
(:meth:`ApiServer.simulate_nodes`), and on the emulator an unrelated node stands for the real
cluster's own.

``ApiServer.kubectl`` runs the kubectl binary (``PODWRIGHT_TEST_KUBECTL``, else the one on the
``PATH``) against the server, with a kubeconfig naming it (the emulator's, written for the test;
a real cluster's own) and a discovery cache of the test's own.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s_client

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.adapters.kubernetes.errors import error_from_status
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_FINALIZER, WORKLOAD_KIND
from podwright.engine.kubernetes_port import KubernetesError, NotFoundError, ObjectRef, PatchType
from tests.k8s_emulator import Emulator
from tests.node_sim import EXIT_CODE, RUN_SECONDS, NodeSimulator, register_unrelated_node
from tests.node_sim.rest import RawAnswer, bind_pod, send

KUBECONFIG_VARIABLE = "PODWRIGHT_TEST_KUBECONFIG"
KUBECTL_VARIABLE = "PODWRIGHT_TEST_KUBECTL"
KUBECTL_TIMEOUT_SECONDS = 60
UNSCHEDULABLE = "podwright-test-no-such-scheduler"
ABSENT_NODE = "podwright-test-no-such-node"
"""A node name no node has: a pod bound to it is never run (no kubelet picks it up)."""
OUTCOMES: dict[str, dict[str, str]] = {
    "succeed": {},
    "fail": {EXIT_CODE: "1"},
    "hang": {RUN_SECONDS: "inf"},
}
"""A pod's annotations for the node simulator, by the outcome a test wants of its task."""
SCHEDULER_GRACE_SECONDS = 5.0
"""How long the node simulator leaves a real cluster's scheduler to bind a pod before it does."""
TEST_RUN_LABEL = "podwright.dev/test-run"
TEST_RUN = uuid.uuid4().hex[:12]
"""This process's run: the value of :data:`TEST_RUN_LABEL` on every namespace it makes."""
T = TypeVar("T")


@dataclass
class ApiServer:
    """An API server to test against, and a namespace of the test's own in it."""

    client: KubernetesClient
    namespace: str
    emulator: Emulator | None
    api_client: k8s_client.ApiClient
    """The official client's, for the requests podwright itself never makes (a binding)."""
    kubeconfig: Path
    """A kubeconfig whose current context is this server (what ``kubectl`` uses)."""
    kubectl_cache: Path
    """kubectl's discovery and OpenAPI cache, the test's own (an emulator's port is reused)."""

    @property
    def is_real(self) -> bool:
        return self.emulator is None

    def ref(self, kind: str, name: str, api_version: str = "v1") -> ObjectRef:
        return ObjectRef(api_version, kind, self.namespace, name)

    def gone(self, ref: ObjectRef) -> bool:
        """Whether the object is gone (a GET answers 404)."""
        try:
            self.client.get(ref)
        except NotFoundError:
            return True
        return False

    def bind(self, pod_name: str, node: str = ABSENT_NODE) -> None:
        """Bind a pod of the test's namespace to a node, as the scheduler would."""
        bind_pod(self.api_client, self.namespace, pod_name, node)

    def simulate_nodes(self, **options: Any) -> NodeSimulator:
        """A dedicated node simulator for the test's namespace (its pods must tolerate its
        nodes' taint); on a real cluster, it binds a pod only when the cluster's scheduler did
        not within :data:`SCHEDULER_GRACE_SECONDS`."""
        options.setdefault("bind_after", SCHEDULER_GRACE_SECONDS if self.is_real else 0.0)
        return NodeSimulator(
            self.client, self.api_client, namespace=self.namespace, dedicated=True, **options
        )

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        accept: str = "application/json",
        headers: Sequence[tuple[str, str]] = (),
    ) -> RawAnswer:
        """One request through the official client's ApiClient (its authentication, no
        decoding into models), for what podwright's client does not do or surface: server-side
        apply, dry run, discovery, ``Warning`` headers, Tables. Errors are answers too.
        ``headers`` go besides (:func:`impersonating`)."""
        return send(
            self.api_client,
            method,
            path,
            body,
            content_type=content_type,
            query=query,
            accept=accept,
            headers=headers,
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """:meth:`send`'s status and decoded answer."""
        answer = self.send(method, path, body, content_type=content_type, query=query)
        return answer.status, answer.body

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """``kubectl <args>`` in the test's namespace, its output and exit status (a failure is
        an answer too); skipped where no kubectl is installed."""
        return kubectl(
            self.kubeconfig, self.kubectl_cache, f"--namespace={self.namespace}", *args, input=input
        )

    def delete_without_options(self, path: str) -> list[str]:
        """``DELETE path`` with no DeleteOptions (podwright's client always sends a
        propagationPolicy); the ``Warning`` headers of the answer."""
        answer = self.send("DELETE", path)
        if answer.status >= 300:
            raise error_from_status(answer.status, json.dumps(answer.body).encode())
        return answer.warnings


def kubectl(
    kubeconfig: Path, cache: Path, *args: str, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``kubectl <args>`` against the server ``kubeconfig`` names, with its discovery cache in
    ``cache``: its output and exit status (a failure is an answer too); skipped where no kubectl
    is installed."""
    binary = os.environ.get(KUBECTL_VARIABLE) or shutil.which("kubectl")
    if binary is None:
        pytest.skip(f"no kubectl on the PATH (or named by {KUBECTL_VARIABLE})")
    return subprocess.run(
        [binary, f"--kubeconfig={kubeconfig}", f"--cache-dir={cache}", *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT_SECONDS,
        check=False,
    )


CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@contextlib.contextmanager
def installed_crd(api: ApiServer, crd: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``crd`` created and Established (the apiextensions controllers set it a moment after the
    create), then deleted, also on failure: a CRD is cluster-wide, and outlives the test's
    namespace."""
    name = crd["metadata"]["name"]
    status, answer = api.request("POST", CRD_PATH, crd)
    assert status == 201, answer
    try:
        yield eventually(lambda: established_crd(api, name))
    finally:
        api.request("DELETE", f"{CRD_PATH}/{name}")


def established_crd(api: ApiServer, name: str) -> dict[str, Any] | None:
    """The CRD ``name`` once it is Established, else None. Its ``status.conditions`` is null
    until the apiextensions controllers first write them (the field has no ``omitempty``)."""
    _status, crd = api.request("GET", f"{CRD_PATH}/{name}")
    conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
    return crd if conditions.get("Established") == "True" else None


@contextlib.contextmanager
def emulator_with_namespace(namespace: str) -> Iterator[Emulator]:
    """An emulator serving, with ``namespace`` created in it."""
    with Emulator() as running:
        client = KubernetesClient.for_host(running.url)
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        client.close()
        yield running


def write_kubeconfig(
    path: Path, server: str, context: str = "emu", *, token: str | None = None
) -> Path:
    """A kubeconfig at ``path`` whose one context, current, names ``server``, with ``token`` as
    its user's bearer token: a user of an emulator with RBAC (``Emulator(rbac=True)``,
    ``emulator.add_user``); without one, a token that no emulator checks (an emulator with RBAC
    refuses it: 401)."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "emu", "cluster": {"server": server}}],
                "users": [{"name": "emu", "user": {"token": token or "unused"}}],
                "contexts": [{"name": context, "context": {"cluster": "emu", "user": "emu"}}],
                "current-context": context,
            }
        )
    )
    return path


def pod(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "schedulerName": UNSCHEDULABLE,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.invalid/none:1"}],
        },
    }


def config_map(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "data": {"key": "value"},
    }


def resource_quota(api: ApiServer, name: str, hard: dict[str, str]) -> None:
    """A ResourceQuota in the test's namespace, once its status says what it tracks: the
    admission plugin constrains pods by ``status.hard``, which the quota controller writes."""
    api.client.create(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": api.namespace},
            "spec": {"hard": hard},
        }
    )
    eventually(lambda: api.client.get(api.ref("ResourceQuota", name)).get("status", {}).get("hard"))


def eventually(check: Callable[[], T], *, timeout: float = 20.0, interval: float = 0.05) -> T:
    """``check()``'s first truthy result; its last error or a timeout fails the test."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
            error: BaseException | None = None
        except (AssertionError, NotFoundError) as exc:
            error = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s: {error or result!r}")
        time.sleep(interval)


def cluster_kubeconfig() -> str:
    kubeconfig = os.environ.get(KUBECONFIG_VARIABLE)
    if not kubeconfig:
        pytest.skip(f"{KUBECONFIG_VARIABLE} does not name a kubeconfig of a real cluster")
    return kubeconfig


def cluster_client() -> KubernetesClient:
    return KubernetesClient(connect(cluster_kubeconfig()))


def cluster_namespace(
    client: KubernetesClient, labels: Mapping[str, str] | None = None
) -> Iterator[str]:
    """A namespace of a unique name (with ``labels`` and the run's), deleted afterwards, also
    when its set-up fails (the create itself included: a create that timed out may have
    happened)."""
    name = f"podwright-test-{uuid.uuid4().hex[:8]}"
    metadata = {"name": name, "labels": {**(labels or {}), TEST_RUN_LABEL: TEST_RUN}}
    try:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
        # Pods are refused until the namespace's default service account exists.
        eventually(lambda: client.get(ObjectRef("v1", "ServiceAccount", name, "default")))
        yield name
    finally:
        let_workloads_go(client, name)
        with contextlib.suppress(NotFoundError):
            client.delete(ObjectRef("v1", "Namespace", "", name))


def let_workloads_go(client: KubernetesClient, namespace: str) -> None:
    """Remove podwright's finalizer from the Workloads left in ``namespace`` once its test is
    over: the mutating webhook holds every Workload from its creation, and with no operator left
    to let it go, the namespace (and at the session's end the CRD) would wait for it for ever on
    a real cluster. Nothing is left to run then: the test's operators are stopped."""
    try:
        workloads, _ = client.list_objects(API_VERSION, WORKLOAD_KIND, namespace=namespace)
    except KubernetesError:  # no Workload CRD, or the namespace is going already
        return
    for workload in workloads:
        metadata = workload["metadata"]
        finalizers = list(metadata.get("finalizers") or [])
        if WORKLOAD_FINALIZER not in finalizers:
            continue
        kept = [name for name in finalizers if name != WORKLOAD_FINALIZER]
        ref = ObjectRef(API_VERSION, WORKLOAD_KIND, namespace, metadata["name"])
        with contextlib.suppress(KubernetesError):
            client.patch(ref, {"metadata": {"finalizers": kept or None}}, PatchType.MERGE)


def delete_run_namespaces(client: KubernetesClient) -> None:
    """Delete every namespace this run made that is still there (not waiting for them to go)."""
    namespaces, _ = client.list_objects(
        "v1", "Namespace", label_selector=f"{TEST_RUN_LABEL}={TEST_RUN}"
    )
    for namespace in namespaces:
        if not namespace["metadata"].get("deletionTimestamp"):
            with contextlib.suppress(NotFoundError):
                client.delete(ObjectRef("v1", "Namespace", "", namespace["metadata"]["name"]))


def impersonating(user: str, *groups: str) -> list[tuple[str, str]]:
    """The headers of a request made as ``user`` in ``groups`` (k8s.io/apiserver's
    ``Impersonate-User`` and ``Impersonate-Group``, one line a group)."""
    return [("Impersonate-User", user), *(("Impersonate-Group", group) for group in groups)]


def with_token(api_client: k8s_client.ApiClient, token: str) -> k8s_client.ApiClient:
    """A client of the same server (its address and CA) that authenticates with the bearer
    ``token`` alone: no client certificate, no other credential of the kubeconfig."""
    configuration = copy.deepcopy(api_client.configuration)
    configuration.cert_file = configuration.key_file = None
    configuration.refresh_api_key_hook = None
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.api_key_prefix = {}
    return k8s_client.ApiClient(configuration)


def emulated(**options: Any) -> Iterator[ApiServer]:
    """The emulator (made with ``options``: ``rbac=True``), with a namespace ``test`` and a node
    that is not the simulator's."""
    with Emulator(**options) as emulator, tempfile.TemporaryDirectory() as directory:
        client = KubernetesClient.for_host(emulator.url)
        raw = k8s_client.ApiClient(k8s_client.Configuration(host=emulator.url))
        kubeconfig = write_kubeconfig(Path(directory) / "kubeconfig", emulator.url)
        try:
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "test"}})
            register_unrelated_node(raw)
            yield ApiServer(client, "test", emulator, raw, kubeconfig, Path(directory) / "cache")
        finally:
            client.close()
            raw.close()


def real() -> Iterator[ApiServer]:
    client = cluster_client()
    raw = connect(cluster_kubeconfig())
    try:
        with tempfile.TemporaryDirectory() as directory:
            kubeconfig, cache = Path(cluster_kubeconfig()), Path(directory)
            for namespace in cluster_namespace(client):
                yield ApiServer(client, namespace, None, raw, kubeconfig, cache)
    finally:
        client.close()
        raw.close()
