"""podwright's webhook configurations in the cluster: a new CA bundle put into them.

After the certificate keeper rotates its CA, the API server must trust the new CA before any
certificate of it is served: :func:`publish_ca_bundle` reads podwright's two webhook
configurations and applies the patches :func:`podwright.core.webhook_configurations.
ca_bundle_patches` decides. Failures are the Kubernetes adapter's (the engine's
``KubernetesError`` tree): a configuration changed between the read and the patch fails its
patch's ``test`` (``InvalidError``), and the keeper tries again at its next look.
"""

from __future__ import annotations

from podwright.adapters.kubernetes.client import KubernetesClient
from podwright.core.webhook_configurations import (
    ADMISSION_API_VERSION,
    CONFIGURATION_NAME,
    MUTATING_KIND,
    VALIDATING_KIND,
    ConfigurationPatch,
    ca_bundle_patches,
)
from podwright.engine.kubernetes_port import NotFoundError, ObjectRef, PatchType


def publish_ca_bundle(
    client: KubernetesClient, ca_bundle: bytes, *, name: str = CONFIGURATION_NAME
) -> list[ConfigurationPatch]:
    """Put ``ca_bundle`` (PEM) into every podwright webhook of the configurations called
    ``name`` (one that does not exist is skipped); the patches applied."""
    configurations = []
    for kind in (MUTATING_KIND, VALIDATING_KIND):
        try:
            configurations.append(client.get(ObjectRef(ADMISSION_API_VERSION, kind, "", name)))
        except NotFoundError:
            continue
    patches = ca_bundle_patches(configurations, ca_bundle)
    for patch in patches:
        ref = ObjectRef(ADMISSION_API_VERSION, patch.kind, "", patch.name)
        client.patch(ref, [dict(operation) for operation in patch.operations], PatchType.JSON)
    return patches
