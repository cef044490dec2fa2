"""kinema.goals: targets and axes of any finite size are the rotations and directions they hold; weights are numbers.

A quaternion or an axis whose components are huge (a sum of squares beyond float64) is still a direction:
normalised, it must equal the same direction given at unit size (to 1e-15, rounding of a few products), and a
DLS solve towards it must end there (to the solver's tolerance) with truthful diagnostics.
"""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema import rotation as rot
from kinema.goals import LookAtGoal, OrientationGoal, PoseGoal, PositionGoal

#: Rounding of a normalisation on values of order 1.
UNIT_ATOL = 1e-15


@pytest.mark.parametrize("size", [1e160, 1e200, 1e300])
def test_orientation_and_axis_of_any_finite_size(size: float) -> None:
    q = np.array([0.1, -0.2, 0.7, 0.4])
    goal = OrientationGoal("right_wrist", q * size)
    np.testing.assert_allclose(goal.rotation, q / np.linalg.norm(q), rtol=0, atol=UNIT_ATOL)
    axis = np.array([0.0, 3.0, -4.0])
    look = LookAtGoal("chest", [0.0, 1.0, 0.0], axis=axis * size)
    np.testing.assert_allclose(look.axis, axis / 5.0, rtol=0, atol=UNIT_ATOL)


def test_a_batch_of_mixed_sizes_equals_each_alone_bit_for_bit() -> None:
    qs = np.array([[0.1, -0.2, 0.7, 0.4], [0.0, 0.0, 1e300, 1e300], [0.3, 0.1, -0.5, 0.8]])
    batch = OrientationGoal(0, qs).rotation
    for i in range(len(qs)):
        np.testing.assert_array_equal(batch[i], OrientationGoal(0, qs[i]).rotation)


def test_dls_towards_a_huge_quaternion_ends_on_its_rotation() -> None:
    """[0, 0, 1e200, 1e200] is a quarter turn about z: the solve must end there, not report a zero error for a
    zero quaternion it made of it."""
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    wrist = sk.index("right_wrist")
    want = np.array([0.0, 0.0, 1.0, 1.0]) / np.sqrt(2.0)
    for res in (kinema.solve_dls(sk, pose, [OrientationGoal(wrist, [0.0, 0.0, 1e200, 1e200])]),
                kinema.DLS(sk, [OrientationGoal(wrist, [0.0, 0.0, 0.0, 1.0])]).solve(pose, [[0.0, 0.0, 1e200, 1e200]])):
        got = kinema.forward_kinematics(sk, res.pose).rotations[wrist]
        angle = float(rot.angle_between(got, want))
        assert angle == pytest.approx(float(res.error), abs=1e-9)  # the reported error is the real one
        assert bool(res.reached) and angle <= 1e-6


def test_weights_are_numbers() -> None:
    for bad in ("2", b"2", np.bool_(True), True, None, [1.0]):
        for make in (lambda w: PositionGoal(0, [0.0, 0.0, 0.0], weight=w), lambda w: PoseGoal(w)):
            with pytest.raises(kinema.SolverInputError, match="weight must be"):
                make(bad)
    assert PositionGoal(0, [0.0, 0.0, 0.0], weight=np.float32(0.5)).weight == 0.5
    assert PoseGoal(np.int64(2)).weight == 2.0
