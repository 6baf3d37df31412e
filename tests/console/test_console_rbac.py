"""The console decides nothing about access itself: the cluster's RBAC does. On the emulator
with RBAC on (``Emulator(rbac=True)``, pinned by tests/kube/test_rbac_contract.py), alice may
work with Workloads in ``team-a`` only:

* ``podwright console --backend operator`` with her kubeconfig shows ``team-a``'s Workloads
  and never ``team-b``'s;
* the operator's console behind an authenticating proxy acts as the person the proxy names:
  alice sees ``team-a`` alone and submits there as herself, a submission to ``team-b`` is
  refused, and someone without a binding sees nothing.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from podwright.adapters.kubernetes import KubernetesClient
from podwright.console.app import ConsoleSettings
from podwright.console.gate import Access, fixed
from podwright.console.server import ConsoleThread, ServeOptions
from podwright.console.sources import ConsoleSources
from podwright.core.crds import custom_resource_definitions
from podwright.engine.kubernetes_port import ObjectRef
from tests.browser import browser_fixture, open_page, save_screenshot  # noqa: F401
from tests.console.console_process import running_console
from tests.k8s_emulator import Emulator
from tests.kube.support import eventually, write_kubeconfig

API_VERSION = "podwright.dev/v1alpha1"
PROXY = "the-proxy-s-secret"
FROM_PROXY = {"X-Podwright-Proxy-Secret": PROXY}
RBAC = "rbac.authorization.k8s.io/v1"


def kubeconfig_of(path: Path, server: str, token: str, namespace: str | None = None) -> str:
    written = write_kubeconfig(path, server, token=token)
    if namespace is not None:
        config = json.loads(written.read_text())
        config["contexts"][0]["context"]["namespace"] = namespace
        written.write_text(json.dumps(config))
    return str(written)


def workload(namespace: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"type": "training", "image": "busybox:1", "command": "sleep 1"},
    }


class Teams:
    """The emulator, its admin's kubeconfig, and alice's."""

    def __init__(self, emulator: Emulator, directory: Path) -> None:
        self.emulator = emulator
        admin = emulator.add_user("admin", groups=("system:masters",))
        self.admin = kubeconfig_of(directory / "admin", emulator.url, admin)
        alice = emulator.add_user("alice", groups=("researchers",))
        self.alice = kubeconfig_of(directory / "alice", emulator.url, alice, "team-a")


@pytest.fixture
def teams(tmp_path: Path) -> Iterator[Teams]:
    with Emulator(rbac=True) as emulator:
        client = KubernetesClient.for_host(emulator.url)  # no token: the emulator's admin
        try:
            for crd in custom_resource_definitions():
                client.apply(crd, field_manager="test")
            for namespace in ("team-a", "team-b"):
                client.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                )
            client.create(
                {
                    "apiVersion": RBAC,
                    "kind": "Role",
                    "metadata": {"name": "researcher", "namespace": "team-a"},
                    "rules": [
                        {
                            "apiGroups": ["podwright.dev"],
                            "resources": ["workloads"],
                            "verbs": ["get", "list", "watch", "create", "patch", "delete"],
                        },
                        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
                    ],
                }
            )
            client.create(
                {
                    "apiVersion": RBAC,
                    "kind": "RoleBinding",
                    "metadata": {"name": "alice", "namespace": "team-a"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": "researcher",
                    },
                    "subjects": [
                        {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}
                    ],
                }
            )
            client.create(workload("team-a", "a-train"))
            client.create(workload("team-b", "b-train"))
            yield Teams(emulator, tmp_path)
        finally:
            client.close()


def fetch(url: str, headers: dict[str, str], form: dict[str, str] | None = None) -> tuple[int, str]:
    data = None if form is None else urllib.parse.urlencode(form).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode()


@pytest.mark.browser
def test_a_user_s_console_shows_only_what_their_rbac_lets_them_read(
    teams: Teams, browser: Browser
) -> None:
    arguments = ["--backend", "operator", "--kubeconfig", teams.alice]
    with running_console(arguments) as console, open_page(browser) as page:
        page.goto(console.url)
        expect(page.locator("#rows tr", has_text="a-train")).to_be_visible()
        expect(page.locator("#rows")).not_to_contain_text("b-train")
        expect(page.locator("select[name=namespace] option")).not_to_contain_text(["team-b"])
        save_screenshot(page, "console-rbac-alice")
        bearer = {"Authorization": f"Bearer {console.token}"}
        status, text = fetch(f"{console.base}/workloads?namespace=team-b", bearer)
        assert status == 200
        assert "b-train" not in text
    assert any(
        "you may not list Workloads in every namespace: showing namespace team-a" in line
        for line in console.output
    ), console.output


def test_behind_a_proxy_the_console_acts_as_the_person_it_names(teams: Teams) -> None:
    sources = ConsoleSources(backend="operator", kubeconfig=teams.admin, all_namespaces=True)
    settings = ConsoleSettings(Access(fixed(None), proxy_secret=fixed(PROXY)), read_only=True)
    console = ConsoleThread(sources, ServeOptions(listen="127.0.0.1:0"), settings)
    console.start()
    try:
        alice = {**FROM_PROXY, "X-Forwarded-User": "alice", "X-Forwarded-Groups": "researchers"}
        page = eventually(
            lambda: (
                (text := fetch(f"{console.url}/workloads", alice)[1]) and "a-train" in text and text
            )
        )
        assert "b-train" not in page
        assert 'href="/submit"' in page  # not read-only: her RBAC decides
        assert (
            fetch(f"{console.url}/workloads", {"X-Forwarded-User": "bob"})[1].count("<tr id=") == 0
        )
        assert fetch(f"{console.url}/workloads", {})[0] == 401  # no token at all: the proxy only
        assert fetch(f"{console.url}/policies?namespace=team-b", alice)[0] == 403

        form = {
            "type": "training",
            "namespace": "team-a",
            "metadata.name": "by-alice",
            "spec.image": "busybox:1",
            "spec.command": "sleep 1",
        }
        status, _page = fetch(f"{console.url}/submit", alice, form)
        assert status == 200, _page  # followed to the workload's page
        client = KubernetesClient.for_host(teams.emulator.url)
        try:
            created = client.get(ObjectRef(API_VERSION, "Workload", "team-a", "by-alice"))
            assert created["spec"]["image"] == "busybox:1"
        finally:
            client.close()

        status, refused = fetch(f"{console.url}/submit", alice, {**form, "namespace": "team-b"})
        assert status == 403  # judged by nothing of team-b's: its policies are not hers to read
        assert "namespace &#39;team-b&#39;: you may not read it" in refused
        assert (
            fetch(f"{console.url}/submit/preview", alice, {**form, "namespace": "team-b"})[0] == 403
        )
        status, her_form = fetch(f"{console.url}/submit", alice)  # her namespace, unasked
        assert status == 200
        assert 'name="namespace" value="team-a"' in her_form

        table = eventually(
            lambda: (
                (text := fetch(f"{console.url}/workloads", alice)[1])
                and "by-alice" in text
                and text
            )
        )
        found = re.search(r'href="/workloads/team-a/(by-alice[^"]*)"', table)
        assert found, table
        status, aborted = fetch(f"{console.url}/workloads/team-a/{found.group(1)}/abort", alice, {})
        assert status == 200, aborted  # done as alice, who may not list every namespace
        assert "abort requested" in aborted
    finally:
        console.stop()
