"""Every document podwright reads reports the problems of its envelope (apiVersion, kind, name,
unknown top-level keys) together with those of its body, each at its path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from podwright.core.assets import catalogue_from_data
from podwright.core.policies import policy_from_data
from podwright.core.problems import ProblemsError
from podwright.core.render import profile_from_data
from podwright.core.workloads import submission_from_data

Reader = Callable[[Any], object]


@pytest.mark.parametrize(
    ("read", "data", "expected"),
    [
        pytest.param(
            submission_from_data,
            {
                "type": "training",
                "name": "Bad_Name",
                "metadata": {},
                "spec": {"imagePulPolicy": "Always", "compute": {"gpuDevicesRequest": -1}},
            },
            [
                ("metadata",),
                ("spec", "imagePulPolicy"),
                ("spec", "compute", "gpuDevicesRequest"),
                ("name",),
            ],
            id="workload",
        ),
        pytest.param(
            submission_from_data,
            {"type": "training", "name": "x" * 64, "spec": {"completion": 1}},
            [("spec", "completion"), ("name",)],
            id="workload with a name too long",
        ),
        pytest.param(
            submission_from_data,
            {
                "type": "distributed",
                "name": "n" * 54,
                "spec": {"worker": {"numWorkers": 100, "image": 1}},
            },
            [("spec", "worker", "image"), ("name",)],
            id="distributed workload whose name leaves no room for worker indices",
        ),
        pytest.param(
            policy_from_data,
            {
                "apiVersion": "podwright.dev/v2",
                "kind": "Policy",
                "metadata": {"name": "Research Training"},
                "status": {},
                "spec": {
                    "scope": {"cluster": "prod"},
                    "workloadType": "training",
                    "defaults": {"imagePulPolicy": "Always"},
                    "rules": {"compute": {"gpuDevicesRequest": {"max": "eight"}}},
                },
            },
            [
                ("status",),
                ("apiVersion",),
                ("kind",),
                ("metadata", "name"),
                ("spec", "defaults", "imagePulPolicy"),
                ("spec", "rules", "compute", "gpuDevicesRequest", "max"),
            ],
            id="policy",
        ),
        pytest.param(
            policy_from_data,
            {
                "apiVersion": "podwright.dev/v1",
                "kind": "WorkloadPolicy",
                "spec": {"scope": {"cluster": "prod"}, "workloadType": "training", "extra": 1},
            },
            [("metadata",), ("spec", "extra")],
            id="policy without a name",
        ),
        pytest.param(
            catalogue_from_data,
            {
                "apiVersion": "v1",
                "kind": "Catalogue",
                "items": [],
                "assets": [
                    {"name": "data", "kind": "pvc", "spec": {"claimNam": "data"}},
                    {"id": "a", "kind": "nfs", "spec": {"server": 1}},
                ],
            },
            [
                ("items",),
                ("apiVersion",),
                ("kind",),
                ("assets", 0, "id"),
                ("assets", 1, "name"),
                ("assets", 0, "spec", "claimNam"),
                ("assets", 1, "spec", "server"),
            ],
            id="asset catalogue",
        ),
        pytest.param(
            profile_from_data,
            {
                "apiVersion": "podwright.dev/v1beta1",
                "kind": "Profile",
                "metadata": {"name": "Prod!"},
                "status": {},
                "spec": {"fuse": {"grant": "always"}, "priorityClasses": {"urgent": {}}},
            },
            [
                ("status",),
                ("apiVersion",),
                ("kind",),
                ("metadata", "name"),
                ("spec", "priorityClasses", "urgent"),
                ("spec", "fuse", "grant"),
            ],
            id="cluster profile",
        ),
    ],
)
def test_envelope_and_body_problems_are_reported_together(
    read: Reader, data: dict[str, Any], expected: list[tuple[str | int, ...]]
) -> None:
    with pytest.raises(ProblemsError) as caught:
        read(data)
    assert [problem.path for problem in caught.value.problems] == expected
