"""A pose's arrays replaced after construction go through the constructor's conversion and checks.

``Pose.translations``, ``.rotations`` and ``.scales`` were plain writable attributes: a big-endian array made
forward kinematics fail inside numba, a list or None failed with bare AttributeErrors in FK, the solvers, bone
lengths and skinning, and an array of another joint count with a bare ValueError in FK.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import kinema
from kinema import Clip, Pose, ShapeError, SolverInputError
from kinema.mesh import bone_mesh

SK = kinema.samples.humanoid()
NJ = SK.n_joints


def _fk_positions(pose: Pose) -> np.ndarray:
    return kinema.forward_kinematics(SK, pose).positions


def test_replaced_arrays_are_read_as_the_numbers_they_hold() -> None:
    """Big-endian, float32 and int arrays and nested lists become native float64 holding the same numbers."""
    ref = _fk_positions(SK.rest_pose())
    rest = SK.rest_pose()
    for value in (rest.rotations.astype(">f8"), rest.rotations.astype(np.float32), rest.rotations.tolist()):
        pose = SK.rest_pose()
        pose.rotations = value
        assert pose.rotations.dtype == np.float64 and pose.rotations.dtype.isnative
        np.testing.assert_array_equal(pose.rotations, np.asarray(value, dtype=np.float64))
        np.testing.assert_allclose(_fk_positions(pose), ref, rtol=0, atol=1e-6)
    pose = SK.rest_pose()
    pose.translations = rest.translations.astype(">f8")
    pose.scales = np.ones((NJ, 3), dtype=np.int32)
    assert pose.translations.dtype.isnative and pose.scales.dtype == np.float64
    np.testing.assert_array_equal(_fk_positions(pose), ref)
    # The big-endian pose through a solver too (it already converted): the same answer as the native pose.
    pose = SK.rest_pose()
    pose.rotations = pose.rotations.astype(">f8")
    chain = ("left_shoulder", "left_wrist")
    target = kinema.forward_kinematics(SK, SK.rest_pose()).positions[SK.index("left_wrist")] + [0.0, -0.05, 0.05]
    got = kinema.solve_ccd(SK, pose, chain, target)
    want = kinema.solve_ccd(SK, SK.rest_pose(), chain, target)
    np.testing.assert_array_equal(got.pose.rotations, want.pose.rotations)


def test_a_float64_array_is_held_not_copied_and_item_assignment_still_works() -> None:
    pose = SK.rest_pose()
    r = np.array(pose.rotations)
    pose.rotations = r
    assert pose.rotations is r  # held, as the constructor holds it
    pose.rotations[0] = [0.0, 0.0, 0.7071067811865476, 0.7071067811865476]  # in place: the same array
    assert r[0, 2] == pose.rotations[0, 2] != 0.0
    pose.translations[1, 0] += 1.0
    pose.scales[...] = 2.0
    assert np.all(pose.scales == 2.0)
    assert not np.allclose(_fk_positions(pose), _fk_positions(SK.rest_pose()))


@pytest.mark.parametrize(("field", "value", "pattern"), [
    ("rotations", "rest[:3]", r"pose rotations: expected shape \(\.\.\., 15, 4\) to match 15 translations, "
                              r"got \(3, 4\)"),
    ("rotations", "[[0, 0, 0, 1]] * 14", r"pose rotations: expected shape \(\.\.\., 15, 4\).*got \(14, 4\)"),
    ("rotations", "np.zeros((15, 3))", r"pose rotations: expected shape \(\.\.\., 4\), got \(15, 3\)"),
    ("translations", "np.zeros((14, 3))", r"pose translations: expected shape \(\.\.\., 15, 3\) to match 15 "
                                          r"rotations, got \(14, 3\)"),
    ("translations", "np.zeros(3)", r"pose translations: expected shape \(\.\.\., 15, 3\)"),
    ("scales", "np.ones((1, 3))", r"pose scales: expected shape \(\.\.\., 15, 3\), got \(1, 3\)"),
    ("rotations", "None", r"pose rotations: expected shape \(\.\.\., 4\), got non-numeric input"),
    ("translations", "'abc'", r"pose translations: expected shape .*non-numeric input"),
    ("scales", "np.ones((15, 3), dtype=bool)", r"pose scales: .*non-numeric input"),
    ("rotations", "np.zeros((4, 15, 4))", r"batch dimensions: expected shape broadcastable batch shapes, "
                                          r"got \(2,\) vs \(4,\) vs \(2,\)"),
])
def test_a_replacement_that_does_not_fit_is_a_shape_error_and_the_pose_keeps_its_array(field: str, value: str,
                                                                                      pattern: str) -> None:
    pose = SK.rest_pose((2,))
    rest = SK.rest_pose().rotations
    before = getattr(pose, field)
    bad = eval(value, {"np": np, "rest": rest})
    with pytest.raises(ShapeError, match=pattern):
        setattr(pose, field, bad)
    assert getattr(pose, field) is before  # unchanged: FK still runs on the pose as it was
    np.testing.assert_array_equal(_fk_positions(pose)[1], _fk_positions(SK.rest_pose()))


def test_scales_none_means_ones_as_in_the_constructor() -> None:
    pose = SK.rest_pose()
    pose.scales = 3.0 * np.ones((NJ, 3))
    pose.scales = None
    np.testing.assert_array_equal(pose.scales, np.ones((NJ, 3)))
    # every reader of the pose that failed with a bare AttributeError after ``scales = None`` now works
    np.testing.assert_allclose(SK.bone_lengths(pose), SK.bone_lengths())
    mesh = bone_mesh(SK)
    np.testing.assert_allclose(mesh.skinned_positions(SK, pose), mesh.positions, rtol=0, atol=1e-12)
    ref = kinema.solve_two_bone(SK, SK.rest_pose(), ("left_shoulder", "left_elbow", "left_wrist"), [0.3, 1.2, 0.2])
    got = kinema.solve_two_bone(SK, pose, ("left_shoulder", "left_elbow", "left_wrist"), [0.3, 1.2, 0.2])
    np.testing.assert_array_equal(got.pose.rotations, ref.pose.rotations)


def test_a_list_assigned_to_an_array_is_converted_for_every_reader() -> None:
    pose = SK.rest_pose()
    pose.rotations = [[0, 0, 0, 1]] * NJ
    assert isinstance(pose.rotations, np.ndarray) and pose.rotations.shape == (NJ, 4)
    np.testing.assert_allclose(SK.bone_lengths(pose), SK.bone_lengths())
    assert kinema.solve_ccd(SK, pose, ("left_shoulder", "left_wrist"), [0.3, 1.2, 0.2]).pose.rotations.shape == (NJ, 4)


def test_the_batch_may_change_when_it_still_broadcasts() -> None:
    pose = SK.rest_pose()
    pose.rotations = np.broadcast_to(pose.rotations, (5, NJ, 4))
    assert pose.batch_shape == (5,)
    pose.translations = np.zeros((1, NJ, 3))
    assert pose.batch_shape == (5,)
    assert _fk_positions(pose).shape == (5, NJ, 3)


def test_trusted_poses_copies_and_pickles_keep_the_arrays() -> None:
    t, r, s = (np.array(a) for a in (SK.translations, SK.rotations, SK.scales))
    pose = Pose._trusted(t, r, s)
    assert pose.translations is t and pose.rotations is r and pose.scales is s
    for other in (pickle.loads(pickle.dumps(pose)), copy.deepcopy(pose), pose.copy()):
        assert other.rotations is not r
        np.testing.assert_array_equal(other.rotations, r)
        other.rotations = other.rotations.astype(">f8")  # the copy is a checked pose too
        assert other.rotations.dtype.isnative
    shallow = copy.copy(pose)
    assert shallow.rotations is r
    with pytest.raises(AttributeError):
        pose.velocities = 1.0  # type: ignore[attr-defined]  # (slots: no other attributes)


def test_a_clip_checks_its_fields_when_they_are_replaced() -> None:
    clip = Clip(SK.rest_pose((4,)), 30.0, times=np.arange(4) / 30.0)
    with pytest.raises(SolverInputError, match="clip pose must be a kinema.Pose, got str"):
        clip.pose = "walk"  # type: ignore[assignment]
    with pytest.raises(ShapeError, match="clip pose: expected shape .*time dimension"):
        clip.pose = SK.rest_pose()
    with pytest.raises(ShapeError, match=r"clip times: expected shape \(5,\), got \(4,\)"):
        clip.pose = SK.rest_pose((5,))  # 5 frames against 4 times
    with pytest.raises(SolverInputError, match="fps must be a finite number > 0"):
        clip.fps = 0.0
    assert clip.fps == 30.0 and clip.n_frames == 4
    clip.times = None
    clip.pose = SK.rest_pose((5,))
    clip.fps = np.float32(24.0)  # type: ignore[assignment]
    assert type(clip.fps) is float and clip.n_frames == 5
    clip.times = [0.0, 0.1, 0.2, 0.3, 0.5]  # type: ignore[assignment]
    assert clip.times is not None and clip.times.dtype == np.float64 and clip.duration == 0.5
    # the pose's own arrays replaced so that no time dimension is left: a ShapeError, not an IndexError
    clip.times = None
    for field, k in (("translations", 3), ("rotations", 4), ("scales", 3)):
        setattr(clip.pose, field, np.ones((NJ, k)))
    with pytest.raises(ShapeError, match="clip pose: expected shape .*time dimension"):
        _ = clip.n_frames
