"""What the API server's registry does per kind on create and delete, beyond the generic store:
the emulator's store applies these, so that the controllers (``controllers.py``) and the tests
see the objects a real server would have stored.

* Jobs (batch/v1) are defaulted (``SetDefaults_Job`` in ``pkg/apis/batch/v1/defaults.go``) and
  get a generated selector and pod-template labels (``generateSelector``, called from
  ``jobStrategy.PrepareForCreate`` in ``pkg/registry/batch/job/strategy.go``) once their uid is
  known: the template gets ``job-name``, ``batch.kubernetes.io/job-name``, ``controller-uid`` and
  ``batch.kubernetes.io/controller-uid``, the selector ``batch.kubernetes.io/controller-uid``
  alone. A Job without labels of its own takes its template's as they end up, generated ones
  included: ``SetDefaults_Job`` sets ``obj.Labels = obj.Spec.Template.Labels``, the same Go map,
  which ``generateSelector`` then fills (and a Job read back from storage is defaulted again);
* a delete without ``propagationPolicy`` takes the kind's default garbage-collection policy
  (``DefaultGarbageCollectionPolicy`` of the kind's strategy): batch/v1 Jobs orphan their pods
  ("for back compatibility", ``jobStrategy``) and the Job's ``REST.Delete``
  (``pkg/registry/batch/job/storage/storage.go``) answers with a warning; Events support no
  garbage collection (``eventStrategy``: ``rest.Unsupported``, propagation is ignored); every other
  kind the emulator serves deletes its dependents in the background (the generic store's default);
* Namespaces are created Active with the ``kubernetes`` finalizer in ``spec.finalizers``
  (``namespaceStrategy.PrepareForCreate`` in ``pkg/registry/core/namespace/strategy.go``) and the
  ``kubernetes.io/metadata.name`` label (``SetDefaults_Namespace`` in
  ``pkg/apis/core/v1/defaults.go``); a delete marks them Terminating, and they go once the
  namespace controller has emptied them and removed that finalizer (``REST.Delete`` and
  ``ShouldDeleteNamespaceDuringUpdate`` in ``pkg/registry/core/namespace/storage/storage.go``);
  creating in a Terminating namespace is refused by the NamespaceLifecycle admission plugin
  (``plugin/pkg/admission/namespace/lifecycle/admission.go``);
* a Pod's containers, init containers included, that state a limit and no request for a resource
  request their limit (``SetDefaults_Pod`` in ``pkg/apis/core/v1/defaults.go``: "If limits are
  specified, but requests are not, default requests to limits"), before admission, so a
  ResourceQuota on ``requests.*`` sees those requests;
* a Pod's priority is resolved from its ``priorityClassName`` by the Priority admission plugin
  (``plugin/pkg/admission/priority/admission.go``, ``admitPod``): a class that does not exist is
  refused (403), a ``spec.priority`` that differs from the class's value is refused, and the
  class's value and preemptionPolicy are written into the pod; no class name takes the
  ``globalDefault`` class, else priority 0.
"""

from __future__ import annotations

from typing import Any

from tests.k8s_emulator.errors import ApiError

FOREGROUND_DELETION = "foregroundDeletion"
ORPHAN = "orphan"
JOB_NAME_LABELS = ("job-name", "batch.kubernetes.io/job-name")
CONTROLLER_UID_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")
SELECTOR_LABEL = "batch.kubernetes.io/controller-uid"
DEFAULT_BACKOFF_LIMIT = 6
NAMESPACE_FINALIZER = "kubernetes"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
JOB_DELETE_WARNING = (
    "child pods are preserved by default when jobs are deleted; set "
    "propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress "
    "this warning"
)


def default_job(job: dict[str, Any]) -> None:
    """Default a batch/v1 Job being created (its uid already assigned), in place."""
    spec = job.setdefault("spec", {})
    metadata = job["metadata"]
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", DEFAULT_BACKOFF_LIMIT)
    template = spec.setdefault("template", {})
    template_metadata = template.setdefault("metadata", {})
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault(
        "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    )
    spec.setdefault("manualSelector", False)
    if not spec["manualSelector"]:
        labels = template_metadata.setdefault("labels", {})
        for label in JOB_NAME_LABELS:
            labels.setdefault(label, metadata["name"])
        for label in CONTROLLER_UID_LABELS:
            labels.setdefault(label, metadata["uid"])
        selector = spec.setdefault("selector", {})
        selector.setdefault("matchLabels", {}).setdefault(SELECTOR_LABEL, metadata["uid"])
    if template_metadata.get("labels") and not metadata.get("labels"):
        metadata["labels"] = dict(template_metadata["labels"])


def default_pod(pod: dict[str, Any]) -> None:
    """Default a v1 Pod being created, in place: each container's missing requests from its
    limits (``SetDefaults_Pod``)."""
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        limits = resources.get("limits")
        if limits:
            requests = resources.setdefault("requests", {})
            for resource, amount in limits.items():
                requests.setdefault(resource, amount)


def deletion_propagation(
    api_version: str, kind: str, requested: str | None, finalizers: list[str]
) -> str | None:
    """The propagation a delete applies to the object's garbage-collector finalizers
    (``deletionFinalizersForGarbageCollection``, ``shouldOrphanDependents`` and
    ``shouldDeleteDependents`` in the apiserver's ``registry/generic/registry/store.go``): the
    requested one; without one, a GC finalizer the object already has stands, else the kind's
    default; None changes nothing (an Event's: its kind supports no garbage collection)."""
    if kind == "Event":
        return None
    if requested is not None:
        return requested
    if FOREGROUND_DELETION in finalizers or ORPHAN in finalizers:
        return None
    if (api_version, kind) == ("batch/v1", "Job"):
        return "Orphan"
    return None


def delete_warnings(api_version: str, kind: str, requested: str | None) -> list[str]:
    """The ``Warning`` headers a delete is answered with."""
    if (api_version, kind) == ("batch/v1", "Job") and requested is None:
        return [JOB_DELETE_WARNING]
    return []


def prepare_namespace(namespace: dict[str, Any]) -> None:
    """A Namespace being created: Active, finalized by the namespace controller, labelled with
    its name."""
    metadata = namespace["metadata"]
    metadata.setdefault("labels", {})[NAMESPACE_NAME_LABEL] = metadata["name"]
    finalizers = namespace.setdefault("spec", {}).setdefault("finalizers", [])
    if NAMESPACE_FINALIZER not in finalizers:
        finalizers.append(NAMESPACE_FINALIZER)


def refuse_in_terminating_namespace(kind_plural: str, name: str, namespace: str) -> ApiError:
    """NamespaceLifecycle's refusal of a create in a namespace being deleted (403, with the
    ``NamespaceTerminating`` cause)."""
    subject = f'{kind_plural} "{name}"' if name else kind_plural
    return ApiError(
        403,
        "Forbidden",
        f"{subject} is forbidden: unable to create new content in namespace {namespace} "
        "because it is being terminated",
        details={
            "name": name,
            "kind": kind_plural,
            "causes": [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ],
        },
    )


SYSTEM_PRIORITY_CLASSES = {
    "system-cluster-critical": 2000000000,
    "system-node-critical": 2000001000,
}
"""The classes every cluster has (``SystemPriorityClasses`` in pkg/apis/scheduling/v1/helpers.go)."""
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"


def admit_pod_priority(pod: dict[str, Any], classes: list[dict[str, Any]]) -> None:
    """The Priority admission plugin on a pod's create: ``spec.priority`` (and
    ``spec.preemptionPolicy``) from its PriorityClass among ``classes``, or a 403 refusal."""
    spec = pod.setdefault("spec", {})
    name = str(spec.get("priorityClassName") or "")
    by_name = {str(c["metadata"]["name"]): c for c in classes}
    policy = DEFAULT_PREEMPTION_POLICY
    if not name:
        defaults = sorted(
            (c for c in classes if c.get("globalDefault")), key=lambda c: int(c.get("value", 0))
        )
        priority = int(defaults[0].get("value", 0)) if defaults else 0
        if defaults:
            spec["priorityClassName"] = defaults[0]["metadata"]["name"]
            policy = defaults[0].get("preemptionPolicy") or policy
    elif name in SYSTEM_PRIORITY_CLASSES:
        priority = SYSTEM_PRIORITY_CLASSES[name]
    elif name in by_name:
        priority = int(by_name[name].get("value", 0))
        policy = by_name[name].get("preemptionPolicy") or policy
    else:
        raise forbidden_pod(pod, f"no PriorityClass with name {name} was found")
    given = spec.get("priority")
    if given is not None and given != priority:
        raise forbidden_pod(
            pod,
            f"the integer value of priority ({given}) must not be provided in pod spec; priority "
            f"admission controller computed {priority} from the given PriorityClass name",
        )
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise forbidden_pod(
            pod,
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod "
            f"spec; priority admission controller computed {policy} from the given "
            "PriorityClass name",
        )
    spec["priority"] = priority
    spec["preemptionPolicy"] = policy


def forbidden_pod(pod: dict[str, Any], reason: str) -> ApiError:
    """``admission.NewForbidden`` for a pod: ``pods "<name>" is forbidden: <reason>``."""
    name = str((pod.get("metadata") or {}).get("name") or "")
    return ApiError(
        403,
        "Forbidden",
        f'pods "{name}" is forbidden: {reason}',
        details={"name": name, "kind": "pods"},
    )
