"""A straight chain aimed along its target's line: CCD and FABRIK bend it (no pass or sweep can: every joint
sees the end and the target in one direction).  Before, both stopped 23 cm short of a foot target straight
below a straight leg, at any iteration count, while two-bone reached it.

The chain bends at its middle joint, toward the side it already leans to, else toward a direction fixed in
that joint's frame (``kinema._kernels.chain.fold_direction``): on the bundled humanoid's legs, knees forward.
"""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema import rotation as R

LEG = ("left_hip", "left_ankle")
#: CCD stops once no joint turns by more than its MIN_TURN_ANGLE (1e-5 rad): micrometres short on a leg.
TOLERANCE = {"ccd": 1e-4, "fabrik": 1e-7}
SOLVERS = {
    "ccd": lambda sk, pose, chain, tg, scale=1.0: kinema.solve_ccd(sk, pose, chain, tg, iterations=500,
                                                                     tolerance=TOLERANCE["ccd"] * scale),
    "fabrik": lambda sk, pose, chain, tg, scale=1.0: kinema.solve_fabrik(sk, pose, chain, tg, iterations=500,
                                                                           tolerance=TOLERANCE["fabrik"] * scale),
}


def _legs(sk: kinema.Skeleton, pose: kinema.Pose) -> tuple[np.ndarray, float]:
    p = kinema.forward_kinematics(sk, pose).positions
    return p, float(np.sum(sk.bone_lengths()[[sk.index("left_knee"), sk.index("left_ankle")]]))


@pytest.mark.parametrize("name", list(SOLVERS))
@pytest.mark.parametrize("down", [0.2, 0.6, 0.8])
def test_a_straight_leg_folds_to_a_target_straight_below(name: str, down: float) -> None:
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    p0, reach = _legs(sk, pose)
    hip = p0[sk.index("left_hip")]
    assert abs(np.linalg.norm(p0[sk.index("left_ankle")] - hip) - reach) <= 1e-12  # straight, aimed down
    tg = hip + np.array([0.0, -down, 0.0])
    res = SOLVERS[name](sk, pose, LEG, tg)
    p, _ = _legs(sk, res.pose)
    assert bool(res.reached) and float(res.error) <= TOLERANCE[name]  # 0.23 m before
    assert abs(np.linalg.norm(p[sk.index("left_ankle")] - tg) - float(res.error)) <= 1e-12  # FK agrees
    np.testing.assert_allclose(sk.bone_lengths(res.pose), sk.bone_lengths(pose), rtol=1e-9, atol=0.0)
    assert p[sk.index("left_knee"), 2] - hip[2] > 0.05  # knee forward
    others = [j for j in range(sk.n_joints) if j not in (sk.index("left_hip"), sk.index("left_knee"))]
    np.testing.assert_array_equal(res.pose.rotations[others], pose.rotations[others])


@pytest.mark.parametrize("name", list(SOLVERS))
def test_the_fold_does_not_depend_on_where_the_character_stands_or_faces(name: str) -> None:
    """The fold's side is fixed in the knee's frame: under a parent rotated, translated and scaled (the target
    moved with it) the local rotations are the same to 1e-9 (the knee's two axes across the bone tie exactly
    at rest; rounding must not pick the other)."""
    sk = kinema.samples.humanoid()
    world = kinema.Skeleton(["world"] + list(sk.names), [-1] + [int(p) + 1 for p in sk.parents],
                            np.concatenate([[[0.0, 0.0, 0.0]], sk.translations]),
                            np.concatenate([[[0.0, 0.0, 0.0, 1.0]], sk.rotations]))
    rng = np.random.default_rng(2)
    base = None
    for trial in range(12):
        pose = world.rest_pose()
        q = R.from_rotvec(rng.normal(size=3)) if trial else R.identity()
        move = rng.uniform(-500.0, 500.0, 3) if trial else np.zeros(3)
        scale = float(np.exp(rng.uniform(-3.0, 3.0))) if trial else 1.0
        pose.rotations[0], pose.translations[0], pose.scales[0] = q, move, scale
        hip = kinema.forward_kinematics(world, pose).positions[world.index("left_hip")]
        tg = hip + scale * R.rotate(q, np.array([0.0, -0.6, 0.0]))
        res = SOLVERS[name](world, pose, LEG, tg, scale)
        assert float(res.error) <= TOLERANCE[name] * scale
        local = res.pose.rotations[[world.index("left_hip"), world.index("left_knee")]]
        if base is None:
            base = local
        assert np.all(R.equal(local, base, atol=1e-9)), trial


@pytest.mark.parametrize("name", list(SOLVERS))
def test_a_nearly_straight_leg_folds_the_way_it_leans(name: str) -> None:
    """A knee sticking out backwards by 1e-4 degrees of bend (against the default side) folds backwards: the
    chain's own lean wins."""
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    pose.rotations[sk.index("left_knee")] = R.from_axis_angle([1.0, 0.0, 0.0], -np.radians(1e-4))

    def knee_out(p: np.ndarray) -> float:  # the knee's offset from the hip-ankle line, along z (forward)
        hip, knee, ankle = p[sk.index("left_hip")], p[sk.index("left_knee")], p[sk.index("left_ankle")]
        u = (ankle - hip) / np.linalg.norm(ankle - hip)
        x = knee - hip
        return float((x - (x @ u) * u)[2])

    p0, _ = _legs(sk, pose)
    assert knee_out(p0) < 0.0
    hip = p0[sk.index("left_hip")]
    tg = p0[sk.index("left_ankle")] + 0.25 * (hip - p0[sk.index("left_ankle")])
    res = SOLVERS[name](sk, pose, LEG, tg)
    p, _ = _legs(sk, res.pose)
    assert float(res.error) <= TOLERANCE[name]
    assert knee_out(p) < -0.05


@pytest.mark.parametrize("name", list(SOLVERS))
def test_a_target_on_the_line_beyond_reach_leaves_the_leg_straight(name: str) -> None:
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    p0, reach = _legs(sk, pose)
    hip = p0[sk.index("left_hip")]
    res = SOLVERS[name](sk, pose, LEG, hip + np.array([0.0, -1.5, 0.0]))
    assert not bool(res.reached)
    assert abs(float(res.error) - (1.5 - reach)) <= 1e-9
    np.testing.assert_allclose(kinema.forward_kinematics(sk, res.pose).positions, p0, rtol=0.0, atol=1e-12)


@pytest.mark.parametrize("name", list(SOLVERS))
def test_a_batch_of_straight_folds_equals_single_solves(name: str) -> None:
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    hip = kinema.forward_kinematics(sk, pose).positions[sk.index("left_hip")]
    tg = hip + np.linspace(0.1, 1.0, 10)[:, None] * np.array([0.0, -1.0, 0.0])
    batch = SOLVERS[name](sk, pose, LEG, tg)
    for k in range(len(tg)):
        one = SOLVERS[name](sk, pose, LEG, tg[k])
        np.testing.assert_array_equal(one.pose.rotations, batch.pose.rotations[k])
        assert float(one.error) == float(batch.error[k])
