"""The emulator's HTTP front: the Kubernetes REST paths, watches as chunked streams, and the
test-side controls (faults, dropped watches, request counts)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.k8s_emulator.admission import collect_warnings, warning_header
from tests.k8s_emulator.controllers import ControlPlane
from tests.k8s_emulator.cost_model import CostModel, WriteGate
from tests.k8s_emulator.discovery import GIT_VERSION, discovery_document
from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.field_validation import Write, begin_request
from tests.k8s_emulator.openapi_v2 import (
    PROTOBUF,
    PROTOBUF_ANSWER,
    V2_PATH,
    protobuf,
    swagger_document,
)
from tests.k8s_emulator.openapi_v3 import INDEX_PATH, openapi_document, openapi_index
from tests.k8s_emulator.rbac import (
    ADMIN,
    RBAC_GROUP,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
    Access,
    Authorizer,
    User,
    request_attributes,
)
from tests.k8s_emulator.store import ApiStore, ResourceType, resource_type
from tests.k8s_emulator.strategies import delete_warnings
from tests.k8s_emulator.tables import table_version, to_table

_PATH = re.compile(
    r"^/(?:api/(?P<core_version>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<namespace>[^/]+))?/(?P<plural>[^/]+)"
    r"(?:/(?P<name>[^/]+))?(?:/(?P<subresource>[^/]+))?$"
)
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
APPLY_PATCH = "application/apply-patch+yaml"


@dataclass
class Fault:
    """Answer the next ``times`` requests that match with ``status``.

    ``retry_after`` answers as the API server answers an ``errors.NewTooManyRequests(message,
    retryAfterSeconds)`` (k8s.io/apimachinery/pkg/api/errors/errors.go), a 429 ``storage is
    (re)initializing`` from a watch cache still starting among them: the seconds go into the
    Status's ``details.retryAfterSeconds``, and into a ``Retry-After`` header when more than 0
    (``ErrorNegotiated``, k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/writers.go)."""

    status: int
    times: int = 1
    method: str | None = None
    path: str | None = None  # a regular expression searched in the path
    retry_after: int | None = None
    reason: str = ""
    message: str = ""
    """The Status's message; "injected fault <status>" when empty."""

    def error(self) -> ApiError:
        reason = self.reason or ("TooManyRequests" if self.status == 429 else "InternalError")
        details = {"retryAfterSeconds": self.retry_after} if self.retry_after else {}
        return ApiError(
            self.status,
            reason,
            self.message or f"injected fault {self.status}",
            details=details,
            retry_after=self.retry_after,
        )

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path is None or re.search(self.path, path) is not None
        )


@dataclass
class Controls:
    faults: list[Fault] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    requests_by_token: Counter[tuple[str, str]] = field(default_factory=Counter)
    """The same requests by (bearer token, verb): the emulator authenticates nobody, but a
    client's token tells it apart from the others (as a real server's audit log tells users)."""
    watch_stops: list[threading.Event] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    bookmark_every: float = 1.0
    pod_logs: dict[tuple[str, str, str], list[tuple[str, str]]] = field(default_factory=dict)
    connections: int = 0
    write_gate: WriteGate | None = None
    """Under a cost model, what every write waits for (``cost_model.py``); None: no wait."""
    access: Access | None = None
    """Users, impersonation and RBAC (``rbac.py``); checked only when ``access.enabled``."""

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.times > 0 and fault.matches(method, path):
                    fault.times -= 1
                    return fault
        return None


def serve_forever(port: int = 0, cost_model: CostModel | None = None) -> None:
    """Run an emulator in this process until it is killed; print its URL first (benchmarks)."""
    emulator = Emulator(port=port, cost_model=cost_model).start()
    print(emulator.url, flush=True)
    threading.Event().wait()


class _Server(ThreadingHTTPServer):
    """Counts the connections it accepts (tests check that clients reuse theirs), and closes
    those still open when it stops, as a server that goes away does."""

    controls: Controls

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.controls.lock:
            self.controls.connections += 1
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            still_open, self._open = self._open, set()
        for connection in still_open:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class Emulator:
    """An API-server emulator listening on 127.0.0.1 (a free port), for ``with`` blocks, with the
    controllers of a control plane (``controllers.py``) running against its store. A
    ``cost_model`` (for benchmarks; off by default) makes it charge what a real server and
    control plane charge (``cost_model.py``).

    ``rbac=True`` (off by default: every request is then allowed, whoever sends it) makes it
    authenticate bearer tokens, honour impersonation headers and authorize every request by the
    Roles, ClusterRoles and their bindings it stores, as a real server's RBAC does (``rbac.py``):
    a request without an ``Authorization`` header is the admin (``system:masters``), one with a
    token of :meth:`add_user` (or of a ServiceAccount's TokenRequest) is that user, one with an
    unknown token is 401. ``users`` maps tokens to (name, groups), as :meth:`add_user` adds."""

    def __init__(
        self,
        store: ApiStore | None = None,
        *,
        port: int = 0,
        cost_model: CostModel | None = None,
        rbac: bool = False,
        users: Mapping[str, tuple[str, Iterable[str]]] | None = None,
    ) -> None:
        if users and not rbac:
            raise ValueError("users: tokens are checked only with rbac=True")
        self.store = store or ApiStore()
        gate = (
            None
            if cost_model is None
            else WriteGate(cost_model.write_latency, cost_model.max_writes_in_flight)
        )
        self.control_plane = ControlPlane(self.store, cost_model=cost_model, write_gate=gate)
        store = self.store
        self.access = Access(
            Authorizer(lambda plural, ns: store.list(resource_type(RBAC_GROUP, plural), ns)[0]),
            enabled=rbac,
        )
        for token, (name, groups) in (users or {}).items():
            self.access.add_user(name, groups, token=token)
        self.controls = Controls(write_gate=gate, access=self.access)
        handler = type("Handler", (_Handler,), {"store": self.store, "controls": self.controls})
        self._server = _Server(("127.0.0.1", port), handler)
        self._server.controls = self.controls
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Emulator:
        self._thread.start()
        self.control_plane.start()
        return self

    def stop(self) -> None:
        self.control_plane.stop()
        self.drop_watches()
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()
        self._thread.join(timeout=5)
        self.store.admission.close()

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # Test controls -------------------------------------------------------------------------

    def add_user(self, name: str, groups: Iterable[str] = ()) -> str:
        """A bearer token for the user ``name`` in ``groups`` (``system:authenticated`` added);
        needs ``rbac=True`` (without it no token is checked). ``write_kubeconfig(path, url,
        token=token)`` (tests/kube/support.py) writes a kubeconfig of that user."""
        if not self.access.enabled:
            raise ValueError("add_user: tokens are checked only with rbac=True")
        return self.access.add_user(name, groups)

    def inject(self, fault: Fault) -> Fault:
        with self.controls.lock:
            self.controls.faults.append(fault)
        return fault

    def drop_watches(self) -> None:
        """End every open watch stream, as an API server restart or a load balancer would."""
        with self.controls.lock:
            stops, self.controls.watch_stops = self.controls.watch_stops, []
        for stop in stops:
            stop.set()
        self.store.wake_watchers()

    def write_log(self, namespace: str, pod: str, container: str, line: str, at: str) -> None:
        """Append a line (at an RFC 3339 time with nanoseconds) to a container's log, as a
        kubelet would; ``GET .../pods/<pod>/log`` serves it."""
        with self.controls.lock:
            self.controls.pod_logs.setdefault((namespace, pod, container), []).append((at, line))

    def requests(self, verb: str | None = None, *, token: str | None = None) -> int:
        """Requests served so far (watches count as ``watch``, lists as ``list``); with
        ``token``, those that carried it (``Authorization: Bearer TOKEN``; "": none)."""
        with self.controls.lock:
            if token is not None:
                return sum(
                    count
                    for (carried, counted_verb), count in self.controls.requests_by_token.items()
                    if carried == token and verb in (None, counted_verb)
                )
            if verb is None:
                return sum(self.controls.requests.values())
            return self.controls.requests[verb]

    def connections(self) -> int:
        """Connections accepted so far (a client that reuses its connections opens few)."""
        with self.controls.lock:
            return self.controls.connections

    def reset_counts(self) -> None:
        with self.controls.lock:
            self.controls.requests.clear()
            self.controls.requests_by_token.clear()
            self.controls.connections = 0


def _bearer_token(header: str) -> str:
    """The token of an ``Authorization: Bearer TOKEN`` header; "" for none."""
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A watch's headers and its events go out in separate writes: without this, Nagle and
    # delayed ACKs add 40 ms to each on a kept-alive connection.
    disable_nagle_algorithm = True
    store: ApiStore
    controls: Controls
    warnings: list[str]
    """What the current request was warned of (admission webhooks, a kind's default deletion
    propagation): its answer's ``Warning`` headers."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.warnings = collect_warnings()
        body = self._body()
        try:
            if url.path == "/_emulator/requests":
                with self.controls.lock:
                    if query.get("by") == "token":
                        by_token: dict[str, dict[str, int]] = {}
                        for (token, counted), count in self.controls.requests_by_token.items():
                            by_token.setdefault(token, {})[counted] = count
                        self._send(200, by_token)
                    else:
                        self._send(200, dict(self.controls.requests))
                return
            if url.path == "/_emulator/connections":
                with self.controls.lock:
                    self._send(200, {"connections": self.controls.connections})
                return
            user = self._authorized(method, url.path, query)
            if method == "POST" and url.path in (
                SELF_SUBJECT_ACCESS_REVIEWS,
                SUBJECT_ACCESS_REVIEWS,
            ):
                assert self.controls.access is not None
                self._send(201, self.controls.access.review(user, url.path, body))
                return
            if url.path == "/version":
                major, minor, _patch = GIT_VERSION.removeprefix("v").split(".", 2)
                self._send(200, {"major": major, "minor": minor, "gitVersion": GIT_VERSION})
                return
            if method == "GET":
                host, port = self.server.server_address[:2]
                document = discovery_document(
                    url.path, self.store.served_resources(), f"{host}:{port}"
                )
                if document is not None:
                    self._send(200, document)
                    return
                if url.path.startswith(INDEX_PATH) or url.path == V2_PATH:
                    self._send_openapi(url.path)
                    return
            match = _PATH.match(url.path)
            if match is None:
                raise ApiError(404, "NotFound", f"the server could not find {url.path}")
            resource = self.store.served(
                match["group"] or "", match["version"] or "v1", match["plural"]
            )
            name, namespace = match["name"], match["namespace"]
            if not resource.namespaced and name is None and namespace is not None:
                name, namespace = namespace, None
            verb = _VERBS[method]
            if method == "GET" and name is None:
                verb = "watch" if query.get("watch") in ("1", "true") else "list"
            token = _bearer_token(self.headers.get("Authorization", ""))
            with self.controls.lock:
                self.controls.requests[verb] += 1
                self.controls.requests_by_token[(token, verb)] += 1
            fault = self.controls.take_fault(method, url.path)
            if fault is not None:
                raise fault.error()
            if verb == "watch":
                self._watch(resource, namespace, query)
                return
            if resource.kind == "Pod" and match["subresource"] == "log" and method == "GET":
                self._send_log(namespace or "", name or "", query)
                return

            token = match["subresource"] == "token" and resource.kind == "ServiceAccount"
            if token and method == "POST" and name and self.controls.access is not None:
                self.store.get(resource, namespace or "", name)  # 404 for a missing account
                answer = self.controls.access.token_request(
                    namespace or "", name, body, self.store.now()
                )
                self._send(201, answer)
                return
            if method in ("POST", "PUT", "PATCH"):
                begin_request(self._write(method), query.get("fieldValidation"))

            def dispatch() -> tuple[int, Any]:
                return self._dispatch(
                    method,
                    verb,
                    resource,
                    namespace=namespace or "",
                    name=name,
                    subresource=match["subresource"],
                    query=query,
                    body=body,
                )

            gate = self.controls.write_gate
            if query.get("dryRun") == "All" and method != "GET":
                code, payload = self.store.dry_run(dispatch)
            elif method != "GET" and gate is not None:
                code, payload = gate.write(dispatch)
            else:
                code, payload = dispatch()
            payload = _served_as(resource, payload)
            version = table_version(self.headers.get("Accept", ""))
            if method == "GET" and version is not None:
                payload = self._table(resource, payload, query, version)
            self._send(code, payload)
        except ApiError as error:
            headers = {"Retry-After": str(error.retry_after)} if error.retry_after else {}
            self._send(error.code, error.status(), headers)

    def _authorized(self, method: str, path: str, query: dict[str, str]) -> User:
        """Who the request is, once authenticated, impersonated and allowed (``rbac.py``); the
        admin, unchecked, without ``rbac=True``."""
        access = self.controls.access
        if access is None or not access.enabled:
            return ADMIN
        user = access.impersonate(
            access.authenticate(self.headers.get("Authorization")), self.headers
        )
        access.require(request_attributes(user, method, path, query))
        return user

    def _write(self, method: str) -> Write:
        if method == "POST":
            return "create"
        if method == "PUT":
            return "update"
        return "apply" if self.headers.get("Content-Type", "").startswith(APPLY_PATCH) else "patch"

    def _send_openapi(self, path: str) -> None:
        """``/openapi/v2`` (``openapi_v2.py``: protobuf when asked for), ``/openapi/v3`` and its
        documents (``openapi_v3.py``)."""
        served = self.store.served_resources()
        if path == V2_PATH:
            swagger = swagger_document(served)
            if PROTOBUF in self.headers.get("Accept", ""):
                self._send_bytes(200, protobuf(swagger), PROTOBUF_ANSWER)
            else:
                self._send(200, swagger)
            return
        document = openapi_index(served) if path == INDEX_PATH else openapi_document(path, served)
        if document is None:
            raise ApiError(404, "NotFound", f"the server could not find {path}")
        self._send(200, document)

    def _table(
        self, resource: ResourceType, payload: Any, query: dict[str, str], version: str
    ) -> Any:
        """A get or list answered as a Table (``tables.py``), with a custom resource's printer
        columns."""
        served = (
            self.store.custom_resources.lookup(resource.group, resource.version, resource.plural)
            if resource.custom
            else None
        )
        return to_table(
            resource,
            payload,
            columns=None if served is None else served.printer_columns,
            include_object=query.get("includeObject"),
            version=version,
            now=self.store.now(),
        )

    def _send_log(self, namespace: str, name: str, query: dict[str, str]) -> None:
        """A container's log as text: ``container``, ``sinceTime`` and ``timestamps`` honoured."""
        pod = self.store.get(resource_type("", "pods"), namespace, name)
        containers = [c["name"] for c in pod.get("spec", {}).get("containers", [])]
        container = query.get("container") or (containers[0] if len(containers) == 1 else "")
        if container not in containers:
            raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
        since = query.get("sinceTime", "")
        with self.controls.lock:
            entries = list(self.controls.pod_logs.get((namespace, name, container), []))
        stamped = query.get("timestamps") in ("1", "true")
        text = "".join(
            f"{at} {line}\n" if stamped else f"{line}\n"
            for at, line in entries
            if not since or at[:19] >= since[:19]
        )
        self._send_bytes(200, text.encode(), "text/plain")

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        raw = self.rfile.read(length)
        try:
            if self.headers.get("Content-Type", "").startswith(APPLY_PATCH):
                return yaml.safe_load(raw)  # JSON is YAML too
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise ApiError(400, "BadRequest", f"the request body is not JSON: {error}") from error

    def _dispatch(
        self,
        method: str,
        verb: str,
        resource: ResourceType,
        *,
        namespace: str,
        name: str | None,
        subresource: str | None,
        query: dict[str, str],
        body: Any,
    ) -> tuple[int, Any]:
        store = self.store
        if subresource == "binding" and resource.kind == "Pod" and method == "POST" and name:
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "POST takes a Binding in the body")
            return 201, store.bind(namespace, name, body)
        finalize = subresource == "finalize" and resource.kind == "Namespace" and method == "PUT"
        if (subresource not in (None, "status") and not finalize) or (
            subresource == "status" and not resource.status_subresource
        ):
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({subresource})"
            )
        if verb == "list":
            items, version = store.list(
                resource, namespace or None, query.get("labelSelector"), query.get("fieldSelector")
            )
            return 200, {
                "kind": f"{resource.kind}List",
                "apiVersion": resource.api_version,
                "metadata": {"resourceVersion": str(version)},
                "items": items,
            }
        if method == "POST":
            if name is not None or not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "POST takes an object in the body, and no name")
            return 201, store.create(resource, namespace, body)
        assert name is not None
        if method == "GET":
            return 200, store.get(resource, namespace, name)
        if method == "PUT":
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "PUT takes an object in the body")
            return 200, store.replace(resource, namespace, name, body, subresource=subresource)
        if method == "PATCH":
            content_type = self.headers.get("Content-Type", "")
            if content_type.startswith(APPLY_PATCH):
                return self._apply(
                    resource,
                    namespace=namespace,
                    name=name,
                    subresource=subresource,
                    query=query,
                    body=body,
                )
            return 200, store.patch(
                resource, namespace, name, body, content_type, subresource=subresource
            )
        options = body if isinstance(body, dict) else {}
        grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        propagation = options.get("propagationPolicy", query.get("propagationPolicy"))
        self.warnings.extend(delete_warnings(resource.api_version, resource.kind, propagation))
        return 200, store.delete(
            resource,
            namespace,
            name,
            preconditions=options.get("preconditions"),
            grace_period_seconds=None if grace is None else int(grace),
            propagation=propagation,
        )

    def _apply(
        self,
        resource: ResourceType,
        *,
        namespace: str,
        name: str,
        subresource: str | None,
        query: dict[str, str],
        body: Any,
    ) -> tuple[int, Any]:
        """Server-side apply (see ``ApiStore.apply``): 201 when it created the object."""
        manager = query.get("fieldManager")
        if not manager:
            # ValidatePatchOptions (apiserver pkg/endpoints/handlers/patch.go).
            raise ApiError(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch",
            )
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "an apply patch must be an object")
        applied, created = self.store.apply(
            resource, namespace, name, body, manager=manager, subresource=subresource
        )
        return (201 if created else 200), applied

    def _watch(self, resource: ResourceType, namespace: str | None, query: dict[str, str]) -> None:
        since_text = query.get("resourceVersion")
        since = int(since_text) if since_text not in (None, "", "0") else None
        selects = self.store.selector(
            resource, query.get("labelSelector"), query.get("fieldSelector")
        )
        timeout = query.get("timeoutSeconds")
        deadline = datetime.now(UTC) + timedelta(seconds=int(timeout)) if timeout else None
        stop = threading.Event()
        with self.controls.lock:
            self.controls.watch_stops.append(stop)
        bookmarks = (
            self.controls.bookmark_every
            if query.get("allowWatchBookmarks") in ("1", "true")
            else None
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            try:
                events = self.store.watch(
                    resource,
                    namespace,
                    since=since,
                    selects=selects,
                    stop=stop,
                    deadline=deadline,
                    bookmark_every=bookmarks,
                )
                for event in events:
                    event["object"] = _served_as(resource, event["object"])
                    self._chunk(json.dumps(event).encode() + b"\n")
            except ApiError as error:
                # A watch that cannot start from its version is refused inside the stream, as the
                # API server does: an ERROR event carrying a Status.
                self._chunk(
                    json.dumps({"type": "ERROR", "object": error.status()}).encode() + b"\n"
                )
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.close_connection = True
            with self.controls.lock:
                if stop in self.controls.watch_stops:
                    self.controls.watch_stops.remove(stop)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send(self, code: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(code, json.dumps(payload).encode(), "application/json", headers)

    def _send_bytes(
        self, code: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        for text in self.warnings:
            # Go writes the text's UTF-8 bytes as they are; http.server encodes headers in latin-1.
            self.send_header("Warning", warning_header(text).encode().decode("latin-1"))
        # Headers and body in one write (http.server's end_headers would send the headers
        # alone): a system call, and a thread switch, fewer per answer.
        self._headers_buffer.append(b"\r\n" + data)  # type: ignore[attr-defined]
        self.flush_headers()


def _served_as(resource: ResourceType, payload: Any) -> Any:
    """A custom object, or a list of them, as the version asked for serves it: objects are
    stored once for every version of their CRD, and the ``None`` conversion changes only the
    ``apiVersion`` (apiextensions ``pkg/apiserver/conversion/nop_converter.go``)."""
    if not resource.custom or not isinstance(payload, dict):
        return payload
    if payload.get("kind") == resource.kind:
        payload["apiVersion"] = resource.api_version
    for item in payload.get("items") or []:
        item["apiVersion"] = resource.api_version
    return payload
