"""Foot-contact kernels for :mod:`kinema.mocap`: hysteresis, stance merging, run clean-up, ease weights.

These are short sequential loops over frames (each frame's state depends on
the previous one), so they are kernels rather than NumPy expressions.  With
``NUMBA_DISABLE_JIT=1`` the same functions run as plain Python.

Layouts: per-foot signals are ``(F, K)`` (frames, feet); contact runs are
half-open frame ranges ``[start, end)``.
"""

from __future__ import annotations

import numpy as np

from ._jit import njit

#: A stance joined across gaps (:func:`clean_runs`, :func:`merge_still_gaps`) ends where the foot comes down
#: more than this many ``step`` lengths from where the stance began: each gap alone may be a shuffle within
#: ``step``, but a lock held across many of them would hold the foot where it stood long before (a capture
#: repeated end to end, its planted foot moved 3.7 cm at each seam, was one contact over 1.9 m of travel, and
#: the foot lock missed its target by 42 cm).
STANCE_DRIFT_STEPS = 2.0


@njit(helper=True)
def _joins(ground_xy, k, before, after, anchor, step):  # type: ignore[no-untyped-def]
    """Whether a gap of foot ``k`` between frames ``before`` (the last in contact) and ``after`` (the first in
    contact again) joins its two contacts into one stance: the foot comes down within ``step`` of where it
    left and within ``STANCE_DRIFT_STEPS * step`` of where the stance began (frame ``anchor``), horizontally."""
    dx = ground_xy[after, k, 0] - ground_xy[before, k, 0]
    dy = ground_xy[after, k, 1] - ground_xy[before, k, 1]
    ax = ground_xy[after, k, 0] - ground_xy[anchor, k, 0]
    ay = ground_xy[after, k, 1] - ground_xy[anchor, k, 1]
    drift = STANCE_DRIFT_STEPS * step
    return dx * dx + dy * dy <= step * step and ax * ax + ay * ay <= drift * drift


@njit(helper=True)
def smoothstep(x):  # type: ignore[no-untyped-def]
    """``3x^2 - 2x^3`` for ``x`` in [0, 1]: the C1 ease of every contact ramp and cross-fade."""
    return x * x * (3.0 - 2.0 * x)


@njit(helper=True)
def _next_state(on, h, v, h_on, h_off, v_on, v_off):  # type: ignore[no-untyped-def]
    """One step of the two-threshold state machine: enter within both ``on``, leave above either ``off``."""
    if on:
        return not (h > h_off or v > v_off)
    return h <= h_on and v <= v_on


@njit
def hysteresis(height, speed, h_on, h_off, v_on, v_off, out):  # type: ignore[no-untyped-def]
    """Contact state per frame and foot with two thresholds per signal, in both directions of time.

    ``height, speed (F, K)``; ``h_on, h_off, v_on, v_off (K,)`` with
    ``h_on <= h_off`` and ``v_on <= v_off``; ``out (F, K)`` bool.

    A *core* frame has ``height <= h_on`` and ``speed <= v_on``; a contact is
    a run of frames with ``height <= h_off`` and ``speed <= v_off`` that holds
    at least one core frame.  So a signal hovering around one threshold does
    not make the contact flicker, and the hysteresis works both ways: a
    contact starts when the foot comes within the leave thresholds on its way
    down (at heel strike), not only once it is slow enough to enter, just as
    it ends when it leaves them.  (A forward-only pass would start every
    contact late, leaving the foot's last slow frames before it settles to
    slide.)  Computed as a forward pass or'ed with a backward pass.
    """
    n_frames, n_feet = height.shape
    for k in range(n_feet):
        on = False
        for f in range(n_frames):
            on = _next_state(on, height[f, k], speed[f, k], h_on[k], h_off[k], v_on[k], v_off[k])
            out[f, k] = on
        on = False
        for f in range(n_frames - 1, -1, -1):
            on = _next_state(on, height[f, k], speed[f, k], h_on[k], h_off[k], v_on[k], v_off[k])
            out[f, k] = out[f, k] or on


@njit
def still_runs(height, speed, h_off, v_on, min_frames, mask):  # type: ignore[no-untyped-def]
    """In place on ``mask (F, K)`` bool: add every run of at least ``min_frames`` frames where a foot is still.

    ``height, speed (F, K)``; ``h_off, v_on (K,)`` the leave height and the
    enter speed.  A still frame has ``height <= h_off`` and ``speed <= v_on``:
    a foot resting this long on its toes or its heel (above the enter height,
    which the flat foot meets) is planted too, though no frame of the run
    enters a contact by height.
    """
    n_frames, n_feet = mask.shape
    for k in range(n_feet):
        start = -1
        for f in range(n_frames + 1):
            still = f < n_frames and height[f, k] <= h_off[k] and speed[f, k] <= v_on[k]
            if still and start < 0:
                start = f
            elif not still and start >= 0:
                if f - start >= min_frames:
                    for g in range(start, f):
                        mask[g, k] = True
                start = -1


@njit
def merge_still_gaps(mask, height, h_off, ground_xy, step, max_gap):  # type: ignore[no-untyped-def]
    """In place on ``mask (F, K)`` bool: join two contacts of a foot when the foot did not step between them.

    ``height (F, K)`` above the ground, ``h_off (K,)`` the leave height,
    ``ground_xy (F, K, 2)`` the foot's horizontal position, ``step (K,)`` the
    shortest step (same units), ``max_gap`` frames.  A gap of at most
    ``max_gap`` frames between two contacts is filled when the foot stayed
    at or below ``h_off`` all through it (the contact was broken by speed
    alone: mocap noise, a heel roll) and came down within ``step`` of where
    it left (horizontal distance from the first contact's last frame to the
    second's first) and within ``STANCE_DRIFT_STEPS * step`` of where the
    stance began (:func:`_joins`): one stance, not two.  Contacts split this way would
    each get their own lock, and the foot would shift between the locks.
    """
    n_frames, n_feet = mask.shape
    for k in range(n_feet):
        last_end = -1
        anchor = 0  # first frame of the stance the current contact belongs to
        f = 0
        while f < n_frames:
            if not mask[f, k]:
                f += 1
                continue
            joined = False
            if last_end >= 0 and f - last_end <= max_gap:
                low = True
                for g in range(last_end, f):
                    if height[g, k] > h_off[k]:
                        low = False
                        break
                if low and _joins(ground_xy, k, last_end - 1, f, anchor, step[k]):
                    joined = True
                    for g in range(last_end, f):
                        mask[g, k] = True
            if not joined:
                anchor = f
            while f < n_frames and mask[f, k]:
                f += 1
            last_end = f


@njit
def clean_runs(mask, max_gap, min_len, ground_xy, step):  # type: ignore[no-untyped-def]
    """In place on ``mask (F, K)`` bool: fill short gaps, then drop short contacts.

    A gap of at most ``max_gap`` frames *between* two contacts of one foot is
    filled (a one-frame dropout inside a stance is noise, not a step) when the
    foot came back within ``step (K,)`` of where it left (horizontal distance,
    ``ground_xy (F, K, 2)``, from the first contact's last frame to the second's
    first) and within ``STANCE_DRIFT_STEPS * step`` of where the stance began
    (:func:`_joins`): a foot that travelled farther in the gap stepped (a pivot on the
    toe moves the ankle 14 cm in three frames), and one lock across both
    contacts would hold it off the animation.  Gaps at the clip's ends are left
    alone.  Then every contact shorter than ``min_len`` frames is removed (a
    brief touch is not a plant).
    """
    n_frames, n_feet = mask.shape
    for k in range(n_feet):
        last_end = -1  # end (exclusive) of the previous contact, -1 before the first one
        anchor = 0  # first frame of the stance the current contact belongs to
        f = 0
        while f < n_frames:
            if mask[f, k]:
                if last_end >= 0 and f - last_end <= max_gap and _joins(ground_xy, k, last_end - 1, f, anchor,
                                                                         step[k]):
                    for g in range(last_end, f):
                        mask[g, k] = True
                else:
                    anchor = f
                while f < n_frames and mask[f, k]:
                    f += 1
                last_end = f
            else:
                f += 1
        f = 0
        while f < n_frames:
            if mask[f, k]:
                s = f
                while f < n_frames and mask[f, k]:
                    f += 1
                if f - s < min_len:
                    for g in range(s, f):
                        mask[g, k] = False
            else:
                f += 1


@njit
def ease_weights(starts, ends, n_frames, ease, weight, owner):  # type: ignore[no-untyped-def]
    """IK weight per frame for one foot's contacts ``[starts[c], ends[c])``.

    ``weight (F,)``: 1 inside a contact; on each side a ramp of up to ``ease``
    frames rising (falling) with the smoothstep ``3x^2 - 2x^3`` of
    ``x = 1 - i / (n + 1)`` at ``i`` frames from the contact (``n`` the ramp
    length), so the weight is C1 in time and strictly inside (0, 1) on the
    ramp; 0 elsewhere.  ``owner (F,)`` is the contact each weighted frame
    belongs to, -1 where the weight is 0.

    Ramps of neighbouring contacts share the gap between them: each side takes
    at most half of it, so ramps never overlap and every frame has one owner.
    """
    n_runs = starts.shape[0]
    lengths = np.full(n_runs, ease, dtype=np.int64)
    ease_weights_per_run(starts, ends, n_frames, lengths, lengths, weight, owner)


@njit
def ease_weights_per_run(starts, ends, n_frames, before, after, weight, owner):  # type: ignore[no-untyped-def]
    """:func:`ease_weights` with a ramp length of its own on each side of each contact.

    ``before (C,)``/``after (C,)``: the ramp lengths (frames) wanted before
    and after contact ``c``; each still takes at most half of the gap to its
    neighbour.
    """
    for f in range(n_frames):
        weight[f] = 0.0
        owner[f] = -1
    n_runs = starts.shape[0]
    for c in range(n_runs):
        s = starts[c]
        e = ends[c]
        for f in range(s, e):
            weight[f] = 1.0
            owner[f] = c
        left = before[c]
        if c > 0:
            left = min(left, (s - ends[c - 1]) // 2)
        for i in range(1, left + 1):
            f = s - i
            if f < 0:
                break
            weight[f] = smoothstep(1.0 - i / (left + 1.0))
            owner[f] = c
        right = after[c]
        if c + 1 < n_runs:
            right = min(right, (starts[c + 1] - e) // 2)
        for i in range(1, right + 1):
            f = e - 1 + i
            if f >= n_frames:
                break
            weight[f] = smoothstep(1.0 - i / (right + 1.0))
            owner[f] = c


@njit
def crossfade_short_gaps(tgt, anim, starts, ends, lock, before, after):  # type: ignore[no-untyped-def]
    """In place on ``tgt (F, 3)``: across each gap shorter than its two ramps, fade one lock's offset into the next.

    ``anim (F, 3)`` the animated foot, ``starts, ends (C,)`` the contacts,
    ``lock (C, 3)`` their locks, ``before, after (C,)`` the ramp lengths
    (frames).  Over a gap ``[e, s)`` between contacts ``c`` and ``c + 1`` with
    ``s - e < after[c] + before[c + 1]`` the target is
    ``anim + (1 - x) off_a + x off_b`` with ``off_a = lock[c] - anim[e - 1]``,
    ``off_b = lock[c + 1] - anim[s]`` and ``x`` the smoothstep of
    ``i / (gap + 1)`` at the gap's ``i``-th frame.
    Why, in :func:`kinema.mocap._crossfade_short_gaps`.
    """
    for c in range(starts.shape[0] - 1):
        e = ends[c]
        s = starts[c + 1]
        gap = s - e
        if gap <= 0 or gap >= after[c] + before[c + 1]:
            continue  # touching contacts, or a gap wide enough for both ramps: nothing to cross-fade
        for i in range(1, gap + 1):
            x = smoothstep(i / (gap + 1.0))
            f = e - 1 + i
            for a in range(3):
                off_a = lock[c, a] - anim[e - 1, a]
                off_b = lock[c + 1, a] - anim[s, a]
                tgt[f, a] = anim[f, a] + (1.0 - x) * off_a + x * off_b


@njit
def lengthen_fast_ramps(ratio, limit, owner, straight, starts, ends, first, last, edge, max_ramp,
                        before, after, eased_before, eased_after):  # type: ignore[no-untyped-def]
    """One foot's step of :func:`kinema.mocap._lengthen_fast_ramps`; True if anything changed.

    ``ratio (F-1,)``: the fastest leg joint's angular speed between frames
    ``f`` and ``f + 1`` over its cap; frames with ``ratio > limit`` are acted
    on, in order.  ``owner (F,)`` the contact each weighted frame belongs to
    (-1: none), ``straight (F,)`` bool, ``first, last (C,)`` the detected
    contacts, ``edge`` and ``max_ramp`` frames.  Updated in place:
    ``starts, ends (C,)`` (the held runs), ``before, after (C,)`` (ramp
    lengths, frames) and ``eased_before, eased_after (C,)`` bool.
    """
    changed = False
    for f in range(ratio.shape[0]):
        r = ratio[f]
        if not r > limit:
            continue
        c = owner[f + 1]
        if c >= 0 and starts[c] <= f and f + 1 < ends[c]:  # both frames inside contact c
            if not straight[f] and not straight[f + 1]:
                continue  # a bent leg: no snap straight to let go of
            if last[c] - (f + 1) <= edge:
                ends[c] = f + 1
                changed = True
            elif f + 1 - first[c] <= edge:
                starts[c] = f + 1
                changed = True
            continue
        for fr in range(f, f + 2):
            c = owner[fr]
            if c < 0 or (starts[c] <= fr and fr < ends[c]):
                continue  # untouched or held: not a ramp
            is_before = fr < starts[c]
            if is_before and eased_before[c]:
                eased_before[c] = False
                changed = True
                continue
            if not is_before and eased_after[c]:
                eased_after[c] = False
                changed = True
                continue
            side = before[c] if is_before else after[c]
            want = min(max_ramp, max(side + 1, int(np.ceil(side * r))))
            if want > side:
                if is_before:
                    before[c] = want
                else:
                    after[c] = want
                changed = True
    return changed
