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


#: The range of units docs/files.md says every solver solves in as it does in metres (the humanoid's arm, bones
#: of about 0.3 m, scaled by these): above about 1e77 CCD's squared lengths squared overflow, and below about
#: 1e-75 its and FABRIK's squares underflow (they then refuse or report the miss, as above).  The small end was
#: 1e-11: the foundation's "no direction" (``VEC_NORM_EPS``) and FABRIK's ``AIM_EPS`` were an absolute 1e-12,
#: under which two-bone, CCD and FABRIK reached nothing; they are tied to float64's range now.
SOLVING_SCALES = [1e-70, 1e-40, 1e-20, 1e-12, 1e-10, 1e-6, 1e-3, 1e3, 1e6, 1e75]


@pytest.mark.parametrize("scale", SOLVING_SCALES)
@pytest.mark.parametrize("name", list(SOLVERS))
def test_a_solve_in_the_documented_range_of_units_is_the_solve_in_metres(name: str, scale: float) -> None:
    """The same turns as the rig in metres (to 1e-9 rad), and the same error in the rig's units (to 1e-9 of it):
    a change of units changes nothing but the lengths (the tolerances, lengths too, are scaled with them; DLS
    measures its damping in the rig's own reach already)."""
    solve = SOLVERS[name] if name != "dls" else lambda sk, pose, t, s: kinema.solve_dls(
        sk, pose, [kinema.PositionGoal(ARM[2], t)], joints=list(ARM[:2]), tolerance=1e-6 * s)
    sk = kinema.Skeleton(SK.names, SK.parents, SK.translations * scale, SK.rotations)
    ref = solve(SK, SK.rest_pose(), TARGET, 1.0)
    res = solve(sk, sk.rest_pose(), TARGET * scale, scale)
    assert bool(np.all(res.reached)) == bool(np.all(ref.reached))
    assert np.all(kinema.rotation.equal(res.pose.rotations, ref.pose.rotations, atol=1e-9))
    np.testing.assert_allclose(np.asarray(res.error) / scale, np.asarray(ref.error), rtol=1e-9, atol=1e-9)
