"""Skeleton and Pose: validation, lookup, reordering, errors."""

from __future__ import annotations

import numpy as np
import pytest

import kinema
from kinema import BoneNotFoundError, Clip, KinemaError, Pose, ShapeError, Skeleton, SkeletonError


def arm() -> Skeleton:
    names = ["root", "spine", "shoulder_L", "elbow_L", "hand_L", "shoulder_R", "elbow_R", "hand_R"]
    parents = [-1, 0, 1, 2, 3, 1, 5, 6]
    t = np.array([[0, 1, 0], [0, 0.5, 0], [0.2, 0.3, 0], [0.3, 0, 0], [0.25, 0, 0],
                  [-0.2, 0.3, 0], [-0.3, 0, 0], [-0.25, 0, 0]], dtype=float)
    return Skeleton(names, parents, t)


def test_basic_properties_and_lookup() -> None:
    sk = arm()
    assert sk.n_joints == len(sk) == 8
    assert sk.index("elbow_L") == 3
    assert sk.children("spine") == (2, 5)
    assert sk.children(0) == (1,)
    assert sk.ancestors("hand_R") == (6, 5, 1, 0)
    assert list(sk.chain("spine", "hand_L")) == [1, 2, 3, 4]
    assert list(sk.chain(3, 3)) == [3]
    assert np.allclose(sk.bone_lengths(), [0, 0.5, np.hypot(0.2, 0.3), 0.3, 0.25, np.hypot(0.2, 0.3), 0.3, 0.25])
    assert np.allclose(sk.rotations, [0, 0, 0, 1]) and np.allclose(sk.scales, 1.0)
    assert sk.has_uniform_scale
    assert "8 joints" in repr(sk)


def test_arrays_are_read_only_and_copied() -> None:
    t = np.zeros((2, 3))
    sk = Skeleton(["a", "b"], [-1, 0], t)
    t[1, 0] = 5.0
    assert sk.translations[1, 0] == 0.0
    with pytest.raises(ValueError):
        sk.translations[0, 0] = 1.0
    with pytest.raises(ValueError):
        sk.parents[1] = -1


def test_rotations_are_normalised() -> None:
    sk = Skeleton(["a"], [-1], [[0, 0, 0]], rotations=[[0, 0, 0, 2.0]])
    assert np.array_equal(sk.rotations, [[0, 0, 0, 1.0]])


def test_chain_not_below_start() -> None:
    with pytest.raises(SkeletonError, match="'hand_L' is not below 'shoulder_R'"):
        arm().chain("shoulder_R", "hand_L")


def test_unknown_bone_lists_closest_names() -> None:
    sk = arm()
    with pytest.raises(BoneNotFoundError) as info:
        sk.index("elbow_l")
    msg = str(info.value)
    assert "no joint named 'elbow_l'" in msg and "'elbow_L'" in msg
    assert info.value.suggestions[0] == "elbow_L"
    with pytest.raises(BoneNotFoundError, match="joints are: 'root'"):
        sk.index("zzzzzzzz")
    with pytest.raises(BoneNotFoundError, match="out of range"):
        sk.children(99)
    assert isinstance(info.value, KinemaError) and isinstance(info.value, LookupError)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"names": ["a", "a"]}, "used twice"),
        ({"names": ["a", ""]}, "empty or non-string"),
        ({"parents": [-1, 5]}, "'b' has unknown parent index 5"),
        ({"parents": [-1, 1]}, "'b' is its own parent"),
        ({"parents": [1, -1]}, "'a' .* comes before its parent 'b'.*from_unordered"),
        ({"translations": [[0, 0, 0], [np.nan, 0, 0]]}, "'b' has NaN or inf in its rest translations"),
        ({"rotations": [[0, 0, 0, 1], [0, 0, 0, 0]]}, "'b' has a zero rotation quaternion"),
        ({"rotations": [[0, 0, 0, 1], [0, np.inf, 0, 1]]}, "'b' has NaN or inf in its rest rotations"),
        ({"scales": [[1, 1, 1], [1, 0, 1]]}, "'b' has a zero or negative scale"),
        ({"scales": [[-1, 1, 1], [1, 1, 1]]}, "'a' has a zero or negative scale"),
    ],
)
def test_skeleton_errors_name_the_joint(kwargs: dict, match: str) -> None:
    args = {"names": ["a", "b"], "parents": [-1, 0], "translations": [[0, 0, 0], [0, 1, 0]]}
    args.update(kwargs)
    with pytest.raises(SkeletonError, match=match):
        Skeleton(**args)


def test_shape_errors() -> None:
    with pytest.raises(ShapeError, match=r"translations: expected shape \(2, 3\), got \(2, 2\)"):
        Skeleton(["a", "b"], [-1, 0], np.zeros((2, 2)))
    with pytest.raises(ShapeError, match="parents"):
        Skeleton(["a", "b"], [-1], np.zeros((2, 3)))
    with pytest.raises(SkeletonError, match="at least one joint"):
        Skeleton([], [], np.zeros((0, 3)))


def test_from_unordered_reorders_and_returns_mapping() -> None:
    names = ["hand", "root", "elbow", "tail"]
    parents = ["elbow", None, "root", "root"]
    t = np.array([[3, 0, 0], [0, 0, 0], [1, 0, 0], [0, -1, 0]], dtype=float)
    sk, order = Skeleton.from_unordered(names, parents, t)
    assert sk.names == ("root", "elbow", "hand", "tail")
    assert list(order) == [1, 2, 0, 3]
    assert np.array_equal(sk.translations, t[order])
    assert list(sk.parents) == [-1, 0, 1, 0]
    # Index parents work too, and give the same result.
    sk2, order2 = Skeleton.from_unordered(names, [2, -1, 1, 1], t)
    assert sk2.names == sk.names and np.array_equal(order2, order)


def test_from_unordered_rejects_cycles_and_unknown_parents() -> None:
    t = np.zeros((3, 3))
    with pytest.raises(SkeletonError, match="cycle"):
        Skeleton.from_unordered(["r", "a", "b"], [None, "b", "a"], t)
    with pytest.raises(SkeletonError, match="'a' has unknown parent 'nope'"):
        Skeleton.from_unordered(["r", "a", "b"], [None, "nope", "a"], t)
    with pytest.raises(SkeletonError, match="unknown parent index 7"):
        Skeleton.from_unordered(["r", "a", "b"], [None, 7, 1], t)


def test_pose_shapes_and_broadcasting() -> None:
    sk = arm()
    rest = sk.rest_pose((4, 2))
    assert rest.batch_shape == (4, 2) and rest.n_joints == 8
    p = Pose(sk.translations, np.broadcast_to(sk.rotations, (5, 8, 4)))
    assert p.batch_shape == (5,)
    assert p.scales.shape == (8, 3)
    full = p.broadcast()
    assert full.translations.shape == (5, 8, 3) and full.scales.shape == (5, 8, 3)
    assert p[2].batch_shape == ()
    with pytest.raises(ShapeError, match=r"pose rotations: expected shape \(\.\.\., 8, 4\) to match 8"):
        Pose(sk.translations, np.zeros((7, 4)))
    with pytest.raises(ShapeError, match="batch"):
        Pose(np.zeros((2, 8, 3)), np.zeros((3, 8, 4)))
    with pytest.raises(ShapeError, match=r"pose translations: expected shape \(\.\.\., 3\), got \(8, 2\)"):
        Pose(np.zeros((8, 2)), np.zeros((8, 4)))


def test_clip() -> None:
    sk = arm()
    clip = Clip(sk.rest_pose((10,)), fps=30.0)
    assert clip.n_frames == len(clip) == 10
    assert clip.duration == pytest.approx(9 / 30)
    with pytest.raises(ShapeError, match="time dimension"):
        Clip(sk.rest_pose(), fps=30.0)
    with pytest.raises(ValueError, match="fps"):
        Clip(sk.rest_pose((3,)), fps=0.0)


def test_public_surface() -> None:
    assert "Skeleton" in kinema.__all__ and "forward_kinematics" in kinema.__all__
    for name in kinema.__all__:
        assert hasattr(kinema, name), name
    for cls in (kinema.SkeletonError, kinema.BoneNotFoundError, kinema.ShapeError, kinema.FileFormatError,
                kinema.SolverInputError):
        assert issubclass(cls, KinemaError)


def test_file_format_error_message() -> None:
    e = kinema.FileFormatError("walk.bvh", 12, "expected 57 numbers, got 56")
    assert str(e) == "walk.bvh:12: expected 57 numbers, got 56"
    assert e.path == "walk.bvh" and e.line == 12
    e2 = kinema.FileFormatError("a.gltf", "accessors[3].count", "too large")
    assert str(e2) == "a.gltf at accessors[3].count: too large"


def test_import_is_light() -> None:
    """``import kinema`` neither imports numba nor the optional extras (nothing compiles)."""
    import subprocess
    import sys

    code = ("import sys, kinema; heavy = [m for m in ('numba', 'scipy', 'pygltflib', 'viser', 'rich') "
            "if m in sys.modules]; print(','.join(heavy))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == ""


# ------------------------------------------------------------------------- exploratory pass
def test_rest_rotations_of_any_finite_size() -> None:
    """[0, 0, 1e300, 1e300]: its squared length overflowed and the rest rotation was stored as (0, 0, 0, 0)."""
    t = [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    big = Skeleton(["a", "b"], [-1, 0], t, [[0, 0, 0, 1e300], [0, 0, 1e300, 1e300]])
    unit = Skeleton(["a", "b"], [-1, 0], t, [[0, 0, 0, 1], [0, 0, 1, 1]])
    assert np.array_equal(big.rotations, unit.rotations)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"names": "ab"}, SkeletonError, "names must be a sequence"),  # was read as the names 'a' and 'b'
        ({"names": None}, SkeletonError, "names must be a sequence"),  # TypeError
        ({"parents": ["x", "a"]}, ShapeError, r"parents: expected shape \(2,\), got non-numeric"),  # TypeError
        ({"parents": [True, False]}, ShapeError, "parents: .*dtype bool"),  # read as 1 and 0
        ({"parents": np.array([2**64 - 1, 0], np.uint64)}, SkeletonError,  # silently became -1, a root
         "joint 'a' has unknown parent index 18446744073709551615"),
        ({"parents": [-1, 2**70]}, ShapeError, "parents: .*non-numeric"),  # OverflowError
        ({"translations": np.zeros((2, 3), complex)}, ShapeError, "translations: .*complex"),  # imaginary dropped
        ({"translations": [[0, 0], [0, 1, 0]]}, ShapeError, r"translations: expected shape \(2, 3\)"),  # ValueError
        ({"rotations": "xy"}, ShapeError, r"rotations: expected shape \(2, 4\), got non-numeric"),  # ValueError
        ({"meta": [1, 2]}, SkeletonError, "meta must be a mapping"),  # TypeError
    ],
)
def test_constructor_inputs_are_refused_by_name(kwargs: dict, error: type, match: str) -> None:
    args = {"names": ["a", "b"], "parents": [-1, 0], "translations": [[0, 0, 0], [0, 1, 0]]} | kwargs
    with pytest.raises(error, match=match):
        Skeleton(**args)


def test_from_unordered_parents_are_indices_names_or_none() -> None:
    t = [[0, 1, 0], [0, 0, 0]]
    assert Skeleton.from_unordered(["b", "a"], [1.0, None], t)[0].names == ("a", "b")  # an integral float is fine
    for bad in (1.5, True, float("nan")):  # 1.5 and True were read as 1; NaN was a ValueError
        with pytest.raises(SkeletonError, match=f"joint 'b' has parent {bad!r}: a parent is an index"):
            Skeleton.from_unordered(["b", "a"], [bad, None], t)
    with pytest.raises(SkeletonError, match="parents must be a sequence"):
        Skeleton.from_unordered(["b", "a"], {0: 1, 1: None}, t)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"rotations: expected shape \(2, 4\), got \(1, 4\)"):  # IndexError
        Skeleton.from_unordered(["b", "a"], [1, None], t, [[0, 0, 0, 1]])


def test_indices_takes_a_sequence() -> None:
    sk = arm()
    assert sk.indices(["spine", 0, np.int64(2)]).tolist() == [1, 0, 2]
    for bad in ("spine", 3, None):  # 'spine' was looked up letter by letter; 3 and None were TypeErrors
        with pytest.raises(BoneNotFoundError, match="indices takes a sequence"):
            sk.indices(bad)  # type: ignore[arg-type]


def test_pose_indexing_reaches_the_batch_dimensions_only() -> None:
    """pose[:, 0] on a batch of 2 picked joint 0 and returned a pose of 2 'joints'; now every index acts on the
    batch dimensions as on an array of that shape, and one that does not fit them is a ShapeError."""
    sk = arm()
    rng = np.random.default_rng(4)
    pose = Pose(rng.normal(size=(3, 2, 8, 3)), rng.normal(size=(2, 8, 4)), rng.uniform(0.5, 2, size=(3, 1, 8, 3)))
    full = pose.broadcast()
    for index in (1, (2, 0), slice(0, 2), (..., 1), np.array([True, False, True]), [2, 0], None, (0, None)):
        got = pose[index]
        on_batch = (*(index if isinstance(index, tuple) else (index,)), slice(None), slice(None))  # joints untouched
        for a, b in ((got.translations, full.translations), (got.rotations, full.rotations),
                     (got.scales, full.scales)):
            np.testing.assert_array_equal(a, b[on_batch])
    for bad in ((0, 0, 0), 3, "a", (slice(None), slice(None), 0)):
        with pytest.raises(ShapeError, match=r"pose index: expected shape an index into the batch dimensions \(3, 2\)"):
            pose[bad]
    with pytest.raises(ShapeError, match=r"batch dimensions \(\)"):
        sk.rest_pose()[0]


def test_batch_shapes_and_clip_arguments() -> None:
    sk = arm()
    assert sk.rest_pose(np.int64(3)).batch_shape == (3,)
    assert sk.rest_pose().broadcast(4).batch_shape == (4,)  # was a TypeError
    with pytest.raises(ShapeError, match="batch_shape: expected shape a tuple of non-negative ints"):
        sk.rest_pose().broadcast((2, "a"))  # type: ignore[arg-type]
    frames = sk.rest_pose((3,))
    for fps in ("30", None, True, np.array([30.0, 30.0]), np.nan):  # TypeErrors, a bool read as 1 fps
        with pytest.raises(kinema.SolverInputError, match="fps"):
            Clip(frames, fps)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="clip times: .*non-numeric"):
        Clip(frames, 30.0, "abc")  # type: ignore[arg-type]
    with pytest.raises(kinema.SolverInputError, match="strictly increasing"):
        Clip(frames, 30.0, np.array([0.0, 0.2, 0.1]))
    with pytest.raises(kinema.SolverInputError, match="clip pose must be a kinema.Pose"):
        Clip("frames", 30.0)  # type: ignore[arg-type]


def test_a_batch_shape_beyond_numpy_s_limit_is_a_shape_error() -> None:
    """``rest_pose((10**12, 10**12))`` failed inside NumPy with a bare ValueError ("iterator is too large")."""
    sk = kinema.samples.humanoid()
    with pytest.raises(kinema.ShapeError, match="items in all"):
        sk.rest_pose((10**12, 10**12))
    with pytest.raises(kinema.ShapeError, match="items in all"):
        sk.rest_pose().broadcast((2**40, 2**40))


def test_a_skeleton_and_the_solvers_built_on_it_pickle_and_copy() -> None:
    """Worker processes (multiprocessing, Dask) get their arguments pickled: a skeleton could not be (its read-only
    meta mapping), so neither could any solver.  Now both round-trip, and a solver unpickled solves bit for bit as
    the original."""
    import copy
    import pickle

    sk = kinema.samples.humanoid()
    for other in (pickle.loads(pickle.dumps(sk)), copy.deepcopy(sk)):
        assert other.names == sk.names and dict(other.meta) == dict(sk.meta)
        for a, b in ((other.parents, sk.parents), (other.translations, sk.translations),
                     (other.rotations, sk.rotations), (other.scales, sk.scales)):
            np.testing.assert_array_equal(a, b)
            assert not a.flags.writeable
    pose = sk.rest_pose()
    target = kinema.forward_kinematics(sk, pose).positions[sk.index("right_wrist")] + [0.1, 0.2, 0.05]
    ccd = kinema.CCD(sk, ("chest", "right_wrist"))
    again = pickle.loads(pickle.dumps(ccd))
    np.testing.assert_array_equal(again.solve(pose, target).pose.rotations, ccd.solve(pose, target).pose.rotations)
