"""Serving the console: its URL is announced once its socket listens."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from podwright.console.server import ServeOptions, serve
from podwright.console.sources import ConsoleSources


class AnnouncedError(Exception):
    """Ends ``serve`` at its announcement, before it serves."""


def test_the_url_is_announced_once_the_socket_listens(tmp_path: Path) -> None:
    """A browser that opens the URL the moment it is printed is not refused: its connection
    waits in the socket's backlog for the server to accept it."""
    connected: list[str] = []

    def announce(url: str) -> None:
        parts = urlsplit(url)
        assert parts.hostname is not None
        assert parts.port is not None
        with socket.create_connection((parts.hostname, parts.port), timeout=5):
            connected.append(url)
        raise AnnouncedError

    sources = ConsoleSources(home=str(tmp_path / "home"))
    with pytest.raises(AnnouncedError):
        serve(sources, ServeOptions(listen="127.0.0.1:0"), announce, lambda _note: None)
    assert len(connected) == 1
