"""A cluster task's backend names its context and its API server: two kubeconfigs whose contexts
share a name (every kubeadm cluster's is ``kubernetes-admin@kubernetes``) never mix their tasks,
and a kubeconfig whose context names another server is refused for a task (exit status 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from podwright.api.backends import (
    ClusterAccess,
    access_for,
    backend_key,
    cluster_problem,
    context_of,
    resolve_backend,
)
from podwright.api.errors import InvalidInputError
from podwright.cli.main import cli
from tests.cli.test_task_commands import record_cluster_task
from tests.kube.support import write_kubeconfig

KUBEADM = "kubernetes-admin@kubernetes"


def kubeconfig_of(tmp_path: Path, name: str, server: str) -> str:
    return str(write_kubeconfig(tmp_path / name, server, KUBEADM))


def test_two_clusters_whose_contexts_share_a_name_have_two_backends(tmp_path: Path) -> None:
    first = kubeconfig_of(tmp_path, "a", "https://10.0.0.1:6443")
    second = kubeconfig_of(tmp_path, "b", "https://10.0.0.2:6443")
    keys = [backend_key("kubernetes", ClusterAccess(path)) for path in (first, second)]
    assert keys == [
        f"kubernetes/{KUBEADM}#https://10.0.0.1:6443",
        f"kubernetes/{KUBEADM}#https://10.0.0.2:6443",
    ]
    assert [context_of(key) for key in keys] == [KUBEADM, KUBEADM]
    assert access_for(keys[0], first) == ClusterAccess(first, KUBEADM)
    assert resolve_backend(None, ClusterAccess(first, KUBEADM)) == keys[0]


def test_a_kubeconfig_whose_context_names_another_server_is_refused_for_a_task(
    tmp_path: Path,
) -> None:
    first = kubeconfig_of(tmp_path, "a", "https://10.0.0.1:6443")
    second = kubeconfig_of(tmp_path, "b", "https://10.0.0.2:6443")
    key = backend_key("kubernetes", ClusterAccess(first))
    assert cluster_problem(key, first) is None
    assert cluster_problem(key, second) == (
        f"--context {KUBEADM}: in --kubeconfig {second} it names the API server "
        "https://10.0.0.2:6443, and the task's cluster is https://10.0.0.1:6443: give the "
        "kubeconfig the task was submitted with"
    )


def test_logs_of_a_task_with_the_kubeconfig_of_another_cluster_exits_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = kubeconfig_of(tmp_path, "a", "https://10.0.0.1:6443")
    key = backend_key("kubernetes", ClusterAccess(first))
    record_cluster_task(home, "elsewhere", started=True, backend=key)
    other = kubeconfig_of(tmp_path, "other", "https://10.0.0.9:6443")
    result = CliRunner().invoke(
        cli, ["logs", "elsewhere", "--kubeconfig", other, "--home", str(home)]
    )
    assert result.exit_code == 2, result.output
    assert result.output == (
        f"podwright: error: task elsewhere runs on {key}: --context {KUBEADM}: in --kubeconfig "
        f"{other} it names the API server https://10.0.0.9:6443, and the task's cluster is "
        "https://10.0.0.1:6443: give the kubeconfig the task was submitted with\n"
    )


def test_logs_of_a_task_whose_api_server_gives_no_answer_exits_6(tmp_path: Path) -> None:
    home = tmp_path / "home"
    silent = str(write_kubeconfig(tmp_path / "silent", "http://127.0.0.1:9", "silent"))
    key = backend_key("kubernetes", ClusterAccess(silent))
    record_cluster_task(home, "quiet", started=True, backend=key)
    result = CliRunner().invoke(cli, ["logs", "quiet", "--kubeconfig", silent, "--home", str(home)])
    assert result.exit_code == 6, result.output
    assert result.output == (
        "podwright: error: cannot reach the Kubernetes API server http://127.0.0.1:9: connection "
        "refused: the output of task quiet cannot be read\n"
    )


def test_a_context_the_kubeconfig_lacks_is_bad_input_naming_it(tmp_path: Path) -> None:
    path = kubeconfig_of(tmp_path, "a", "https://10.0.0.1:6443")
    with pytest.raises(
        InvalidInputError, match=r"^--context nope: --kubeconfig .* has no such context"
    ):
        backend_key("kubernetes", ClusterAccess(path, "nope"))
