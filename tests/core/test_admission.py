"""The admission decisions (core/admission.py) and the reading of podwright's cluster resources
(core/cluster_resources.py): what the webhooks answer, for every mode and scope, from plain
objects. The same decisions are driven through a real API server by the cluster tier."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import pytest

from podwright.core.admission import (
    FINDINGS_ANNOTATION,
    BadReviewError,
    Decision,
    Request,
    admit_workload,
    mutate_workload,
    policies_of,
    review_response,
    validate_policy,
    validate_workload,
)
from podwright.core.assets import EMPTY_CATALOGUE
from podwright.core.cluster_resources import (
    API_VERSION,
    SUBMITTED_BY_ANNOTATION,
    WORKLOAD_FINALIZER,
    ClusterScopes,
    policy_from_resource,
    submission_from_resource,
)
from podwright.core.json_patch import apply_json_patch
from podwright.core.policies import Policy, PolicyError, Scope
from podwright.core.render import DEFAULT_PROFILE, profile_from_data
from podwright.core.workloads import WorkloadInputError

SCOPES = ClusterScopes("prod")
VISION = {"metadata": {"name": "vision", "labels": {"podwright.dev/department": "research"}}}
VISION_SCOPE = Scope(("prod", "research", "vision"))


def cluster_policy(name: str, spec: Mapping[str, Any], **scope: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterWorkloadPolicy",
        "metadata": {"name": name},
        "spec": {"workloadType": "training", **scope, **spec},
    }


def project_policy(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPolicy",
        "metadata": {"name": name, "namespace": "vision"},
        "spec": {"workloadType": "training", **spec},
    }


def read(obj: Mapping[str, Any]) -> Policy:
    if obj["kind"] == "WorkloadPolicy":
        return policy_from_resource(obj, VISION_SCOPE)
    return policy_from_resource(obj, SCOPES.of_cluster_policy(obj["spec"]))


CLUSTER = cluster_policy(
    "prod-training",
    {
        "defaults": {"priorityClass": "low", "compute": {"cpuCoreLimit": 8}},
        "rules": {"image": {"required": True}, "compute": {"gpuDevicesRequest": {"max": 8}}},
    },
    scope="cluster",
)
DEPARTMENT = cluster_policy(
    "research-training",
    {
        "enforcement": "warn",
        "rules": {"priorityClass": {"options": [{"value": "low"}, {"value": "medium"}]}},
    },
    scope="department",
    department="research",
)
PROJECT = project_policy(
    "vision-training",
    {"enforcement": "audit", "rules": {"nodePools": {"options": [{"value": "a100"}]}}},
)
POLICIES = [read(CLUSTER), read(DEPARTMENT), read(PROJECT)]
POLICY_FOR = policies_of(POLICIES, VISION_SCOPE)


def workload(spec: Mapping[str, Any], name: str = "resnet") -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "vision"},
        "spec": {"type": "training", **spec},
    }


def request(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Request:
    return Request("UPDATE" if old else "CREATE", obj, old, "vision", dry_run=False)


HELD = {"op": "add", "path": "/metadata/finalizers", "value": [WORKLOAD_FINALIZER]}
"""The patch that holds a new Workload with podwright's finalizer."""


# Scopes and resources ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "scope"),
    [
        ({}, ("prod", "default", "team-a")),
        ({"podwright.dev/department": "research"}, ("prod", "research", "team-a")),
        ({"podwright.dev/project": "vision"}, ("prod", "default", "vision")),
    ],
)
def test_a_namespace_is_a_project_of_its_department(
    labels: dict[str, str], scope: tuple[str, ...]
) -> None:
    namespace = {"metadata": {"name": "team-a", "labels": labels}}
    assert SCOPES.of_namespace(namespace) == Scope(scope)


@pytest.mark.parametrize(
    ("spec", "scope"),
    [
        ({"scope": "tenant"}, ()),
        ({"scope": "cluster"}, ("prod",)),
        ({}, ("prod",)),
        ({"scope": "department", "department": "research"}, ("prod", "research")),
    ],
)
def test_a_cluster_policy_names_its_scope(spec: dict[str, str], scope: tuple[str, ...]) -> None:
    assert SCOPES.of_cluster_policy(spec) == Scope(scope)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"scope": "project"}, "spec.scope: expected one of tenant, cluster, department"),
        ({"scope": "department"}, "spec.department: a policy of scope department names its"),
        ({"scope": "cluster", "department": "x"}, "spec.department: only a policy of scope"),
    ],
)
def test_a_cluster_policy_with_a_wrong_scope_is_refused_by_name(
    spec: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        SCOPES.of_cluster_policy(spec)


def test_a_policy_resource_becomes_the_policy_of_its_scope_named_after_the_object() -> None:
    policy = read(PROJECT)
    assert (policy.name, policy.scope, policy.source) == (
        "vision-training",
        VISION_SCOPE,
        "WorkloadPolicy vision/vision-training",
    )


def test_a_malformed_policy_resource_is_reported_at_the_objects_own_paths() -> None:
    broken = project_policy("broken", {"rules": {"compute": {"gpuDevicesRequest": {"most": 2}}}})
    with pytest.raises(PolicyError) as caught:
        read(broken)
    (problem,) = caught.value.problems
    assert problem.path == ("spec", "rules", "compute", "gpuDevicesRequest", "most")
    assert problem.source == "WorkloadPolicy vision/broken"


def test_a_workload_resource_becomes_a_submission_with_problems_at_its_own_paths() -> None:
    submission = submission_from_resource(workload({"image": "pytorch", "command": "train"}))
    assert (submission.workload_type.value, submission.name) == ("training", "resnet")
    with pytest.raises(WorkloadInputError) as caught:
        submission_from_resource(workload({"type": "sleeping", "image": "x"}, name="Bad_Name"))
    assert [problem.path for problem in caught.value.problems] == [("spec", "type")]


# Workloads --------------------------------------------------------------------------------------


def decisions(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> tuple[Decision, Decision]:
    given = request(obj, old)
    return (
        mutate_workload(given, POLICY_FOR, EMPTY_CATALOGUE),
        validate_workload(given, VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE, DEFAULT_PROFILE),
    )


def test_a_compliant_workload_is_admitted_with_its_defaults_written_into_its_spec() -> None:
    mutation, validation = decisions(workload({"image": "pytorch", "nodePools": ["a100"]}))
    assert validation == Decision(True)
    held, patch = mutation.patch
    assert held == HELD
    assert patch["op"] == "replace"
    assert patch["path"] == "/spec"
    value = patch["value"]
    assert isinstance(value, dict)
    assert value["type"] == "training"
    assert value["priorityClass"] == "low"  # the cluster's default
    assert value["compute"]["cpuCoreLimit"] == 8
    # Once written, the effective spec is admitted as it is: no second patch.
    again = mutate_workload(request(workload(value)), POLICY_FOR, EMPTY_CATALOGUE)
    assert again == Decision(True, patch=(HELD,))


def test_an_enforced_rule_refuses_the_workload_listing_every_issue_with_its_owner() -> None:
    mutation, validation = decisions(workload({"compute": {"gpuDevicesRequest": 16}}))
    assert mutation == Decision(True, patch=(HELD,))  # the validating webhook refuses
    assert not validation.allowed
    assert (validation.code, validation.reason) == (403, "Forbidden")
    assert validation.message.startswith(
        "2 compliance issues with the policies of project vision: "
    )
    assert "spec.image: " in validation.message
    assert "(rule required, policy 'prod-training' of cluster prod)" in validation.message
    assert "spec.compute.gpuDevicesRequest: " in validation.message
    assert "(rule max, policy 'prod-training' of cluster prod)" in validation.message


def test_warn_mode_admits_with_warnings_and_audit_mode_with_an_audit_annotation() -> None:
    _, validation = decisions(
        workload({"image": "pytorch", "priorityClass": "high", "nodePools": ["v100"]})
    )
    assert validation.allowed
    (warning,) = validation.warnings
    assert warning.startswith("spec.priorityClass: ")
    assert warning.endswith("(rule options, policy 'research-training' of department research)")
    (finding,) = json.loads(validation.audit_annotations[FINDINGS_ANNOTATION])
    assert finding["field"] == "spec.nodePools"
    assert finding["rule"] == "options"
    assert finding["enforcement"] == "audit"
    assert finding["policy"] == "WorkloadPolicy vision/vision-training"
    assert finding["scope"] == "project vision"


def test_a_malformed_workload_is_refused_as_invalid_naming_the_field() -> None:
    _, validation = decisions(workload({"image": "pytorch", "compute": {"gpuDevicesRequest": "x"}}))
    assert (validation.allowed, validation.code, validation.reason) == (False, 422, "Invalid")
    assert "spec.compute.gpuDevicesRequest: " in validation.message


def test_policies_that_cannot_be_combined_refuse_every_workload_of_their_scope() -> None:
    second = cluster_policy("second", {"rules": {"image": {"required": False}}}, scope="cluster")
    given = request(workload({"image": "pytorch"}))
    refused = validate_workload(
        given,
        VISION_SCOPE,
        policies_of([*POLICIES, read(second)], VISION_SCOPE),
        EMPTY_CATALOGUE,
        DEFAULT_PROFILE,
    )
    assert not refused.allowed
    assert refused.message.startswith(
        "the policies of project vision cannot be applied, so no workload is admitted there: "
    )


def test_an_admitted_spec_cannot_change_except_the_fields_that_scale_it() -> None:
    admitted = workload({"image": "pytorch", "priorityClass": "low"})
    changed = workload({"image": "pytorch:2", "priorityClass": "low"})
    _, validation = decisions(changed, admitted)
    assert not validation.allowed
    assert validation.message == (
        "spec.image: cannot change after the workload was admitted (delete it and submit a new one)"
    )
    served = {"type": "inference", "image": "vllm", "autoscaling": {"maxReplicas": 2}}
    scaled = {
        **served,
        "autoscaling": {
            "minReplicas": 1,
            "maxReplicas": 4,
            "metric": "concurrency",
            "metricThreshold": 10,
        },
    }
    refused = validate_workload(
        request({**admitted, "spec": {**scaled, "image": "vllm:2"}}, {**admitted, "spec": served}),
        VISION_SCOPE,
        policies_of([], VISION_SCOPE),
        EMPTY_CATALOGUE,
        DEFAULT_PROFILE,
    )
    assert refused.message == (
        "spec.image: cannot change after the workload was admitted "
        "(only spec.autoscaling may change)"
    )
    allowed = validate_workload(
        request({**admitted, "spec": scaled}, {**admitted, "spec": served}),
        VISION_SCOPE,
        policies_of([], VISION_SCOPE),
        EMPTY_CATALOGUE,
        DEFAULT_PROFILE,
    )
    assert allowed.allowed, allowed.message


def test_restating_the_original_submission_keeps_the_admitted_spec() -> None:
    given = workload({"image": "pytorch", "nodePools": ["a100"]})
    _held, patch = mutate_workload(request(given), POLICY_FOR, EMPTY_CATALOGUE).patch
    admitted = {**given, "spec": patch["value"]}
    # `kubectl replace -f` of the original file: the defaults are left out, nothing changed.
    restated = mutate_workload(request(given, admitted), POLICY_FOR, EMPTY_CATALOGUE)
    assert restated.patch == (patch,)
    assert restated.allowed
    assert validate_workload(
        request(admitted, admitted), VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE, DEFAULT_PROFILE
    ).allowed


NO_POLICY = policies_of([], VISION_SCOPE)
KAI_PROFILE = profile_from_data(
    {
        "apiVersion": "podwright.dev/v1",
        "kind": "ClusterProfile",
        "metadata": {"name": "kai"},
        "spec": {"scheduler": {"type": "kai", "name": "kai-scheduler"}},
    }
)


def test_without_a_policy_a_workload_that_cannot_be_rendered_is_refused_as_the_cli_says() -> None:
    refused = validate_workload(
        request(workload({"compute": {"gpuDevicesRequest": 1}})),
        VISION_SCOPE,
        NO_POLICY,
        EMPTY_CATALOGUE,
        DEFAULT_PROFILE,
    )
    assert (refused.allowed, refused.code, refused.reason) == (False, 422, "Invalid")
    # `podwright render` prints the same, a line each (api/pipeline.py's prepare).
    assert refused.message == (
        "cannot render on cluster profile 'default': image: required: the container image "
        "(submit one, or have a policy default it)"
    )


def test_a_workload_is_judged_on_the_profile_given_and_names_where_a_value_came_from() -> None:
    fraction = cluster_policy(
        "fraction", {"defaults": {"compute": {"gpuPortionRequest": 0.5}}}, scope="cluster"
    )
    given = request(workload({"image": "pytorch"}))
    policy_for = policies_of([read(fraction)], VISION_SCOPE)
    refused = validate_workload(given, VISION_SCOPE, policy_for, EMPTY_CATALOGUE, DEFAULT_PROFILE)
    assert refused.message == (
        "cannot render on cluster profile 'default': compute.gpuPortionRequest: a fraction of a "
        "GPU needs the KAI scheduler; the cluster profile's scheduler is 'default-scheduler' (set "
        "scheduler.type: kai) (value from policy default (cluster prod))"
    )
    assert validate_workload(given, VISION_SCOPE, policy_for, EMPTY_CATALOGUE, KAI_PROFILE).allowed


def test_every_problem_of_rendering_is_listed_in_one_refusal() -> None:
    refused = validate_workload(
        request(workload({"tty": True, "compute": {"gpuRequestType": "portion"}})),
        VISION_SCOPE,
        NO_POLICY,
        EMPTY_CATALOGUE,
        DEFAULT_PROFILE,
    )
    head, _, reasons = refused.message.partition(": ")
    assert head == "cannot render on cluster profile 'default'"
    assert [reason.split(":")[0] for reason in reasons.split("; ")] == [
        "image",
        "tty",
        "compute.gpuRequestType",
    ]


def test_a_name_left_to_the_server_is_rendered_at_the_length_it_will_have() -> None:
    def generated(base: str) -> Decision:
        worker = {"image": "pytorch", "distributedFramework": "PyTorch", "numWorkers": 1}
        obj = {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": {"generateName": base, "namespace": "vision"},
            "spec": {"type": "distributed", "master": {"image": "pytorch"}, "worker": worker},
        }
        return validate_workload(
            request(obj), VISION_SCOPE, NO_POLICY, EMPTY_CATALOGUE, DEFAULT_PROFILE
        )

    # A distributed job's name leaves room for "-worker-0": 54 characters; the server adds 5.
    assert generated("r" * 49).allowed
    refused = generated("r" * 50)
    assert refused.message == (
        f"cannot render on cluster profile 'default': name: '{'r' * 50}xxxxx' must be at most 54 "
        "characters for a distributed workload"
    )


def test_an_update_of_the_metadata_alone_is_never_refused_for_the_profile() -> None:
    """The operator writes its finalizer into (and takes it out of) a Workload whose spec it
    rendered, or failed to render: a Workload admitted before the profile changed must still be
    held and let go."""
    admitted = workload({"compute": {"gpuDevicesRequest": 1}})
    held = {**admitted, "metadata": {**admitted["metadata"], "finalizers": ["podwright.dev/task"]}}
    assert validate_workload(
        request(held, admitted), VISION_SCOPE, NO_POLICY, EMPTY_CATALOGUE, DEFAULT_PROFILE
    ).allowed


def test_an_update_of_the_metadata_alone_is_admitted_under_policies_tightened_since() -> None:
    """A Workload admitted before a policy forbade its spec can still be held (the operator's
    finalizer), aborted (an annotation) and let go: today's policies judge it in its compliance
    status, not at each write of its metadata. Its spec still cannot change."""
    admitted = workload({"image": "pytorch", "compute": {"gpuDevicesRequest": 16}})
    assert not validate_workload(
        request(admitted), VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE, DEFAULT_PROFILE
    ).allowed
    metadata = admitted["metadata"]
    for changed in (
        {**metadata, "finalizers": ["podwright.dev/task"]},
        {**metadata, "annotations": {"podwright.dev/abort-requested": "true"}},
        {**metadata, "labels": {"team": "a"}},
    ):
        decision = validate_workload(
            request({**admitted, "metadata": changed}, admitted),
            VISION_SCOPE,
            POLICY_FOR,
            EMPTY_CATALOGUE,
            DEFAULT_PROFILE,
        )
        assert decision == Decision(True), changed
    respecified = {**admitted, "spec": {**admitted["spec"], "image": "other"}}
    assert not validate_workload(
        request(respecified, admitted), VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE, DEFAULT_PROFILE
    ).allowed


def test_a_workload_mutated_with_default_instances_is_admitted_as_mutated() -> None:
    """The validating webhook judges the mutated object: default instances it now names,
    locked ones with attribute defaults, and unnamed ones where no instance may be added
    (the reference's NFS example), are the policy's own, not changes or additions."""
    storage = cluster_policy(
        "storage",
        {
            "defaults": {
                "storage": {
                    "nfs": {"instances": [{"server": "nfs", "path": "/x", "mountPath": "/x"}]},
                    "hostPath": {
                        "instances": [{"name": "home", "path": "/h", "mountPath": "/h"}],
                        "attributes": {"readOnly": True},
                    },
                }
            },
            "rules": {
                "storage": {
                    "nfs": {"instances": {"canAdd": False}},
                    "hostPath": {"instances": {"locked": ["home"]}},
                }
            },
        },
        scope="cluster",
    )
    policy_for = policies_of([read(storage)], VISION_SCOPE)
    _held, patch = mutate_workload(
        request(workload({"image": "pytorch"})), policy_for, EMPTY_CATALOGUE
    ).patch
    mutated = workload({key: value for key, value in patch["value"].items() if key != "type"})
    (nfs,) = mutated["spec"]["storage"]["nfs"]
    assert nfs["name"].startswith("unnamed-")
    validation = validate_workload(
        request(mutated), VISION_SCOPE, policy_for, EMPTY_CATALOGUE, DEFAULT_PROFILE
    )
    assert validation == Decision(True)
    again = mutate_workload(request(mutated), policy_for, EMPTY_CATALOGUE)
    assert again == Decision(True, patch=(HELD,)), "the spec as it is: only the finalizer"


# Policies ---------------------------------------------------------------------------------------


def policy_decision(obj: Mapping[str, Any], existing: list[Policy]) -> Decision:
    def scope_of(policy: Mapping[str, Any]) -> Scope:
        if policy["kind"] == "WorkloadPolicy":
            return VISION_SCOPE
        return SCOPES.of_cluster_policy(policy["spec"])

    return validate_policy(request(obj), scope_of, existing)


def test_a_well_formed_policy_that_conflicts_with_nothing_is_admitted() -> None:
    assert policy_decision(PROJECT, POLICIES) == Decision(True)  # itself, re-applied


def test_a_malformed_policy_is_refused_with_every_field_level_error() -> None:
    broken = project_policy(
        "broken",
        {"enforcement": "loud", "rules": {"compute": {"gpuDevicesRequest": {"most": 2}}}},
    )
    decision = policy_decision(broken, POLICIES)
    assert (decision.allowed, decision.code) == (False, 422)
    assert decision.message.startswith("WorkloadPolicy vision/broken is invalid: ")
    assert "spec.enforcement: " in decision.message
    assert "spec.rules.compute.gpuDevicesRequest.most: " in decision.message


def test_a_second_rule_on_a_field_of_the_branch_is_refused_naming_its_owner() -> None:
    # Below the owner...
    looser = project_policy("looser", {"rules": {"compute": {"gpuDevicesRequest": {"max": 64}}}})
    decision = policy_decision(looser, [read(CLUSTER)])
    assert not decision.allowed
    assert decision.message.startswith(
        "WorkloadPolicy vision/looser conflicts with the policies of its scopes: "
    )
    assert "owned by cluster prod (policy 'prod-training')" in decision.message
    # ...and above it: a tenant policy ruling what a project already rules.
    tenant = cluster_policy("tenant", {"rules": {"nodePools": {"required": True}}}, scope="tenant")
    decision = policy_decision(tenant, POLICIES)
    assert not decision.allowed
    assert decision.message == (
        "ClusterWorkloadPolicy tenant conflicts with the policies of its scopes: "
        "ClusterWorkloadPolicy tenant: spec.rules.nodePools: already has rules in project "
        "vision: 'vision-training' (a field's rules are set by one scope of a branch)"
    )


def test_a_conflict_among_other_policies_is_not_blamed_on_a_new_one() -> None:
    clash = cluster_policy("clash", {"rules": {"image": {"required": False}}}, scope="cluster")
    unrelated = project_policy("unrelated", {"rules": {"command": {"required": True}}})
    existing = [read(CLUSTER), read(clash)]
    assert policy_decision(unrelated, existing) == Decision(True)


def test_a_policy_whose_scope_is_wrong_is_refused_by_name() -> None:
    wrong = cluster_policy("wrong", {}, scope="department")
    decision = policy_decision(wrong, [])
    assert decision.message == (
        "ClusterWorkloadPolicy wrong is invalid: "
        "spec.department: a policy of scope department names its department"
    )


# The review envelope ----------------------------------------------------------------------------


def test_the_response_answers_the_request_uid_with_a_base64_json_patch() -> None:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "abc", "operation": "CREATE", "object": workload({})},
    }
    patch = ({"op": "add", "path": "/spec/image", "value": "x"},)
    answer = review_response(review, Decision(True, patch=patch, warnings=("careful",)))
    response = answer["response"]
    assert isinstance(response, dict)
    assert response["uid"] == "abc"
    assert json.loads(base64.b64decode(response["patch"])) == list(patch)
    assert (response["patchType"], response["warnings"]) == ("JSONPatch", ["careful"])
    refused = review_response(review, Decision.refuse(403, "Forbidden", "no"))["response"]
    assert refused == {
        "uid": "abc",
        "allowed": False,
        "status": {"code": 403, "reason": "Forbidden", "message": "no"},
    }


@pytest.mark.parametrize(
    ("review", "message"),
    [
        ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}, "expected an"),
        (
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}},
            "request: expected a mapping with a uid",
        ),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "u", "operation": "DELETE"},
            },
            "request: expected a CREATE or UPDATE with its object",
        ),
    ],
)
def test_a_body_that_is_not_a_review_this_webhook_serves_is_refused(
    review: dict[str, Any], message: str
) -> None:
    with pytest.raises(BadReviewError, match=message):
        Request.of(review)


# The finalizer held from admission ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("finalizers", "operation", "held"),
    [
        pytest.param(None, "CREATE", (HELD,), id="none"),
        pytest.param([], "CREATE", (HELD,), id="empty"),
        pytest.param(
            ["example.com/keep"],
            "CREATE",
            ({"op": "add", "path": "/metadata/finalizers/-", "value": WORKLOAD_FINALIZER},),
            id="another-finalizer-kept",
        ),
        pytest.param([WORKLOAD_FINALIZER], "CREATE", (), id="already-held"),
        pytest.param(None, "UPDATE", (), id="never-put-back-by-an-update"),
    ],
)
def test_a_new_workload_is_held_with_podwrights_finalizer_at_admission(
    finalizers: list[str] | None, operation: str, held: tuple[dict[str, Any], ...]
) -> None:
    """The operator need not write the finalizer before it submits the task; an update (the
    operator's own, which removes the finalizer once the task is finalized) never puts it
    back."""
    obj = workload({"image": "pytorch", "nodePools": ["a100"]})
    if finalizers is not None:
        obj["metadata"]["finalizers"] = finalizers
    given = Request(operation, obj, obj if operation == "UPDATE" else None, "vision", dry_run=False)
    mutation = mutate_workload(given, POLICY_FOR, EMPTY_CATALOGUE)
    one_call = admit_workload(given, VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE, DEFAULT_PROFILE)
    for decision in (mutation, one_call):
        assert decision.allowed, decision.message
        assert tuple(op for op in decision.patch if op["path"] != "/spec") == held


def test_a_refused_workload_is_not_held() -> None:
    obj = workload({"compute": {"gpuDevicesRequest": 16}})
    refused = admit_workload(
        request(obj), VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE, DEFAULT_PROFILE
    )
    assert not refused.allowed
    assert refused.patch == ()


# Who submitted a Workload -------------------------------------------------------------------------

OTHER = {"example.com/note": "kept"}
ALICE = {SUBMITTED_BY_ANNOTATION: "alice"}


def annotated(annotations: dict[str, str] | None) -> dict[str, Any]:
    """A Workload the policies admit, with these annotations (None: no annotations at all)."""
    obj = workload({"image": "pytorch", "nodePools": ["a100"]})
    if annotations is not None:
        obj["metadata"]["annotations"] = annotations
    return obj


def annotations_admitted(given: Request) -> list[dict[str, str] | None]:
    """The annotations of the object as the API server keeps it after the mutating webhook's
    patch, by each path: the two-call mutate and the single webhook."""
    admitted = []
    for decision in (
        mutate_workload(given, POLICY_FOR, EMPTY_CATALOGUE),
        admit_workload(given, VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE, DEFAULT_PROFILE),
    ):
        assert decision.allowed, decision.message
        patched = apply_json_patch(given.obj, list(decision.patch))
        admitted.append(patched["metadata"].get("annotations"))
    return admitted


@pytest.mark.parametrize(
    ("user", "written", "recorded"),
    [
        pytest.param("alice", None, ALICE, id="no-annotations"),
        pytest.param("alice", OTHER, {**OTHER, **ALICE}, id="others-kept"),
        pytest.param(
            "alice", {**OTHER, SUBMITTED_BY_ANNOTATION: "bob"}, {**OTHER, **ALICE}, id="a-claim"
        ),
        pytest.param(
            "system:serviceaccount:ci:runner",
            {},
            {SUBMITTED_BY_ANNOTATION: "system:serviceaccount:ci:runner"},
            id="empty-annotations",
        ),
        pytest.param("", {**OTHER, SUBMITTED_BY_ANNOTATION: "bob"}, OTHER, id="no-user-no-claim"),
        pytest.param("", None, None, id="no-user-nothing-written"),
    ],
)
def test_a_new_workload_records_its_requester_as_who_submitted_it(
    user: str, written: dict[str, str] | None, recorded: dict[str, str] | None
) -> None:
    given = Request("CREATE", annotated(written), None, "vision", dry_run=False, user=user)
    assert annotations_admitted(given) == [recorded, recorded]


@pytest.mark.parametrize(
    ("before", "after", "kept"),
    [
        pytest.param(ALICE, {SUBMITTED_BY_ANNOTATION: "mallory"}, ALICE, id="changed"),
        pytest.param(ALICE, OTHER, {**OTHER, **ALICE}, id="key-removed"),
        pytest.param(ALICE, None, ALICE, id="annotations-removed"),
        pytest.param(ALICE, {}, ALICE, id="annotations-emptied"),
        pytest.param(ALICE, {**OTHER, **ALICE}, {**OTHER, **ALICE}, id="unchanged-others-added"),
        pytest.param(OTHER, {**OTHER, "team": "a"}, {**OTHER, "team": "a"}, id="never-recorded"),
        pytest.param(None, None, None, id="never-recorded-no-annotations"),
        pytest.param(
            OTHER, {**OTHER, SUBMITTED_BY_ANNOTATION: "mallory"}, OTHER, id="not-claimed-later"
        ),
    ],
)
def test_an_update_keeps_who_submitted_the_workload(
    before: dict[str, str] | None, after: dict[str, str] | None, kept: dict[str, str] | None
) -> None:
    """Whoever updates the Workload (its submitter, a colleague, the operator), the annotation
    says what it said before: a change or a removal is undone. A Workload admitted before
    submitters were recorded is left without one: an update cannot claim it."""
    given = Request(
        "UPDATE", annotated(after), annotated(before), "vision", dry_run=False, user="mallory"
    )
    assert annotations_admitted(given) == [kept, kept]


ESCAPED = "/metadata/annotations/podwright.dev~1submitted-by"


@pytest.mark.parametrize(
    ("user", "written", "patch"),
    [
        pytest.param(
            "alice",
            None,
            [{"op": "add", "path": "/metadata/annotations", "value": ALICE}],
            id="the-map-added",
        ),
        pytest.param(
            "alice",
            OTHER,
            [{"op": "add", "path": ESCAPED, "value": "alice"}],
            id="the-key-added-its-slash-escaped",
        ),
        pytest.param(
            "", ALICE, [{"op": "remove", "path": ESCAPED}], id="a-claim-of-nobody-removed"
        ),
        pytest.param("alice", ALICE, [], id="recorded-already-as-when-called-again"),
    ],
)
def test_the_submitter_is_patched_in_by_its_escaped_pointer(
    user: str, written: dict[str, str] | None, patch: list[dict[str, Any]]
) -> None:
    """The JSON patch, as the API server reads it (RFC 6901: ``/`` in a key is ``~1``). Recorded
    already, nothing: the API server calls the single webhook again after another mutating
    webhook's change (``reinvocationPolicy: IfNeeded``)."""
    given = Request("CREATE", annotated(written), None, "vision", dry_run=False, user=user)
    for decision in (
        mutate_workload(given, POLICY_FOR, EMPTY_CATALOGUE),
        admit_workload(given, VISION_SCOPE, POLICY_FOR, EMPTY_CATALOGUE, DEFAULT_PROFILE),
    ):
        annotating = [op for op in decision.patch if op["path"].startswith("/metadata/annotations")]
        assert annotating == patch


@pytest.mark.parametrize(
    ("user_info", "user"),
    [
        pytest.param({"username": "alice", "groups": ["dev"]}, "alice", id="named"),
        pytest.param({"groups": ["system:unauthenticated"]}, "", id="unnamed"),
        pytest.param(None, "", id="no-user-info"),
    ],
)
def test_a_review_names_who_asks(user_info: dict[str, Any] | None, user: str) -> None:
    request_data: dict[str, Any] = {"uid": "u", "operation": "CREATE", "object": workload({})}
    if user_info is not None:
        request_data["userInfo"] = user_info
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request_data,
    }
    assert Request.of(review).user == user
