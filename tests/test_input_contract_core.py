"""The input contract of the solver core: what a call accepts never depends on the calls before it, a set never
stands for a sequence (its order is arbitrary), and a batch that does not broadcast names the argument at fault.

* The free functions' solver cache (``kinema._solve.SOLVERS``) keyed a tuple argument by value and its top-level
  type only: ``(3, 5) == (3.0, 5.0) == (True, 5)`` hash alike, so after an accepted ``(3, 5)`` the refused
  ``(3.0, 5.0)`` found its solver and was accepted too.
* ``kinema._validate.is_sequence`` counted a set as a sequence: a set of joints, of end joints or a batch shape
  was read in hash order.
* ``broadcast_batch`` said ``got (3,) vs (3,) vs (2,)`` without naming the argument whose batch was wrong.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import kinema
import kinema._solve as solve_layer
from kinema import rotation as R
from kinema import samples
from kinema._solve import SOLVERS
from kinema._validate import batch_shape_arg, broadcast_batch, is_sequence
from kinema.errors import BoneNotFoundError, KinemaError, ShapeError, SkeletonError, SolverInputError

SK = samples.humanoid()
POSE = SK.rest_pose()
FK = kinema.forward_kinematics(SK, POSE).positions
#: A reachable target near the right wrist (joint 5), and one near the left wrist (joint 8).
T5 = FK[5] + np.array([0.1, 0.1, 0.0])
T8 = FK[8] + np.array([0.0, 0.1, 0.05])


# ---------------------------------------------------------------- the cache and the call history
def _outcome(call: Callable[[], kinema.SolveResult]) -> tuple[Any, ...]:
    """What a call gives: ("ok", the result's error and rotations, bit for bit) or (error class, message)."""
    try:
        res = call()
    except KinemaError as e:
        return type(e).__name__, str(e)
    return "ok", np.asarray(res.error).tobytes(), res.pose.rotations.tobytes()


#: Index chains of the humanoid (chest -> right wrist) spelled with items of several types: equal values that
#: hash alike, some accepted (ints, NumPy ints, names, lists), some refused (floats, bools).
CHAINS: list[Any] = [(1, 5), (True, 5), (1.0, 5), (1, 5.0), (np.int64(1), 5), (np.float64(1.0), 5),
                     (np.True_, 5), ("chest", "right_wrist"), ("chest", 5), ("chest", 5.0), [1, 5], [1.0, 5],
                     [True, 5]]
#: Two-bone chains (chest, right shoulder, right elbow), the same way.
ARMS: list[Any] = [(1, 3, 4), (True, 3, 4), (1.0, 3, 4), (1, 3.0, 4), (np.int64(1), 3, 4), (np.bool_(True), 3, 4),
                   ("chest", "right_shoulder", "right_elbow"), ("chest", 3, 4), ("chest", 3.0, 4), [1, 3, 4],
                   [True, 3, 4]]
#: Per-joint CCD weights of the chain (3, 5) (three joints): numbers accepted, bools refused.
WEIGHTS: list[Any] = [(1, 0, 1), (True, False, True), (1.0, 0.0, 1.0), (np.True_, False, True), [1, 0, 1],
                      [True, False, True], np.array([1, 0, 1]), np.array([True, False, True])]
#: FABRIK tree goals keyed by joint: the keys (the solver's end joints) with items of several types.
TREE_GOALS: list[Any] = [{5: T5, 8: T8}, {5.0: T5, 8: T8}, {np.int64(5): T5, 8: T8}, {5: T5, 8.0: T8},
                         {"right_wrist": T5, "left_wrist": T8}, {"right_wrist": T5, 8: T8},
                         {"right_wrist": T5, 8.0: T8}]

#: Each free function that builds its solver through the cache, with the variants of one argument.
FAMILIES: dict[str, tuple[list[Any], Callable[[Any], Callable[[], Any]]]] = {
    "solve_ccd chain": (CHAINS, lambda c: lambda: kinema.solve_ccd(SK, POSE, c, T5)),
    "solve_ccd weights": (WEIGHTS, lambda w: lambda: kinema.solve_ccd(SK, POSE, (3, 5), T5, weights=w)),
    "solve_fabrik chain": (CHAINS, lambda c: lambda: kinema.solve_fabrik(SK, POSE, c, T5)),
    "solve_two_bone joints": (ARMS, lambda a: lambda: kinema.solve_two_bone(SK, POSE, a, FK[4] + 0.05)),
    "solve_fabrik_tree goals": (TREE_GOALS, lambda g: lambda: kinema.solve_fabrik_tree(SK, POSE, g, root=1)),
    "solve_fabrik_tree root": ([1, True, 1.0, np.int64(1), "chest"],
                               lambda r: lambda: kinema.solve_fabrik_tree(SK, POSE, {5: T5, 8: T8}, root=r)),
    "solve_chains goal chain": (CHAINS, lambda c: lambda: kinema.solve_chains(SK, POSE, [kinema.Goal(c, T5)])),
    "solve_chains goal weights": (WEIGHTS, lambda w: lambda: kinema.solve_chains(
        SK, POSE, [kinema.Goal((3, 5), T5, weights=w)])),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_call_is_refused_or_accepted_whatever_was_called_before(family: str) -> None:
    """For every ordered pair of equal-valued variants (x, y) of one argument: y after x gives exactly what y
    gives on an empty cache (the same refusal, or the same result bit for bit).  Before the fix ``(True, 5)``
    after ``(1, 5)``, ``(1.0, 3, 4)`` after ``(1, 3, 4)``, bool weights after ``(1, 0, 1)`` and
    ``{5.0: ...}`` after ``{5: ...}`` were accepted (the solver built for the other)."""
    variants, make = FAMILIES[family]
    fresh = []
    for v in variants:
        SOLVERS.clear()
        fresh.append(_outcome(make(v)))
    kinds = {f[0] for f in fresh}
    assert "ok" in kinds and len(kinds) > 1, kinds  # both accepted and refused variants: the pairs test something
    for x in variants:
        for j, y in enumerate(variants):
            SOLVERS.clear()
            _outcome(make(x))
            assert _outcome(make(y)) == fresh[j], (family, x, y)
    SOLVERS.clear()


def test_the_exact_calls_of_the_report_stay_refused() -> None:
    """The reproduction: ``(3.0, 5.0)`` and ``(True, 5)`` refused after ``(3, 5)`` and ``(1, 5)`` were solved,
    bool weights after ``(1, 0, 1)``, in one process."""
    kinema.solve_ccd(SK, POSE, (3, 5), T5)
    kinema.solve_ccd(SK, POSE, (1, 5), T5)
    kinema.solve_ccd(SK, POSE, (3, 5), T5, weights=(1, 0, 1))
    with pytest.raises(BoneNotFoundError, match="a joint is a name or an index, got float"):
        kinema.solve_ccd(SK, POSE, (3.0, 5.0), T5)
    with pytest.raises(BoneNotFoundError, match="a joint is a name or an index, got bool"):
        kinema.solve_ccd(SK, POSE, (True, 5), T5)
    with pytest.raises(SolverInputError, match="weights: .*non-numeric input"):
        kinema.solve_ccd(SK, POSE, (3, 5), T5, weights=(True, False, True))


class _CountBuilds:
    """``kinema._solve._build`` wrapped: the solvers it built, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.built: list[Any] = []
        real = solve_layer._build

        def build(cls: Any, skeleton: Any, args: Any) -> Any:
            solver = real(cls, skeleton, args)
            self.built.append(solver)
            return solver

        monkeypatch.setattr(solve_layer, "_build", build)


#: Accepted calls that must hit the cache when repeated: the chain as names (a constant, and an equal tuple made
#: anew), as indices (the same), as a list and a NumPy array (keyed by their snapshots), with NumPy ints, with
#: tuple and array weights, and every free function.
REPEATS: dict[str, Callable[[], Any]] = {
    "ccd names": lambda: kinema.solve_ccd(SK, POSE, ("chest", "right_wrist"), T5),
    "ccd names, a new tuple": lambda: kinema.solve_ccd(SK, POSE, tuple(["chest", "right_wrist"]), T5),
    "ccd indices": lambda: kinema.solve_ccd(SK, POSE, (1, 5), T5),
    "ccd indices, a new tuple": lambda: kinema.solve_ccd(SK, POSE, tuple([1, 5]), T5),
    "ccd mixed": lambda: kinema.solve_ccd(SK, POSE, tuple(["chest", 5]), T5),
    "ccd numpy ints": lambda: kinema.solve_ccd(SK, POSE, (np.int64(1), np.int32(5)), T5),
    "ccd list": lambda: kinema.solve_ccd(SK, POSE, [1, 5], T5),
    "ccd array": lambda: kinema.solve_ccd(SK, POSE, np.array([1, 5]), T5),
    "ccd tuple weights": lambda: kinema.solve_ccd(SK, POSE, (3, 5), T5, weights=(1.0, 0.5, 1.0)),
    "ccd array weights": lambda: kinema.solve_ccd(SK, POSE, (3, 5), T5, weights=np.array([1.0, 0.5, 1.0])),
    "fabrik": lambda: kinema.solve_fabrik(SK, POSE, tuple([1, 5]), T5),
    "two_bone names": lambda: kinema.solve_two_bone(SK, POSE, ("right_shoulder", "right_elbow", "right_wrist"), T5),
    "two_bone indices": lambda: kinema.solve_two_bone(SK, POSE, tuple([3, 4, 5]), T5),
    "fabrik_tree": lambda: kinema.solve_fabrik_tree(SK, POSE, {5: T5, 8: T8}, root=1),
    "chains": lambda: kinema.solve_chains(SK, POSE, [kinema.Goal((1, 5), T5)]),
}


@pytest.mark.parametrize("name", list(REPEATS))
def test_a_repeated_call_still_hits_the_cache(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache still works: the second and third of three equal calls build nothing (the first solver is
    reused) and give the first's result bit for bit."""
    SOLVERS.clear()
    builds = _CountBuilds(monkeypatch)
    first = _outcome(REPEATS[name])
    assert first[0] == "ok"
    assert len(builds.built) == 1
    assert _outcome(REPEATS[name]) == first
    assert _outcome(REPEATS[name]) == first
    assert len(builds.built) == 1
    SOLVERS.clear()


def test_equal_chains_of_other_accepted_types_are_not_rebuilt_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """``(1, 5)`` and ``(np.int64(1), 5)`` are equal and both accepted: alternating calls build at most one solver
    each (the one entry they share by value is not rebuilt in turn, now that a hit checks the items' types)."""
    SOLVERS.clear()
    builds = _CountBuilds(monkeypatch)
    for _ in range(3):
        kinema.solve_ccd(SK, POSE, tuple([1, 5]), T5)
        kinema.solve_ccd(SK, POSE, (np.int64(1), 5), T5)
    assert len(builds.built) <= 2
    SOLVERS.clear()


def test_a_generator_chain_is_read_once_and_never_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    """A generator hashes by identity: the old cache kept the solver of its joints, and the same generator,
    used up, found it again (accepted, where a fresh process refuses an empty chain)."""
    SOLVERS.clear()
    builds = _CountBuilds(monkeypatch)
    gen: Iterator[int] = (j for j in (1, 5))
    res = kinema.solve_ccd(SK, POSE, gen, T5)
    assert res.state["joints"].tolist() == [1, 3, 4, 5]
    with pytest.raises(SolverInputError, match="a chain needs at least two joints"):
        kinema.solve_ccd(SK, POSE, gen, T5)  # used up
    assert len(builds.built) == 1 and len(SOLVERS) == 0
    SOLVERS.clear()


# ---------------------------------------------------------------- sets are not sequences
ORDER = "order is arbitrary"


def _sets() -> list[Callable[[Any], Any]]:
    return [set, frozenset]


@pytest.mark.parametrize("kind", _sets(), ids=["set", "frozenset"])
def test_sets_are_refused_where_a_sequence_of_joints_is_expected(kind: Callable[[Any], Any]) -> None:
    """Every user of ``is_sequence`` in the core refuses a set, naming it and why; before, a set of joints was
    read in hash order (a chain reversed, a two-bone chain out of order, indices shuffled)."""
    arm = kind({"right_shoulder", "right_elbow", "right_wrist"})
    chain = kind({"right_shoulder", "right_wrist"})
    three = f"solve_two_bone needs three joints .* got a {kind.__name__}: its {ORDER}"
    with pytest.raises(SolverInputError, match=three):
        kinema.solve_two_bone(SK, POSE, arm, T5)
    with pytest.raises(SolverInputError, match=three):
        kinema.TwoBone(SK, arm)
    for f in (kinema.solve_ccd, kinema.solve_fabrik):
        with pytest.raises(SolverInputError, match=f"a chain is .* got a {kind.__name__}: its {ORDER}"):
            f(SK, POSE, chain, T5)
    for cls in (kinema.CCD, kinema.FABRIK):
        with pytest.raises(SolverInputError, match=f"a chain is .* got a {kind.__name__}: its {ORDER}"):
            cls(SK, chain)
    with pytest.raises(BoneNotFoundError, match=f"indices takes a sequence .* got a {kind.__name__}: its {ORDER}"):
        SK.indices(kind({"right_wrist", "chest", "neck"}))
    # users outside the core: refused by is_sequence, with their own messages
    with pytest.raises(SolverInputError, match="end_joints must be a non-empty sequence"):
        kinema.FABRIKTree(SK, kind({"right_wrist", "left_wrist"}), root="chest")
    with pytest.raises(SolverInputError, match="joints must be a sequence"):
        kinema.Rig(SK, [kinema.Step("arm", kinema.CCD(SK, ("right_shoulder", "right_wrist")),
                                    joints=kind({"right_shoulder", "right_elbow"}))])
    with pytest.raises(SolverInputError, match="feet: expected"):
        kinema.mocap.detect_contacts(SK, samples.clip("walk"), feet=kind({"left_ankle", "right_ankle"}))


@pytest.mark.parametrize("kind", _sets(), ids=["set", "frozenset"])
def test_sets_are_refused_as_batch_shapes(kind: Callable[[Any], Any]) -> None:
    """A batch shape in a set came out in hash order ({2, 3} is (2, 3), but {8, 1} is (8, 1) or (1, 8))."""
    shape = kind({2, 3})
    for what, call in (("batch_shape", lambda: SK.rest_pose(shape)), ("shape", lambda: R.identity(shape)),
                       ("batch_shape", lambda: POSE.broadcast(shape)), ("batch_shape", lambda: batch_shape_arg(shape))):
        with pytest.raises(ShapeError, match=f"^{what}: expected shape a tuple of non-negative ints, got a "
                                             f"{kind.__name__}: its {ORDER}"):
            call()


@pytest.mark.parametrize("kind", _sets(), ids=["set", "frozenset"])
def test_sets_of_goals_are_refused_naming_goals(kind: Callable[[Any], Any]) -> None:
    """``solve_chains(goals={...})`` iterated the set and said "goal 0 ..."; ``solve_dls`` now says why too."""
    with pytest.raises(SolverInputError, match="^goals must be a sequence of kinema.Goal or dicts, got "
                                               f"{kind.__name__}"):
        kinema.solve_chains(SK, POSE, kind({1, 2}))  # (a Goal does not hash: the report's set of ints)
    with pytest.raises(SolverInputError, match=f"^goals must be a sequence of kinema.goals objects, got "
                                               f"{kind.__name__} \\(its {ORDER}"):
        kinema.solve_dls(SK, POSE, kind({kinema.PositionGoal(5, T5)}))


def test_dicts_are_refused_where_a_sequence_is_expected() -> None:
    with pytest.raises(ShapeError, match="got a dict \\(a mapping, not a sequence"):
        SK.rest_pose({2: 0, 3: 0})
    with pytest.raises(SolverInputError, match="a chain is .* got a dict \\(a mapping, not a sequence"):
        kinema.solve_ccd(SK, POSE, {"chest": 0, "right_wrist": 0}, T5)


def test_ordered_containers_are_still_sequences() -> None:
    """Lists, tuples, arrays, generators and a dict's keys and items (insertion order) are sequences; sets,
    strings, mappings and 0-d arrays are not."""
    d = {"chest": 0, "right_wrist": 1}
    for x in ([1], (1,), np.array([1]), (j for j in (1,)), d.keys(), d.items(), range(2), "ab"[:0] or [0]):
        assert is_sequence(x), x
    for x in ({1}, frozenset({1}), "ab", b"ab", d, np.array(1), 5, None):
        assert not is_sequence(x), x
    assert SK.indices(d.keys()).tolist() == [1, 5]
    assert kinema.solve_ccd(SK, POSE, d.keys(), T5).state["joints"].tolist() == [1, 3, 4, 5]
    assert SK.rest_pose({2: 0, 3: 0}.keys()).batch_shape == (2, 3)


def test_a_batch_shape_from_a_generator_is_read_once() -> None:
    """The check read the generator's sizes and the shape was made from what was left: ``()``."""
    assert SK.rest_pose(d for d in (2, 3)).batch_shape == (2, 3)
    assert R.identity(iter([4])).shape == (4, 4)  # type: ignore[arg-type]
    assert POSE.broadcast(d for d in (3,)).batch_shape == (3,)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=re.escape("got (2, 2.5)")):
        R.identity(d for d in (2, 2.5))  # type: ignore[arg-type]


# ---------------------------------------------------------------- broadcast errors name the argument
def _first_clash(shapes: list[tuple[int, ...]]) -> int:
    for k in range(1, len(shapes)):
        try:
            np.broadcast_shapes(*shapes[:k + 1])
        except ValueError:
            return k
    raise AssertionError("broadcasts")


def test_broadcast_batch_names_the_first_argument_that_does_not_broadcast() -> None:
    """Random batch shapes with names: the result is NumPy's broadcast when there is one; otherwise the error
    names the first argument whose batch does not broadcast with those before it, lists those with their
    shapes, and says what it got.  Without names the message is as it was (the pose's own setters)."""
    rng = np.random.default_rng(7)
    clashes = 0
    for _ in range(400):
        n = int(rng.integers(2, 6))
        shapes = [tuple(int(d) for d in rng.choice([1, 2, 3], size=int(rng.integers(0, 3)))) for _ in range(n)]
        names = [f"arg{i}" for i in range(n)]
        try:
            want = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            want = None
        if want is not None:
            assert broadcast_batch(*shapes, names=names) == want == broadcast_batch(*shapes)
            continue
        clashes += 1
        k = _first_clash(shapes)
        with pytest.raises(ShapeError) as info:
            broadcast_batch(*shapes, names=names)
        before = ", ".join(f"{a} {s}" for a, s in zip(names[:k], shapes[:k], strict=True))
        assert str(info.value) == (f"arg{k} batch dimensions: expected shape batch dimensions that broadcast with "
                                   f"{before}, got {shapes[k]}")
        with pytest.raises(ShapeError) as plain:
            broadcast_batch(*shapes)
        assert str(plain.value) == ("batch dimensions: expected shape broadcastable batch shapes, got "
                                    + " vs ".join(str(s) for s in shapes))
    assert clashes > 50


WALK = samples.clip("walk").pose[:3]
WALK_T = kinema.forward_kinematics(SK, WALK).positions[:, 5] + 0.1
ARM_NAMES = ("right_shoulder", "right_elbow", "right_wrist")


@pytest.mark.parametrize(("call", "named"), [
    (lambda: kinema.solve_two_bone(SK, WALK, ARM_NAMES, WALK_T, soft=np.array([0.1, 0.2])),
     "soft batch dimensions: expected shape batch dimensions that broadcast with pose (3,), target (3,), got (2,)"),
    (lambda: kinema.solve_two_bone(SK, WALK, ARM_NAMES, WALK_T, weight=np.full(4, 0.5)),
     "weight batch dimensions: expected shape batch dimensions that broadcast with pose (3,), target (3,), got (4,)"),
    (lambda: kinema.solve_two_bone(SK, WALK, ARM_NAMES, WALK_T, margin=np.full(2, 1e-3)),
     "margin batch dimensions: expected shape batch dimensions that broadcast with pose (3,), target (3,), got (2,)"),
    (lambda: kinema.solve_two_bone(SK, WALK, ARM_NAMES, WALK_T, np.zeros((2, 3))),
     "pole batch dimensions: expected shape batch dimensions that broadcast with pose (3,), target (3,), got (2,)"),
    (lambda: kinema.solve_two_bone(SK, WALK, ARM_NAMES, WALK_T, np.zeros(3), end_rotation=np.tile([0, 0, 0, 1.0],
                                                                                                  (2, 1))),
     "end_rotation batch dimensions: expected shape batch dimensions that broadcast with pose (3,), target (3,), "
     "pole (), got (2,)"),
    (lambda: kinema.solve_two_bone(SK, POSE, ARM_NAMES, np.zeros((2, 3)), bend_hint=np.ones((3, 3))),
     "bend_hint batch dimensions: expected shape batch dimensions that broadcast with pose (), target (2,), "
     "got (3,)"),
    (lambda: kinema.TwoBone(SK, ARM_NAMES, soft=0.1).solve(WALK, WALK_T, weight=np.full(2, 0.5)),
     "weight batch dimensions: expected shape batch dimensions that broadcast with pose (3,), target (3,), got (2,)"),
    (lambda: kinema.TwoBoneIK(SK, ARM_NAMES).solve(WALK, WALK_T, soft=np.full(2, 0.1)),
     "soft batch dimensions: expected shape batch dimensions that broadcast with pose (3,), target (3,), got (2,)"),
    (lambda: kinema.solve_two_bone_2d(np.zeros((3, 2)), np.ones((3, 2)), np.ones(2), 1.0),
     "l1 batch dimensions: expected shape batch dimensions that broadcast with root (3,), target (3,), got (2,)"),
    (lambda: kinema.solve_dls(SK, WALK, [kinema.PositionGoal(5, WALK_T)], weight=np.full(2, 0.5)),
     "weight batch dimensions: expected shape batch dimensions that broadcast with pose (3,), goals[0] target "
     "(3,), got (2,)"),
    (lambda: kinema.DLS(SK, [kinema.PositionGoal(5, T5), kinema.PositionGoal(8, T8)]).solve(
        WALK, [None, np.zeros((2, 3))]),
     "targets[1] batch dimensions: expected shape batch dimensions that broadcast with pose (3,), goals[0] target "
     "(), got (2,)"),
])
def test_a_batch_that_does_not_broadcast_names_its_argument(call: Callable[[], Any], named: str) -> None:
    """The reproduction's ``soft=`` and ``weight=`` (and every other per-item input of two-bone, the 2D solver
    and DLS): the message names the argument and the ones it was broadcast with, instead of
    ``batch dimensions: ... got (3,) vs (3,) vs (2,)``."""
    with pytest.raises(ShapeError) as info:
        call()
    assert str(info.value) == named


def test_skeleton_inputs_keep_their_messages() -> None:
    """The skeleton's own set refusals (names, parents) keep their wording now that ``is_sequence`` refuses a set
    first."""
    with pytest.raises(SkeletonError, match="names must be an ordered sequence of joint names .*order is arbitrary"):
        kinema.Skeleton({"a", "b"}, [-1, 0], np.zeros((2, 3)))  # type: ignore[arg-type]
    with pytest.raises(SkeletonError, match=f"parents must be a sequence .* got set \\(its {ORDER}"):
        kinema.Skeleton.from_unordered(["a", "b"], {None, "a"}, np.zeros((2, 3)))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", [5, ["a"], b"a", 1.5])
def test_a_goal_name_is_a_string(name: Any) -> None:
    """``Goal.name`` labels the goal in messages and the result: only a str (or None for the default)."""
    with pytest.raises(kinema.SolverInputError, match="goal 0: name must be a str or None"):
        kinema.solve_chains(SK, POSE, [kinema.Goal(("chest", "right_wrist"), T5, name=name)])
    ok = kinema.solve_chains(SK, POSE, [kinema.Goal(("chest", "right_wrist"), T5, name="hand")])
    assert np.asarray(ok.state["goal_errors"]).shape == (1,)


def test_array_subclasses_are_read_as_the_numbers_they_hold() -> None:
    """An np.matrix (or a masked array) gives what the plain array of its numbers gives, bit for bit, in every
    API that takes numbers (here a target, a pose's rotations and FK)."""
    target = np.asarray(T5, dtype=np.float64)
    with warnings.catch_warnings():  # numpy's PendingDeprecationWarning for np.matrix: the input is the point here
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        matrix, matrix_row = np.asmatrix(target), np.asmatrix([[0.0, -0.0, 1.0]])
    for sub, same in ((matrix, target[None]), (np.ma.masked_array(target), target)):  # (1, 3), (3,)
        plain = kinema.solve_ccd(SK, POSE, ("chest", "right_wrist"), same)
        got = kinema.solve_ccd(SK, POSE, ("chest", "right_wrist"), sub)
        np.testing.assert_array_equal(got.pose.rotations, plain.pose.rotations)
        assert type(got.pose.rotations) is np.ndarray
    from kinema._validate import as_float_array

    m = as_float_array(matrix_row, "v", (3,))
    assert type(m) is np.ndarray and np.signbit(m[0, 1])


#: Every public call that takes a skeleton first, with valid other arguments.
SKELETON_CALLS: dict[str, Callable[[Any], Any]] = {
    "solve_chains": lambda sk: kinema.solve_chains(sk, POSE, [{"chain": ("right_shoulder", "right_wrist"),
                                                                "target": T5}]),
    "solve_ccd": lambda sk: kinema.solve_ccd(sk, POSE, ("right_shoulder", "right_wrist"), T5),
    "solve_fabrik": lambda sk: kinema.solve_fabrik(sk, POSE, ("right_shoulder", "right_wrist"), T5),
    "solve_fabrik_tree": lambda sk: kinema.solve_fabrik_tree(sk, POSE, {"right_wrist": T5}),
    "solve_two_bone": lambda sk: kinema.solve_two_bone(sk, POSE, ("right_shoulder", "right_elbow", "right_wrist"), T5),
    "solve_dls": lambda sk: kinema.solve_dls(sk, POSE, [kinema.PositionGoal("right_wrist", T5)]),
    "forward_kinematics": lambda sk: kinema.forward_kinematics(sk, POSE),
    "Rig": lambda sk: kinema.Rig(sk, []),
}


@pytest.mark.parametrize("call", sorted(SKELETON_CALLS))
@pytest.mark.parametrize("bad", [None, "humanoid", 1.5, np.zeros((15, 3)), POSE], ids=lambda b: type(b).__name__)
def test_a_skeleton_that_is_not_one_is_refused_naming_its_type(call: str, bad: Any) -> None:
    """solve_chains read ``skeleton.n_joints`` first (AttributeError for anything else)."""
    with pytest.raises(SolverInputError, match=f"skeleton must be a kinema.Skeleton, got {type(bad).__name__}"):
        SKELETON_CALLS[call](bad)
