"""What the console's pages show, worked out from plain data: no I/O, no clock (``now`` is
passed in), so that every choice of what a person sees is tested without a browser.

The table of workloads is one :class:`TableQuery` (the page's URL: namespace, filters, order,
page) applied to the tasks in memory; a task's row, its age and GPUs, its effective spec as
dotted paths with the source of each value, are derived here too.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from urllib.parse import urlencode

from podwright import api

PAGE_SIZE = 100
"""Rows per page of the table: the first page of a namespace of 5,000 renders at once."""
SORT_KEYS = ("submitted", "updated", "name", "phase", "type")
ALL_NAMESPACES = "*"
"""The ``namespace`` of the table that shows every namespace the console can read."""


class QueryError(ValueError):
    """A page's query parameter that cannot be used: its name and what is allowed."""


@dataclasses.dataclass(frozen=True)
class TableQuery:
    """What the table shows: the tasks of ``namespace`` (:data:`ALL_NAMESPACES`: all) of the
    given phases, types and label selector, in the order of ``sort`` (``descending``: newest,
    last, Z first), page ``page`` (from 1)."""

    namespace: str = ALL_NAMESPACES
    phases: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    selector: str = ""
    sort: str = "submitted"
    descending: bool = True
    page: int = 1

    @classmethod
    def parse(cls, params: Mapping[str, str], multi: Mapping[str, Sequence[str]]) -> TableQuery:
        """The query of a page's URL parameters (``multi``: every value of each); a parameter
        that cannot be used is a :class:`QueryError` naming it."""
        sort = params.get("sort") or "submitted"
        if sort not in SORT_KEYS:
            raise QueryError(f"sort {sort!r}: one of {', '.join(SORT_KEYS)}")
        order = params.get("order") or "desc"
        if order not in ("asc", "desc"):
            raise QueryError(f"order {order!r}: asc or desc")
        page_text = params.get("page") or "1"
        if not page_text.isdigit() or int(page_text) < 1:
            raise QueryError(f"page {page_text!r}: a whole number from 1")
        phases = tuple(value for value in multi.get("phase", ()) if value)
        types = tuple(value for value in multi.get("type", ()) if value)
        query = cls(
            namespace=params.get("namespace") or ALL_NAMESPACES,
            phases=phases,
            types=types,
            selector=params.get("label", "").strip(),
            sort=sort,
            descending=order == "desc",
            page=int(page_text),
        )
        try:
            query.select([])  # the phases, types and selector, checked as the API checks them
        except api.InvalidInputError as error:
            raise QueryError(str(error)) from None
        return query

    def select(self, records: Iterable[api.TaskRecord]) -> list[api.TaskRecord]:
        """The tasks this query shows, in its order (every page)."""
        chosen = api.select_tasks(
            (
                record
                for record in records
                if self.namespace in (ALL_NAMESPACES, record.task.namespace)
            ),
            phases=self.phases,
            types=self.types,
            selector=self.selector,
            sort_by=self.sort,
        )
        if self.descending:
            chosen.reverse()
        return chosen

    def params(self, **changes: object) -> str:
        """This query's URL parameters, with ``changes``."""
        query = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        pairs: list[tuple[str, str]] = []
        if query.namespace != ALL_NAMESPACES:
            pairs.append(("namespace", query.namespace))
        pairs += [("phase", phase) for phase in query.phases]
        pairs += [("type", kind) for kind in query.types]
        if query.selector:
            pairs.append(("label", query.selector))
        if query.sort != "submitted":
            pairs.append(("sort", query.sort))
        if not query.descending:
            pairs.append(("order", "asc"))
        if query.page != 1:
            pairs.append(("page", str(query.page)))
        return urlencode(pairs)

    def sorted_by(self, key: str) -> str:
        """The parameters of the table sorted by ``key`` (again: the other way round)."""
        descending = not self.descending if key == self.sort else key in ("submitted", "updated")
        return self.params(sort=key, descending=descending, page=1)


@dataclasses.dataclass(frozen=True)
class Page:
    """One page of the table's rows."""

    rows: list[api.TaskRecord]
    number: int
    count: int
    total: int

    @classmethod
    def of(cls, chosen: Sequence[api.TaskRecord], number: int) -> Page:
        count = max(1, math.ceil(len(chosen) / PAGE_SIZE))
        number = min(number, count)
        start = (number - 1) * PAGE_SIZE
        return cls(list(chosen[start : start + PAGE_SIZE]), number, count, len(chosen))


def age(now: datetime, then: datetime) -> str:
    """How long ago, as kubectl prints ages: ``45s``, ``12m``, ``3h20m``, ``6d``."""
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60}m" if hours < 8 and minutes % 60 else f"{hours}h"
    return f"{hours // 24}d"


def duration(value: timedelta) -> str:
    """A duration in a few characters (``1m5s``)."""
    seconds = max(0, int(value.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    return f"{seconds // 60}m{seconds % 60}s" if seconds < 3600 else f"{seconds // 3600}h"


def gpus(effective: Mapping[str, object]) -> str:
    """The GPUs a workload asks for, from its effective spec: devices (``2``), or a portion of
    one (``0.5``); a distributed workload's master and workers added up (``worker.numWorkers``
    of them)."""

    def role_gpus(role: Mapping[str, object]) -> float:
        compute = role.get("compute")
        if not isinstance(compute, Mapping):
            return 0.0
        devices = compute.get("gpuDevicesRequest")
        portion = compute.get("gpuPortionRequest")
        count = float(devices) if isinstance(devices, int | float) else 0.0
        if isinstance(portion, int | float):
            count = max(count, 1.0) * float(portion) if count else float(portion)
        return count

    total = role_gpus(effective)
    if effective.get("type") == "distributed":
        master, worker = effective.get("master"), effective.get("worker")
        if isinstance(master, Mapping):
            total += role_gpus(master)
        if isinstance(worker, Mapping):
            workers = worker.get("numWorkers", 1)
            total += role_gpus(worker) * (workers if isinstance(workers, int) else 1)
    if total == 0:
        return ""
    return str(int(total)) if total.is_integer() else f"{total:g}"


def leaves(value: object, prefix: str = "") -> list[tuple[str, str]]:
    """Every leaf of a spec as (dotted path, its value as text), an itemized field's instances
    by index (``environmentVariables[0].name``), in the spec's order."""
    if isinstance(value, Mapping):
        found: list[tuple[str, str]] = []
        for key, item in value.items():
            found += leaves(item, f"{prefix}.{key}" if prefix else str(key))
        return found
    if isinstance(value, list) and any(isinstance(item, Mapping) for item in value):
        found = []
        for index, item in enumerate(value):
            found += leaves(item, f"{prefix}[{index}]")
        return found
    return [(prefix, value_text(value))]


def value_text(value: object) -> str:
    """A value as a person reads it: strings bare, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def source_of(path: str, sources: Mapping[str, str], submitted: set[str]) -> str:
    """Where the value at ``path`` came from: the evaluation's own source (an itemized
    instance's by its field), else the submission when it wrote it."""
    for candidate in _ancestors(path):
        if candidate in sources:
            return sources[candidate]
    return "submission" if path in submitted else ""


def _ancestors(path: str) -> list[str]:
    """``a.b[0].c`` and the paths above it, the nearest first."""
    found = [path]
    while True:
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            return found
        path = path[:cut]
        found.append(path)


def owned_resources(manifests: Sequence[Mapping[str, object]]) -> list[tuple[str, str]]:
    """The (kind, name) of each resource a task creates, in the order they are applied."""
    owned = []
    for manifest in manifests:
        metadata = manifest.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        owned.append((str(manifest.get("kind", "?")), str(name or "")))
    return owned


def endpoints(manifests: Sequence[Mapping[str, object]]) -> list[str]:
    """Where a workspace or an inference service is reached: its Ingress hosts and paths, its
    Knative Service's host, its Services' ports (``service/name:port``)."""
    found: list[str] = []
    for manifest in manifests:
        kind, spec = manifest.get("kind"), manifest.get("spec")
        metadata = manifest.get("metadata")
        name = metadata.get("name", "") if isinstance(metadata, Mapping) else ""
        if not isinstance(spec, Mapping):
            continue
        if kind == "Ingress":
            for rule in _mappings(spec.get("rules")):
                host = rule.get("host", "")
                http = rule.get("http")
                paths = _mappings(http.get("paths")) if isinstance(http, Mapping) else []
                for entry in paths or [{"path": "/"}]:
                    found.append(f"http://{host}{entry.get('path', '/')}")
        elif kind == "Service" and manifest.get("apiVersion") == "serving.knative.dev/v1":
            namespace = metadata.get("namespace", "") if isinstance(metadata, Mapping) else ""
            found.append(f"http://{name}.{namespace}.svc (Knative)")
        elif kind == "Service":
            for port in _mappings(spec.get("ports")):
                found.append(f"service/{name}:{port.get('port')}")
    return found


def _mappings(value: object) -> list[Mapping[str, object]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
