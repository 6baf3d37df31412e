"""What ``run`` shows, in the order it happened: the timeline of a batch (a decision table), and
both displays following a recorded task (a local Job's phases, events and output as the store and
its log file gave them out, poll after poll)."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import signal
from datetime import UTC, datetime, timedelta

import pytest
from rich.console import Console

from podwright.api.task_logs import LogLine
from podwright.cli.common import ExitCode, Unreachable
from podwright.cli.run_commands import LOST_SERVER_AFTER, Follower, Signals, _StopFollowing
from podwright.cli.run_display import Happening, LiveDisplay, PlainDisplay, Timeline
from podwright.core.lifecycle.phases import Phase
from podwright.engine.task_store import AttachedEvent, HistoryEntry, NewTask, TaskRecord

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def phase(name: Phase, seconds: float, reason: str = "") -> HistoryEntry:
    return HistoryEntry(name, 1, reason, at(seconds))


def event(reason: str, seconds: float | None) -> AttachedEvent:
    return AttachedEvent(reason, None if seconds is None else at(seconds))


def label(item: Happening) -> str:
    if isinstance(item, HistoryEntry):
        return item.phase.value
    if isinstance(item, AttachedEvent):
        return f"event {item.reason}"
    return f"| {item.text}"


Batch = tuple[list[HistoryEntry], list[AttachedEvent], list[LogLine], float]
"""Phases, events and output of one look, and when the output read before it happened."""


@pytest.mark.parametrize(
    ("batches", "expected"),
    [
        pytest.param(
            [([phase(Phase.QUEUED, 0.1), phase(Phase.RUNNING, 0.9)], [], [LogLine("a")], 0.2)],
            ["Queued", "Running", "| a"],
            id="output-never-before-the-phase-it-runs-in",
        ),
        pytest.param(
            [
                ([phase(Phase.QUEUED, 0.1)], [], [LogLine("early")], 0.2),
                ([phase(Phase.RUNNING, 0.9)], [event("Started", 0.3)], [LogLine("b")], 0.4),
            ],
            ["Queued", "event Started", "Running", "| early", "| b"],
            id="output-read-before-running-was-recorded-waits-for-it",
        ),
        pytest.param(
            [([phase(Phase.RUNNING, 0.1), phase(Phase.SUCCESS, 0.5)], [], [LogLine("last")], 0.9)],
            ["Running", "| last", "Success"],
            id="a-terminal-phase-after-the-output-read-with-it",
        ),
        pytest.param(
            [
                ([phase(Phase.RUNNING, 0.1)], [], [LogLine("out")], 1.0),
                ([], [event("Completed", 0.9)], [], 1.2),
            ],
            ["Running", "event Completed", "| out"],
            id="an-event-recorded-a-round-late-comes-in-its-place",
        ),
        pytest.param(
            [
                (
                    [phase(Phase.RUNNING, 0.1)],
                    [],
                    [LogLine("x", at(0.5)), LogLine("y", at(0.7))],
                    0,
                ),
                ([], [event("Pulled", 0.6)], [LogLine("z", at(0.8))], 0),
            ],
            ["Running", "| x", "event Pulled", "| y", "| z"],
            id="a-clusters-stamped-lines-merge-by-time",
        ),
        pytest.param(
            [
                ([phase(Phase.RUNNING, 0.1)], [event("A", 0.4), event("B", None)], [], 0),
                ([], [event("C", 0.3)], [], 0),
            ],
            ["Running", "event C", "event A", "event B"],
            id="an-event-without-a-time-stays-after-the-one-before",
        ),
        pytest.param(
            [
                (
                    [phase(Phase.QUEUED, 0.1), phase(Phase.PERMANENT_FAILURE, 0.3)],
                    [],
                    [LogLine("never ran?")],
                    0.2,
                )
            ],
            ["Queued", "| never ran?", "PermanentFailure"],
            id="a-task-that-ended-before-running-was-seen-shows-its-output-first",
        ),
        pytest.param(
            [
                ([phase(Phase.QUEUED, 0.2)], [event("SuccessfulCreate", 0.2)], [], 0.1),
                ([], [], [LogLine("one"), LogLine("two")], 0.3),
                ([phase(Phase.SUCCESS, 1.8)], [event("Completed", 0.8)], [], 1.0),
            ],
            ["Queued", "event SuccessfulCreate", "| one", "| two", "event Completed", "Success"],
            id="a-quick-task-never-seen-running-shows-its-output-before-what-followed-it",
        ),
    ],
)
def test_a_timeline_gives_out_what_happened_in_order(
    batches: list[Batch], expected: list[str]
) -> None:
    timeline = Timeline(timedelta(seconds=1.5))
    shown: list[Happening] = []
    for phases, events, lines, after in batches:
        timeline.add(phases, events, lines, lines_after=at(after))
        shown += timeline.release(at(after + 0.1))  # nothing has settled yet
    assert shown == []
    ended = any(entry.phase.is_terminal for phases, *_ in batches for entry in phases)
    settled = timeline.release(at(60), everything=ended)
    assert [label(item) for item in settled] == expected


def test_a_timeline_holds_items_back_until_they_settle_and_a_terminal_phase_until_the_end() -> None:
    timeline = Timeline(timedelta(seconds=1.5))
    timeline.add([phase(Phase.RUNNING, 1.0), phase(Phase.SUCCESS, 2.0)], [], [], lines_after=at(0))
    assert timeline.release(at(2.0)) == []
    assert [label(item) for item in timeline.release(at(2.5))] == ["Running"]
    assert timeline.release(at(10)) == []  # a terminal phase waits for everything
    assert [label(item) for item in timeline.release(at(10), everything=True)] == ["Success"]


@dataclasses.dataclass
class Look:
    """What one look at the task found: its history, events and state, and new output."""

    phases: list[HistoryEntry]
    events: list[AttachedEvent]
    output: list[str]
    finalized: bool = False


# A local Job as the store and its log file gave it out, look after look (0.2 s apart): the output
# is read before the executor records Running, and the Job's Completed event a round after the
# last lines; the last line has no newline.
LOOKS = [
    Look([phase(Phase.QUEUED, 0.1, "created")], [], []),
    Look([], [], ["training"]),
    Look([], [], ["epoch 1"]),
    Look([phase(Phase.RUNNING, 0.5)], [event("SuccessfulCreate", 0.1), event("Started", 0.3)], []),
    Look([], [], ["epoch 2"]),
    Look([phase(Phase.SUCCESS, 1.1)], [event("Completed", 1.05)], ["saved"]),
    Look([], [], [], finalized=True),
]


class RecordedTask:
    """The store and the log file of :data:`LOOKS`, a look per poll."""

    def __init__(
        self,
        looks: list[Look] | None = None,
        unanswered: tuple[timedelta, str] | None = None,
    ) -> None:
        self.looks = LOOKS if looks is None else looks
        self.unanswered = unanswered
        self.look = -1
        self.clock = at(0)
        self.task = NewTask("hello-1", "training", "hello", "default", "local", {}, {}, (), T0)

    def next_look(self) -> Look:
        self.look = min(self.look + 1, len(self.looks) - 1)
        return self.looks[self.look]

    def sleep(self, seconds: float) -> None:
        self.clock += timedelta(seconds=seconds)

    # The store --------------------------------------------------------------------------

    def get(self, task_id: str) -> TaskRecord:
        look = self.next_look()
        last = [entry for seen in self.looks[: self.look + 1] for entry in seen.phases][-1]
        return TaskRecord(
            self.task, self.look + 1, at(0), {}, last.phase, 1, "", False, look.finalized
        )

    def history(self, task_id: str) -> list[HistoryEntry]:
        return [entry for seen in self.looks[: self.look + 1] for entry in seen.phases]

    def events(self, task_id: str) -> list[AttachedEvent]:
        return [item for seen in self.looks[: self.look + 1] for item in seen.events]

    def request_abort(self, task_id: str, now: datetime) -> TaskRecord:
        raise AssertionError("nobody interrupts this run")

    # The log file -----------------------------------------------------------------------

    def read(self, *, now: bool = False) -> list[LogLine]:
        return [LogLine(text) for text in self.looks[self.look].output]

    def rest(self) -> list[LogLine]:
        return self.read()

    def close(self) -> None:
        """Nothing is held."""

    def unanswered_for(self) -> tuple[timedelta, str] | None:
        return self.unanswered


class Keeper:
    pid: int | None = 4242

    def keep(self, task_id: str, revision: int, *, now: bool = False) -> None:
        """The recorded executor never stops."""


def follow(display: PlainDisplay | LiveDisplay, recorded: RecordedTask) -> int:
    first = recorded.get("hello-1")
    recorded.look = -1
    follower = Follower(
        recorded,
        first,
        recorded,
        Keeper(),
        Signals(),
        clock=lambda: recorded.clock,
        sleep=recorded.sleep,
    )
    return follower.follow(display)


def test_the_plain_display_shows_a_recorded_task_in_the_order_it_happened(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert follow(PlainDisplay(), RecordedTask()) == 0
    assert capsys.readouterr().out.splitlines() == [
        "    0.1s  Queued  created",
        "    0.1s  event: SuccessfulCreate",
        "    0.3s  event: Started",
        "    0.5s  Running",
        "  | training",
        "  | epoch 1",
        "  | epoch 2",
        "  | saved",
        "    1.1s  event: Completed",
        "    1.1s  Success",
    ]


def test_the_live_display_shows_success_only_after_the_output_before_it() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100, color_system=None)
    recorded = RecordedTask()
    monotonic = iter(float(n) for n in range(10_000))
    display = LiveDisplay("training hello", console=console, clock=lambda: next(monotonic))
    assert follow(display, recorded) == 0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue())
    printed = [line.strip() for line in text.splitlines() if "│ " in line]
    assert printed == ["│ training", "│ epoch 1", "│ epoch 2", "│ saved"]
    success = re.search(r"^Success\s", text, re.MULTILINE)  # the timeline's row
    assert success is not None, text
    assert text.index("│ saved") < success.start()
    assert text.index("event Completed") < success.start()
    assert "training hello: Success after 1.1s" in text


UNREACHABLE = "cannot reach the Kubernetes API server https://10.0.0.1:6443: connection refused"


def test_a_task_whose_launch_never_reached_the_api_server_exits_6() -> None:
    gave_up = HistoryEntry(
        Phase.SYSTEM_RETRYABLE_FAILURE,
        2,
        f"{UNREACHABLE}; gave up after 6 attempts",
        at(30),
        error_code="ApiServerUnreachable",
    )
    looks = [
        Look([phase(Phase.NOT_READY, 0.1, "will retry")], [], []),
        Look([gave_up], [], []),
        Look([], [], [], finalized=True),
    ]
    assert follow(PlainDisplay(), RecordedTask(looks)) == ExitCode.UNREACHABLE == 6


def test_following_stops_with_exit_6_once_the_api_server_gave_no_answer_for_long() -> None:
    looks = [Look([phase(Phase.RUNNING, 0.1)], [], [])]
    lost = RecordedTask(looks, unanswered=(LOST_SERVER_AFTER + timedelta(seconds=1), UNREACHABLE))
    with pytest.raises(Unreachable) as caught:
        follow(PlainDisplay(), lost)
    assert caught.value.exit_code == 6
    assert caught.value.format_message() == (
        f"{UNREACHABLE}, for 31s; task hello-1 goes on with the executor (pid 4242), which keeps "
        "retrying: podwright logs hello-1 -f"
    )


def test_a_server_that_was_silent_only_briefly_is_followed_on() -> None:
    looks = [*LOOKS]
    briefly = RecordedTask(
        looks, unanswered=(LOST_SERVER_AFTER - timedelta(seconds=1), UNREACHABLE)
    )
    assert follow(PlainDisplay(), briefly) == 0


class InterruptedKeeper(Keeper):
    """Gets SIGTERM while it starts an executor (as ``run``'s keeper may, any round)."""

    def __init__(self) -> None:
        self.started = False

    def keep(self, task_id: str, revision: int, *, now: bool = False) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
        self.started = True


def test_sigterm_while_an_executor_is_started_stops_following_only_once_it_is_started() -> None:
    recorded = RecordedTask([Look([phase(Phase.RUNNING, 0.1)], [], [])])
    keeper = InterruptedKeeper()
    with Signals() as signals:
        signals.start_following()
        follower = Follower(
            recorded,
            recorded.get("hello-1"),
            recorded,
            keeper,
            signals,
            clock=lambda: recorded.clock,
            sleep=recorded.sleep,
        )
        with pytest.raises(_StopFollowing) as stopped:
            follower.follow(PlainDisplay())
    assert stopped.value.exit_code == ExitCode.TERMINATED
    assert keeper.started
