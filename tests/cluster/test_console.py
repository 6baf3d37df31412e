"""The console against the cluster, in a real browser: ``podwright console --backend operator``
with the user's kubeconfig, the operator's replicas running what it submits on the simulated
nodes. Unchanged against a real cluster (``PODWRIGHT_TEST_KUBECONFIG``): the output is checked
on the emulator alone, whose simulated kubelet writes the containers' logs."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Browser, expect

from tests.browser import browser_fixture, open_page, save_screenshot  # noqa: F401
from tests.cluster.nodes import RUNS_UNTIL_DELETED, PodDriver
from tests.cluster.operators import OperatorReplicas
from tests.cluster.support import Server
from tests.cluster.test_operator import (  # noqa: F401 (pytest fixtures)
    SMALL,
    operator_install,
    operators,
)
from tests.console.console_process import running_console
from tests.kube.support import eventually

pytestmark = pytest.mark.browser

SMALL_TRAINING = {
    "type": "training",
    "image": "busybox:1.36",
    "command": "sleep 3600",
    "compute": SMALL,
}
LIVE = 60_000
"""How long a page may take to show what the operator did (ms)."""


def more_of_the_spec(pods: PodDriver) -> str:
    """What the form's YAML adds to a training workload: small compute, steered to the
    simulated nodes, running until deleted."""
    steered: dict[str, Any] = pods.workload_spec({"compute": SMALL}, RUNS_UNTIL_DELETED)
    return yaml.safe_dump(steered)


def test_a_workload_submitted_in_the_console_runs_live_and_is_aborted(
    *,
    server: Server,
    namespace: str,
    pods: PodDriver,
    browser: Browser,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    replicas: OperatorReplicas = request.getfixturevalue("operators")
    replicas.start("a")
    arguments = ["--backend", "operator", "--kubeconfig", str(server.kubeconfig), "-n", namespace]
    with (
        running_console(arguments, cwd=tmp_path) as console,
        open_page(browser, base_url=console.base) as table,
        open_page(browser, base_url=console.base) as page,
    ):
        table.goto(console.url)
        expect(table).to_have_url(re.compile(r"/workloads$"))
        page.goto(console.url)

        page.goto(f"/submit?type=training&namespace={namespace}")
        page.locator("[id='f-metadata.name']").fill("trainer")
        page.locator("[id='f-image']").fill("busybox:1.36")
        page.locator("[id='f-command']").fill("sleep 3600")
        page.locator("#f-extra").fill(more_of_the_spec(pods))
        page.get_by_role("button", name="Submit").click()
        expect(page).to_have_url(re.compile(rf"/workloads/{namespace}/[^/]+$"), timeout=LIVE)

        expect(page.locator("#phase")).to_have_text("Running", timeout=LIVE)
        expect(page.locator("#status .timeline")).to_contain_text("Queued")
        row = table.locator("#rows tr", has_text="trainer")  # it appeared without a reload
        expect(row.locator(".phase")).to_have_text("Running", timeout=LIVE)
        if server.emulator is not None:
            expect(page.locator("#logs")).not_to_be_empty(timeout=LIVE)
        save_screenshot(page, "console-operator-workload")

        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Abort").click()
        expect(page.locator("#phase")).to_have_text("Aborted", timeout=LIVE)
        expect(row.locator(".phase")).to_have_text("Aborted", timeout=LIVE)


def test_the_operator_s_console_is_read_only_for_the_holder_of_its_token(
    *,
    server: Server,
    namespace: str,
    pods: PodDriver,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    token = tmp_path / "token"
    token.write_text("console-token-1\n")  # as a Secret's key is mounted
    replicas: OperatorReplicas = request.getfixturevalue("operators")
    replica = replicas.start(
        "a", "--console", "--console-listen", "127.0.0.1:0", "--console-token-file", str(token)
    )
    found = re.search(r"console on (http://\S+)", replica.log)
    assert found, replica.log
    base = found.group(1)
    spec = pods.workload_spec({**SMALL_TRAINING}, RUNS_UNTIL_DELETED)
    server.client.create(
        {
            "apiVersion": "podwright.dev/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "shown", "namespace": namespace},
            "spec": spec,
        }
    )
    bearer = {"Authorization": "Bearer console-token-1"}

    def table() -> str | None:
        text = fetch(f"{base}/workloads?namespace={namespace}", bearer)[1]
        return text if "shown" in text else None

    page = eventually(table, timeout=60)
    task_id = re.search(rf'href="/workloads/{namespace}/([^"]+)"', page)
    assert task_id, page
    assert 'href="/submit"' not in page
    assert fetch(f"{base}/workloads", {})[0] == 401
    assert fetch(f"{base}/workloads", {"Authorization": "Bearer wrong"})[0] == 401
    assert fetch(f"{base}/submit", bearer)[0] == 403
    aborted = fetch(f"{base}/workloads/{namespace}/{task_id.group(1)}/abort", bearer, "POST")
    assert aborted[0] == 403
    assert "this console is read-only" in aborted[1]
    # Behind no proxy it trusts, a forwarded user is nobody: the token is still needed.
    assert fetch(f"{base}/workloads", {"X-Forwarded-User": "alice"})[0] == 401


def fetch(url: str, headers: dict[str, str], method: str = "GET") -> tuple[int, str]:
    """The status and body of a request to the console."""
    data = b"" if method == "POST" else None
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, data=data, headers=headers, method=method), timeout=30
        ) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()
