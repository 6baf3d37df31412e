"""The policy reference's examples, as written, are a corpus: each is read, evaluated, asserted.

``../shared/reference/workload-policy-yaml.md`` writes every policy as a bare Run:ai document
(``defaults``/``rules``/``imposedAssets`` at the top). Each text below is copied from it verbatim,
with the line it starts at (``\\x20`` is a space the reference ends a line with), and a test checks
that it is still there. Each is parsed with podwright's YAML reader and read as a Run:ai policy
of a workspace at cluster ``prod`` (``--type workspace --scope cluster=prod``), and evaluated
against a workload that uses it: the effective values and their sources where the reference
gives a table, the violation and its rule where it says a submission fails, and for each rule
type a value that passes and one that breaks it. The storage examples are rendered too, every
manifest checked against the Kubernetes schemas. Two texts are not YAML: the error podwright
gives for each as written is asserted, then the outcome of the smallest correction, recorded
as the reference's erratum.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from podwright.adapters.documents import InvalidDocumentError, parse_document
from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue, catalogue_from_data
from podwright.core.effective_policy import effective_policy
from podwright.core.evaluation import Evaluation, evaluate
from podwright.core.field_paths import format_path
from podwright.core.policies import Policy, PolicyError, Scope
from podwright.core.policy_documents import policy_from_document
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import submission_from_data
from tests.render_helpers import main_container, main_pod, render_problems, rendered

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "workload-policy-yaml.md"
"""``../shared/reference/workload-policy-yaml.md``, from the repository's root."""
SOURCE = "workload-policy-yaml.md"
SCOPE = Scope(("prod",))
POLICY_DEFAULT = "policy default (cluster prod)"
ATTRIBUTE_DEFAULT = "attribute default (cluster prod)"


@dataclasses.dataclass(frozen=True)
class Example:
    """A text of the reference as written, and the line it starts at."""

    line: int
    text: str


# Storage Field Examples --------------------------------------------------------------------------

READINESS = Example(
    595,
    """\
defaults:
   probes:
     readiness:
         initialDelaySeconds: 2
""",
)
HOST_PATH = Example(
    1017,
    """\
defaults:
  storage:
    hostPath:
      instances:
        - path: h3-path-1
          mountPath: h3-mount-1
        - path: h3-path-2
          mountPath: h3-mount-2
      attributes:
        - readOnly: true
""",
)
GIT = Example(
    1062,
    """\
defaults:
  storage:
    git:
      attributes:
        Repository: https://runai.public.github.com
      instances
        - branch: "master"
          path: /container/my-repository
          passwordSecret: my-password-secret
""",
)
PVC = Example(
    1102,
    """\
defaults:
  storage:
    pvc:
      instances:
        - claimName: pvc-staging-researcher1-home
          existingPvc: true
          path: /myhome
          readOnly: false
          claimInfo:
            accessModes:
              readWriteMany: true
""",
)
NFS = Example(
    1160,
    """\
defaults:
 storage:
   nfs:
     instances:
       - path: nfs-path
         readOnly: true
         server: nfs-server
         mountPath: nfs-mount
rules:
  storage:
    nfs:
      instances:
        canAdd: false
""",
)
S3 = Example(
    1200,
    """\
defaults:
  storage:
    s3:
      instances:
        - bucket: bucket-opt-1
          path: /s3/path
          accessKeySecret: s3-access-key
          secretKeyOfAccessKeyId: s3-secret-id
          secretKeyOfSecretKey: s3-secret-key
      attributes:
        url: https://amazonaws.s3.com
""",
)

# Itemized ----------------------------------------------------------------------------------------

ITEMIZED_WORKLOAD = Example(
    1421,
    """\
spec:
  image: ubuntu
  compute:
    extendedResources:
      - resource: added/cpu
        quantity: 10
      - resource: added/memory
        quantity: 20M
""",
)
ITEMIZED = Example(
    1440,
    """\
defaults:
  compute:
    extendedResources:
      instances:\x20
        - resource: default/cpu
          quantity: 5
        - resource: default/memory
          quantity: 4M
      attributes:
        quantity: 3
rules:
  compute:
    extendedResources:
      instances:
        locked:\x20
          - default/cpu
      attributes:
        quantity:\x20
          required: true
""",
)
ITEMIZED_SUBMISSION = Example(
    1462,
    """\
spec:
  image: ubuntu
  compute:
    extendedResources:
      - resource: default/memory
        exclude: true
      - resource: added/cpu
      - resource: added/memory
        quantity: 5M
""",
)

# Rule Type Examples: fragments of a rules section ----------------------------------------------

CAN_ADD = Example(
    1554,
    """\
storage:
  hostPath:
     instances:
       canAdd: false
""",
)
LOCKED = Example(
    1559,
    """\
storage:
  hostPath:
    Instances:
      locked:
        - HOME
        - USER
""",
)
CAN_EDIT = Example(
    1566,
    """\
imagePullPolicy:
    canEdit: false
""",
)
REQUIRED = Example(
    1569,
    """\
image:
    required: true
""",
)
MIN = Example(
    1572,
    """\
compute:
  gpuDevicesRequest:
    min: 3
""",
)
MAX = Example(
    1576,
    """\
compute:
  gpuMemoryRequest:
     max: 2G
""",
)
STEP = Example(
    1580,
    """\
compute:
  cpuCoreRequest:
    min: 1
    max: 7
    Step: 2
""",
)
OPTIONS = Example(
    1586,
    """\
image:
  options:
    - value: image-1
    - value: image-2
""",
)
DEFAULT_FROM = Example(
    1591,
    """\
cpuCoreRequest:
  defaultFrom:
    field: compute.cpuCoreLimit
    factor: 0.5
""",
)

# Policy Spec Sections ----------------------------------------------------------------------------

RULES = Example(
    1610,
    """\
rules:
  compute:
    gpuDevicesRequest:\x20
      max: 8
  security:
    runAsUid:\x20
      min: 500
""",
)
DEFAULTS = Example(
    1624,
    """\
defaults:
  imagePullPolicy: Always
  security:
    runAsNonRoot: true
    runAsUid: 500
""",
)
CAN_EDIT_NOTE = Example(
    1670,
    """\
defaults:
imagePullPolicy: Always
security:
    runAsNonRoot: true
    runAsUid: 500
 rules:
 security:
    runAsUid:
    canEdit: false
""",
)
IMPOSED_ASSETS = Example(
    1686,
    """\
defaults: null
rules: null
imposedAssets:
  - f12c965b-44e9-4ff6-8b43-01d8f9e630cc
""",
)

EXAMPLES = {
    "readiness": READINESS,
    "hostPath": HOST_PATH,
    "git": GIT,
    "pvc": PVC,
    "nfs": NFS,
    "s3": S3,
    "itemized-workload": ITEMIZED_WORKLOAD,
    "itemized": ITEMIZED,
    "itemized-submission": ITEMIZED_SUBMISSION,
    "canAdd": CAN_ADD,
    "locked": LOCKED,
    "canEdit": CAN_EDIT,
    "required": REQUIRED,
    "min": MIN,
    "max": MAX,
    "step": STEP,
    "options": OPTIONS,
    "defaultFrom": DEFAULT_FROM,
    "rules": RULES,
    "defaults": DEFAULTS,
    "canEdit-note": CAN_EDIT_NOTE,
    "imposed-assets": IMPOSED_ASSETS,
}


@dataclasses.dataclass(frozen=True)
class Erratum:
    """The smallest correction of an example that is not YAML: line (1-based, in the example)
    → the line as evidently intended."""

    example: Example
    lines: Mapping[int, str]

    @property
    def corrected(self) -> str:
        lines = self.example.text.splitlines()
        for number, line in self.lines.items():
            lines[number - 1] = line
        return "\n".join(lines) + "\n"


GIT_ERRATUM = Erratum(GIT, {6: "      instances:"})
"""``instances`` lacks its colon."""
CAN_EDIT_NOTE_ERRATUM = Erratum(
    CAN_EDIT_NOTE,
    {
        2: "  imagePullPolicy: Always",
        3: "  security:",
        6: "rules:",
        9: "      canEdit: false",
    },
)
"""The fields of ``defaults`` are not indented below it, ``rules`` is not at the top, and
``canEdit`` is beside ``runAsUid`` rather than below it."""


@pytest.fixture(scope="module")
def reference_lines() -> list[str]:
    """The reference's lines; it lies beside the repository, so a checkout without it skips
    (but not in CI, where it must be)."""
    if not REFERENCE.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{REFERENCE} is missing: the examples cannot be checked against it")
        pytest.skip(f"{REFERENCE} is not here")
    return REFERENCE.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("example", EXAMPLES.values(), ids=list(EXAMPLES))
def test_each_example_is_the_reference_as_written(
    example: Example, reference_lines: list[str]
) -> None:
    text = example.text.splitlines()
    assert reference_lines[example.line - 1 : example.line - 1 + len(text)] == text


# Reading ---------------------------------------------------------------------------------------


def policy_of(
    text: str, *, under: tuple[str, ...] = (), workload_type: WorkloadType = WorkloadType.WORKSPACE
) -> Policy:
    """``text`` parsed and read as a Run:ai document (placed under ``under`` first)."""
    data: object = parse_document(text, SOURCE).data
    for name in reversed(under):
        data = {name: data}
    return policy_from_document(data, SOURCE, workload_type=workload_type, scope=SCOPE)


def evaluated(
    policy: Policy, spec: Mapping[str, Any], catalogue: AssetCatalogue = EMPTY_CATALOGUE
) -> Evaluation:
    kind = policy.workload_type
    effective = effective_policy([policy], SCOPE, kind)
    return evaluate(effective, submission_from_data(dict(spec), kind), kind, catalogue)


def issues(evaluation: Evaluation) -> list[tuple[str, str]]:
    return [(violation.field, violation.rule) for violation in evaluation.violations]


@pytest.mark.parametrize(
    ("example", "under", "notes"),
    [
        pytest.param(READINESS, (), [], id="readiness"),
        pytest.param(
            HOST_PATH,
            (),
            [
                (
                    "defaults.storage.hostPath.attributes",
                    "a list of one-key mappings, read as one mapping of 'readOnly'",
                )
            ],
            id="hostPath",
        ),
        pytest.param(PVC, (), [], id="pvc"),
        pytest.param(NFS, (), [], id="nfs"),
        pytest.param(S3, (), [], id="s3"),
        pytest.param(ITEMIZED, (), [], id="itemized"),
        pytest.param(CAN_ADD, ("rules",), [], id="canAdd"),
        pytest.param(
            LOCKED,
            ("rules",),
            [("rules.storage.hostPath.Instances", "read as 'instances'")],
            id="locked",
        ),
        pytest.param(CAN_EDIT, ("rules",), [], id="canEdit"),
        pytest.param(REQUIRED, ("rules",), [], id="required"),
        pytest.param(MIN, ("rules",), [], id="min"),
        pytest.param(MAX, ("rules",), [], id="max"),
        pytest.param(
            STEP, ("rules",), [("rules.compute.cpuCoreRequest.Step", "read as 'step'")], id="step"
        ),
        pytest.param(OPTIONS, ("rules",), [], id="options"),
        pytest.param(DEFAULT_FROM, ("rules", "compute"), [], id="defaultFrom"),
        pytest.param(RULES, (), [], id="rules"),
        pytest.param(DEFAULTS, (), [], id="defaults"),
        pytest.param(IMPOSED_ASSETS, (), [], id="imposed-assets"),
        pytest.param(
            GIT_ERRATUM.corrected,
            (),
            [("defaults.storage.git.attributes.Repository", "read as 'repository'")],
            id="git-corrected",
        ),
        pytest.param(CAN_EDIT_NOTE_ERRATUM.corrected, (), [], id="canEdit-note-corrected"),
    ],
)
def test_every_policy_example_is_accepted_as_written(
    example: Example | str, under: tuple[str, ...], notes: list[tuple[str, str]]
) -> None:
    """A Rule Type Example is a fragment of a rules section: the test puts it under ``rules:``
    (the defaultFrom example under ``rules: compute:``, its field's section, as its
    ``field: compute.cpuCoreLimit`` says). What is read otherwise than written (a key in other
    letter case, a list for a mapping) is a note, at the path as written."""
    text = example if isinstance(example, str) else example.text
    policy = policy_of(text, under=under)
    assert [(format_path(note.path), note.message) for note in policy.notes] == notes
    assert policy.name == "workload-policy-yaml"
    assert policy.document_prefix == ()
    assert policy.scope == SCOPE


def test_a_rule_type_fragment_at_the_top_of_rules_is_read_where_it_says() -> None:
    """The defaultFrom fragment names ``cpuCoreRequest`` without its section: at the top of
    ``rules`` it is no field, and the problem says where it is."""
    with pytest.raises(PolicyError) as caught:
        policy_of(DEFAULT_FROM.text, under=("rules",))
    assert [(problem.path, problem.message) for problem in caught.value.problems] == [
        (
            ("rules", "cpuCoreRequest"),
            "unknown field 'cpuCoreRequest' here (did you mean 'compute.cpuCoreRequest'?)",
        )
    ]


@pytest.mark.parametrize(
    ("erratum", "line", "column", "message"),
    [
        pytest.param(
            GIT_ERRATUM, 6, 7, "invalid YAML: 'instances' is not followed by ':'", id="git"
        ),
        pytest.param(
            CAN_EDIT_NOTE_ERRATUM,
            6,
            2,
            "invalid YAML: while parsing a block mapping expected <block end>, but found "
            "'<block mapping start>'",
            id="canEdit-note",
        ),
    ],
)
def test_an_example_that_is_not_yaml_is_refused_where_it_breaks(
    erratum: Erratum, line: int, column: int, message: str
) -> None:
    """No YAML reader takes these, nor would Run:ai; the erratum changes only the lines it
    names."""
    with pytest.raises(InvalidDocumentError) as caught:
        parse_document(erratum.example.text, SOURCE)
    assert (caught.value.line, caught.value.column, caught.value.message) == (
        line,
        column,
        message,
    )
    written = erratum.example.text.splitlines()
    corrected = erratum.corrected.splitlines()
    assert [
        number for number, (a, b) in enumerate(zip(written, corrected, strict=True), 1) if a != b
    ] == list(erratum.lines)


# Outcomes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "value", "source"),
    [
        ({"image": "ubuntu"}, 2, POLICY_DEFAULT),
        ({"image": "ubuntu", "probes": {"readiness": {"initialDelaySeconds": 5}}}, 5, "submission"),
    ],
    ids=["default", "submitted"],
)
def test_readiness(spec: dict[str, Any], value: int, source: str) -> None:
    evaluation = evaluated(policy_of(READINESS.text), spec)
    assert evaluation.values["probes.readiness.initialDelaySeconds"] == value
    assert evaluation.sources["probes.readiness.initialDelaySeconds"] == source


HOST_PATHS = ("unnamed-1af8f862", "unnamed-64b74822")
"""The names evaluation gives the hostPath example's instances (a digest of their attributes:
what an effective workload stored in the cluster holds, so it must not change)."""


def test_host_path_instances_without_names_are_always_added() -> None:
    policy = policy_of(HOST_PATH.text)
    evaluation = evaluated(policy, {"image": "ubuntu"})
    first, second = HOST_PATHS
    assert evaluation.workload["storage"] == {
        "hostPath": [
            {"name": first, "path": "h3-path-1", "mountPath": "h3-mount-1", "readOnly": True},
            {"name": second, "path": "h3-path-2", "mountPath": "h3-mount-2", "readOnly": True},
        ]
    }
    assert evaluation.sources[f"storage.hostPath[{first}].path"] == POLICY_DEFAULT
    assert evaluation.sources[f"storage.hostPath[{second}].readOnly"] == ATTRIBUTE_DEFAULT
    mine = {"name": "scratch", "path": "/scratch", "mountPath": "/scratch"}
    added = evaluated(policy, {"image": "ubuntu", "storage": {"hostPath": [mine]}})
    assert [instance["name"] for instance in added.workload["storage"]["hostPath"]] == [
        *HOST_PATHS,
        "scratch",
    ]
    excluded = evaluated(
        policy, {"image": "ubuntu", "storage": {"hostPath": [{"name": first, "exclude": True}]}}
    )
    assert issues(excluded) == [(f"storage.hostPath[{first}]", "locked")]
    # Its mount paths are not absolute: podwright renders no such mount, and says where.
    assert render_problems(WorkloadType.WORKSPACE, evaluation.workload) == [
        f"storage.hostPath[{first}].mountPath: must be an absolute path, got 'h3-mount-1'",
        f"storage.hostPath[{second}].mountPath: must be an absolute path, got 'h3-mount-2'",
    ]


def test_git_corrected_clones_the_repository_its_attributes_name() -> None:
    evaluation = evaluated(policy_of(GIT_ERRATUM.corrected), {"image": "ubuntu"})
    name = "unnamed-7310080b"
    assert evaluation.workload["storage"] == {
        "git": [
            {
                "name": name,
                "repository": "https://runai.public.github.com",
                "branch": "master",
                "path": "/container/my-repository",
                "passwordSecret": "my-password-secret",
            }
        ]
    }
    assert evaluation.sources[f"storage.git[{name}].repository"] == ATTRIBUTE_DEFAULT
    rendering = rendered(WorkloadType.WORKSPACE, dict(evaluation.workload))
    (clone,) = main_pod(rendering)["spec"]["initContainers"]
    environment = {variable["name"]: variable for variable in clone["env"]}
    assert environment["GIT_REPOSITORY"]["value"] == "https://runai.public.github.com"
    assert environment["GIT_BRANCH"]["value"] == "master"
    assert environment["GIT_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "my-password-secret", "key": "password"}
    }
    assert {"name": f"git-{name}", "mountPath": "/container/my-repository"} in main_container(
        rendering
    )["volumeMounts"]


def test_pvc_mounts_the_existing_claim() -> None:
    evaluation = evaluated(policy_of(PVC.text), {"image": "ubuntu"})
    name = "unnamed-06c20c92"
    assert evaluation.sources[f"storage.pvc[{name}].claimInfo.accessModes.readWriteMany"] == (
        POLICY_DEFAULT
    )
    rendering = rendered(WorkloadType.WORKSPACE, dict(evaluation.workload))
    pod = main_pod(rendering)
    assert pod["spec"]["volumes"] == [
        {
            "name": f"pvc-{name}",
            "persistentVolumeClaim": {"claimName": "pvc-staging-researcher1-home"},
        }
    ]
    assert {"name": f"pvc-{name}", "mountPath": "/myhome"} in main_container(rendering)[
        "volumeMounts"
    ]
    assert [manifest["kind"] for manifest in rendering.manifests] == ["Pod"]


def test_nfs_allows_no_instance_of_a_submissions_own() -> None:
    policy = policy_of(NFS.text)
    evaluation = evaluated(policy, {"image": "ubuntu"})
    name = "unnamed-d2e794d8"
    assert evaluation.workload["storage"] == {
        "nfs": [
            {
                "name": name,
                "path": "nfs-path",
                "readOnly": True,
                "server": "nfs-server",
                "mountPath": "nfs-mount",
            }
        ]
    }
    again = evaluated(policy, evaluation.workload)
    assert again.accepted
    assert again.workload == evaluation.workload
    mine = {"name": "mine", "server": "s", "path": "/x", "mountPath": "/x"}
    added = evaluated(policy, {"image": "ubuntu", "storage": {"nfs": [mine]}})
    assert issues(added) == [("storage.nfs[mine]", "canAdd")]
    assert render_problems(WorkloadType.WORKSPACE, evaluation.workload) == [
        f"storage.nfs[{name}].mountPath: must be an absolute path, got 'nfs-mount'"
    ]


def test_s3_mounts_the_bucket_through_a_fuse_sidecar() -> None:
    evaluation = evaluated(policy_of(S3.text), {"image": "ubuntu"})
    name = "unnamed-b0362fc3"
    assert evaluation.values[f"storage.s3[{name}].url"] == "https://amazonaws.s3.com"
    assert evaluation.sources[f"storage.s3[{name}].url"] == ATTRIBUTE_DEFAULT
    rendering = rendered(WorkloadType.WORKSPACE, dict(evaluation.workload))
    (sidecar,) = main_pod(rendering)["spec"]["initContainers"]
    assert "bucket-opt-1" in sidecar["command"]
    assert [variable["valueFrom"]["secretKeyRef"] for variable in sidecar["env"]] == [
        {"name": "s3-access-key", "key": "s3-secret-id"},
        {"name": "s3-access-key", "key": "s3-secret-key"},
    ]
    assert {
        "name": f"s3-{name}",
        "mountPath": "/s3/path",
        "mountPropagation": "HostToContainer",
    } in main_container(rendering)["volumeMounts"]


def test_two_unnamed_instances_of_one_field_render_as_two_volumes() -> None:
    """Every instance a policy leaves unnamed becomes a volume of its own, validly named."""
    text = PVC.text + "        - claimName: scratch\n          existingPvc: true\n"
    text += "          path: /scratch\n"
    evaluation = evaluated(policy_of(text), {"image": "ubuntu"})
    volumes = main_pod(rendered(WorkloadType.WORKSPACE, dict(evaluation.workload)))["spec"][
        "volumes"
    ]
    assert [volume["persistentVolumeClaim"]["claimName"] for volume in volumes] == [
        "pvc-staging-researcher1-home",
        "scratch",
    ]
    assert len({volume["name"] for volume in volumes}) == 2


def _resources(evaluation: Evaluation) -> dict[str, object]:
    compute = evaluation.workload["compute"]
    assert isinstance(compute, Mapping)
    return {item["resource"]: item.get("quantity") for item in compute["extendedResources"]}


def test_itemized_the_effective_instances_and_their_sources() -> None:
    """The reference's table: default/cpu from the policy defaults, added/cpu's quantity from
    the attribute default, added/memory's from the submission, default/memory excluded."""
    submission = parse_document(ITEMIZED_SUBMISSION.text, SOURCE).data
    assert isinstance(submission, Mapping)
    evaluation = evaluated(policy_of(ITEMIZED.text), submission["spec"])
    assert evaluation.accepted
    assert _resources(evaluation) == {"default/cpu": 5, "added/cpu": 3, "added/memory": "5M"}
    sources = evaluation.sources
    assert [
        (
            sources[f"compute.extendedResources[{key}].resource"],
            sources[f"compute.extendedResources[{key}].quantity"],
        )
        for key in ("default/cpu", "added/cpu", "added/memory")
    ] == [
        (POLICY_DEFAULT, POLICY_DEFAULT),
        ("submission", ATTRIBUTE_DEFAULT),
        ("submission", "submission"),
    ]


def test_itemized_a_locked_instance_cannot_be_excluded() -> None:
    excluded = {"resource": "default/cpu", "exclude": True}
    spec = {"image": "ubuntu", "compute": {"extendedResources": [excluded]}}
    evaluation = evaluated(policy_of(ITEMIZED.text), spec)
    assert issues(evaluation) == [("compute.extendedResources[default/cpu]", "locked")]
    assert evaluation.violations[0].details == (
        "'default/cpu' is locked by cluster prod and cannot be excluded"
    )


def test_itemized_the_workload_spec_adds_its_instances_to_the_defaults() -> None:
    workload = parse_document(ITEMIZED_WORKLOAD.text, SOURCE).data
    assert isinstance(workload, Mapping)
    evaluation = evaluated(policy_of(ITEMIZED.text), workload["spec"])
    assert _resources(evaluation) == {
        "default/cpu": 5,
        "default/memory": "4M",
        "added/cpu": 10,
        "added/memory": "20M",
    }


HOME_AND_USER = {
    "defaults": {
        "storage": {
            "hostPath": {
                "instances": [
                    {"name": "HOME", "path": "/home", "mountPath": "/home"},
                    {"name": "USER", "path": "/user", "mountPath": "/user"},
                ]
            }
        }
    }
}
"""What the locked example assumes: "a workload policy default is given to HOME and USER"."""

PULL_ALWAYS = {"defaults": {"imagePullPolicy": "Always"}}
"""What the canEdit example assumes: "the policy has default for imagePullPolicy"."""


@pytest.mark.parametrize(
    ("example", "assumed", "spec", "expected"),
    [
        pytest.param(CAN_ADD, {}, {"image": "u"}, [], id="canAdd-passes"),
        pytest.param(
            CAN_ADD,
            {},
            {"image": "u", "storage": {"hostPath": [{"name": "a", "path": "/a"}]}},
            [("storage.hostPath[a]", "canAdd")],
            id="canAdd-breaks",
        ),
        pytest.param(
            LOCKED,
            HOME_AND_USER,
            {"image": "u", "storage": {"hostPath": [{"name": "USER", "path": "/user"}]}},
            [],
            id="locked-passes",
        ),
        pytest.param(
            LOCKED,
            HOME_AND_USER,
            {"image": "u", "storage": {"hostPath": [{"name": "HOME", "exclude": True}]}},
            [("storage.hostPath[HOME]", "locked")],
            id="locked-breaks",
        ),
        pytest.param(CAN_EDIT, PULL_ALWAYS, {"imagePullPolicy": "Always"}, [], id="canEdit-passes"),
        pytest.param(
            CAN_EDIT,
            PULL_ALWAYS,
            {"imagePullPolicy": "Never"},
            [("imagePullPolicy", "canEdit")],
            id="canEdit-breaks",
        ),
        pytest.param(REQUIRED, {}, {"image": "ubuntu"}, [], id="required-passes"),
        pytest.param(REQUIRED, {}, {}, [("image", "required")], id="required-breaks"),
        pytest.param(MIN, {}, {"compute": {"gpuDevicesRequest": 3}}, [], id="min-passes"),
        pytest.param(
            MIN,
            {},
            {"compute": {"gpuDevicesRequest": 2}},
            [("compute.gpuDevicesRequest", "min")],
            id="min-breaks",
        ),
        pytest.param(MAX, {}, {"compute": {"gpuMemoryRequest": "2G"}}, [], id="max-passes"),
        pytest.param(
            MAX,
            {},
            {"compute": {"gpuMemoryRequest": "2001M"}},
            [("compute.gpuMemoryRequest", "max")],
            id="max-breaks",
        ),
        pytest.param(OPTIONS, {}, {"image": "image-2"}, [], id="options-passes"),
        pytest.param(OPTIONS, {}, {"image": "ubuntu"}, [("image", "options")], id="options-breaks"),
        pytest.param(
            RULES,
            {},
            {"compute": {"gpuDevicesRequest": 8}, "security": {"runAsUid": 500}},
            [],
            id="rules-pass",
        ),
        pytest.param(
            RULES,
            {},
            {"compute": {"gpuDevicesRequest": 9}, "security": {"runAsUid": 499}},
            [("security.runAsUid", "min"), ("compute.gpuDevicesRequest", "max")],
            id="rules-break",
        ),
    ],
)
def test_each_rule_type_has_a_value_that_passes_and_one_that_breaks_it(
    example: Example, assumed: dict[str, Any], spec: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    """A rule type fragment goes under ``rules:``, beside the defaults its text assumes."""
    data = parse_document(example.text, SOURCE).data
    document = data if example is RULES else {"rules": data, **assumed}
    policy = policy_from_document(
        document, SOURCE, workload_type=WorkloadType.WORKSPACE, scope=SCOPE
    )
    assert issues(evaluated(policy, spec)) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *((value, []) for value in (1, 3, 5, 7)),
        *((value, ["step"]) for value in (2, 4, 6)),
        (0, ["min", "step"]),
        (9, ["max"]),
        (8, ["max", "step"]),
    ],
)
def test_step_allows_1_3_5_7(value: int, expected: list[str]) -> None:
    """The reference: "In this example the allowed values are: 1, 3, 5, 7" (the step counts
    from min)."""
    evaluation = evaluated(
        policy_of(STEP.text, under=("rules",)), {"compute": {"cpuCoreRequest": value}}
    )
    assert [rule for _, rule in issues(evaluation)] == expected


@pytest.mark.parametrize(
    ("compute", "value", "source"),
    [
        ({"cpuCoreLimit": 4}, 2, "defaultFrom compute.cpuCoreLimit × 0.5 (cluster prod)"),
        ({"cpuCoreLimit": 4, "cpuCoreRequest": 3}, 3, "submission"),
    ],
    ids=["computed", "submitted"],
)
def test_default_from_computes_a_default_from_another_field(
    compute: dict[str, Any], value: object, source: str
) -> None:
    """defaultFrom is no constraint, so no value breaks it: it gives the default."""
    evaluation = evaluated(
        policy_of(DEFAULT_FROM.text, under=("rules", "compute")), {"compute": compute}
    )
    assert evaluation.values["compute.cpuCoreRequest"] == value
    assert evaluation.sources["compute.cpuCoreRequest"] == source


def test_defaults_the_effective_values_and_their_sources() -> None:
    """The reference's table for a submission of image ubuntu and runAsUid 501."""
    evaluation = evaluated(
        policy_of(DEFAULTS.text), {"image": "ubuntu", "security": {"runAsUid": 501}}
    )
    assert {
        path: (evaluation.values[path], evaluation.sources[path])
        for path in ("image", "imagePullPolicy", "security.runAsNonRoot", "security.runAsUid")
    } == {
        "image": ("ubuntu", "submission"),
        "imagePullPolicy": ("Always", POLICY_DEFAULT),
        "security.runAsNonRoot": (True, POLICY_DEFAULT),
        "security.runAsUid": (501, "submission"),
    }


@pytest.mark.parametrize(
    ("security", "expected"),
    [
        ({"runAsUid": 501}, [("security.runAsUid", "canEdit")]),
        ({"runAsUid": 500}, []),
        ({}, []),
    ],
    ids=["changed", "restated", "left-out"],
)
def test_can_edit_note_corrected_refuses_the_defaults_submission(
    security: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    """The reference: "If this policy is applied, the submission request above fails" (the
    Defaults example's submission, runAsUid 501)."""
    evaluation = evaluated(
        policy_of(CAN_EDIT_NOTE_ERRATUM.corrected), {"image": "ubuntu", "security": security}
    )
    assert issues(evaluation) == expected
    if expected:
        assert evaluation.violations[0].details == (
            "the policy's default is 500 and cannot be changed; got 501"
        )


ASSET_ID = "f12c965b-44e9-4ff6-8b43-01d8f9e630cc"


def catalogue(asset: Mapping[str, object]) -> AssetCatalogue:
    return catalogue_from_data(
        {
            "apiVersion": "podwright.dev/v1",
            "kind": "AssetCatalogue",
            "assets": [{"id": ASSET_ID, **asset}],
        }
    )


def test_imposed_assets_add_their_storage_instance_which_cannot_be_removed() -> None:
    datasets = catalogue(
        {"name": "team-datasets", "kind": "pvc", "spec": {"claimName": "ds", "path": "/data"}}
    )
    policy = policy_of(IMPOSED_ASSETS.text)
    evaluation = evaluated(policy, {"image": "ubuntu"}, datasets)
    assert evaluation.workload["storage"] == {
        "pvc": [{"name": "team-datasets", "claimName": "ds", "path": "/data"}]
    }
    assert evaluation.sources["storage.pvc[team-datasets].claimName"] == (
        f"imposed asset {ASSET_ID} (cluster prod)"
    )
    excluded = evaluated(
        policy,
        {"image": "ubuntu", "storage": {"pvc": [{"name": "team-datasets", "exclude": True}]}},
        datasets,
    )
    assert issues(excluded) == [("storage.pvc[team-datasets]", "locked")]


def test_an_asset_referencing_credentials_cannot_be_imposed() -> None:
    """The reference: "Assets with references to credential assets (for example: private S3,
    containing reference to an AccessKey asset) cannot be used as imposedAssets"."""
    private_s3 = catalogue(
        {
            "name": "private-s3",
            "kind": "s3",
            "spec": {"bucket": "b", "path": "/s3"},
            "credentials": "access-key",
        }
    )
    with pytest.raises(PolicyError) as caught:
        evaluated(policy_of(IMPOSED_ASSETS.text), {"image": "ubuntu"}, private_s3)
    (problem,) = caught.value.problems
    assert (problem.path, problem.source) == (("imposedAssets", 0), SOURCE)
    assert problem.message == (
        f"asset {ASSET_ID!r} (private-s3) references credentials and cannot be imposed"
    )
