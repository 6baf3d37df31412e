"""A small Kubernetes API server emulator for podwright's adapter tests.

It serves the REST API over real HTTP, for the kinds podwright creates and watches (custom kinds
once their CustomResourceDefinition is created: see ``custom_resources``), with the
semantics the engine relies on (each pinned by a contract test in ``tests/kube`` that also runs
against a real API server): resourceVersion and uid, generateName, 409 AlreadyExists and Conflict,
404, resourceVersion preconditions on update, patch and delete, label and field selectors on list
and watch, watches that resume from a resourceVersion and answer 410 Expired once it is compacted,
finalizers and deletionTimestamp, graceful pod deletion (a pod bound to a node stays until the
kubelet's delete with a grace period of 0), the foreground deletion's finalizer, the binding
subresource, the status subresource, a 404 naming the namespace for an object in a namespace that
does not exist, ResourceQuota and Priority admission for pods, and admission webhooks
(``admission.py``: Validating/MutatingWebhookConfigurations called over HTTPS as a real API
server calls them). The :class:`Emulator` runs a control plane's controllers (``controllers.py``): the garbage collector (background, foreground and orphan propagation), the
Job controller, and the namespace controllers (``kube-root-ca.crt``, the ``default``
ServiceAccount, namespace deletion); a bare :class:`ApiStore` has none. Per-kind registry rules
(Job defaulting, each kind's default propagation, the namespace lifecycle) are in
``strategies.py``.

Opt-in (``Emulator(rbac=True)``, ``rbac.py``), it authenticates bearer tokens (``add_user``,
a ServiceAccount's TokenRequest), honours impersonation headers, authorizes every request by the
RBAC objects it stores as a real server's RBAC authorizer does (403 with the real messages), and
answers SelfSubjectAccessReviews and SubjectAccessReviews; without it every request is allowed.

For benchmarks, a cost model (``cost_model.py``, off unless given) makes it charge what a real
server and control plane charge: a latency per write, a bounded number of writes at once, and
the controllers' client rate limits.

Tests steer it from the inside: inject faults (a status, a Retry-After, for the next N matching
requests), drop every open watch, compact the watch history, count requests by verb and the
connections accepted, and stop it (closing every open connection, as a server that goes away).
"""

from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.server import Emulator, Fault
from tests.k8s_emulator.store import ApiStore

__all__ = ["ApiError", "ApiStore", "Emulator", "Fault"]
