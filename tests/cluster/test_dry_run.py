"""Every manifest ``podwright render`` produces for every example in ``examples/`` (every workload
type among them) is accepted by the API server's server-side dry run (``?dryRun=All``: admission
and validation run, nothing is stored; "Dry-run" in the API concepts,
https://kubernetes.io/docs/reference/using-api/api-concepts/#dry-run), once the cluster serves its
kinds (their CRDs from ``../shared/schemas``) and has the PriorityClasses its profile names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podwright.adapters.kubernetes.resources import rest_resource
from tests.cluster.support import (
    EXAMPLES,
    ROOT,
    Server,
    SessionInstalls,
    podwright_command,
)
from tests.node_sim.rest import send

POLICIES = EXAMPLES / "policies"
CLUSTER_PROFILE = EXAMPLES / "cluster-profile.yaml"
RENDERINGS = {
    "workload-training.yaml": [
        *("--policy", str(POLICIES / "cluster-prod.yaml")),
        *("--policy", str(POLICIES / "department-research.yaml")),
        *("--policy", str(POLICIES / "project-vision.yaml")),
        *("--assets", str(EXAMPLES / "assets.yaml"), "--profile", str(CLUSTER_PROFILE)),
        # Rendered into the test's namespace, previewed in the project whose policies give it
        # its image (a namespace's own project would otherwise judge it).
        *("--scope", "cluster=default,department=research,project=vision"),
    ],
    "workload-workspace.yaml": ["--profile", str(CLUSTER_PROFILE)],
    **{
        f"workload-distributed-{framework}.yaml": ["--profile", str(CLUSTER_PROFILE)]
        for framework in ("pytorch", "mpi", "tf", "xgboost", "jax")
    },
    "workload-inference.yaml": ["--profile", str(CLUSTER_PROFILE)],
    "workload-local.yaml": [],
    "workload-workspace-local.yaml": [],
}
"""How each example is rendered: as the README runs it."""


def test_every_example_is_rendered_here() -> None:
    assert sorted(RENDERINGS) == sorted(path.name for path in EXAMPLES.glob("workload-*.yaml"))


@pytest.mark.parametrize("example", sorted(RENDERINGS))
def test_every_manifest_of_an_example_passes_the_servers_dry_run(
    example: str, server: Server, installs: SessionInstalls, namespace: str
) -> None:
    options = RENDERINGS[example]
    rendered = podwright_command(
        *("render", "--workload", str(EXAMPLES / example), *options),
        *("--namespace", namespace, "-o", "json"),
        cwd=ROOT,
    )
    assert rendered.returncode == 0, rendered.stderr
    manifests = json.loads(rendered.stdout)["items"]
    installs.kinds(manifests)
    profile = Path(options[options.index("--profile") + 1]) if "--profile" in options else None
    installs.priority_classes(profile)
    for manifest in manifests:
        resource = rest_resource(manifest["apiVersion"], manifest["kind"])
        path = resource.collection_path(namespace)
        answer = send(server.api_client, "POST", path, manifest, query={"dryRun": "All"})
        what = f"{manifest['kind']} {manifest['metadata']['name']}"
        assert answer.status == 201, f"{what}: {answer}"
        assert answer.body["metadata"]["name"] == manifest["metadata"]["name"]
        # Nothing was stored.
        stored = send(server.api_client, "GET", f"{path}/{manifest['metadata']['name']}")
        assert stored.status == 404, f"{what} was stored by a dry run: {stored}"
