"""The task store in one SQLite file: the default, for one machine or one executor.

WAL journaling (readers such as ``podwright status`` never block the executor), a busy timeout
(several processes may open the file), foreign keys on, and every write one ``BEGIN IMMEDIATE``
transaction, so a process killed at any instant leaves either the whole write or none of it.
The schema is versioned with ``PRAGMA user_version`` and brought up to date by the migrations
below, each in its own transaction; a file written by a newer podwright is refused rather than
misread. sqlite3's errors are mapped onto the port's error tree
(:mod:`podwright.engine.task_store`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from podwright.core.lifecycle.phases import ErrorKind, Phase, PhaseInfo
from podwright.engine.task_store import (
    AttachedEvent,
    HistoryEntry,
    JsonData,
    NewTask,
    StaleRevisionError,
    StoreUnavailableError,
    TaskExistsError,
    TaskNotFoundError,
    TaskRecord,
    TaskStoreError,
    events_of,
    history_entry,
    is_new_phase,
)

MIGRATIONS: tuple[str, ...] = (
    # 1: tasks, their phase history and their attached events.
    """
    CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        workload_type TEXT NOT NULL,
        name TEXT NOT NULL,
        namespace TEXT NOT NULL,
        backend TEXT NOT NULL,
        workload TEXT NOT NULL,
        effective TEXT NOT NULL,
        manifests TEXT NOT NULL,
        submitted_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        revision INTEGER NOT NULL,
        plugin_state TEXT NOT NULL,
        phase TEXT NOT NULL,
        phase_version INTEGER NOT NULL,
        reason TEXT NOT NULL,
        abort_requested INTEGER NOT NULL DEFAULT 0,
        finalized INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX tasks_by_activity ON tasks (finalized, submitted_at);
    CREATE TABLE phase_history (
        task_id TEXT NOT NULL REFERENCES tasks (task_id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        phase TEXT NOT NULL,
        version INTEGER NOT NULL,
        reason TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        error_code TEXT,
        error_message TEXT,
        error_kind TEXT,
        PRIMARY KEY (task_id, position)
    );
    CREATE TABLE attached_events (
        task_id TEXT NOT NULL REFERENCES tasks (task_id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        reason TEXT NOT NULL,
        occurred_at TEXT,
        PRIMARY KEY (task_id, position)
    );
    """,
    # 2: the task's labels, a JSON object ('{}' for the tasks recorded before).
    """
    ALTER TABLE tasks ADD COLUMN labels TEXT NOT NULL DEFAULT '{}'
    """,
    # 3: who submitted the task ('' for the tasks recorded before: not known).
    """
    ALTER TABLE tasks ADD COLUMN submitted_by TEXT NOT NULL DEFAULT ''
    """,
)
"""Schema migrations; migration N (1-based) brings ``user_version`` from N-1 to N. Statements are
separated by semicolons, which therefore appear nowhere else in them."""

_TASK_COLUMNS = (
    "task_id, workload_type, name, namespace, backend, workload, effective, manifests, "
    "submitted_at, updated_at, revision, plugin_state, phase, phase_version, reason, "
    "abort_requested, finalized, labels, submitted_by"
)


class SQLiteTaskStore:
    """A :class:`~podwright.engine.task_store.TaskStore` in the SQLite file at ``path``."""

    def __init__(self, path: str | Path, migrations: Sequence[str] = MIGRATIONS) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path, timeout=10, isolation_level=None, check_same_thread=False
            )
        except (OSError, sqlite3.Error) as error:
            raise StoreUnavailableError(
                f"cannot open the task store {self.path}: {error}"
            ) from error
        try:
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._migrate(migrations)
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise StoreUnavailableError(
                f"{self.path} is not a usable podwright task store: {error}"
            ) from error
        except BaseException:
            self._db.close()
            raise

    @property
    def schema_version(self) -> int:
        version: int = self._db.execute("PRAGMA user_version").fetchone()[0]
        return version

    def _migrate(self, migrations: Sequence[str]) -> None:
        if self.schema_version > len(migrations):
            raise StoreUnavailableError(
                f"the task store {self.path} has schema version {self.schema_version}, written "
                f"by a newer podwright; this one knows versions up to {len(migrations)}"
            )
        for version, script in enumerate(migrations, start=1):
            # One transaction per migration, the version re-read inside it: of two processes
            # opening a new file at once, one migrates and the other finds it done.
            self._db.execute("BEGIN IMMEDIATE")
            try:
                if self.schema_version < version:
                    for statement in script.split(";"):
                        if statement.strip():
                            self._db.execute(statement)
                    self._db.execute(f"PRAGMA user_version = {version}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as error:
                raise StoreUnavailableError(
                    f"cannot write the task store {self.path}: {error}"
                ) from error
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as error:
                self._db.execute("ROLLBACK")
                raise StoreUnavailableError(
                    f"cannot write the task store {self.path}: {error}"
                ) from error

    def _read(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, parameters).fetchall()
            except sqlite3.Error as error:
                raise StoreUnavailableError(
                    f"cannot read the task store {self.path}: {error}"
                ) from error

    def submit(self, task: NewTask) -> TaskRecord:
        try:
            with self._write() as db:
                db.execute(
                    f"INSERT INTO tasks ({_TASK_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, 0, '', 0, 0, ?, ?)",
                    (
                        task.task_id,
                        task.workload_type,
                        task.name,
                        task.namespace,
                        task.backend,
                        _json(task.workload),
                        _json(task.effective),
                        _json(list(task.manifests)),
                        task.submitted_at.isoformat(),
                        task.submitted_at.isoformat(),
                        _json({}),
                        Phase.UNDEFINED.value,
                        _json(dict(task.labels)),
                        task.submitted_by,
                    ),
                )
        except sqlite3.IntegrityError as error:
            raise TaskExistsError(f"task {task.task_id!r} was already submitted") from error
        return self.get(task.task_id)

    def get(self, task_id: str) -> TaskRecord:
        rows = self._read(f"SELECT {_TASK_COLUMNS} FROM tasks WHERE task_id = ?", (task_id,))
        if not rows:
            raise TaskNotFoundError(f"no task {task_id!r} in {self.path}")
        return _record(rows[0])

    def list_tasks(self, *, active_only: bool = False) -> list[TaskRecord]:
        where = "WHERE finalized = 0 " if active_only else ""
        rows = self._read(
            f"SELECT {_TASK_COLUMNS} FROM tasks {where}ORDER BY submitted_at, task_id"
        )
        return [_record(row) for row in rows]

    def advance(
        self,
        task_id: str,
        revision: int,
        plugin_state: JsonData,
        info: PhaseInfo,
        now: datetime,
    ) -> TaskRecord:
        with self._write() as db:
            record = self._current(db, task_id, revision)
            if is_new_phase(record, info):
                entry = history_entry(info, now)
                db.execute(
                    "INSERT INTO phase_history VALUES (?, "
                    "(SELECT COUNT(*) FROM phase_history WHERE task_id = ?), ?, ?, ?, ?, ?, ?, ?)",
                    (
                        task_id,
                        task_id,
                        entry.phase.value,
                        entry.version,
                        entry.reason,
                        entry.occurred_at.isoformat(),
                        entry.error_code,
                        entry.error_message,
                        entry.error_kind.value if entry.error_kind else None,
                    ),
                )
            for event in events_of(info):
                db.execute(
                    "INSERT INTO attached_events VALUES (?, "
                    "(SELECT COUNT(*) FROM attached_events WHERE task_id = ?), ?, ?)",
                    (task_id, task_id, event.reason, _time(event.occurred_at)),
                )
            db.execute(
                "UPDATE tasks SET revision = revision + 1, updated_at = ?, plugin_state = ?, "
                "phase = ?, phase_version = ?, reason = ? WHERE task_id = ?",
                (
                    now.isoformat(),
                    _json(plugin_state),
                    info.phase.value,
                    info.version,
                    info.reason,
                    task_id,
                ),
            )
        return self.get(task_id)

    def request_abort(self, task_id: str, now: datetime) -> TaskRecord:
        with self._write() as db:
            self._current(db, task_id, None)
            db.execute(
                "UPDATE tasks SET abort_requested = 1, revision = revision + 1, updated_at = ? "
                "WHERE task_id = ? AND abort_requested = 0",
                (now.isoformat(), task_id),
            )
        return self.get(task_id)

    def mark_finalized(self, task_id: str, revision: int, now: datetime) -> TaskRecord:
        with self._write() as db:
            self._current(db, task_id, revision)
            db.execute(
                "UPDATE tasks SET finalized = 1, revision = revision + 1, updated_at = ? "
                "WHERE task_id = ?",
                (now.isoformat(), task_id),
            )
        return self.get(task_id)

    def delete(self, task_id: str, revision: int) -> None:
        with self._write() as db:
            self._current(db, task_id, revision)
            # The history and the attached events go with it (ON DELETE CASCADE).
            db.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))

    def history(self, task_id: str) -> list[HistoryEntry]:
        self.get(task_id)
        rows = self._read(
            "SELECT phase, version, reason, occurred_at, error_code, error_message, error_kind "
            "FROM phase_history WHERE task_id = ? ORDER BY position",
            (task_id,),
        )
        return [
            HistoryEntry(
                phase=Phase(phase),
                version=version,
                reason=reason,
                occurred_at=datetime.fromisoformat(occurred_at),
                error_code=code,
                error_message=message,
                error_kind=ErrorKind(kind) if kind else None,
            )
            for phase, version, reason, occurred_at, code, message, kind in rows
        ]

    def events(self, task_id: str) -> list[AttachedEvent]:
        self.get(task_id)
        rows = self._read(
            "SELECT reason, occurred_at FROM attached_events WHERE task_id = ? ORDER BY position",
            (task_id,),
        )
        return [AttachedEvent(reason, _parse_time(occurred)) for reason, occurred in rows]

    def data_version(self) -> int:
        """A number that changes when another connection (another process, another store
        object on the file) has committed a write since it was last asked, and only then
        (SQLite's ``PRAGMA data_version``; this object's own writes do not change it): a
        watcher reads the tasks again only when it changed."""
        version: int = self._read("PRAGMA data_version")[0][0]
        return version

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _current(self, db: sqlite3.Connection, task_id: str, revision: int | None) -> TaskRecord:
        row = db.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE task_id = ?", (task_id,)
        ).fetchone()
        if row is None:
            raise TaskNotFoundError(f"no task {task_id!r} in {self.path}")
        record = _record(row)
        if revision is not None and record.revision != revision:
            raise StaleRevisionError(
                f"task {task_id!r} is at revision {record.revision}, not {revision}: it changed "
                "since it was read"
            )
        return record


def _json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _parse_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _labels(data: Any) -> dict[str, str]:
    if not isinstance(data, dict) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in data.items()
    ):
        raise ValueError(f"labels: not an object of strings: {data!r}")
    return data


def _record(row: tuple[Any, ...]) -> TaskRecord:
    (
        task_id,
        workload_type,
        name,
        namespace,
        backend,
        workload,
        effective,
        manifests,
        submitted_at,
        updated_at,
        revision,
        plugin_state,
        phase,
        phase_version,
        reason,
        abort_requested,
        finalized,
        labels,
        submitted_by,
    ) = row
    try:
        task = NewTask(
            task_id=task_id,
            workload_type=workload_type,
            name=name,
            namespace=namespace,
            backend=backend,
            workload=json.loads(workload),
            effective=json.loads(effective),
            manifests=tuple(json.loads(manifests)),
            submitted_at=datetime.fromisoformat(submitted_at),
            labels=_labels(json.loads(labels)),
            submitted_by=submitted_by,
        )
        return TaskRecord(
            task=task,
            revision=revision,
            updated_at=datetime.fromisoformat(updated_at),
            plugin_state=json.loads(plugin_state),
            phase=Phase(phase),
            phase_version=phase_version,
            reason=reason,
            abort_requested=bool(abort_requested),
            finalized=bool(finalized),
        )
    except (ValueError, TypeError) as error:
        raise TaskStoreError(f"task {task_id!r} is stored malformed: {error}") from error
