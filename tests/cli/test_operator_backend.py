"""``--backend operator``: ``run`` creates a Workload and follows it, and ``status``, ``list``,
``logs``, ``abort`` and ``delete`` read and write Workloads, against the API-server emulator with
podwright's CRDs.

No operator runs: a test plays it, writing the Workload's status as the operator writes it
(``podwright.engine.workload_tasks``) from a thread that learns of the Workload from a watch, so
nothing waits on a clock. The admission webhook's refusal comes from a validating webhook served
by this process (tests/webhook_server.py), which the emulator calls as an API server does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.api import backends
from podwright.api.errors import InvalidInputError
from podwright.api.operator_tasks import WorkloadTasks, operator_target
from podwright.cli.main import cli
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND
from podwright.core.crds import custom_resource_definitions
from podwright.core.lifecycle.phases import (
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    ReasonInfo,
)
from podwright.engine.config import LifecycleConfig
from podwright.engine.executor import resource_ref
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType
from podwright.engine.plugins import default_plugins
from podwright.engine.workload_tasks import (
    ABORT_ANNOTATION,
    advanced_workload,
    finalized_patch,
    new_task,
    record_of,
    submitted_workload,
    task_id_of,
    with_finalizer_patch,
)
from tests.k8s_emulator import Emulator, Fault
from tests.kube.support import pod, write_kubeconfig
from tests.webhook_server import Review, WebhookServer

NAMESPACE = "vision"
ELAPSED = re.compile(r"^\s*-?\d+\.\ds  ")


def now() -> datetime:
    return datetime.now(UTC)


@dataclasses.dataclass
class Cluster:
    emulator: Emulator
    client: KubernetesClient
    kubeconfig: str

    def podwright(self, *args: str) -> Result:
        """A command with ``--backend operator`` against the emulator."""
        return CliRunner().invoke(
            cli, [*args, "--backend", "operator", "--kubeconfig", self.kubeconfig]
        )

    def workload(self, name: str) -> dict[str, Any]:
        return self.client.get(ref(name))

    def version(self) -> str:
        """The resourceVersion to watch the namespace's Workloads from."""
        _items, version = self.client.list_objects(API_VERSION, WORKLOAD_KIND, namespace=NAMESPACE)
        return version

    def next_change(
        self, name: str, since: str, done: Callable[[str, dict[str, Any]], bool]
    ) -> dict[str, Any]:
        """The first change of the Workload ``name`` after ``since`` that is ``done``."""
        events = self.client.watch(
            API_VERSION,
            WORKLOAD_KIND,
            resource_version=since,
            namespace=NAMESPACE,
            field_selector=f"metadata.name={name}",
            timeout_seconds=60,
        )
        with contextlib.closing(events):
            for event in events:
                if event["type"] != "BOOKMARK" and done(event["type"], event["object"]):
                    return dict(event["object"])
        raise AssertionError(f"Workload {name} did not change as expected within a minute")

    # Playing the operator -----------------------------------------------------------------

    def take(self, name: str, manifests: list[dict[str, Any]]) -> dict[str, Any]:
        """Hold the Workload with podwright's finalizer and record its task (revision 1)."""
        workload = self.workload(name)
        held = self.client.patch(ref(name), with_finalizer_patch(workload), PatchType.MERGE)
        task = new_task(held, manifests, now())
        return self.client.replace_status(ref(name), submitted_workload(held, task, now()))

    def advance(self, name: str, info: PhaseInfo) -> dict[str, Any]:
        workload = self.workload(name)
        record = record_of(workload)
        assert record is not None
        body = advanced_workload(workload, record, record.plugin_state, info, now()).workload
        return self.client.replace_status(ref(name), body)

    def finish(self, name: str) -> None:
        """Record the task finalized and let the Workload go, as the operator does: one patch."""
        workload = self.workload(name)
        record = record_of(workload)
        assert record is not None
        self.client.patch(ref(name), finalized_patch(workload, record.task_id), PatchType.MERGE)

    def primary_pod(self, name: str) -> str:
        """Create the pod of the Workload's task (a Pod manifest), as the operator would; its
        name."""
        record = record_of(self.workload(name))
        assert record is not None
        pod_name = resource_ref(record, default_plugins(), LifecycleConfig()).name
        self.client.create(pod(pod_name, NAMESPACE))
        return pod_name


def ref(name: str) -> ObjectRef:
    return ObjectRef(API_VERSION, WORKLOAD_KIND, NAMESPACE, name)


def pod_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1"}]},
    }


def log_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """An emulator with podwright's Workload CRD and a namespace ``vision``."""
    with Emulator() as emulator:
        kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", emulator.url))
        client = KubernetesClient(connect(kubeconfig))
        try:
            for crd in custom_resource_definitions():
                if crd["spec"]["names"]["kind"] == WORKLOAD_KIND:
                    client.apply(crd, field_manager="test")
            client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            )
            yield Cluster(emulator, client, kubeconfig)
        finally:
            client.close()


def workload_file(tmp_path: Path, name: str = "hello") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"apiVersion: podwright.dev/v1alpha1\nkind: Workload\nmetadata: {{name: {name}}}\n"
        "spec:\n  type: training\n  image: busybox:1\n"
        "  command: python train.py\n  compute:\n    gpuDevicesRequest: 1\n"
    )
    return str(path)


@contextlib.contextmanager
def playing(operator: Callable[[], None]) -> Iterator[None]:
    """``operator`` on a thread of its own; its failure fails the test once the block ends."""
    failure: list[BaseException] = []

    def play() -> None:
        try:
            operator()
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=play, name="operator", daemon=True)
    thread.start()
    yield
    thread.join(timeout=60)
    assert not thread.is_alive(), "the operator's thread did not end"
    if failure:
        raise failure[0]


def submitted(cluster: Cluster, tmp_path: Path, name: str = "hello") -> str:
    """Run --detach: the Workload is created; its task id."""
    result = cluster.podwright(
        "run", "--workload", workload_file(tmp_path, name), "--namespace", NAMESPACE, "--detach"
    )
    assert result.exit_code == 0, result.output
    found = re.search(r"^task (\S+): ", result.stdout, re.MULTILINE)
    assert found is not None, result.stdout
    return found.group(1)


def shown(output: str) -> list[str]:
    """The lines of a follower's output without their elapsed times."""
    return [ELAPSED.sub("", line) for line in output.splitlines()]


# run ---------------------------------------------------------------------------------------------


def test_run_detach_creates_the_workload_and_says_how_to_follow_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    task_id = submitted(cluster, tmp_path)
    workload = cluster.workload("hello")
    assert task_id == task_id_of(workload)
    assert re.fullmatch(r"hello-[0-9a-f]{8}", task_id)
    assert workload["metadata"]["namespace"] == NAMESPACE
    assert workload["spec"] == {
        "type": "training",
        "image": "busybox:1",
        "command": "python train.py",
        "compute": {"gpuDevicesRequest": 1},
    }
    again = f" --backend operator -n {NAMESPACE} --kubeconfig {cluster.kubeconfig}"
    result = cluster.podwright("status", task_id, "-n", NAMESPACE)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:4] == [
        f"task:      {task_id}",
        f"workload:  hello (training), namespace {NAMESPACE}",
        "backend:   operator/emu",
        "phase:     Undefined (waiting for the operator)",
    ]
    detached = CliRunner().invoke(
        cli,
        [
            "run", "--workload", workload_file(tmp_path, "second"), "--namespace", NAMESPACE,
            "--detach", "--backend", "operator", "--kubeconfig", cluster.kubeconfig,
        ],
    )  # fmt: skip
    second = task_id_of(cluster.workload("second"))
    assert detached.stdout.splitlines() == [
        f"task {second}: training workload 'second', cluster emu (operator)",
        f"task {second} left to the operator (Workload {NAMESPACE}/second)",
        f"  follow it: podwright status {second}{again}; podwright logs {second} -f{again}",
    ]


@pytest.mark.parametrize(
    ("end", "code"),
    [(Phase.SUCCESS, 0), (Phase.PERMANENT_FAILURE, 3), (Phase.ABORTED, 4)],
    ids=["success", "failure", "aborted"],
)
def test_run_follows_the_workload_until_the_operator_finalized_its_task(
    cluster: Cluster, tmp_path: Path, end: Phase, code: int
) -> None:
    since = cluster.version()

    def operator() -> None:
        cluster.next_change("hello", since, lambda kind, _obj: kind == "ADDED")
        cluster.take("hello", [pod_manifest("hello")])
        pod_name = cluster.primary_pod("hello")
        start = now() - timedelta(seconds=10)
        pulled = ReasonInfo("Pulled: image busybox:1", start)
        running = PhaseInfo(
            Phase.RUNNING, 1, "started", occurred_at=start, additional_reasons=(pulled,)
        )
        cluster.advance("hello", running)
        at = log_time(start + timedelta(seconds=2))
        cluster.emulator.write_log(NAMESPACE, pod_name, "main", "epoch 1", at)
        error = ExecutionError("Error", "exit code 1", ErrorKind.USER) if end.is_failure else None
        ended = PhaseInfo(end, 2, "over", error, occurred_at=start + timedelta(seconds=4))
        cluster.advance("hello", ended)
        cluster.finish("hello")

    with playing(operator):
        result = cluster.podwright(
            "run", "--workload", workload_file(tmp_path), "--namespace", NAMESPACE
        )
    assert result.exit_code == code, result.output
    task_id = task_id_of(cluster.workload("hello"))
    assert shown(result.stdout) == [
        f"task {task_id}: training workload 'hello', cluster emu (operator)",
        "Running  started",
        "event: Pulled: image busybox:1",
        "  | epoch 1",
        f"{end.value}  {'exit code 1' if end.is_failure else 'over'}",
    ]
    # The operator let it go: the Workload stays, its task finalized.
    record = record_of(cluster.workload("hello"))
    assert record is not None
    assert record.finalized


def test_ctrl_c_stops_following_and_the_workload_goes_on(cluster: Cluster, tmp_path: Path) -> None:
    since = cluster.version()

    def operator() -> None:
        cluster.next_change("hello", since, lambda kind, _obj: kind == "ADDED")
        cluster.take("hello", [pod_manifest("hello")])
        cluster.advance("hello", PhaseInfo(Phase.RUNNING, 1, "started", occurred_at=now()))
        os.kill(os.getpid(), signal.SIGINT)  # run's handler notes it; the follower detaches

    late: list[int] = []  # a SIGINT after run restored this handler would land here
    previous = signal.signal(signal.SIGINT, lambda number, _frame: late.append(number))
    try:
        with playing(operator):
            result = cluster.podwright(
                "run", "--workload", workload_file(tmp_path), "--namespace", NAMESPACE
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (result.exit_code, late) == (0, []), result.output
    task_id = task_id_of(cluster.workload("hello"))
    again = f" --backend operator -n {NAMESPACE} --kubeconfig {cluster.kubeconfig}"
    assert result.stderr.splitlines()[-1] == (
        f"detached: task {task_id} goes on with the operator (Workload {NAMESPACE}/hello); "
        f"podwright status {task_id}{again}; podwright logs {task_id} -f{again}"
    )
    record = record_of(cluster.workload("hello"))
    assert record is not None
    assert (record.phase, record.abort_requested) == (Phase.RUNNING, False)


def refusing(message: str) -> Callable[[Review], Review]:
    def answer(_request: Review) -> Review:
        return {
            "allowed": False,
            "status": {"code": 403, "reason": "Forbidden", "message": message},
        }

    return answer


def validating_webhook(server: WebhookServer) -> dict[str, object]:
    """A ValidatingWebhookConfiguration sending Workloads' creates to ``server``."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "podwright"},
        "webhooks": [
            {
                "name": "workloads.podwright.dev",
                "clientConfig": {"url": server.url("/validate"), "caBundle": server.ca_bundle},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": ["podwright.dev"],
                        "apiVersions": ["v1alpha1"],
                        "resources": ["workloads"],
                        "scope": "Namespaced",
                    }
                ],
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }
        ],
    }


def test_a_refusal_of_the_admission_webhook_lists_every_issue_and_exits_1(
    cluster: Cluster, tmp_path: Path
) -> None:
    issues = [
        "spec.image: a value is required, and neither the submission nor the policy gives one "
        "(rule required, policy 'limits' of project vision)",
        "spec.compute.gpuDevicesRequest: 4 (submission) is above the maximum 2; ask for less "
        "(rule max, policy 'limits' of project vision)",
    ]
    message = "2 compliance issues with the policies of project vision: " + "; ".join(issues)
    with WebhookServer({"/validate": refusing(message)}) as server:
        cluster.client.create(validating_webhook(server))
        result = cluster.podwright(
            "run", "--workload", workload_file(tmp_path), "--namespace", NAMESPACE
        )
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        *(f"podwright: violation: {issue}" for issue in issues),
        "podwright: 2 violations of the policies of project vision: the cluster's admission "
        f"webhook refused Workload {NAMESPACE}/hello; nothing was created",
    ]
    with pytest.raises(NotFoundError):
        cluster.workload("hello")


def test_a_forbidden_create_that_is_no_webhook_refusal_exits_5(
    cluster: Cluster, tmp_path: Path
) -> None:
    cluster.emulator.inject(Fault(403, method="POST", path="/workloads$", reason="Forbidden"))
    result = cluster.podwright(
        "run", "--workload", workload_file(tmp_path), "--namespace", NAMESPACE
    )
    assert result.exit_code == 5, result.output
    assert result.stderr == (
        f"podwright: error: cluster emu refused Workload {NAMESPACE}/hello: injected fault 403\n"
    )


def test_a_workload_of_that_name_is_bad_input(cluster: Cluster, tmp_path: Path) -> None:
    submitted(cluster, tmp_path)
    result = cluster.podwright(
        "run", "--workload", workload_file(tmp_path), "--namespace", NAMESPACE
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"podwright: error: Workload {NAMESPACE}/hello exists already: give the workload another "
        f"name with --name, or delete it (podwright delete hello --backend operator -n {NAMESPACE} "
        f"--kubeconfig {cluster.kubeconfig})\n"
    )


def test_a_context_the_kubeconfig_lacks_is_bad_input(cluster: Cluster, tmp_path: Path) -> None:
    result = cluster.podwright("run", "--workload", workload_file(tmp_path), "--context", "nope")
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"podwright: error: --context nope: --kubeconfig {cluster.kubeconfig} has no such "
        "context (it has: emu)\n"
    )


def _with_context_namespace(cluster: Cluster, tmp_path: Path, namespace: str) -> str:
    """A copy of the cluster's kubeconfig whose context names ``namespace``, as ``kubectl config
    set-context --current --namespace`` writes it."""
    config = json.loads(Path(cluster.kubeconfig).read_text())
    config["contexts"][0]["context"]["namespace"] = namespace
    path = tmp_path / "kubeconfig-with-namespace"
    path.write_text(json.dumps(config))
    return str(path)


def test_without_namespace_the_contexts_namespace_is_used_as_kubectl_does(
    cluster: Cluster, tmp_path: Path
) -> None:
    kubeconfig = _with_context_namespace(cluster, tmp_path, NAMESPACE)

    def podwright(*args: str) -> Result:
        return CliRunner().invoke(cli, [*args, "--backend", "operator", "--kubeconfig", kubeconfig])

    result = podwright("run", "--workload", workload_file(tmp_path, "here"), "--detach")
    assert result.exit_code == 0, result.output
    task_id = task_id_of(cluster.workload("here"))
    again = f" --backend operator --kubeconfig {kubeconfig}"  # no -n: the context's is the one
    assert result.stdout.splitlines()[1:] == [
        f"task {task_id} left to the operator (Workload {NAMESPACE}/here)",
        f"  follow it: podwright status {task_id}{again}; podwright logs {task_id} -f{again}",
    ]
    status = podwright("status", task_id)
    assert status.exit_code == 0, status.output
    assert f"workload:  here (training), namespace {NAMESPACE}" in status.stdout
    elsewhere = podwright(
        "run", "--workload", workload_file(tmp_path, "there"), "-n", "default", "--detach"
    )
    assert elsewhere.exit_code == 0, elsewhere.output
    assert " --backend operator -n default --kubeconfig" in elsewhere.stdout


def test_in_a_pod_without_a_kubeconfig_the_pods_namespace_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    namespace_file = tmp_path / "namespace"
    namespace_file.write_text("ml-team\n")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setattr(backends, "SERVICE_ACCOUNT_NAMESPACE", namespace_file)
    assert backends.context_namespace(backends.ClusterAccess()) == "ml-team"
    namespace_file.unlink()
    assert backends.context_namespace(backends.ClusterAccess()) == "default"


def test_a_namespace_that_does_not_exist_is_bad_input(cluster: Cluster, tmp_path: Path) -> None:
    result = cluster.podwright("run", "--workload", workload_file(tmp_path), "--namespace", "nope")
    assert result.exit_code == 2, result.output
    assert (
        result.stderr == "podwright: error: --namespace nope: cluster emu has no such namespace\n"
    )


def test_a_cluster_without_podwrights_crds_is_bad_input(tmp_path: Path) -> None:
    with Emulator() as emulator:
        kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", emulator.url))
        for args in (
            ["run", "--workload", workload_file(tmp_path)],
            ["list"],
        ):
            result = CliRunner().invoke(
                cli, [*args, "--backend", "operator", "--kubeconfig", kubeconfig]
            )
            assert result.exit_code == 2, result.output
            assert result.stderr == (
                "podwright: error: --backend operator: cluster emu does not serve "
                "podwright.dev/v1alpha1 Workloads: install podwright's operator there, or run "
                "with --backend kubernetes\n"
            )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--policy", "examples/policies/cluster-prod.yaml"),
        ("--assets", "examples/assets.yaml"),
        ("--profile", "examples/cluster-profile.yaml"),
        ("--department", "research"),  # the cluster's Namespace says it
        ("--project", "vision"),
    ],
)
def test_policies_assets_and_profiles_of_files_are_refused(
    tmp_path: Path, option: str, value: str
) -> None:
    """The cluster's own apply; nothing is read, and no cluster is needed to say so."""
    result = CliRunner().invoke(
        cli,
        [
            "run", "--workload", workload_file(tmp_path), "--backend", "operator",
            "--namespace", NAMESPACE, option, value, "--kubeconfig", str(tmp_path / "none"),
        ],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"podwright: error: {option}: with --backend operator the cluster's policies, assets and "
        f"profile apply ('podwright policy effective -n {NAMESPACE} --type TYPE' shows its "
        f"policies); leave {option} out\n"
    )


def test_a_lifecycle_configuration_is_refused(tmp_path: Path) -> None:
    (tmp_path / "lifecycle.yaml").write_text("injectFinalizer: true\n")
    result = CliRunner().invoke(
        cli,
        [
            "run", "--workload", workload_file(tmp_path), "--backend", "operator",
            "--lifecycle-config", str(tmp_path / "lifecycle.yaml"),
        ],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "--lifecycle-config: with --backend operator the operator's lifecycle" in result.stderr


# The task commands --------------------------------------------------------------------------------


def test_status_and_list_show_the_operators_record(cluster: Cluster, tmp_path: Path) -> None:
    task_id = submitted(cluster, tmp_path)
    cluster.take("hello", [pod_manifest("hello")])
    started = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
    pulled = ReasonInfo("Pulled: image busybox:1", started)
    cluster.advance("hello", PhaseInfo(Phase.QUEUED, 1, "created", occurred_at=started))
    cluster.advance(
        "hello",
        PhaseInfo(
            Phase.RUNNING, 2, "started", occurred_at=started + timedelta(seconds=5),
            additional_reasons=(pulled,),
        ),
    )  # fmt: skip
    for name in (task_id, "hello"):  # a task id, or the Workload's name
        result = cluster.podwright("status", name, "-n", NAMESPACE)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == [
            f"task:      {task_id}",
            f"workload:  hello (training), namespace {NAMESPACE}",
            "backend:   operator/emu",
            "phase:     Running (started)",
            "history:",
            "  12:00:00  Queued  created",
            "  12:00:05  Running  started",
            "events:",
            "  Pulled: image busybox:1",
        ]
    latest = cluster.podwright("status", "-n", NAMESPACE)
    assert latest.stdout.splitlines()[0] == f"task:      {task_id}"

    listed = cluster.podwright("list", "-n", NAMESPACE)
    assert listed.exit_code == 0, listed.output
    header, row = listed.stdout.splitlines()
    assert header.split() == ["ID", "TYPE", "BACKEND", "PHASE", "SUBMITTED", "ACTIVE"]
    assert row.split()[:4] == [task_id, "training", "operator/emu", "Running"]
    assert row.split()[-1] == "yes"
    everywhere = cluster.podwright("list", "--all-namespaces")
    assert everywhere.stdout.splitlines()[1].split()[:2] == [NAMESPACE, task_id]
    assert cluster.podwright("list").stdout == "no Workloads in namespace default of cluster emu\n"


def test_abort_sets_the_annotation_and_the_workload_stays(cluster: Cluster, tmp_path: Path) -> None:
    task_id = submitted(cluster, tmp_path)
    cluster.take("hello", [pod_manifest("hello")])
    cluster.advance("hello", PhaseInfo(Phase.RUNNING, 1, "started", occurred_at=now()))
    result = cluster.podwright("abort", task_id, "-n", NAMESPACE)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"abort requested for task {task_id}: the operator stops it (Workload {NAMESPACE}/hello "
        f"stays; podwright status {task_id} --backend operator -n {NAMESPACE} --kubeconfig "
        f"{cluster.kubeconfig})\n"
    )
    workload = cluster.workload("hello")
    assert ABORT_ANNOTATION in workload["metadata"]["annotations"]
    assert "abort requested" in cluster.podwright("status", task_id, "-n", NAMESPACE).stdout

    cluster.advance("hello", PhaseInfo(Phase.ABORTED, 2, "aborted", occurred_at=now()))
    again = cluster.podwright("abort", "hello", "-n", NAMESPACE)
    assert again.stdout == f"task {task_id} already ended: Aborted\n"


def test_abort_and_delete_act_on_the_workload_read_and_on_no_other_of_its_name(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The task commands read the Workloads, then write: a Workload deleted and made again under
    the same name in between is another task's, and neither its abort nor its deletion
    happens (the uid is the write's precondition)."""
    task_id = submitted(cluster, tmp_path)
    read = [cluster.workload("hello")]
    cluster.client.delete(ref("hello"))
    submitted(cluster, tmp_path)  # a new Workload named hello, another task
    newer = cluster.workload("hello")
    target = operator_target(cluster.kubeconfig, None, NAMESPACE)
    tasks = WorkloadTasks(cluster.client, target, read)
    record = tasks.find(task_id)
    with pytest.raises(
        InvalidInputError, match=f"task {task_id}: Workload {NAMESPACE}/hello is gone"
    ):
        tasks.abort(record)
    assert tasks.delete(record) == (
        f"task {task_id} deleted (Workload {NAMESPACE}/hello was gone already; the Workload of "
        "that name now is another task's, left alone)"
    )
    untouched = cluster.workload("hello")
    assert untouched["metadata"]["uid"] == newer["metadata"]["uid"]
    assert ABORT_ANNOTATION not in (untouched["metadata"].get("annotations") or {})
    assert not untouched["metadata"].get("deletionTimestamp")


def test_delete_deletes_the_workload_and_waits_for_the_operator(
    cluster: Cluster, tmp_path: Path
) -> None:
    task_id = submitted(cluster, tmp_path)
    cluster.take("hello", [pod_manifest("hello")])
    cluster.advance("hello", PhaseInfo(Phase.RUNNING, 1, "started", occurred_at=now()))
    since = cluster.version()

    def operator() -> None:
        cluster.next_change(
            "hello", since, lambda _kind, obj: bool(obj["metadata"].get("deletionTimestamp"))
        )
        cluster.advance("hello", PhaseInfo(Phase.ABORTED, 2, "aborted", occurred_at=now()))
        cluster.finish("hello")

    with playing(operator):
        result = cluster.podwright("delete", task_id, "-n", NAMESPACE, "--wait")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"task {task_id}: Running, Workload {NAMESPACE}/hello deleted: the operator aborts and "
        "finalizes the task, and the Workload goes once it is finalized",
        f"task {task_id}: its Workload is gone",
    ]
    with pytest.raises(NotFoundError):
        cluster.workload("hello")


def test_delete_of_a_finished_task_and_all_finished(cluster: Cluster, tmp_path: Path) -> None:
    first = submitted(cluster, tmp_path, "first")
    second = submitted(cluster, tmp_path, "second")
    for name in ("first", "second"):
        cluster.take(name, [pod_manifest(name)])
        cluster.advance(name, PhaseInfo(Phase.SUCCESS, 1, "done", occurred_at=now()))
        cluster.finish(name)
    result = cluster.podwright("delete", "first", "-n", NAMESPACE)
    assert result.stdout == f"task {first} deleted (Workload {NAMESPACE}/first)\n"
    everything = cluster.podwright("delete", "--all-finished", "-n", NAMESPACE)
    assert everything.stdout == f"task {second} deleted (Workload {NAMESPACE}/second)\n"
    assert cluster.podwright("list", "-n", NAMESPACE).stdout.startswith("no Workloads")


def test_a_workload_that_cannot_be_deleted_is_named_and_the_others_are_deleted(
    cluster: Cluster, tmp_path: Path
) -> None:
    first = submitted(cluster, tmp_path, "first")
    second = submitted(cluster, tmp_path, "second")
    cluster.emulator.inject(
        Fault(403, method="DELETE", path="/workloads/first$", reason="Forbidden")
    )
    result = cluster.podwright("delete", first, second, "-n", NAMESPACE)
    assert result.exit_code == 5, result.output
    assert result.stderr == (
        f"podwright: error: task {first}: cluster emu refused to delete Workload {NAMESPACE}/first: "
        "injected fault 403\n"
    )
    assert result.stdout == f"task {second} deleted (Workload {NAMESPACE}/second)\n"
    assert cluster.workload("first")["metadata"]["name"] == "first"


def test_delete_with_wait_says_which_workload_the_operator_did_not_finalize(
    cluster: Cluster, tmp_path: Path
) -> None:
    task_id = submitted(cluster, tmp_path)
    cluster.take("hello", [pod_manifest("hello")])
    result = cluster.podwright("delete", task_id, "-n", NAMESPACE, "--wait", "--timeout", "1ms")
    assert result.exit_code == 5, result.output
    assert result.stderr == (
        f"podwright: error: task {task_id}: its Workload {NAMESPACE}/hello is still there after "
        f"0.001s: the operator has not finalized it (podwright status {task_id} --backend operator "
        f"-n {NAMESPACE} --kubeconfig {cluster.kubeconfig})\n"
    )
    assert cluster.workload("hello")["metadata"]["deletionTimestamp"]


def test_logs_prints_the_primary_containers_output(cluster: Cluster, tmp_path: Path) -> None:
    task_id = submitted(cluster, tmp_path)
    waiting = cluster.podwright("logs", task_id, "-n", NAMESPACE)
    assert (waiting.exit_code, waiting.stdout) == (0, ""), waiting.output
    assert waiting.stderr == (
        f"podwright: task {task_id} has no output yet: waiting for the operator\n"
    )
    cluster.take("hello", [pod_manifest("hello")])
    pod_name = cluster.primary_pod("hello")
    start = now()
    for offset, line in enumerate(["epoch 1", "epoch 2"]):
        at = log_time(start + timedelta(seconds=offset))
        cluster.emulator.write_log(NAMESPACE, pod_name, "main", line, at)
    result = cluster.podwright("logs", task_id, "-n", NAMESPACE)
    assert (result.exit_code, result.stdout) == (0, "epoch 1\nepoch 2\n"), result.output

    def operator() -> None:
        at = log_time(start + timedelta(seconds=2))
        cluster.emulator.write_log(NAMESPACE, pod_name, "main", "saved", at)
        cluster.advance("hello", PhaseInfo(Phase.SUCCESS, 1, "done", occurred_at=now()))
        cluster.finish("hello")

    # Whether 'logs -f' reads the last line while it follows or once the task is finalized, it
    # prints every line once, and ends when the operator finalized the task.
    with playing(operator):
        followed = cluster.podwright("logs", "hello", "-f", "-n", NAMESPACE)
    assert (followed.exit_code, followed.stdout) == (0, "epoch 1\nepoch 2\nsaved\n"), (
        followed.output
    )


# Bad input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["status", "abort", "logs", "delete"])
def test_an_unknown_id_is_bad_input(cluster: Cluster, command: str) -> None:
    result = cluster.podwright(command, "nope-12345678", "-n", NAMESPACE)
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"podwright: error: no task 'nope-12345678' in namespace {NAMESPACE} of cluster emu: give "
        "a task id or a Workload's name (podwright list --backend operator -n vision "
        f"--kubeconfig {cluster.kubeconfig})\n"
    )


RECORDED = "a task of this machine's store records its own cluster and namespace"


@pytest.mark.parametrize(
    ("args", "flag", "why"),
    [
        (["status", "-n", NAMESPACE], "--namespace", RECORDED),
        (["list", "--all-namespaces"], "--all-namespaces", RECORDED),
        (["abort", "x", "--context", "emu"], "--context", RECORDED),
        (
            ["delete", "x", "--wait"],
            "--wait",
            "a task of this machine's store is deleted once its abort ended",
        ),
    ],
)
def test_the_operators_options_need_backend_operator(
    tmp_path: Path, args: list[str], flag: str, why: str
) -> None:
    result = CliRunner().invoke(cli, [*args, "--home", str(tmp_path / "home")])
    assert result.exit_code == 2, result.output
    assert result.stderr == f"podwright: error: {flag}: goes with --backend operator ({why})\n"


def test_the_executor_runs_no_operator_backend() -> None:
    result = CliRunner().invoke(cli, ["executor", "--backend", "operator"])
    assert result.exit_code == 2
    assert "'operator' is not one of 'local', 'kubernetes'" in result.stderr
