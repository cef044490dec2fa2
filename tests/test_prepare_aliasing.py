"""Per-item inputs that are views into ``out`` are read before ``out`` is written (kinema._solve.prepare), for
every solver that prepares through it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kinema

Solve = Callable[[kinema.Pose, Any, Any, kinema.Pose | None], kinema.SolveResult]


@pytest.fixture(scope="module")
def humanoid() -> tuple[kinema.Skeleton, kinema.Pose, np.ndarray]:
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    return sk, pose, kinema.forward_kinematics(sk, pose).positions


def _solvers(sk: kinema.Skeleton) -> dict[str, Solve]:
    """``solve(pose, target, pole, out)`` for each solver that uses prepare (pole None where it takes none)."""
    arm = ("right_shoulder", "right_wrist")
    ccd = kinema.CCD(sk, arm)
    ccd_blend = kinema.CCD(sk, ("chest", "right_wrist"), fixed_root=False)
    fabrik = kinema.FABRIK(sk, arm)
    tree = kinema.FABRIKTree(sk, {"right_wrist": 1.0})
    two = kinema.TwoBone(sk, ("right_shoulder", "right_elbow", "right_wrist"))
    return {
        "ccd": lambda p, t, pl, out: ccd.solve(p, t, pole=pl, out=out),
        "ccd sliding, blended": lambda p, t, pl, out: ccd_blend.solve(p, t, pole=pl, weight=0.5, out=out),
        "fabrik": lambda p, t, pl, out: fabrik.solve(p, t, pole=pl, out=out),
        "fabrik tree": lambda p, t, pl, out: tree.solve(p, {"right_wrist": t}, out=out),
        "two bone": lambda p, t, pl, out: two.solve(p, t, pole=pl, out=out),
        "dls": lambda p, t, pl, out: kinema.solve_dls(sk, p, [kinema.PositionGoal("right_wrist", t)], out=out),
    }


NAMES = ["ccd", "ccd sliding, blended", "fabrik", "fabrik tree", "two bone", "dls"]


@pytest.mark.parametrize("name", NAMES)
def test_a_target_that_is_a_view_into_out_is_read_first(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], name: str) -> None:
    """``buf.translations[5] = target; solve(pose, buf.translations[5], out=buf)``: prepare copied the pose
    into ``out`` before copying the target, so the solve aimed at the pose's own translation."""
    sk, pose, P = humanoid
    solve = _solvers(sk)[name]
    target = P[3] + [0.3, -0.1, 0.15]
    want = solve(pose, target.copy(), None, None)
    buf = sk.rest_pose()
    buf.translations[5] = target
    got = solve(pose, buf.translations[5], None, buf)
    assert got.pose is buf
    np.testing.assert_array_equal(buf.rotations, want.pose.rotations)
    np.testing.assert_array_equal(buf.translations, want.pose.translations)
    np.testing.assert_array_equal(got.error, want.error)


@pytest.mark.parametrize("name", ["ccd", "ccd sliding, blended", "fabrik", "two bone"])
def test_a_pole_that_is_a_view_into_out_is_read_first(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], name: str) -> None:
    sk, pose, P = humanoid
    solve = _solvers(sk)[name]
    target = P[3] + [0.3, -0.1, 0.15]
    pole = P[4] + [0.0, 0.0, -1.0]
    want = solve(pose, target, pole.copy(), None)
    stale = solve(pose, target, pose.translations[4].copy(), None)  # what an overwritten pole would give
    assert not np.array_equal(want.pose.rotations, stale.pose.rotations)
    buf = sk.rest_pose()
    buf.translations[4] = pole
    solve(pose, target, buf.translations[4], buf)
    np.testing.assert_array_equal(buf.rotations, want.pose.rotations)


@pytest.mark.parametrize("name", NAMES)
def test_batched_targets_viewing_a_batched_out_are_read_first(
        humanoid: tuple[kinema.Skeleton, kinema.Pose, np.ndarray], name: str) -> None:
    """A ``(N, 3)`` block of ``out``'s translations as the targets (C-contiguous when the block is the whole
    array of a one-joint view: here rows of a reshaped buffer)."""
    sk, pose, P = humanoid
    solve = _solvers(sk)[name]
    targets = P[3] + np.array([[0.3, -0.1, 0.15], [0.2, -0.3, 0.1], [0.1, -0.4, 0.2]])
    want = solve(pose, targets.copy(), None, None)
    buf = pose.broadcast((3,))
    buf.translations[:, 5] = targets
    got = solve(pose, buf.translations[:, 5], None, buf)
    np.testing.assert_array_equal(buf.rotations, want.pose.rotations)
    np.testing.assert_array_equal(got.error, want.error)
