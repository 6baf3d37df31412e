"""What ``/proc/<pid>/stat`` says of a process: its state, its process group, its start time.

The local backend and the executor's locks both need to name a process across pid reuse (a pid
and its start time, in clock ticks since boot, name one process), and to tell a live process from
a zombie; this is the one reader of that file (``proc_pid_stat(5)``).
"""

from __future__ import annotations

from pathlib import Path

_DEAD_STATES = ("Z", "X")
"""A zombie, or a process being reaped: it runs no more."""


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (the process's state first), or
    None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces and parentheses.
    return stat.rpartition(")")[2].split()


def start_time(pid: int, *, live: bool = False) -> str | None:
    """When the process started, in clock ticks since boot (field 22), or None when it is gone
    (with ``live``: also when it is a zombie)."""
    fields = stat_fields(pid)
    if not fields or (live and fields[0] in _DEAD_STATES):
        return None
    return fields[19]


def runs_in_group(pid: int, pgid: int) -> bool:
    """Whether the process runs (is no zombie) in the process group ``pgid``."""
    fields = stat_fields(pid)
    if not fields:
        return False
    return fields[0] not in _DEAD_STATES and fields[2] == str(pgid)
