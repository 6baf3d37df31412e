"""The workloads table as the console serves it to many pages at once, without a browser: one
rendering of a table for every page that shows it, made again when a task changes."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from podwright import api
from podwright.console.app import ConsoleSettings, _Pages, _Viewer
from podwright.console.gate import Access, fixed
from podwright.console.hub import TaskHub
from podwright.console.sources import ConsoleSources
from podwright.console.views import TableQuery
from podwright.engine.workload_tasks import pending_record

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def task(name: str, phase: api.Phase, revision: int = 1) -> api.TaskRecord:
    workload = {
        "apiVersion": "podwright.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "vision",
            "uid": f"{name[:4]:0<8}-0000-0000-0000-000000000000",
            "creationTimestamp": "2026-11-29T11:00:00Z",
        },
        "spec": {"type": "training"},
    }
    return dataclasses.replace(pending_record(workload, "", NOW), phase=phase, revision=revision)


def published(hub: TaskHub, *records: api.TaskRecord) -> None:
    hub._publish({record.task_id: record for record in records}, recovered=False)


def test_every_stream_of_a_table_shares_its_rendering_until_a_task_changes() -> None:
    clock = [NOW]
    hub = TaskHub(lambda: pytest.fail("nothing here reads a feed"))
    published(hub, task("alpha", api.Phase.RUNNING), task("beta", api.Phase.QUEUED))
    settings = ConsoleSettings(Access(fixed("token")), clock=lambda: clock[0])
    pages = _Pages(ConsoleSources(), hub, settings)
    table = TableQuery(namespace="vision")
    everyone = _Viewer(None, read_only=False)

    first = pages.rows_html(table, everyone, shared=True)
    assert 'data-phase="Running"' in first
    assert 'data-phase="Queued"' in first
    assert pages.rows_html(table, everyone, shared=True) is first  # another page's stream
    queued = pages.rows_html(TableQuery(namespace="vision", phases=("Queued",)), everyone)
    assert 'data-phase="Running"' not in queued
    alone = _Viewer(api.Identity("alice"), read_only=False, readable=frozenset({"vision"}))
    assert pages.rows_html(table, alone, shared=True) is not first  # her namespaces' own
    nobody = _Viewer(api.Identity("bob"), read_only=False, readable=frozenset())
    assert 'data-phase="Running"' not in pages.rows_html(table, nobody, shared=True)

    published(hub, task("alpha", api.Phase.RUNNING), task("beta", api.Phase.QUEUED))
    assert pages.rows_html(table, everyone, shared=True) is first  # read again, nothing changed

    published(hub, task("alpha", api.Phase.SUCCESS, 2), task("beta", api.Phase.QUEUED))
    changed = pages.rows_html(table, everyone, shared=True)
    assert 'data-phase="Success"' in changed
    assert 'data-phase="Running"' not in changed
    assert pages.rows_html(table, everyone, shared=True) is changed

    clock[0] += timedelta(hours=3)  # a page loaded later: its own rendering, its ages now
    assert pages.rows_html(table, everyone) is not changed
    assert ">4h<" in pages.rows_html(table, everyone)  # submitted at 11:00, now 15:00

    published(hub, task("alpha", api.Phase.SUCCESS, 2))  # beta gone
    assert 'data-phase="Queued"' not in pages.rows_html(table, everyone, shared=True)
