"""Two-bone IK: 100,000 targets batched, kinema's kernel versus a vectorised NumPy version of the same maths;
and single public calls.

Run: ``pytest benchmarks/bench_two_bone.py --benchmark-only``.  The rig is an
arm of 4 joints (a rotated, translated root, then shoulder, elbow, wrist);
one pose, 100,000 targets spread over and beyond the reach, one pole.  Solves
per second are in each row's ``extra_info``.  The problem is :func:`kinema._problems.two_bone_arm`,
the baseline :func:`kinema.bench._baselines.numpy_two_bone`.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import kinema
from kinema._problems import ARM_JOINTS, TWO_BONE_TARGETS, two_bone_arm
from kinema.bench._baselines import numpy_two_bone

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

__all__ = ["numpy_two_bone", "CHAIN", "N_TARGETS"]

N_TARGETS = TWO_BONE_TARGETS
CHAIN = ARM_JOINTS


def _rig() -> tuple[kinema.Skeleton, kinema.Pose]:
    p = two_bone_arm(1)
    return p.skeleton, p.pose


def _targets(sk: kinema.Skeleton, pose: kinema.Pose) -> tuple[np.ndarray, np.ndarray]:
    p = two_bone_arm(N_TARGETS)
    return p.targets_world, p.pole_world


@pytest.fixture(scope="module")
def case() -> tuple[kinema.Skeleton, kinema.Pose, np.ndarray, np.ndarray]:
    sk, pose = _rig()
    targets, pole = _targets(sk, pose)
    ours = kinema.solve_two_bone(sk, pose, CHAIN, targets, pole)  # also compiles
    ref, err = numpy_two_bone(sk.parents, pose.translations, pose.rotations, pose.scales, targets, pole)
    # The baseline does the same maths: same rotations, same errors.
    assert np.all(kinema.rotation.equal(ours.pose.rotations, ref, atol=1e-9))
    assert np.allclose(ours.error, err, atol=1e-9)
    kinema.solve_two_bone(sk, pose, CHAIN, targets[0], pole)  # compile the single-pose path
    return sk, pose, targets, pole


def _rate(benchmark, n: int) -> None:  # type: ignore[no-untyped-def]
    benchmark.extra_info["solves_per_s"] = round(n / benchmark.stats.stats.median)


@pytest.mark.benchmark(group="two-bone-100k")
def test_two_bone_batch_kinema(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    """Public API, new output pose per call (allocates and fills 100,000 poses)."""
    sk, pose, targets, pole = case
    benchmark(kinema.solve_two_bone, sk, pose, CHAIN, targets, pole)
    _rate(benchmark, N_TARGETS)


@pytest.mark.benchmark(group="two-bone-100k")
def test_two_bone_batch_kinema_out(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    """Public API writing into a caller-owned output pose (``out=``)."""
    sk, pose, targets, pole = case
    out = sk.rest_pose((N_TARGETS,))
    benchmark(kinema.solve_two_bone, sk, pose, CHAIN, targets, pole, out=out)
    _rate(benchmark, N_TARGETS)


@pytest.mark.benchmark(group="two-bone-100k")
def test_two_bone_batch_numpy_baseline(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    sk, pose, targets, pole = case
    benchmark(numpy_two_bone, sk.parents, pose.translations, pose.rotations, pose.scales, targets, pole)
    _rate(benchmark, N_TARGETS)


@pytest.mark.benchmark(group="two-bone-single")
def test_two_bone_single_call(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    """One pose, one target, one pole, through the public function."""
    sk, pose, targets, pole = case
    target = np.ascontiguousarray(targets[1])
    benchmark(kinema.solve_two_bone, sk, pose, CHAIN, target, pole)


@pytest.mark.benchmark(group="two-bone-single")
def test_two_bone_single_helper(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    """One frame through the stateful TwoBoneIK helper (bend hint, continuity)."""
    sk, pose, targets, pole = case
    ik = kinema.TwoBoneIK(sk, CHAIN, pole=pole)
    target = np.ascontiguousarray(targets[1])
    benchmark(ik.solve, pose, target)


@pytest.mark.benchmark(group="two-bone-single")
def test_two_bone_single_numpy_baseline(benchmark, case) -> None:  # type: ignore[no-untyped-def]
    sk, pose, targets, pole = case
    benchmark(numpy_two_bone, sk.parents, pose.translations, pose.rotations, pose.scales, targets[1:2], pole)
