"""``podwright.Client``: the tasks of a backend, driven from Python as a notebook drives them.

On the local backend a real background executor runs each task (every test ends with none left
running, as the ``home`` fixture checks); on the operator's, the API-server emulator holds the
Workloads and the test plays the operator.
"""

from __future__ import annotations

import getpass
import json
import os
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import podwright
from podwright import Client, Phase
from podwright.adapters.kubernetes.workload_store import ABORT_ANNOTATION
from podwright.api.errors import (
    AdmissionDeniedError,
    BackendError,
    InvalidInputError,
    PodwrightError,
    TaskNotFoundError,
)
from podwright.api.state import local_user
from podwright.core.lifecycle.phases import PhaseInfo
from podwright.engine.kubernetes_port import NotFoundError
from podwright.engine.task_store import HistoryEntry
from tests.cli.background import no_executor_left
from tests.cli.test_operator_backend import (
    NAMESPACE,
    Cluster,
    cluster,
    now,
    pod_manifest,
    ref,
    refusing,
    validating_webhook,
    workload_file,
)
from tests.webhook_server import WebhookServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

__all__ = ["cluster"]  # the emulator's fixture, for the operator's tests


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A state directory whose background executors must all have exited by the test's end."""
    path = tmp_path / "home"
    yield path
    no_executor_left(path / "tasks.db")


def training(tmp_path: Path, name: str, command: str, labels: str = "{}") -> podwright.Workload:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        "apiVersion: podwright.dev/v1alpha1\nkind: Workload\n"
        f"metadata: {{name: {name}, labels: {labels}}}\n"
        f"spec:\n  type: training\n  image: busybox:1\n  command: {command}\n"
    )
    return podwright.load(path)


def test_a_task_is_submitted_watched_read_listed_and_deleted(tmp_path: Path, home: Path) -> None:
    workload = training(tmp_path, "hello", "sh -c 'echo one; echo two'", "{team: vision}")
    with Client("local", home=home) as client:
        submitted = client.submit(workload, working_dir=tmp_path)
        task_id = submitted.task_id
        assert task_id.startswith("hello-")
        assert submitted.backend == "local"
        assert submitted.keeper.pid is not None

        changes = list(client.watch(task_id))
        phases = [change.what.phase for change in changes if isinstance(change.what, HistoryEntry)]
        assert phases[-1] is Phase.SUCCESS
        assert [change.at for change in changes] == sorted(change.at for change in changes)
        assert changes[-1].to_data()["kind"] in ("TaskPhase", "TaskEvent")

        status = client.get(task_id)
        assert status.phase is Phase.SUCCESS
        assert status.finalized
        assert client.get().task_id == task_id  # the latest
        data = status.to_data()
        assert (data["kind"], data["id"], data["phase"], data["labels"]) == (
            "Task",
            task_id,
            "Success",
            {"team": "vision"},
        )
        assert submitted.record.task.submitted_by == data["submittedBy"] == local_user()
        assert [entry["phase"] for entry in data["history"]][-1] == "Success"
        # Watching a finalized task from its status: nothing more happens.
        assert list(client.watch(task_id, since=status)) == []

        assert list(client.logs(task_id)) == ["one", "two"]
        assert list(client.logs(task_id, follow=True)) == ["one", "two"]

        assert [record.task_id for record in client.list()] == [task_id]
        assert [record.task_id for record in client.list(phases=["success"])] == [task_id]
        assert client.list(phases=[Phase.RUNNING]) == []
        assert [r.task_id for r in client.list(selector="team in (vision,nlp)")] == [task_id]
        assert client.list(selector="team!=vision") == []
        assert client.list(types=["inference"]) == []
        assert client.list(active=True) == []
        assert client.list_document(client.list())["kind"] == "TaskList"

        [outcome] = client.delete([task_id])
        assert (outcome.task_id, outcome.message, outcome.error) == (
            task_id,
            f"task {task_id} deleted",
            None,
        )
        with pytest.raises(TaskNotFoundError, match=task_id):
            client.get(task_id)


def refusing_getuser(error: Exception) -> Callable[[], str]:
    def getuser() -> str:
        raise error

    return getuser


@pytest.mark.parametrize(
    ("getuser", "user"),
    [
        pytest.param(lambda: "alice", "alice", id="login-name"),
        pytest.param(refusing_getuser(OSError("no login name")), str(os.getuid()), id="oserror"),
        pytest.param(
            refusing_getuser(KeyError("getpwuid(): uid not found: 1000")),
            str(os.getuid()),
            id="not-in-the-password-database",
        ),
    ],
)
def test_who_submits_from_this_machine_is_its_user_else_the_uid(
    monkeypatch: pytest.MonkeyPatch, getuser: Callable[[], str], user: str
) -> None:
    """A container may run under a uid that has no name: the task records the uid."""
    monkeypatch.setattr(getpass, "getuser", getuser)
    assert local_user() == user


def test_watch_list_yields_each_task_that_appears_or_changes(tmp_path: Path, home: Path) -> None:
    with Client("local", home=home) as client:
        before = client.list()
        submitted = client.submit(training(tmp_path, "seen", "echo hi"), working_dir=tmp_path)
        watched = client.watch_list(since=before)
        seen = []
        for record in watched:
            assert record.task_id == submitted.task_id
            seen.append(record.phase)
            if record.finalized:
                break
        watched.close()
        assert seen[-1] is Phase.SUCCESS


def test_abort_stops_a_running_task(tmp_path: Path, home: Path) -> None:
    go = tmp_path / "never"
    command = f"sh -c 'while [ ! -e {go} ]; do sleep 0.05; done'"
    with Client("local", home=home) as client:
        task_id = client.submit(training(tmp_path, "long", command), working_dir=tmp_path).task_id
        changes = client.watch(task_id)
        for change in changes:
            if isinstance(change.what, HistoryEntry) and change.what.phase is Phase.RUNNING:
                break
        changes.close()
        outcome = client.abort(task_id)
        assert outcome.error is None
        assert outcome.message.startswith(f"abort requested for task {task_id}: the executor")
        for _change in client.watch(task_id):
            pass
        assert client.get(task_id).phase is Phase.ABORTED
        assert client.abort(task_id).message == f"task {task_id} already ended: Aborted"
        [deleted] = client.delete([task_id], timeout=timedelta(seconds=30))
        assert deleted.message == f"task {task_id} deleted"


def test_a_prepared_workload_goes_through_its_policies(tmp_path: Path, home: Path) -> None:
    workload = podwright.load(EXAMPLES / "workload-local.yaml")
    prepared = podwright.prepare(
        workload, podwright.load_policies(EXAMPLES / "policies/local-dev.yaml")
    )
    assert prepared.sources  # the policy's defaults filled it in
    with Client("local", home=home) as client:
        with pytest.raises(InvalidInputError, match=r"^name: a prepared workload is named"):
            client.submit(prepared, name="other")
        submitted = client.submit(prepared, working_dir=EXAMPLES.parent)
        assert submitted.record.task.effective == json.loads(json.dumps(prepared.effective))
        assert submitted.record.task.effective != {}
        for _change in client.watch(submitted.task_id):
            pass
        assert client.get(submitted.task_id).finalized
        client.delete([submitted.task_id])


def test_what_the_local_backend_cannot_run_is_refused_before_it_is_recorded(home: Path) -> None:
    with Client("local", home=home) as client:
        with pytest.raises(InvalidInputError, match="renders a PyTorchJob; the local backend runs"):
            client.submit(podwright.load(EXAMPLES / "workload-distributed-pytorch.yaml"))
        assert client.list() == []


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda c: c.list(phases=["Finished"]), InvalidInputError, "'Finished' is not a phase"),
        (lambda c: c.list(types=["batch"]), InvalidInputError, "type 'batch': one of"),
        (lambda c: c.list(selector="team=a b"), InvalidInputError, "label selector 'team=a b'"),
        (lambda c: c.list(sort_by="age"), InvalidInputError, "sort_by 'age': one of submitted"),
        (lambda c: c.get("nope-1"), TaskNotFoundError, "nope-1"),
        (lambda c: c.get(), TaskNotFoundError, "no tasks in"),
        (lambda c: c.abort("nope-1"), TaskNotFoundError, "nope-1"),
        (lambda c: list(c.logs("nope-1")), TaskNotFoundError, "nope-1"),
        (lambda c: list(c.watch("nope-1")), TaskNotFoundError, "nope-1"),
        (lambda c: c.delete(["x"], wait=True), InvalidInputError, "--wait: goes with"),
    ],
    ids=["phase", "type", "selector", "sort", "get", "latest", "abort", "logs", "watch", "wait"],
)
def test_bad_arguments_and_unknown_tasks_are_named(
    home: Path, call: object, error: type[PodwrightError], message: str
) -> None:
    with Client("local", home=home) as client, pytest.raises(error, match=message) as raised:
        call(client)  # type: ignore[operator]
    assert isinstance(raised.value, PodwrightError)


def test_a_client_refuses_what_its_backend_does_not_take(home: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"^backend 'cloud': one of local, kubernetes"):
        Client("cloud", home=home)
    with pytest.raises(InvalidInputError, match=r"^all_namespaces: goes with the operator"):
        Client("local", home=home, all_namespaces=True)
    with pytest.raises(InvalidInputError, match=r"^lifecycle_config: the operator's"):
        Client("operator", lifecycle_config="x.yaml", home=home)


def test_a_store_that_cannot_be_opened_is_a_backend_error(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("a file where the state directory should be")
    with Client("local", home=tmp_path / "home") as client, pytest.raises(BackendError):
        client.list()


# The operator's Workloads ---------------------------------------------------------------------


def test_the_operator_s_tasks_are_workloads(cluster: Cluster, tmp_path: Path) -> None:
    workload = podwright.load(workload_file(tmp_path))
    with Client("operator", kubeconfig=cluster.kubeconfig, namespace=NAMESPACE) as client:
        submitted = client.submit(workload)
        task_id = submitted.task_id
        assert submitted.backend == "operator/emu"
        assert submitted.runner == f"the operator (Workload {NAMESPACE}/hello)"
        assert cluster.workload("hello")["spec"]["type"] == "training"
        pending = client.get("hello")  # by the Workload's name too
        assert (pending.task_id, pending.phase) == (task_id, Phase.UNDEFINED)

        cluster.take("hello", [pod_manifest("hello")])
        record = client.get(task_id).record
        assert [r.task_id for r in client.list()] == [record.task_id]
        assert client.item(record)["backend"] == "operator/emu"

        outcome = client.abort(task_id)
        assert outcome.message.startswith(f"abort requested for task {task_id}: the operator")
        assert ABORT_ANNOTATION in cluster.workload("hello")["metadata"]["annotations"]

        [deleted] = client.delete([task_id])
        assert deleted.error is None
        assert "Workload" in deleted.message
        cluster.finish("hello")
        with pytest.raises(NotFoundError):
            cluster.workload("hello")
        with pytest.raises(TaskNotFoundError, match="no task 'hello'"):
            client.get("hello")


def test_a_refusal_of_the_admission_webhook_is_admission_denied(
    cluster: Cluster, tmp_path: Path
) -> None:
    issue = "spec.image: a value is required (rule required, policy 'limits' of project vision)"
    message = f"1 compliance issue with the policies of project vision: {issue}"
    with WebhookServer({"/validate": refusing(message)}) as server:
        cluster.client.create(validating_webhook(server))
        client = Client("operator", kubeconfig=cluster.kubeconfig, namespace=NAMESPACE)
        with pytest.raises(AdmissionDeniedError) as raised:
            client.submit(podwright.load(workload_file(tmp_path)))
    assert raised.value.issues == (issue,)
    assert raised.value.webhook == "workloads.podwright.dev"
    assert raised.value.summary == (
        "1 violation of the policies of project vision: the cluster's admission webhook "
        f"refused Workload {NAMESPACE}/hello; nothing was created"
    )
    assert str(raised.value) == f"{raised.value.summary}: {issue}"


def test_the_operator_takes_the_workload_as_it_is(cluster: Cluster, tmp_path: Path) -> None:
    workload = podwright.load(workload_file(tmp_path))
    client = Client("operator", kubeconfig=cluster.kubeconfig, namespace=NAMESPACE)
    with pytest.raises(InvalidInputError, match="submit the workload itself"):
        client.submit(podwright.prepare(workload))
    other = Client("operator", kubeconfig=cluster.kubeconfig, namespace="elsewhere")
    named = podwright.load(workload_file(tmp_path), type=None)
    assert named.namespace is None
    with pytest.raises(InvalidInputError, match="--namespace elsewhere: cluster emu has no such"):
        other.submit(named)
    assert client.list() == []


def test_a_workload_goes_to_its_own_namespace_and_is_followed_there(
    cluster: Cluster, tmp_path: Path
) -> None:
    path = tmp_path / "placed.yaml"
    path.write_text(
        "apiVersion: podwright.dev/v1alpha1\nkind: Workload\n"
        f"metadata: {{name: placed, namespace: {NAMESPACE}}}\n"
        "spec:\n  type: training\n  image: busybox:1\n  command: python train.py\n"
    )
    with Client("operator", kubeconfig=cluster.kubeconfig) as client:  # the context's: default
        submitted = client.submit(podwright.load(path))
        assert submitted.record.task.namespace == NAMESPACE
        assert f" -n {NAMESPACE}" in submitted.again
        assert submitted.record.phase is Phase.UNDEFINED
        with client.following(submitted) as following:
            assert following.view.get(submitted.task_id).task_id == submitted.task_id
            cluster.take("placed", [pod_manifest("placed")])
            assert following.logs.read() == []
        assert client.list() == []  # the client reads the context's namespace
        with (
            Client("operator", kubeconfig=cluster.kubeconfig, namespace=NAMESPACE) as there,
            there.following(there.get("placed").record) as again,
        ):
            assert again.view.get(submitted.task_id).revision == 1


def test_watch_from_a_status_yields_what_came_after_it_even_once_finalized(
    cluster: Cluster, tmp_path: Path
) -> None:
    with Client("operator", kubeconfig=cluster.kubeconfig, namespace=NAMESPACE) as client:
        task_id = client.submit(podwright.load(workload_file(tmp_path))).task_id
        cluster.take("hello", [pod_manifest("hello")])
        cluster.advance("hello", PhaseInfo(Phase.RUNNING, 1, "started", occurred_at=now()))
        status = client.get(task_id)
        cluster.advance("hello", PhaseInfo(Phase.SUCCESS, 2, "", occurred_at=now()))
        cluster.finish("hello")
        changes = list(client.watch(task_id, since=status))
    assert [change.what.phase for change in changes if isinstance(change.what, HistoryEntry)] == [
        Phase.SUCCESS
    ]


def test_the_feed_lists_the_workloads_once_and_watches_on_from_that_list(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The console's feed of thousands of Workloads costs one list: its watch goes on from the
    listing's resourceVersion, and misses nothing that came after it."""
    with Client("operator", kubeconfig=cluster.kubeconfig, namespace=NAMESPACE) as client:
        task_id = client.submit(podwright.load(workload_file(tmp_path))).task_id
        cluster.take("hello", [pod_manifest("hello")])
        lists, watches = cluster.emulator.requests("list"), cluster.emulator.requests("watch")
        with client.feed() as feed:
            assert [(r.task_id, r.phase) for r in feed.records()] == [(task_id, Phase.UNDEFINED)]
            cluster.advance("hello", PhaseInfo(Phase.RUNNING, 1, "started", occurred_at=now()))
            deadline = time.monotonic() + 10
            while feed.records()[0].phase is not Phase.RUNNING:
                assert time.monotonic() < deadline, "the feed never showed the change"
                feed.wait(1)
            feed.wait(0)  # the change, when it came before the loop waited for it
            assert feed.wait(0.2) is False  # nothing came since: no need to read it again
            running = feed.records()[0]
            assert feed.records()[0] is running
            cluster.advance("hello", PhaseInfo(Phase.SUCCESS, 2, "", occurred_at=now()))
            assert feed.wait(10) is True
            cluster.finish("hello")
            while not (records := feed.records()) or not records[0].finalized:
                assert time.monotonic() < deadline, "the feed never showed the task finalized"
                feed.wait(1)
            assert records[0].phase is Phase.SUCCESS
            cluster.client.delete(ref("hello"))
            while feed.records():
                assert time.monotonic() < deadline, "the feed still shows a deleted Workload"
                feed.wait(1)
        assert cluster.emulator.requests("list") == lists + 1
        assert cluster.emulator.requests("watch") == watches + 1


def test_the_watched_tasks_read_again_only_the_workloads_that_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A feed of thousands of Workloads is read at every change: only the Workloads the watch
    saw change are converted into tasks again, and those seen gone are left out."""
    from podwright.adapters.kubernetes import KubernetesClient
    from podwright.api import operator_tasks

    def workload(name: str, version: str) -> dict[str, Any]:
        metadata = {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"{name}-0000",
            "resourceVersion": version,
            "creationTimestamp": "2026-11-29T12:00:00Z",
        }
        return {"metadata": metadata, "spec": {"type": "training"}}

    read: list[str] = []
    record = operator_tasks._record

    def counted(store: Any, obj: Any) -> Any:
        read.append(obj["metadata"]["name"])
        return record(store, obj)

    monkeypatch.setattr(operator_tasks, "_record", counted)
    client = KubernetesClient.for_host("http://127.0.0.1:9")  # never asked: no watch started
    seen = [workload(name, "1") for name in ("ada", "bob", "cy")]
    watch = operator_tasks.WorkloadWatch(client, NAMESPACE, seen=seen)
    tasks = operator_tasks.WatchedTasks(watch, client)
    assert [r.task.name for r in tasks.records()] == ["ada", "bob", "cy"]
    assert sorted(read) == ["ada", "bob", "cy"]
    read.clear()
    assert [r.task.name for r in tasks.records()] == ["ada", "bob", "cy"]
    assert read == []
    labelled = workload("bob", "2")
    labelled["metadata"]["labels"] = {"team": "vision"}
    watch.apply("MODIFIED", labelled)
    assert {r.task.name: r.task.labels for r in tasks.records()} == {
        "ada": {},
        "bob": {"team": "vision"},
        "cy": {},
    }
    assert read == ["bob"]
    read.clear()
    watch.apply("DELETED", workload("cy", "3"))
    assert sorted(r.task.name for r in tasks.records()) == ["ada", "bob"]
    assert read == ["cy"]
    client.close()


def test_a_client_of_every_namespace_submits_to_the_contexts(
    cluster: Cluster, tmp_path: Path
) -> None:
    with Client("operator", kubeconfig=cluster.kubeconfig, all_namespaces=True) as client:
        submitted = client.submit(podwright.load(workload_file(tmp_path)))
        assert submitted.record.task.namespace == "default"
        assert [record.task_id for record in client.list()] == [submitted.task_id]
        with pytest.raises(InvalidInputError, match=r"^labels: the operator takes the Workload"):
            client.submit(podwright.load(workload_file(tmp_path, "other")), labels={"a": "b"})


def test_a_prepared_workload_runs_where_it_was_judged(cluster: Cluster, tmp_path: Path) -> None:
    workload = training(tmp_path, "judged", "echo hi")
    with Client("local", home=tmp_path / "home", namespace="team-a") as client:
        with pytest.raises(
            InvalidInputError, match=r"^namespace team-a: the workload was prepared"
        ):
            client.submit(podwright.prepare(workload, namespace="team-b"))
        assert client.list() == []
    policies = podwright.load_policies(EXAMPLES / "policies" / "local-dev.yaml")
    judged = podwright.prepare(workload, policies)
    assert judged.namespace is None
    on_cluster = Client("kubernetes", kubeconfig=cluster.kubeconfig, home=tmp_path / "home")
    with on_cluster, pytest.raises(InvalidInputError, match="judged without a namespace"):
        on_cluster.submit(judged)


def test_delete_takes_one_id_or_many_names_the_unknown_and_reports_each_as_it_comes(
    tmp_path: Path, home: Path
) -> None:
    reported: list[str] = []
    with Client("local", home=home) as client:
        ids = []
        for name in ("one", "two"):
            task_id = client.submit(training(tmp_path, name, "echo hi"), working_dir=tmp_path)
            ids.append(task_id.task_id)
            for _change in client.watch(task_id.task_id):
                pass
        [first] = client.delete(ids[0], timeout=30)
        assert first.message == f"task {ids[0]} deleted"
        outcomes = client.delete(
            ["nope-1", ids[1]], report=lambda outcome: reported.append(outcome.task_id)
        )
    assert reported == [outcome.task_id for outcome in outcomes] == ["nope-1", ids[1]]
    unknown, deleted = outcomes
    assert isinstance(unknown.error, TaskNotFoundError)
    assert isinstance(unknown.error, ValueError)  # bad input, as every InvalidInputError
    assert (deleted.message, deleted.error) == (f"task {ids[1]} deleted", None)
