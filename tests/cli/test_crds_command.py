"""``podwright crds``: the CRDs printed, and ``deploy/crds/`` kept equal to them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from podwright.cli.main import cli
from podwright.core.crds import custom_resource_definitions, definition_file_name

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "crds"
REGENERATE = "PODWRIGHT_UPDATE_GOLDEN=1 .venv/bin/pytest tests/cli/test_crds_command.py"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["crds", *args])


def test_deploy_crds_are_the_command_output() -> None:
    """``deploy/crds/`` holds one file per CRD (controller-gen's ``<group>_<plural>.yaml``),
    each the command's document for it, and nothing else."""
    result = run()
    assert result.exit_code == 0, result.stderr
    documents = result.stdout.split("---\n")
    names = [definition_file_name(crd) for crd in custom_resource_definitions()]
    assert len(documents) == len(names)
    if os.environ.get("PODWRIGHT_UPDATE_GOLDEN") == "1":
        for stale in DEPLOY.glob("*.yaml"):
            stale.unlink()
        for name, document in zip(names, documents, strict=True):
            (DEPLOY / name).write_text(document)
    assert sorted(path.name for path in DEPLOY.glob("*.yaml")) == sorted(names), (
        f"deploy/crds/ is not what 'podwright crds' prints; regenerate it with {REGENERATE}"
    )
    for name, document in zip(names, documents, strict=True):
        assert (DEPLOY / name).read_text() == document, (
            f"deploy/crds/{name} is not what 'podwright crds' prints; regenerate it with "
            f"{REGENERATE}"
        )


def test_yaml_documents_and_a_json_list_say_the_same() -> None:
    as_yaml = list(yaml.safe_load_all(run().stdout))
    listing = json.loads(run("-o", "json").stdout)
    assert (listing["apiVersion"], listing["kind"]) == ("v1", "List")
    assert listing["items"] == as_yaml == custom_resource_definitions()
    assert [item["spec"]["names"]["kind"] for item in listing["items"]] == [
        "Asset",
        "ClusterAsset",
        "ClusterProfile",
        "ClusterWorkloadPolicy",
        "WorkloadPolicy",
        "Workload",
    ]


def test_the_yaml_has_no_anchors() -> None:
    """A node shared between two places would be dumped as an anchor and an alias, which
    ``kubectl`` reads but a person cannot: every node is a fresh object."""
    assert "&id" not in run().stdout
