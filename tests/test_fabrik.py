"""FABRIK: chains, rotations from positions, limits, unreachable targets, trees, batches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kinema
from _limited_arm import ARM_LIMITS, errors_by_iterations
from kinema import rotation as R
from kinema.limits import EulerRange, Hinge, SwingTwist

ROOT = Path(__file__).resolve().parents[1]

#: Bone lengths are kept by construction (rotations only): relative error bound.
LENGTH_RTOL = 1e-12
#: Limits hold exactly after a solve, up to the limit kernel's slack and rounding.
LIMIT_ATOL = 1e-9


def make_chain(n_bones: int, seg: float | list[float] = 1.0, rest_rot: np.ndarray | None = None,
               parent: tuple[np.ndarray, np.ndarray, float] | None = None) -> kinema.Skeleton:
    """A chain ``j0 -> ... -> j{n}`` along +y; optionally hung under a transformed ``base`` joint."""
    segs = [seg] * n_bones if np.isscalar(seg) else list(seg)  # type: ignore[list-item]
    names = [f"j{i}" for i in range(n_bones + 1)]
    trans = [[0.0, 0.0, 0.0]] + [[0.0, float(s), 0.0] for s in segs]
    parents = [-1] + list(range(n_bones))
    rots = np.tile([0.0, 0.0, 0.0, 1.0], (n_bones + 1, 1)) if rest_rot is None else rest_rot
    scales = np.ones((n_bones + 1, 3))
    if parent is not None:
        p_t, p_q, p_s = parent
        names = ["base"] + names
        parents = [-1] + [p + 1 for p in parents]
        trans = [list(p_t)] + trans
        rots = np.vstack([p_q, rots])
        scales = np.vstack([[p_s] * 3, scales])
    return kinema.Skeleton(names, parents, trans, rots, scales)


def fk_pos(sk: kinema.Skeleton, pose: kinema.Pose) -> np.ndarray:
    return kinema.forward_kinematics(sk, pose).positions


def reachable_targets(sk: kinema.Skeleton, n: int, rng: np.random.Generator, end: str, scale: float = 0.8,
                      limits: dict | None = None) -> np.ndarray:
    q = R.from_rotvec(rng.normal(size=(n, sk.n_joints, 3)) * scale)
    if limits:
        for j, lim in limits.items():
            jj = sk.index(j)
            q[:, jj] = lim.clamp(q[:, jj], sk.rotations[jj])
    pose = kinema.Pose(np.broadcast_to(sk.translations, (n, sk.n_joints, 3)), q)
    return fk_pos(sk, pose)[:, sk.index(end)]


def check_lengths(sk: kinema.Skeleton, before: kinema.Pose, after: kinema.Pose) -> None:
    lb = sk.bone_lengths(before)
    la = sk.bone_lengths(after)
    lb = np.broadcast_to(lb, la.shape)
    np.testing.assert_allclose(la, lb, rtol=LENGTH_RTOL, atol=1e-15)


# ---------------------------------------------------------------- reaching


def test_reachable_targets_are_reached_and_fk_agrees(rng: np.random.Generator) -> None:
    sk = make_chain(6, [1.0, 0.8, 1.2, 0.5, 0.9, 0.7])
    tg = reachable_targets(sk, 300, rng, "j6")
    res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j6"), tg, iterations=50, tolerance=1e-4)
    end = fk_pos(sk, res.pose)[:, 6]
    err = np.linalg.norm(end - tg, axis=-1)
    np.testing.assert_allclose(res.error, err, rtol=0, atol=1e-12)
    assert np.array_equal(res.reached, err <= 1e-4)
    assert res.reached.mean() >= 0.97
    check_lengths(sk, sk.rest_pose(), res.pose)


def test_single_solve_shapes_and_defaults() -> None:
    sk = make_chain(3)
    res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j3"), [1.0, 1.5, 0.5])
    assert res.reached.shape == () and bool(res.reached)
    assert res.error.shape == () and float(res.error) <= 1e-3
    assert res.pose.rotations.shape == (4, 4)
    assert int(res.limits_hit) == 0
    assert bool(res.state["moved"])


def test_solved_pose_solved_again_does_not_move(rng: np.random.Generator) -> None:
    sk = make_chain(5)
    tg = reachable_targets(sk, 20, rng, "j5")
    first = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j5"), tg, iterations=100, tolerance=1e-6)
    assert first.reached.all()
    again = kinema.solve_fabrik(sk, first.pose, ("j0", "j5"), tg, iterations=100, tolerance=1e-6)
    assert np.array_equal(again.pose.rotations, first.pose.rotations)  # bit for bit
    assert np.all(again.iterations == 0)
    assert not again.state["moved"].any()


def test_rotations_from_positions_are_minimal_through_parent(rng: np.random.Generator) -> None:
    """Each bone's new world rotation = minimal turn of (parent_new * local_old) onto the solved direction."""
    rest = R.from_rotvec(rng.normal(size=(7, 3)) * 0.4)
    sk = make_chain(6, rest_rot=rest)
    pose = kinema.Pose(sk.translations, R.from_rotvec(rng.normal(size=(7, 3)) * 0.3))
    res = kinema.solve_fabrik(sk, pose, ("j0", "j6"), [1.5, 2.0, -1.0], iterations=30)
    w_new = kinema.forward_kinematics(sk, res.pose)
    for k in range(6):
        parent_rot = np.array([0, 0, 0, 1.0]) if k == 0 else w_new.rotations[k - 1]
        q_cur = R.multiply(parent_rot, pose.rotations[k])
        bone = sk.translations[k + 1]
        d_cur = R.rotate(q_cur, bone)
        d_new = w_new.positions[k + 1] - w_new.positions[k]
        expect = R.multiply(R.from_two_vectors(d_cur, d_new), q_cur)
        assert R.equal(expect, w_new.rotations[k], atol=1e-9), k


def test_twist_constant_over_1000_still_target_resolves(rng: np.random.Generator) -> None:
    rest = R.from_rotvec(rng.normal(size=(6, 3)) * 0.5)
    sk = make_chain(5, rest_rot=rest)
    pose = sk.rest_pose()
    chain = ("j0", "j5")
    for tgt, tol in (([1.2, 2.5, 0.7], 1e-3), ([30.0, 4.0, -2.0], 1e-3), ([0.9, 1.1, 1.3], 0.0)):
        # tolerance 0 forces every frame to iterate (the target is never "reached" exactly).
        res = kinema.solve_fabrik(sk, pose, chain, tgt, tolerance=tol)
        first = res.pose.rotations.copy()
        axis_local = sk.translations[1:] / np.linalg.norm(sk.translations[1:], axis=1, keepdims=True)
        tw0 = _twists(first[:5], axis_local)
        cur = res.pose
        prev = cur
        for _ in range(1000):
            prev = cur
            cur = kinema.solve_fabrik(sk, cur, chain, tgt, tolerance=tol).pose
        np.testing.assert_allclose(_twists(cur.rotations[:5], axis_local), tw0, atol=1e-9)
        if tol > 0.0:
            assert np.all(R.equal(cur.rotations, first, atol=1e-9))
        else:
            # Still iterating every frame: the pose settles (no creep), the twist above never moved.
            assert np.all(R.equal(cur.rotations, prev.rotations, atol=1e-12))


def _twists(q: np.ndarray, axes: np.ndarray) -> np.ndarray:
    _, tw = R.swing_twist(q, axes)
    v = np.sum(tw[..., :3] * axes, axis=-1)
    return 2 * np.arctan2(v * np.sign(tw[..., 3] + 1e-300), np.abs(tw[..., 3]))


# ------------------------------------------------------------- unreachable


def test_unreachable_gives_straight_chain_along_target_line() -> None:
    sk = make_chain(4, [1.0, 0.5, 2.0, 0.7])
    tgt = np.array([6.0, -3.0, 2.0])
    res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j4"), tgt)
    assert not bool(res.reached)
    p = fk_pos(sk, res.pose)
    u = tgt / np.linalg.norm(tgt)
    cum = np.concatenate([[0.0], np.cumsum([1.0, 0.5, 2.0, 0.7])])
    np.testing.assert_allclose(p, cum[:, None] * u[None, :], atol=1e-12)
    np.testing.assert_allclose(float(res.error), np.linalg.norm(tgt) - cum[-1], atol=1e-12)


def test_unreachable_does_not_oscillate_between_frames() -> None:
    sk = make_chain(6)
    tgt = np.array([3.0, 9.0, -4.0])
    prev = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j6"), tgt).pose
    for _ in range(20):
        nxt = kinema.solve_fabrik(sk, prev, ("j0", "j6"), tgt).pose
        np.testing.assert_allclose(fk_pos(sk, nxt), fk_pos(sk, prev), atol=1e-12)
        assert np.all(R.equal(nxt.rotations, prev.rotations, atol=1e-12))
        prev = nxt


def test_unreachable_under_limits_settles(rng: np.random.Generator) -> None:
    sk = make_chain(4)
    lim = {"j1": SwingTwist((0, 1, 0), 0.5), "j2": SwingTwist((0, 1, 0), 0.5)}
    tgt = np.array([8.0, -1.0, 0.0])
    prev = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j4"), tgt, limits=lim, iterations=200).pose
    for _ in range(5):
        nxt = kinema.solve_fabrik(sk, prev, ("j0", "j4"), tgt, limits=lim, iterations=200).pose
        np.testing.assert_allclose(fk_pos(sk, nxt), fk_pos(sk, prev), atol=1e-6)
        prev = nxt


def test_free_root_drags_chain_to_far_target() -> None:
    sk = make_chain(3, parent=(np.array([1.0, 2.0, 3.0]), R.from_rotvec([0.3, 0.2, -0.4]), 2.0))
    tgt = np.array([20.0, -5.0, 7.0])
    res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j3"), tgt, fixed_root=False)
    assert bool(res.reached)
    p = fk_pos(sk, res.pose)
    np.testing.assert_allclose(p[4], tgt, atol=1e-9)
    # Bones inside the chain keep their lengths; j0 itself left its parent (that is the point).
    np.testing.assert_allclose(sk.bone_lengths(res.pose)[2:], sk.bone_lengths()[2:], rtol=LENGTH_RTOL)
    assert not np.allclose(res.pose.translations[1], sk.translations[1])  # j0's local translation moved


# ------------------------------------------------------------------ limits

LIMIT_SETS = {
    "cones": {"j1": SwingTwist((0, 1, 0), 0.7, -0.3, 0.3), "j2": SwingTwist((0, 1, 0), (0.4, 0.8)),
              "j3": SwingTwist((0, 1, 0), 0.6)},
    "hinges": {"j1": Hinge((1, 0, 0), 0.0, 2.0), "j3": Hinge((0, 0, 1), -1.0, 1.0)},
    "mixed": {"j1": Hinge((1, 0, 0), 0.0, 2.0), "j2": SwingTwist((0, 1, 0), 0.6),
              "j3": EulerRange("XYZ", (-0.5, -0.2, -0.6), (0.5, 0.2, 0.6))},
}


@pytest.mark.parametrize("name", sorted(LIMIT_SETS))
def test_limits_hold_after_every_solve(name: str, rng: np.random.Generator) -> None:
    lim = LIMIT_SETS[name]
    sk = make_chain(4, rest_rot=R.from_rotvec(rng.normal(size=(5, 3)) * 0.2))
    tg = np.concatenate([reachable_targets(sk, 100, rng, "j4", limits=lim), rng.normal(size=(50, 3)) * 3])
    pose = sk.rest_pose()
    for _ in range(3):  # successive frames, each from the last solve
        res = kinema.solve_fabrik(sk, pose, ("j0", "j4"), tg, limits=lim, iterations=30)
        for j, l in lim.items():
            jj = sk.index(j)
            assert l.violation(res.pose.rotations[:, jj], sk.rotations[jj]).max() <= LIMIT_ATOL
        check_lengths(sk, sk.rest_pose(), res.pose)
        assert np.all(np.isfinite(res.pose.rotations))
        pose = res.pose
        tg = tg + rng.normal(size=tg.shape) * 0.1


def test_cone_limits_reach_reachable_targets(rng: np.random.Generator) -> None:
    lim = LIMIT_SETS["cones"]
    sk = make_chain(4)
    tg = reachable_targets(sk, 200, rng, "j4", limits=lim)
    res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j4"), tg, limits=lim, iterations=50)
    assert res.reached.mean() >= 0.9
    assert res.limits_hit.sum() > 0


def test_already_reached_pose_outside_limits_is_clamped() -> None:
    sk = make_chain(3)
    q = np.tile([0, 0, 0, 1.0], (4, 1))
    q[1] = R.from_rotvec([0.0, 0.0, 1.0])  # 1 rad about z: outside a 0.3 rad cone
    pose = kinema.Pose(sk.translations, q)
    tgt = fk_pos(sk, pose)[3]
    lim = {"j1": SwingTwist((0, 1, 0), 0.3)}
    res = kinema.solve_fabrik(sk, pose, ("j0", "j3"), tgt, limits=lim)
    assert int(res.iterations) == 0 and int(res.limits_hit) == 1
    assert lim["j1"].violation(res.pose.rotations[1]) <= LIMIT_ATOL
    np.testing.assert_allclose(float(res.error), np.linalg.norm(fk_pos(sk, res.pose)[3] - tgt), atol=1e-12)


def test_hinge_degenerate_aim_along_axis_keeps_bone() -> None:
    # j1's hinge axis is x; a target straight along +x from j1 gives no in-plane direction for the
    # j1 -> j2 bone.  The solve must stay finite and inside the hinge.
    sk = make_chain(2)
    lim = {"j1": Hinge((1, 0, 0), -1.0, 1.0)}
    res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j2"), [1.0, 1.0, 0.0], limits=lim, iterations=5)
    assert np.all(np.isfinite(res.pose.rotations))
    assert lim["j1"].violation(res.pose.rotations[1]) <= LIMIT_ATOL


# -------------------------------------------------------------------- pole


def test_pole_bends_toward_pole_and_keeps_end(rng: np.random.Generator) -> None:
    sk = make_chain(2)
    tgt = np.array([0.0, 1.4, 0.0])
    for side in (1.0, -1.0):
        pole = np.array([0.0, 0.7, 3.0 * side])
        res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j2"), tgt, pole=pole, tolerance=1e-6, iterations=50)
        p = fk_pos(sk, res.pose)
        assert np.sign(p[1, 2]) == side and abs(p[1, 0]) < 1e-9
        assert float(res.error) <= 1e-6
        check_lengths(sk, sk.rest_pose(), res.pose)


def test_pole_on_the_axis_changes_nothing() -> None:
    sk = make_chain(3)
    tgt = [1.0, 2.0, 0.5]
    plain = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j3"), tgt, tolerance=1e-6, iterations=50)
    p = fk_pos(sk, plain.pose)
    # A pole on the line through j0 and j2 (j1's neighbours) gives no bend plane: j1 stays.
    sk2 = make_chain(2)
    tgt2 = np.array([0.5, 1.5, 0.2])
    a = kinema.solve_fabrik(sk2, sk2.rest_pose(), ("j0", "j2"), tgt2, tolerance=1e-9, iterations=50)
    b = kinema.solve_fabrik(sk2, sk2.rest_pose(), ("j0", "j2"), tgt2, tolerance=1e-9, iterations=50,
                            pole=[0.0, 0.0, 0.0])  # on the root: projects onto the axis
    np.testing.assert_allclose(b.pose.rotations, a.pose.rotations, atol=1e-12)
    assert np.all(np.isfinite(p))


# ------------------------------------------------------------------- trees


def make_torso() -> kinema.Skeleton:
    names = ["hips", "spine", "chest", "l_arm", "l_fore", "l_hand", "r_arm", "r_fore", "r_hand", "neck"]
    parents = [-1, 0, 1, 2, 3, 4, 2, 6, 7, 2]
    t = [[0, 0, 0], [0, 1, 0], [0, 1, 0], [-0.5, 0.2, 0], [-1, 0, 0], [-1, 0, 0], [0.5, 0.2, 0], [1, 0, 0],
         [1, 0, 0], [0, 0.5, 0]]
    return kinema.Skeleton(names, parents, t)


def test_tree_reaches_both_targets_when_reachable(rng: np.random.Generator) -> None:
    sk = make_torso()
    n = 100
    q = R.from_rotvec(rng.normal(size=(n, sk.n_joints, 3)) * 0.35)
    poses = kinema.Pose(np.broadcast_to(sk.translations, (n, sk.n_joints, 3)), q)
    p = fk_pos(sk, poses)
    goals = {"l_hand": p[:, 5], "r_hand": p[:, 8]}
    res = kinema.solve_fabrik_tree(sk, sk.rest_pose(), goals, iterations=100, tolerance=1e-3)
    assert res.reached.mean() >= 0.95
    out = fk_pos(sk, res.pose)
    err = np.stack([np.linalg.norm(out[:, 5] - p[:, 5], axis=-1), np.linalg.norm(out[:, 8] - p[:, 8], axis=-1)], -1)
    np.testing.assert_allclose(res.state["goal_errors"], err, atol=1e-12)
    assert res.state["goals"] == ("l_hand", "r_hand")
    check_lengths(sk, sk.rest_pose(), res.pose)
    # Joints off the goal paths are untouched (neck rides along rigidly with the chest).
    np.testing.assert_array_equal(res.pose.rotations[:, 9], np.broadcast_to(sk.rotations[9], (n, 4)))


def _y_creature() -> kinema.Skeleton:
    names = ["body", "l1", "l2", "r1", "r2"]
    return kinema.Skeleton(names, [-1, 0, 1, 0, 3], [[0, 0, 0], [-1, 0, 0], [-1, 0, 0], [1, 0, 0], [1, 0, 0]])


@pytest.mark.parametrize(("w_l", "w_r"), [(1.0, 1.0), (3.0, 1.0), (1.0, 4.0)])
def test_tree_unreachable_splits_error_by_weights(w_l: float, w_r: float) -> None:
    """Free body, two arms pulled apart: the body sits at the weighted centroid, errors split as w_r : w_l."""
    sk = _y_creature()
    goals = {"l2": [-5.0, 0.0, 0.0], "r2": [5.0, 0.0, 0.0]}
    res = kinema.solve_fabrik_tree(sk, sk.rest_pose(), goals, weights={"l2": w_l, "r2": w_r}, fixed_root=False,
                                   iterations=50)
    e_l, e_r = res.state["goal_errors"]
    assert not bool(res.reached)
    np.testing.assert_allclose(e_l + e_r, 10.0 - 4.0, atol=1e-9)
    np.testing.assert_allclose(e_l / e_r, w_r / w_l, rtol=1e-9)


def test_tree_fixed_root_heavier_goal_gets_closer() -> None:
    sk = make_torso()
    goals = {"l_hand": [-6.0, 2.2, 0.0], "r_hand": [6.0, 2.2, 0.0]}
    even = kinema.solve_fabrik_tree(sk, sk.rest_pose(), goals, iterations=50)
    left = kinema.solve_fabrik_tree(sk, sk.rest_pose(), goals, weights={"l_hand": 4.0}, iterations=50)
    e0 = even.state["goal_errors"]
    e1 = left.state["goal_errors"]
    np.testing.assert_allclose(e0[0], e0[1], rtol=1e-6)  # symmetric rig, equal weights: equal misses
    assert e1[0] < e0[0] < e1[1]
    check_lengths(sk, sk.rest_pose(), left.pose)


def test_tree_with_limits_holds_limits(rng: np.random.Generator) -> None:
    sk = make_torso()
    lim = {"l_fore": Hinge((0, 0, 1), -2.5, 0.0), "r_fore": Hinge((0, 0, 1), 0.0, 2.5),
           "spine": SwingTwist((0, 1, 0), 0.3), "chest": SwingTwist((0, 1, 0), 0.3)}
    goals = {"l_hand": rng.normal(size=(30, 3)) + [-2, 2, 0], "r_hand": rng.normal(size=(30, 3)) + [2, 2, 0]}
    res = kinema.solve_fabrik_tree(sk, sk.rest_pose(), goals, limits=lim, root="hips")
    for j, l in lim.items():
        jj = sk.index(j)
        assert l.violation(res.pose.rotations[:, jj], sk.rotations[jj]).max() <= LIMIT_ATOL
    check_lengths(sk, sk.rest_pose(), res.pose)


def test_tree_goal_on_inner_joint_and_single_goal_matches_chain(rng: np.random.Generator) -> None:
    sk = make_chain(5)
    tg = reachable_targets(sk, 20, rng, "j5")
    a = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j5"), tg, iterations=60, tolerance=1e-6)
    b = kinema.solve_fabrik_tree(sk, sk.rest_pose(), {"j5": tg}, iterations=60, tolerance=1e-6)
    np.testing.assert_allclose(b.error, a.error, atol=2e-6)
    mid = np.array([0.3, 2.7, 0.2])  # 2.72 from the root: within j3's reach of 3
    c = kinema.solve_fabrik_tree(sk, sk.rest_pose(), {"j3": mid, "j5": [1.0, 3.5, 0.5]}, iterations=300)
    assert bool(c.reached)


# ------------------------------------------------------------------- batch


@pytest.mark.parametrize("use_limits", [False, True])
def test_batch_equals_loop_of_singles(use_limits: bool, rng: np.random.Generator) -> None:
    sk = make_chain(5, rest_rot=R.from_rotvec(rng.normal(size=(6, 3)) * 0.3))
    lim = LIMIT_SETS["mixed"] if use_limits else None
    n = 70  # over the serial threshold: the parallel kernel runs
    tg = rng.normal(size=(n, 3)) * 3
    poses = kinema.Pose(sk.translations, R.from_rotvec(rng.normal(size=(n, 6, 3)) * 0.2))
    poles = rng.normal(size=(n, 3)) * 2
    res = kinema.solve_fabrik(sk, poses, ("j0", "j5"), tg, limits=lim, pole=poles)
    for i in range(0, n, 7):
        one = kinema.solve_fabrik(sk, poses[i], ("j0", "j5"), tg[i], limits=lim, pole=poles[i])
        np.testing.assert_array_equal(res.pose.rotations[i], one.pose.rotations)
        assert res.iterations[i] == one.iterations and res.error[i] == one.error


def test_tree_batch_equals_loop_and_broadcasts(rng: np.random.Generator) -> None:
    sk = make_torso()
    lt = rng.normal(size=(5, 8, 3)) + [-2, 2, 0]
    rt = rng.normal(size=(8, 3)) + [2, 2, 0]  # broadcasts against (5, 8)
    res = kinema.solve_fabrik_tree(sk, sk.rest_pose(), {"l_hand": lt, "r_hand": rt}, root="hips")
    assert res.pose.rotations.shape == (5, 8, sk.n_joints, 4)
    assert res.state["goal_errors"].shape == (5, 8, 2)
    for a, b in [(0, 0), (3, 5), (4, 7)]:
        one = kinema.solve_fabrik_tree(sk, sk.rest_pose(), {"l_hand": lt[a, b], "r_hand": rt[b]}, root="hips")
        np.testing.assert_array_equal(res.pose.rotations[a, b], one.pose.rotations)


def test_out_pose_is_written(rng: np.random.Generator) -> None:
    sk = make_chain(3)
    pose = sk.rest_pose((4,))
    before = pose.copy()
    out = sk.rest_pose((4,))
    tg = rng.normal(size=(4, 3))
    res = kinema.solve_fabrik(sk, pose, ("j0", "j3"), tg, out=out)
    assert res.pose is out
    np.testing.assert_array_equal(pose.rotations, before.rotations)  # input untouched
    inplace = kinema.solve_fabrik(sk, pose, ("j0", "j3"), tg, out=pose)
    np.testing.assert_array_equal(inplace.pose.rotations, out.rotations)


# -------------------------------------------------------------- invariance


def test_same_under_rotated_translated_scaled_parent(rng: np.random.Generator) -> None:
    sk = make_chain(4, rest_rot=R.from_rotvec(rng.normal(size=(5, 3)) * 0.3))
    p_t = np.array([3.0, -1.0, 2.0])
    p_q = R.from_rotvec([0.7, -0.4, 1.1])
    p_s = 2.5
    sk2 = make_chain(4, rest_rot=sk.rotations, parent=(p_t, p_q, p_s))
    tg = rng.normal(size=(40, 3)) * 2.5
    tg2 = p_t + p_s * R.rotate(p_q, tg)
    for lim in (None, LIMIT_SETS["cones"]):
        a = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j4"), tg, limits=lim, iterations=15)
        b = kinema.solve_fabrik(sk2, sk2.rest_pose(), ("j0", "j4"), tg2, limits=lim, iterations=15,
                                tolerance=p_s * 1e-3)
        assert np.all(R.equal(b.pose.rotations[:, 1:], a.pose.rotations, atol=1e-9))
        np.testing.assert_allclose(b.error, p_s * a.error, rtol=1e-9, atol=1e-9)


def test_listed_chain_skips_helper_joint() -> None:
    sk = make_chain(4)
    q = np.tile([0, 0, 0, 1.0], (5, 1))
    q[2] = R.from_rotvec([0.0, 0.4, 0.0])  # twist helper j2, not listed: rides along untouched
    pose = kinema.Pose(sk.translations, q)
    res = kinema.solve_fabrik(sk, pose, ["j0", "j1", "j3", "j4"], [1.0, 2.0, 1.0], tolerance=1e-6, iterations=60)
    np.testing.assert_array_equal(res.pose.rotations[2], q[2])
    assert bool(res.reached)


# ------------------------------------------------------------- degenerate


def test_zero_length_bone_and_target_on_root_stay_finite() -> None:
    sk = make_chain(4, [1.0, 0.0, 1.0, 1.0])  # j2 sits on j1
    for tgt in ([0.0, 0.0, 0.0], [0.5, 1.0, 0.3], [9.0, 0.0, 0.0]):
        res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j4"), tgt)
        assert np.all(np.isfinite(res.pose.rotations)) and np.isfinite(res.error)
        check_lengths(sk, sk.rest_pose(), res.pose)


def test_target_at_root_of_foldable_chain_is_reached() -> None:
    sk = make_chain(4)
    res = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j4"), [0.0, 0.0, 0.0], iterations=100)
    assert np.all(np.isfinite(res.pose.rotations))
    assert float(res.error) <= 1e-3


# ------------------------------------------------------------------ errors


def test_bad_input_errors() -> None:
    sk = make_chain(3)
    pose = sk.rest_pose()
    with pytest.raises(kinema.SolverInputError, match="target contains NaN"):
        kinema.solve_fabrik(sk, pose, ("j0", "j3"), [np.nan, 0, 0])
    # Float64 (3,) arrays skip the NumPy check; the kernel checks them, for one solve
    # and for a batched pose large enough for the parallel kernel.
    batched = kinema.Pose(np.broadcast_to(pose.translations, (40,) + pose.translations.shape),
                          np.broadcast_to(pose.rotations, (40,) + pose.rotations.shape))
    for p in (pose, batched):
        for bad in (np.array([np.nan, 0.0, 0.0]), np.array([0.0, np.inf, 0.0])):
            with pytest.raises(kinema.SolverInputError, match="target contains"):
                kinema.solve_fabrik(sk, p, ("j0", "j3"), bad)
            with pytest.raises(kinema.SolverInputError, match="pole contains"):
                kinema.solve_fabrik(sk, p, ("j0", "j3"), np.array([1.0, 1.0, 1.0]), pole=bad)
    with pytest.raises(kinema.SolverInputError, match="iterations"):
        kinema.solve_fabrik(sk, pose, ("j0", "j3"), [1, 1, 1], iterations=-1)
    with pytest.raises(kinema.SolverInputError, match="tolerance"):
        kinema.solve_fabrik(sk, pose, ("j0", "j3"), [1, 1, 1], tolerance=float("inf"))
    with pytest.raises(kinema.ShapeError):
        kinema.solve_fabrik(sk, pose, ("j0", "j3"), [1, 1])
    with pytest.raises(kinema.BoneNotFoundError):
        kinema.solve_fabrik(sk, pose, ("j0", "hand"), [1, 1, 1])
    with pytest.raises(kinema.SolverInputError, match="pole contains NaN"):
        kinema.solve_fabrik(sk, pose, ("j0", "j3"), [1, 1, 1], pole=[0, np.inf, 0])
    bad = kinema.Pose(sk.translations, sk.rotations, np.array([[1, 1, 1], [1, 2, 1], [1, 1, 1], [1, 1, 1.0]]))
    with pytest.raises(kinema.SolverInputError, match="non-uniform scale"):
        kinema.solve_fabrik(sk, bad, ("j0", "j3"), [1, 1, 1])
    with pytest.raises(kinema.ShapeError):
        kinema.solve_fabrik(sk, pose, ("j0", "j3"), np.ones((3, 3)), out=sk.rest_pose((2,)))
    tors = make_torso()
    with pytest.raises(kinema.SolverInputError, match="weight"):
        kinema.solve_fabrik_tree(tors, tors.rest_pose(), {"l_hand": [0, 0, 0]}, weights={"l_hand": 0.0})
    with pytest.raises(kinema.SolverInputError, match="no goal"):
        kinema.solve_fabrik_tree(tors, tors.rest_pose(), {"l_hand": [0, 0, 0]}, weights={"r_hand": 1.0})
    with pytest.raises(kinema.SolverInputError, match="not below the root"):
        kinema.solve_fabrik_tree(tors, tors.rest_pose(), {"l_hand": [0, 0, 0]}, root="r_arm")
    with pytest.raises(kinema.SolverInputError, match="non-empty"):
        kinema.solve_fabrik_tree(tors, tors.rest_pose(), {})
    with pytest.raises(kinema.SolverInputError, match="Hinge, SwingTwist"):
        kinema.solve_fabrik(sk, pose, ("j0", "j3"), [1, 1, 1], limits={"j1": 0.5})


# -------------------------------------------------------------- hypothesis


@given(
    seed=st.integers(0, 2**32 - 1),
    n_bones=st.integers(2, 8),
    reach=st.floats(0.0, 1.6),
    use_limits=st.booleans(),
)
def test_property_random_chains(seed: int, n_bones: int, reach: float, use_limits: bool) -> None:
    rng = np.random.default_rng(seed)
    segs = list(rng.uniform(0.2, 2.0, n_bones))
    sk = make_chain(n_bones, segs, rest_rot=R.from_rotvec(rng.normal(size=(n_bones + 1, 3)) * 0.5))
    pose = kinema.Pose(sk.translations, R.from_rotvec(rng.normal(size=(n_bones + 1, 3)) * 0.5))
    d = rng.normal(size=3)
    tgt = reach * sum(segs) * d / np.linalg.norm(d)
    lim = {f"j{k}": SwingTwist((0, 1, 0), 0.8) for k in range(1, n_bones)} if use_limits else None
    res = kinema.solve_fabrik(sk, pose, ("j0", f"j{n_bones}"), tgt, limits=lim)
    assert np.all(np.isfinite(res.pose.rotations))
    check_lengths(sk, pose, res.pose)
    p = fk_pos(sk, res.pose)
    np.testing.assert_allclose(float(res.error), np.linalg.norm(p[-1] - tgt), atol=1e-9)
    assert bool(res.reached) == (float(res.error) <= 1e-3)
    if lim:
        for j, l in lim.items():
            jj = sk.index(j)
            assert l.violation(res.pose.rotations[jj], sk.rotations[jj]) <= LIMIT_ATOL
    elif reach > 1.0 + 1e-9:
        # Out of reach: straight along the root -> target line.
        u = tgt / np.linalg.norm(tgt)
        off = p - p[0]
        np.testing.assert_allclose(np.cross(off, u), 0.0, atol=1e-9)
        assert not bool(res.reached)


@given(seed=st.integers(0, 2**32 - 1), w=st.floats(0.1, 10.0))
def test_property_random_trees(seed: int, w: float) -> None:
    rng = np.random.default_rng(seed)
    sk = make_torso()
    pose = kinema.Pose(sk.translations, R.from_rotvec(rng.normal(size=(sk.n_joints, 3)) * 0.3))
    goals = {"l_hand": rng.normal(size=3) * 2 + [-2, 2, 0], "r_hand": rng.normal(size=3) * 2 + [2, 2, 0]}
    res = kinema.solve_fabrik_tree(sk, pose, goals, weights={"r_hand": w})
    assert np.all(np.isfinite(res.pose.rotations))
    check_lengths(sk, pose, res.pose)
    p = fk_pos(sk, res.pose)
    np.testing.assert_allclose(res.state["goal_errors"],
                               [np.linalg.norm(p[5] - goals["l_hand"]), np.linalg.norm(p[8] - goals["r_hand"])],
                               atol=1e-9)


# ---------------------------------------------------------------- no JIT

_NOJIT_SCRIPT = r"""
import json, sys
import numpy as np
import kinema
from kinema import rotation as R
from kinema.limits import Hinge, SwingTwist
rng = np.random.default_rng(7)
sk = kinema.Skeleton([f"j{i}" for i in range(5)], [-1, 0, 1, 2, 3], [[0, 0, 0]] + [[0, 1, 0]] * 4)
tg = rng.normal(size=(6, 3)) * 2
a = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j4"), tg, pole=[0, 1, 2])
lim = {"j1": Hinge((1, 0, 0), 0, 2), "j2": SwingTwist((0, 1, 0), 0.5)}
b = kinema.solve_fabrik(sk, sk.rest_pose(), ("j0", "j4"), tg, limits=lim)
names = ["b", "l1", "l2", "r1", "r2"]
tr = kinema.Skeleton(names, [-1, 0, 1, 0, 3], [[0, 0, 0], [-1, 0, 0], [-1, 0, 0], [1, 0, 0], [1, 0, 0]])
c = kinema.solve_fabrik_tree(tr, tr.rest_pose(), {"l2": tg[:3] - [2, 0, 0], "r2": tg[:3] + [2, 0, 0]})
json.dump([a.pose.rotations.tolist(), b.pose.rotations.tolist(), c.pose.rotations.tolist()], sys.stdout)
"""


def test_no_jit_runs_the_same_code() -> None:
    outs = []
    for flag in ("0", "1"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=flag)
        proc = subprocess.run([sys.executable, "-c", _NOJIT_SCRIPT], capture_output=True, text=True, env=env,
                              cwd=ROOT, timeout=600)
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    for jit, py in zip(outs[0], outs[1], strict=True):
        np.testing.assert_allclose(np.asarray(jit), np.asarray(py), atol=1e-12)


def test_one_solve_fast_path_equals_general_path(rng: np.random.Generator) -> None:
    """A plain per-frame call (float64 (3,) target, unbatched pose, no limits) takes a lean path (the kernel's
    ``solve_one``): same numbers as a batch (the general path) to an ulp or two (the two drivers are compiled
    separately and may fuse multiply-adds differently), whatever form the target comes in; numpy scalars out."""
    sk = make_chain(6, seg=[0.5, 1.0, 0.7, 1.2, 0.9, 0.6], parent=(np.array([0.3, -1.0, 2.0]),
                                                                   R.from_rotvec([0.3, 1.1, -0.4]), 1.5))
    pose = sk.rest_pose()
    pose.rotations[:] = R.multiply(pose.rotations, R.from_rotvec(rng.normal(size=(sk.n_joints, 3)) * 0.2))
    tg = reachable_targets(sk, 10, rng, "j6")
    tg[::3] += rng.normal(size=(4, 3)) * 4.0  # some out of reach
    chain = ("j0", "j6")
    for kw in ({}, {"pole": np.array([2.0, 1.0, 0.0])}, {"fixed_root": False, "tolerance": 0.0},
               {"iterations": 3}):
        batch = kinema.solve_fabrik(sk, pose, chain, tg, **kw)  # type: ignore[arg-type]
        for i in range(tg.shape[0]):
            ro = tg[i].copy()
            ro.setflags(write=False)
            strided = np.repeat(tg[i], 2)[::2]
            for target in (tg[i], ro, strided, tg[i].tolist()):
                one = kinema.solve_fabrik(sk, pose, chain, target, **kw)  # type: ignore[arg-type]
                np.testing.assert_allclose(one.pose.rotations, batch.pose.rotations[i], rtol=0, atol=1e-14)
                np.testing.assert_allclose(one.pose.translations, batch.pose.translations[i], rtol=0, atol=1e-14)
                assert abs(float(one.error) - batch.error[i]) <= 1e-14
                assert int(one.iterations) == batch.iterations[i] and bool(one.reached) == batch.reached[i]
                assert bool(one.state["moved"]) == batch.state["moved"][i]
        one = kinema.solve_fabrik(sk, pose, chain, tg[0], **kw)  # type: ignore[arg-type]
        assert type(one.error) is np.float64 and type(one.iterations) is np.int64
        assert type(one.limits_hit) is np.int64 and type(one.reached) is np.bool_
    assert np.array_equal(pose.translations, sk.translations)  # the input pose is never written
    with pytest.raises(kinema.SolverInputError, match="target"):
        kinema.solve_fabrik(sk, pose, chain, np.array([0.0, np.inf, 0.0]))
    with pytest.raises(kinema.SolverInputError, match="pole"):
        kinema.solve_fabrik(sk, pose, chain, tg[0], pole=np.array([np.nan, 0.0, 0.0]))


def test_one_solve_path_hands_unusual_inputs_to_the_general_path(rng: np.random.Generator) -> None:
    """The lean per-frame path checks only dimensions; what it cannot take (other dtypes, wrong shapes,
    unhashable options) gives the general path's result or error."""
    sk = make_chain(5)
    pose = sk.rest_pose()
    chain = ("j0", "j5")
    tg = reachable_targets(sk, 3, rng, "j5")
    ref = kinema.solve_fabrik(sk, pose, chain, tg[:1])
    # float32 pose arrays: what the general path gives a batch of one.
    p32 = sk.rest_pose()
    p32.rotations = p32.rotations.astype(np.float32)
    np.testing.assert_array_equal(kinema.solve_fabrik(sk, p32, chain, tg[0]).pose.rotations,
                                  kinema.solve_fabrik(sk, p32, chain, tg[:1]).pose.rotations[0])
    # A float32 target with exactly representable values: the float64 target's numbers.
    t32 = tg[0].astype(np.float32)
    np.testing.assert_allclose(kinema.solve_fabrik(sk, pose, chain, t32).pose.rotations,
                               kinema.solve_fabrik(sk, pose, chain, t32.astype(np.float64)[None]).pose.rotations[0],
                               rtol=0, atol=1e-14)
    # An unhashable tolerance (a 0-d array) and a 0-d-array-free repeat give the same numbers.
    one = kinema.solve_fabrik(sk, pose, chain, tg[0], tolerance=np.array(1e-3))
    np.testing.assert_allclose(one.pose.rotations, ref.pose.rotations[0], rtol=0, atol=1e-14)
    # A pose of another joint count and a target of another size: the general path's errors.
    other = kinema.Pose(np.zeros((sk.n_joints + 1, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (sk.n_joints + 1, 1)))
    with pytest.raises(kinema.ShapeError):
        kinema.solve_fabrik(sk, other, chain, tg[0])
    with pytest.raises(kinema.KinemaError, match="target"):
        kinema.solve_fabrik(sk, pose, chain, np.zeros(4))


def test_more_iterations_never_give_a_worse_limited_solve() -> None:
    """With limits the passes fight the clamps and the error need not fall from one iteration to the next; an
    unfinished solve ends on its best iterate.  Before, 140 of these 300 arm problems ended worse with more
    iterations (by up to 0.40 m), and an arm following a slow loop missed by 16 cm on some frames."""
    errors = errors_by_iterations(kinema.solve_fabrik)
    assert float(np.max(np.diff(errors, axis=0))) <= 0.0

    # the slow loop: every frame warm-started from the last
    sk = kinema.samples.humanoid()
    a = np.linspace(0.0, 2.0 * np.pi, 240)
    start = sk.rest_pose()
    loop = kinema.forward_kinematics(sk, start).positions[sk.index("right_shoulder")] + [0.0, -0.25, 0.0] + \
        0.2 * np.stack([np.cos(a), 0.8 * np.sin(a), 0.4 * np.sin(a)], -1)
    worst = 0.0
    for t in loop:
        res = kinema.solve_fabrik(sk, start, ("chest", "right_wrist"), t, limits=ARM_LIMITS, tolerance=1e-5,
                                  iterations=50)
        start, worst = res.pose, max(worst, float(res.error))
    assert worst <= 0.01  # 0.156 before


@pytest.mark.parametrize("use_limits", [False, True])
def test_the_end_joints_keep_their_local_rotations_bit_for_bit(use_limits: bool) -> None:
    """An end joint aims nothing: FABRIK leaves its local rotation as it was, bit for bit, as CCD and two-bone
    do (it was rebuilt from the world rotations, 3e-17 off), in a chain and in a tree; the hands under the
    wrists (outside the solve) ride along unchanged too."""
    sk = kinema.samples.humanoid()
    rng = np.random.default_rng(1)
    pose = sk.rest_pose((20,))
    pose.rotations[:, 1:] = R.multiply(pose.rotations[:, 1:],
                                       R.from_rotvec(rng.normal(size=(20, sk.n_joints - 1, 3)) * 0.5))
    lims = {"right_elbow": Hinge((0, 0, 1), 0, 150, degrees=True)} if use_limits else None
    chest = kinema.forward_kinematics(sk, pose).positions[:, sk.index("chest")]
    ends = ["right_wrist", "left_wrist"]
    chain = kinema.solve_fabrik(sk, pose, ("chest", "right_wrist"), chest + [0.3, 0.1, 0.2], limits=lims)
    tree = kinema.solve_fabrik_tree(sk, pose, {"right_wrist": chest + [0.3, 0.1, 0.2],
                                               "left_wrist": chest + [-0.3, 0.0, 0.25]}, limits=lims)
    for res in (chain, tree):
        assert np.all(res.iterations >= 1)
        for end in ends:
            j = sk.index(end)
            np.testing.assert_array_equal(res.pose.rotations[:, j], pose.rotations[:, j])
