"""An HTTPS server of admission webhooks: AdmissionReviews in, AdmissionReviews out.

The API server sends each admission request as an ``admission.k8s.io/v1`` AdmissionReview,
``POST``ed over HTTPS to the path of the webhook's ``clientConfig``, and waits for the answer
(``timeoutSeconds``, then the ``failurePolicy``). What answers is a *handler* per path (the
AdmissionReview in, the AdmissionReview that answers it out): this server knows nothing of
podwright's decisions; ``podwright webhook`` and the operator give it theirs.

What the API server needs of it, and how it is met:

* **TLS, renewed without a restart.** Each new connection is handed the TLS context of the
  moment (``TlsSource.server_context()``: a :class:`~podwright.adapters.certificates.
  CertificateKeeper` or a :class:`~podwright.adapters.certificates.CertificateDirectory`), so a
  renewed certificate is served from the next handshake on while open connections carry on.
* **Keep-alive.** The API server reuses its connections (HTTP/1.1; it closes idle ones after
  90 s, so this server keeps them longer: a POST on a connection the server just closed is not
  retried). Idle connections cost no thread: one asyncio loop holds them all, and the handlers
  run on a bounded pool of threads.
* **No hop to a thread where none is needed** (``answer_inline``). Handlers that answer from
  memory (podwright's read watch caches) run on the loop's own thread: under the GIL a pool
  thread buys them no parallelism, and handing each review to one and its answer back costs two
  thread wake-ups, about a millisecond a review on a busy machine (``benchmarks/
  webhook_bench.py``). A handler that would have to wait (an API read its caches cannot serve
  yet) asks :func:`may_block` and raises :class:`WouldBlock` instead: the server runs it again
  on a pool thread, where it may wait without holding up the other connections.
* **Bounded everything.** Connections, header and body sizes (413 beyond the limit), the time a
  request may take to arrive, the handler threads; a stop stops accepting, closes idle
  connections, lets the requests in hand finish, and returns within its bound.
* **Clear failures.** A body that is not an AdmissionReview is answered 400, an unknown path
  404, a handler that raises 500 (the server itself serves on); each as a ``metav1.Status`` whose
  message the API server quotes in its ``failed calling webhook`` error (client-go's
  ``rest.Result.Error`` decodes a Status from a failed answer). One log line per refusal or
  error, none per admitted request.
* ``GET /healthz`` (the certificate is usable) and ``/readyz`` (and the caller's readiness) for
  the kubelet's probes.

The asyncio loop runs in a thread of its own; :class:`WebhookServer` is used from plain threads
(``start``/``stop`` or a ``with`` block).

Exceptions::

    WebhookServerError
    ├── WebhookServerSettingsError   bad routes or settings (a ValueError)
    └── ServerStartError             the address cannot be listened on
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any, Protocol

LOG = logging.getLogger("podwright.webhook")

REVIEW_API_VERSION = "admission.k8s.io/v1"
HEALTH_PATHS = ("/healthz", "/readyz")

Handler = Callable[[dict[str, Any]], Mapping[str, Any]]
"""An AdmissionReview (its ``request`` checked for a ``uid``) in, the AdmissionReview that
answers it out."""


class TlsSource(Protocol):
    """Where the server's certificate comes from."""

    def server_context(self) -> ssl.SSLContext:
        """The TLS context for the next handshake."""

    def problem(self) -> str | None:
        """What is wrong with the certificate served (expired, not renewed...), or None."""


class WebhookServerError(Exception):
    """The webhook server cannot be set up or started."""


class WouldBlock(Exception):  # noqa: N818 (not an error: a request to be run elsewhere)
    """Raised by a handler running on the server's loop (:func:`may_block` is False) that cannot
    answer without waiting: the server runs it again on a handler thread, where it may."""


_ON_LOOP: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "webhook_handler_on_loop", default=False
)


def may_block() -> bool:
    """Whether the handler running now may wait for I/O: False while it runs on the server's
    loop (``answer_inline``), where it must raise :class:`WouldBlock` instead."""
    return not _ON_LOOP.get()


class WebhookServerSettingsError(WebhookServerError, ValueError):
    """Routes or settings no server can run with (names the argument and what is allowed)."""


class ServerStartError(WebhookServerError):
    """The address cannot be listened on."""


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """The webhook server's limits."""

    handler_threads: int = 8
    """Handlers running at once; further requests wait for one to finish."""
    max_connections: int = 512
    """Connections open at once; one beyond is closed at once."""
    max_body_bytes: int = 8 * 1024 * 1024
    """The largest AdmissionReview accepted (413 beyond): an object and its old version, each
    up to the API server's 3 MiB request limit, with room for the rest of the review."""
    max_header_bytes: int = 64 * 1024
    """The request line and headers together (431 beyond)."""
    handshake_timeout_seconds: float = 10.0
    """The TLS handshake of a new connection."""
    request_timeout_seconds: float = 10.0
    """A request, once its first line came, must arrive whole within this (the API server's
    own timeout is at most 30 s)."""
    idle_timeout_seconds: float = 120.0
    """A kept-alive connection with no request is closed after this: longer than the API
    server's 90 s, so it is the client that closes idle connections."""
    shutdown_timeout_seconds: float = 10.0
    """How long a stop waits for the requests in hand."""

    def __post_init__(self) -> None:
        for name in ("handler_threads", "max_connections", "max_body_bytes", "max_header_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise WebhookServerSettingsError(
                    f"{name}: must be a positive integer, got {value!r}"
                )
        for name in (
            "handshake_timeout_seconds",
            "request_timeout_seconds",
            "idle_timeout_seconds",
            "shutdown_timeout_seconds",
        ):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise WebhookServerSettingsError(
                    f"{name}: must be a positive number, got {value!r}"
                )


class _HttpError(Exception):
    """A request answered with an error status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass(frozen=True)
class _Request:
    method: str
    path: str
    keep_alive: bool
    body: bytes


@dataclasses.dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(eq=False)
class _Connection:
    writer: asyncio.StreamWriter
    peer: str
    busy: bool = False
    """Reading or answering a request (not waiting for the next one)."""


_ACCEPT_BATCH = 64
"""Connections accepted at most in one turn of the loop, so that a flood of them does not starve
the connections already open."""

_STATUS_REASONS = {
    400: "BadRequest",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "RequestEntityTooLarge",
    500: "InternalError",
}


def _no_delay(connection: socket.socket) -> None:
    """Send each write at once (TCP_NODELAY). asyncio sets it only on sockets whose ``proto`` is
    TCP, and an accepted socket of ``socket.create_server``'s listener has proto 0: without it,
    Nagle's algorithm holds the first answer of a new TLS connection until the client's delayed
    ACK of the session tickets, some 40 ms on Linux."""
    with contextlib.suppress(OSError):  # not a TCP socket: nothing to set
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class WebhookServer:
    """Admission webhooks over HTTPS: ``routes`` maps each path to its handler.

    A handler's exceptions of the ``bad_review_errors`` classes mean the review is not one it
    serves (answered 400 with their message); any other is a failure of the handler (500).
    ``readiness`` says why the caller is not ready to answer (its caches have not listed yet,
    say), or None; ``/readyz`` answers 503 with it. ``answer_inline``: the handlers answer from
    memory, so they run on the loop's thread, and on a handler thread only when they raise
    :class:`WouldBlock` (see the module's docstring).
    """

    def __init__(
        self,
        routes: Mapping[str, Handler],
        tls: TlsSource,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        settings: ServerSettings | None = None,
        bad_review_errors: tuple[type[Exception], ...] = (),
        readiness: Callable[[], str | None] | None = None,
        answer_inline: bool = False,
    ) -> None:
        for path, handler in routes.items():
            if not path.startswith("/") or "?" in path or path in HEALTH_PATHS:
                raise WebhookServerSettingsError(
                    f"routes: {path!r} is not a webhook path: a path starts with '/', has no "
                    f"query, and is none of {', '.join(HEALTH_PATHS)}"
                )
            if not callable(handler):
                raise WebhookServerSettingsError(f"routes[{path!r}]: not callable: {handler!r}")
        self._routes = dict(routes)
        self._tls = tls
        self._host = host
        self._port = port
        self._settings = settings or ServerSettings()
        self._bad_review_errors = bad_review_errors
        self._readiness = readiness
        self._answer_inline = answer_inline
        self._connections: set[_Connection] = set()
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: socket.socket | None = None
        self._setting_up: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._settings.handler_threads, thread_name_prefix="webhook-handler"
        )

    # Starting and stopping ---------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """The address listened on (the port chosen when 0 was asked for)."""
        if self._listener is None:
            raise WebhookServerError("the server is not started")
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    def url(self, path: str = "") -> str:
        """``https://HOST:PORT<path>`` of the address listened on."""
        host, port = self.address
        return f"https://{f'[{host}]' if ':' in host else host}:{port}{path}"

    def start(self) -> WebhookServer:
        """Listen, and serve from a background thread."""
        if self._thread is not None:
            raise WebhookServerError("the server was started already")
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        try:
            self._listener = socket.create_server((self._host, self._port), family=family)
        except OSError as error:
            raise ServerStartError(
                f"cannot listen on {self._host}:{self._port}: {error}"
            ) from error
        self._listener.setblocking(False)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._serve,
            args=(self._loop, self._listener),
            name="webhook-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def _serve(self, loop: asyncio.AbstractEventLoop, listener: socket.socket) -> None:
        asyncio.set_event_loop(loop)
        loop.add_reader(listener.fileno(), self._accept, loop, listener)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def _accept(self, loop: asyncio.AbstractEventLoop, listener: socket.socket) -> None:
        """Accept the connections waiting (a batch at a time), each set up in a task.

        (Not ``asyncio.start_server`` nor ``loop.sock_accept``: on Python 3.11 both can leave a
        connection accepted during the shutdown with its socket never closed.)"""
        for _ in range(_ACCEPT_BATCH):
            try:
                connection, _address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # out of file descriptors, say: the next one may do
                LOG.error("could not accept a connection: %s", error)
                return
            connection.setblocking(False)
            _no_delay(connection)
            task = loop.create_task(self._set_up(loop, connection))
            self._setting_up.add(task)
            task.add_done_callback(self._setting_up.discard)

    async def _set_up(self, loop: asyncio.AbstractEventLoop, connection: socket.socket) -> None:
        reader = asyncio.StreamReader(limit=self._settings.max_header_bytes)
        protocol = asyncio.StreamReaderProtocol(reader, self._connected)
        try:
            await loop.connect_accepted_socket(lambda: protocol, connection)
        except OSError:
            connection.close()  # the client left before its connection was set up

    def stop(self) -> None:
        """Stop accepting, close idle connections, let the requests in hand finish (within
        ``shutdown_timeout_seconds``), and return."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        bound = self._settings.shutdown_timeout_seconds
        shutdown = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        with contextlib.suppress(concurrent.futures.TimeoutError):
            shutdown.result(timeout=bound + 2)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=2)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _shutdown(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            asyncio.get_running_loop().remove_reader(self._listener.fileno())
            self._listener.close()
        for connection in list(self._connections):
            if not connection.busy:
                connection.writer.transport.abort()
        # Every other task of the loop serves a connection: wait for them all, up to the bound.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.shutdown_timeout_seconds
        current = asyncio.current_task()
        while (serving := asyncio.all_tasks() - {current}) and loop.time() < deadline:
            await asyncio.wait(serving, timeout=deadline - loop.time())
        for connection in list(self._connections):
            connection.writer.transport.abort()
        if serving:
            LOG.warning(
                "stopped with %d request(s) unanswered after %ss",
                len(serving),
                self._settings.shutdown_timeout_seconds,
            )
            for task in serving:
                task.cancel()
            await asyncio.wait(serving, timeout=1)

    def __enter__(self) -> WebhookServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # Connections -------------------------------------------------------------------------------

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer(writer)
        if self._stopping.is_set() or len(self._connections) >= self._settings.max_connections:
            if not self._stopping.is_set():
                LOG.warning(
                    "refused a connection from %s: %d connections are open already",
                    peer,
                    len(self._connections),
                )
            writer.transport.abort()
            return
        connection = _Connection(writer, peer)
        self._connections.add(connection)
        try:
            if await self._handshake(connection):
                await self._serve_connection(connection, reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away: nothing to answer
        except asyncio.CancelledError:
            pass  # the server stopped waiting for this request (the task must end quietly)
        except Exception as error:  # a bug here must not end the loop's other connections
            LOG.error("serving %s failed: %s: %s", peer, type(error).__name__, error)
            LOG.debug("serving %s failed", peer, exc_info=True)
        finally:
            connection.busy = False
            await self._close(writer)
            self._connections.discard(connection)

    async def _close(self, writer: asyncio.StreamWriter) -> None:
        """Close the connection, TLS's way (close_notify) unless the server is stopping; a peer
        that does not answer within the handshake timeout is cut off."""
        if not self._stopping.is_set():
            writer.close()
            with contextlib.suppress(TimeoutError, ConnectionError, ssl.SSLError):
                await asyncio.wait_for(
                    writer.wait_closed(), self._settings.handshake_timeout_seconds
                )
        writer.transport.abort()

    async def _handshake(self, connection: _Connection) -> bool:
        try:
            context = self._tls.server_context()
        except Exception as error:  # the TLS source's: whatever it raises, no TLS to offer
            LOG.error("no certificate to serve %s: %s", connection.peer, error)
            return False
        try:
            await connection.writer.start_tls(
                context, ssl_handshake_timeout=self._settings.handshake_timeout_seconds
            )
        except ssl.SSLError as error:
            if not isinstance(error, ssl.SSLEOFError):
                LOG.warning("TLS handshake with %s failed: %s", connection.peer, error)
            return False
        except (TimeoutError, ConnectionError):
            return False
        return True

    async def _serve_connection(
        self, connection: _Connection, reader: asyncio.StreamReader
    ) -> None:
        settings = self._settings
        while not self._stopping.is_set():
            try:
                async with asyncio.timeout(settings.idle_timeout_seconds):
                    first_line = await reader.readline()
            except TimeoutError:
                return
            except ValueError:  # a line beyond the limit
                await self._answer(connection, _error(431, "the request line is too long"), True)
                return
            if not first_line:
                return
            connection.busy = True
            try:
                async with asyncio.timeout(settings.request_timeout_seconds):
                    request = await self._read_request(connection, first_line, reader)
            except TimeoutError:
                LOG.warning(
                    "%s sent no whole request within %ss: closed",
                    connection.peer,
                    settings.request_timeout_seconds,
                )
                return
            except _HttpError as error:  # what follows in the stream cannot be read: close
                LOG.warning("%s: %d %s", connection.peer, error.status, error.message)
                await self._answer(connection, _error(error.status, error.message), True)
                return
            answer = await self._respond(connection, request)
            close = not request.keep_alive or self._stopping.is_set()
            await self._answer(connection, answer, close)
            if close:
                return
            connection.busy = False

    async def _read_request(
        self, connection: _Connection, first_line: bytes, reader: asyncio.StreamReader
    ) -> _Request:
        settings = self._settings
        parts = first_line.decode("latin-1").rstrip("\r\n").split(" ")
        if len(parts) != 3:
            raise _HttpError(400, f"not an HTTP request line: {first_line[:100]!r}")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise _HttpError(505, f"HTTP/1.1 is served, not {version[:20]!r}")
        headers: dict[str, str] = {}
        size = len(first_line)
        while True:
            try:
                line = await reader.readline()
            except ValueError:
                raise _HttpError(431, "a header line is too long") from None
            size += len(line)
            if size > settings.max_header_bytes:
                raise _HttpError(431, f"the headers exceed {settings.max_header_bytes} bytes")
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise asyncio.IncompleteReadError(line, None)
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon or not name or name != name.strip():
                raise _HttpError(400, f"not a header line: {line[:100]!r}")
            key, value = name.lower(), value.strip()
            if key in headers and key == "content-length" and headers[key] != value:
                raise _HttpError(400, "two different Content-Length headers")
            headers[key] = (
                f"{headers[key]}, {value}" if key in headers and key != "content-length" else value
            )
        tokens = {token.strip().lower() for token in headers.get("connection", "").split(",")}
        keep_alive = "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens
        if "transfer-encoding" in headers:
            raise _HttpError(
                501, "a request body must have a Content-Length (no Transfer-Encoding)"
            )
        length_header = headers.get("content-length")
        if length_header is None:
            if method == "POST":
                raise _HttpError(411, "a POST must have a Content-Length")
            length = 0
        elif not length_header.isdigit():
            raise _HttpError(400, f"Content-Length: not a length: {length_header!r}")
        else:
            length = int(length_header)
        if length > settings.max_body_bytes:
            raise _HttpError(
                413,
                f"the body of {length} bytes exceeds the limit of {settings.max_body_bytes}",
            )
        if length and headers.get("expect", "").lower() == "100-continue":
            connection.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await reader.readexactly(length) if length else b""
        return _Request(method, target.partition("?")[0], keep_alive, body)

    async def _answer(self, connection: _Connection, answer: _Answer, close: bool) -> None:
        head = [
            f"HTTP/1.1 {answer.status} {HTTPStatus(answer.status).phrase}",
            f"Content-Type: {answer.content_type}",
            f"Content-Length: {len(answer.body)}",
            *(f"{name}: {value}" for name, value in answer.headers),
        ]
        if close:
            head.append("Connection: close")
        connection.writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + answer.body)
        await connection.writer.drain()

    # Requests ----------------------------------------------------------------------------------

    async def _respond(self, connection: _Connection, request: _Request) -> _Answer:
        if request.path in HEALTH_PATHS:
            if request.method != "GET":
                return _error(405, f"{request.path} answers GET", allow="GET")
            problem = self._tls.problem() if request.path == "/healthz" else self._unreadiness()
            text = f"{problem or 'ok'}\n".encode()
            return _Answer(503 if problem else 200, text, "text/plain; charset=utf-8")
        handler = self._routes.get(request.path)
        if handler is None:
            known = ", ".join(sorted(self._routes)) or "none"
            return self._failed(
                connection, request, 404, f"no webhook at this path (webhooks: {known})"
            )
        if request.method != "POST":
            return self._failed(
                connection, request, 405, "an AdmissionReview is POSTed", allow="POST"
            )
        try:
            review = _review(request.body)
        except _HttpError as error:
            return self._failed(connection, request, error.status, error.message)
        if self._answer_inline:
            with contextlib.suppress(WouldBlock):
                return self._handled(connection, request, handler, review, on_loop=True)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, self._handled, connection, request, handler, review
        )

    def _unreadiness(self) -> str | None:
        if self._stopping.is_set():
            return "shutting down"
        return self._tls.problem() or (self._readiness() if self._readiness else None)

    def _handled(
        self,
        connection: _Connection,
        request: _Request,
        handler: Handler,
        review: dict[str, Any],
        *,
        on_loop: bool = False,
    ) -> _Answer:
        """Run the handler (on a pool thread, or ``on_loop``: then its :class:`WouldBlock` is
        raised) and check its answer."""
        uid = review["request"]["uid"]
        running_on = _ON_LOOP.set(on_loop)
        try:
            answer = handler(review)
        except WouldBlock:
            if on_loop:
                raise
            return self._failed(
                connection,
                request,
                500,
                "the webhook failed: it raised WouldBlock on a handler thread, where it may wait",
            )
        except self._bad_review_errors as error:
            return self._failed(connection, request, 400, str(error))
        except Exception as error:  # a handler's bug must not take the server down
            LOG.debug("the handler for %s failed", request.path, exc_info=True)
            return self._failed(
                connection,
                request,
                500,
                f"the webhook failed: {type(error).__name__}: {error}",
            )
        finally:
            _ON_LOOP.reset(running_on)
        response = answer.get("response") if isinstance(answer, Mapping) else None
        if not isinstance(response, Mapping) or response.get("uid") != uid:
            return self._failed(
                connection,
                request,
                500,
                f"the webhook's answer is not an AdmissionReview response to uid {uid!r}",
            )
        try:
            body = json.dumps(answer, separators=(",", ":")).encode()
        except (TypeError, ValueError) as error:
            return self._failed(
                connection, request, 500, f"the webhook's answer is not JSON: {error}"
            )
        if response.get("allowed") is False:
            _log_refusal(request.path, review["request"], response)
        return _Answer(200, body)

    def _failed(
        self,
        connection: _Connection,
        request: _Request,
        status: int,
        message: str,
        *,
        allow: str | None = None,
    ) -> _Answer:
        LOG.warning(
            "%s %s from %s: %d %s", request.method, request.path, connection.peer, status, message
        )
        return _error(status, message, allow=allow)


def _review(body: bytes) -> dict[str, Any]:
    """The body as an AdmissionReview with a request and its uid (400 otherwise)."""
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise _HttpError(400, f"the body is not JSON: {error}") from None
    if not isinstance(review, dict):
        raise _HttpError(400, f"the body is not an {REVIEW_API_VERSION} AdmissionReview object")
    found = (review.get("apiVersion"), review.get("kind"))
    if found != (REVIEW_API_VERSION, "AdmissionReview"):
        raise _HttpError(
            400,
            f"apiVersion/kind: expected {REVIEW_API_VERSION}/AdmissionReview, got "
            f"{found[0]!r}/{found[1]!r}",
        )
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise _HttpError(400, "request: expected an object with a string uid")
    return review


def _error(status: int, message: str, *, allow: str | None = None) -> _Answer:
    """An error answer: a ``metav1.Status`` the API server's client reads the message of."""
    status_body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _STATUS_REASONS.get(status, "BadRequest" if status < 500 else "InternalError"),
        "code": status,
    }
    headers = (("Allow", allow),) if allow else ()
    return _Answer(status, json.dumps(status_body).encode(), headers=headers)


def _log_refusal(path: str, request: Mapping[str, Any], response: Mapping[str, Any]) -> None:
    kind = request.get("kind")
    kind_name = kind.get("kind") if isinstance(kind, Mapping) else None
    namespace, name = request.get("namespace") or "", request.get("name") or ""
    status = response.get("status")
    message = status.get("message") if isinstance(status, Mapping) else None
    LOG.info(
        "%s refused %s %s %s: %s",
        path,
        request.get("operation"),
        kind_name,
        f"{namespace}/{name}" if namespace else name,
        message or "without a message",
    )


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
