"""JSON merge patch and JSON patch, as the API server applies them (RFC 7386 and RFC 6902)."""

from __future__ import annotations

from typing import Any

import pytest

from podwright.core.json_patch import (
    MalformedPatchError,
    UnappliablePatchError,
    apply_json_patch,
    apply_merge_patch,
    json_pointer,
)

DOC = {"metadata": {"name": "a", "finalizers": ["x", "y"], "labels": {"k": "v"}}, "spec": {"n": 1}}


@pytest.mark.parametrize(
    ("patch", "result"),
    [
        (
            {"metadata": {"labels": {"k": None, "j": "w"}}},
            {
                "metadata": {"name": "a", "finalizers": ["x", "y"], "labels": {"j": "w"}},
                "spec": {"n": 1},
            },
        ),
        (
            {"metadata": {"finalizers": None}},
            {"metadata": {"name": "a", "labels": {"k": "v"}}, "spec": {"n": 1}},
        ),
        (
            {"metadata": {"finalizers": ["z"]}},
            {
                "metadata": {"name": "a", "finalizers": ["z"], "labels": {"k": "v"}},
                "spec": {"n": 1},
            },
        ),
        ({"spec": 3}, {"metadata": DOC["metadata"], "spec": 3}),
        ({}, DOC),
    ],
)
def test_merge_patches(patch: dict[str, Any], result: dict[str, Any]) -> None:
    before = repr(DOC)
    assert apply_merge_patch(DOC, patch) == result
    assert repr(DOC) == before


@pytest.mark.parametrize(
    ("operations", "result"),
    [
        ([{"op": "remove", "path": "/metadata/finalizers/0"}], ["y"]),
        ([{"op": "add", "path": "/metadata/finalizers/-", "value": "z"}], ["x", "y", "z"]),
        ([{"op": "add", "path": "/metadata/finalizers/0", "value": "z"}], ["z", "x", "y"]),
        ([{"op": "replace", "path": "/metadata/finalizers/1", "value": "z"}], ["x", "z"]),
        (
            [
                {"op": "test", "path": "/metadata/name", "value": "a"},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ],
            ["x"],
        ),
        (
            [{"op": "copy", "from": "/metadata/finalizers/0", "path": "/metadata/finalizers/-"}],
            ["x", "y", "x"],
        ),
        (
            [{"op": "move", "from": "/metadata/finalizers/0", "path": "/metadata/finalizers/-"}],
            ["y", "x"],
        ),
    ],
)
def test_json_patches(operations: list[dict[str, Any]], result: list[str]) -> None:
    assert apply_json_patch(DOC, operations)["metadata"]["finalizers"] == result
    assert DOC["metadata"]["finalizers"] == ["x", "y"]


@pytest.mark.parametrize(
    ("operations", "error", "message"),
    [
        ({"op": "add"}, MalformedPatchError, "must be a list of operations"),
        ([{"path": "/a"}], MalformedPatchError, "invalid JSON patch operation"),
        ([{"op": "add", "path": "a", "value": 1}], MalformedPatchError, "invalid JSON pointer 'a'"),
        (
            [{"op": "frobnicate", "path": "/a"}],
            MalformedPatchError,
            "unknown JSON patch operation 'frobnicate'",
        ),
        (
            [{"op": "test", "path": "/metadata/name", "value": "b"}],
            UnappliablePatchError,
            "testing value /metadata/name failed",
        ),
        (
            [{"op": "remove", "path": "/metadata/missing"}],
            UnappliablePatchError,
            "doc is missing path: /metadata/missing",
        ),
        (
            [{"op": "remove", "path": "/metadata/finalizers/2"}],
            UnappliablePatchError,
            "doc is missing path: /metadata/finalizers/2",
        ),
        (
            [{"op": "add", "path": "/metadata/finalizers/3", "value": "z"}],
            UnappliablePatchError,
            "index '3' is out of range",
        ),
        ([{"op": "remove", "path": ""}], UnappliablePatchError, "cannot remove the whole document"),
    ],
)
def test_bad_json_patches(operations: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        apply_json_patch(DOC, operations)


@pytest.mark.parametrize(
    ("key", "pointer"),
    [
        pytest.param("team", "/metadata/labels/team", id="plain"),
        pytest.param("podwright.dev/x", "/metadata/labels/podwright.dev~1x", id="slash"),
        pytest.param("a~b", "/metadata/labels/a~0b", id="tilde"),
        pytest.param("~1/", "/metadata/labels/~01~1", id="tilde-before-one-not-a-slash"),
    ],
)
def test_a_pointer_escapes_each_member_name_as_rfc_6901_says(key: str, pointer: str) -> None:
    assert json_pointer("metadata", "labels", key) == pointer
    added = apply_json_patch(DOC, [{"op": "add", "path": pointer, "value": "v"}])
    assert added["metadata"]["labels"] == {"k": "v", key: "v"}
