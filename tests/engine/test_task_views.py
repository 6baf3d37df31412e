"""Tasks as plain data (what ``list -o json`` and ``status -o json`` print), and which tasks a
listing shows in which order."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podwright.core.label_selectors import parse_label_selector
from podwright.core.lifecycle.phases import ErrorKind, Phase
from podwright.engine.task_store import AttachedEvent, HistoryEntry, NewTask, TaskRecord
from podwright.engine.task_views import (
    SortKey,
    TaskFilter,
    event_item,
    history_item,
    in_order,
    phase_change,
    sort_tasks,
    task_event,
    task_item,
    task_list,
    task_status,
    utc_time,
)

T0 = datetime(2026, 11, 27, 15, 8, 5, 123456, tzinfo=UTC)


def record(
    task_id: str = "resnet-1",
    *,
    name: str = "resnet",
    workload_type: str = "training",
    phase: Phase = Phase.RUNNING,
    submitted_at: datetime = T0,
    updated_at: datetime = T0 + timedelta(minutes=1),
    finalized: bool = False,
    labels: dict[str, str] | None = None,
    submitted_by: str = "alice",
) -> TaskRecord:
    task = NewTask(
        task_id=task_id,
        workload_type=workload_type,
        name=name,
        namespace="research",
        backend="kubernetes/lab",
        workload={},
        effective={},
        manifests=(),
        submitted_at=submitted_at,
        labels=labels if labels is not None else {"team": "vision", "env": "prod"},
        submitted_by=submitted_by,
    )
    return TaskRecord(
        task=task,
        revision=3,
        updated_at=updated_at,
        plugin_state={},
        phase=phase,
        phase_version=2,
        reason="started",
        abort_requested=False,
        finalized=finalized,
    )


def test_a_task_item_has_every_key_camel_cased_with_rfc3339_utc_times() -> None:
    assert task_item(record()) == {
        "kind": "Task",
        "id": "resnet-1",
        "name": "resnet",
        "namespace": "research",
        "type": "training",
        "backend": "kubernetes/lab",
        "phase": "Running",
        "reason": "started",
        "submittedAt": "2026-11-27T15:08:05Z",
        "submittedBy": "alice",
        "updatedAt": "2026-11-27T15:09:05Z",
        "active": True,
        "abortRequested": False,
        "labels": {"env": "prod", "team": "vision"},
    }


def test_who_submitted_a_task_recorded_before_submitters_were_is_told_empty() -> None:
    assert task_item(record(submitted_by=""))["submittedBy"] == ""


def test_the_backend_shown_may_be_the_commands_and_a_finalized_task_is_not_active() -> None:
    item = task_item(record(finalized=True), backend="operator/lab")
    assert (item["backend"], item["active"]) == ("operator/lab", False)


@pytest.mark.parametrize(
    ("moment", "shown"),
    [
        pytest.param(T0, "2026-11-27T15:08:05Z", id="utc-fraction-dropped"),
        pytest.param(
            datetime(2026, 11, 27, 17, 8, 5, tzinfo=timezone(timedelta(hours=2))),
            "2026-11-27T15:08:05Z",
            id="other-zone",
        ),
        pytest.param(datetime(2026, 11, 27, 15, 8, 5), "2026-11-27T15:08:05Z", id="no-zone"),
        pytest.param(datetime.min, "0001-01-01T00:00:00Z", id="min"),
    ],
)
def test_times_are_rfc3339_in_utc_to_the_second(moment: datetime, shown: str) -> None:
    assert utc_time(moment) == shown


FAILED = HistoryEntry(
    Phase.PERMANENT_FAILURE,
    3,
    "OOMKilled",
    T0,
    error_code="OOMKilled",
    error_message="the container ran out of memory",
    error_kind=ErrorKind.USER,
)


@pytest.mark.parametrize(
    ("entry", "item"),
    [
        pytest.param(
            HistoryEntry(Phase.QUEUED, 1, "created", T0),
            {
                "phase": "Queued",
                "version": 1,
                "reason": "created",
                "occurredAt": "2026-11-27T15:08:05Z",
            },
            id="no-error",
        ),
        pytest.param(
            FAILED,
            {
                "phase": "PermanentFailure",
                "version": 3,
                "reason": "OOMKilled",
                "occurredAt": "2026-11-27T15:08:05Z",
                "error": {
                    "code": "OOMKilled",
                    "message": "the container ran out of memory",
                    "kind": "user",
                },
            },
            id="error",
        ),
        pytest.param(
            HistoryEntry(Phase.ABORTED, 1, "", T0, error_message="stopped"),
            {
                "phase": "Aborted",
                "version": 1,
                "reason": "",
                "occurredAt": "2026-11-27T15:08:05Z",
                "error": {"code": "", "message": "stopped", "kind": None},
            },
            id="error-message-only",
        ),
    ],
)
def test_history_items(entry: HistoryEntry, item: dict[str, object]) -> None:
    assert history_item(entry) == item


@pytest.mark.parametrize(
    ("event", "item"),
    [
        pytest.param(
            AttachedEvent("Pulled: image", T0),
            {"reason": "Pulled: image", "occurredAt": "2026-11-27T15:08:05Z"},
            id="timed",
        ),
        pytest.param(
            AttachedEvent("Started", None), {"reason": "Started", "occurredAt": None}, id="untimed"
        ),
    ],
)
def test_event_items(event: AttachedEvent, item: dict[str, object]) -> None:
    assert event_item(event) == item


def test_a_status_is_the_item_with_its_history_and_events_and_all_of_it_is_json() -> None:
    events = [AttachedEvent("Pulled", T0)]
    status = task_status(record(), [FAILED], events, backend="operator/lab")
    assert status == {
        **task_item(record(), backend="operator/lab"),
        "history": [history_item(FAILED)],
        "events": [event_item(events[0])],
    }
    assert json.loads(json.dumps(status)) == status


def test_a_list_and_the_lines_of_a_watch() -> None:
    assert task_list([]) == {"kind": "TaskList", "items": []}
    assert task_list([task_item(record())]) == {"kind": "TaskList", "items": [task_item(record())]}
    assert phase_change("resnet-1", FAILED) == {
        "kind": "TaskPhase",
        "taskId": "resnet-1",
        **history_item(FAILED),
    }
    assert task_event("resnet-1", AttachedEvent("Started", None)) == {
        "kind": "TaskEvent",
        "taskId": "resnet-1",
        "reason": "Started",
        "occurredAt": None,
    }


def test_phases_and_events_come_in_the_order_they_happened() -> None:
    queued = HistoryEntry(Phase.QUEUED, 1, "", T0)
    running = HistoryEntry(Phase.RUNNING, 2, "", T0 + timedelta(seconds=5))
    scheduled = AttachedEvent("Scheduled", T0)
    pulled = AttachedEvent("Pulled", datetime(2026, 11, 27, 15, 8, 7))  # no zone: UTC
    untimed = AttachedEvent("Started", None)
    now = T0 + timedelta(seconds=3)
    assert in_order([queued, running], [scheduled, untimed, pulled], now=now) == [
        (T0, queued),
        (T0, scheduled),
        (datetime(2026, 11, 27, 15, 8, 7, tzinfo=UTC), pulled),
        (now, untimed),
        (T0 + timedelta(seconds=5), running),
    ]


# Filters. ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_filter", "matches"),
    [
        pytest.param(TaskFilter(), True, id="none"),
        pytest.param(TaskFilter(phases=frozenset({Phase.RUNNING})), True, id="phase"),
        pytest.param(
            TaskFilter(phases=frozenset({Phase.QUEUED, Phase.SUCCESS})), False, id="other-phases"
        ),
        pytest.param(TaskFilter(types=frozenset({"training", "inference"})), True, id="type"),
        pytest.param(TaskFilter(types=frozenset({"workspace"})), False, id="other-type"),
        pytest.param(
            TaskFilter(selector=parse_label_selector("team=vision,env")), True, id="selector"
        ),
        pytest.param(TaskFilter(selector=parse_label_selector("!env")), False, id="not-selected"),
        pytest.param(TaskFilter(active_only=True), True, id="active"),
        pytest.param(
            TaskFilter(
                phases=frozenset({Phase.RUNNING}), types=frozenset({"workspace"}), active_only=True
            ),
            False,
            id="all-must-hold",
        ),
    ],
)
def test_filters(task_filter: TaskFilter, matches: bool) -> None:
    assert task_filter.matches(record()) is matches


def test_a_finalized_task_is_left_out_of_the_active_ones() -> None:
    assert not TaskFilter(active_only=True).matches(record(finalized=True))
    assert TaskFilter().matches(record(finalized=True))


def test_a_filter_is_true_when_it_leaves_anything_out() -> None:
    assert not TaskFilter()
    assert not TaskFilter(selector=parse_label_selector(""))
    assert TaskFilter(active_only=True)
    assert TaskFilter(selector=parse_label_selector("a"))


# Sorting. ----------------------------------------------------------------------------------------

TASKS = [
    record("c-1", name="c", workload_type="inference", phase=Phase.SUCCESS, submitted_at=T0),
    record(
        "a-2",
        name="a",
        workload_type="workspace",
        phase=Phase.QUEUED,
        submitted_at=T0 + timedelta(seconds=2),
        updated_at=T0,
    ),
    record("b-1", name="b", workload_type="training", phase=Phase.ABORTED, submitted_at=T0),
    record("a-1", name="a", workload_type="training", phase=Phase.QUEUED, submitted_at=T0),
]


@pytest.mark.parametrize(
    ("key", "order"),
    [
        pytest.param(SortKey.SUBMITTED, ["a-1", "b-1", "c-1", "a-2"], id="submitted"),
        pytest.param(SortKey.UPDATED, ["a-2", "a-1", "b-1", "c-1"], id="updated"),
        pytest.param(SortKey.NAME, ["a-1", "a-2", "b-1", "c-1"], id="name"),
        pytest.param(SortKey.PHASE, ["a-1", "a-2", "c-1", "b-1"], id="phase-lifecycle-order"),
        pytest.param(SortKey.TYPE, ["c-1", "a-1", "b-1", "a-2"], id="type"),
    ],
)
def test_sorting_by_each_key_with_the_id_breaking_ties(key: SortKey, order: list[str]) -> None:
    assert [found.task_id for found in sort_tasks(TASKS, key)] == order


def test_submissions_without_a_zone_sort_as_utc() -> None:
    naive = record("n-1", submitted_at=datetime(2026, 11, 27, 15, 8, 6))
    assert [found.task_id for found in sort_tasks([naive, *TASKS])][-2:] == ["n-1", "a-2"]


@given(st.permutations(TASKS), st.sampled_from(SortKey))
def test_the_order_does_not_depend_on_the_order_read(
    shuffled: list[TaskRecord], key: SortKey
) -> None:
    assert sort_tasks(shuffled, key) == sort_tasks(TASKS, key)


def test_labels_are_copied_not_shared() -> None:
    labels = {"team": "vision"}
    item = task_item(
        dataclasses.replace(record(), task=dataclasses.replace(record().task, labels=labels))
    )
    item["labels"]["team"] = "changed"
    assert labels == {"team": "vision"}
