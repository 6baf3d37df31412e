"""The documents adapter: files and stdin, positions, and its exception tree."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from podwright.adapters.documents import (
    DocumentError,
    InvalidDocumentError,
    UnreadableDocumentError,
    document_files,
    dump_yaml,
    parse_document,
    parse_documents,
    read_document,
    read_documents,
)


def test_a_file_is_read_with_the_position_of_every_field(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text("containers:\n  - name: a\n    args: [x, 'y']\nflag: true\n")
    document = read_document(str(path), io.StringIO())
    assert document.data == {"containers": [{"name": "a", "args": ["x", "y"]}], "flag": True}
    assert type(document.data["flag"]) is bool  # type: ignore[index]
    assert document.locate(("containers", 0, "args", 1)) == f"{path}:3:15"
    assert document.locate(("containers", 0, "missing")) == f"{path}:2:5"
    assert document.locate(()) == str(path)


def test_standard_input_is_read_for_dash() -> None:
    document = read_document("-", io.StringIO('{"containers": [{"name": "a"}]}'))
    assert document.source == "<stdin>"
    assert document.data == {"containers": [{"name": "a"}]}


def test_every_document_of_a_stream_is_read_with_its_lines_counted_in_the_file() -> None:
    text = "---\na: 1\n---\n# only a comment\n---\nb:\n  c: 2\n"
    first, second = parse_documents(text, "f.yaml")
    assert (first.source, first.file, first.data) == ("f.yaml#1", "f.yaml", {"a": 1})
    assert (second.source, second.data) == ("f.yaml#3", {"b": {"c": 2}})
    assert second.locate(("b", "c")) == "f.yaml:7:3"
    assert second.locate(()) == "f.yaml#3"
    (only,) = parse_documents("a: 1\n", "g.yaml")
    assert (only.source, only.file, only.locate(("a",))) == ("g.yaml", None, "g.yaml:1:1")


def test_a_stream_without_documents_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("---\n# nothing\n---\n")
    with pytest.raises(InvalidDocumentError, match=r"empty\.yaml: no document in it"):
        read_documents(str(path), io.StringIO())
    assert [d.data for d in read_documents("-", io.StringIO("a: 1\n---\nb: 2"))] == [
        {"a": 1},
        {"b": 2},
    ]


def test_a_directory_is_its_yaml_and_json_files_in_order(tmp_path: Path) -> None:
    for name in ("b.yaml", "a.json", "c.yml", "notes.txt"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "sub.yaml").mkdir()
    (tmp_path / "sub.yaml" / "d.yaml").write_text("{}")
    (tmp_path / "notes-only").mkdir()
    (tmp_path / "notes-only" / "README").write_text("")
    assert document_files([str(tmp_path), "-", "x.yaml"]) == [
        str(tmp_path / "a.json"),
        str(tmp_path / "b.yaml"),
        str(tmp_path / "c.yml"),
        "-",
        "x.yaml",
    ]
    with pytest.raises(UnreadableDocumentError, match=r"a directory without \.json, \.yaml, \.yml"):
        document_files([str(tmp_path / "notes-only")])


def test_json_with_tabs() -> None:
    document = parse_document('{\n\t"a": [\n\t\t1\n\t]\n}', "x.json")
    assert document.data == {"a": [1]}
    assert document.locate(("a", 0)) == "x.json:3:3"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a: 1\na: 2\n", r"^f\.yaml:2:1: invalid YAML: .*duplicate key", id="dup"),
        pytest.param("a: [\n", r"^f\.yaml:2:1: invalid YAML", id="unclosed"),
        pytest.param("a: 1\n---\nb: 2\n", r"^f\.yaml: expected one document, found 2", id="two"),
        pytest.param(
            "# nothing\n", r"^f\.yaml: expected one document, found no document", id="none"
        ),
        pytest.param('x: "\\q"', r"^f\.yaml:1:6: invalid YAML: .*escape", id="bad-escape"),
        pytest.param(
            "a:\n  b: 1\n  instances\n    - c: d\n      e: f\n",
            r"^f\.yaml:3:3: invalid YAML: 'instances' is not followed by ':'$",
            id="key-without-colon",
        ),
        pytest.param(
            "a:\n  b: 1\n  two words  # a note\n    - c: d\n      e: f\n",
            r"^f\.yaml:3:3: invalid YAML: 'two words' is not followed by ':'$",
            id="key-without-colon-before-a-comment",
        ),
    ],
)
def test_invalid_documents_carry_file_and_line(text: str, expected: str) -> None:
    with pytest.raises(InvalidDocumentError, match=expected):
        parse_document(text, "f.yaml")


def test_an_unquoted_date_is_the_string_it_spells() -> None:
    assert parse_document("value: 2024-01-31\n", "f").data == {"value": "2024-01-31"}


@pytest.mark.parametrize("kind", ["missing", "directory", "binary"])
def test_unreadable_files(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "pod.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UnreadableDocumentError, match=f"^{path}: ") as caught:
        read_document(str(path), io.StringIO())
    assert isinstance(caught.value, DocumentError)
    assert caught.value.__cause__ is not None


def test_dump_yaml_keeps_order_and_quotes_what_would_change_type() -> None:
    text = dump_yaml({"kind": "Pod", "a": {"b": ["1", True, "on"]}, "long": "x" * 200})
    assert text == f"kind: Pod\na:\n  b:\n  - '1'\n  - true\n  - 'on'\nlong: {'x' * 200}\n"
    assert yaml.safe_load(text) == {"kind": "Pod", "a": {"b": ["1", True, "on"]}, "long": "x" * 200}
    assert parse_document(text, "round-trip").data == {
        "kind": "Pod",
        "a": {"b": ["1", True, "on"]},
        "long": "x" * 200,
    }
