"""A straight chain aimed along its position goal's target line: DLS bends it once and solves on.

At a straight chain every joint's rotation moves the end across the line, none along it, so the damped step
is zero and the solve stopped where it started (0.23 m short on the humanoid's arm, elbow straight) while CCD
and FABRIK reached the target (tests/test_straight_chains.py).  A target 1 mm off the line solved.  Now, when
no step lowers the error, a straight chain whose target is on its line within reach is bent once
(``kinema._kernels.dls._fold_straight``, at ``chain.fold_point`` toward ``chain.fold_direction``).
"""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from _dls_batch import assert_batch_equals_singles
from kinema.goals import PositionGoal
from kinema.limits import Hinge, SwingTwist

TOL = 1e-6  # DLS's default tolerance
ARM = ("right_shoulder", "right_elbow", "right_wrist")
LEG = ("right_hip", "right_knee", "right_ankle")
#: Largest local rotation change (radians) of a solved joint from one frame to the next while the target rises
#: 1 mm a frame along the arm's line (measured: at most 0.0106 rad, the elbow near full reach).
FRAME_TURN_BOUND = 0.02


def _setup(chain: tuple[str, str, str], limits: dict | None = None) -> tuple[kinema.Skeleton, kinema.Pose,
                                                                             np.ndarray, float, kinema.DLS]:
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    p = kinema.forward_kinematics(sk, pose).positions
    top, mid, end = (sk.index(n) for n in chain)
    reach = float(np.linalg.norm(p[mid] - p[top]) + np.linalg.norm(p[end] - p[mid]))
    assert abs(np.linalg.norm(p[end] - p[top]) - reach) <= 1e-12  # straight at rest, hanging down
    assert np.allclose(p[end, [0, 2]], p[top, [0, 2]], rtol=0.0, atol=1e-15)
    dls = kinema.DLS(sk, [PositionGoal(chain[2], p[end])], joints=list(chain[:2]), limits=limits)
    return sk, pose, p[top], reach, dls


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotation angle between unit quaternions (accurate near 0, unlike the arccos of their dot)."""
    b = np.where(np.sum(a * b, axis=-1, keepdims=True) < 0.0, -b, b)
    return 4.0 * np.arctan2(np.linalg.norm(a - b, axis=-1), np.linalg.norm(a + b, axis=-1))


@pytest.mark.parametrize("chain", [ARM, LEG], ids=["arm", "leg"])
@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.6, 0.9, 0.99])
def test_a_straight_chain_reaches_a_target_on_its_line(chain: tuple[str, str, str], fraction: float) -> None:
    sk, pose, top, reach, dls = _setup(chain)
    tg = top + np.array([0.0, -fraction * reach, 0.0])
    res = dls.solve(pose, [tg])
    assert bool(res.reached) and float(res.error) <= TOL  # before: error reach - distance, not reached
    p = kinema.forward_kinematics(sk, res.pose).positions
    assert abs(np.linalg.norm(p[sk.index(chain[2])] - tg) - float(res.error)) <= 1e-12
    assert _angle(res.pose.rotations[sk.index(chain[1])], pose.rotations[sk.index(chain[1])]) > 0.1  # bent
    others = [j for j in range(sk.n_joints) if sk.names[j] not in chain[:2]]
    np.testing.assert_array_equal(res.pose.rotations[others], pose.rotations[others])


def test_a_target_rising_along_the_arm_stays_reached_every_frame() -> None:
    """The reproduction: from the rest pose the target rises 1 mm a frame along the arm's line (300 frames,
    0.5 m to 0.201 m below the shoulder), each frame solved from the last."""
    sk, pose, top, reach, dls = _setup(ARM)
    moving = [sk.index(n) for n in ARM[:2]]
    cur = pose
    for f in range(300):
        res = dls.solve(cur, [top + np.array([0.0, -0.5 + f * 0.001, 0.0])])
        assert bool(res.reached) and float(res.error) <= TOL, f  # before: 0.034 m growing to 0.333 m
        if f > 0:
            turn = _angle(res.pose.rotations[moving], cur.rotations[moving])
            assert turn.max() <= FRAME_TURN_BOUND, (f, turn)
        cur = res.pose


@pytest.mark.parametrize("chain", [ARM, LEG], ids=["arm", "leg"])
@pytest.mark.parametrize("beyond", [1e-6, 0.05, 1.0])
def test_a_target_beyond_reach_on_the_line_leaves_the_chain_straight_and_aimed(chain: tuple[str, str, str],
                                                                               beyond: float) -> None:
    """Guards behaviour (the same before the fix): no fold, straight is the closest pose."""
    sk, pose, top, reach, dls = _setup(chain)
    d = reach + beyond
    res = dls.solve(pose, [top + np.array([0.0, -d, 0.0])])
    assert not bool(res.reached)
    assert abs(float(res.error) - (d - reach)) <= 1e-9
    p = kinema.forward_kinematics(sk, res.pose).positions
    end = p[sk.index(chain[2])]
    assert abs(np.linalg.norm(end - top) - reach) <= 1e-9  # straight
    assert np.linalg.norm(end[[0, 2]] - top[[0, 2]]) <= 1e-9  # aimed down the line


@pytest.mark.parametrize("lo, hi", [(0.0, 2.5), (-2.5, 0.0)])
def test_the_fold_keeps_the_limits(lo: float, hi: float) -> None:
    """A hinge elbow that bends one way only: the fold takes the side the hinge allows (either sign), and every
    limit holds in the solved pose."""
    limits = {"right_elbow": Hinge((0, 0, 1), lo, hi), "right_shoulder": SwingTwist((0, -1, 0), 1.2)}
    sk, pose, top, reach, dls = _setup(ARM, limits)
    for fraction in (0.5, 0.7, 0.95):  # (0.2 needs a bend past 2.5 rad)
        res = dls.solve(pose, [top + np.array([0.0, -fraction * reach, 0.0])])
        assert bool(res.reached) and float(res.error) <= TOL
        for name, lim in limits.items():
            q = res.pose.rotations[sk.index(name)]
            c = lim.clamp(q, sk.rotations[sk.index(name)])
            assert _angle(c, q) <= 1e-9  # inside its limit
    # a hinge held straight (no room to bend) leaves the arm straight: the clamp keeps it, so no fold
    limits = {"right_elbow": Hinge((0, 0, 1), 0.0, 0.0)}
    sk, pose, top, reach, dls = _setup(ARM, limits)
    res = dls.solve(pose, [top + np.array([0.0, -0.3, 0.0])])
    assert not bool(res.reached)
    assert _angle(res.pose.rotations[sk.index("right_elbow")], pose.rotations[sk.index("right_elbow")]) <= 1e-12


def test_a_batch_mixing_straight_and_bent_items_equals_single_solves() -> None:
    """Guards behaviour: a batch (96 items: threaded chunks) equals a loop of single solves bit for bit; a third
    of the items are folded (straight arm, target on its line within reach)."""
    sk, pose, top, reach, dls = _setup(ARM)
    rng = np.random.default_rng(7)
    n = 96
    rot = np.repeat(pose.rotations[None], n, axis=0)
    tg = np.repeat(top[None], n, axis=0)
    for i in range(n):
        if i % 3 == 0:  # straight arm, target on its line within reach: folded
            tg[i] += [0.0, -rng.uniform(0.05, 0.95) * reach, 0.0]
        elif i % 3 == 1:  # bent arm, target anywhere near
            for j in (sk.index("right_shoulder"), sk.index("right_elbow")):
                a = rng.normal(size=3) * 0.4
                ang = np.linalg.norm(a)
                rot[i, j] = kinema.rotation.multiply(rot[i, j], np.r_[a / ang * np.sin(ang / 2), np.cos(ang / 2)])
            tg[i] += rng.normal(size=3) * 0.3
        else:  # straight arm, target beyond reach on its line
            tg[i] += [0.0, -1.2 * reach, 0.0]
    batch = kinema.Pose(np.repeat(pose.translations[None], n, axis=0), rot,
                        np.repeat(pose.scales[None], n, axis=0))
    assert_batch_equals_singles(dls, batch, tg)
