"""CCD: reaches, equals the plain algorithm and three.js, keeps bones and limits, weights, steps, poles, priorities."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kinema
from _limited_arm import errors_by_iterations
from _threads import run_at_once
from kinema import rotation as R
from kinema.limits import EulerRange, Hinge, SwingTwist

ROOT = Path(__file__).resolve().parents[1]
MIN_TURN = 1e-5  # kinema._kernels.ccd.MIN_TURN_ANGLE (checked below)


# ---------------------------------------------------------------------------- rigs
def make_rig(rng: np.random.Generator, k: int = 7, parent: tuple[np.ndarray, np.ndarray, float] | None = None
             ) -> tuple[kinema.Skeleton, list[str]]:
    """Two ancestors ("world", "base") then a chain c0..c{k-1}.  ``parent`` = (rotation, translation,
    uniform scale) of the "world" joint (identity when None)."""
    names = ["world", "base"] + [f"c{a}" for a in range(k)]
    n = len(names)
    t = np.zeros((n, 3))
    t[1] = [0.2, 0.5, -0.1]
    t[3:] = rng.normal(size=(k - 1, 3)) * 0.2 + [0.0, 1.0, 0.0]
    rot = R.from_rotvec(rng.normal(size=(n, 3)) * 0.2)
    scl = np.ones((n, 3))
    rot[0] = [0, 0, 0, 1]
    if parent is not None:
        rot[0] = parent[0]
        t[0] = parent[1]
        scl[0] = parent[2]
    sk = kinema.Skeleton(names, [-1] + list(range(n - 1)), t, rot, scl)
    return sk, names[2:]


def random_reachable(sk: kinema.Skeleton, chain: list[str], rng: np.random.Generator, n: int,
                     spread: float = 0.5) -> np.ndarray:
    pose = sk.rest_pose((n,))
    j = sk.indices(chain)
    pose.rotations[:, j] = R.multiply(pose.rotations[:, j], R.from_rotvec(rng.normal(size=(n, j.size, 3)) * spread))
    return kinema.forward_kinematics(sk, pose).positions[:, j[-1]]


def end_error(sk: kinema.Skeleton, pose: kinema.Pose, end: str, target: np.ndarray) -> np.ndarray:
    return np.linalg.norm(kinema.forward_kinematics(sk, pose).positions[..., sk.index(end), :] - target, axis=-1)


def plain_ccd(sk: kinema.Skeleton, pose: kinema.Pose, chain: list[str], target: np.ndarray,
              iterations: int) -> np.ndarray:
    """Textbook CCD in NumPy: full FK after every turn, from_two_vectors, 1e-5 skip, stop when nothing turned."""
    j = sk.indices(chain)
    rot = pose.rotations.copy()
    for _ in range(iterations):
        turned = False
        for a in range(len(j) - 2, -1, -1):
            fk = kinema.forward_kinematics(sk, kinema.Pose(pose.translations, rot, pose.scales))
            p = fk.positions[j[a]]
            dq = R.from_two_vectors(fk.positions[j[-1]] - p, target - p)
            if R.angle_between([0, 0, 0, 1], dq) < MIN_TURN:
                continue
            qpar = fk.rotations[sk.parents[j[a]]]
            rot[j[a]] = R.normalize(R.multiply(R.inverse(qpar), R.multiply(dq, fk.rotations[j[a]])))
            turned = True
        if not turned:
            break
    return rot


# ------------------------------------------------------------------------- basics
def test_min_turn_constant() -> None:
    from kinema._kernels import ccd as kccd

    assert kccd.MIN_TURN_ANGLE == MIN_TURN


def test_reaches_reachable_targets_and_keeps_bones(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    tg = random_reachable(sk, chain, rng, 300)
    pose = sk.rest_pose()
    res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg, iterations=200, tolerance=1e-3)
    assert res.error.shape == (300,) and res.pose.rotations.shape == (300, sk.n_joints, 4)
    assert res.reached.mean() >= 0.99
    # Reported error is the FK error of the returned pose (the chain rebuilt by FK reaches the target).
    assert np.allclose(res.error, end_error(sk, res.pose, chain[-1], tg), rtol=0, atol=1e-12)
    assert np.array_equal(res.reached, res.error <= 1e-3)
    assert np.all(res.iterations <= 200) and np.all(res.iterations >= 1)
    rest_len = sk.bone_lengths()
    got = sk.bone_lengths(res.pose)
    assert np.max(np.abs(got - rest_len) / np.where(rest_len > 0, rest_len, 1.0)) <= 1e-9
    assert np.all(np.isfinite(res.pose.rotations))
    # The input pose is never written; joints outside the chain never change.
    assert np.array_equal(pose.rotations, sk.rotations)
    assert np.array_equal(res.pose.rotations[:, :2], np.broadcast_to(sk.rotations[:2], (300, 2, 4)))
    assert np.array_equal(res.pose.translations, np.broadcast_to(sk.translations, (300, sk.n_joints, 3)))


def test_equals_plain_algorithm(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng, k=6)
    pose = sk.rest_pose()
    for tg in rng.normal(size=(12, 3)) * 2.0 + [0.0, 3.0, 0.0]:
        ref = plain_ccd(sk, pose, chain, tg, 20)
        got = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg, iterations=20, tolerance=0.0)
        assert np.all(R.equal(got.pose.rotations, ref, atol=1e-10))


def test_already_reached_does_nothing(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    end = kinema.forward_kinematics(sk, pose).positions[sk.index(chain[-1])]
    res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), end + [1e-4, 0, 0])
    assert res.iterations == 0 and bool(res.reached)
    assert np.array_equal(res.pose.rotations, pose.rotations)


def test_first_joint_turns_and_end_does_not(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng, k=3)
    pose = sk.rest_pose()
    res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), [2.0, 0.5, 1.0], iterations=1, tolerance=0.0)
    j = sk.indices(chain)
    assert not np.allclose(res.pose.rotations[j[0]], pose.rotations[j[0]])
    assert np.array_equal(res.pose.rotations[j[-1]], pose.rotations[j[-1]])


def test_batch_equals_loop(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    tg = random_reachable(sk, chain, rng, 40) + rng.normal(size=(40, 3)) * 0.3
    pole = rng.normal(size=(40, 3)) * 3
    poses = sk.rest_pose((40,))
    poses.rotations[:] = R.multiply(poses.rotations, R.from_rotvec(rng.normal(size=(40, sk.n_joints, 3)) * 0.1))
    lim = {chain[1]: Hinge((1, 0, 0), -1, 1), chain[2]: SwingTwist((0, 1, 0), 0.5, -0.2, 0.2),
           chain[3]: EulerRange("XYZ", (-0.5, -0.5, -0.5), (0.5, 0.5, 0.5))}
    kw = dict(weights={chain[0]: 0.5}, max_step=0.3, limits=lim)
    batch = kinema.solve_ccd(sk, poses, (chain[0], chain[-1]), tg, pole=pole, **kw)  # type: ignore[arg-type]
    for i in range(40):
        one = kinema.solve_ccd(sk, poses[i], (chain[0], chain[-1]), tg[i], pole=pole[i], **kw)  # type: ignore[arg-type]
        assert np.max(np.abs(one.pose.rotations - batch.pose.rotations[i])) <= 1e-12
        assert abs(float(one.error) - batch.error[i]) <= 1e-12
        assert int(one.iterations) == batch.iterations[i] and int(one.limits_hit) == batch.limits_hit[i]
    # (2, 20) batch shape and a shared pose broadcast the same way.
    b2 = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg.reshape(2, 20, 3))
    b1 = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg)
    assert b2.error.shape == (2, 20)
    assert np.array_equal(b2.pose.rotations.reshape(40, -1, 4), b1.pose.rotations)


def test_one_solve_fast_path_equals_general_path(rng: np.random.Generator) -> None:
    """A plain per-frame call (float64 (3,) target, unbatched pose) takes a lean path (``ccd_one``): same
    numbers bit for bit as the general path, whatever form the target comes in, and numpy scalars out."""
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    pose.rotations[:] = R.multiply(pose.rotations, R.from_rotvec(rng.normal(size=(sk.n_joints, 3)) * 0.1))
    tg = random_reachable(sk, chain, rng, 12) + rng.normal(size=(12, 3)) * 0.3
    pole = np.array([0.5, 1.0, 2.0])
    for kw in ({}, {"pole": pole}, {"fixed_root": False, "tolerance": 0.0}, {"max_step": 0.2, "iterations": 7}):
        batch = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg, **kw)  # type: ignore[arg-type]
        for i in range(tg.shape[0]):
            ro = tg[i].copy()
            ro.setflags(write=False)
            strided = np.repeat(tg[i], 2)[::2]  # a (3,) view with a stride of 16 bytes
            for target in (tg[i], ro, strided, tg[i].tolist(), tg[i][None]):
                one = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), target, **kw)  # type: ignore[arg-type]
                assert np.array_equal(one.pose.rotations.reshape(-1, 4), batch.pose.rotations[i])
                assert np.array_equal(one.pose.translations.reshape(-1, 3), batch.pose.translations[i])
                assert np.ravel(one.error)[0] == batch.error[i]
                assert np.ravel(one.iterations)[0] == batch.iterations[i]
                assert np.ravel(one.reached)[0] == batch.reached[i]
        one = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg[0], **kw)  # type: ignore[arg-type]
        assert type(one.error) is np.float64 and type(one.iterations) is np.int64
        assert type(one.limits_hit) is np.int64 and type(one.reached) is np.bool_
        assert one.pose.rotations.shape == pose.rotations.shape and one.pose.rotations.flags.writeable
    assert np.array_equal(pose.translations, sk.translations)  # the input pose is never written
    with pytest.raises(kinema.SolverInputError, match="target"):
        kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), np.array([0.0, np.nan, 0.0]))


def test_many_sweeps_keep_rotations_unit_and_bones_intact(rng: np.random.Generator) -> None:
    """Between sweeps the chain's world rotations are updated by products without renormalising: after
    20,000 sweeps (a tiny step cap keeps every sweep turning) the output is still unit quaternions, bones keep
    their lengths and the reported error is the FK error of the returned pose."""
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    tg = random_reachable(sk, chain, rng, 2, spread=1.0)
    rest_len = sk.bone_lengths()
    # Without limits, then with cones that clamp on most sweeps (a clamped turn must not compound the drift).
    for limits in (None, {n: SwingTwist((0, 1, 0), 0.3, -0.2, 0.2) for n in chain[:-1]}):
        res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg, iterations=20000, tolerance=0.0,
                               max_step=3e-5, adaptive_step=False, limits=limits)
        assert np.all(res.iterations >= 15000 if limits is None else res.limits_hit > 1000)
        assert np.max(np.abs(np.linalg.norm(res.pose.rotations, axis=-1) - 1.0)) <= 1e-15
        assert np.max(np.abs(sk.bone_lengths(res.pose) - rest_len) / np.where(rest_len > 0, rest_len, 1.0)) <= 1e-9
        assert np.allclose(res.error, end_error(sk, res.pose, chain[-1], tg), rtol=0, atol=1e-12)


def test_one_solve_path_hands_unusual_inputs_to_the_general_path(rng: np.random.Generator) -> None:
    """The lean per-frame path checks only dimensions; everything else it cannot take (other dtypes, wrong
    shapes, a longer chain than its scratch has rows for) must give the general path's result or error."""
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    tg = random_reachable(sk, chain, rng, 3)
    ref = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg)
    # float32 target (exactly representable values) and float32 pose arrays: the same numbers.
    tg32 = tg.astype(np.float32)
    ref32 = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg32.astype(np.float64))
    one = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg32[0])
    assert np.array_equal(one.pose.rotations, ref32.pose.rotations[0])
    p32 = sk.rest_pose()
    p32.rotations = p32.rotations.astype(np.float32)  # a float32 pose: what the general path gives a batch of one
    assert np.array_equal(kinema.solve_ccd(sk, p32, (chain[0], chain[-1]), tg[0]).pose.rotations,
                          kinema.solve_ccd(sk, p32, (chain[0], chain[-1]), tg[:1]).pose.rotations[0])
    # A pose of another joint count: the general path's shape error.
    other = kinema.Pose(np.zeros((sk.n_joints + 1, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (sk.n_joints + 1, 1)))
    with pytest.raises(kinema.ShapeError):
        kinema.solve_ccd(sk, other, (chain[0], chain[-1]), tg[0])
    with pytest.raises(kinema.KinemaError, match="target"):
        kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), np.zeros(4))
    # Scratch grows: in a fresh thread, a 3-joint chain first, then the whole chain.
    got: list[kinema.SolveResult] = []

    def work() -> None:
        kinema.solve_ccd(sk, pose, (chain[0], chain[2]), tg[0])
        got.extend(kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg[i]) for i in range(3))

    run_at_once(work, [()])
    for i in range(3):
        assert np.array_equal(got[i].pose.rotations, ref.pose.rotations[i])
        assert float(got[i].error) == ref.error[i] and int(got[i].iterations) == ref.iterations[i]


def test_one_solve_scratch_is_safe_across_threads(rng: np.random.Generator) -> None:
    """The one-solve kernel releases the GIL and works in a scratch array the caller lends it: four threads
    solving the same chain at once must each get the batch's numbers (one scratch per thread)."""
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    tg = random_reachable(sk, chain, rng, 40)
    batch = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg, tolerance=0.0)
    bad: list[int] = []

    def work(offset: int) -> None:
        for _rep in range(60):
            for i in range(offset, tg.shape[0], 2):
                one = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg[i], tolerance=0.0)
                if not np.array_equal(one.pose.rotations, batch.pose.rotations[i]):
                    bad.append(i)

    run_at_once(work, [(k % 2,) for k in range(4)])  # (a shared scratch failed 20 to 40 solves here)
    assert bad == []


def test_same_under_rotated_translated_scaled_parents(rng: np.random.Generator) -> None:
    seed = int(rng.integers(1 << 30))
    sk0, chain = make_rig(np.random.default_rng(seed))
    q = R.from_rotvec([0.4, -1.2, 0.7])
    p = np.array([3.0, -2.0, 5.0])
    s = 2.5
    sk1, _ = make_rig(np.random.default_rng(seed), parent=(q, p, s))
    tg0 = random_reachable(sk0, chain, rng, 30) + rng.normal(size=(30, 3)) * 0.2
    tg1 = p + s * R.rotate(q, tg0)
    lim = {chain[2]: SwingTwist((0, 1, 0), 0.4)}
    # The tolerance is a world distance: it scales with the parent.
    a = kinema.solve_ccd(sk0, sk0.rest_pose(), (chain[0], chain[-1]), tg0, limits=lim, pole=[1.0, 2.0, 0.0],
                         tolerance=1e-3)
    b = kinema.solve_ccd(sk1, sk1.rest_pose(), (chain[0], chain[-1]), tg1, limits=lim,
                         pole=p + s * R.rotate(q, [1.0, 2.0, 0.0]), tolerance=s * 1e-3)
    assert np.array_equal(a.iterations, b.iterations)
    j = sk0.indices(chain)
    assert np.all(R.equal(a.pose.rotations[:, j], b.pose.rotations[:, j], atol=1e-9))
    assert np.allclose(b.error, s * a.error, rtol=1e-7, atol=1e-10)


def test_q_and_minus_q_inputs_agree(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    neg = kinema.Pose(pose.translations, -pose.rotations, pose.scales)
    tg = random_reachable(sk, chain, rng, 20)
    a = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg)
    b = kinema.solve_ccd(sk, neg, (chain[0], chain[-1]), tg)
    assert np.all(R.equal(a.pose.rotations, b.pose.rotations, atol=1e-9))
    assert np.allclose(a.error, b.error, atol=1e-9)


def test_out_pose(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    tg = random_reachable(sk, chain, rng, 5)
    out = sk.rest_pose((5,))
    res = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg, out=out)
    assert res.pose is out
    ref = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg)
    assert np.array_equal(out.rotations, ref.pose.rotations)


# --------------------------------------------------------------------- degenerate
def test_target_on_a_joint_and_zero_length_bone(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    fk = kinema.forward_kinematics(sk, pose)
    for name in chain:
        res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), fk.positions[sk.index(name)])
        assert np.all(np.isfinite(res.pose.rotations)) and np.isfinite(res.error)
        assert np.allclose(sk.bone_lengths(res.pose), sk.bone_lengths(), rtol=1e-9, atol=1e-12)
    # Zero-length end bone: the end sits on its parent; that joint has no direction and is skipped.
    t = sk.translations.copy()
    t[sk.index(chain[-1])] = 0.0
    sk0 = kinema.Skeleton(sk.names, sk.parents, t, sk.rotations)
    res = kinema.solve_ccd(sk0, sk0.rest_pose(), (chain[0], chain[-1]), [1.0, 2.0, 0.5], iterations=100)
    assert np.all(np.isfinite(res.pose.rotations))
    assert np.array_equal(res.pose.rotations[sk.index(chain[-2])], sk.rotations[sk.index(chain[-2])])
    assert res.error < 1e-3
    # A whole chain of zero-length bones: nothing can turn, nothing is NaN.
    t[2:] = 0.0
    skz = kinema.Skeleton(sk.names, sk.parents, t, sk.rotations)
    res = kinema.solve_ccd(skz, skz.rest_pose(), (chain[0], chain[-1]), [1.0, 2.0, 0.5])
    assert np.array_equal(res.pose.rotations, skz.rotations) and res.iterations == 1


def test_bad_input_names_the_problem(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    ch = (chain[0], chain[-1])
    with pytest.raises(kinema.SolverInputError, match="NaN"):
        kinema.solve_ccd(sk, pose, ch, [0.0, float("nan"), 0.0])
    with pytest.raises(kinema.SolverInputError, match="NaN"):
        kinema.solve_ccd(sk, pose, ch, [[0.0, 1.0, 0.0], [0.0, float("inf"), 0.0]])
    with pytest.raises(kinema.SolverInputError, match="pole"):
        kinema.solve_ccd(sk, pose, ch, [0.0, 1.0, 0.0], pole=[np.nan, 0, 0])
    # The one-solve path (float64 arrays of shape (3,)) checks finiteness in the kernel.
    rot_before = pose.rotations.copy()
    for bad in (np.array([0.0, np.nan, 0.0]), np.array([np.inf, 1.0, 0.0]), np.array([0.0, 1.0, -np.inf])):
        with pytest.raises(kinema.SolverInputError, match="target"):
            kinema.solve_ccd(sk, pose, ch, bad)
        with pytest.raises(kinema.SolverInputError, match="pole"):
            kinema.solve_ccd(sk, pose, ch, np.array([0.0, 1.0, 0.0]), pole=bad)
    assert np.array_equal(pose.rotations, rot_before)
    with pytest.raises(kinema.ShapeError):
        kinema.solve_ccd(sk, pose, ch, [0.0, 1.0])
    with pytest.raises(kinema.BoneNotFoundError):
        kinema.solve_ccd(sk, pose, ("c0", "nope"), [0.0, 1.0, 0.0])
    with pytest.raises(kinema.SolverInputError, match="weights"):
        kinema.solve_ccd(sk, pose, ch, [0.0, 1.0, 0.0], weights=[1.0, 2.0])
    with pytest.raises(kinema.SolverInputError, match="weights"):
        kinema.solve_ccd(sk, pose, ch, [0.0, 1.0, 0.0], weights={chain[0]: 1.5})
    with pytest.raises(kinema.SolverInputError, match="not in the chain"):
        kinema.solve_ccd(sk, pose, ch, [0.0, 1.0, 0.0], weights={"world": 0.5})
    with pytest.raises(kinema.SolverInputError, match="max_step"):
        kinema.solve_ccd(sk, pose, ch, [0.0, 1.0, 0.0], max_step=-0.1)
    with pytest.raises(kinema.SolverInputError, match="iterations"):
        kinema.solve_ccd(sk, pose, ch, [0.0, 1.0, 0.0], iterations=-1)
    with pytest.raises(kinema.SolverInputError, match="single joint"):
        kinema.solve_ccd(sk, pose, (chain[0], chain[0]), [0.0, 1.0, 0.0])
    bad = pose.copy()
    bad.scales[1] = [1.0, 2.0, 1.0]
    with pytest.raises(kinema.SolverInputError, match="'base'.*non-uniform"):
        kinema.solve_ccd(sk, bad, ch, [0.0, 1.0, 0.0])


# ---------------------------------------------------------------- weights, steps
def test_zero_weights_freeze_joints(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    tg = random_reachable(sk, chain, rng, 50, spread=0.8)
    w = {chain[1]: 0.0, chain[3]: 0.0}
    res = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg, weights=w,
                           limits={chain[1]: Hinge((1, 0, 0), 0.5, 1.0)})  # frozen: not clamped either
    for name in (chain[1], chain[3]):
        j = sk.index(name)
        assert np.array_equal(res.pose.rotations[:, j], np.broadcast_to(sk.rotations[j], (50, 4)))
    assert res.error.mean() < 0.2  # the other joints still work


def test_weight_scales_the_turn(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng, k=4)
    pose = sk.rest_pose()
    tg = np.array([1.5, 1.0, 0.8])
    only = [0.0, 0.0, 1.0, 0.0]
    half = [0.0, 0.0, 0.5, 0.0]
    j = sk.index(chain[2])
    full = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg, weights=only, iterations=1, tolerance=0)
    part = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), tg, weights=half, iterations=1, tolerance=0)
    a_full = R.angle_between(pose.rotations[j], full.pose.rotations[j])
    a_half = R.angle_between(pose.rotations[j], part.pose.rotations[j])
    assert a_full > 0.1
    assert abs(a_half - 0.5 * a_full) <= 1e-12


def test_max_step_caps_every_turn_and_adaptive_rule(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    pose = sk.rest_pose()
    j = sk.indices(chain)
    far = np.array([-4.0, -1.0, 2.0])
    reach = float(np.sum(sk.bone_lengths()[j[1:]]))
    step = 0.05
    for adaptive in (False, True):
        res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), far, max_step=step, adaptive_step=adaptive,
                               iterations=1, tolerance=0)
        turns = R.angle_between(pose.rotations[j[:-1]], res.pose.rotations[j[:-1]])
        assert np.all(turns <= step + 1e-12)
        assert np.isclose(turns.max(), step, atol=1e-12)  # far away: full step, adaptive or not
    # Near the target the adaptive cap is max_step * max(0.1, error / (0.25 reach)).
    end = kinema.forward_kinematics(sk, pose).positions[j[-1]]
    near = end + np.array([0.0, 0.0, 0.05 * reach])
    err0 = float(np.linalg.norm(near - end))
    cap = 0.5 * max(0.1, err0 / (0.25 * reach))
    res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), near, max_step=0.5, iterations=1, tolerance=0)
    turns = R.angle_between(pose.rotations[j[:-1]], res.pose.rotations[j[:-1]])
    assert np.all(turns <= cap + 1e-12) and np.isclose(turns.max(), cap, atol=1e-12)
    res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), near, max_step=0.5, adaptive_step=False,
                           iterations=1, tolerance=0)
    assert R.angle_between(pose.rotations[j[:-1]], res.pose.rotations[j[:-1]]).max() > cap + 1e-3


def test_step_limited_solve_still_converges(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    tg = random_reachable(sk, chain, rng, 100)
    res = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg, max_step=math.radians(15),
                           iterations=200, tolerance=1e-3)
    assert res.reached.mean() >= 0.95


# ------------------------------------------------------------------------ limits
def test_limits_hold_after_every_solve(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    hinge_axis = np.array([1.0, 0.0, 0.0])
    cone_axis = np.array([0.0, 1.0, 0.0])
    lim = {
        chain[1]: Hinge(hinge_axis, -0.2, 1.2),
        chain[2]: SwingTwist(cone_axis, 0.5, -0.3, 0.3),
        chain[3]: SwingTwist(cone_axis, (0.2, 0.6), -0.1, 0.4),
        chain[4]: EulerRange("ZXY", (-0.4, -0.4, -0.4), (0.4, 0.6, 0.4)),
    }
    tg = rng.normal(size=(400, 3)) * 3.0 + [0.0, 3.0, 0.0]
    res = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg, limits=lim, iterations=30)
    assert np.all(np.isfinite(res.pose.rotations))
    assert res.limits_hit.sum() > 0
    rel = {n: R.multiply(R.inverse(sk.rotations[sk.index(n)]), res.pose.rotations[:, sk.index(n)]) for n in lim}
    sw, tw = R.swing_twist(rel[chain[1]], hinge_axis)
    assert np.max(2 * np.arctan2(np.linalg.norm(sw[:, :3], axis=-1), np.abs(sw[:, 3]))) <= 1e-9
    ang = R.as_rotvec(tw) @ hinge_axis
    assert ang.min() >= -0.2 - 1e-9 and ang.max() <= 1.2 + 1e-9
    for name, smax, lo, hi in ((chain[2], 0.5, -0.3, 0.3), (chain[3], 0.6, -0.1, 0.4)):
        sw, tw = R.swing_twist(rel[name], cone_axis)
        assert np.max(2 * np.arctan2(np.linalg.norm(sw[:, :3], axis=-1), np.abs(sw[:, 3]))) <= smax + 1e-9
        ang = R.as_rotvec(tw) @ cone_axis
        assert ang.min() >= lo - 1e-9 and ang.max() <= hi + 1e-9
    for name, limit in lim.items():
        assert np.max(limit.violation(res.pose.rotations[:, sk.index(name)], sk.rotations[sk.index(name)])) <= 1e-9
    # Bones are still intact and the reported error is still the FK error.
    assert np.allclose(sk.bone_lengths(res.pose), sk.bone_lengths(), rtol=1e-9, atol=1e-12)
    assert np.allclose(res.error, end_error(sk, res.pose, chain[-1], tg), atol=1e-12)


def test_limit_inside_range_never_moves_joint(rng: np.random.Generator) -> None:
    # A generous limit that the solve never reaches gives the very same result as no limit.
    sk, chain = make_rig(rng)
    tg = random_reachable(sk, chain, rng, 30, spread=0.2)
    lim = {n: SwingTwist((0, 1, 0), math.pi, -math.pi, math.pi) for n in chain}
    a = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg, limits=lim)
    b = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg)
    assert np.array_equal(a.pose.rotations, b.pose.rotations)
    assert np.all(a.limits_hit == 0)


def test_more_sweeps_never_give_a_worse_limited_solve() -> None:
    """A clamp can undo part of a sweep's progress, so with limits the error need not fall from one sweep to
    the next; an unfinished solve whose limits acted ends on its best sweep.  Before, 12 of these 300 arm
    problems ended worse with more sweeps (by up to 1.9 cm).  The reported error is the returned pose's."""
    errors = errors_by_iterations(kinema.solve_ccd)
    assert float(np.max(np.diff(errors, axis=0))) <= 1e-12  # (the best sweep's error, recomputed by FK)


# -------------------------------------------------------------------- pole, root
def test_pole_picks_the_bend_side() -> None:
    k = 6
    names = [f"c{a}" for a in range(k)]
    t = np.zeros((k, 3))
    t[1:, 1] = 1.0
    sk = kinema.Skeleton(names, [-1] + list(range(k - 1)), t)
    target = np.array([0.0, 3.0, 0.0])  # straight up but closer than the reach (5): the chain must fold
    for side in (+1.0, -1.0):
        pole = np.array([side * 5.0, 2.0, 0.0])
        res = kinema.solve_ccd(sk, sk.rest_pose(), (names[0], names[-1]), target, pole=pole, iterations=100)
        assert res.error < 1e-3
        p = kinema.forward_kinematics(sk, res.pose).positions
        # Middle joints lie on the pole's side of the root-end line (the y axis): none on the far
        # side, and the bend clearly toward the pole.
        assert np.all(side * p[1:-1, 0] >= -1e-9), p
        assert side * p[1:-1, 0].mean() > 0.05, p
    # A pole exactly on the root-end line has no side: the pass is skipped, no NaN.
    res = kinema.solve_ccd(sk, sk.rest_pose(), (names[0], names[-1]), target, pole=[0.0, 10.0, 0.0])
    assert np.all(np.isfinite(res.pose.rotations))


def test_fixed_root_and_sliding_root(rng: np.random.Generator) -> None:
    sk, chain = make_rig(rng)
    j = sk.indices(chain)
    pose = sk.rest_pose()
    p0 = kinema.forward_kinematics(sk, pose).positions[j[0]]
    reach = float(np.sum(sk.bone_lengths()[j[1:]]))
    far = p0 + np.array([reach * 2.0, 0.5, 0.0])
    fixed = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), far, iterations=50)
    assert np.array_equal(kinema.forward_kinematics(sk, fixed.pose).positions[j[0]], p0)
    assert fixed.error > reach * 0.9
    slide = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), far, iterations=50, fixed_root=False)
    q0 = kinema.forward_kinematics(sk, slide.pose).positions[j[0]]
    assert slide.error < 1e-2 and not np.allclose(q0, p0)
    d = (q0 - p0) / np.linalg.norm(q0 - p0)
    assert np.dot(d, (far - p0) / np.linalg.norm(far - p0)) > 0.99  # slid toward the target
    near = random_reachable(sk, chain, rng, 1)[0]
    res = kinema.solve_ccd(sk, pose, (chain[0], chain[-1]), near, fixed_root=False)
    assert np.array_equal(res.pose.translations, pose.translations)  # reachable: no slide


# ------------------------------------------------------------------------ chains
def body() -> kinema.Skeleton:
    names = ["pelvis", "spine1", "spine2", "neck", "head", "shoulder", "elbow", "hand", "hip", "knee", "foot"]
    parents = [-1, 0, 1, 2, 3, 2, 5, 6, 0, 8, 9]
    t = np.array([[0, 1, 0], [0, 0.2, 0], [0, 0.2, 0], [0, 0.2, 0], [0, 0.15, 0], [0.2, 0.1, 0], [0.3, 0, 0],
                  [0.3, 0, 0], [0.1, -0.05, 0], [0, -0.45, 0], [0, -0.45, 0]], dtype=float)
    return kinema.Skeleton(names, parents, t)


def test_priorities_protect_higher_goals() -> None:
    sk = body()
    pose = sk.rest_pose()
    head_t = np.array([0.15, 1.6, 0.1])
    hand_t = np.array([0.3, 1.8, 0.4])
    goals = [kinema.Goal(("spine1", "hand"), hand_t, priority=0, name="hand"),
             kinema.Goal(("spine1", "head"), head_t, priority=1, name="head")]
    res = kinema.solve_chains(sk, pose, goals)
    assert res.state["order"] == [1, 0] and res.state["names"] == ["hand", "head"]
    head_only = kinema.solve_ccd(sk, pose, ("spine1", "head"), head_t)
    for name in ("pelvis", "spine1", "spine2", "neck", "head"):
        j = sk.index(name)
        assert np.array_equal(res.pose.rotations[j], head_only.pose.rotations[j])
    assert set(res.state["moved_names"][0]) <= {"shoulder", "elbow"}
    assert set(res.state["moved_names"][1]) <= {"spine1", "spine2", "neck"}
    assert set(sk.names[j] for j in res.state["frozen"][0]) == {"spine1", "spine2"}
    assert abs(res.error[1] - float(head_only.error)) <= 1e-12
    # Reversed priorities: the hand owns the spine, the head may only turn its neck.
    goals[0].priority = 2
    res2 = kinema.solve_chains(sk, pose, goals)
    assert set(res2.state["moved_names"][1]) <= {"neck"}
    assert res2.error[0] <= 1e-3


def test_solve_chains_is_the_ownership_rule_run_by_hand(rng: np.random.Generator) -> None:
    """solve_chains (a Rig underneath) equals CCD solves run by hand, highest priority first, each with the
    joints earlier goals own (their turned joints and those joints' ancestors) at weight 0: bit for bit."""
    sk = body()
    pose = sk.rest_pose()
    n = 6
    foot = np.array([0.1, 0.2, 0.0]) + rng.normal(size=(n, 3)) * 0.05
    hand = np.array([0.5, 1.6, 0.3]) + rng.normal(size=(n, 3)) * 0.05
    head = np.array([0.1, 1.7, 0.1]) + rng.normal(size=(n, 3)) * 0.03
    goals = [kinema.Goal(("spine1", "hand"), hand, priority=0), kinema.Goal(("hip", "foot"), foot, priority=2),
             kinema.Goal(("spine1", "head"), head, priority=1, pole=[0.0, 1.5, 1.0])]
    res = kinema.solve_chains(sk, pose, goals)
    cur = pose
    owned: set[int] = set()
    for g in (goals[1], goals[2], goals[0]):
        joints = kinema.CCD(sk, g.chain).joints
        w = np.array([0.0 if int(j) in owned else 1.0 for j in joints])
        cur = kinema.CCD(sk, g.chain, weights=w).solve(cur, g.target, pole=g.pole).pose
        for j, wj in zip(joints[:-1], w[:-1], strict=True):
            if wj > 0.0:
                owned |= {int(j), *(int(a) for a in sk.ancestors(int(j)))}
    np.testing.assert_array_equal(res.pose.rotations, cur.rotations)
    assert [sk.names[j] for j in res.state["frozen"][0]] == ["spine1", "spine2"]


def test_solve_chains_dict_goals_and_batch(rng: np.random.Generator) -> None:
    sk = body()
    foot = rng.normal(size=(8, 3)) * 0.1 + [0.1, 0.2, 0.1]
    hand = rng.normal(size=(8, 3)) * 0.1 + [0.6, 1.5, 0.2]
    goals = [{"chain": ("pelvis", "hand"), "target": hand}, {"chain": ("hip", "foot"), "target": foot, "priority": 5}]
    res = kinema.solve_chains(sk, sk.rest_pose(), goals)
    assert res.error.shape == (8, 2) and res.iterations.shape == (8, 2)
    # The foot goal owns hip, knee and their ancestor pelvis: the hand chain cannot turn the pelvis.
    assert "pelvis" not in res.state["moved_names"][0]
    for i in range(8):
        one = kinema.solve_chains(sk, sk.rest_pose(), [{"chain": ("pelvis", "hand"), "target": hand[i]},
                                                       {"chain": ("hip", "foot"), "target": foot[i], "priority": 5}])
        assert np.max(np.abs(one.pose.rotations - res.pose.rotations[i])) <= 1e-12
    with pytest.raises(kinema.SolverInputError, match="unknown keys"):
        kinema.solve_chains(sk, sk.rest_pose(), [{"chain": ("hip", "foot"), "target": foot, "prio": 1}])
    with pytest.raises(kinema.SolverInputError, match="at least one"):
        kinema.solve_chains(sk, sk.rest_pose(), [])


# ------------------------------------------------------------------- properties
@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(2, 9), scale=st.floats(0.01, 100.0))
def test_random_chains_never_nan(seed: int, k: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    sk, chain = make_rig(rng, k=k, parent=(R.normalize(rng.normal(size=4)), rng.normal(size=3), scale))
    tg = np.concatenate([random_reachable(sk, chain, rng, 6), rng.normal(size=(4, 3)) * 5 * scale])
    lim = {chain[a]: Hinge(rng.normal(size=3), -0.5, 0.8) for a in range(0, k - 1, 2)}
    res = kinema.solve_ccd(sk, sk.rest_pose(), (chain[0], chain[-1]), tg, limits=lim,
                           pole=rng.normal(size=3) * scale, max_step=0.4)
    assert np.all(np.isfinite(res.pose.rotations)) and np.all(np.isfinite(res.error))
    assert np.allclose(sk.bone_lengths(res.pose), sk.bone_lengths(), rtol=1e-9, atol=1e-12 * scale)
    assert np.allclose(res.error, end_error(sk, res.pose, chain[-1], tg), rtol=1e-9, atol=1e-12 * scale)
    for name, limit in lim.items():
        assert np.max(limit.violation(res.pose.rotations[:, sk.index(name)], sk.rotations[sk.index(name)])) <= 1e-9


# --------------------------------------------------------- no-JIT and three.js
_NOJIT_SCRIPT = """
import json, sys
import numpy as np
import kinema
from kinema.limits import Hinge, SwingTwist
rng = np.random.default_rng(3)
names = [f"c{a}" for a in range(5)]
t = np.zeros((5, 3)); t[1:] = rng.normal(size=(4, 3)) * 0.2 + [0, 1, 0]
sk = kinema.Skeleton(names, [-1, 0, 1, 2, 3], t, kinema.rotation.from_rotvec(rng.normal(size=(5, 3)) * 0.2))
tg = rng.normal(size=(20, 3)) * 2 + [0, 2, 0]
res = kinema.solve_ccd(sk, sk.rest_pose(), ("c0", "c4"), tg, pole=[1, 0, 0], max_step=0.3,
                       weights={"c0": 0.7}, limits={"c1": Hinge((1, 0, 0), -1, 1), "c2": SwingTwist((0, 1, 0), 0.4)})
print(json.dumps({"r": res.pose.rotations.tolist(), "e": res.error.tolist(), "h": res.limits_hit.tolist()}))
"""


def _run_script(env_extra: dict[str, str]) -> dict[str, list[float]]:
    env = dict(os.environ, **env_extra)
    proc = subprocess.run([sys.executable, "-c", _NOJIT_SCRIPT], capture_output=True, text=True, env=env,
                          timeout=600, check=True)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_kernels_run_as_plain_python() -> None:
    plain = _run_script({"NUMBA_DISABLE_JIT": "1"})
    jit = _run_script({"NUMBA_DISABLE_JIT": "0"})
    assert np.max(np.abs(np.asarray(plain["r"]) - np.asarray(jit["r"]))) <= 1e-12
    assert np.max(np.abs(np.asarray(plain["e"]) - np.asarray(jit["e"]))) <= 1e-12
    assert plain["h"] == jit["h"] and sum(jit["h"]) > 0


@pytest.fixture(scope="module")
def threejs() -> object:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _threejs

    ok, why = _threejs.available()
    if not ok:
        pytest.skip(f"three.js cross-check skipped: {why}")
    return _threejs


def test_matches_threejs_ccdiksolver(threejs: object, rng: np.random.Generator) -> None:
    k = 11
    t = np.zeros((k, 3))
    t[1:] = rng.normal(size=(k - 1, 3)) * 0.3 + [0.0, 1.0, 0.0]
    q = R.from_rotvec(rng.normal(size=(k, 3)) * 0.3)
    names = [f"b{a}" for a in range(k)]
    sk = kinema.Skeleton(names, [-1] + list(range(k - 1)), t, q)
    tg = np.concatenate([random_reachable(sk, names, rng, 60), rng.normal(size=(40, 3)) * 6.0])
    rot, _ = threejs.run_ccd(t, q, tg, iteration=20)  # type: ignore[attr-defined]
    res = kinema.solve_ccd(sk, sk.rest_pose(), (names[0], names[-1]), tg, iterations=20, tolerance=0.0)
    assert np.all(R.equal(res.pose.rotations, rot, atol=1e-8))
