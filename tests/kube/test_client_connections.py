"""The Kubernetes client's connections: a pool sized for its user, and a request that gets no
answer reported with the server, the cause, and whether the request can have reached the server.

Unreachable servers are real: a closed local port (connection refused) and a local socket that
accepts and closes without answering (the request was sent). Causes that cannot be produced
locally on demand (a name that does not resolve, TLS, timeouts) are a table over the exceptions
urllib3 raises for them.
"""

from __future__ import annotations

import errno
import http.client
import json
import logging
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.adapters.kubernetes.client import DEFAULT_POOL_SIZE
from podwright.adapters.kubernetes.cluster_port import connection_pool_size
from podwright.adapters.kubernetes.errors import connection_error
from podwright.engine.executor import ExecutorConfig
from podwright.engine.kubernetes_port import ApiConnectionError, ObjectRef
from podwright.engine.plugins import default_plugins
from tests.k8s_emulator import Emulator
from tests.kube.support import config_map, write_kubeconfig

SERVER = "https://10.0.0.1:6443"


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def hanging_up_server() -> Iterator[str]:
    """A server that accepts every connection, reads the request, and closes without a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.05)  # so the loop sees the stop event
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                _read_request(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _read_request(connection: socket.socket) -> None:
    """Read a whole HTTP request (closing with some of it unread would reset the connection)."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += connection.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        body += connection.recv(65536)


def test_a_refused_connection_names_the_server_and_did_not_reach_it(closed_port: int) -> None:
    client = KubernetesClient.for_host(f"http://127.0.0.1:{closed_port}")
    with pytest.raises(ApiConnectionError) as caught:
        client.create(config_map("a", "default"))
    client.close()
    error = caught.value
    assert error.message == (
        f"cannot reach the Kubernetes API server http://127.0.0.1:{closed_port}: connection refused"
    )
    assert (error.server, error.cause) == (f"http://127.0.0.1:{closed_port}", "connection refused")
    assert not error.may_have_reached


def test_a_connection_closed_after_the_request_may_have_reached_the_server(
    hanging_up_server: str,
) -> None:
    client = KubernetesClient.for_host(hanging_up_server)
    with pytest.raises(ApiConnectionError) as caught:
        client.create(config_map("a", "default"))
    client.close()
    assert caught.value.may_have_reached
    assert caught.value.message == (
        f"lost the connection to the Kubernetes API server {hanging_up_server}: the server "
        "closed the connection without answering; the request may have reached it"
    )


def test_probing_an_unreachable_server_tries_a_few_times_then_says_why(closed_port: int) -> None:
    sleeps: list[float] = []
    client = KubernetesClient.for_host(f"http://127.0.0.1:{closed_port}")
    with pytest.raises(ApiConnectionError) as caught:
        client.server_version(attempts=3, backoff_seconds=0.5, sleep=sleeps.append)
    client.close()
    assert sleeps == [0.5, 1.0]
    assert caught.value.message == (
        f"cannot reach the Kubernetes API server http://127.0.0.1:{closed_port}: "
        "connection refused (tried 3 times)"
    )


def test_probing_a_server_that_answers_returns_its_version() -> None:
    with Emulator() as emulator:
        client = KubernetesClient.for_host(emulator.url)
        assert client.server_version(sleep=pytest.fail) == "v1.36.0-emulator"
        client.close()


def _refused() -> BaseException:
    cause = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    error = urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection")  # type: ignore[arg-type]
    error.__cause__ = cause
    return error


def _unresolvable() -> BaseException:
    cause = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    error = urllib3.exceptions.NameResolutionError("api.example", None, cause)  # type: ignore[arg-type]
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    ("exc", "cause", "may_have_reached"),
    [
        pytest.param(_refused(), "connection refused", False, id="refused"),
        pytest.param(
            urllib3.exceptions.MaxRetryError(None, "/version", _refused()),  # type: ignore[arg-type]
            "connection refused",
            False,
            id="refused-after-urllib3-retries",
        ),
        pytest.param(
            _unresolvable(),
            "cannot resolve the host name (Name or service not known)",
            False,
            id="dns",
        ),
        pytest.param(
            urllib3.exceptions.ConnectTimeoutError(None, "timed out"),
            "the connection timed out",
            False,
            id="connect-timeout",
        ),
        pytest.param(
            urllib3.exceptions.SSLError(ssl.SSLError(1, "certificate verify failed")),
            "the TLS handshake failed (certificate verify failed)",
            False,
            id="tls",
        ),
        pytest.param(
            urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out"),  # type: ignore[arg-type]
            "no answer before the read timeout",
            True,
            id="read-timeout",
        ),
        pytest.param(
            urllib3.exceptions.ProtocolError(
                "Connection aborted.", ConnectionResetError(errno.ECONNRESET, "reset")
            ),
            "connection reset by the server",
            True,
            id="reset",
        ),
        pytest.param(
            urllib3.exceptions.ProtocolError(
                "Connection aborted.", http.client.RemoteDisconnected("closed")
            ),
            "the server closed the connection without answering",
            True,
            id="closed-without-answer",
        ),
        pytest.param(
            urllib3.exceptions.ProtocolError("Response ended prematurely"),
            "the connection broke mid-answer (Response ended prematurely)",
            True,
            id="cut-short",
        ),
        pytest.param(
            OSError(errno.EHOSTUNREACH, "No route to host"),
            "no route to host",
            True,
            id="os-error-while-reading",
        ),
    ],
)
def test_connection_errors_say_why_and_whether_the_request_was_sent(
    exc: BaseException, cause: str, may_have_reached: bool
) -> None:
    error = connection_error(SERVER, exc)
    assert (error.cause, error.may_have_reached) == (cause, may_have_reached)
    assert error.server == SERVER
    if may_have_reached:
        assert error.message.startswith(
            f"lost the connection to the Kubernetes API server {SERVER}"
        )
    else:
        assert error.message == f"cannot reach the Kubernetes API server {SERVER}: {cause}"


def test_the_default_pool_fits_an_executor_of_the_default_concurrency() -> None:
    default_concurrency = ExecutorConfig(backend="kubernetes/any").concurrency
    assert connection_pool_size(default_concurrency, default_plugins()) == DEFAULT_POOL_SIZE
    assert connection_pool_size(100, default_plugins()) == 100 + 2 * 8 + 1 + 1  # + the pods


def test_concurrent_requests_reuse_at_most_pool_size_connections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool_size = connection_pool_size(4, default_plugins())
    with Emulator() as emulator:
        client = KubernetesClient.for_host(emulator.url, pool_size=pool_size)
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pool"}})
        client.create(config_map("shared", "pool"))
        emulator.reset_counts()
        start = threading.Barrier(pool_size)
        failures: list[BaseException] = []

        def busy() -> None:
            start.wait(30)
            try:
                for _ in range(20):
                    client.get(ObjectRef("v1", "ConfigMap", "pool", "shared"))
            except BaseException as exc:  # reported below, not lost in the thread
                failures.append(exc)

        with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
            threads = [threading.Thread(target=busy) for _ in range(pool_size)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
        opened = client.connections_opened()
        client.close()
        assert failures == []
        assert emulator.requests("get") == 20 * pool_size
        assert emulator.connections() <= pool_size
        assert 1 <= opened <= pool_size
    assert not [r for r in caplog.records if "Connection pool is full" in r.getMessage()]


def test_connect_sizes_the_pool_and_leaves_retries_to_the_engine(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", SERVER)
    api = connect(str(kubeconfig), pool_size=7)
    pool = api.rest_client.pool_manager.connection_pool_kw
    api.close()
    assert pool["maxsize"] == 7
    assert getattr(pool["retries"], "total", pool["retries"]) is False
    with pytest.raises(ValueError, match="pool_size: must be at least 1, got 0"):
        connect(str(kubeconfig), pool_size=0)


def test_the_emulator_counts_each_clients_requests_by_its_bearer_token(tmp_path: Path) -> None:
    """Benchmarks tell one process's requests from another's by the token each one's kubeconfig
    carries (the emulator checks none); the counts by verb are the same requests."""
    with Emulator() as emulator:
        clients = {}
        for token in ("console", "writer"):
            kubeconfig = write_kubeconfig(tmp_path / f"kubeconfig-{token}", emulator.url)
            config = json.loads(kubeconfig.read_text())
            config["users"][0]["user"]["token"] = token
            kubeconfig.write_text(json.dumps(config))
            clients[token] = KubernetesClient(connect(str(kubeconfig)))
        anonymous = KubernetesClient.for_host(emulator.url)
        try:
            clients["writer"].create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "counted"}}
            )
            clients["writer"].create(config_map("shared", "counted"))
            for _ in range(2):
                clients["console"].get(ObjectRef("v1", "ConfigMap", "counted", "shared"))
            clients["console"].list_objects("v1", "ConfigMap", namespace="counted")
            anonymous.get(ObjectRef("v1", "ConfigMap", "counted", "shared"))
        finally:
            for client in (*clients.values(), anonymous):
                client.close()
        assert emulator.requests(token="console") == 3
        assert emulator.requests("get", token="console") == 2
        assert emulator.requests("list", token="console") == 1
        assert emulator.requests(token="writer") == emulator.requests("create", token="writer") == 2
        assert emulator.requests(token="") == 1
        assert emulator.requests() == 6
        with urllib.request.urlopen(f"{emulator.url}/_emulator/requests?by=token") as answer:
            assert json.load(answer) == {
                "writer": {"create": 2},
                "console": {"get": 2, "list": 1},
                "": {"get": 1},
            }
        emulator.reset_counts()
        assert emulator.requests(token="console") == 0
