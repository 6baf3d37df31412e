"""The local backend's log files, as ``run`` (the primary container) and ``logs`` (all) read them."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from podwright.api.task_logs import LocalLogTail, LogLine, primary_container
from podwright.engine.kubernetes_port import ObjectRef


def texts(lines: list[LogLine]) -> list[str]:
    return [line.text for line in lines]


def write(state: Path, pod: str, container: str, text: str) -> None:
    path = state / "logs" / "research" / pod / f"{container}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write(text)


def test_only_the_named_container_and_only_whole_lines(tmp_path: Path) -> None:
    ref = ObjectRef("v1", "Pod", "research", "nb")
    write(tmp_path, "nb", "git-clone", "cloning\n")
    write(tmp_path, "nb", "main", "serving\nhalf a li")
    primary = LocalLogTail(tmp_path, ref, "main")
    everything = LocalLogTail(tmp_path, ref)
    assert texts(primary.read()) == ["serving"]
    assert texts(everything.read()) == ["cloning", "serving"]
    write(tmp_path, "nb", "main", "ne\n")
    assert texts(primary.read()) == ["half a line"]
    assert texts(primary.read()) == []


def test_the_rest_of_a_finished_output_includes_a_last_line_without_newline(
    tmp_path: Path,
) -> None:
    ref = ObjectRef("v1", "Pod", "research", "nb")
    write(tmp_path, "nb", "main", "epoch 1\nsaved, no newline")
    tail = LocalLogTail(tmp_path, ref, "main")
    assert texts(tail.read()) == ["epoch 1"]
    log = tmp_path / "logs" / "research" / "nb" / "main.log"
    os.utime(log, (1000, 1000))  # the lines of a read carry the time the file was last written
    assert tail.rest() == [LogLine("saved, no newline", datetime.fromtimestamp(1000, UTC))]
    assert tail.rest() == []


def test_a_jobs_pods_are_read_in_the_order_they_were_made(tmp_path: Path) -> None:
    ref = ObjectRef("batch/v1", "Job", "research", "train")
    write(tmp_path, "train-zzzzz", "main", "attempt 1\n")
    write(tmp_path, "train-aaaaa", "main", "attempt 2\n")
    write(tmp_path, "trainer-zzzzz", "main", "another job\n")
    pods = tmp_path / "logs" / "research"
    os.utime(pods / "train-zzzzz", (1000, 1000))  # made first, though it sorts last by name
    os.utime(pods / "train-aaaaa", (2000, 2000))
    assert texts(LocalLogTail(tmp_path, ref, "main").read()) == ["attempt 1", "attempt 2"]


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        ({"metadata": {"annotations": {"podwright.dev/primary-container": "main"}}}, "main"),
        (
            {"metadata": {"annotations": {"kubectl.kubernetes.io/default-container": "app"}}},
            "app",
        ),
        (
            {
                "spec": {
                    "template": {
                        "metadata": {"annotations": {"podwright.dev/primary-container": "t"}}
                    }
                }
            },
            "t",
        ),
        ({"metadata": {}}, None),
    ],
    ids=["pod", "kubectl-default", "job-template", "unmarked"],
)
def test_the_primary_container_is_the_marked_one(
    manifest: dict[str, object], expected: str | None
) -> None:
    assert primary_container(manifest) == expected
