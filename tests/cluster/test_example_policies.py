"""The example policies are objects the cluster serves: ``kubectl apply --dry-run=server`` takes
every file of ``examples/policies/`` once ``deploy/crds/`` is installed (the API server's
validation of their CRDs' schemas and of the Namespace, and podwright's policy webhook;
nothing is stored), and the offline commands read the very same files.

The cluster-scoped files go as written. ``project-vision.yaml`` holds the Namespace ``vision``
and its WorkloadPolicy: a dry run does not create the namespace, and the NamespaceLifecycle
admission plugin refuses an object in a namespace that does not exist
(``staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go``,
``Lifecycle.Admit``), while a shared cluster may not be given a fixed ``vision``. So that file
goes with its namespace renamed to the test's own, and nothing else changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.cluster.support import EXAMPLES, Server, SessionInstalls
from tests.cluster.webhooks import WebhookProcess

POLICIES = EXAMPLES / "policies"
PROJECT_NAMESPACE = "vision"


def _in_namespace(path: Path, namespace: str) -> list[dict[str, Any]]:
    """The documents of ``path``, the namespace ``vision`` (the object and what lies in it)
    renamed ``namespace``."""
    documents: list[dict[str, Any]] = list(yaml.safe_load_all(path.read_text()))
    for document in documents:
        metadata = document["metadata"]
        if document["kind"] == "Namespace" and metadata["name"] == PROJECT_NAMESPACE:
            metadata["name"] = namespace
        elif metadata.get("namespace") == PROJECT_NAMESPACE:
            metadata["namespace"] = namespace
    return documents


def _dry_run_objects(stdout: str) -> list[str]:
    """The objects of kubectl's lines ``KIND/NAME created|configured|unchanged (server dry
    run)``; a line of another shape fails the test."""
    objects = []
    for line in stdout.splitlines():
        name, outcome = line.split(" ", 1)
        assert outcome in {
            f"{verb} (server dry run)" for verb in ("created", "configured", "unchanged")
        }, line
        objects.append(name)
    return objects


def test_every_example_policy_file_is_taken_by_the_servers_dry_run(
    server: Server, installs: SessionInstalls, webhook: WebhookProcess, namespace: str
) -> None:
    """With podwright's webhooks serving, as on a cluster where podwright is installed: the
    policies go through its policy webhook too (and a test before that stopped the webhook
    leaves configurations that would refuse them)."""
    installs.podwright_crds()
    files = sorted(POLICIES.glob("*.yaml"))
    as_written = [path for path in files if path.name != "project-vision.yaml"]
    applied = server.kubectl(
        "apply", "--dry-run=server", *(f"--filename={path}" for path in as_written)
    )
    assert applied.returncode == 0, applied.stderr
    # Created, or on a shared cluster where another test holds one already, configured.
    assert sorted(_dry_run_objects(applied.stdout)) == [
        "clusterworkloadpolicy.podwright.dev/local-training",
        "clusterworkloadpolicy.podwright.dev/prod-training",
        "clusterworkloadpolicy.podwright.dev/research-training",
    ]
    project = _in_namespace(POLICIES / "project-vision.yaml", namespace)
    applied = server.kubectl(
        "apply", "--dry-run=server", "--filename=-", input=yaml.safe_dump_all(project)
    )
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        f"namespace/{namespace} configured (server dry run)",  # labelled: research's project
        "workloadpolicy.podwright.dev/vision-training created (server dry run)",
    ]
    # Nothing was stored: the namespace kept its labels, and no policy exists.
    stored = server.kubectl("get", "namespace", namespace, "-o", "yaml")
    assert stored.returncode == 0, stored.stderr
    assert "podwright.dev/department" not in stored.stdout
    listed = server.kubectl("get", "workloadpolicies.podwright.dev", "-n", namespace, "-o", "name")
    assert (listed.returncode, listed.stdout) == (0, ""), listed.stderr
