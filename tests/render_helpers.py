"""Shared pieces of the renderer's tests: profiles, and rendering plain data with checks.

Every rendering here is checked by :func:`~podwright.core.render.check_renders` too (what the
validating webhook asks): it must decide as :func:`~podwright.core.render.render` does."""

from __future__ import annotations

import dataclasses
from typing import Any

from podwright.core.assets import EMPTY_CATALOGUE, AssetCatalogue
from podwright.core.render import (
    DEFAULT_PROFILE,
    ClusterProfile,
    RenderError,
    Rendering,
    check_renders,
    render,
)
from podwright.core.render.profile import (
    AUTHORIZATION_TYPES,
    KNATIVE_FEATURES,
    FuseGrantMode,
    SchedulerType,
)
from podwright.core.workload_fields import WorkloadType
from podwright.core.workloads import check_spec
from tests.manifests import assert_valid_manifests

KAI_PROFILE = dataclasses.replace(
    DEFAULT_PROFILE,
    name="kai",
    scheduler_type=SchedulerType.KAI,
    scheduler_name="kai-scheduler",
    queue="research",
)
PERMISSIVE_PROFILE = dataclasses.replace(
    KAI_PROFILE,
    name="permissive",
    fuse_grant=FuseGrantMode.PRIVILEGED,
    knative_features=frozenset(KNATIVE_FEATURES),
    authorization_types=frozenset(AUTHORIZATION_TYPES),
)
"""A cluster that offers everything: whatever fails on it fails for the workload's own reasons."""


def rendered(
    workload_type: WorkloadType | str,
    spec: dict[str, Any],
    *,
    name: str = "job",
    profile: ClusterProfile = PERMISSIVE_PROFILE,
    catalogue: AssetCatalogue = EMPTY_CATALOGUE,
    namespace: str | None = None,
) -> Rendering:
    """Render ``spec`` and check every manifest against its schema and the API server's rules."""
    rendering = render(
        WorkloadType(workload_type),
        name,
        spec,
        profile=profile,
        catalogue=catalogue,
        namespace=namespace,
    )
    assert_valid_manifests(list(rendering.manifests))
    assert (
        checked_problems(
            workload_type, spec, name, profile=profile, catalogue=catalogue, namespace=namespace
        )
        == []
    )
    return rendering


def checked_problems(
    workload_type: WorkloadType | str,
    spec: dict[str, Any],
    name: str,
    *,
    profile: ClusterProfile,
    catalogue: AssetCatalogue,
    namespace: str | None = None,
) -> list[str]:
    """The problems :func:`check_renders` finds in ``spec`` (checked first, as an evaluation's
    workload is), as ``field: message`` lines."""
    kind = WorkloadType(workload_type)
    try:
        check_renders(
            kind,
            name,
            check_spec(spec, kind, (), running=True),
            profile=profile,
            catalogue=catalogue,
            namespace=namespace,
        )
    except RenderError as error:
        return [str(problem) for problem in error.problems]
    return []


def render_problems(
    workload_type: WorkloadType | str,
    spec: dict[str, Any],
    *,
    name: str = "job",
    profile: ClusterProfile = PERMISSIVE_PROFILE,
    catalogue: AssetCatalogue = EMPTY_CATALOGUE,
) -> list[str]:
    """The problems rendering reports, as ``field: message`` lines; fails if it renders."""
    try:
        render(WorkloadType(workload_type), name, spec, profile=profile, catalogue=catalogue)
    except RenderError as error:
        problems = [str(problem) for problem in error.problems]
        assert (
            checked_problems(workload_type, spec, name, profile=profile, catalogue=catalogue)
            == problems
        )
        return problems
    raise AssertionError("rendered, but problems were expected")


def main_pod(rendering: Rendering) -> dict[str, Any]:
    """The v1 Pod the rendering's single role describes."""
    return rendering.pod_templates["main"].to_k8s_pod()


def main_container(rendering: Rendering) -> dict[str, Any]:
    pod = main_pod(rendering)
    container: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
    return container


def kinds(rendering: Rendering) -> list[str]:
    return [manifest["kind"] for manifest in rendering.manifests]
