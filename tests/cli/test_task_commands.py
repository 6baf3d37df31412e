"""``podwright delete``, and the exit status of every command that runs or reads tasks on bad
input: 2, with a message naming the argument at fault."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from podwright.adapters.sqlite_store import SQLiteTaskStore
from podwright.api.backends import ClusterAccess, backend_key
from podwright.cli.main import cli
from podwright.core.lifecycle.phases import Phase, PhaseInfo
from tests.cli.records import pod_task
from tests.cli.test_run_commands import task_id_of, workload
from tests.kube.support import eventually, write_kubeconfig


def invoke(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--home", str(home)])


def run(home: Path, path: str, *extra: str) -> str:
    result = invoke(home, "run", "--workload", path, "--backend", "local", *extra)
    assert result.exit_code == 0, result.output
    return task_id_of(result.output)


def kubeconfig(tmp_path: Path, context: str = "emu") -> Path:
    """A kubeconfig of a server nothing answers at (the discard port, refused)."""
    return write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9", context)


def record_cluster_task(
    home: Path,
    task_id: str,
    *,
    started: bool,
    backend: str = "kubernetes/gone",
    maybe_created: bool = False,
) -> None:
    """A task recorded for a cluster context, its launch started or not (when not, a create that
    got no answer may have reached the server: ``maybe_created``)."""
    store = SQLiteTaskStore(home / "tasks.db")
    try:
        store.submit(
            pod_task(
                task_id,
                {"containers": [{"name": "main", "image": "busybox:1"}]},
                namespace="research",
                backend=backend,
            )
        )
        if maybe_created and not started:
            state = {
                "version": 1,
                "managerPhase": "NotStarted",
                "plugin": {"phase": "NotReady", "version": 1, "reason": "will retry"},
                "lastEvent": {"created": None, "recorded": None},
                "launchFailures": 1,
                "maybeCreated": True,
            }
            info = PhaseInfo(Phase.NOT_READY, 1, "will retry")
            store.advance(task_id, 1, state, info, datetime.now(UTC))
        if started:
            state = {
                "version": 1,
                "managerPhase": "Started",
                "plugin": {"phase": "Queued", "version": 1, "reason": ""},
                "lastEvent": {"created": None, "recorded": None},
                "launchFailures": 0,
            }
            info = PhaseInfo(Phase.QUEUED, 1, "created")
            store.advance(task_id, 1, state, info, datetime.now(UTC))
    finally:
        store.close()


def test_finished_tasks_are_deleted_with_their_history_events_and_log_files(
    tmp_path: Path, home: Path
) -> None:
    first = run(home, workload(tmp_path, "first", "echo one"))
    second = run(home, workload(tmp_path, "second", "echo two"))
    logs = home / "local" / "logs" / "default"
    assert sorted(p.name.rsplit("-", 1)[0] for p in logs.iterdir()) == [first, second]
    result = invoke(home, "delete", first)
    assert (result.exit_code, result.output) == (0, f"task {first} deleted\n")
    assert [p.name.rsplit("-", 1)[0] for p in logs.iterdir()] == [second]
    assert first not in invoke(home, "list").output
    result = invoke(home, "delete", "--all-finished")
    assert (result.exit_code, result.output) == (0, f"task {second} deleted\n")
    assert invoke(home, "list").output == "no tasks\n"
    assert list(logs.iterdir()) == []
    raw = SQLiteTaskStore(home / "tasks.db")
    try:
        assert raw.list_tasks() == []
    finally:
        raw.close()


def test_an_active_task_is_aborted_then_deleted(tmp_path: Path, home: Path) -> None:
    task_id = run(home, workload(tmp_path, "busy", "sleep 300"), "--detach")
    eventually(lambda: "phase:     Running" in invoke(home, "status", task_id).output, timeout=60)
    result = invoke(home, "delete", task_id)
    assert result.exit_code == 0, result.output
    assert re.search(
        rf"task {task_id}: Running, aborting it: waiting for the executor \(pid \d+\) to "
        r"finish, at most 2m0s",
        result.output,
    )
    assert result.output.endswith(f"task {task_id} aborted and deleted\n")
    assert invoke(home, "list").output == "no tasks\n"


def test_unknown_ids_are_bad_input_and_the_others_are_still_deleted(
    tmp_path: Path, home: Path
) -> None:
    task_id = run(home, workload(tmp_path, "real", "echo hi"))
    result = invoke(home, "delete", "ghost", task_id, "phantom")
    assert result.exit_code == 2
    store = home / "tasks.db"
    assert f"podwright: error: no task 'ghost' in {store}\n" in result.output
    assert f"podwright: error: no task 'phantom' in {store}\n" in result.output
    assert f"task {task_id} deleted\n" in result.output
    assert invoke(home, "list").output == "no tasks\n"


def test_a_task_of_an_unreachable_backend_never_launched_is_deleted(
    tmp_path: Path, home: Path
) -> None:
    record_cluster_task(home, "lost", started=False)
    result = invoke(home, "delete", "lost", "--kubeconfig", str(kubeconfig(tmp_path)))
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"task lost deleted: its backend kubernetes/gone cannot be reached (--context gone: "
        f"--kubeconfig {tmp_path / 'kubeconfig'} has no such context (it has: emu)), and its "
        "resource was never created there\n"
    )
    assert invoke(home, "list").output == "no tasks\n"


def test_a_launched_task_of_an_unreachable_backend_is_deleted_only_with_force(
    tmp_path: Path, home: Path
) -> None:
    record_cluster_task(home, "stranded", started=True)
    config = str(kubeconfig(tmp_path))
    refused = invoke(home, "delete", "stranded", "--kubeconfig", config)
    assert refused.exit_code == 5
    assert refused.output == (
        "podwright: error: task stranded is not deleted: its backend kubernetes/gone cannot be "
        f"reached (--context gone: --kubeconfig {config} has no such context (it has: emu)), "
        "and its Pod research/stranded may exist there; --force removes the record anyway\n"
    )
    aborted = invoke(home, "abort", "stranded", "--kubeconfig", config)
    assert aborted.exit_code == 5
    assert "'podwright delete stranded' removes its record" in aborted.output
    forced = invoke(home, "delete", "stranded", "--force", "--kubeconfig", config)
    assert forced.exit_code == 0, forced.output
    assert forced.output == (
        "task stranded deleted (--force): its Pod research/stranded may be left on "
        "kubernetes/gone; delete it there if it is\n"
    )
    assert invoke(home, "list").output == "no tasks\n"


def test_a_task_whose_create_may_have_reached_the_server_is_deleted_only_with_force(
    tmp_path: Path, home: Path
) -> None:
    # Its launch never started, but a create answered by a reset connection may have made it.
    record_cluster_task(home, "unsure", started=False, maybe_created=True)
    config = str(kubeconfig(tmp_path))
    refused = invoke(home, "delete", "unsure", "--kubeconfig", config)
    assert refused.exit_code == 5, refused.output
    assert "its Pod research/unsure may exist there; --force removes the record anyway" in (
        refused.output
    )
    assert invoke(home, "delete", "unsure", "--force", "--kubeconfig", config).exit_code == 0


def test_force_deletes_a_task_whose_api_server_gives_no_answer(tmp_path: Path, home: Path) -> None:
    # The kubeconfig is usable, its server is not: the abort cannot finish.
    config = kubeconfig(tmp_path)
    key = backend_key("kubernetes", ClusterAccess(str(config)))
    record_cluster_task(home, "marooned", started=True, backend=key)
    args = ("delete", "marooned", "--timeout", "1s", "--kubeconfig", str(config))
    refused = invoke(home, *args)
    assert refused.exit_code == 5, refused.output
    assert "not finalized within 1s" in refused.output
    assert "--force removes the record anyway" in refused.output
    forced = invoke(home, *args, "--force")
    assert forced.exit_code == 0, forced.output
    assert forced.output.endswith(
        "task marooned deleted (--force): its abort did not finish within 1s; its Pod "
        f"research/marooned may be left on {key}; delete it there if it is\n"
    )
    assert invoke(home, "list").output == "no tasks\n"


def test_delete_needs_ids_or_all_finished(home: Path) -> None:
    result = invoke(home, "delete")
    assert result.exit_code == 2
    assert "give the IDs of the tasks to delete, or --all-finished" in result.output


# Every command that runs or reads tasks, with each kind of bad input: exit 2, the argument named.

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

Case = Callable[[Path], tuple[list[str], str]]


def _garbage_kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "garbage"
    path.write_text("{{{ not yaml")
    return str(path)


def _workload_file(tmp_path: Path) -> str:
    return workload(tmp_path, "fine", "echo fine")


def _lifecycle(tmp_path: Path, text: str) -> str:
    path = tmp_path / "lifecycle.yaml"
    path.write_text(text)
    return str(path)


BAD_INPUT: dict[str, Case] = {
    "run: missing workload file": lambda t: (
        ["run", "--backend", "local", "--workload", str(t / "nope.yaml")],
        "nope.yaml",
    ),
    "run: unreadable kubeconfig": lambda t: (
        ["run", "--workload", _workload_file(t), "--kubeconfig", _garbage_kubeconfig(t)],
        f"--kubeconfig {t / 'garbage'}: not a usable kubeconfig",
    ),
    "run: missing kubeconfig": lambda t: (
        ["run", "--workload", _workload_file(t), "--kubeconfig", str(t / "absent")],
        f"--kubeconfig {t / 'absent'}: not a usable kubeconfig",
    ),
    "run: unknown context": lambda t: (
        [
            *("run", "--workload", _workload_file(t), "--backend", "kubernetes"),
            *("--kubeconfig", str(kubeconfig(t)), "--context", "nope"),
        ],
        "--context nope: ",
    ),
    "run: unknown backend": lambda t: (
        ["run", "--workload", _workload_file(t), "--backend", "moon"],
        "'--backend'",
    ),
    "run: missing lifecycle config": lambda t: (
        [
            *("run", "--workload", _workload_file(t), "--backend", "local"),
            *("--lifecycle-config", str(t / "absent.yaml")),
        ],
        "'--lifecycle-config'",
    ),
    "run: invalid lifecycle config": lambda t: (
        [
            *("run", "--workload", _workload_file(t), "--backend", "local"),
            *("--lifecycle-config", _lifecycle(t, "injectFinaliser: true\n")),
        ],
        "lifecycle.yaml",
    ),
    "executor: unreadable kubeconfig": lambda t: (
        ["executor", "--backend", "kubernetes", "--kubeconfig", _garbage_kubeconfig(t)],
        "--kubeconfig",
    ),
    "executor: unknown context": lambda t: (
        ["executor", "--kubeconfig", str(kubeconfig(t)), "--context", "nope"],
        "--context nope: ",
    ),
    "executor: bad round interval": lambda _t: (
        ["executor", "--backend", "local", "--round-interval", "0s"],
        "'--round-interval'",
    ),
    "executor: bad concurrency": lambda _t: (
        ["executor", "--backend", "local", "--concurrency", "0"],
        "'--concurrency'",
    ),
    "executor: bad metrics address": lambda _t: (
        ["executor", "--backend", "local", "--metrics-address", "nowhere"],
        "'--metrics-address'",
    ),
    "status: unknown task": lambda _t: (["status", "ghost"], "no task 'ghost'"),
    "logs: unknown task": lambda _t: (["logs", "ghost"], "no task 'ghost'"),
    "logs: bad option": lambda _t: (["logs", "ghost", "--since", "1h"], "--since"),
    "abort: unknown task": lambda _t: (["abort", "ghost"], "no task 'ghost'"),
    "abort: no task id": lambda _t: (["abort"], "'TASK_ID'"),
    "delete: unknown task": lambda _t: (["delete", "ghost"], "no task 'ghost'"),
    "delete: bad timeout": lambda _t: (["delete", "x", "--timeout", "soon"], "'--timeout'"),
    "list: extra argument": lambda _t: (["list", "everything"], "everything"),
    "list: unknown phase": lambda _t: (["list", "--phase", "Done"], "'--phase': 'Done'"),
    "list: unknown type": lambda _t: (["list", "--type", "batch"], "'--type': 'batch'"),
    "list: malformed selector": lambda _t: (["list", "-l", "a b"], "'a b': at column 3: "),
    "list: unknown order": lambda _t: (["list", "--sort-by", "age"], "'--sort-by': 'age'"),
    "list: unknown output": lambda _t: (["list", "-o", "wide"], "'-o' / '--output': 'wide'"),
    "status: unknown output": lambda _t: (["status", "-o", "wide"], "'-o' / '--output': 'wide'"),
    "pod: missing file": lambda t: (["pod", str(t / "pod.yaml")], "pod.yaml"),
    "pod: conflicting grants": lambda _t: (
        ["pod", str(EXAMPLES / "pod-spec.yaml"), "--allow-fuse", "--allow-fuse-privileged"],
        "--allow-fuse and --allow-fuse-privileged",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUT.values()), ids=list(BAD_INPUT))
def test_bad_input_exits_2_naming_the_argument(tmp_path: Path, home: Path, case: Case) -> None:
    args, named = case(tmp_path)
    result = CliRunner().invoke(cli, args) if args[0] == "pod" else invoke(home, *args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("podwright: error: "), result.output
    assert named in result.output
    assert invoke(home, "list").output == "no tasks\n"


@pytest.mark.parametrize("command", ["list", "status", "run"])
def test_a_task_store_path_naming_a_directory_is_bad_input(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("PODWRIGHT_TASK_STORE", str(tmp_path))
    args = [command]
    if command == "run":
        args += ["--workload", _workload_file(tmp_path), "--backend", "local"]
    result = invoke(home, *args)
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"podwright: error: $PODWRIGHT_TASK_STORE: the task store {tmp_path} is a directory; "
        "name a file\n"
    )


def test_an_unwritable_task_store_is_unavailable_exit_5(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    store.write_bytes(b"this is not SQLite, and not a podwright task store" * 100)
    result = CliRunner().invoke(cli, ["list"], env={"PODWRIGHT_TASK_STORE": str(store)})
    assert result.exit_code == 5, result.output
    assert "is not a usable podwright task store" in result.output
