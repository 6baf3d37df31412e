"""The operator in the cluster, as a platform runs it: Workloads created with the API, run to their
end by ``podwright operator`` replicas (subprocesses of this machine, ``tests/cluster/operators``)
through the node simulator, with nothing of podwright's on the submitter's side.

* a training job and a workspace to Success, and a training job to Failure with its container's
  reason; a PyTorchJob and a Knative Service, whose controllers the test plays (it writes their
  status as the Kubeflow training operator and Knative do);
* the Workload carries the record (history, events, conditions, times), podwright's finalizer
  while its task is active, and a Kubernetes Event for each phase; what the task created is
  owned by the Workload;
* deleting a Workload mid-run aborts its task (the pod stopped, the grace period honoured) and
  the Workload goes once its task is finalized;
* two replicas, the leader killed with SIGKILL at a random point once per soak round (8, or
  ``PODWRIGHT_TEST_SOAK_ROUNDS``): every Workload reaches the phase its pods end in, with one
  resource each and nothing left behind;
* a replica stopped with SIGTERM releases the Lease: the other takes over at once;
* the API server restarting mid-run (the emulator's, with its store kept).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_FINALIZER
from podwright.core.crds import custom_resource_definitions
from podwright.core.install_manifests import operator_cluster_rules, operator_namespace_rules
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType
from podwright.engine.workload_tasks import record_of, task_id_of
from tests.cluster.nodes import RUNS_UNTIL_DELETED, SUCCEEDS, PodDriver, PodOutcome, driving_pods
from tests.cluster.operators import OperatorReplicas, operator_replicas
from tests.cluster.support import EXAMPLES, ROOT, Server, SessionInstalls, podwright_command
from tests.cluster.support import task_id_of as printed_task_id
from tests.cluster.webhooks import WebhookProcess
from tests.k8s_emulator import ApiStore, Emulator
from tests.k8s_emulator.crds import crd_for
from tests.kube.support import eventually, write_kubeconfig
from tests.node_sim.rest import send

TASK_ID_LABEL = "podwright.dev/task-id"
TERMINAL = {"Success", "PermanentFailure", "RetryableFailure", "SystemRetryableFailure", "Aborted"}
SMALL = {"cpuCoreRequest": 0.1, "cpuMemoryRequest": "64Mi", "cpuMemoryLimit": "128Mi"}
PATIENCE = 60.0
INSTALL_NAMESPACE = "podwright-system"
OPERATOR_ACCOUNT = "podwright-operator"


SKIPPED_FROM_THE_INSTALL = {
    "CustomResourceDefinition",  # the session's (SessionInstalls.podwright_crds)
    "PriorityClass",  # the session's (SessionInstalls.priority_classes)
    "Deployment",  # the operators run as processes of this machine
    "MutatingWebhookConfiguration",  # the session's podwright webhook serves admission
    "ValidatingWebhookConfiguration",
}


@pytest.fixture(scope="session")
def operator_install(
    server: Server, installs: SessionInstalls, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """``deploy/install.yaml`` applied as a user applies it (``kubectl apply --server-side``),
    but for what the session provides otherwise; the kubeconfig the operators run with: on a
    real cluster a token of the installed ServiceAccount (so they can do what its RBAC grants
    and nothing else), on the emulator (which authorizes nothing) the session's."""
    installs.podwright_crds()
    documents = [
        document
        for document in yaml.safe_load_all((ROOT / "deploy/install.yaml").read_text())
        if document and document["kind"] not in SKIPPED_FROM_THE_INSTALL
    ]
    try:  # what an apply that failed half-way made is deleted too
        applied = server.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input=yaml.safe_dump_all(documents),
        )
        assert applied.returncode == 0, applied.stderr
        if server.is_real:
            yield service_account_kubeconfig(server, tmp_path_factory.mktemp("operator"))
        else:
            yield server.kubeconfig
    finally:
        deleted = server.kubectl(
            "delete",
            "--ignore-not-found",
            "--wait=false",
            "-f",
            "-",
            input=yaml.safe_dump_all(documents),
        )
        assert deleted.returncode == 0, deleted.stderr


def service_account_kubeconfig(server: Server, directory: Path) -> Path:
    """A kubeconfig of the cluster under test that authenticates as the operator's
    ServiceAccount (``kubectl create token``)."""
    token = server.kubectl(
        "create", "token", OPERATOR_ACCOUNT, "-n", INSTALL_NAMESPACE, "--duration", "2h"
    )
    assert token.returncode == 0, token.stderr
    admin = yaml.safe_load(server.kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin.get("current-context"))[
        "context"
    ]
    cluster = next(c for c in admin["clusters"] if c["name"] == context["cluster"])
    path = directory / "operator-kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": OPERATOR_ACCOUNT, "user": {"token": token.stdout.strip()}}],
                "contexts": [
                    {
                        "name": "operator",
                        "context": {"cluster": cluster["name"], "user": OPERATOR_ACCOUNT},
                    }
                ],
                "current-context": "operator",
            }
        )
    )
    return path


@pytest.fixture
def operators(
    *,
    server: Server,
    namespace: str,
    profile_name: str,
    operator_install: Path,
    webhook: WebhookProcess,
    pods: PodDriver,
    tmp_path: Path,
) -> Iterator[OperatorReplicas]:
    """Operator replicas for the test's namespace, with the session's admission webhooks
    serving (``webhook``: the Workloads are admitted as in a cluster, and another writer, the
    compliance status, writes their status beside the operator)."""
    with operator_replicas(
        server, namespace, tmp_path, profile_name=profile_name, kubeconfig=operator_install
    ) as replicas:
        yield replicas


def example_spec(example: str) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load((EXAMPLES / example).read_text())["spec"]
    return spec  # a Workload object's spec, its type first


def workload(
    namespace: str,
    pods: PodDriver,
    name: str,
    spec: dict[str, Any],
    outcome: PodOutcome | None = SUCCEEDS,
) -> dict[str, Any]:
    """A Workload whose pods run on the simulated nodes and end as ``outcome`` says (None: no
    pods of the test's)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": pods.workload_spec(spec, outcome),
    }


def training(**changes: Any) -> dict[str, Any]:
    spec = {"type": "training", "image": "busybox:1.36", "command": "sleep 1", "compute": SMALL}
    return {**spec, **changes}


def workspace() -> dict[str, Any]:
    """The workspace example, small, with its claims but no git clone or S3 adapter."""
    spec = example_spec("workload-workspace.yaml")
    spec.update(compute=SMALL, restartPolicy="Never")
    spec["storage"] = {"pvc": spec["storage"]["pvc"]}
    return spec


def ref(namespace: str, name: str) -> ObjectRef:
    return ObjectRef(API_VERSION, "Workload", namespace, name)


def get(server: Server, namespace: str, name: str) -> dict[str, Any]:
    return server.client.get(ref(namespace, name))


def finished(server: Server, namespace: str, name: str) -> dict[str, Any]:
    """The Workload once its task is finalized and the Workload released (no finalizer)."""

    def done() -> dict[str, Any] | None:
        obj = get(server, namespace, name)
        record = record_of(obj)
        held = WORKLOAD_FINALIZER in (obj["metadata"].get("finalizers") or [])
        return obj if record is not None and record.finalized and not held else None

    return eventually(done, timeout=PATIENCE)


def objects(server: Server, namespace: str, kind: str, task_id: str, api_version: str = "v1"):
    found, _ = server.client.list_objects(
        api_version, kind, namespace=namespace, label_selector=f"{TASK_ID_LABEL}={task_id}"
    )
    return found


def test_a_training_workload_runs_to_success_with_its_record_and_events(
    server: Server, namespace: str, pods: PodDriver, operators: OperatorReplicas
) -> None:
    operators.start("a")
    server.client.create(workload(namespace, pods, "train", training()))
    held = eventually(lambda: _holding(get(server, namespace, "train")), timeout=PATIENCE)
    task_id = task_id_of(held)
    (job,) = eventually(lambda: objects(server, namespace, "Job", task_id, "batch/v1"))
    owner = job["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "Workload",
        "train",
        held["metadata"]["uid"],
    )
    done = finished(server, namespace, "train")
    status = done["status"]
    assert status["phase"] == "Success", status
    phases = [entry["phase"] for entry in status["task"]["history"]]
    assert (phases[0], phases[-1]) == ("Queued", "Success"), phases
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions.items() >= {"Launched": "True", "Ready": "False", "Finished": "True"}.items()
    assert status["startTime"] <= status["completionTime"]
    # Finalized: podwright's finalizer is gone, so deleting the Workload is immediate.
    assert WORKLOAD_FINALIZER not in (done["metadata"].get("finalizers") or [])
    events, _ = server.client.list_objects("events.k8s.io/v1", "Event", namespace=namespace)
    reasons = [
        e["reason"]
        for e in events
        if e.get("regarding", {}).get("kind") == "Workload" and e["regarding"]["name"] == "train"
    ]
    # A Workload that goes well is told in its status alone: no Event of its own.
    assert reasons == [], reasons


def test_a_workspace_runs_to_success(
    server: Server, namespace: str, pods: PodDriver, operators: OperatorReplicas
) -> None:
    operators.start("a")
    server.client.create(workload(namespace, pods, "notebook", workspace()))
    done = finished(server, namespace, "notebook")
    assert done["status"]["phase"] == "Success", done["status"]


@pytest.mark.parametrize(
    ("outcome", "ending"),
    [
        pytest.param(
            PodOutcome(exit_code=3), "[main] terminated with exit code 3, reason Error", id="exit"
        ),
        pytest.param(
            PodOutcome(oom_killed=True),
            "[main] terminated with exit code 137, reason OOMKilled",
            id="oom-killed",
        ),
    ],
)
def test_a_failing_workspace_ends_with_the_reason_its_container_gives(
    *,
    server: Server,
    namespace: str,
    pods: PodDriver,
    operators: OperatorReplicas,
    outcome: PodOutcome,
    ending: str,
) -> None:
    operators.start("a")
    server.client.create(workload(namespace, pods, "fails", workspace(), outcome))
    status = finished(server, namespace, "fails")["status"]
    assert status["phase"] == "RetryableFailure", status
    said = [status["message"]] + [
        f"{entry['reason']} {entry.get('errorMessage', '')}" for entry in status["task"]["history"]
    ]
    assert any(ending in line for line in said), said


def test_a_failing_training_job_ends_with_its_jobs_reason(
    server: Server, namespace: str, pods: PodDriver, operators: OperatorReplicas
) -> None:
    operators.start("a")
    failing = PodOutcome(exit_code=3)
    server.client.create(workload(namespace, pods, "fails", training(backoffLimit=0), failing))
    status = finished(server, namespace, "fails")["status"]
    assert (status["phase"], status["reason"]) == ("RetryableFailure", "BackoffLimitExceeded")


def test_deleting_a_workload_mid_run_aborts_its_task_and_then_lets_it_go(
    server: Server, namespace: str, pods: PodDriver, operators: OperatorReplicas
) -> None:
    operators.start("a")
    server.client.create(workload(namespace, pods, "long", training(), RUNS_UNTIL_DELETED))
    running = eventually(
        lambda: _in_phase(get(server, namespace, "long"), "Running"), timeout=PATIENCE
    )
    task_id = task_id_of(running)
    server.client.delete(ref(namespace, "long"))
    # The Workload stays (its finalizer) while the task is aborted, then goes.
    eventually(lambda: not _exists(server, namespace, "long"), timeout=PATIENCE)
    eventually(lambda: not objects(server, namespace, "Pod", task_id), timeout=PATIENCE)
    eventually(lambda: not objects(server, namespace, "Job", task_id, "batch/v1"), timeout=PATIENCE)


def test_a_stopped_leader_hands_over_at_once_and_its_successor_carries_on(
    server: Server, namespace: str, pods: PodDriver, operators: OperatorReplicas
) -> None:
    # A lease of 30 s: without the release, "b" would wait that long to take over.
    slow = ("--lease-duration", "30s", "--renew-deadline", "20s", "--retry-period", "500ms")
    first = operators.start("a", *slow)
    assert operators.leader() is first
    operators.start("b", *slow)
    server.client.create(workload(namespace, pods, "handover", training(), RUNS_UNTIL_DELETED))
    running = eventually(
        lambda: _in_phase(get(server, namespace, "handover"), "Running"), timeout=PATIENCE
    )
    assert operators.stop(first) == 0, first.log
    # Released on SIGTERM: "b" takes over long before a lease duration of silence.
    eventually(lambda: operators.holder() == "b", timeout=15)
    # The successor carries the task on: deleting the Workload aborts it, then lets it go.
    server.client.delete(ref(namespace, "handover"))
    eventually(lambda: not _exists(server, namespace, "handover"), timeout=PATIENCE)
    assert not objects(server, namespace, "Job", task_id_of(running), "batch/v1")


def test_killing_the_leader_at_random_points_loses_and_duplicates_nothing(
    server: Server, namespace: str, pods: PodDriver, operators: OperatorReplicas, soak_rounds: int
) -> None:
    """A soak of ``soak_rounds`` rounds (``PODWRIGHT_TEST_SOAK_ROUNDS``): every fourth
    Workload's pod fails."""
    rng = random.Random(19)
    names: dict[str, str] = {}
    replicas = [operators.start("r0"), operators.start("r1")]
    for round_number in range(soak_rounds):
        name = f"w{round_number}"
        fails = round_number % 4 == 3
        outcome = (
            PodOutcome(exit_code=3, run_seconds=rng.uniform(0.2, 1.5))
            if fails
            else (PodOutcome(run_seconds=rng.uniform(0.2, 1.5)))
        )
        server.client.create(workload(namespace, pods, name, training(backoffLimit=0), outcome))
        names[name] = "RetryableFailure" if fails else "Success"
        leader = operators.leader()
        time.sleep(rng.uniform(0.0, 1.5))  # a random point of the leader's work
        operators.kill(leader)
        replacement = operators.start(f"r{round_number + 2}")
        replicas = [r for r in replicas if r is not leader] + [replacement]
    for name, phase in names.items():
        done = finished(server, namespace, name)
        assert done["status"]["phase"] == phase, (name, done["status"])
        task_id = task_id_of(done)
        jobs = objects(server, namespace, "Job", task_id, "batch/v1")
        assert len(jobs) <= 1, (name, jobs)
    # One task each, one history each: no phase went back, none was written twice.
    for name in names:
        history = get(server, namespace, name)["status"]["task"]["history"]
        keys = [(entry["phase"], entry["version"]) for entry in history]
        assert len(keys) == len(set(keys)), (name, history)
    # Nothing leaks: with the Workloads deleted, nothing of their tasks is left.
    for name in names:
        server.client.delete(ref(namespace, name))
    eventually(lambda: not operators.workloads(), timeout=PATIENCE)
    for kind, api_version in (("Job", "batch/v1"), ("Pod", "v1")):
        eventually(
            lambda kind=kind, api_version=api_version: (
                not server.client.list_objects(
                    api_version, kind, namespace=namespace, label_selector=TASK_ID_LABEL
                )[0]
            ),
            timeout=PATIENCE,
        )


def _holding(obj: dict[str, Any]) -> dict[str, Any] | None:
    task = (obj.get("status") or {}).get("task")
    held = WORKLOAD_FINALIZER in (obj["metadata"].get("finalizers") or [])
    return obj if task and held else None


def _in_phase(obj: dict[str, Any], phase: str) -> dict[str, Any] | None:
    return obj if (obj.get("status") or {}).get("phase") == phase else None


def _exists(server: Server, namespace: str, name: str) -> bool:
    try:
        get(server, namespace, name)
    except NotFoundError:
        return False
    return True


def test_the_operator_carries_on_across_an_api_server_restart(
    tmp_path: Path, profile: Path
) -> None:
    """The emulator's API server stopped mid-run (every connection dropped, every watch with
    it) and started again on its port with its store: the operator's watches re-list, and the
    Workloads created before, during and after end as their pods do. (A real API server cannot
    be restarted by a test: this runs on the emulator alone.)"""
    store = ApiStore()
    first = Emulator(store).start()
    port = int(first.url.rsplit(":", 1)[1])
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", first.url)
    client = KubernetesClient(connect(str(kubeconfig)))
    api_client = connect(str(kubeconfig))
    server = Server(kubeconfig, first, client, api_client, tmp_path / "kubectl-cache")
    emulator = first
    try:
        for crd in custom_resource_definitions():
            client.create(crd)
        SessionInstalls(server, tmp_path).priority_classes(profile)
        data = yaml.safe_load(profile.read_text())
        client.create(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterProfile",
                "metadata": {"name": "tests"},
                "spec": data["spec"],
            }
        )
        namespace = "restart"
        for name in (namespace, INSTALL_NAMESPACE):
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        with (
            driving_pods(server, namespace) as pods,
            operator_replicas(server, namespace, tmp_path, profile_name="tests") as operators,
        ):
            operators.start("a")
            client.create(
                workload(namespace, pods, "before", training(), PodOutcome(run_seconds=1))
            )
            eventually(lambda: _in_phase(get(server, namespace, "before"), "Running"))
            emulator.stop()
            emulator = Emulator(store, port=port).start()
            client.create(workload(namespace, pods, "after", training()))
            for name in ("before", "after"):
                assert finished(server, namespace, name)["status"]["phase"] == "Success"
    finally:
        emulator.stop()
        client.close()
        api_client.close()


def test_a_workload_submitted_with_run_detach_runs_to_success_with_nothing_on_the_submitters_side(
    server: Server, namespace: str, pods: PodDriver, operators: OperatorReplicas, tmp_path: Path
) -> None:
    operators.start("a")
    spec = pods.workload_spec(training())
    workload_type = spec.pop("type")
    path = tmp_path / "train.yaml"
    document = {"type": workload_type, "name": "detached", "spec": spec}
    path.write_text(yaml.safe_dump(document))
    cluster = ("--backend", "operator", "--kubeconfig", str(server.kubeconfig))
    cluster = (*cluster, "--namespace", namespace)
    submitted = podwright_command(
        "run", "--workload", str(path), *cluster, "--detach", "--home", str(tmp_path), cwd=ROOT
    )
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    task_id = printed_task_id(submitted.stdout)
    # The command has returned: no podwright process of the submitter's follows the Workload.
    done = finished(server, namespace, "detached")
    assert done["status"]["phase"] == "Success"
    assert task_id_of(done) == task_id
    shown = podwright_command("status", task_id, *cluster, "--home", str(tmp_path), cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    assert "Success" in shown.stdout, shown.stdout


ANYONE_MAY = {
    ("authorization.k8s.io", "selfsubjectaccessreviews", "create", "*"),
    ("authorization.k8s.io", "selfsubjectrulesreviews", "create", "*"),
    ("authentication.k8s.io", "selfsubjectreviews", "create", "*"),
}
"""What every authenticated user may do (the ``system:basic-user`` ClusterRole)."""


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """RBAC rules as (group, resource, verb, name) grants (``*``: any name)."""
    return {
        (group, resource, verb, name)
        for rule in rules
        for group in rule.get("apiGroups") or [""]
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
        for name in rule.get("resourceNames") or ["*"]
    }


@pytest.mark.parametrize(
    "server", [pytest.param("cluster", marks=pytest.mark.cluster)], indirect=True
)  # the emulator authorizes every request: RBAC is a real API server's
def test_the_operators_service_account_may_do_what_it_needs_and_nothing_else(
    server: Server, namespace: str, operator_install: Path
) -> None:
    """What the installed ServiceAccount may do, as the API server's authorizer lists it for the
    account itself (SelfSubjectRulesReview, in a Workload's namespace and in its own), is
    exactly the operator's ClusterRole and Role of ``deploy/``, and what any user may."""
    api = connect(str(operator_install))
    try:
        for where, expected_rules in (
            (namespace, operator_cluster_rules()),
            (INSTALL_NAMESPACE, operator_cluster_rules() + operator_namespace_rules()),
        ):
            review = send(
                api,
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SelfSubjectRulesReview",
                    "spec": {"namespace": where},
                },
            )
            status = review.body["status"]
            assert not status.get("incomplete"), status
            assert granted(status["resourceRules"]) - ANYONE_MAY == granted(expected_rules), where
    finally:
        api.close()


def condition(kind: str, reason: str) -> dict[str, str]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": f"{kind} (written by the test, as the controller would)",
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }


def play_the_controller(
    *,
    server: Server,
    namespace: str,
    workload_name: str,
    api_version: str,
    kind: str,
    conditions: list[dict[str, str]],
) -> str:
    """Write the status conditions of the Workload's resource as its controller (the Kubeflow
    training operator, Knative) would, once the operator has created it; the task id."""
    held = eventually(lambda: _holding(get(server, namespace, workload_name)), timeout=PATIENCE)
    task_id = task_id_of(held)
    try:
        (resource,) = eventually(
            lambda: objects(server, namespace, kind, task_id, api_version), timeout=PATIENCE
        )
    except AssertionError as error:
        status = get(server, namespace, workload_name).get("status")
        raise AssertionError(f"no {kind} of task {task_id}: {status}") from error
    ref = ObjectRef(api_version, kind, namespace, resource["metadata"]["name"])
    status = {"conditions": conditions}
    if "generation" in resource["metadata"]:
        status["observedGeneration"] = resource["metadata"]["generation"]
    server.client.patch_status(ref, {"status": status}, PatchType.MERGE)
    return task_id


def test_a_distributed_workload_runs_to_success_as_its_training_operator_reports(
    server: Server,
    namespace: str,
    installs: SessionInstalls,
    pods: PodDriver,
    operators: OperatorReplicas,
) -> None:
    installs.crd(crd_for("kubeflow.org/v1", "PyTorchJob"))
    operators.start("a")
    spec = example_spec("workload-distributed-pytorch.yaml")
    server.client.create(workload(namespace, pods, "ddp", spec, outcome=None))
    play_the_controller(
        server=server,
        namespace=namespace,
        workload_name="ddp",
        api_version="kubeflow.org/v1",
        kind="PyTorchJob",
        conditions=[
            condition("Created", "PyTorchJobCreated"),
            condition("Running", "PyTorchJobRunning"),
            condition("Succeeded", "PyTorchJobSucceeded"),
        ],
    )
    assert finished(server, namespace, "ddp")["status"]["phase"] == "Success"


def test_an_inference_workload_serves_until_it_is_deleted(
    server: Server,
    namespace: str,
    installs: SessionInstalls,
    pods: PodDriver,
    operators: OperatorReplicas,
) -> None:
    installs.crd(crd_for("serving.knative.dev/v1", "Service"))
    operators.start("a")
    spec = example_spec("workload-inference.yaml")
    spec.pop("storage")  # its claim names a model store no test cluster has
    server.client.create(workload(namespace, pods, "serve", spec, outcome=None))
    task_id = play_the_controller(
        server=server,
        namespace=namespace,
        workload_name="serve",
        api_version="serving.knative.dev/v1",
        kind="Service",
        conditions=[condition("ConfigurationsReady", "Ready"), condition("Ready", "Ready")],
    )
    eventually(lambda: _in_phase(get(server, namespace, "serve"), "Running"), timeout=PATIENCE)
    server.client.delete(ref(namespace, "serve"))
    eventually(lambda: not _exists(server, namespace, "serve"), timeout=PATIENCE)
    assert not objects(server, namespace, "Service", task_id, "serving.knative.dev/v1")
