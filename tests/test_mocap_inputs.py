"""kinema.mocap: bad inputs are refused with a KinemaError naming the argument (never a bare builtin error).

Empty clips, NaN positions and contact masks, wrong argument types and misspelled footlock options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kinema
from kinema import Clip, mocap
from kinema.errors import KinemaError, ShapeError, SolverInputError

SK = kinema.samples.humanoid()
WALK = kinema.samples.clip("walk")
EMPTY = Clip(WALK.pose[:0], WALK.fps)
POSE = SK.rest_pose()
TIMES = [0.0, 1.0, 2.0]


# ------------------------------------------------------------------------------------------ empty clips
@pytest.mark.parametrize("call", [
    lambda: mocap.detect_contacts(SK, EMPTY),
    lambda: mocap.detect_contacts(SK, EMPTY, positions=np.zeros((0, 2, 3))),
    lambda: mocap.resample(EMPTY, 60),
    lambda: mocap.footlock(SK, EMPTY),
    lambda: mocap.reach(SK, EMPTY, "left_wrist", [0.0, 1.0, 0.0], (0, 0)),
], ids=["detect_contacts", "detect_contacts-positions", "resample", "footlock", "reach"])
def test_an_empty_clip_is_refused(call: Callable[[], Any]) -> None:
    with pytest.raises(SolverInputError, match="no frames"):
        call()


def test_the_empty_clip_metrics_are_empty_not_errors() -> None:
    """What has a clear empty answer gives it: no frame pairs, nothing turns."""
    assert mocap.frame_times(EMPTY).shape == (0,)
    assert mocap.angular_speed(EMPTY).shape == (0, SK.n_joints)
    assert mocap.max_angular_speed(EMPTY) == (0.0, 0, 0)
    assert mocap.foot_skate(np.zeros((0, 2, 3)), np.zeros((0, 2), bool), []) == 0.0


# ------------------------------------------------------------------------------------------- foot_skate
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_foot_skate_refuses_non_finite_positions(bad: float) -> None:
    pos = np.zeros((3, 1, 3))
    pos[1, 0, 0] = bad
    with pytest.raises(SolverInputError, match=r"positions contains NaN or inf \(first at index \(1, 0, 0\)\)"):
        mocap.foot_skate(pos, np.ones((3, 1), bool), TIMES)


@pytest.mark.parametrize("times", [[0.0, np.nan, 2.0], [0.0, 1.0, np.inf], [0.0, 2.0, 1.0]])
def test_foot_skate_refuses_bad_times(times: list[float]) -> None:
    with pytest.raises(SolverInputError, match="times"):
        mocap.foot_skate(np.zeros((3, 1, 3)), np.ones((3, 1), bool), times)


@pytest.mark.parametrize("mask", [
    np.full((3, 1), np.nan),
    np.full((3, 1), 0.5),
    np.ones((3, 1)),  # floats, even 0.0/1.0: not a mask
    np.full((3, 1), 2),
    np.full((3, 1), -1),
    [["yes"], ["no"], ["yes"]],
    [[None], [True], [True]],
    [[True], [True, False], [True]],  # ragged
], ids=["nan", "half", "float-ones", "two", "minus-one", "strings", "none", "ragged"])
def test_foot_skate_refuses_a_mask_that_is_not_boolean(mask: Any) -> None:
    pos = np.arange(9.0).reshape(3, 1, 3)
    with pytest.raises(SolverInputError, match="mask"):
        mocap.foot_skate(pos, mask, TIMES)


def test_foot_skate_reads_0_1_integers_and_lists_as_booleans() -> None:
    pos = np.zeros((3, 1, 3))
    pos[:, 0, 0] = [0.0, 1.0, 3.0]  # horizontal speeds 1 then 2
    expected = mocap.foot_skate(pos, np.array([[True], [True], [False]]), TIMES)
    assert expected == 1.0
    assert mocap.foot_skate(pos, np.array([[1], [1], [0]], dtype=np.uint8), TIMES) == expected
    assert mocap.foot_skate(pos, [[1], [1], [0]], TIMES) == expected
    assert mocap.foot_skate(pos, [[True], [True], [False]], TIMES) == expected
    assert mocap.foot_skate(pos, np.ones((3, 1), np.int64), TIMES) == 1.5


def test_foot_skate_mask_shape_is_checked() -> None:
    with pytest.raises(ShapeError, match="mask"):
        mocap.foot_skate(np.zeros((3, 1, 3)), np.ones((3, 2), bool), TIMES)


# --------------------------------------------------------------------------------------- argument types
SKELETON_CALLS: dict[str, Callable[[Any], Any]] = {
    "find_feet": lambda s: mocap.find_feet(s),
    "detect_contacts": lambda s: mocap.detect_contacts(s, WALK),
    "footlock": lambda s: mocap.footlock(s, WALK),
    "reach": lambda s: mocap.reach(s, WALK, "left_wrist", [0.0, 1.0, 0.0], (0, 3)),
}

CLIP_CALLS: dict[str, Callable[[Any], Any]] = {
    "detect_contacts": lambda c: mocap.detect_contacts(SK, c),
    "footlock": lambda c: mocap.footlock(SK, c),
    "reach": lambda c: mocap.reach(SK, c, "left_wrist", [0.0, 1.0, 0.0], (0, 3)),
    "angular_speed": lambda c: mocap.angular_speed(c),
    "max_angular_speed": lambda c: mocap.max_angular_speed(c),
    "frame_times": lambda c: mocap.frame_times(c),
    "resample": lambda c: mocap.resample(c, 30),
}


def test_every_public_function_is_covered() -> None:
    """Each public function of mocap that takes a skeleton or a clip is in the tables above."""
    import inspect

    for name in mocap.__all__:
        obj = getattr(mocap, name)
        if not inspect.isfunction(obj):
            continue
        params = inspect.signature(obj).parameters
        if "skeleton" in params:
            assert name in SKELETON_CALLS, name
        if "clip" in params:
            assert name in CLIP_CALLS, name


@pytest.mark.parametrize("name", sorted(SKELETON_CALLS))
@pytest.mark.parametrize("bad", [None, "humanoid", POSE, WALK], ids=["None", "str", "Pose", "Clip"])
def test_skeleton_must_be_a_skeleton(name: str, bad: Any) -> None:
    with pytest.raises(SolverInputError, match=f"skeleton must be a kinema.Skeleton, got {type(bad).__name__}"):
        SKELETON_CALLS[name](bad)


@pytest.mark.parametrize("name", sorted(CLIP_CALLS))
@pytest.mark.parametrize("bad", [None, POSE, WALK.pose.rotations, SK], ids=["None", "Pose", "array", "Skeleton"])
def test_clip_must_be_a_clip(name: str, bad: Any) -> None:
    with pytest.raises(SolverInputError, match=f"clip must be a kinema.Clip, got {type(bad).__name__}"):
        CLIP_CALLS[name](bad)


@pytest.mark.parametrize("feet", [14.0, 1.5, object(), b"left_ankle"], ids=["float", "float2", "object", "bytes"])
def test_feet_must_be_joints(feet: Any) -> None:
    with pytest.raises(KinemaError, match="feet"):
        mocap.detect_contacts(SK, WALK, feet)
    with pytest.raises(KinemaError, match="feet"):
        mocap.footlock(SK, WALK, feet)


def test_a_misspelled_footlock_option_is_named_with_the_valid_ones() -> None:
    with pytest.raises(SolverInputError, match=r"unknown option 'hieght'.*did you mean 'height'") as info:
        mocap.footlock(SK, WALK, hieght=0.05)
    for valid in ("height", "speed", "ground", "hysteresis", "min_duration", "max_gap", "step", "merge_gap"):
        assert repr(valid) in str(info.value)
    with pytest.raises(SolverInputError, match="unknown option 'positions'"):
        mocap.footlock(SK, WALK, positions=np.zeros((WALK.n_frames, 2, 3)))
    with pytest.raises(SolverInputError, match="unknown options 'a', 'b'"):
        mocap.footlock(SK, WALK, a=1, b=2)


def test_footlock_options_still_reach_detect_contacts() -> None:
    """A valid option still changes the detection (and a bad value of one is still refused by it)."""
    low = mocap.footlock(SK, WALK, height=1e-6, speed=1e-6)
    default = mocap.footlock(SK, WALK)
    assert low.contacts.mask.sum() < default.contacts.mask.sum()
    with pytest.raises(SolverInputError, match="hysteresis"):
        mocap.footlock(SK, WALK, hysteresis=0.5)


# ------------------------------------------------------------------------- contacts given with options
def test_footlock_refuses_detection_options_beside_given_contacts() -> None:
    """Given contacts are used as they are: a detection option beside them (which would change nothing) is
    refused, naming it; the same contacts alone lock as the detection that made them."""
    contacts = mocap.detect_contacts(SK, WALK, height=0.08)
    with pytest.raises(SolverInputError, match="height"):
        mocap.footlock(SK, WALK, contacts=contacts, height=0.2)
    given = mocap.footlock(SK, WALK, contacts=contacts)
    detected = mocap.footlock(SK, WALK, height=0.08)
    assert np.array_equal(given.clip.pose.rotations, detected.clip.pose.rotations)
