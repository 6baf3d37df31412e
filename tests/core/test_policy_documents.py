"""One reader for every policy document: each form read, and what is wrong with one reported at
the document's own paths."""

from __future__ import annotations

from typing import Any

import pytest

from podwright.core.cluster_resources import ClusterScopes, policy_from_resource, policy_objects
from podwright.core.field_paths import format_path
from podwright.core.policies import Policy, PolicyError, Scope
from podwright.core.policy_documents import deprecation, is_policy_file, policy_from_document
from podwright.core.workload_fields import WorkloadType

TRAINING = WorkloadType.TRAINING
TENANT = Scope()
PROD = Scope(("prod",))
RESEARCH = Scope(("prod", "research"))
RULES = {"compute": {"gpuDevicesRequest": {"max": 8}}}

POLICY_FILE = {
    "apiVersion": "podwright.dev/v1",
    "kind": "WorkloadPolicy",
    "metadata": {"name": "research-training"},
    "spec": {
        "scope": {"cluster": "prod", "department": "research"},
        "workloadType": "training",
        "rules": RULES,
    },
}
NAMESPACED = {
    "apiVersion": "podwright.dev/v1alpha1",
    "kind": "WorkloadPolicy",
    "metadata": {"name": "vision-training", "namespace": "vision"},
    "spec": {"workloadType": "training", "rules": RULES},
}
CLUSTER_WIDE = {
    "apiVersion": "podwright.dev/v1alpha1",
    "kind": "ClusterWorkloadPolicy",
    "metadata": {"name": "research-training"},
    "spec": {
        "scope": "department",
        "department": "research",
        "workloadType": "training",
        "rules": RULES,
    },
}
VISION = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "vision", "labels": {"podwright.dev/department": "research"}},
}
TEAM_CV = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "vision", "labels": {"podwright.dev/project": "cv"}},
}
SCOPES = ClusterScopes("prod")


def read(data: object, **given: Any) -> Policy:
    return policy_from_document(data, given.pop("source", "policies/gpu-limits.yaml"), **given)


def with_spec(document: dict[str, Any], **spec: object) -> dict[str, Any]:
    return {**document, "spec": {**document["spec"], **spec}}


@pytest.mark.parametrize(
    ("data", "given", "expected"),
    [
        pytest.param(POLICY_FILE, {}, ("research-training", RESEARCH, ("spec",)), id="policy-file"),
        pytest.param(
            POLICY_FILE,
            {"workload_type": TRAINING, "scope": RESEARCH, "name": "renamed"},
            ("renamed", RESEARCH, ("spec",)),
            id="policy-file-agreeing-and-renamed",
        ),
        pytest.param(
            {"rules": RULES},
            {"workload_type": TRAINING, "scope": PROD},
            ("gpu-limits", PROD, ()),
            id="runai-named-after-its-file",
        ),
        pytest.param(
            {"rules": RULES},
            {"workload_type": TRAINING, "scope": PROD, "source": "all.yaml#2"},
            ("all", PROD, ()),
            id="runai-second-document-of-a-file",
        ),
        pytest.param(
            {"defaults": None, "rules": None, "imposedAssets": None},
            {"workload_type": TRAINING, "scope": PROD, "name": "nothing"},
            ("nothing", PROD, ()),
            id="runai-sections-null",
        ),
        pytest.param(
            {"meta": {"scope": "project", "projectId": "7"}, "policy": {"rules": RULES}},
            {"workload_type": TRAINING, "scope": TENANT},
            ("gpu-limits", TENANT, ("policy",)),
            id="runai-api-body",
        ),
        pytest.param(
            NAMESPACED,
            {"scopes": SCOPES, "namespaces": {"vision": VISION}},
            ("vision-training", Scope(("prod", "research", "vision")), ("spec",)),
            id="namespaced-department-from-its-namespace",
        ),
        pytest.param(
            NAMESPACED,
            {"scopes": SCOPES, "namespaces": {"vision": TEAM_CV}},
            ("vision-training", Scope(("prod", "default", "cv")), ("spec",)),
            id="namespaced-project-from-its-namespace",
        ),
        pytest.param(
            NAMESPACED,
            {"scopes": SCOPES},
            ("vision-training", Scope(("prod", "default", "vision")), ("spec",)),
            id="namespaced-no-namespace-object",
        ),
        pytest.param(
            {**NAMESPACED, "metadata": {"name": "p"}},
            {"scopes": SCOPES, "namespace": "nlp"},
            ("p", Scope(("prod", "default", "nlp")), ("spec",)),
            id="namespaced-in-the-namespace-given",
        ),
        pytest.param(
            {**NAMESPACED, "metadata": {"name": "p"}},
            {"scopes": SCOPES},
            ("p", Scope(("prod", "default", "default")), ("spec",)),
            id="namespaced-in-default",
        ),
        pytest.param(
            NAMESPACED,
            {
                "scopes": SCOPES,
                "scope": Scope(("prod", "default", "vision")),
                "workload_type": TRAINING,
            },
            ("vision-training", Scope(("prod", "default", "vision")), ("spec",)),
            id="namespaced-agreeing",
        ),
        pytest.param(
            CLUSTER_WIDE,
            {"scopes": SCOPES, "name": "renamed"},
            ("renamed", RESEARCH, ("spec",)),
            id="cluster-wide-department",
        ),
        pytest.param(
            with_spec(CLUSTER_WIDE, scope="cluster", department=None),
            {"scopes": SCOPES},
            ("research-training", PROD, ("spec",)),
            id="cluster-wide-cluster",
        ),
        pytest.param(
            {**CLUSTER_WIDE, "spec": {"scope": "tenant", "workloadType": "training"}},
            {},
            ("research-training", TENANT, ("spec",)),
            id="cluster-wide-tenant-needs-no-cluster-name",
        ),
    ],
)
def test_every_form_is_read(
    data: dict[str, Any], given: dict[str, Any], expected: tuple[str, Scope, tuple[str, ...]]
) -> None:
    policy = read(data, **given)
    assert (policy.name, policy.scope, policy.document_prefix) == expected
    assert policy.workload_type is TRAINING
    assert policy.source == given.get("source", "policies/gpu-limits.yaml")


@pytest.mark.parametrize(
    ("data", "given", "problems"),
    [
        pytest.param(
            ["rules"],
            {},
            [("", "expected a policy document (a mapping), got ['rules'] (list)")],
            id="no-mapping",
        ),
        pytest.param(
            {"apiVersion": "v1", "kind": "ConfigMap"},
            {},
            [
                (
                    "apiVersion",
                    "apiVersion v1, kind ConfigMap: expected a policy resource "
                    "(podwright.dev/v1alpha1 WorkloadPolicy or ClusterWorkloadPolicy), a Run:ai "
                    "policy document (defaults, rules, imposedAssets, with no apiVersion or "
                    "kind) or a deprecated policy file (podwright.dev/v1 WorkloadPolicy)",
                )
            ],
            id="other-kind",
        ),
        pytest.param(
            {"kind": "WorkloadPolicy", "rules": RULES},
            {},
            [("kind", "apiVersion None, kind WorkloadPolicy: expected a policy resource")],
            id="kind-without-api-version",
        ),
        pytest.param(
            {**NAMESPACED, "kind": "Workload"},
            {"scopes": SCOPES},
            [
                (
                    "kind",
                    "expected 'WorkloadPolicy' or 'ClusterWorkloadPolicy' (a policy resource of "
                    "podwright.dev/v1alpha1), got 'Workload' (string)",
                )
            ],
            id="resource-of-another-kind",
        ),
        pytest.param(
            {"rules": RULES},
            {},
            [
                (
                    "",
                    "a Run:ai policy document says neither its workload type nor its scope: give "
                    "--type and --scope",
                )
            ],
            id="runai-without-type-or-scope",
        ),
        pytest.param(
            {"rules": {"image": {"requird": True}}},
            {"workload_type": TRAINING},
            [
                (
                    "",
                    "a Run:ai policy document says neither its workload type nor its scope: give "
                    "--scope",
                ),
                ("rules.image.requird", "unknown rule 'requird' (did you mean 'required'?)"),
            ],
            id="runai-without-scope-checked-all-the-same",
        ),
        pytest.param(
            {"rules": RULES, "meta": {"scope": "tenant"}},
            {"workload_type": TRAINING, "scope": TENANT},
            [
                (
                    "meta",
                    "unknown field 'meta': a Run:ai policy document holds defaults, rules and "
                    "imposedAssets (a podwright policy file has apiVersion podwright.dev/v1 and "
                    "kind WorkloadPolicy; Run:ai's API request body holds meta and policy)",
                )
            ],
            id="runai-meta-without-policy",
        ),
        pytest.param(
            {"default": {"image": "x"}},
            {"workload_type": TRAINING, "scope": TENANT},
            [("default", "unknown field 'default' (did you mean 'defaults'?): a Run:ai policy")],
            id="runai-misspelt-section",
        ),
        pytest.param(
            {"meta": {}, "policy": {"rules": {"image": {"max": 1}}}, "labels": 1},
            {"workload_type": TRAINING, "scope": TENANT},
            [
                (
                    "labels",
                    "unknown field 'labels': Run:ai's API request body holds meta and policy",
                ),
                (
                    "policy.rules.image.max",
                    "a string field cannot carry the rule 'max' (string fields take required, "
                    "canEdit, options)",
                ),
            ],
            id="runai-api-body-at-its-paths",
        ),
        pytest.param(
            {"meta": {}, "policy": ["rules"]},
            {"workload_type": TRAINING, "scope": TENANT},
            [
                (
                    "policy",
                    "expected a mapping of defaults, rules and imposedAssets, got ['rules'] (list)",
                )
            ],
            id="runai-api-body-without-a-policy",
        ),
        pytest.param(
            {"rules": RULES},
            {"workload_type": TRAINING, "scope": TENANT, "source": "<stdin>"},
            [
                (
                    "",
                    "the policy's name '<stdin>' (from the file name) must consist of lower-case "
                    "letters, digits, '-' and '.', and start and end with a letter or digit: "
                    "give --name",
                )
            ],
            id="runai-name-from-a-file-name-that-is-none",
        ),
        pytest.param(
            {"rules": RULES},
            {"workload_type": TRAINING, "scope": TENANT, "name": "GPU"},
            [("", "the policy's name 'GPU' (--name) must consist of lower-case letters")],
            id="runai-bad-name",
        ),
        pytest.param(
            {"rules": RULES},
            {"workload_type": TRAINING, "scope": TENANT, "source": None},
            [("", "a Run:ai policy document has no name: give --name")],
            id="runai-without-source-or-name",
        ),
        pytest.param(
            {"rules": {"compute": {"gpuDevicesRequest": {"max": 8, "Max": 9}}}},
            {"workload_type": TRAINING, "scope": TENANT},
            [
                (
                    "rules.compute.gpuDevicesRequest.Max",
                    "'Max' reads as 'max', which is given too: give it once",
                )
            ],
            id="runai-both-spellings",
        ),
        pytest.param(
            {"Rules": {"compute": {"gpuDevicesRequest": {"min": 9, "Max": 8}}}},
            {"workload_type": TRAINING, "scope": TENANT},
            [("Rules.compute.gpuDevicesRequest.min", "min 9 is above max 8")],
            id="runai-problem-below-a-respelled-key",
        ),
        pytest.param(
            POLICY_FILE,
            {"scope": PROD, "workload_type": WorkloadType.WORKSPACE},
            [
                (
                    "spec.scope",
                    "the file says department research, and --scope says cluster prod: leave "
                    "--scope out",
                ),
                (
                    "spec.workloadType",
                    "the file says training, and --type says workspace: leave --type out",
                ),
            ],
            id="policy-file-disagreeing",
        ),
        pytest.param(
            with_spec(POLICY_FILE, rules={"image": {"min": 1}}),
            {"name": "Bad"},
            [
                ("", "the policy's name 'Bad' (--name) must consist"),
                ("spec.rules.image.min", "a string field cannot carry the rule 'min'"),
            ],
            id="policy-file-bad-name-and-rule",
        ),
        pytest.param(
            NAMESPACED,
            {},
            [
                (
                    "metadata.namespace",
                    "the scope of this WorkloadPolicy lies in a cluster: give the cluster's "
                    "name (--cluster-name)",
                )
            ],
            id="namespaced-without-the-cluster-name",
        ),
        pytest.param(
            CLUSTER_WIDE,
            {},
            [("spec.scope", "the scope of this ClusterWorkloadPolicy lies in a cluster")],
            id="cluster-wide-without-the-cluster-name",
        ),
        pytest.param(
            {**CLUSTER_WIDE, "spec": {"workloadType": "training"}},
            {},
            [("kind", "the scope of this ClusterWorkloadPolicy lies in a cluster")],
            id="cluster-wide-of-the-cluster-by-default",
        ),
        pytest.param(
            with_spec(CLUSTER_WIDE, scope="region"),
            {"scopes": SCOPES},
            [("spec.scope", "expected one of tenant, cluster, department, got 'region'")],
            id="cluster-wide-unknown-scope",
        ),
        pytest.param(
            with_spec(CLUSTER_WIDE, department=None),
            {"scopes": SCOPES},
            [("spec.department", "a policy of scope department names its department")],
            id="cluster-wide-without-department",
        ),
        pytest.param(
            with_spec(NAMESPACED, scope="tenant"),
            {"scopes": SCOPES},
            [
                (
                    "spec.scope",
                    "a WorkloadPolicy is the policy of its namespace's project and says no scope",
                )
            ],
            id="namespaced-with-a-scope",
        ),
        pytest.param(
            NAMESPACED,
            {"scopes": SCOPES, "namespaces": {"vision": VISION}, "scope": PROD},
            [
                (
                    "metadata.namespace",
                    "the resource says project vision, and --scope says cluster prod: leave "
                    "--scope out",
                )
            ],
            id="namespaced-disagreeing",
        ),
        pytest.param(
            CLUSTER_WIDE,
            {"scopes": SCOPES, "workload_type": WorkloadType.INFERENCE},
            [
                (
                    "spec.workloadType",
                    "the resource says training, and --type says inference: leave --type out",
                )
            ],
            id="cluster-wide-disagreeing",
        ),
        pytest.param(
            with_spec(CLUSTER_WIDE, rules={"image": {"Min": 1}}),
            {"scopes": SCOPES},
            [("spec.rules.image.Min", "a string field cannot carry the rule 'min'")],
            id="resource-problems-at-its-paths",
        ),
    ],
)
def test_problems_name_the_document_and_the_path_as_written(
    data: object, given: dict[str, Any], problems: list[tuple[str, str]]
) -> None:
    source = given.get("source", "policies/gpu-limits.yaml")
    with pytest.raises(PolicyError) as caught:
        read(data, **given)
    found = caught.value.problems
    assert [format_path(problem.path) for problem in found] == [path for path, _ in problems]
    for problem, (_, message) in zip(found, problems, strict=True):
        assert problem.message.startswith(message), problem.message
        assert problem.source == source


@pytest.mark.parametrize(
    ("data", "given", "notes"),
    [
        pytest.param(
            {"Policy": {"Rules": RULES}, "meta": {}},
            {"workload_type": TRAINING, "scope": TENANT},
            [("Policy", "read as 'policy'"), ("Policy.Rules", "read as 'rules'")],
            id="runai-api-body",
        ),
        pytest.param(
            {"rules": {"compute": {"cpuCoreRequest": {"Step": 2}}}},
            {"workload_type": TRAINING, "scope": TENANT},
            [("rules.compute.cpuCoreRequest.Step", "read as 'step'")],
            id="runai",
        ),
        pytest.param(
            with_spec(CLUSTER_WIDE, rules={"compute": {"cpuCoreRequest": {"Step": 2}}}),
            {"scopes": SCOPES},
            [("spec.rules.compute.cpuCoreRequest.Step", "read as 'step'")],
            id="resource",
        ),
        pytest.param(
            with_spec(POLICY_FILE, rules={"compute": {"cpuCoreRequest": {"Step": 2}}}),
            {},
            [("spec.rules.compute.cpuCoreRequest.Step", "read as 'step'")],
            id="policy-file",
        ),
    ],
)
def test_notes_are_at_the_path_as_written_in_the_document(
    data: dict[str, Any], given: dict[str, Any], notes: list[tuple[str, str]]
) -> None:
    policy = read(data, **given)
    assert [(format_path(note.path), note.message) for note in policy.notes] == notes
    assert {note.source for note in policy.notes} == {"policies/gpu-limits.yaml"}
    assert "Step" not in str(policy.body)


def test_a_resource_is_the_policy_its_cluster_reads() -> None:
    """The same Policy as the cluster's policy state makes of the object, but for its source."""
    policy = read(CLUSTER_WIDE, scopes=SCOPES)
    assert policy == policy_from_resource(CLUSTER_WIDE, RESEARCH, "policies/gpu-limits.yaml")


def _policy_file(scope: object, name: str = "p") -> dict[str, Any]:
    return {
        "apiVersion": "podwright.dev/v1",
        "kind": "WorkloadPolicy",
        "metadata": {"name": name},
        "spec": {"scope": scope, "workloadType": "training", "enforcement": "warn", "rules": RULES},
    }


@pytest.mark.parametrize(
    ("scope", "kinds"),
    [
        pytest.param("tenant", ["ClusterWorkloadPolicy"], id="tenant"),
        pytest.param({"cluster": "prod"}, ["ClusterWorkloadPolicy"], id="cluster"),
        pytest.param(
            {"cluster": "prod", "department": "research"},
            ["ClusterWorkloadPolicy"],
            id="department",
        ),
        pytest.param(
            {"cluster": "prod", "department": "research", "project": "vision"},
            ["Namespace", "WorkloadPolicy"],
            id="project",
        ),
    ],
)
def test_a_policy_file_is_the_policy_its_cluster_objects_are(
    scope: object, kinds: list[str]
) -> None:
    """What a deprecated policy file says to write instead is read, by the reader the cluster's
    policy state shares (:class:`ClusterScopes`), as the same policy in the same scope."""
    policy = read(_policy_file(scope))
    objects = policy_objects(policy)
    assert [obj["kind"] for obj in objects] == kinds
    namespaces = {
        str(obj["metadata"]["name"]): obj  # type: ignore[index]
        for obj in objects
        if obj["kind"] == "Namespace"
    }
    (resource,) = (obj for obj in objects if obj["kind"] != "Namespace")
    again = read(resource, scopes=SCOPES, namespaces=namespaces)
    assert again == policy


@pytest.mark.parametrize(
    ("scope", "instead"),
    [
        pytest.param("tenant", "a ClusterWorkloadPolicy of scope tenant", id="tenant"),
        pytest.param(
            {"cluster": "prod", "department": "research"},
            "a ClusterWorkloadPolicy of scope department",
            id="department",
        ),
        pytest.param(
            {"cluster": "prod", "department": "research", "project": "vision"},
            "a WorkloadPolicy in the project's namespace, and the Namespace labelled "
            "podwright.dev/department=research",
            id="project",
        ),
    ],
)
def test_a_policy_file_s_deprecation_says_what_to_write_and_where_its_cluster_went(
    scope: object, instead: str
) -> None:
    data = _policy_file(scope)
    assert is_policy_file(data)
    assert not is_policy_file(NAMESPACED)
    message = deprecation(read(data))
    assert message.startswith(
        "a WorkloadPolicy of podwright.dev/v1 (its scope in spec.scope) is deprecated: no "
        f"cluster serves it; write it as the objects a cluster serves, {instead} (apiVersion: "
        "podwright.dev/v1alpha1); 'podwright convert --in-place FILE' rewrites the file"
    )
    cluster = (
        ". Those objects do not name their cluster (prod here): they lie in the cluster they "
        "are applied to, and offline in the one --cluster-name names (--cluster-name prod; "
        "cluster= in Python)"
    )
    assert message.endswith(cluster) == (scope != "tenant")
