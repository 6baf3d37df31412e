"""``podwright priority-classes``: the PriorityClasses a cluster profile names, printed or applied.

Every pod podwright renders names the PriorityClass of its priority level, and the API server
refuses a pod whose class does not exist; this command makes them exist. Without ``--apply`` it
prints their manifests (YAML documents, or a JSON v1 ``List``), which ``kubectl apply -f`` takes
(``deploy/priority-classes.yaml`` is this output for the default profile). With ``--apply`` it
creates the missing ones through podwright's Kubernetes adapter and reports each as created,
already present, or present with a different value. A PriorityClass's value and preemption
policy cannot change, so a different one is never replaced: the command says what to do, and
exits with status 1.

Exit status: 0 every class created or present as printed; 1 a class present with a different
value or preemption policy, or a cluster that cannot be reached or refuses; 2 bad input.
"""

from __future__ import annotations

import json

import click

from podwright.adapters.documents import dump_yaml
from podwright.adapters.kubernetes import KubernetesClient, KubernetesConfigError, connect
from podwright.api import load_profile
from podwright.api.backends import KUBERNETES, ClusterAccess, backend_key
from podwright.cli.common import BadInput, ExitCode, Unreachable, output_option
from podwright.core.render.priority_classes import (
    API_VERSION,
    KIND,
    Outcome,
    compare,
    priority_class_manifests,
)
from podwright.core.render.storage import Manifest
from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ApiConnectionError,
    KubernetesError,
    ObjectRef,
)


class PriorityClassConflict(click.ClickException):
    """Some PriorityClasses exist with another value: nothing was replaced (exit status 1)."""

    exit_code = ExitCode.VIOLATIONS


@click.command("priority-classes")
@click.option(
    "--profile",
    "profile_file",
    metavar="FILE",
    help="The cluster profile whose levels name the classes (default: podwright-<level>).",
)
@output_option("YAML documents, or a JSON v1 List (without --apply).")
@click.option(
    "--apply",
    "apply_",
    is_flag=True,
    help="Create the missing classes on the cluster instead of printing them.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    default=None,
    help="The kubeconfig file for --apply (default: $KUBECONFIG, else ~/.kube/config; in a "
    "pod, its service account).",
)
@click.option("--context", default=None, help="The kubeconfig context for --apply.")
def priority_classes_command(
    profile_file: str | None,
    output: str,
    apply_: bool,
    kubeconfig: str | None,
    context: str | None,
) -> None:
    """Print, or create with --apply, the PriorityClasses of the profile's priority levels.

    Values follow Run:ai's priority dictionary (very-low 25 ... very-high 150); levels below 100
    are preemptible (the KAI scheduler's rule) and never preempt others; none is the
    cluster's global default.
    """
    if not apply_ and (kubeconfig or context):
        raise click.UsageError("--kubeconfig and --context go with --apply")
    manifests = priority_class_manifests(load_profile(profile_file))
    if not apply_:
        if output == "json":
            listing = {"apiVersion": "v1", "kind": "List", "items": manifests}
            click.echo(json.dumps(listing, indent=2))
        else:
            click.echo("---\n".join(dump_yaml(manifest) for manifest in manifests), nl=False)
        return
    # A kubeconfig that cannot be read, or lacks the context, is bad input (exit 2).
    backend_key(KUBERNETES, ClusterAccess(kubeconfig, context))
    try:
        client = KubernetesClient(connect(kubeconfig, context))
    except KubernetesConfigError as error:
        raise BadInput(str(error)) from error
    try:
        conflicts = [
            problem for manifest in manifests if (problem := _apply(client, manifest)) is not None
        ]
    finally:
        client.close()
    if conflicts:
        raise PriorityClassConflict("\n".join(conflicts))


def _apply(client: KubernetesClient, manifest: Manifest) -> str | None:
    """Create one class (reporting what became of it); a conflict's message, or None."""
    metadata = manifest["metadata"]
    assert isinstance(metadata, dict)
    name = str(metadata["name"])
    shown = f"priorityclass.scheduling.k8s.io/{name}"
    try:
        client.create(manifest)
        click.echo(f"{shown} {Outcome.CREATED}")
        return None
    except AlreadyExistsError:
        pass
    except ApiConnectionError as error:
        raise Unreachable(f"{shown}: {error}") from error
    except KubernetesError as error:
        raise click.ClickException(f"{shown}: {error}") from error
    try:
        existing = client.get(ObjectRef(API_VERSION, KIND, "", name))
    except ApiConnectionError as error:
        raise Unreachable(f"{shown}: {error}") from error
    except KubernetesError as error:
        raise click.ClickException(f"{shown}: {error}") from error
    comparison = compare(existing, manifest)
    click.echo(f"{shown} {comparison.outcome}")
    if comparison.outcome is Outcome.DIFFERENT:
        return f"{shown}: {comparison.advice(name)}"
    return None
