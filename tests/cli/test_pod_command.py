"""``podwright pod``: grants applied to a pod spec, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

import podwright
from podwright.cli.main import cli
from tests.manifests import assert_valid_pod

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLE = REPOSITORY / "examples" / "pod-spec.yaml"


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin)


def pod_from(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    pod: dict[str, Any] = yaml.safe_load(result.stdout)
    assert_valid_pod(pod)
    return pod


def test_the_example_with_both_grants() -> None:
    pod = pod_from(run("pod", str(EXAMPLE), "--allow-fuse", "--allow-nested-sandboxing"))
    primary = pod["spec"]["containers"][0]
    assert primary["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["SYS_ADMIN"]},
    }
    assert primary["resources"]["limits"]["smarter-devices/fuse"] == "1"
    assert primary["resources"]["requests"]["cpu"] == "2"
    assert pod["metadata"]["annotations"] == {
        "podwright.dev/capability-fuse": "device-plugin",
        "container.apparmor.security.beta.kubernetes.io/primary": "unconfined",
        "podwright.dev/capability-nested-sandboxing": "true",
        "podwright.dev/primary-container": "primary",
        "kubectl.kubernetes.io/default-container": "primary",
    }


def test_no_grant_prints_the_pod_unchanged_but_for_the_primary_annotations() -> None:
    pod = pod_from(run("pod", "-", stdin="containers: [{name: main, image: x}]"))
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": {
                "podwright.dev/primary-container": "main",
                "kubectl.kubernetes.io/default-container": "main",
            }
        },
        "spec": {"containers": [{"name": "main", "image": "x"}]},
    }


def test_a_pod_manifest_from_stdin_as_json_with_privileged_fuse_and_grace_period() -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train", "namespace": "ml", "labels": {"app": "t"}},
        "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
    }
    result = run(
        "pod",
        "--allow-fuse-privileged",
        "--primary-container",
        "b",
        "--termination-grace-period",
        "45",
        "-o",
        "json",
        stdin=json.dumps(manifest),
    )
    assert result.exit_code == 0, result.stderr
    pod = json.loads(result.stdout)
    assert_valid_pod(pod)
    assert pod["metadata"]["name"] == "train"
    assert pod["metadata"]["namespace"] == "ml"
    assert pod["metadata"]["labels"] == {"app": "t"}
    assert pod["spec"]["terminationGracePeriodSeconds"] == 45
    assert pod["spec"]["containers"][1]["securityContext"] == {"privileged": True}
    assert "securityContext" not in pod["spec"]["containers"][0]


def test_its_own_output_can_be_fed_back_in() -> None:
    first = run("pod", str(EXAMPLE), "--allow-fuse")
    again = run("pod", "--allow-fuse", "--allow-nested-sandboxing", stdin=first.stdout)
    both = run("pod", str(EXAMPLE), "--allow-fuse", "--allow-nested-sandboxing")
    assert pod_from(again) == pod_from(both)


def test_the_proxy_grant_from_the_command_line() -> None:
    result = run(
        "pod", "-", "--allow-fuse-proxy", "ghcr.io/example/podwright:1", stdin="containers: []"
    )
    pod = pod_from(result)
    assert pod["metadata"]["annotations"]["podwright.dev/capability-fuse"] == "proxy"
    assert pod["spec"]["initContainers"][0]["image"] == "ghcr.io/example/podwright:1"
    assert_valid_pod(pod)


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        pytest.param(
            ["--allow-fuse", "--allow-fuse-privileged"],
            "containers: []",
            "--allow-fuse and --allow-fuse-privileged are different ways to grant FUSE; "
            "choose one (see 'podwright pod --help')",
            id="two-fuse-modes",
        ),
        pytest.param(
            ["--allow-fuse", "--allow-fuse-proxy", "ghcr.io/example/podwright:1"],
            "containers: []",
            "--allow-fuse and --allow-fuse-proxy are different ways to grant FUSE; choose one",
            id="device-plugin-and-proxy",
        ),
        pytest.param(
            ["--allow-fuse-proxy", " "],
            "containers: []",
            "--allow-fuse-proxy: shim_image must be an image reference, got ' '",
            id="bad-shim-image",
        ),
        pytest.param(
            ["--allow-fuse-privileged", "--allow-nested-sandboxing"],
            "containers: []",
            "--allow-fuse-privileged cannot be combined with --allow-nested-sandboxing",
            id="privileged-fuse-and-nested",
        ),
        pytest.param([], "containers: [\n", "<stdin>:2:1: invalid YAML", id="unparsable"),
        pytest.param(
            [],
            "containers:\n  - name: a\n    imagePullPolcy: Always\n",
            "<stdin>:3:5: containers[0].imagePullPolcy: unknown field "
            "(did you mean 'imagePullPolicy'?)",
            id="not-a-pod-spec",
        ),
        pytest.param(
            [],
            "apiVersion: apps/v1\nkind: Deployment\n",
            "<stdin>: expected a Pod manifest",
            id="another-kind",
        ),
        pytest.param(
            ["--allow-nested-sandboxing"],
            "containers: [{name: primary, image: x, securityContext: {privileged: true}}]",
            "<stdin>: cannot grant nested sandboxing: primary container 'primary' is privileged",
            id="grant-conflicts-with-the-spec",
        ),
        pytest.param(
            [],
            "containers: [{name: a, image: x}, {name: b, image: x}]",
            "<stdin>: cannot choose the primary container",
            id="ambiguous-primary",
        ),
        pytest.param(
            [],
            "initContainers: [{name: fetch}]\ncontainers: [{name: a, image: x}, {name: b}]",
            "<stdin>:1:18: initContainers[0].image: required: the API server refuses a Pod whose "
            "container has no image (and 1 more problem)",
            id="no-image",
        ),
        pytest.param(
            ["--termination-grace-period", "-1"],
            "containers: []",
            "Invalid value for '--termination-grace-period': -1 is not in the range x>=0.",
            id="negative-grace-period",
        ),
        pytest.param(["--allow-fus"], "", "No such option '--allow-fus'", id="unknown-option"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(args: list[str], stdin: str, message: str) -> None:
    result = run("pod", *args, stdin=stdin)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("podwright: error: ")
    assert message in lines[0]


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = run("pod", str(missing))
    assert result.exit_code == 2
    assert result.stderr == f"podwright: error: {missing}: No such file or directory\n"


def test_the_installed_entry_point(tmp_path: Path) -> None:
    """The console script and ``python -m podwright`` run outside the test process."""
    version = subprocess.run(
        [Path(sys.executable).parent / "podwright", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout == f"podwright, version {podwright.__version__}\n"
    helped = subprocess.run(
        [sys.executable, "-m", "podwright", "pod", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for option in ("--allow-fuse", "--allow-fuse-privileged", "--allow-nested-sandboxing"):
        assert option in helped.stdout
    failed = subprocess.run(
        [sys.executable, "-m", "podwright", "pod", str(tmp_path / "missing.yaml")],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert failed.returncode == 2
    assert failed.stderr.count("\n") == 1


def test_no_file_and_a_terminal_for_stdin_is_a_usage_error() -> None:
    # CliRunner's stdin is not a terminal; a pseudo-terminal stands in for one.
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    try:
        failed = subprocess.run(
            [sys.executable, "-m", "podwright", "pod"],
            stdin=follower,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        os.close(leader)
        os.close(follower)
    assert failed.returncode == 2
    assert "no FILE given and standard input is a terminal" in failed.stderr
