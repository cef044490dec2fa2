"""FABRIK and CCD under joint limits: warm starts, and a straight hinged arm.

* A warm start inside its limits is never left for a worse pose.  Near the elbow's straight limit FABRIK's
  passes could not bring the wrist nearer: frame 131 of a slow circle of targets started 0.019 m from its target
  and ended 0.142 m from it (every iterate was worse than the start, and the best-iterate rule only kept
  iterates better than the first).  The start, inside its limits, is now a candidate: such a solve returns the
  input pose bit for bit, reports what FK of it gives, and claims no move and no clamp.
* A straight arm whose elbow hinge bends one way only reaches a target just inside its reach on either side of
  its line.  On the side the hinge cannot bend toward, every backward pass clamped the elbow straight and the
  solve stalled 19 mm short for good; the backward pass now puts the elbow at its mirror image, on the side it
  can bend to.
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
    assert reverted == 0 or solve is kinema.solve_fabrik  # (CCD never ends farther than it started here)


def test_fabrik_returns_the_input_when_no_iterate_comes_nearer() -> None:
    """Random arm poses inside their limits, targets within 2 cm: any solve none of whose iterates comes
    nearer than the start returns it bit for bit (rotations and translations), with the start's error (FK, 1e-12),
    no move and no clamp; no solve ends farther than it started."""
    n = 20000
    rng = np.random.default_rng(1)
    pose = SK.rest_pose((n,))
    pose.rotations[:, 1:] = kinema.rotation.multiply(
        pose.rotations[:, 1:], kinema.rotation.from_rotvec(rng.normal(size=(n, SK.n_joints - 1, 3)) * 0.5))
    for name, lim in ARM_LIMITS.items():
        j = SK.index(name)
        pose.rotations[:, j] = lim.clamp(pose.rotations[:, j], SK.rotations[j])
    start = kinema.forward_kinematics(SK, pose).positions[:, WRIST]
    target = start + rng.normal(size=(n, 3)) * 0.02
    res = kinema.solve_fabrik(SK, pose, CHAIN, target, limits=ARM_LIMITS, tolerance=1e-3)
    start_error = np.linalg.norm(start - target, axis=-1)
    assert np.all(res.error <= np.maximum(start_error, 1e-3) + 1e-12)
    kept = np.nonzero(~np.asarray(res.state["moved"]) & (res.iterations > 0))[0]
    # Those returned unmoved are the input bit for bit.  (4 of the 20000 were, before stalled passes went on
    # to a descent: they now come nearer; the branch itself is test_fabrik_limited_motion's settled arm.)
    np.testing.assert_array_equal(res.pose.rotations[kept], pose.rotations[kept])
    np.testing.assert_array_equal(res.pose.translations[kept], pose.translations[kept])
    np.testing.assert_allclose(res.error[kept], start_error[kept], rtol=0.0, atol=1e-12)
    assert np.all(res.limits_hit[kept] == 0)


@pytest.mark.parametrize("chain", [("right_shoulder", "right_wrist"), ("chest", "right_wrist")])
def test_a_straight_hinged_arm_reaches_a_target_on_either_side_of_its_line(chain: tuple[str, str]) -> None:
    # The elbow bends one way, 0 to 150 degrees; the rest arm is straight.
    elbow_limit = {"right_elbow": ARM_LIMITS["right_elbow"]}
    pose = SK.rest_pose()
    fk = kinema.forward_kinematics(SK, pose)
    shoulder, elbow = fk.positions[SK.index("right_shoulder")], SK.index("right_elbow")
    reach = float(np.linalg.norm(fk.positions[WRIST] - shoulder))
    along = (fk.positions[WRIST] - shoulder) / reach
    side = np.cross(kinema.rotation.rotate(fk.rotations[elbow], [0.0, 0.0, 1.0]), along)
    iterations = []
    for sign in (1.0, -1.0):
        target = shoulder + 0.97 * reach * along + sign * 0.02 * reach * side / np.linalg.norm(side)
        res = kinema.solve_fabrik(SK, pose, chain, target, limits=elbow_limit, iterations=200)
        assert bool(res.reached), (sign, float(res.error))
        assert float(elbow_limit["right_elbow"].violation(res.pose.rotations[elbow], SK.rotations[elbow])) <= 1e-9
        iterations.append(int(res.iterations))
    if chain[0] == "right_shoulder":
        assert iterations[0] == iterations[1]  # a free shoulder: the two solves are mirror images
