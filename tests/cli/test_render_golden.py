"""Golden manifests: every example workload, rendered by ``podwright render``, byte for byte.

The goldens live in ``tests/golden/render``; after an intended change to the renderer, refresh
them with ``PODWRIGHT_UPDATE_GOLDEN=1 pytest tests/cli/test_render_golden.py`` and review the diff.
Each golden is also checked against its schema, so a refreshed golden cannot be an invalid one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from podwright.cli.main import cli
from tests.manifests import assert_valid_manifests

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "tests" / "golden" / "render"
PROFILE = str(EXAMPLES / "cluster-profile.yaml")
POLICIES = [
    f"--policy={EXAMPLES / 'policies' / name}"
    for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
]

CASES = {
    "workspace": ["--workload", "workload-workspace.yaml", "--profile", PROFILE],
    "training": [
        "--workload",
        "workload-training.yaml",
        *POLICIES,
        f"--assets={EXAMPLES / 'assets.yaml'}",
        "--profile",
        PROFILE,
        "--namespace",
        "vision",
    ],
    "training-default-profile": [
        "--workload",
        "workload-training.yaml",
        *POLICIES,
        f"--assets={EXAMPLES / 'assets.yaml'}",
    ],
    "distributed-pytorch": [
        "--workload",
        "workload-distributed-pytorch.yaml",
        "--profile",
        PROFILE,
    ],
    "distributed-mpi": ["--workload", "workload-distributed-mpi.yaml", "--profile", PROFILE],
    "distributed-tf": ["--workload", "workload-distributed-tf.yaml", "--profile", PROFILE],
    "distributed-xgboost": [
        "--workload",
        "workload-distributed-xgboost.yaml",
        "--profile",
        PROFILE,
    ],
    "distributed-jax": ["--workload", "workload-distributed-jax.yaml", "--profile", PROFILE],
    "inference": ["--workload", "workload-inference.yaml", "--profile", PROFILE],
    "training-local": [
        "--workload",
        "workload-local.yaml",
        f"--policy={EXAMPLES / 'policies' / 'local-dev.yaml'}",
    ],
    "workspace-local": ["--workload", "workload-workspace-local.yaml"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_example_renders_to_its_golden(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES)
    result = CliRunner().invoke(cli, ["render", *CASES[case]])
    assert result.exit_code == 0, result.stderr
    assert_valid_manifests(list(yaml.safe_load_all(result.stdout)))
    golden = GOLDEN / f"{case}.yaml"
    if os.environ.get("PODWRIGHT_UPDATE_GOLDEN") == "1":
        golden.write_text(result.stdout)
    assert golden.exists(), f"no golden for {case}; run with PODWRIGHT_UPDATE_GOLDEN=1"
    assert result.stdout == golden.read_text()


def test_every_example_workload_has_a_golden() -> None:
    examples = {path.name for path in EXAMPLES.glob("workload-*.yaml")}
    assert examples == {arguments[1] for arguments in CASES.values()}
    assert {path.stem for path in GOLDEN.glob("*.yaml")} == set(CASES)
