"""Where each kind podwright handles lives in the REST API.

The engine addresses objects by apiVersion and kind; the REST API by group, version and plural
resource name. The kinds are those the renderer produces and the engine watches, and the
PriorityClasses ``podwright priority-classes --apply`` creates, the webhook configurations
the webhooks install and whose CA bundle the certificate keeper updates, the podwright
CustomResourceDefinitions they check for, the Lease operator replicas elect a leader with, the
operator's Deployment, RBAC objects and FUSE proxy DaemonSet ``podwright install`` applies, and
the SelfSubjectAccessReviews the console asks what its user may do with, so a static table
replaces API discovery (one request fewer per start, and nothing to go stale).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RestResource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True

    def collection_path(self, namespace: str | None) -> str:
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def object_path(self, namespace: str, name: str) -> str:
        return f"{self.collection_path(namespace)}/{name}"


_RESOURCES = [
    RestResource("v1", "Namespace", "namespaces", namespaced=False),
    RestResource("v1", "Pod", "pods"),
    RestResource("v1", "ConfigMap", "configmaps"),
    RestResource("v1", "Secret", "secrets"),
    RestResource("v1", "ServiceAccount", "serviceaccounts"),
    RestResource("v1", "Service", "services"),
    RestResource("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    RestResource("v1", "ResourceQuota", "resourcequotas"),
    RestResource("events.k8s.io/v1", "Event", "events"),
    RestResource("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False),
    RestResource("batch/v1", "Job", "jobs"),
    RestResource("serving.knative.dev/v1", "Service", "services"),
    *(
        RestResource("kubeflow.org/v1", kind, kind.lower() + "s")
        for kind in ("PyTorchJob", "MPIJob", "TFJob", "XGBoostJob", "JAXJob")
    ),
    RestResource("podwright.dev/v1alpha1", "Workload", "workloads"),
    RestResource("podwright.dev/v1alpha1", "WorkloadPolicy", "workloadpolicies"),
    RestResource(
        "podwright.dev/v1alpha1",
        "ClusterWorkloadPolicy",
        "clusterworkloadpolicies",
        namespaced=False,
    ),
    RestResource("podwright.dev/v1alpha1", "Asset", "assets"),
    RestResource("podwright.dev/v1alpha1", "ClusterAsset", "clusterassets", namespaced=False),
    RestResource("podwright.dev/v1alpha1", "ClusterProfile", "clusterprofiles", namespaced=False),
    *(
        RestResource("admissionregistration.k8s.io/v1", kind, kind.lower() + "s", namespaced=False)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ),
    RestResource("coordination.k8s.io/v1", "Lease", "leases"),
    RestResource("apps/v1", "Deployment", "deployments"),
    RestResource("apps/v1", "DaemonSet", "daemonsets"),
    RestResource("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", namespaced=False),
    RestResource(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        namespaced=False,
    ),
    RestResource("rbac.authorization.k8s.io/v1", "Role", "roles"),
    RestResource("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"),
    RestResource(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        namespaced=False,
    ),
    RestResource(
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        namespaced=False,
    ),
]
RESOURCES = {(resource.api_version, resource.kind): resource for resource in _RESOURCES}


class UnknownKindError(LookupError):
    """The adapter does not know where a kind lives in the REST API."""


def rest_resource(api_version: str, kind: str) -> RestResource:
    try:
        return RESOURCES[(api_version, kind)]
    except KeyError:
        known = ", ".join(f"{v}/{k}" for v, k in sorted(RESOURCES))
        raise UnknownKindError(
            f"apiVersion/kind: {api_version}/{kind} is not handled; known: {known}"
        ) from None
