"""The cluster tier's harness: the API server under test, what a session installs in it, and the
``podwright`` command line run against it as a user runs it.

A :class:`Server` is the emulator (a kubeconfig written for it) or the real cluster named by
``PODWRIGHT_TEST_KUBECONFIG``; nothing else is asked of it. :class:`SessionInstalls` installs what
the tests need that a cluster may lack, once per session: the CustomResourceDefinitions of the
kinds podwright renders, from ``../shared/schemas`` with server-side apply (waiting for
``Established``), and the PriorityClasses the cluster profiles name; at the end of the session it
deletes what it installed, and only that (a cluster that had them keeps them untouched).
podwright's own CRDs are :class:`PodwrightCrds`: on a real cluster, one install for the whole
session and both tiers (:func:`real_cluster_session`), so that every test sees the content of
``deploy/crds/`` and no test finds another's.
:class:`Podwright` runs the CLI in a subprocess with the test's kubeconfig, namespace and an
isolated ``--home``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s_client

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.engine.kubernetes_port import AlreadyExistsError, NotFoundError, ObjectRef
from tests.cluster.nodes import SUCCEEDS, PodDriver, PodOutcome
from tests.k8s_emulator import Emulator
from tests.k8s_emulator.crds import THIRD_PARTY_CRDS, crd_for
from tests.kube.support import (
    cluster_kubeconfig,
    delete_run_namespaces,
    eventually,
    kubectl,
)
from tests.node_sim.rest import send

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PODWRIGHT_CRDS = ROOT / "deploy" / "crds"
FIELD_MANAGER = "podwright-tests"
TASK_ID_LABEL = "podwright.dev/task-id"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CLI_TIMEOUT_SECONDS = 90.0
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
Completed = subprocess.CompletedProcess[str]


@dataclass(frozen=True)
class Server:
    """The API server under test, with a client of each kind for the session."""

    kubeconfig: Path
    emulator: Emulator | None
    client: KubernetesClient
    api_client: k8s_client.ApiClient
    """The official client's, for what podwright's client does not do (apply, dry run, CRDs)."""
    kubectl_cache: Path
    """kubectl's discovery and OpenAPI cache, the session's own."""

    @property
    def is_real(self) -> bool:
        return self.emulator is None

    def kubectl(self, *args: str, input: str | None = None) -> Completed:
        """``kubectl ARGS`` against this server, as a user runs it (skipped without kubectl)."""
        return kubectl(self.kubeconfig, self.kubectl_cache, *args, input=input)


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


@functools.cache
def _deployed_crds() -> tuple[tuple[Path, str], ...]:
    return tuple(
        (file, json.dumps(yaml.load(file.read_text(), Loader=_YAML_LOADER)))
        for file in sorted(PODWRIGHT_CRDS.glob("*.yaml"))
    )


def deployed_crds() -> list[tuple[Path, dict[str, Any]]]:
    """The files of ``deploy/crds/`` and what each holds (read once: parsing them took
    seconds), a copy of its own for the caller."""
    return [(file, json.loads(text)) for file, text in _deployed_crds()]


class PodwrightCrds:
    """podwright's CRDs in one API server, with the content of ``deploy/crds/``: each created
    where the server lacks it, its spec replaced where the server has other content, and
    waited for until Established; the same files for every test, in either tier, so that none
    finds others' CRDs in its way. :meth:`remove` deletes those it created and puts back the
    spec of those it replaced: a cluster with podwright installed keeps its own. (A create or an
    update, not a server-side apply: the emulator computes an apply's managed fields over the
    whole schema, which took seconds per CRD.)"""

    def __init__(self, api: k8s_client.ApiClient) -> None:
        self._api = api
        self._installed = False
        self._created: list[str] = []
        self._replaced: dict[str, dict[str, Any]] = {}

    def install(self) -> None:
        """In place and Established (once: later calls return at once)."""
        if self._installed:
            return
        names = []
        for file, crd in deployed_crds():
            name = crd["metadata"]["name"]
            path = f"{CRD_PATH}/{name}"
            before = send(self._api, "GET", path)
            if before.status == 200 and before.body["metadata"].get("deletionTimestamp"):
                # Being deleted (its objects first): it is gone before it can be made again.
                eventually(
                    lambda path=path: send(self._api, "GET", path).status == 404, timeout=120
                )
                before = send(self._api, "GET", path)
            if before.status == 404:
                created = send(self._api, "POST", CRD_PATH, crd)
                assert created.status == 201, f"creating {file}: {created}"
                self._created.append(name)
            else:
                assert before.status == 200, f"reading CRD {name}: {before}"
                if before.body["spec"] != crd["spec"]:
                    replaced = send(self._api, "PUT", path, {**before.body, "spec": crd["spec"]})
                    assert replaced.status == 200, f"replacing CRD {name} by {file}: {replaced}"
                    self._replaced[name] = before.body
            names.append(name)
        for name in names:
            path = f"{CRD_PATH}/{name}"
            eventually(
                lambda path=path: _established(send(self._api, "GET", path).body or {}),
                timeout=60,
            )
        self._installed = True

    def remove(self) -> None:
        """The CRDs it created deleted (and waited for until gone), those it changed as they
        were."""
        for name, before in self._replaced.items():
            path = f"{CRD_PATH}/{name}"
            current = send(self._api, "GET", path).body
            put = send(self._api, "PUT", path, {**current, "spec": before["spec"]})
            assert put.status == 200, f"putting CRD {name} back: {put}"
        for name in self._created:
            send(self._api, "DELETE", f"{CRD_PATH}/{name}")
        for name in self._created:
            path = f"{CRD_PATH}/{name}"
            eventually(lambda path=path: send(self._api, "GET", path).status == 404, timeout=120)
        self._created, self._replaced, self._installed = [], {}, False


@dataclass(frozen=True)
class RealCluster:
    """The real cluster under test, as the session holds it (both tiers)."""

    kubeconfig: Path
    crds: PodwrightCrds
    """podwright's CRDs, installed once for the session when a test first needs them."""


@contextlib.contextmanager
def real_cluster_session() -> Iterator[RealCluster]:
    """The cluster of ``PODWRIGHT_TEST_KUBECONFIG`` for a session (skipped without it); at its
    end, every namespace the session made that is still there is deleted (one a failed set-up
    left too), then the CRDs it installed are removed."""
    kubeconfig = Path(cluster_kubeconfig())
    api_client = connect(str(kubeconfig))
    client = KubernetesClient(connect(str(kubeconfig)))
    crds = PodwrightCrds(api_client)
    try:
        yield RealCluster(kubeconfig, crds)
    finally:
        try:
            delete_run_namespaces(client)
            crds.remove()
        finally:
            client.close()
            api_client.close()


class SessionInstalls:
    """The cluster-scoped objects a session needs: installed when missing, removed at its end."""

    def __init__(self, server: Server, directory: Path, crds: PodwrightCrds | None = None) -> None:
        """``crds``: podwright's CRDs as the session holds them (None: this server's own,
        removed with the rest)."""
        self._server = server
        self._directory = directory
        self._podwright_crds = crds if crds is not None else PodwrightCrds(server.api_client)
        self._owns_podwright_crds = crds is None
        self._crds_present: set[str] = set()
        self._crds_installed: list[str] = []
        self._profiles_done: set[Path | None] = set()
        self._priority_classes_installed: list[str] = []

    def kinds(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        """Make the cluster serve the custom kind of every manifest (built-in kinds need
        nothing)."""
        for manifest in manifests:
            kind = (str(manifest.get("apiVersion")), str(manifest.get("kind")))
            if kind in THIRD_PARTY_CRDS:
                self.crd(crd_for(*kind))

    def crd(self, crd: dict[str, Any]) -> None:
        """Apply the CRD (server-side, as ``kubectl apply --server-side``) unless the cluster
        has it already, and wait until it is Established."""
        name = crd["metadata"]["name"]
        if name in self._crds_present:
            return
        api = self._server.api_client
        path = f"{CRD_PATH}/{name}"
        status = send(api, "GET", path).status
        if status == 404:
            # JSON is YAML: the parsed file goes as an apply patch.
            applied = send(
                api,
                "PATCH",
                path,
                crd,
                content_type="application/apply-patch+yaml",
                query={"fieldManager": FIELD_MANAGER, "force": "true"},
            )
            assert applied.status in (200, 201), f"applying the CRD {name}: {applied}"
            self._crds_installed.append(name)
        else:
            assert status == 200, f"reading CRD {name}: {status}"
        eventually(lambda: _established(send(api, "GET", path).body or {}), timeout=60)
        self._crds_present.add(name)

    def podwright_crds(self) -> None:
        """podwright's own CRDs, from ``deploy/crds`` (:class:`PodwrightCrds`)."""
        self._podwright_crds.install()

    def priority_classes(self, profile: Path | None) -> None:
        """Create the PriorityClasses that ``profile`` (None: the default profile) names and the
        cluster lacks: a pod naming a class that does not exist is refused (the Priority
        admission plugin, plugin/pkg/admission/priority/admission.go)."""
        if profile in self._profiles_done:
            return
        chosen = ["--profile", str(profile)] if profile is not None else []
        listed = podwright_command("priority-classes", *chosen, "-o", "json", cwd=self._directory)
        assert listed.returncode == 0, listed.stderr
        for priority_class in json.loads(listed.stdout)["items"]:
            try:
                self._server.client.create(priority_class)
            except AlreadyExistsError:
                continue
            self._priority_classes_installed.append(priority_class["metadata"]["name"])
        self._profiles_done.add(profile)

    def remove(self) -> None:
        """Delete everything this session installed, and wait until it is gone."""
        client, api = self._server.client, self._server.api_client
        for name in self._priority_classes_installed:
            try:
                client.delete(ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "", name))
            except NotFoundError:
                continue
        for name in self._crds_installed:
            send(api, "DELETE", f"{CRD_PATH}/{name}")
        for name in self._crds_installed:
            eventually(lambda name=name: send(api, "GET", f"{CRD_PATH}/{name}").status == 404)
        if self._owns_podwright_crds:
            self._podwright_crds.remove()


def podwright_command(*args: str, cwd: Path, timeout: float = CLI_TIMEOUT_SECONDS) -> Completed:
    """``podwright ARGS`` run to its end, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "podwright", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass(frozen=True)
class Podwright:
    """The ``podwright`` command line against the cluster under test: the test's kubeconfig,
    namespace, and state directory (``--home``)."""

    kubeconfig: Path
    namespace: str
    home: Path

    @property
    def store(self) -> Path:
        return self.home / "tasks.db"

    def _cluster_run(self, workload: Path, options: Iterable[str]) -> list[str]:
        return [
            *(sys.executable, "-m", "podwright", "run", "--workload", str(workload)),
            *("--backend", "kubernetes", "--kubeconfig", str(self.kubeconfig)),
            *("--namespace", self.namespace, "--home", str(self.home)),
            *options,
        ]

    def run(self, workload: Path, *options: str) -> Completed:
        """``podwright run`` of ``workload``, followed to its end."""
        return subprocess.run(
            self._cluster_run(workload, options),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_SECONDS,
            check=False,
        )

    def start_run(self, workload: Path, *options: str) -> subprocess.Popen[str]:
        """``podwright run`` of ``workload``, following the task while the test acts."""
        return subprocess.Popen(
            self._cluster_run(workload, options),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def abort(self, task_id: str) -> Completed:
        return self(*("abort", task_id, "--kubeconfig", str(self.kubeconfig)))

    def executor(self, *options: str) -> subprocess.Popen[str]:
        """``podwright executor`` of the cluster, in the background (its output discarded)."""
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "podwright", "executor", "--backend", "kubernetes"),
                *("--kubeconfig", str(self.kubeconfig), "--home", str(self.home)),
                *("--metrics-address", "off", *options),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def phase(self, task_id: str) -> str:
        """The task's phase and reason, as ``podwright status`` shows them."""
        shown = self("status", task_id)
        assert shown.returncode == 0, shown.stderr
        line = next(line for line in shown.stdout.splitlines() if line.startswith("phase:"))
        return line.removeprefix("phase:").strip()

    def reached(self, task_id: str, phase: str) -> str:
        """The task's phase and reason once they begin with ``phase``; until then, an
        AssertionError naming where it is (for :func:`~tests.kube.support.eventually`)."""
        shown = self.phase(task_id)
        assert shown.startswith(phase), f"task {task_id} is {shown!r}, not {phase}"
        return shown

    def __call__(self, *args: str) -> Completed:
        """``podwright ARGS --home HOME``."""
        return podwright_command(*args, "--home", str(self.home), cwd=ROOT)


def task_id_of(output: str) -> str:
    """The task id ``podwright run`` announces first (``task ID: ...``)."""
    first = output.splitlines()[0] if output else ""
    assert first.startswith("task "), output
    return first.split()[1].rstrip(":")


def workload_file(
    directory: Path,
    example: str,
    pods: PodDriver,
    outcome: PodOutcome,
    *,
    spec: Mapping[str, object] | None = None,
) -> Path:
    """An example of ``examples/`` written to ``directory`` with its spec's keys replaced by
    ``spec`` (None removes one), its pods steered to ``pods``' nodes and ending as ``outcome``
    says (:meth:`PodDriver.workload_spec`)."""
    data = yaml.safe_load((EXAMPLES / example).read_text())
    for key, value in (spec or {}).items():
        if value is None:
            data["spec"].pop(key, None)
        else:
            data["spec"][key] = value
    data["spec"] = pods.workload_spec(data["spec"], outcome)
    path = directory / example
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def runnable_profile(directory: Path) -> Path:
    """``examples/cluster-profile.yaml`` on the default scheduler: the pods of the tests must be
    bound by the cluster's scheduler or the node driver, and no cluster runs KAI for a test."""
    profile = yaml.safe_load((EXAMPLES / "cluster-profile.yaml").read_text())
    del profile["spec"]["scheduler"]
    path = directory / "cluster-profile.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    return path


@dataclass(frozen=True)
class ClusterUnderTest:
    """A test's view of the cluster: its server, its own namespace, the CLI, and the pods'
    driver."""

    server: Server
    namespace: str
    podwright: Podwright
    pods: PodDriver
    installs: SessionInstalls
    profile: Path
    """The cluster profile the tests run workloads with (:func:`runnable_profile`)."""
    directory: Path
    """The test's own directory, for the files it writes."""

    @property
    def client(self) -> KubernetesClient:
        return self.server.client

    def workload(self, example: str, outcome: PodOutcome = SUCCEEDS, **spec: object) -> Path:
        """An example whose pods end as ``outcome`` says, its spec's keys replaced by ``spec``."""
        return workload_file(self.directory, example, self.pods, outcome, spec=spec)

    def run(self, workload: Path, *options: str) -> Completed:
        """``podwright run`` with the tests' profile, once its PriorityClasses exist."""
        self.installs.priority_classes(self.profile)
        return self.podwright.run(workload, "--profile", str(self.profile), *options)

    def start_run(self, workload: Path, *options: str) -> subprocess.Popen[str]:
        self.installs.priority_classes(self.profile)
        return self.podwright.start_run(workload, "--profile", str(self.profile), *options)

    def ref(self, kind: str, name: str, api_version: str = "v1") -> ObjectRef:
        return ObjectRef(api_version, kind, self.namespace, name)

    def has(self, kind: str, name: str) -> bool:
        """Whether the namespace holds that object."""
        try:
            self.client.get(self.ref(kind, name))
        except NotFoundError:
            return False
        return True

    def task_objects(
        self, task_id: str, kind: str, api_version: str = "v1"
    ) -> list[dict[str, Any]]:
        """The objects of ``kind`` that carry the task's id."""
        found, _ = self.client.list_objects(
            api_version, kind, namespace=self.namespace, label_selector=f"{TASK_ID_LABEL}={task_id}"
        )
        return found
