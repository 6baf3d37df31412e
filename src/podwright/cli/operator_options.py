"""The options of ``--backend operator``: the task commands and ``run`` read and write the
Workloads of the cluster's operator (:mod:`podwright.api.operator_tasks`) with them, and refuse
what means nothing there."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from podwright.api.backends import BACKENDS
from podwright.cli.common import BadInput
from podwright.cli.render_command import Preparation

F = TypeVar("F", bound=Callable[..., object])

# Options --------------------------------------------------------------------------------------

_BACKEND_HELP = (
    "operator: the Workloads of the cluster's operator (with -n, --context, --kubeconfig); "
    "local or kubernetes (the default): this machine's task store, which holds the tasks of both."
)


def operator_options(command: F) -> F:
    """``--backend``, ``-n/--namespace`` and ``--context`` of a task command (the command has
    its own ``--kubeconfig``)."""
    command = click.option(
        "--context",
        default=None,
        help="With --backend operator: the kubeconfig context (default: its current one).",
    )(command)
    command = click.option(
        "-n",
        "--namespace",
        default=None,
        help="With --backend operator: the Workloads' namespace (default: the kubeconfig "
        "context's namespace, else default).",
    )(command)
    return click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=None,
        help=_BACKEND_HELP,
    )(command)


all_namespaces_option = click.option(
    "-A",
    "--all-namespaces",
    is_flag=True,
    help="With --backend operator: the Workloads of every namespace.",
)

_RECORDED = "a task of this machine's store records its own cluster and namespace"
_ONLY_WITH_OPERATOR = {
    "namespace": ("--namespace", _RECORDED),
    "context": ("--context", _RECORDED),
    "kubeconfig": ("--kubeconfig", _RECORDED),
    "all_namespaces": ("--all-namespaces", _RECORDED),
    "wait": ("--wait", "a task of this machine's store is deleted once its abort ended"),
}


def refuse_without_operator(**given: object) -> None:
    """:class:`BadInput` naming the first option given (not None, not False) of those that only
    ``--backend operator`` takes."""
    for name, value in given.items():
        if value is not None and value is not False:
            flag, why = _ONLY_WITH_OPERATOR[name]
            raise BadInput(f"{flag}: goes with --backend operator ({why})")


def refuse_for_operator(
    preparation: Preparation, lifecycle_config: str | None, namespace: str | None
) -> None:
    """:class:`BadInput` for the options of ``run`` that mean nothing to the operator."""
    given = (
        ("--policy", bool(preparation.policy_files)),
        ("--cluster-name", preparation.cluster_name is not None),
        ("--department", preparation.department is not None),
        ("--project", preparation.project is not None),
        ("--assets", preparation.assets_file is not None),
        ("--profile", preparation.profile_file is not None),
    )
    namespace_option = "" if namespace is None else f" -n {namespace}"
    for flag, present in given:
        if present:
            raise BadInput(
                f"{flag}: with --backend operator the cluster's policies, assets and profile "
                f"apply ('podwright policy effective{namespace_option} --type TYPE' shows its "
                f"policies); leave {flag} out"
            )
    if lifecycle_config is not None:
        raise BadInput(
            "--lifecycle-config: with --backend operator the operator's lifecycle configuration "
            "applies; leave --lifecycle-config out"
        )
