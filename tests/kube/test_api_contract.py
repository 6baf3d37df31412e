"""The API semantics podwright relies on, asserted once and run against both the emulator and,
marked ``cluster``, a real API server. Nothing here asserts what a real server would not do."""

from __future__ import annotations

import contextlib
import threading
import uuid
from typing import Any

import pytest

from podwright.adapters.kubernetes.resources import RESOURCES, RestResource
from podwright.engine.kubernetes_port import (
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    NamespaceNotFoundError,
    NotFoundError,
    ObjectRef,
    PatchType,
    QuotaExceededError,
)
from tests.kube.support import (
    ABSENT_NODE,
    ApiServer,
    config_map,
    eventually,
    pod,
    resource_quota,
)


def test_create_assigns_uid_resource_version_and_creation_time(api: ApiServer) -> None:
    created = api.client.create(config_map("a", api.namespace))
    metadata = created["metadata"]
    assert metadata["uid"]
    assert metadata["resourceVersion"]
    assert metadata["creationTimestamp"].endswith("Z")
    fetched = api.client.get(api.ref("ConfigMap", "a"))
    assert fetched["metadata"]["uid"] == metadata["uid"]
    assert fetched["data"] == {"key": "value"}


def test_second_create_of_a_name_is_409_already_exists(api: ApiServer) -> None:
    api.client.create(config_map("a", api.namespace))
    with pytest.raises(AlreadyExistsError) as caught:
        api.client.create(config_map("a", api.namespace))
    assert caught.value.status == 409
    assert caught.value.reason == "AlreadyExists"


def test_missing_object_is_404_for_get_patch_and_delete(api: ApiServer) -> None:
    ref = api.ref("ConfigMap", "missing")
    with pytest.raises(NotFoundError):
        api.client.get(ref)
    with pytest.raises(NotFoundError):
        api.client.patch(ref, {"data": {"k": "v"}}, PatchType.MERGE)
    with pytest.raises(NotFoundError):
        api.client.delete(ref)


def test_generate_name_appends_a_random_suffix(api: ApiServer) -> None:
    body = config_map("", api.namespace)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "gen-"
    first = api.client.create(body)["metadata"]["name"]
    second = api.client.create(body)["metadata"]["name"]
    assert first.startswith("gen-")
    assert second.startswith("gen-")
    assert len(first) == len("gen-") + 5
    assert first != second


def test_invalid_name_is_422(api: ApiServer) -> None:
    with pytest.raises(InvalidError) as caught:
        api.client.create(config_map("Not_A_Name", api.namespace))
    assert caught.value.status == 422


def test_resource_version_is_a_precondition_of_replace_patch_and_delete(api: ApiServer) -> None:
    ref = api.ref("ConfigMap", "a")
    stale = api.client.create(config_map("a", api.namespace))
    current = api.client.patch(ref, {"data": {"key": "v2"}}, PatchType.MERGE)
    assert current["metadata"]["resourceVersion"] != stale["metadata"]["resourceVersion"]
    with pytest.raises(ConflictError):
        api.client.replace(ref, {**stale, "data": {"key": "v3"}})
    stale_version = stale["metadata"]["resourceVersion"]
    with pytest.raises(ConflictError):
        api.client.patch(
            ref,
            {"metadata": {"resourceVersion": stale_version}, "data": {"k": "x"}},
            PatchType.MERGE,
        )
    with pytest.raises(ConflictError):
        api.client.delete(ref, resource_version=stale_version)
    updated = api.client.patch(
        ref,
        {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "data": {"k": "y"},
        },
        PatchType.MERGE,
    )
    assert updated["data"] == {"key": "v2", "k": "y"}
    api.client.delete(ref, resource_version=updated["metadata"]["resourceVersion"])
    with pytest.raises(NotFoundError):
        api.client.get(ref)


def test_a_uid_is_a_precondition_of_patch_and_delete(api: ApiServer) -> None:
    """An update that gives another uid is invalid (``rest.BeforeUpdate`` keeps the stored one
    only when none is given, then ``ValidateObjectMetaAccessorUpdate`` finds it changed); a
    delete whose ``preconditions.uid`` is another's is a Conflict (storage's
    ``Preconditions.Check``). So a client can act on the object it read and on no other of
    the same name."""
    ref = api.ref("ConfigMap", "a")
    first = api.client.create(config_map("a", api.namespace))
    api.client.delete(ref)
    again = api.client.create(config_map("a", api.namespace))
    old_uid, uid = first["metadata"]["uid"], again["metadata"]["uid"]
    with pytest.raises(InvalidError) as caught:
        api.client.patch(ref, {"metadata": {"uid": old_uid}, "data": {"k": "x"}}, PatchType.MERGE)
    assert caught.value.status == 422
    assert "metadata.uid: Invalid value" in caught.value.message
    assert "field is immutable" in caught.value.message
    with pytest.raises(ConflictError):
        api.client.delete(ref, uid=old_uid)
    patched = api.client.patch(ref, {"metadata": {"uid": uid}, "data": {"k": "y"}}, PatchType.MERGE)
    assert patched["data"] == {"key": "value", "k": "y"}
    api.client.delete(ref, uid=uid)
    with pytest.raises(NotFoundError):
        api.client.get(ref)


def test_json_patch_applies_operations_and_a_failed_test_is_422(api: ApiServer) -> None:
    ref = api.ref("ConfigMap", "a")
    created = api.client.create(config_map("a", api.namespace))
    version = created["metadata"]["resourceVersion"]
    patched = api.client.patch(
        ref,
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "add", "path": "/data/second", "value": "2"},
        ],
        PatchType.JSON,
    )
    assert patched["data"] == {"key": "value", "second": "2"}
    with pytest.raises(InvalidError) as caught:
        api.client.patch(
            ref,
            [{"op": "test", "path": "/metadata/resourceVersion", "value": version}],
            PatchType.JSON,
        )
    assert caught.value.status == 422


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("team=vision", {"a", "b"}),
        ("team==vision", {"a", "b"}),
        ("team!=vision", {"c", "d"}),
        ("team in (vision,nlp)", {"a", "b", "c"}),
        ("team notin (vision)", {"c", "d"}),
        ("tier", {"a", "c"}),
        ("!tier", {"b", "d"}),
        ("team=vision,tier=gold", {"a"}),
    ],
)
def test_label_selectors_select_on_list(api: ApiServer, selector: str, expected: set[str]) -> None:
    """Each selector is narrowed to the test's own objects: a real namespace is never empty (the
    controller manager's root-CA publisher puts ``kube-root-ca.crt`` in every one, and
    distributions add theirs), so a negative selector alone would match those too."""
    own = f"contract-{uuid.uuid4().hex[:8]}"
    labels = {
        "a": {"team": "vision", "tier": "gold"},
        "b": {"team": "vision"},
        "c": {"team": "nlp", "tier": "silver"},
        "d": {},
    }
    for name, its_labels in labels.items():
        api.client.create(config_map(name, api.namespace, run=own, **its_labels))
    items, version = api.client.list_objects(
        "v1", "ConfigMap", namespace=api.namespace, label_selector=f"{selector},run={own}"
    )
    assert {item["metadata"]["name"] for item in items} == expected
    assert version


def test_field_selector_on_name(api: ApiServer) -> None:
    for name in ("a", "b"):
        api.client.create(config_map(name, api.namespace))
    items, _ = api.client.list_objects(
        "v1", "ConfigMap", namespace=api.namespace, field_selector="metadata.name=b"
    )
    assert [item["metadata"]["name"] for item in items] == ["b"]


def test_finalizers_hold_a_deleted_object_until_removed(api: ApiServer) -> None:
    ref = api.ref("ConfigMap", "held")
    body = config_map("held", api.namespace)
    body["metadata"]["finalizers"] = ["podwright.dev/finalizer"]
    api.client.create(body)
    api.client.delete(ref)
    held = api.client.get(ref)
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["podwright.dev/finalizer"]
    with pytest.raises(InvalidError):
        api.client.patch(
            ref,
            {"metadata": {"finalizers": ["podwright.dev/finalizer", "x.io/y"]}},
            PatchType.MERGE,
        )
    api.client.patch(
        ref,
        {"metadata": {"finalizers": [], "resourceVersion": held["metadata"]["resourceVersion"]}},
        PatchType.MERGE,
    )
    eventually(lambda: api.gone(ref))


def test_a_pods_status_write_keeps_labels_but_not_spec_or_owners(api: ApiServer) -> None:
    """A pod's status is written through ``pods/status`` only; that write keeps changes to the
    labels (kubelets write them) and ignores the spec and the ownerReferences
    (``podStatusStrategy.PrepareForUpdate`` in pkg/registry/core/pod/strategy.go). A status
    written through the main resource is ignored (``podStrategy.PrepareForUpdate``)."""
    ref = api.ref("Pod", "p")
    created = api.client.create(pod("p", api.namespace))
    assert created["status"]["phase"] == "Pending"
    api.client.patch(ref, {"status": {"phase": "Running"}}, PatchType.MERGE)
    assert api.client.get(ref)["status"]["phase"] == "Pending"
    owner = api.client.create(config_map("owner", api.namespace))
    api.client.patch_status(
        ref,
        {
            "metadata": {
                "labels": {"written-by": "status"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            },
            "spec": {"activeDeadlineSeconds": 5},
            "status": {"phase": "Running"},
        },
        PatchType.MERGE,
    )
    current = api.client.get(ref)
    assert current["status"]["phase"] == "Running"
    assert current["metadata"]["labels"]["written-by"] == "status"
    assert not current["metadata"].get("ownerReferences")
    assert "activeDeadlineSeconds" not in current["spec"]


def test_watch_from_a_list_version_sees_changes_and_respects_selectors(api: ApiServer) -> None:
    _items, version = api.client.list_objects(
        "v1", "ConfigMap", namespace=api.namespace, label_selector="app=watched"
    )
    seen: list[tuple[str, str]] = []
    done = threading.Event()

    def watch() -> None:
        for event in api.client.watch(
            "v1",
            "ConfigMap",
            resource_version=version,
            namespace=api.namespace,
            label_selector="app=watched",
            timeout_seconds=15,
        ):
            if event["type"] != "BOOKMARK":
                seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == 3:
                done.set()
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    api.client.create(config_map("other", api.namespace, app="ignored"))
    api.client.create(config_map("w", api.namespace, app="watched"))
    api.client.patch(api.ref("ConfigMap", "w"), {"data": {"k": "2"}}, PatchType.MERGE)
    api.client.delete(api.ref("ConfigMap", "w"))
    assert done.wait(20), seen
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]
    thread.join(5)


def test_watch_from_a_compacted_version_is_410(api: ApiServer) -> None:
    with pytest.raises(GoneError) as caught:
        for _event in api.client.watch(
            "v1", "ConfigMap", resource_version="1", namespace=api.namespace, timeout_seconds=5
        ):
            pass
    assert caught.value.status == 410


def test_events_select_by_the_kind_they_regard(api: ApiServer) -> None:
    target = api.client.create(pod("p", api.namespace))
    api.client.create(_event("e1", api.namespace, target, "Scheduled"))
    items, _ = api.client.list_objects(
        "events.k8s.io/v1", "Event", namespace=api.namespace, field_selector="regarding.kind=Pod"
    )
    assert "e1" in {item["metadata"]["name"] for item in items}
    none, _ = api.client.list_objects(
        "events.k8s.io/v1", "Event", namespace=api.namespace, field_selector="regarding.kind=Job"
    )
    assert "e1" not in {item["metadata"]["name"] for item in none}


def _event(name: str, namespace: str, regarding: dict[str, Any], reason: str) -> dict[str, Any]:
    metadata = regarding["metadata"]
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": "2026-11-21T10:00:00.000000Z",
        "reportingController": "podwright.dev/tests",
        "reportingInstance": "tests",
        "action": "Testing",
        "reason": reason,
        "type": "Normal",
        "note": f"{reason} for the test",
        "regarding": {
            "apiVersion": "v1",
            "kind": regarding["kind"],
            "name": metadata["name"],
            "namespace": namespace,
            "uid": metadata["uid"],
        },
    }


def _pod_of(api: ApiServer, name: str, **spec: Any) -> dict[str, Any]:
    body = pod(name, api.namespace)
    body["spec"].update(spec)
    return body


def _container(name: str, **resources: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": "registry.invalid/none:1", "resources": resources}


def test_resource_quota_refuses_a_pod_over_its_hard_limit_with_403(api: ApiServer) -> None:
    resource_quota(api, "pods", {"pods": "1"})
    # Admission refuses every pod until the quota controller has written the quota's status.
    eventually(lambda: api.client.create(pod("first", api.namespace)))
    with pytest.raises(QuotaExceededError) as caught:
        api.client.create(pod("second", api.namespace))
    assert caught.value.status == 403
    assert "exceeded quota: pods" in caught.value.message


def test_resource_quota_refuses_a_pod_whose_containers_leave_out_what_it_tracks(
    api: ApiServer,
) -> None:
    """A quota that tracks cpu or memory needs every container, init containers included, to
    specify it, and says which do not before it compares any amount: ``failed quota: <quota>:
    must specify <resource> for: <containers>; ...``, the resources sorted, each one's containers
    sorted and joined by commas (``podEvaluator.Constraints`` and
    ``enforcePodContainerConstraints`` in ``pkg/quota/v1/evaluator/core/pods.go``, wrapped by
    ``checkQuotas`` in ``staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/
    controller.go``). It is a 403 that is not "exceeded quota"."""
    resource_quota(api, "tiny", {"requests.cpu": "2", "limits.memory": "1Gi"})
    stated = {"requests": {"cpu": "100m"}, "limits": {"memory": "64Mi"}}
    body = _pod_of(
        api,
        "unstated",
        containers=[_container("main", **stated)],
        initContainers=[
            _container("z-clone"),
            _container("a-fuse", requests={"cpu": "100m"}, limits={"cpu": "1"}),
        ],
    )
    with pytest.raises(ForbiddenError) as caught:
        api.client.create(body)
    assert not isinstance(caught.value, QuotaExceededError)
    assert caught.value.status == 403
    assert caught.value.message == (
        'pods "unstated" is forbidden: failed quota: tiny: must specify limits.memory for: '
        "a-fuse,z-clone; requests.cpu for: z-clone"
    )
    body["spec"]["initContainers"] = [_container("z-clone", **stated)]
    api.client.create(body)


def test_a_pods_containers_that_state_limits_alone_request_them_and_fit_a_quota_on_requests(
    api: ApiServer,
) -> None:
    """A pod's container, init containers included, that states a limit and no request for a
    resource requests its limit: the pod is defaulted so before admission (``SetDefaults_Pod``
    in ``pkg/apis/core/v1/defaults.go``, "If limits are specified, but requests are not,
    default requests to limits"), so a quota that tracks ``requests.*`` admits it and counts
    those requests. A request the container states is kept."""
    resource_quota(api, "requests", {"requests.cpu": "2", "requests.memory": "1Gi"})
    limited = _pod_of(
        api,
        "limited",
        containers=[_container("main", limits={"cpu": "500m", "memory": "64Mi"})],
        initContainers=[
            _container("clone", requests={"cpu": "100m"}, limits={"cpu": "1", "memory": "32Mi"})
        ],
    )
    created = eventually(lambda: api.client.create(limited))
    main, clone = created["spec"]["containers"][0], created["spec"]["initContainers"][0]
    assert main["resources"]["requests"] == {"cpu": "500m", "memory": "64Mi"}
    assert clone["resources"]["requests"] == {"cpu": "100m", "memory": "32Mi"}
    over = _pod_of(
        api, "over", containers=[_container("main", limits={"cpu": "1600m", "memory": "64Mi"})]
    )
    with pytest.raises(QuotaExceededError) as caught:
        api.client.create(over)
    assert caught.value.message.startswith(
        'pods "over" is forbidden: exceeded quota: requests, requested: requests.cpu=1600m, '
        "used: requests.cpu=500m, limited: requests.cpu=2"
    )


def test_resource_quota_counts_a_pods_sidecars_and_its_init_containers_at_their_peak(
    api: ApiServer,
) -> None:
    """A pod counts what its containers and sidecars (init containers that keep running)
    request together, or what an init container requests beside the sidecars started before it,
    whichever is more (``resource.PodRequests`` in ``staging/src/k8s.io/component-helpers/
    resource/helpers.go``, which ``PodUsageFunc`` in ``pkg/quota/v1/evaluator/core/pods.go``
    charges): the same containers fit in one order and not in the other."""
    resource_quota(api, "cpu", {"requests.cpu": "1"})
    main = _container("main", requests={"cpu": "300m"})
    sidecar = {**_container("sidecar", requests={"cpu": "300m"}), "restartPolicy": "Always"}
    setup = _container("setup", requests={"cpu": "800m"})
    after_the_sidecar = _pod_of(api, "late", containers=[main], initContainers=[sidecar, setup])
    with pytest.raises(QuotaExceededError) as caught:
        api.client.create(after_the_sidecar)
    assert caught.value.message == (
        'pods "late" is forbidden: exceeded quota: cpu, requested: requests.cpu=1100m, '
        "used: requests.cpu=0, limited: requests.cpu=1"
    )
    api.client.create(_pod_of(api, "early", containers=[main], initContainers=[setup, sidecar]))


def test_a_priority_class_is_cluster_scoped_and_a_second_create_is_409(api: ApiServer) -> None:
    """``podwright priority-classes --apply`` creates each class, and on 409 AlreadyExists reads
    the existing one to compare (a create never replaces it). PriorityClasses are cluster-scoped:
    no namespace in the path or the object (scheduling.k8s.io/v1, "Non-namespaced" in the API
    reference). A class outlives the test's namespace, so it is deleted here."""
    name = f"podwright-contract-{uuid.uuid4().hex[:8]}"
    ref = ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "", name)
    body = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 42,
        "preemptionPolicy": "Never",
        "globalDefault": False,
    }
    try:
        created = api.client.create(body)
        assert "namespace" not in created["metadata"]
        with pytest.raises(AlreadyExistsError) as caught:
            api.client.create({**body, "value": 43})
        assert caught.value.status == 409
        stored = api.client.get(ref)
        assert (stored["value"], stored["preemptionPolicy"]) == (42, "Never")
    finally:
        with contextlib.suppress(NotFoundError):
            api.client.delete(ref)
    with pytest.raises(NotFoundError):
        api.client.get(ref)


def test_a_pod_takes_its_priority_from_its_class_and_an_unknown_class_is_refused(
    api: ApiServer,
) -> None:
    """The Priority admission plugin (``plugin/pkg/admission/priority/admission.go``,
    ``admitPod``): a pod naming a PriorityClass that does not exist is refused, 403 ``no
    PriorityClass with name X was found``; a pod naming one gets its value as ``spec.priority``
    and its ``preemptionPolicy``. The class is cluster-scoped, so it is deleted here."""
    name = f"podwright-contract-{uuid.uuid4().hex[:8]}"
    ref = ObjectRef("scheduling.k8s.io/v1", "PriorityClass", "", name)
    body = pod("classed", api.namespace)
    body["spec"]["priorityClassName"] = name
    with pytest.raises(ForbiddenError) as caught:
        api.client.create(body)
    assert f"no PriorityClass with name {name} was found" in caught.value.message
    api.client.create(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 77,
            "preemptionPolicy": "Never",
        }
    )

    def create_once_the_class_is_known() -> dict[str, Any] | None:
        # The plugin reads classes from an informer: a class just created may be unseen a moment.
        try:
            return api.client.create(body)
        except ForbiddenError:
            return None

    try:
        created = eventually(create_once_the_class_is_known)
        assert (created["spec"]["priority"], created["spec"]["preemptionPolicy"]) == (77, "Never")
    finally:
        api.client.delete(ref)


def test_a_create_in_a_namespace_that_does_not_exist_is_404_naming_it(api: ApiServer) -> None:
    # The NamespaceLifecycle admission plugin: NewNotFound(Resource("namespaces"), namespace)
    # (plugin/pkg/admission/namespace/lifecycle/admission.go).
    missing = f"{api.namespace}-missing"
    with pytest.raises(NamespaceNotFoundError) as caught:
        api.client.create(config_map("a", missing))
    assert caught.value.status == 404
    assert caught.value.namespace == missing
    assert caught.value.details["kind"] == "namespaces"
    assert caught.value.message == f'namespaces "{missing}" not found'


def test_a_create_of_a_kind_the_server_does_not_serve_is_404_not_naming_a_namespace(
    api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cluster without a CRD (Kubeflow, Knative) has no such resource type: the request falls
    # through to the apiserver's NotFound handler (404). The engine fails such a task for good
    # (KindNotServed) instead of retrying it.
    widget = RestResource("podwright-contract.example.com/v1", "Widget", "widgets")
    monkeypatch.setitem(RESOURCES, (widget.api_version, widget.kind), widget)
    body = {
        "apiVersion": widget.api_version,
        "kind": widget.kind,
        "metadata": {"name": "w", "namespace": api.namespace},
    }
    with pytest.raises(NotFoundError) as caught:
        api.client.create(body)
    assert caught.value.status == 404
    assert not isinstance(caught.value, NamespaceNotFoundError)


def _bound_pod(api: ApiServer, name: str, **spec: Any) -> ObjectRef:
    body = pod(name, api.namespace)
    body["spec"].update({"nodeName": ABSENT_NODE, **spec})
    api.client.create(body)
    return api.ref("Pod", name)


def test_binding_assigns_a_pod_to_a_node_once(api: ApiServer) -> None:
    # The scheduler's binding subresource (BindingREST.assignPod in
    # pkg/registry/core/pod/storage/storage.go): spec.nodeName and PodScheduled; a second is 409.
    api.client.create(pod("p", api.namespace))
    api.bind("p")
    bound = api.client.get(api.ref("Pod", "p"))
    assert bound["spec"]["nodeName"] == ABSENT_NODE
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [c["status"] for c in scheduled] == ["True"]
    with pytest.raises(ConflictError):
        api.bind("p", "another-node")


def test_a_bound_pod_is_deleted_gracefully_until_the_kubelet_confirms(api: ApiServer) -> None:
    # CheckGracefulDelete (pkg/registry/core/pod/strategy.go) and rest.BeforeDelete: the pod
    # stays with deletionTimestamp and deletionGracePeriodSeconds; only a shorter grace period
    # changes them; the kubelet's delete with a grace period of 0 removes it. Removing the last
    # finalizer does not remove a pod still in its grace period.
    ref = _bound_pod(api, "p", terminationGracePeriodSeconds=30)
    api.client.patch(
        ref, {"metadata": {"finalizers": ["podwright.dev/test-hold"]}}, PatchType.MERGE
    )
    api.client.delete(ref)
    held = api.client.get(ref)["metadata"]
    assert held["deletionTimestamp"]
    assert held["deletionGracePeriodSeconds"] == 30
    api.client.delete(ref, grace_period_seconds=60)  # longer: ignored
    assert api.client.get(ref)["metadata"]["deletionTimestamp"] == held["deletionTimestamp"]
    api.client.patch(ref, {"metadata": {"finalizers": []}}, PatchType.MERGE)
    assert api.client.get(ref)["metadata"]["deletionGracePeriodSeconds"] == 30
    api.client.delete(ref, grace_period_seconds=0)
    eventually(lambda: api.gone(ref))


def test_a_pod_not_bound_finished_or_without_grace_is_deleted_at_once(api: ApiServer) -> None:
    unbound = api.ref("Pod", "unbound")
    api.client.create(pod("unbound", api.namespace))
    finished = _bound_pod(api, "finished")
    api.client.patch_status(finished, {"status": {"phase": "Failed"}}, PatchType.MERGE)
    graceless = _bound_pod(api, "graceless", terminationGracePeriodSeconds=0)
    for ref in (unbound, finished, graceless):
        api.client.delete(ref)
        assert api.gone(ref), ref


def test_a_pod_deleted_at_once_is_first_written_with_its_deletion(api: ApiServer) -> None:
    """A pod is deleted gracefully (``CheckGracefulDelete`` in pkg/registry/core/pod/
    strategy.go), even with a period of 0: ``Store.Delete`` (staging/src/k8s.io/apiserver/pkg/
    registry/generic/registry/store.go) has ``updateForGracefulDeletionAndFinalizers`` write its
    ``deletionTimestamp`` and a ``deletionGracePeriodSeconds`` of 0 first, then, with no period
    left and no finalizer, removes it: a watch sees the pod being deleted, then deleted."""
    created = api.client.create(pod("p", api.namespace))
    seen: list[tuple[str, bool, int | None]] = []
    done = threading.Event()

    def watch() -> None:
        for event in api.client.watch(
            "v1",
            "Pod",
            resource_version=created["metadata"]["resourceVersion"],
            namespace=api.namespace,
            field_selector="metadata.name=p",
            timeout_seconds=15,
        ):
            if event["type"] == "BOOKMARK":
                continue
            metadata = event["object"]["metadata"]
            seen.append(
                (
                    event["type"],
                    bool(metadata.get("deletionTimestamp")),
                    metadata.get("deletionGracePeriodSeconds"),
                )
            )
            if event["type"] == "DELETED":
                done.set()
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    api.client.delete(api.ref("Pod", "p"), grace_period_seconds=0)
    assert done.wait(20), seen
    assert seen == [("MODIFIED", True, 0), ("DELETED", True, 0)]
    thread.join(5)


def test_a_pod_held_by_a_finalizer_stays_deleting_after_a_delete_at_once(api: ApiServer) -> None:
    """A pod not bound to a node is deleted with a period of 0 (``CheckGracefulDelete``), but
    ``updateForGracefulDeletionAndFinalizers`` never removes an object a finalizer holds: the pod
    stays, with its ``deletionTimestamp`` and a ``deletionGracePeriodSeconds`` of 0, and goes
    once its last finalizer is removed (``ShouldDeleteDuringUpdate``)."""
    body = pod("held", api.namespace)
    body["metadata"]["finalizers"] = ["podwright.dev/test-hold"]
    api.client.create(body)
    ref = api.ref("Pod", "held")
    api.client.delete(ref, grace_period_seconds=0)
    held = api.client.get(ref)["metadata"]
    assert held["deletionTimestamp"]
    assert held["deletionGracePeriodSeconds"] == 0
    assert held["finalizers"] == ["podwright.dev/test-hold"]
    api.client.patch(ref, {"metadata": {"finalizers": []}}, PatchType.MERGE)
    eventually(lambda: api.gone(ref))


def test_a_foreground_delete_keeps_the_object_until_its_dependents_are_gone(
    api: ApiServer,
) -> None:
    # deletionFinalizersForGarbageCollection (apiserver's registry/generic/registry/store.go)
    # adds foregroundDeletion; the garbage collector (processDeletingDependentsItem in
    # pkg/controller/garbagecollector/garbagecollector.go) deletes the dependents and removes the
    # finalizer once those that block their owner's deletion are gone. This dependent is held by
    # a finalizer of the test's, so the owner stays until the test lets it go.
    owner = api.client.create(config_map("owner", api.namespace))
    dependent = config_map("dependent", api.namespace)
    dependent["metadata"]["finalizers"] = ["podwright.dev/test-hold"]
    dependent["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
    ]
    api.client.create(dependent)
    owner_ref, dependent_ref = api.ref("ConfigMap", "owner"), api.ref("ConfigMap", "dependent")
    try:
        api.client.delete(owner_ref, propagation="Foreground")
        held = api.client.get(owner_ref)["metadata"]
        assert held["deletionTimestamp"]
        assert "foregroundDeletion" in held["finalizers"]
        # The garbage collector deletes the dependent; its finalizer holds it, and the owner.
        eventually(lambda: api.client.get(dependent_ref)["metadata"].get("deletionTimestamp"))
        assert not api.gone(owner_ref)
    finally:
        api.client.patch(dependent_ref, {"metadata": {"finalizers": []}}, PatchType.MERGE)
    eventually(lambda: api.gone(dependent_ref))
    eventually(lambda: api.gone(owner_ref))
