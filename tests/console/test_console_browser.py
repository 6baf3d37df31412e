"""The console in a real browser (Debian's chromium, driven by Playwright), on the local
backend: ``podwright console`` runs as a user runs it, and a page does what a person does.

Screenshots of each page are kept as test artifacts (``test-artifacts/``, or
``$PODWRIGHT_TEST_ARTIFACTS``); the README shows two of them.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import Browser, Locator, Page, expect

from tests.browser import browser_fixture, open_page, page_fixture, save_screenshot  # noqa: F401
from tests.cli.background import no_executor_left
from tests.console.console_process import RunningConsole, running_console
from tests.core.test_crds import server_errors

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("console-browser")]

LIVE = 30_000
"""How long a page may take to show what a task does (ms): the executor's rounds, not the page."""

POLICY = """\
apiVersion: podwright.dev/v1alpha1
kind: ClusterWorkloadPolicy
metadata:
  name: console-training
spec:
  scope: cluster
  workloadType: training
  defaults:
    imagePullPolicy: IfNotPresent
    priorityClass: low
    compute:
      cpuCoreLimit: 2
  rules:
    image:
      required: true
    imagePullPolicy:
      canEdit: false
    priorityClass:
      options: [{value: low}, {value: high}]
    compute:
      cpuCoreLimit:
        max: 4
"""


@pytest.fixture
def console(tmp_path: Path) -> Iterator[RunningConsole]:
    """``podwright console`` on the local backend with the test's policy; every task it
    started has ended by the test's end (its executor gone)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    home = tmp_path / "home"
    with running_console(["--home", str(home), "--policy", str(policy)], cwd=tmp_path) as running:
        yield running
    no_executor_left(home / "tasks.db")


def signed_in(page: Page, console: RunningConsole) -> Page:
    page.goto(console.url)
    expect(page).to_have_url(re.compile(r"/workloads$"))  # the token moved into a cookie
    return page


def field(page: Page, path: str) -> Locator:
    """The form's input of the field at ``path`` (``metadata.name``, ``compute.cpuCoreLimit``)."""
    return page.locator(f"[id='f-{path}']")


def submit(page: Page, name: str, command: str) -> None:
    page.goto("/submit?type=training&namespace=default")
    field(page, "metadata.name").fill(name)
    field(page, "image").fill("busybox:1")
    field(page, "command").fill(command)
    page.get_by_role("button", name="Submit").click()
    expect(page).to_have_url(re.compile(rf"/workloads/default/{name}-[0-9a-f]+$"))


def test_a_page_without_the_token_is_refused(console: RunningConsole, page: Page) -> None:
    response = page.goto(f"{console.base}/workloads")
    assert response is not None
    assert response.status == 401
    expect(page.locator("body")).to_contain_text("needs its token")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{console.base}/workloads?token=wrong", timeout=10)
    refused.value.close()
    assert refused.value.code == 401
    with urllib.request.urlopen(f"{console.base}/healthz", timeout=10) as healthy:
        assert healthy.read() == b"ok\n"


def test_a_submitted_workload_is_followed_live_then_aborted_and_deleted(
    console: RunningConsole, browser: Browser
) -> None:
    with (
        open_page(browser, base_url=console.base) as table,
        open_page(browser, base_url=console.base) as page,
    ):
        signed_in(table, console)
        expect(table.locator("#rows")).to_contain_text("No workloads")
        signed_in(page, console)

        submit(page, "sleeper", "sh -c 'echo started; sleep 120'")
        expect(page.locator("#phase")).to_have_text("Running", timeout=LIVE)
        expect(page.locator("#logs")).to_contain_text("started", timeout=LIVE)
        expect(page.locator("#status .timeline")).to_contain_text("Queued")
        expect(page.locator("#status .events")).to_contain_text("Created pod")
        expect(page.locator("table.spec")).to_contain_text("policy default (cluster default)")
        save_screenshot(page, "console-workload")

        row = table.locator("#rows tr", has_text="sleeper")  # appeared without a reload
        expect(row.locator(".phase")).to_have_text("Running", timeout=LIVE)
        save_screenshot(table, "console-workloads")

        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Abort").click()
        expect(page.locator("#outcome")).to_contain_text("abort requested")
        expect(page.locator("#phase")).to_have_text("Aborted", timeout=LIVE)
        expect(row.locator(".phase")).to_have_text("Aborted", timeout=LIVE)

        page.once("dialog", lambda dialog: dialog.accept())
        page.get_by_role("button", name="Delete").click()
        expect(page).to_have_url(re.compile(r"/workloads\?outcome="))
        expect(page.locator("#outcome")).to_contain_text("aborted and deleted")
        expect(table.locator("#rows")).not_to_contain_text("sleeper", timeout=LIVE)


def test_a_finished_workload_shows_its_whole_output_and_its_end(
    console: RunningConsole, browser: Browser
) -> None:
    with open_page(browser, base_url=console.base) as page:
        signed_in(page, console)
        submit(page, "hello", "sh -c 'for i in 1 2 3; do echo line $i; done'")
        expect(page.locator("#phase")).to_have_text("Success", timeout=LIVE)
        page.reload()  # a page opened after the end: the output read whole, then its end
        expect(page.locator("#logs > div")).to_have_text(
            ["line 1", "line 2", "line 3"], timeout=LIVE
        )
        expect(page.locator("#log-end")).to_have_text("(end of output)", timeout=LIVE)
        page.goto("/workloads?phase=Success")
        expect(page.locator("#rows tr", has_text="hello").locator(".phase")).to_have_text("Success")
        page.goto("/workloads?phase=Running")
        expect(page.locator("#rows")).to_contain_text("No workloads match these filters")


def test_the_form_knows_the_policy(console: RunningConsole, browser: Browser) -> None:
    with open_page(browser, base_url=console.base) as page:
        signed_in(page, console)
        page.goto("/submit?type=training&namespace=default")

        locked = page.locator("#f-imagePullPolicy")
        expect(locked).to_be_disabled()
        expect(page.locator("#h-imagePullPolicy")).to_contain_text(
            "locked by cluster default (policy 'console-training')"
        )
        cpu = field(page, "compute.cpuCoreLimit")
        expect(cpu).to_have_attribute("max", "4")
        expect(cpu).to_have_value("2")  # the policy's default, filled in
        expect(page.locator("[id='h-compute.cpuCoreLimit']")).to_contain_text(
            "max 4 (cluster default)"
        )
        expect(page.locator("#f-priorityClass option")).to_have_text(
            ["(default: low)", "low", "high"]
        )
        save_screenshot(page, "console-submit", full_page=True)

        field(page, "metadata.name").fill("greedy")
        field(page, "image").fill("busybox:1")
        cpu.fill("9")
        page.get_by_role("button", name="Submit").click()
        expect(page).to_have_url(re.compile(r"/submit\?"))  # the browser refused it
        assert cpu.evaluate("input => input.validity.rangeOverflow") is True

        page.get_by_role("button", name="Check and show YAML").click()  # the server judges too
        expect(page.locator("#preview .problem")).to_contain_text(
            "compute.cpuCoreLimit: 9 (submission) is above the maximum 4 "
            "(console-training (cluster default))"
        )

        cpu.fill("3")
        page.get_by_role("button", name="Check and show YAML").click()
        expect(page.locator("#preview .ok")).to_have_text("The policies accept it.")
        document = yaml.safe_load(page.locator("#yaml").text_content() or "")
        assert document["kind"] == "Workload"
        assert document["metadata"] == {"name": "greedy", "namespace": "default"}
        assert document["spec"]["compute"] == {"cpuCoreLimit": 3}
        assert server_errors(document) == []  # the Workload CRD's schema and rules take it


def test_the_policies_page_shows_each_rule_with_its_scope(
    console: RunningConsole, browser: Browser
) -> None:
    with open_page(browser, base_url=console.base) as page:
        signed_in(page, console)
        page.goto("/policies?namespace=default&type=training")
        row = page.locator("table.policy tr", has_text="rules.compute.cpuCoreLimit")
        expect(row).to_contain_text('{"max": 4}')
        expect(row).to_contain_text("cluster default")
        expect(page.locator("#report-title")).to_be_visible()
        save_screenshot(page, "console-policies", full_page=True)


def test_the_table_fits_a_phone(console: RunningConsole, browser: Browser) -> None:
    with open_page(
        browser,
        base_url=console.base,
        viewport={"width": 390, "height": 844},
        is_mobile=True,
        has_touch=True,
    ) as page:
        signed_in(page, console)
        expect(page.get_by_role("link", name="Workloads")).to_be_visible()
        page.get_by_role("link", name="Submit").tap()
        expect(field(page, "metadata.name")).to_be_visible()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page is {width} px wide on a 390 px phone"
        save_screenshot(page, "console-phone")
