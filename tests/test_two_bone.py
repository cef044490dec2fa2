"""Analytic two-bone IK (issue 3): 3D solver, 2D arm, the stateful helper.

Tolerances: positions to 1e-12 of the chain length (float64 solves land
within a few ulps), bone lengths to 1e-12 relative, end rotation to 1e-9.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kinema
from _threads import run_at_once
from kinema import rotation as R
from kinema.errors import SkeletonError, SolverInputError

CHAIN = ("shoulder", "elbow", "wrist")
POS_TOL = 1e-12  # relative to the chain length a + b
LEN_RTOL = 1e-12
MARGIN = 1e-4  # default margin fraction of the shorter bone


# ----------------------------------------------------------------- helpers
def unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def perp(x, u):
    return x - u * np.sum(x * u, axis=-1, keepdims=True)


def make_rig(*, a=1.0, b=0.8, axis_u=(0, 1, 0), axis_l=(0, 1, 0), parent_rot=(0, 0, 0, 1), parent_pos=(0, 0, 0),
             parent_scale=1.0, bend_deg=40.0, shoulder_rot=None, twist=False):
    """root (parent transform) -> shoulder -> elbow -> wrist -> finger, plus a sibling joint.

    ``axis_u, axis_l`` are the bones' local directions; with ``twist`` a twist
    joint sits half-way along each bone.
    """
    axis_u = unit(axis_u)
    axis_l = unit(axis_l)
    bend_axis = unit(np.cross(axis_l, [0.3, 0.5, 0.7]))
    names = ["root", "shoulder"]
    parents = [-1, 0]
    trans = [list(parent_pos), [0.3, 0.2, 0.1]]
    rots = [list(parent_rot), list(R.from_axis_angle([0.2, 1, 0.4], 0.3) if shoulder_rot is None else shoulder_rot)]
    if twist:
        names += ["upper_twist", "elbow", "fore_twist", "wrist"]
        parents += [1, 2, 3, 4]
        trans += [list(a * 0.5 * axis_u), list(a * 0.5 * axis_u), list(b * 0.5 * axis_l), list(b * 0.5 * axis_l)]
        rots += [[0, 0, 0, 1], list(R.from_axis_angle(bend_axis, np.radians(bend_deg))), [0, 0, 0, 1], [0, 0, 0, 1]]
    else:
        names += ["elbow", "wrist"]
        parents += [1, 2]
        trans += [list(a * axis_u), list(b * axis_l)]
        rots += [list(R.from_axis_angle(bend_axis, np.radians(bend_deg))), list(R.from_axis_angle([1, 0, 0], 0.2))]
    wrist = len(names) - 1
    names += ["finger", "sibling"]
    parents += [wrist, 0]
    trans += [[0.05, 0.2, 0.0], [-0.3, 0.2, 0.0]]
    rots += [[0, 0, 0, 1], [0, 0, 0, 1]]
    scales = np.ones((len(names), 3))
    scales[0] = parent_scale
    return kinema.Skeleton(names, parents, trans, rots, scales)


def world(sk, pose, *names):
    fk = kinema.forward_kinematics(sk, pose)
    idx = [sk.index(n) for n in names]
    return [fk.positions[..., i, :] for i in idx], [fk.rotations[..., i, :] for i in idx]


def lengths(sk, pose):
    (pa, pb, pc), _ = world(sk, pose, *CHAIN)
    return np.linalg.norm(pb - pa, axis=-1), np.linalg.norm(pc - pb, axis=-1)


def check_solved(sk, pose, res, target, *, tol=POS_TOL, also_moved=()):
    """Lengths kept, untouched joints untouched, end at the reachable target (or on the clamped line)."""
    a0, b0 = lengths(sk, pose)
    a1, b1 = lengths(sk, res.pose)
    np.testing.assert_allclose(a1, a0, rtol=LEN_RTOL, atol=0)
    np.testing.assert_allclose(b1, b0, rtol=LEN_RTOL, atol=0)
    (pa, pc), _ = world(sk, res.pose, "shoulder", "wrist")
    full = pose.broadcast(res.pose.batch_shape)
    np.testing.assert_array_equal(res.pose.translations, full.translations)
    np.testing.assert_array_equal(res.pose.scales, full.scales)
    moved = [sk.index(n) for n in CHAIN + tuple(also_moved)]
    for j in range(sk.n_joints):
        if j not in moved:
            np.testing.assert_array_equal(res.pose.rotations[..., j, :], full.rotations[..., j, :])
    np.testing.assert_allclose(res.error, np.linalg.norm(pc - target, axis=-1), rtol=0, atol=1e-14 * (a0 + b0).max())
    d = np.linalg.norm(target - pa, axis=-1)
    lo = np.abs(a0 - b0) + MARGIN * np.minimum(a0, b0)
    hi = a0 + b0 - MARGIN * np.minimum(a0, b0)
    dc = np.clip(d, lo, hi)
    expect = pa + unit(target - pa) * dc[..., None]
    np.testing.assert_allclose(pc, expect, rtol=0, atol=tol * (a0 + b0).max())
    inside = (d > lo) & (d < hi)
    np.testing.assert_array_equal(res.reached, inside)
    return pa, pc


def elbow_side(sk, res, target, pole):
    (pa, pb), _ = world(sk, res.pose, "shoulder", "elbow")
    u = unit(target - pa)
    return np.sum(perp(pb - pa, u) * perp(pole - pa, u), axis=-1)


@pytest.fixture(scope="module")
def rig():
    return make_rig()


# ------------------------------------------------------------------- reach
def test_reachable_target(rig):
    pose = rig.rest_pose()
    target = np.array([0.9, 1.6, 0.9])
    res = kinema.solve_two_bone(rig, pose, CHAIN, target, pole=np.array([0.3, 1.0, 3.0]))
    check_solved(rig, pose, res, target)
    assert bool(res.reached) and res.error < 1e-14
    assert res.iterations == 1 and res.limits_hit == 0


def test_too_far_clamps_on_the_target_line(rig):
    pose = rig.rest_pose()
    target = np.array([4.0, 5.0, -3.0])
    res = kinema.solve_two_bone(rig, pose, CHAIN, target, pole=np.array([0.3, 1.0, 3.0]))
    pa, pc = check_solved(rig, pose, res, target)
    a, b = lengths(rig, pose)
    assert not res.reached
    np.testing.assert_allclose(np.linalg.norm(pc - pa), a + b - MARGIN * min(a, b), rtol=1e-13)
    np.testing.assert_allclose(res.error, np.linalg.norm(target - pa) - (a + b - MARGIN * min(a, b)), rtol=1e-12)
    # Both bones use the same clamped target: the elbow is the clamped triangle's.
    (pb,), _ = world(rig, res.pose, "elbow")
    d = a + b - MARGIN * min(a, b)
    along = (a * a + d * d - b * b) / (2 * d)
    np.testing.assert_allclose(np.dot(pb - pa, unit(target - pa)), along, rtol=0, atol=1e-12)


def test_too_near_clamps_to_the_folded_limit():
    sk = make_rig(a=1.0, b=0.6)
    pose = sk.rest_pose()
    (pa,), _ = world(sk, pose, "shoulder")
    target = pa + np.array([0.05, 0.02, 0.03])
    res = kinema.solve_two_bone(sk, pose, CHAIN, target, pole=pa + np.array([0.0, 0.0, 1.0]))
    pa, pc = check_solved(sk, pose, res, target)
    assert not res.reached
    np.testing.assert_allclose(np.linalg.norm(pc - pa), 0.4 + MARGIN * 0.6, rtol=1e-12)


def test_target_on_shoulder_near_180_degree_correction_is_exact():
    # a = b = 1, straight arm, target on the shoulder: the clamped target is
    # 1e-4 from the shoulder along the current end direction and the lower
    # bone turns through almost 180 degrees.
    sk = make_rig(a=1.0, b=1.0, bend_deg=0.0)
    pose = sk.rest_pose()
    (pa, pc0), _ = world(sk, pose, "shoulder", "wrist")
    res = kinema.solve_two_bone(sk, pose, CHAIN, pa)
    (pc,), _ = world(sk, res.pose, "wrist")
    clamped = pa + unit(pc0 - pa) * MARGIN
    assert np.linalg.norm(pc - clamped) <= 1e-9
    assert not res.reached
    a1, b1 = lengths(sk, res.pose)
    np.testing.assert_allclose([a1, b1], [1.0, 1.0], rtol=LEN_RTOL)


def test_target_on_shoulder_folded_arm_falls_back_to_upper_direction():
    # Arm folded flat (elbow turned 180 degrees): the end sits on the shoulder
    # too, so the only direction left is the upper bone's.
    sk = make_rig(a=1.0, b=1.0, bend_deg=180.0)
    pose = sk.rest_pose()
    (pa, pb, pc0), _ = world(sk, pose, *CHAIN)
    assert np.linalg.norm(pc0 - pa) < 1e-12
    res = kinema.solve_two_bone(sk, pose, CHAIN, pa)
    (pc,), _ = world(sk, res.pose, "wrist")
    np.testing.assert_allclose(pc, pa + unit(pb - pa) * MARGIN, rtol=0, atol=1e-12)


def test_margin_option_and_too_large_margin(rig):
    pose = rig.rest_pose()
    a, b = lengths(rig, pose)
    target = np.array([5.0, 5.0, 5.0])
    res = kinema.solve_two_bone(rig, pose, CHAIN, target, margin=0.01)
    (pa, pc), _ = world(rig, res.pose, "shoulder", "wrist")
    np.testing.assert_allclose(np.linalg.norm(pc - pa), a + b - 0.01, rtol=1e-13)
    with pytest.raises(SolverInputError, match="margin is larger than the shorter bone"):
        kinema.solve_two_bone(rig, pose, CHAIN, target, margin=0.9)
    with pytest.raises(SolverInputError, match="margin"):
        kinema.solve_two_bone(rig, pose, CHAIN, target, margin=-1.0)


# -------------------------------------------------------------------- pole
def test_elbow_on_the_pole_side(rig):
    pose = rig.rest_pose()
    target = np.array([0.9, 1.6, 0.9])
    for pole in ([3.0, 1.0, 0.0], [-3.0, 1.0, 0.0], [0.0, 1.0, 3.0], [0.0, 1.0, -3.0]):
        pole = np.array(pole)
        res = kinema.solve_two_bone(rig, pose, CHAIN, target, pole)
        check_solved(rig, pose, res, target)
        assert elbow_side(rig, res, target, pole) > 0.1
        # The reported bend direction is the pole's perpendicular direction.
        (pa,), _ = world(rig, pose, "shoulder")
        u = unit(target - pa)
        np.testing.assert_allclose(res.state["bend_direction"], unit(perp(pole - pa, u)), atol=1e-14)


def test_pole_on_the_axis_falls_back_to_the_current_elbow(rig):
    pose = rig.rest_pose()
    (pa, pb0), _ = world(rig, pose, "shoulder", "elbow")
    target = np.array([0.9, 1.6, 0.9])
    u = unit(target - pa)
    res = kinema.solve_two_bone(rig, pose, CHAIN, target, pole=pa + 2.5 * (target - pa))
    check_solved(rig, pose, res, target)
    np.testing.assert_allclose(res.state["bend_direction"], unit(perp(pb0 - pa, u)), atol=1e-12)
    no_pole = kinema.solve_two_bone(rig, pose, CHAIN, target)
    np.testing.assert_allclose(no_pole.pose.rotations, res.pose.rotations, atol=1e-12)


@pytest.mark.parametrize("angle", [6e-8, 1e-6, 1e-4, 1e-2])
def test_pole_nearly_on_the_axis_keeps_the_end_exact(angle):
    """A pole a hair off the shoulder-target axis still defines the bend plane; its short perpendicular part
    (cancellation) is projected off the axis twice, so the bend direction stays perpendicular and the end
    lands on the target (one projection left it 3e-9 off at 6e-8 rad; found by test_random_rigs)."""
    sk = make_rig(axis_u=(0, 0, 1), axis_l=(0, 0, 1), parent_scale=3.0, bend_deg=5.0)
    pose = sk.rest_pose()
    (pa,), _ = world(sk, pose, "shoulder")
    a, b = lengths(sk, pose)
    target = pa + np.array([0.0, 1.0, 0.0]) * 0.5 * (a + b)
    pole = pa + np.array([0.0, np.cos(angle), np.sin(angle)]) * 1.75 * (a + b)
    for kw in ({}, {"weight": 0.5}, {"out": sk.rest_pose()}):
        res = kinema.solve_two_bone(sk, pose, CHAIN, target, pole, **kw)
        if "weight" not in kw:
            check_solved(sk, pose, res, target, tol=1e-12)
            assert elbow_side(sk, res, target, pole) > 0
        v = res.state["bend_direction"]
        assert abs(np.dot(v, unit(target - pa))) <= 1e-15 and abs(np.linalg.norm(v) - 1.0) <= 1e-15


def test_pole_zero_vector_falls_back_to_the_current_elbow():
    # Shoulder at the origin and pole (0, 0, 0): the pole vector is zero.
    sk = make_rig(parent_pos=(-0.3, -0.2, -0.1))
    pose = sk.rest_pose()
    (pa, pb0), _ = world(sk, pose, "shoulder", "elbow")
    np.testing.assert_allclose(pa, 0.0, atol=1e-15)
    target = np.array([0.5, 1.2, 0.6])
    res = kinema.solve_two_bone(sk, pose, CHAIN, target, pole=np.zeros(3))
    check_solved(sk, pose, res, target)
    u = unit(target - pa)
    np.testing.assert_allclose(res.state["bend_direction"], unit(perp(pb0 - pa, u)), atol=1e-12)


def test_no_pole_keeps_the_current_bend_plane(rig):
    pose = rig.rest_pose()
    (pa, pb0), _ = world(rig, pose, "shoulder", "elbow")
    target = np.array([0.4, 1.1, 0.5])
    res = kinema.solve_two_bone(rig, pose, CHAIN, target)
    check_solved(rig, pose, res, target)
    (pb,), _ = world(rig, res.pose, "elbow")
    u = unit(target - pa)
    np.testing.assert_allclose(unit(perp(pb - pa, u)), unit(perp(pb0 - pa, u)), atol=1e-12)


def test_straight_arm_on_the_axis_uses_bend_hint_then_a_fixed_axis():
    sk = make_rig(bend_deg=0.0)
    pose = sk.rest_pose()
    (pa, pc0), _ = world(sk, pose, "shoulder", "wrist")
    u = unit(pc0 - pa)
    target = pa + 1.2 * u  # along the straight arm: the current elbow gives no plane
    hint = np.array([0.3, -0.2, 0.9])
    res = kinema.solve_two_bone(sk, pose, CHAIN, target, bend_hint=hint)
    check_solved(sk, pose, res, target)
    np.testing.assert_allclose(res.state["bend_direction"], unit(perp(hint, u)), atol=1e-12)
    assert elbow_side(sk, res, target, pa + hint) > 0.1
    res = kinema.solve_two_bone(sk, pose, CHAIN, target)
    check_solved(sk, pose, res, target)
    axis = np.eye(3)[np.argmin(np.abs(u))]
    np.testing.assert_allclose(res.state["bend_direction"], unit(perp(axis, u)), atol=1e-12)


# --------------------------------------------------- parents, axes, scale
@pytest.mark.parametrize("case", ["rotated", "translated", "scaled", "all"])
def test_parent_transforms(case):
    rot = R.from_axis_angle([0.3, -0.8, 0.5], 2.1) if case in ("rotated", "all") else [0, 0, 0, 1]
    pos = [4.0, -2.0, 7.5] if case in ("translated", "all") else [0, 0, 0]
    scl = 2.7 if case in ("scaled", "all") else 1.0
    sk = make_rig(parent_rot=rot, parent_pos=pos, parent_scale=scl)
    pose = sk.rest_pose()
    (pa, pb0), _ = world(sk, pose, "shoulder", "elbow")
    # Same target and pole relative to the shoulder, in the parent's frame.
    target = pa + scl * R.rotate(rot, [0.6, 1.1, 0.5])
    pole = pa + scl * R.rotate(rot, [1.0, 0.0, 2.0])
    res = kinema.solve_two_bone(sk, pose, CHAIN, target, pole)
    check_solved(sk, pose, res, target)
    assert elbow_side(sk, res, target, pole) > 0
    # The local result does not depend on the parent transform at all.
    ref_sk = make_rig()
    ref_pose = ref_sk.rest_pose()
    (ra,), _ = world(ref_sk, ref_pose, "shoulder")
    ref = kinema.solve_two_bone(ref_sk, ref_pose, CHAIN, ra + np.array([0.6, 1.1, 0.5]),
                                ra + np.array([1.0, 0.0, 2.0]))
    assert np.all(R.equal(res.pose.rotations[1:], ref.pose.rotations[1:], atol=1e-12))


@pytest.mark.parametrize("axis", ["x", "y", "z", "random"])
def test_bones_along_any_local_axis(axis, rng):
    if axis == "random":
        axis_u, axis_l = rng.normal(size=3), rng.normal(size=3)
        shoulder = R.normalize(rng.normal(size=4))
    else:
        axis_u = axis_l = np.eye(3)["xyz".index(axis)]
        shoulder = None
    sk = make_rig(axis_u=axis_u, axis_l=axis_l, shoulder_rot=shoulder, a=1.1, b=0.9)
    pose = sk.rest_pose()
    (pa,), _ = world(sk, pose, "shoulder")
    for _ in range(5):
        target = pa + unit(rng.normal(size=3)) * rng.uniform(0.3, 1.9)
        pole = pa + rng.normal(size=3) * 2
        res = kinema.solve_two_bone(sk, pose, CHAIN, target, pole)
        check_solved(sk, pose, res, target)
        assert elbow_side(sk, res, target, pole) > 0


def test_nonuniform_scale_in_chain_is_rejected(rig):
    pose = rig.rest_pose()
    for joint in ("elbow", "root"):
        bad = pose.copy()
        bad.scales[rig.index(joint)] = [1.0, 2.0, 1.0]
        with pytest.raises(SolverInputError, match="non-uniform scale"):
            kinema.solve_two_bone(rig, bad, CHAIN, np.array([0.5, 1.0, 0.5]))
        with pytest.raises(SolverInputError, match="non-uniform scale"):
            kinema.solve_two_bone(rig, bad, CHAIN, np.array([[0.5, 1.0, 0.5]] * 3))
    # A non-uniform scale off the chain (the sibling) is fine.
    ok = pose.copy()
    ok.scales[rig.index("sibling")] = [1.0, 2.0, 1.0]
    res = kinema.solve_two_bone(rig, ok, CHAIN, np.array([0.5, 1.0, 0.5]))
    assert bool(res.reached)


def test_nan_inputs_are_rejected(rig):
    pose = rig.rest_pose()
    with pytest.raises(SolverInputError, match="target contains NaN"):
        kinema.solve_two_bone(rig, pose, CHAIN, np.array([np.nan, 1.0, 0.0]))
    with pytest.raises(SolverInputError, match="target contains NaN"):
        kinema.solve_two_bone(rig, pose, CHAIN, [[0.5, 1.0, 0.5], [0.0, np.inf, 1.0]])
    with pytest.raises(SolverInputError, match="pole contains NaN"):
        kinema.solve_two_bone(rig, pose, CHAIN, np.array([0.5, 1.0, 0.5]), np.array([np.nan, 0, 0]))
    with pytest.raises(SolverInputError, match="bend_hint contains NaN"):
        kinema.solve_two_bone(rig, pose, CHAIN, np.array([0.5, 1.0, 0.5]), bend_hint=np.array([np.nan, 0, 0]))
    bad = pose.copy()
    bad.rotations[rig.index("root")] = np.nan
    with pytest.raises(SolverInputError, match="pose has NaN"):
        kinema.solve_two_bone(rig, bad, CHAIN, np.array([0.5, 1.0, 0.5]))


def test_other_bad_input(rig):
    pose = rig.rest_pose()
    tgt = np.array([0.5, 1.0, 0.5])
    with pytest.raises(SolverInputError, match="three joints"):
        kinema.solve_two_bone(rig, pose, ("shoulder", "wrist"), tgt)
    with pytest.raises(SkeletonError, match="not below"):
        kinema.solve_two_bone(rig, pose, ("shoulder", "sibling", "wrist"), tgt)
    with pytest.raises(kinema.BoneNotFoundError):
        kinema.solve_two_bone(rig, pose, ("shoulder", "elbw", "wrist"), tgt)
    with pytest.raises(SolverInputError, match="weight"):
        kinema.solve_two_bone(rig, pose, CHAIN, tgt, weight=1.5)
    with pytest.raises(SolverInputError, match="soft"):
        kinema.solve_two_bone(rig, pose, CHAIN, tgt, soft=1.0)
    with pytest.raises(SolverInputError, match="zero quaternion"):
        kinema.solve_two_bone(rig, pose, CHAIN, tgt, end_rotation=np.zeros(4))
    with pytest.raises(kinema.ShapeError):
        kinema.solve_two_bone(rig, pose, CHAIN, np.zeros(2))
    flat = pose.copy()
    flat.translations[rig.index("elbow")] = 0.0  # zero-length upper bone
    with pytest.raises(SolverInputError, match="zero length"):
        kinema.solve_two_bone(rig, flat, CHAIN, tgt)


# ------------------------------------------------------ stability, state
def test_solving_again_changes_nothing(rig):
    pose = rig.rest_pose()
    for target, pole in (([0.9, 1.6, 0.9], [0.3, 1.0, 3.0]), ([4.0, 5.0, -3.0], [0.3, 1.0, 3.0]),
                         ([0.5, 1.2, 0.4], None)):
        target = np.array(target)
        pole = None if pole is None else np.array(pole)
        first = kinema.solve_two_bone(rig, pose, CHAIN, target, pole)
        again = kinema.solve_two_bone(rig, first.pose, CHAIN, target, pole)
        assert np.all(R.equal(again.pose.rotations, first.pose.rotations, atol=1e-12))
        fk1 = kinema.forward_kinematics(rig, first.pose).positions
        fk2 = kinema.forward_kinematics(rig, again.pose).positions
        np.testing.assert_allclose(fk2, fk1, rtol=0, atol=1e-12)


def test_copies_stay_independent(rig):
    sk2 = kinema.Skeleton(rig.names, rig.parents.copy(), rig.translations.copy(), rig.rotations.copy(),
                          rig.scales.copy())
    long_t = rig.translations.copy()
    long_t[rig.index("wrist")] *= 1.5
    sk3 = kinema.Skeleton(rig.names, rig.parents, long_t, rig.rotations, rig.scales)  # same names, longer bone
    p1, p2, p3 = rig.rest_pose(), sk2.rest_pose(), sk3.rest_pose()
    snapshot = [a.copy() for a in (p1.translations, p1.rotations, p1.scales, rig.translations, rig.rotations)]
    target = np.array([1.2, 1.8, 0.7])
    pole = np.array([0.0, 1.0, 3.0])
    target_before, pole_before = target.copy(), pole.copy()
    r1 = kinema.solve_two_bone(rig, p1, CHAIN, target, pole)
    r2 = kinema.solve_two_bone(sk2, p2, CHAIN, target + 0.1, pole)
    r3 = kinema.solve_two_bone(sk3, p3, CHAIN, target, pole)
    now = (p1.translations, p1.rotations, p1.scales, rig.translations, rig.rotations)
    for before, after in zip(snapshot, now, strict=True):
        np.testing.assert_array_equal(before, after)
    np.testing.assert_array_equal(target, target_before)
    np.testing.assert_array_equal(pole, pole_before)
    check_solved(rig, p1, r1, target)
    check_solved(sk2, p2, r2, target + 0.1)
    check_solved(sk3, p3, r3, target)  # the chain cache must not mix skeletons up
    assert not np.shares_memory(r1.pose.rotations, r2.pose.rotations)
    r1.pose.rotations[...] = 0.0
    np.testing.assert_array_equal(p1.rotations, snapshot[1])


def test_bone_lengths_kept_to_1e_12(rng):
    sk = make_rig(a=3.7, b=0.013, parent_scale=11.0, axis_u=rng.normal(size=3), axis_l=rng.normal(size=3))
    pose = sk.rest_pose()
    (pa,), _ = world(sk, pose, "shoulder")
    targets = pa + rng.normal(size=(200, 3)) * 30
    res = kinema.solve_two_bone(sk, pose, CHAIN, targets, pole=pa + np.array([0.0, 0.0, 50.0]))
    a0, b0 = lengths(sk, pose)
    a1, b1 = lengths(sk, res.pose)
    assert np.max(np.abs(a1 / a0 - 1)) <= LEN_RTOL
    assert np.max(np.abs(b1 / b0 - 1)) <= LEN_RTOL


# -------------------------------------------------------------------- hand
def test_end_rotation_reached(rig):
    pose = rig.rest_pose()
    target = np.array([0.9, 1.6, 0.9])
    q = R.normalize(np.array([0.3, -0.4, 0.1, 0.8]))
    res = kinema.solve_two_bone(rig, pose, CHAIN, target, np.array([0.3, 1.0, 3.0]), end_rotation=q)
    check_solved(rig, pose, res, target)
    _, (qw,) = world(rig, res.pose, "wrist")
    assert R.equal(qw, q, atol=1e-9)
    # The same arm as without end_rotation: only the wrist differs.
    plain = kinema.solve_two_bone(rig, pose, CHAIN, target, np.array([0.3, 1.0, 3.0]))
    wrist = rig.index("wrist")
    keep = [j for j in range(rig.n_joints) if j != wrist]
    np.testing.assert_allclose(res.pose.rotations[keep], plain.pose.rotations[keep], atol=1e-15)


@pytest.mark.parametrize("twist", [False, True])
def test_twist_spread_moves_forearm_twist(twist):
    sk = make_rig(twist=twist)
    pose = sk.rest_pose()
    target = np.array([0.9, 1.6, 0.9])
    pole = np.array([0.3, 1.0, 3.0])
    plain = kinema.solve_two_bone(sk, pose, CHAIN, target, pole)
    (pb, pc), (_, qc) = world(sk, plain.pose, "elbow", "wrist")
    theta = 1.1
    q_end = R.multiply(R.from_axis_angle(pc - pb, theta), qc)  # a pure forearm twist of the wrist
    wrist = sk.index("wrist")
    for spread in (0.0, 0.5, 1.0):
        res = kinema.solve_two_bone(sk, pose, CHAIN, target, pole, end_rotation=q_end, twist_spread=spread)
        check_solved(sk, pose, res, target, also_moved=("fore_twist",) if twist else ())
        _, (qw,) = world(sk, res.pose, "wrist")
        assert R.equal(qw, q_end, atol=1e-9)
        # Twist left on the wrist's local rotation: (1 - spread) theta.
        left = R.angle_between(res.pose.rotations[wrist], plain.pose.rotations[wrist])
        np.testing.assert_allclose(left, (1 - spread) * theta, atol=1e-9)
    if twist:
        # Spread evenly over the lower joint and the forearm twist joint.
        ft = sk.index("fore_twist")
        np.testing.assert_allclose(R.angle_between(res.pose.rotations[ft], plain.pose.rotations[ft]), theta / 2,
                                   atol=1e-9)


def test_twist_bones_ride_along(rng):
    sk = make_rig(twist=True, axis_u=rng.normal(size=3), axis_l=rng.normal(size=3))
    pose = sk.rest_pose()
    (pa,), _ = world(sk, pose, "shoulder")
    for _ in range(5):
        target = pa + unit(rng.normal(size=3)) * rng.uniform(0.4, 1.7)
        pole = pa + rng.normal(size=3) * 2
        res = kinema.solve_two_bone(sk, pose, CHAIN, target, pole)
        check_solved(sk, pose, res, target)
        for name in ("upper_twist", "fore_twist"):
            j = sk.index(name)
            np.testing.assert_array_equal(res.pose.rotations[j], pose.rotations[j])


# ------------------------------------------------------------ soft, weight
def test_soft_reach_is_c1_across_the_limit(rig):
    pose = rig.rest_pose()
    (pa,), _ = world(rig, pose, "shoulder")
    a, b = lengths(rig, pose)
    m = MARGIN * min(a, b)
    lo, hi = abs(a - b) + m, a + b - m
    u = unit(np.array([0.4, 0.8, 0.3]))
    dists = np.linspace(0.7 * (a + b), 1.3 * (a + b), 601)
    h = dists[1] - dists[0]

    def end_distance(soft):
        res = kinema.solve_two_bone(rig, pose, CHAIN, pa + dists[:, None] * u, pole=pa + [0, 0, 3.0], soft=soft)
        (p_a, p_c), _ = world(rig, res.pose, "shoulder", "wrist")
        return np.linalg.norm(p_c - p_a, axis=-1)

    soft = 0.25
    f = end_distance(soft)
    ds = soft * (hi - lo)
    d0 = hi - ds
    expect = np.where(dists > d0, d0 + ds * (1 - np.exp(-(dists - d0) / ds)), dists)
    np.testing.assert_allclose(f, expect, rtol=0, atol=1e-12)
    assert np.all(f < hi)
    slope = np.diff(f) / h
    # C1: the discrete slope changes by at most h * max|f''| = h / ds per step.
    assert np.max(np.abs(np.diff(slope))) <= 1.5 * h / ds
    # The hard clamp (soft = 0) has a slope jump from 1 to 0 at the limit.
    hard = np.diff(np.diff(end_distance(0.0)) / h)
    assert np.max(np.abs(hard)) > 0.4


def test_weight_slerps_each_joint(rig):
    pose = rig.rest_pose()
    target = np.array([0.9, 1.6, 0.9])
    pole = np.array([0.3, 1.0, 3.0])
    q = R.normalize(np.array([0.3, -0.4, 0.1, 0.8]))
    full = kinema.solve_two_bone(rig, pose, CHAIN, target, pole, end_rotation=q)
    zero = kinema.solve_two_bone(rig, pose, CHAIN, target, pole, end_rotation=q, weight=0.0)
    np.testing.assert_array_equal(zero.pose.rotations, pose.rotations)
    half = kinema.solve_two_bone(rig, pose, CHAIN, target, pole, end_rotation=q, weight=0.3)
    for name in CHAIN:
        j = rig.index(name)
        expect = R.slerp(pose.rotations[j], full.pose.rotations[j], 0.3)
        assert R.equal(half.pose.rotations[j], expect, atol=1e-12)
    assert not half.reached and half.error > 0.01
    (pc,), _ = world(rig, half.pose, "wrist")
    np.testing.assert_allclose(half.error, np.linalg.norm(pc - target), rtol=1e-12)
    # Per-item weights in a batch.
    res = kinema.solve_two_bone(rig, pose, CHAIN, target, pole, weight=np.array([0.0, 0.3, 1.0]))
    np.testing.assert_array_equal(res.reached, [False, False, True])


# ------------------------------------------------------------------- batch
def test_batch_equals_loop(rng):
    sk = make_rig(axis_u=rng.normal(size=3), axis_l=rng.normal(size=3))
    n = 40
    base = sk.rest_pose()
    rots = np.broadcast_to(base.rotations, (n,) + base.rotations.shape).copy()
    rots[:, 1] = R.normalize(rng.normal(size=(n, 4)))
    rots[:, 3] = R.normalize(rng.normal(size=(n, 4)))
    pose = kinema.Pose(base.translations, rots, base.scales)
    (pa,), _ = world(sk, pose, "shoulder")
    targets = pa + rng.normal(size=(n, 3)) * 1.2
    targets[::7] = pa[::7]  # some on the shoulder
    poles = pa + rng.normal(size=(n, 3)) * 2
    poles[::5] = targets[::5]  # some on the axis
    hints = rng.normal(size=(n, 3))
    qs = R.normalize(rng.normal(size=(n, 4)))
    weights = rng.uniform(0, 1, size=n)
    softs = rng.uniform(0, 0.5, size=n)
    kw = dict(twist_spread=0.5)
    res = kinema.solve_two_bone(sk, pose, CHAIN, targets, poles, weight=weights, soft=softs, end_rotation=qs,
                                bend_hint=hints, **kw)
    big = kinema.solve_two_bone(sk, pose[np.arange(n).repeat(60)], CHAIN, targets.repeat(60, 0),
                                poles.repeat(60, 0), weight=weights.repeat(60), soft=softs.repeat(60),
                                end_rotation=qs.repeat(60, 0), bend_hint=hints.repeat(60, 0), **kw)
    assert big.error.shape == (n * 60,)  # the parallel kernel
    for i in range(n):
        one = kinema.solve_two_bone(sk, pose[i], CHAIN, targets[i], poles[i], weight=float(weights[i]),
                                    soft=float(softs[i]), end_rotation=qs[i], bend_hint=hints[i], **kw)
        assert one.error.shape == () and one.reached.shape == ()
        np.testing.assert_allclose(res.pose.rotations[i], one.pose.rotations, rtol=0, atol=1e-12)
        np.testing.assert_allclose(big.pose.rotations[60 * i], one.pose.rotations, rtol=0, atol=1e-12)
        np.testing.assert_allclose(res.error[i], one.error, rtol=0, atol=1e-12)
        assert res.reached[i] == one.reached
        np.testing.assert_allclose(res.state["bend_direction"][i], one.state["bend_direction"], atol=1e-12)


@pytest.mark.parametrize("parallel", [False, True])
def test_shared_pose_batch_equals_loop(rng, parallel):
    """One pose, many targets (the register-only item solve for a plain three-joint arm) equals a loop of
    single solves (the general item solve) to 1e-12, through every fallback: targets on the shoulder and
    out of reach, poles on the axis, hints with and without continuity, soft reach, per-item margins,
    and items of weight < 1 mixed in (those take the general solve inside the same batch)."""
    sk = make_rig(axis_u=rng.normal(size=3), axis_l=rng.normal(size=3), parent_rot=R.normalize(rng.normal(size=4)),
                  parent_pos=rng.normal(size=3), parent_scale=1.7)
    pose = sk.rest_pose()
    (pa,), _ = world(sk, pose, "shoulder")
    n = 64
    targets = pa + rng.normal(size=(n, 3)) * 2.5
    targets[::9] = pa  # on the shoulder
    poles = pa + rng.normal(size=(n, 3)) * 3
    poles[::5] = pa + 2.0 * (targets[::5] - pa)  # on the shoulder-target axis
    hints = rng.normal(size=(n, 3))
    weights = np.where(np.arange(n) % 4 == 3, rng.uniform(0, 1, size=n), 1.0)
    softs = rng.uniform(0, 0.6, size=n)
    margins = rng.uniform(0, 0.05, size=n)
    reps = 40 if parallel else 1  # 40 x 64 items run the parallel kernel
    for continuity in (False, True):
        res = kinema.solve_two_bone(sk, pose, CHAIN, np.tile(targets, (reps, 1)), np.tile(poles, (reps, 1)),
                                    weight=np.tile(weights, reps), soft=np.tile(softs, reps),
                                    margin=np.tile(margins, reps), bend_hint=np.tile(hints, (reps, 1)),
                                    continuity=continuity)
        for i in range(n):
            one = kinema.solve_two_bone(sk, pose, CHAIN, targets[i], poles[i], weight=float(weights[i]),
                                        soft=float(softs[i]), margin=float(margins[i]), bend_hint=hints[i],
                                        continuity=continuity)
            for k in (i, i + (reps - 1) * n):
                np.testing.assert_allclose(res.pose.rotations[k], one.pose.rotations, rtol=0, atol=1e-12)
                np.testing.assert_allclose(res.error[k], one.error, rtol=0, atol=1e-12)
                assert res.reached[k] == one.reached
                np.testing.assert_allclose(res.state["bend_direction"][k], one.state["bend_direction"], atol=1e-12)
    # Without poles or hints (the current bend plane is kept) and with the default margin.
    res = kinema.solve_two_bone(sk, pose, CHAIN, targets)
    for i in range(0, n, 7):
        one = kinema.solve_two_bone(sk, pose, CHAIN, targets[i])
        np.testing.assert_allclose(res.pose.rotations[i], one.pose.rotations, rtol=0, atol=1e-12)
    # Bad items are still reported by the register-only path.
    bad = targets.copy()
    bad[3, 1] = np.nan
    with pytest.raises(kinema.SolverInputError, match="target"):
        kinema.solve_two_bone(sk, pose, CHAIN, bad, poles)


def test_batch_shapes_broadcast_and_out(rig):
    pose = rig.rest_pose()
    targets = np.array([0.9, 1.6, 0.9]) + np.linspace(0, 0.3, 6).reshape(2, 3, 1)
    res = kinema.solve_two_bone(rig, pose, CHAIN, targets, np.array([0.3, 1.0, 3.0]))
    assert res.pose.rotations.shape == (2, 3, rig.n_joints, 4)
    assert res.error.shape == res.reached.shape == res.iterations.shape == (2, 3)
    assert res.state["bend_direction"].shape == (2, 3, 3)
    out = rig.rest_pose((2, 3))
    res2 = kinema.solve_two_bone(rig, pose, CHAIN, targets, np.array([0.3, 1.0, 3.0]), out=out)
    assert res2.pose is out
    np.testing.assert_array_equal(out.rotations, res.pose.rotations)


def test_new_output_pose_keeps_unbatched_translations_and_scales(rig, rng):
    """Two-bone turns rotations only: a new output pose repeats nothing it does not change.  Unbatched input
    translations and scales come back unbatched (copies), batched ones batched; FK is the same either way."""
    pose = rig.rest_pose()
    targets = np.array([0.9, 1.6, 0.9]) + rng.normal(size=(7, 3)) * 0.2
    pole = np.array([0.3, 1.0, 3.0])
    res = kinema.solve_two_bone(rig, pose, CHAIN, targets, pole)
    assert res.pose.translations.shape == pose.translations.shape and res.pose.scales.shape == pose.scales.shape
    assert res.pose.rotations.shape == (7, rig.n_joints, 4) and res.pose.batch_shape == (7,)
    assert not np.shares_memory(res.pose.translations, pose.translations)
    assert not np.shares_memory(res.pose.scales, pose.scales)
    full = kinema.Pose(*(np.broadcast_to(a, (7,) + a.shape).copy() for a in (pose.translations, pose.rotations,
                                                                             pose.scales)))
    res_full = kinema.solve_two_bone(rig, full, CHAIN, targets, pole)
    assert res_full.pose.translations.shape == (7, rig.n_joints, 3)
    np.testing.assert_allclose(res_full.pose.rotations, res.pose.rotations, rtol=0, atol=1e-15)
    np.testing.assert_allclose(kinema.forward_kinematics(rig, res.pose).positions,
                               kinema.forward_kinematics(rig, res_full.pose).positions, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(res.pose[3].translations, pose.translations)


def test_fast_path_matches_general_path(rig):
    pose = rig.rest_pose()
    target = np.array([0.9, 1.6, 0.9])
    pole = np.array([0.3, 1.0, 3.0])
    q = R.normalize(np.array([0.3, -0.4, 0.1, 0.8]))
    kw = dict(weight=0.7, soft=0.2, end_rotation=q, margin=0.01, bend_hint=np.array([0.0, 0.0, 1.0]),
              twist_spread=0.3)
    fast = kinema.solve_two_bone(rig, pose, CHAIN, target, pole, **kw)
    assert type(fast.error) is np.float64  # single-pose fast path
    out = rig.rest_pose()
    general = kinema.solve_two_bone(rig, pose, CHAIN, target, pole, out=out, **kw)
    # Same kernel item, compiled into two drivers: the compiler may fuse a
    # multiply-add in one and not the other (fastmath "contract"), so the
    # paths agree to an ulp or two, not bit for bit.
    np.testing.assert_allclose(fast.pose.rotations, general.pose.rotations, rtol=0, atol=1e-15)
    assert abs(fast.error - general.error) <= 1e-15 and fast.reached == general.reached
    np.testing.assert_allclose(fast.state["bend_direction"], general.state["bend_direction"], rtol=0, atol=1e-15)
    lists = kinema.solve_two_bone(rig, pose, list(CHAIN), target.tolist(), pole.tolist(), **kw)
    np.testing.assert_array_equal(lists.pose.rotations, fast.pose.rotations)


def test_fast_path_hands_unusual_inputs_to_the_general_path(rig):
    """The plain per-frame call checks only dimensions in Python; strided targets are read at their strides,
    and other dtypes, a pose of another joint count or a target of another size give the general path's
    numbers or errors."""
    pose = rig.rest_pose()
    target = np.array([0.9, 1.6, 0.9])
    pole = np.array([0.3, 1.0, 3.0])
    ref = kinema.solve_two_bone(rig, pose, CHAIN, target, pole)
    strided_t = np.repeat(target, 2)[::2]
    strided_p = np.repeat(pole, 3)[::3]
    got = kinema.solve_two_bone(rig, pose, CHAIN, strided_t, strided_p)
    np.testing.assert_array_equal(got.pose.rotations, ref.pose.rotations)
    assert got.error == ref.error
    t32 = target.astype(np.float32)  # exactly representable: the float64 numbers
    ref32 = kinema.solve_two_bone(rig, pose, CHAIN, t32.astype(np.float64), pole)
    np.testing.assert_allclose(kinema.solve_two_bone(rig, pose, CHAIN, t32, pole).pose.rotations,
                               ref32.pose.rotations, rtol=0, atol=1e-15)
    p32 = rig.rest_pose()
    p32.rotations = p32.rotations.astype(np.float32)
    np.testing.assert_allclose(kinema.solve_two_bone(rig, p32, CHAIN, target, pole).pose.rotations,
                               kinema.solve_two_bone(rig, p32, CHAIN, target[None], pole).pose.rotations[0],
                               rtol=0, atol=1e-15)
    other = kinema.Pose(np.zeros((rig.n_joints + 1, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (rig.n_joints + 1, 1)))
    with pytest.raises(kinema.ShapeError):
        kinema.solve_two_bone(rig, other, CHAIN, target, pole)
    with pytest.raises(kinema.KinemaError, match="target"):
        kinema.solve_two_bone(rig, pose, CHAIN, np.zeros(4), pole)
    with pytest.raises(kinema.KinemaError, match="pole"):
        kinema.solve_two_bone(rig, pose, CHAIN, target, np.zeros(2))


def test_fast_path_twist_chain_scratch_per_thread():
    """Arms with twist joints solve through the single-pose path in scratch arrays lent per thread (the
    kernel releases the GIL): in fresh threads (a plain arm first, so the scratch must grow), four at once,
    every single solve equals the batch's."""
    plain, sk = make_rig(), make_rig(twist=True)
    pose, pose_plain = sk.rest_pose(), plain.rest_pose()
    rng = np.random.default_rng(7)
    targets = np.array([0.9, 1.6, 0.9]) + rng.normal(size=(24, 3)) * 0.3
    pole = np.array([0.3, 1.0, 3.0])
    batch = kinema.solve_two_bone(sk, pose, CHAIN, targets, pole, weight=0.8)
    bad: list[int] = []

    def work(offset: int) -> None:
        kinema.solve_two_bone(plain, pose_plain, CHAIN, targets[0], pole)
        for _rep in range(1000):  # (a shared scratch failed 6 to 18 of these 48,000 solves)
            for i in range(offset, len(targets), 2):
                one = kinema.solve_two_bone(sk, pose, CHAIN, targets[i], pole, weight=0.8)
                if np.abs(one.pose.rotations - batch.pose.rotations[i]).max() > 1e-15:
                    bad.append(i)

    run_at_once(work, [(k % 2,) for k in range(4)])
    assert bad == []


def test_fast_path_option_types_do_not_leak_between_calls():
    """The single-solve path calls the kernel's compiled code directly, typed by the first call: options
    given as int, float or np.float64 in any order must give the same numbers (a fresh process, so the
    first call really is the first)."""
    code = """
import numpy as np, kinema, sys
sys.path.insert(0, 'tests')
from test_two_bone import make_rig, CHAIN
sk = make_rig()
pose = sk.rest_pose()
tg, pole = np.array([0.9, 1.6, 0.9]), np.array([0.3, 1.0, 3.0])
kinema.solve_two_bone(sk, pose, CHAIN, tg, pole, weight=1, soft=0, twist_spread=0, margin=0)
for w, so in ((np.float64(0.5), 0.25), (0.5, np.float64(0.25)), (1, 0)):
    a = kinema.solve_two_bone(sk, pose, CHAIN, tg, pole, weight=w, soft=so, margin=np.float64(0.01))
    b = kinema.solve_two_bone(sk, pose, CHAIN, tg, pole, weight=w, soft=so, margin=0.01, out=sk.rest_pose())
    assert type(a.error) is np.float64
    assert np.abs(a.pose.rotations - b.pose.rotations).max() <= 1e-15, (w, so)
print('ok')
"""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_kernel_option_bits_match():
    from kinema import _two_bone as api
    from kinema._kernels import two_bone as k

    assert (api._HAS_POLE, api._HAS_HINT, api._HAS_END_ROTATION, api._CONTINUITY) == (
        k.HAS_POLE, k.HAS_HINT, k.HAS_END_ROTATION, k.CONTINUITY)


def test_basic_drivers_give_the_full_drivers_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The basic drivers run copies of the per-item code with the hinge, hint, smooth and rest-twist branches
    compiled out: calls without those options take them, and get the full drivers' numbers bit for bit."""
    from kinema._kernels import two_bone as k

    assert k.drivers_for(k.HAS_POLE | k.HAS_END_ROTATION | k.CONTINUITY) is k.DRIVERS_BASIC
    for bit in (k.HAS_HINGE, k.HAS_HINT, k.SMOOTH, k.REST_TWIST):
        assert k.drivers_for(k.HAS_POLE | bit) is k.DRIVERS
    rng = np.random.default_rng(4)
    sk = make_rig(twist=True, parent_scale=1.3)
    (pa,), _ = world(sk, sk.rest_pose(), "shoulder")
    targets = pa + rng.normal(size=(40, 3))
    q = R.normalize(rng.normal(size=(40, 4)))
    pose = kinema.Pose(np.broadcast_to(sk.translations, (40, sk.n_joints, 3)),
                       R.normalize(rng.normal(size=(40, sk.n_joints, 4))), np.ones((40, sk.n_joints, 3)))

    def solves():
        return [kinema.solve_two_bone(sk, p, CHAIN, t, pole, **kw)
                for p in (sk.rest_pose(), pose) for t in (targets, targets[3])
                for pole, kw in ((None, {}), (pa + [0.0, 0.3, 2.0], dict(weight=0.6, soft=0.2)),
                                 (targets * 2.0, dict(end_rotation=q, twist_spread=0.5, margin=0.01)))
                if not (t.ndim == 1 and isinstance(pole, np.ndarray) and pole.ndim == 2)]

    basic = solves()
    monkeypatch.setattr(k, "drivers_for", lambda flags: k.DRIVERS)
    for b, f in zip(basic, solves(), strict=True):
        np.testing.assert_array_equal(b.pose.rotations, f.pose.rotations)
        np.testing.assert_array_equal(b.error, f.error)
        np.testing.assert_array_equal(b.state["bend_direction"], f.state["bend_direction"])


@st.composite
def rigs(draw):
    f = st.floats(-1, 1)
    vec = st.tuples(f, f, f).filter(lambda v: np.linalg.norm(v) > 0.1)
    quat = st.tuples(f, f, f, f).filter(lambda q: np.linalg.norm(q) > 0.1)
    return dict(a=draw(st.floats(0.1, 3)), b=draw(st.floats(0.1, 3)), axis_u=draw(vec), axis_l=draw(vec),
                parent_rot=R.normalize(draw(quat)), parent_pos=draw(vec), parent_scale=draw(st.floats(0.2, 5)),
                shoulder_rot=R.normalize(draw(quat)), bend_deg=draw(st.floats(5, 175)))


@given(rigs(), st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.floats(-1, 1)).filter(
    lambda v: np.linalg.norm(v) > 1e-3), st.floats(0.01, 1.5), st.tuples(st.floats(-3, 3), st.floats(-3, 3),
                                                                          st.floats(-3, 3)))
def test_random_rigs(params, direction, reach, pole_offset):
    sk = make_rig(**params)
    pose = sk.rest_pose()
    (pa,), _ = world(sk, pose, "shoulder")
    a, b = lengths(sk, pose)
    target = pa + unit(direction) * reach * (a + b)
    pole = pa + np.array(pole_offset) * (a + b)
    res = kinema.solve_two_bone(sk, pose, CHAIN, target, pole)
    check_solved(sk, pose, res, target, tol=1e-11)
    u = unit(target - pa)
    w = pole - pa
    if np.linalg.norm(perp(w, u)) > 1e-6 * np.linalg.norm(w):
        assert elbow_side(sk, res, target, pole) > 0
    again = kinema.solve_two_bone(sk, res.pose, CHAIN, target, pole)
    assert np.all(R.equal(again.pose.rotations, res.pose.rotations, atol=1e-11))


# -------------------------------------------------------------- continuity
def _elbow_steps(sk, poses, targets):
    (pa, pb), _ = world(sk, poses, "shoulder", "elbow")
    e = unit(pb - pa)
    return np.arccos(np.clip(np.sum(e[1:] * e[:-1], axis=-1), -1, 1))


@pytest.mark.parametrize("offset", [0.0, 0.01, 0.02])
def test_no_elbow_flip_when_the_target_crosses_the_pole_axis(offset):
    sk = make_rig(a=1.0, b=1.0)
    pose = sk.rest_pose()
    (pa,), _ = world(sk, pose, "shoulder")
    pole = pa + np.array([0.0, 0.0, 2.0])
    # A straight target path through (offset 0) or just past the pole axis.
    s = np.linspace(-0.8, 0.8, 201)
    targets = pa + np.stack([s, np.full_like(s, offset), np.full_like(s, 1.2)], axis=-1)
    ik = kinema.TwoBoneIK(sk, CHAIN, pole=pole)
    frames = []
    for tgt in targets:
        res = ik.solve(pose, tgt)  # the animated input pose every frame
        assert bool(res.reached)
        frames.append(res.pose.rotations)
    solved = kinema.Pose(pose.translations, np.stack(frames), pose.scales)
    steps = _elbow_steps(sk, solved, targets)
    assert steps.max() <= 5 * np.median(steps)
    # Stateless pole-following flips at the crossing (the test can fail).
    plain = kinema.solve_two_bone(sk, pose, CHAIN, targets, pole)
    flips = _elbow_steps(sk, plain.pose, targets)
    assert flips.max() > 20 * np.median(flips)
    # Far from the axis (sine > POLE_FADE_SINE) the helper follows the pole exactly.
    np.testing.assert_allclose(solved.rotations[:20], plain.pose.rotations[:20], atol=1e-12)


def test_two_bone_ik_helper_state_and_reset(rig):
    pose = rig.rest_pose()
    pole = np.array([0.3, 1.0, 3.0])
    ik = kinema.TwoBoneIK(rig, CHAIN, pole=pole)
    assert ik.bend_direction is None
    res = ik.solve(pose, np.array([0.9, 1.6, 0.9]))
    np.testing.assert_array_equal(ik.bend_direction, res.state["bend_direction"])
    pole[0] = 100.0  # the helper holds its own copy
    np.testing.assert_array_equal(ik.pole, [0.3, 1.0, 3.0])
    batch = ik.solve(pose, np.array([[0.9, 1.6, 0.9], [0.5, 1.2, 0.4]]))  # new batch shape: history dropped
    assert batch.state["bend_direction"].shape == (2, 3)
    ik.reset()
    assert ik.bend_direction is None


# --------------------------------------------------------------------- 2D
def test_2d_angles_rebuild_the_points(rng):
    root = rng.normal(size=(50, 2))
    target = root + rng.normal(size=(50, 2)) * 1.5
    l1 = rng.uniform(0.5, 1.5, size=50)
    l2 = rng.uniform(0.5, 1.5, size=50)
    bend = np.where(rng.uniform(size=50) > 0.5, 1, -1)
    r = kinema.solve_two_bone_2d(root, target, l1, l2, bend)
    e = root + l1[:, None] * np.stack([np.cos(r.angle1), np.sin(r.angle1)], -1)
    c = r.elbow + l2[:, None] * np.stack([np.cos(r.angle2), np.sin(r.angle2)], -1)
    np.testing.assert_allclose(r.elbow, e, atol=1e-14)
    np.testing.assert_allclose(r.end, c, atol=1e-14)
    d = np.linalg.norm(target - root, axis=-1)
    m = MARGIN * np.minimum(l1, l2)
    lo, hi = np.abs(l1 - l2) + m, l1 + l2 - m
    inside = (d > lo) & (d < hi)
    np.testing.assert_array_equal(r.reached, inside)
    dc = np.clip(d, lo, hi)
    np.testing.assert_allclose(r.end, root + unit(target - root) * dc[:, None], atol=1e-12)
    # Elbow side: bend +1 puts the elbow counter-clockwise of root -> target.
    d_t, d_e = target - root, r.elbow - root
    side = d_t[:, 0] * d_e[:, 1] - d_t[:, 1] * d_e[:, 0]
    assert np.all(np.sign(side) == bend)
    for i in range(0, 50, 7):
        one = kinema.solve_two_bone_2d(root[i], target[i], l1[i], l2[i], bend[i])
        np.testing.assert_allclose(one.elbow, r.elbow[i], atol=1e-12)
        np.testing.assert_allclose([one.angle1, one.angle2], [r.angle1[i], r.angle2[i]], atol=1e-12)


def test_2d_folded_limit_is_clamped_not_snapped():
    r = kinema.solve_two_bone_2d([0.0, 0.0], [0.05, 0.0], 1.0, 0.6)
    np.testing.assert_allclose(r.end, [0.4 + MARGIN * 0.6, 0.0], atol=1e-13)
    assert not r.reached
    far = kinema.solve_two_bone_2d([0.0, 0.0], [0.0, 5.0], 1.0, 0.6)
    np.testing.assert_allclose(far.end, [0.0, 1.6 - MARGIN * 0.6], atol=1e-13)
    np.testing.assert_allclose(far.angle1, np.pi / 2, atol=0.02)  # nearly straight
    on_root = kinema.solve_two_bone_2d([1.0, 1.0], [1.0, 1.0], 1.0, 1.0)
    np.testing.assert_allclose(on_root.end, [1.0 + MARGIN, 1.0], atol=1e-12)
    with pytest.raises(SolverInputError, match="target contains NaN"):
        kinema.solve_two_bone_2d([0.0, 0.0], [np.nan, 0.0], 1.0, 1.0)
    with pytest.raises(SolverInputError, match="bend"):
        kinema.solve_two_bone_2d([0.0, 0.0], [1.0, 0.0], 1.0, 1.0, bend=0)
    with pytest.raises(SolverInputError, match="positive"):
        kinema.solve_two_bone_2d([0.0, 0.0], [1.0, 0.0], 0.0, 1.0)


def test_2d_large_batch_uses_the_parallel_kernel(rng):
    n = 5000
    root = rng.normal(size=(n, 2))
    target = root + rng.normal(size=(n, 2))
    r = kinema.solve_two_bone_2d(root, target, 1.0, 0.7, soft=0.1)
    small = kinema.solve_two_bone_2d(root[:100], target[:100], 1.0, 0.7, soft=0.1)
    np.testing.assert_array_equal(r.end[:100], small.end)


# --------------------------------------------------------- no-JIT parity
_NOJIT_SCRIPT = r"""
import json, sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_two_bone import make_rig, CHAIN
import kinema
sk = make_rig(twist=True)
pose = sk.rest_pose()
rng = np.random.default_rng(7)
targets = rng.normal(size=(12, 3)) * 1.2
targets[3] = kinema.forward_kinematics(sk, pose).positions[1]  # on the shoulder
poles = rng.normal(size=(12, 3)) * 2
poles[5] = targets[5] * 3
q = kinema.rotation.normalize(rng.normal(size=(12, 4)))
res = kinema.solve_two_bone(sk, pose, CHAIN, targets, poles, soft=0.2, end_rotation=q, twist_spread=0.5,
                            weight=0.8, bend_hint=rng.normal(size=(12, 3)), continuity=True)
one = kinema.solve_two_bone(sk, pose, CHAIN, targets[0], poles[0])
two = kinema.solve_two_bone_2d(rng.normal(size=(5, 2)), rng.normal(size=(5, 2)), 1.0, 0.5)
# A plain arm (no twist bones): the register-only item, one solve and a shared-pose batch.
arm = make_rig(axis_u=(0.2, 1.0, 0.1), axis_l=(0.0, 1.0, 0.3), parent_scale=1.5)
arm_one = kinema.solve_two_bone(arm, arm.rest_pose(), CHAIN, targets[1], poles[1])
arm_batch = kinema.solve_two_bone(arm, arm.rest_pose(), CHAIN, targets, poles, soft=0.3,
                                  weight=np.where(np.arange(12) % 3 == 0, 0.5, 1.0))
print(json.dumps(dict(rot=res.pose.rotations.tolist(), err=res.error.tolist(), one=one.pose.rotations.tolist(),
                      end2d=two.end.tolist(), arm_one=arm_one.pose.rotations.tolist(),
                      arm_batch=arm_batch.pose.rotations.tolist())))
"""


def test_pure_python_kernels_match_jit():
    tests = os.path.dirname(os.path.abspath(__file__))
    script = _NOJIT_SCRIPT.format(tests=tests)
    outs = []
    for disable in ("1", "0"):
        env = dict(os.environ, NUMBA_DISABLE_JIT=disable)
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    py, jit = outs
    for key in ("rot", "err", "one", "end2d", "arm_one", "arm_batch"):
        np.testing.assert_allclose(np.array(py[key]), np.array(jit[key]), rtol=0, atol=1e-12)
