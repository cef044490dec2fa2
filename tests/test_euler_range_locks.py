"""EulerRange boxes whose middle range ends at or near gimbal lock, for all 24 sequences.

Two defects this guards against:

* the middle range ends at a lock from the side ``qto_euler`` does not read (``[x, 0]`` or ``[-pi, y]`` for
  proper Euler sequences, ``[pi/2, y]`` or ``[x, -pi/2]`` for Tait-Bryan ones): at the lock only the principal
  triple's middle angle was measured, so a rotation whose twin triple is inside read as outside, the clamp
  landed outside and a second clamp turned it by up to 0.64 rad;
* a middle bound just short of the lock (1e-6, 1e-5 rad): the outer angles read back from a clamped rotation
  carry a rounding error of about ``eps / delta`` (``delta``: the middle angle's distance from the lock), so a
  rotation clamped exactly onto an outer bound read up to 7e-11 rad outside (above ``LIMIT_SLACK``) and moved
  again on a second clamp.

Properties, every one bit for bit where it says so: the clamp lands inside (``violation <= LIMIT_SLACK``), is
idempotent, leaves inside rotations (built from triples of the box) untouched, clamps ``q`` and ``-q`` to the
same rotation, and a batch gives what one rotation at a time gives.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinema import rotation as R
from kinema.limits import LIMIT_SLACK, EulerRange

SEQUENCES = list(R.EULER_SEQUENCES) + [s.lower() for s in R.EULER_SEQUENCES]

#: How far the middle bound sits from the lock (either way): on it, inside the 2e-7 lock band, across its edge
#: (as_euler snaps at 1e-7), and out where the outer angles are read with a rounding error of eps / offset.
BOUND_OFFSETS = [0.0, 1e-12, 1e-9, 1e-7, 1.5e-7, 2e-7, 2.5e-7, 1e-6, 1e-5, 1e-3]
#: How far an input's middle angle sits from the lock (either way).
INPUT_OFFSETS = [0.0, 1e-12, 1e-9, 5e-8, 1e-7, 1.5e-7, 2e-7, 2.5e-7, 1e-6, 1e-5]


def _is_proper(seq: str) -> bool:
    return seq[0].lower() == seq[2].lower()


def _locks(seq: str) -> list[float]:
    """The middle angles of gimbal lock, as range ends (pi and -pi are the same lock, from either side)."""
    return [0.0, math.pi, -math.pi] if _is_proper(seq) else [math.pi / 2, -math.pi / 2]


def _box(seq: str, lock: float, offset: float, side: int, width: float, outer: np.ndarray) -> EulerRange:
    """A box whose middle range ends at ``lock + offset`` (``side`` +1: the range lies above that end, -1: below).

    ``outer``: ``(center_a, half_a, center_c, half_c)``; ranges are clipped to [-pi, pi].
    """
    end = lock + offset
    lo, hi = (end, end + width) if side > 0 else (end - width, end)
    lo, hi = min(max(lo, -math.pi), math.pi), min(max(hi, -math.pi), math.pi)
    ca, ha, cc, hc = outer
    mins = (max(ca - ha, -math.pi), lo, max(cc - hc, -math.pi))
    maxs = (min(ca + ha, math.pi), hi, min(cc + hc, math.pi))
    return EulerRange(seq, mins, maxs)


def _inputs(seq: str, lim: EulerRange, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(outside_or_any (m, 4), inside (n, 4))``: rotations near every lock and random ones; rotations built
    from triples of the box, half of their angles exactly on a bound."""
    lo, hi = np.asarray(lim.mins), np.asarray(lim.maxs)
    near = rng.uniform(-math.pi, math.pi, (n, 3))
    locks = np.asarray(_locks(seq))
    sign = rng.choice([-1.0, 1.0], n)
    near[:, 1] = rng.choice(locks, n) + sign * rng.choice(INPUT_OFFSETS, n)
    near[:, 1] = np.clip(near[:, 1], -math.pi, math.pi)
    any_q = np.concatenate([R.from_euler(seq, near), R.normalize(rng.normal(size=(n, 4)))])
    box = rng.uniform(lo, hi, (n, 3))
    pick = rng.integers(0, 4, (n, 3))  # 0: lower bound, 1: upper bound, else uniform
    box = np.where(pick == 0, lo, np.where(pick == 1, hi, box))
    return any_q, R.from_euler(seq, box)


def assert_clamp_properties(lim: EulerRange, q: np.ndarray, inside: np.ndarray) -> None:
    c, hit = lim.clamp_hit(q)
    assert np.all(np.isfinite(c))
    v = lim.violation(c)
    assert v.max() <= LIMIT_SLACK, f"clamp lands outside by {v.max():.3g} rad"
    assert lim.contains(c, atol=LIMIT_SLACK).all()
    c2, hit2 = lim.clamp_hit(c)
    moved = R.angle_between(c2, c)
    assert not hit2.any() and np.array_equal(c2, c), f"a second clamp moves {hit2.sum()} rows, up to {moved.max():.3g}"
    # q and -q are one rotation: one clamped rotation, each with its input's sign (a clamp that turns by exactly
    # pi, dot(c, q) = 0, has no nearer sign: either is the same rotation), and one violation
    cn = lim.clamp(-q)
    tie = np.sum(c * q, axis=-1) == 0.0
    assert np.all(np.all(cn == -c, axis=-1) | (tie & np.all(cn == c, axis=-1)))
    np.testing.assert_array_equal(lim.violation(-q), lim.violation(q))
    # a batch is the rows one at a time
    for r in range(0, len(q), max(1, len(q) // 16)):
        np.testing.assert_array_equal(lim.clamp(q[r]), c[r])
    # rotations built from triples of the box are inside: untouched
    ci, hit_i = lim.clamp_hit(inside)
    vi = lim.violation(inside)
    assert vi.max() <= LIMIT_SLACK, f"a rotation of the box reads {vi.max():.3g} rad outside"
    assert not hit_i.any() and np.array_equal(ci, inside)


# ------------------------------------------------------------------------------------------------ the reports
def test_proper_euler_range_ending_at_lock_from_below() -> None:
    """The reported case: ZXZ middle range [-0.5, 0], input middle angle 1e-7 off the lock; its twin (middle
    -1e-7) is in the range.  The clamp landed 1e-7 outside and a second clamp turned it 0.64 rad."""
    lim = EulerRange("ZXZ", (-1.0, -0.5, -1.0), (1.0, 0.0, 1.0))
    q = R.from_euler("ZXZ", [2.5, 1e-7, 1.0])
    c = lim.clamp(q)
    assert lim.violation(c) <= LIMIT_SLACK and lim.contains(c)
    assert np.array_equal(lim.clamp(c), c)
    # At the lock only a + c = 3.5 counts; the box allows a + c in [-2, 2]: the smallest turn is 2pi - 3.5 - 2
    # (3.5 wraps to -2.78, 0.78 below -2), a turn about the first axis by exactly the violation.
    assert lim.violation(q) == pytest.approx(2 * math.pi - 5.5, abs=1e-12)
    assert R.angle_between(c, q) == pytest.approx(2 * math.pi - 5.5, abs=1e-9)


def test_rotation_whose_twin_is_inside_at_lock_is_inside() -> None:
    """(0.3, -1e-7, 0.2) ZXZ is a triple of the box; as_euler reads it as (pi + 0.5, 1e-7, 0) (middle in [0, pi]):
    it was measured 1e-7 outside and clamped."""
    lim = EulerRange("ZXZ", (-1.0, -0.5, -1.0), (1.0, 0.0, 1.0))
    q = R.from_euler("ZXZ", [0.3, -1e-7, 0.2])
    assert lim.violation(q) == 0.0
    c, hit = lim.clamp_hit(q)
    assert not hit and np.array_equal(c, q)


def test_tait_bryan_bound_just_short_of_lock() -> None:
    """The reported case: middle bound 1e-6 below +pi/2; clamped rotations read up to 6.65e-11 outside and 634
    of 3000 moved again on a second clamp."""
    for seq in ("XYZ", "xyz", "ZYX"):
        for gap in (1e-6, 1e-5):
            lim = EulerRange(seq, (-0.2, 1.2, -0.1), (0.2, np.pi / 2 - gap, 0.4))
            q = np.random.default_rng(12).normal(size=(3000, 4))
            c = lim.clamp(q)
            assert lim.violation(c).max() <= LIMIT_SLACK
            assert np.array_equal(lim.clamp(c), c)


# ------------------------------------------------------------------------------------------ every sequence
@pytest.mark.parametrize("seq", SEQUENCES)
def test_every_lock_from_either_side(seq: str) -> None:
    """A deterministic sweep: every lock of the sequence, the range ending there from either side, the bound on
    the lock and near it, inputs near every lock, random ones and ones of the box."""
    rng = np.random.default_rng(sum(map(ord, seq)))
    for lock in _locks(seq):
        for side in (-1, 1):
            for offset in (0.0, 1e-7, -1e-7, 1e-6 * side, -1e-5 * side):
                outer = np.array([rng.uniform(-2, 2), rng.uniform(0.1, 1.5), rng.uniform(-2, 2), rng.uniform(0.1, 1.5)])
                lim = _box(seq, lock, offset, side, rng.uniform(0.2, 1.5), outer)
                q, inside = _inputs(seq, lim, rng, 120)
                assert_clamp_properties(lim, q, inside)


@given(seq=st.sampled_from(SEQUENCES), lock_pick=st.integers(0, 2), side=st.sampled_from([-1, 1]),
       offset=st.sampled_from(BOUND_OFFSETS), offset_sign=st.sampled_from([-1.0, 1.0]),
       width=st.sampled_from([0.0, 1e-6, 0.05, 0.5, 1.5, 3.0]),
       half_a=st.sampled_from([0.0, 1e-6, 0.1, 0.7, 1.5, math.pi]),
       half_c=st.sampled_from([0.0, 1e-6, 0.1, 0.7, 1.5, math.pi]),
       centers=st.tuples(st.floats(-math.pi, math.pi), st.floats(-math.pi, math.pi)),
       seed=st.integers(0, 2**32 - 1))
def test_clamp_properties_near_locks(seq: str, lock_pick: int, side: int, offset: float, offset_sign: float,
                                     width: float, half_a: float, half_c: float, centers: tuple[float, float],
                                     seed: int) -> None:
    """Any sequence, a middle range ending at or near a lock from either side, outer ranges of any width (zero
    included), inputs near the locks, random ones and ones of the box: inside after the clamp, idempotent, inside
    ones untouched, q and -q the same, a batch the same as one at a time; all bit for bit."""
    locks = _locks(seq)
    lock = locks[lock_pick % len(locks)]
    lim = _box(seq, lock, offset_sign * offset, side, width, np.array([centers[0], half_a, centers[1], half_c]))
    q, inside = _inputs(seq, lim, np.random.default_rng(seed), 60)
    assert_clamp_properties(lim, q, inside)


@pytest.mark.parametrize("seq", SEQUENCES)
def test_at_lock_the_clamp_turns_by_the_violation(seq: str) -> None:
    """Inputs exactly at the lock (snapped by as_euler), the middle range ending there from either side: the
    clamp is the smallest turn, about the first axis, by exactly the violation."""
    rng = np.random.default_rng(3)
    for lock in _locks(seq):
        for side in (-1, 1):
            lo, hi = (lock - 0.8, lock) if side < 0 else (lock, lock + 0.8)
            lo, hi = max(lo, -math.pi), min(hi, math.pi)
            if lo == hi:
                continue
            lim = EulerRange(seq, (-0.6, lo, -0.4), (0.7, hi, 0.5))
            a = rng.uniform(-math.pi, math.pi, (400, 3))
            a[:, 1] = lock
            q = R.from_euler(seq, a)
            c, hit = lim.clamp_hit(q)
            assert hit.sum() > 100
            assert lim.violation(c).max() <= LIMIT_SLACK
            np.testing.assert_allclose(R.angle_between(c[hit], q[hit]), lim.violation(q[hit]), rtol=0, atol=1e-9)


def test_lock_direction_of_every_sequence() -> None:
    """The kernel's ``sigma`` (by formula): ``(a + t, lock, c + sigma t)`` is one rotation for every ``t``."""
    import numba

    from kinema._kernels.limits import _euler_near_lock
    from kinema.rotation import _parse_seq

    @numba.njit
    def near_lock(i: int, j: int, k: int, ext: bool, b: float) -> tuple[float, float]:
        return _euler_near_lock(i, j, k, ext, b)  # type: ignore[no-any-return]

    rng = np.random.default_rng(5)
    for seq in SEQUENCES:
        i, j, k, ext = _parse_seq(seq)
        for lock in _locks(seq):
            delta, sigma = near_lock(i, j, k, ext, lock)
            assert delta == 0.0 and sigma in (-1.0, 1.0)
            a = rng.uniform(-math.pi, math.pi, (50, 3))
            a[:, 1] = lock
            t = rng.uniform(-3, 3, 50)
            slid = a + np.stack([t, 0 * t, sigma * t], -1)
            assert R.angle_between(R.from_euler(seq, a), R.from_euler(seq, slid)).max() < 1e-12


@pytest.mark.parametrize("seq", SEQUENCES)
def test_at_lock_with_the_middle_angle_outside_the_clamp_is_nearest(seq: str) -> None:
    """Inputs exactly at the lock, a middle range 0.3 rad away from it: the clamp is at least as near the input as
    any of 20000 rotations of the box on the near middle bound (where the nearest one lies).  The middle angle is
    clamped and the outer angles' sum or difference clamped and split; the per-axis clamp used before took the
    split as_euler reported (the third angle zero) and turned up to 1.3 rad farther."""
    rng = np.random.default_rng(11)
    mins_ac, maxs_ac = np.array([-0.6, -0.4]), np.array([0.7, 0.5])
    for lock in _locks(seq):
        step = 0.3 if lock <= 0 else -0.3  # into [-pi, pi]
        near_bound, far_bound = lock + step, lock + 2.5 * step
        lo, hi = min(near_bound, far_bound), max(near_bound, far_bound)
        lim = EulerRange(seq, (mins_ac[0], lo, mins_ac[1]), (maxs_ac[0], hi, maxs_ac[1]))
        a = rng.uniform(-math.pi, math.pi, (40, 3))
        a[:, 1] = lock
        q = R.from_euler(seq, a)
        c = lim.clamp(q)
        assert lim.violation(c).max() <= LIMIT_SLACK
        box = rng.uniform(-1.0, 1.0, (20000, 3))
        box[:, 0] = rng.uniform(mins_ac[0], maxs_ac[0], 20000)
        box[:, 2] = rng.uniform(mins_ac[1], maxs_ac[1], 20000)
        box[:, 1] = near_bound
        s = R.from_euler(seq, box)
        brute = 2.0 * np.arccos(np.minimum(np.abs(q @ s.T), 1.0)).min(axis=1)
        assert np.all(R.angle_between(c, q) <= brute + 1e-9)
