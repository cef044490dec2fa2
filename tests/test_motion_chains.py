"""Issue 18 for the chain solvers: poles that do not flip (``pole_max_twist``), the ``twist`` policy, and
FABRIKTree convergence on random reachable torsos.  The figures are the ones ``benchmarks/_motion_chains.py``
prints, measured on the same sweeps (:mod:`kinema._sweeps`), fixed seeds."""

from __future__ import annotations

import inspect
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinema
from kinema import _sweeps as sw
from kinema import rotation as R
from test_solver_layer import LIMITS, N_BATCH, make_rig, rows_equal, targets_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _motion_chains as mc  # noqa: E402

CHAIN = ("c0", "c5")


# ------------------------------------------------------------------ the pole loop
@pytest.mark.parametrize("cls", [kinema.CCD, kinema.FABRIK], ids=["ccd", "fabrik"])
def test_pole_loop_does_not_flip(cls: Any) -> None:
    """The slow loop with a far pole: with the default pole a joint turns more than 15 degrees in a frame
    (the sweep shows the flip), with ``pole_max_twist`` none does after frame 5, and the end still lands."""
    scene = sw.chain_pole_loop()
    assert mc.pole_loop_max_turn(cls(scene.skeleton, scene.chain)) > 15.0
    smooth = cls(scene.skeleton, scene.chain, pole_max_twist=mc.POLE_MAX_TWIST)
    assert mc.pole_loop_max_turn(smooth) <= 15.0
    snap = cls(scene.skeleton, scene.chain)
    pose_smooth = pose_snap = scene.pose
    for target in scene.targets[:100]:  # wherever the snapping pole lands, the budgeted one does too
        res_snap = snap.solve(pose_snap, target, pole=scene.pole)
        res_smooth = smooth.solve(pose_smooth, target, pole=scene.pole)
        assert bool(res_smooth.reached) or not bool(res_snap.reached)
        pose_snap, pose_smooth = res_snap.pose, res_smooth.pose


def _pole_side_deg(skeleton: kinema.Skeleton, pose: kinema.Pose, chain: tuple[str, str], pole: np.ndarray) -> float:
    """Degrees between the chain's bend (mean of its middle joints, off the first-joint-to-end line) and the
    pole's direction off that line."""
    joints = skeleton.chain(*chain)
    p = kinema.forward_kinematics(skeleton, pose).positions[list(joints)]
    u = (p[-1] - p[0]) / np.linalg.norm(p[-1] - p[0])
    m = p[1:-1].mean(axis=0) - p[0]
    v = pole - p[0]
    m -= (m @ u) * u
    v -= (v @ u) * u
    return float(np.degrees(np.arccos(np.clip(m @ v / np.linalg.norm(m) / np.linalg.norm(v), -1.0, 1.0))))


@pytest.mark.parametrize("cls", [kinema.CCD, kinema.FABRIK], ids=["ccd", "fabrik"])
def test_pole_budget_blends_onto_the_pole_side(cls: Any) -> None:
    """A fixed target solved again and again from the previous result: the budgeted pole brings the bend
    onto the pole's side (within 5 degrees) as the snapping pole does in one solve: CCD within 20 solves,
    FABRIK (whose passes undo most of each turn: about 0.7 degrees a solve here) within 150."""
    scene = sw.chain_pole_loop()
    target = scene.targets[0]
    snap = cls(scene.skeleton, scene.chain).solve(scene.pose, target, pole=scene.pole)
    assert _pole_side_deg(scene.skeleton, snap.pose, scene.chain, scene.pole) <= 5.0
    smooth = cls(scene.skeleton, scene.chain, pole_max_twist=mc.POLE_MAX_TWIST)
    pose = scene.pose
    start = _pole_side_deg(scene.skeleton, pose, scene.chain, scene.pole)
    first = smooth.solve(pose, target, pole=scene.pole).pose
    assert _pole_side_deg(scene.skeleton, first, scene.chain, scene.pole) > min(start, 90.0) - 15.0
    for _ in range(20 if cls is kinema.CCD else 150):
        pose = smooth.solve(pose, target, pole=scene.pole).pose
    assert _pole_side_deg(scene.skeleton, pose, scene.chain, scene.pole) <= 5.0


# ------------------------------------------------------------------ the twist policy
@pytest.mark.parametrize(("cls", "pole"), [(kinema.CCD, False), (kinema.CCD, True), (kinema.FABRIK, False)],
                         ids=["ccd", "ccd-pole", "fabrik"])
def test_twist_rest_closes_the_loop(cls: Any, pole: bool) -> None:
    """Warm-started closed loop: with ``twist="rest"`` the pose after 50 more loops is within 1 degree of
    the pose before them; with the default ``"input"`` it is not (the build-up the policy removes)."""
    tw = sw.twist_loop_scene(loops=1)
    assert mc.twist_drift(cls(tw.skeleton, tw.chain, twist="rest"), pole=pole) <= 1.0
    if pole or cls is kinema.FABRIK:
        assert mc.twist_drift(cls(tw.skeleton, tw.chain), pole=pole) > 1.0


def _twist_from_rest_deg(skeleton: kinema.Skeleton, pose: kinema.Pose, joints: list[int]) -> np.ndarray:
    """Degrees of each joint's twist about its bone (towards the next joint) relative to its rest rotation."""
    out = []
    for a, j in enumerate(joints[:-1]):
        axis = skeleton.translations[joints[a + 1]]
        delta = R.multiply(R.inverse(skeleton.rotations[j]), pose.rotations[..., j, :])
        _, twist = R.swing_twist(delta, axis / np.linalg.norm(axis))
        out.append(np.degrees(2.0 * np.arccos(np.clip(np.abs(twist[..., 3]), 0.0, 1.0))))
    return np.asarray(out)


@pytest.mark.parametrize("kind", ["ccd", "fabrik", "tree"])
def test_twist_rest_keeps_positions_and_takes_rest_twist(kind: str) -> None:
    """``twist="rest"`` changes only the twists: every solved joint lands where ``"input"`` puts it (1e-9;
    a side branch off a chain bone turns with that bone's twist, so it is not compared), and every turned
    joint has no twist about its bone relative to rest (1e-6 degrees)."""
    sk = make_rig()
    rng = np.random.default_rng(5)
    pose = sk.rest_pose((6,))
    pose.rotations[:] = R.multiply(pose.rotations, R.from_rotvec(rng.normal(size=(6, 8, 3)) * 0.4))
    tg = targets_for(sk, 6, "c5", seed=2)
    if kind == "tree":
        goals = {"c5": tg, "b0": targets_for(sk, 6, "b0", seed=3)}
        a = kinema.solve_fabrik_tree(sk, pose, goals)
        b = kinema.solve_fabrik_tree(sk, pose, goals, twist="rest")
        turned = [sk.index(n) for n in ("c0", "c1", "c3", "c4", "c5")]  # one-child joints (c2 is the sub-base)
        axes_of = {sk.index("c0"): "c1", sk.index("c1"): "c2", sk.index("c3"): "c4", sk.index("c4"): "c5"}
        for j, child in axes_of.items():
            got = _twist_from_rest_deg(sk, b.pose, [j, sk.index(child)])
            np.testing.assert_allclose(got, 0.0, atol=1e-6)
        solved = turned + [sk.index("c2"), sk.index("b0")]
    else:
        fn = kinema.solve_ccd if kind == "ccd" else kinema.solve_fabrik
        a = fn(sk, pose, CHAIN, tg)
        b = fn(sk, pose, CHAIN, tg, twist="rest")
        chain = list(sk.chain(*CHAIN))
        np.testing.assert_allclose(_twist_from_rest_deg(sk, b.pose, chain), 0.0, atol=1e-6)
        solved = chain
    pa = kinema.forward_kinematics(sk, a.pose).positions[:, solved]
    pb = kinema.forward_kinematics(sk, b.pose).positions[:, solved]
    np.testing.assert_allclose(pb, pa, rtol=0, atol=1e-9)
    np.testing.assert_allclose(b.error, a.error, rtol=0, atol=1e-9)


@pytest.mark.parametrize("kind", ["ccd", "fabrik"])
def test_twist_rest_through_helper_joints_keeps_the_listed_joints_and_the_end(kind: str) -> None:
    """A chain listed with a helper joint between two turned ones (a twist bone, rotated at rest, never turned):
    ``twist="rest"`` twists the upper joint about its bone to the next turned joint, through the helper, so the
    listed joints and the end land where ``"input"`` puts them (1e-9); the end stays reached.  (CCD once twisted
    about the line to the helper and left the end 1.6 cm off.)"""
    rots = np.array([[0, 0, 0, 1], R.from_rotvec([0.6, 0.0, 0.9]), [0, 0, 0, 1], [0, 0, 0, 1]], dtype=float)
    sk = kinema.Skeleton(["upper", "helper", "lower", "hand"], [-1, 0, 1, 2],
                         [[0, 0, 0], [0, 0.15, 0], [0, 0.15, 0], [0, 0.25, 0]], rots, [[1.0] * 3, [1.3] * 3, [1.0] * 3,
                                                                                        [1.0] * 3])
    fn = kinema.solve_ccd if kind == "ccd" else kinema.solve_fabrik
    chain = ["upper", "lower", "hand"]
    targets = np.array([[0.2, 0.2, 0.15], [-0.1, 0.3, 0.2], [0.05, 0.1, -0.3]])
    a = fn(sk, sk.rest_pose(), chain, targets, tolerance=1e-4)
    b = fn(sk, sk.rest_pose(), chain, targets, tolerance=1e-4, twist="rest")
    listed = [sk.index(n) for n in chain]
    np.testing.assert_allclose(kinema.forward_kinematics(sk, b.pose).positions[:, listed],
                               kinema.forward_kinematics(sk, a.pose).positions[:, listed], rtol=0, atol=1e-9)
    np.testing.assert_allclose(b.error, a.error, rtol=0, atol=1e-9)
    assert np.all(b.reached)
    np.testing.assert_array_equal(b.pose.rotations[:, sk.index("helper")], np.broadcast_to(rots[1], (3, 4)))


def test_twist_rest_in_solve_chains() -> None:
    """A Goal's ``twist="rest"`` reaches the CCD solve: positions as with "input", rest twists."""
    sk = make_rig()
    tg = targets_for(sk, 1, "c5", seed=8)[0]
    a = kinema.solve_chains(sk, sk.rest_pose(), [kinema.Goal(CHAIN, tg)])
    b = kinema.solve_chains(sk, sk.rest_pose(), [kinema.Goal(CHAIN, tg, twist="rest")])
    chain = list(sk.chain(*CHAIN))
    np.testing.assert_allclose(kinema.forward_kinematics(sk, b.pose).positions[chain],
                               kinema.forward_kinematics(sk, a.pose).positions[chain], rtol=0, atol=1e-9)
    np.testing.assert_allclose(_twist_from_rest_deg(sk, b.pose, chain), 0.0, atol=1e-6)


@pytest.mark.parametrize("bad", ["bogus", None, 1, "REST", ["rest"]])
def test_twist_is_validated(bad: Any) -> None:
    sk = make_rig()
    tg = np.zeros(3)
    calls = [
        lambda: kinema.CCD(sk, CHAIN, twist=bad),
        lambda: kinema.FABRIK(sk, CHAIN, twist=bad),
        lambda: kinema.FABRIKTree(sk, ["c5", "b0"], twist=bad),
        lambda: kinema.solve_ccd(sk, sk.rest_pose(), CHAIN, tg, twist=bad),
        lambda: kinema.solve_fabrik(sk, sk.rest_pose(), CHAIN, tg, twist=bad),
        lambda: kinema.solve_fabrik_tree(sk, sk.rest_pose(), {"c5": tg}, twist=bad),
        lambda: kinema.solve_chains(sk, sk.rest_pose(), [kinema.Goal(CHAIN, tg, twist=bad)]),
    ]
    for call in calls:
        with pytest.raises(kinema.SolverInputError, match="twist must be one of 'input', 'rest'"):
            call()


@pytest.mark.parametrize("bad", [0.0, -0.1, math.nan, math.inf, "x"])
def test_pole_max_twist_is_validated(bad: Any) -> None:
    sk = make_rig()
    for cls in (kinema.CCD, kinema.FABRIK):
        with pytest.raises(kinema.SolverInputError, match="pole_max_twist"):
            cls(sk, CHAIN, pole_max_twist=bad)


# ------------------------------------------------------------------ determinism and limits
def _new_option_cases(sk: kinema.Skeleton) -> list[tuple[str, Any, dict[str, Any]]]:
    pole = np.array([1.5, 0.5, -2.0])
    budget = math.radians(5.0)
    return [
        ("ccd rest", kinema.CCD(sk, CHAIN, twist="rest"), {}),
        ("ccd rest+limits+budget", kinema.CCD(sk, CHAIN, twist="rest", limits=LIMITS, pole_max_twist=budget),
         {"pole": pole}),
        ("fabrik rest", kinema.FABRIK(sk, CHAIN, twist="rest"), {}),
        ("fabrik budget", kinema.FABRIK(sk, CHAIN, pole_max_twist=budget), {"pole": pole}),
        ("fabrik rest+limits+budget", kinema.FABRIK(sk, CHAIN, twist="rest", limits=LIMITS, pole_max_twist=budget),
         {"pole": pole}),
    ]


def test_new_options_batch_equals_loop_of_singles_bit_for_bit() -> None:
    sk = make_rig()
    pose = sk.rest_pose()
    for name, solver, kw in _new_option_cases(sk):
        tg = targets_for(sk, N_BATCH, "c5")
        batch = solver.solve(pose, tg, **kw)
        for i in range(0, N_BATCH, 9):
            assert rows_equal(solver.solve(pose, tg[i], **kw), batch, i), f"{name}: item {i}"
    tree = kinema.FABRIKTree(sk, ["c5", "b0"], limits=LIMITS, twist="rest")
    goals = np.stack([targets_for(sk, N_BATCH, "c5"), targets_for(sk, N_BATCH, "b0", seed=4)], axis=1)
    batch = tree.solve(pose, goals)
    for i in range(0, N_BATCH, 11):
        one = tree.solve(pose, goals[i])
        assert rows_equal(one, batch, i)
        np.testing.assert_array_equal(one.state["goal_errors"], batch.state["goal_errors"][i])


def test_limits_hold_with_the_new_options() -> None:
    """After every solve with ``twist="rest"`` and a pole budget each limited joint is inside its limit."""
    sk = make_rig()
    tg = targets_for(sk, 40, "c5", seed=6)
    for name, solver, kw in _new_option_cases(sk):
        if "limits" not in name:
            continue
        pose = sk.rest_pose()
        for target in tg:  # warm-started, so every solve's result is checked
            pose = solver.solve(pose, target, **kw).pose
            for joint, limit in LIMITS.items():
                j = sk.index(joint)
                assert bool(limit.contains(pose.rotations[j], sk.rotations[j], atol=1e-9)), (name, joint)
    tree = kinema.FABRIKTree(sk, ["c5", "b0"], limits=LIMITS, twist="rest")
    res = tree.solve(sk.rest_pose(), np.stack([tg, targets_for(sk, 40, "b0", seed=9)], axis=1))
    for joint, limit in LIMITS.items():
        j = sk.index(joint)
        assert np.all(limit.contains(res.pose.rotations[:, j], sk.rotations[j], atol=1e-9)), joint


def test_defaults_are_the_input_policy_and_no_budget() -> None:
    """Spelling out the defaults gives the default solve bit for bit (the options are off by default)."""
    sk = make_rig()
    tg = targets_for(sk, 30, "c5")
    pole = np.array([1.5, 0.5, -2.0])
    for cls in (kinema.CCD, kinema.FABRIK):
        a = cls(sk, CHAIN).solve(sk.rest_pose(), tg, pole=pole)
        b = cls(sk, CHAIN, twist="input", pole_max_twist=None).solve(sk.rest_pose(), tg, pole=pole)
        np.testing.assert_array_equal(a.pose.rotations, b.pose.rotations)


# ------------------------------------------------------------------ tree convergence
def test_tree_convergence_improved() -> None:
    """Random reachable three-goal torsos (seed 7, 200 items): the share with every goal within 1 mm, above
    the landed figures (7%, 42%, 66% at 20, 50, 100 iterations): floors just under the 97.5%, 99.5% and
    99.5% measured now (goal-head sub-base turned about the head's goal, :func:`_pivot_subbase`)."""
    assert mc.tree_reached(20) >= 0.97
    assert mc.tree_reached(50) >= 0.99
    assert mc.tree_reached(100) >= 0.99


def test_tree_goal_head_met_every_iteration() -> None:
    """A sub-base with one goal head (the chest with the neck goal), its parent fixed: after a single
    iteration the head's goal is met to rounding (1e-9 m) on every reachable torso, while the arms are not
    yet (so the solve did not just finish)."""
    prob = sw.torso_problem(50)
    res = kinema.solve_fabrik_tree(prob.skeleton, prob.pose, prob.targets, iterations=1, tolerance=1e-12)
    goals = list(res.state["goals"])
    errors = res.state["goal_errors"]
    assert errors[:, goals.index("neck")].max() <= 1e-9
    assert errors[:, goals.index("right_wrist")].max() > 1e-3


def test_tree_torso_keeps_lengths_reports_errors_and_batch_equals_singles() -> None:
    """The torso solves (default iterations): every bone keeps its length (1e-9 relative), the reported goal
    errors are the distances forward kinematics gives (1e-12 m), and each of 20 single solves equals its
    batch row bit for bit (the sub-base turn about the goal head is per item)."""
    prob = sw.torso_problem(200)
    sk = prob.skeleton
    res = kinema.solve_fabrik_tree(sk, prob.pose, prob.targets)
    rest = sk.bone_lengths()
    np.testing.assert_allclose(sk.bone_lengths(res.pose), np.broadcast_to(rest, (200, rest.shape[0])),
                               rtol=1e-9, atol=0.0)
    world = kinema.forward_kinematics(sk, res.pose).positions
    for k, g in enumerate(res.state["goals"]):
        dist = np.linalg.norm(world[:, sk.index(g)] - prob.targets[g], axis=-1)
        np.testing.assert_allclose(res.state["goal_errors"][:, k], dist, rtol=0.0, atol=1e-12)
    for i in range(20):
        one = kinema.solve_fabrik_tree(sk, kinema.Pose(prob.pose.translations[i], prob.pose.rotations[i]),
                                       {g: v[i] for g, v in prob.targets.items()})
        assert rows_equal(one, res, i)
        assert np.array_equal(one.state["goal_errors"], res.state["goal_errors"][i])


def test_tree_convergence_target() -> None:
    """Issue 18 point 5: at least 90% of the torsos meet every goal within 1 mm at the default iterations."""
    assert inspect.signature(kinema.solve_fabrik_tree).parameters["iterations"].default == 20
    assert mc.tree_reached(20) >= 0.9
