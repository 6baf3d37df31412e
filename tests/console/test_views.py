"""The console's view helpers: what a page shows, from plain data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from podwright.console.views import (
    PAGE_SIZE,
    Page,
    QueryError,
    TableQuery,
    age,
    endpoints,
    gpus,
    leaves,
    owned_resources,
    source_of,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workload-distributed-pytorch.yaml"
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (59 * 60, "59m"),
        (3 * 3600 + 20 * 60, "3h20m"),
        (9 * 3600 + 20 * 60, "9h"),
        (2 * 86400, "2d"),
        (-5, "0s"),
    ],
)
def test_age_is_printed_as_kubectl_prints_it(seconds: int, shown: str) -> None:
    assert age(NOW, NOW - timedelta(seconds=seconds)) == shown


@pytest.mark.parametrize(
    ("effective", "shown"),
    [
        ({"type": "training"}, ""),
        ({"type": "training", "compute": {"gpuDevicesRequest": 2}}, "2"),
        ({"type": "training", "compute": {"gpuPortionRequest": 0.5}}, "0.5"),
        (
            {
                "type": "distributed",
                "master": {"compute": {"gpuDevicesRequest": 1}},
                "worker": {"numWorkers": 4, "compute": {"gpuDevicesRequest": 2}},
            },
            "9",
        ),
        (
            {"type": "distributed", "worker": {"compute": {"gpuDevicesRequest": 8}}},
            "8",  # one worker unless numWorkers says more
        ),
    ],
)
def test_gpus_add_up_every_role(effective: dict[str, object], shown: str) -> None:
    assert gpus(effective) == shown


def test_the_example_distributed_workload_asks_for_its_masters_and_workers_gpus() -> None:
    spec = yaml.safe_load(EXAMPLE.read_text())["spec"]
    assert gpus(spec) == str(8 + 8 * 4)


def test_leaves_name_instances_by_index_and_keep_arrays_of_strings_whole() -> None:
    spec = {
        "image": "pytorch",
        "nodePools": ["a100", "h100"],
        "environmentVariables": [{"name": "EPOCHS", "value": "90"}],
        "compute": {"gpuDevicesRequest": 1},
    }
    assert leaves(spec) == [
        ("image", "pytorch"),
        ("nodePools", '["a100", "h100"]'),
        ("environmentVariables[0].name", "EPOCHS"),
        ("environmentVariables[0].value", "90"),
        ("compute.gpuDevicesRequest", "1"),
    ]


def test_a_value_s_source_is_the_nearest_the_evaluation_names_else_the_submission() -> None:
    sources = {"compute.gpuDevicesRequest": "department research", "storage.pvc": "cluster prod"}
    assert source_of("compute.gpuDevicesRequest", sources, set()) == "department research"
    assert source_of("storage.pvc[0].claimName", sources, set()) == "cluster prod"
    assert source_of("image", sources, {"image"}) == "submission"
    assert source_of("image", sources, set()) == ""


def test_owned_resources_and_endpoints_come_from_the_manifests() -> None:
    manifests = [
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"}, "spec": {}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "notebook"},
            "spec": {"ports": [{"port": 8888}]},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {"name": "notebook"},
            "spec": {"rules": [{"host": "nb.example.com", "http": {"paths": [{"path": "/lab"}]}}]},
        },
    ]
    assert owned_resources(manifests) == [
        ("Job", "train"),
        ("Service", "notebook"),
        ("Ingress", "notebook"),
    ]
    assert endpoints(manifests) == ["service/notebook:8888", "http://nb.example.com/lab"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"sort": "size"}, "sort 'size': one of submitted, updated, name, phase, type"),
        ({"order": "up"}, "order 'up': asc or desc"),
        ({"page": "0"}, "page '0': a whole number from 1"),
        ({"phase": "Sleeping"}, "'Sleeping' is not a phase"),
        ({"type": "batch"}, "type 'batch': one of workspace, training, distributed, inference"),
        ({"label": "a in"}, "label selector"),
    ],
)
def test_a_bad_query_parameter_is_named(params: dict[str, str], message: str) -> None:
    multi = {key: [value] for key, value in params.items()}
    with pytest.raises(QueryError) as raised:
        TableQuery.parse(params, multi)
    assert message in str(raised.value)


def test_a_query_s_parameters_read_back_to_the_same_query() -> None:
    query = TableQuery(
        namespace="vision",
        phases=("Running",),
        types=("training",),
        selector="team=vision",
        sort="name",
        descending=False,
        page=3,
    )
    text = query.params()
    pairs = [pair.split("=", 1) for pair in text.split("&")]
    params = {key: value.replace("%3D", "=") for key, value in pairs}
    multi = {key: [value] for key, value in params.items()}
    assert TableQuery.parse(params, multi) == query


def test_sorting_by_the_shown_column_again_turns_the_order_round() -> None:
    query = TableQuery(sort="name", descending=False)
    assert TableQuery(sort="name").sorted_by("name") == "sort=name&order=asc"
    assert query.sorted_by("name") == "sort=name"
    assert query.sorted_by("submitted") == ""


@given(st.integers(min_value=0, max_value=3 * PAGE_SIZE + 7), st.integers(1, 10))
def test_pages_cover_every_row_once(total: int, number: int) -> None:
    rows = list(range(total))
    pages = [Page.of(rows, n) for n in range(1, Page.of(rows, 1).count + 1)]  # type: ignore[arg-type]
    assert [row for page in pages for row in page.rows] == rows
    page = Page.of(rows, number)  # type: ignore[arg-type]
    assert 1 <= page.number <= page.count
    assert page.total == total
