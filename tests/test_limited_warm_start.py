"""Warm-started solves under joint limits never end farther from the target than the pose they started from.

A slow circle of targets around the humanoid's right shoulder, each frame solved from the previous frame's
result (chest to right wrist, the hinged elbow and swing-twist shoulder of ``_limited_arm``).  Near the
elbow's straight limit FABRIK's passes cannot bring the wrist nearer: frame 131 started 0.019 m from its
target and ended 0.142 m from it (every iterate was worse than the start, and the best-iterate rule
only kept iterates better than the first).  The start, inside its limits, is now a candidate: such a solve
returns the input pose bit for bit, reports what FK of it gives, and claims no move and no clamp.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import kinema
from _limited_arm import ARM_LIMITS

SK = kinema.samples.humanoid()
CHAIN = ("chest", "right_wrist")
WRIST = SK.index("right_wrist")


def _targets(n: int = 200) -> np.ndarray:
    shoulder = kinema.forward_kinematics(SK, SK.rest_pose()).positions[SK.index("right_shoulder")]
    a = 2.0 * np.pi * np.arange(n) / 360.0
    return shoulder + np.stack([np.full(n, 0.25), -0.2 + 0.3 * np.cos(a), 0.3 * np.sin(a)], axis=-1)


def _inside(pose: kinema.Pose) -> bool:
    return all(float(np.max(lim.violation(pose.rotations[SK.index(name)], SK.rotations[SK.index(name)]))) <= 1e-9
               for name, lim in ARM_LIMITS.items())


@pytest.mark.parametrize("solve", [kinema.solve_fabrik, kinema.solve_ccd], ids=["fabrik", "ccd"])
def test_a_warm_start_inside_its_limits_is_never_left_for_a_worse_pose(solve: Any) -> None:
    pose = SK.rest_pose()
    reverted = 0
    for target in _targets():
        start_error = float(np.linalg.norm(kinema.forward_kinematics(SK, pose).positions[WRIST] - target))
        res = solve(SK, pose, CHAIN, target, limits=ARM_LIMITS, tolerance=1e-3)
        fk_error = float(np.linalg.norm(kinema.forward_kinematics(SK, res.pose).positions[WRIST] - target))
        assert res.error == pytest.approx(fk_error, rel=0.0, abs=1e-12)
        assert _inside(res.pose)
        if _inside(pose):
            assert res.error <= max(start_error, 1e-3) + 1e-12
        if res.error == start_error and res.error > 1e-3:
            # the input returned as it was: bit for bit, and said so
            reverted += 1
            for a, b in ((res.pose.rotations, pose.rotations), (res.pose.translations, pose.translations)):
                np.testing.assert_array_equal(a, b)
            assert not res.state["moved"] and res.limits_hit == 0
        pose = res.pose
    if solve is kinema.solve_fabrik:
        assert reverted > 0  # the scenario does reach the branch (frames 131, 133-135, ...)
