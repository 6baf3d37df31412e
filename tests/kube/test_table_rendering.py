"""The pure parts of the emulator's server-side printing (``tests/k8s_emulator/tables.py``): ages
as apimachinery's ``duration`` package writes them (the cases of its ``duration_test.go``), the
JSONPath subset of printer columns, and cells printed as Go prints decoded JSON."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.k8s_emulator.errors import ApiError
from tests.k8s_emulator.tables import (
    evaluate,
    go_text,
    human_duration,
    parse_json_path,
    short_human_duration,
)

SECOND, MINUTE, HOUR = timedelta(seconds=1), timedelta(minutes=1), timedelta(hours=1)


@pytest.mark.parametrize(
    ("elapsed", "human", "short"),
    [
        pytest.param(SECOND, "1s", "1s", id="a-second"),
        pytest.param(70 * SECOND, "70s", "1m", id="seventy-seconds"),
        pytest.param(190 * SECOND, "3m10s", "3m", id="minutes-and-seconds"),
        pytest.param(70 * MINUTE, "70m", "1h", id="seventy-minutes"),
        pytest.param(47 * HOUR, "47h", "1d", id="forty-seven-hours"),
        pytest.param(49 * HOUR, "2d1h", "2d", id="two-days-and-an-hour"),
        pytest.param((8 * 24 + 2) * HOUR, "8d", "8d", id="eight-days"),
        pytest.param(367 * 24 * HOUR, "367d", "1y", id="a-year-and-two-days"),
        pytest.param((365 * 2 * 24 + 25) * HOUR, "2y1d", "2y", id="two-years-and-a-day"),
        pytest.param((365 * 8 * 24 + 2) * HOUR, "8y", "8y", id="eight-years"),
        pytest.param(-SECOND, "0s", "0s", id="a-second-of-skew"),
        pytest.param(-3 * SECOND, "<invalid>", "<invalid>", id="in-the-future"),
    ],
)
def test_ages_are_written_as_apimachinery_writes_them(
    elapsed: timedelta, human: str, short: str
) -> None:
    assert human_duration(elapsed) == human
    assert short_human_duration(elapsed) == short


@given(st.integers(min_value=0, max_value=59))
def test_both_ages_agree_within_a_minute(seconds: int) -> None:
    elapsed = timedelta(seconds=seconds)
    assert human_duration(elapsed) == short_human_duration(elapsed) == f"{seconds}s"


OBJECT = {
    "metadata": {"annotations": {"example.com/owner": "alice", "example": {"com/owner": "no"}}},
    "spec": {"size": 3, "tags": ["a", "b"]},
    "status": {
        "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "PolicyCompliant", "status": "True"},
        ]
    },
}


@pytest.mark.parametrize(
    ("path", "found"),
    [
        pytest.param(".spec.size", [3], id="field"),
        pytest.param(".spec.missing", [], id="missing-field"),
        pytest.param(".spec.tags[1]", ["b"], id="index"),
        pytest.param(".spec.tags[-1]", ["b"], id="index-from-the-end"),
        pytest.param(".spec.tags[5]", [], id="index-out-of-range"),
        pytest.param(".spec.tags[*]", ["a", "b"], id="every-item"),
        pytest.param(
            '.status.conditions[?(@.type=="PolicyCompliant")].status', ["True"], id="filter"
        ),
        pytest.param(
            '.status.conditions[?(@.type!="Ready")].type', ["PolicyCompliant"], id="filter-not"
        ),
        pytest.param("{.spec.size}", [3], id="braces"),
        pytest.param(
            r".metadata.annotations.example\.com/owner", ["alice"], id="escaped-dot-and-slash"
        ),
        pytest.param(".metadata.annotations.example.com/owner", ["no"], id="unescaped-dot"),
    ],
)
def test_printer_column_paths(path: str, found: list[object]) -> None:
    assert evaluate(OBJECT, parse_json_path(path)) == found


def test_a_path_beyond_the_subset_is_refused_naming_it() -> None:
    with pytest.raises(ApiError) as refused:
        parse_json_path(".spec..size")
    assert "'.spec..size'" in refused.value.message


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param("text", "text", id="string"),
        pytest.param(3, "3", id="integer"),
        pytest.param(2.5, "2.5", id="float"),
        pytest.param(4.0, "4", id="whole-float"),
        pytest.param(1e21, "1e+21", id="large-float"),
        pytest.param(True, "true", id="boolean"),
        pytest.param(None, "<nil>", id="null"),
        pytest.param({"b": 1, "a": [1, "x"]}, "map[a:[1 x] b:1]", id="map-sorted"),
    ],
)
def test_cells_are_printed_as_go_prints_decoded_json(value: object, text: str) -> None:
    assert go_text(value) == text
