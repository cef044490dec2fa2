"""The solver layer: prepared solvers, one route per item, one input contract, one cache.

Every solver is a prepared object (``TwoBone``, ``CCD``, ``FABRIK``, ``FABRIKTree``) and its free function
is that object through a bounded cache.  Whatever the route (object or function, single or batch, the
serial or the parallel driver, whichever kernel compiled first), an item gives the same numbers bit for
bit.  Inputs are read as the numbers they hold or refused with a KinemaError naming them.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinema
from _fork import fork_while_held
from kinema import rotation as R
from kinema._solve import PARALLEL_MIN_ITEMS, SOLVER_CACHE_MAX, SOLVERS
from kinema.limits import EulerRange, Hinge, SwingTwist

ROOT = Path(__file__).resolve().parents[1]
CHAIN = ("c0", "c1", "c2", "c3", "c4", "c5")
ARM = ("c1", "c2", "c3")
N_BATCH = 2 * PARALLEL_MIN_ITEMS  # large enough for the parallel driver


def make_rig(seed: int = 3) -> kinema.Skeleton:
    """A parent "world" joint (rotated, translated, scaled 1.7) above a 6-joint chain c0..c5 and a branch b0 off c2."""
    rng = np.random.default_rng(seed)
    names = ["world", *CHAIN, "b0"]
    parents = [-1, 0, 1, 2, 3, 4, 5, 3]
    t = rng.normal(size=(8, 3)) * 0.15 + [0.0, 0.8, 0.0]
    t[0] = [0.4, -0.2, 1.0]
    rot = R.from_rotvec(rng.normal(size=(8, 3)) * 0.3)
    scl = np.ones((8, 3))
    scl[0] = 1.7
    return kinema.Skeleton(names, parents, t, rot, scl)


def targets_for(sk: kinema.Skeleton, n: int, end: str, seed: int = 0) -> np.ndarray:
    """Reachable targets (FK of random poses) with a third pushed out of reach."""
    rng = np.random.default_rng(seed)
    pose = sk.rest_pose((n,))
    pose.rotations[:, 1:] = R.multiply(pose.rotations[:, 1:], R.from_rotvec(rng.normal(size=(n, 7, 3)) * 0.4))
    tg = kinema.forward_kinematics(sk, pose).positions[:, sk.index(end)]
    tg[::3] += rng.normal(size=(len(tg[::3]), 3)) * 3.0
    return np.ascontiguousarray(tg)


LIMITS = {"c1": Hinge((1, 0, 0), -1.0, 1.2), "c2": SwingTwist((0, 1, 0), 0.6, -0.3, 0.3),
          "c3": EulerRange("XYZ", (-0.6, -0.6, -0.6), (0.6, 0.6, 0.6))}


def cases(sk: kinema.Skeleton) -> list[tuple[str, Any, dict[str, Any]]]:
    """``(name, solver, per-call keyword arrays)`` for every solver with the option sets that matter."""
    pole = np.array([1.5, 0.5, -2.0])
    return [
        ("two-bone", kinema.TwoBone(sk, ARM), {}),
        ("two-bone pole+end", kinema.TwoBone(sk, ARM, pole=pole, soft=0.2), {"end_rotation": R.from_rotvec(
            [0.3, 0.2, 0.1])}),
        ("ccd", kinema.CCD(sk, CHAIN), {}),
        ("ccd limits+pole+weights", kinema.CCD(sk, CHAIN, limits=LIMITS, weights={"c0": 0.5}, max_step=0.3),
         {"pole": pole}),
        ("ccd free root", kinema.CCD(sk, CHAIN, fixed_root=False, tolerance=0.0), {}),
        ("fabrik", kinema.FABRIK(sk, CHAIN), {}),
        ("fabrik limits+pole", kinema.FABRIK(sk, CHAIN, limits=LIMITS), {"pole": pole}),
    ]


def solve_batch(solver: Any, pose: kinema.Pose, tg: np.ndarray, kw: dict[str, Any]) -> kinema.SolveResult:
    return solver.solve(pose, tg, **kw)


def rows_equal(one: kinema.SolveResult, batch: kinema.SolveResult, i: int) -> bool:
    return (np.array_equal(one.pose.rotations, np.broadcast_to(batch.pose.rotations, batch.pose.rotations.shape)[i])
            and np.array_equal(one.pose.translations,
                               np.broadcast_to(batch.pose.translations, batch.pose.rotations.shape[:-1] + (3,))[i])
            and float(one.error) == float(batch.error[i]) and int(one.iterations) == int(batch.iterations[i])
            and bool(one.reached) == bool(batch.reached[i]))


# ------------------------------------------------------------------ one route per item
@pytest.mark.parametrize("per_item_pose", [False, True])
def test_batch_equals_loop_of_singles_bit_for_bit(per_item_pose: bool) -> None:
    """The parallel driver (a batch), the serial one (single solves) and the free functions agree to the bit."""
    sk = make_rig()
    rng = np.random.default_rng(1)
    for name, solver, kw in cases(sk):
        end = sk.names[int(solver.joints[-1])]
        tg = targets_for(sk, N_BATCH, end)
        pose = sk.rest_pose((N_BATCH,)) if per_item_pose else sk.rest_pose()
        if per_item_pose:
            pose.rotations[:] = R.multiply(pose.rotations, R.from_rotvec(rng.normal(size=(N_BATCH, 8, 3)) * 0.1))
        batch = solve_batch(solver, pose, tg, kw)
        for i in range(0, N_BATCH, 7):
            single_pose = pose[i] if per_item_pose else pose
            one = solver.solve(single_pose, tg[i], **kw)
            assert rows_equal(one, batch, i), f"{name}: item {i} differs between a batch and a single solve"
        small = solver.solve(pose[:5] if per_item_pose else pose, tg[:5], **kw)  # the serial driver, batched
        for i in range(5):
            assert rows_equal(solver.solve(pose[i] if per_item_pose else pose, tg[i], **kw), small, i), name


def test_batch_with_per_item_weights_equals_loop_of_singles_bit_for_bit() -> None:
    """Per-item weights, exactly 0 and 1 among them: each item of a batch is its single solve with its own weight,
    pose, error and diagnostics to the bit (an item of weight 1 in a blended batch used to get its error from a
    second FK pass, 1 ulp off its single solve's)."""
    sk = make_rig()
    weights = np.array([1.0, 0.25, 0.0, 1.0, 0.75, 1.0, 0.5])
    for name, solver, kw in cases(sk) + [("tree", kinema.FABRIKTree(sk, ["c5", "b0"], limits=LIMITS), {})]:
        end = sk.names[int(solver.joints[-1])]
        tg = targets_for(sk, N_BATCH, end)
        if name == "tree":
            tg = np.stack([tg, targets_for(sk, N_BATCH, "b0", seed=4)], axis=1)
        w = np.resize(weights, N_BATCH)
        batch = solver.solve(sk.rest_pose(), tg, weight=w, **kw)
        for i in range(0, N_BATCH, 3):
            one = solver.solve(sk.rest_pose(), tg[i], weight=float(w[i]), **kw)
            assert rows_equal(one, batch, i), f"{name}: item {i} (weight {w[i]}) differs from its single solve"
            assert bool(one.state["moved"]) == bool(batch.state["moved"][i]), name
            assert int(one.limits_hit) == int(batch.limits_hit[i]), name


def test_tree_batch_equals_singles_and_reports_goal_errors() -> None:
    sk = make_rig()
    tree = kinema.FABRIKTree(sk, ["c5", "b0"], limits=LIMITS)
    goals = np.stack([targets_for(sk, N_BATCH, "c5"), targets_for(sk, N_BATCH, "b0", seed=4)], axis=1)
    batch = tree.solve(sk.rest_pose(), goals)
    assert batch.state["goal_errors"].shape == (N_BATCH, 2)
    np.testing.assert_array_equal(batch.error, batch.state["goal_errors"].max(axis=1))
    for i in range(0, N_BATCH, 11):
        one = tree.solve(sk.rest_pose(), {"c5": goals[i, 0], "b0": goals[i, 1]})
        assert rows_equal(one, batch, i)
        np.testing.assert_array_equal(one.state["goal_errors"], batch.state["goal_errors"][i])
        free = kinema.solve_fabrik_tree(sk, sk.rest_pose(), {"c5": goals[i, 0], "b0": goals[i, 1]}, limits=LIMITS)
        assert rows_equal(free, batch, i)
    # the reported goal errors are the FK distances
    fk = kinema.forward_kinematics(sk, batch.pose).positions
    want = np.linalg.norm(fk[:, [sk.index("c5"), sk.index("b0")]] - goals, axis=-1)
    np.testing.assert_allclose(batch.state["goal_errors"], want, rtol=0, atol=1e-12)


def test_free_functions_are_the_prepared_solvers() -> None:
    sk = make_rig()
    pose = sk.rest_pose()
    tg = targets_for(sk, 20, "c5")
    pole = np.array([1.0, 0.0, -1.0])
    pairs = [
        (kinema.solve_ccd(sk, pose, CHAIN, tg, limits=LIMITS, pole=pole),
         kinema.CCD(sk, CHAIN, limits=LIMITS).solve(pose, tg, pole=pole)),
        (kinema.solve_fabrik(sk, pose, CHAIN, tg, pole=pole), kinema.FABRIK(sk, CHAIN).solve(pose, tg, pole=pole)),
        (kinema.solve_two_bone(sk, pose, ARM, tg, pole, soft=0.1), kinema.TwoBone(sk, ARM, soft=0.1).solve(
            pose, tg, pole=pole)),
    ]
    for a, b in pairs:
        np.testing.assert_array_equal(a.pose.rotations, b.pose.rotations)
        np.testing.assert_array_equal(a.error, b.error)


def test_two_bone_ik_is_two_bone_with_history() -> None:
    sk = make_rig()
    tg = targets_for(sk, 30, "c3")
    pole = np.array([1.0, 0.0, -1.0])
    a = kinema.TwoBoneIK(sk, ARM, pole=pole)
    b = kinema.TwoBone(sk, ARM, pole=pole, history=True)
    for t in tg:
        ra, rb = a.solve(sk.rest_pose(), t), b.solve(sk.rest_pose(), t)
        np.testing.assert_array_equal(ra.pose.rotations, rb.pose.rotations)
    assert isinstance(a, kinema.TwoBone)


FRESH_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[3])
    import test_solver_layer as T
    sk = T.make_rig()
    order = sys.argv[1]
    out = {}
    items = [0, 5, 9]
    for name, solver, kw in T.cases(sk):
        end = sk.names[int(solver.joints[-1])]
        tg = T.targets_for(sk, T.N_BATCH, end)
        pose = sk.rest_pose()
        if order == "singles-first":
            singles = [solver.solve(pose, tg[i], **kw) for i in items]
            batch = solver.solve(pose, tg, **kw)
        else:
            batch = solver.solve(pose, tg, **kw)
            singles = [solver.solve(pose, tg[i], **kw) for i in items]
        assert all(T.rows_equal(s, batch, i) for s, i in zip(singles, items)), name
        out[name] = np.asarray(batch.pose.rotations).tobytes().hex()
    from kinema._kernels import _tier
    json.dump({"numbers": out, "plain": sorted(_tier._twins)}, open(sys.argv[2], "w"))
""")


def test_fresh_processes_and_compile_orders_agree(tmp_path: Path) -> None:
    """Two fresh processes with fresh numba caches, compiling the single-solve route first in one and the
    batch route first in the other, give bit-identical batches (and each its singles equal to its batch); a
    third, in the default mode, runs these small solves as plain Python (kinema._kernels._tier) and gives the
    same numbers."""
    script = tmp_path / "fresh.py"
    script.write_text(FRESH_SCRIPT)
    results = []
    for order, mode in (("singles-first", "always"), ("batch-first", "always"), ("singles-first", "auto")):
        env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / f"cache-{order}-{mode}"), KINEMA_COMPILE=mode)
        env.pop("NUMBA_DISABLE_JIT", None)
        out = tmp_path / f"{order}-{mode}.json"
        proc = subprocess.run([sys.executable, str(script), order, str(out), str(ROOT / "tests")], env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results.append(json.loads(out.read_text()))
    assert results[0]["numbers"] == results[1]["numbers"] == results[2]["numbers"]
    assert results[0]["plain"] == results[1]["plain"] == [] and "two_bone" in results[2]["plain"]


# ------------------------------------------------------------------ the input contract
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32, ">f8", ">i8", np.uint16])
def test_targets_are_read_as_the_numbers_they_hold(dtype: Any) -> None:
    sk = make_rig()
    pose = sk.rest_pose()
    target = np.array([1, 2, 0])
    for solver in (kinema.TwoBone(sk, ARM), kinema.CCD(sk, CHAIN), kinema.FABRIK(sk, CHAIN)):
        want = solver.solve(pose, target.astype(np.float64))
        got = solver.solve(pose, target.astype(dtype))
        np.testing.assert_array_equal(got.pose.rotations, want.pose.rotations)
        again = solver.solve(pose, target.astype(np.float64))  # nothing was typed by the odd call
        np.testing.assert_array_equal(again.pose.rotations, want.pose.rotations)
    f32 = kinema.forward_kinematics(sk, kinema.Pose(pose.translations.astype(np.float32),
                                                    pose.rotations.astype(np.float32)))
    f64 = kinema.forward_kinematics(sk, kinema.Pose(pose.translations.astype(np.float32).astype(np.float64),
                                                    pose.rotations.astype(np.float32).astype(np.float64)))
    np.testing.assert_array_equal(f32.positions, f64.positions)


@pytest.mark.parametrize("bad", [np.array([True, False, True]), np.array([1 + 2j, 0, 0]), np.array(["1", "2", "3"]),
                                 np.array([1.0, 2.0, 3.0], dtype=object), np.array(["2020-01-01"] * 3,
                                                                                  dtype="datetime64[D]"),
                                 {1.0, 2.0, 3.0}, {"x": 1.0}, "1,2,3", None, [1.0, None, 2.0]])
def test_non_numeric_inputs_are_refused_naming_the_argument(bad: Any) -> None:
    sk = make_rig()
    pose = sk.rest_pose()
    for call in (lambda: kinema.solve_ccd(sk, pose, CHAIN, bad), lambda: kinema.solve_fabrik(sk, pose, CHAIN, bad),
                 lambda: kinema.solve_two_bone(sk, pose, ARM, bad)):
        with pytest.raises((kinema.ShapeError, kinema.SolverInputError), match="target"):
            call()
    if bad is None:
        return  # no pole, no translations: both mean something else
    with pytest.raises((kinema.ShapeError, kinema.SolverInputError), match="pole"):
        kinema.solve_ccd(sk, pose, CHAIN, [0.0, 1.0, 0.0], pole=bad)
    with pytest.raises(kinema.ShapeError, match="translations"):
        kinema.Pose(np.broadcast_to(bad, (8, 3)) if isinstance(bad, np.ndarray) else bad, pose.rotations)


def test_nan_and_inf_are_refused_by_every_solver() -> None:
    sk = make_rig()
    good = np.array([0.5, 1.5, 0.2])
    pole = np.array([1.0, 0.0, 0.0])
    nan_pose = sk.rest_pose()
    nan_pose.translations[4, 1] = np.nan
    inf_pose = sk.rest_pose()
    inf_pose.rotations[2, 0] = np.inf
    calls = {
        "two-bone": lambda p, t, q: kinema.solve_two_bone(sk, p, ARM, t, q),
        "ccd": lambda p, t, q: kinema.solve_ccd(sk, p, CHAIN, t, pole=q),
        "fabrik": lambda p, t, q: kinema.solve_fabrik(sk, p, CHAIN, t, pole=q),
        "tree": lambda p, t, q: kinema.solve_fabrik_tree(sk, p, {"c5": t, "b0": good}),
        "chains": lambda p, t, q: kinema.solve_chains(sk, p, [kinema.Goal(CHAIN, t, pole=q)]),
    }
    for name, call in calls.items():
        for p, t, q in ((nan_pose, good, pole), (inf_pose, good, pole), (sk.rest_pose(), [np.nan, 0, 0], pole),
                        (sk.rest_pose(), [[0, 1, 0], [0, np.inf, 0]], pole)):
            with pytest.raises(kinema.SolverInputError, match="NaN or inf"):
                call(p, t, q)
        if name not in ("tree",):
            with pytest.raises(kinema.SolverInputError, match="pole"):
                call(sk.rest_pose(), good, [np.nan, 0.0, 0.0])


def test_bad_options_and_arguments_raise_kinema_errors() -> None:
    sk = make_rig()
    pose = sk.rest_pose()
    tg = [0.5, 1.5, 0.2]
    bad_calls = [
        lambda: kinema.solve_ccd(sk, pose, CHAIN, tg, tolerance=None),
        lambda: kinema.solve_ccd(sk, pose, CHAIN, tg, iterations=2.5),
        lambda: kinema.solve_ccd(sk, pose, CHAIN, tg, iterations=True),
        lambda: kinema.solve_fabrik(sk, pose, CHAIN, tg, tolerance="x"),
        lambda: kinema.solve_fabrik(sk, pose, CHAIN, tg, tolerance=[1e-3, 1e-3]),
        lambda: kinema.solve_ccd(sk, "pose", CHAIN, tg),
        lambda: kinema.solve_fabrik(sk, None, CHAIN, tg),
        lambda: kinema.solve_two_bone(sk, object(), ARM, tg),
        lambda: kinema.solve_ccd(None, pose, CHAIN, tg),
        lambda: kinema.solve_ccd(sk, pose, CHAIN, tg, weight=2.0),
        lambda: kinema.solve_fabrik(sk, pose, CHAIN, tg, weight=-0.1),
        lambda: kinema.solve_ccd(sk, pose, CHAIN, tg, max_step="big"),
        lambda: kinema.solve_fabrik_tree(sk, pose, {"c5": tg}, weights={"c5": None}),
        lambda: kinema.CCD(sk, ["c0", "nope"]),
        lambda: kinema.FABRIKTree(sk, []),
        lambda: kinema.FABRIKTree(sk, ["c5", "b0"]).solve(pose, {"c5": tg}),
        # DLS reads its iteration count through the same check as the chain solvers (bools are not counts)
        lambda: kinema.DLS(sk, [kinema.PositionGoal("c5", tg)], iterations=True),
        lambda: kinema.DLS(sk, [kinema.PositionGoal("c5", tg)], iterations=-1),
        lambda: kinema.solve_dls(sk, pose, [kinema.PositionGoal("c5", tg)], iterations=2.5),
    ]
    for call in bad_calls:
        with pytest.raises(kinema.KinemaError):
            call()


def test_bad_arguments_of_rigs_goals_limits_and_weights_raise_kinema_errors() -> None:
    """Each of these once escaped as a bare ValueError, TypeError or AttributeError (or was read as a number it
    does not hold: a numeric string, a bool)."""
    sk = kinema.samples.humanoid()
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    pose, tg = sk.rest_pose(), [0.1, 0.8, 0.3]
    step = kinema.Step("a", kinema.CCD(sk, arm))
    bad_calls = [
        lambda: kinema.CCD(sk, arm, weights={"right_elbow": "abc"}),
        lambda: kinema.CCD(sk, arm, weights={"right_elbow": True}),
        lambda: kinema.CCD(sk, arm, weights=["a", "b", "c"]),
        lambda: kinema.CCD(sk, arm, weights=["1", "0.5", "1"]),
        lambda: kinema.CCD(sk, arm, weights=[True, True, True]),
        lambda: kinema.FABRIKTree(sk, ["right_wrist"], weights=[1.0]),
        lambda: kinema.Rig(sk, ["abc"]),
        lambda: kinema.Rig(sk, None),  # type: ignore[arg-type]
        lambda: kinema.Rig(sk, [kinema.Step("a", kinema.CCD(sk, arm), weight="abc")]),  # type: ignore[arg-type]
        lambda: kinema.Rig(sk, [kinema.Step("a", kinema.CCD(sk, arm), weight="0.5")]),  # type: ignore[arg-type]
        lambda: kinema.Rig(sk, [kinema.Step("a", kinema.CCD(sk, arm), joints=5)]),  # type: ignore[arg-type]
        lambda: kinema.Rig(sk, [kinema.Step("a", object())]),  # type: ignore[arg-type]
        lambda: kinema.Rig(sk, [step]).solve(pose, {"a": tg}, weights={"a": "x"}),  # type: ignore[dict-item]
        lambda: kinema.Rig(sk, [step]).solve(pose, None),  # type: ignore[arg-type]
        lambda: kinema.solve_chains(sk, pose, [kinema.Goal(arm, tg, priority="x")]),  # type: ignore[arg-type]
        lambda: kinema.solve_chains(sk, pose, [kinema.Goal(arm, tg, priority=None)]),  # type: ignore[arg-type]
        lambda: kinema.solve_chains(sk, pose, None),  # type: ignore[arg-type]
        lambda: kinema.solve_ccd(sk, pose, None, tg),
        lambda: kinema.limits.Hinge("abc", 0, 1),  # type: ignore[arg-type]
        lambda: kinema.limits.Hinge((1, 0, 0), "0.1", 1),  # type: ignore[arg-type]
        lambda: kinema.limits.EulerRange("XYZ", 5, (1, 1, 1)),  # type: ignore[arg-type]
        lambda: kinema.limits.SwingTwist((0, 1, 0), 0.5, reference="xyz"),  # type: ignore[arg-type]
        lambda: kinema.limits.SwingTwist((1, 0, 0), 0.5).clamp([np.nan, 0, 0, 1]),
        lambda: kinema.limits.SwingTwist((1, 0, 0), 0.5).violation([np.nan, 0, 0, 1]),
        lambda: kinema.limits.Hinge((1, 0, 0), 0, 1).clamp([0, 0, 0, 1], rest_rotation=[0, 0, 0, 0]),
        lambda: kinema.forward_kinematics(sk, None),  # type: ignore[arg-type]
        lambda: kinema.forward_kinematics(None, pose),  # type: ignore[arg-type]
        lambda: sk.rest_pose(("a",)),  # type: ignore[arg-type]
        lambda: sk.rest_pose((-1,)),
    ]
    for k, call in enumerate(bad_calls):
        with pytest.raises(kinema.KinemaError):
            call()
            raise AssertionError(f"call {k} was accepted")
    assert sk.rest_pose(3).rotations.shape == (3, sk.n_joints, 4)  # one batch dimension given as a number


def test_finite_extremes_solve_or_raise_never_nan() -> None:
    sk = make_rig()
    pose = sk.rest_pose()
    huge_scale = sk.rest_pose()
    huge_scale.scales[0] = 1e300
    for p, t in ((pose, [1e154, 0.0, 0.0]), (pose, [1e-300, 0.0, 0.0]), (huge_scale, [1.0, 1.0, 1.0]),
                 (pose, [-1e300, 1e300, 0.0])):
        for call in (lambda p, t: kinema.solve_two_bone(sk, p, ARM, t),
                     lambda p, t: kinema.solve_ccd(sk, p, CHAIN, t), lambda p, t: kinema.solve_fabrik(sk, p, CHAIN, t),
                     lambda p, t: kinema.solve_fabrik_tree(sk, p, {"c5": t, "b0": t}),
                     lambda p, t: kinema.solve_dls(sk, p, [kinema.PositionGoal("c5", t), kinema.PoseGoal()])):
            try:
                res = call(p, t)
            except kinema.KinemaError:
                continue
            assert np.all(np.isfinite(res.pose.rotations)) and np.all(np.isfinite(res.pose.translations))
            assert np.all(np.isfinite(res.error))


@pytest.mark.parametrize("n", [3, PARALLEL_MIN_ITEMS + 5])
def test_two_bone_checks_the_rows_it_solves_serial_and_parallel(n: int) -> None:
    """Two-bone reads one pose row when every item starts from the same pose, all rows otherwise, and checks each
    item's output on the item's own thread: a NaN in the last row of a per-item pose is refused, and one
    overflowing target among finite ones raises the overflow error (serial and parallel drivers)."""
    sk = make_rig()
    tg = targets_for(sk, n, "c3")
    per_item = kinema.Pose(*(np.broadcast_to(a, (n,) + a.shape).copy() for a in
                             (sk.rest_pose().translations, sk.rest_pose().rotations, sk.rest_pose().scales)))
    per_item.rotations[-1, 2, 3] = np.nan
    with pytest.raises(kinema.SolverInputError, match=r"rotations \(first at index \(" + str(n - 1)):
        kinema.solve_two_bone(sk, per_item, ARM, tg)
    big = tg.copy()
    big[n - 2] = [1e155, 0.0, 0.0]  # the error |end - target| overflows: 1e155 squared
    for pose in (sk.rest_pose(), kinema.Pose(*(np.nan_to_num(a, nan=1.0) for a in
                                               (per_item.translations, per_item.rotations, per_item.scales)))):
        with pytest.raises(kinema.SolverInputError, match="overflowed float64"):
            kinema.solve_two_bone(sk, pose, ARM, big)
        res = kinema.solve_two_bone(sk, pose, ARM, tg)  # the same batch without it solves
        assert np.all(np.isfinite(res.error)) and np.all(np.isfinite(res.pose.rotations))


# ------------------------------------------------------------------ weight, out, moved
def test_weight_zero_keeps_the_input_and_weight_blends() -> None:
    sk = make_rig()
    pose = sk.rest_pose()
    tg = targets_for(sk, 6, "c5")
    fk0 = kinema.forward_kinematics(sk, pose).positions
    for solve in (lambda w: kinema.solve_ccd(sk, pose, CHAIN, tg, weight=w),
                  lambda w: kinema.solve_fabrik(sk, pose, CHAIN, tg, weight=w),
                  lambda w: kinema.solve_fabrik_tree(sk, pose, {"c5": tg}, weight=w),
                  lambda w: kinema.solve_chains(sk, pose, [kinema.Goal(CHAIN, tg)], weight=w)):
        zero = solve(0.0)
        np.testing.assert_array_equal(zero.pose.rotations, np.broadcast_to(pose.rotations, zero.pose.rotations.shape))
        assert not np.any(zero.state["moved"])
        want = np.linalg.norm(fk0[sk.index("c5")] - tg, axis=-1)
        np.testing.assert_allclose(np.asarray(zero.error).reshape(-1), want, rtol=0, atol=1e-12)
        full, half = solve(1.0), solve(np.full(6, 0.5))
        j = sk.indices(CHAIN[:-1])
        ang_full = R.angle_between(pose.rotations[j], full.pose.rotations[:, j])
        ang_half = R.angle_between(pose.rotations[j], half.pose.rotations[:, j])
        np.testing.assert_allclose(ang_half, 0.5 * ang_full, rtol=1e-9, atol=1e-12)
        fk = kinema.forward_kinematics(sk, half.pose).positions[:, sk.index("c5")]  # the error is truthful
        np.testing.assert_allclose(np.asarray(half.error).reshape(-1), np.linalg.norm(fk - tg, axis=-1), atol=1e-12)


@pytest.mark.parametrize("fixed_root", [True, False])
def test_weight_blends_when_targets_widen_the_pose_batch(fixed_root: bool) -> None:
    """A pose of batch (2, 1) against targets (2, 3) solves a (2, 3) batch; with a weight the blend reads each
    item's own input: the same numbers as the pose broadcast to (2, 3) beforehand, bit for bit."""
    sk = make_rig()
    rng = np.random.default_rng(5)
    pose = sk.rest_pose((2, 1))
    pose.rotations[...] = R.multiply(pose.rotations, R.from_rotvec(rng.normal(size=(2, 1, sk.n_joints, 3)) * 0.2))
    tg = targets_for(sk, 6, "c5").reshape(2, 3, 3)
    full = pose.broadcast((2, 3))
    weight = np.array([0.25, 0.5, 1.0])
    for solve in (lambda p: kinema.solve_ccd(sk, p, CHAIN, tg, weight=weight, fixed_root=fixed_root),
                  lambda p: kinema.solve_fabrik(sk, p, CHAIN, tg, weight=weight, fixed_root=fixed_root),
                  lambda p: kinema.solve_fabrik_tree(sk, p, {"c5": tg}, weight=weight, fixed_root=fixed_root),
                  lambda p: kinema.Rig(sk, [kinema.Step("a", kinema.CCD(sk, CHAIN), weight=0.5)]).solve(p, {"a": tg})):
        widened, given = solve(pose), solve(full)
        assert widened.pose.rotations.shape == (2, 3, sk.n_joints, 4)
        np.testing.assert_array_equal(widened.pose.rotations, given.pose.rotations)
        np.testing.assert_array_equal(np.broadcast_to(widened.pose.translations, given.pose.translations.shape),
                                      given.pose.translations)
        if isinstance(widened, kinema.SolveResult):  # (a Rig reports per step)
            np.testing.assert_array_equal(widened.error, given.error)


def test_a_batch_of_one_option_makes_a_batch_of_one() -> None:
    """Per-item options broadcast with the pose and the targets in every solver: a ``(1,)`` weight (or two-bone's
    ``soft`` or ``margin``) on one pose is a batch of one, with the unbatched solve's numbers bit for bit
    (two-bone used to read a ``(1,)`` option as one value for all and return an unbatched result)."""
    sk = make_rig()
    pose = sk.rest_pose()
    tg = targets_for(sk, 1, "c5")[0]
    tg_arm = targets_for(sk, 1, "c3")[0]
    solves = [lambda **kw: kinema.solve_ccd(sk, pose, CHAIN, tg, **kw),
              lambda **kw: kinema.solve_fabrik(sk, pose, CHAIN, tg, **kw),
              lambda **kw: kinema.solve_fabrik_tree(sk, pose, {"c5": tg}, **kw),
              lambda **kw: kinema.solve_chains(sk, pose, [kinema.Goal(CHAIN, tg)], **kw),
              lambda **kw: kinema.solve_two_bone(sk, pose, ARM, tg_arm, **kw),
              lambda **kw: kinema.solve_dls(sk, pose, [kinema.PositionGoal("c5", tg)], **kw)]
    options = [{"weight": 0.5}] * 6 + [{"soft": 0.2}, {"margin": 0.01}]
    for solve, opts in zip(solves + [solves[4]] * 2, options, strict=True):
        (name, value), = opts.items()
        one = solve(**opts)
        batch = solve(**{name: [value]})
        assert one.pose.rotations.shape == (sk.n_joints, 4)
        assert batch.pose.rotations.shape == (1, sk.n_joints, 4), (name, solve)
        # (solve_chains' error is per goal: (*batch, G))
        assert np.shape(batch.error) == (1,) + np.shape(one.error) and np.shape(batch.reached) == np.shape(batch.error)
        np.testing.assert_array_equal(batch.pose.rotations[0], one.pose.rotations)
        np.testing.assert_array_equal(batch.error[0], one.error)


def test_limits_hold_after_a_partial_weight_blend() -> None:
    """A blend part way (0 < weight < 1) between an input inside the limits and a solve inside them can leave a
    swing cone or an Euler box (slerp is not closed in them): every solver clamps the blended joints again, so
    the limits hold after every solve at every weight (1e-9 rad), and weight 0 still gives the input back."""
    sk = make_rig()
    rng = np.random.default_rng(11)
    n = 40
    pose = sk.rest_pose((n,))
    pose.rotations[:, 1:] = R.multiply(pose.rotations[:, 1:], R.from_rotvec(rng.normal(size=(n, 7, 3)) * 0.8))
    for name, lim in LIMITS.items():  # inputs inside the limits
        j = sk.index(name)
        pose.rotations[:, j] = lim.clamp(pose.rotations[:, j], sk.rotations[j])
    tg = targets_for(sk, n, "c5", seed=4)
    weight = rng.uniform(0.05, 0.95, n)
    weight[:4] = (0.0, 1.0, 0.0, 1.0)
    solves = {
        "ccd": lambda: kinema.solve_ccd(sk, pose, CHAIN, tg, limits=LIMITS, weight=weight),
        "fabrik": lambda: kinema.solve_fabrik(sk, pose, CHAIN, tg, limits=LIMITS, weight=weight),
        "tree": lambda: kinema.solve_fabrik_tree(sk, pose, {"c5": tg}, limits=LIMITS, weight=weight),
        "chains": lambda: kinema.solve_chains(sk, pose, [kinema.Goal(CHAIN, tg, limits=LIMITS)], weight=weight),
        "dls": lambda: kinema.solve_dls(sk, pose, [kinema.PositionGoal("c5", tg)], limits=LIMITS, weight=weight),
    }
    for label, solve in solves.items():
        res = solve()
        for name, lim in LIMITS.items():
            j = sk.index(name)
            worst = float(np.max(lim.violation(res.pose.rotations[:, j], sk.rotations[j])))
            assert worst <= 1e-9, (label, name, worst)
        if label == "dls":  # (DLS starts from the input normalised: the same rotations up to rounding)
            assert np.all(R.angle_between(res.pose.rotations[[0, 2]], pose.rotations[[0, 2]]) < 1e-12)
        else:
            np.testing.assert_array_equal(res.pose.rotations[[0, 2]], pose.rotations[[0, 2]], err_msg=label)


def test_out_is_written_and_moved_means_the_pose_changed() -> None:
    sk = make_rig()
    tg = targets_for(sk, 4, "c5")
    for solver in (kinema.TwoBone(sk, ARM), kinema.CCD(sk, CHAIN), kinema.FABRIK(sk, CHAIN)):
        out = sk.rest_pose((4,))
        res = solver.solve(sk.rest_pose(), tg, out=out)
        assert res.pose is out
        changed = np.any(out.rotations != sk.rest_pose().rotations, axis=(-1, -2))
        np.testing.assert_array_equal(res.state["moved"], changed)
        # a solved pose solved again from itself does not move
        again = solver.solve(res.pose, kinema.forward_kinematics(sk, res.pose).positions[:, int(solver.joints[-1])])
        if not isinstance(solver, kinema.TwoBone):
            assert not np.any(again.state["moved"])


# ------------------------------------------------------------------ the cache
def test_solver_cache_is_bounded_and_never_returns_a_stale_skeleton() -> None:
    SOLVERS.clear()
    sk = make_rig()
    pose = sk.rest_pose()
    for k in range(SOLVER_CACHE_MAX + 40):
        kinema.solve_ccd(sk, pose, CHAIN, [0.5, 1.5, 0.2], iterations=k % 300 + 1)
    assert len(SOLVERS) <= SOLVER_CACHE_MAX
    # A skeleton freed and a new one made (often at the same address): the new one's own chain is solved.
    for seed in range(20):
        a = make_rig(seed)
        kinema.solve_fabrik(a, a.rest_pose(), CHAIN, [0.5, 1.5, 0.2])
        del a
        gc.collect()
        b = make_rig(seed + 100)
        got = kinema.solve_fabrik(b, b.rest_pose(), CHAIN, [0.5, 1.5, 0.2])
        want = kinema.FABRIK(b, CHAIN).solve(b.rest_pose(), [0.5, 1.5, 0.2])
        np.testing.assert_array_equal(got.pose.rotations, want.pose.rotations)


def test_solver_cache_misses_from_many_threads_at_once() -> None:
    """Free functions called from several threads, each building new solvers past the cache's bound: no
    KeyError (two threads evicting at once both took the same oldest key), and the bound holds."""
    import inspect
    import threading
    import time

    from kinema._solve import SolverCache

    class SlowToDelete(dict):  # type: ignore[type-arg]
        """Deleting lets the other threads run first (where a switch hit mid-eviction)."""

        def __delitem__(self, key: Any) -> None:
            time.sleep(0.001)
            super().__delitem__(key)

    cache = SolverCache(maxsize=4)
    cache._items = SlowToDelete()
    sk = make_rig()
    defaults = inspect.signature(kinema.CCD).parameters
    rest = tuple(defaults[name].default for name in kinema.CCD.cache_options[1:])  # all but iterations
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(offset: int) -> None:
        start.wait()
        try:
            for k in range(30):
                cache.get(kinema.CCD, sk, (CHAIN, 1 + (offset * 1000 + k) % 997, *rest), None)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(cache) <= 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_process_forked_while_a_solver_is_cached_can_cache_solvers() -> None:
    """The child of a fork during another thread's insert into the solver cache has no such thread: the lock it
    inherited held would never be released, and its first cache miss would wait for ever."""
    script = fork_while_held("""
        import kinema
        from kinema._solve import SOLVERS
        sk = kinema.Skeleton(["a", "b", "c"], [-1, 0, 1], [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    """, "SOLVERS._lock", """
        done = []
        solve = threading.Thread(target=lambda: done.append(kinema.solve_ccd(sk, sk.rest_pose(), ("a", "c"),
                                                                             [1.0, 1.0, 0.0])))
        solve.start()
        solve.join(timeout=60)  # a cache miss: the child's first insert
        ok = bool(done)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "child 0"


def test_solver_cache_keeps_equal_arguments_of_other_types_apart() -> None:
    """1, 1.0 and True are equal and hash alike, but the constructors refuse some of them: a cached solver
    built from one must not answer for another (the key carries the arguments' types)."""
    sk = make_rig()
    pose = sk.rest_pose()
    kinema.solve_ccd(sk, pose, CHAIN, [0.5, 1.5, 0.2], iterations=1)
    with pytest.raises(kinema.SolverInputError, match="iterations"):
        kinema.solve_ccd(sk, pose, CHAIN, [0.5, 1.5, 0.2], iterations=True)
    with pytest.raises(kinema.SolverInputError, match="iterations"):
        kinema.solve_ccd(sk, pose, CHAIN, [0.5, 1.5, 0.2], iterations=1.0)
    kinema.solve_two_bone(sk, pose, ARM, [0.5, 1.5, 0.2], twist_spread=0)
    with pytest.raises(kinema.KinemaError, match="twist_spread"):
        kinema.solve_two_bone(sk, pose, ARM, [0.5, 1.5, 0.2], twist_spread=False)


def test_a_pose_whose_arrays_disagree_on_the_joints_is_refused() -> None:
    """Pose's constructor ties its three arrays' joint axes together; one replaced afterwards must be refused
    with a ShapeError naming it, never read past its end by a kernel (they index without bounds checks)."""
    sk = make_rig()
    for name in ("translations", "rotations", "scales"):
        pose = sk.rest_pose()
        with pytest.raises(kinema.ShapeError, match=name):
            setattr(pose, name, getattr(pose, name)[:-1])  # the setter checks as the constructor does
        # The solvers' own guard, for a pose built without checks (Pose._trusted, as the solvers build theirs).
        arrays = {a: getattr(pose, a) for a in ("translations", "rotations", "scales")}
        arrays[name] = arrays[name][:-1]
        pose = kinema.Pose._trusted(arrays["translations"], arrays["rotations"], arrays["scales"])
        for solver in (kinema.TwoBone(sk, ARM), kinema.CCD(sk, CHAIN), kinema.FABRIK(sk, CHAIN)):
            with pytest.raises(kinema.ShapeError, match=name if name != "translations" else "pose"):
                solver.solve(pose, [0.5, 1.5, 0.2])


def test_validate_checks_a_pose_against_the_solver() -> None:
    sk = make_rig()
    solver = kinema.CCD(sk, CHAIN)
    pose = sk.rest_pose()
    assert solver.validate(pose) is pose
    with pytest.raises(kinema.ShapeError):
        solver.validate(kinema.Pose(np.zeros((3, 3)), np.tile([0.0, 0, 0, 1], (3, 1))))
    bad = sk.rest_pose()
    bad.scales[2] = [1.0, 2.0, 1.0]
    with pytest.raises(kinema.SolverInputError, match="non-uniform"):
        solver.validate(bad)
    bad = sk.rest_pose()
    bad.rotations[5, 0] = np.nan
    with pytest.raises(kinema.SolverInputError, match="NaN"):
        solver.validate(bad)
    with pytest.raises(kinema.SolverInputError, match="Pose"):
        solver.validate("not a pose")


# ------------------------------------------------------------------ numba
def test_numba_is_a_tested_minor_and_the_hooks_we_use_exist() -> None:
    """numba is pinned to the minors tested (pyproject.toml); the parts of numba kinema relies on beyond
    ``njit`` fail here first if a release changes them: the ``_nrt`` option (``njit(borrows=True)``) and
    ``numba.parallel_chunksize``, and the cache-file writer kinema makes whole
    (``numba.core.caching.IndexDataCacheFile._open_for_write``, tests/test_precompile.py)."""
    import inspect

    import numba
    import numba.core.caching
    import tomllib

    pins = [d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
            if d.startswith("numba")]
    assert pins == ["numba>=0.68,<0.69"]
    assert numba.__version__.startswith("0.68.")
    assert callable(numba.set_parallel_chunksize)
    with numba.parallel_chunksize(1):
        assert numba.get_parallel_chunksize() == 1
    from kinema._kernels._jit import njit

    @njit(borrows=True)
    def total(a):  # type: ignore[no-untyped-def]
        return a.sum()

    assert total(np.arange(4.0)) == 6.0
    writer = numba.core.caching.IndexDataCacheFile._open_for_write
    numbas = writer.__wrapped_writer__  # kinema's wrapper is in place, around numba's own writer, whose
    assert list(inspect.signature(numbas).parameters) == ["self", "filepath"]  # contract it relies on:
    assert ".tmp." in inspect.getsource(numbas) and "os.replace(" in inspect.getsource(numbas)  # temp + rename
    if hasattr(total, "targetoptions"):
        assert total.targetoptions.get("_nrt") is False
        # njit_like (two-bone's basic drivers) reads the options back from ``targetoptions``: a copy keeps them.
        from kinema._kernels import two_bone
        from kinema._kernels._jit import njit_like

        assert njit_like(total, total.py_func).targetoptions.get("_nrt") is False
        inline = njit(inline=True)(total.py_func)
        assert inline.targetoptions.get("inline") == "always"
        assert njit_like(inline, total.py_func).targetoptions.get("inline") == "always"
        basic_range = two_bone.DRIVERS_BASIC.serial.py_func.__globals__["solve_range"]
        basic_item = basic_range.py_func.__globals__["_solve_item"]
        assert basic_item.targetoptions.get("_nrt") is False  # the copy borrows like _solve_item


# ------------------------------------------------------------------ two-bone with a hinge
def _hinge_arm_rig() -> tuple[kinema.Skeleton, tuple[str, str, str], Hinge]:
    """A shoulder under a rotated, scaled parent, an elbow with a rest rotation, a hinge about a tilted axis."""
    rot = R.from_rotvec([[0.3, -0.5, 0.2], [0.1, 0.2, -0.3], [0.4, 0.1, 0.0], [0.0, 0.0, 0.0]])
    sk = kinema.Skeleton(["world", "shoulder", "elbow", "wrist"], [-1, 0, 1, 2],
                         [[0.5, 1.0, -0.2], [0.1, 0.3, 0.0], [0.05, 0.9, 0.1], [0.0, 0.7, -0.05]], rot,
                         [[1.3] * 3, [1.0] * 3, [1.0] * 3, [1.0] * 3])
    axis = np.array([1.0, 0.2, 0.1])
    return sk, ("shoulder", "elbow", "wrist"), Hinge(tuple(axis / np.linalg.norm(axis)), 0.1, 2.2)


def test_two_bone_honours_a_hinge_on_the_lower_joint_exactly() -> None:
    sk, arm, hinge = _hinge_arm_rig()
    lim = {"elbow": hinge}
    rng = np.random.default_rng(5)
    n = 200
    # Targets made by FK of poses inside the hinge (random shoulder, elbow angle in range): all reachable.
    pose = sk.rest_pose((n,))
    pose.rotations[:, 1] = R.multiply(pose.rotations[:, 1], R.from_rotvec(rng.normal(size=(n, 3)) * 0.8))
    angles = rng.uniform(hinge.min_angle + 0.05, hinge.max_angle - 0.05, n)
    pose.rotations[:, 2] = R.multiply(sk.rotations[2], R.from_axis_angle(hinge.axis, angles))
    tg = kinema.forward_kinematics(sk, pose).positions[:, 3]
    poles = tg + rng.normal(size=(n, 3))
    res = kinema.solve_two_bone(sk, sk.rest_pose(), arm, tg, poles, limits=lim)
    fk = kinema.forward_kinematics(sk, res.pose).positions
    reach = np.linalg.norm(fk[:, 3] - fk[:, 1], axis=-1)
    assert np.all(res.reached) and np.max(res.error) < 1e-9 * np.max(reach)
    np.testing.assert_allclose(np.linalg.norm(fk[:, 3] - tg, axis=-1), res.error, rtol=0, atol=1e-12)
    # the elbow's rest-relative rotation is a turn about the axis, inside the range: the limit leaves it be
    rel = R.multiply(R.inverse(sk.rotations[2]), res.pose.rotations[:, 2])
    axis_part = rel[:, :3] @ np.asarray(hinge.axis)
    np.testing.assert_allclose(np.linalg.norm(rel[:, :3] - axis_part[:, None] * np.asarray(hinge.axis), axis=-1),
                               0.0, atol=1e-12)
    theta = 2.0 * np.arctan2(axis_part, rel[:, 3])
    assert np.all(theta >= hinge.min_angle - 1e-12) and np.all(theta <= hinge.max_angle + 1e-12)
    assert not np.any(res.limits_hit)
    # bone lengths kept to 1e-9 relative
    fk0 = kinema.forward_kinematics(sk, sk.rest_pose()).positions
    for a, b in ((1, 2), (2, 3)):
        l0 = np.linalg.norm(fk0[b] - fk0[a])
        np.testing.assert_allclose(np.linalg.norm(fk[:, b] - fk[:, a], axis=-1), l0, rtol=1e-9)
    # the elbow bends toward the pole: the elbow and the pole on the same side of the shoulder-end line
    u = (fk[:, 3] - fk[:, 1]) / reach[:, None]
    side_e = fk[:, 2] - fk[:, 1] - np.sum((fk[:, 2] - fk[:, 1]) * u, axis=-1)[:, None] * u
    side_p = poles - fk[:, 1] - np.sum((poles - fk[:, 1]) * u, axis=-1)[:, None] * u
    assert np.mean(np.sum(side_e * side_p, axis=-1) > 0.0) > 0.9  # not all: the hinge may forbid the pole's side


def test_two_bone_hinge_range_bounds_the_reach() -> None:
    sk, arm, hinge = _hinge_arm_rig()
    solver = kinema.TwoBone(sk, arm, limits={"elbow": hinge, "world": Hinge((1, 0, 0), 0, 1)})  # world: ignored
    fk0 = kinema.forward_kinematics(sk, sk.rest_pose()).positions
    shoulder = fk0[1]
    d = np.array([0.05, 0.1, 0.2, 3.0])  # too close for a 2.2 rad bend, and out of reach
    direction = np.array([0.3, -0.8, 0.5]) / np.linalg.norm([0.3, -0.8, 0.5])
    tg = shoulder + d[:, None] * direction
    res = solver.solve(sk.rest_pose(), tg)
    fk = kinema.forward_kinematics(sk, res.pose).positions
    end_dir = (fk[:, 3] - shoulder) / np.linalg.norm(fk[:, 3] - shoulder, axis=-1)[:, None]
    np.testing.assert_allclose(end_dir, np.broadcast_to(direction, end_dir.shape), atol=1e-9)  # on the line
    assert not np.any(res.reached)
    # all four are bounded by the hinge: even the far one, since min_angle 0.1 keeps the arm from straightening
    np.testing.assert_array_equal(res.limits_hit, [1, 1, 1, 1])
    rel = R.multiply(R.inverse(sk.rotations[2]), res.pose.rotations[:3, 2])
    theta = 2.0 * np.arctan2(rel[:, :3] @ np.asarray(hinge.axis), rel[:, 3])
    np.testing.assert_allclose(theta, hinge.max_angle, atol=1e-9)  # the closest the hinge allows
    for i in range(4):  # a batch equals single solves, bit for bit
        one = solver.solve(sk.rest_pose(), tg[i])
        np.testing.assert_array_equal(one.pose.rotations, res.pose.rotations[i])


def test_two_bone_hinge_out_of_reach_does_not_depend_on_where_the_character_stands() -> None:
    """A target beyond a hinged leg's reach takes the range end of the farthest reach, wherever the character
    stands.  At a reach extreme acos amplified rounding, both roots fell just outside the range and the input
    angle was kept: the same problem a few metres away solved 4 cm worse (a knee snapping between frames)."""
    leg = kinema.Skeleton(["hips", "hip", "knee", "ankle"], [-1, 0, 1, 2],
                          [[0.0, 1.0, 0.0], [0.1, 0.0, 0.0], [0.0, -0.42, 0.03], [0.0, -0.41, 0.0]])
    hinge = Hinge((1, 0, 0), 0, 150, degrees=True)
    solver = kinema.TwoBone(leg, ("hip", "knee", "ankle"), limits={"knee": hinge})
    rng = np.random.default_rng(5)
    places = np.concatenate([[[0.0, 0.0, 0.0], [100.0, 0.0, 37.0], [200.0, 0.0, 74.0], [1000.0, 0.0, 370.0]],
                             rng.uniform(-1000.0, 1000.0, size=(60, 3))])
    pose = leg.rest_pose((len(places),))
    pose.rotations[:, 2] = R.from_axis_angle([1.0, 0.0, 0.0], np.radians(30.0))  # the animated knee at 30 deg
    pose.translations[:, 0] += places
    hip = kinema.forward_kinematics(leg, pose).positions[:, 1]
    res = solver.solve(pose, hip + [0.0, -0.9, 0.05])  # the leg is 0.83 long
    assert not np.any(res.reached) and np.all(res.limits_hit == 1)
    rel = R.multiply(R.inverse(leg.rotations[2]), res.pose.rotations[:, 2])
    knee = 2.0 * np.arctan2(rel[:, 0], rel[:, 3])
    np.testing.assert_allclose(knee, 0.0, rtol=0.0, atol=1e-9)  # straight: the farthest the hinge reaches
    assert np.max(np.abs(res.error - res.error[0])) <= 1e-9
    assert np.all(R.equal(res.pose.rotations[:, 1], res.pose.rotations[0, 1], atol=1e-9))


def test_two_bone_hinge_holds_after_a_partial_weight() -> None:
    """An input elbow outside the hinge (off its axis) blended part way with the solve left the hinge (0.27 rad
    at weight 0.5): it is clamped again, as CCD's and FABRIK's blends are, and counted in ``limits_hit``."""
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose((20,))
    e = sk.index("right_elbow")
    pose.rotations[:, e] = R.from_axis_angle([1.0, 0.0, 0.0], 0.5)  # off the hinge axis (z)
    hinge = Hinge((0, 0, 1), 0, 150, degrees=True)
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    shoulder = kinema.forward_kinematics(sk, pose[0]).positions[sk.index("right_shoulder")]
    target = shoulder + np.array([0.3, -0.1, 0.15])
    weight = np.linspace(0.0, 1.0, 20)
    res = kinema.solve_two_bone(sk, pose, arm, target, limits={"right_elbow": hinge}, weight=weight)
    inside = hinge.violation(res.pose.rotations[1:, e], sk.rotations[e])
    assert float(np.max(inside)) <= 1e-12
    np.testing.assert_array_equal(res.pose.rotations[0], pose.rotations[0])  # weight 0: the input, bit for bit
    assert np.all(res.limits_hit[1:-1] >= 1)
    one = kinema.solve_two_bone(sk, pose[7], arm, target, limits={"right_elbow": hinge}, weight=weight[7])
    np.testing.assert_array_equal(one.pose.rotations, res.pose.rotations[7])


def test_two_bone_refuses_limits_it_cannot_honour() -> None:
    sk, arm, hinge = _hinge_arm_rig()
    with pytest.raises(kinema.SolverInputError, match="Hinge on the lower joint"):
        kinema.TwoBone(sk, arm, limits={"shoulder": SwingTwist((0, 1, 0), 0.5)})
    with pytest.raises(kinema.SolverInputError, match="Hinge on the lower joint"):
        kinema.TwoBone(sk, arm, limits={"elbow": SwingTwist((0, 1, 0), 0.5)})
    with pytest.raises(kinema.SolverInputError, match="Limit"):
        kinema.TwoBone(sk, arm, limits={"elbow": (0, 1)})


_ONE_SIGNATURE = textwrap.dedent("""
    import numpy as np, kinema
    from kinema._kernels import two_bone as k
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    arm = ("right_shoulder", "right_elbow", "right_wrist")
    p = kinema.forward_kinematics(sk, pose).positions[sk.index("right_wrist")]
    solver = kinema.TwoBone(sk, arm, pole=p + [0.0, 0.0, -1.0])
    solver.solve(pose, p + 0.01)                                   # one item (the solver's own copies)
    ro = np.broadcast_to(p + 0.01, (10, 3))                        # a read-only broadcast view, 10 items
    solver.solve(pose, ro)
    solver.solve(pose, np.ascontiguousarray(ro) + 0.0, pole=np.broadcast_to(p, (10, 3)))  # writeable, 10 items
    d = k.drivers_for(k.HAS_POLE)                                  # the drivers these calls take
    print(len(d.serial.py_func.__globals__["solve_range"].signatures), len(d.serial.signatures))
""")


def test_single_and_batched_routes_share_one_compiled_kernel(tmp_path: Path) -> None:
    """numba types read-only arrays apart from writeable ones; the solver layer hands the kernels one array type
    whatever the caller passed, so a single solve and batches (read-only views or not) compile each kernel once
    (a second signature was a second multi-second compile on a cold cache)."""
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        pytest.skip("no compiled signatures without the JIT")
    # compiling on first use (by default these small solves run plain: kinema._kernels._tier)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"), KINEMA_COMPILE="always")
    proc = subprocess.run([sys.executable, "-c", _ONE_SIGNATURE], capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["1", "1"], proc.stdout


def test_every_solver_runs_the_one_driver_template() -> None:
    """Two-bone (3D and 2D), CCD, FABRIK and DLS have no drivers of their own: each one's serial and
    parallel driver is the shared template's code (kinema._kernels.drivers) bound to its range function."""
    from kinema._kernels import ccd, dls, drivers, fabrik, two_bone

    ranges = {ccd.DRIVERS: ccd.ccd_range, dls.DRIVERS: dls.dls_range, fabrik.DRIVERS: fabrik.solve_range,
              two_bone.DRIVERS: two_bone._solve_range, two_bone.DRIVERS_2D: two_bone._solve_2d_range}
    assert len(ranges) == 5
    # two-bone's basic drivers: the same template on a copy of the same range function (drivers.specialise)
    basic = getattr(two_bone.DRIVERS_BASIC.serial, "py_func", two_bone.DRIVERS_BASIC.serial)
    assert basic.__code__ is drivers._serial.__code__
    copy = basic.__globals__["solve_range"]
    assert getattr(copy, "py_func", copy).__code__ is getattr(two_bone._solve_range, "py_func",
                                                              two_bone._solve_range).__code__
    for pair, solve_range in ranges.items():
        assert isinstance(pair, drivers.Drivers)
        for compiled, template in ((pair.serial, drivers._serial), (pair.parallel, drivers._parallel)):
            py = getattr(compiled, "py_func", compiled)
            assert py.__code__ is template.__code__
            assert py.__globals__["solve_range"] is solve_range
        if hasattr(pair.serial, "targetoptions"):  # the single solve's entry borrows its arrays (not under NO JIT)
            assert pair.serial.targetoptions["_nrt"] is False and pair.parallel.targetoptions["_nrt"] is True


def test_kernel_helpers_compile_without_python_wrappers_and_refuse_python_calls() -> None:
    """``njit(helper=True)`` (a kernel only other kernels call) builds numba's dispatcher with its
    ``no_cpython_wrapper`` / ``no_cfunc_wrapper`` options: a compiled caller gets the right number, a call
    from Python raises :class:`KernelHelperCalled` instead of jumping to the missing wrapper, and the
    specialised copies of two-bone's helpers stay helpers."""
    from kinema._kernels import quat, two_bone
    from kinema._kernels._jit import KernelHelperCalled, njit, njit_like

    @njit(helper=True)
    def twice(x):  # type: ignore[no-untyped-def]
        return 2.0 * x

    @njit
    def caller(x):  # type: ignore[no-untyped-def]
        return twice(x) + 1.0

    assert caller(3.0) == 7.0
    if not hasattr(twice, "targetoptions"):  # NUMBA_DISABLE_JIT=1: plain functions
        assert twice(3.0) == 6.0
        return
    assert twice.targetoptions["no_cpython_wrapper"] is True
    assert twice.targetoptions["no_cfunc_wrapper"] is True
    with pytest.raises(KernelHelperCalled, match="twice is a kernel helper"):
        twice(3.0)
    with pytest.raises(KernelHelperCalled, match="qmul"):
        quat.qmul((0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0, 1.0))
    copy = njit_like(twice, twice.py_func)
    assert copy.targetoptions["no_cpython_wrapper"] is True
    basic_range = two_bone.DRIVERS_BASIC.serial.py_func.__globals__["solve_range"]
    with pytest.raises(KernelHelperCalled):
        basic_range(0, 0, ())
    assert "no_cpython_wrapper" not in two_bone.DRIVERS_BASIC.serial.targetoptions  # drivers are called from Python


def test_out_may_be_a_pose_made_without_per_item_scales() -> None:
    """``out=pose`` for a batched pose whose scales (or, for a solver writing rotations only, translations) are one
    unbatched row: the solve writes the rotations in place with the numbers of a fresh output, bit for bit (it
    was refused: "out.scales: expected (4, J, 3)").  A read-only ``out`` says so."""
    sk = make_rig()
    rng = np.random.default_rng(2)
    for name, solver, kw in cases(sk) + [("dls", kinema.DLS(sk, [kinema.PositionGoal("c5", [0.0, 0.0, 0.0])]), {})]:
        end = sk.names[int(solver.joints[-1])]
        tg = targets_for(sk, 4, end)
        r = R.multiply(sk.rest_pose((4,)).rotations, R.from_rotvec(rng.normal(size=(4, sk.n_joints, 3)) * 0.1))
        pose = kinema.Pose(sk.rest_pose().translations, r)  # translations and scales: one (J, 3) row each
        if name == "dls":
            fresh, again = solver.solve(pose, [tg]), solver.solve(pose, [tg], out=pose)
        else:
            fresh = solver.solve(pose, tg, **kw)
            if "ccd" in name or "fabrik" in name:  # (these write translations: out needs them per item)
                pose = kinema.Pose(np.broadcast_to(pose.translations, (4, sk.n_joints, 3)).copy(), pose.rotations)
            again = solver.solve(pose, tg, out=pose, **kw)
        assert again.pose is pose, name
        np.testing.assert_array_equal(pose.rotations, fresh.pose.rotations)
        np.testing.assert_array_equal(np.asarray(again.error), np.asarray(fresh.error))
    frozen = sk.rest_pose((4,))
    frozen.rotations.flags.writeable = False
    with pytest.raises(kinema.ShapeError, match="read-only"):
        kinema.solve_ccd(sk, sk.rest_pose((4,)), CHAIN, targets_for(sk, 4, "c5"), out=frozen)


def test_huge_pose_quaternions_solve_as_their_unit_rotations() -> None:
    """A pose quaternion of any finite size is its rotation in every solver (one of components near 1e300 was
    normalised to zero: the joint read as no rotation at all, and two-bone's error grew from 0.27 to 0.79)."""
    sk = make_rig()
    pose = sk.rest_pose()
    pose.rotations[...] = R.from_rotvec(np.random.default_rng(4).normal(size=(sk.n_joints, 3)) * 0.3)
    big = pose.copy()
    big.rotations[[0, 2, 3]] *= np.array([1e300, 3e200, 2e155])[:, None]
    tg = targets_for(sk, 1, "c5")[0]
    # (the normalised quaternions differ by an ulp: DLS, which stops within its tolerance 1e-6 on a redundant
    # chain, lands that much apart)
    for solve, atol in ((lambda p: kinema.solve_two_bone(sk, p, ARM, targets_for(sk, 1, "c3")[0]), 1e-12),
                        (lambda p: kinema.solve_ccd(sk, p, CHAIN, tg, limits=LIMITS), 1e-12),
                        (lambda p: kinema.solve_fabrik(sk, p, CHAIN, tg, limits=LIMITS), 1e-12),
                        (lambda p: kinema.solve_dls(sk, p, [kinema.PositionGoal("c5", tg)], limits=LIMITS), 1e-6)):
        unit, huge = solve(pose), solve(big)
        np.testing.assert_allclose(R.angle_between(huge.pose.rotations, unit.pose.rotations), 0.0, rtol=0, atol=atol)
        assert abs(float(huge.error) - float(unit.error)) <= atol
    np.testing.assert_allclose(kinema.forward_kinematics(sk, big).positions,
                               kinema.forward_kinematics(sk, pose).positions, rtol=0, atol=1e-12)
