"""The prepared FABRIK solvers as objects: their options as validated properties that take effect, the read-only
chain, the checks of their constructors' arguments, duplicated joints and empty batches."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import kinema
from kinema import rotation as R
from kinema.errors import KinemaError, SolverInputError
from kinema.limits import Hinge

ARM = ("right_shoulder", "right_wrist")
HANDS = ["right_wrist", "left_wrist"]


@pytest.fixture(scope="module")
def scene() -> tuple[kinema.Skeleton, kinema.Pose, np.ndarray]:
    sk = kinema.samples.humanoid()
    rng = np.random.default_rng(3)
    q = R.from_rotvec(rng.normal(size=(sk.n_joints, 3)) * 0.4)  # a pose with twist off its rest (twist="rest")
    pose = kinema.Pose(sk.translations, q)
    return sk, pose, kinema.forward_kinematics(sk, pose).positions


def assert_same(a: kinema.SolveResult, b: kinema.SolveResult) -> None:
    np.testing.assert_array_equal(a.pose.rotations, b.pose.rotations)
    np.testing.assert_array_equal(a.pose.translations, b.pose.translations)
    for name in ("error", "reached", "iterations", "limits_hit"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def differs(a: kinema.SolveResult, b: kinema.SolveResult) -> bool:
    return not (np.array_equal(a.pose.rotations, b.pose.rotations)
                and np.array_equal(a.pose.translations, b.pose.translations)
                and np.array_equal(a.iterations, b.iterations))


# ---------------------------------------------------------------- empty batches
@pytest.mark.parametrize("target_shape, weight", [((0, 3), 0.5), ((2, 0, 3), 0.5), ((3,), np.zeros(0)),
                                                  ((0, 3), np.zeros(0)), ((2, 0, 3), np.full((2, 1), 0.5))])
def test_fabrik_empty_batch_with_weight(scene: Any, target_shape: tuple[int, ...], weight: Any) -> None:
    sk, pose, P = scene
    target = np.broadcast_to(P[5] + 0.1, target_shape).copy() if target_shape != (3,) else P[5] + 0.1
    res = kinema.FABRIK(sk, ARM).solve(pose, target, weight=weight)
    batch = np.broadcast_shapes(np.shape(target)[:-1], np.shape(weight))
    assert 0 in batch
    assert res.error.shape == batch and res.reached.shape == batch and res.iterations.shape == batch
    assert res.pose.rotations.shape == batch + (sk.n_joints, 4)
    assert res.state["moved"].shape == batch
    same = kinema.CCD(sk, ARM).solve(pose, target, weight=weight)  # as CCD gives it
    assert same.error.shape == res.error.shape
    free = kinema.solve_fabrik(sk, pose, ARM, target, weight=weight)
    assert free.error.shape == batch


@pytest.mark.parametrize("batch", [(0,), (2, 0)])
def test_fabrik_tree_empty_batch_with_weight(scene: Any, batch: tuple[int, ...]) -> None:
    sk, pose, P = scene
    targets = np.zeros(batch + (2, 3))
    res = kinema.FABRIKTree(sk, HANDS).solve(pose, targets, weight=0.5)
    assert res.error.shape == batch and res.state["goal_errors"].shape == batch + (2,)
    assert res.pose.rotations.shape == batch + (sk.n_joints, 4)
    res = kinema.FABRIKTree(sk, HANDS).solve(pose, np.stack([P[5], P[8]]), weight=np.zeros(batch))
    assert res.error.shape == batch


# ---------------------------------------------------------------- options set after construction
def _chain_cases(P: np.ndarray) -> list[tuple[str, Any, dict[str, Any]]]:
    near = P[3] + np.array([0.2, -0.3, 0.15])  # in reach, 0.7 from the wrist
    far = P[3] + np.array([2.0, -0.5, 0.3])
    return [
        ("iterations", 1, {"target": near}),
        ("iterations", np.int32(1), {"target": near}),
        ("tolerance", 1e-9, {"target": near}),
        ("tolerance", 0.2, {"target": near}),
        ("fixed_root", False, {"target": far}),
        ("fixed_root", np.False_, {"target": far}),
        ("twist", "rest", {"target": near}),
        ("pole_max_twist", 0.05, {"target": near, "pole": P[3] + np.array([0.0, 0.0, -1.0])}),
    ]


@pytest.mark.parametrize("case", range(8))
def test_fabrik_option_set_equals_built_with_it(scene: Any, case: int) -> None:
    """An option set on a built solver takes effect exactly as if the solver had been built with it."""
    sk, pose, P = scene
    name, value, call = _chain_cases(P)[case]
    ik = kinema.FABRIK(sk, ARM)
    before = ik.solve(pose, **call)
    setattr(ik, name, value)
    ref = kinema.FABRIK(sk, ARM, **{name: value})
    assert getattr(ik, name) == getattr(ref, name) and type(getattr(ik, name)) is type(getattr(ref, name))
    got, want = ik.solve(pose, **call), ref.solve(pose, **call)
    assert_same(got, want)
    assert differs(before, want)  # (the option matters for this call)
    # batched and blended too
    many = {k: np.stack([v, v]) for k, v in call.items()}
    assert_same(ik.solve(pose, weight=np.array([0.5, 1.0]), **many), ref.solve(pose, weight=np.array([0.5, 1.0]),
                                                                                  **many))


def test_fabrik_options_set_back_to_the_defaults(scene: Any) -> None:
    sk, pose, P = scene
    target = P[3] + np.array([2.0, -0.5, 0.3])
    ik = kinema.FABRIK(sk, ARM, iterations=1, tolerance=0.5, fixed_root=False, twist="rest", pole_max_twist=0.1)
    ik.iterations, ik.tolerance, ik.fixed_root, ik.twist, ik.pole_max_twist = 20, 1e-3, True, "input", None
    assert_same(ik.solve(pose, target), kinema.FABRIK(sk, ARM).solve(pose, target))


@pytest.mark.parametrize("case", [("iterations", 1, "far"), ("tolerance", 1e-9, "near"), ("fixed_root", False, "far"),
                                  ("twist", "rest", "far")])
def test_fabrik_tree_option_set_equals_built_with_it(scene: Any, case: tuple[str, Any, str]) -> None:
    sk, pose, P = scene
    name, value, where = case
    goals = {"right_wrist": P[5] + [0.1, -0.15, 0.1], "left_wrist": P[8] + [1.5, 0.4, -0.3]} if where == "far" else \
        {"right_wrist": P[5] + [0.05, -0.05, 0.02], "left_wrist": P[8] + [0.03, 0.05, -0.02]}
    ik = kinema.FABRIKTree(sk, HANDS, root="chest")
    before = ik.solve(pose, goals)
    setattr(ik, name, value)
    ref = kinema.FABRIKTree(sk, HANDS, root="chest", **{name: value})
    assert getattr(ik, name) == getattr(ref, name)
    want = ref.solve(pose, goals)
    assert_same(ik.solve(pose, goals), want)
    assert differs(before, want)


@pytest.mark.parametrize("name, value", [
    ("iterations", -1), ("iterations", 2.5), ("iterations", True), ("iterations", "3"), ("iterations", None),
    ("tolerance", float("nan")), ("tolerance", -1.0), ("tolerance", "small"), ("tolerance", np.ones(2)),
    ("fixed_root", "False"), ("fixed_root", np.array([True, False])), ("fixed_root", 1), ("fixed_root", None),
    ("twist", "bind"), ("twist", None), ("pole_max_twist", -0.1), ("pole_max_twist", float("inf")),
    ("pole_max_twist", "big"),
])
@pytest.mark.parametrize("cls", ["FABRIK", "FABRIKTree"])
def test_fabrik_option_setters_validate(scene: Any, cls: str, name: str, value: Any) -> None:
    sk, pose, P = scene
    ik = kinema.FABRIK(sk, ARM) if cls == "FABRIK" else kinema.FABRIKTree(sk, HANDS)
    old = getattr(ik, name)
    with pytest.raises(SolverInputError, match=name):
        setattr(ik, name, value)
    assert getattr(ik, name) == old
    if cls == "FABRIK":  # the constructor refuses the same values with the same error
        with pytest.raises(SolverInputError, match=name):
            kinema.FABRIK(sk, ARM, **{name: value})
    elif name != "pole_max_twist":  # (a tree takes no pole: no such keyword)
        with pytest.raises(SolverInputError, match=name):
            kinema.FABRIKTree(sk, HANDS, **{name: value})


def test_fabrik_tree_takes_no_pole_max_twist(scene: Any) -> None:
    sk, _, _ = scene
    tree = kinema.FABRIKTree(sk, HANDS)
    assert tree.pole_max_twist is None
    with pytest.raises(SolverInputError, match="pole_max_twist"):
        tree.pole_max_twist = 0.1
    tree.pole_max_twist = None
    assert tree.pole_max_twist is None


def test_fixed_root_must_be_a_boolean_in_the_free_functions(scene: Any) -> None:
    sk, pose, P = scene
    with pytest.raises(SolverInputError, match="fixed_root"):
        kinema.solve_fabrik(sk, pose, ARM, P[5], fixed_root="False")  # type: ignore[arg-type]
    with pytest.raises(SolverInputError, match="fixed_root"):
        kinema.solve_fabrik_tree(sk, pose, {"right_wrist": P[5]}, fixed_root=np.array([True]))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["joints", "skeleton"])
@pytest.mark.parametrize("cls", ["FABRIK", "FABRIKTree"])
def test_the_chain_is_read_only(scene: Any, cls: str, name: str) -> None:
    """(``limits`` may be set, as every solver's: tests/test_limits_settable.py.)"""
    sk, pose, P = scene
    lim = {"right_elbow": Hinge((1.0, 0.0, 0.0), 0.0, 2.0)}
    ik = kinema.FABRIK(sk, ARM, limits=lim) if cls == "FABRIK" else kinema.FABRIKTree(sk, HANDS, limits=lim)
    before = getattr(ik, name)
    with pytest.raises(KinemaError, match=name):
        setattr(ik, name, None)
    assert getattr(ik, name) is before or getattr(ik, name) == before


def test_read_only_views(scene: Any) -> None:
    sk, pose, P = scene
    lim = {"right_elbow": Hinge((1.0, 0.0, 0.0), 0.0, 2.0)}
    ik = kinema.FABRIK(sk, ARM, limits=lim)
    assert ik.joints.tolist() == [3, 4, 5]
    with pytest.raises(ValueError):
        ik.joints[0] = 6  # the chain cannot be changed in place either (the kernel would not see it)
    assert ik.limits == lim
    with pytest.raises(TypeError):
        ik.limits["left_elbow"] = lim["right_elbow"]  # type: ignore[index]  # a read-only mapping
    lim["left_elbow"] = lim["right_elbow"]  # a snapshot: the caller's mapping changing changes nothing
    assert list(ik.limits) == ["right_elbow"]
    tree = kinema.FABRIKTree(sk, HANDS, weights={"left_wrist": 2.0})
    for name in ("goals", "goal_joints", "weights", "root"):
        with pytest.raises(KinemaError, match=name):
            setattr(tree, name, None)
    assert tree.goals == ("right_wrist", "left_wrist") and tree.goal_joints == (5, 8)
    assert tree.weights == {"right_wrist": 1.0, "left_wrist": 2.0}
    assert tree.root == "root"


# ---------------------------------------------------------------- duplicated joints
def test_tree_targets_naming_a_joint_twice_are_refused(scene: Any) -> None:
    sk, pose, P = scene
    right, left = P[5] + 0.05, P[8] + 0.05
    tree = kinema.FABRIKTree(sk, HANDS)
    with pytest.raises(SolverInputError, match="same joint twice"):
        tree.solve(pose, {5: right, "right_wrist": left, "left_wrist": left})
    with pytest.raises(SolverInputError, match="same joint twice"):
        kinema.solve_fabrik_tree(sk, pose, {5: right, "right_wrist": left, "left_wrist": left})
    with pytest.raises(SolverInputError, match="same joint twice"):
        tree.solve(pose, {np.int64(8): left, "right_wrist": right, -7: left})  # -7 is joint 8 too


def test_tree_weights_naming_a_joint_twice_are_refused(scene: Any) -> None:
    sk, pose, P = scene
    with pytest.raises(SolverInputError, match="right_wrist.*two weights"):
        kinema.FABRIKTree(sk, HANDS, weights={5: 1.0, "right_wrist": 2.0})
    with pytest.raises(SolverInputError, match="two weights"):
        kinema.solve_fabrik_tree(sk, pose, {"right_wrist": P[5], "left_wrist": P[8]},
                                 weights={"left_wrist": 3.0, 8: 3.0})


# ---------------------------------------------------------------- constructor arguments
@pytest.mark.parametrize("end_joints", [None, 5.0, object(), np.array(5), np.array("right_wrist"), "right_wrist", 5,
                                        [], ()])
def test_tree_end_joints_that_are_no_sequence_are_refused(scene: Any, end_joints: Any) -> None:
    sk, _, _ = scene
    with pytest.raises(SolverInputError, match="end_joints"):
        kinema.FABRIKTree(sk, end_joints)


def test_tree_end_joints_from_a_generator_are_read_once(scene: Any) -> None:
    sk, pose, P = scene
    tree = kinema.FABRIKTree(sk, (j for j in HANDS))
    assert tree.goals == tuple(HANDS)
    ref = kinema.FABRIKTree(sk, HANDS)
    tg = np.stack([P[5] + 0.1, P[8] - 0.1])
    assert_same(tree.solve(pose, tg), ref.solve(pose, tg))
    assert kinema.FABRIKTree(sk, np.array([5, 8])).goals == tuple(HANDS)


@pytest.mark.parametrize("chain", [None, np.array(5), 5.0])
def test_fabrik_chain_that_is_no_sequence_is_refused(scene: Any, chain: Any) -> None:
    sk, _, _ = scene
    with pytest.raises(SolverInputError, match="chain"):
        kinema.FABRIK(sk, chain)


def test_fabrik_chain_from_a_generator_is_read_once(scene: Any) -> None:
    sk, pose, P = scene
    ik = kinema.FABRIK(sk, (j for j in ARM))
    assert ik.joints.tolist() == [3, 4, 5]
    assert_same(ik.solve(pose, P[5] + 0.1), kinema.FABRIK(sk, ARM).solve(pose, P[5] + 0.1))


def test_weight_of_goal_reads_numpy_scalars(scene: Any) -> None:
    sk, pose, P = scene
    tree = kinema.FABRIKTree(sk, HANDS, weights={"left_wrist": np.float32(2.0)})
    assert tree.weights["left_wrist"] == 2.0 and type(tree.weights["left_wrist"]) is float
    assert math.isclose(tree.weights["right_wrist"], 1.0)
