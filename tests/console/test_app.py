"""The console's application without a browser: its token, its read-only mode, and bad input
named (the pages themselves are driven in chromium by test_console_browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from podwright.console.app import ConsoleSettings, console_app
from podwright.console.gate import TOKEN_COOKIE, Access, fixed
from podwright.console.sources import ConsoleSources
from tests.console.test_hub import FakeFeed, record, started

TOKEN = "s3cret-token"


@pytest.fixture
def feed() -> FakeFeed:
    feed = FakeFeed()
    feed.set(record("train-1"))
    return feed


def client_of(feed: FakeFeed, tmp_path: Path, *, read_only: bool = False) -> Iterator[TestClient]:
    sources = ConsoleSources(home=str(tmp_path / "home"))
    with started(feed) as hub:
        settings = ConsoleSettings(Access(fixed(TOKEN)), read_only=read_only)
        app = console_app(sources, hub, settings)
        with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
            yield client


@pytest.fixture
def client(feed: FakeFeed, tmp_path: Path) -> Iterator[TestClient]:
    yield from client_of(feed, tmp_path)


@pytest.fixture
def read_only_client(feed: FakeFeed, tmp_path: Path) -> Iterator[TestClient]:
    yield from client_of(feed, tmp_path, read_only=True)


def test_every_page_but_health_needs_the_token(client: TestClient) -> None:
    for path in ("/workloads", "/submit", "/policies", "/static/console.css"):
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert "needs its token" in refused.text
    assert client.get("/healthz").text == "ok\n"
    assert client.get("/workloads", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/workloads", headers={"Authorization": f"Bearer {TOKEN}"}).is_success


def test_the_token_in_the_url_becomes_a_strict_http_only_cookie(client: TestClient) -> None:
    first = client.get(f"/workloads?phase=Running&token={TOKEN}")
    assert first.status_code == 303
    assert first.headers["location"] == "/workloads?phase=Running"  # the token left the URL
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{TOKEN_COOKIE}_80={TOKEN};")  # this console's port's own
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback
    page = client.get("/workloads?phase=Running")
    assert page.is_success
    assert "train-1" in page.text


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/workloads?sort=size", "sort &#39;size&#39;: one of submitted"),
        ("/workloads?page=-1", "page &#39;-1&#39;: a whole number from 1"),
        ("/workloads/stream?phase=Asleep", "&#39;Asleep&#39; is not a phase"),
        ("/submit?type=batch", "type &#39;batch&#39;: one of workspace"),
        ("/policies?type=batch", "type &#39;batch&#39;: one of workspace"),
    ],
)
def test_a_bad_parameter_is_named(client: TestClient, path: str, message: str) -> None:
    answer = client.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 400
    assert message in answer.text


def test_an_unknown_workload_is_404_naming_it(client: TestClient) -> None:
    answer = client.get("/workloads/vision/nope-1", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 404
    assert "no workload &#39;nope-1&#39; in namespace &#39;vision&#39;" in answer.text


def test_a_read_only_console_shows_and_changes_nothing(read_only_client: TestClient) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    table = read_only_client.get("/workloads", headers=bearer)
    assert table.is_success
    assert 'href="/submit"' not in table.text
    assert "read-only" in table.text
    for path in ("/workloads/vision/train-1/abort", "/workloads/vision/train-1/delete", "/submit"):
        refused = read_only_client.post(path, headers=bearer)
        assert refused.status_code == 403, path
        assert "this console is read-only" in refused.text
    assert read_only_client.get("/submit", headers=bearer).status_code == 403
