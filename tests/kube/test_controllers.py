"""What a control plane's controllers do, asserted against the emulator (``k8s_emulator/
controllers.py``) and, marked ``cluster``, a real one (kube-controller-manager): the Job
controller, the garbage collector, and what every namespace gets and how it goes. Each test names
the source it encodes. Pods here are never run: they name no scheduler that exists, and the test
writes their phase through ``pods/status`` as a kubelet would."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest

from podwright.engine.kubernetes_port import (
    ForbiddenError,
    NotFoundError,
    ObjectRef,
    PatchType,
)
from tests.kube.support import (
    UNSCHEDULABLE,
    ApiServer,
    config_map,
    eventually,
    resource_quota,
)

JOB_TRACKING = "batch.kubernetes.io/job-tracking"


def _job(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "schedulerName": UNSCHEDULABLE,
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.invalid/none:1"}],
                },
            },
            **spec,
        },
    }


def _pods_of(api: ApiServer, job: str) -> list[dict[str, Any]]:
    pods, _ = api.client.list_objects(
        "v1", "Pod", namespace=api.namespace, label_selector=f"batch.kubernetes.io/job-name={job}"
    )
    return pods


def _one_pod_of(api: ApiServer, job: str) -> dict[str, Any]:
    pods = eventually(lambda: _pods_of(api, job))
    assert len(pods) == 1, pods
    return pods[0]


def _finish(api: ApiServer, pod: dict[str, Any], phase: str) -> None:
    """Write a pod's end, as its kubelet would."""
    code = 0 if phase == "Succeeded" else 1
    api.client.patch_status(
        api.ref("Pod", pod["metadata"]["name"]),
        {
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {
                        "name": "main",
                        "ready": False,
                        "restartCount": 0,
                        "image": "registry.invalid/none:1",
                        "imageID": "",
                        "state": {"terminated": {"exitCode": code, "reason": "Completed"}},
                    }
                ],
            }
        },
        PatchType.MERGE,
    )


def _job_status(api: ApiServer, name: str) -> dict[str, Any]:
    status: dict[str, Any] = api.client.get(api.ref("Job", name, "batch/v1")).get("status") or {}
    return status


def _conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        c["type"]: c for c in job.get("status", {}).get("conditions") or [] if c["status"] == "True"
    }


def _generated_labels(name: str, uid: str) -> dict[str, str]:
    """The labels ``generateSelector`` gives a Job's pod template: its name and its uid, each
    under the legacy key and the ``batch.kubernetes.io/`` one."""
    return {
        "job-name": name,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "batch.kubernetes.io/controller-uid": uid,
    }


def test_a_job_is_defaulted_and_gets_a_generated_selector(api: ApiServer) -> None:
    """``SetDefaults_Job`` (pkg/apis/batch/v1/defaults.go) and ``generateSelector`` (called by
    ``jobStrategy.PrepareForCreate``, pkg/registry/batch/job/strategy.go): the template gets the
    legacy and the ``batch.kubernetes.io/`` labels naming the Job and its uid, the selector
    matches ``batch.kubernetes.io/controller-uid`` alone. A Job without labels takes its
    template's as they end up, generated ones included (``SetDefaults_Job`` sets
    ``obj.Labels = obj.Spec.Template.Labels``: the same Go map, which ``generateSelector`` fills;
    and a Job read back from storage is defaulted again), even from a template without labels;
    a Job with labels of its own keeps them."""
    created = api.client.create(_job("defaulted", api.namespace))
    uid = created["metadata"]["uid"]
    spec = created["spec"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (1, 1, 6)
    assert (spec["completionMode"], spec["suspend"], spec["manualSelector"]) == (
        "NonIndexed",
        False,
        False,
    )
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    labels = {"app": "defaulted", **_generated_labels("defaulted", uid)}
    assert spec["template"]["metadata"]["labels"] == labels
    assert created["metadata"]["labels"] == labels
    assert api.client.get(api.ref("Job", "defaulted", "batch/v1"))["metadata"]["labels"] == labels

    unlabelled = _job("unlabelled", api.namespace)
    del unlabelled["spec"]["template"]["metadata"]
    created = api.client.create(unlabelled)
    generated = _generated_labels("unlabelled", created["metadata"]["uid"])
    assert created["spec"]["template"]["metadata"]["labels"] == generated
    assert created["metadata"]["labels"] == generated

    own = _job("own", api.namespace)
    own["metadata"]["labels"] = {"team": "vision"}
    created = api.client.create(own)
    assert created["metadata"]["labels"] == {"team": "vision"}
    assert created["spec"]["template"]["metadata"]["labels"] == {
        "app": "own",
        **_generated_labels("own", created["metadata"]["uid"]),
    }


def test_a_job_makes_its_pod_and_completes_once_it_succeeded(api: ApiServer) -> None:
    """The Job controller (pkg/controller/job/job_controller.go): ``manageJob`` creates a pod
    from the template with ``generateName`` ``<job>-``, a controller ownerReference that blocks
    its owner's deletion and the ``batch.kubernetes.io/job-tracking`` finalizer;
    ``trackJobStatusAndRemoveFinalizers`` counts a Succeeded pod and removes the finalizer; the
    Job gets ``SuccessCriteriaMet`` and then ``Complete`` (v1.31+, ``delayTerminalCondition``),
    ``completionTime``, ``succeeded: 1``."""
    job = api.client.create(_job("succeeds", api.namespace))
    pod = _one_pod_of(api, "succeeds")
    metadata = pod["metadata"]
    assert metadata["name"].startswith("succeeds-")
    assert metadata["labels"]["app"] == "succeeds"
    assert metadata["labels"]["batch.kubernetes.io/controller-uid"] == job["metadata"]["uid"]
    assert JOB_TRACKING in metadata["finalizers"]
    [owner] = metadata["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["uid"]) == (
        "batch/v1",
        "Job",
        "succeeds",
        job["metadata"]["uid"],
    )
    assert owner["controller"] is True
    assert owner["blockOwnerDeletion"] is True
    running = eventually(lambda: _job_status(api, "succeeds").get("active") == 1)
    assert running
    assert _job_status(api, "succeeds")["startTime"]

    _finish(api, pod, "Succeeded")

    def complete() -> dict[str, Any]:
        current = api.client.get(api.ref("Job", "succeeds", "batch/v1"))
        assert "Complete" in _conditions(current), current.get("status")
        return current

    done = eventually(complete)
    conditions = _conditions(done)
    assert "SuccessCriteriaMet" in conditions
    assert done["status"]["succeeded"] == 1
    assert done["status"].get("active", 0) == 0
    assert done["status"]["completionTime"]
    assert not (done["status"].get("uncountedTerminatedPods") or {}).get("succeeded")
    finished = api.client.get(api.ref("Pod", metadata["name"]))
    assert JOB_TRACKING not in (finished["metadata"].get("finalizers") or [])


def test_a_job_fails_with_backoff_limit_exceeded(api: ApiServer) -> None:
    """``syncJob``: more failed pods than ``backoffLimit`` (here 0) is ``FailureTarget`` then
    ``Failed``, both with reason ``BackoffLimitExceeded``; the failed pod is counted and its
    finalizer removed, and no replacement is made."""
    api.client.create(_job("fails", api.namespace, backoffLimit=0))
    pod = _one_pod_of(api, "fails")
    _finish(api, pod, "Failed")

    def failed() -> dict[str, Any]:
        current = api.client.get(api.ref("Job", "fails", "batch/v1"))
        assert "Failed" in _conditions(current), current.get("status")
        return current

    conditions = _conditions(eventually(failed))
    assert conditions["Failed"]["reason"] == "BackoffLimitExceeded"
    assert conditions["FailureTarget"]["reason"] == "BackoffLimitExceeded"
    status = api.client.get(api.ref("Job", "fails", "batch/v1"))["status"]
    assert status["failed"] == 1
    assert "Complete" not in _conditions(status)
    assert [p["metadata"]["name"] for p in _pods_of(api, "fails")] == [pod["metadata"]["name"]]
    ended = api.client.get(api.ref("Pod", pod["metadata"]["name"]))
    assert JOB_TRACKING not in (ended["metadata"].get("finalizers") or [])


def test_a_failed_pod_is_replaced_within_the_backoff_limit(api: ApiServer) -> None:
    """``manageJob``: a failed pod is replaced (after the controller's back-off) while the
    failures do not exceed ``backoffLimit``; the Job counts the failure."""
    api.client.create(_job("retries", api.namespace, backoffLimit=1))
    first = _one_pod_of(api, "retries")
    _finish(api, first, "Failed")
    replacement = eventually(
        lambda: [
            p
            for p in _pods_of(api, "retries")
            if p["metadata"]["name"] != first["metadata"]["name"]
        ],
        timeout=60,
    )
    assert len(replacement) == 1
    eventually(lambda: _job_status(api, "retries").get("failed") == 1)


def test_a_pod_create_a_quota_refuses_is_a_failed_create_warning_on_the_job(
    api: ApiServer,
) -> None:
    """``RealPodControl.createPods`` (pkg/controller/controller_utils.go) records a refused
    create on the Job as a Warning Event, reason ``FailedCreate`` (``FailedCreatePodReason``),
    note ``Error creating: <the server's error>``; ``manageJob`` (pkg/controller/job/
    job_controller.go) gives the Job no condition for it, and ``syncJob`` writes its
    ``startTime`` with no pod active before it returns the error (the Job is tried again later,
    rate-limited). Here the quota admission plugin refuses the pod: its container states no cpu
    limit, which the quota tracks."""
    resource_quota(api, "strict", {"limits.cpu": "1"})
    job = api.client.create(_job("unstated", api.namespace))

    def refusals() -> list[dict[str, Any]]:
        events, _ = api.client.list_objects(
            "events.k8s.io/v1",
            "Event",
            namespace=api.namespace,
            field_selector="regarding.kind=Job,regarding.name=unstated",
        )
        return [event for event in events if event.get("reason") == "FailedCreate"]

    event = eventually(refusals)[0]
    assert event["type"] == "Warning"
    assert event["regarding"]["uid"] == job["metadata"]["uid"]
    note = event["note"]
    assert note.startswith('Error creating: pods "unstated-'), note
    assert note.endswith(
        " is forbidden: failed quota: strict: must specify limits.cpu for: main"
    ), note

    def started() -> dict[str, Any]:
        status = _job_status(api, "unstated")
        assert status.get("startTime"), status
        return status

    status = eventually(started)
    assert not status.get("active")
    assert not _conditions({"status": status})
    assert not _pods_of(api, "unstated")


def test_deleting_a_job_without_a_policy_orphans_its_pods_with_a_warning(api: ApiServer) -> None:
    """batch/v1 Jobs default to orphaning (``jobStrategy.DefaultGarbageCollectionPolicy``,
    pkg/registry/batch/job/strategy.go), and ``REST.Delete`` (pkg/registry/batch/job/storage/
    storage.go) warns when no propagationPolicy was given; the garbage collector removes the
    Job's reference from its pods, which stay."""
    api.client.create(_job("orphaning", api.namespace))
    pod = _one_pod_of(api, "orphaning")
    warnings = api.delete_without_options(
        f"/apis/batch/v1/namespaces/{api.namespace}/jobs/orphaning"
    )
    assert any("child pods are preserved by default when jobs are deleted" in w for w in warnings)
    eventually(lambda: api.gone(api.ref("Job", "orphaning", "batch/v1")))
    ref = api.ref("Pod", pod["metadata"]["name"])

    def orphaned() -> dict[str, Any]:
        current = api.client.get(ref)
        assert not current["metadata"].get("ownerReferences"), current["metadata"]
        return current

    orphan = eventually(orphaned)
    assert not orphan["metadata"].get("deletionTimestamp")
    # The Job controller releases the pods of a Job that is gone (syncOrphanPod).
    eventually(
        lambda: JOB_TRACKING not in (api.client.get(ref)["metadata"].get("finalizers") or [])
    )
    api.client.delete(ref, grace_period_seconds=0)


def _owned_config_map(api: ApiServer, name: str, owner: dict[str, Any], **ref: Any) -> None:
    body = config_map(name, api.namespace)
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            **ref,
        }
    ]
    api.client.create(body)


def test_background_deletion_removes_a_dependent_once_its_owner_is_gone(api: ApiServer) -> None:
    """The garbage collector (pkg/controller/garbagecollector, ``attemptToDeleteItem``; docs
    "Garbage Collection"): a dependent whose owners are all gone is deleted."""
    owner = api.client.create(config_map("owner", api.namespace))
    _owned_config_map(api, "dependent", owner)
    api.client.delete(api.ref("ConfigMap", "owner"), propagation="Background")
    eventually(lambda: api.gone(api.ref("ConfigMap", "dependent")), timeout=60)


def test_a_dependent_with_another_owner_left_survives(api: ApiServer) -> None:
    """``attemptToDeleteItem``: a dependent with a solid owner left is kept (its reference to
    the owner that is gone is removed)."""
    first = api.client.create(config_map("first", api.namespace))
    second = api.client.create(config_map("second", api.namespace))
    body = config_map("shared", api.namespace)
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"],
        }
        for o in (first, second)
    ]
    api.client.create(body)
    api.client.delete(api.ref("ConfigMap", "first"), propagation="Background")
    kept = eventually(
        lambda: (
            [
                r["name"]
                for r in api.client.get(api.ref("ConfigMap", "shared"))["metadata"][
                    "ownerReferences"
                ]
            ]
            == ["second"]
        ),
        timeout=60,
    )
    assert kept


def test_orphan_deletion_leaves_the_dependent_without_its_owner_reference(api: ApiServer) -> None:
    """``orphanDependents`` (garbagecollector.go): the ``orphan`` finalizer has the owner's
    references removed from its dependents, then goes, and the owner with it."""
    owner = api.client.create(config_map("owner", api.namespace))
    _owned_config_map(api, "dependent", owner)
    api.client.delete(api.ref("ConfigMap", "owner"), propagation="Orphan")
    eventually(lambda: api.gone(api.ref("ConfigMap", "owner")), timeout=60)
    dependent = api.client.get(api.ref("ConfigMap", "dependent"))
    assert not dependent["metadata"].get("ownerReferences")
    assert not dependent["metadata"].get("deletionTimestamp")


def test_a_new_namespace_gets_the_root_ca_and_the_default_service_account(
    api: ApiServer,
) -> None:
    """The root-CA publisher (pkg/controller/certificates/rootcacertpublisher/publisher.go) and
    the service-account controller (pkg/controller/serviceaccount/serviceaccounts_controller.go)
    fill every namespace; the namespace strategy gives it the ``kubernetes`` finalizer and the
    ``kubernetes.io/metadata.name`` label."""
    name = f"podwright-contract-{uuid.uuid4().hex[:8]}"
    ref = ObjectRef("v1", "Namespace", "", name)
    try:
        created = api.client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        assert created["spec"]["finalizers"] == ["kubernetes"]
        assert created["metadata"]["labels"]["kubernetes.io/metadata.name"] == name
        assert created["status"]["phase"] == "Active"
        root_ca = eventually(
            lambda: api.client.get(ObjectRef("v1", "ConfigMap", name, "kube-root-ca.crt"))
        )
        assert root_ca["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
        eventually(lambda: api.client.get(ObjectRef("v1", "ServiceAccount", name, "default")))
    finally:
        with contextlib.suppress(NotFoundError):
            api.client.delete(ref)


def test_a_deleted_namespace_refuses_new_content_and_goes_once_emptied(api: ApiServer) -> None:
    """Namespace deletion (pkg/registry/core/namespace/storage/storage.go ``REST.Delete``): the
    namespace is Terminating; the NamespaceLifecycle admission plugin (plugin/pkg/admission/
    namespace/lifecycle/admission.go) refuses creates in it with 403; the namespace controller
    (pkg/controller/namespace/deletion/namespaced_resources_deleter.go) deletes its contents, an
    object held by a finalizer holds the namespace, which goes once it is gone."""
    name = f"podwright-contract-{uuid.uuid4().hex[:8]}"
    ref = ObjectRef("v1", "Namespace", "", name)
    held = ObjectRef("v1", "ConfigMap", name, "held")
    api.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        body = config_map("held", name)
        body["metadata"]["finalizers"] = ["podwright.dev/test-hold"]
        api.client.create(body)
        api.client.delete(ref)
        terminating = api.client.get(ref)
        assert terminating["status"]["phase"] == "Terminating"
        assert terminating["metadata"]["deletionTimestamp"]
        with pytest.raises(ForbiddenError) as caught:
            api.client.create(config_map("late", name))
        assert caught.value.status == 403
        assert (
            f"unable to create new content in namespace {name} because it is being terminated"
            in caught.value.message
        )
        eventually(lambda: api.client.get(held)["metadata"].get("deletionTimestamp"), timeout=60)
        assert not api.gone(ref)
        api.client.patch(held, {"metadata": {"finalizers": []}}, PatchType.MERGE)
        eventually(lambda: api.gone(ref), timeout=120)
    finally:
        with contextlib.suppress(NotFoundError):
            api.client.patch(held, {"metadata": {"finalizers": []}}, PatchType.MERGE)
        with contextlib.suppress(NotFoundError):
            api.client.delete(ref)
