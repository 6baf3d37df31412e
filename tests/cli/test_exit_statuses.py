"""The exit statuses are documented once (``EXIT_STATUSES``) and shown alike in ``podwright
--help`` and in the README's table, so neither drifts from the codes the commands use."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from podwright.cli.common import EXIT_STATUSES, ExitCode
from podwright.cli.main import cli

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_exit_code_has_its_meaning() -> None:
    assert list(EXIT_STATUSES) == list(ExitCode)


def test_the_help_lists_every_exit_status() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0, result.output
    listed = result.stdout.split("Exit statuses:\n", 1)[1].splitlines()
    assert [line.split(None, 1) for line in listed if line.strip()] == [
        [str(code.value), meaning] for code, meaning in EXIT_STATUSES.items()
    ]


def test_the_readme_table_is_the_same() -> None:
    section = README.read_text().split("## Exit statuses\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", section, re.MULTILINE)
    assert [(int(code), meaning.replace("\\|", "|")) for code, meaning in rows] == [
        (code.value, meaning) for code, meaning in EXIT_STATUSES.items()
    ]
