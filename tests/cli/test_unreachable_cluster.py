"""An API server that gives no answer: ``run`` refuses before it records anything (exit status 6,
the server and the cause named), and a cluster log tail tells how long the server has been
silent, for ``run`` to stop following after a bound (``tests/cli/test_run_display.py``). And the
executor's connection pool, sized for its workers and watches."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from podwright.adapters.kubernetes import KubernetesClient
from podwright.adapters.kubernetes.cluster_port import connection_pool_size
from podwright.api.backends import ClusterAccess, open_backend
from podwright.api.task_logs import ClusterLogTail
from podwright.cli.main import cli
from podwright.engine.kubernetes_port import ApiConnectionError, NotFoundError, ObjectRef
from podwright.engine.plugins import default_plugins
from tests.cli.test_run_commands import workload
from tests.cli.test_task_commands import kubeconfig


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port nothing listens on (bound, never listening: connections are refused)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def test_run_on_a_cluster_that_gives_no_answer_records_nothing_and_exits_6(
    tmp_path: Path, closed_port: int
) -> None:
    config = kubeconfig(tmp_path)
    config.write_text(config.read_text().replace("127.0.0.1:9", f"127.0.0.1:{closed_port}"))
    home = tmp_path / "home"
    spec = workload(tmp_path, "hello", "echo hi")
    result = CliRunner().invoke(
        cli,
        ["run", "--workload", spec, "--kubeconfig", str(config), "--home", str(home)],
    )
    assert result.exit_code == 6, result.output
    assert result.output.strip() == (
        "podwright: error: cannot reach the Kubernetes API server "
        f"http://127.0.0.1:{closed_port}: connection refused (tried 3 times); nothing was recorded"
    )
    listing = CliRunner().invoke(cli, ["list", "--home", str(home)])
    assert listing.output.strip() == "no tasks"


def test_a_cluster_log_tail_tells_how_long_the_server_has_given_no_answer(
    closed_port: int,
) -> None:
    moments = iter([100.0, 102.0, 140.0])
    silent = KubernetesClient.for_host(f"http://127.0.0.1:{closed_port}")
    tail = ClusterLogTail(
        silent, ObjectRef("v1", "Pod", "default", "p"), monotonic=lambda: next(moments)
    )
    assert tail.unanswered_for() is None
    assert tail.read() == []
    silence = tail.unanswered_for()
    assert silence is not None
    assert silence[0].total_seconds() == 2.0
    assert silence[1] == (
        f"cannot reach the Kubernetes API server http://127.0.0.1:{closed_port}: connection refused"
    )
    tail.close()


class FlakyServer:
    """A cluster client whose server gives no answer, then answers (the pod is not there yet)."""

    def __init__(self) -> None:
        self.answering = False

    def get(self, ref: ObjectRef) -> dict[str, object]:
        if not self.answering:
            raise ApiConnectionError(
                "cannot reach the Kubernetes API server https://10.0.0.1:6443: connection reset",
                server="https://10.0.0.1:6443",
                cause="connection reset",
                may_have_reached=True,
            )
        raise NotFoundError('pods "p" not found')

    def close(self) -> None:
        """Nothing is held."""


def test_a_cluster_log_tail_that_gets_an_answer_again_is_no_longer_silent() -> None:
    server = FlakyServer()
    moments = iter([100.0, 101.0, 103.0])
    tail = ClusterLogTail(
        server,  # type: ignore[arg-type]
        ObjectRef("v1", "Pod", "default", "p"),
        monotonic=lambda: next(moments),
    )
    assert tail.read() == []
    assert tail.unanswered_for() is not None
    server.answering = True
    assert tail.read(now=True) == []  # no such pod yet: an answer all the same
    assert tail.unanswered_for() is None


@pytest.mark.parametrize("concurrency", [1, 16, 100])
def test_an_executors_connection_pool_fits_its_workers_and_its_watches(
    tmp_path: Path, concurrency: int
) -> None:
    # With the client's default (5 per CPU), 500 tasks on a real API server discarded ~170
    # connections ("Connection pool is full"): the pool holds every worker and watch stream.
    opened = open_backend(
        "kubernetes/emu",
        home=tmp_path,
        access=ClusterAccess(str(kubeconfig(tmp_path)), "emu"),
        concurrency=concurrency,
    )
    try:
        assert opened.cluster is not None
        assert opened.cluster.client.pool_size == connection_pool_size(
            concurrency, default_plugins()
        )
        assert opened.cluster.client.pool_size > concurrency + len(default_plugins())
    finally:
        opened.close()
