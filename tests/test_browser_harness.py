"""The browser tests' harness (tests/browser.py) itself: chromium starts, a page served on
127.0.0.1 loads, a click runs its script, a server-sent event arrives, a screenshot is a PNG of
the viewport, on a desktop's and on a phone's."""

from __future__ import annotations

import http.server
import os
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser import (  # noqa: F401 (pytest fixtures: browser, page, phone_page)
    ARTIFACTS,
    ARTIFACTS_VARIABLE,
    CHROMIUM_VARIABLE,
    browser_fixture,
    chromium_executable,
    page_fixture,
    phone_page_fixture,
    save_screenshot,
)

PAGE = b"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Harness</title>
</head>
<body>
  <button id="button" type="button">Not clicked</button>
  <p id="event">No event</p>
  <script>
    const button = document.getElementById("button");
    button.addEventListener("click", () => { button.textContent = "Clicked"; });
    const source = new EventSource("/events");
    source.addEventListener("greeting", (event) => {
      document.getElementById("event").textContent = event.data;
      source.close();
    });
  </script>
</body>
</html>
"""
EVENT = b"event: greeting\ndata: Hello from the server\n\n"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Handler(http.server.BaseHTTPRequestHandler):
    """The page at ``/``, and at ``/events`` a stream of one server-sent event (the page closes
    its EventSource on it, so that it does not reconnect when the stream ends)."""

    timeout = 10  # an idle connection (chromium preconnects) ends its handler's thread

    def do_GET(self) -> None:
        if self.path == "/":
            self.reply("text/html; charset=utf-8", PAGE)
        elif self.path == "/events":
            self.reply("text/event-stream", EVENT, cache_control="no-store")
        else:
            self.send_error(404)

    def reply(self, content_type: str, body: bytes, cache_control: str | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if cache_control is not None:
            self.send_header("Cache-Control", cache_control)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """The page's server on 127.0.0.1, in a thread, for the module; its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="harness-site", daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def png_size(path: Path) -> tuple[int, int]:
    """The width and height of the PNG at ``path`` (its header chunk); fails for anything else."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR", f"{path} has no PNG header chunk"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.browser
def test_a_page_loads_a_click_runs_its_script_and_a_server_sent_event_arrives(
    page: Page, site: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page.goto(site + "/")
    expect(page).to_have_title("Harness")
    button = page.get_by_role("button")
    expect(button).to_have_text("Not clicked")
    button.click()
    expect(button).to_have_text("Clicked")
    expect(page.locator("#event")).to_have_text("Hello from the server")

    monkeypatch.setenv(ARTIFACTS_VARIABLE, str(tmp_path / "artifacts"))
    path = save_screenshot(page, "harness-desktop")
    assert path == tmp_path / "artifacts" / "harness-desktop.png"
    assert png_size(path) == (1280, 800)


@pytest.mark.browser
def test_a_phone_page_has_the_phone_viewport_and_touch(phone_page: Page, site: str) -> None:
    phone_page.goto(site + "/")
    assert phone_page.evaluate("[window.innerWidth, window.innerHeight]") == [390, 844]
    assert phone_page.evaluate("navigator.maxTouchPoints") > 0
    button = phone_page.get_by_role("button")
    button.tap()
    expect(button).to_have_text("Clicked")
    expect(phone_page.locator("#event")).to_have_text("Hello from the server")

    path = save_screenshot(phone_page, "harness-phone")
    assert path.parent == Path(os.environ.get(ARTIFACTS_VARIABLE) or ARTIFACTS)
    assert png_size(path) == (390, 844)


@pytest.mark.parametrize(
    ("ci", "outcome"),
    [(None, pytest.skip.Exception), ("true", pytest.fail.Exception)],
    ids=["skips", "fails-under-ci"],
)
def test_without_chromium_the_tests_skip_but_fail_under_ci(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    ci: str | None,
    outcome: type[BaseException],
) -> None:
    monkeypatch.setenv(CHROMIUM_VARIABLE, str(tmp_path / "chromium"))
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=r"needs chromium, .*/chromium \(\$PODWRIGHT_CHROMIUM\)"):
        chromium_executable()
