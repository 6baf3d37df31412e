"""Rules of the layering that import-linter cannot express (it sees external packages whole)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "src" / "podwright" / "core"

# Parts of the kubernetes package that do I/O; the core may use its models and pure utilities.
KUBERNETES_IO = (
    "kubernetes.config",
    "kubernetes.watch",
    "kubernetes.stream",
    "kubernetes.dynamic",
    "kubernetes.leaderelection",
    "kubernetes.client.api",
    "kubernetes.client.api_client",
    "kubernetes.client.rest",
    "kubernetes.utils.create_from_yaml",
)


def _imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_the_core_uses_no_kubernetes_io(path: Path) -> None:
    forbidden = {
        module
        for module in _imported_modules(path)
        if any(module == io or module.startswith(f"{io}.") for io in KUBERNETES_IO)
    }
    assert not forbidden


def test_the_rule_can_fail(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from kubernetes import config\nfrom kubernetes.client import CoreV1Api\n")
    assert "kubernetes.config" in _imported_modules(sample)
