"""Rigs in extreme but finite units: every solver either solves, truthfully, or raises a SolverInputError.

The humanoid's arm scaled by 1e-300 .. 1e150, its targets with it: each solver returns finite rotations and an
error that is the end joint's real distance to the target (forward kinematics), or refuses with a
SolverInputError; never another exception (CCD raised a bare ZeroDivisionError out of its kernel at 1e-100,
where its squared lengths underflow to zero).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kinema
from kinema.errors import SolverInputError

SK = kinema.samples.humanoid()
P = kinema.forward_kinematics(SK, SK.rest_pose()).positions
TARGET = P[SK.index("right_shoulder")] + np.array([0.1, -0.3, 0.2])
ARM = ("right_shoulder", "right_elbow", "right_wrist")
END = SK.index("right_wrist")

SOLVERS: dict[str, Callable[[kinema.Skeleton, kinema.Pose, np.ndarray, float], Any]] = {
    "two_bone": lambda sk, pose, t, s: kinema.solve_two_bone(sk, pose, ARM, t),
    "ccd": lambda sk, pose, t, s: kinema.solve_ccd(sk, pose, (ARM[0], ARM[2]), t, tolerance=1e-3 * s),
    "fabrik": lambda sk, pose, t, s: kinema.solve_fabrik(sk, pose, (ARM[0], ARM[2]), t, tolerance=1e-3 * s),
    "dls": lambda sk, pose, t, s: kinema.solve_dls(sk, pose, [kinema.PositionGoal(ARM[2], t)],
                                                   joints=list(ARM[:2])),
}


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e-100, 1e-50, 1e-13, 1e50, 1e100, 1e150])
@pytest.mark.parametrize("name", list(SOLVERS))
def test_a_solve_in_extreme_units_is_truthful_or_refused(name: str, scale: float) -> None:
    sk = kinema.Skeleton(SK.names, SK.parents, SK.translations * scale, SK.rotations)
    pose, target = sk.rest_pose(), TARGET * scale
    try:
        res = SOLVERS[name](sk, pose, target, scale)
    except SolverInputError:
        return  # refused, with the project's error
    assert np.all(np.isfinite(res.pose.rotations)) and np.all(np.isfinite(res.pose.translations))
    end = kinema.forward_kinematics(sk, res.pose).positions[END]
    real = float(np.linalg.norm((end - target) / scale))  # (divided first: the squares of 1e-300 underflow)
    reported = float(np.max(res.error)) / scale
    assert abs(reported - real) <= 1e-9 * max(1.0, real), (reported, real)
