"""The console's pages and live streams, as one Starlette application over the public API.

Every page is rendered on the server (Jinja2); the live parts (the table's rows, a workload's
phase, timeline, events and output) arrive as server-sent events that htmx swaps in, so the
browser runs no application code of ours beyond htmx. Everything a page shows comes from
:mod:`podwright.api`: the tasks from the :class:`~podwright.console.hub.TaskHub`'s one feed,
a submission through :func:`~podwright.api.evaluate`, :func:`~podwright.api.prepare` and
:meth:`~podwright.api.Client.submit` (the operator's webhooks judging it again), the policies
through :func:`~podwright.api.effective`. So the console adds no second path to anything.

Every request but ``/healthz`` carries the console's token: in the URL printed at start
(``?token=``, then kept in a cookie that only this site sends back), or as ``Authorization:
Bearer``. A read-only console (the operator's, without an authenticating proxy) refuses every
change with 403.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hmac
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
from starlette.types import ASGIApp, Receive, Scope, Send

from podwright import api
from podwright.api.forms import SubmissionForm, workload_from_form
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

TOKEN_COOKIE = "podwright_console_token"
KEEPALIVE_SECONDS = 15.0
"""How often a quiet stream sends a comment, so that proxies keep it open."""
ROWS_EVERY_SECONDS = 0.2
"""The least time between two renderings of a table for one page (changes in between are
shown together)."""
RENDERINGS_KEPT = 64
"""How many tables' latest renderings are kept to be shared (the least recently used go)."""
SUBMITTED_SECONDS = 5.0
"""How long a workload's page waits for the feed to show a task it does not know yet (one
submitted a moment ago)."""
DELETE_SECONDS = 30.0
"""How long a delete from this machine's store waits for an active task's abort to end (the
operator's Workloads are deleted at once, their finalizer holding them until then)."""
TYPES = ("workspace", "training", "distributed", "inference")
STATIC = Path(__file__).parent / "static"


@dataclasses.dataclass(frozen=True)
class ConsoleSettings:
    """How the console serves: its token, whether it may change anything, and a clock."""

    token: str
    read_only: bool = False
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


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
    app.add_middleware(_TokenGate, token=settings.token)
    return app


class _TokenGate:
    """Lets a request through when it carries the console's token (see the module's
    docstring); a first visit with ``?token=`` is answered with the cookie and sent on to the
    same page without it, as Jupyter does."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app, self._token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/healthz":
            await self._app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and self._matches(given):
            rest = [(key, value) for key, value in request.query_params.multi_items()]
            query = "&".join(f"{key}={value}" for key, value in rest if key != "token")
            response: Response = RedirectResponse(
                request.url.path + (f"?{query}" if query else ""), status_code=303
            )
            response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict", path="/")
            await response(scope, receive, send)
            return
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header.lower().startswith("bearer ") else None
        for candidate in (request.cookies.get(TOKEN_COOKIE), bearer):
            if candidate is not None and self._matches(candidate):
                await self._app(scope, receive, send)
                return
        response = PlainTextResponse(
            "401: this console needs its token: open the URL 'podwright console' printed "
            "(it ends in ?token=...), or send 'Authorization: Bearer TOKEN'\n",
            status_code=401,
        )
        await response(scope, receive, send)

    def _matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self._token.encode())


def _templates() -> Environment:
    environment = Environment(
        loader=PackageLoader("podwright.console", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["value_text"] = value_text
    return environment


class _Pages:
    """The handlers of :func:`console_app`'s routes."""

    def __init__(self, sources: ConsoleSources, hub: TaskHub, settings: ConsoleSettings) -> None:
        self.sources, self.hub, self.settings = sources, hub, settings
        self.templates = _templates()
        self._renderings: collections.OrderedDict[TableQuery, tuple[tuple[object, ...], str]]
        self._renderings = collections.OrderedDict()

    def render(self, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("read_only", self.settings.read_only)
        context.setdefault("backend", self.sources.backend or "this machine's store")
        html = self.templates.get_template(name).render(**context)
        return HTMLResponse(html, status_code=status_code)

    def problem(self, status_code: int, message: str) -> HTMLResponse:
        return self.render("problem.html", status_code, message=message)

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

    def rows_html(self, query: TableQuery) -> str:
        """The table's rows for ``query``: rendered once per change of the tasks (and per second
        of the clock, which the ages count in) for every page that shows the same table, however
        many streams ask for it (each rendering selects and sorts every task)."""
        now = self.settings.clock()
        version = (self.hub.generation, self.hub.error, int(now.timestamp()))
        kept = self._renderings.get(query)
        if kept is not None and kept[0] == version:
            self._renderings.move_to_end(query)
            return kept[1]
        chosen = query.select(self.hub.records.values())
        page = Page.of(chosen, query.page)
        html = self.templates.get_template("rows.html").render(
            page=page,
            query=query,
            rows=[self._row(record, now) for record in page.rows],
            all_namespaces=query.namespace == ALL_NAMESPACES,
            error=version[1],
        )
        self._renderings[query] = (version, html)
        self._renderings.move_to_end(query)
        while len(self._renderings) > RENDERINGS_KEPT:
            self._renderings.popitem(last=False)
        return html

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
            "finalized": record.finalized,
            "abort_requested": record.abort_requested,
        }

    async def workloads(self, request: Request) -> Response:
        try:
            query = self._query(request)
        except QueryError as error:
            return self.problem(400, str(error))
        namespaces = self.sources.known_namespaces(
            sorted({record.task.namespace for record in self.hub.records.values()})
        )
        return self.render(
            "workloads.html",
            query=query,
            rows_html=Markup(self.rows_html(query)),
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
            shown = self.rows_html(query)
            with self.hub.listening() as changes:
                while True:
                    try:
                        await asyncio.wait_for(changes.get(), KEEPALIVE_SECONDS)
                    except TimeoutError:
                        yield ": keep-alive\n\n"
                        continue
                    await asyncio.sleep(ROWS_EVERY_SECONDS)  # what comes meanwhile, together
                    while not changes.empty():
                        changes.get_nowait()
                    html = self.rows_html(query)
                    if html != shown:
                        shown = html
                        yield _event("rows", html)

        return _stream(rows())

    # A workload ----------------------------------------------------------------------------------

    def _record(self, namespace: str, task_id: str) -> api.TaskRecord | None:
        record = self.hub.records.get(task_id)
        if record is None or record.task.namespace != namespace:
            return None
        return record

    def status_html(self, record: api.TaskRecord) -> str:
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
            read_only=self.settings.read_only,
            actions=f"/workloads/{record.task.namespace}/{record.task_id}",
        )

    async def workload(self, request: Request) -> Response:
        namespace, task_id = request.path_params["namespace"], request.path_params["task_id"]
        record = self._record(namespace, task_id)
        if record is None:  # one submitted a moment ago, from here or elsewhere
            await run_in_threadpool(self.hub.wait_for, task_id, SUBMITTED_SECONDS)
            record = self._record(namespace, task_id)
        if record is None:
            return self.problem(
                404, f"no workload {task_id!r} in namespace {namespace!r} (it may be deleted)"
            )
        try:
            status_html = await run_in_threadpool(self.status_html, record)
        except api.PodwrightError as error:
            return self.problem(503, str(error))
        task = record.task
        effective = task.effective if isinstance(task.effective, Mapping) else {}
        submitted = task.workload if isinstance(task.workload, Mapping) else {}
        judged = await run_in_threadpool(self._judged_today, record)
        sources = judged.sources if judged is not None and judged.accepted else {}
        submitted_paths = {path for path, _ in leaves(submitted)}
        spec = [
            {"path": path, "value": text, "source": source_of(path, sources, submitted_paths)}
            for path, text in leaves(effective)
            if path != "type"
        ]
        return self.render(
            "workload.html",
            record=record,
            task=task,
            status_html=Markup(status_html),
            spec=spec,
            findings=self._findings(judged),
            owned=owned_resources(task.manifests),
            endpoints=endpoints(task.manifests),
            stream=f"/workloads/{namespace}/{task_id}/stream",
        )

    def _judged_today(self, record: api.TaskRecord) -> api.Evaluation | None:
        """The task's submission judged by the policies of its namespace today (None: none
        apply, or its submission cannot be read back)."""
        try:
            judges = self.sources.judges(record.task.namespace)
            if judges.scope is None:
                return None
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
        if self._record(namespace, task_id) is None:
            return self.problem(404, f"no workload {task_id!r} in namespace {namespace!r}")
        return _stream(self._workload_events(task_id))

    async def _workload_events(self, task_id: str) -> AsyncIterator[str]:
        """The task's status when it changes (``status``), its output as it comes (``log``,
        then ``log-end``), and ``gone`` when it is deleted."""
        follower = self.hub.logs(task_id)
        merged: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        try:
            with self.hub.listening() as changes, follower.listening() as (lines, output):
                forwarders = [
                    asyncio.ensure_future(_forward("change", changes, merged)),
                    asyncio.ensure_future(_forward_lines(output, merged)),
                ]
                try:
                    if lines:
                        yield _event("log", _log_html(lines))
                    async for event in self._events_of(task_id, merged):
                        yield event
                finally:
                    for forwarder in forwarders:
                        forwarder.cancel()
        finally:
            self.hub.left(follower)

    async def _events_of(
        self, task_id: str, merged: asyncio.Queue[tuple[str, object]]
    ) -> AsyncIterator[str]:
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
                    yield _event("gone", "deleted")
                    return
                yield _event("status", await run_in_threadpool(self.status_html, current))
            elif isinstance(item, list):
                yield _event("log", _log_html(item))
            else:
                yield _event("log-end", "(end of output)")

    async def abort(self, request: Request) -> Response:
        return await self._act(request, "abort")

    async def delete(self, request: Request) -> Response:
        return await self._act(request, "delete")

    async def _act(self, request: Request, action: str) -> Response:
        if self.settings.read_only:
            return self.problem(403, f"{action}: this console is read-only")
        namespace, task_id = request.path_params["namespace"], request.path_params["task_id"]
        if self._record(namespace, task_id) is None:
            return self.problem(404, f"no workload {task_id!r} in namespace {namespace!r}")

        def act() -> str:
            with self.sources.client() as client:
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
            return self.problem(409, f"{action} of {task_id}: {error}")
        target = "/workloads" if action == "delete" else f"/workloads/{namespace}/{task_id}"
        response = RedirectResponse(target, status_code=303)
        response.headers["X-Podwright-Outcome"] = message.replace("\n", " ")
        return response

    # Submitting ----------------------------------------------------------------------------------

    def _submit_scope(self, params: Mapping[str, str]) -> tuple[str, str]:
        namespace = (params.get("namespace") or "").strip() or (
            self.sources.namespace or FALLBACK_NAMESPACE
        )
        workload_type = params.get("type") or "training"
        if workload_type not in TYPES:
            raise QueryError(f"type {workload_type!r}: one of {', '.join(TYPES)}")
        return namespace, workload_type

    def _form_context(
        self,
        namespace: str,
        workload_type: str,
        values: Mapping[str, str],
        issues: Mapping[str, list[str]],
        general: list[str],
    ) -> dict[str, Any]:
        judges = self.sources.judges(namespace)
        form = judges.form(workload_type)
        return {
            "namespace": namespace,
            "workload_type": workload_type,
            "types": TYPES,
            "namespaces": self.sources.known_namespaces(
                sorted({record.task.namespace for record in self.hub.records.values()})
            ),
            "form": form,
            "groups": _groups(form),
            "values": values,
            "issues": issues,
            "general": general,
            "scope": str(judges.scope) if judges.scope is not None else "",
            "notes": judges.notes,
        }

    async def submit_form(self, request: Request) -> Response:
        if self.settings.read_only:
            return self.problem(403, "submitting: this console is read-only")
        try:
            namespace, workload_type = self._submit_scope(dict(request.query_params))
            context = await run_in_threadpool(
                self._form_context, namespace, workload_type, {}, {}, []
            )
        except (QueryError, api.PodwrightError) as error:
            return self.problem(400, str(error))
        return self.render("submit.html", **context)

    def _judge(
        self, params: Mapping[str, str]
    ) -> tuple[
        str, str, api.Workload | None, api.Evaluation | None, dict[str, list[str]], list[str]
    ]:
        """The form's workload and its evaluation, or the issues of each field."""
        namespace, workload_type = self._submit_scope(params)
        name = (params.get("metadata.name") or "").strip()
        judges = self.sources.judges(namespace)
        defaults = {field.path: field.default_text for field in judges.form(workload_type).fields}
        values = {
            path: value
            for key, value in params.items()
            if key.startswith("spec.")
            # a default the form filled in and nobody changed stays the policy's
            and value != defaults.get(path := key[len("spec.") :])
        }
        issues: dict[str, list[str]] = {}
        general: list[str] = []
        try:
            workload = workload_from_form(
                workload_type,
                values,
                name=name,
                namespace=namespace,
                extra=params.get("extra", ""),
            )
        except api.InvalidInputError as error:
            for field, message in _field_problems(error):
                (issues.setdefault(field, []) if field else general).append(message)
            return namespace, workload_type, None, None, issues, general
        try:
            evaluation = api.evaluate(
                workload, judges.policies, namespace=namespace, assets=judges.assets
            )
        except api.PodwrightError as error:
            general.append(str(error))
            return namespace, workload_type, workload, None, issues, general
        for violation in evaluation.violations:
            owner = _owner(violation)
            issues.setdefault(_form_path(violation.field), []).append(
                f"{violation.details} ({owner})" if owner else violation.details
            )
        return namespace, workload_type, workload, evaluation, issues, general

    async def preview(self, request: Request) -> Response:
        """The Workload the form makes, as YAML, and every issue with it."""
        params = {key: str(value) for key, value in (await request.form()).items()}
        try:
            _ns, _type, workload, _evaluation, issues, general = await run_in_threadpool(
                self._judge, params
            )
        except (QueryError, api.PodwrightError) as error:
            return self.problem(400, str(error))
        html = self.templates.get_template("preview.html").render(
            yaml=api.to_yaml(workload.to_document()) if workload is not None else "",
            issues=issues,
            general=general,
        )
        return HTMLResponse(html)

    async def submit(self, request: Request) -> Response:
        if self.settings.read_only:
            return self.problem(403, "submitting: this console is read-only")
        params = {key: str(value) for key, value in (await request.form()).items()}
        try:
            (
                namespace,
                workload_type,
                workload,
                evaluation,
                issues,
                general,
            ) = await run_in_threadpool(self._judge, params)
        except (QueryError, api.PodwrightError) as error:
            return self.problem(400, str(error))
        if workload is not None and not issues and not general:
            try:
                submitted = await run_in_threadpool(self._submit, workload, evaluation, namespace)
            except api.AdmissionDeniedError as denied:
                general.append(str(denied))
            except api.PodwrightError as error:
                general.append(str(error))
            else:
                return RedirectResponse(
                    f"/workloads/{namespace}/{submitted.task_id}", status_code=303
                )
        context = await run_in_threadpool(
            self._form_context, namespace, workload_type, params, issues, general
        )
        return self.render("submit.html", 422, **context)

    def _submit(
        self, workload: api.Workload, evaluation: api.Evaluation | None, namespace: str
    ) -> api.SubmittedTask:
        with self.sources.client() as client:
            if self.sources.is_operator:
                return client.submit(workload)  # the cluster's webhooks judge it again
            judges = self.sources.judges(namespace)
            prepared = api.prepare(
                evaluation if evaluation is not None and judges.scope is not None else workload,
                namespace=namespace,
                assets=judges.assets if evaluation is not None else None,
            )
            return client.submit(prepared)

    # Policies ------------------------------------------------------------------------------------

    async def policies(self, request: Request) -> Response:
        params = dict(request.query_params)
        try:
            namespace, workload_type = self._submit_scope(params)
            context = await run_in_threadpool(self._policies_context, namespace, workload_type)
        except (QueryError, api.PodwrightError) as error:
            return self.problem(400, str(error))
        return self.render("policies.html", **context)

    def _policies_context(self, namespace: str, workload_type: str) -> dict[str, Any]:
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
            "namespaces": self.sources.known_namespaces(
                sorted({record.task.namespace for record in self.hub.records.values()})
            ),
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
            from podwright.api.backends import ClusterAccess  # noqa: PLC0415
            from podwright.api.cluster_policies import compliance_report  # noqa: PLC0415

            report = compliance_report(
                ClusterAccess(self.sources.kubeconfig, self.sources.context),
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
            judged = self._judged_today(record)
            if judged is not None and not judged.accepted:
                found.append(
                    {
                        "name": record.task.name,
                        "reason": "NotCompliant",
                        "issues": [
                            f"{violation.field}: {violation.details}"
                            for violation in judged.violations
                        ],
                    }
                )
        return found


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
    return {
        "path": field.path,
        "label": field.label,
        "value_type": field.value_type,
        "default_text": field.default_text,
        "required": field.required,
        "locked": field.locked,
        "minimum": value_text(field.minimum) if numeric and field.minimum is not None else None,
        "maximum": value_text(field.maximum) if numeric and field.maximum is not None else None,
        "step": value_text(field.step) if field.step is not None else None,
        "pairs": [(value_text(value), shown) for value, shown in field.options]
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
    """One server-sent event: its name, and its data line by line."""
    body = "\n".join(f"data: {line}" for line in data.split("\n"))
    return f"event: {name}\n{body}\n\n"


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
