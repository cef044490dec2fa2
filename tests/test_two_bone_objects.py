"""The prepared two-bone solver as an object: its history across batches, its options as validated
properties, and the checks of its constructor's arguments (and the 2D arm at extreme scales)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import kinema
from kinema.errors import KinemaError, SolverInputError
from kinema.limits import Hinge

ARM = ("right_shoulder", "right_elbow", "right_wrist")


@pytest.fixture(scope="module")
def scene() -> tuple[kinema.Skeleton, kinema.Pose, np.ndarray]:
    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    return sk, pose, kinema.forward_kinematics(sk, pose).positions


def _frames(P: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A target, a pole below the shoulder and a pole on the shoulder-target axis (where the history decides)."""
    sh = P[3]
    target = sh + np.array([0.3, -0.1, 0.15])
    return target, sh + np.array([0.0, 0.0, -1.0]), sh + 2.0 * (target - sh)


def assert_same(a: kinema.SolveResult, b: kinema.SolveResult) -> None:
    np.testing.assert_array_equal(a.pose.rotations, b.pose.rotations)
    np.testing.assert_array_equal(a.error, b.error)
    np.testing.assert_array_equal(a.reached, b.reached)
    np.testing.assert_array_equal(a.state["bend_direction"], b.state["bend_direction"])


# ------------------------------------------------------------- history and the call's batch
@pytest.mark.parametrize("batched", ["pole", "weight", "soft", "margin", "end_rotation", "bend_hint"])
def test_history_is_kept_when_the_batch_comes_from_an_option(scene: Any, batched: str) -> None:
    """The batch a history row belongs to is the solve's whole broadcast batch, not the pose's and the target's:
    a batch of two made by a (2, 3) pole (or a (2,) weight, soft, margin ...) keeps its history frame to frame,
    exactly as the same solve with the target broadcast to (2, 3)."""
    sk, pose, P = scene
    target, pole_below, pole_axis = _frames(P)

    def kw(pole: np.ndarray) -> dict[str, Any]:
        two = {"pole": np.stack([pole] * 2), "weight": np.ones(2), "soft": np.zeros(2), "margin": np.full(2, 1e-4),
               "end_rotation": np.tile([0.0, 0.0, 0.0, 1.0], (2, 1)), "bend_hint": np.tile([0.0, 0.0, -1.0], (2, 1))}
        return {"pole": pole, batched: two[batched]}

    ik = kinema.TwoBoneIK(sk, ARM)
    ik.solve(pose, target, **kw(pole_below))
    got = ik.solve(pose, target, **kw(pole_axis))
    ref = kinema.TwoBoneIK(sk, ARM)
    ref.solve(pose, np.stack([target] * 2), **kw(pole_below))
    want = ref.solve(pose, np.stack([target] * 2), **kw(pole_axis))
    assert_same(got, want)
    assert got.state["bend_direction"].shape == (2, 3)
    if batched != "bend_hint":  # (a given hint is used either way)
        fresh = kinema.TwoBoneIK(sk, ARM).solve(pose, target, **kw(pole_axis))
        assert not np.array_equal(fresh.state["bend_direction"], want.state["bend_direction"])


def test_history_is_forgotten_when_the_batch_really_changes(scene: Any) -> None:
    sk, pose, P = scene
    target, pole_below, pole_axis = _frames(P)
    ik = kinema.TwoBoneIK(sk, ARM)
    ik.solve(pose, target, pole=np.stack([pole_below] * 2))
    got = ik.solve(pose, target, pole=np.stack([pole_axis] * 3))  # a batch of three: the history of two is gone
    fresh = kinema.TwoBoneIK(sk, ARM).solve(pose, target, pole=np.stack([pole_axis] * 3))
    assert_same(got, fresh)


def test_history_mode_refuses_bad_inputs_with_kinema_errors(scene: Any) -> None:
    """After a first solve, the history mode's batch check must not meet the inputs before they are checked."""
    sk, pose, P = scene
    target, pole_below, _ = _frames(P)
    ik = kinema.TwoBoneIK(sk, ARM, pole=pole_below)
    ik.solve(pose, target)
    with pytest.raises(SolverInputError, match="pose"):
        ik.solve("not a pose", target)  # type: ignore[arg-type]
    with pytest.raises(KinemaError, match="target"):
        ik.solve(pose, [[0.0, 0.0, 0.0], [1.0, 2.0]])
    with pytest.raises(KinemaError, match="weight"):
        ik.solve(pose, target, weight=[[0.5], [0.5, 0.5]])


# ------------------------------------------------------------- constructor arguments
def test_duplicate_limits_by_name_and_index_are_refused(scene: Any) -> None:
    sk, _, _ = scene
    h1 = Hinge((1.0, 0.0, 0.0), 0.0, 2.0)
    h2 = Hinge((0.0, 1.0, 0.0), 0.0, 2.5)
    with pytest.raises(SolverInputError, match="right_elbow.*two limits"):
        kinema.TwoBone(sk, ARM, limits={"right_elbow": h1, 4: h2})
    with pytest.raises(SolverInputError, match="two limits"):
        kinema.TwoBone(sk, ARM, limits={4: h1, np.int64(4): h1, "right_elbow": h1})
    # also off the chain (as CCD and FABRIK refuse them)
    with pytest.raises(SolverInputError, match="left_elbow.*two limits"):
        kinema.TwoBone(sk, ARM, limits={"left_elbow": h1, 7: h1})


@pytest.mark.parametrize("joints", [None, 3.5, object(), np.array(4)])
def test_joints_that_are_no_chain_are_refused(scene: Any, joints: Any) -> None:
    sk, _, _ = scene
    with pytest.raises(SolverInputError, match="three joints"):
        kinema.TwoBone(sk, joints)
    with pytest.raises(SolverInputError, match="three joints"):
        kinema.TwoBoneIK(sk, joints)


def test_a_generator_of_joints_is_read_once(scene: Any) -> None:
    sk, pose, P = scene
    target, pole_below, _ = _frames(P)
    ik = kinema.TwoBoneIK(sk, (j for j in ARM))
    assert ik.joints_spec == ARM
    assert ik.joints.tolist() == [3, 4, 5]
    assert_same(ik.solve(pose, target, pole=pole_below), kinema.TwoBoneIK(sk, ARM).solve(pose, target, pole=pole_below))
    tb = kinema.TwoBone(sk, iter(ARM))
    assert tb.joints.tolist() == [3, 4, 5]


@pytest.mark.parametrize("option", ["continuity", "history", "smooth"])
@pytest.mark.parametrize("value", [np.array([True, False]), np.array([True]), "False", 1, 0, None, 1.0])
def test_flags_must_be_booleans(scene: Any, option: str, value: Any) -> None:
    sk, _, _ = scene
    extra = {"history": True} if option == "smooth" else {}
    with pytest.raises(SolverInputError, match=option):
        kinema.TwoBone(sk, ARM, **{option: value}, **extra)
    ik = kinema.TwoBone(sk, ARM, history=True)
    with pytest.raises(SolverInputError, match=option):
        setattr(ik, option, value)


def test_numpy_bools_are_booleans(scene: Any) -> None:
    sk, _, _ = scene
    ik = kinema.TwoBone(sk, ARM, continuity=np.True_, history=np.bool_(True), smooth=np.array(True)[()])
    assert ik.continuity is True and ik.history is True and ik.smooth is True


def test_continuity_setter_refuses_arrays(scene: Any) -> None:
    sk, _, _ = scene
    ik = kinema.TwoBone(sk, ARM)
    with pytest.raises(SolverInputError, match="continuity"):
        ik.continuity = np.array([True, False])  # type: ignore[assignment]
    assert ik.continuity is False


# ------------------------------------------------------------- history, smooth, bend_speed as properties
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, "fast", True, np.array([1.0, 2.0]), None])
def test_bend_speed_setter_validates(scene: Any, value: Any) -> None:
    sk, _, _ = scene
    ik = kinema.TwoBoneIK(sk, ARM, smooth=True)
    with pytest.raises(SolverInputError, match="bend_speed"):
        ik.bend_speed = value
    assert ik.bend_speed == kinema._two_bone.DEFAULT_BEND_SPEED


def _walk(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Targets crossing the shoulder-to-pole axis, and the pole (the history and the smoothing matter)."""
    sh = P[3]
    pole = sh + np.array([0.0, -1.0, 0.0])
    s = np.linspace(-1.0, 1.0, 12)
    targets = sh + np.stack([0.05 * s, -0.5 + 0.0 * s, 0.05 + 0.0 * s], axis=-1)
    return targets, pole


def _run(ik: kinema.TwoBone, pose: kinema.Pose, targets: np.ndarray, pole: np.ndarray) -> list[kinema.SolveResult]:
    out = []
    cur = pose
    for t in targets:
        r = ik.solve(cur, t, pole=pole, dt=1.0 / 30.0)
        cur = r.pose
        out.append(r)
    return out


@pytest.mark.parametrize("start, change, built", [
    ({}, {"history": True}, {"history": True}),
    ({"history": True}, {"smooth": True}, {"history": True, "smooth": True}),
    ({"history": True, "smooth": True}, {"smooth": False, "history": False},
     {"history": False, "smooth": False}),
    ({"history": True, "continuity": False}, {"history": False}, {}),
])
def test_setting_an_option_equals_building_with_it(scene: Any, start: dict, change: dict, built: dict) -> None:
    """Setting ``history``, ``smooth`` or ``bend_speed`` on a solver has the constructor's effect: the solves that
    follow equal, bit for bit, those of a solver built with the option (``history=True`` turns continuity on
    as the constructor does, ``history=False`` turns it back to what was asked; changing the mode forgets the
    recorded history, as a new solver has none)."""
    sk, pose, P = scene
    targets, pole = _walk(P)
    ik = kinema.TwoBone(sk, ARM, **start)
    _run(ik, pose, targets[::-1], pole)  # some history of its own first
    for k, v in change.items():
        setattr(ik, k, v)
    ref = kinema.TwoBone(sk, ARM, **built)
    assert (ik.history, ik.smooth, ik.continuity, ik.bend_speed) == \
        (ref.history, ref.smooth, ref.continuity, ref.bend_speed)
    for a, b in zip(_run(ik, pose, targets, pole), _run(ref, pose, targets, pole), strict=True):
        assert_same(a, b)


def test_bend_speed_set_equals_built_with_it(scene: Any) -> None:
    sk, pose, P = scene
    targets, pole = _walk(P)
    ik = kinema.TwoBoneIK(sk, ARM, smooth=True)
    ik.bend_speed = np.float32(0.25)
    assert type(ik.bend_speed) is float and ik.bend_speed == 0.25
    got = _run(ik, pose, targets, pole)
    want = _run(kinema.TwoBoneIK(sk, ARM, smooth=True, bend_speed=0.25), pose, targets, pole)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b)
    default = _run(kinema.TwoBoneIK(sk, ARM, smooth=True), pose, targets, pole)
    assert any(not np.array_equal(a.pose.rotations, b.pose.rotations) for a, b in zip(default, want, strict=True))


def test_history_true_after_construction_turns_continuity_on(scene: Any) -> None:
    sk, pose, P = scene
    target, pole_below, pole_axis = _frames(P)
    ik = kinema.TwoBone(sk, ARM)
    ik.history = True
    assert ik.continuity
    ik.solve(pose, target, pole=pole_below)
    got = ik.solve(pose, target, pole=pole_axis)
    ref = kinema.TwoBone(sk, ARM, history=True)
    ref.solve(pose, target, pole=pole_below)
    assert_same(got, ref.solve(pose, target, pole=pole_axis))


def test_continuity_set_in_history_mode_is_what_the_constructor_gives(scene: Any) -> None:
    """``TwoBone(history=True)`` has continuity on whatever ``continuity`` says, set or given; ``TwoBoneIK``
    takes it as given; the value set comes back when the history mode is turned off."""
    sk, pose, P = scene
    targets, pole = _walk(P)
    ik = kinema.TwoBone(sk, ARM, history=True)
    ik.continuity = False
    assert ik.continuity is True
    assert ik.continuity == kinema.TwoBone(sk, ARM, history=True, continuity=False).continuity
    ik.history = False
    assert ik.continuity is False
    ik.continuity = True
    assert ik.continuity is True
    tik = kinema.TwoBoneIK(sk, ARM)
    tik.continuity = False
    assert tik.continuity is False
    got = _run(tik, pose, targets, pole)
    want = _run(kinema.TwoBoneIK(sk, ARM, continuity=False), pose, targets, pole)
    for a, b in zip(got, want, strict=True):
        assert_same(a, b)


def test_smooth_needs_history_when_set_too(scene: Any) -> None:
    sk, _, _ = scene
    ik = kinema.TwoBone(sk, ARM)
    with pytest.raises(SolverInputError, match="smooth=True needs history=True"):
        ik.smooth = True
    assert ik.smooth is False
    ik = kinema.TwoBoneIK(sk, ARM, smooth=True)
    with pytest.raises(SolverInputError, match="smooth=True needs history=True"):
        ik.history = False
    assert ik.history is True and ik.smooth is True


def test_the_chain_is_read_only(scene: Any) -> None:
    sk, _, _ = scene
    ik = kinema.TwoBone(sk, ARM)
    for name, value in (("joints", np.array([6, 7, 8])), ("skeleton", sk)):
        with pytest.raises(SolverInputError, match=name):
            setattr(ik, name, value)
    assert ik.joints.tolist() == [3, 4, 5]


# ------------------------------------------------------------- 2D at extreme scales
@pytest.mark.parametrize("scale", [1e-160, 1e-100, 1.0, 1e100, 1e154, 1e155, 1e200, 1e300])
def test_2d_reaches_at_any_scale(scale: float) -> None:
    """Lengths and coordinates near 1e155 and beyond (whose squares overflow) or 1e-160 (whose squares underflow)
    give the same arm as at scale 1, scaled: a reachable target is reached."""
    one = kinema.solve_two_bone_2d([0.0, 0.0], [1.2, 0.5], 1.0, 0.8)
    r = kinema.solve_two_bone_2d([0.0, 0.0], [1.2 * scale, 0.5 * scale], 1.0 * scale, 0.8 * scale)
    assert bool(r.reached)
    assert np.all(np.isfinite(r.end)) and np.all(np.isfinite(r.elbow)) and math.isfinite(r.error)
    np.testing.assert_allclose(r.end / scale, one.end, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(r.elbow / scale, one.elbow, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose([r.angle1, r.angle2], [one.angle1, one.angle2], rtol=0, atol=1e-12)
    assert r.error <= 1e-9 * 1.8 * scale


def test_2d_huge_lengths_far_target_and_overflow() -> None:
    r = kinema.solve_two_bone_2d([0.0, 0.0], [1.2e155, 0.5e155], 1e155, 0.8e155)
    assert bool(r.reached) and np.all(np.isfinite(r.end))
    # the sum of the lengths overflows: still a solve, not "degenerate bone lengths"
    big = kinema.solve_two_bone_2d([0.0, 0.0], [1.0e308, 0.0], 1e308, 1e308)
    assert bool(big.reached) and np.all(np.isfinite(big.end))
    np.testing.assert_allclose(big.end, [1e308, 0.0], rtol=1e-12, atol=1e296)
    # an arm out of reach by 1e200 times its length: clamped on the line, the error is the distance
    far = kinema.solve_two_bone_2d([0.0, 0.0], [3e200, 4e200], 1.0, 0.8)
    assert not bool(far.reached)
    np.testing.assert_allclose(far.error, 5e200, rtol=1e-12)
    np.testing.assert_allclose(far.end, np.array([0.6, 0.8]) * (1.8 - 1e-4 * 0.8), rtol=1e-12)
    # a result that is not a float64: refused, never NaN
    with pytest.raises(SolverInputError, match="overflow"):
        kinema.solve_two_bone_2d([1.7e308, 0.0], [1.7e308, 1e308], 1e308, 1e308, -1)  # the elbow beyond
    with pytest.raises(SolverInputError, match="overflow"):
        kinema.solve_two_bone_2d([-1.5e308, 0.0], [1.5e308, 0.0], 1.0, 1.0)


def test_2d_batch_of_mixed_scales_equals_the_loop() -> None:
    scales = np.array([1e-160, 1.0, 1e154, 1e155, 1e300])
    root = np.zeros((5, 2))
    target = np.stack([1.2 * scales, 0.5 * scales], -1)
    r = kinema.solve_two_bone_2d(root, target, scales, 0.8 * scales, np.array([1, -1, 1, -1, 1]))
    for i, s in enumerate(scales):
        one = kinema.solve_two_bone_2d(root[i], target[i], s, 0.8 * s, [1, -1, 1, -1, 1][i])
        np.testing.assert_array_equal(r.end[i], one.end)
        np.testing.assert_array_equal(r.angle1[i], one.angle1)
        assert r.reached[i] == one.reached and r.reached[i]


def test_limits_read_back_as_given_and_settable(scene: Any) -> None:
    """``limits`` reads back a snapshot of the mapping given (read-only); setting it is checked and packed as the
    constructor does (as every solver's options; tests/test_limits_settable.py compares the solves)."""
    sk, _, _ = scene
    lim = {"right_elbow": Hinge((1.0, 0.0, 0.0), 0.0, 2.0)}
    ik = kinema.TwoBone(sk, ARM, limits=lim)
    assert ik.limits == lim and kinema.TwoBone(sk, ARM).limits is None
    lim["left_elbow"] = lim["right_elbow"]  # a snapshot: the caller's mapping changing changes nothing
    assert list(ik.limits) == ["right_elbow"]
    with pytest.raises(TypeError):
        ik.limits["right_wrist"] = lim["right_elbow"]  # type: ignore[index]  # a read-only mapping
    ik.limits = None
    assert ik.limits is None


def test_the_default_soft_of_a_call_is_no_batch(scene: Any) -> None:
    """``soft=0.0`` given to a solve of a solver whose own soft is not 0 is one value for all items (a (1,) row
    inside), not a batch of one."""
    sk, pose, P = scene
    target, pole_below, _ = _frames(P)
    ik = kinema.TwoBone(sk, ARM, soft=0.3, margin=0.01)
    r = ik.solve(pose, target, pole=pole_below, soft=0.0)
    assert np.shape(r.error) == () and r.pose.rotations.shape == (sk.n_joints, 4)
    assert_same(r, kinema.TwoBone(sk, ARM, margin=0.01).solve(pose, target, pole=pole_below))
    hist = kinema.TwoBoneIK(sk, ARM, soft=0.3)
    hist.solve(pose, target, pole=pole_below, soft=0.0)
    assert hist.bend_direction is not None and hist.bend_direction.shape == (3,)
