"""The options of the commands that run or read tasks: where tasks run (``--backend``, with
``--kubeconfig`` and ``--context``) and podwright's state directory (``--home``). Apart from
:mod:`podwright.cli.common`, which every command loads, since defining them loads the backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from podwright.api.backends import BACKENDS, EXECUTOR_BACKENDS
from podwright.api.state import HOME_ENV, default_home
from podwright.cli.common import kubeconfig_options

F = TypeVar("F", bound=Callable[..., object])


def cluster_options(command: F) -> F:
    """``--backend`` (local or kubernetes: what an executor runs), ``--kubeconfig`` and
    ``--context``."""
    command = kubeconfig_options(command)
    return click.option(
        "--backend",
        type=click.Choice(EXECUTOR_BACKENDS),
        default=None,
        help="Where tasks run (default: kubernetes when a cluster is configured, else local).",
    )(command)


def submit_options(command: F) -> F:
    """``--backend`` (any of :data:`BACKENDS`), ``--kubeconfig`` and ``--context``: ``run``."""
    command = kubeconfig_options(command)
    return click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=None,
        help="Where the task runs: local, kubernetes (this machine's executor against the "
        "cluster) or operator (the cluster's operator, as a Workload); default: kubernetes when "
        "a cluster is configured, else local.",
    )(command)


home_option = click.option(
    "--home",
    type=click.Path(file_okay=False),
    default=default_home,
    show_default=f"${HOME_ENV}, else ~/.local/state/podwright",
    help="podwright's state directory: the task store and the local backend's logs.",
)
