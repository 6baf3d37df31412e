"""``podwright operator`` against the API-server emulator: the options it refuses, an API server
that does not answer, and one replica out of the cluster as ``kopf run`` runs an operator
(``--kubeconfig K --webhook-host 127.0.0.1``): it serves the admission webhooks (a Workload
gets its defaults through them), runs the Workload's task, exposes its metrics and probes, and
on SIGTERM releases its Lease and exits 0, leaving the webhook configurations in place. Its
work on many Workloads, several replicas and failures is the cluster tier's
(``tests/cluster/test_operator.py``)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from podwright.adapters.kubernetes import KubernetesClient, connect
from podwright.cli.main import cli
from podwright.core.cluster_resources import API_VERSION
from podwright.core.crds import custom_resource_definitions
from podwright.core.webhook_configurations import ADMISSION_API_VERSION, MUTATING_KIND
from podwright.engine.kubernetes_port import ObjectRef
from tests.k8s_emulator import Emulator
from tests.kube.support import eventually, write_kubeconfig
from tests.node_sim import NodeSimulator

ROOT = Path(__file__).resolve().parents[2]


def operator(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["operator", "--metrics-address", "off", *args])
    return result.exit_code, result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("--cert-dir", ".", "--ca-secret", "ca"),
            "--cert-dir, --ca-secret: give one of them, not both",
            id="cert-dir-and-ca-secret",
        ),
        pytest.param(
            ("--webhook-host", "10.0.0.1", "--webhook-service", "hooks"),
            "--webhook-host, --webhook-service: give one of them, not both",
            id="host-and-service",
        ),
        pytest.param(
            ("--lease-duration", "5s", "--renew-deadline", "10s"),
            "--renew-deadline: must lie between retry_period and lease_duration",
            id="deadline-past-the-lease",
        ),
        pytest.param(
            ("--lease-duration", "1500ms", "--renew-deadline", "1s", "--retry-period", "200ms"),
            "--lease-duration: must be whole seconds",
            id="lease-in-fractions",
        ),
        pytest.param(("--namespace", "Not_A_Name"), "--namespace 'Not_A_Name': ", id="namespace"),
        pytest.param(
            ("--round-interval", "soon"), "Invalid value for '--round-interval'", id="dur"
        ),
        pytest.param(
            ("--kube-api-qps", "0"),
            "Invalid value for '--kube-api-qps': 0.0 is not in the range x>0.",
            id="qps-zero",
        ),
        pytest.param(
            ("--kube-api-burst", "0"),
            "Invalid value for '--kube-api-burst': 0 is not in the range x>=1.",
            id="burst-zero",
        ),
    ],
)
def test_bad_options_are_refused_naming_them(args: tuple[str, ...], message: str) -> None:
    code, stderr = operator(*args)
    assert code == 2, stderr
    assert message in stderr


def test_an_api_server_that_does_not_answer_is_named(tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    kubeconfig = str(write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{port}"))
    code, stderr = operator("--kubeconfig", kubeconfig, "--webhook-host", "127.0.0.1")
    assert code == 6, stderr
    assert f"127.0.0.1:{port}" in stderr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KubernetesClient, Path]]:
    with Emulator() as emulator:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", emulator.url)
        client = KubernetesClient(connect(str(kubeconfig)))
        try:
            for crd in custom_resource_definitions():
                client.apply(crd, field_manager="test")
            classes = (ROOT / "deploy/priority-classes.yaml").read_text()
            for priority_class in yaml.safe_load_all(classes):
                client.create(priority_class)
            for name in ("podwright-system", "ml"):
                client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
            yield client, kubeconfig
        finally:
            client.close()


@pytest.mark.parametrize(
    ("options", "called", "not_called"),
    [
        pytest.param(
            (), ("/mutate/workloads", "/validate/workloads"), "/admit/workloads", id="two"
        ),
        pytest.param(
            ("--single-webhook",), ("/admit/workloads",), "/validate/workloads", id="single"
        ),
    ],
)
def test_one_replica_serves_the_webhooks_runs_a_workload_and_stops_cleanly(
    cluster: tuple[KubernetesClient, Path],
    tmp_path: Path,
    options: tuple[str, ...],
    called: tuple[str, ...],
    not_called: str,
) -> None:
    client, kubeconfig = cluster
    log_path = tmp_path / "operator.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                *(sys.executable, "-m", "podwright", "operator", "--kubeconfig", str(kubeconfig)),
                *("--webhook-host", "127.0.0.1", "--port", "0", "--identity", "solo"),
                *("--metrics-address", "127.0.0.1:0", "--round-interval", "200ms"),
                *options,
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            started = eventually(
                lambda: "operator solo started" in log_path.read_text(), timeout=60
            )
            assert started
            port = int(re.findall(r"127\.0\.0\.1:(\d+)/metrics", log_path.read_text())[0])
            metrics = f"http://127.0.0.1:{port}"
            api = connect(str(kubeconfig))
            try:
                with NodeSimulator(client, api, namespace="ml"):
                    client.create(
                        {
                            "apiVersion": API_VERSION,
                            "kind": "Workload",
                            "metadata": {"name": "t", "namespace": "ml"},
                            "spec": {"type": "training", "image": "busybox", "command": "true"},
                        }
                    )
                    ref = ObjectRef(API_VERSION, "Workload", "ml", "t")
                    eventually(
                        lambda: (client.get(ref).get("status") or {}).get("phase") == "Success",
                        timeout=60,
                    )
            finally:
                api.close()
            assert _get(f"{metrics}/readyz") == (200, "ready\n")
            assert _get(f"{metrics}/healthz")[0] == 200
            # The Workloads are counted by phase once a round interval.
            success = re.compile(r'podwright_workloads\{phase="Success"\} 1\.0')

            def counted() -> str:
                page = _get(f"{metrics}/metrics")[1]
                return page if success.search(page) else ""

            text = eventually(counted)
            assert "podwright_operator_leader 1.0" in text
            # The Workload was admitted through the operator's own webhooks.
            for path in called:
                count = rf'podwright_webhook_request_seconds_count\{{path="{path}"\}} [1-9]'
                assert re.search(count, text), text
            assert f'podwright_webhook_request_seconds_count{{path="{not_called}"}}' not in text
            assert "podwright_executor_round_seconds_count" in text
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0, log_path.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    lease = client.get(
        ObjectRef("coordination.k8s.io/v1", "Lease", "podwright-system", "podwright-operator")
    )
    assert not lease["spec"].get("holderIdentity"), lease  # released on the way out
    configuration = client.get(ObjectRef(ADMISSION_API_VERSION, MUTATING_KIND, "", "podwright"))
    assert configuration["webhooks"], "the configurations stay: the cluster fails closed"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
