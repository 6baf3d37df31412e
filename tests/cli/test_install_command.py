"""``podwright install`` and ``podwright uninstall`` against the API-server emulator, and the
generated files of ``deploy/`` (the one-file install, the FUSE proxy's, the Kustomize base),
kept equal to what the code makes and applied with kubectl.

The emulator runs no deployment controller and no operator: a test that needs the operator ready
plays both (a Deployment status written through ``deployments/status``, a CA bundle written into
the webhook configurations), and one that needs Workloads finalized plays the operator's part.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from podwright.adapters.documents import dump_yaml
from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.cli import main
from podwright.cli.install_command import pod_problems, rollout_problem
from podwright.core.crds import custom_resource_definitions, definition_file_name
from podwright.core.install_manifests import (
    InstallSettings,
    fuse_proxy_manifests,
    install_manifests,
    install_parts,
)
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType
from tests.k8s_emulator import Emulator, Fault
from tests.kube.support import eventually, kubectl, write_kubeconfig

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
REGENERATE = "PODWRIGHT_UPDATE_GOLDEN=1 .venv/bin/pytest tests/cli/test_install_command.py"
WORKLOAD_FINALIZER = "podwright.dev/workload"
RESOURCE_FINALIZER = "podwright.dev/finalizer"
CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
HELP = {
    "install": "Install podwright in a cluster and wait until its operator is ready.",
    "uninstall": "Remove podwright from a cluster, leaving no Workload or resource held by its "
    "finalizers.",
}


def run(*args: str) -> Result:
    return CliRunner().invoke(main.cli, list(args))


@dataclass
class Cluster:
    emulator: Emulator
    client: KubernetesClient
    kubeconfig: str
    kubectl_cache: Path

    def install(self, *args: str) -> Result:
        return run("install", "--kubeconfig", self.kubeconfig, *args)

    def uninstall(self, *args: str) -> Result:
        return run("uninstall", "--kubeconfig", self.kubeconfig, *args)

    def kubectl(self, *args: str) -> Any:
        return kubectl(Path(self.kubeconfig), self.kubectl_cache, *args)

    def present(self, manifest: dict[str, Any]) -> bool:
        try:
            self.client.get(ObjectRef.of(manifest))
        except NotFoundError:
            return False
        return True

    def changes_since(self, version: int) -> list[Any]:
        found = self.emulator.store.changes(version)
        assert found is not None
        return found[0]

    def written_since(self, version: int, manifests: list[dict[str, Any]]) -> list[str]:
        """The objects of ``manifests`` written since ``version`` (the emulator's controllers
        write objects of their own meanwhile: a namespace's ``default`` ServiceAccount)."""
        named = {(m["kind"], m["metadata"]["name"]) for m in manifests}
        return [
            f"{event.type} {event.resource.kind} {event.obj['metadata']['name']}"
            for event in self.changes_since(version)
            if (event.resource.kind, event.obj["metadata"]["name"]) in named
        ]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Emulator() as emulator:
        kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", emulator.url))
        client = KubernetesClient(connect(kubeconfig))
        try:
            yield Cluster(emulator, client, kubeconfig, tmp_path / "kubectl-cache")
        finally:
            client.close()


DEFAULT = install_manifests(InstallSettings())
EVERYTHING = install_manifests(InstallSettings(with_fuse_proxy=True))
OPERATOR = ObjectRef("apps/v1", "Deployment", "podwright-system", "podwright-operator")
CONFIGURATIONS = [
    ObjectRef("admissionregistration.k8s.io/v1", kind, "", "podwright")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
]


def play_operator_ready(client: KubernetesClient, *, replicas: int = 2) -> None:
    """What the deployment controller and the operator write once the operator runs: every
    replica updated, ready and available, and its CA bundle in every webhook."""
    generation = client.get(OPERATOR)["metadata"]["generation"]
    status = {
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": replicas,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
    }
    client.patch_status(OPERATOR, {"status": status}, PatchType.MERGE)
    bundle = base64.b64encode(CA_PEM).decode()
    for ref in CONFIGURATIONS:
        configuration = client.get(ref)
        operations = [
            {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": bundle}
            for index in range(len(configuration["webhooks"]))
        ]
        client.patch(ref, operations, PatchType.JSON)


def in_background(work: Callable[[], None]) -> Callable[[], None]:
    """``work`` in a thread; the returned function joins it (re-raising what failed)."""
    failures: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except BaseException as error:  # reported by the join
            failures.append(error)

    thread = threading.Thread(target=guarded, daemon=True)
    thread.start()

    def join() -> None:
        thread.join(timeout=30)
        assert not thread.is_alive()
        if failures:
            raise failures[0]

    return join


# The files of deploy/ -------------------------------------------------------------------------


def loaded(text: str) -> list[Any]:
    """YAML documents read with libyaml (the CRDs make ``install.yaml`` over a megabyte)."""
    return list(yaml.load_all(text, Loader=yaml.CSafeLoader))


def documents(manifests: Any) -> str:
    return "---\n".join(dump_yaml(manifest) for manifest in manifests)


def kustomization() -> str:
    """The Kustomize base: the CRDs' files, the PriorityClasses' file, and one file per part."""
    resources = []
    for part in install_parts(InstallSettings()):
        if part.name == "crds":
            resources += [f"crds/{definition_file_name(crd)}" for crd in part.manifests]
        elif part.name == "priority-classes":
            resources.append("priority-classes.yaml")
        else:
            resources.append(f"base/{part.name}.yaml")
    header = (
        "# podwright's installation as a Kustomize base: the objects of install.yaml, one part\n"
        "# per file. Generated, as every file here (see README.md): patch it from an overlay.\n"
    )
    body = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    }
    return header + dump_yaml(body)


def generated_files() -> dict[Path, str]:
    """Every generated file of ``deploy/`` but the CRDs' and the PriorityClasses' (their own
    commands' tests keep those), and what it holds."""
    install = run("install", "-o", "yaml")
    assert install.exit_code == 0, install.output
    files = {
        DEPLOY / "install.yaml": install.stdout,
        DEPLOY / "fuse-proxy.yaml": documents(fuse_proxy_manifests(InstallSettings())),
        DEPLOY / "kustomization.yaml": kustomization(),
    }
    for part in install_parts(InstallSettings()):
        if part.name not in ("crds", "priority-classes"):
            files[DEPLOY / "base" / f"{part.name}.yaml"] = documents(part.manifests)
    return files


def test_the_generated_files_of_deploy_are_what_the_code_makes() -> None:
    """``deploy/install.yaml`` is ``podwright install -o yaml``; ``deploy/fuse-proxy.yaml`` the
    FUSE proxy's objects of ``--with-fuse-proxy``; ``deploy/kustomization.yaml`` and
    ``deploy/base/`` the same objects by part."""
    files = generated_files()
    if os.environ.get("PODWRIGHT_UPDATE_GOLDEN") == "1":
        (DEPLOY / "base").mkdir(exist_ok=True)
        for stale in (DEPLOY / "base").glob("*.yaml"):
            stale.unlink()
        for path, content in files.items():
            path.write_text(content)
    base = {path.name for path in files if path.parent.name == "base"}
    assert {path.name for path in (DEPLOY / "base").glob("*")} == base, (
        f"deploy/base/ has other files than the parts; regenerate it with {REGENERATE}"
    )
    for path, content in files.items():
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing; make it with {REGENERATE}"
        assert path.read_text() == content, (
            f"{path.relative_to(ROOT)} is not what the code makes; regenerate it with {REGENERATE}"
        )


def test_the_one_file_holds_every_object_and_the_fuse_proxy_file_the_daemon() -> None:
    assert loaded((DEPLOY / "install.yaml").read_text()) == DEFAULT
    assert loaded((DEPLOY / "fuse-proxy.yaml").read_text()) == EVERYTHING[-3:]
    assert [m["kind"] for m in EVERYTHING[-3:]] == ["Namespace", "ServiceAccount", "DaemonSet"]


def kustomized(tmp_path: Path, directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize DIRECTORY``: kustomize as kubectl embeds it."""
    built = kubectl(tmp_path / "kubeconfig", tmp_path / "cache", "kustomize", str(directory))
    assert built.returncode == 0, built.stderr
    return loaded(built.stdout)


def assert_same_objects(built: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """The same objects, in any order. The CRDs are compared by name: their content is
    ``deploy/crds/``'s, which ``tests/cli/test_crds_command.py`` keeps equal to the code."""

    def key(manifest: dict[str, Any]) -> tuple[str, str, str]:
        metadata = manifest["metadata"]
        return manifest["kind"], metadata.get("namespace", ""), metadata["name"]

    assert sorted(map(key, built)) == sorted(map(key, expected))
    crd = "CustomResourceDefinition"
    assert sorted((key(m), m) for m in built if m["kind"] != crd) == sorted(
        (key(m), m) for m in expected if m["kind"] != crd
    )


def test_the_kustomize_base_builds_the_objects_of_the_one_file(tmp_path: Path) -> None:
    assert_same_objects(kustomized(tmp_path, DEPLOY), DEFAULT)


def test_an_overlay_in_another_namespace_builds_what_install_makes_for_it(tmp_path: Path) -> None:
    """Kustomize's ``namespace`` renames the Namespace, moves the namespaced objects, and follows
    them where they are named (the bindings' subjects, the webhooks' Service): the objects of
    ``podwright install --namespace``."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        f"resources: [{os.path.relpath(DEPLOY, overlay)}]\nnamespace: ml-platform\n"
    )
    moved = install_manifests(InstallSettings(namespace="ml-platform"))
    assert_same_objects(kustomized(tmp_path, overlay), moved)


# install -o, and bad input -------------------------------------------------------------------


def test_the_objects_printed_as_json_are_the_yaml_ones() -> None:
    listing = json.loads(run("install", "-o", "json", "--with-fuse-proxy").stdout)
    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    assert listing["items"] == EVERYTHING
    as_yaml = loaded(run("install", "-o", "yaml", "--with-fuse-proxy").stdout)
    assert as_yaml == EVERYTHING


def test_single_webhook_installs_the_configurations_and_the_operator_of_one_call() -> None:
    printed = loaded(run("install", "-o", "yaml", "--single-webhook").stdout)
    assert printed == install_manifests(InstallSettings(single_webhook=True))
    assert printed != DEFAULT


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--namespace", "kube-system"],
            "--namespace: 'kube-system' is Kubernetes' own namespace; podwright needs one of "
            "its own (uninstalling deletes it), such as 'podwright-system'",
        ),
        (
            ["-n", "Platform"],
            "--namespace: 'Platform' is not a namespace name: it must consist of lower-case",
        ),
        (["--image", ""], "--image: expected an image reference such as"),
        (["--replicas", "0"], "--replicas: at least 1 is needed (the webhooks), got 0"),
        (["--timeout", "soon"], "--timeout"),
        (["--timeout", "0s"], "must be positive"),
        (
            ["-o", "yaml", "--dry-run"],
            "-o prints the objects without a cluster: --dry-run, --kubeconfig and --context go "
            "without it",
        ),
        (
            ["--kubeconfig", "/nonexistent/kubeconfig"],
            "cannot configure a Kubernetes client from /nonexistent/kubeconfig",
        ),
    ],
    ids=[
        "system-namespace",
        "namespace-name",
        "image",
        "replicas",
        "timeout",
        "zero-timeout",
        "output-and-dry-run",
        "kubeconfig",
    ],
)
def test_bad_input_is_refused_naming_the_option(args: list[str], message: str) -> None:
    result = run("install", *args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stderr.startswith("podwright: error: ")


def test_uninstall_refuses_a_system_namespace() -> None:
    result = run("uninstall", "-n", "default")
    assert result.exit_code == 2
    assert "--namespace: 'default' is Kubernetes' own namespace" in result.stderr


# What install waits for ------------------------------------------------------------------------


def rollout(generation: int = 1, wanted: int | None = 2, **status: Any) -> dict[str, Any]:
    """A Deployment of ``wanted`` replicas (None: unset) at ``generation``, with ``status``."""
    spec = {} if wanted is None else {"replicas": wanted}
    return {"metadata": {"generation": generation}, "spec": spec, "status": status}


ROLLED_OUT = {
    "observedGeneration": 1,
    "replicas": 2,
    "updatedReplicas": 2,
    "readyReplicas": 2,
    "availableReplicas": 2,
}


@pytest.mark.parametrize(
    ("deployment", "problem"),
    [
        (rollout(), "the deployment controller has not seen the latest spec yet"),
        (
            rollout(2, **ROLLED_OUT),
            "the deployment controller has not seen the latest spec yet",
        ),
        (
            rollout(
                **{**ROLLED_OUT, "updatedReplicas": 1},
                conditions=[
                    {
                        "type": "Progressing",
                        "status": "False",
                        "reason": "ProgressDeadlineExceeded",
                        "message": 'ReplicaSet "podwright-operator-7d9c" has timed out progressing.',
                    }
                ],
            ),
            'its rollout exceeded its progress deadline: ReplicaSet "podwright-operator-7d9c" has '
            "timed out progressing.",
        ),
        (rollout(**{**ROLLED_OUT, "updatedReplicas": 1}), "1 of 2 replicas updated"),
        (rollout(**{**ROLLED_OUT, "replicas": 3}), "1 old replicas pending termination"),
        (rollout(**{**ROLLED_OUT, "availableReplicas": 1}), "1 of 2 updated replicas available"),
        (rollout(**{**ROLLED_OUT, "readyReplicas": 1}), "1 of 2 replicas ready"),
        (rollout(**ROLLED_OUT), None),
        (rollout(wanted=None, observedGeneration=1), "0 of 1 replicas updated"),
        (rollout(wanted=0, observedGeneration=1), None),
    ],
    ids=[
        "not-observed",
        "new-generation",
        "deadline-exceeded",
        "updating",
        "old-replicas",
        "unavailable",
        "unready",
        "rolled-out",
        "replicas-default-to-one",
        "no-replica-wanted",
    ],
)
def test_a_rollout_is_done_as_kubectl_rollout_status_judges_it_and_every_replica_ready(
    deployment: dict[str, Any], problem: str | None
) -> None:
    assert rollout_problem(deployment) == problem


def test_the_pods_not_ready_are_named_with_what_keeps_them() -> None:
    ready = {
        "metadata": {"name": "a"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    unscheduled = {
        "metadata": {"name": "b"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient memory.",
                }
            ],
        },
    }
    crashing = {
        "metadata": {"name": "c"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "operator", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ],
        },
    }
    assert pod_problems([ready, unscheduled, crashing]) == [
        "pod/b: Pending, not ready (unscheduled: 0/3 nodes are available: 3 Insufficient memory.)",
        "pod/c: Running, not ready (operator CrashLoopBackOff)",
    ]


# install against the emulator ----------------------------------------------------------------


def test_a_dry_run_checks_every_object_and_changes_nothing(cluster: Cluster) -> None:
    """A server-side dry run of every object (``dryRun=All``). An object in a namespace the
    install would create cannot be checked by the server before the namespace exists: it is
    named, with why."""
    before = cluster.emulator.store.resource_version
    result = cluster.install("--dry-run", "--with-fuse-proxy")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        lines[0]
        == "customresourcedefinition.apiextensions.k8s.io/assets.podwright.dev checked (dry run)"
    )
    assert "namespace/podwright-system checked (dry run)" in lines
    assert (
        "deployment.apps/podwright-operator not checked (dry run): its namespace "
        "podwright-system does not exist yet (install creates it first)"
    ) in lines
    assert len(lines) == len(EVERYTHING)
    assert cluster.written_since(before, EVERYTHING) == []
    assert not any(cluster.present(manifest) for manifest in EVERYTHING)


def test_a_dry_run_over_an_installation_checks_everything_and_lists_each_refusal(
    cluster: Cluster,
) -> None:
    """Over an installation, every object is checked; each the server refuses is listed (here
    by injected faults, as a server refuses what its user may not write), and the dry run ends
    with exit status 5, still having changed nothing."""
    assert cluster.install("--no-wait").exit_code == 0
    before = cluster.emulator.store.resource_version
    for path in ("/priorityclasses/podwright-low$", "/clusterroles/podwright-admin$"):
        cluster.emulator.inject(Fault(403, method="PATCH", path=path, reason="Forbidden"))
    result = cluster.install("--dry-run")
    assert result.exit_code == 5, result.output
    assert result.stderr.splitlines() == [
        "podwright: error: clusterrole.rbac.authorization.k8s.io/podwright-admin: injected fault 403",
        "podwright: error: priorityclass.scheduling.k8s.io/podwright-low: injected fault 403",
        "podwright: error: the API server would refuse these (dry run)",
    ]
    checked = result.stdout.splitlines()
    assert len(checked) == len(DEFAULT) - 2
    assert all(line.endswith(" checked (dry run)") for line in checked), checked
    assert cluster.written_since(before, DEFAULT) == []


def test_an_install_the_server_refuses_stops_naming_the_object(cluster: Cluster) -> None:
    cluster.emulator.inject(
        Fault(403, method="PATCH", path="/deployments/podwright-operator$", reason="Forbidden")
    )
    result = cluster.install("--no-wait")
    assert result.exit_code == 5, result.output
    assert result.stderr == (
        "podwright: error: deployment.apps/podwright-operator: the API server refused it: "
        "injected fault 403\n"
    )
    assert result.stdout.splitlines()[-1] == "service/podwright-webhook applied"


def test_install_applies_every_object_with_its_field_manager(cluster: Cluster) -> None:
    result = cluster.install("--no-wait", "--with-fuse-proxy")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "daemonset.apps/podwright-fuse-proxy applied"
    assert len(result.stdout.splitlines()) == len(EVERYTHING)
    for manifest in EVERYTHING:
        stored = cluster.client.get(ObjectRef.of(manifest))
        managers = {entry["manager"] for entry in stored["metadata"].get("managedFields", [])}
        assert "podwright-install" in managers, manifest["kind"]
    # Again: the same objects, applied over themselves.
    again = cluster.install("--no-wait", "--with-fuse-proxy")
    assert again.exit_code == 0, again.output
    assert again.stdout == result.stdout


def test_install_waits_until_the_operator_is_ready(cluster: Cluster) -> None:
    """It follows the rollout (printing what it waits for when that changes) and returns once
    every replica is available and the webhooks trust the operator's CA."""
    client = cluster.client

    def operator_starts() -> None:
        eventually(lambda: client.get(CONFIGURATIONS[1]), timeout=20)
        time.sleep(0.6)  # the install is waiting by now
        play_operator_ready(client)

    join = in_background(operator_starts)
    result = cluster.install("--timeout", "20s")
    join()
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        "waiting: deployment.apps/podwright-operator: the deployment controller has not seen "
        "the latest spec yet"
    ) in lines
    assert lines[-1] == (
        "podwright is ready: deployment.apps/podwright-operator in podwright-system has 2 of 2 "
        "replicas available, and the webhook configurations trust its CA"
    )


def test_install_that_times_out_names_what_is_not_ready(cluster: Cluster) -> None:
    """The Deployment's rollout as ``kubectl rollout status`` judges it, and each pod that is
    not ready with its containers' reasons: here, both replicas made, one pulling its image in
    vain."""
    client = cluster.client
    pod = ObjectRef("v1", "Pod", "podwright-system", "podwright-operator-7d9c-x2x4q")

    def image_cannot_be_pulled() -> None:
        eventually(lambda: client.get(CONFIGURATIONS[1]), timeout=20)
        generation = client.get(OPERATOR)["metadata"]["generation"]
        status = {"observedGeneration": generation, "replicas": 2, "updatedReplicas": 2}
        client.patch_status(OPERATOR, {"status": status}, PatchType.MERGE)
        labels = {"app.kubernetes.io/name": "podwright", "app.kubernetes.io/component": "operator"}
        client.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": labels},
                "spec": {"containers": [{"name": "operator", "image": "ghcr.io/podwright/x:0"}]},
            }
        )
        waiting = {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "x"'}
        container = {
            "name": "operator",
            "ready": False,
            "restartCount": 0,
            "image": "ghcr.io/podwright/x:0",
            "imageID": "",
            "state": {"waiting": waiting},
        }
        pod_status = {"phase": "Pending", "containerStatuses": [container]}
        client.patch_status(pod, {"status": pod_status}, PatchType.MERGE)

    join = in_background(image_cannot_be_pulled)
    result = cluster.install("--timeout", "3s")
    join()
    assert result.exit_code == 5, result.output
    assert result.stderr.splitlines() == [
        "podwright: error: after 3s, still waiting for the operator to be ready:",
        "podwright: error: deployment.apps/podwright-operator: 0 of 2 updated replicas available",
        "podwright: error: pod/podwright-operator-7d9c-x2x4q: Pending, not ready (operator "
        'ImagePullBackOff: Back-off pulling image "x")',
    ]
    assert (
        "waiting: deployment.apps/podwright-operator: 0 of 2 updated replicas available"
    ) in result.stdout.splitlines()


def test_a_ready_operator_whose_ca_is_not_in_the_webhooks_is_not_ready(cluster: Cluster) -> None:
    """Until the operator writes its bundle, the API server cannot call the webhooks and refuses
    every Workload: the installation is not usable yet, and the webhooks without one are
    named."""
    client = cluster.client

    def replicas_ready() -> None:
        eventually(lambda: client.get(CONFIGURATIONS[1]), timeout=20)
        generation = client.get(OPERATOR)["metadata"]["generation"]
        status = {
            "observedGeneration": generation,
            "replicas": 2,
            "updatedReplicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
        }
        client.patch_status(OPERATOR, {"status": status}, PatchType.MERGE)

    join = in_background(replicas_ready)
    result = cluster.install("--timeout", "2s")
    join()
    assert result.exit_code == 5, result.output
    problems = [line.removeprefix("podwright: error: ") for line in result.stderr.splitlines()]
    assert problems == [
        "after 2s, still waiting for the operator to be ready:",
        *(
            f"{kind}.admissionregistration.k8s.io/podwright: webhook {hook}.podwright.dev has no "
            "CA bundle yet (the operator writes its CA's once it serves)"
            for kind, hook in (
                ("mutatingwebhookconfiguration", "workloads"),
                ("validatingwebhookconfiguration", "workloads"),
                ("validatingwebhookconfiguration", "policies"),
            )
        ),
    ]


# uninstall -----------------------------------------------------------------------------------


def workload(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "podwright.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "finalizers": [WORKLOAD_FINALIZER]},
        "spec": {"type": "training", "image": "registry.example/trainer:1"},
    }


def with_workloads(cluster: Cluster, *names: str) -> list[dict[str, Any]]:
    """In an installation, Workloads held by podwright's finalizer, each with a pod it owns held
    by the engine's: as the operator leaves them once it admitted and launched them (here, made
    while the webhook configurations were away: no operator serves them)."""
    client = cluster.client
    for ref in CONFIGURATIONS:
        client.delete(ref)
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    created = []
    for name in names:
        stored = client.create(workload(name, "research"))
        client.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-0",
                    "namespace": "research",
                    "labels": {"app.kubernetes.io/managed-by": "podwright"},
                    "finalizers": [RESOURCE_FINALIZER],
                    "ownerReferences": [
                        {
                            "apiVersion": "podwright.dev/v1alpha1",
                            "kind": "Workload",
                            "name": name,
                            "uid": stored["metadata"]["uid"],
                        }
                    ],
                },
                "spec": {"containers": [{"name": "main", "image": "registry.example/trainer:1"}]},
            }
        )
        created.append(stored)
    for manifest in DEFAULT:
        if manifest["kind"].endswith("WebhookConfiguration"):
            client.apply(manifest, field_manager="podwright-install")
    return created


def gone(client: KubernetesClient, ref: ObjectRef) -> bool:
    try:
        client.get(ref)
    except NotFoundError:
        return True
    return False


def workload_ends(cluster: Cluster, since: int) -> dict[str, dict[str, Any]]:
    """Each Workload's last event since ``since``: a DELETED one carries the object as it went
    (a Workload removed with its CRD goes with its finalizers)."""
    last = {}
    for event in cluster.changes_since(since):
        if event.resource.kind == "Workload":
            last[event.obj["metadata"]["name"]] = {"type": event.type, "object": event.obj}
    return last


def test_uninstall_removes_everything_it_installed(cluster: Cluster) -> None:
    assert cluster.install("--no-wait", "--with-fuse-proxy").exit_code == 0
    result = cluster.uninstall()
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == [
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/podwright deleted",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/podwright deleted",
    ]
    assert lines[2:4] == [
        "deployment.apps/podwright-operator deleted",
        "daemonset.apps/podwright-fuse-proxy deleted",
    ]
    assert (
        lines[-1] == "customresourcedefinition.apiextensions.k8s.io/workloads.podwright.dev deleted"
    )
    for manifest in EVERYTHING:
        assert not cluster.present(manifest), (manifest["kind"], manifest["metadata"]["name"])
    again = cluster.uninstall()
    assert (again.exit_code, again.stdout) == (0, "nothing of podwright's was found\n")


def test_uninstall_finds_the_namespace_podwright_was_installed_in(cluster: Cluster) -> None:
    """Without ``--namespace``, the one the operator's ClusterRoleBinding names."""
    assert cluster.install("--no-wait", "--namespace", "ml-platform").exit_code == 0
    result = cluster.uninstall()
    assert result.exit_code == 0, result.output
    assert "namespace/ml-platform deleted" in result.stdout.splitlines()
    for manifest in install_manifests(InstallSettings(namespace="ml-platform")):
        assert not cluster.present(manifest), (manifest["kind"], manifest["metadata"]["name"])


def test_uninstall_without_an_operator_strands_no_finalizer(cluster: Cluster) -> None:
    """No operator replica is available (the Deployment reports none): the Workloads lose
    podwright's finalizer at once, and so do the pods they own, so the Workloads go before their
    CRD, and the pods after them (the garbage collector), none held."""
    assert cluster.install("--no-wait").exit_code == 0
    workloads = with_workloads(cluster, "resnet", "bert")
    since = cluster.emulator.store.resource_version
    result = cluster.uninstall("--timeout", "10s")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "2 Workloads deleted" in lines
    for name in ("resnet", "bert"):
        assert (
            f"workload.podwright.dev/{name} in research: finalizer podwright.dev/workload removed: "
            "no operator replica is available to finalize it"
        ) in lines
        assert (
            f"pod/{name}-0 in research: finalizer podwright.dev/finalizer removed: its Workload "
            "went without the operator"
        ) in lines
    ends = workload_ends(cluster, since)
    for stored in workloads:
        end = ends[stored["metadata"]["name"]]
        assert end["type"] == "DELETED"
        assert not end["object"]["metadata"].get("finalizers")
    for name in ("resnet", "bert"):
        pod = ObjectRef("v1", "Pod", "research", f"{name}-0")
        eventually(lambda pod=pod: gone(cluster.client, pod))


def test_uninstall_lets_a_running_operator_finalize_the_workloads(cluster: Cluster) -> None:
    assert cluster.install("--no-wait").exit_code == 0
    with_workloads(cluster, "resnet")
    play_operator_ready(cluster.client)
    client = cluster.client
    ref = ObjectRef("podwright.dev/v1alpha1", "Workload", "research", "resnet")

    def operator_finalizes() -> None:
        stored = eventually(
            lambda: (found := client.get(ref))["metadata"].get("deletionTimestamp") and found
        )
        client.patch(
            ref,
            {
                "metadata": {
                    "finalizers": None,
                    "resourceVersion": stored["metadata"]["resourceVersion"],
                }
            },
            PatchType.MERGE,
        )

    join = in_background(operator_finalizes)
    result = cluster.uninstall("--timeout", "20s")
    join()
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "waiting up to 20s while the operator finalizes them" in lines
    assert "the operator finalized every Workload" in lines
    assert not any("finalizer podwright.dev/workload removed" in line for line in lines)
    # Its pod keeps the engine's finalizer: the operator, which finalized the task, removes it.
    pod = client.get(ObjectRef("v1", "Pod", "research", "resnet-0"))
    assert RESOURCE_FINALIZER in pod["metadata"]["finalizers"]


def test_uninstall_removes_the_finalizers_the_operator_left_after_the_timeout(
    cluster: Cluster,
) -> None:
    assert cluster.install("--no-wait").exit_code == 0
    with_workloads(cluster, "resnet")
    play_operator_ready(cluster.client)
    since = cluster.emulator.store.resource_version
    result = cluster.uninstall("--timeout", "1s")
    assert result.exit_code == 0, result.output
    assert (
        "workload.podwright.dev/resnet in research: finalizer podwright.dev/workload removed: the "
        "operator did not finalize it within 1s"
    ) in result.stdout.splitlines()
    end = workload_ends(cluster, since)["resnet"]
    assert end["type"] == "DELETED"
    assert not end["object"]["metadata"].get("finalizers")


def test_uninstall_keeps_what_is_not_podwrights(cluster: Cluster) -> None:
    """A namespace install did not make podwright's (its label gone) stays, podwright's objects
    in it deleted; so does a PriorityClass of one of podwright's names that is not podwright's;
    with --keep-crds, the CRDs stay, and the policies with them."""
    assert cluster.install("--no-wait").exit_code == 0
    client = cluster.client
    client.patch(
        ObjectRef("v1", "Namespace", "", "podwright-system"),
        {"metadata": {"labels": {"app.kubernetes.io/part-of": None}}},
        PatchType.MERGE,
    )
    client.patch(
        ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "", "podwright-high"),
        {"metadata": {"labels": {"app.kubernetes.io/managed-by": None}}},
        PatchType.MERGE,
    )
    result = cluster.uninstall("--keep-crds")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert (
        "namespace/podwright-system kept: it is not podwright's own (no label "
        "app.kubernetes.io/part-of=podwright); podwright's objects in it were deleted"
    ) in lines
    assert (
        "priorityclass.scheduling.k8s.io/podwright-high kept: it is not podwright's "
        "(app.kubernetes.io/managed-by)"
    ) in lines
    assert not any(line.startswith("customresourcedefinition") for line in lines)
    kept = {(m["kind"], m["metadata"]["name"]) for m in DEFAULT if cluster.present(m)}
    assert kept == {
        ("Namespace", "podwright-system"),
        ("PriorityClass", "podwright-high"),
        *(
            ("CustomResourceDefinition", crd["metadata"]["name"])
            for crd in custom_resource_definitions()
        ),
    }


# kubectl --------------------------------------------------------------------------------------


def test_kubectl_applies_the_one_file_server_side_and_uninstall_removes_it(
    cluster: Cluster,
) -> None:
    """``kubectl apply --server-side -f deploy/install.yaml``, as the README says (the Kustomize
    base builds the same objects); ``podwright uninstall`` removes what kubectl applied."""
    applied = cluster.kubectl("apply", "--server-side", "-f", str(DEPLOY / "install.yaml"))
    assert applied.returncode == 0, applied.stderr
    lines = applied.stdout.splitlines()
    assert len(lines) == len(DEFAULT)
    assert all(line.endswith(" serverside-applied") for line in lines), lines
    assert "deployment.apps/podwright-operator serverside-applied" in lines
    for manifest in DEFAULT:
        assert cluster.present(manifest)
    assert cluster.uninstall().exit_code == 0
    for manifest in DEFAULT:
        assert not cluster.present(manifest)
