"""Shared fixtures.  Third-party files live in ../shared/data (CI lays shared/ beside the clone)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("KINEMA_SHARED_DATA", ROOT.parent / "shared" / "data"))

# The first call of each kernel compiles it (seconds); hypothesis deadlines
# would count that.  Examples stay bounded for a 2-core CI machine.
settings.register_profile(
    "kinema",
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", deadline=None, max_examples=500, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "kinema"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; the test fails (not skips) when it is missing, since CI always provides it."""
    assert SHARED_DATA.is_dir(), f"third-party test data not found at {SHARED_DATA}"
    return SHARED_DATA


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
