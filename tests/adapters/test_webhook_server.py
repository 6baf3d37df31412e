"""The admission webhook server over real HTTPS, with clients that verify its certificate against
the CA bundle as the API server does: reviews answered, bad requests refused with a clear status,
handlers that fail answered 500 while the server serves on, keep-alive, limits, probes, a clean
stop, one log line per refusal or error; certificates renewed and rotated, and files reloaded,
under a load that sees no failure."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import http.client
import json
import logging
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from podwright.adapters.certificates import (
    CertificateAuthority,
    CertificateDirectory,
    CertificateKeeper,
    CertificateSettings,
)
from podwright.adapters.webhook_server import (
    ServerSettings,
    ServerStartError,
    WebhookServer,
    WebhookServerSettingsError,
    WouldBlock,
    may_block,
)
from tests.kube.support import eventually
from tests.webhook_server import ManualClock, PublishedBundles, utc_now

HOST = "127.0.0.1"
DAY = datetime.timedelta(days=1)
Review = dict[str, Any]


def review(uid: str = "8f0e", **request: Any) -> Review:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "podwright.dev", "version": "v1alpha1", "kind": "Workload"},
            "namespace": "vision",
            "name": "train",
            "operation": "CREATE",
            **request,
        },
    }


def answer(review: Mapping[str, Any], **response: Any) -> Review:
    uid = review["request"]["uid"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, **response},
    }


def allow(review: Mapping[str, Any]) -> Review:
    return answer(review, allowed=True)


def refuse(review: Mapping[str, Any]) -> Review:
    return answer(review, allowed=False, status={"code": 403, "message": "no GPUs on Sunday"})


def crash(review: Mapping[str, Any]) -> Review:
    raise KeyError("spec")


class NotAReviewError(ValueError):
    """What the handlers' own check of a review raises (the lead's BadReviewError)."""


def picky(review: Mapping[str, Any]) -> Review:
    raise NotAReviewError("request: expected a CREATE or UPDATE with its object")


@pytest.fixture(scope="module")
def keeper() -> CertificateKeeper:
    keeper = CertificateKeeper([HOST], clock=utc_now)
    keeper.refresh()
    return keeper


@contextlib.contextmanager
def serving(
    routes: Mapping[str, Callable[[Review], Mapping[str, Any]]],
    tls: CertificateKeeper | CertificateDirectory,
    **options: Any,
) -> Iterator[WebhookServer]:
    with WebhookServer(routes, tls, host=HOST, **options) as server:
        yield server


NO_CHECK_TIME = 0x200000
"""OpenSSL's ``X509_V_FLAG_NO_CHECK_TIME`` (``x509_vfy.h``), which the ssl module passes on."""


def client_context(bundle: bytes, *, check_time: bool = True) -> ssl.SSLContext:
    """A client that trusts ``bundle`` only and checks the host name, as the API server does;
    without ``check_time``, for certificates made on a clock the test moves, it checks the
    chain but not the validity period (the test checks that against its clock)."""
    context = ssl.create_default_context(cadata=bundle.decode())
    if not check_time:
        context.verify_flags |= NO_CHECK_TIME
    return context


def connect(
    server: WebhookServer, bundle: bytes, *, check_time: bool = True
) -> http.client.HTTPSConnection:
    host, port = server.address
    context = client_context(bundle, check_time=check_time)
    return http.client.HTTPSConnection(host, port, context=context, timeout=10)


class Connections:
    """The test's client connections, each closed when the test ends."""

    def __init__(self) -> None:
        self._opened: list[http.client.HTTPSConnection | ssl.SSLSocket] = []
        self._lock = threading.Lock()

    def to(self, server: WebhookServer, bundle: bytes) -> http.client.HTTPSConnection:
        connection = connect(server, bundle)
        with self._lock:
            self._opened.append(connection)
        return connection

    def raw(self, server: WebhookServer, bundle: bytes) -> ssl.SSLSocket:
        """A TLS connection to write HTTP by hand."""
        host, port = server.address
        plain = socket.create_connection((host, port), timeout=10)
        try:
            connection = client_context(bundle).wrap_socket(plain, server_hostname=host)
        except BaseException:
            plain.close()
            raise
        with self._lock:
            self._opened.append(connection)
        return connection

    def close(self) -> None:
        for connection in self._opened:
            connection.close()


@pytest.fixture
def connections() -> Iterator[Connections]:
    opened = Connections()
    yield opened
    opened.close()


def post(
    connection: http.client.HTTPConnection, path: str, body: bytes | Review, **headers: str
) -> tuple[int, Any, http.client.HTTPResponse]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    connection.request("POST", path, data, {"Content-Type": "application/json", **headers})
    response = connection.getresponse()
    raw = response.read()
    decoded = json.loads(raw) if response.getheader("Content-Type") == "application/json" else raw
    return response.status, decoded, response


def get(server: WebhookServer, bundle: bytes, path: str) -> tuple[int, str]:
    connection = connect(server, bundle)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def read_until_closed(connection: ssl.SSLSocket) -> bytes:
    chunks = []
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


# Reviews and their answers ---------------------------------------------------------------------


def test_a_review_is_answered_by_its_path_handler(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    with serving({"/validate": refuse, "/mutate": allow}, keeper) as server:
        connection = connections.to(server, keeper.ca_bundle)
        status, body, _ = post(connection, "/validate?timeout=5s", review("one"))
        assert status == 200
        assert body == answer(
            review("one"),
            allowed=False,
            status={"code": 403, "message": "no GPUs on Sunday"},
        )
        status, body, _ = post(connection, "/mutate", review("two"))
        assert (status, body) == (200, allow(review("two")))


def test_a_kept_alive_connection_serves_request_after_request(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    with serving({"/validate": allow}, keeper) as server:
        connection = connections.to(server, keeper.ca_bundle)
        post(connection, "/validate", review("first"))
        first_socket = connection.sock
        for uid in ("second", "third"):
            status, body, response = post(connection, "/validate", review(uid))
            assert (status, body["response"]["uid"]) == (200, uid)
            assert response.getheader("Connection") is None
        assert connection.sock is first_socket, "one connection for all three"


def test_answers_are_sent_without_waiting_for_the_clients_acks(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    """TCP_NODELAY on every accepted connection: with Nagle's algorithm, the first answer on a
    new TLS connection waited ~40 ms for the client's delayed ACK (the API server's webhook
    calls on fresh connections, and the emulator's, each paid it)."""
    with serving({"/validate": allow}, keeper) as server:
        post(connections.to(server, keeper.ca_bundle), "/validate", review("one"))
        [served] = server._connections
        sock = served.writer.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


def test_a_client_that_does_not_trust_the_ca_cannot_connect(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    stranger = CertificateAuthority.create(now=utc_now(), validity=DAY)
    with serving({"/validate": allow}, keeper) as server:
        connection = connections.to(server, stranger.pem)
        with pytest.raises(ssl.SSLCertVerificationError):
            post(connection, "/validate", review())


def status_of(body: Any) -> tuple[int, str, str]:
    assert body["kind"] == "Status"
    assert body["status"] == "Failure"
    return body["code"], body["reason"], body["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(b"{not json", "the body is not JSON: ", id="not JSON"),
        pytest.param(
            b"[1, 2]", "the body is not an admission.k8s.io/v1 AdmissionReview", id="not an object"
        ),
        pytest.param(
            {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}},
            "apiVersion/kind: expected admission.k8s.io/v1/AdmissionReview, got "
            "'admission.k8s.io/v1beta1'/'AdmissionReview'",
            id="v1beta1",
        ),
        pytest.param(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}},
            "request: expected an object with a string uid",
            id="no uid",
        ),
    ],
)
def test_a_body_that_is_not_an_admission_review_is_a_bad_request(
    keeper: CertificateKeeper, body: bytes | Review, message: str, connections: Connections
) -> None:
    with serving({"/validate": allow}, keeper) as server:
        connection = connections.to(server, keeper.ca_bundle)
        status, answered, _ = post(connection, "/validate", body)
        assert status == 400
        code, reason, text = status_of(answered)
        assert (code, reason) == (400, "BadRequest")
        assert text.startswith(message)
        status, _, _ = post(connection, "/validate", review())
        assert status == 200, "the connection serves on"


def test_an_unknown_path_or_method_is_refused(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    with serving({"/validate": allow, "/mutate": allow}, keeper) as server:
        connection = connections.to(server, keeper.ca_bundle)
        _status, body, _ = post(connection, "/other", review())
        assert status_of(body) == (
            404,
            "NotFound",
            "no webhook at this path (webhooks: /mutate, /validate)",
        )
        connection.request("GET", "/validate")
        response = connection.getresponse()
        assert response.status == 405
        assert response.getheader("Allow") == "POST"
        assert status_of(json.loads(response.read()))[2] == "an AdmissionReview is POSTed"


def test_a_handler_that_fails_is_answered_500_and_the_server_serves_on(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    def wrong_uid(review: Mapping[str, Any]) -> Review:
        return answer({"request": {"uid": "another"}}, allowed=True)

    routes = {"/crash": crash, "/picky": picky, "/wrong-uid": wrong_uid, "/validate": allow}
    with serving(routes, keeper, bad_review_errors=(NotAReviewError,)) as server:
        connection = connections.to(server, keeper.ca_bundle)
        status, body, _ = post(connection, "/crash", review())
        assert status_of(body) == (500, "InternalError", "the webhook failed: KeyError: 'spec'")
        status, body, _ = post(connection, "/picky", review())
        assert status_of(body) == (
            400,
            "BadRequest",
            "request: expected a CREATE or UPDATE with its object",
        )
        status, body, _ = post(connection, "/wrong-uid", review("8f0e"))
        assert status_of(body)[:2] == (500, "InternalError")
        assert status_of(body)[2] == (
            "the webhook's answer is not an AdmissionReview response to uid '8f0e'"
        )
        status, _, _ = post(connection, "/validate", review())
        assert status == 200


def test_a_body_beyond_the_limit_is_refused_unread(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    settings = ServerSettings(max_body_bytes=1024)
    with serving({"/validate": allow}, keeper, settings=settings) as server:
        connection = connections.to(server, keeper.ca_bundle)
        big = review(object={"data": "x" * 2000})
        status, body, response = post(connection, "/validate", big)
        assert status == 413
        assert status_of(body)[2].endswith("exceeds the limit of 1024")
        assert response.getheader("Connection") == "close"
        status, _, _ = post(connections.to(server, keeper.ca_bundle), "/validate", review())
        assert status == 200


def test_a_client_that_expects_100_continue_gets_it(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    body = json.dumps(review()).encode()
    with serving({"/validate": allow}, keeper) as server:
        connection = connections.raw(server, keeper.ca_bundle)
        connection.sendall(
            b"POST /validate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        )
        assert connection.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        connection.sendall(body)
        reply = read_until_closed(connection)
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Connection: close\r\n" in reply
    assert reply.endswith(json.dumps(allow(review()), separators=(",", ":")).encode())


@pytest.mark.parametrize(
    ("head", "status", "message"),
    [
        pytest.param(
            b"POST /validate HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            501,
            b"no Transfer-Encoding",
            id="chunked",
        ),
        pytest.param(
            b"POST /validate HTTP/1.1\r\n\r\n",
            411,
            b"a POST must have a Content-Length",
            id="no length",
        ),
        pytest.param(
            b"POST /validate HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
            400,
            b"Content-Length: not a length",
            id="a bad length",
        ),
        pytest.param(b"POST /validate HTTP/2\r\n\r\n", 505, b"HTTP/1.1 is served", id="HTTP/2"),
        pytest.param(b"garbage\r\n\r\n", 400, b"not an HTTP request line", id="not HTTP"),
        pytest.param(
            b"GET /healthz HTTP/1.1\r\nX: " + b"x" * 70_000 + b"\r\n\r\n",
            431,
            b"too long",
            id="headers too large",
        ),
    ],
)
def test_requests_that_cannot_be_read_are_answered_and_closed(
    keeper: CertificateKeeper, head: bytes, status: int, message: bytes, connections: Connections
) -> None:
    with serving({"/validate": allow}, keeper) as server:
        connection = connections.raw(server, keeper.ca_bundle)
        connection.sendall(head)
        reply = read_until_closed(connection)
    assert reply.startswith(f"HTTP/1.1 {status} ".encode())
    assert message in reply
    assert b"Connection: close\r\n" in reply


# Probes -----------------------------------------------------------------------------------------


def test_probes_say_whether_the_server_can_answer(tmp_path: Path) -> None:
    clock = ManualClock()
    keeper = CertificateKeeper([HOST], clock=clock)
    keeper.refresh()
    unready: list[str] = ["the policy caches have not listed yet"]
    with serving(
        {"/validate": allow}, keeper, readiness=lambda: unready[0] if unready else None
    ) as server:
        bundle = keeper.ca_bundle
        assert get(server, bundle, "/healthz") == (200, "ok\n")
        assert get(server, bundle, "/readyz") == (503, "the policy caches have not listed yet\n")
        unready.clear()
        assert get(server, bundle, "/readyz") == (200, "ok\n")
        clock.advance(31 * DAY)  # the certificate expired, never renewed (the keeper not started)
        status, text = get_unverified(server, "/healthz")
        assert status == 503
        assert text.startswith("the serving certificate expired at ")
        assert get_unverified(server, "/readyz")[0] == 503


def get_unverified(server: WebhookServer, path: str) -> tuple[int, str]:
    """A GET from a client that does not check the certificate (a kubelet's HTTPS probe)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    host, port = server.address
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    result = response.status, response.read().decode()
    connection.close()
    return result


# Limits and stopping ---------------------------------------------------------------------------


class Gate:
    """A handler that waits until let through, counting how many wait at once."""

    def __init__(self) -> None:
        self.waiting = 0
        self.most_waiting = 0
        self.done = 0
        self._lock = threading.Lock()
        self._permits = threading.Semaphore(0)

    def __call__(self, review: Mapping[str, Any]) -> Review:
        with self._lock:
            self.waiting += 1
            self.most_waiting = max(self.most_waiting, self.waiting)
        self._permits.acquire(timeout=30)
        with self._lock:
            self.waiting -= 1
            self.done += 1
        return allow(review)

    def let_through(self, count: int = 1) -> None:
        for _ in range(count):
            self._permits.release()


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(call())
        except Exception as error:
            results.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, results


def test_handlers_run_on_a_bounded_number_of_threads(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    gate = Gate()
    with serving({"/slow": gate}, keeper, settings=ServerSettings(handler_threads=2)) as server:
        clients = [
            in_thread(lambda: post(connections.to(server, keeper.ca_bundle), "/slow", review())[0])
            for _ in range(5)
        ]
        eventually(lambda: gate.waiting == 2)
        for released in range(1, 6):
            gate.let_through()
            eventually(lambda released=released: gate.done == released)
        for thread, _results in clients:
            thread.join(timeout=10)
    assert [results for _thread, results in clients] == [[200]] * 5
    assert gate.most_waiting == 2


def where(review: Mapping[str, Any]) -> Review:
    """Allowed, with a warning saying the thread it ran on and whether it may block there."""
    ran_on = f"{threading.current_thread().name} may_block={may_block()}"
    return answer(review, allowed=True, warnings=[ran_on])


def ran_on(body: Any) -> str:
    (text,) = body["response"]["warnings"]
    return str(text)


@pytest.mark.parametrize(
    ("answer_inline", "expected"),
    [
        pytest.param(False, r"webhook-handler_\d+ may_block=True", id="on a handler thread"),
        pytest.param(True, "webhook-server may_block=False", id="inline, on the loop's thread"),
    ],
)
def test_handlers_answering_inline_run_on_the_loops_thread_where_they_may_not_block(
    keeper: CertificateKeeper, connections: Connections, answer_inline: bool, expected: str
) -> None:
    with serving({"/where": where}, keeper, answer_inline=answer_inline) as server:
        _status, body, _ = post(connections.to(server, keeper.ca_bundle), "/where", review())
    assert re.fullmatch(expected, ran_on(body))


def test_a_handler_that_would_block_inline_is_run_again_on_a_thread_while_the_loop_serves_on(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    gate = Gate()

    def waits_off_the_loop(review: Mapping[str, Any]) -> Review:
        if not may_block():
            raise WouldBlock("not in the cache yet")
        return gate(review)

    routes = {"/waits": waits_off_the_loop, "/where": where}
    with serving(routes, keeper, answer_inline=True) as server:
        waiting, results = in_thread(
            lambda: post(connections.to(server, keeper.ca_bundle), "/waits", review("slow"))
        )
        eventually(lambda: gate.waiting == 1)
        _status, body, _ = post(connections.to(server, keeper.ca_bundle), "/where", review())
        assert ran_on(body) == "webhook-server may_block=False"
        gate.let_through()
        waiting.join(timeout=10)
    [(status, body, _response)] = results
    assert (status, body) == (200, allow(review("slow")))


def test_a_handler_that_would_block_where_it_may_is_a_failure_of_the_handler(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    def always_would_block(review: Mapping[str, Any]) -> Review:
        raise WouldBlock("confused")

    with serving({"/confused": always_would_block}, keeper, answer_inline=True) as server:
        _status, body, _ = post(connections.to(server, keeper.ca_bundle), "/confused", review())
    assert status_of(body) == (
        500,
        "InternalError",
        "the webhook failed: it raised WouldBlock on a handler thread, where it may wait",
    )


def test_connections_beyond_the_limit_are_closed(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    with serving(
        {"/validate": allow}, keeper, settings=ServerSettings(max_connections=1)
    ) as server:
        first = connections.to(server, keeper.ca_bundle)
        assert post(first, "/validate", review())[0] == 200
        with pytest.raises((ConnectionError, ssl.SSLError, http.client.HTTPException)):
            post(connections.to(server, keeper.ca_bundle), "/validate", review())
        first.close()

        def answered() -> bool:
            try:
                return (
                    post(connections.to(server, keeper.ca_bundle), "/validate", review())[0] == 200
                )
            except (ConnectionError, ssl.SSLError):
                return False  # the server has not seen the first connection closed yet

        eventually(answered)


def test_slow_and_idle_connections_are_closed(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    settings = ServerSettings(request_timeout_seconds=0.2, idle_timeout_seconds=0.2)
    with serving({"/validate": allow}, keeper, settings=settings) as server:
        slow = connections.raw(server, keeper.ca_bundle)
        slow.sendall(b"POST /validate HTTP/1.1\r\n")  # and nothing more
        assert read_until_closed(slow) == b""
        idle = connections.to(server, keeper.ca_bundle)
        assert post(idle, "/validate", review())[0] == 200
        assert idle.sock is not None
        assert read_until_closed(idle.sock) == b""


def test_a_stop_lets_the_requests_in_hand_finish_and_accepts_no_more(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    gate = Gate()
    server = WebhookServer({"/slow": gate, "/validate": allow}, keeper, host=HOST).start()
    host, port = server.address
    idle = connections.to(server, keeper.ca_bundle)
    assert post(idle, "/validate", review())[0] == 200
    in_hand, answered = in_thread(
        lambda: post(connections.to(server, keeper.ca_bundle), "/slow", review())
    )
    eventually(lambda: gate.waiting == 1)
    stopping, _ = in_thread(server.stop)

    def refused() -> bool:
        try:
            socket.create_connection((host, port), timeout=1).close()
        except (ConnectionRefusedError, ConnectionResetError):
            # Reset: the connection reached the listening socket's queue as it was closed, and
            # the kernel reset it; either way the server accepted nothing.
            return True
        return False

    eventually(refused)
    assert idle.sock is not None
    assert read_until_closed(idle.sock) == b"", "an idle connection is closed at once"
    gate.let_through()
    in_hand.join(timeout=10)
    stopping.join(timeout=10)
    assert not stopping.is_alive()
    status, _body, response = answered[0]
    assert status == 200
    assert response.getheader("Connection") == "close"


def test_a_stop_returns_within_its_bound_when_a_handler_hangs(
    keeper: CertificateKeeper, connections: Connections
) -> None:
    gate = Gate()
    settings = ServerSettings(shutdown_timeout_seconds=0.2)
    server = WebhookServer({"/slow": gate}, keeper, host=HOST, settings=settings).start()
    in_thread(lambda: post(connections.to(server, keeper.ca_bundle), "/slow", review()))
    eventually(lambda: gate.waiting == 1)
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 5
    gate.let_through()


# Settings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("routes", "settings", "message"),
    [
        pytest.param(
            {"validate": allow}, None, "routes: 'validate' is not a webhook path", id="no /"
        ),
        pytest.param(
            {"/healthz": allow}, None, "routes: '/healthz' is not a webhook path", id="a probe"
        ),
        pytest.param({"/v": "allow"}, None, r"routes\['/v'\]: not callable", id="not callable"),
        pytest.param(
            {},
            lambda: ServerSettings(handler_threads=0),
            "handler_threads: must be a positive integer",
            id="no threads",
        ),
        pytest.param(
            {},
            lambda: ServerSettings(idle_timeout_seconds=-1),
            "idle_timeout_seconds: must be a positive number",
            id="a negative timeout",
        ),
    ],
)
def test_bad_routes_and_settings_are_refused_naming_them(
    keeper: CertificateKeeper,
    routes: Any,
    settings: Callable[[], ServerSettings] | None,
    message: str,
) -> None:
    with pytest.raises(WebhookServerSettingsError, match=message):
        WebhookServer(routes, keeper, settings=settings() if settings else None)


def test_an_address_in_use_is_a_clear_start_error(keeper: CertificateKeeper) -> None:
    with serving({"/validate": allow}, keeper) as server:
        _host, port = server.address
        with pytest.raises(ServerStartError, match=f"cannot listen on {HOST}:{port}"):
            WebhookServer({"/validate": allow}, keeper, host=HOST, port=port).start()


# Logs ------------------------------------------------------------------------------------------


def test_one_log_line_per_refusal_or_error_and_none_per_admitted_request(
    keeper: CertificateKeeper, caplog: pytest.LogCaptureFixture, connections: Connections
) -> None:
    caplog.set_level(logging.INFO, logger="podwright.webhook")
    with serving({"/allow": allow, "/refuse": refuse, "/crash": crash}, keeper) as server:
        connection = connections.to(server, keeper.ca_bundle)
        for _ in range(3):
            post(connection, "/allow", review())
        post(connection, "/refuse", review())
        post(connection, "/crash", review())
        post(connection, "/nowhere", review())
    lines = [
        (record.levelname, re.sub(r"from [\d.]+:\d+:", "from PEER:", record.getMessage()))
        for record in caplog.records
    ]
    assert lines == [
        ("INFO", "/refuse refused CREATE Workload vision/train: no GPUs on Sunday"),
        ("WARNING", "POST /crash from PEER: 500 the webhook failed: KeyError: 'spec'"),
        (
            "WARNING",
            "POST /nowhere from PEER: 404 no webhook at this path (webhooks: /allow, /crash, "
            "/refuse)",
        ),
    ]


# Certificates renewed under load -----------------------------------------------------------------

STEP = datetime.timedelta(hours=2)
ROTATING = CertificateSettings(
    authority_validity=4.5 * DAY,
    serving_validity=DAY,
    renewal_fraction=2 / 3,
    bundle_settle=2 * STEP,
)
"""A certificate renewed every 16 hours and the CA rotated every 3 days, as the clock moves in
steps of two hours."""


class Hammer:
    """Clients sending reviews without a pause, each trusting a CA bundle an API server could
    hold: the latest published, or one published ``bundle_settle`` earlier (less the one step the
    clock may move while a client connects). Most open a connection for every few reviews; one
    keeps its first connection throughout."""

    def __init__(
        self, server: WebhookServer, clock: ManualClock, bundles: PublishedBundles
    ) -> None:
        self.server, self.clock, self.bundles = server, clock, bundles
        self.failures: list[str] = []
        self.served_certificates: set[str] = set()
        self.completed = [0, 0, 0, 0]
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(index,), daemon=True) for index in range(4)
        ]

    def _bundle(self, lagging: bool) -> bytes:
        at = self.clock() - (ROTATING.bundle_settle - STEP if lagging else datetime.timedelta(0))
        return self.bundles.in_force(at) or self.bundles[0][1]

    def _run(self, index: int) -> None:
        sent = 0
        connection: http.client.HTTPSConnection | None = None
        while not self._stop.is_set():
            fresh = connection is None or (index > 0 and sent % 3 == 0)
            try:
                if fresh:
                    if connection is not None:
                        connection.close()
                    bundle = self._bundle(lagging=sent % 2 == 1)
                    connection = connect(self.server, bundle, check_time=False)
                assert connection is not None
                uid = f"{index}-{sent}"
                status, body, _ = post(connection, "/review", review(uid))
                assert (status, body["response"]["uid"]) == (200, uid), body
                if fresh:
                    self._check_served(connection)
            except Exception as error:
                self.failures.append(f"client {index}, review {sent}: {error!r}")
                if connection is not None:
                    connection.close()
                connection = None
            sent += 1
            self.completed[index] += 1
        if connection is not None:
            connection.close()

    def _check_served(self, connection: http.client.HTTPSConnection) -> None:
        """The certificate of a new connection was valid when it was served (the clock moves
        at most one step before the request completes, and a certificate is renewed with hours
        to spare)."""
        assert connection.sock is not None
        der = connection.sock.getpeercert(binary_form=True)
        assert der is not None
        served = x509.load_der_x509_certificate(der)
        now = self.clock()
        assert served.not_valid_before_utc <= now < served.not_valid_after_utc, (served, now)
        self.served_certificates.add(hashlib.sha256(der).hexdigest())

    def each_client_completed_one_more(self) -> None:
        before = list(self.completed)
        eventually(
            lambda: all(now > then for now, then in zip(self.completed, before, strict=True))
        )

    def __enter__(self) -> Hammer:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)


def test_clients_hammering_the_server_across_renewals_and_ca_rotations_see_no_failure() -> None:
    clock = ManualClock()
    bundles = PublishedBundles(clock)
    keeper = CertificateKeeper([HOST], clock=clock, publish_bundle=bundles, settings=ROTATING)
    keeper.refresh()
    with serving({"/review": allow}, keeper) as server, Hammer(server, clock, bundles) as hammer:
        for _step in range(7 * 12):  # a week
            clock.advance(STEP)
            keeper.refresh()
            hammer.each_client_completed_one_more()
    assert hammer.failures == []
    rotations = sum(len(ssl_certificates(bundle)) == 2 for _when, bundle in bundles)
    assert rotations == 2
    assert len(hammer.served_certificates) >= 10, "renewed every 16 hours for a week"


def ssl_certificates(bundle: bytes) -> list[bytes]:
    return [part for part in bundle.split(b"-----END CERTIFICATE-----") if part.strip()]


def test_changed_certificate_files_are_served_to_new_connections_only(
    tmp_path: Path, connections: Connections
) -> None:
    now = utc_now()
    first_ca = CertificateAuthority.create(now=now, validity=30 * DAY)
    second_ca = CertificateAuthority.create(now=now, validity=30 * DAY)

    def write(ca: CertificateAuthority) -> None:
        serving_certificate = ca.issue([HOST], now=now, validity=DAY)
        (tmp_path / "tls.crt").write_bytes(serving_certificate.certificate_pem)
        (tmp_path / "tls.key").write_bytes(serving_certificate.key_pem)

    write(first_ca)
    files = CertificateDirectory(tmp_path, clock=utc_now, check_interval_seconds=0.01)
    with files, serving({"/review": allow}, files) as server:
        kept = connections.to(server, first_ca.pem)
        assert post(kept, "/review", review())[0] == 200
        write(second_ca)
        eventually(lambda: files.serving.issued_by(second_ca))
        assert post(connections.to(server, second_ca.pem), "/review", review())[0] == 200
        with pytest.raises(ssl.SSLCertVerificationError):
            post(connections.to(server, first_ca.pem), "/review", review())
        assert post(kept, "/review", review())[0] == 200, "an open connection carries on"
