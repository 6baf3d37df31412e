"""A small Kubernetes API server emulator for podwright's adapter tests.

It serves the REST API over real HTTP, for the kinds podwright creates and watches, with the
semantics the engine relies on (each pinned by a contract test in ``tests/contract`` that also runs
against a real API server): resourceVersion and uid, generateName, 409 AlreadyExists and Conflict,
404, resourceVersion preconditions on update, patch and delete, label and field selectors on list
and watch, watches that resume from a resourceVersion and answer 410 Expired once it is compacted,
finalizers and deletionTimestamp, graceful pod deletion (a pod bound to a node stays until the
kubelet's delete with a grace period of 0), the foreground deletion's finalizer, the binding
subresource, the status subresource, a 404 naming the namespace for an object in a namespace that
does not exist, ResourceQuota admission for pods, and admission webhooks (``admission.py``:
Validating/MutatingWebhookConfigurations called over HTTPS as a real API server calls them). It has no garbage collector and no
controllers: ownerReferences and the foregroundDeletion finalizer stay until a test acts.

Tests steer it from the inside: inject faults (a status, a Retry-After, for the next N matching
requests), drop every open watch, compact the watch history, count requests by verb and the
connections accepted, and stop it (closing every open connection, as a server that goes away).
"""

from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.server import Emulator, Fault
from tests.k8s_emulator.store import ApiStore

__all__ = ["ApiError", "ApiStore", "Emulator", "Fault"]
