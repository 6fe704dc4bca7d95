"""Shared pytest settings: hypothesis profiles sized for the 2-core CI machines."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("POSREF_HYPOTHESIS_PROFILE", "ci"))
