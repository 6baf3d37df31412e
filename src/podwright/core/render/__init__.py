"""Rendering: an effective workload becomes pod templates and the Kubernetes manifests to apply.

:func:`render` is the entry point. The pieces: :mod:`.profile` (what the cluster offers),
:mod:`.fields` (typed reading of the effective workload, and render errors), :mod:`.pods` (one
role's section → a :class:`~podwright.core.pod_template.PodTemplate`), :mod:`.storage` (volumes,
mounts, init and sidecar containers, claims), :mod:`.kinds` (the resource kind per workload type).
"""

from podwright.core.render.fields import (
    RenderError,
    RenderProblem,
    refusal_lines,
    refusal_message,
)
from podwright.core.render.kinds import Rendering, check_renders, render
from podwright.core.render.profile import (
    DEFAULT_PROFILE,
    ClusterProfile,
    ProfileError,
    profile_from_data,
)

__all__ = [
    "DEFAULT_PROFILE",
    "ClusterProfile",
    "ProfileError",
    "RenderError",
    "RenderProblem",
    "Rendering",
    "check_renders",
    "profile_from_data",
    "refusal_lines",
    "refusal_message",
    "render",
]
