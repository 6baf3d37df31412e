"""What ``podwright run`` shows while it follows a task: plain lines, or a live display.

Both displays get the same calls: a new phase (with the time since the task was submitted), a
Kubernetes event, a line of the primary container's output, a note. :class:`PlainDisplay` prints
each as one line (for pipes, files and CI logs). :class:`LiveDisplay` (rich) prints events and
output as they come and keeps, below them, the task's phase timeline: each phase, when it began,
how long it lasted, and the current one's time ticking.

What a task did reaches ``run`` from three sources read one after the other (its phase history and
events from the store, written by the executor a round after they happened, then its output, read
as it is written), so a :class:`Timeline` puts them back in the order they happened: by timestamp
(history entries and events have one, a cluster's log lines too, a local line the time its file
was last written when it was read), each item held back a moment so that what the executor
records late still comes in its place, and a terminal phase always last, after the output that
came before it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol

import click
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from podwright.api import AttachedEvent, HistoryEntry, Phase
from podwright.api.client import history_line
from podwright.api.task_logs import LogLine

Happening = HistoryEntry | AttachedEvent | LogLine
"""A phase the task entered, an event attached to it, or a line of its output."""

_EARLIEST = datetime.min.replace(tzinfo=UTC)


class Display(Protocol):
    def phase(self, entry: HistoryEntry, elapsed: float) -> None: ...

    def event(self, text: str, elapsed: float) -> None: ...

    def output(self, line: str) -> None: ...

    def note(self, text: str) -> None: ...

    def pause(self) -> None:
        """Stop drawing (before a prompt)."""

    def resume(self) -> None: ...

    def close(self) -> None: ...


class Timeline:
    """What happened to a task, held back until it settled, then given out in the order it
    happened.

    Each source is in order already; they are merged by timestamp (at equal times: phases, then
    events, then output). Output without a timestamp is stamped with the last moment known before
    it was written, the read before it; an event without a timestamp stays after the one before
    it. The output is the primary container's, so none of it comes before
    the phase in which it runs (Running; when the executor saw none, the phase before the end),
    which the executor records when it observes it, a round after the container started. An item is
    given out once it is ``settle`` old, so that what the executor records a round later (an
    event that happened before a line of output) still comes first; a terminal phase only with
    ``everything``, after all the output read with it.
    """

    def __init__(self, settle: timedelta) -> None:
        self._settle = settle
        self._pending: list[tuple[tuple[bool, datetime, int, int], Happening]] = []
        self._previous_event = _EARLIEST
        self._output_from: datetime | None = None
        self._last_phase_at = _EARLIEST
        self._early: list[LogLine] = []
        self._count = 0

    def add(
        self,
        phases: Sequence[HistoryEntry],
        events: Sequence[AttachedEvent],
        lines: Sequence[LogLine],
        *,
        lines_after: datetime,
    ) -> None:
        """Add what was read: ``lines`` without a timestamp were written after ``lines_after``."""
        for entry in phases:
            at = _when(entry) or lines_after
            self._hold(entry, at, 0, entry.phase.is_terminal)
            if entry.phase.is_terminal:
                continue
            self._last_phase_at = at
            if entry.phase is Phase.RUNNING and self._output_from is None:
                self._output_from = at
                early, self._early = self._early, []
                for line in early:
                    self._hold(line, max(_when(line) or at, at), 2)
        for event in events:
            self._previous_event = _when(event) or self._previous_event
            self._hold(event, self._previous_event, 1)
        for line in lines:
            stamped = line if line.at is not None else dataclasses.replace(line, at=lines_after)
            if self._output_from is None:
                self._early.append(stamped)
            else:
                self._hold(stamped, max(_when(stamped) or lines_after, self._output_from), 2)

    def _hold(self, item: Happening, at: datetime, rank: int, terminal: bool = False) -> None:
        self._count += 1
        self._pending.append(((terminal, at, rank, self._count), item))

    def release(self, now: datetime, *, everything: bool = False) -> list[Happening]:
        """The items settled by ``now`` (``everything``: all, a terminal phase last), in order."""
        if everything:  # the task ended without Running seen: its output came before the end
            early, self._early = self._early, []
            for line in early:
                self._hold(line, max(_when(line) or self._last_phase_at, self._last_phase_at), 2)
        self._pending.sort(key=lambda pair: pair[0])
        cutoff = now - self._settle
        count = 0
        for (terminal, at, _rank, _position), _item in self._pending:
            if not everything and (terminal or at > cutoff):
                break
            count += 1
        released, self._pending = self._pending[:count], self._pending[count:]
        return [item for _, item in released]


def _when(item: Happening) -> datetime | None:
    at = item.occurred_at if isinstance(item, HistoryEntry | AttachedEvent) else item.at
    if at is not None and at.tzinfo is None:
        return at.replace(tzinfo=UTC)
    return at


def show(display: Display, item: Happening, origin: datetime, now: datetime) -> None:
    """Show one happening; times are seconds since ``origin`` (``now`` for an untimed event)."""
    if isinstance(item, LogLine):
        display.output(item.text)
        return
    at = _when(item) or now
    elapsed = max(0.0, (at - origin).total_seconds())
    if isinstance(item, HistoryEntry):
        display.phase(item, elapsed)
    else:
        display.event(item.reason, elapsed)


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


@dataclasses.dataclass
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
        # The terminal may be gone (SIGHUP) or the output closed: nothing more to draw then.
        with contextlib.suppress(OSError):
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
