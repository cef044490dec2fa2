"""Forward kinematics and world_to_local refuse NaN and inf, and finite input whose results overflow.

Both returned NaN silently for a NaN or inf in the pose (skinned_positions refused the same pose), and FK
returned inf and NaN for finite scales of 1e200 on a 3-joint chain.  The kernels now report it from inside
their loops (see ``kinema._kernels.fk``); the message names the array and the first bad index, as the solvers'
``check_pose_finite`` does, or says the world transforms overflowed.
"""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema import Pose, Skeleton, SolverInputError, forward_kinematics, world_to_local
from kinema.fk import FK_PARALLEL_MIN_JOINTS

SK = kinema.samples.humanoid()
NJ = SK.n_joints
LEAVES = [j for j in range(NJ) if not SK.children(j)]
INNER = [j for j in range(NJ) if SK.children(j)]
#: A batch that runs the parallel drivers.
N_PAR = FK_PARALLEL_MIN_JOINTS // NJ + 3


def _chain(n: int) -> Skeleton:
    t = [[0.0, 0.0, 0.0]] + [[1.0, 0.0, 0.0]] * (n - 1)
    return Skeleton([f"j{i}" for i in range(n)], [-1] + list(range(n - 1)), t)


def _pose(batch: tuple[int, ...], scales: str) -> Pose:
    pose = SK.rest_pose(batch)
    if scales == "non-uniform":
        pose.scales = np.broadcast_to([1.0, 1.5, 0.5], batch + (NJ, 3)).copy()
    return pose


@pytest.mark.parametrize("matrices", [False, True])
@pytest.mark.parametrize("scales", ["uniform", "non-uniform"])
@pytest.mark.parametrize("batch", [(), (3,), (N_PAR,)], ids=["one", "serial", "parallel"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_nan_or_inf_anywhere_in_the_pose_is_named(batch: tuple[int, ...], scales: str, matrices: bool,
                                                    bad: float) -> None:
    """Every array, every component, leaves and inner joints (a leaf's rotation or scale reaches no other joint)."""
    cases = [("translations", j, c) for j in (0, INNER[-1], LEAVES[0]) for c in range(3)]
    cases += [("rotations", j, c) for j in (0, INNER[-1], LEAVES[-1]) for c in range(4)]
    cases += [("scales", j, c) for j in (0, LEAVES[0], LEAVES[-1]) for c in range(3)]
    item = (batch[0] - 1,) if batch else ()
    for name, j, c in cases:
        pose = _pose(batch, scales)
        getattr(pose, name)[item + (j, c)] = bad
        where = item + (j, c)
        with pytest.raises(SolverInputError, match=rf"forward_kinematics: pose has NaN or inf in its {name} "
                                                   rf"\(first at index {re_tuple(where)}\)"):
            forward_kinematics(SK, pose, matrices=matrices)


def re_tuple(t: tuple[int, ...]) -> str:
    return "\\(" + ", ".join(str(i) for i in t) + (",\\)" if len(t) == 1 else "\\)")


def test_finite_scales_that_overflow_are_refused_with_the_solvers_wording() -> None:
    sk = _chain(3)
    pose = Pose(sk.translations, sk.rotations, np.full((3, 3), 1e200))
    with pytest.raises(SolverInputError, match=r"forward_kinematics: the world transforms overflowed float64: "
                                               r"the pose's values are too large"):
        forward_kinematics(sk, pose)
    # the non-uniform path and the batch (naming the item), serial and parallel
    s = np.ones((2, 3, 3))
    s[1] = [1e200, 1e200, 2e200]
    with pytest.raises(SolverInputError, match=r"overflowed float64 \(item \(1,\)\): .*values are too large"):
        forward_kinematics(sk, Pose(sk.translations, sk.rotations, s))
    big = _chain(64)
    s = np.ones((FK_PARALLEL_MIN_JOINTS // 64 + 5, 64, 3))
    s[-2, :, :] = 1e20  # 1e20 ** 64 overflows; every other item is fine
    with pytest.raises(SolverInputError, match=rf"overflowed float64 \(item \({s.shape[0] - 2},\)\)"):
        forward_kinematics(big, Pose(big.translations, big.rotations, s), matrices=True)
    # translations whose sum overflows
    t = np.array(sk.translations)
    t[:, 0] = 1e308
    with pytest.raises(SolverInputError, match="overflowed float64"):
        forward_kinematics(sk, Pose(t, sk.rotations))


def test_finite_results_near_the_top_of_float64_are_not_refused() -> None:
    """The kernels' check adds results up; a sum that overflows from finite results is no error."""
    sk = _chain(2)
    t = np.array([[1.5e308, 1.5e308, -1.0e308], [0.0, 0.0, 1.0e308]])  # positions finite, their sums are not
    for matrices in (False, True):
        fk = forward_kinematics(sk, Pose(t, sk.rotations, np.ones((2, 3))), matrices=matrices)
        np.testing.assert_array_equal(fk.positions, [[1.5e308, 1.5e308, -1.0e308], [1.5e308, 1.5e308, 0.0]])
        assert np.all(np.isfinite(fk.rotations))
    # and the ordinary results are unchanged by the check: FK of a batch equals its items, serial and parallel
    rng = np.random.default_rng(5)
    pose = Pose(rng.normal(size=(N_PAR, NJ, 3)), rng.normal(size=(N_PAR, NJ, 4)))
    whole = forward_kinematics(SK, pose)
    for i in (0, N_PAR - 1):
        np.testing.assert_array_equal(forward_kinematics(SK, pose[i]).positions, whole.positions[i])


@pytest.mark.parametrize("batch", [(), (N_PAR,)], ids=["serial", "parallel"])
@pytest.mark.parametrize("scales", ["uniform", "non-uniform"])
def test_world_to_local_names_a_nan_or_inf_input(batch: tuple[int, ...], scales: str) -> None:
    fk = forward_kinematics(SK, SK.rest_pose(batch))
    s = np.ones(batch + (NJ, 3)) if scales == "uniform" else np.broadcast_to([1.0, 2.0, 0.5], batch + (NJ, 3)).copy()
    item = (batch[0] - 1,) if batch else ()
    for name, leaf, c in (("world_rotations", LEAVES[0], 3), ("world_positions", LEAVES[-1], 1),
                          ("world_positions", 0, 0), ("scales", LEAVES[-1], 2), ("scales", LEAVES[0], 0)):
        for bad in (np.nan, np.inf):
            args = {"world_rotations": fk.rotations.copy(), "world_positions": fk.positions.copy(),
                    "scales": s.copy()}
            args[name][item + (leaf, c)] = bad
            with pytest.raises(SolverInputError, match=rf"world_to_local: {name} contains NaN or inf "
                                                       rf"\(first at index {re_tuple(item + (leaf, c))}\)"):
                world_to_local(SK, args["world_rotations"], args["world_positions"], args["scales"])


def test_world_to_local_refuses_finite_input_whose_results_overflow() -> None:
    sk = _chain(3)
    q = np.tile([0.0, 0.0, 0.0, 1.0], (3, 1))
    p = np.array([[0.0, 0.0, 0.0], [-1e308, 0.0, 0.0], [1e308, 0.0, 0.0]])  # p2 - p1 overflows
    with pytest.raises(SolverInputError, match="world_to_local: the world transforms overflowed float64"):
        world_to_local(sk, q, p)
    p = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    with pytest.raises(SolverInputError, match=r"world_to_local: the world transforms overflowed float64 "
                                               r"\(item \(1,\)\)"):  # world scales 1e200 * 1e200
        world_to_local(sk, np.stack([q, q]), np.stack([p, p]),
                       np.stack([np.ones((3, 3)), np.full((3, 3), 1e200)]))
    # the singular scale keeps its own message (its children's translations are inf too)
    with pytest.raises(SolverInputError, match="has no inverse"):
        world_to_local(sk, q, p, np.array([[1.0] * 3, [0.0] * 3, [1.0] * 3]))
    back = world_to_local(sk, q, p)  # and a finite one still comes back
    np.testing.assert_array_equal(back.translations, sk.translations)
