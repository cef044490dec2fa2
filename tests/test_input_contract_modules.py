"""Input contract of kinema.mocap, pose, limits, hands, filters and mesh: every bad argument is a KinemaError naming
it (never a bare builtin error, never a silent reading), and a result never depends on how an input is laid out in
memory.

Boolean options take True or False only; ``tolerance``/``max_iterations`` of ``reach`` are checked with or without a
chain; foot indices are checked; the public pose helpers check their arguments; ``pack_limits`` checks its skeleton
and joints; 0-d arrays are the numbers they hold; the filters name the argument given; linear blend skinning gives
the same bits for C, Fortran and strided inputs.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kinema
from kinema import Clip, Pose, Skeleton, mocap
from kinema import hands as H
from kinema import limits as L
from kinema import mesh as ME
from kinema import pose as P
from kinema import rotation as R
from kinema.errors import BoneNotFoundError, KinemaError, ShapeError, SolverInputError
from kinema.filters import CriticallyDampedSpring, OneEuroFilter

SK = kinema.samples.humanoid()
WALK = kinema.samples.clip("walk")
SUB = Clip(WALK.pose[:20], WALK.fps)
#: A reach target 0.1 units off the animated right wrist at frame 5.
TARGET = kinema.forward_kinematics(SK, SUB.pose[5]).positions[SK.index("right_wrist")] + [0.1, 0.1, 0.0]

#: Values a boolean option must refuse: the string "False" (True to Python), None and 0 (False to Python), 1, a
#: bool array (a bare ValueError to Python).
BAD_FLAGS = ["False", "True", None, 0, 1, 1.0, np.array([True, False]), np.array(True)]
BAD_FLAG_IDS = ["str-False", "str-True", "None", "0", "1", "1.0", "bool-array", "0d-bool-array"]


def _same_clip(a: Clip, b: Clip) -> bool:
    """Whether two clips hold the same bits."""
    pa, pb = a.pose, b.pose
    return all(np.array_equal(x, y) for x, y in ((pa.translations, pb.translations), (pa.rotations, pb.rotations),
                                                 (pa.scales, pb.scales)))


# ------------------------------------------------------------------------------------- 1. boolean options
def _crouch_rig() -> tuple[Skeleton, Clip]:
    """Two bent legs whose root rises 0.2 out of reach of the feet's locks: footlock must lower the hips."""
    names = ["root", "l_hip", "l_knee", "l_ankle", "r_hip", "r_knee", "r_ankle"]
    t = np.array([[0, 0, 0], [0.1, 0, 0], [0, -0.45, 0], [0, -0.45, 0],
                  [-0.1, 0, 0], [0, -0.45, 0], [0, -0.45, 0]], dtype=float)
    sk = Skeleton(names, [-1, 0, 1, 2, 0, 4, 5], t)
    n, bend = 40, np.radians(20.0)
    rots = np.tile(R.identity((7,)), (n, 1, 1))
    for h, k in ((1, 2), (4, 5)):
        rots[:, h] = R.from_axis_angle([1, 0, 0], bend)
        rots[:, k] = R.from_axis_angle([1, 0, 0], -2 * bend)
    trans = np.tile(t, (n, 1, 1))
    trans[:, 0, 1] = 0.9 * np.cos(bend) + 0.2 * np.sin(np.linspace(0, np.pi, n)) ** 2
    return sk, Clip(Pose(trans, rots), 30.0)


CROUCH_SK, CROUCH = _crouch_rig()
CROUCH_OPTS: dict[str, Any] = {"height": 1.0, "speed": 10.0}  # everything is one contact


@pytest.mark.parametrize("bad", BAD_FLAGS, ids=BAD_FLAG_IDS)
@pytest.mark.parametrize("option", ["lower_hips", "keep_length"])
def test_footlock_flags_take_only_bools(option: str, bad: Any) -> None:
    with pytest.raises(SolverInputError, match=f"{option} must be True or False"):
        mocap.footlock(CROUCH_SK, CROUCH, ["l_ankle", "r_ankle"], **{option: bad}, **CROUCH_OPTS)


@pytest.mark.parametrize("bad", BAD_FLAGS, ids=BAD_FLAG_IDS)
def test_reach_keep_orientation_takes_only_bools(bad: Any) -> None:
    with pytest.raises(SolverInputError, match="keep_orientation must be True or False"):
        mocap.reach(SK, SUB, "right_wrist", TARGET, (5, 10), keep_orientation=bad)


def test_footlock_flags_are_read_as_the_bools_they_are() -> None:
    """NumPy bools are the bools they hold (bit for bit), and each flag is read: lower_hips=False leaves the
    hips where they were (the feet then fall short), keep_length changes the legs."""
    args = (CROUCH_SK, CROUCH, ["l_ankle", "r_ankle"])
    base = mocap.footlock(*args, **CROUCH_OPTS)
    assert base.hips_drop.max() > 0.02  # the rig needs a drop
    for flag in (False, True):
        for option in ("lower_hips", "keep_length"):
            plain = mocap.footlock(*args, **{option: flag}, **CROUCH_OPTS)
            numpy_bool = mocap.footlock(*args, **{option: np.bool_(flag)}, **CROUCH_OPTS)
            assert _same_clip(plain.clip, numpy_bool.clip)
    no_drop = mocap.footlock(*args, lower_hips=np.False_, **CROUCH_OPTS)
    assert np.all(no_drop.hips_drop == 0.0)
    assert no_drop.ik_error.max() > 0.02
    walk_kept, walk_free = mocap.footlock(SK, WALK), mocap.footlock(SK, WALK, keep_length=np.False_)
    assert np.abs(walk_kept.clip.pose.rotations - walk_free.clip.pose.rotations).max() > 0.1


@pytest.mark.parametrize("frames", [(5, 10), [5, 10], np.array([5, 10]), "gen"], ids=["tuple", "list", "array", "gen"])
def test_reach_frames_are_any_pair_read_once(frames: Any) -> None:
    """A generator pair (a sequence to ``is_sequence``) was measured with ``len``: a bare TypeError."""
    frames = (f for f in (5, 10)) if isinstance(frames, str) else frames
    got = mocap.reach(SK, SUB, "right_wrist", TARGET, frames)
    assert _same_clip(got.clip, mocap.reach(SK, SUB, "right_wrist", TARGET, (5, 10)).clip)


@pytest.mark.parametrize("frames", [(f for f in (5, 10, 12)), (f for f in (5,)), iter(range(10**9)), (5, 10, 12),
                                    "ab", {5: 10}, {5, 10}], ids=["gen3", "gen1", "endless", "triple", "str", "dict",
                                                                  "set"])
def test_reach_frames_that_are_not_a_pair_are_refused(frames: Any) -> None:
    with pytest.raises(SolverInputError, match=r"frames must be a pair \(A, B\)"):
        mocap.reach(SK, SUB, "right_wrist", TARGET, frames)


def test_reach_keep_orientation_is_read_as_the_bool_it_is() -> None:
    eff = SK.index("right_wrist")
    kept = mocap.reach(SK, SUB, eff, TARGET, (5, 10), keep_orientation=np.True_)
    assert _same_clip(kept.clip, mocap.reach(SK, SUB, eff, TARGET, (5, 10)).clip)
    free = mocap.reach(SK, SUB, eff, TARGET, (5, 10), keep_orientation=np.False_)
    assert _same_clip(free.clip, mocap.reach(SK, SUB, eff, TARGET, (5, 10), keep_orientation=False).clip)
    # Kept: the wrist's world rotation over A..B is the animated one (to 1e-9); free, it rides on the forearm.
    w_in = kinema.forward_kinematics(SK, SUB.pose[5:11]).rotations[:, eff]
    w_kept = kinema.forward_kinematics(SK, kept.clip.pose[5:11]).rotations[:, eff]
    w_free = kinema.forward_kinematics(SK, free.clip.pose[5:11]).rotations[:, eff]
    assert R.angle_between(w_in, w_kept).max() < 1e-9
    assert R.angle_between(w_in, w_free).max() > 1e-3


# ------------------------------------------------------------------------- 2. reach tolerance / max_iterations
@pytest.mark.parametrize("chain", [None, "chest"], ids=["two-bone", "chain"])
@pytest.mark.parametrize(("option", "bad"), [
    ("tolerance", "1"), ("tolerance", float("nan")), ("tolerance", -1.0), ("tolerance", float("inf")),
    ("tolerance", None), ("tolerance", True), ("tolerance", np.array([1e-3, 1e-3])),
    ("max_iterations", -5), ("max_iterations", "x"), ("max_iterations", 1.5), ("max_iterations", None),
    ("max_iterations", True), ("max_iterations", 2**31), ("max_iterations", np.array([5])),
])
def test_reach_checks_tolerance_and_max_iterations_with_or_without_chain(chain: str | None, option: str,
                                                                          bad: Any) -> None:
    with pytest.raises(SolverInputError, match=option):
        mocap.reach(SK, SUB, "right_wrist", TARGET, (5, 10), chain=chain, **{option: bad})


def test_reach_takes_every_valid_tolerance_and_count() -> None:
    """0, NumPy ints and floats, float32: valid (they only tune a chain's CCD: without one, the same bits)."""
    two_bone = mocap.reach(SK, SUB, "right_wrist", TARGET, (5, 10))
    for kw in ({"tolerance": 0.0}, {"tolerance": np.float32(1e-3)}, {"max_iterations": 0},
               {"max_iterations": np.int64(7)}, {"max_iterations": np.uint8(3)}):
        assert _same_clip(mocap.reach(SK, SUB, "right_wrist", TARGET, (5, 10), **kw).clip, two_bone.clip)


# ------------------------------------------------------------------------------------------- 3. foot indices
CONTACTS = mocap.detect_contacts(SK, WALK)
LOCKED = mocap.footlock(SK, WALK)
RUN_GETTERS: list[Callable[[Any], Any]] = [CONTACTS.runs, LOCKED.held_runs]


@pytest.mark.parametrize("get", RUN_GETTERS, ids=["Contacts.runs", "FootlockResult.held_runs"])
@pytest.mark.parametrize("bad", [2, 5, -3, -5, None, True, np.True_, 1.0, np.float64(0.0), "left_ankle", 2**63,
                                 -(2**63) - 1, np.uint64(2**64 - 1), np.array([0, 1]), [0]])
def test_a_foot_index_out_of_range_or_not_an_int_is_refused(get: Callable[[Any], Any], bad: Any) -> None:
    assert len(CONTACTS.feet) == 2
    with pytest.raises(SolverInputError, match=r"k must be the index of a foot, an int from -2 to 1"):
        get(bad)


@pytest.mark.parametrize("which", ["runs", "held_runs"])
def test_foot_indices_count_from_the_end_as_in_python(which: str) -> None:
    """k and k - K name the same foot; NumPy ints are the ints they hold; the runs are the mask's."""
    get = CONTACTS.runs if which == "runs" else LOCKED.held_runs
    mask = CONTACTS.mask if which == "runs" else (LOCKED.held if LOCKED.held is not None else CONTACTS.mask)
    n_feet = len(CONTACTS.feet)
    for k in range(n_feet):
        starts, ends = get(k)
        for other in (k - n_feet, np.int64(k), np.uint8(k), np.int8(k - n_feet)):
            s2, e2 = get(other)
            assert np.array_equal(s2, starts) and np.array_equal(e2, ends)
        rebuilt = np.zeros(mask.shape[0], dtype=bool)
        for s, e in zip(starts, ends, strict=True):
            rebuilt[s:e] = True
        assert np.array_equal(rebuilt, mask[:, k])
    assert CONTACTS.n_contacts == sum(len(CONTACTS.runs(k)[0]) for k in range(n_feet))


# -------------------------------------------------------------------------------------------- 4. pose helpers
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), None, True, np.True_, "3",
                                 np.array([1.0, 2.0]), 1 + 0j])
def test_resampled_frame_count_refuses_what_is_not_a_finite_number(bad: Any) -> None:
    with pytest.raises(SolverInputError, match="span must be"):
        P.resampled_frame_count(bad)


@given(st.floats(0.0, 1e12, allow_nan=False))
def test_resampled_frame_count_is_the_ceiling_plus_one(span: float) -> None:
    n = P.resampled_frame_count(span)
    assert n == max(math.ceil(span - P.TIME_EPS), 0) + 1
    assert n - 1 >= span - P.TIME_EPS and n - 2 < span - P.TIME_EPS  # the frame past the span is the last
    assert P.resampled_frame_count(np.array(span)) == n  # a 0-d array is the number it holds
    assert P.resampled_frame_count(np.float32(8.0)) == P.resampled_frame_count(8) == 9


def test_resampled_frame_count_of_a_span_at_or_below_zero_is_one_frame() -> None:
    """The degenerate span (an end at or before the start): the start's frame only."""
    for span in (0.0, -0.0, P.TIME_EPS, -1.0, -1e300):
        assert P.resampled_frame_count(span) == 1


@pytest.mark.parametrize(("args", "what"), [
    ((0.0, 1.0, "30", 100), "fps"), ((0.0, 1.0, 0, 100), "fps"), ((0.0, 1.0, -30.0, 100), "fps"),
    ((0.0, 1.0, float("nan"), 100), "fps"), ((0.0, 1.0, True, 100), "fps"),
    ((0.0, -float("inf"), 30.0, 100), "t_end"), ((float("nan"), 1.0, 30.0, 100), "t_start"),
    ((None, 1.0, 30.0, 100), "t_start"), ((0.0, "1", 30.0, 100), "t_end"), ((0.0, [1.0, 2.0], 30.0, 100), "t_end"),
    ((0.0, 1.0, 30.0, None), "max_frames"), ((0.0, 1.0, 30.0, 100.0), "max_frames"),
    ((0.0, 1.0, 30.0, -1), "max_frames"), ((0.0, 1.0, 30.0, True), "max_frames"),
    ((0.0, 10.0, 30.0, 100), "more than 100"), ((-1e308, 1e308, 30.0, 2**31), "more than"),
])
def test_resample_times_refuses_bad_arguments(args: tuple[Any, ...], what: str) -> None:
    with pytest.raises(SolverInputError, match=what):
        P.resample_times(*args)


@given(st.floats(-1e3, 1e3), st.floats(0.0, 100.0), st.floats(1.0, 240.0))
def test_resample_times_are_the_evenly_spaced_grid(t0: float, duration: float, fps: float) -> None:
    t1 = t0 + duration
    t = P.resample_times(t0, t1, fps, 2**31)
    assert t.dtype == np.float64 and t.ndim == 1
    n = P.resampled_frame_count((t1 - t0) * fps)
    assert np.array_equal(t, t0 + np.arange(n) / fps)  # bit for bit the documented formula
    assert t[-1] >= t1 - 2 * P.TIME_EPS / fps - 1e-12 * max(1.0, abs(t1))  # the last at or just past the end
    same = P.resample_times(np.float32(t0), np.array(t1), np.int64(round(fps)) if fps == round(fps) else fps,
                            np.int32(2**31 - 1))
    assert np.array_equal(same, P.resample_times(float(np.float32(t0)), t1, fps, 2**31))


def test_resample_times_of_an_end_at_or_before_the_start_is_the_start() -> None:
    assert np.array_equal(P.resample_times(2.5, 2.5, 30.0, 10), [2.5])
    assert np.array_equal(P.resample_times(2.5, 1.0, 30.0, 10), [2.5])


KEY_TIMES = np.array([0.0, 0.5, 1.0])


@pytest.mark.parametrize(("times", "query", "error", "what"), [
    (np.array([]), np.array([0.25]), ShapeError, "key times"),
    ([], [0.25], ShapeError, "key times"),
    (np.zeros((2, 2)), np.array([0.25]), ShapeError, "key times"),
    (np.array(1.0), np.array([0.25]), ShapeError, "key times"),
    (None, np.array([0.25]), ShapeError, "key times"),
    ("abc", np.array([0.25]), ShapeError, "key times"),
    (np.array([1.0, 0.5, 0.0]), np.array([0.25]), SolverInputError, "strictly increasing"),
    (np.array([0.0, 0.5, 0.5]), np.array([0.25]), SolverInputError, "strictly increasing"),
    (np.array([0.0, np.nan, 1.0]), np.array([0.25]), SolverInputError, "key times"),
    (np.array([0.0, np.inf]), np.array([0.25]), SolverInputError, "key times"),
    (KEY_TIMES, np.array([np.nan]), SolverInputError, "query"),
    (KEY_TIMES, np.array([0.25 + 0j]), ShapeError, "query"),
    (KEY_TIMES, None, ShapeError, "query"),
    (KEY_TIMES, "0.25", ShapeError, "query"),
    (KEY_TIMES, [True], ShapeError, "query"),
])
def test_key_brackets_refuses_bad_times_and_queries(times: Any, query: Any, error: type[KinemaError],
                                                    what: str) -> None:
    with pytest.raises(error, match=what):
        P.key_brackets(times, query)


@given(st.lists(st.floats(-100.0, 100.0), min_size=1, max_size=12, unique=True),
       st.lists(st.floats(-200.0, 200.0), min_size=0, max_size=12))
def test_key_brackets_bracket_each_query(keys: list[float], queries: list[float]) -> None:
    times = np.sort(np.array(keys))
    query = np.array(queries)
    i0, i1, u = P.key_brackets(times, query)
    assert i0.shape == i1.shape == u.shape == query.shape
    assert np.all((0 <= i0) & (i0 <= i1) & (i1 <= i0 + 1) & (i1 < times.size))
    assert np.all((0.0 <= u) & (u <= 1.0))
    inside = (query >= times[0]) & (query <= times[-1])
    assert np.all(times[i0][inside] <= query[inside]) and np.all(query[inside] <= times[i1][inside])
    rebuilt = times[i0] + u * (times[i1] - times[i0])
    np.testing.assert_allclose(rebuilt[inside], query[inside], rtol=0, atol=1e-12)
    # outside the keys the end key holds
    assert np.all(u[~inside] == 0.0)
    assert np.all(i0[query < times[0]] == 0) and np.all(i0[query > times[-1]] == times.size - 1)
    # lists, float32 and ints are read as the numbers they hold
    for t_in, q_in in ((list(times), list(query)), (times, query.astype(np.float32).astype(np.float64))):
        j0, j1, v = P.key_brackets(t_in, q_in)
        r0, r1, w = P.key_brackets(np.asarray(t_in, dtype=np.float64), np.asarray(q_in, dtype=np.float64))
        assert np.array_equal(j0, r0) and np.array_equal(j1, r1) and np.array_equal(v, w)


def test_key_brackets_before_a_tiny_first_span_hold_the_first_key_without_a_warning() -> None:
    """A query far before the first key over a span of one subnormal step: its fraction overflows to -inf before it
    is clipped to 0 (the hypothesis test above met it once as a RuntimeWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        i0, i1, u = P.key_brackets([0.0, 5e-324, 1.0], [-1e300, 0.5])
    assert list(i0) == [0, 1] and list(i1) == [1, 2] and list(u) == [0.0, 0.5]


def test_key_brackets_of_one_key_and_infinite_queries_hold_the_end() -> None:
    i0, i1, u = P.key_brackets([2.0], [-1.0, 2.0, 5.0])
    assert np.array_equal(i0, [0, 0, 0]) and np.array_equal(i1, [0, 0, 0]) and np.array_equal(u, [0.0, 0.0, 0.0])
    i0, i1, u = P.key_brackets(KEY_TIMES, [-np.inf, np.inf])
    assert np.array_equal(i0, [0, 2]) and np.array_equal(u, [0.0, 0.0])


@pytest.mark.parametrize("index", [2**63, -(2**63) - 1, 2**100, (0, 2**63), np.uint64(2**64 - 1)])
def test_a_pose_index_past_int64_is_the_out_of_range_error(index: Any) -> None:
    p = SK.rest_pose((2,))
    with pytest.raises(ShapeError) as out_of_range:
        p[2]
    # an integer is the out-of-range error itself (BatchIndexError); a tuple too long for the batch a ShapeError
    expected = type(out_of_range.value) if not isinstance(index, tuple) else ShapeError
    with pytest.raises(expected, match="pose index"):
        p[index]


# --------------------------------------------------------------------------------------------------- 5. limits
HINGE = L.Hinge((1.0, 0.0, 0.0), -0.5, 1.0)


@pytest.mark.parametrize(("skeleton", "joints", "error", "what"), [
    (None, [3, 4], SolverInputError, "skeleton must be a kinema.Skeleton"),
    ("humanoid", [3, 4], SolverInputError, "skeleton must be a kinema.Skeleton"),
    (SK, [99], BoneNotFoundError, r"joints\[0\]: joint index 99 is out of range"),
    (SK, [3, -16], BoneNotFoundError, r"joints\[1\]"),
    (SK, np.array([3, 99]), BoneNotFoundError, r"joints\[1\]"),
    (SK, np.array([2**63], dtype=np.uint64), BoneNotFoundError, r"joints\[0\]"),
    (SK, [2**63], BoneNotFoundError, r"joints\[0\]"),
    (SK, "ab", SolverInputError, "joints must be a sequence"),
    (SK, 3, SolverInputError, "joints must be a sequence"),
    (SK, None, SolverInputError, "joints must be a sequence"),
    (SK, np.array(3), SolverInputError, "joints must be a sequence"),
    (SK, np.array([[3, 4]]), SolverInputError, "joints must be a sequence"),
    (SK, [3.7, 4.2], BoneNotFoundError, r"joints\[0\]"),
    (SK, np.array([3.0, 4.0]), BoneNotFoundError, r"joints\[0\]"),
    (SK, [True, False], BoneNotFoundError, r"joints\[0\]"),
    (SK, np.array([True, False]), BoneNotFoundError, r"joints\[0\]"),
    (SK, ["chest", "nope"], BoneNotFoundError, r"joints\[1\]"),
])
def test_pack_limits_refuses_a_bad_skeleton_or_joints(skeleton: Any, joints: Any, error: type[KinemaError],
                                                      what: str) -> None:
    with pytest.raises(error, match=what):
        L.pack_limits(skeleton, joints, {"right_elbow": HINGE})


#: ``limits=`` values that are not a ``{joint: Limit}`` mapping: an array's truth value was a bare ValueError
#: (``if not limits``), a list or a set of limits is no mapping.
BAD_LIMIT_MAPS = [np.array([0.1, 0.2, 0.3]), np.zeros((0, 3)), np.array([True, False]), [HINGE], {HINGE}, "elbow",
                  3.0]
#: Every solver's ``limits`` with an arm and its chain (two-bone: the hinge only it takes, on the elbow).
LIMITED_SOLVERS: dict[str, Callable[[Any], Any]] = {
    "TwoBone": lambda lim: kinema.TwoBone(SK, ("right_shoulder", "right_elbow", "right_wrist"), limits=lim),
    "CCD": lambda lim: kinema.CCD(SK, ("right_shoulder", "right_wrist"), limits=lim),
    "FABRIK": lambda lim: kinema.FABRIK(SK, ("right_shoulder", "right_wrist"), limits=lim),
    "FABRIKTree": lambda lim: kinema.FABRIKTree(SK, ["right_wrist", "left_wrist"], limits=lim),
    "DLS": lambda lim: kinema.DLS(SK, [kinema.PositionGoal("right_wrist", TARGET)], limits=lim),
    "solve_ccd": lambda lim: kinema.solve_ccd(SK, SK.rest_pose(), ("right_shoulder", "right_wrist"), TARGET,
                                              limits=lim),
    "solve_two_bone": lambda lim: kinema.solve_two_bone(SK, SK.rest_pose(), ("right_shoulder", "right_elbow",
                                                                             "right_wrist"), TARGET, limits=lim),
    "pack_limits": lambda lim: L.pack_limits(SK, [3, 4], lim),
}


@pytest.mark.parametrize("solver", sorted(LIMITED_SOLVERS))
@pytest.mark.parametrize("bad", BAD_LIMIT_MAPS, ids=lambda b: type(b).__name__ + str(np.shape(b)))
def test_limits_that_are_not_a_mapping_are_refused_by_every_solver(solver: str, bad: Any) -> None:
    with pytest.raises(SolverInputError, match=f"limits must map joint names or indices to limit objects, got "
                                               f"{type(bad).__name__}"):
        LIMITED_SOLVERS[solver](bad)


@pytest.mark.parametrize("solver", ["TwoBone", "CCD", "FABRIK", "FABRIKTree", "solve_ccd", "solve_two_bone"])
def test_an_empty_limit_map_is_no_limits(solver: str) -> None:
    """``{}`` is None: no limit kept, the same solve."""
    made, plain = LIMITED_SOLVERS[solver]({}), LIMITED_SOLVERS[solver](None)
    if isinstance(made, kinema.SolveResult):
        assert np.array_equal(made.pose.rotations, plain.pose.rotations)
    else:
        assert made.limits is None and plain.limits is None


def test_pack_limits_reads_joints_given_any_way_alike() -> None:
    """Indices as a list, an int array of any width, negative ones and names: the same packing."""
    n = SK.n_joints
    elbow, wrist = SK.index("right_elbow"), SK.index("right_wrist")
    limits = {"right_elbow": HINGE, wrist: L.SwingTwist((0.0, 1.0, 0.0), 0.5)}
    ref = L.pack_limits(SK, [elbow, wrist], limits)
    assert ref.count == 2 and list(ref.kinds) == [L.LIMIT_HINGE, L.LIMIT_SWING_TWIST]
    for joints in (np.array([elbow, wrist]), np.array([elbow, wrist], dtype=np.uint8), (elbow - n, wrist - n),
                   np.array([elbow - n, wrist - n], dtype=np.int16), ["right_elbow", "right_wrist"],
                   [np.int64(elbow), "right_wrist"]):
        got = L.pack_limits(SK, joints, limits)
        assert got.count == ref.count
        for field in ("kinds", "params", "rest"):
            assert np.array_equal(getattr(got, field), getattr(ref, field))
    assert L.pack_limits(SK, [], limits).kinds.shape == (0,)


def test_a_0d_array_swing_is_the_angle_it_holds() -> None:
    ref = L.SwingTwist((0.0, 1.0, 0.0), 0.5)
    for swing in (np.array(0.5), np.float64(0.5), np.array(0.5, dtype=">f8")):
        assert L.SwingTwist((0.0, 1.0, 0.0), swing) == ref
    assert L.SwingTwist((0.0, 1.0, 0.0), np.array(30), degrees=True).swing == pytest.approx(math.radians(30), abs=0)
    pair = L.SwingTwist((0.0, 1.0, 0.0), np.array([0.5, 0.25], dtype=np.float32))
    assert pair.swing == (0.5, 0.25)


@pytest.mark.parametrize("bad", [np.array([0.5, 0.25], dtype=object), np.array(True), np.array([True, False]),
                                 np.array("0.5"), np.array(0.5 + 0j), np.array(0.5, dtype=object)])
def test_a_swing_array_of_anything_but_real_numbers_is_refused(bad: Any) -> None:
    with pytest.raises(SolverInputError, match="SwingTwist swing"):
        L.SwingTwist((0.0, 1.0, 0.0), bad)


@pytest.mark.parametrize(("mins", "what"), [
    (np.array(-0.5), "needs three angles"),
    (np.array([-0.5, -0.25, -1.0], dtype=object), "must be real numbers"),
    (np.array([True, False, True]), "must be real numbers"),
    (np.array(["-0.5", "-0.25", "-1"]), "must be real numbers"),
    (np.array([-0.5, -0.25]), "needs three angles"),
])
def test_euler_range_refuses_what_is_not_three_real_angles(mins: Any, what: str) -> None:
    with pytest.raises(SolverInputError, match=f"EulerRange mins {what}"):
        L.EulerRange("xyz", mins, (0.5, 0.5, 0.5))
    with pytest.raises(SolverInputError, match=f"EulerRange maxs {what}"):
        L.EulerRange("xyz", (-0.5, -0.5, -0.5), -mins if mins.dtype.kind in "f" else mins)


def test_euler_range_takes_arrays_of_numbers_as_the_numbers() -> None:
    ref = L.EulerRange("xyz", (-0.5, -0.25, -1.0), (0.5, 0.25, 1.0))
    got = L.EulerRange("xyz", np.array([-0.5, -0.25, -1.0], dtype=np.float32), np.array([0.5, 0.25, 1.0]))
    assert got == ref


# ---------------------------------------------------------------------------------------------------- 6. hands
SKH = kinema.samples.humanoid(hands=True)
HAND = H.Hand.from_skeleton(SKH, "right")


@pytest.mark.parametrize("bad", [None, "right", SKH, HAND.fingers[0]])
def test_palm_rotation_needs_a_hand(bad: Any) -> None:
    with pytest.raises(SolverInputError, match="palm_rotation: hand must be a kinema.hands.Hand"):
        H.palm_rotation(bad, np.eye(3))


def test_palm_rotation_of_the_palm_basis_is_the_identity_turn() -> None:
    """W P = target with target = P: W is the identity (to rounding)."""
    w = H.palm_rotation(HAND, HAND.palm_basis)
    assert R.angle_between(w, R.identity()) < 1e-12


def test_palm_basis_of_an_empty_batch_is_empty() -> None:
    """The degenerate batch: no vectors, no bases, whichever side is empty."""
    assert H.palm_basis([1.0, 0.0, 0.0], np.zeros((0, 3))).shape == (0, 3, 3)
    assert H.palm_basis(np.zeros((0, 3)), [0.0, 1.0, 0.0]).shape == (0, 3, 3)
    assert H.palm_basis(np.zeros((0, 3)), np.zeros((0, 3))).shape == (0, 3, 3)


@given(st.integers(0, 2**32 - 1))
def test_palm_basis_broadcasts_one_vector_against_a_batch(seed: int) -> None:
    """One along with a batch of normals (and one normal with a batch of alongs): each basis is the one of its
    pair alone, bit for bit, and a rotation matrix to 1e-12."""
    rng = np.random.default_rng(seed)
    one, batch = rng.normal(size=3), rng.normal(size=(4, 3))
    for a, n, pairs in ((one, batch, [(one, b) for b in batch]), (batch, one, [(b, one) for b in batch])):
        out = H.palm_basis(a, n)
        assert out.shape == (4, 3, 3)
        for i, (ai, ni) in enumerate(pairs):
            assert np.array_equal(out[i], H.palm_basis(ai, ni))
        np.testing.assert_allclose(np.swapaxes(out, -1, -2) @ out, np.broadcast_to(np.eye(3), out.shape), atol=1e-12)
        np.testing.assert_allclose(np.linalg.det(out), 1.0, atol=1e-12)


# -------------------------------------------------------------------------------------------------- 7. filters
@pytest.mark.parametrize("bad", ["a", None, [1.0, None], np.array([1.0, np.nan]), True])
def test_a_filters_first_update_names_its_argument(bad: Any) -> None:
    for make, name in ((lambda: CriticallyDampedSpring(2.0), "target"), (lambda: OneEuroFilter(), "x")):
        f = make()
        with pytest.raises(KinemaError) as err:
            f.update(bad, 0.1)
        assert str(err.value).startswith(f"{name}") and "value" not in str(err.value).split(":")[0]
        assert f.value is None  # nothing was kept


def test_a_filters_first_update_sets_the_state_as_reset_does() -> None:
    x = np.array([1.0, -2.0, 3.5], dtype=np.float32)
    spring, euro = CriticallyDampedSpring(2.0), OneEuroFilter(1.0, 0.1)
    assert np.array_equal(spring.update(x, 0.1), x) and np.array_equal(euro.update(x, 0.1), x)
    s2, e2 = CriticallyDampedSpring(2.0), OneEuroFilter(1.0, 0.1)
    s2.reset(x)
    e2.reset(x)
    step = np.array([2.0, 0.0, -1.0])
    assert np.array_equal(spring.update(step, 0.05), s2.update(step, 0.05))
    assert np.array_equal(euro.update(step, 0.05), e2.update(step, 0.05))
    assert spring.velocity is not None and np.all(spring.velocity != 0.0)


# ----------------------------------------------------------------------------------------------------- 8. mesh
def _strided(x: np.ndarray) -> np.ndarray:
    """The same values in every other column of a wider array (not contiguous)."""
    big = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype)
    big[..., ::2] = x
    return big[..., ::2]


def _layouts(x: np.ndarray) -> list[np.ndarray]:
    return [np.ascontiguousarray(x), np.asfortranarray(x), _strided(x), np.flip(np.flip(x, 0).copy(), 0)]


BONE_MESH = ME.bone_mesh(SK)
SKIN = (kinema.forward_kinematics(SK, WALK.pose[:3], matrices=True).matrices  # type: ignore[operator]
        @ BONE_MESH.inverse_bind_matrices)


@pytest.mark.parametrize("arg", ["positions", "joints", "weights", "skin_matrices"])
def test_linear_blend_skinning_gives_the_same_bits_for_any_memory_layout(arg: str) -> None:
    args = {"positions": np.array(BONE_MESH.positions), "joints": np.array(BONE_MESH.joints),
            "weights": np.array(BONE_MESH.weights), "skin_matrices": np.array(SKIN)}
    ref = ME.linear_blend_skinning(**args)
    assert ref.shape == (3, BONE_MESH.n_vertices, 3)
    for layout in _layouts(args[arg]):
        assert np.array_equal(ME.linear_blend_skinning(**{**args, arg: layout}), ref)
    # and it is the formula: sum_k w_k (M[j_k] @ [v, 1])[:3], to 1e-12 of the mesh's size
    hom = np.concatenate([args["positions"], np.ones((args["positions"].shape[0], 1))], axis=1)
    direct = np.zeros_like(ref)
    for k in range(args["joints"].shape[1]):
        m = args["skin_matrices"][:, args["joints"][:, k]]  # (F, V, 4, 4)
        direct += args["weights"][:, k, None] * (m @ hom[..., None])[..., :3, 0]
    np.testing.assert_allclose(ref, direct, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_skinned_positions_give_the_same_bits_for_any_layout_of_the_mesh() -> None:
    pose = WALK.pose[:3]
    ref = BONE_MESH.skinned_positions(SK, pose)
    for pos, ibm in zip(_layouts(np.array(BONE_MESH.positions)), _layouts(np.array(BONE_MESH.inverse_bind_matrices)),
                        strict=True):
        mesh = ME.SkinnedMesh(pos, BONE_MESH.indices, np.asfortranarray(BONE_MESH.joints),
                              np.asfortranarray(BONE_MESH.weights), ibm, name="laid out")
        assert np.array_equal(mesh.skinned_positions(SK, pose), ref)
