"""Shared fixtures.  The third-party test files live in ``tests/data`` (with their SOURCES.md and licences),
so a clean clone runs its tests with nothing beside it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
#: The third-party files the tests read (``bvh/``, ``gltf/``), copied byte for byte with their provenance.
TEST_DATA = ROOT / "tests" / "data"

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
    """:data:`TEST_DATA`, the third-party files shared by the tests (``bvh/``, ``gltf/``).

    The test fails (not skips) when it is missing: the files are part of the repository.
    """
    assert TEST_DATA.is_dir(), f"third-party test data not found at {TEST_DATA}"
    return TEST_DATA


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
