"""Test settings shared by every tier."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# CI explores more examples; locally the suite stays quick. Deadlines are off: timing belongs in
# benchmarks/, and a loaded CI machine must not turn a slow example into a failure.
settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "dev")
