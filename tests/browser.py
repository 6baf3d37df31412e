"""Real-browser tests: Debian's chromium, driven by Playwright's sync API (no browser download).

A test module (or a directory's ``conftest.py``) imports the fixtures it uses, ``browser`` too
whenever it uses ``page`` or ``phone_page``, which are built on it. Their functions' names end in
``_fixture`` (the fixtures' do not), so that a test's parameter does not redefine the import::

    from tests.browser import browser_fixture, page_fixture  # noqa: F401 (pytest fixtures)

- ``browser`` (module scope): Playwright and one headless chromium, stopped at the module's end;
- ``page`` (each test): a page of a new context, 1280×800, closed after the test;
- ``phone_page`` (each test): the same with a phone's viewport, 390×844, mobile and touch.

:func:`open_page` makes more (another user, a ``base_url``), :func:`save_screenshot` keeps a PNG.

Without chromium (``/usr/bin/chromium``, or ``$PODWRIGHT_CHROMIUM``) the tests skip, and under
``CI=true`` they fail. ``make test`` installs it (``debian-packages``).

While Playwright runs, its sync API marks its asyncio loop as this thread's running loop, even
between its calls: ``asyncio.run`` in the thread fails then ("cannot be called from a running
event loop"). Hence ``browser`` lasts a module, not the session, so that the tests of other
modules that a pytest-xdist worker runs afterwards are not in that loop; and a server that a
browser test talks to runs in a thread of its own (uvicorn's ``Server.run`` there, say).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_VARIABLE = "PODWRIGHT_CHROMIUM"
"""Names another chromium executable than :data:`CHROMIUM` (a path, or a command on PATH)."""
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""What chromium needs here: as root, it starts only without its sandbox; on a closed network,
its background connections (QUIC, updates, sync, ...) are refused, so none is made. Playwright
gives it a new, empty profile (user-data-dir) at every launch."""
DESKTOP_VIEWPORT = {"width": 1280, "height": 800}
PHONE_VIEWPORT = {"width": 390, "height": 844}
ARTIFACTS_VARIABLE = "PODWRIGHT_TEST_ARTIFACTS"
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
"""Where screenshots go unless ``$PODWRIGHT_TEST_ARTIFACTS`` names another directory."""


def chromium_executable() -> str:
    """The chromium to drive: ``$PODWRIGHT_CHROMIUM``, else :data:`CHROMIUM`. Skip where it is
    missing; under CI=true, fail instead."""
    wanted = os.environ.get(CHROMIUM_VARIABLE) or CHROMIUM
    executable = shutil.which(wanted)
    if executable is None:
        source = f" (${CHROMIUM_VARIABLE})" if os.environ.get(CHROMIUM_VARIABLE) else ""
        message = (
            f"browser tests: needs chromium, {wanted}{source} is not an executable "
            "(Debian's package chromium: make debian-packages)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: these tests must run, not skip)")
        pytest.skip(message)
    return executable


@pytest.fixture(scope="module", name="browser")
def browser_fixture() -> Iterator[Browser]:
    """Playwright and a headless chromium for the module's tests; both stopped at its end (no
    chromium process outlives it)."""
    executable = chromium_executable()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=list(CHROMIUM_ARGS)
        )
        try:
            yield launched
        finally:
            launched.close()


@contextlib.contextmanager
def open_page(browser: Browser, **context_options: Any) -> Iterator[Page]:
    """A page of a new context of ``browser`` (``context_options``: Playwright's ``new_context``
    options, the desktop viewport unless they say otherwise); the context is closed after."""
    context = browser.new_context(**{"viewport": DESKTOP_VIEWPORT, **context_options})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture(name="page")
def page_fixture(browser: Browser) -> Iterator[Page]:
    """A page of a new context, on a desktop's viewport (1280×800)."""
    with open_page(browser) as opened:
        yield opened


@pytest.fixture(name="phone_page")
def phone_page_fixture(browser: Browser) -> Iterator[Page]:
    """A page of a new context, on a phone's viewport (390×844), mobile (the page's meta
    viewport counts) with touch (``tap``)."""
    with open_page(browser, viewport=PHONE_VIEWPORT, is_mobile=True, has_touch=True) as opened:
        yield opened


def artifacts_directory() -> Path:
    """``$PODWRIGHT_TEST_ARTIFACTS``, else :data:`ARTIFACTS`; made when missing."""
    directory = Path(os.environ.get(ARTIFACTS_VARIABLE) or ARTIFACTS)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def save_screenshot(page: Page, name: str, *, full_page: bool = False) -> Path:
    """A screenshot of ``page`` (its viewport; all of it with ``full_page``) as ``<name>.png``
    in :func:`artifacts_directory`, replacing an earlier one; its path."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise ValueError(f"a screenshot's name is letters, digits, '.', '_' and '-': {name!r}")
    path = artifacts_directory() / (name if name.endswith(".png") else f"{name}.png")
    page.screenshot(path=path, full_page=full_page)
    return path
