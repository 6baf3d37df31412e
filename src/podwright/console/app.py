"""The console's pages and live streams, as one Starlette application over the public API.

Every page is rendered on the server (Jinja2); the live parts (the table's rows, a workload's
phase, timeline, events and output) arrive as server-sent events that htmx swaps in, so the
browser runs no application code of ours beyond htmx. Everything a page shows comes from
:mod:`podwright.api`: the tasks from the :class:`~podwright.console.hub.TaskHub`'s one feed,
a submission through :func:`~podwright.api.evaluate`, :func:`~podwright.api.prepare` and
:meth:`~podwright.api.Client.submit` (the operator's webhooks judging it again), the policies
through :func:`~podwright.api.effective`. So the console adds no second path to anything.

Who gets in is :mod:`podwright.console.gate`'s to say (the token, or a trusted proxy's word);
a read-only console (the operator's, for its token's holder) refuses every change with 403.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from podwright import api
from podwright.api.client import parse_type
from podwright.api.forms import EXTRA_FIELD, SubmissionForm, workload_from_form
from podwright.console.gate import Access, Gate
from podwright.console.hub import RESYNC, Change, TaskHub
from podwright.console.sources import FALLBACK_NAMESPACE, ConsoleSources, Judges
from podwright.console.views import (
    ALL_NAMESPACES,
    Page,
    QueryError,
    TableQuery,
    age,
    endpoints,
    gpus,
    leaves,
    owned_resources,
    source_of,
    value_text,
)

KEEPALIVE_SECONDS = 15.0
"""How often a quiet stream sends a comment, so that proxies keep it open."""
ROWS_KEPT = 256
"""How many renderings of tables are kept for the streams that show them."""
ROWS_EVERY_SECONDS = 0.2
"""The least time between two renderings of a table for one page (changes in between are
shown together)."""
SUBMITTED_SECONDS = 5.0
"""How long a submission waits for the feed to show its task before it sends the browser to
the task's page."""
DELETE_SECONDS = 30.0
"""How long a delete from this machine's store waits for an active task's abort to end (the
operator's Workloads are deleted at once, their finalizer holding them until then)."""
TYPES = tuple(kind.value for kind in api.WorkloadType)
STATIC = Path(__file__).parent / "static"


@dataclasses.dataclass(frozen=True)
class ConsoleSettings:
    """How the console serves: who gets in (:class:`~podwright.console.gate.Access`); whether
    the token's holder may change anything (``read_only``); the cluster profile submissions
    are rendered with on this machine's backends (None: the default); a clock."""

    access: Access
    read_only: bool = False
    profile: str | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


PERMISSION_SECONDS = 30.0
"""How long the console trusts what the cluster said a person may do in a namespace."""


def console_app(sources: ConsoleSources, hub: TaskHub, settings: ConsoleSettings) -> Starlette:
    """The console's ASGI application (the hub started and stopped by its caller)."""
    pages = _Pages(sources, hub, settings)
    routes = [
        Route("/", pages.home),
        Route("/healthz", pages.healthz),
        Route("/workloads", pages.workloads),
        Route("/workloads/stream", pages.workloads_stream),
        Route("/workloads/{namespace}/{task_id}", pages.workload),
        Route("/workloads/{namespace}/{task_id}/stream", pages.workload_stream),
        Route("/workloads/{namespace}/{task_id}/abort", pages.abort, methods=["POST"]),
        Route("/workloads/{namespace}/{task_id}/delete", pages.delete, methods=["POST"]),
        Route("/submit", pages.submit_form),
        Route("/submit", pages.submit, methods=["POST"]),
        Route("/submit/preview", pages.preview, methods=["POST"]),
        Route("/policies", pages.policies),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(Gate, access=settings.access)
    return app


def _templates() -> Environment:
    return Environment(
        loader=PackageLoader("podwright.console", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


@dataclasses.dataclass(frozen=True)
class _Viewer:
    """Who a request is for: a person the proxy named (``identity``), whose RBAC decides which
    namespaces they see (``readable``) and what they may change; or the holder of the token,
    who sees every namespace the console reads, and changes nothing when it is read-only."""

    identity: api.Identity | None
    read_only: bool
    readable: frozenset[str] | None = None
    """None: every namespace."""

    def sees(self, namespace: str) -> bool:
        return self.readable is None or namespace in self.readable


class _Permissions:
    """What the cluster says each person may do with Workloads in a namespace, asked as them
    (a SelfSubjectAccessReview through impersonation) and remembered for
    :data:`PERMISSION_SECONDS`."""

    def __init__(self, sources: ConsoleSources) -> None:
        self._sources = sources
        self._lock = threading.Lock()
        self._answers: dict[tuple[api.Identity, str, str], tuple[bool, float]] = {}

    def may(
        self, identity: api.Identity, verb: str, namespace: str, resource: str = "workloads"
    ) -> bool:
        key = (identity, f"{verb} {resource}", namespace)
        with self._lock:
            known = self._answers.get(key)
        if known is not None and time.monotonic() - known[1] < PERMISSION_SECONDS:
            return known[0]
        try:
            with self._sources.client(identity) as client:
                answer = client.allowed(verb, namespace, resource)
        except api.PodwrightError:
            return False  # not known to be allowed: not shown, and asked again next time
        with self._lock:
            self._answers[key] = (answer, time.monotonic())
        return answer

    def readable(self, identity: api.Identity, namespaces: set[str]) -> frozenset[str] | None:
        """The namespaces among ``namespaces`` ``identity`` may list Workloads in; None when
        they may list them in every namespace (asked first, once)."""
        if self.may(identity, "list", ""):
            return None
        return frozenset(ns for ns in namespaces if self.may(identity, "list", ns))


class _Pages:
    """The handlers of :func:`console_app`'s routes."""

    def __init__(self, sources: ConsoleSources, hub: TaskHub, settings: ConsoleSettings) -> None:
        self.sources, self.hub, self.settings = sources, hub, settings
        self.templates = _templates()
        self.permissions = _Permissions(sources)
        self._rows: dict[tuple[TableQuery, frozenset[str] | None, int], str] = {}
        """The table's rows as last rendered for a query, a viewer's namespaces and the hub's
        version: every stream showing the same table renders it once per change."""

    async def viewer(self, request: Request, *namespaces: str) -> _Viewer:
        """Who ``request`` is for, with the namespaces they may read among those of the tasks
        and ``namespaces``."""
        identity = request.scope.get("state", {}).get("identity")
        if identity is None:
            return _Viewer(None, self.settings.read_only)
        present = {record.task.namespace for record in self.hub.records.values()}
        readable = await run_in_threadpool(
            self.permissions.readable, identity, present | set(namespaces)
        )
        return _Viewer(identity, False, readable)

    def offered(self, viewer: _Viewer) -> list[str]:
        """The namespaces a page offers to choose from: those ``viewer`` may read."""
        seen = sorted({record.task.namespace for record in self.hub.records.values()})
        return [name for name in self.sources.known_namespaces(seen) if viewer.sees(name)]

    def render(
        self, name: str, viewer: _Viewer | None, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        context["read_only"] = self.settings.read_only if viewer is None else viewer.read_only
        context.setdefault("backend", self.sources.backend or "this machine's store")
        html = self.templates.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status_code)

    def problem(
        self, status_code: int, message: str, viewer: _Viewer | None = None
    ) -> HTMLResponse:
        return self.render("problem.html", viewer, status_code, message=message)

    # Home and health -----------------------------------------------------------------------------

    async def home(self, _request: Request) -> Response:
        return RedirectResponse("/workloads", status_code=303)

    async def healthz(self, _request: Request) -> Response:
        return PlainTextResponse("ok\n")

    # The table -----------------------------------------------------------------------------------

    def _query(self, request: Request) -> TableQuery:
        params = request.query_params
        multi = {key: params.getlist(key) for key in params}
        return TableQuery.parse(dict(params), multi)

    def rows_html(self, query: TableQuery, viewer: _Viewer, *, shared: bool = False) -> str:
        """The table's rows for ``query`` and ``viewer``; ``shared``: as rendered once for every
        stream of the same table since the last change (their ages as of that change)."""
        if not shared:
            return self._render_rows(query, viewer)
        key = (query, viewer.readable, self.hub.version)
        html = self._rows.get(key)
        if html is None:
            if len(self._rows) > ROWS_KEPT:
                self._rows.clear()
            html = self._rows[key] = self._render_rows(query, viewer)
        return html

    def _render_rows(self, query: TableQuery, viewer: _Viewer) -> str:
        records = self.hub.records.values()
        chosen = query.select(record for record in records if viewer.sees(record.task.namespace))
        page = Page.of(chosen, query.page)
        now = self.settings.clock()
        return self.templates.get_template("rows.html").render(
            page=page,
            query=query,
            rows=[self._row(record, now) for record in page.rows],
            all_namespaces=query.namespace == ALL_NAMESPACES,
            error=self.hub.error,
        )

    def _row(self, record: api.TaskRecord, now: datetime) -> dict[str, Any]:
        task = record.task
        return {
            "id": record.task_id,
            "name": task.name,
            "namespace": task.namespace,
            "type": task.workload_type,
            "phase": record.phase.value,
            "reason": record.reason,
            "gpus": gpus(task.effective if isinstance(task.effective, Mapping) else {}),
            "age": age(now, task.submitted_at),
            "submitted": task.submitted_at.isoformat(timespec="seconds"),
            "submitted_by": task.submitted_by,
            "finalized": record.finalized,
            "abort_requested": record.abort_requested,
        }

    async def workloads(self, request: Request) -> Response:
        try:
            query = self._query(request)
        except QueryError as error:
            return self.problem(400, str(error))
        viewer = await self.viewer(request)
        namespaces = self.offered(viewer)
        return self.render(
            "workloads.html",
            viewer,
            outcome=request.query_params.get("outcome", ""),
            query=query,
            rows_html=Markup(self.rows_html(query, viewer)),
            namespaces=namespaces,
            phases=[phase.value for phase in api.Phase],
            types=TYPES,
            stream=f"/workloads/stream?{query.params()}",
        )

    async def workloads_stream(self, request: Request) -> Response:
        try:
            query = self._query(request)
        except QueryError as error:
            return self.problem(400, str(error))

        async def rows() -> AsyncIterator[str]:
            viewer = await self.viewer(request)
            with self.hub.listening() as changes:  # no change missed from here on
                shown = self.rows_html(query, viewer)  # its ages as of now, as its page's
                yield _event("rows", shown)  # what changed since the page was rendered
                while True:
                    try:
                        await asyncio.wait_for(changes.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    await asyncio.sleep(ROWS_EVERY_SECONDS)  # what comes meanwhile, together
                    while not changes.empty():
                        changes.get_nowait()
                    viewer = await self.viewer(request)  # new namespaces, checked
                    html = self.rows_html(query, viewer, shared=True)
                    if html != shown:
                        shown = html
                        yield _event("rows", html)

        return _stream(rows())

    # A workload ----------------------------------------------------------------------------------

    def _record(self, namespace: str, task_id: str, viewer: _Viewer) -> api.TaskRecord | None:
        record = self.hub.records.get(task_id)
        if record is None or record.task.namespace != namespace or not viewer.sees(namespace):
            return None
        return record

    def status_html(self, record: api.TaskRecord, read_only: bool) -> str:
        status = self.hub.status(record)
        return self.templates.get_template("status.html").render(
            record=record,
            status=status,
            history=[
                {
                    "phase": entry.phase.value,
                    "reason": entry.error_message or entry.reason,
                    "at": entry.occurred_at.isoformat(timespec="seconds"),
                }
                for entry in status.history
            ],
            events=[
                {
                    "reason": event.reason,
                    "at": event.occurred_at.isoformat(timespec="seconds")
                    if event.occurred_at
                    else "",
                }
                for event in status.events
            ],
            read_only=read_only,
            actions=f"/workloads/{record.task.namespace}/{record.task_id}",
        )

    async def workload(self, request: Request) -> Response:
        namespace, task_id = request.path_params["namespace"], request.path_params["task_id"]
        viewer = await self.viewer(request, namespace)
        record = self._record(namespace, task_id, viewer)
        if record is None:
            return self.problem(
                404,
                f"no workload {task_id!r} in namespace {namespace!r} (it may be deleted)",
                viewer,
            )
        try:
            status_html = await run_in_threadpool(self.status_html, record, viewer.read_only)
        except api.PodwrightError as error:
            return self.problem(503, str(error), viewer)
        task = record.task
        judges = await run_in_threadpool(self._judges_of, namespace)
        judged = await run_in_threadpool(self._judged_today, record, judges)
        spec = await run_in_threadpool(self._spec, record, judged, judges)
        return self.render(
            "workload.html",
            viewer,
            outcome=request.query_params.get("outcome", ""),
            record=record,
            task=task,
            status_html=Markup(status_html),
            spec=spec,
            findings=self._findings(judged),
            owned=owned_resources(task.manifests),
            endpoints=endpoints(task.manifests),
            stream=f"/workloads/{namespace}/{task_id}/stream",
        )

    def _judges_of(self, namespace: str) -> Judges | None:
        """What judges ``namespace``'s submissions, read once for a page (None: the policies
        cannot be read now)."""
        try:
            return self.sources.judges(namespace)
        except api.PodwrightError:
            return None

    def _spec(
        self, record: api.TaskRecord, judged: api.Evaluation | None, judges: Judges | None
    ) -> list[dict[str, str]]:
        """Every value of the task's effective spec with where it came from. A task of this
        machine's store kept its submission: the evaluation of it names each value's source
        (by today's policies). A Workload keeps the spec its webhook admitted, defaults
        included: a value equal to today's default is named after it, the others were
        submitted, or defaulted by a policy since changed."""
        task = record.task
        effective = task.effective if isinstance(task.effective, Mapping) else {}
        submitted = task.workload if isinstance(task.workload, Mapping) else {}
        shown = [(path, text) for path, text in leaves(effective) if path != "type"]
        if submitted != effective:
            sources = judged.sources if judged is not None and judged.accepted else {}
            paths = {path for path, _ in leaves(submitted)}
            return [
                {"path": path, "value": text, "source": source_of(path, sources, paths)}
                for path, text in shown
            ]
        defaults: dict[str, tuple[str, str]] = {}
        if judges is not None:  # else the policies cannot be read now: every value as admitted
            defaults = {
                field.path: (field.default_text, f"{field.default_source} (today's policy)")
                for field in judges.form(task.workload_type).fields
                if field.default_source
            }
        return [
            {
                "path": path,
                "value": text,
                "source": defaults[path][1]
                if path in defaults and defaults[path][0] == text
                else "admitted (submitted, or a policy's default then)",
            }
            for path, text in shown
        ]

    def _judged_today(self, record: api.TaskRecord, judges: Judges | None) -> api.Evaluation | None:
        """The task's submission judged by ``judges``, the policies of its namespace today
        (None: none apply, or its submission cannot be read back)."""
        if judges is None or judges.scope is None:
            return None
        try:
            workload = api.load(
                {
                    "apiVersion": "podwright.dev/v1alpha1",
                    "kind": "Workload",
                    "metadata": {"name": record.task.name, "namespace": record.task.namespace},
                    "spec": {"type": record.task.workload_type, **record.task.workload},
                }
            )
            return api.evaluate(
                workload, judges.policies, namespace=record.task.namespace, assets=judges.assets
            )
        except api.PodwrightError:
            return None

    def _findings(self, judged: api.Evaluation | None) -> list[dict[str, str]]:
        if judged is None:
            return []
        return [
            {
                "kind": kind,
                "field": violation.field,
                "details": violation.details,
                "policy": _owner(violation),
            }
            for kind, found in (
                ("violation", judged.violations),
                ("warning", judged.warnings),
                ("audit", judged.audited),
            )
            for violation in found
        ]

    async def workload_stream(self, request: Request) -> Response:
        namespace, task_id = request.path_params["namespace"], request.path_params["task_id"]
        viewer = await self.viewer(request, namespace)
        if not viewer.sees(namespace):
            return self.problem(404, f"no workload {task_id!r} in namespace {namespace!r}", viewer)
        if self._record(namespace, task_id, viewer) is None:  # deleted before it connected
            return _stream(_gone())
        with_output = viewer.identity is None or await run_in_threadpool(
            self.permissions.may, viewer.identity, "get", namespace, "pods/log"
        )
        return _stream(self._workload_events(task_id, viewer.read_only, with_output))

    async def _workload_events(
        self, task_id: str, read_only: bool, with_output: bool
    ) -> AsyncIterator[str]:
        """The task's status when it changes (``status``), its output as it comes (``log``,
        then ``log-end``; only the end for a person who may not read its pods' output), and
        ``gone`` when it is deleted."""
        merged: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        with self.hub.listening() as changes:
            forwarders = [asyncio.ensure_future(_forward("change", changes, merged))]
            try:
                if not with_output:
                    yield _event("log-end", "(your RBAC does not let you read its pods' output)")
                    async for event in self._events_of(task_id, read_only, merged):
                        yield event
                    return
                follower = self.hub.logs(task_id)
                try:
                    with follower.listening() as (lines, output):
                        forwarders.append(asyncio.ensure_future(_forward_lines(output, merged)))
                        if lines:
                            yield _event("log", _log_html(lines))
                        async for event in self._events_of(task_id, read_only, merged):
                            yield event
                finally:
                    self.hub.left(follower)
            finally:
                for forwarder in forwarders:
                    forwarder.cancel()

    async def _events_of(
        self, task_id: str, read_only: bool, merged: asyncio.Queue[tuple[str, object]]
    ) -> AsyncIterator[str]:
        merged.put_nowait(("change", RESYNC))  # what changed since the page was rendered
        while True:
            try:
                kind, item = await asyncio.wait_for(merged.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if kind == "change":
                if not _touches(item, task_id):
                    continue
                current = self.hub.records.get(task_id)
                if current is None:
                    yield _event("gone", "This workload was deleted.")
                    await _quietly_open()  # no reconnection to a page that is gone
                    return
                try:
                    html = await run_in_threadpool(self.status_html, current, read_only)
                except api.PodwrightError:
                    continue  # the feed is being read again: its next change tells
                yield _event("status", html)
            elif isinstance(item, list):
                yield _event("log", _log_html(item))
            else:
                yield _event("log-end", "(end of output)")

    async def abort(self, request: Request) -> Response:
        return await self._act(request, "abort")

    async def delete(self, request: Request) -> Response:
        return await self._act(request, "delete")

    async def _act(self, request: Request, action: str) -> Response:
        namespace, task_id = request.path_params["namespace"], request.path_params["task_id"]
        viewer = await self.viewer(request, namespace)
        if viewer.read_only:
            return self.problem(403, f"{action}: this console is read-only", viewer)
        if self._record(namespace, task_id, viewer) is None:
            return self.problem(404, f"no workload {task_id!r} in namespace {namespace!r}", viewer)

        # Its own namespace's client: a person may read and change Workloads only there.
        here = dataclasses.replace(self.sources, namespace=namespace, all_namespaces=False)

        def act() -> str:
            with here.client(viewer.identity) as client:
                if action == "abort":
                    return client.abort(task_id).message
                outcomes = client.delete(task_id, timeout=DELETE_SECONDS)
                errors = [str(outcome.error) for outcome in outcomes if outcome.error]
                if errors:
                    raise api.BackendError("; ".join(errors))
                return "; ".join(outcome.message for outcome in outcomes)

        try:
            message = await run_in_threadpool(act)
        except api.PodwrightError as error:
            return self.problem(409, f"{action} of {task_id}: {error}", viewer)
        target = "/workloads" if action == "delete" else f"/workloads/{namespace}/{task_id}"
        told = urlencode({"outcome": " ".join(message.split())})
        return RedirectResponse(f"{target}?{told}", status_code=303)

    # Submitting ----------------------------------------------------------------------------------

    def _submit_scope(
        self, params: Mapping[str, str], viewer: _Viewer | None = None
    ) -> tuple[str, str]:
        """The namespace and type a page is for: as given, else the console's namespace, else
        the first one the viewer may read (``default`` for the token's holder)."""
        offered = self.offered(viewer) if viewer is not None and viewer.identity else []
        namespace = (params.get("namespace") or "").strip() or (
            self.sources.namespace or (offered[0] if offered else FALLBACK_NAMESPACE)
        )
        return namespace, parse_type(params.get("type") or "training")

    def _form_context(self, viewer: _Viewer, judged: _Judged) -> dict[str, Any]:
        judges = judged.judges or self.sources.judges(judged.namespace)
        form = judged.form or judges.form(judged.workload_type)
        shown = {field.path for field in form.fields} | {"metadata.name", EXTRA_FIELD}
        general = judged.general + [
            f"{path}: {message}"
            for path, messages in judged.issues.items()
            if path not in shown
            for message in messages
        ]
        return {
            "namespace": judged.namespace,
            "workload_type": judged.workload_type,
            "types": TYPES,
            "namespaces": self.offered(viewer),
            "form": form,
            "groups": _groups(form),
            "values": judged.values,
            "issues": judged.issues,
            "general": general,
            "warnings": judged.warnings,
            "scope": str(judges.scope) if judges.scope is not None else "",
            "notes": judges.notes,
        }

    async def submit_form(self, request: Request) -> Response:
        viewer = await self.viewer(request)
        if viewer.read_only:
            return self.problem(403, "submitting: this console is read-only", viewer)
        try:
            namespace, workload_type = self._submit_scope(dict(request.query_params), viewer)
            viewer = await self.viewer(request, namespace)
            if not viewer.sees(namespace):
                return self.problem(403, f"namespace {namespace!r}: you may not read it", viewer)
            judged = _Judged(namespace, workload_type, {})
            context = await run_in_threadpool(self._form_context, viewer, judged)
        except (QueryError, api.PodwrightError) as error:
            return self.problem(400, str(error), viewer)
        return self.render("submit.html", viewer, **context)

    def _judge(self, params: Mapping[str, str]) -> _Judged:
        """The form's workload judged as the webhook judges it: every issue at its field (or
        in general), and the warnings."""
        namespace, workload_type = self._submit_scope(params)
        values = {key: value.replace("\r\n", "\n") for key, value in params.items()}
        judges = self.sources.judges(namespace)
        form = judges.form(workload_type)
        judged = _Judged(namespace, workload_type, values, judges, form)
        defaults = {field.path: field.default_text for field in form.fields}
        given = {
            path: value
            for key, value in values.items()
            if key.startswith("spec.")
            # a default the form filled in and nobody changed stays the policy's
            and value != defaults.get(path := key[len("spec.") :])
        }
        try:
            judged.workload = workload_from_form(
                workload_type,
                given,
                name=values.get("metadata.name", "").strip(),
                namespace=namespace,
                extra=values.get(EXTRA_FIELD, ""),
            )
        except api.InvalidInputError as error:
            for field, message in _field_problems(error):
                judged.issue(field, message)
            return judged
        try:
            judged.evaluation = api.evaluate(
                judged.workload, judges.policies, namespace=namespace, assets=judges.assets
            )
        except api.PodwrightError as error:
            judged.general.append(str(error))
            return judged
        for violation in judged.evaluation.violations:
            owner = _owner(violation)
            judged.issue(
                _form_path(violation.field),
                f"{violation.details} ({owner})" if owner else violation.details,
            )
        judged.warnings = [
            f"{_form_path(warning.field)}: {warning.details} ({_owner(warning)}, warn)"
            for warning in judged.evaluation.warnings
        ]
        return judged

    async def _judged_form(self, request: Request, viewer: _Viewer) -> _Judged | Response:
        """The submitted form judged, once its namespace is known to be one the viewer may read
        (nothing of another's is judged, nor shown); else the refusal."""
        params = {key: str(value) for key, value in (await request.form()).items()}
        try:
            namespace, _type = self._submit_scope(params)
            viewer = await self.viewer(request, namespace)
            if not viewer.sees(namespace):
                return self.problem(403, f"namespace {namespace!r}: you may not read it", viewer)
            judged: _Judged = await run_in_threadpool(self._judge, params)
        except (QueryError, api.PodwrightError) as error:
            return self.problem(400, str(error), viewer)
        return judged

    async def preview(self, request: Request) -> Response:
        """The Workload the form makes, as YAML, and every issue with it."""
        judged = await self._judged_form(request, await self.viewer(request))
        if isinstance(judged, Response):
            return judged
        html = self.templates.get_template("preview.html").render(
            yaml=api.to_yaml(judged.workload.to_document()) if judged.workload else "",
            issues=judged.issues,
            general=judged.general,
            warnings=judged.warnings,
        )
        return HTMLResponse(html)

    async def submit(self, request: Request) -> Response:
        viewer = await self.viewer(request)
        if viewer.read_only:
            return self.problem(403, "submitting: this console is read-only", viewer)
        judged = await self._judged_form(request, viewer)
        if isinstance(judged, Response):
            return judged
        viewer = await self.viewer(request, judged.namespace)
        if judged.workload is not None and not judged.issues and not judged.general:
            try:
                submitted = await run_in_threadpool(self._submit, judged, viewer)
            except api.PodwrightError as error:
                judged.general.append(str(error))
            else:  # its page shows it once the feed has
                await run_in_threadpool(self.hub.wait_for, submitted.task_id, SUBMITTED_SECONDS)
                return RedirectResponse(
                    f"/workloads/{judged.namespace}/{submitted.task_id}", status_code=303
                )
        try:
            context = await run_in_threadpool(self._form_context, viewer, judged)
        except api.PodwrightError as error:
            return self.problem(503, "; ".join([*judged.general, str(error)]), viewer)
        return self.render("submit.html", viewer, 422, **context)

    def _submit(self, judged: _Judged, viewer: _Viewer) -> api.SubmittedTask:
        """Submit the judged form's workload: to the operator as it is (the cluster's webhooks
        judge it again), else prepared from its evaluation, as ``podwright run`` does."""
        workload, evaluation, judges = judged.workload, judged.evaluation, judged.judges
        assert workload is not None  # judged without an issue: made, and by these judges
        assert judges is not None
        with self.sources.client(viewer.identity) as client:
            if self.sources.is_operator:
                return client.submit(workload)
            prepared = api.prepare(
                evaluation if evaluation is not None and judges.scope is not None else workload,
                namespace=judged.namespace,
                assets=judges.assets if evaluation is not None else None,
                profile=self.settings.profile,
            )
            return client.submit(prepared)

    # Policies ------------------------------------------------------------------------------------

    async def policies(self, request: Request) -> Response:
        params = dict(request.query_params)
        try:
            viewer = await self.viewer(request)
            namespace, workload_type = self._submit_scope(params, viewer)
            viewer = await self.viewer(request, namespace)
            if not viewer.sees(namespace):
                return self.problem(403, f"namespace {namespace!r}: you may not read it", viewer)
            context = await run_in_threadpool(
                self._policies_context, viewer, namespace, workload_type
            )
        except (QueryError, api.PodwrightError) as error:
            return self.problem(400, str(error))
        return self.render("policies.html", viewer, **context)

    def _policies_context(
        self, viewer: _Viewer, namespace: str, workload_type: str
    ) -> dict[str, Any]:
        judges = self.sources.judges(namespace)
        entries: list[dict[str, str]] = []
        if judges.scope is not None:
            combined = api.effective(judges.policies, judges.scope, workload_type)
            _document, found = api.pipeline.effective_document(combined)
            entries = [
                {"path": entry.path, "value": value_text(entry.value), "scope": str(entry.scope)}
                for entry in found
            ]
        report = self._report(judges)
        return {
            "namespace": namespace,
            "workload_type": workload_type,
            "types": TYPES,
            "namespaces": self.offered(viewer),
            "scope": str(judges.scope) if judges.scope is not None else "",
            "entries": entries,
            "report": report,
            "judged": sum(
                1 for record in self.hub.records.values() if record.task.namespace == namespace
            ),
        }

    def _report(self, judges: Judges) -> list[dict[str, Any]]:
        """The namespace's workloads that today's policies would refuse, each with its issues
        (the operator's: as ``podwright policy report`` judges them)."""
        if self.sources.is_operator:
            report = api.compliance_report(
                api.ClusterAccess(self.sources.kubeconfig, self.sources.context),
                judges.namespace,
                cluster_name=self.sources.cluster_name,
            )
            return [
                {"name": entry.name, "reason": entry.reason, "issues": list(entry.issues)}
                for entry in report.entries
            ]
        found = []
        for record in self.hub.records.values():
            if record.task.namespace != judges.namespace or judges.scope is None:
                continue
            judged = self._judged_today(record, judges)
            if judged is not None and not judged.accepted:
                found.append(
                    {
                        "name": record.task.name,
                        "reason": "Noncompliant",
                        "issues": [
                            f"{violation.field}: {violation.details}"
                            for violation in judged.violations
                        ],
                    }
                )
        return found


@dataclasses.dataclass
class _Judged:
    """A submitted form as judged: its namespace and type, its values, the workload it makes
    and its evaluation, its issues by field (``metadata.name``, a spec field, ``extra``), those
    of no field, and the warnings of rules that only warn."""

    namespace: str
    workload_type: str
    values: Mapping[str, str]
    judges: Judges | None = None
    """What judged it (None: not judged yet, a form just opened)."""
    form: SubmissionForm | None = None
    workload: api.Workload | None = None
    evaluation: api.Evaluation | None = None
    issues: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    general: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)

    def issue(self, field: str, message: str) -> None:
        (self.issues.setdefault(field, []) if field else self.general).append(message)


def _owner(violation: api.Violation) -> str:
    """The policy that owns a broken rule, as a person names it: ``cluster-prod (cluster
    prod)``; empty for the workload's own consistency."""
    policy = violation.policy
    return "" if policy is None else f"{policy.name} ({policy.scope})"


def _groups(form: SubmissionForm) -> list[tuple[str, list[dict[str, Any]]]]:
    """The form's fields by section, each as its input shows it."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for field in form.fields:
        grouped.setdefault(field.group, []).append(_input(field))
    return [(" › ".join(group.split(".")), fields) for group, fields in grouped.items()]


def _input(field: api.FormField) -> dict[str, Any]:
    """What the input of ``field`` shows: its value's kind, its bounds, its choices, and a hint
    that names where its default and its rules come from."""
    hints = []
    if field.default_source and field.default_text:
        hints.append(f"default {field.default_text} from {field.default_source}")
    if field.default_from:
        hints.append(field.default_from)
    limits = [
        f"{word} {value_text(value)}"
        for word, value in (("min", field.minimum), ("max", field.maximum), ("step", field.step))
        if value is not None
    ]
    if limits or field.options or field.required:
        owner = field.rule_source or "the policy"
        rules = ", ".join([*(["required"] if field.required else []), *limits])
        if field.options:
            rules = ", ".join(filter(None, [rules, "one of the options"]))
        mode = "" if field.enforcement in (None, "enforce") else f", {field.enforcement}"
        hints.append(f"{rules} ({owner}{mode})")
    if field.locked:
        hints.append(f"locked by {field.locked_by}")
    if field.frameworks:
        hints.append(f"{', '.join(field.frameworks)} only")
    numeric = field.value_type in ("integer", "number")
    enforced = field.enforcement in (None, "enforce")  # warn and audit rules do not refuse
    return {
        "path": field.path,
        "label": field.label,
        "value_type": field.value_type,
        "default_text": field.default_text,
        "required": field.required and enforced,
        "locked": field.locked and enforced,
        "minimum": value_text(field.minimum)
        if numeric and enforced and field.minimum is not None
        else None,
        "maximum": value_text(field.maximum)
        if numeric and enforced and field.maximum is not None
        else None,
        "step": value_text(field.step) if enforced and field.step is not None else None,
        "pairs": (
            [(value_text(value), shown) for value, shown in field.options] if enforced else []
        )
        or [(choice, choice) for choice in field.choices],
        "hint": "; ".join(hints),
    }


def _field_problems(error: api.InvalidInputError) -> list[tuple[str, str]]:
    if error.field_problems:
        return [(_form_path(field), message) for field, message in error.field_problems]
    return [("", line) for line in error.problems]


def _form_path(field: str) -> str:
    """A violation's field as the form names it (``spec.compute.x`` and ``compute.x`` alike)."""
    return field[len("spec.") :] if field.startswith("spec.") else field


async def _forward(
    kind: str, source: asyncio.Queue[object], into: asyncio.Queue[tuple[str, object]]
) -> None:
    while True:
        into.put_nowait((kind, await source.get()))


async def _forward_lines(
    source: asyncio.Queue[object], into: asyncio.Queue[tuple[str, object]]
) -> None:
    """The output's lines in bursts (those that came together, as one list), then its end
    (None)."""
    while True:
        burst: list[str] = []
        item = await source.get()
        while item is not None:
            burst.append(str(item))
            if source.empty():
                break
            item = source.get_nowait()
        if burst:
            into.put_nowait(("lines", burst))
        if item is None:
            into.put_nowait(("lines", None))
            return


def _touches(change: object, task_id: str) -> bool:
    return change is RESYNC or (
        isinstance(change, Change) and (task_id in change.changed or task_id in change.removed)
    )


def _log_html(lines: list[str]) -> str:
    return "".join(f"<div>{escape(line)}</div>" for line in lines)


def _event(name: str, data: str) -> str:
    """One server-sent event: its name, and its data line by line (any line break ends a
    line, so nothing in the data can end the event or start another)."""
    body = "\n".join(f"data: {line}" for line in data.splitlines() or [""])
    return f"event: {name}\n{body}\n\n"


async def _gone() -> AsyncIterator[str]:
    """The stream of a workload that is no more: it says so, then stays quietly open."""
    yield _event("gone", "This workload was deleted.")
    await _quietly_open()


async def _quietly_open() -> None:
    """Keep a finished stream open, sending nothing (the client would reconnect to a closed
    one); the page leaving ends it."""
    await asyncio.Event().wait()


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
