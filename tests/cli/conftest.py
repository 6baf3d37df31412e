"""Fixtures of the command-line tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.background import no_executor_left


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A state directory whose task store's background executors must all have exited (their
    tasks finalized) by the end of the test."""
    path = tmp_path / "home"
    yield path
    no_executor_left(path / "tasks.db")
