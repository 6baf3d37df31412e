"""podwright's state directory (``--home``), the task store in it, and what a submission to it
records of this machine (when, and by whom), for every task command."""

from __future__ import annotations

import getpass
import os
from datetime import UTC, datetime
from pathlib import Path

from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.api.errors import InvalidInputError, TaskStoreUnavailableError
from podwright.engine.task_store import StoreUnavailableError

HOME_ENV = "PODWRIGHT_HOME"
STORE_ENV = "PODWRIGHT_TASK_STORE"
STORE_NAME = "tasks.db"


def default_home() -> str:
    """``$PODWRIGHT_HOME``, else ``$XDG_STATE_HOME/podwright``, else ~/.local/state/podwright."""
    if os.environ.get(HOME_ENV):
        return os.environ[HOME_ENV]
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "podwright")


def store_path(home: str | Path) -> Path:
    """``$PODWRIGHT_TASK_STORE`` if set, else ``<home>/tasks.db``."""
    return Path(os.environ.get(STORE_ENV) or Path(home) / STORE_NAME)


def open_store(home: str | Path) -> SQLiteTaskStore:
    """The task store (see :func:`store_path`), created on first use; :class:`BackendError` when it
    cannot be opened, :class:`InvalidInputError` when its path names a directory."""
    path = store_path(home)
    if path.is_dir():
        source = f"${STORE_ENV}" if os.environ.get(STORE_ENV) else "--home"
        raise InvalidInputError(f"{source}: the task store {path} is a directory; name a file")
    try:
        return SQLiteTaskStore(path)
    except StoreUnavailableError as error:
        raise TaskStoreUnavailableError(str(error)) from error


def utc_now() -> datetime:
    return datetime.now(UTC)


def local_user() -> str:
    """Who submits from this machine: the login name (``getpass.getuser``: ``$LOGNAME``,
    ``$USER``…, else the password database), else the uid as text when there is none, as in a
    container run under a uid the image does not know."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        # No login name in the environment and no entry for the uid in the password database:
        # Python 3.13 raises OSError, earlier ones pwd's KeyError.
        return str(os.getuid())
