"""Edge cases found by an exploratory pass over kinema.mocap and the file commands.

* foot lock refuses feet whose legs overlap (a foot and its toe, two legs hanging off one hip joint):
  each leg is solved on its own, so such legs were solved against each other and the skate grew;
* a long ``ease`` costs no more than the clip (the moving windows were padded out to the ease);
* frame times near the float limits give no numpy warnings (the speeds overflowed in ``np.gradient``);
* bad arguments to the mocap functions are :class:`kinema.KinemaError`\\ s naming the argument;
* ``kinema info`` guesses units and the up axis from the animation, not only the rest pose (files
  that lay every bone along X at rest were "X up", "unknown" units), and foot lock warns about a
  file that is not Y up.
"""

from __future__ import annotations

import json
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest

import kinema
from _cli import run
from kinema import Clip, Pose, Skeleton, mocap
from kinema.cli._commands import MISS_RTOL
from kinema.io import load_bvh, save_bvh


@pytest.fixture(scope="module")
def walk() -> tuple[Skeleton, Clip]:
    return kinema.samples.humanoid(), kinema.samples.clip("walk")


# ------------------------------------------------------------- overlapping legs
def test_footlock_refuses_feet_whose_legs_overlap(shared_data: Path) -> None:
    sk, clip = load_bvh(shared_data / "bvh" / "bvhtools-test.bvh")
    clip = Clip(clip.pose[:200], clip.fps)
    # A foot and its toe: the toe's leg (LeftLeg, LeftFoot, LeftToe) shares the foot's knee and foot.
    with pytest.raises(kinema.SolverInputError, match="'LeftFoot' and 'LeftToe'.*share 'LeftLeg'"):
        mocap.footlock(sk, clip, ["LeftFoot", "LeftToe"])
    # Disjoint but nested: the head's "leg" (Spine2, Neck, Head) hangs below the spine's (Hips, Spine, Spine1).
    with pytest.raises(kinema.SolverInputError, match=r"nested \(the second hangs below 'Spine1'\)"):
        mocap.footlock(sk, clip, ["Spine1", "Head"])
    # The toe-end sits on the toe (an End Site, zero offset): its leg is (LeftLeg, LeftFoot, LeftToe_End).
    with pytest.raises(kinema.SolverInputError, match="'LeftLeg' and 'LeftToe_End'.*share 'LeftLeg'"):
        mocap.footlock(sk, clip, ["LeftLeg", "LeftToe_End"])
    # Two legs whose hip is one joint (here the knees as feet: both legs start at the Hips).
    with pytest.raises(kinema.SolverInputError, match="share 'Hips'"):
        mocap.footlock(sk, clip, ["LeftLeg", "RightLeg"])
    # Contacts alone may overlap: heel and toe contacts of one foot are a fair question.
    contacts = mocap.detect_contacts(sk, clip, ["LeftFoot", "LeftToe"])
    assert contacts.mask.shape == (200, 2)
    # The toes alone are separate legs and lock as before: every held toe stays put to 1e-9 of its leg.
    res = mocap.footlock(sk, clip, ["LeftToe", "RightToe"])
    p = kinema.forward_kinematics(sk, res.clip.pose).positions
    for k, toe in enumerate(res.contacts.feet):
        leg = sk.bone_lengths()[[toe, sk.parents[toe]]].sum()
        for c, (s, e) in enumerate(zip(*res.held_runs(k), strict=True)):
            assert np.abs(p[s:e, toe][:, [0, 2]] - res.locks[k][c][[0, 2]]).max() < 1e-9 * leg


def test_one_foot_may_be_given_as_a_name(walk: tuple[Skeleton, Clip]) -> None:
    sk, clip = walk
    one = mocap.footlock(sk, clip, "left_ankle")
    assert one.contacts.names == ("left_ankle",)
    np.testing.assert_array_equal(one.clip.pose.rotations, mocap.footlock(sk, clip, ["left_ankle"]).clip.pose.rotations)


# ----------------------------------------------------------------- long eases
def test_moving_windows_wider_than_the_clip_match_the_padded_definition() -> None:
    a = np.array([0.0, 0.3, 0.1, 0.7, 0.2, 0.0, 0.4])
    for half in (len(a) - 1, len(a), 3 * len(a), 1000):
        padded = np.pad(a, half, mode="edge")  # the definition: edge values repeated
        windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
        np.testing.assert_allclose(mocap._moving(a, half, "mean"), windows.mean(axis=-1), rtol=1e-13, atol=0)
        np.testing.assert_array_equal(mocap._moving(a, half, "max"), windows.max(axis=-1))


def test_a_long_ease_costs_no_more_than_the_clip(walk: tuple[Skeleton, Clip]) -> None:
    """An ease of a day on a 39-frame clip: ramps of 2.6 million frames used to be padded out in memory."""
    sk, clip = walk
    tracemalloc.start()
    try:
        res = mocap.footlock(sk, clip, ease=86400.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5e6, f"{peak / 1e6:.0f} MB traced for a 39-frame clip"
    np.testing.assert_allclose(sk.bone_lengths(res.clip.pose), sk.bone_lengths(clip.pose), rtol=1e-9, atol=1e-12)
    assert res.metrics["skate_after"] < 1e-9 * res.metrics["skate_before"]
    assert res.ik_error.max() < 1e-9


# ------------------------------------------------------------- extreme frame times
@pytest.mark.parametrize("fps", [1e-300, 1e-200])
def test_frame_times_near_the_float_limits_give_no_warnings(walk: tuple[Skeleton, Clip], fps: float) -> None:
    sk, clip = walk
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the speeds overflowed in np.gradient, warning on the terminal
        res = mocap.footlock(sk, Clip(clip.pose, fps))
    for key in ("skate_before", "skate_after", "joint_speed_before", "joint_speed_after"):
        assert np.isfinite(res.metrics[key]), key
    assert np.all(np.isfinite(res.clip.pose.rotations))
    assert res.contacts.n_contacts > 0 and res.ik_error.max() < 1e-9  # planted feet found and held
    assert res.metrics["skate_after"] < 1e-9 * res.metrics["skate_before"]


# ----------------------------------------------------------------- bad arguments
_TARGET = (1.0, 2.0, 3.0)  # a reach target
#: (what the error names, mocap function, arguments after (skeleton, clip), keywords); ``("NAN",)``: the walk
#: with a NaN in frame 5 as the clip instead.
BAD_CALLS = [
    ("target", "reach", ("right_wrist", "abc", (1, 2)), {}),
    ("target", "reach", ("right_wrist", [1.0, 2.0, "x"], (1, 2)), {}),
    ("frames", "reach", ("right_wrist", _TARGET, None), {}),
    ("frames", "reach", ("right_wrist", _TARGET, (1,)), {}),
    ("frames", "reach", ("right_wrist", _TARGET, (1.7, 2.2)), {}),
    ("frames", "reach", ("right_wrist", _TARGET, (float("nan"), 2)), {}),
    ("blend", "reach", ("right_wrist", _TARGET, (1, 2)), {"blend": 2.5}),
    ("blend", "reach", ("right_wrist", _TARGET, (1, 2)), {"blend": 10**30}),
    ("ease", "footlock", (), {"ease": "x"}),
    ("ease", "footlock", (), {"ease": None}),
    ("height", "footlock", (), {"height": "x"}),
    ("ground", "footlock", (), {"ground": "x"}),
    ("hysteresis", "footlock", (), {"hysteresis": "x"}),
    ("min_duration", "footlock", (), {"min_duration": None}),
    ("step", "detect_contacts", (), {"step": "x"}),
    ("contacts", "footlock", (), {"contacts": "x"}),
    ("positions", "detect_contacts", (), {"positions": np.full((39, 2, 3), np.nan)}),
    ("translations", "detect_contacts", ("NAN",), {}),
]


@pytest.mark.parametrize(("what", "function", "args", "kwargs"), BAD_CALLS,
                         ids=[f"{f}-{w}-{i}" for i, (w, f, _, _) in enumerate(BAD_CALLS)])
def test_bad_arguments_are_kinema_errors_naming_the_argument(walk: tuple[Skeleton, Clip], what: str, function: str,
                                                             args: tuple[object, ...],
                                                             kwargs: dict[str, object]) -> None:
    sk, clip = walk
    if args == ("NAN",):
        t = clip.pose.translations.copy()
        t[5, 0, 1] = np.nan
        clip, args = Clip(Pose(t, clip.pose.rotations), clip.fps), ()
    with pytest.raises(kinema.KinemaError, match=what):
        getattr(mocap, function)(sk, clip, *args, **kwargs)


def test_foot_skate_checks_its_arrays() -> None:
    with pytest.raises(kinema.ShapeError, match="mask"):
        mocap.foot_skate(np.zeros((5, 2, 3)), np.ones((4, 2)), np.arange(5.0))
    with pytest.raises(kinema.SolverInputError, match="times"):
        mocap.foot_skate(np.zeros((5, 2, 3)), np.ones((5, 2)), np.zeros(5))


def test_an_unknown_sample_is_a_kinema_error() -> None:
    with pytest.raises(kinema.SolverInputError, match="'jog'.*walk, run"):
        kinema.samples.clip("jog")
    with pytest.raises(kinema.SolverInputError, match="walk, run"):
        kinema.samples.clip(None)  # type: ignore[arg-type]


# ------------------------------------------------------------- info's guesses
def test_info_guesses_units_and_up_from_the_animation(capsys: pytest.CaptureFixture[str], shared_data: Path,
                                                      tmp_path: Path) -> None:
    """bvhtools-test.bvh lays every bone along X at rest (its frames stand it up, Y up, in centimetres)."""
    src = shared_data / "bvh" / "bvhtools-test.bvh"
    code, out, _ = run(capsys, "info", src, "--json")
    info = json.loads(out)
    assert code == 0 and info["up_axis"] == "Y" and info["units"] == "centimetres"
    assert 100.0 <= info["height"] <= 300.0
    # The default --tolerance is that height's MISS_RTOL.
    code, out, _ = run(capsys, "footlock", src, "-o", tmp_path / "locked.bvh", "--json")
    assert code == 0 and json.loads(out)["tolerance_units"] == pytest.approx(MISS_RTOL * info["height"], rel=1e-12)
    # The same capture written Z up: Z up, the same height (to the file's text precision).
    sk, clip = load_bvh(src)
    save_bvh(tmp_path / "zup.bvh", sk, clip, up="z")
    code, out, _ = run(capsys, "info", tmp_path / "zup.bvh", "--json")
    zup = json.loads(out)
    assert code == 0 and zup["up_axis"] == "Z" and zup["units"] == "centimetres"
    assert zup["height"] == pytest.approx(info["height"], rel=1e-5)


def test_footlock_warns_about_a_file_that_is_not_y_up(capsys: pytest.CaptureFixture[str], shared_data: Path,
                                                      tmp_path: Path) -> None:
    sk, clip = load_bvh(shared_data / "bvh" / "test_mocapbank.bvh")
    short = Clip(clip.pose[:120], clip.fps)
    save_bvh(tmp_path / "yup.bvh", sk, short)
    save_bvh(tmp_path / "zup.bvh", sk, short, up="z")
    code, _, err = run(capsys, "footlock", tmp_path / "yup.bvh", "-o", tmp_path / "y_out.bvh", "-q")
    assert code == 0 and err == ""
    code, _, err = run(capsys, "footlock", tmp_path / "zup.bvh", "-o", tmp_path / "z_out.bvh", "-q")
    lines = err.splitlines()
    assert code == 0 and len(lines) == 1 and "looks Z up" in lines[0] and "Traceback" not in err
    assert (tmp_path / "z_out.bvh").is_file()
