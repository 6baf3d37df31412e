"""``podwright priority-classes``: the manifests printed and shipped, and ``--apply`` against the
API-server emulator (created, already present, present with a different value)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from podwright.adapters.kubernetes import KubernetesClient
from podwright.cli.main import cli
from podwright.engine.kubernetes_port import ObjectRef
from tests.k8s_emulator import Emulator
from tests.k8s_emulator.server import Fault
from tests.kube.support import write_kubeconfig
from tests.manifests import schema_errors

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "priority-classes.yaml"
PROFILE = str(ROOT / "examples" / "cluster-profile.yaml")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["priority-classes", *args])


def test_the_shipped_file_is_the_command_output() -> None:
    """``deploy/priority-classes.yaml`` is what the command prints for the default profile;
    refresh it with ``PODWRIGHT_UPDATE_GOLDEN=1`` (or ``podwright priority-classes > ...``)."""
    result = run()
    assert result.exit_code == 0, result.stderr
    if os.environ.get("PODWRIGHT_UPDATE_GOLDEN") == "1":
        DEPLOY.write_text(result.stdout)
    assert DEPLOY.read_text() == result.stdout
    manifests = list(yaml.safe_load_all(result.stdout))
    assert [m["metadata"]["name"] for m in manifests] == [
        f"podwright-{level}"
        for level in ("very-low", "low", "medium-low", "medium", "medium-high", "high", "very-high")
    ]
    assert all(schema_errors(manifest) == [] for manifest in manifests)


def test_a_profile_names_its_own_classes_and_json_is_a_list() -> None:
    result = run("--profile", PROFILE, "-o", "json")
    assert result.exit_code == 0, result.stderr
    listing = json.loads(result.stdout)
    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    assert [(item["metadata"]["name"], item["value"]) for item in listing["items"]][4:] == [
        ("interactive-medium-high", 110),
        ("interactive-high", 125),
        ("serving-critical", 150),
    ]


def test_cluster_options_need_apply() -> None:
    result = run("--context", "prod")
    assert result.exit_code == 2
    assert "--kubeconfig and --context go with --apply" in result.stderr


def test_a_bad_profile_is_bad_input(tmp_path: Path) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text(
        "apiVersion: podwright.dev/v1\nkind: ClusterProfile\n"
        "spec:\n  priorityClasses:\n    low: {value: high}\n"
    )
    result = run("--profile", str(profile))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"podwright: error: {profile}:5:11: spec.priorityClasses.low.value: expected an integer"
    )


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as running:
        yield running


@pytest.fixture
def kubeconfig(tmp_path: Path, emulator: Emulator) -> str:
    return str(write_kubeconfig(tmp_path / "kubeconfig", emulator.url))


def stored(emulator: Emulator, name: str) -> dict[str, Any]:
    client = KubernetesClient.for_host(emulator.url)
    try:
        return client.get(ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "", name))
    finally:
        client.close()


def test_apply_creates_the_missing_classes_once(kubeconfig: str, emulator: Emulator) -> None:
    first = run("--apply", "--kubeconfig", kubeconfig)
    assert first.exit_code == 0, first.stderr
    assert first.stdout.splitlines()[:2] == [
        "priorityclass.scheduling.k8s.io/podwright-very-low created",
        "priorityclass.scheduling.k8s.io/podwright-low created",
    ]
    assert len(first.stdout.splitlines()) == 7
    low = stored(emulator, "podwright-low")
    assert (low["value"], low["preemptionPolicy"], low["globalDefault"]) == (40, "Never", False)
    again = run("--apply", "--kubeconfig", kubeconfig, "--context", "emu")
    assert again.exit_code == 0, again.stderr
    assert set(again.stdout.splitlines()) == {
        f"priorityclass.scheduling.k8s.io/podwright-{level} already present"
        for level in ("very-low", "low", "medium-low", "medium", "medium-high", "high", "very-high")
    }


def test_apply_never_replaces_a_class_with_another_value(
    kubeconfig: str, emulator: Emulator
) -> None:
    client = KubernetesClient.for_host(emulator.url)
    client.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "podwright-high"},
            "value": 1000,
            "description": "the team's own",
        }
    )
    client.close()
    result = run("--apply", "--kubeconfig", kubeconfig)
    assert result.exit_code == 1
    assert "priorityclass.scheduling.k8s.io/podwright-high present with a different value" in (
        result.stdout.splitlines()
    )
    assert "priorityclass.scheduling.k8s.io/podwright-very-high created" in result.stdout
    assert result.stderr.splitlines() == [
        "podwright: error: priorityclass.scheduling.k8s.io/podwright-high: it has value 1000 "
        "(the profile's: 125), which cannot be changed in place; nothing was replaced. Either "
        "give this level the class's own value in the cluster profile (priorityClasses), or "
        "delete the class once no pod uses it (kubectl delete priorityclass podwright-high) and "
        "apply again",
    ]
    kept = stored(emulator, "podwright-high")
    assert (kept["value"], kept["description"]) == (1000, "the team's own")


def test_apply_with_a_kubeconfig_it_cannot_read_is_bad_input(tmp_path: Path) -> None:
    result = run("--apply", "--kubeconfig", str(tmp_path / "missing"))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"podwright: error: --kubeconfig {tmp_path / 'missing'}: not a usable kubeconfig"
    )


def test_apply_with_a_context_the_kubeconfig_lacks_is_bad_input(kubeconfig: str) -> None:
    result = run("--apply", "--kubeconfig", kubeconfig, "--context", "nope")
    assert result.exit_code == 2
    assert result.stderr == (
        f"podwright: error: --context nope: --kubeconfig {kubeconfig} has no such context "
        "(it has: emu)\n"
    )


def test_apply_to_a_cluster_that_gives_no_answer_exits_6(tmp_path: Path) -> None:
    silent = write_kubeconfig(tmp_path / "silent", "http://127.0.0.1:9")
    result = run("--apply", "--kubeconfig", str(silent))
    assert result.exit_code == 6
    assert "cannot reach the Kubernetes API server http://127.0.0.1:9: connection refused" in (
        result.stderr
    )


def test_apply_stops_at_a_refusal_and_names_the_class(kubeconfig: str, emulator: Emulator) -> None:
    emulator.inject(Fault(403, method="POST", path="/priorityclasses$", reason="Forbidden"))
    result = run("--apply", "--kubeconfig", kubeconfig)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "podwright: error: priorityclass.scheduling.k8s.io/podwright-very-low: "
    )
