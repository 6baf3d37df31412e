"""The admission webhooks' handlers (engine/admission_service.py) over an in-memory policy state:
reviews in, AdmissionReviews out; a policy change takes effect at the next review; a policy that
cannot be read refuses the workloads of its scopes instead of loosening them."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

import pytest

from podwright.core.admission import BadReviewError
from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue
from podwright.core.cluster_resources import (
    API_VERSION,
    WORKLOAD_FINALIZER,
    ClusterScopes,
    policy_from_resource,
)
from podwright.core.json_patch import apply_json_patch
from podwright.core.policies import Policy, Scope
from podwright.core.problems import FieldProblem, ProblemsError
from podwright.core.render import DEFAULT_PROFILE, ClusterProfile
from podwright.core.render.profile import SchedulerType
from podwright.engine.admission_service import (
    ADMIT_WORKLOADS,
    MUTATE_WORKLOADS,
    VALIDATE_POLICIES,
    VALIDATE_WORKLOADS,
    AdmissionService,
    PolicySnapshot,
    UnreadablePolicy,
)

SCOPES = ClusterScopes("prod")
VISION = Scope(("prod", "default", "vision"))


class MemoryState:
    def __init__(self) -> None:
        self.policies: list[Policy] = []
        self.unreadable: list[UnreadablePolicy] = []
        self.unreadable_assets: list[FieldProblem] = []
        self.cluster_profile = DEFAULT_PROFILE
        self.unreadable_profile: list[FieldProblem] = []
        self.version = 0

    def snapshot(self) -> PolicySnapshot:
        return PolicySnapshot(self.version, tuple(self.policies), tuple(self.unreadable))

    def namespace_scope(self, namespace: str) -> Scope:
        if namespace != "vision":
            raise LookupError(namespace)
        return VISION

    def catalogue(self, namespace: str) -> AssetCatalogue:
        if self.unreadable_assets:
            raise ProblemsError(self.unreadable_assets)
        return EMPTY_CATALOGUE

    def profile(self) -> ClusterProfile:
        if self.unreadable_profile:
            raise ProblemsError(self.unreadable_profile)
        return self.cluster_profile

    def set_policies(self, *policies: Policy) -> None:
        self.policies = list(policies)
        self.version += 1


def cluster_policy(
    name: str, rules: Mapping[str, Any], enforcement: str = "enforce", **defaults: Any
) -> Policy:
    obj = {
        "apiVersion": API_VERSION,
        "kind": "ClusterWorkloadPolicy",
        "metadata": {"name": name},
        "spec": {
            "workloadType": "training",
            "scope": "cluster",
            "enforcement": enforcement,
            "rules": rules,
        },
    }
    if defaults:
        obj["spec"]["defaults"] = defaults
    return policy_from_resource(obj, Scope(("prod",)))


def review(
    obj: Mapping[str, Any], operation: str = "CREATE", old: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7c1f",
            "operation": operation,
            "namespace": obj["metadata"].get("namespace", ""),
            "object": obj,
            "oldObject": old,
        },
    }


def workload(namespace: str = "vision", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": "resnet", "namespace": namespace},
        "spec": {"type": "training", **spec},
    }


@pytest.fixture
def state() -> MemoryState:
    return MemoryState()


@pytest.fixture
def routes(state: MemoryState) -> dict[str, Any]:
    return AdmissionService(state, SCOPES).routes()


def response(answer: Mapping[str, Any]) -> dict[str, Any]:
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "7c1f"
    result: dict[str, Any] = answer["response"]
    return result


def test_the_webhooks_are_served_by_path(routes: dict[str, Any]) -> None:
    assert set(routes) == {MUTATE_WORKLOADS, VALIDATE_WORKLOADS, ADMIT_WORKLOADS, VALIDATE_POLICIES}


LIMITS = {"compute": {"gpuDevicesRequest": {"max": 2}}}


def _defaults(state: MemoryState) -> None:
    state.set_policies(cluster_policy("defaults", LIMITS, priorityClass="low"))


def _warnings(state: MemoryState) -> None:
    state.set_policies(cluster_policy("limits", LIMITS, "warn", priorityClass="low"))


def _audit(state: MemoryState) -> None:
    state.set_policies(cluster_policy("limits", LIMITS, "audit"))


def _unreadable_profile(state: MemoryState) -> None:
    state.unreadable_profile = [FieldProblem(("spec",), "expected a mapping", "ClusterProfile x")]


def _a_default_port_without_its_number(state: MemoryState) -> None:
    """A default port that every workload must give a number to, or exclude."""
    rules = {"ports": {"attributes": {"container": {"required": True}}}}
    state.set_policies(cluster_policy("ports", rules, ports={"instances": [{"name": "web"}]}))


def _a_limit_computed_beyond_what_its_field_takes(state: MemoryState) -> None:
    rules = {
        "compute": {"gpuPortionLimit": {"defaultFrom": {"field": "gpuPortionRequest", "factor": 2}}}
    }
    state.set_policies(cluster_policy("portions", rules))
    state.cluster_profile = dataclasses.replace(
        DEFAULT_PROFILE, name="kai", scheduler_type=SchedulerType.KAI
    )


ADMITTED = workload(image="pytorch", priorityClass="low")
EXCLUDING_THE_DEFAULT_PORT = workload(image="pytorch", ports=[{"name": "web", "exclude": True}])


@pytest.mark.parametrize(
    ("given", "arrange"),
    [
        pytest.param(review(workload(image="pytorch")), _defaults, id="defaults patched in"),
        pytest.param(review(workload(image="pytorch")), lambda state: None, id="nothing to patch"),
        pytest.param(
            review(workload(image="pytorch", compute={"gpuDevicesRequest": 4})),
            _defaults,
            id="enforced rule broken",
        ),
        pytest.param(
            review(workload(image="pytorch", compute={"gpuDevicesRequest": 4})),
            _warnings,
            id="warn mode",
        ),
        pytest.param(
            review(workload(image="pytorch", compute={"gpuDevicesRequest": 4})),
            _audit,
            id="audit mode",
        ),
        pytest.param(
            review(workload(image="pytorch", compute={"gpuPortionRequest": 0.5})),
            lambda state: None,
            id="cannot render on the profile",
        ),
        pytest.param(
            review(EXCLUDING_THE_DEFAULT_PORT),
            _a_default_port_without_its_number,
            id="a default instance excluded",
        ),
        pytest.param(
            review(workload(image="pytorch", compute={"gpuPortionRequest": 0.75})),
            _a_limit_computed_beyond_what_its_field_takes,
            id="a computed default its field cannot take",
        ),
        pytest.param(review(workload(image=7)), _defaults, id="malformed"),
        pytest.param(review(workload("elsewhere", image="x")), _defaults, id="no namespace"),
        pytest.param(
            review(workload(image="pytorch")), _unreadable_profile, id="unreadable profile"
        ),
        pytest.param(
            review(workload(image="pytorch"), "UPDATE", ADMITTED),
            _defaults,
            id="update restating the admitted spec",
        ),
        pytest.param(
            review(workload(image="other", priorityClass="low"), "UPDATE", ADMITTED),
            _defaults,
            id="update of a fixed field",
        ),
    ],
)
def test_the_one_call_answers_as_the_mutating_then_the_validating_webhook(
    state: MemoryState,
    routes: dict[str, Any],
    given: dict[str, Any],
    arrange: Any,
) -> None:
    """``--single-webhook``: one decision, the same outcome as the two calls the API server
    makes otherwise (the validating one sent the object as the mutating one's patch left it)."""
    arrange(state)
    mutated = response(routes[MUTATE_WORKLOADS](given))
    assert mutated["allowed"]
    patched = json.loads(json.dumps(given))
    if "patch" in mutated:
        operations = json.loads(base64.b64decode(mutated["patch"]))
        patched["request"]["object"] = apply_json_patch(given["request"]["object"], operations)
    validated = response(routes[VALIDATE_WORKLOADS](patched))

    admitted = response(routes[ADMIT_WORKLOADS](given))

    expected = dict(validated)
    if validated["allowed"]:
        expected.update({key: mutated[key] for key in ("patch", "patchType") if key in mutated})
    assert admitted == expected


def test_the_validating_webhook_admits_what_the_mutating_one_wrote_of_an_exclusion(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    """The written spec keeps the submission's exclusion: judged again, the default instance it
    excluded (which breaks a rule) does not come back to have it refused."""
    _a_default_port_without_its_number(state)
    given = review(EXCLUDING_THE_DEFAULT_PORT)
    assert not response(routes[VALIDATE_WORKLOADS](review(workload(image="pytorch"))))["allowed"]
    mutated = response(routes[MUTATE_WORKLOADS](given))
    operations = json.loads(base64.b64decode(mutated["patch"]))
    patched = apply_json_patch(given["request"]["object"], operations)
    assert patched["spec"]["ports"] == [{"name": "web", "exclude": True}]
    validated = response(routes[VALIDATE_WORKLOADS](review(patched)))
    assert validated["allowed"], validated


@pytest.mark.parametrize("path", [MUTATE_WORKLOADS, ADMIT_WORKLOADS])
def test_an_update_that_restates_a_spec_admitted_before_exclusions_were_written_keeps_it(
    state: MemoryState, routes: dict[str, Any], path: str
) -> None:
    """A Workload admitted by an earlier podwright, whose spec lacks the exclusion its file
    states, updated by ``kubectl replace`` of that file with a new label: the same workload, so
    the admitted spec stays."""
    variables = {"instances": [{"name": "HOME", "value": "/h"}, {"name": "USER", "value": "me"}]}
    state.set_policies(cluster_policy("env", {}, environmentVariables=variables))
    original = workload(image="pytorch", environmentVariables=[{"name": "USER", "exclude": True}])
    admitted_before = workload(
        image="pytorch", environmentVariables=[{"name": "HOME", "value": "/h"}]
    )
    relabelled = {**original, "metadata": {**original["metadata"], "labels": {"team": "a"}}}

    answer = response(routes[path](review(relabelled, "UPDATE", admitted_before)))

    assert answer["allowed"], answer
    operations = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []
    patched = apply_json_patch(relabelled, operations)
    assert patched["spec"] == admitted_before["spec"]
    validated = response(routes[VALIDATE_WORKLOADS](review(patched, "UPDATE", admitted_before)))
    assert validated["allowed"], validated


def test_a_fixed_field_is_compared_by_the_instances_in_effect(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    """An exclusion written down (or not) changes no fixed field: the spec admitted before
    exclusions were written may still scale."""
    variables = {"instances": [{"name": "HOME", "value": "/h"}, {"name": "USER", "value": "me"}]}
    state.set_policies(cluster_policy("env", {}, environmentVariables=variables))
    admitted_before = workload(
        image="pytorch", environmentVariables=[{"name": "HOME", "value": "/h"}]
    )
    written_now = workload(
        image="pytorch",
        environmentVariables=[{"name": "HOME", "value": "/h"}, {"name": "USER", "exclude": True}],
    )
    answer = response(routes[VALIDATE_WORKLOADS](review(written_now, "UPDATE", admitted_before)))
    assert answer["allowed"], answer


def test_a_policy_change_takes_effect_at_the_next_review(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    given = review(workload(image="pytorch", compute={"gpuDevicesRequest": 4}))
    state.set_policies(cluster_policy("limits", {"compute": {"gpuDevicesRequest": {"max": 8}}}))
    assert response(routes[VALIDATE_WORKLOADS](given))["allowed"]
    state.set_policies(cluster_policy("limits", {"compute": {"gpuDevicesRequest": {"max": 2}}}))
    refused = response(routes[VALIDATE_WORKLOADS](given))
    assert not refused["allowed"]
    assert "spec.compute.gpuDevicesRequest: " in refused["status"]["message"]


def test_the_mutating_webhook_patches_in_the_defaults_of_the_scope(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    state.set_policies(cluster_policy("defaults", {}, priorityClass="low"))
    answer = response(routes[MUTATE_WORKLOADS](review(workload(image="pytorch"))))
    held, patch = json.loads(base64.b64decode(answer["patch"]))
    assert held == {"op": "add", "path": "/metadata/finalizers", "value": [WORKLOAD_FINALIZER]}
    assert patch["value"]["priorityClass"] == "low"


def test_an_unreadable_policy_refuses_the_workloads_of_its_scopes(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    problem = FieldProblem(("spec", "rules", "image", "most"), "unknown", "WorkloadPolicy vision/x")
    state.unreadable = [UnreadablePolicy("WorkloadPolicy vision/x", VISION, (problem,))]
    state.version += 1
    refused = response(routes[VALIDATE_WORKLOADS](review(workload(image="pytorch"))))
    assert not refused["allowed"]
    assert refused["status"]["message"] == (
        "the policies of project vision cannot be applied, so no workload is admitted there: "
        "WorkloadPolicy vision/x: spec.rules.image.most: unknown"
    )
    # The mutating webhook leaves the refusal to the validating one.
    assert response(routes[MUTATE_WORKLOADS](review(workload(image="pytorch"))))["allowed"]


def test_a_workload_in_a_namespace_that_does_not_exist_is_refused(
    routes: dict[str, Any],
) -> None:
    refused = response(routes[VALIDATE_WORKLOADS](review(workload("elsewhere", image="x"))))
    assert refused["status"] == {
        "code": 404,
        "reason": "NotFound",
        "message": 'namespaces "elsewhere" not found',
    }


def test_a_project_policy_is_checked_in_the_scope_of_its_namespace(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    state.set_policies(cluster_policy("owner", {"image": {"required": True}}))
    project = {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPolicy",
        "metadata": {"name": "mine", "namespace": "vision"},
        "spec": {"workloadType": "training", "rules": {"image": {"required": False}}},
    }
    refused = response(routes[VALIDATE_POLICIES](review(project)))
    assert not refused["allowed"]
    assert "owned by cluster prod (policy 'owner')" in refused["status"]["message"]
    elsewhere = {**project, "metadata": {"name": "mine", "namespace": "elsewhere"}}
    refused = response(routes[VALIDATE_POLICIES](review(elsewhere)))
    assert refused["status"]["message"] == (
        "WorkloadPolicy elsewhere/mine is invalid: "
        'metadata.namespace: namespaces "elsewhere" not found'
    )


def test_a_body_that_is_not_a_review_is_an_error_for_the_server_to_answer(
    routes: dict[str, Any],
) -> None:
    with pytest.raises(BadReviewError):
        routes[VALIDATE_WORKLOADS]({"kind": "Pod"})


def test_an_asset_that_cannot_be_read_refuses_the_workloads_that_see_it(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    """An unreadable asset is refused by name (403), not a handler failure (500)."""
    state.unreadable_assets = [
        FieldProblem(("spec", "kind"), "expected one of pvc, git, s3", "ClusterAsset data")
    ]
    given = review(workload(image="pytorch"))
    assert response(routes[MUTATE_WORKLOADS](given))["allowed"]
    refused = response(routes[VALIDATE_WORKLOADS](given))
    assert not refused["allowed"]
    assert refused["status"]["code"] == 403
    message = refused["status"]["message"]
    assert message.startswith("the assets of namespace vision cannot be read")
    assert "ClusterAsset data" in message
    assert "spec.kind: expected one of pvc, git, s3" in message


def test_workloads_are_judged_on_the_operators_cluster_profile_from_the_state(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    fraction = review(workload(image="pytorch", compute={"gpuPortionRequest": 0.5}))
    refused = response(routes[VALIDATE_WORKLOADS](fraction))
    assert (refused["allowed"], refused["status"]["code"]) == (False, 422)
    assert refused["status"]["message"].startswith(
        "cannot render on cluster profile 'default': compute.gpuPortionRequest: a fraction of a "
        "GPU needs the KAI scheduler"
    )
    state.cluster_profile = dataclasses.replace(
        DEFAULT_PROFILE, name="kai", scheduler_type=SchedulerType.KAI
    )
    assert response(routes[VALIDATE_WORKLOADS](fraction))["allowed"]


def test_a_cluster_profile_that_cannot_be_read_refuses_every_workload_naming_it(
    state: MemoryState, routes: dict[str, Any]
) -> None:
    state.unreadable_profile = [
        FieldProblem(("spec", "fuse", "grant"), "expected one of none, …", "ClusterProfile prod")
    ]
    given = review(workload(image="pytorch"))
    refused = response(routes[VALIDATE_WORKLOADS](given))
    assert (refused["allowed"], refused["status"]["code"]) == (False, 403)
    assert refused["status"]["message"] == (
        "the cluster profile cannot be read, so no workload is admitted: ClusterProfile prod: "
        "spec.fuse.grant: expected one of none, …"
    )
