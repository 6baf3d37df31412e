"""``podwright convert``: workload and policy documents printed, or their files rewritten, as
the objects a cluster serves; bad documents reported at their lines, and files replaced whole or
not at all."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

import podwright
from podwright.cli.main import cli

API_VERSION = "podwright.dev/v1alpha1"
WRAPPED = "# resnet\ntype: training\nname: resnet\nspec:\n  image: pytorch  # the image\n"
OBJECT = (
    "# already a Workload\n"
    f"apiVersion: {API_VERSION}\n"
    "kind: Workload\n"
    "metadata: {name: vit, namespace: vision}\n"
    "spec: {type: inference, image: vit}\n"
)
BARE = "image: busybox\n"


def workload(name: str | None, workload_type: str, image: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {**({"name": name} if name else {}), **metadata},
        "spec": {"type": workload_type, "image": image},
    }


RESNET = workload("resnet", "training", "pytorch")
VIT = workload("vit", "inference", "vit", namespace="vision")


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory of its own, the current one, so that messages name files as given."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["convert", *args], input=stdin)


def write(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (directory / name).write_text(text)


# -- printing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "args", "stdin", "expected"),
    [
        pytest.param({"a.yaml": WRAPPED}, ["a.yaml"], None, [RESNET], id="wrapped"),
        pytest.param({"a.yaml": OBJECT}, ["a.yaml"], None, [VIT], id="object-unchanged"),
        pytest.param(
            {"a.yaml": f"{WRAPPED}---\n{OBJECT}"},
            ["a.yaml"],
            None,
            [RESNET, VIT],
            id="multi-document",
        ),
        pytest.param(
            {
                "b.yaml": OBJECT,
                "a.json": json.dumps(
                    {"type": "training", "name": "resnet", "spec": {"image": "pytorch"}}
                ),
                "c.txt": "not read",
            },
            ["."],
            None,
            [RESNET, VIT],
            id="directory",
        ),
        pytest.param(
            {},
            ["--type", "workspace", "-"],
            BARE,
            [workload(None, "workspace", "busybox")],
            id="bare-stdin",
        ),
        pytest.param({}, [], WRAPPED, [RESNET], id="piped-without-file"),
        pytest.param(
            {"a.yaml": WRAPPED, "b.yaml": OBJECT},
            ["b.yaml", "a.yaml"],
            None,
            [VIT, RESNET],
            id="in-the-order-given",
        ),
    ],
)
def test_documents_are_printed_as_workload_objects(
    here: Path,
    files: dict[str, str],
    args: list[str],
    stdin: str | None,
    expected: list[dict[str, Any]],
) -> None:
    write(here, files)
    result = run(*args, stdin=stdin)
    assert result.exit_code == 0, result.stderr
    assert list(yaml.safe_load_all(result.stdout)) == expected
    assert [list(document) for document in yaml.safe_load_all(result.stdout)] == [
        ["apiVersion", "kind", "metadata", "spec"]
    ] * len(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(WRAPPED, RESNET, id="one-object"),
        pytest.param(
            f"{WRAPPED}---\n{OBJECT}",
            {"apiVersion": "v1", "kind": "List", "items": [RESNET, VIT]},
            id="v1-list",
        ),
    ],
)
def test_json_is_one_object_or_a_list(here: Path, text: str, expected: dict[str, Any]) -> None:
    write(here, {"a.yaml": text})
    result = run("a.yaml", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == expected


def test_what_it_prints_converts_to_itself(here: Path) -> None:
    write(here, {"a.yaml": f"{WRAPPED}---\n{OBJECT}"})
    once = run("a.yaml")
    twice = run("-", stdin=once.stdout)
    assert (once.exit_code, twice.exit_code) == (0, 0)
    assert twice.stdout == once.stdout


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("files", "args", "expected"),
    [
        pytest.param(
            {"a.yaml": f"{OBJECT}---\ntype: training\nname: Bad_Name\nspec:\n  imag: x\n"},
            ["a.yaml"],
            [
                "a.yaml:10:3: spec.imag: unknown field 'imag' (did you mean 'image'?)",
                "a.yaml:8:1: name: 'Bad_Name' must consist of lower-case letters, digits and '-', and start and end with a letter or digit",
            ],
            id="every-problem-at-its-line",
        ),
        pytest.param(
            {"a.yaml": WRAPPED, "b.yaml": OBJECT},
            ["--type", "workspace", "a.yaml", "b.yaml"],
            [
                "a.yaml:2:1: type: the file says 'training' but 'workspace' was asked for",
                "b.yaml:5:8: spec.type: the file says 'inference' but 'workspace' was asked for",
            ],
            id="type-disagrees-in-every-file",
        ),
        pytest.param(
            {"a.yaml": BARE},
            ["a.yaml"],
            [
                "a.yaml: the workload type is not given: write the workload as a Workload (apiVersion: podwright.dev/v1alpha1, kind: Workload, spec.type beside its fields), or pass the type"
            ],
            id="bare-without-type",
        ),
        pytest.param(
            {
                "a.yaml": f"apiVersion: {API_VERSION}\nkind: Workload\nmetadata:\n  name: x\n  labels: {{team: 1}}\nspec: {{type: training}}\n"
            },
            ["a.yaml"],
            ["a.yaml:5:12: metadata.labels.team: expected a string, got 1 (integer): quote it"],
            id="metadata",
        ),
        pytest.param(
            {}, ["missing.yaml"], ["missing.yaml: No such file or directory"], id="no-file"
        ),
        pytest.param(
            {"a.yaml": "a: [\n"},
            ["a.yaml"],
            [
                "a.yaml:2:1: invalid YAML: while parsing a flow node expected the node content, but found '<stream end>'"
            ],
            id="not-yaml",
        ),
    ],
)
def test_bad_documents_are_reported_and_nothing_is_printed(
    here: Path, files: dict[str, str], args: list[str], expected: list[str]
) -> None:
    write(here, files)
    result = run(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"podwright: error: {line}" for line in expected]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--in-place", "-"],
            "--in-place rewrites files; standard input ('-') is none",
            id="in-place-stdin",
        ),
        pytest.param(
            ["--in-place", "-o", "yaml", "a.yaml"],
            "--in-place writes each file in its own format",
            id="in-place-output",
        ),
    ],
)
def test_usage_errors(here: Path, args: list[str], message: str) -> None:
    write(here, {"a.yaml": WRAPPED})
    result = run(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"podwright: error: {message}")
    assert (here / "a.yaml").read_text() == WRAPPED


# -- in place ---------------------------------------------------------------------------------


def test_in_place_rewrites_the_files_that_need_it_and_names_them(here: Path) -> None:
    write(
        here,
        {
            "a.yaml": f"{WRAPPED}---\n{OBJECT}",
            "b.yaml": OBJECT,
            "c.json": json.dumps(
                {"type": "training", "name": "resnet", "spec": {"image": "pytorch"}}
            ),
        },
    )
    (here / "a.yaml").chmod(0o640)
    result = run("--in-place", ".")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "rewrote a.yaml (1 of 2 documents converted)",
        "rewrote c.json (1 of 1 document converted)",
    ]
    assert list(yaml.safe_load_all((here / "a.yaml").read_text())) == [RESNET, VIT]
    assert stat.S_IMODE((here / "a.yaml").stat().st_mode) == 0o640
    assert (here / "b.yaml").read_text() == OBJECT  # comments and all
    assert json.loads((here / "c.json").read_text()) == RESNET
    assert sorted(path.name for path in here.iterdir()) == ["a.yaml", "b.yaml", "c.json"]


def test_in_place_leaves_a_file_with_a_bad_document_as_it_was(here: Path) -> None:
    bad = f"{WRAPPED}---\ntype: training\nspec: {{imag: x}}\n"
    write(here, {"a.yaml": WRAPPED, "bad.yaml": bad})
    result = run("--in-place", "a.yaml", "bad.yaml")
    assert result.exit_code == 2
    assert result.stdout == "rewrote a.yaml (1 of 1 document converted)\n"
    assert result.stderr.splitlines() == [
        "podwright: error: bad.yaml:8:8: spec.imag: unknown field 'imag' (did you mean 'image'?)"
    ]
    assert (here / "bad.yaml").read_text() == bad
    assert list(yaml.safe_load_all((here / "a.yaml").read_text())) == [RESNET]


def test_in_place_rewrites_what_a_link_points_at(here: Path) -> None:
    write(here, {"a.yaml": WRAPPED})
    (here / "link.yaml").symlink_to("a.yaml")
    result = run("--in-place", "link.yaml")
    assert result.exit_code == 0, result.stderr
    assert (here / "link.yaml").is_symlink()
    assert yaml.safe_load((here / "a.yaml").read_text()) == RESNET


def test_in_place_says_when_nothing_needed_rewriting(here: Path) -> None:
    write(here, {"b.yaml": OBJECT})
    result = run("--in-place", "b.yaml")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == (
        "podwright: note: every document is an object a cluster serves already\n"
    )


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_a_failed_write_leaves_the_file_and_no_temporary_file(
    here: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    def fail(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    write(here, {"a.yaml": WRAPPED, "b.yaml": WRAPPED})
    monkeypatch.setattr(os, failing, fail)
    result = run("--in-place", "a.yaml", "b.yaml")
    assert result.exit_code == 5  # podwright could not do its part; the input was good
    assert result.stderr.splitlines() == [
        "podwright: error: a.yaml: cannot rewrite it: No space left on device",
        "podwright: error: b.yaml: cannot rewrite it: No space left on device",
    ]
    assert [(path.name, path.read_text()) for path in sorted(here.iterdir())] == [
        ("a.yaml", WRAPPED),
        ("b.yaml", WRAPPED),
    ]


def test_the_help_says_comments_are_lost() -> None:
    result = CliRunner().invoke(cli, ["convert", "--help"])
    assert result.exit_code == 0
    assert "comments of a rewritten file are lost" in " ".join(result.stdout.split())


# -- policy files -------------------------------------------------------------------------------

RULES = {"compute": {"gpuDevicesRequest": {"max": 8}}}


def policy_file(name: str, scope: object) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "podwright.dev/v1",
            "kind": "WorkloadPolicy",
            "metadata": {"name": name},
            "spec": {"scope": scope, "workloadType": "training", "rules": RULES},
        },
        sort_keys=False,
    )


def cluster_policy(name: str, **scope: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterWorkloadPolicy",
        "metadata": {"name": name},
        "spec": {**scope, "workloadType": "training", "enforcement": "enforce", "rules": RULES},
    }


VISION_NAMESPACE = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "vision", "labels": {"podwright.dev/department": "research"}},
}


def project_policy(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPolicy",
        "metadata": {"name": name, "namespace": "vision"},
        "spec": {"workloadType": "training", "enforcement": "enforce", "rules": RULES},
    }


PROJECT = {"cluster": "prod", "department": "research", "project": "vision"}


def test_policy_files_become_the_objects_a_cluster_serves(here: Path) -> None:
    """Each scope's policy file becomes its resource, a project's with the Namespace that is
    the project (once per file); the objects do not say the cluster, so a note tells how to
    keep reading them in it. Run:ai documents and the cluster's objects pass unchanged."""
    runai = "rules: {compute: {gpuDevicesRequest: {max: 2}}}\n"
    write(
        here,
        {
            "a.yaml": "---\n".join(
                [
                    policy_file("everyone", "tenant"),
                    policy_file("prod", {"cluster": "prod"}),
                    policy_file("research", {"cluster": "prod", "department": "research"}),
                    policy_file("vision", PROJECT),
                    policy_file("vision-too", PROJECT),
                    yaml.safe_dump(project_policy("kept")),
                ]
            ),
            "runai.yaml": runai,
        },
    )
    result = run("a.yaml", "runai.yaml")
    assert result.exit_code == 0, result.stderr
    assert list(yaml.safe_load_all(result.stdout)) == [
        cluster_policy("everyone", scope="tenant"),
        cluster_policy("prod", scope="cluster"),
        cluster_policy("research", scope="department", department="research"),
        VISION_NAMESPACE,
        project_policy("vision"),
        project_policy("vision-too"),
        project_policy("kept"),
        yaml.safe_load(runai),
    ]
    assert result.stderr == (
        "podwright: note: a.yaml: its policies named cluster prod, which the objects a cluster "
        "serves do not say: read them with --cluster-name prod\n"
    )
    rewritten = run("--in-place", "a.yaml", "runai.yaml")
    assert rewritten.exit_code == 0, rewritten.stderr
    assert rewritten.stdout == "rewrote a.yaml (5 of 6 documents converted)\n"
    assert (here / "runai.yaml").read_text() == runai
    # The rewritten file reads, without a warning, as the same policies in the same cluster.
    old = podwright.load_policies(here / "runai.yaml", type="training")
    assert old.warnings == ()
    again = podwright.load_policies(here / "a.yaml", cluster="prod")
    assert again.warnings == ()
    assert [(policy.name, policy.scope.to_text()) for policy in again] == [
        ("everyone", "tenant"),
        ("prod", "cluster=prod"),
        ("research", "cluster=prod,department=research"),
        ("vision", "cluster=prod,department=research,project=vision"),
        ("vision-too", "cluster=prod,department=research,project=vision"),
        ("kept", "cluster=prod,department=research,project=vision"),
    ]


def test_a_file_whose_namespace_disagrees_with_a_policy_file_is_bad_input(here: Path) -> None:
    other = {**VISION_NAMESPACE, "metadata": {"name": "vision"}}
    write(here, {"a.yaml": f"{yaml.safe_dump(other)}---\n{policy_file('vision', PROJECT)}"})
    result = run("a.yaml")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "podwright: error: a.yaml#2: the file holds Namespace vision labelled {}, and this "
        "document needs it labelled {'podwright.dev/department': 'research'}: make them agree\n"
    )


def test_the_example_policies_are_what_convert_makes_of_their_old_form(here: Path) -> None:
    """The examples as podwright.dev/v1 files (their old form, comments aside) convert to the
    objects the examples hold."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "policies"
    old = {
        "cluster-prod.yaml": {"cluster": "prod"},
        "department-research.yaml": {"cluster": "prod", "department": "research"},
        "project-vision.yaml": PROJECT,
        "local-dev.yaml": {"cluster": "local"},
    }
    for name, scope in old.items():
        *namespaces, policy = yaml.safe_load_all((examples / name).read_text())
        spec = {
            key: value
            for key, value in policy["spec"].items()
            if key not in ("scope", "department")
        }
        written = {
            "apiVersion": "podwright.dev/v1",
            "kind": "WorkloadPolicy",
            "metadata": {"name": policy["metadata"]["name"]},
            "spec": {"scope": scope, **spec},
        }
        write(here, {name: yaml.safe_dump(written, sort_keys=False)})
        result = run(name)
        assert result.exit_code == 0, result.stderr
        assert list(yaml.safe_load_all(result.stdout)) == [*namespaces, policy], name
