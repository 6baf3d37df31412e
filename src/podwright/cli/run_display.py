"""What ``podwright run`` shows while it follows a task: plain lines, or a live display.

Both displays get the same calls: a new phase (with the time since the run started), a Kubernetes
event, a line of the primary container's output, a note. :class:`PlainDisplay` prints each as one
line (for pipes, files and CI logs). :class:`LiveDisplay` (rich) prints events and output as they
come and keeps, below them, the task's phase timeline: each phase, when it began, how long it
lasted, and the current one's time ticking.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import click
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from podwright.core.lifecycle.phases import Phase
from podwright.engine.task_store import HistoryEntry


class Display(Protocol):
    def phase(self, entry: HistoryEntry, elapsed: float) -> None: ...

    def event(self, text: str, elapsed: float) -> None: ...

    def output(self, line: str) -> None: ...

    def note(self, text: str) -> None: ...

    def pause(self) -> None:
        """Stop drawing (before a prompt)."""

    def resume(self) -> None: ...

    def close(self) -> None: ...


def history_line(entry: HistoryEntry) -> str:
    """A phase and why: the error's message when it failed, else the reason."""
    why = entry.error_message or entry.reason
    return f"{entry.phase.value}  {why}" if why else entry.phase.value


class PlainDisplay:
    """One line per phase, event and output line."""

    def phase(self, entry: HistoryEntry, elapsed: float) -> None:
        click.echo(f"{elapsed:7.1f}s  {history_line(entry)}")

    def event(self, text: str, elapsed: float) -> None:
        click.echo(f"{elapsed:7.1f}s  event: {text}")

    def output(self, line: str) -> None:
        click.echo(f"  | {line}")

    def note(self, text: str) -> None:
        click.echo(text, err=True)

    def pause(self) -> None:
        """Plain lines need no pause."""

    def resume(self) -> None:
        """Plain lines need no resume."""

    def close(self) -> None:
        """Nothing is held."""


@dataclass
class _Step:
    entry: HistoryEntry
    began: float


_STYLES = {
    Phase.SUCCESS: "bold green",
    Phase.RUNNING: "cyan",
    Phase.ABORTED: "yellow",
    Phase.RETRYABLE_FAILURE: "bold red",
    Phase.SYSTEM_RETRYABLE_FAILURE: "bold red",
    Phase.PERMANENT_FAILURE: "bold red",
}


class LiveDisplay:
    """Events and output scroll; the phase timeline stays at the bottom, its clock running."""

    def __init__(
        self,
        title: str,
        *,
        console: Console | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._console = console or Console()
        self._title = title
        self._clock = clock or time.monotonic
        self._started = self._clock()
        self._steps: list[_Step] = []
        self._spinner = Spinner("dots")
        self._live = Live(
            get_renderable=self._render,
            console=self._console,
            refresh_per_second=8,
            transient=False,
        )
        self._live.start()

    def phase(self, entry: HistoryEntry, elapsed: float) -> None:
        self._steps.append(_Step(entry, elapsed))

    def event(self, text: str, elapsed: float) -> None:
        line = Text(f"{elapsed:7.1f}s  ", style="dim")
        line.append("event ", style="magenta")
        line.append(text)
        self._console.print(line)

    def output(self, line: str) -> None:
        self._console.print(Text("  │ ", style="dim") + Text(line))

    def note(self, text: str) -> None:
        self._console.print(Text(text, style="yellow"))

    def pause(self) -> None:
        self._live.stop()

    def resume(self) -> None:
        self._live.start()

    def close(self) -> None:
        self._live.stop()

    def _render(self) -> RenderableType:
        now = self._clock() - self._started
        timeline = Table(box=None, show_header=True, header_style="bold", padding=(0, 2, 0, 0))
        timeline.add_column("PHASE")
        timeline.add_column("AT", justify="right")
        timeline.add_column("FOR", justify="right")
        timeline.add_column("WHY", overflow="fold")
        for index, step in enumerate(self._steps):
            following = self._steps[index + 1].began if index + 1 < len(self._steps) else None
            last = following is None
            ended = step.entry.phase.is_terminal
            lasted = (following if following is not None else now) - step.began
            timeline.add_row(
                Text(step.entry.phase.value, style=_STYLES.get(step.entry.phase, "")),
                f"{step.began:.1f}s",
                "" if last and ended else f"{lasted:.1f}s",
                step.entry.error_message or step.entry.reason,
            )
        current = self._steps[-1].entry.phase if self._steps else None
        if current is not None and current.is_terminal:
            ended_at = self._steps[-1].began
            status: RenderableType = Text(f"{self._title}: {current.value} after {ended_at:.1f}s")
        else:
            self._spinner.text = Text(f"{self._title}: {now:.1f}s")
            status = self._spinner
        return Group(timeline, status)
