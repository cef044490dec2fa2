"""Full-body DLS solver: Jacobians, goals, priorities, limits, batches, bad inputs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import kinema
from _threads import run_at_once
from kinema import rotation as rot
from kinema import samples
from kinema._dls import DLS, solve_dls
from kinema._problems import humanoid_limits
from kinema.errors import BoneNotFoundError, KinemaError, ShapeError, SolverInputError
from kinema.goals import LookAtGoal, OrientationGoal, PoseGoal, PositionGoal
from kinema.limits import EulerRange, Hinge, SwingTwist

FloatArray = np.ndarray


def chain_skeleton(n: int = 10, length: float = 0.1) -> kinema.Skeleton:
    """``n`` joints in a line along +y, each ``length`` below... above its parent."""
    t = np.zeros((n, 3))
    t[1:, 1] = length
    return kinema.Skeleton([f"j{k}" for k in range(n)], [-1] + list(range(n - 1)), t)


def random_rotations(rng: np.random.Generator, shape: tuple[int, ...], max_angle: float) -> FloatArray:
    axis = rng.normal(size=shape + (3,))
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    ang = rng.uniform(0.0, max_angle, size=shape)
    return rot.from_rotvec(axis * ang[..., None])


def walk_pose(frame: int = 20) -> kinema.Pose:
    return samples.clip("walk").pose[frame]


def positions(sk: kinema.Skeleton, pose: kinema.Pose) -> FloatArray:
    return kinema.forward_kinematics(sk, pose).positions


# ---------------------------------------------------------------------------------------------- Jacobians


def _kernel_state(solver: DLS, pose: kinema.Pose, targets: list[FloatArray]) -> tuple[Any, ...]:
    """The kernel's Jacobian ``(3G, NDOF)`` and residuals at ``pose`` (plan goal order)."""
    from kinema._kernels import dls as kd

    plan_i, plan_f, opts = solver._plan_i, solver._plan_f, solver._opts
    lay = kd.layout(plan_i)
    scratch = kd.make_scratch(plan_i, plan_f, opts)
    pos, rot_w, scl, q_in, _, jac, err, _, _, _, _, _, e_pose, world_axis, _, _, gerr, t_io, lvl, _, unit = scratch[:21]
    t = pose.translations[None].copy()
    r = pose.rotations[None].copy()
    s = pose.scales[None].copy()
    goals = np.zeros((1, len(targets), 8))
    for p, a in enumerate(targets):
        goals[0, p, : a.shape[-1]] = a
    kd._fk(plan_i, lay, 0, t, r, s, pos, rot_w, scl)
    # (length unit 1: rows in world lengths, as the finite differences below)
    kd._evaluate(plan_i, plan_f, lay, 0, t, r, goals, pos, rot_w, q_in, t_io, err, gerr, e_pose, lvl[0], unit)
    kd._jacobian(plan_i, plan_f, lay, 0, goals, pos, rot_w, jac, world_axis, unit)
    return jac.copy(), err.copy(), gerr.copy(), lay


def _perturbed(solver: DLS, pose: kinema.Pose, delta: FloatArray) -> kinema.Pose:
    """``pose`` moved by the DOF vector ``delta``, written with NumPy (not the kernel's step)."""
    from kinema._kernels import dls as kd

    plan_i, plan_f = solver._plan_i, solver._plan_f
    lay = kd.layout(plan_i)
    r = pose.rotations.copy()
    t = pose.translations.copy()
    k_n = plan_i[kd.P_N_MOVING]
    for k in range(k_n):
        j = solver.joints[k]
        d0 = plan_i[lay[3] + k]
        nd = plan_i[lay[4] + k]
        if nd == 1:
            axis = plan_f[lay[13] + 3 * k: lay[13] + 3 * k + 3]
            inc = rot.from_rotvec(axis * delta[d0])
        else:
            inc = rot.from_rotvec(delta[d0:d0 + 3])
        r[j] = rot.multiply(r[j], inc)
    if plan_i[kd.P_ROOT_T] >= 0:
        t[0] += delta[-3:]
    return kinema.Pose(t, r, pose.scales)


def test_jacobians_match_finite_differences(rng: np.random.Generator) -> None:
    sk = samples.humanoid()
    pose = walk_pose(7)
    p = positions(sk, pose)
    wrist_goal = PositionGoal("left_wrist", p[8] + [0.1, -0.05, 0.1])
    ori_goal = OrientationGoal("right_wrist", random_rotations(rng, (), 1.0))
    look_goal = LookAtGoal("neck", p[2] + [1.0, 0.3, -0.4], axis=(1.0, 0.2, 0.0))
    foot_goal = PositionGoal("right_ankle", p[11] + [0.0, 0.05, 0.0], priority=1)
    solver = DLS(sk, [wrist_goal, ori_goal, look_goal, foot_goal], root_translation=True,
                 limits={"left_elbow": Hinge((0, 0, 1), 0.0, 2.5), "right_shoulder": SwingTwist((0, -1, 0), 1.2)})
    targets = solver._targets
    jac, _, gerr, _ = _kernel_state(solver, pose, targets)
    order = [solver.goals[n] for n in solver._order]
    n_dof = jac.shape[1]
    assert n_dof == 3 * (solver.joints.size - 1) + 1 + 3  # the hinge elbow has one DOF, the root translates
    eps = 1e-6
    for _trial in range(5):
        delta = rng.normal(size=n_dof)
        plus = _perturbed(solver, pose, eps * delta)
        minus = _perturbed(solver, pose, -eps * delta)
        fk_p = kinema.forward_kinematics(sk, plus)
        fk_m = kinema.forward_kinematics(sk, minus)
        jd = jac @ delta
        for g, goal in enumerate(order):
            row = jd[3 * g:3 * g + 3]
            j = sk.index(goal.joint)
            if isinstance(goal, PositionGoal):
                fd = (fk_p.positions[j] - fk_m.positions[j]) / (2 * eps)
                np.testing.assert_allclose(row, fd, rtol=0, atol=1e-7)
            elif isinstance(goal, OrientationGoal):
                # angular velocity of the joint's world rotation
                fd = rot.as_rotvec(rot.multiply(fk_p.rotations[j], rot.inverse(fk_m.rotations[j]))) / (2 * eps)
                np.testing.assert_allclose(row, fd, rtol=0, atol=1e-7)
            else:
                # the look-at angle falls along the achieved rotation: d(phi) = -n . (J delta)
                def angle(fk: kinema.FKResult, j: int = j, goal: LookAtGoal = goal) -> float:
                    a = rot.rotate(fk.rotations[j], np.asarray(goal.axis))
                    d = np.asarray(goal.target) - fk.positions[j]
                    return float(math.atan2(np.linalg.norm(np.cross(a, d)), a @ d))
                fd_phi = (angle(fk_p) - angle(fk_m)) / (2 * eps)
                fk0 = kinema.forward_kinematics(sk, pose)
                a0 = rot.rotate(fk0.rotations[j], np.asarray(goal.axis))
                d0 = np.asarray(goal.target) - fk0.positions[j]
                n = np.cross(a0, d0)
                n /= np.linalg.norm(n)
                assert abs(fd_phi + n @ row) <= 1e-7
                assert gerr[g] == pytest.approx(angle(fk0), abs=1e-12)


# ---------------------------------------------------------------------------------------------- reaching


def test_reachable_single_goals_reach_1e6(rng: np.random.Generator) -> None:
    sk = chain_skeleton(10)
    rest = sk.rest_pose()
    for _ in range(20):
        r = np.tile(rest.rotations, (1, 1))
        r[:-1] = random_rotations(rng, (9,), 0.6)
        target_pose = kinema.Pose(rest.translations, r)
        fk = kinema.forward_kinematics(sk, target_pose)
        start = kinema.Pose(rest.translations, random_rotations(rng, (10,), 0.3))
        res = solve_dls(sk, start, [PositionGoal("j9", fk.positions[9])])
        assert res.reached and res.error <= 1e-6
        assert np.linalg.norm(positions(sk, res.pose)[9] - fk.positions[9]) <= 1e-6
        res = solve_dls(sk, start, [OrientationGoal("j9", fk.rotations[9])])
        assert res.reached and res.error <= 1e-6
        assert rot.angle_between(kinema.forward_kinematics(sk, res.pose).rotations[9], fk.rotations[9]) <= 1e-6
        target = fk.positions[9] + rng.normal(size=3)
        res = solve_dls(sk, start, [LookAtGoal("j5", target, axis=(0, 1, 0))])
        assert res.reached and res.error <= 1e-6


def test_feet_stay_pinned_while_hands_reach() -> None:
    sk = samples.humanoid()
    for frame in (0, 10, 20, 30):
        pose = walk_pose(frame)
        p = positions(sk, pose)
        goals = [PositionGoal("left_ankle", p[14], priority=1), PositionGoal("right_ankle", p[11], priority=1),
                 PositionGoal("left_wrist", p[8] + [0.15, 0.1, -0.05]),
                 PositionGoal("right_wrist", p[5] + [0.1, 0.2, 0.05]),
                 LookAtGoal("neck", p[2] + [2.0, 0.4, 0.3], axis=(1, 0, 0))]
        res = solve_dls(sk, pose, goals)
        out = positions(sk, res.pose)
        assert np.linalg.norm(out[14] - p[14]) <= 1e-6
        assert np.linalg.norm(out[11] - p[11]) <= 1e-6
        assert res.reached
        np.testing.assert_array_less(res.state["goal_errors"], 1e-6)
        # hands out of reach: the feet still hold, the hands get as close as the body allows
        far = [goals[0], goals[1], PositionGoal("left_wrist", p[8] + [3.0, 0.0, 0.0]),
               PositionGoal("right_wrist", p[5] + [3.0, 0.0, 0.0])]
        res = solve_dls(sk, pose, far)
        out = positions(sk, res.pose)
        assert np.linalg.norm(out[14] - p[14]) <= 1e-6
        assert np.linalg.norm(out[11] - p[11]) <= 1e-6
        assert not res.reached
        assert np.all(np.isfinite(res.pose.rotations))
        # closest: nearer than where the hands started, and no iteration made the hands' error worse at the end
        assert res.state["goal_errors"][2] < 3.0 - 0.3


def test_random_fk_targets_inside_limits_are_reached(rng: np.random.Generator) -> None:
    sk = chain_skeleton(6, 0.2)
    limits = {"j1": Hinge((1, 0, 0), -1.5, 1.5), "j2": SwingTwist((0, 1, 0), 1.0, -0.5, 0.5),
              "j3": EulerRange("XYZ", (-1.0, -0.5, -1.0), (1.0, 0.5, 1.0)), "j4": Hinge((0, 0, 1), 0.0, 2.0)}
    rest = sk.rest_pose()
    n = 200
    r = np.tile(rest.rotations, (n, 1, 1))
    r[:, :5] = random_rotations(rng, (n, 5), 1.5)
    for name, lim in limits.items():
        j = sk.index(name)
        r[:, j] = lim.clamp(r[:, j], sk.rotations[j])
    targets = kinema.forward_kinematics(sk, kinema.Pose(rest.translations, r)).positions[:, 5]
    solver = DLS(sk, [PositionGoal("j5", targets)], limits=limits)
    res = solver.solve(rest)
    reached = np.asarray(res.reached)
    assert reached.mean() >= 0.99, reached.mean()
    for name, lim in limits.items():
        j = sk.index(name)
        assert np.all(lim.violation(res.pose.rotations[:, j], sk.rotations[j]) <= 1e-9)


def test_limits_hold_after_every_iteration(rng: np.random.Generator) -> None:
    sk = chain_skeleton(6, 0.2)
    limits = {"j0": SwingTwist((0, 1, 0), 0.4), "j1": Hinge((1, 0, 0), 0.0, 1.0),
              "j2": SwingTwist((0, 1, 0), (0.3, 0.6), -0.2, 0.2),
              "j3": EulerRange("xyz", (-0.3, -0.3, -0.3), (0.3, 0.3, 0.3)), "j4": Hinge((0, 0, 1), -0.5, 0.5)}
    targets = rng.normal(size=(30, 3)) * 0.8  # mostly outside what the limits allow
    start = kinema.Pose(sk.translations, random_rotations(rng, (30, 6), 2.0))  # starts outside the limits too
    for it in (0, 1, 2, 3, 5, 8, 20, 100):
        res = DLS(sk, [PositionGoal("j5", targets)], limits=limits, iterations=it).solve(start)
        for name, lim in limits.items():
            j = sk.index(name)
            assert np.all(lim.violation(res.pose.rotations[:, j], sk.rotations[j]) <= 1e-9), (it, name)
        assert np.all(np.isfinite(res.pose.rotations))
        assert np.all(res.iterations <= it)
    # a joint stopped by its limit is reported; clamps are counted
    assert np.any(res.state["at_limit"])
    assert np.all(res.limits_hit > 0)
    assert res.state["joints"] == ("j0", "j1", "j2", "j3", "j4")


def test_limited_joint_at_its_bound_leaves_the_work_to_the_others() -> None:
    # two hinges in a plane; the first may not turn at all: the second does everything it can
    sk = chain_skeleton(3, 0.5)
    limits = {"j0": Hinge((0, 0, 1), 0.0, 0.0), "j1": Hinge((0, 0, 1), -2.0, 2.0)}
    target = [-0.5 * math.sin(0.8), 0.5 + 0.5 * math.cos(0.8), 0.0]  # j1 turned 0.8 rad about z
    res = solve_dls(sk, sk.rest_pose(), [PositionGoal("j2", target)], limits=limits)
    assert res.reached
    np.testing.assert_allclose(res.pose.rotations[0], [0, 0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(rot.as_rotvec(res.pose.rotations[1]), [0, 0, 0.8], atol=1e-6)


# ---------------------------------------------------------------------------------------------- priorities


def test_lower_priority_never_worsens_higher(rng: np.random.Generator) -> None:
    sk = samples.humanoid()
    for frame in (3, 17, 29):
        pose = walk_pose(frame)
        p = positions(sk, pose)
        high = [PositionGoal("left_wrist", p[8] + rng.normal(size=3) * 0.1, priority=2),
                OrientationGoal("left_wrist", random_rotations(rng, (), 0.5), priority=2)]
        low = [PositionGoal("right_wrist", p[5] + [2.0, 0.0, 0.0], priority=0),  # unreachable
               LookAtGoal("neck", p[2] + [-1.0, -2.0, 0.5], axis=(1, 0, 0), priority=1)]
        alone = solve_dls(sk, pose, high, tolerance=1e-12)
        both = solve_dls(sk, pose, high + low, tolerance=1e-12)
        err_alone = alone.state["goal_errors"]
        err_both = both.state["goal_errors"][:2]
        assert np.all(err_both <= err_alone + 1e-9), (err_alone, err_both)
        assert np.all(err_both <= 1e-9)
        # the lower goals still got closer than where they started
        start = solve_dls(sk, pose, high + low, iterations=0).state["goal_errors"]
        assert np.all(both.state["goal_errors"][2:] < start[2:])
        # an unreachable higher goal: the lower ones do not cost it anything either (given the iterations to
        # get there, the higher goal's closest pose is the same)
        far = [PositionGoal("left_wrist", p[8] + [2.0, 0.5, 0.0], priority=2)]
        reach = [PositionGoal("right_wrist", p[5] + rng.normal(size=3) * 0.1), low[1]]
        alone = solve_dls(sk, pose, far, tolerance=1e-12, iterations=3000)
        both = solve_dls(sk, pose, far + reach, tolerance=1e-12, iterations=3000)
        assert int(alone.iterations) < 3000  # converged, not cut off
        assert both.state["goal_errors"][0] <= alone.state["goal_errors"][0] + 1e-9


def test_far_lower_goals_do_not_slow_a_higher_level() -> None:
    """Reachable higher goals converge within the default iterations however far the lower goals are.

    Each step turns no joint by more than ``MAX_STEP_ANGLE``; that cap used to scale the whole prioritised
    step, so lower goals 1 m away (whose part of the step is large) shortened every step of the higher
    level and left it 2-13 cm off after 100 iterations (8 of 200 such problems).  Now the levels share the
    cap most important first.
    """
    sk = samples.humanoid()
    clip = samples.clip("walk")
    rng = np.random.default_rng(0)
    limbs = ["left_wrist", "right_wrist", "left_ankle", "right_ankle"]
    for _ in range(20):
        pose = clip.pose[int(rng.integers(clip.pose.rotations.shape[0]))]
        p = positions(sk, pose)
        high_j = rng.choice(limbs, 2, replace=False)
        high = [PositionGoal(str(j), p[sk.index(str(j))] + rng.normal(size=3) * 0.15, priority=1) for j in high_j]
        low_j = rng.choice([j for j in limbs + ["neck"] if j not in high_j], 2, replace=False)
        low = [PositionGoal(str(j), p[sk.index(str(j))] + rng.normal(size=3) * 1.0) for j in low_j]
        alone = solve_dls(sk, pose, high)
        both = solve_dls(sk, pose, high + low)
        if not np.all(alone.state["goal_errors"] <= 1e-6):
            continue  # an unreachable higher goal: covered by test_lower_priority_never_worsens_higher
        assert np.all(both.state["goal_errors"][:2] <= 1e-6), (high_j, low_j, both.state["goal_errors"])


def test_step_cap_serves_the_higher_level_first() -> None:
    """One step turns no joint by more than ``MAX_STEP_ANGLE``; when the higher level's own step needs all of
    it, the lower levels get none of that step (the pose after one iteration is the higher level's alone)."""
    from kinema._kernels.dls import MAX_STEP_ANGLE

    sk = samples.humanoid()
    pose = walk_pose(20)
    p = positions(sk, pose)
    high = [PositionGoal("left_wrist", p[8] + [0.0, 1.2, 0.9], priority=1)]  # far: a step of more than the cap
    # lower goals on joints of the same chain (the same joints solved, so the same length unit)
    low = [PositionGoal("chest", p[1] + [0.4, -0.3, 0.0]), OrientationGoal("left_elbow", rot.from_rotvec([2.0, 0, 0]))]
    alone = solve_dls(sk, pose, high, iterations=1)
    both = solve_dls(sk, pose, high + low, iterations=1)
    turned = np.abs(rot.angle_between(alone.pose.rotations, pose.rotations))
    assert turned.max() == pytest.approx(MAX_STEP_ANGLE, abs=1e-9)  # the higher step alone fills the cap
    assert np.all(np.abs(rot.angle_between(both.pose.rotations, pose.rotations)) <= MAX_STEP_ANGLE + 1e-12)
    np.testing.assert_allclose(both.pose.rotations, alone.pose.rotations, rtol=0, atol=1e-15)


def _under_parent(sk: kinema.Skeleton, pose: kinema.Pose, q: FloatArray, t: FloatArray,
                  scale: float) -> tuple[kinema.Skeleton, kinema.Pose]:
    """``sk`` and ``pose`` below a new root joint "world" with rotation ``q``, translation ``t`` and uniform
    ``scale``."""
    parents = [-1] + [0 if p < 0 else p + 1 for p in sk.parents]
    sk2 = kinema.Skeleton(["world", *sk.names], parents, np.concatenate([[t], sk.translations]))
    return sk2, kinema.Pose(np.concatenate([[t], pose.translations]), np.concatenate([[q], pose.rotations]),
                            np.concatenate([[[scale] * 3], pose.scales]))


@pytest.mark.parametrize("root_translation", [False, True])
def test_invariant_under_a_rotated_translated_scaled_parent(root_translation: bool) -> None:
    """The same problem under a parent rotated, translated and scaled by s (targets and tolerance moved with it)
    solves to the same local rotations (and the root's translation in the parent's frame): position errors,
    steps and damping are measured in the item's own length unit.  (Before, the damping was in world units: a
    parent scaled by 0.01 changed the solved joints by up to 0.1 rad.)"""
    sk = samples.humanoid()
    pose = walk_pose(12)
    p = positions(sk, pose)
    offsets = {"left_wrist": [0.1, 0.2, 0.1], "right_ankle": [0.0, 0.05, 0.1], "right_wrist": [0.3, 0.3, -0.2]}
    joints = None
    ref = None
    for q, t, scale in [((0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0),
                        (rot.from_rotvec([0.4, -0.7, 0.2]), (3.0, -1.0, 2.0), 1.0),
                        (rot.from_rotvec([-1.1, 0.3, 0.5]), (-20.0, 5.0, 1.0), 100.0),
                        (rot.from_rotvec([0.2, 0.2, 2.5]), (0.01, 0.02, -0.03), 0.01),
                        (rot.from_rotvec([0.0, 0.9, 0.0]), (1e-5, 0.0, 0.0), 1e-4)]:
        sk2, pose2 = _under_parent(sk, pose, np.asarray(q, dtype=float), np.asarray(t, dtype=float), scale)

        def world(x: FloatArray, q: Any = q, t: Any = t, scale: float = scale) -> FloatArray:
            return rot.rotate(np.asarray(q, dtype=float), scale * np.asarray(x)) + np.asarray(t)

        goals = [PositionGoal(j, world(p[sk.index(j)] + d), priority=1 if j == "right_ankle" else 0)
                 for j, d in offsets.items()]
        if joints is None:  # the humanoid's own joints move, not the new parent
            joints = list(DLS(sk, goals).joints + 1)
        res = solve_dls(sk2, pose2, goals, joints=joints, root_translation=root_translation, tolerance=1e-6 * scale)
        assert np.all(res.state["goal_errors"] <= 1e-6 * scale)
        if ref is None:
            ref = res
            continue
        np.testing.assert_allclose(rot.angle_between(res.pose.rotations[1:], ref.pose.rotations[1:]), 0.0,
                                   rtol=0, atol=1e-9)
        np.testing.assert_allclose(res.pose.translations[1:], ref.pose.translations[1:], rtol=0, atol=1e-9)


def test_equal_priority_goals_are_weighted() -> None:
    # two unreachable, opposing goals on one chain end: the heavier gets closer
    sk = chain_skeleton(4, 0.3)
    pose = kinema.Pose(sk.translations, rot.from_rotvec([[0, 0, 0.2]] * 4))
    goals = [PositionGoal("j3", [2.0, 0.0, 0.0], weight=4.0), PositionGoal("j3", [-2.0, 0.0, 0.0], weight=1.0)]
    res = solve_dls(sk, pose, goals)
    e = res.state["goal_errors"]
    assert e[0] < e[1]
    assert np.all(np.isfinite(e))


def test_weights_count_only_within_their_level() -> None:
    """Weights trade goals of one priority off against each other; their overall scale does not fight the
    damping: a lone goal of weight 1e-10 reaches as one of weight 1 (it stopped 10 cm short), and scaling every
    weight of a level by the same factor gives the same solve bit for bit."""
    sk = samples.humanoid()
    pose = walk_pose(3)
    p = positions(sk, pose)
    base = solve_dls(sk, pose, [PositionGoal("right_wrist", p[5] + [0.1, 0.0, 0.0])])
    assert float(base.error) <= 1e-6
    for scale in (1e-10, 1e-20, 1e20):
        res = solve_dls(sk, pose, [PositionGoal("right_wrist", p[5] + [0.1, 0.0, 0.0], weight=scale)])
        np.testing.assert_array_equal(res.pose.rotations, base.pose.rotations)
    pair = [PositionGoal("left_wrist", p[8] + [0.5, 0.5, 0.0], weight=3.0),
            PositionGoal("right_wrist", p[5] + [-0.5, 0.5, 0.0], weight=1.0),
            PositionGoal("left_ankle", p[14], priority=1, weight=0.5)]
    ref = solve_dls(sk, pose, pair)
    for scale in (1e-8, 1e8):
        scaled = [PositionGoal(g.joint, g.target, weight=g.weight * (scale if g.priority == 0 else 1 / scale),
                               priority=g.priority) for g in pair]
        np.testing.assert_array_equal(solve_dls(sk, pose, scaled).pose.rotations, ref.pose.rotations)


def test_goal_order_does_not_change_the_result() -> None:
    sk = samples.humanoid()
    pose = walk_pose(12)
    p = positions(sk, pose)
    goals = [PositionGoal("left_ankle", p[14], priority=1), PositionGoal("right_ankle", p[11], priority=1),
             PositionGoal("left_wrist", p[8] + [0.2, 0.1, 0.0]), PositionGoal("right_wrist", p[5] + [0.3, 0.3, 0.1]),
             LookAtGoal("neck", [3.0, 1.5, 0.0], axis=(1, 0, 0)), OrientationGoal("right_wrist", [0, 0, 0.3, 1]),
             PoseGoal(0.1)]
    ref = solve_dls(sk, pose, goals)
    rng = np.random.default_rng(3)
    for _ in range(4):
        perm = rng.permutation(len(goals))
        res = solve_dls(sk, pose, [goals[k] for k in perm])
        np.testing.assert_array_equal(res.pose.rotations, ref.pose.rotations)
        np.testing.assert_array_equal(res.state["goal_errors"], ref.state["goal_errors"][perm])
        assert res.state["goals"] == tuple(ref.state["goals"][k] for k in perm)


def test_pose_goal_keeps_the_animation_where_goals_allow() -> None:
    sk = samples.humanoid()
    pose = walk_pose(5)
    p = positions(sk, pose)
    goals = [PositionGoal("left_wrist", p[8] + [0.05, 0.05, 0.0])]
    plain = solve_dls(sk, pose, goals)
    kept = solve_dls(sk, pose, goals + [PoseGoal(1.0)])
    assert plain.reached and kept.reached
    assert kept.state["goal_errors"][0] <= 1e-6

    def moved(res: kinema.SolveResult) -> float:
        return float(np.sum(rot.angle_between(res.pose.rotations, pose.rotations) ** 2))

    assert moved(kept) <= moved(plain) + 1e-12
    assert kept.state["goal_errors"][1] == pytest.approx(float(np.max(rot.angle_between(
        kept.pose.rotations[kept_joints(sk, kept)], pose.rotations[kept_joints(sk, kept)]))), abs=1e-9)


def kept_joints(sk: kinema.Skeleton, res: kinema.SolveResult) -> list[int]:
    return [sk.index(n) for n in res.state["joints"]]


# ---------------------------------------------------------------------------------------------- robustness


def test_no_nan_near_singularities() -> None:
    sk = chain_skeleton(5, 0.25)  # straight, reach 1.0 from j0
    rest = sk.rest_pose()
    cases = {
        "beyond the straight chain": [0.0, 2.0, 0.0],
        "on the straight line, inside": [0.0, 0.5, 0.0],
        "on the root": [0.0, 0.0, 0.0],
        "unreachable sideways": [5.0, 1.0, -3.0],
    }
    for what, target in cases.items():
        res = solve_dls(sk, rest, [PositionGoal("j4", target)])
        assert np.all(np.isfinite(res.pose.rotations)), what
        assert np.isfinite(res.error), what
        np.testing.assert_allclose(np.linalg.norm(res.pose.rotations, axis=-1), 1.0, atol=1e-12)
    # unreachable: the closest pose is the chain stretched towards the target
    far = np.array([5.0, 1.0, -3.0])
    res = solve_dls(sk, rest, [PositionGoal("j4", far)])
    assert res.error == pytest.approx(np.linalg.norm(far) - 1.0, abs=1e-6)
    # a look-at target on the joint itself and an orientation goal: no NaN
    res = solve_dls(sk, rest, [LookAtGoal("j2", positions(sk, rest)[2]), OrientationGoal("j4", [1, 0, 0, 0])])
    assert np.all(np.isfinite(res.pose.rotations)) and res.state["goal_errors"][1] <= 1e-6


def test_warm_start_needs_fewer_iterations() -> None:
    sk = samples.humanoid()
    pose = walk_pose(0)
    p = positions(sk, pose)
    solver = DLS(sk, [PositionGoal("left_ankle", p[14], priority=1), PositionGoal("left_wrist", p[8]),
                      LookAtGoal("neck", p[2] + [2.0, 0.0, 0.0], axis=(1, 0, 0))])
    cold = warm = 0
    prev = pose
    for f in range(30):
        s = 0.3 * f / 30
        hand = p[8] + [s, 0.5 * s, 0.2 * s]
        look = p[2] + [2.0, s, -s]
        targets = [None, hand, look]
        c = solver.solve(pose, targets)
        w = solver.solve(prev, targets)
        assert c.reached and w.reached
        cold += int(c.iterations)
        warm += int(w.iterations)
        prev = w.pose
    assert warm < 0.7 * cold, (warm, cold)


# ---------------------------------------------------------------------------------------------- batches


def _batch_problem(n: int) -> tuple[kinema.Skeleton, DLS, kinema.Pose, list[FloatArray | None]]:
    sk = samples.humanoid()
    clip = samples.clip("walk")
    frames = np.arange(n) % clip.n_frames
    pose = clip.pose[frames]
    p = positions(sk, pose)
    rng = np.random.default_rng(9)
    limits = {"left_elbow": Hinge((0, 0, 1), 0.0, 2.6), "right_shoulder": SwingTwist((0, -1, 0), 1.3),
              "chest": EulerRange("XYZ", (-0.4, -0.4, -0.4), (0.4, 0.4, 0.4))}
    solver = DLS(sk, [PositionGoal("left_ankle", p[0, 14], priority=1), PositionGoal("left_wrist", p[0, 8]),
                      PositionGoal("right_wrist", p[0, 5]), LookAtGoal("neck", [2, 1, 0], axis=(1, 0, 0)),
                      PoseGoal(0.05)], limits=limits, root_translation=True)
    targets = [p[:, 14], p[:, 8] + rng.normal(size=(n, 3)) * 0.1, p[:, 5] + rng.normal(size=(n, 3)) * 0.3,
               p[:, 2] + rng.normal(size=(n, 3)) + [2.0, 0.0, 0.0], None]
    return sk, solver, pose, targets


@pytest.mark.parametrize("n", [7, 50])  # a serial batch and a parallel one
def test_batch_equals_loop_of_singles_bit_for_bit(n: int) -> None:
    sk, solver, pose, targets = _batch_problem(n)
    batch = solver.solve(pose, targets)
    for i in range(n):
        one = solver.solve(pose[i], [None if a is None else a[i] for a in targets])
        np.testing.assert_array_equal(one.pose.rotations, batch.pose.rotations[i])
        np.testing.assert_array_equal(one.pose.translations, batch.pose.translations[i])
        np.testing.assert_array_equal(one.state["goal_errors"], batch.state["goal_errors"][i])
        assert one.iterations == batch.iterations[i]
        assert one.limits_hit == batch.limits_hit[i]
    # the free function is the prepared solver
    own: list[Any] = []
    for g, a in zip(solver.goals, targets, strict=True):
        if isinstance(g, PositionGoal) and a is not None:
            own.append(PositionGoal(g.joint, a[0], g.weight, g.priority))
        elif isinstance(g, LookAtGoal) and a is not None:
            own.append(LookAtGoal(g.joint, a[0], g.axis, g.weight, g.priority))
        else:
            own.append(g)
    free = solve_dls(sk, pose[0], own, root_translation=True,
                     limits={"left_elbow": Hinge((0, 0, 1), 0.0, 2.6), "right_shoulder": SwingTwist((0, -1, 0), 1.3),
                             "chest": EulerRange("XYZ", (-0.4, -0.4, -0.4), (0.4, 0.4, 0.4))})
    np.testing.assert_array_equal(free.pose.rotations, batch.pose.rotations[0])


@pytest.mark.parametrize("n", [7, 50])  # a serial batch and a parallel one
def test_a_weight_per_item_blends_each_item_as_its_single_solve(n: int) -> None:
    """``weight (*batch,)`` as every solver takes it: item i of the batch is the single solve with weight[i],
    bit for bit; weight 0 gives the input pose back exactly, 1 the plain solve."""
    sk, solver, pose, targets = _batch_problem(n)
    weights = np.random.default_rng(4).uniform(0.0, 1.0, n)
    weights[0], weights[1] = 0.0, 1.0
    batch = solver.solve(pose, targets, weight=weights)
    plain = solver.solve(pose, targets)
    for i in range(n):
        one = solver.solve(pose[i], [None if a is None else a[i] for a in targets], weight=weights[i])
        np.testing.assert_array_equal(one.pose.rotations, batch.pose.rotations[i])
        np.testing.assert_array_equal(one.pose.translations, batch.pose.translations[i])
        np.testing.assert_array_equal(one.state["goal_errors"], batch.state["goal_errors"][i])
    # weight 0 is the input as the solver starts from it: every joint as given, but the limited ones (the solve
    # starts inside the limits); the root where it was
    limited = [sk.index(name) for name in ("left_elbow", "right_shoulder", "chest")]
    free = np.setdiff1d(np.arange(sk.n_joints), limited)
    assert np.all(rot.angle_between(batch.pose.rotations[0, free], pose.rotations[0, free]) < 1e-12)
    np.testing.assert_array_equal(batch.pose.translations[0], pose.translations[0])
    np.testing.assert_array_equal(batch.pose.rotations[1], plain.pose.rotations[1])
    # a weight broadcasts like the targets: one pose and one target set, three weights, three items
    three = solver.solve(pose[2], [None if a is None else a[2] for a in targets], weight=[0.0, 0.5, 1.0])
    assert three.pose.rotations.shape == (3,) + pose.rotations.shape[1:] and three.error.shape == (3,)
    np.testing.assert_array_equal(three.pose.rotations[2], plain.pose.rotations[2])
    for bad in (1.5, -0.1, [0.5, np.nan], "x", True):
        with pytest.raises(SolverInputError):
            solver.solve(pose, targets, weight=bad)


def test_moved_says_whether_the_pose_changed() -> None:
    """``state["moved"]`` means what it means for every solver: the solve changed the pose (any rotation or
    translation differs from the input's), per item, also when ``out`` is the input pose itself."""
    sk, solver, pose, targets = _batch_problem(7)
    res = solver.solve(pose, targets)
    expect = np.any(res.pose.rotations != pose.rotations, axis=(-2, -1)) | \
        np.any(res.pose.translations != pose.translations, axis=(-2, -1))
    assert res.state["moved"].shape == (7,)
    np.testing.assert_array_equal(res.state["moved"], expect)
    in_place = pose.broadcast()  # a copy, written by the solve
    np.testing.assert_array_equal(solver.solve(in_place, targets, out=in_place).state["moved"], expect)
    one = samples.clip("walk").pose[3]
    wrist = positions(sk, one)[sk.index("left_wrist")]
    assert not solve_dls(sk, one, [PositionGoal("left_wrist", wrist)]).state["moved"]  # already there
    assert solve_dls(sk, one, [PositionGoal("left_wrist", wrist + 0.05)]).state["moved"]
    assert not solve_dls(sk, one, [PositionGoal("left_wrist", wrist + 0.05)], weight=0.0).state["moved"]


def test_serial_and_parallel_drivers_agree_bit_for_bit() -> None:
    from kinema._kernels import dls as kd

    _, solver, pose, targets = _batch_problem(64)
    ref = solver.solve(pose, targets)  # parallel (64 items)
    tg = solver._goal_targets(targets)
    goals = np.zeros((64, len(tg), 8))
    for p, a in enumerate(tg):
        goals[:, p, : a.shape[-1]] = a
    t = pose.translations.copy()
    r = pose.rotations.copy()
    diag = np.zeros((64, kd.diag_size(solver._plan_i)))
    kd.dls_serial(solver._plan_i, solver._plan_f, solver._opts, t, r, pose.scales.copy(), goals, np.ones(1), diag)
    np.testing.assert_array_equal(r, ref.pose.rotations)
    np.testing.assert_array_equal(t, ref.pose.translations)


def test_threads_solving_at_once_get_the_batch_numbers() -> None:
    _, solver, pose, targets = _batch_problem(24)
    batch = solver.solve(pose, targets)
    got: dict[int, FloatArray] = {}

    def work(part: int) -> None:
        for i in range(part, 24, 4):
            got[i] = solver.solve(pose[i], [None if a is None else a[i] for a in targets]).pose.rotations

    run_at_once(work, [(k,) for k in range(4)])
    for i in range(24):
        np.testing.assert_array_equal(got[i], batch.pose.rotations[i])


def test_batched_targets_and_out_and_weight() -> None:
    sk = chain_skeleton(5, 0.25)
    rest = sk.rest_pose()
    targets = np.array([[[0.3, 0.6, 0.1], [0.0, 0.8, 0.4]], [[-0.3, 0.5, 0.0], [0.2, 0.2, 0.2]]])
    res = solve_dls(sk, rest, [PositionGoal("j4", targets)])
    assert res.pose.rotations.shape == (2, 2, 5, 4)
    assert res.error.shape == (2, 2) and res.state["goal_errors"].shape == (2, 2, 1)
    assert np.all(res.reached)
    out = kinema.Pose(np.zeros((2, 2, 5, 3)), np.zeros((2, 2, 5, 4)), np.zeros((2, 2, 5, 3)))
    res2 = solve_dls(sk, rest, [PositionGoal("j4", targets)], out=out)
    assert res2.pose is out
    np.testing.assert_array_equal(out.rotations, res.pose.rotations)
    half = solve_dls(sk, rest, [PositionGoal("j4", targets[0, 0])], weight=0.0)
    np.testing.assert_array_equal(half.pose.rotations, rest.rotations)
    mid = solve_dls(sk, rest, [PositionGoal("j4", targets[0, 0])], weight=0.5)
    full = solve_dls(sk, rest, [PositionGoal("j4", targets[0, 0])])
    np.testing.assert_allclose(rot.angle_between(mid.pose.rotations, rest.rotations),
                               0.5 * rot.angle_between(full.pose.rotations, rest.rotations), atol=1e-9)


def test_root_translation_moves_the_hips() -> None:
    sk = samples.humanoid()
    pose = walk_pose(4)
    p = positions(sk, pose)
    # both feet and both hands pulled down 10 cm: only a translating root (with the legs) gets there
    goals = [PositionGoal(j, p[sk.index(j)] - [0.0, 0.1, 0.0])
             for j in ("left_ankle", "right_ankle", "left_wrist", "right_wrist")]
    res = solve_dls(sk, pose, goals, root_translation=True)
    assert res.reached
    assert not np.array_equal(res.pose.translations[0], pose.translations[0])
    np.testing.assert_array_equal(res.pose.translations[1:], pose.translations[1:])


# ---------------------------------------------------------------------------------------------- inputs


def test_input_dtypes_read_as_numbers() -> None:
    sk = chain_skeleton(4, 0.3)
    rest = sk.rest_pose()
    ref = solve_dls(sk, rest, [PositionGoal("j3", np.array([0.2, 0.5, 0.1]))])
    for arr in (np.array([0.2, 0.5, 0.1], dtype=">f8"), np.array([0.2, 0.5, 0.1], dtype=np.float32).astype(">f4")):
        res = solve_dls(sk, rest, [PositionGoal("j3", arr)])
        expect = solve_dls(sk, rest, [PositionGoal("j3", arr.astype(np.float64))])
        np.testing.assert_array_equal(res.pose.rotations, expect.pose.rotations)
    np.testing.assert_array_equal(solve_dls(sk, rest, [PositionGoal("j3", np.array([0.2, 0.5, 0.1]))]).pose.rotations,
                                  ref.pose.rotations)
    ints = solve_dls(sk, rest, [PositionGoal("j3", np.array([0, 1, 0], dtype=np.int64))])
    floats = solve_dls(sk, rest, [PositionGoal("j3", np.array([0.0, 1.0, 0.0]))])
    np.testing.assert_array_equal(ints.pose.rotations, floats.pose.rotations)
    solver = DLS(sk, [PositionGoal("j3", [0.0, 0.9, 0.0])])
    a = solver.solve(rest, [np.array([1, 0, 0], dtype=">i4")])
    b = solver.solve(rest, [[1.0, 0.0, 0.0]])
    np.testing.assert_array_equal(a.pose.rotations, b.pose.rotations)


@pytest.mark.parametrize("bad", [np.array([1 + 1j, 0, 0]), np.array([True, False, True]), np.array(["1", "2", "3"]),
                                 np.array([1.0, None, 2.0], dtype=object), {1.0, 2.0, 3.0}, {"x": 1.0}, "abc",
                                 np.array(["2020-01-01"] * 3, dtype="datetime64[D]")])
def test_bad_target_dtypes_are_refused(bad: Any) -> None:
    with pytest.raises(ShapeError, match="target"):
        PositionGoal("j3", bad)
    sk = chain_skeleton(4, 0.3)
    solver = DLS(sk, [PositionGoal("j3", [0.0, 0.9, 0.0])])
    with pytest.raises(ShapeError, match=r"targets\[0\]"):
        solver.solve(sk.rest_pose(), [bad])


def test_bad_inputs_raise_kinema_errors() -> None:
    sk = chain_skeleton(4, 0.3)
    rest = sk.rest_pose()
    good = [PositionGoal("j3", [0.0, 0.9, 0.0])]
    with pytest.raises(SolverInputError, match="NaN"):
        PositionGoal("j3", [np.nan, 0, 0])
    with pytest.raises(SolverInputError, match="NaN"):
        DLS(sk, good).solve(rest, [[np.inf, 0, 0]])
    nan_pose = rest.copy()
    nan_pose.rotations[1, 0] = np.nan
    with pytest.raises(SolverInputError, match="NaN"):
        solve_dls(sk, nan_pose, good)
    with pytest.raises(ShapeError):
        PositionGoal("j3", [0.0, 1.0])
    with pytest.raises(SolverInputError):
        OrientationGoal("j3", [0, 0, 0, 0])
    with pytest.raises(SolverInputError):
        LookAtGoal("j3", [1, 0, 0], axis=(0, 0, 0))
    with pytest.raises(BoneNotFoundError):
        solve_dls(sk, rest, [PositionGoal("nope", [0, 1, 0])])
    cases: list[dict[str, Any]] = [
        {"iterations": -1}, {"iterations": 2.5}, {"iterations": None}, {"tolerance": 0.0}, {"tolerance": None},
        {"tolerance": "x"}, {"damping": -1.0}, {"damping": math.nan}, {"weight": 1.5}, {"weight": None},
        {"joints": ["j3"]}, {"joints": "j1"}, {"joints": ["j1", "j1"]}, {"root_translation": "yes"},
        {"limits": {"j1": 3}}, {"limits": [1, 2]},
    ]
    for kw in cases:
        with pytest.raises(KinemaError):
            solve_dls(sk, rest, good, **kw)
    for goals in ([], [PoseGoal()], [good[0], PoseGoal(), PoseGoal()], ["j3"], good[0], {"j3": [0, 1, 0]}):
        with pytest.raises(SolverInputError):
            solve_dls(sk, rest, goals)  # type: ignore[arg-type]
    for w in (0.0, -1.0, math.inf, "a", True):
        with pytest.raises(SolverInputError):
            PositionGoal("j3", [0, 1, 0], weight=w)  # type: ignore[arg-type]
    with pytest.raises(SolverInputError):
        PositionGoal("j3", [0, 1, 0], priority=1.5)  # type: ignore[arg-type]
    with pytest.raises(SolverInputError):
        PositionGoal(None, [0, 1, 0])  # type: ignore[arg-type]
    with pytest.raises(SolverInputError):
        solve_dls(sk, "pose", good)  # type: ignore[arg-type]
    with pytest.raises(ShapeError):
        solve_dls(sk, samples.humanoid().rest_pose(), good)
    solver = DLS(sk, good + [PoseGoal()])
    with pytest.raises(SolverInputError):
        solver.solve(rest, [[0, 1, 0]])  # one entry per goal
    with pytest.raises(SolverInputError):
        solver.solve(rest, [[0, 1, 0], [0, 1, 0]])  # the pose goal's entry must be None
    with pytest.raises(ShapeError):
        solver.solve(rest, [np.zeros((2, 3)), None], out=rest)  # out of the wrong batch shape
    scaled = kinema.Pose(rest.translations, rest.rotations, [[1, 1, 1], [1, 2, 1], [1, 1, 1], [1, 1, 1]])
    with pytest.raises(SolverInputError, match="non-uniform"):
        solve_dls(sk, scaled, good)


def test_kernel_constants_mirror_the_python_side() -> None:
    from kinema import _dls
    from kinema._kernels import dls as kd

    assert _dls._GOAL_KIND == {PositionGoal: kd.GOAL_POSITION, OrientationGoal: kd.GOAL_ORIENTATION,
                               LookAtGoal: kd.GOAL_LOOK_AT}
    assert (_dls._P_HEADER, _dls._AFFECTS_SELF, _dls._AFFECTS_ANCESTOR) == (kd.P_HEADER, kd.AFFECTS_SELF,
                                                                            kd.AFFECTS_ANCESTOR)
    assert (_dls._O_ITERATIONS, _dls._O_TOLERANCE, _dls._O_DAMPING, _dls._O_SIZE) == (
        kd.O_ITERATIONS, kd.O_TOLERANCE, kd.O_DAMPING, kd.O_SIZE)
    assert _dls._DAMPING_MAX == kd.DAMPING_MAX
    assert (_dls._D_STATUS, _dls._D_ERROR, _dls._D_ITERATIONS, _dls._D_LIMITS_HIT, _dls._D_POSE_ERROR,
            _dls._D_HEADER) == (kd.D_STATUS, kd.D_ERROR, kd.D_ITERATIONS, kd.D_LIMITS_HIT, kd.D_POSE_ERROR,
                                kd.D_HEADER)
    sk = samples.humanoid()
    solver = DLS(sk, [PositionGoal("left_wrist", [0, 1, 0]), LookAtGoal("neck", [1, 1, 0]), PoseGoal()],
                 limits={"left_elbow": Hinge((0, 0, 1), 0, 2)}, root_translation=True)
    lay = kd.layout(solver._plan_i)
    assert (lay[-2], lay[-1]) == (solver._plan_i.size, solver._plan_f.size)


def test_a_pose_goal_under_pinned_feet_does_not_stall_the_hands() -> None:
    """Feet pinned at a higher priority, hands reaching, and the pose goal as the lowest level: every position
    goal is reached (the pose goal only takes what they leave free).  The second-order correction restores only
    the levels a step made worse; when it also re-stepped the hands it never settled and the hands stalled
    0.41 to 0.46 away after 100 iterations."""
    sk = kinema.samples.humanoid()
    pose = kinema.samples.clip("walk").pose[0]
    p = kinema.forward_kinematics(sk, pose).positions
    goals = [kinema.PositionGoal("left_ankle", p[sk.index("left_ankle")], priority=1),
             kinema.PositionGoal("right_ankle", p[sk.index("right_ankle")], priority=1),
             kinema.PositionGoal("left_wrist", p[sk.index("left_wrist")] + [0.35, 0.3, 0.0]),
             kinema.PositionGoal("right_wrist", p[sk.index("right_wrist")] + [0.35, 0.3, 0.0])]
    without = kinema.solve_dls(sk, pose, goals)
    for w in (0.1, 1.0):
        res = kinema.solve_dls(sk, pose, [*goals, kinema.PoseGoal(w)])
        errors = res.state["goal_errors"][:4]
        assert np.all(errors <= 1e-6), (w, errors)
        # the pose goal's error is the largest joint angle away from the input; it is no larger than without it
        away_without = float(np.max(kinema.rotation.angle_between(pose.rotations, without.pose.rotations)))
        assert res.state["goal_errors"][4] <= away_without + 1e-9


def test_edge_arguments_and_aliased_out() -> None:
    """Found by an exploratory pass: a non-Pose ``out`` escaped as AttributeError, ``iterations`` of 2**63 wrapped
    to a solve of no iterations, a damping past the kernel's stop made every rejected step end the solve, and
    ``moved`` said False after a solve written through another Pose over the input's arrays."""
    sk = samples.humanoid()
    pose = walk_pose(12)
    goal = PositionGoal("left_wrist", positions(sk, pose)[8] + [0.1, 0.0, 0.1])
    with pytest.raises(SolverInputError, match="out must be a kinema.Pose"):
        DLS(sk, [goal]).solve(pose, out=np.zeros((15, 4)))  # type: ignore[arg-type]
    for bad in (2**31, 2**63 - 1, 10**20):
        with pytest.raises(SolverInputError, match="iterations must be at most"):
            DLS(sk, [goal], iterations=bad)
        with pytest.raises(SolverInputError, match="iterations must be at most"):
            kinema.solve_ccd(sk, pose, ("left_shoulder", "left_wrist"), [0.0, 1.0, 0.0], iterations=bad)
    with pytest.raises(SolverInputError, match="damping must be below"):
        DLS(sk, [goal], damping=1e10)
    t, r = pose.translations.copy(), pose.rotations.copy()
    before = r.copy()
    res = DLS(sk, [goal]).solve(kinema.Pose(t, r), out=kinema.Pose(t, r))
    assert not np.array_equal(r, before) and bool(res.state["moved"])


def test_tied_goals_do_not_depend_on_their_order() -> None:
    """Goals alike in everything but their target are ordered by the target too: listing them the other way
    round gives the same solve to the bit (it differed by 7e-9 rad and 16 iterations)."""
    sk = samples.humanoid()
    pose = walk_pose(12)
    w = positions(sk, pose)[8]
    a, b = PositionGoal("left_wrist", w + [0.3, 0.1, 0]), PositionGoal("left_wrist", w + [0, 0.2, 0.3])
    r1 = solve_dls(sk, pose, [a, b, PoseGoal(0.1)])
    r2 = solve_dls(sk, pose, [b, a, PoseGoal(0.1)])
    np.testing.assert_array_equal(r1.pose.rotations, r2.pose.rotations)
    np.testing.assert_array_equal(r1.state["goal_errors"][[0, 1]], r2.state["goal_errors"][[1, 0]])


def test_a_joint_on_its_limit_does_not_stall_the_solve() -> None:
    """The clamping loop: a step that would push a joint further into the limit it is on is solved again without
    that direction, so the other joints do the work at once (found by an exploratory pass: a hinge resting on
    its bound took about 1300 iterations to reach a target its chain reaches in 6 without the limit, and a
    priority-1 chest orientation under limits was left 3.4e-3 rad off once lower goals and a pose goal joined)."""
    t = np.zeros((4, 3))
    t[1:, 1] = 0.3
    sk = kinema.Skeleton(["j0", "j1", "j2", "j3"], [-1, 0, 1, 2], t)
    limits = {"j0": Hinge((0, 0, 1), -0.3, 0.3)}
    target = [-0.31427311, 0.16587381, 0.53680156]  # FK of a pose with j0 at +0.3 rad (on its bound)
    on_bound = sk.rest_pose()
    on_bound.rotations[0] = rot.from_rotvec([0.0, 0.0, 0.3])
    for start in (sk.rest_pose(), on_bound):
        res = solve_dls(sk, start, [PositionGoal("j3", target)], limits=limits)
        assert bool(res.reached) and int(res.iterations) <= 20, (float(res.error), int(res.iterations))
        assert float(limits["j0"].violation(res.pose.rotations[0])) <= 1e-12

    humanoid = samples.humanoid()
    pose = walk_pose(11)
    p = positions(humanoid, pose)
    body_limits = humanoid_limits()
    high = [PositionGoal("left_ankle", [0.43026928, 0.11869487, -0.13680059], priority=2),
            PositionGoal("right_ankle", p[humanoid.index("right_ankle")], priority=2),
            OrientationGoal("chest", [0.00355314, -0.00282234, -0.03329901, 0.99943513], priority=1)]
    low = [PositionGoal("left_wrist", [-0.40460596, 0.43230166, -0.51611187]),
           PositionGoal("right_wrist", [0.80670873, 0.55823493, -0.0628396]),
           LookAtGoal("neck", [-0.86053759, 2.49157689, -0.52977849], axis=(1, 0, 0))]
    alone = solve_dls(humanoid, pose, high, root_translation=True, limits=body_limits)
    both = solve_dls(humanoid, pose, high + low + [PoseGoal(0.3)], root_translation=True, limits=body_limits)
    assert np.all(alone.state["goal_errors"] <= 1e-6)
    assert np.all(both.state["goal_errors"][:3] <= 1e-6), both.state["goal_errors"][:3]
    for name, lim in body_limits.items():
        j = humanoid.index(name)
        assert float(lim.violation(both.pose.rotations[j], humanoid.rotations[j])) <= 1e-12, name


def test_at_limit_and_weight_zero_tell_the_returned_pose() -> None:
    """``at_limit`` says which joints are on their limit in the returned pose (it said which a clamp stopped in the
    last step: a joint resting on its bound was often missed, and after a blend joints off it were flagged);
    weight 0 gives the input back as it was, unmoved, with no iteration (it came back renormalised, 1 ulp off,
    and ``moved`` said True)."""
    t = np.zeros((3, 3))
    t[1:, 1] = 0.5
    sk = kinema.Skeleton(["j0", "j1", "j2"], [-1, 0, 1], t)
    limits = {"j0": Hinge((0, 0, 1), -0.2, 0.2), "j1": Hinge((0, 0, 1), -2.0, 2.0)}
    far = [PositionGoal("j2", [1.04320004, 0.75766477, -0.56298819])]  # pulls j0 onto its lower bound
    res = solve_dls(sk, sk.rest_pose(), far, limits=limits)
    angles = rot.as_rotvec(res.pose.rotations[:2])[:, 2]
    assert abs(angles[0] + 0.2) <= 1e-12 and abs(abs(angles[1]) - 2.0) > 1e-3
    np.testing.assert_array_equal(res.state["at_limit"], [True, False])
    half = solve_dls(sk, sk.rest_pose(), far, limits=limits, weight=0.5)  # halfway: off the bound
    np.testing.assert_array_equal(half.state["at_limit"], [False, False])

    humanoid = samples.humanoid()
    pose = walk_pose(6)
    goal = [PositionGoal("left_wrist", positions(humanoid, pose)[8] + 0.2)]
    for w in (0.0, np.array([0.0, 0.5])):
        res = solve_dls(humanoid, pose, goal, weight=w, limits={"left_elbow": Hinge((0, 0, 1), 0.0, 0.1)})
        rows = np.broadcast_to(res.pose.rotations, (2,) + pose.rotations.shape)
        np.testing.assert_array_equal(rows[0], pose.rotations)
        assert not np.atleast_1d(res.state["moved"])[0] and np.atleast_1d(res.iterations)[0] == 0
        assert np.atleast_1d(res.limits_hit)[0] == 0


def test_a_look_at_on_a_tiny_rig_is_solved_not_ignored() -> None:
    """The "target on the joint" cut-off is a fraction of the item's length unit: on a rig scaled by 1e-13 a
    look-at target was within the absolute 1e-12 of its joint, ignored, and reported reached 0.325 rad off."""
    sk = samples.humanoid()
    pose = walk_pose(12)
    neck = sk.index("neck")
    turned = []
    for s in (1.0, 1e-13):
        small = kinema.Pose(pose.translations * s, pose.rotations, pose.scales)
        sk_s = kinema.Skeleton(list(sk.names), list(sk.parents), sk.translations * s)
        target = positions(sk_s, small)[neck] + s * np.array([1.0, 0.2, 0.3])
        res = solve_dls(sk_s, small, [LookAtGoal("neck", target, axis=(1, 0, 0))])
        fk = kinema.forward_kinematics(sk_s, res.pose)
        a = rot.rotate(fk.rotations[neck], np.array([1.0, 0.0, 0.0]))
        d = target - fk.positions[neck]
        angle = math.atan2(float(np.linalg.norm(np.cross(a, d))), float(a @ d))
        assert angle <= 1e-6 and abs(res.state["goal_errors"][0] - angle) <= 1e-9, (s, angle)
        turned.append(res.pose.rotations)
    np.testing.assert_allclose(rot.angle_between(turned[0], turned[1]), 0.0, rtol=0, atol=1e-9)


@pytest.mark.parametrize("scale", [1e-160, 1e-200, 1e-300])
def test_a_rig_in_tiny_units_solves_as_in_metres(scale: float) -> None:
    """Lengths below 1e-154 have squares that vanish: a rig at 1e-200 measured its reach, and its goal's error,
    as 0, so the solve reported reached with error 0 after no iteration, 14% of the rig's size off.  Distances
    are now measured without squaring; the solve is the metre rig's, scaled (local rotations within 1e-9,
    the reported error within 1e-9 relative of the metre rig's and of FK's)."""
    sk = kinema.samples.humanoid()
    pose = kinema.samples.clip("walk").pose[0]
    w = sk.index("left_wrist")
    target = kinema.forward_kinematics(sk, pose).positions[w] + [0.1, 0.1, 0.0]
    metre = DLS(sk, [PositionGoal("left_wrist", target)]).solve(pose)
    small = kinema.Pose(pose.translations * scale, pose.rotations)
    res = DLS(sk, [PositionGoal("left_wrist", target * scale)], tolerance=1e-6 * scale).solve(small)
    assert res.iterations == metre.iterations > 0 and bool(res.reached)
    np.testing.assert_allclose(res.pose.rotations, metre.pose.rotations, rtol=0.0, atol=1e-9)
    fk = kinema.forward_kinematics(sk, res.pose).positions[w]
    assert float(res.error) / scale == pytest.approx(float(metre.error), rel=1e-9)
    assert float(res.error) / scale == pytest.approx(float(np.linalg.norm((fk - target * scale) / scale)), rel=1e-9)
