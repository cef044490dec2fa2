"""Every solver's ``limits`` may be set after construction (one rule for CCD, FABRIK, FABRIKTree and TwoBone).

A solver whose limits were set solves exactly (bit for bit) as one built with them, setting None as one built
without; a limit the constructor refuses is refused by the setter with the same error, and the solver is left
as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kinema
from kinema import rotation as R
from kinema.errors import KinemaError
from kinema.limits import Hinge, SwingTwist

SK = kinema.samples.humanoid()
RNG = np.random.default_rng(8)
POSE = kinema.Pose(SK.translations, R.from_rotvec(RNG.normal(size=(SK.n_joints, 3)) * 0.3))
P = kinema.forward_kinematics(SK, POSE).positions
ELBOW = {"right_elbow": Hinge((1.0, 0.0, 0.0), 0.2, 1.2)}
ARM_LIMITS = {**ELBOW, "right_shoulder": SwingTwist((0.0, 1.0, 0.0), 0.6, 0.3)}
TARGETS = P[SK.index("right_shoulder")] + RNG.normal(size=(6, 3)) * 0.3

#: (make a solver with the given limits, solve it on the targets, limits another solver would take, a bad one).
CASES: dict[str, tuple[Callable[..., Any], Callable[[Any], kinema.SolveResult], Any, Any]] = {
    "TwoBone": (lambda **kw: kinema.TwoBone(SK, ("right_shoulder", "right_elbow", "right_wrist"), **kw),
                lambda ik: ik.solve(POSE, TARGETS), ELBOW, {"right_shoulder": Hinge((1.0, 0.0, 0.0), 0.0, 1.0)}),
    "CCD": (lambda **kw: kinema.CCD(SK, ("right_shoulder", "right_wrist"), **kw),
            lambda ik: ik.solve(POSE, TARGETS), ARM_LIMITS, {"right_elbow": "not a limit"}),
    "FABRIK": (lambda **kw: kinema.FABRIK(SK, ("right_shoulder", "right_wrist"), **kw),
               lambda ik: ik.solve(POSE, TARGETS), ARM_LIMITS, {"right_elbow": 1.0}),
    "FABRIKTree": (lambda **kw: kinema.FABRIKTree(SK, ["right_wrist", "left_wrist"], **kw),
                   lambda ik: ik.solve(POSE, {"right_wrist": TARGETS, "left_wrist": TARGETS * [-1.0, 1.0, 1.0]}),
                   {**ARM_LIMITS, "left_elbow": ELBOW["right_elbow"]}, {"no_such_joint": ELBOW["right_elbow"]}),
}


def same(a: kinema.SolveResult, b: kinema.SolveResult) -> bool:
    return (np.array_equal(a.pose.rotations, b.pose.rotations) and np.array_equal(a.pose.translations,
                                                                                  b.pose.translations)
            and np.array_equal(a.error, b.error) and np.array_equal(a.limits_hit, b.limits_hit)
            and np.array_equal(a.reached, b.reached))


@pytest.mark.parametrize("name", list(CASES))
def test_set_limits_solve_as_built_with_them(name: str) -> None:
    make, solve, limits, _ = CASES[name]
    limited, free = solve(make(limits=limits)), solve(make())
    assert not same(limited, free)  # the limits act on these targets
    ik = make()
    ik.limits = limits
    assert ik.limits == limits
    assert same(solve(ik), limited)
    ik.limits = None
    assert ik.limits is None and same(solve(ik), free)
    ik = make(limits=limits)
    ik.limits = {}
    assert same(solve(ik), free)


@pytest.mark.parametrize("name", list(CASES))
def test_a_refused_limit_leaves_the_solver_as_it_was(name: str) -> None:
    make, solve, limits, bad = CASES[name]
    with pytest.raises(KinemaError) as built:
        make(limits=bad)
    ik = make(limits=limits)
    before = solve(ik)
    with pytest.raises(type(built.value)) as set_:
        ik.limits = bad
    assert str(set_.value) == str(built.value)
    assert ik.limits == limits and same(solve(ik), before)
