"""What a command loads when it starts: the quick commands stay quick because they never import
the Kubernetes client, its models or the schema validator (``benchmarks/startup_bench.py`` times
them; this test keeps their imports honest, which does not depend on the machine's speed)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from podwright.cli.main import COMMANDS, cli

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
POLICIES = [
    str(EXAMPLES / "policies" / name)
    for name in ("cluster-prod.yaml", "department-research.yaml", "project-vision.yaml")
]
HEAVY = ("kubernetes", "pydantic", "jsonschema", "kubernetes_validate", "urllib3", "rich", "yaml")
"""Libraries the quick commands must not load (PyYAML too: they print no YAML)."""

# Runs the command in a fresh interpreter, as the console script does, and reports at exit which
# top-level packages it had loaded.
_PROBE = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})),
                              file=sys.stderr))
from podwright.cli.main import main
main(sys.argv[1:])
"""


def loaded_packages(*argv: str) -> set[str]:
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=EXAMPLES.parent,
    )
    assert completed.returncode == 0, completed.stderr
    loaded: list[str] = json.loads(completed.stderr.strip().splitlines()[-1])
    return set(loaded)


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--version"], id="version"),
        pytest.param(["--help"], id="help"),
        pytest.param(
            [
                "policy",
                "evaluate",
                "--workload",
                str(EXAMPLES / "workload-training.yaml"),
                "--assets",
                str(EXAMPLES / "assets.yaml"),
                *POLICIES,
            ],
            id="policy-evaluate",
        ),
        pytest.param(["policy", "check", *POLICIES], id="policy-check"),
        # The FUSE proxy's liveness probe runs every 30 s on every node.
        pytest.param(["fuse-proxy", "ping", "--help"], id="fuse-proxy-ping"),
        pytest.param(["fuse-proxy", "server", "--help"], id="fuse-proxy-server"),
    ],
)
def test_quick_commands_load_no_kubernetes_client(argv: list[str]) -> None:
    loaded = loaded_packages(*argv)
    assert "podwright" in loaded
    assert sorted(loaded & set(HEAVY)) == []


def test_the_command_list_names_every_command_with_its_own_help() -> None:
    """``podwright --help`` lists the commands without importing them: what it says of each must
    be what the command says of itself, and each must be found where the list says."""
    context = click.Context(cli)
    for name, (module, attribute, help_text) in COMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), name
        assert command.name == name
        assert help_text == command.get_short_help_str(limit=10**6), name
        assert cli.get_command(context, name) is command
    assert cli.get_command(context, "no-such-command") is None
