"""The SQLite task store: the port's semantics, its schema versions, and crash safety."""

from __future__ import annotations

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podwright.adapters.sqlite_store import MIGRATIONS, SQLiteTaskStore
from podwright.core.lifecycle.phases import (
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    ReasonInfo,
)
from podwright.engine.task_store import (
    AttachedEvent,
    HistoryEntry,
    NewTask,
    StaleRevisionError,
    StoreUnavailableError,
    TaskExistsError,
    TaskNotFoundError,
    TaskStoreError,
)

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def new_task(task_id: str = "t-1", at: datetime = T0) -> NewTask:
    return NewTask(
        task_id=task_id,
        workload_type="training",
        name="resnet",
        namespace="research",
        backend="local",
        workload={"image": "trainer:1", "command": ["python", "train.py"]},
        effective={"image": "trainer:1", "gpu": 1},
        manifests=({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "resnet"}},),
        submitted_at=at,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteTaskStore]:
    opened = SQLiteTaskStore(tmp_path / "state" / "tasks.db")
    yield opened
    opened.close()


def test_a_submitted_task_reads_back_whole(store: SQLiteTaskStore) -> None:
    record = store.submit(new_task())
    assert record.task == new_task()
    assert (record.revision, record.phase, record.phase_version, record.reason) == (
        1,
        Phase.UNDEFINED,
        0,
        "",
    )
    assert (record.abort_requested, record.finalized, record.plugin_state) == (False, False, {})
    assert store.get("t-1") == record
    assert store.history("t-1") == []
    assert store.events("t-1") == []


def test_ids_are_unique_and_unknown_ids_are_reported(store: SQLiteTaskStore) -> None:
    store.submit(new_task())
    with pytest.raises(TaskExistsError, match="task 't-1' was already submitted"):
        store.submit(new_task())
    for call in (store.get, store.history, store.events):
        with pytest.raises(TaskNotFoundError, match="no task 'nope' in"):
            call("nope")
    with pytest.raises(TaskNotFoundError):
        store.request_abort("nope", T0)


def test_advances_append_history_on_phase_changes_and_every_attached_event(
    store: SQLiteTaskStore,
) -> None:
    store.submit(new_task())
    queued = PhaseInfo(Phase.QUEUED, 1, "Unschedulable", occurred_at=T0)
    record = store.advance("t-1", 1, {"version": 1, "managerPhase": "Started"}, queued, T0)
    record = store.advance(
        "t-1", record.revision, {"version": 1}, queued, T0 + timedelta(seconds=1)
    )
    running = PhaseInfo(
        Phase.RUNNING,
        2,
        "",
        additional_reasons=(ReasonInfo("Pulled: image pulled", T0), ReasonInfo("Started", None)),
    )
    record = store.advance(
        "t-1", record.revision, {"version": 1, "x": 2}, running, T0 + timedelta(seconds=5)
    )
    failed = PhaseInfo(
        Phase.PERMANENT_FAILURE,
        3,
        "OOMKilled",
        error=ExecutionError("OOMKilled", "the container ran out of memory", ErrorKind.USER),
        occurred_at=T0 + timedelta(seconds=9),
    )
    record = store.advance(
        "t-1", record.revision, {"version": 1, "x": 3}, failed, T0 + timedelta(seconds=10)
    )
    assert (record.revision, record.phase, record.phase_version, record.reason) == (
        5,
        Phase.PERMANENT_FAILURE,
        3,
        "OOMKilled",
    )
    assert record.plugin_state == {"version": 1, "x": 3}
    assert record.updated_at == T0 + timedelta(seconds=10)
    assert store.history("t-1") == [
        HistoryEntry(Phase.QUEUED, 1, "Unschedulable", T0),
        HistoryEntry(Phase.RUNNING, 2, "", T0 + timedelta(seconds=5)),
        HistoryEntry(
            Phase.PERMANENT_FAILURE,
            3,
            "OOMKilled",
            T0 + timedelta(seconds=9),
            "OOMKilled",
            "the container ran out of memory",
            ErrorKind.USER,
        ),
    ]
    assert store.events("t-1") == [
        AttachedEvent("Pulled: image pulled", T0),
        AttachedEvent("Started", None),
    ]


def test_a_write_from_a_stale_read_is_refused_and_changes_nothing(store: SQLiteTaskStore) -> None:
    store.submit(new_task())
    store.request_abort("t-1", T0)
    with pytest.raises(StaleRevisionError, match="task 't-1' is at revision 2, not 1"):
        store.advance(
            "t-1",
            1,
            {"stale": True},
            PhaseInfo(Phase.RUNNING, 1, "", additional_reasons=(ReasonInfo("x"),)),
            T0,
        )
    record = store.get("t-1")
    assert (record.revision, record.phase, record.plugin_state) == (2, Phase.UNDEFINED, {})
    assert store.history("t-1") == []
    assert store.events("t-1") == []
    with pytest.raises(StaleRevisionError):
        store.mark_finalized("t-1", 1, T0)


def test_abort_requests_are_idempotent_and_finalized_tasks_leave_the_active_set(
    store: SQLiteTaskStore,
) -> None:
    store.submit(new_task("t-2", T0 + timedelta(seconds=1)))
    store.submit(new_task("t-1", T0))
    assert store.request_abort("t-1", T0).revision == 2
    assert store.request_abort("t-1", T0).revision == 2
    assert store.get("t-1").abort_requested is True
    assert [record.task_id for record in store.list_tasks()] == ["t-1", "t-2"]
    store.mark_finalized("t-1", 2, T0)
    assert [record.task_id for record in store.list_tasks(active_only=True)] == ["t-2"]
    assert [record.task_id for record in store.list_tasks()] == ["t-1", "t-2"]


def test_a_task_is_deleted_with_its_history_and_events_only_at_the_revision_read(
    store: SQLiteTaskStore, tmp_path: Path
) -> None:
    store.submit(new_task("t-1"))
    store.submit(new_task("t-2"))
    started = PhaseInfo(
        Phase.RUNNING, 1, "", additional_reasons=(ReasonInfo("Started", T0),), occurred_at=T0
    )
    record = store.advance("t-1", 1, {"version": 1}, started, T0)
    store.advance("t-2", 1, {"version": 1}, started, T0)
    store.request_abort("t-1", T0)  # a write since 'record' was read
    with pytest.raises(StaleRevisionError, match="task 't-1' is at revision 3, not 2"):
        store.delete("t-1", record.revision)
    assert store.get("t-1").revision == 3
    store.delete("t-1", 3)
    with pytest.raises(TaskNotFoundError, match="no task 't-1' in"):
        store.get("t-1")
    with pytest.raises(TaskNotFoundError):
        store.delete("t-1", 3)
    assert [record.task_id for record in store.list_tasks()] == ["t-2"]
    assert len(store.history("t-2")) == len(store.events("t-2")) == 1
    raw = sqlite3.connect(tmp_path / "state" / "tasks.db")
    try:
        for table in ("phase_history", "attached_events"):
            rows = raw.execute(f"SELECT task_id FROM {table}").fetchall()
            assert rows == [("t-2",)], table
    finally:
        raw.close()
    store.submit(new_task("t-1"))  # its id is free again, with an empty history
    assert store.history("t-1") == []
    assert store.events("t-1") == []


@settings(max_examples=30)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(Phase)),
            st.integers(0, 3),
            st.lists(st.text(max_size=5), max_size=2),
        ),
        max_size=12,
    )
)
def test_history_is_the_sequence_of_phase_changes(
    tmp_path_factory: pytest.TempPathFactory, reports: list[tuple[Phase, int, list[str]]]
) -> None:
    store = SQLiteTaskStore(tmp_path_factory.mktemp("store") / "tasks.db")
    try:
        record = store.submit(new_task())
        expected, previous, events = [], (Phase.UNDEFINED, 0), []
        for phase, version, reasons in reports:
            info = PhaseInfo(
                phase, version, additional_reasons=tuple(ReasonInfo(reason) for reason in reasons)
            )
            record = store.advance("t-1", record.revision, {}, info, T0)
            if (phase, version) != previous:
                expected.append((phase, version))
            previous = (phase, version)
            events += reasons
        assert [(entry.phase, entry.version) for entry in store.history("t-1")] == expected
        assert [event.reason for event in store.events("t-1")] == events
        assert record.revision == len(reports) + 1
    finally:
        store.close()


def test_the_file_is_in_wal_mode_at_the_latest_schema(store: SQLiteTaskStore) -> None:
    assert store.schema_version == len(MIGRATIONS)
    with sqlite3.connect(store.path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_migrations_run_in_order_once_and_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    SQLiteTaskStore(path).close()
    extra = (*MIGRATIONS, "ALTER TABLE tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0")
    latest = len(MIGRATIONS)
    upgraded = SQLiteTaskStore(path, migrations=extra)
    assert upgraded.schema_version == latest + 1
    upgraded.close()
    SQLiteTaskStore(path, migrations=extra).close()  # nothing left to run
    with pytest.raises(
        StoreUnavailableError,
        match=f"has schema version {latest + 1}, written by a newer podwright; this one knows "
        f"versions up to {latest}",
    ):
        SQLiteTaskStore(path)


def test_a_store_written_before_labels_opens_its_tasks_unlabelled_and_takes_labels(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.db"
    SQLiteTaskStore(path, migrations=MIGRATIONS[:1]).close()
    with sqlite3.connect(path) as db:  # a task as the first schema recorded it
        db.execute(
            "INSERT INTO tasks VALUES ('old', 'training', 'resnet', 'research', 'local', '{}', "
            "'{}', '[]', ?, ?, 1, '{}', 'Undefined', 0, '', 0, 0)",
            (T0.isoformat(), T0.isoformat()),
        )
    db.close()
    store = SQLiteTaskStore(path)
    try:
        assert store.schema_version == len(MIGRATIONS)
        old = store.get("old")
        assert (old.task.name, old.task.labels, old.revision) == ("resnet", {}, 1)
        labelled = dataclasses.replace(new_task("new"), labels={"team": "vision", "env": "prod"})
        assert store.submit(labelled).task == labelled
        assert {record.task_id: record.task.labels for record in store.list_tasks()} == {
            "old": {},
            "new": {"team": "vision", "env": "prod"},
        }
    finally:
        store.close()


def test_a_store_written_before_submitters_opens_its_tasks_submitter_unknown_and_takes_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tasks.db"
    SQLiteTaskStore(path, migrations=MIGRATIONS[:2]).close()
    with sqlite3.connect(path) as db:  # a task as the schema with labels recorded it
        db.execute(
            "INSERT INTO tasks VALUES ('old', 'training', 'resnet', 'research', 'local', '{}', "
            "'{}', '[]', ?, ?, 1, '{}', 'Undefined', 0, '', 0, 0, '{\"team\":\"vision\"}')",
            (T0.isoformat(), T0.isoformat()),
        )
    db.close()
    store = SQLiteTaskStore(path)
    try:
        assert store.schema_version == len(MIGRATIONS)
        old = store.get("old")
        assert (old.task.name, old.task.labels, old.task.submitted_by) == (
            "resnet",
            {"team": "vision"},
            "",
        )
        submitted = dataclasses.replace(new_task("new"), submitted_by="alice")
        assert store.submit(submitted).task == submitted
        assert {record.task_id: record.task.submitted_by for record in store.list_tasks()} == {
            "old": "",
            "new": "alice",
        }
    finally:
        store.close()


def test_labels_stored_malformed_are_reported(store: SQLiteTaskStore) -> None:
    store.submit(new_task())
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE tasks SET labels = '{\"replicas\": 3}'")
    db.close()
    with pytest.raises(TaskStoreError, match="task 't-1' is stored malformed: labels: "):
        store.get("t-1")


def test_the_data_version_changes_with_the_writes_of_others_only(
    store: SQLiteTaskStore,
) -> None:
    before = store.data_version()
    store.submit(new_task("mine"))
    assert store.data_version() == before, "its own writes do not count"
    other = SQLiteTaskStore(store.path)
    try:
        other.submit(new_task("theirs"))
    finally:
        other.close()
    after = store.data_version()
    assert after != before
    assert store.data_version() == after, "nothing more was written"


def test_a_failed_migration_leaves_the_previous_version(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    SQLiteTaskStore(path).close()
    broken = (
        *MIGRATIONS,
        "ALTER TABLE tasks ADD COLUMN a INTEGER; ALTER TABLE nowhere ADD COLUMN b INTEGER",
    )
    with pytest.raises(
        StoreUnavailableError, match="is not a usable podwright task store: no such table: nowhere"
    ):
        SQLiteTaskStore(path, migrations=broken)
    reopened = SQLiteTaskStore(path)
    assert reopened.schema_version == len(MIGRATIONS)
    reopened.close()
    with sqlite3.connect(path) as db:
        assert "a" not in [row[1] for row in db.execute("PRAGMA table_info(tasks)")]


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreUnavailableError, match="is not a usable podwright task store"):
        SQLiteTaskStore(path)


WRITER = """
import sys
from datetime import UTC, datetime
from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.core.lifecycle.phases import Phase, PhaseInfo, ReasonInfo
store = SQLiteTaskStore(sys.argv[1])
record = store.get("t-1")
print("ready", flush=True)
phases = [Phase.QUEUED, Phase.RUNNING]
while True:
    version = record.phase_version + 1
    info = PhaseInfo(phases[version % 2], version, additional_reasons=(ReasonInfo(f"event {version}"),))
    record = store.advance("t-1", record.revision, {"version": version}, info, datetime.now(UTC))
"""


def test_a_writer_killed_at_any_instant_leaves_whole_writes_only(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    store = SQLiteTaskStore(path)
    store.submit(new_task())
    store.close()
    for delay in (0.05, 0.1, 0.2, 0.3):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None
        assert writer.stdout.readline() == "ready\n"
        time.sleep(delay)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        reopened = SQLiteTaskStore(path)
        record = reopened.get("t-1")
        history, events = reopened.history("t-1"), reopened.events("t-1")
        # Every advance wrote one history line, one event and one revision, or nothing.
        assert len(history) == len(events) == record.revision - 1 == record.phase_version
        assert record.plugin_state == (
            {"version": record.phase_version} if record.phase_version else {}
        )
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        reopened.close()
    assert record.revision > 1, "the writer was killed before it wrote anything"
