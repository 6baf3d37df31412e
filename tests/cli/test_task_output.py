"""``list`` and ``status`` for scripts: ``-o json|yaml``, ``list``'s filters and order, and
``--watch`` on both, over this machine's task store and over the operator's Workloads (the
API-server emulator, as in tests/cli/test_operator_backend.py).

The tasks are written straight into the store (or the Workloads' statuses, the test playing the
operator), so no executor runs. A watch runs in a process of its own whose lines are read as
they come: each test makes one change, then waits for the line it brings before the next, so
nothing depends on how fast the watch looks; the minute a line may take is only a guard.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest
import yaml
from click.testing import CliRunner, Result

from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.api.client import _changes, events_after
from podwright.cli.main import cli
from podwright.cli.task_commands import _show_change
from podwright.core.cluster_resources import API_VERSION, WORKLOAD_KIND
from podwright.core.lifecycle.phases import (
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    ReasonInfo,
)
from podwright.engine.task_store import AttachedEvent, HistoryEntry, NewTask, TaskRecord
from podwright.engine.workload_tasks import task_id_of
from tests.cli.test_operator_backend import NAMESPACE, Cluster, cluster, pod_manifest

__all__ = ["cluster"]  # the emulator's fixture, used here too

T0 = datetime(2026, 11, 27, 15, 8, 5, tzinfo=UTC)
LINE_SECONDS = 60.0
"""The longest a watch's next line may take (a guard: each line is brought by a change)."""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A state directory whose store the test writes; no executor ever serves it."""
    return tmp_path / "home"


@pytest.fixture
def store(home: Path) -> Iterator[SQLiteTaskStore]:
    opened = SQLiteTaskStore(home / "tasks.db")
    yield opened
    opened.close()


def podwright(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--home", str(home)])


def submit(
    store: SQLiteTaskStore,
    task_id: str,
    *,
    workload_type: str = "training",
    labels: dict[str, str] | None = None,
    at: datetime = T0,
) -> None:
    store.submit(
        NewTask(
            task_id=task_id,
            workload_type=workload_type,
            name=task_id.rsplit("-", 1)[0],
            namespace="research",
            backend="local",
            workload={},
            effective={},
            manifests=(),
            submitted_at=at,
            labels=labels or {},
            submitted_by="alice",
        )
    )


def advance(store: SQLiteTaskStore, task_id: str, info: PhaseInfo, now: datetime = T0) -> None:
    store.advance(task_id, store.get(task_id).revision, {}, info, now)


def finalize(store: SQLiteTaskStore, task_id: str, now: datetime = T0) -> None:
    store.mark_finalized(task_id, store.get(task_id).revision, now)


@pytest.fixture
def tasks(store: SQLiteTaskStore) -> SQLiteTaskStore:
    """Four tasks: training resnet (Running, team vision), workspace notebook (failed and
    finalized, team nlp), inference serve (Undefined, no labels), training bert (Queued, team
    nlp, tier gpu), submitted a minute apart in that order."""
    submit(store, "resnet-1", labels={"team": "vision", "env": "prod"})
    submit(
        store,
        "notebook-1",
        workload_type="workspace",
        labels={"team": "nlp"},
        at=T0 + timedelta(minutes=1),
    )
    submit(store, "serve-1", workload_type="inference", at=T0 + timedelta(minutes=2))
    submit(store, "bert-1", labels={"team": "nlp", "tier": "gpu"}, at=T0 + timedelta(minutes=3))
    advance(
        store,
        "resnet-1",
        PhaseInfo(
            Phase.RUNNING,
            1,
            "started",
            occurred_at=T0 + timedelta(seconds=30),
            additional_reasons=(ReasonInfo("Pulled: image busybox:1", T0),),
        ),
        T0 + timedelta(minutes=5),
    )
    failed = PhaseInfo(
        Phase.PERMANENT_FAILURE,
        1,
        "OOMKilled",
        error=ExecutionError("OOMKilled", "the container ran out of memory", ErrorKind.USER),
        occurred_at=T0 + timedelta(minutes=1, seconds=40),
    )
    advance(store, "notebook-1", failed, T0 + timedelta(minutes=6))
    finalize(store, "notebook-1", T0 + timedelta(minutes=7))
    advance(store, "bert-1", PhaseInfo(Phase.QUEUED, 1, "created"), T0 + timedelta(minutes=4))
    return store


# -o json, -o yaml ------------------------------------------------------------------------------


def test_list_as_json_is_a_task_list_of_every_tasks_item(home: Path, tasks: Any) -> None:
    result = podwright(home, "list", "-o", "json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert listed["kind"] == "TaskList"
    assert [item["id"] for item in listed["items"]] == [
        "resnet-1",
        "notebook-1",
        "serve-1",
        "bert-1",
    ]
    assert listed["items"][1] == {
        "kind": "Task",
        "id": "notebook-1",
        "name": "notebook",
        "namespace": "research",
        "type": "workspace",
        "backend": "local",
        "phase": "PermanentFailure",
        "reason": "OOMKilled",
        "submittedAt": "2026-11-27T15:09:05Z",
        "submittedBy": "alice",
        "updatedAt": "2026-11-27T15:15:05Z",
        "active": False,
        "abortRequested": False,
        "labels": {"team": "nlp"},
    }


def test_status_as_json_adds_the_history_and_the_events(home: Path, tasks: Any) -> None:
    result = podwright(home, "status", "notebook-1", "-o", "json")
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["history"] == [
        {
            "phase": "PermanentFailure",
            "version": 1,
            "reason": "OOMKilled",
            "occurredAt": "2026-11-27T15:09:45Z",
            "error": {
                "code": "OOMKilled",
                "message": "the container ran out of memory",
                "kind": "user",
            },
        }
    ]
    assert status["events"] == []
    listed = json.loads(podwright(home, "list", "-o", "json").output)["items"][1]
    assert {key: value for key, value in status.items() if key not in ("history", "events")} == (
        listed
    )
    running = json.loads(podwright(home, "status", "resnet-1", "-o", "json").output)
    assert running["events"] == [
        {"reason": "Pulled: image busybox:1", "occurredAt": "2026-11-27T15:08:05Z"}
    ]


@pytest.mark.parametrize("command", ["list", "status"])
def test_yaml_is_the_same_document_as_json(home: Path, tasks: Any, command: str) -> None:
    as_json = json.loads(podwright(home, command, "-o", "json").output)
    printed = podwright(home, command, "-o", "yaml").output
    assert yaml.safe_load(printed) == as_json
    assert "submittedAt: '2026-11-27T15:" in printed  # a time stays a string


@pytest.mark.parametrize(
    ("output", "printed"),
    [
        pytest.param("json", '{\n  "kind": "TaskList",\n  "items": []\n}\n', id="json"),
        pytest.param("yaml", "kind: TaskList\nitems: []\n", id="yaml"),
        pytest.param("table", "no tasks\n", id="table"),
    ],
)
def test_an_empty_list_is_an_empty_list(home: Path, output: str, printed: str) -> None:
    result = podwright(home, "list", "-o", output)
    assert (result.exit_code, result.output) == (0, printed)


# Filters and order -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "listed"),
    [
        pytest.param([], ["resnet-1", "notebook-1", "serve-1", "bert-1"], id="none"),
        pytest.param(["--phase", "Running"], ["resnet-1"], id="phase"),
        pytest.param(["--phase", "queued"], ["bert-1"], id="phase-any-case"),
        pytest.param(
            ["--phase", "Running", "--phase", "Undefined"], ["resnet-1", "serve-1"], id="phases"
        ),
        pytest.param(["--type", "training"], ["resnet-1", "bert-1"], id="type"),
        pytest.param(
            ["--type", "workspace", "--type", "inference"], ["notebook-1", "serve-1"], id="types"
        ),
        pytest.param(["-l", "team=nlp"], ["notebook-1", "bert-1"], id="selector"),
        pytest.param(["--selector", "team notin (nlp)"], ["resnet-1", "serve-1"], id="notin"),
        pytest.param(["-l", "!team"], ["serve-1"], id="no-label"),
        pytest.param(["-l", "team in (nlp, vision),!tier"], ["resnet-1", "notebook-1"], id="and"),
        pytest.param(["--active"], ["resnet-1", "serve-1", "bert-1"], id="active"),
        pytest.param(["--active", "-l", "team=nlp", "--type", "training"], ["bert-1"], id="all"),
        pytest.param(
            ["--sort-by", "name"], ["bert-1", "notebook-1", "resnet-1", "serve-1"], id="by-name"
        ),
        pytest.param(
            ["--sort-by", "phase"], ["serve-1", "bert-1", "resnet-1", "notebook-1"], id="by-phase"
        ),
        pytest.param(
            ["--sort-by", "updated"], ["serve-1", "bert-1", "resnet-1", "notebook-1"], id="updated"
        ),
        pytest.param(
            ["--sort-by", "type", "--active"], ["serve-1", "bert-1", "resnet-1"], id="by-type"
        ),
    ],
)
@pytest.mark.parametrize("output", ["table", "json"])
def test_filters_and_order(
    home: Path, tasks: Any, options: list[str], listed: list[str], output: str
) -> None:
    result = podwright(home, "list", *options, "-o", output)
    assert result.exit_code == 0, result.output
    if output == "json":
        assert [item["id"] for item in json.loads(result.output)["items"]] == listed
    else:
        assert [line.split()[0] for line in result.output.splitlines()[1:]] == listed


def test_a_listing_the_filters_leave_empty_says_so(home: Path, tasks: Any) -> None:
    result = podwright(home, "list", "--phase", "Aborted")
    assert (result.exit_code, result.output) == (0, "no tasks matching the filters\n")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            ["--phase", "Finished"],
            "Invalid value for '--phase': 'Finished' is not a phase: one of Undefined, NotReady, "
            "WaitingForResources, Queued, Initializing, Running, Success, RetryableFailure, "
            "SystemRetryableFailure, PermanentFailure, Aborted",
            id="phase",
        ),
        pytest.param(
            ["--type", "batch"],
            "Invalid value for '--type': 'batch' is not one of 'workspace', 'training', "
            "'distributed', 'inference'.",
            id="type",
        ),
        pytest.param(
            ["-l", "env in prod"],
            "Invalid value for '-l' / '--selector': 'env in prod': at column 8: found 'prod', "
            "expected: '('",
            id="selector",
        ),
        pytest.param(
            ["-l", "team=a b"],
            "Invalid value for '-l' / '--selector': 'team=a b': at column 8: found 'b', "
            "expected: ',' or end of string",
            id="selector-two-values",
        ),
        pytest.param(["--sort-by", "age"], "Invalid value for '--sort-by': 'age'", id="sort"),
        pytest.param(["-o", "wide"], "Invalid value for '-o' / '--output': 'wide'", id="output"),
    ],
)
def test_a_bad_filter_is_a_usage_error_naming_it(
    home: Path, options: list[str], message: str
) -> None:
    result = podwright(home, "list", *options)
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"podwright: error: {message}"), result.output


# --watch ---------------------------------------------------------------------------------------


class Watch:
    """A ``podwright`` command in a process of its own, its output and its errors read line by
    line as they come."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "podwright", *args],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._errors: queue.Queue[str | None] = queue.Queue()
        self._readers = [
            threading.Thread(target=_read, args=(stream, lines), daemon=True)
            for stream, lines in (
                (self.process.stdout, self._lines),
                (self.process.stderr, self._errors),
            )
        ]
        for reader in self._readers:
            reader.start()

    def line(self) -> str:
        """The next line of output (the test failing when none comes within
        :data:`LINE_SECONDS`, or the command ended)."""
        return self._next(self._lines)

    def error(self) -> str:
        """The next line of its standard error, as :meth:`line`."""
        return self._next(self._errors)

    def _next(self, lines: queue.Queue[str | None]) -> str:
        try:
            line = lines.get(timeout=LINE_SECONDS)
        except queue.Empty:
            pytest.fail(f"no line within {LINE_SECONDS}s")
        if line is None:
            self.process.wait(timeout=LINE_SECONDS)
            pytest.fail(f"the command ended ({self.process.returncode}): {_rest(self._errors)}")
        return line

    def interrupt(self) -> tuple[int, list[str], list[str]]:
        """Ctrl-C; see :meth:`end`."""
        self.process.send_signal(signal.SIGINT)
        return self.end()

    def end(self) -> tuple[int, list[str], list[str]]:
        """Wait for the command to end: its exit status, and the lines of its output and of its
        standard error not read yet."""
        self.process.wait(timeout=LINE_SECONDS)
        for reader in self._readers:
            reader.join(timeout=LINE_SECONDS)
        return self.process.returncode, _rest(self._lines), _rest(self._errors)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=LINE_SECONDS)


def _read(stream: IO[str] | None, lines: queue.Queue[str | None]) -> None:
    """Each line of ``stream`` into ``lines``, then None."""
    assert stream is not None
    with stream:
        for line in stream:
            lines.put(line.rstrip("\n"))
    lines.put(None)


def _rest(lines: queue.Queue[str | None]) -> list[str]:
    """The lines read and not taken yet (up to the end, if it was read)."""
    rest = []
    with contextlib.suppress(queue.Empty):
        while (line := lines.get_nowait()) is not None:
            rest.append(line)
    return rest


@contextlib.contextmanager
def watching(*args: str, cwd: Path) -> Iterator[Watch]:
    watch = Watch(*args, cwd=cwd)
    try:
        yield watch
    finally:
        watch.kill()


def next_task(watch: Watch, output: str) -> tuple[str, str, bool]:
    """The next task a ``list --watch`` printed: its id, phase and whether it is active."""
    if output == "table":
        cells = watch.line().split()
        return cells[0], cells[3], cells[-1] == "yes"
    if output == "json":
        item = json.loads(watch.line())
    else:  # a YAML document, ending with its labels (none, in these tests)
        lines = []
        while not (line := watch.line()).startswith("labels:"):
            if line != "---":
                lines.append(line)
        item = yaml.safe_load("\n".join([*lines, line]))
    return item["id"], item["phase"], item["active"]


@pytest.mark.parametrize("output", ["table", "json", "yaml"])
def test_list_watch_prints_each_task_that_appears_or_changes_phase(
    tmp_path: Path, home: Path, store: SQLiteTaskStore, output: str
) -> None:
    submit(store, "first-1", workload_type="workspace")
    args = ("list", "-w", "-o", output, "--type", "workspace", "--home", str(home))
    with watching(*args, cwd=tmp_path) as watch:
        if output == "table":
            assert watch.line().split() == ["ID", "TYPE", "BACKEND", "PHASE", "SUBMITTED", "ACTIVE"]
        assert next_task(watch, output) == ("first-1", "Undefined", True)
        submit(store, "other-1", workload_type="training")  # not of the type listed
        advance(store, "first-1", PhaseInfo(Phase.QUEUED, 1, "created"))
        assert next_task(watch, output) == ("first-1", "Queued", True)
        advance(store, "first-1", PhaseInfo(Phase.QUEUED, 2, "still waiting"))  # the same phase
        submit(store, "second-1", workload_type="workspace", at=T0 + timedelta(minutes=1))
        assert next_task(watch, output) == ("second-1", "Undefined", True)
        advance(store, "first-1", PhaseInfo(Phase.SUCCESS, 3, "done"))
        assert next_task(watch, output) == ("first-1", "Success", True)
        finalize(store, "first-1")
        assert next_task(watch, output) == ("first-1", "Success", False)
        code, rest, errors = watch.interrupt()
    assert (code, rest, errors) == (0, [], [])


def test_list_watch_of_no_task_prints_the_header_with_the_first(
    tmp_path: Path, home: Path, store: SQLiteTaskStore
) -> None:
    with watching("list", "--watch", "--home", str(home), cwd=tmp_path) as watch:
        assert watch.error() == "no tasks"
        submit(store, "late-1")
        assert watch.line().split() == ["ID", "TYPE", "BACKEND", "PHASE", "SUBMITTED", "ACTIVE"]
        assert watch.line().split() == [
            *("late-1", "training", "local", "Undefined", "2026-11-27", "15:08:05", "yes")
        ]
        code, rest, errors = watch.interrupt()
    assert (code, rest, errors) == (0, [], [])


def test_status_watch_prints_each_new_phase_and_event_until_the_task_is_finalized(
    tmp_path: Path, home: Path, store: SQLiteTaskStore
) -> None:
    submit(store, "job-1")
    advance(store, "job-1", PhaseInfo(Phase.QUEUED, 1, "created", occurred_at=T0))
    with watching("status", "job-1", "-w", "--home", str(home), cwd=tmp_path) as watch:
        assert [watch.line() for _ in range(6)] == [
            "task:      job-1",
            "workload:  job (training), namespace research",
            "backend:   local",
            "phase:     Queued (created)",
            "history:",
            "  15:08:05  Queued  created",
        ]
        started = PhaseInfo(
            Phase.RUNNING,
            2,
            "started",
            occurred_at=T0 + timedelta(seconds=5),
            additional_reasons=(ReasonInfo("Pulled: image busybox:1", T0 + timedelta(seconds=3)),),
        )
        advance(store, "job-1", started)
        advance(
            store, "job-1", PhaseInfo(Phase.SUCCESS, 3, "", occurred_at=T0 + timedelta(seconds=9))
        )
        finalize(store, "job-1")
        code, rest, errors = watch.end()
    assert (code, errors) == (0, [])
    assert rest == [
        "  15:08:08  event: Pulled: image busybox:1",
        "  15:08:10  Running  started",
        "  15:08:14  Success",
    ]


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_status_watch_as_json_or_yaml_is_the_status_then_a_document_per_phase_and_event(
    tmp_path: Path, home: Path, store: SQLiteTaskStore, output: str
) -> None:
    submit(store, "job-1")
    args = ("status", "job-1", "-w", "-o", output, "--home", str(home))
    with watching(*args, cwd=tmp_path) as watch:
        first = [watch.line()]
        while output == "yaml" and first[-1] != "events: []":
            first.append(watch.line())
        failed = PhaseInfo(
            Phase.PERMANENT_FAILURE,
            1,
            "OOMKilled",
            error=ExecutionError("OOMKilled", "out of memory", ErrorKind.USER),
            occurred_at=T0,
            additional_reasons=(ReasonInfo("Started", None),),
        )
        advance(store, "job-1", failed)
        finalize(store, "job-1")
        code, rest, errors = watch.end()
    assert (code, errors) == (0, [])
    if output == "json":
        documents = [json.loads(line) for line in [*first, *rest]]
    else:
        documents = list(yaml.safe_load_all("\n".join([*first, *rest])))
    assert [document["kind"] for document in documents] == ["Task", "TaskPhase", "TaskEvent"]
    assert (documents[0]["id"], documents[0]["phase"], documents[0]["history"]) == (
        "job-1",
        "Undefined",
        [],
    )
    assert documents[1:] == [
        {
            "kind": "TaskPhase",
            "taskId": "job-1",
            "phase": "PermanentFailure",
            "version": 1,
            "reason": "OOMKilled",
            "occurredAt": "2026-11-27T15:08:05Z",
            "error": {"code": "OOMKilled", "message": "out of memory", "kind": "user"},
        },
        {"kind": "TaskEvent", "taskId": "job-1", "reason": "Started", "occurredAt": None},
    ]


class RacingStore:
    """A task store a write reaches while ``status --watch`` reads it: between its history and
    its events, once; each wait of the watch brings the next write."""

    def __init__(self, states: list[tuple[TaskRecord, list[HistoryEntry], list[AttachedEvent]]]):
        self.states, self.current, self.racing = states, 0, True

    def get(self, task_id: str) -> TaskRecord:
        return self.states[self.current][0]

    def history(self, task_id: str) -> list[HistoryEntry]:
        read = self.states[self.current][1]
        if self.racing:  # the write lands now
            self.current, self.racing = self.current + 1, False
        return read

    def events(self, task_id: str) -> list[AttachedEvent]:
        return self.states[self.current][2]

    def wait(self) -> None:
        self.current += 1


def test_status_watch_shows_a_phase_with_the_events_of_its_write_in_their_order(
    store: SQLiteTaskStore, capsys: pytest.CaptureFixture[str]
) -> None:
    submit(store, "job-1")
    record = store.get("job-1")
    running = HistoryEntry(Phase.RUNNING, 1, "started", T0 + timedelta(seconds=5))
    started = AttachedEvent("Started: container main", T0 + timedelta(seconds=6))
    success = HistoryEntry(Phase.SUCCESS, 2, "", T0 + timedelta(seconds=9))
    racing = RacingStore(
        [
            (record, [], []),
            (dataclasses.replace(record, revision=2), [running], [started]),
            (
                dataclasses.replace(record, revision=3, finalized=True),
                [running, success],
                [started],
            ),
        ]
    )
    for change in _changes(racing, "job-1", racing, 0, []):
        _show_change(change, "table")
    assert capsys.readouterr().out.splitlines() == [
        "  15:08:10  Running  started",
        "  15:08:11  event: Started: container main",
        "  15:08:14  Success",
    ]


def test_status_watch_of_a_finalized_task_prints_its_status_and_ends(
    home: Path, tasks: Any
) -> None:
    result = podwright(home, "status", "notebook-1", "--watch")
    assert result.exit_code == 0, result.output
    assert result.output == podwright(home, "status", "notebook-1").output


# The operator's Workloads ----------------------------------------------------------------------


def create_workload(cluster: Cluster, name: str, labels: dict[str, str]) -> str:
    """A Workload in the namespace, with ``labels``; its task's id."""
    cluster.client.create(
        {
            "apiVersion": API_VERSION,
            "kind": WORKLOAD_KIND,
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "type": "training",
                "image": "busybox:1",
                "command": "python train.py",
                "compute": {"gpuDevicesRequest": 1},
            },
        }
    )
    return task_id_of(cluster.workload(name))


def test_operator_list_as_json_carries_the_workloads_labels_and_asks_the_server_to_select(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    vision = create_workload(cluster, "vision", {"team": "vision"})
    create_workload(cluster, "nlp", {"team": "nlp"})
    cluster.take("vision", [pod_manifest("vision")])
    cluster.advance("vision", PhaseInfo(Phase.QUEUED, 1, "created", occurred_at=T0))
    selectors: list[str | None] = []
    listing = KubernetesClient.list_objects

    def spied(self: KubernetesClient, *args: Any, **options: Any) -> Any:
        selectors.append(options.get("label_selector"))
        return listing(self, *args, **options)

    monkeypatch.setattr(KubernetesClient, "list_objects", spied)
    result = cluster.podwright("list", "-n", NAMESPACE, "-o", "json", "-l", "team in (vision)")
    assert result.exit_code == 0, result.output
    assert selectors == ["team in (vision)"]
    items = json.loads(result.stdout)["items"]
    assert [(item["id"], item["phase"], item["labels"]) for item in items] == [
        (vision, "Queued", {"team": "vision"})
    ]
    assert (items[0]["backend"], items[0]["namespace"]) == ("operator/emu", NAMESPACE)


def test_operator_list_watch_follows_the_workloads_of_the_selector(
    cluster: Cluster, tmp_path: Path
) -> None:
    first = create_workload(cluster, "first", {"team": "vision"})
    args = ("list", "-w", "-o", "json", "-l", "team=vision", "-n", NAMESPACE)
    options = ("--backend", "operator", "--kubeconfig", cluster.kubeconfig)
    with watching(*args, *options, cwd=tmp_path) as watch:
        assert next_task(watch, "json") == (first, "Undefined", True)
        create_workload(cluster, "other", {"team": "nlp"})  # not selected
        cluster.take("first", [pod_manifest("first")])  # recorded, still Undefined
        cluster.advance("first", PhaseInfo(Phase.QUEUED, 1, "created", occurred_at=T0))
        assert next_task(watch, "json") == (first, "Queued", True)
        second = create_workload(cluster, "second", {"team": "vision"})
        assert next_task(watch, "json") == (second, "Undefined", True)
        cluster.advance("first", PhaseInfo(Phase.SUCCESS, 2, "done", occurred_at=T0))
        assert next_task(watch, "json") == (first, "Success", True)
        cluster.finish("first")
        assert next_task(watch, "json") == (first, "Success", False)
        code, rest, errors = watch.interrupt()
    assert (code, rest, errors) == (0, [], [])


def test_operator_status_watch_follows_the_workload_until_its_task_is_finalized(
    cluster: Cluster, tmp_path: Path
) -> None:
    task_id = create_workload(cluster, "job", {})
    cluster.take("job", [pod_manifest("job")])
    cluster.advance("job", PhaseInfo(Phase.QUEUED, 1, "created", occurred_at=T0))
    args = ("status", "job", "-w", "-o", "json", "-n", NAMESPACE, "--backend", "operator")
    with watching(*args, "--kubeconfig", cluster.kubeconfig, cwd=tmp_path) as watch:
        status = json.loads(watch.line())
        assert (status["id"], status["backend"], status["phase"]) == (
            task_id,
            "operator/emu",
            "Queued",
        )
        assert [entry["phase"] for entry in status["history"]] == ["Queued"]
        pulled = ReasonInfo("Pulled: image busybox:1", T0 + timedelta(seconds=3))
        started = PhaseInfo(
            Phase.RUNNING,
            2,
            "started",
            occurred_at=T0 + timedelta(seconds=5),
            additional_reasons=(pulled,),
        )
        cluster.advance("job", started)
        cluster.advance(
            "job", PhaseInfo(Phase.SUCCESS, 3, "", occurred_at=T0 + timedelta(seconds=9))
        )
        cluster.finish("job")
        code, rest, errors = watch.end()
    assert (code, errors) == (0, [])
    news = [json.loads(line) for line in rest]
    assert [(item["kind"], item.get("phase"), item["occurredAt"]) for item in news] == [
        ("TaskEvent", None, "2026-11-27T15:08:08Z"),
        ("TaskPhase", "Running", "2026-11-27T15:08:10Z"),
        ("TaskPhase", "Success", "2026-11-27T15:08:14Z"),
    ]
    assert all(item["taskId"] == task_id for item in news)


def test_an_operator_listing_of_nothing_says_so_and_is_an_empty_list_in_json(
    cluster: Cluster,
) -> None:
    assert re.fullmatch(
        r"no Workloads in namespace vision of cluster emu matching the filters\n",
        cluster.podwright("list", "-n", NAMESPACE, "--phase", "Running").stdout,
    )
    assert json.loads(cluster.podwright("list", "-A", "-o", "json").stdout) == {
        "kind": "TaskList",
        "items": [],
    }


@pytest.mark.parametrize(
    ("shown", "now", "new"),
    [
        pytest.param("", "ab", "ab", id="first"),
        pytest.param("ab", "abc", "c", id="appended"),
        pytest.param("ab", "ab", "", id="nothing-new"),
        pytest.param("abcd", "cdef", "ef", id="oldest-dropped"),
        pytest.param("abcd", "defg", "efg", id="most-dropped"),
        pytest.param("aab", "abb", "b", id="repeats"),
        pytest.param("ab", "xyz", "xyz", id="all-replaced"),
    ],
)
def test_the_events_after_those_shown_survive_a_window_of_latest_events(
    shown: str, now: str, new: str
) -> None:
    """The operator keeps a Workload's latest 64 events: once full, its list slides, and
    ``status -w`` still shows each new event once."""
    event = {
        letter: AttachedEvent(letter, datetime(2026, 11, 27, tzinfo=UTC)) for letter in "abcdefgxyz"
    }
    found = events_after([event[c] for c in shown], [event[c] for c in now])
    assert [e.reason for e in found] == list(new)
