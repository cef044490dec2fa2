"""FK of 1000 frames x 60 joints: kinema's kernel versus a vectorised NumPy implementation
(the problem from :mod:`kinema._problems`, the baseline from :mod:`kinema.bench._baselines`)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import kinema
from kinema._problems import FK_FRAMES, FK_JOINTS, fk_rig
from kinema.bench._baselines import numpy_fk

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

__all__ = ["numpy_fk", "N_FRAMES", "N_JOINTS"]

N_FRAMES = FK_FRAMES
N_JOINTS = FK_JOINTS


def _setup() -> tuple[kinema.Skeleton, kinema.Pose]:
    return fk_rig(N_FRAMES, N_JOINTS)


@pytest.fixture(scope="module")
def case() -> tuple[kinema.Skeleton, kinema.Pose]:
    sk, pose = _setup()
    ours = kinema.forward_kinematics(sk, pose)  # also compiles
    ref_pos, _ = numpy_fk(sk.parents, pose.translations, pose.rotations, pose.scales)
    assert np.allclose(ours.positions, ref_pos, atol=1e-10)
    return sk, pose


@pytest.mark.benchmark(group="fk-1000x60")
def test_fk_kinema(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    sk, pose = case
    benchmark(kinema.forward_kinematics, sk, pose)


@pytest.mark.benchmark(group="fk-1000x60")
def test_fk_numpy_baseline(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    sk, pose = case
    benchmark(numpy_fk, sk.parents, pose.translations, pose.rotations, pose.scales)
