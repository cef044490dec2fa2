"""Motion-capture clean-up with IK: foot contacts, foot locking, re-aimed reaches.

The command line (``kinema footlock``, ``kinema reach``) and the viewer are
thin layers over these functions; each takes a :class:`~kinema.Skeleton` and
a :class:`~kinema.Clip` and returns a new clip with its diagnostics (the
input is never modified).

* :func:`detect_contacts`: when each foot is planted, from its height above
  the ground and its speed, thresholds estimated from the clip (overridable),
  with hysteresis both ways in time, stances broken by speed alone joined
  into one, and clean-up of short gaps and touches.
* :func:`footlock`: locks each contact at one ground position with two-bone
  IK per leg (knee pole from the animated knee where it tells the bend
  plane, from the knee's learned forward direction where the leg is too
  straight to tell; foot keeping its animated world orientation), lowers
  the hips where a leg cannot reach, eases the IK weight in and out around
  each contact and leaves every other joint alone.
* :func:`reach`: re-aims a reach: over frames ``A..B`` the effector is at a
  new target, blended in and out over a window, with two-bone IK (or a longer
  chain through the spine) and the hand keeping its animated orientation.
* :func:`foot_skate`, :func:`angular_speed`, :func:`max_angular_speed`: the
  before/after metrics.

Conventions: world is Y-up (:data:`UP_AXIS`), lengths are the clip's units,
speeds are units per second, angles radians, frames 0-based.
"""

from __future__ import annotations

import difflib
import inspect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import rotation as rot
from ._kernels.constants import DEFAULT_MARGIN_FRACTION
from ._solve import MAX_ITERATIONS
from ._types import BoolArray, FloatArray, IntArray
from ._validate import (
    as_float_array,
    as_float_scalar,
    check_flag,
    is_sequence,
    positive_number,
    require_finite,
    resolve_joint,
)
from .errors import ShapeError, SkeletonError, SolverInputError
from .fk import forward_kinematics
from .pose import Clip, Pose, key_brackets, resample_times
from .skeleton import Skeleton, check_skeleton

__all__ = [
    "UP_AXIS",
    "ContactThresholds",
    "Contacts",
    "FootlockResult",
    "ReachResult",
    "find_feet",
    "detect_contacts",
    "footlock",
    "reach",
    "foot_skate",
    "angular_speed",
    "max_angular_speed",
    "frame_times",
    "resample",
]


#: Index of the world up axis (kinema's world is Y-up); the other two are horizontal.
UP_AXIS = 1
_HORIZONTAL = np.array([0, 2])

# ---------------------------------------------------------- contact defaults
#: Ground level of a foot: this percentile of its height over the clip (a low
#: percentile rather than the minimum, so one glitch frame does not set it).
GROUND_PERCENTILE = 2.0

#: Default contact height: the foot is at most this fraction of its leg length
#: (hip to knee plus knee to foot) above its ground level.
HEIGHT_ON_FRACTION = 0.04

#: Default contact speed: this many times the clip's own noise level (the
#: median speed of the foot while it is low), clamped to
#: ``[SPEED_FLOOR_FRACTION, SPEED_CEIL_FRACTION]`` leg lengths per second.
SPEED_NOISE_FACTOR = 10.0
SPEED_FLOOR_FRACTION = 0.1
SPEED_CEIL_FRACTION = 0.5

#: Leaving a contact needs the height or speed above ``hysteresis`` times the
#: entering threshold.
DEFAULT_HYSTERESIS = 1.5

#: Contacts shorter than this many seconds are dropped; gaps shorter than
#: ``DEFAULT_MAX_GAP_S`` inside a stance are filled.
DEFAULT_MIN_CONTACT_S = 0.1
DEFAULT_MAX_GAP_S = 0.1

#: A foot that comes back down within this fraction of its leg length of where
#: it left, after a gap of at most ``DEFAULT_MERGE_GAP_S`` seconds spent below
#: the leave height, did not step: the two contacts are one stance (the gap
#: was mocap noise or a heel roll pushing the speed over its threshold).
STEP_FRACTION = 0.05
DEFAULT_MERGE_GAP_S = 0.5
#: A foot within the leave height and slower than the enter speed for at least
#: this many seconds is in contact even if it never comes down to the enter
#: height (resting on its toes or heel, or a floor a little above the
#: clip's lowest point).
STILL_CONTACT_S = 0.25

#: Seconds over which the IK weight eases in before and out after a contact.
DEFAULT_EASE_S = 0.25

#: On the ramps into and out of a lock the animated motion away from the
#: lock's edge is faded in with ``1 - w^EDGE_EASE_POWER`` (``w`` the smoothstep
#: weight, see :func:`_eased_targets`): the foot leaves the lock at rest and
#: takes up the animated velocity over the first part of the ramp.  1 would
#: crossfade positions over the whole ramp (the foot lags the animation, then
#: catches up faster than it moves); higher takes the velocity up sooner.
EDGE_EASE_POWER = 3.0

#: A ramp (the IK weight easing in or out) on which a leg joint turns faster
#: than the input ever turns that joint is lengthened, up to this many times
#: ``ease``, in at most ``SPEED_PASSES`` passes of solving the legs again.
MAX_EASE_FACTOR = 4.0
SPEED_PASSES = 4
#: Angular speed (rad/s) at or below which a joint counts as held still by the
#: input (0.1 deg/s): it has no fastest speed to keep under, and is not checked
#: (a foot that keeps its world orientation turns against a moving shin).
SPEED_CAP_FLOOR = np.radians(0.1)
#: ... and a joint is too fast above ``1 + SPEED_RTOL`` times its cap: a frame
#: footlock leaves as animated turns at the input's own speed, give or take
#: rounding, and must not count as faster.
SPEED_RTOL = 1e-6

# ----------------------------------------------------------- locking limits
#: The hips are lowered so that a leg keeps this fraction of its length from
#: fully straight (a straight knee is singular: the bend plane is undefined).
#: It is far above the two-bone solver's own margin (1e-4 of the shorter bone),
#: so a target inside it is reached exactly.
REACH_SLACK = 1e-3

#: A leg is *near straight* where its target is farther from the hip than
#: ``1 - STRAIGHT_FRACTION`` of its length.  Near full extension the knee angle
#: goes as the square root of the missing reach: the last 2% of reach turn the
#: knee by 23 degrees (equal bones), the last 1% by 16, so a lock that pulls a
#: leg the animation holds straight the last percent snaps the knee straight
#: and back as the body passes over the foot (a pop; see
#: :func:`_lengthen_fast_ramps`).
STRAIGHT_FRACTION = 0.02

#: The hips never drop by more than this fraction of the shortest leg: a lock
#: that is out of reach horizontally cannot be fixed by crouching.
MAX_DROP_FRACTION = 0.25
#: ... and a drop smaller than this fraction of the leg is rounding, not a
#: need: a target kept at exactly the animated hip-to-foot distance
#: (:func:`_keep_leg_length`) computes a need of about 1e-16 of the leg.
DROP_RTOL = 1e-12
#: A near-straight leg's target keeps the animated hip-to-foot distance (see
#: :func:`_keep_leg_length`), but never closer to full extension than this many
#: times two-bone's default margin (``DEFAULT_MARGIN_FRACTION`` of the shorter
#: bone): the solve still reaches it exactly.
LENGTH_MARGIN_FACTOR = 1.1

#: Knee poles (see :func:`_knee_poles`): the knee's forward direction is
#: learned from the frames whose knee is off the hip-foot line by at least
#: this fraction of the thigh (``sin`` of half the knee angle for equal
#: bones: about 6 degrees of bend; less is within mocap noise).
KNEE_LEARN_FRACTION = 0.05
#: The learned forward direction is used only when the frames agree on it:
#: their bend-weighted mean unit direction is at least this long.
KNEE_AGREEMENT = 0.5
#: The animated knee tells the bend plane while its offset from the hip-foot
#: line is at least this fraction of the solved knee's (below it, the side it
#: is on is decided by how far the lock is from the animated foot).
POLE_ANIM_SHARE = 1.0
#: ... to rounding: where the hips drop just enough for the animated reach,
#: the solved knee is the animated one and must not flip the decision.
POLE_RTOL = 1e-9

#: Default reach blend window, seconds on each side of ``A..B``.
DEFAULT_REACH_BLEND_S = 0.25

#: ``reach(chain=...)``: largest CCD turn of one joint per sweep (radians), so
#: the spine leans in gradually instead of swinging round.
REACH_CHAIN_MAX_STEP = 0.2

_FOOT_RE = re.compile(r"foot|ankle", re.IGNORECASE)
_NOT_FOOT_RE = re.compile(r"_end$|end$|toe|ball|site", re.IGNORECASE)
_LEFT_RE = re.compile(r"left|(^|[^a-z])l([^a-z]|$)", re.IGNORECASE)


# ============================================================== small helpers
#: The longest duration option (a contact time, a gap, an ease) in frames: a longer one (1e308 seconds) would
#: overflow the frame count; 2**31 frames is over two years at 30 fps.
MAX_DURATION_FRAMES = 2**31


def _frames(seconds: float, fps: float, what: str) -> int:
    """``seconds`` (finite, >= 0) as a whole number of frames at ``fps``; :class:`SolverInputError` beyond
    :data:`MAX_DURATION_FRAMES`."""
    f = float(seconds) * float(fps)  # Python floats: an overflow is inf, without a numpy warning
    if not f <= MAX_DURATION_FRAMES:
        raise SolverInputError(f"{what} = {seconds!r} s is {f:.3g} frames at {fps:g} fps, longer than any clip "
                               f"(at most {MAX_DURATION_FRAMES} frames)")
    return int(round(f))


def _check_clip(clip: Any) -> Clip:
    """``clip`` itself when it is a :class:`~kinema.Clip`; :class:`SolverInputError` naming the type given
    otherwise (a :class:`~kinema.Pose` is a single pose or a batch without a frame rate: wrap it as
    ``Clip(pose, fps)``)."""
    if not isinstance(clip, Clip):
        hint = " (wrap a pose with frames as kinema.Clip(pose, fps))" if isinstance(clip, Pose) else ""
        raise SolverInputError(f"clip must be a kinema.Clip, got {type(clip).__name__}{hint}")
    return clip


def _require_frames(clip: Clip, what: str) -> int:
    """The clip's frame count; :class:`SolverInputError` for a clip of no frames (``what`` says what needs
    them)."""
    n = clip.n_frames
    if n == 0:
        raise SolverInputError(f"the clip has no frames: {what}")
    return n


def frame_times(clip: Clip) -> FloatArray:
    """Frame times in seconds ``(F,)``: ``clip.times`` or ``k / fps``."""
    _check_clip(clip)
    if clip.times is not None:
        return np.asarray(clip.times, dtype=np.float64)
    return np.arange(clip.n_frames, dtype=np.float64) / float(clip.fps)


def resample(clip: Clip, fps: float) -> Clip:
    """``clip`` evenly sampled at ``fps`` (``times`` None): frame ``k`` is the motion at ``t0 + k / fps`` for
    ``k = 0 .. ceil(duration * fps)`` (``t0`` the first frame's time; the last frame at or just past the end
    holds the last pose, as glTF resampling does).

    Between two frames translations and scales are interpolated linearly and rotations by slerp along the
    shorter arc (:func:`kinema.rotation.slerp`).  :class:`~kinema.SolverInputError` for an ``fps`` that is not
    a positive finite number, a pose with NaN or inf, a clip of no frames, and more than
    :data:`MAX_DURATION_FRAMES` frames (before anything is allocated).
    """
    _check_clip(clip)
    fps = positive_number(fps, "fps")
    if len(clip.pose.batch_shape) != 1:
        raise ShapeError("clip pose", "(frames, J, k) with one time dimension", str(clip.pose.batch_shape))
    pose = clip.pose
    for what, a in (("translations", pose.translations), ("rotations", pose.rotations), ("scales", pose.scales)):
        require_finite(a, f"clip pose {what}")
    _require_frames(clip, "there is nothing to resample")
    times = frame_times(clip)
    query = resample_times(times[0], times[-1], fps, MAX_DURATION_FRAMES)
    i0, i1, u = key_brackets(times, query)

    def lerp(a: FloatArray) -> FloatArray:
        if a.ndim == 2:  # one set for every frame (scales shared by the clip): nothing to interpolate
            return a.copy()
        w = u[:, None, None]
        return a[i0] + w * (a[i1] - a[i0])

    r = pose.rotations
    rq = np.broadcast_to(r, (times.size,) + r.shape[-2:]) if r.ndim == 2 else r
    return Clip(Pose(lerp(pose.translations), rot.slerp(rq[i0], rq[i1], u[:, None]), lerp(pose.scales)), fps)


def _clip_arrays(skeleton: Skeleton, clip: Clip, copy: bool = True) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(t (F,J,3), r (F,J,4), s)`` of a clip: full-shape (copied when ``copy``); ``s`` is
    ``(J,3)`` when the clip shares one set of scales (never copied, only read)."""
    if clip.pose.n_joints != skeleton.n_joints:
        raise ShapeError("clip pose", f"(frames, {skeleton.n_joints}, k)", f"{clip.pose.n_joints} joints")
    if len(clip.pose.batch_shape) != 1:
        raise ShapeError("clip pose", "(frames, J, k) with one time dimension", str(clip.pose.batch_shape))
    for what, a in (("translations", clip.pose.translations), ("rotations", clip.pose.rotations),
                    ("scales", clip.pose.scales)):
        require_finite(a, f"clip pose {what}")  # NaN feet would match no threshold and silently find no contacts
    n, nj = clip.n_frames, skeleton.n_joints

    def full(a: FloatArray, k: int) -> FloatArray:
        if a.shape == (n, nj, k):
            return a.copy() if copy else a
        return np.broadcast_to(a, (n, nj, k)).copy()

    sc = clip.pose.scales
    return full(clip.pose.translations, 3), full(clip.pose.rotations, 4), sc if sc.ndim == 2 else full(sc, 3)


def _rows(s: FloatArray, frames: Any) -> FloatArray:
    """Scales for a subset of frames (shared ``(J,3)`` scales stay shared)."""
    return s if s.ndim == 2 else s[frames]


def _subskeleton(skeleton: Skeleton, joints: Sequence[int]) -> tuple[Skeleton, IntArray]:
    """The joints and all their ancestors as a smaller skeleton: ``(sub, keep)``, ``keep[new] = old``.

    World transforms of the kept joints are the same as in the full skeleton
    (they only depend on ancestors), so FK and IK on a leg run on a handful of
    joints instead of the whole body.
    """
    keep_set: set[int] = set()
    for j in joints:
        keep_set.add(int(j))
        keep_set.update(int(a) for a in skeleton.ancestors(int(j)))
    keep = np.asarray(sorted(keep_set), dtype=np.int64)
    new_of_old = np.full(skeleton.n_joints, -1, dtype=np.int64)
    new_of_old[keep] = np.arange(keep.size)
    par = skeleton.parents[keep]
    sub = Skeleton([skeleton.names[j] for j in keep], np.where(par >= 0, new_of_old[par], -1),
                   skeleton.translations[keep], skeleton.rotations[keep], skeleton.scales[keep])
    return sub, keep


def _take(a: FloatArray, keep: IntArray) -> FloatArray:
    """Joint subset of a ``(F, J, k)`` or shared ``(J, k)`` array."""
    return a[keep] if a.ndim == 2 else a[:, keep]


def _foot_index(k: Any, n_feet: int) -> int:
    """Foot ``k`` of ``n_feet`` as an index ``0 .. n_feet - 1``: an int (or NumPy integer, not a bool) from
    ``-n_feet`` to ``n_feet - 1``, a negative one counting from the last foot as Python's indexing does;
    :class:`SolverInputError` naming ``k`` and the valid range otherwise."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or not -n_feet <= k < n_feet:
        raise SolverInputError(f"k must be the index of a foot, an int from {-n_feet} to {n_feet - 1} "
                               f"(there are {n_feet} feet), got {k!r}")
    return int(k) % n_feet


def _runs(mask: BoolArray) -> tuple[IntArray, IntArray]:
    """Half-open ``[start, end)`` ranges of the True runs of a 1-D mask."""
    d = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return np.flatnonzero(d == 1).astype(np.int64), np.flatnonzero(d == -1).astype(np.int64)


def _ease(starts: IntArray, ends: IntArray, n_frames: int, ease_frames: int) -> tuple[FloatArray, IntArray]:
    n_runs = starts.size
    return _ease_runs(starts, ends, n_frames, np.full(n_runs, int(ease_frames), dtype=np.int64),
                      np.full(n_runs, int(ease_frames), dtype=np.int64))


def _ease_runs(starts: IntArray, ends: IntArray, n_frames: int, before: IntArray,
               after: IntArray) -> tuple[FloatArray, IntArray]:
    """Ease weights and owners ``(F,)`` with ramp lengths of their own before/after each run (frames)."""
    from ._kernels._tier import kernels

    kc = kernels("contact")

    weight = np.empty(n_frames)
    owner = np.empty(n_frames, dtype=np.int64)
    kc.ease_weights_per_run(starts, ends, n_frames, np.ascontiguousarray(before, dtype=np.int64),
                            np.ascontiguousarray(after, dtype=np.int64), weight, owner)
    return weight, owner


def _offset_targets(anim: FloatArray, starts: IntArray, ends: IntArray, lock: FloatArray, weight: FloatArray,
                    owner: IntArray) -> FloatArray:
    """Targets ``(F, 3)`` that hold ``lock[c]`` over run ``c`` and fade its offset out around it.

    Inside run ``c`` the target is ``lock[c]``.  On the ramp before it the
    target is ``anim + w (lock[c] - anim[start])``, after it
    ``anim + w (lock[c] - anim[end - 1])``: the offset measured at the run's
    edge is faded with the weight ``w``, so the target keeps the animated
    velocity (it never lags behind a fast-moving limb the way blending
    towards a fixed point would) and is continuous at the edges.
    Elsewhere (``owner == -1``) the target is the animation.
    """
    tgt = anim.copy()
    f = np.flatnonzero(owner >= 0)
    if f.size == 0:
        return tgt
    c = owner[f]
    before = f < starts[c]
    inside = ~before & (f < ends[c])
    edge = np.where(before, starts[c], ends[c] - 1)
    tgt[f] = anim[f] + weight[f, None] * (lock[c] - anim[edge])
    tgt[f[inside]] = lock[c[inside]]
    return tgt


def _eased_targets(anim: FloatArray, starts: IntArray, ends: IntArray, lock: FloatArray, weight: FloatArray,
                   owner: IntArray, eased_before: BoolArray, eased_after: BoolArray) -> FloatArray:
    """Targets ``(F, 3)`` that hold ``lock[c]`` over run ``c`` and ease the foot's velocity in and out of it.

    ``eased_before (C,)``/``eased_after (C,)``: which ramps ease the velocity
    (the others fade the offset only, as :func:`_offset_targets`).

    Inside run ``c`` the target is ``lock[c]``.  On an eased ramp it is
    ``anim + w (lock[c] - anim[edge]) - w^EDGE_EASE_POWER (anim - anim[edge])``
    with ``edge`` the run's first (last) frame and ``w`` the smoothstep
    weight: the offset fades as in :func:`_offset_targets`, and the animated
    motion away from the edge is faded in with ``1 - w^EDGE_EASE_POWER``, so
    the target leaves (reaches) the lock at rest and takes up the animated
    velocity over the first part of the ramp instead of at once.  Elsewhere
    (``owner == -1``) the target is the animation.
    """
    tgt = _offset_targets(anim, starts, ends, lock, weight, owner)
    f = np.flatnonzero(owner >= 0)
    if f.size == 0:
        return tgt
    c = owner[f]
    before = f < starts[c]
    ramp = (before | (f >= ends[c])) & np.where(before, eased_before[c], eased_after[c])
    f, c, before = f[ramp], c[ramp], before[ramp]
    edge = np.where(before, starts[c], ends[c] - 1)
    tgt[f] -= weight[f, None] ** EDGE_EASE_POWER * (anim[f] - anim[edge])
    return tgt


def _unease_harsh_ramps(tgt: FloatArray, cap: float, starts: IntArray, ends: IntArray, owner: IntArray,
                        eased_before: BoolArray, eased_after: BoolArray) -> bool:
    """Turn off the velocity ease of each ramp on which the target accelerates harder than ``cap``.

    ``tgt (F, 3)``: one foot's targets, ``cap``: the largest acceleration
    (second difference per frame) of the animated foot; the flags are updated
    in place.  Returns True if any changed.  A short ramp behind a foot that
    already moves fast would have to start it from rest and bring it to speed
    in a few frames: the offset form (animated velocity) is kept there.
    """
    if tgt.shape[0] < 3:  # no second difference to judge
        return False
    acc = np.linalg.norm(np.diff(tgt, 2, axis=0), axis=-1)
    changed = False
    for f in np.flatnonzero(acc > cap) + 1:  # centre frame of each too-sharp second difference
        for fr in (f - 1, f, f + 1):
            c = owner[fr]
            if c < 0 or starts[c] <= fr < ends[c]:
                continue  # untouched or held: not a ramp
            side = eased_before if fr < starts[c] else eased_after
            if side[c]:
                side[c] = False
                changed = True
    return changed


def _crossfade_short_gaps(tgt: FloatArray, anim: FloatArray, starts: IntArray, ends: IntArray, lock: FloatArray,
                          before: IntArray, after: IntArray) -> FloatArray:
    """In place on ``tgt (F, 3)``: across a gap shorter than two ramps, fade one lock's offset into the next's.

    ``before (C,)``/``after (C,)``: the ramp lengths (frames) wanted before and after each run.

    Two ramps that share a short gap would take the offset from the first
    lock down to zero and up to the second one within half the gap each; the
    foot then moves twice as fast as it needs to (and the legs turn with it).
    Over such a gap the target is ``anim + (1 - x) off_a + x off_b`` with
    ``off_a = lock_a - anim[end_a - 1]``, ``off_b = lock_b - anim[start_b]``
    and ``x`` the smoothstep across the gap: continuous at both edges, the
    animated velocity kept, the offset changing at half the rate.
    """
    from ._kernels._tier import kernels

    kc = kernels("contact")

    kc.crossfade_short_gaps(tgt, anim, starts, ends, lock, before, after)
    return tgt


#: Names of helper joints inside a leg (a shin's or a thigh's twist or roll joint, as HumanIK's ``LeftLegRoll``):
#: not a knee or a hip, they ride along with the bone they sit in.
_LEG_HELPER_RE = re.compile(r"twist|roll", re.IGNORECASE)


def _bending_parent(skeleton: Skeleton, joint: int) -> int:
    """The nearest ancestor of ``joint`` that can bend the leg: not a helper named like ``*twist*`` or
    ``*roll*``, and not at the same place as the joint below it in the rest pose (a zero-length bone cannot
    bend anything).  -1 when there is none."""
    below, k = joint, int(skeleton.parents[joint])
    while k >= 0 and (_LEG_HELPER_RE.search(skeleton.names[k]) or not np.any(skeleton.translations[below])):
        below, k = k, int(skeleton.parents[k])
    return k


def _leg(skeleton: Skeleton, foot: int) -> tuple[int, int, int]:
    """``(hip, knee, foot)``: the foot and the two joints above it that bend the leg (:func:`_bending_parent`).

    Helper joints between them (twist or roll joints in the shin or the thigh) are left out: two-bone IK
    carries them along rigidly.  Before, the foot's parent and grandparent were taken, so a shin twist joint
    became the knee and the leg bent in the middle of the shin."""
    knee = _bending_parent(skeleton, foot)
    hip = _bending_parent(skeleton, knee) if knee >= 0 else -1
    if knee < 0 or hip < 0:
        raise SkeletonError(
            f"foot {skeleton.names[foot]!r} needs a parent (knee) and a grandparent (hip) for two-bone IK "
            "(twist and roll joints, and joints at the same place as the one below, do not count)"
        )
    return hip, knee, foot


def _knee_forward(pos: FloatArray, wrot: FloatArray, hip: int, knee: int,
                  offset: tuple[FloatArray, float]) -> FloatArray | None:
    """The knee's forward direction in world space per frame ``(F, 3)`` (unit), or None when unknown.

    ``pos (F, J, 3)``, ``wrot (F, J, 4)``: animated world positions and
    rotations; ``offset`` the leg's :func:`_knee_offset`.  Learned in the
    thigh's (the hip joint's) own frame, where a hinge-like knee keeps it fixed: the bend-weighted mean of the unit knee
    offset from the hip-foot line over the frames bent by at least
    ``KNEE_LEARN_FRACTION`` of the thigh, made perpendicular to the thigh,
    then carried by the animated thigh.  None when the frames bent that much
    disagree (mean shorter than ``KNEE_AGREEMENT``).  A leg never bent that
    much has no direction to learn: it gets a fixed one in the thigh's frame
    (the bend-weighted mean over all frames, else the thigh frame's axis
    least aligned with the thigh), so at least it never changes from frame
    to frame.
    """
    p_hip, p_knee = pos[:, hip], pos[:, knee]
    off, thigh = offset
    bend = np.linalg.norm(off, axis=-1) / thigh
    q_inv = rot.inverse(wrot[:, hip])
    thigh_local = rot.rotate(q_inv[0], p_knee[0] - p_hip[0])
    thigh_local = thigh_local / np.linalg.norm(thigh_local)
    bent = bend >= KNEE_LEARN_FRACTION
    learned = np.any(bent)
    if not learned:
        bent = bend > 0.0
    forward = np.zeros(3)
    if np.any(bent):
        local = rot.rotate(q_inv[bent], off[bent] / (bend[bent, None] * thigh))
        forward = np.average(local, axis=0, weights=bend[bent])
        forward = forward - np.dot(forward, thigh_local) * thigh_local
    norm = float(np.linalg.norm(forward))
    if learned and norm < KNEE_AGREEMENT:
        return None
    if norm <= np.finfo(float).eps:
        axis = np.zeros(3)
        axis[int(np.argmin(np.abs(thigh_local)))] = 1.0
        forward = axis - np.dot(axis, thigh_local) * thigh_local
        norm = float(np.linalg.norm(forward))
    return rot.rotate(wrot[:, hip], np.broadcast_to(forward / norm, p_knee.shape))


def _knee_offset(pos: FloatArray, hip: int, knee: int, foot: int) -> tuple[FloatArray, float]:
    """``(off (F, 3), thigh)``: the animated knee's offset from the hip-foot line and the thigh length."""
    p_hip, p_knee = pos[:, hip], pos[:, knee]
    axis = pos[:, foot] - p_hip
    axis = axis / np.maximum(np.linalg.norm(axis, axis=-1, keepdims=True), np.finfo(float).tiny)
    off = p_knee - p_hip
    return off - np.sum(off * axis, axis=-1, keepdims=True) * axis, float(np.linalg.norm(p_knee[0] - p_hip[0]))


def _knee_poles(pos: FloatArray, forward: FloatArray | None, offset: tuple[FloatArray, float], knee: int, foot: int,
                hip_out: FloatArray, target: FloatArray, solved: BoolArray,
                carry: tuple[FloatArray, FloatArray] | None = None) -> FloatArray:
    """World pole points ``(F, 3)`` for one leg's two-bone solve: the knee never swings round.

    ``pos (F, J, 3)``: the animated positions; ``forward``: the leg's
    :func:`_knee_forward` (it depends on the animation only: made once per
    leg), ``offset`` its :func:`_knee_offset` (the same); ``hip_out (F, 3)``
    where the hip is after the hips drop,
    ``target (F, 3)`` the foot's target, ``solved (F,)`` the frames that are
    solved (the others keep the animation).

    The animated knee is the right pole while it is clearly off the hip-foot
    line: the solve keeps the animator's bend plane, and where the target
    comes back to the animated foot the solve gives back the animation.  But
    where the IK has to bend a leg that the animation holds (nearly)
    straight, the animated knee's side of the line is decided by the
    millimetres between the lock and the animated foot and turns over
    between two frames: the knee swings round, a pop.

    So the pole is set by its *swivel* angle about the hip-target line,
    measured from the knee's forward direction (:func:`_knee_forward`).  On
    the frames where the animated knee is *telling* (off the line by at least
    ``POLE_ANIM_SHARE`` of the solved knee's distance from it, from the law of
    cosines, and by ``KNEE_LEARN_FRACTION`` of the thigh) the angle is the
    animated knee's; in between it is interpolated in time, unwrapped, so the
    plane turns continuously (through the side, never across the line) from
    one telling frame to the next.  Before the first and after the last
    telling frame it is held; with no telling frame it is 0 (straight
    ahead).  A leg whose forward direction is unknown (the bent frames
    disagree) keeps the animated knee as its pole.
    """
    p_knee = pos[:, knee]
    if forward is None:
        return p_knee.copy()
    tiny = np.finfo(float).tiny
    off, thigh = offset
    shin = float(np.linalg.norm(pos[0, foot] - p_knee[0]))
    # The solve's axis and the solved knee's distance from it (law of cosines, reach clamped).
    axis = target - hip_out
    dist = np.linalg.norm(axis, axis=-1)
    axis = axis / np.maximum(dist, tiny)[:, None]
    d = np.clip(dist, abs(thigh - shin), thigh + shin)
    along = (thigh * thigh + d * d - shin * shin) / (2.0 * np.maximum(d, tiny))
    rise = np.sqrt(np.maximum(thigh * thigh - along * along, 0.0))
    anim_rise = np.linalg.norm(off, axis=-1)
    telling = (anim_rise >= KNEE_LEARN_FRACTION * thigh) & (~solved | (anim_rise >= POLE_ANIM_SHARE * rise
                                                                      * (1.0 - POLE_RTOL)))
    # Swivel frame about the solve's axis: e1 the forward direction, e2 = axis x e1.
    e1 = forward - np.sum(forward * axis, axis=-1, keepdims=True) * axis
    e1 = e1 / np.maximum(np.linalg.norm(e1, axis=-1, keepdims=True), tiny)
    e2 = np.cross(axis, e1)
    frames = np.flatnonzero(telling)
    if frames.size:
        angle = np.unwrap(np.arctan2(np.sum(off[frames] * e2[frames], axis=-1),
                                     np.sum(off[frames] * e1[frames], axis=-1)))
        swivel = np.interp(np.arange(pos.shape[0]), frames, angle)
    else:  # the knee is never telling: straight ahead all along
        swivel = np.zeros(pos.shape[0])
    if carry is not None:
        # Where the target keeps the animated hip-to-foot distance, the solve is the animated leg turned
        # at the hip: the animated knee, carried by the turn from the animated line onto the solve's axis,
        # is the pole (its swivel blended in by the strength), so the knee keeps its animated bend.
        strength, anim_line = carry
        carried = rot.rotate(rot.from_two_vectors(anim_line, axis), off)
        turn = np.arctan2(np.sum(carried * e2, axis=-1), np.sum(carried * e1, axis=-1)) - swivel
        swivel = swivel + strength * (np.remainder(turn + np.pi, 2.0 * np.pi) - np.pi)
    direction = np.cos(swivel)[:, None] * e1 + np.sin(swivel)[:, None] * e2
    return hip_out + along[:, None] * axis + (thigh + shin) * direction


def _root_of(skeleton: Skeleton, joint: int) -> int:
    anc = skeleton.ancestors(joint)
    return int(anc[-1]) if anc else joint


# ================================================================== metrics
def foot_skate(positions: ArrayLike, mask: ArrayLike, times: ArrayLike) -> float:
    """Mean horizontal foot speed during contacts (units per second).

    ``positions (F, K, 3)`` world foot positions, ``mask (F, K)`` contacts,
    ``times (F,)`` seconds.  Averages ``|dp_horizontal| / dt`` over every pair
    of consecutive frames that are both in contact; 0 when there is none.
    :class:`~kinema.SolverInputError` for NaN or inf positions or times, times
    that do not increase, and a mask that is not booleans (or integers 0 and 1).
    """
    p = as_float_array(positions, "positions", (3,))
    if p.ndim != 3:
        raise ShapeError("positions", "(F, K, 3)", tuple(p.shape))
    require_finite(p, "positions")  # a NaN foot would make the mean NaN
    t = as_float_array(times, "times", (p.shape[0],), batch=False)
    if not (np.all(np.isfinite(t)) and np.all(np.diff(t) > 0.0)):
        raise SolverInputError("times must be finite and strictly increasing")
    m = _contact_mask(mask, p.shape[:2])
    if p.shape[0] < 2:
        return 0.0
    both = m[1:] & m[:-1]
    if not np.any(both):
        return 0.0
    with np.errstate(over="ignore"):  # feet 1e308 apart, or 1e-300 s between frames: inf, too fast to measure
        dp = p[1:][..., _HORIZONTAL] - p[:-1][..., _HORIZONTAL]
        speed = np.linalg.norm(dp, axis=-1) / np.diff(t)[:, None]
        return float(speed[both].mean())


def _contact_mask(mask: ArrayLike, shape: tuple[int, ...]) -> BoolArray:
    """``mask`` as a bool array of ``shape`` (frames, feet): booleans, or integers that are all 0 or 1 (read as
    False/True).

    :class:`~kinema.ShapeError` for another shape, :class:`SolverInputError` for anything else than booleans or
    0/1 integers: ``numpy.asarray(mask, bool)`` would read NaN, 0.5, 2 or a string as True.
    """
    try:
        m = np.asarray(mask)
    except (TypeError, ValueError) as exc:  # ragged nested lists and the like
        raise SolverInputError(f"mask must be an {shape} (frames, feet) array of booleans, got {exc}") from None
    if m.shape != shape:
        raise ShapeError("mask", f"{shape} (frames, feet) to match the positions", tuple(m.shape))
    if m.dtype == np.bool_:
        return m
    if m.dtype.kind in "iu":
        if np.all((m == 0) | (m == 1)):
            return m.astype(bool)
        bad = m[(m != 0) & (m != 1)].flat[0]
        raise SolverInputError(f"mask must be booleans (or integers 0 and 1), got the integer {bad}")
    raise SolverInputError(f"mask must be booleans (or integers 0 and 1), got an array of dtype {m.dtype}")


def angular_speed(clip: Clip) -> FloatArray:
    """Local angular speed of every joint between consecutive frames, ``(F-1, J)`` rad/s.

    ``angle(q_f^-1 q_{f+1}) / (t_{f+1} - t_f)`` with the angle
    ``2 atan2(|v|, |w|)`` (:func:`kinema.rotation.angle_between`).
    """
    _check_clip(clip)
    if len(clip.pose.batch_shape) != 1:
        raise ShapeError("clip pose", "(frames, J, k) with one time dimension", str(clip.pose.batch_shape))
    q = clip.pose.rotations
    if q.ndim == 2 or q.shape[0] < 2:  # rotations shared by all frames (or one frame): nothing turns
        return np.zeros((max(clip.n_frames - 1, 0), clip.pose.n_joints))
    dt = np.diff(frame_times(clip))
    return rot.angle_between(q[:-1], q[1:]) / dt[:, None]


def max_angular_speed(clip: Clip) -> tuple[float, int, int]:
    """``(speed rad/s, frame, joint)`` of the fastest local joint turn in the clip (0, 0, 0 when static)."""
    _check_clip(clip)
    w = angular_speed(clip)
    if w.size == 0:
        return 0.0, 0, 0
    f, j = np.unravel_index(int(np.argmax(w)), w.shape)
    return float(w[f, j]), int(f), int(j)


# ================================================================= contacts
def find_feet(skeleton: Skeleton) -> tuple[int, ...]:
    """Foot joints found by name: the topmost joint per branch named like ``*foot*``/``*ankle*``.

    End sites, toes and balls are skipped; each foot needs a knee and a hip
    above it (twist and roll joints between them do not count).  Left feet come first.  Raises
    :class:`~kinema.BoneNotFoundError`-style :class:`SkeletonError` when none
    is found (pass the names explicitly then).
    """
    names = check_skeleton(skeleton).names
    cand = [j for j, n in enumerate(names) if _FOOT_RE.search(n) and not _NOT_FOOT_RE.search(n)]
    chosen = [j for j in cand if not any(a in cand for a in skeleton.ancestors(j)) and len(skeleton.ancestors(j)) >= 2]
    if not chosen:
        raise SkeletonError(
            "no foot joints found by name (looked for 'foot' or 'ankle' with a knee and a hip above); "
            "name them explicitly (--feet LEFT,RIGHT)"
        )
    chosen.sort(key=lambda j: (0 if _LEFT_RE.search(names[j]) else 1, j))
    return tuple(chosen)


def _resolve_feet(skeleton: Skeleton, feet: Sequence[int | str] | int | str | None) -> tuple[int, ...]:
    if feet is None:
        return find_feet(skeleton)
    if isinstance(feet, (str, int, np.integer)):
        listed = [feet]  # one foot
    elif is_sequence(feet):
        listed = list(feet)
    else:
        raise SolverInputError(f"feet: expected a foot joint (a name or an index) or a sequence of them, "
                               f"got {feet!r} (a {type(feet).__name__})")
    idx = tuple(resolve_joint(skeleton, f) for f in listed)
    if not idx:
        raise SolverInputError("feet: give at least one foot joint")
    if len(set(idx)) != len(idx):
        raise SolverInputError(f"feet: a joint is listed twice: {[skeleton.names[i] for i in idx]}")
    for i in idx:
        _leg(skeleton, i)
    return idx


def _separate_legs(skeleton: Skeleton, legs: Sequence[tuple[int, int, int]]) -> None:
    """Refuse legs that share a joint, or one that hangs below another (:class:`SolverInputError`).

    :func:`footlock` solves each leg ``(hip, knee, foot)`` on its own, from the animated pose: a joint in
    two legs gets the second leg's solve only, and a leg below another one's foot (a toe given as a
    foot beside its ankle) is solved where the other leg no longer leaves it.  Either way a foot
    would end off its lock, so the legs must be disjoint and none on another's path to the root.
    """
    names = skeleton.names
    for a, leg_a in enumerate(legs):
        for b, leg_b in enumerate(legs):
            if a == b or not {leg_b[2], *skeleton.ancestors(leg_b[2])} & set(leg_a):
                continue
            shared = [names[j] for j in leg_a if j in leg_b]
            how = f"share {shared[0]!r}" if shared else f"are nested (the second hangs below {names[leg_a[2]]!r})"
            raise SolverInputError(
                f"feet {names[leg_a[2]]!r} and {names[leg_b[2]]!r}: their legs (hip, knee, foot) "
                f"{tuple(names[j] for j in leg_a)} and {tuple(names[j] for j in leg_b)} {how}; footlock solves "
                "each leg on its own, so give one foot per leg (e.g. the ankles, not an ankle and its toe), "
                "each with a hip joint of its own")


@dataclass(frozen=True)
class ContactThresholds:
    """Contact detection thresholds, one value per foot (``(K,)`` arrays).

    * ``ground``: ground level (world up coordinate) of each foot.
    * ``height_on``/``height_off``: height *above* ``ground`` to enter/leave a contact.
    * ``speed_on``/``speed_off``: foot speed (units/s) to enter/leave a contact.
    * ``min_frames``: shortest contact kept; ``max_gap``: longest gap filled.
    * ``step``: shortest step (horizontal, units) and ``merge_gap`` the
      longest gap (frames) over which two contacts can still be one stance.
    """

    ground: FloatArray
    height_on: FloatArray
    height_off: FloatArray
    speed_on: FloatArray
    speed_off: FloatArray
    min_frames: int
    max_gap: int
    step: FloatArray
    merge_gap: int


@dataclass(frozen=True)
class Contacts:
    """Foot contacts of a clip.

    * ``feet``: foot joint indices ``(K,)``; ``names`` their names.
    * ``mask``: ``(F, K)`` bool, True while a foot is planted.
    * ``positions``: ``(F, K, 3)`` world positions of the feet (input clip).
    * ``speeds``: ``(F, K)`` foot speed, units/s (central differences).
    * ``thresholds``: what was used (estimated or given).
    """

    feet: tuple[int, ...]
    names: tuple[str, ...]
    mask: BoolArray
    positions: FloatArray
    speeds: FloatArray
    thresholds: ContactThresholds

    def runs(self, k: int) -> tuple[IntArray, IntArray]:
        """Contacts of foot ``k`` as half-open frame ranges ``(starts, ends)``.

        ``k`` indexes :attr:`feet`: an int from ``-K`` to ``K - 1`` (a negative one counts from the last foot,
        as in Python); anything else is a :class:`SolverInputError`."""
        return _runs(self.mask[:, _foot_index(k, len(self.feet))])

    @property
    def n_contacts(self) -> int:
        return int(sum(len(self.runs(k)[0]) for k in range(len(self.feet))))


def _per_foot(x: float | Sequence[float] | None, k: int, what: str) -> FloatArray | None:
    if x is None:
        return None
    bad = f"{what}: expected one finite number or one per foot ({k}), got {x!r}"
    try:
        a = as_float_array(x, what, ())
    except ShapeError:  # not numbers (a string, None in a list)
        raise SolverInputError(bad) from None
    if a.ndim == 0:
        a = np.full(k, float(a))
    if a.shape != (k,) or not np.all(np.isfinite(a)):
        raise SolverInputError(bad)
    return a


def _frame_number(x: Any, what: str) -> int:
    """``x`` as a Python int: an int or a NumPy integer (not a bool, not a float that would be cut)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise SolverInputError(f"{what}: expected a whole number of frames (an int), got {x!r}")
    return int(x)


def detect_contacts(
    skeleton: Skeleton,
    clip: Clip,
    feet: Sequence[int | str] | int | str | None = None,
    *,
    height: float | None = None,
    speed: float | None = None,
    ground: float | Sequence[float] | None = None,
    hysteresis: float = DEFAULT_HYSTERESIS,
    min_duration: float = DEFAULT_MIN_CONTACT_S,
    max_gap: float = DEFAULT_MAX_GAP_S,
    step: float | None = None,
    merge_gap: float = DEFAULT_MERGE_GAP_S,
    positions: ArrayLike | None = None,
) -> Contacts:
    """Find when each foot is planted.

    * ``feet``: foot joints (names or indices, or one of them); default :func:`find_feet`.
    * ``height``: contact height above the ground (units); default
      ``HEIGHT_ON_FRACTION`` of the leg length.
    * ``speed``: contact speed (units/s); default estimated from the clip:
      ``SPEED_NOISE_FACTOR`` times the median speed of the foot while it is
      below the height threshold, clamped to ``[0.05, 0.5]`` leg lengths/s.
    * ``ground``: ground level (up coordinate), one value or one per foot;
      default the ``GROUND_PERCENTILE`` percentile of each foot's height.
    * ``hysteresis`` (>= 1): a contact ends only above ``hysteresis`` times
      either threshold.
    * ``min_duration``/``max_gap`` (seconds): shorter contacts are dropped,
      shorter gaps inside a stance filled.
    * ``step`` (units; default ``STEP_FRACTION`` of the leg length) and
      ``merge_gap`` (seconds): two contacts of a foot are one stance when the
      gap between them is at most ``merge_gap``, the foot stayed below the
      leave height all through it and came down within ``step`` (horizontal
      distance) of where it left, and within ``STANCE_DRIFT_STEPS`` (2) steps
      of where the stance began (small shifts across many gaps do not add up
      under one lock).

    The steps, in order: a contact is a run of frames within the leave
    thresholds holding at least one frame within the enter thresholds
    (hysteresis both ways in time, so a contact starts at heel strike), or
    a run of at least ``STILL_CONTACT_S`` seconds within the leave height
    and the enter speed (a foot resting on its toes is planted too);
    gaps of at most ``max_gap`` are filled; stances broken only by speed are
    joined (``step``, ``merge_gap``); contacts shorter than ``min_duration``
    are dropped.  Joining before dropping means a stance cut into pieces by
    noise stays one contact (one lock) instead of losing its short pieces.
    * ``positions``: ``(F, K, 3)`` world foot positions if already computed.

    :class:`~kinema.SolverInputError` for a ``skeleton`` that is not a :class:`~kinema.Skeleton`, a ``clip``
    that is not a :class:`~kinema.Clip`, and a clip of no frames (there is nothing to detect).
    """
    from ._kernels._tier import kernels

    kc = kernels("contact")

    check_skeleton(skeleton)
    _check_clip(clip)
    _require_frames(clip, "there are no contacts to detect")
    t_all, r_all, s_all = _clip_arrays(skeleton, clip, copy=False)
    idx = _resolve_feet(skeleton, feet)
    k = len(idx)
    hysteresis = as_float_scalar(hysteresis, "hysteresis")
    if not (np.isfinite(hysteresis) and hysteresis >= 1.0):
        raise SolverInputError(f"hysteresis must be >= 1, got {hysteresis!r}")
    min_duration, max_gap, merge_gap = (positive_number(seconds, f"{name} (seconds)", allow_zero=True) for
                                        name, seconds in (("min_duration", min_duration), ("max_gap", max_gap),
                                                          ("merge_gap", merge_gap)))
    step_given = None if step is None else positive_number(step, "step (clip units)", allow_zero=True)
    h_given = None if height is None else positive_number(height, "contact height")
    v_given = None if speed is None else positive_number(speed, "contact speed")
    g_given = _per_foot(ground, k, "ground")

    legs = [_leg(skeleton, f) for f in idx]
    if positions is None:
        sub, keep = _subskeleton(skeleton, idx)
        p = forward_kinematics(sub, Pose(_take(t_all, keep), _take(r_all, keep), _take(s_all, keep))).positions
        p = p[:, np.searchsorted(keep, idx)]
    else:
        p = as_float_array(positions, "positions", (clip.n_frames, k, 3), batch=False)
        require_finite(p, "positions")
    # leg lengths from the first frame
    world = forward_kinematics(skeleton, Pose(t_all[0], r_all[0], s_all if s_all.ndim == 2 else s_all[0])).positions
    leg_length = np.array([np.linalg.norm(world[kn] - world[h]) + np.linalg.norm(world[f] - world[kn])
                           for h, kn, f in legs])

    t = frame_times(clip)
    n = clip.n_frames
    if n >= 2:
        with np.errstate(all="ignore"):  # frame times of 1e-300 s (or 1e300 s) over- or underflow the differences
            spd = np.linalg.norm(np.gradient(p, t, axis=0), axis=-1)
        spd[~np.isfinite(spd)] = np.inf  # too fast to tell: never planted
    else:  # a single frame has no motion
        spd = np.zeros((n, k))
    hgt = p[..., UP_AXIS]
    g = g_given if g_given is not None else np.percentile(hgt, GROUND_PERCENTILE, axis=0)
    h_on = np.full(k, h_given) if h_given is not None else HEIGHT_ON_FRACTION * leg_length
    if v_given is not None:
        v_on = np.full(k, v_given)
    else:
        v_on = np.empty(k)
        for i in range(k):
            low = hgt[:, i] - g[i] <= h_on[i]
            noise = float(np.median(spd[low, i])) if np.any(low) else 0.0
            v_on[i] = np.clip(SPEED_NOISE_FACTOR * noise, SPEED_FLOOR_FRACTION * leg_length[i],
                              SPEED_CEIL_FRACTION * leg_length[i])
    fps = (n - 1) / (t[-1] - t[0]) if n >= 2 else float(clip.fps)
    th = ContactThresholds(
        ground=np.asarray(g, dtype=np.float64),
        height_on=h_on,
        height_off=hysteresis * h_on,
        speed_on=v_on,
        speed_off=hysteresis * v_on,
        min_frames=max(1, _frames(min_duration, fps, "min_duration")),
        max_gap=_frames(max_gap, fps, "max_gap"),
        step=np.full(k, step_given) if step_given is not None else STEP_FRACTION * leg_length,
        merge_gap=_frames(merge_gap, fps, "merge_gap"),
    )
    mask = np.empty((n, k), dtype=bool)
    above = np.ascontiguousarray(hgt - th.ground)
    kc.hysteresis(above, np.ascontiguousarray(spd), th.height_on, th.height_off, th.speed_on, th.speed_off, mask)
    kc.still_runs(above, np.ascontiguousarray(spd), th.height_off, th.speed_on,
                  max(1, int(round(STILL_CONTACT_S * fps))), mask)
    ground_xy = np.ascontiguousarray(p[..., _HORIZONTAL])
    kc.clean_runs(mask, th.max_gap, 0, ground_xy, th.step)
    kc.merge_still_gaps(mask, above, th.height_off, ground_xy, th.step, th.merge_gap)
    kc.clean_runs(mask, 0, th.min_frames, ground_xy, th.step)
    return Contacts(feet=idx, names=tuple(skeleton.names[f] for f in idx), mask=mask,
                    positions=np.ascontiguousarray(p), speeds=spd, thresholds=th)


#: The options :func:`footlock` passes on to :func:`detect_contacts` (its keyword-only arguments but
#: ``positions``, which footlock computes itself).
DETECT_OPTIONS = tuple(name for name, p in inspect.signature(detect_contacts).parameters.items()
                       if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "positions")


def _check_detect_options(options: dict[str, Any]) -> None:
    """:class:`SolverInputError` naming any option :func:`detect_contacts` does not take, with the valid ones."""
    unknown = [name for name in options if name not in DETECT_OPTIONS]
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, DETECT_OPTIONS, n=1)
        if close:
            hints.append(f"did you mean {close[0]!r} for {name!r}?" if len(unknown) > 1 else
                         f"did you mean {close[0]!r}?")
    listed = ", ".join(repr(u) for u in unknown)
    raise SolverInputError(
        f"footlock: unknown option{'s' if len(unknown) > 1 else ''} {listed}"
        f"{' (' + '; '.join(hints) + ')' if hints else ''}; the contact options it passes to detect_contacts "
        f"are {', '.join(repr(o) for o in DETECT_OPTIONS)}, and its own are 'contacts', 'ease', 'lower_hips' "
        "and 'keep_length'")


# ================================================================= footlock
@dataclass(frozen=True)
class FootlockResult:
    """What :func:`footlock` returns.

    * ``clip``: the locked clip (new arrays; full ``(F, J, k)`` pose).
    * ``contacts``: the contacts used (of the input clip), as detected or given.
    * ``weights``: ``(F, K)`` IK weight per foot (1 while held, eased ramps).
    * ``locks``: per foot, ``(n_contacts, 3)`` world lock positions: lock ``c``
      holds the foot over contact ``c``, less the frames let go early.
    * ``hips_drop``: ``(F,)`` how far the root was lowered (units, >= 0).
    * ``ik_error``: ``(F, K)`` distance of each foot from its (eased) target
      after the solve; 0 on frames that were not solved.
    * ``metrics``: before/after numbers, lengths in the clip's units, angular
      speeds in rad/s: ``frames``, ``feet`` (names), ``contacts`` (all feet),
      ``contacts_per_foot`` and ``contact_frames_per_foot`` (name -> count),
      ``skate_before``/``skate_after`` (:func:`foot_skate` over the held
      frames, units/s),
      ``skate_reduction`` (fraction), ``changed_joints`` (the legs' hip, knee
      and foot), ``joint_speed_before``/``joint_speed_after`` (largest angular
      speed of the changed joints, with ``..._joint`` and ``..._frame``),
      ``hips_drop_max`` and ``ik_error_max`` (units).
    * ``held``: ``(F, K)`` bool, True while a foot is held at its lock: the
      contacts, less the frames at a toe-off (heel strike) where holding the
      foot would have snapped a near-straight leg (:func:`footlock`, step 6);
      None means the contacts' own mask.
    """

    clip: Clip
    contacts: Contacts
    weights: FloatArray
    locks: tuple[FloatArray, ...]
    hips_drop: FloatArray
    ik_error: FloatArray
    metrics: dict[str, Any] = field(default_factory=dict)
    held: BoolArray | None = None

    def held_runs(self, k: int) -> tuple[IntArray, IntArray]:
        """Frames foot ``k`` is held at its locks, as half-open ranges ``(starts, ends)`` (one per contact).

        ``k`` indexes ``contacts.feet``: an int from ``-K`` to ``K - 1`` (a negative one counts from the last
        foot, as in Python); anything else is a :class:`SolverInputError`."""
        k = _foot_index(k, len(self.contacts.feet))
        return _runs((self.contacts.mask if self.held is None else self.held)[:, k])


def _moving(a: FloatArray, half: int, how: str) -> FloatArray:
    """Moving max or mean over ``[f - half, f + half]`` (edge values repeated).

    A window wider than the clip (an ``ease`` of minutes on a short clip) is not padded out: every
    frame's window then holds the whole clip, so the max is the clip's max and the mean counts the
    repeated edge values (``half - f`` copies of the first, ``half - (n - 1 - f)`` of the last).
    """
    n = a.size
    if half <= 0 or n == 0:
        return a.copy()
    if half >= n:
        if how == "max":
            return np.full(n, a.max())
        f = np.arange(n)
        return (a.sum() + (half - f) * a[0] + (half - (n - 1 - f)) * a[-1]) / (2 * half + 1)
    padded = np.pad(a, half, mode="edge")
    win = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    return win.max(axis=-1) if how == "max" else win.mean(axis=-1)


def _joint_max_speed(clip: Clip, joints: IntArray | None = None,
                     window: tuple[int, int] | None = None) -> tuple[FloatArray, IntArray]:
    """Per joint (of ``joints``, default all): largest angular speed (rad/s) and the frame where it is.

    ``window``: ``(lo, hi)``, frames inclusive: only the steps between frames of ``lo..hi`` count (the frame
    reported is still the clip's)."""
    q = clip.pose.rotations
    if joints is not None and q.ndim == 3:
        q = q[:, joints]
    n = q.shape[-2]
    if q.ndim == 2 or q.shape[0] < 2:  # shared rotations or a single frame: nothing turns
        return np.zeros(n), np.zeros(n, dtype=np.int64)
    lo, hi = (0, q.shape[0] - 1) if window is None else (max(window[0], 0), min(window[1], q.shape[0] - 1))
    if hi <= lo:
        return np.zeros(n), np.full(n, lo, dtype=np.int64)
    q = q[lo:hi + 1]
    w = rot.angle_between(q[:-1], q[1:]) / np.diff(frame_times(clip)[lo:hi + 1])[:, None]
    return w.max(axis=0), lo + w.argmax(axis=0).astype(np.int64)


def _speed_metrics(skeleton: Skeleton, before: Clip, after: Clip, changed: Sequence[int],
                   window: tuple[int, int] | None = None) -> dict[str, Any]:
    """Largest angular speed (rad/s) of the ``changed`` joints, before and after, with where it is.

    Only the joints a function changed are compared (the others are the same
    before and after, and naming one of them would say nothing about the change).
    ``window``: ``(lo, hi)``, frames inclusive, the only frames compared (both
    clips alike): the frames a function changed and their neighbours, so a
    faster frame elsewhere in the input cannot hide a pop in them.
    """
    ch = np.asarray(sorted(set(int(c) for c in changed)), dtype=np.int64)
    out: dict[str, Any] = {"changed_joints": [skeleton.names[j] for j in ch]}
    for when, clip in (("before", before), ("after", after)):
        w, f = _joint_max_speed(clip, ch, window) if ch.size else (np.zeros(0), np.zeros(0, dtype=np.int64))
        k = int(np.argmax(w)) if w.size else -1
        out[f"joint_speed_{when}"] = float(w[k]) if w.size else 0.0
        out[f"joint_speed_{when}_joint"] = skeleton.names[int(ch[k])] if w.size else ""
        out[f"joint_speed_{when}_frame"] = int(f[k]) if w.size else 0
    return out


def _hips_drops(sub: Skeleton, pos: FloatArray, legs: Sequence[tuple[int, ...]], targets: FloatArray,
                weights: FloatArray, ease_frames: int, lower_hips: bool) -> dict[int, FloatArray]:
    """How far each root is lowered ``{root: (F,)}`` so that its legs reach their targets (:func:`footlock`, 4)."""
    n = pos.shape[0]
    root_of_leg = [_root_of(sub, hip) for hip, _, _ in legs]
    drops = {r: np.zeros(n) for r in sorted(set(root_of_leg))}
    if not lower_hips:
        return drops
    for i, (hip, knee, foot) in enumerate(legs):
        a = np.linalg.norm(pos[0, knee] - pos[0, hip])
        b = np.linalg.norm(pos[0, foot] - pos[0, knee])
        r_max = (a + b) * (1.0 - REACH_SLACK)
        # Never lower for what the animation already does: the reach limit is
        # at least the animated hip-to-foot distance of the frame.
        r_t = np.maximum(r_max, np.linalg.norm(pos[:, foot] - pos[:, hip], axis=-1))
        off = pos[:, hip] - targets[:, i]
        v = off[:, UP_AXIS]
        h = np.linalg.norm(off[:, _HORIZONTAL], axis=-1)
        need = v - np.sqrt(np.maximum(r_t * r_t - h * h, 0.0))
        need = np.clip(need, 0.0, MAX_DROP_FRACTION * (a + b))
        need[need < DROP_RTOL * (a + b)] = 0.0
        need[weights[:, i] == 0.0] = 0.0  # target == animation there: nothing to reach
        drops[root_of_leg[i]] = np.maximum(drops[root_of_leg[i]], need)
    for r, d in drops.items():
        if np.any(d > 0):
            drops[r] = _moving(_moving(d, ease_frames, "max"), ease_frames, "mean")
    return drops


def _keep_leg_length(pos: FloatArray, leg: tuple[int, ...], target: FloatArray, ease_frames: int,
                     margin: float) -> tuple[FloatArray, FloatArray]:
    """``(target (F, 3), strength (F,))``: a near-straight leg's foot target moved up or down so the leg keeps its
    animated length.

    ``pos (F, J, 3)`` the animated positions, ``leg = (hip, knee, foot)``, ``target (F, 3)`` the foot's
    target (the lock, its ramps and gaps), ``margin`` two-bone's margin as a fraction of the shorter bone.

    Near full extension the knee angle goes as ``acos(d / L)`` of the hip-to-foot distance ``d``: the few
    millimetres between a lock and the animated foot snap a straight knee straight or bend it, and its
    angular speed jumps (in the input the knee straightens as the body passes over the foot).  So where the
    animated leg is near straight, the target's height is set so that its distance from the animated hip
    is the animated one, ``r = min(|p_foot - p_hip|, a + b - margin min(a, b))`` (per frame: bone lengths
    may vary), ``y = y_hip - sqrt(r^2 - h^2)`` for the horizontal offset ``h``; the horizontal position (the
    lock) does not move.  The strength is a smoothstep of the animated ``d / L`` from
    ``1 - 2 STRAIGHT_FRACTION`` (0) to ``1 - STRAIGHT_FRACTION`` (1), moving max then moving mean over the
    ease window (a leg that straightens is caught up before it does), and 0 where the target is the
    animated foot (nothing to keep) or ``h >= r`` (no height gives that distance).
    """
    hip, knee, foot = leg
    thigh = np.linalg.norm(pos[:, knee] - pos[:, hip], axis=-1)
    shin = np.linalg.norm(pos[:, foot] - pos[:, knee], axis=-1)
    length = thigh + shin
    r_anim = np.linalg.norm(pos[:, foot] - pos[:, hip], axis=-1)
    r = np.minimum(r_anim, length - margin * np.minimum(thigh, shin))
    x = np.clip((r_anim / np.maximum(length, np.finfo(float).tiny) - (1.0 - 2.0 * STRAIGHT_FRACTION))
                / STRAIGHT_FRACTION, 0.0, 1.0)
    strength = _moving(_moving(x * x * (3.0 - 2.0 * x), ease_frames, "max"), ease_frames, "mean")
    off = target - pos[:, hip]
    h2 = np.sum(off[:, _HORIZONTAL] ** 2, axis=-1)
    strength = np.where((r * r > h2) & np.any(target != pos[:, foot], axis=1), strength, 0.0)
    out = target.copy()
    y = pos[:, hip, UP_AXIS] - np.sqrt(np.maximum(r * r - h2, 0.0))
    out[:, UP_AXIS] += strength * (y - target[:, UP_AXIS])
    return out, strength


def _lengthen_fast_ramps(speed: FloatArray, cap: FloatArray, runs: Sequence[tuple[IntArray, IntArray]],
                         detected: Sequence[tuple[IntArray, IntArray]], owners: IntArray, straight: BoolArray,
                         before: list[IntArray], after: list[IntArray], max_ramp: int, edge: int,
                         eased_before: list[BoolArray], eased_after: list[BoolArray]) -> bool:
    """Slow down what turns a leg joint faster than the input's fastest; True if anything changed.

    ``speed (F-1, 3K)``: the solved legs' local angular speeds (hip, knee, foot
    of each foot in turn), ``cap (3K,)`` the input's largest per joint,
    ``owners (F, K)`` the contact each weighted frame belongs to; ``runs``
    (contacts ``[start, end)`` per foot) and ``before``/``after`` (ramp lengths
    per contact, frames) are updated in place.

    * A ramp on which joint ``j`` turns too fast and that eases the foot's
      velocity (``eased_before``/``eased_after``, per contact, updated in
      place; :func:`_eased_targets`) stops easing it: holding the foot back
      while the body moves on is what turns the leg.
    * A ramp on which joint ``j`` turns at ``r`` times ``cap[j]`` and that
      keeps the animated velocity grows to
      ``r`` times its length (the correction it carries is then spread over
      that many more frames, so it turns about ``r`` times slower), at least
      by one frame and at most to ``max_ramp``.
    * Within ``edge`` frames of the detected end (start) of a contact, a joint
      turning too fast on a leg that is near straight there, both in the
      animation and as solved (``straight (F, K)``, :data:`STRAIGHT_FRACTION`),
      is the lock asking a leg the animation holds straight to snap straight
      at toe-off or heel strike: the contact ends just
      before (starts just after) that frame pair, so that its ramp carries
      the turn instead.  At least one frame of the contact is kept.
    """
    from ._kernels._tier import kernels

    kc = kernels("contact")

    changed = False
    for i, (starts, ends) in enumerate(runs):
        col = speed[:, 3 * i:3 * i + 3]
        c_cap = cap[3 * i:3 * i + 3]
        # A joint the input holds still has no fastest speed to keep under (the ratio is undefined): not checked.
        moving = c_cap > SPEED_CAP_FLOOR
        ratio = np.max(col[:, moving] / c_cap[moving], axis=1, initial=0.0)
        changed |= kc.lengthen_fast_ramps(ratio, 1.0 + SPEED_RTOL, owners[:, i], straight[:, i], starts, ends,
                                          detected[i][0], detected[i][1], edge, max_ramp, before[i], after[i],
                                          eased_before[i], eased_after[i])
    return changed


def footlock(
    skeleton: Skeleton,
    clip: Clip,
    feet: Sequence[int | str] | int | str | None = None,
    *,
    contacts: Contacts | None = None,
    ease: float = DEFAULT_EASE_S,
    lower_hips: bool = True,
    keep_length: bool = True,
    **detect_options: Any,
) -> FootlockResult:
    """Remove foot skate: lock each foot contact at one ground position with two-bone IK.

    For each foot (``feet``, default :func:`find_feet`) with knee and hip the two
    joints above it that bend the leg (a twist or roll joint in the shin or the thigh,
    or a joint at the same place as the one below it, rides along):

    1. contacts from :func:`detect_contacts` (``detect_options`` are passed
       on: ``height``, ``speed``, ``ground``, ``hysteresis``, ...; any other
       name is refused, listing :data:`DETECT_OPTIONS`) unless ``contacts`` is
       given;
    2. each contact's lock is the mean world position of the foot over the
       frames it is held (the contact, less what step 6 lets go);
    3. the IK weight ``w`` is 1 in a contact and eases over ``ease`` seconds
       before and after (smoothstep, shared fairly with a neighbouring
       contact); in a contact the foot's target is the lock, on the ramps
       it is ``p + w (lock - p_edge) - w^EDGE_EASE_POWER (p - p_edge)`` with
       ``p`` its animated position and ``p_edge`` the one at the contact's
       first (last) frame (:func:`_eased_targets`): the offset fades and the
       animated motion away from the edge fades in, so the foot leaves (and
       reaches) the lock at rest and takes up the animated velocity over the
       first part of the ramp.  Why: a lock held to the last frame of a
       contact whose foot already moves (a shuffling step's slow lift-off)
       would otherwise start the foot from rest to the animated velocity in
       one frame.  Where that ease would accelerate the foot harder than the
       animated foot ever accelerates (a short ramp behind a foot already
       fast), the ramp drops the second term and keeps the animated velocity
       (:func:`_unease_harsh_ramps`).  The motion is continuous and untouched
       where ``w = 0``; across a gap shorter than two ramps one lock's offset
       fades straight into the next one's (:func:`_crossfade_short_gaps`);
       with ``keep_length`` (the default), where the animated leg is near
       straight, the target's height (only its height: the lock stays put
       across the ground) is set so that the leg keeps its animated length
       (:func:`_keep_leg_length`): a lock a few millimetres off the animated
       foot would otherwise snap a straight knee straight or bend it as the
       body passes over the foot;
    4. with ``lower_hips``, where a target is farther from its hip than
       ``(1 - REACH_SLACK)`` of the leg (and farther than the animated foot
       was), the root is lowered straight down by the least amount that
       brings it in reach, ``d = v - sqrt(R^2 - h^2)`` for the hip-target
       vertical ``v`` and horizontal ``h`` offsets, capped at
       ``MAX_DROP_FRACTION`` of the leg; the drop is smoothed (moving max then
       moving mean over the ease window, which never lowers it below need);
    5. each leg is solved with :func:`kinema.solve_two_bone`: pole from
       :func:`_knee_poles` (the animated knee's bend plane where it tells
       one, turned continuously in between, so the knee never swings round
       near full extension; with ``keep_length``, where the leg keeps its
       animated length, the animated knee carried along, so the knee keeps
       its animated bend), foot world orientation = the animated one;
    6. no leg joint turns faster than the input ever turns it: where one does
       (hip, knee or foot, against its own largest angular speed in the
       input), the legs are solved again, up to ``SPEED_PASSES`` times, with
       the ramp it turns on first made to keep the animated velocity (no
       velocity ease: holding the foot back while the body moves on turns
       the leg), then lengthened in proportion (at most
       ``MAX_EASE_FACTOR`` times ``ease``; the blend keeps its form, only
       slower), or, where it turns inside a contact on a leg near straight in
       the animation and as solved (``STRAIGHT_FRACTION``), with that contact
       ending (starting) just before (after) it, at most ``MAX_EASE_FACTOR``
       times ``ease`` before (after) the detected end (start): the foot is let
       go at toe-off where holding it would snap the knee straight
       (:func:`_lengthen_fast_ramps`); the result's ``held`` says which
       frames are held.

    ``keep_length=False`` holds each held foot at its lock in 3-D (releases
    before it had no other way); on straight-legged captures its locks may
    then be let go early (step 6), and the foot slides for those frames.

    Only the root's up translation and the hip, knee and foot rotations of
    each leg change, and only on frames with ``w > 0``, a hips drop or a cross-faded short gap.
    """
    from ._two_bone import solve_two_bone

    check_skeleton(skeleton)
    _check_clip(clip)
    _check_detect_options(detect_options)
    lower_hips = check_flag(lower_hips, "lower_hips")
    keep_length = check_flag(keep_length, "keep_length")
    n = _require_frames(clip, "there is nothing to foot-lock")
    t_out, r_out, scales = _clip_arrays(skeleton, clip)
    if contacts is not None and not isinstance(contacts, Contacts):
        raise SolverInputError(f"contacts must be what detect_contacts returns, got a {type(contacts).__name__}")
    if contacts is not None and detect_options:
        # The given contacts are used as they are: detection options would be silently ignored.
        raise SolverInputError(f"contacts were given, so nothing is detected: the detection options "
                               f"{', '.join(sorted(detect_options))} would have no effect (pass them to "
                               "detect_contacts instead)")
    idx = _resolve_feet(skeleton, feet if feet is not None else (contacts.feet if contacts is not None else None))
    ease = positive_number(ease, "ease (seconds)", allow_zero=True)
    k = len(idx)
    legs_full = [_leg(skeleton, f) for f in idx]
    _separate_legs(skeleton, legs_full)
    # Everything below runs on the legs and their ancestors only (same world transforms).
    sub, keep = _subskeleton(skeleton, [j for leg in legs_full for j in leg])
    legs = [tuple(int(x) for x in np.searchsorted(keep, leg)) for leg in legs_full]
    s_sub = _take(scales, keep)
    fk = forward_kinematics(sub, Pose(_take(t_out, keep), _take(r_out, keep), s_sub))
    pos, wrot = fk.positions, fk.rotations
    feet_sub = [leg[2] for leg in legs]
    if contacts is None:
        contacts = detect_contacts(skeleton, clip, idx, positions=pos[:, feet_sub], **detect_options)
    elif contacts.feet != idx or contacts.mask.shape != (n, k):
        raise SolverInputError("contacts were detected for other feet or another clip")
    t = frame_times(clip)
    fps = (n - 1) / (t[-1] - t[0]) if n >= 2 else float(clip.fps)
    ease_frames = _frames(ease, fps, "ease")

    detected = [contacts.runs(i) for i in range(k)]
    runs = [(s_c.copy(), e_c.copy()) for s_c, e_c in detected]
    # Ramp lengths (frames) before and after each contact: ``ease`` to begin with, lengthened by
    # _lengthen_fast_ramps wherever a leg joint turned faster than the input ever turns it.
    before = [np.full(r[0].size, ease_frames, dtype=np.int64) for r in runs]
    after = [np.full(r[0].size, ease_frames, dtype=np.int64) for r in runs]
    accel_cap = [(np.linalg.norm(np.diff(pos[:, leg[2]], 2, axis=0), axis=-1).max(initial=0.0)
                  * (1.0 + SPEED_RTOL)) for leg in legs]
    eased_b = [np.full(r[0].size, True) for r in runs]
    eased_a = [np.full(r[0].size, True) for r in runs]
    leg_joints = np.array([j for leg in legs for j in leg], dtype=np.int64)
    speed_cap = _joint_max_speed(clip, np.array([j for leg in legs_full for j in leg], dtype=np.int64))[0]
    max_ramp = int(np.ceil(MAX_EASE_FACTOR * ease_frames))
    length_margin = LENGTH_MARGIN_FACTOR * DEFAULT_MARGIN_FRACTION
    t_in, r_in = t_out, r_out
    offsets = [_knee_offset(pos, hip, knee, foot) for hip, knee, foot in legs]
    forwards = [_knee_forward(pos, wrot, hip, knee, offsets[i]) for i, (hip, knee, _) in enumerate(legs)]
    # What the previous pass solved, per leg: its inputs per frame (target, pole, hips drop) and its results.
    # A frame whose inputs did not change is not solved again: each frame's solve is independent and gives
    # the same bits alone or in any batch, so this only skips work.
    last_in: list[FloatArray | None] = [None] * k
    last_rot: list[FloatArray] = [np.empty((n, 3, 4)) for _ in legs]
    last_err: list[FloatArray] = [np.zeros(n) for _ in legs]
    solved_frames: list[IntArray] = [np.zeros(0, dtype=np.int64) for _ in legs]
    t_sub_in, r_sub_in = _take(t_in, keep), _take(r_in, keep)
    # The passes work on the legs' sub-skeleton, in place: each pass writes the drops, reverts the frames
    # no longer solved and writes the frames solved anew; the full clip is written once, after the last pass.
    t_sub, r_sub = t_sub_in.copy(), r_sub_in.copy()
    speed = np.empty((max(n - 1, 0), leg_joints.size))  # the solved legs' angular speeds (rad/s), kept up to date
    dt = np.diff(t)[:, None]
    up = np.zeros(3)
    up[UP_AXIS] = 1.0
    for attempt in range(SPEED_PASSES + 1):
        weights = np.zeros((n, k))
        targets = np.empty((n, k, 3))
        owners = np.empty((n, k), dtype=np.int64)
        locks: list[FloatArray] = []
        strengths: list[FloatArray] = []  # _keep_leg_length's, per leg
        for i, (_, _, foot) in enumerate(legs):
            starts, ends = runs[i]
            # Lock = mean position over the contact: cumulative sums give every run's mean at once.
            csum = np.concatenate((np.zeros((1, 3)), np.cumsum(pos[:, foot], axis=0)))
            locks.append((csum[ends] - csum[starts]) / (ends - starts)[:, None] if starts.size else np.zeros((0, 3)))
            w, owners[:, i] = _ease_runs(starts, ends, n, before[i], after[i])
            anim = pos[:, foot]
            weights[:, i] = w
            while True:
                targets[:, i] = _crossfade_short_gaps(
                    _eased_targets(anim, starts, ends, locks[i], w, owners[:, i], eased_b[i], eased_a[i]),
                    anim, starts, ends, locks[i], before[i], after[i])
                if not _unease_harsh_ramps(targets[:, i], accel_cap[i], starts, ends, owners[:, i], eased_b[i],
                                           eased_a[i]):
                    break
            if keep_length:
                targets[:, i], strength = _keep_leg_length(pos, legs[i], targets[:, i], ease_frames, length_margin)
                strengths.append(strength)
        drops = _hips_drops(sub, pos, legs, targets, weights, ease_frames, lower_hips)
        for r, d in drops.items():
            t_sub[:, r, UP_AXIS] = t_sub_in[:, r, UP_AXIS] - d
        rewritten = np.zeros(n, dtype=bool)  # frames whose leg rotations this pass changed
        ik_error = np.zeros((n, k))
        straight = np.zeros((n, k), dtype=bool)  # near straight, solved and animated: STRAIGHT_FRACTION
        for i, (hip, knee, foot) in enumerate(legs):
            d_leg = drops[_root_of(sub, hip)]
            # Solved where the target is not the animated foot (the weight's ramps, and the whole of a
            # cross-faded gap, whose middle frame has weight 0 but an offset) or the hips moved.
            solved = (weights[:, i] > 0.0) | (d_leg > 0.0) | np.any(targets[:, i] != pos[:, foot], axis=1)
            dropped = np.setdiff1d(solved_frames[i], np.flatnonzero(solved), assume_unique=True)
            for j_sub in (hip, knee, foot):  # solved last pass, not now: back to the input
                r_sub[dropped, j_sub] = r_sub_in[dropped, j_sub]
            rewritten[dropped] = True
            frames = solved_frames[i] = np.flatnonzero(solved)
            if frames.size == 0:
                continue
            hip_out = pos[:, hip] - d_leg[:, None] * up
            pole = _knee_poles(pos, forwards[i], offsets[i], knee, foot, hip_out, targets[:, i], solved,
                               (strengths[i], pos[:, foot] - pos[:, hip]) if keep_length else None)
            inputs = np.concatenate((targets[:, i], pole, d_leg[:, None]), axis=1)  # (F, 7): what a solve reads
            prev = last_in[i]
            todo = frames if prev is None else frames[np.any(inputs[frames] != prev[frames], axis=1)]
            last_in[i] = np.where(solved[:, None], inputs, np.nan)  # NaN: not solved, never equal
            sel = slice(None) if todo.size == n else todo  # every frame: no gathered copies
            if todo.size:
                pose = Pose(t_sub[sel], r_sub_in[sel], _rows(s_sub, sel))  # each solve starts from the input
                res = solve_two_bone(sub, pose, (hip, knee, foot), targets[sel, i], pole[sel],
                                     end_rotation=wrot[sel, foot])
                last_rot[i][sel] = res.pose.rotations[:, [hip, knee, foot]]
                last_err[i][sel] = res.error
            # Frames solved last pass with the same inputs already hold their rotations (a frame not
            # solved last pass has NaN inputs there, so it is in ``todo``).
            for c, j_sub in enumerate((hip, knee, foot)):
                r_sub[sel, j_sub] = last_rot[i][sel, c]
            rewritten[sel] = True
            ik_error[frames, i] = last_err[i][frames]
            a = np.linalg.norm(pos[0, knee] - pos[0, hip])
            b = np.linalg.norm(pos[0, foot] - pos[0, knee])
            near = (a + b) * (1.0 - STRAIGHT_FRACTION)
            straight[:, i] = ((np.linalg.norm(targets[:, i] - hip_out, axis=-1) > near)
                              & (np.linalg.norm(pos[:, foot] - pos[:, hip], axis=-1) > near))
        if attempt == SPEED_PASSES or n < 2:
            break
        # Only the speeds next to a rewritten frame change (each is one pair of frames).
        pairs = np.flatnonzero(rewritten[:-1] | rewritten[1:])
        q_legs = r_sub[:, leg_joints]
        if attempt == 0 or pairs.size == n - 1:
            speed[:] = rot.angle_between(q_legs[:-1], q_legs[1:]) / dt
        else:
            speed[pairs] = rot.angle_between(q_legs[pairs], q_legs[pairs + 1]) / dt[pairs]
        if not _lengthen_fast_ramps(speed, speed_cap, runs, detected, owners, straight, before, after, max_ramp,
                                    max_ramp, eased_b, eased_a):
            break
    t_out, r_out = t_in.copy(), r_in.copy()
    for r, d in drops.items():
        t_out[:, keep[r], UP_AXIS] -= d
    for i in range(k):
        for c, j in enumerate(legs_full[i]):
            r_out[solved_frames[i], j] = last_rot[i][solved_frames[i], c]
    drop = np.max(np.stack(list(drops.values())), axis=0) if drops else np.zeros(n)
    mask = np.zeros((n, k), dtype=bool)
    for i, (starts, ends) in enumerate(runs):
        for s_c, e_c in zip(starts, ends, strict=True):
            mask[s_c:e_c, i] = True

    out = Clip(Pose(t_out, r_out, scales), clip.fps, None if clip.times is None else clip.times.copy())
    p_after = forward_kinematics(sub, Pose(t_sub, r_sub, s_sub)).positions[:, feet_sub]
    skate0 = foot_skate(contacts.positions, mask, t)
    skate1 = foot_skate(p_after, mask, t)
    metrics: dict[str, Any] = {
        "frames": n,
        "feet": list(contacts.names),
        "contacts": contacts.n_contacts,
        "contacts_per_foot": {name: int(contacts.runs(i)[0].size) for i, name in enumerate(contacts.names)},
        "contact_frames_per_foot": {name: int(contacts.mask[:, i].sum()) for i, name in enumerate(contacts.names)},
        "skate_before": skate0,
        "skate_after": skate1,
        "skate_reduction": (1.0 - skate1 / skate0) if skate0 > 0 else 0.0,
    }
    metrics.update(_speed_metrics(skeleton, clip, out, [j for leg in legs_full for j in leg]))
    metrics["hips_drop_max"] = float(drop.max()) if n else 0.0
    metrics["ik_error_max"] = float(ik_error.max()) if n else 0.0
    return FootlockResult(clip=out, contacts=contacts, weights=weights, locks=tuple(locks), hips_drop=drop,
                          ik_error=ik_error, metrics=metrics, held=mask)


# ==================================================================== reach
@dataclass(frozen=True)
class ReachResult:
    """What :func:`reach` returns.

    * ``clip``: the re-aimed clip.
    * ``weights``: ``(F,)`` blend weight (1 over ``A..B``, eased ramps, 0 elsewhere).
    * ``error``: ``(F,)`` distance of the effector from its (blended) target
      on the solved frames (from FK of the output), 0 elsewhere.
    * ``metrics``: ``max_error`` (largest distance from the target over
      ``A..B``, clip units), ``range``, ``blend`` (frames), ``solved_frames``,
      ``moved_max`` (how far the target moved the effector, units),
      ``changed_joints`` and ``joint_speed_before``/``joint_speed_after``
      (rad/s, largest over the changed joints and over the solved frames
      and the frame either side of them, with ``..._joint`` and
      ``..._frame``): a pop the reach makes shows as a faster ``after``.
    """

    clip: Clip
    weights: FloatArray
    error: FloatArray
    metrics: dict[str, Any] = field(default_factory=dict)


def reach(
    skeleton: Skeleton,
    clip: Clip,
    effector: int | str,
    target: ArrayLike,
    frames: tuple[int, int],
    *,
    blend: int | None = None,
    chain: int | str | None = None,
    keep_orientation: bool = True,
    tolerance: float = 1e-6,
    max_iterations: int = 50,
) -> ReachResult:
    """Re-aim a reach: over frames ``A..B`` (inclusive) the effector sits at ``target``.

    * ``target``: ``(3,)`` world position (clip units).
    * ``blend``: frames over which the offset eases in before ``A`` and out
      after ``B`` (smoothstep); default ``DEFAULT_REACH_BLEND_S`` seconds.  On
      the ramps the effector's target is ``p + w (target - p_A)`` before ``A``
      and ``p + w (target - p_B)`` after ``B``, with ``p`` its animated position:
      the animated motion is kept, shifted by a fading offset.  Frames
      outside ``[A - blend, B + blend]`` are untouched.
    * ``chain``: ``None`` for two-bone IK on (grandparent, parent, effector)
      after the animated arm is carried round the shoulder by the turn from
      the animated effector to its target (see :func:`_carry_turns`: the
      turn is carried frame to frame, so the bend plane, the elbow and the
      upper arm's twist move as continuously as the body and the target do,
      even for a goal across the shoulder from the animated arm); or the first joint of a longer
      chain (e.g. a spine joint): CCD from there down to the effector, then
      an exact two-bone finish on the arm (see :func:`_reach_chain`).
    * ``keep_orientation``: the effector keeps its animated world orientation
      (else it rides rigidly on its parent).
    * ``tolerance``/``max_iterations``: for the CCD part of ``chain`` (a finite
      number ``>= 0`` and an int from 0 to ``MAX_ITERATIONS``; checked even
      without ``chain``).
    """
    check_skeleton(skeleton)
    _check_clip(clip)
    keep_orientation = check_flag(keep_orientation, "keep_orientation")
    # Checked whether or not a chain uses them: a bad value is a mistake either way.
    tolerance = positive_number(tolerance, "tolerance", allow_zero=True)
    if (isinstance(max_iterations, (bool, np.bool_)) or not isinstance(max_iterations, (int, np.integer))
            or not 0 <= max_iterations <= MAX_ITERATIONS):
        raise SolverInputError(f"max_iterations must be an int from 0 to {MAX_ITERATIONS}, got {max_iterations!r}")
    max_iterations = int(max_iterations)
    n = _require_frames(clip, "there is nothing to re-aim")
    t_all, r_out, scales = _clip_arrays(skeleton, clip)
    eff = resolve_joint(skeleton, effector)
    try:
        tgt = as_float_array(target, "target", (3,), batch=False)
    except ShapeError:
        tgt = np.full(3, np.nan)  # not three numbers: refused below, with what was given
    if not np.all(np.isfinite(tgt)):
        raise SolverInputError(f"target must be three finite numbers, got {target!r}")
    # (read once, at most three items: a generator is a sequence too, and has no len)
    pair = tuple(itertools.islice(frames, 3)) if is_sequence(frames) else ()
    if len(pair) != 2:
        raise SolverInputError(f"frames must be a pair (A, B) of frame numbers, got {frames!r}")
    a, b = (_frame_number(f, "frames") for f in pair)
    if not (0 <= a <= b < n):
        raise SolverInputError(f"frames {a}:{b} are outside the clip's 0:{n - 1} (A <= B, both inclusive)")
    t = frame_times(clip)
    fps = (n - 1) / (t[-1] - t[0]) if n >= 2 else float(clip.fps)
    n_blend = _frames(DEFAULT_REACH_BLEND_S, fps, "blend") if blend is None else _frame_number(blend, "blend")
    if not 0 <= n_blend <= MAX_DURATION_FRAMES:
        raise SolverInputError(f"blend must be 0 to {MAX_DURATION_FRAMES} frames, got {blend!r}")
    starts, ends = np.array([a], dtype=np.int64), np.array([b + 1], dtype=np.int64)
    w, owner = _ease(starts, ends, n, n_blend)
    solve_frames = np.flatnonzero(w > 0.0)

    sub = Pose(t_all[solve_frames], r_out[solve_frames], _rows(scales, solve_frames))
    fk = forward_kinematics(skeleton, sub)
    anim = fk.positions[:, eff]
    # Offsets are measured at A and B (frames a - solve_frames[0] and b - solve_frames[0] of the subset).
    goal = _offset_targets(anim, starts - solve_frames[0], ends - solve_frames[0], tgt[None], w[solve_frames],
                           owner[solve_frames])
    end_rot = fk.rotations[:, eff] if keep_orientation else None
    if chain is None:
        from ._two_bone import solve_two_bone

        elbow = int(skeleton.parents[eff])
        shoulder = int(skeleton.parents[elbow]) if elbow >= 0 else -1
        if elbow < 0 or shoulder < 0:
            raise SkeletonError(f"effector {skeleton.names[eff]!r} needs a parent and a grandparent for two-bone IK")
        # The arm is first turned about the shoulder by the carry (its animated shape and twist taken along), so
        # the two-bone step from there turns the upper arm only by the small change of the elbow's angle: the
        # minimal turn from the animated arm itself is ill defined for a goal across the shoulder from it.
        carry = _carry_turns(fk.positions, shoulder, eff, goal)
        up = int(skeleton.parents[shoulder])
        turned = rot.multiply(carry, fk.rotations[:, shoulder])
        r_sub = sub.rotations.copy()
        r_sub[:, shoulder] = turned if up < 0 else rot.multiply(rot.inverse(fk.rotations[:, up]), turned)
        sub = Pose(sub.translations, r_sub, sub.scales)
        s_pos = fk.positions[:, shoulder]
        pole = s_pos + rot.rotate(carry, fk.positions[:, elbow] - s_pos)
        res = solve_two_bone(skeleton, sub, (shoulder, elbow, eff), goal, pole, end_rotation=end_rot)
        changed = [shoulder, elbow, eff]
        solved = res.pose
    else:
        solved, changed = _reach_chain(skeleton, sub, resolve_joint(skeleton, chain), eff, goal, end_rot,
                                       tolerance, max_iterations)
    for j in changed:
        r_out[solve_frames, j] = solved.rotations[:, j]
    out = Clip(Pose(t_all, r_out, scales), clip.fps, None if clip.times is None else clip.times.copy())
    err = np.zeros(n)
    p_out = forward_kinematics(skeleton, Pose(t_all[solve_frames], r_out[solve_frames],
                                              _rows(scales, solve_frames))).positions[:, eff]
    err[solve_frames] = np.linalg.norm(p_out - goal, axis=-1)
    metrics: dict[str, Any] = {
        "frames": n,
        "effector": skeleton.names[eff],
        "range": [a, b],
        "blend": n_blend,
        "solved_frames": int(solve_frames.size),
        "max_error": float(err[a:b + 1].max()),
        # how far the effector moved from its animated place (FK of the result): the goal's distance only
        # when it is reached (an out-of-reach target reported 7.7 m where the wrist moved 0.87 m)
        "moved_max": float(np.linalg.norm(p_out - anim, axis=-1).max()) if solve_frames.size else 0.0,
    }
    # Compared over the solved frames and one frame either side (the steps into and out of them): a faster
    # frame elsewhere in the input would otherwise hide a pop made here.
    window = (int(solve_frames[0]) - 1, int(solve_frames[-1]) + 1) if solve_frames.size else (0, 0)
    metrics.update(_speed_metrics(skeleton, clip, out, changed, window))
    return ReachResult(clip=out, weights=w, error=err, metrics=metrics)


def _carry_turns(pos: FloatArray, shoulder: int, eff: int, goal: FloatArray) -> FloatArray:
    """World turns ``(F, 4)`` about the shoulder that carry each frame's animated arm onto its goal for :func:`reach`.

    Frame ``f``'s turn takes the animated shoulder-to-effector direction
    ``a_f = p_f - s_f`` to the shoulder-to-goal one ``g_f = goal_f - s_f``;
    the elbow carried by it is the reach's pole, and the arm's bend plane and
    twist turn with it.  The minimal turn from ``a_f`` to ``g_f`` alone is
    ill defined near 180 degrees (an arm hanging down reaching overhead): its
    axis, ``a_f x g_f``, swings round with the body's slightest motion, and
    the elbow with it.  So the turn is carried along the frames instead: each
    frame's is the previous one followed by the small minimal turn still
    needed, which changes as smoothly as the animation and the goal.  Carried
    forward from the first frame and backward from the last, the two differ
    only by a twist about ``a_f``; that twist is faded from the forward carry
    at the first frame to the backward one at the last, so the turn is close
    to the identity at both ends (where the goal is the animated effector) and
    a one-frame reach gets the minimal turn.
    """
    a = pos[:, eff] - pos[:, shoulder]
    g = goal - pos[:, shoulder]
    n = a.shape[0]

    def carried(order: range) -> FloatArray:
        out = np.empty((n, 4))
        c = rot.identity()
        for f in order:
            c = rot.multiply(rot.from_two_vectors(rot.rotate(c, a[f]), g[f]), c)
            out[f] = c
        return out

    fwd, bwd = carried(range(n)), carried(range(n - 1, -1, -1))
    length = np.linalg.norm(a, axis=-1, keepdims=True)
    axis = np.divide(a, length, out=np.zeros_like(a), where=length > 0.0)
    gap = rot.multiply(rot.inverse(bwd), fwd)  # a turn about a_f (both carries take a_f to g_f)
    twist = np.unwrap(2.0 * np.arctan2(np.sum(gap[:, :3] * axis, axis=-1), gap[:, 3]))
    twist -= 2.0 * np.pi * np.round(twist[0] / (2.0 * np.pi))  # the short way round (a quaternion's sign is free)
    fade = np.linspace(1.0, 0.0, n) if n > 1 else np.full(1, 0.5)
    safe = np.where(length > 0.0, axis, np.array([1.0, 0.0, 0.0]))
    return np.asarray(rot.multiply(bwd, rot.from_axis_angle(safe, fade * twist)), dtype=np.float64)


def _reach_chain(skeleton: Skeleton, pose: Pose, start: int, eff: int, goal: FloatArray, end_rot: FloatArray | None,
                 tolerance: float, max_iterations: int) -> tuple[Pose, list[int]]:
    """Spine-and-arm reach: CCD over ``start .. eff``, then an exact two-bone finish on the arm.

    CCD (:func:`kinema.solve_ccd`, steps capped at ``REACH_CHAIN_MAX_STEP``)
    lets the spine and shoulder lean toward the target; it settles to ~1e-5
    of the chain's size, so the arm (grandparent, parent, effector) is then
    solved analytically from where CCD left it, which lands the effector
    exactly whenever the arm can reach.  The two are a :class:`~kinema.Rig`:
    the two-bone step layers on the CCD step, with no pole, so it keeps the
    bend plane CCD left.
    """
    from ._ccd import CCD
    from ._two_bone import TwoBone
    from .rig import Rig, Step

    joints = skeleton.chain(start, eff)
    if len(joints) < 4:
        raise SolverInputError(
            f"--chain from {skeleton.names[start]!r} to {skeleton.names[eff]!r} has {len(joints)} joints; "
            "start it above the arm (e.g. at a spine joint), or leave it out for two-bone IK"
        )
    elbow, shoulder = int(joints[-2]), int(joints[-3])
    # The arm layers on the lean: no pole, so it keeps the bend plane the CCD step left.
    rig = Rig(skeleton, [
        Step("lean", CCD(skeleton, (start, eff), iterations=max_iterations, tolerance=tolerance,
                         max_step=REACH_CHAIN_MAX_STEP)),
        Step("arm", TwoBone(skeleton, (shoulder, elbow, eff)), layer=True,
             options={} if end_rot is None else {"end_rotation": end_rot}),
    ])
    res = rig.solve(pose, {"lean": goal, "arm": goal})
    arm = res.steps["arm"]
    changed = [int(j) for j in joints]
    if end_rot is None:  # CCD never turns the end: it rides on its parent either way
        changed.remove(eff)
    return arm.pose, changed
