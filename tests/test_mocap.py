"""kinema.mocap: contact detection, foot locking and reach re-aiming on a real BVH capture.

The capture (tests/data/bvh/test_mocapbank.bvh, 19 joints + 5 end sites,
455 frames, centimetres) is a test fixture only.  Tolerances: bone lengths
1e-9 relative (float64 FK); locked feet 1e-9 of the leg length; reach 1e-4
(file units) as the issue asks, the solve itself gives ~1e-12.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kinema
from kinema import Clip, Pose, Skeleton, mocap
from kinema import rotation as R
from kinema.io import load_bvh

LEG_JOINTS = ("LeftHip", "LeftKnee", "LeftAnkle", "RightHip", "RightKnee", "RightAnkle")


@pytest.fixture(scope="module")
def capture(shared_data: Path) -> tuple[Skeleton, Clip]:
    return load_bvh(shared_data / "bvh" / "test_mocapbank.bvh")


@pytest.fixture(scope="module")
def locked(capture: tuple[Skeleton, Clip]) -> mocap.FootlockResult:
    sk, clip = capture
    return mocap.footlock(sk, clip)


def _world(sk: Skeleton, clip: Clip) -> np.ndarray:
    return kinema.forward_kinematics(sk, clip.pose).positions


# ----------------------------------------------------------------- contacts
def test_feet_found_by_name(capture: tuple[Skeleton, Clip]) -> None:
    sk, _ = capture
    assert [sk.names[f] for f in mocap.find_feet(sk)] == ["LeftAnkle", "RightAnkle"]
    hum = kinema.samples.humanoid()
    assert [hum.names[f] for f in mocap.find_feet(hum)] == ["left_ankle", "right_ankle"]


def test_no_feet_is_a_clear_error() -> None:
    sk = Skeleton(["a", "b", "c"], [-1, 0, 1], np.zeros((3, 3)) + [0, 1, 0])
    with pytest.raises(kinema.SkeletonError, match="--feet"):
        mocap.find_feet(sk)
    with pytest.raises(kinema.BoneNotFoundError):
        mocap.detect_contacts(sk, Clip(sk.rest_pose((3,)), 30.0), ["nope"])
    with pytest.raises(kinema.SkeletonError, match="grandparent"):
        mocap.detect_contacts(sk, Clip(sk.rest_pose((3,)), 30.0), ["b"])


def test_contacts_on_the_capture(capture: tuple[Skeleton, Clip]) -> None:
    """The left foot stays planted most of the clip; the right foot lifts while the actor kneels."""
    sk, clip = capture
    c = mocap.detect_contacts(sk, clip)
    assert c.mask.shape == (clip.n_frames, 2)
    assert c.mask[:, 0].mean() > 0.9
    # Right ankle is ~10 cm higher during the kneel (frames ~130-350): no contact there.
    assert not c.mask[150:340, 1].any()
    assert c.mask[:100, 1].all() and c.mask[-60:, 1].all()
    th = c.thresholds
    assert np.all(th.height_off == pytest.approx(mocap.DEFAULT_HYSTERESIS * th.height_on))
    assert np.all(th.speed_off == pytest.approx(mocap.DEFAULT_HYSTERESIS * th.speed_on))
    # Every contact frame satisfies the "leave" thresholds (hysteresis never keeps a contact above them)
    # except inside filled gaps (at most max_gap frames long).
    h = c.positions[..., 1] - th.ground
    above = (h > th.height_off) | (c.speeds > th.speed_off)
    for k in range(2):
        bad = np.flatnonzero(c.mask[:, k] & above[:, k])
        for f in bad:
            lo, hi = max(f - th.max_gap, 0), min(f + th.max_gap + 1, clip.n_frames)
            assert not above[lo:hi, k].all()


def test_thresholds_can_be_given(capture: tuple[Skeleton, Clip]) -> None:
    sk, clip = capture
    c = mocap.detect_contacts(sk, clip, ["LeftAnkle"], height=2.0, speed=3.0, ground=10.0, hysteresis=1.0)
    assert c.names == ("LeftAnkle",)
    np.testing.assert_array_equal(c.thresholds.ground, [10.0])
    np.testing.assert_array_equal(c.thresholds.height_on, [2.0])
    np.testing.assert_array_equal(c.thresholds.speed_off, [3.0])
    # a 2 cm band above 10 cm holds fewer frames than the estimated one
    assert c.mask.sum() < mocap.detect_contacts(sk, clip, ["LeftAnkle"]).mask.sum()
    for bad in ({"height": -1.0}, {"speed": 0.0}, {"hysteresis": 0.5}, {"ground": np.nan}, {"min_duration": -1}):
        with pytest.raises(kinema.SolverInputError):
            mocap.detect_contacts(sk, clip, **bad)  # type: ignore[arg-type]


def _kernels():  # type: ignore[no-untyped-def]
    from kinema._kernels import contact

    return contact


def test_hysteresis_does_not_flicker() -> None:
    """A height hovering around the threshold: one contact with hysteresis, many without."""
    k = _kernels()
    t = np.arange(200)
    h = (1.0 + 0.05 * np.sin(t * 1.7))[:, None]  # noise around 1.0
    h[100:] += 1.0  # foot lifts at frame 100
    v = np.zeros_like(h)
    out = np.empty(h.shape, dtype=bool)
    k.hysteresis(h, v, np.array([1.0]), np.array([1.5]), np.array([1.0]), np.array([1.5]), out)
    assert out[:100, 0].sum() >= 99 and not out[100:, 0].any()
    flicker = np.empty(h.shape, dtype=bool)
    k.hysteresis(h, v, np.array([1.0]), np.array([1.0]), np.array([1.0]), np.array([1.0]), flicker)
    runs = np.count_nonzero(np.diff(flicker[:100, 0].astype(int)) == 1)
    assert runs > 10


def test_clean_runs_fills_gaps_and_drops_touches() -> None:
    k = _kernels()
    m = np.zeros((30, 1), dtype=bool)
    m[0:2] = True  # short run at the start: dropped (min_len 3)
    m[5:10] = True
    m[12:15] = True  # gap of 2 frames after 10: filled
    m[20:22] = True  # gap of 5: kept apart; run of 2: dropped
    m[27:30] = True  # run touching the end: kept
    still = np.zeros((30, 1, 2))  # the foot never moves: every short gap is a dropout
    k.clean_runs(m, 2, 3, still, np.array([0.05]))
    expect = np.zeros(30, dtype=bool)
    expect[5:15] = True
    expect[27:30] = True
    np.testing.assert_array_equal(m[:, 0], expect)


def test_clean_runs_keeps_apart_contacts_between_which_the_foot_travelled() -> None:
    """A pivot on the toe: the ankle leaves, travels 14 cm in a 3-frame gap and lands.  Filling that gap made one
    contact of two, and footlock held the ankle 11.8 cm off the animation while the planted toe slid 14 cm.  A gap
    is filled only when the foot came back within ``step`` of where it left (here 4.5 cm)."""
    k = _kernels()
    m = np.zeros((20, 1), dtype=bool)
    m[0:8] = True
    m[11:20] = True
    xy = np.zeros((20, 1, 2))
    xy[8:11, 0, 0] = [4.0, 9.0, 13.0]
    xy[11:, 0, 0] = 14.0
    moved = m.copy()
    k.clean_runs(moved, 3, 1, xy, np.array([4.5]))
    np.testing.assert_array_equal(moved, m)  # two contacts, as detected
    still = m.copy()
    xy[11:, 0, 0] = 4.0  # came back down within the step: the gap was a dropout
    k.clean_runs(still, 3, 1, xy, np.array([4.5]))
    assert bool(np.all(still))


def test_ease_weights_share_gaps_and_stay_inside_unit_interval() -> None:
    k = _kernels()
    w = np.empty(40)
    o = np.empty(40, dtype=np.int64)
    starts = np.array([2, 20], dtype=np.int64)
    ends = np.array([12, 25], dtype=np.int64)
    k.ease_weights(starts, ends, 40, 5, w, o)
    np.testing.assert_array_equal(w[2:12], 1.0)
    np.testing.assert_array_equal(w[20:25], 1.0)
    assert np.all(o[2:12] == 0) and np.all(o[20:25] == 1)
    # gap 12..20 (8 frames): each side takes 4 frames, none overlap
    assert np.all((w[12:16] > 0) & (w[12:16] < 1)) and np.all(o[12:16] == 0)
    assert np.all((w[16:20] > 0) & (w[16:20] < 1)) and np.all(o[16:20] == 1)
    assert np.all(np.diff(w[11:16]) < 0) and np.all(np.diff(w[16:21]) > 0)
    # ramp cut at the clip start; full ramp of 5 after the last contact, then zero
    assert np.all(w[:2] > 0) and o[0] == 0
    assert np.all((w[25:30] > 0) & (w[25:30] < 1)) and np.all(w[30:] == 0) and np.all(o[30:] == -1)
    # smoothstep of x = 1 - i/(n+1)
    x = 1 - np.arange(1, 6) / 6.0
    np.testing.assert_allclose(w[25:30], x * x * (3 - 2 * x), rtol=0, atol=1e-15)


def test_crossfade_short_gaps_joins_the_two_offsets_continuously() -> None:
    """A gap shorter than its two ramps fades one lock's offset into the next; other gaps are left alone."""
    k = _kernels()
    rng = np.random.default_rng(3)
    anim = np.cumsum(rng.normal(size=(40, 3)), axis=0)
    starts = np.array([0, 14, 30, 36], dtype=np.int64)
    ends = np.array([10, 30, 32, 40], dtype=np.int64)  # gaps: 4 (short), 0 (touching), 4 (wide enough)
    lock = rng.normal(size=(4, 3))
    before = np.array([3, 3, 3, 1], dtype=np.int64)
    after = np.array([3, 3, 3, 3], dtype=np.int64)
    tgt = anim.copy()
    k.crossfade_short_gaps(tgt, anim, starts, ends, lock, before, after)
    off_a, off_b = lock[0] - anim[9], lock[1] - anim[14]
    x = np.arange(1, 5) / 5.0
    x = x * x * (3 - 2 * x)
    np.testing.assert_allclose(tgt[10:14], anim[10:14] + (1 - x)[:, None] * off_a + x[:, None] * off_b,
                               rtol=0, atol=1e-12)
    np.testing.assert_array_equal(tgt[:10], anim[:10])
    np.testing.assert_array_equal(tgt[14:], anim[14:])  # touching contacts and a gap of 4 >= 3 + 1: untouched


def test_lengthen_fast_ramps_kernel_acts_on_each_kind_of_frame() -> None:
    """Ramp frames first stop easing, then grow by the speed ratio (capped); a straight leg lets go near an edge."""
    k = _kernels()
    n = 40
    starts = np.array([10], dtype=np.int64)
    ends = np.array([30], dtype=np.int64)
    owner = np.full(n, -1, dtype=np.int64)
    owner[5:35] = 0  # ramps 5..9 and 30..34
    straight = np.zeros(n, dtype=bool)
    before = np.array([5], dtype=np.int64)
    after = np.array([5], dtype=np.int64)
    eased_b = np.array([True])
    eased_a = np.array([True])
    ratio = np.zeros(n - 1)
    ratio[6] = 1.5  # frames 6 and 7: on the ramp before
    ratio[20] = 2.0  # inside the contact, bent leg: nothing to let go of

    def run() -> bool:
        return bool(k.lengthen_fast_ramps(ratio, 1.01, owner, straight, starts, ends, starts.copy(), ends.copy(),
                                          4, 7, before, after, eased_b, eased_a))

    assert run() and not eased_b[0] and before[0] == 7 and eased_a[0]  # un-eased, then 5 -> ceil(7.5) capped at 7
    assert starts[0] == 10 and ends[0] == 30
    assert not run()  # capped: nothing left to change
    ratio[:] = 0.0
    ratio[27] = 3.0  # frames 27, 28: inside, 2 frames from the detected end
    straight[27:29] = True
    assert run() and ends[0] == 28 and starts[0] == 10


# ----------------------------------------------------------------- footlock
def test_footlock_reduces_skate_by_80_percent(capture: tuple[Skeleton, Clip], locked: mocap.FootlockResult) -> None:
    sk, clip = capture
    c = locked.contacts
    times = mocap.frame_times(clip)
    feet = list(c.feet)
    before = mocap.foot_skate(_world(sk, clip)[:, feet], c.mask, times)
    after = mocap.foot_skate(_world(sk, locked.clip)[:, feet], c.mask, times)
    assert before > 0.5  # cm/s: the capture really skates
    assert after <= 0.2 * before
    assert locked.metrics["skate_before"] == pytest.approx(before, rel=1e-12)
    assert locked.metrics["skate_after"] == pytest.approx(after, rel=1e-6, abs=1e-12)


def test_locked_feet_hold_one_position_per_contact(capture: tuple[Skeleton, Clip]) -> None:
    """With ``keep_length=False`` a held foot is at its lock in 3-D."""
    sk, clip = capture
    locked = mocap.footlock(sk, clip, keep_length=False)
    p = _world(sk, locked.clip)
    for k, foot in enumerate(locked.contacts.feet):
        starts, ends = locked.contacts.runs(k)
        assert len(starts) == len(locked.locks[k]) > 0
        for c, (s, e) in enumerate(zip(starts, ends, strict=True)):
            dev = np.linalg.norm(p[s:e, foot] - locked.locks[k][c], axis=-1).max()
            assert dev < 1e-9 * 87.0, (sk.names[foot], s, e, dev)


def test_kept_length_locks_hold_across_the_ground(capture: tuple[Skeleton, Clip]) -> None:
    """With ``keep_length``, across the ground a held foot is at its lock exactly; its height is between the
    lock's and the one that keeps a near-straight leg at its animated length (``_keep_leg_length``, from the
    animated hip)."""
    from kinema._kernels.constants import DEFAULT_MARGIN_FRACTION

    sk, clip = capture
    locked = mocap.footlock(sk, clip)  # keep_length=True: the default
    p = _world(sk, locked.clip)
    p_in = _world(sk, clip)
    tol = 1e-9 * 87.0
    flat = [0, 2]  # horizontal axes (kinema is Y-up)
    moved = 0
    for k, foot in enumerate(locked.contacts.feet):
        knee = int(sk.parents[foot])
        hip = int(sk.parents[knee])
        a = np.linalg.norm(p_in[:, knee] - p_in[:, hip], axis=-1)
        b = np.linalg.norm(p_in[:, foot] - p_in[:, knee], axis=-1)
        r = np.minimum(np.linalg.norm(p_in[:, foot] - p_in[:, hip], axis=-1),
                       a + b - mocap.LENGTH_MARGIN_FACTOR * DEFAULT_MARGIN_FRACTION * np.minimum(a, b))
        starts, ends = locked.contacts.runs(k)
        assert len(starts) == len(locked.locks[k]) > 0
        for c, (s, e) in enumerate(zip(starts, ends, strict=True)):
            lock = locked.locks[k][c]
            dev = np.linalg.norm(p[s:e, foot][:, flat] - lock[flat], axis=-1).max()
            assert dev < tol, (sk.names[foot], s, e, dev)
            h2 = np.sum((lock[flat] - p_in[s:e, hip][:, flat]) ** 2, axis=-1)
            y_keep = np.where(r[s:e] ** 2 > h2, p_in[s:e, hip, 1] - np.sqrt(np.maximum(r[s:e] ** 2 - h2, 0.0)), lock[1])
            y = p[s:e, foot, 1]
            moved += int(np.sum(np.abs(y - lock[1]) > 1e-3))  # cm: the height really follows the leg somewhere
            assert np.all(y >= np.minimum(lock[1], y_keep) - tol) and np.all(y <= np.maximum(lock[1], y_keep) + tol)
    assert moved > 0


def test_bone_lengths_kept(capture: tuple[Skeleton, Clip], locked: mocap.FootlockResult) -> None:
    sk, clip = capture
    b0 = sk.bone_lengths(clip.pose)
    b1 = sk.bone_lengths(locked.clip.pose)
    np.testing.assert_allclose(b1, b0, rtol=1e-9, atol=1e-12)


def test_only_legs_and_hips_height_change(capture: tuple[Skeleton, Clip], locked: mocap.FootlockResult) -> None:
    sk, clip = capture
    legs = [sk.index(n) for n in LEG_JOINTS]
    others = [j for j in range(sk.n_joints) if j not in legs]
    r0, r1 = clip.pose.rotations, locked.clip.pose.rotations
    t0, t1 = clip.pose.translations, locked.clip.pose.translations
    np.testing.assert_array_equal(r1[:, others], r0[:, others])  # bit for bit
    root = sk.index("Hips")
    np.testing.assert_array_equal(np.delete(t1, root, axis=1), np.delete(t0, root, axis=1))
    np.testing.assert_array_equal(t1[:, root, [0, 2]], t0[:, root, [0, 2]])
    np.testing.assert_allclose(t0[:, root, 1] - t1[:, root, 1], locked.hips_drop, rtol=0, atol=1e-12)
    assert locked.hips_drop.min() >= 0.0
    # frames with no IK weight and no drop are untouched, legs included
    idle = (locked.weights.max(axis=1) == 0.0) & (locked.hips_drop == 0.0)
    np.testing.assert_array_equal(r1[idle], r0[idle])


def test_feet_keep_their_animated_world_orientation(capture: tuple[Skeleton, Clip],
                                                    locked: mocap.FootlockResult) -> None:
    sk, clip = capture
    q0 = kinema.forward_kinematics(sk, clip.pose).rotations
    q1 = kinema.forward_kinematics(sk, locked.clip.pose).rotations
    for foot in locked.contacts.feet:
        assert R.angle_between(q0[:, foot], q1[:, foot]).max() < 1e-9


def test_no_angular_speed_spike(capture: tuple[Skeleton, Clip], locked: mocap.FootlockResult) -> None:
    """The largest joint angular speed does not grow, and no leg joint's own peak grows by more than 2%."""
    sk, clip = capture
    w0 = mocap.angular_speed(clip)
    w1 = mocap.angular_speed(locked.clip)
    assert w1.max() <= w0.max() * (1 + 1e-12)
    for name in LEG_JOINTS:
        j = sk.index(name)
        assert w1[:, j].max() <= 1.02 * w0[:, j].max(), name
    legs = [sk.index(n) for n in LEG_JOINTS]
    assert sorted(locked.metrics["changed_joints"]) == sorted(LEG_JOINTS)
    # the figures are the largest speed of the joints footlock changed, named by one of them
    assert locked.metrics["joint_speed_after"] == pytest.approx(w1[:, legs].max(), rel=1e-12)
    assert locked.metrics["joint_speed_before"] == pytest.approx(w0[:, legs].max(), rel=1e-12)
    for when in ("before", "after"):
        assert locked.metrics[f"joint_speed_{when}_joint"] in LEG_JOINTS


def test_contacts_are_counted_per_foot(locked: mocap.FootlockResult) -> None:
    c = locked.contacts
    per_foot = locked.metrics["contact_frames_per_foot"]
    assert list(per_foot) == list(c.names)
    for k, name in enumerate(c.names):
        assert per_foot[name] == int(c.mask[:, k].sum()) <= c.mask.shape[0]  # never more than the clip's frames
        assert locked.metrics["contacts_per_foot"][name] == len(c.runs(k)[0])
    assert sum(locked.metrics["contacts_per_foot"].values()) == locked.metrics["contacts"]


def test_an_empty_clip_is_a_clear_error(capture: tuple[Skeleton, Clip]) -> None:
    sk, clip = capture
    empty = Clip(Pose(clip.pose.translations[:0], clip.pose.rotations[:0]), clip.fps)
    with pytest.raises(kinema.SolverInputError, match="no frames"):
        mocap.footlock(sk, empty)
    with pytest.raises(kinema.SolverInputError, match="no frames"):
        mocap.reach(sk, empty, "RightWrist", [0.0, 0.0, 0.0], (0, 0))


def test_feet_do_not_jump(capture: tuple[Skeleton, Clip], locked: mocap.FootlockResult) -> None:
    """Easing: the locked feet never move faster, nor accelerate harder, than the animated ones did."""
    sk, clip = capture
    feet = list(locked.contacts.feet)
    p0, p1 = _world(sk, clip)[:, feet], _world(sk, locked.clip)[:, feet]
    v0 = np.linalg.norm(np.diff(p0, axis=0), axis=-1).max(axis=0)
    v1 = np.linalg.norm(np.diff(p1, axis=0), axis=-1).max(axis=0)
    a0 = np.linalg.norm(np.diff(p0, 2, axis=0), axis=-1).max(axis=0)
    a1 = np.linalg.norm(np.diff(p1, 2, axis=0), axis=-1).max(axis=0)
    assert np.all(v1 <= v0 * 1.0001) and np.all(a1 <= a0 * 1.0001)


def test_ik_reaches_every_target(locked: mocap.FootlockResult) -> None:
    assert locked.ik_error.max() < 1e-9


def _crouch_rig() -> tuple[Skeleton, Clip]:
    """Two bent legs (thigh and shin 0.45) under a root that rises 20 cm mid-clip, feet planted."""
    names = ["root", "l_hip", "l_knee", "l_ankle", "r_hip", "r_knee", "r_ankle"]
    parents = [-1, 0, 1, 2, 0, 4, 5]
    t = np.array([[0, 0, 0], [0.1, 0, 0], [0, -0.45, 0], [0, -0.45, 0],
                  [-0.1, 0, 0], [0, -0.45, 0], [0, -0.45, 0]], dtype=float)
    sk = Skeleton(names, parents, t)
    n = 60
    bend = np.radians(20.0)
    q_hip = R.from_axis_angle([1, 0, 0], bend)
    q_knee = R.from_axis_angle([1, 0, 0], -2 * bend)
    rots = np.tile(R.identity((7,)), (n, 1, 1))
    for h, k in ((1, 2), (4, 5)):
        rots[:, h] = q_hip
        rots[:, k] = q_knee
    leg = 0.9 * np.cos(bend)  # hip-to-ankle distance with the bend
    trans = np.tile(t, (n, 1, 1))
    rise = 0.2 * np.sin(np.linspace(0, np.pi, n)) ** 2
    trans[:, 0, 1] = leg + rise
    return sk, Clip(Pose(trans, rots), 30.0)


def test_hips_drop_where_a_leg_cannot_reach() -> None:
    sk, clip = _crouch_rig()
    # everything is one contact (the feet rise with the root in the animation; the lock is their mean)
    opts = {"height": 1.0, "speed": 10.0}
    res = mocap.footlock(sk, clip, ["l_ankle", "r_ankle"], **opts)
    assert res.hips_drop.max() > 0.02
    assert res.ik_error.max() < 1e-9
    p = _world(sk, res.clip)
    for k, foot in enumerate(res.contacts.feet):
        np.testing.assert_allclose(p[:, foot], np.broadcast_to(res.locks[k][0], p[:, foot].shape), atol=1e-9)
        hip = sk.parents[sk.parents[foot]]
        reach = np.linalg.norm(p[:, foot] - p[:, hip], axis=-1)
        assert reach.max() <= 0.9 * (1 - mocap.REACH_SLACK) + 1e-9
    no_hips = mocap.footlock(sk, clip, ["l_ankle", "r_ankle"], lower_hips=False, **opts)
    assert np.all(no_hips.hips_drop == 0.0)
    assert no_hips.ik_error.max() > 0.02  # the feet fall short instead


def _yaw_and_shift(clip: Clip, root: int, yaw: float, shift: np.ndarray) -> Clip:
    q = R.from_axis_angle([0, 1, 0], yaw)
    t = clip.pose.translations.copy()
    r = clip.pose.rotations.copy()
    t[:, root] = R.rotate(q, t[:, root]) + shift
    r[:, root] = R.multiply(q, r[:, root])
    return Clip(Pose(t, r, clip.pose.scales), clip.fps)


@settings(max_examples=4)
@given(st.floats(-np.pi, np.pi), st.floats(-500, 500), st.floats(-500, 500))
def test_footlock_is_invariant_to_where_the_actor_stands(capture: tuple[Skeleton, Clip], yaw: float, dx: float,
                                                         dz: float) -> None:
    """Turning about the vertical and moving on the ground give the same local leg rotations."""
    sk, clip = capture
    clip = Clip(Pose(clip.pose.translations[:150], clip.pose.rotations[:150], clip.pose.scales), clip.fps)
    base = mocap.footlock(sk, clip)
    moved = mocap.footlock(sk, _yaw_and_shift(clip, 0, yaw, np.array([dx, 0.0, dz])))
    np.testing.assert_array_equal(moved.contacts.mask, base.contacts.mask)
    legs = [sk.index(n) for n in LEG_JOINTS]
    assert np.all(R.equal(moved.clip.pose.rotations[:, legs], base.clip.pose.rotations[:, legs], atol=1e-7))
    np.testing.assert_allclose(moved.hips_drop, base.hips_drop, atol=1e-7)


def test_footlock_bad_input(capture: tuple[Skeleton, Clip]) -> None:
    sk, clip = capture
    with pytest.raises(kinema.SolverInputError, match="ease"):
        mocap.footlock(sk, clip, ease=-1.0)
    with pytest.raises(kinema.ShapeError):
        mocap.footlock(kinema.samples.humanoid(), clip)
    # durations whose frame counts overflow are refused by name (once a bare OverflowError), without warnings
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for option in ("ease", "min_duration", "max_gap", "merge_gap"):
            with pytest.raises(kinema.SolverInputError, match=option):
                mocap.footlock(sk, clip, **{option: 1e308})


# -------------------------------------------------------------------- reach
@pytest.fixture(scope="module")
def reached(capture: tuple[Skeleton, Clip]) -> tuple[mocap.ReachResult, np.ndarray]:
    sk, clip = capture
    p = _world(sk, clip)
    target = p[230, sk.index("RightWrist")] + np.array([8.0, 5.0, 5.0])
    return mocap.reach(sk, clip, "RightWrist", target, (200, 260), blend=15), target


def test_reach_lands_on_the_target(capture: tuple[Skeleton, Clip],
                                   reached: tuple[mocap.ReachResult, np.ndarray]) -> None:
    sk, _ = capture
    res, target = reached
    p = _world(sk, res.clip)[:, sk.index("RightWrist")]
    err = np.linalg.norm(p[200:261] - target, axis=-1)
    assert err.max() < 1e-4
    assert res.metrics["max_error"] == pytest.approx(err.max(), abs=1e-12)
    assert res.metrics["moved_max"] > 5.0  # it did move the hand


def test_reach_changes_nothing_outside_the_blend_window(capture: tuple[Skeleton, Clip],
                                                        reached: tuple[mocap.ReachResult, np.ndarray]) -> None:
    sk, clip = capture
    res, _ = reached
    r0, r1 = clip.pose.rotations, res.clip.pose.rotations
    np.testing.assert_array_equal(r1[:185], r0[:185])
    np.testing.assert_array_equal(r1[276:], r0[276:])
    np.testing.assert_array_equal(res.clip.pose.translations, clip.pose.translations)
    changed = np.flatnonzero(np.any(r1 != r0, axis=(1, 2)))
    assert changed.min() >= 185 and changed.max() <= 275
    arm = [sk.index(n) for n in ("RightShoulder", "RightElbow", "RightWrist")]
    others = [j for j in range(sk.n_joints) if j not in arm]
    np.testing.assert_array_equal(r1[:, others], r0[:, others])
    np.testing.assert_array_equal(res.weights[:185], 0.0)
    np.testing.assert_array_equal(res.weights[200:261], 1.0)


def test_reach_keeps_the_hand_orientation(capture: tuple[Skeleton, Clip],
                                          reached: tuple[mocap.ReachResult, np.ndarray]) -> None:
    sk, clip = capture
    res, _ = reached
    j = sk.index("RightWrist")
    q0 = kinema.forward_kinematics(sk, clip.pose).rotations[:, j]
    q1 = kinema.forward_kinematics(sk, res.clip.pose).rotations[:, j]
    assert R.angle_between(q0, q1).max() < 1e-9


def test_reach_blend_is_smooth(capture: tuple[Skeleton, Clip],
                               reached: tuple[mocap.ReachResult, np.ndarray]) -> None:
    """The offset fades in: the hand's per-frame step stays bounded by the animated step plus the offset's share."""
    sk, clip = capture
    res, target = reached
    j = sk.index("RightWrist")
    p0 = _world(sk, clip)[:, j]
    p1 = _world(sk, res.clip)[:, j]
    offset = np.linalg.norm(target - p0[200])
    # smoothstep's largest step over n+1 intervals is 1.5/(n+1) of the offset
    bound = np.linalg.norm(np.diff(p0[184:201], axis=0), axis=-1) + 1.5 / 16 * offset + 1e-9
    assert np.all(np.linalg.norm(np.diff(p1[184:201], axis=0), axis=-1) <= bound)


def test_reach_free_orientation_and_out_of_reach(capture: tuple[Skeleton, Clip]) -> None:
    sk, clip = capture
    p = _world(sk, clip)
    far = p[230, sk.index("RightShoulder")] + np.array([500.0, 0.0, 0.0])
    res = mocap.reach(sk, clip, "RightWrist", far, (220, 240), keep_orientation=False)
    assert res.metrics["max_error"] > 100.0  # reported, not hidden
    j = sk.index("RightWrist")
    np.testing.assert_array_equal(res.clip.pose.rotations[:, j], clip.pose.rotations[:, j])
    with pytest.raises(kinema.SolverInputError, match="frames"):
        mocap.reach(sk, clip, "RightWrist", far, (400, 500))
    with pytest.raises(kinema.SolverInputError, match="target"):
        mocap.reach(sk, clip, "RightWrist", [1.0, np.nan, 0.0], (1, 2))
    with pytest.raises(kinema.BoneNotFoundError):
        mocap.reach(sk, clip, "RightHand", far, (1, 2))


# ------------------------------------------------------------ no-JIT parity
_PARITY = r"""
import json, sys
import numpy as np
import numba
from kinema import Clip, Pose, mocap
from kinema.io import load_bvh
sk, clip = load_bvh(sys.argv[1])
clip = Clip(Pose(clip.pose.translations[:90], clip.pose.rotations[:90], clip.pose.scales), clip.fps)
res = mocap.footlock(sk, clip)
print(json.dumps({"jit_disabled": int(numba.config.DISABLE_JIT), "mask": res.contacts.mask.tolist(),
                  "w": res.weights.tolist(), "r": res.clip.pose.rotations.tolist(), "drop": res.hips_drop.tolist()}))
"""


def test_kernels_match_without_jit(shared_data: Path) -> None:
    """NUMBA_DISABLE_JIT=1 runs the same contact kernels (and footlock) as plain Python, with the same result."""
    path = str(shared_data / "bvh" / "test_mocapbank.bvh")

    def run(flag: str) -> dict:  # type: ignore[type-arg]
        env = dict(os.environ, NUMBA_DISABLE_JIT=flag)
        out = subprocess.run([sys.executable, "-c", _PARITY, path], env=env, capture_output=True, text=True,
                             check=True, timeout=600)
        return json.loads(out.stdout)

    jit, py = run("0"), run("1")
    assert jit["jit_disabled"] == 0 and py["jit_disabled"] == 1
    assert jit["mask"] == py["mask"]
    np.testing.assert_allclose(jit["w"], py["w"], rtol=0, atol=1e-15)
    np.testing.assert_allclose(jit["r"], py["r"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(jit["drop"], py["drop"], rtol=0, atol=1e-12)


def test_reach_with_a_spine_chain_gets_beyond_the_arm(capture: tuple[Skeleton, Clip]) -> None:
    """--chain: CCD leans the spine in, the arm finishes exactly; the plain arm falls short of the same target."""
    sk, clip = capture
    j = sk.index("RightWrist")
    target = _world(sk, clip)[230, j] + np.array([25.0, 10.0, 15.0])
    arm = mocap.reach(sk, clip, "RightWrist", target, (200, 260), blend=15)
    assert arm.metrics["max_error"] > 1.0  # out of the arm's reach (cm)
    res = mocap.reach(sk, clip, "RightWrist", target, (200, 260), blend=15, chain="Chest")
    p = _world(sk, res.clip)[:, j]
    assert np.linalg.norm(p[200:261] - target, axis=-1).max() < 1e-4
    r0, r1 = clip.pose.rotations, res.clip.pose.rotations
    chain = [sk.index(n) for n in ("Chest", "Chest2", "RightCollar", "RightShoulder", "RightElbow", "RightWrist")]
    others = [k for k in range(sk.n_joints) if k not in chain]
    np.testing.assert_array_equal(r1[:, others], r0[:, others])
    np.testing.assert_array_equal(r1[:185], r0[:185])
    np.testing.assert_array_equal(r1[276:], r0[276:])
    assert np.any(r1[230, sk.index("Chest")] != r0[230, sk.index("Chest")])  # the spine did lean in
    q0 = kinema.forward_kinematics(sk, clip.pose).rotations[:, j]
    q1 = kinema.forward_kinematics(sk, res.clip.pose).rotations[:, j]
    assert R.angle_between(q0, q1).max() < 1e-9
    with pytest.raises(kinema.SolverInputError, match="above the arm"):
        mocap.reach(sk, clip, "RightWrist", target, (200, 260), chain="RightShoulder")


# ------------------------------------------------------------------ resample
def test_resample_keeps_the_frames_on_its_grid_and_interpolates_between() -> None:
    """At the clip's own rate every frame comes back; at twice the rate the even frames are the originals and
    the odd ones are halfway (translations the mean, rotations the slerp midpoint: equally far from both)."""
    clip = kinema.samples.clip("walk")
    same = mocap.resample(clip, clip.fps)
    assert same.n_frames == clip.n_frames and same.times is None and same.fps == clip.fps
    assert np.array_equal(same.pose.translations, clip.pose.translations)
    assert np.all(R.equal(same.pose.rotations, clip.pose.rotations, atol=1e-15))
    double = mocap.resample(clip, 2.0 * clip.fps)
    assert double.n_frames == 2 * clip.n_frames - 1
    assert np.max(np.abs(double.pose.translations[::2] - clip.pose.translations)) <= 1e-15
    mid = 0.5 * (clip.pose.translations[:-1] + clip.pose.translations[1:])
    assert np.max(np.abs(double.pose.translations[1::2] - mid)) <= 1e-15
    a, b, m = clip.pose.rotations[:-1], clip.pose.rotations[1:], double.pose.rotations[1::2]
    assert np.max(np.abs(R.angle_between(a, m) - R.angle_between(m, b))) <= 1e-12
    assert np.max(np.abs(R.angle_between(a, m) - 0.5 * R.angle_between(a, b))) <= 1e-12
    assert np.allclose(np.linalg.norm(double.pose.rotations, axis=-1), 1.0, rtol=0.0, atol=1e-15)


def test_resample_of_uneven_keys_and_its_end() -> None:
    """Uneven key times (a glTF clip) come back evenly spaced from the first key; the last frame is at or
    just past the end and holds the last pose (ceil(duration * fps) + 1 frames)."""
    sk = kinema.samples.humanoid()
    walk = kinema.samples.clip("walk")
    times = np.array([0.5, 0.6, 0.65, 1.0])
    clip = Clip(walk.pose[:4], 3.0, times=times)
    out = mocap.resample(clip, 10.0)
    assert out.n_frames == 6 and out.times is None  # 0.5, 0.6, ..., 1.0
    assert np.array_equal(out.pose.translations[[0, 1, 5]], walk.pose.translations[[0, 1, 3]])
    t = out.pose.translations[2]  # 0.7 s: 1/7 of the way from the key at 0.65 to the one at 1.0
    want = walk.pose.translations[2] + (0.05 / 0.35) * (walk.pose.translations[3] - walk.pose.translations[2])
    assert np.max(np.abs(t - want)) <= 1e-15
    past = mocap.resample(clip, 7.0)  # 0.5 s at 7 fps: 3.5 frames, so the 5th frame is past the end
    assert past.n_frames == 5
    assert np.all(R.equal(past.pose.rotations[-1], walk.pose.rotations[3], atol=1e-15))
    assert sk.n_joints == out.pose.n_joints


def test_resample_refuses_bad_rates_and_poses() -> None:
    clip = kinema.samples.clip("walk")
    for fps in (0.0, -30.0, np.nan, np.inf, "30", True):
        with pytest.raises(kinema.SolverInputError, match="fps"):
            mocap.resample(clip, fps)  # type: ignore[arg-type]
    with pytest.raises(kinema.SolverInputError, match=r"more than 2147483648"):
        mocap.resample(clip, 1e300)  # refused before anything is allocated
    bad = Clip(clip.pose.copy(), clip.fps)
    bad.pose.rotations[3, 2, 0] = np.nan
    with pytest.raises(kinema.SolverInputError, match="rotations contains NaN"):
        mocap.resample(bad, 60.0)


# -------------------------------------------------------- legs with helpers
def _with_shin_roll(skeleton: Skeleton, clip: Clip, knee: str, name: str) -> tuple[Skeleton, Clip]:
    """``skeleton`` and ``clip`` with a joint ``name`` inserted halfway down the shin below ``knee`` (unturned:
    identity rotations), as HumanIK's ``LeftLegRoll``: the same world motion, one joint more."""
    k = skeleton.index(knee)
    foot = [j for j in range(skeleton.n_joints) if skeleton.parents[j] == k][0]

    def new(j: int) -> int:  # an old joint's index once the helper is inserted at k + 1
        return j if j <= k else j + 1

    parents = [int(p) if p < 0 else new(int(p)) for p in skeleton.parents]
    parents[foot] = k + 1
    parents.insert(k + 1, k)
    names = list(skeleton.names)
    names.insert(k + 1, name)

    def split(t: np.ndarray) -> np.ndarray:  # (..., J, 3) -> (..., J + 1, 3): the shin halved at the helper
        half = 0.5 * t[..., foot, :]
        out = np.insert(t, k + 1, 0.0, axis=-2)
        out[..., k + 1, :] = half
        out[..., new(foot), :] = half
        return out

    def unturned(r: np.ndarray) -> np.ndarray:
        return np.insert(r, k + 1, [0.0, 0.0, 0.0, 1.0], axis=-2)

    sk2 = Skeleton(names, parents, split(skeleton.translations), unturned(skeleton.rotations))
    pose = clip.pose.broadcast()
    return sk2, Clip(Pose(split(pose.translations), unturned(pose.rotations)), clip.fps)


@pytest.mark.parametrize("helper", ["left_shin_roll", "LeftLegTwist"])
def test_footlock_skips_a_twist_joint_in_the_shin(helper: str) -> None:
    """A twist or roll joint between knee and ankle is not the knee: the lock is the same as on the rig without
    it (the helper rides along unturned).  Before, the helper was taken as the knee and the knee as the hip,
    so the leg bent in the middle of the shin."""
    sk, clip = kinema.samples.humanoid(), kinema.samples.clip("walk")
    sk2, clip2 = _with_shin_roll(sk, clip, "left_knee", helper)
    assert np.max(np.abs(kinema.forward_kinematics(sk2, clip2.pose).positions[:, sk2.index("left_ankle")]
                         - kinema.forward_kinematics(sk, clip.pose).positions[:, sk.index("left_ankle")])) <= 1e-12
    plain = mocap.footlock(sk, clip, ("left_ankle", "right_ankle"))
    rolled = mocap.footlock(sk2, clip2, ("left_ankle", "right_ankle"))
    p1 = kinema.forward_kinematics(sk, plain.clip.pose).positions
    p2 = kinema.forward_kinematics(sk2, rolled.clip.pose).positions
    for j in sk.names:
        assert np.max(np.abs(p2[:, sk2.index(j)] - p1[:, sk.index(j)])) <= 1e-9, j
    assert np.array_equal(rolled.clip.pose.rotations[:, sk2.index(helper)],
                          np.broadcast_to([0.0, 0.0, 0.0, 1.0], (clip.n_frames, 4)))
    assert plain.metrics["skate_after"] <= 1e-9 and rolled.metrics["skate_after"] <= 1e-9


def test_footlock_skips_a_joint_at_the_place_of_the_one_below() -> None:
    """A helper at the ankle's own place (zero offset, any name) cannot bend the leg: the knee above it is."""
    sk, clip = kinema.samples.humanoid(), kinema.samples.clip("walk")
    sk2, clip2 = _with_shin_roll(sk, clip, "left_knee", "left_ankle_helper")
    k, h, a = sk2.index("left_knee"), sk2.index("left_ankle_helper"), sk2.index("left_ankle")
    t = sk2.translations.copy()
    t[h], t[a] = sk.translations[sk.index("left_ankle")], 0.0  # the helper at the ankle, the ankle on it
    sk3 = Skeleton(sk2.names, sk2.parents, t, sk2.rotations)
    pt = clip2.pose.translations.copy()
    pt[:, h], pt[:, a] = clip.pose.broadcast().translations[:, sk.index("left_ankle")], 0.0
    res = mocap.footlock(sk3, Clip(Pose(pt, clip2.pose.rotations), clip.fps), ("left_ankle", "right_ankle"))
    assert mocap._leg(sk3, a) == (sk3.index("left_hip"), k, a)
    assert res.metrics["skate_after"] <= 1e-9
