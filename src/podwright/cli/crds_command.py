"""``podwright crds``: the CustomResourceDefinitions of podwright's resources, printed.

``kubectl apply --server-side -f`` takes the output (``deploy/crds/`` holds the same, one file per
CRD). The definitions are generated from the field catalogue the policy engine reads
(:mod:`podwright.core.crds`), so they say what the files on a laptop say.
"""

from __future__ import annotations

import json

import click

from podwright.adapters.documents import dump_yaml
from podwright.cli.common import output_option
from podwright.core.crds import custom_resource_definitions


@click.command("crds")
@output_option("YAML documents, or a JSON v1 List.")
def crds_command(output: str) -> None:
    """Print the CustomResourceDefinitions of podwright.dev.

    Workload, WorkloadPolicy, ClusterWorkloadPolicy, Asset, ClusterAsset and ClusterProfile:
    their schemas are generated from the workload field catalogue; every object lists its
    fields, so kubectl (which validates strictly by default) refuses a misspelt one.
    """
    definitions = custom_resource_definitions()
    if output == "json":
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": definitions}, indent=2))
    else:
        click.echo("---\n".join(dump_yaml(crd) for crd in definitions), nl=False)
