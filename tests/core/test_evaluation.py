"""Evaluation beyond single rules: itemized fields, scopes, assets, defaultFrom, modes."""

from __future__ import annotations

import re

import pytest

from podwright.core.assets import catalogue_from_data
from podwright.core.evaluation import Evaluation
from podwright.core.policies import PolicyError
from podwright.core.workloads import WorkloadInputError
from tests.policy_helpers import CLUSTER, DEPARTMENT, PROJECT, issues, make_policy, run

ENV_POLICY = {
    "defaults": {
        "environmentVariables": {
            "instances": [{"name": "HOME", "value": "/home/me"}, {"name": "USER", "value": "me"}],
        }
    },
    "rules": {"environmentVariables": {"instances": {"locked": ["HOME"]}}},
}


@pytest.mark.parametrize(
    ("submitted", "expected"),
    [
        ([], {"HOME": "/home/me", "USER": "me"}),
        ([{"name": "USER", "exclude": True}], {"HOME": "/home/me"}),
        ([{"name": "USER", "value": "you"}], {"HOME": "/home/me", "USER": "you"}),
        ([{"name": "HOME", "value": "/home/me"}], {"HOME": "/home/me", "USER": "me"}),
        ([{"name": "EXTRA", "value": "1"}], {"HOME": "/home/me", "USER": "me", "EXTRA": "1"}),
        ([{"name": "NOPE", "exclude": True}], {"HOME": "/home/me", "USER": "me"}),
        ([{"name": "HOME", "exclude": True}], [("environmentVariables[HOME]", "locked")]),
        ([{"name": "HOME", "value": "/root"}], [("environmentVariables[HOME]", "locked")]),
    ],
)
def test_itemized_instances(submitted: list[dict[str, object]], expected: object) -> None:
    evaluation = run([make_policy(ENV_POLICY)], {"environmentVariables": submitted})
    if isinstance(expected, list):
        assert issues(evaluation) == expected
        return
    variables = evaluation.workload["environmentVariables"]
    assert isinstance(variables, list)
    assert {item["name"]: item["value"] for item in variables} == expected


def test_can_add_false_refuses_new_instances_but_allows_changes() -> None:
    policy = make_policy(
        {
            "defaults": {
                "storage": {"nfs": {"instances": [{"name": "data", "server": "nfs", "path": "/x"}]}}
            },
            "rules": {"storage": {"nfs": {"instances": {"canAdd": False}}}},
        }
    )
    added = run([policy], {"storage": {"nfs": [{"name": "mine", "server": "s", "path": "/y"}]}})
    assert issues(added) == [("storage.nfs[mine]", "canAdd")]
    assert "'data'" in added.violations[0].details
    changed = run([policy], {"storage": {"nfs": [{"name": "data", "readOnly": True}]}})
    assert changed.accepted
    assert changed.workload["storage"] == {
        "nfs": [{"name": "data", "server": "nfs", "path": "/x", "readOnly": True}]
    }
    assert changed.sources["storage.nfs[data].server"] == "policy default (cluster prod)"
    assert changed.sources["storage.nfs[data].readOnly"] == "submission"


def test_attribute_rules_apply_to_every_instance() -> None:
    policy = make_policy(
        {
            "defaults": {"ports": {"instances": [{"name": "jupyter", "container": 8888}]}},
            "rules": {
                "ports": {
                    "attributes": {"container": {"min": 1024}, "serviceType": {"required": True}}
                }
            },
        }
    )
    evaluation = run(
        [policy], {"ports": [{"name": "ssh", "container": 22, "serviceType": "NodePort"}]}
    )
    assert sorted(issues(evaluation)) == [
        ("ports[jupyter].serviceType", "required"),
        ("ports[ssh].container", "min"),
    ]


def test_attribute_default_on_policy_instances_and_nested_attributes() -> None:
    policy = make_policy(
        {
            "defaults": {
                "storage": {
                    "pvc": {
                        "instances": [{"name": "home", "claimName": "home", "path": "/home"}],
                        "attributes": {"readOnly": False, "claimInfo": {"size": "10Gi"}},
                    }
                }
            },
            "rules": {
                "storage": {"pvc": {"attributes": {"claimInfo": {"size": {"max": "100Gi"}}}}}
            },
        }
    )
    evaluation = run(
        [policy],
        {"storage": {"pvc": [{"name": "scratch", "claimName": "s", "claimInfo": {"size": "1Ti"}}]}},
    )
    assert issues(evaluation) == [("storage.pvc[scratch].claimInfo.size", "max")]
    accepted = run([policy], {"storage": {"pvc": [{"name": "scratch", "claimName": "s"}]}})
    assert accepted.values["storage.pvc[home].readOnly"] is False
    assert accepted.sources["storage.pvc[home].readOnly"] == "attribute default (cluster prod)"
    assert accepted.values["storage.pvc[scratch].claimInfo.size"] == "10Gi"


def test_default_from_a_sibling_field_times_a_factor() -> None:
    policy = make_policy(
        {
            "defaults": {"compute": {"cpuCoreLimit": 8, "cpuMemoryLimit": "4Gi"}},
            "rules": {
                "compute": {
                    "cpuCoreRequest": {
                        "defaultFrom": {"field": "compute.cpuCoreLimit", "factor": 0.25}
                    },
                    "cpuMemoryRequest": {"defaultFrom": {"field": "cpuMemoryLimit", "factor": 0.5}},
                }
            },
        }
    )
    evaluation = run([policy], {"compute": {"cpuCoreLimit": 6}})
    assert evaluation.values["compute.cpuCoreRequest"] == 1.5
    assert evaluation.sources["compute.cpuCoreRequest"] == (
        "defaultFrom compute.cpuCoreLimit × 0.25 (cluster prod)"
    )
    assert evaluation.values["compute.cpuMemoryRequest"] == "2Gi"
    # A submitted value wins over the computed default.
    assert run([policy], {"compute": {"cpuCoreRequest": 1}}).values["compute.cpuCoreRequest"] == 1


def test_default_from_inside_an_itemized_field_reads_the_same_instance() -> None:
    policy = make_policy(
        {
            "rules": {
                "ports": {
                    "attributes": {"external": {"defaultFrom": {"field": "container", "factor": 1}}}
                }
            }
        }
    )
    evaluation = run(
        [policy], {"ports": [{"name": "a", "container": 8080}, {"name": "b", "container": 9090}]}
    )
    assert evaluation.values["ports[a].external"] == 8080
    assert evaluation.values["ports[b].external"] == 9090


def test_nearest_scope_default_wins_and_sources_name_the_scope() -> None:
    cluster = make_policy(
        {"defaults": {"image": "base", "imagePullPolicy": "Always"}}, scope=CLUSTER, name="c"
    )
    department = make_policy({"defaults": {"image": "research"}}, scope=DEPARTMENT, name="d")
    project = make_policy({"defaults": {"nodeType": "a100"}}, scope=PROJECT, name="p")
    evaluation = run([project, cluster, department], {})
    assert evaluation.values == {
        "image": "research",
        "imagePullPolicy": "Always",
        "nodeType": "a100",
    }
    assert evaluation.sources == {
        "image": "policy default (department research)",
        "imagePullPolicy": "policy default (cluster prod)",
        "nodeType": "policy default (project vision)",
    }


def test_policies_of_other_branches_and_types_do_not_apply() -> None:
    other = make_policy({"defaults": {"image": "other"}}, scope={"cluster": "dev"}, name="dev")
    training = make_policy({"defaults": {"image": "train"}}, workload_type="training", name="t")
    assert run([other, training], {}).values == {}


def test_default_instances_merge_by_key_across_scopes() -> None:
    cluster = make_policy(
        {
            "defaults": {
                "labels": {
                    "instances": [{"name": "team", "value": "all"}, {"name": "tier", "value": "1"}]
                }
            }
        },
        scope=CLUSTER,
        name="c",
    )
    project = make_policy(
        {"defaults": {"labels": {"instances": [{"name": "team", "value": "vision"}]}}},
        scope=PROJECT,
        name="p",
    )
    evaluation = run([cluster, project], {})
    assert evaluation.workload["labels"] == [
        {"name": "team", "value": "vision"},
        {"name": "tier", "value": "1"},
    ]
    assert evaluation.sources["labels[team].value"] == "policy default (project vision)"


UNNAMED_NFS = {"server": "nfs", "path": "/export", "mountPath": "/data"}
UNNAMED_POLICY = {
    "defaults": {
        "storage": {
            "nfs": {
                "instances": [UNNAMED_NFS, {"server": "nfs", "path": "/b", "mountPath": "/b"}],
                "attributes": {"readOnly": True},
            }
        }
    }
}


def _unnamed_names(evaluation: Evaluation) -> list[str]:
    storage = evaluation.workload["storage"]
    assert isinstance(storage, dict)
    return [instance["name"] for instance in storage["nfs"]]


def test_a_policys_unnamed_instances_are_always_added_and_named_after_their_attributes() -> None:
    """The reference's storage examples name no instance: each is added, named ``unnamed-``
    and a digest of its attributes (the same in every evaluation), with the attribute
    defaults; two of them coexist."""
    evaluation = run([make_policy(UNNAMED_POLICY)], {})
    first, second = _unnamed_names(evaluation)
    assert re.fullmatch(r"unnamed-[0-9a-f]{8}", first)
    assert first != second
    assert evaluation.workload["storage"] == {
        "nfs": [
            {"name": first, **UNNAMED_NFS, "readOnly": True},
            {"name": second, "server": "nfs", "path": "/b", "mountPath": "/b", "readOnly": True},
        ]
    }
    assert evaluation.sources[f"storage.nfs[{first}].server"] == "policy default (cluster prod)"
    assert evaluation.sources[f"storage.nfs[{first}].readOnly"] == (
        "attribute default (cluster prod)"
    )
    assert _unnamed_names(run([make_policy(UNNAMED_POLICY)], {})) == [first, second]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, []),
        ({"readOnly": True}, []),
        ({**UNNAMED_NFS, "readOnly": True}, []),
        ({"readOnly": False}, [("storage.nfs[{name}]", "locked")]),
        ({"path": "/elsewhere"}, [("storage.nfs[{name}]", "locked")]),
        ({"exclude": True}, [("storage.nfs[{name}]", "locked")]),
    ],
    ids=["named-alone", "attribute-default", "as-in-effect", "changed", "moved", "excluded"],
)
def test_an_unnamed_instance_is_neither_changed_nor_excluded(
    change: dict[str, object], expected: list[tuple[str, str]]
) -> None:
    """Nothing in a submission names it but the name evaluation gave it, which an effective
    workload written back (the mutating webhook's) repeats: restating it changes nothing."""
    policy = make_policy(UNNAMED_POLICY)
    name = _unnamed_names(run([policy], {}))[0]
    evaluation = run([policy], {"storage": {"nfs": [{"name": name, **change}]}})
    assert issues(evaluation) == [(field.format(name=name), rule) for field, rule in expected]
    if expected:
        assert "is an unnamed policy default (cluster prod) and cannot be" in (
            evaluation.violations[0].details
        )


def test_an_effective_workload_evaluated_again_is_the_same_workload() -> None:
    """The mutating webhook writes the effective workload into the Workload, and the validating
    webhook evaluates that: default instances, named or not, locked or not, with attribute
    defaults, must come out as they went in, and nothing is added twice."""
    policy = make_policy(
        {
            "defaults": {
                "storage": {
                    "nfs": {"instances": [UNNAMED_NFS], "attributes": {"readOnly": True}},
                    "hostPath": {
                        "instances": [{"name": "a", "path": "/x", "mountPath": "/y"}],
                        "attributes": {"readOnly": True},
                    },
                }
            },
            "rules": {
                "storage": {
                    "hostPath": {"instances": {"locked": ["a"]}},
                    "nfs": {"instances": {"canAdd": False}},
                }
            },
        }
    )
    effective = run([policy], {"image": "x"})
    again = run([policy], effective.workload)
    assert again.accepted, again.violations
    assert again.workload == effective.workload


def test_unnamed_instances_of_every_scope_are_added_and_equal_ones_are_one() -> None:
    cluster = make_policy(
        {"defaults": {"storage": {"nfs": {"instances": [UNNAMED_NFS]}}}}, scope=CLUSTER, name="c"
    )
    other = {"server": "nfs", "path": "/p", "mountPath": "/p"}
    project = make_policy(
        {"defaults": {"storage": {"nfs": {"instances": [UNNAMED_NFS, other]}}}},
        scope=PROJECT,
        name="p",
    )
    evaluation = run([cluster, project], {})
    first, second = _unnamed_names(evaluation)
    assert evaluation.sources[f"storage.nfs[{first}].server"] == "policy default (project vision)"
    assert evaluation.sources[f"storage.nfs[{second}].path"] == "policy default (project vision)"
    assert _unnamed_names(run([cluster], {})) == [first]


def test_a_submission_names_every_instance_it_gives() -> None:
    with pytest.raises(WorkloadInputError, match="every instance needs its key 'name'"):
        run([make_policy(UNNAMED_POLICY)], {"storage": {"nfs": [UNNAMED_NFS]}})


def test_a_rule_is_owned_by_one_scope_of_a_branch() -> None:
    cluster = make_policy(
        {"rules": {"compute": {"gpuDevicesRequest": {"max": 8}}}}, scope=CLUSTER, name="c"
    )
    project = make_policy(
        {"rules": {"compute": {"gpuDevicesRequest": {"max": 16}}}}, scope=PROJECT, name="p"
    )
    with pytest.raises(PolicyError) as caught:
        run([cluster, project], {})
    (problem,) = caught.value.problems
    assert problem.source == "p"
    assert problem.path == ("spec", "rules", "compute", "gpuDevicesRequest")
    assert "owned by cluster prod (policy 'c')" in problem.message


def test_a_default_must_fit_the_rules_of_other_scopes() -> None:
    cluster = make_policy(
        {"rules": {"compute": {"gpuDevicesRequest": {"max": 8}}}}, scope=CLUSTER, name="c"
    )
    project = make_policy(
        {"defaults": {"compute": {"gpuDevicesRequest": 9}}}, scope=PROJECT, name="p"
    )
    with pytest.raises(PolicyError, match=r"breaks the 'max' rule of cluster prod"):
        run([cluster, project], {})


def test_two_policies_of_one_scope_and_type_conflict() -> None:
    first = make_policy({}, name="a")
    second = make_policy({}, name="b")
    with pytest.raises(PolicyError, match="a second workspace policy for cluster prod"):
        run([first, second], {})


def test_default_from_cycle_across_scopes() -> None:
    cluster = make_policy(
        {
            "rules": {
                "compute": {"cpuCoreRequest": {"defaultFrom": {"field": "compute.cpuCoreLimit"}}}
            }
        },
        scope=CLUSTER,
        name="c",
    )
    project = make_policy(
        {
            "rules": {
                "compute": {"cpuCoreLimit": {"defaultFrom": {"field": "compute.cpuCoreRequest"}}}
            }
        },
        scope=PROJECT,
        name="p",
    )
    with pytest.raises(PolicyError, match="defaultFrom forms a cycle across scopes"):
        run([cluster, project], {})


CATALOGUE = catalogue_from_data(
    {
        "apiVersion": "podwright.dev/v1",
        "kind": "AssetCatalogue",
        "assets": [
            {
                "id": "a1",
                "name": "datasets",
                "kind": "pvc",
                "spec": {"claimName": "ds", "path": "/data"},
            },
            {
                "id": "a2",
                "name": "private",
                "kind": "s3",
                "spec": {"bucket": "b"},
                "credentials": "key",
            },
            {
                "id": "a3",
                "name": "repo",
                "kind": "git",
                "spec": {"repository": "r", "passwordSecret": "s"},
            },
            {"id": "a4", "name": "public", "kind": "s3", "spec": {"bucket": "open"}},
        ],
    }
)


def test_an_imposed_asset_is_a_default_instance_that_cannot_be_removed() -> None:
    policy = make_policy({"imposedAssets": ["a1"]})
    evaluation = run([policy], {}, catalogue=CATALOGUE)
    assert evaluation.workload["storage"] == {
        "pvc": [{"name": "datasets", "claimName": "ds", "path": "/data"}]
    }
    assert (
        evaluation.sources["storage.pvc[datasets].claimName"] == "imposed asset a1 (cluster prod)"
    )
    removed = run(
        [policy], {"storage": {"pvc": [{"name": "datasets", "exclude": True}]}}, catalogue=CATALOGUE
    )
    assert issues(removed) == [("storage.pvc[datasets]", "locked")]
    changed = run(
        [policy], {"storage": {"pvc": [{"name": "datasets", "path": "/mine"}]}}, catalogue=CATALOGUE
    )
    assert issues(changed) == [("storage.pvc[datasets]", "locked")]
    assert "changed: path" in changed.violations[0].details


@pytest.mark.parametrize(
    ("asset", "workload_type", "message"),
    [
        ("a2", "workspace", "references credentials"),
        ("a3", "workspace", "references credentials"),
        ("nope", "workspace", "not in the catalogue"),
        ("a4", "inference", "inference workloads cannot mount"),
    ],
)
def test_assets_that_cannot_be_imposed(asset: str, workload_type: str, message: str) -> None:
    policy = make_policy({"imposedAssets": [asset]}, workload_type=workload_type)
    with pytest.raises(PolicyError, match=message) as caught:
        run([policy], {}, workload_type=workload_type, catalogue=CATALOGUE)
    assert caught.value.problems[0].path == ("spec", "imposedAssets", 0)


def test_distributed_roles_get_imposed_assets_and_their_own_rules() -> None:
    policy = make_policy(
        {
            "imposedAssets": ["a1"],
            "defaults": {"worker": {"numWorkers": 2, "distributedFramework": "PyTorch"}},
            "rules": {"master": {"compute": {"gpuDevicesRequest": {"max": 0}}}},
        },
        workload_type="distributed",
    )
    evaluation = run(
        [policy],
        {"master": {"image": "x", "compute": {"gpuDevicesRequest": 1}}, "worker": {"image": "x"}},
        workload_type="distributed",
        catalogue=CATALOGUE,
    )
    assert issues(evaluation) == [("master.compute.gpuDevicesRequest", "max")]
    accepted = run(
        [policy],
        {"worker": {"image": "x", "maxReplicas": 4}},
        workload_type="distributed",
        catalogue=CATALOGUE,
    )
    assert accepted.values["worker.numWorkers"] == 2
    assert accepted.values["master.storage.pvc[datasets].claimName"] == "ds"
    assert accepted.values["worker.storage.pvc[datasets].claimName"] == "ds"


def test_framework_specific_fields_need_their_framework() -> None:
    policy = make_policy(
        {"defaults": {"worker": {"slotsPerWorker": 2}}}, workload_type="distributed"
    )
    mpi = run([policy], {"worker": {"distributedFramework": "MPI"}}, workload_type="distributed")
    assert mpi.values["worker.slotsPerWorker"] == 2
    # A default for another framework's field does not apply; a submitted one is refused.
    torch = run(
        [policy], {"worker": {"distributedFramework": "PyTorch"}}, workload_type="distributed"
    )
    assert torch.accepted
    assert "worker.slotsPerWorker" not in torch.values
    refused = run(
        [policy],
        {"worker": {"distributedFramework": "PyTorch", "sshAuthMountPath": "/ssh"}},
        workload_type="distributed",
    )
    assert issues(refused) == [("worker.sshAuthMountPath", "distributedFramework")]
    assert (
        refused.violations[0].details
        == "sshAuthMountPath '/ssh' (submission) applies only to MPI; "
        "the framework is 'PyTorch' (submission)"
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"compute": {"cpuCoreRequest": 2, "cpuCoreLimit": 1}}, "compute.cpuCoreLimit"),
        (
            {"compute": {"cpuMemoryRequest": "2Gi", "cpuMemoryLimit": "2G"}},
            "compute.cpuMemoryLimit",
        ),
        (
            {"compute": {"gpuMemoryRequest": "8Gi", "gpuMemoryLimit": "4Gi"}},
            "compute.gpuMemoryLimit",
        ),
    ],
)
def test_limits_may_not_be_below_requests(spec: dict[str, object], field: str) -> None:
    assert issues(run([], spec)) == [(field, "consistency")]


def test_enforcement_modes() -> None:
    rules = {"rules": {"compute": {"gpuDevicesRequest": {"max": 1}}}}
    spec = {"compute": {"gpuDevicesRequest": 2}}
    enforced = run([make_policy(rules, enforcement="enforce")], spec)
    assert not enforced.accepted
    warned = run([make_policy(rules, enforcement="warn")], spec)
    assert warned.accepted
    assert [(issue.field, issue.rule) for issue in warned.warnings] == [
        ("compute.gpuDevicesRequest", "max")
    ]
    assert warned.values["compute.gpuDevicesRequest"] == 2
    audited = run([make_policy(rules, enforcement="audit")], spec)
    assert audited.accepted
    assert not audited.warnings
    assert [(issue.field, issue.rule) for issue in audited.audited] == [
        ("compute.gpuDevicesRequest", "max")
    ]


ENV_POLICY_NO_ADDING = {
    "defaults": ENV_POLICY["defaults"],
    "rules": {"environmentVariables": {"instances": {"locked": ["HOME"], "canAdd": False}}},
}


@pytest.mark.parametrize("mode", ["warn", "audit"])
@pytest.mark.parametrize(
    ("submitted", "rule", "expected"),
    [
        (
            [{"name": "EXTRA", "value": "1"}],
            "canAdd",
            {"HOME": "/home/me", "USER": "me", "EXTRA": "1"},
        ),
        ([{"name": "HOME", "value": "/root"}], "locked", {"HOME": "/root", "USER": "me"}),
        ([{"name": "HOME", "exclude": True}], "locked", {"USER": "me"}),
    ],
)
def test_an_itemized_rule_that_does_not_enforce_lets_the_submission_stand(
    mode: str, submitted: list[dict[str, object]], rule: str, expected: dict[str, str]
) -> None:
    """As a value rule in warn or audit mode keeps the submitted value: the instance added,
    changed or excluded stands, with the violation."""
    evaluation = run(
        [make_policy(ENV_POLICY_NO_ADDING, enforcement=mode)], {"environmentVariables": submitted}
    )
    assert evaluation.accepted
    reported = evaluation.warnings if mode == "warn" else evaluation.audited
    assert [(issue.field, issue.rule) for issue in reported] == [
        (f"environmentVariables[{submitted[0]['name']}]", rule)
    ]
    variables = evaluation.workload["environmentVariables"]
    assert isinstance(variables, list)
    assert {item["name"]: item["value"] for item in variables} == expected


@pytest.mark.parametrize("mode", ["enforce", "warn", "audit"])
@pytest.mark.parametrize(
    ("rules", "spec", "field", "details"),
    [
        (
            {
                "compute": {
                    "gpuPortionLimit": {"defaultFrom": {"field": "gpuPortionRequest", "factor": 2}}
                }
            },
            {"compute": {"gpuPortionRequest": 0.75}},
            "compute.gpuPortionLimit",
            "1.5 (defaultFrom compute.gpuPortionRequest × 2 (cluster prod)): must be at most 1",
        ),
        (
            {
                "ports": {
                    "attributes": {"external": {"defaultFrom": {"field": "container", "factor": 2}}}
                }
            },
            {"ports": [{"name": "web", "container": 40000}]},
            "ports[web].external",
            "80000 (defaultFrom ports.container × 2 (cluster prod)): must be at most 65535",
        ),
    ],
)
def test_a_computed_default_its_field_cannot_take_is_refused_in_every_mode(
    mode: str, rules: dict[str, object], spec: dict[str, object], field: str, details: str
) -> None:
    """What ``defaultFrom`` computes is checked as a submitted value is: a workload holding it
    could not be admitted again nor rendered (the field's own bounds, not a policy's rule)."""
    evaluation = run([make_policy({"rules": rules}, enforcement=mode)], spec)
    assert issues(evaluation) == [(field, "defaultFrom")]
    assert evaluation.violations[0].details.startswith(details)
    assert evaluation.violations[0].policy is None


def test_what_an_admission_writes_keeps_the_submissions_exclusions() -> None:
    """The effective workload has no excluded instance; what the mutating webhook writes says
    it excluded them, after the instances in effect, so that judging it again does not bring a
    default back (nor an exclusion that excludes nothing today, once a policy adds it)."""
    submitted = [{"name": "NOPE", "exclude": True}, {"name": "USER", "exclude": True}]
    evaluation = run([make_policy(ENV_POLICY)], {"environmentVariables": submitted})
    assert evaluation.workload["environmentVariables"] == [{"name": "HOME", "value": "/home/me"}]
    assert evaluation.written["environmentVariables"] == [
        {"name": "HOME", "value": "/home/me"},
        {"name": "NOPE", "exclude": True},
        {"name": "USER", "exclude": True},
    ]
    again = run([make_policy(ENV_POLICY)], dict(evaluation.written))
    assert again.workload == evaluation.workload
    assert again.written == evaluation.written


def test_the_owning_policy_decides_the_mode() -> None:
    cluster = make_policy(
        {"rules": {"image": {"required": True}}}, scope=CLUSTER, name="c", enforcement="warn"
    )
    project = make_policy(
        {"rules": {"compute": {"gpuDevicesRequest": {"max": 1}}}}, scope=PROJECT, name="p"
    )
    evaluation = run([cluster, project], {"compute": {"gpuDevicesRequest": 2}})
    assert issues(evaluation) == [("compute.gpuDevicesRequest", "max")]
    assert [(issue.field, issue.rule) for issue in evaluation.warnings] == [("image", "required")]


def test_can_edit_false_on_an_attribute_compares_with_the_instance_or_attribute_default() -> None:
    policy = make_policy(
        {
            "defaults": {
                "tolerations": {
                    "instances": [{"name": "gpu", "key": "nvidia.com/gpu", "operator": "Exists"}],
                    "attributes": {"effect": "NoSchedule"},
                }
            },
            "rules": {
                "tolerations": {
                    "attributes": {"operator": {"canEdit": False}, "effect": {"canEdit": False}}
                }
            },
        }
    )
    same = run(
        [policy],
        {
            "tolerations": [
                {"name": "gpu", "operator": "Exists"},
                {"name": "x", "effect": "NoSchedule"},
            ]
        },
    )
    assert same.accepted
    assert same.values["tolerations[x].effect"] == "NoSchedule"
    changed = run(
        [policy],
        {
            "tolerations": [
                {"name": "gpu", "operator": "Equal"},
                {"name": "x", "effect": "NoExecute"},
            ]
        },
    )
    assert sorted(issues(changed)) == [
        ("tolerations[gpu].operator", "canEdit"),
        ("tolerations[x].effect", "canEdit"),
    ]
    # A new instance has no default operator: any operator is a change.
    added = run([policy], {"tolerations": [{"name": "y", "operator": "Exists"}]})
    assert issues(added) == [("tolerations[y].operator", "canEdit")]
    assert (
        added.violations[0].details
        == "the policy gives no default and allows no value; got 'Exists'"
    )
