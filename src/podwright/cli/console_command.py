"""``podwright console``: the web console, served from this machine with the user's own access.

On the local backend it needs no cluster (``make run``'s tasks are there at once); with
``--backend operator`` it reads and writes the cluster's Workloads with the user's kubeconfig,
as ``kubectl proxy`` does, so the user's RBAC decides what it shows. The work is in
:mod:`podwright.console`.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from podwright.api.backends import BACKENDS, OPERATOR
from podwright.cli.common import BadInput, kubeconfig_options
from podwright.cli.task_options import home_option

_BACKEND_HELP = (
    "Whose workloads: local or kubernetes (this machine's task store, which holds the tasks "
    "of both; the default) or operator (the cluster's Workloads, read and written with your "
    "kubeconfig)."
)


@click.command("console")
@click.option("--backend", type=click.Choice(BACKENDS), default=None, help=_BACKEND_HELP)
@kubeconfig_options
@click.option(
    "-n",
    "--namespace",
    default=None,
    help="With --backend operator: only this namespace's Workloads (default: every namespace "
    "you may read).",
)
@home_option
@click.option(
    "--policy",
    "policy_files",
    metavar="FILE",
    multiple=True,
    help="Without --backend operator: a policy file that judges submissions from the form "
    "(repeat for more), as 'podwright run --policy'.",
)
@click.option(
    "--assets", "assets_file", metavar="FILE", help="The asset catalogue imposed assets come from."
)
@click.option(
    "--profile",
    "profile_file",
    metavar="FILE",
    help="Without --backend operator: the cluster profile submissions are rendered with, as "
    "'podwright run --profile'.",
)
@click.option(
    "--cluster-name",
    default=None,
    help="The cluster's name in the scope tree (default: the policies' or the kubeconfig's).",
)
@click.option(
    "--listen",
    default="127.0.0.1:8080",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to serve (port 0: any free one). Beyond loopback: with --tls-cert/--tls-key, "
    "or --insecure.",
)
@click.option("--tls-cert", metavar="FILE", help="Serve HTTPS with this certificate (PEM).")
@click.option("--tls-key", metavar="FILE", help="The certificate's private key (PEM).")
@click.option(
    "--insecure",
    is_flag=True,
    help="Serve plain HTTP beyond loopback: the token crosses the network in clear.",
)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing.")
@click.option("--open", "open_browser", is_flag=True, help="Open the console in a browser.")
def console_command(
    *,
    backend: str | None,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    home: str,
    policy_files: Sequence[str],
    assets_file: str | None,
    profile_file: str | None,
    cluster_name: str | None,
    listen: str,
    tls_cert: str | None,
    tls_key: str | None,
    insecure: bool,
    read_only: bool,
    open_browser: bool,
) -> None:
    """Serve the web console: the workloads, updated live; each workload's timeline, events
    and output; a submission form built from the policies; the policies at work.

    Every request carries a token: open the URL printed at start (it ends in ?token=...).
    Stop it with Ctrl-C.
    """
    from podwright.console.server import ServeOptions, serve  # noqa: PLC0415
    from podwright.console.sources import ConsoleSources  # noqa: PLC0415

    if profile_file is not None and backend == OPERATOR:
        raise BadInput(
            "--profile: with --backend operator the operator renders Workloads with its own "
            "cluster profile; leave it out"
        )
    if namespace is not None and backend != OPERATOR:
        raise BadInput(
            "--namespace: goes with --backend operator (this machine's store holds the "
            "tasks of every namespace; the console filters them by namespace)"
        )
    sources = ConsoleSources(
        backend=backend,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        all_namespaces=backend == OPERATOR and namespace is None,
        home=home,
        policy_files=tuple(policy_files),
        assets_file=assets_file,
        cluster_name=cluster_name,
    )
    options = ServeOptions(
        listen=listen,
        insecure=insecure,
        tls_cert=tls_cert,
        tls_key=tls_key,
        open_browser=open_browser,
        read_only=read_only,
        profile=profile_file,
    )

    def announce(url: str) -> None:
        click.echo(f"podwright console: serving {sources.backend or 'this machine'}'s workloads")
        click.echo(f"open {url}", err=False)
        click.echo("(stop with Ctrl-C)", err=True)

    try:
        serve(
            sources,
            options,
            announce,
            lambda note: click.echo(f"podwright console: note: {note}", err=True),
        )
    except KeyboardInterrupt:  # Uvicorn stops at Ctrl-C, then raises it again: a normal end
        click.echo("podwright console: stopped", err=True)
