"""Joint limits: every clamp lands inside, inside rotations are untouched, no NaN, no flips at +-180."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kinema
from kinema import rotation as R
from kinema.limits import EulerRange, Hinge, SwingTwist, pack_limits

TOL = 1e-9


def _random_quats(rng: np.random.Generator, n: int) -> np.ndarray:
    return R.normalize(rng.normal(size=(n, 4)))


def _twist_angle(tw: np.ndarray, axis: np.ndarray) -> np.ndarray:
    s = tw[..., :3] @ axis
    w = tw[..., 3]
    sign = np.where(w < 0, -1.0, 1.0)
    return 2.0 * np.arctan2(s * sign, w * sign)


def _swing_angle(sw: np.ndarray) -> np.ndarray:
    return 2.0 * np.arctan2(np.linalg.norm(sw[..., :3], axis=-1), np.abs(sw[..., 3]))


def test_constants_mirror_kernels() -> None:
    from kinema import limits as L
    from kinema._kernels import limits as kl

    for name in ("LIMIT_NONE", "LIMIT_HINGE", "LIMIT_SWING_TWIST", "LIMIT_EULER", "LIMIT_PARAMS", "LIMIT_SLACK"):
        assert getattr(L, name) == getattr(kl, name), name
    assert (Hinge.kind, SwingTwist.kind, EulerRange.kind) == (kl.LIMIT_HINGE, kl.LIMIT_SWING_TWIST, kl.LIMIT_EULER)


# ----------------------------------------------------------------------------- hinge
def test_hinge_clamp_removes_off_axis_and_clamps_angle(rng: np.random.Generator) -> None:
    axis = np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
    lim = Hinge(axis, -0.4, 1.1)
    q = _random_quats(rng, 2000)
    c, hit = lim.clamp_hit(q)
    assert np.all(np.isfinite(c))
    sw, tw = R.swing_twist(c, axis)
    assert np.max(_swing_angle(sw)) <= TOL
    ang = _twist_angle(tw, axis)
    assert np.all(ang >= -0.4 - TOL) and np.all(ang <= 1.1 + TOL)
    assert np.all(hit)  # random rotations all have an off-axis part
    assert np.all(lim.violation(c) <= TOL)
    assert np.all(lim.violation(q) > 0.0)


def test_hinge_inside_is_untouched_bit_for_bit(rng: np.random.Generator) -> None:
    axis = np.array([0.0, 0.0, 1.0])
    lim = Hinge(axis, -1.0, 2.0)
    angles = rng.uniform(-1.0, 2.0, 500)
    q = R.from_axis_angle(axis, angles)
    c, hit = lim.clamp_hit(q)
    assert not np.any(hit)
    assert np.array_equal(c, q)


def test_hinge_clamps_the_short_way_round() -> None:
    # Range [-170, 170] degrees: 178 degrees is 8 from +170 and 12 from -170 -> +170.
    lim = Hinge((0, 1, 0), -170, 170, degrees=True)
    c = lim.clamp(R.from_axis_angle([0, 1, 0], math.radians(178)))
    assert R.equal(c, R.from_axis_angle([0, 1, 0], math.radians(170)))
    c = lim.clamp(R.from_axis_angle([0, 1, 0], math.radians(-175)))
    assert R.equal(c, R.from_axis_angle([0, 1, 0], math.radians(-170)))


def test_hinge_degenerate_half_turn_off_axis_is_finite() -> None:
    # A 180-degree swing perpendicular to the hinge axis has no twist: it goes to the identity
    # when 0 is in range, or to the nearer bound otherwise.
    q = R.from_axis_angle([1, 0, 0], math.pi)
    c = Hinge((0, 0, 1), -0.5, 0.5).clamp(q)
    assert R.equal(c, [0, 0, 0, 1])
    c = Hinge((0, 0, 1), 0.2, 0.5).clamp(q)
    assert R.equal(c, R.from_axis_angle([0, 0, 1], 0.2))


# ------------------------------------------------------------------------ swing twist
def test_cone_swing_and_twist_hold(rng: np.random.Generator) -> None:
    axis = np.array([0.0, 1.0, 0.0])
    lim = SwingTwist(axis, 0.6, -0.3, 0.5)
    q = _random_quats(rng, 2000)
    c, hit = lim.clamp_hit(q)
    assert np.all(np.isfinite(c))
    sw, tw = R.swing_twist(c, axis)
    assert np.max(_swing_angle(sw)) <= 0.6 + TOL
    ang = _twist_angle(tw, axis)
    assert np.all(ang >= -0.3 - TOL) and np.all(ang <= 0.5 + TOL)
    # A swing that was outside keeps its direction (radial clamp).
    sw0, _ = R.swing_twist(q, axis)
    out = _swing_angle(sw0) > 0.6 + 1e-6
    d0 = sw0[out, :3] / np.linalg.norm(sw0[out, :3], axis=-1, keepdims=True) * np.sign(sw0[out, 3:4])
    d1 = sw[out, :3] / np.linalg.norm(sw[out, :3], axis=-1, keepdims=True) * np.sign(sw[out, 3:4])
    assert np.max(np.abs(d0 - d1)) < 1e-9


def test_elliptical_cone(rng: np.random.Generator) -> None:
    axis = np.array([0.0, 0.0, 1.0])
    ref = np.array([1.0, 0.0, 0.0])
    lim = SwingTwist(axis, (0.3, 1.0), reference=ref)
    q = _random_quats(rng, 2000)
    c = lim.clamp(q)
    sw, _ = R.swing_twist(c, axis)
    rv = R.as_rotvec(sw)
    e2 = np.cross(axis, ref)
    ell = (rv @ ref / 0.3) ** 2 + (rv @ e2 / 1.0) ** 2
    assert np.max(ell) <= 1.0 + 1e-8
    # Pure swings about each semi-axis are bounded by their own angle.
    assert R.equal(lim.clamp(R.from_axis_angle(ref, 0.8)), R.from_axis_angle(ref, 0.3))
    assert R.equal(lim.clamp(R.from_axis_angle(e2, 0.8)), R.from_axis_angle(e2, 0.8))
    assert R.equal(lim.clamp(R.from_axis_angle(e2, 1.4)), R.from_axis_angle(e2, 1.0))


def test_zero_cone_is_finite() -> None:
    lim = SwingTwist((0, 1, 0), (0.0, 0.0))
    c = lim.clamp(R.from_axis_angle([1, 0, 0], 1.0))
    assert np.all(np.isfinite(c)) and R.equal(c, [0, 0, 0, 1])


# ------------------------------------------------------------------------------ euler
def _in_box(a: np.ndarray, mins: tuple[float, ...], maxs: tuple[float, ...]) -> np.ndarray:
    lo = np.array(mins)
    hi = np.array(maxs)
    mid = 0.5 * (lo + hi)
    w = mid + (a - mid + math.pi) % (2 * math.pi) - math.pi
    return np.all((w >= lo - TOL) & (w <= hi + TOL), axis=-1)


def test_euler_range_holds(rng: np.random.Generator) -> None:
    for order in ("XYZ", "ZXY", "xyz", "ZXZ"):
        mins = (-1.0, 0.2, -2.0)
        maxs = (1.0, 1.2, 2.0)
        lim = EulerRange(order, mins, maxs)
        q = _random_quats(rng, 1000)
        c, hit = lim.clamp_hit(q)
        assert np.all(np.isfinite(c))
        assert np.all(lim.violation(c) <= TOL)
        # Independently: the principal Euler triple of the output, or its twin, lies in the box
        # (angles compared modulo 2 pi nearest the middle of each range).
        e = R.as_euler(c, order)
        twin = e + np.array([math.pi, 0.0, math.pi])
        twin[:, 1] = (-e[:, 1]) if order[0].upper() == order[2].upper() else (math.pi - e[:, 1])
        assert np.all(_in_box(e, mins, maxs) | _in_box(twin, mins, maxs))
        assert np.any(hit)
        c2, hit2 = lim.clamp_hit(c)
        assert not np.any(hit2) and np.array_equal(c2, c)


def test_euler_no_flip_across_180() -> None:
    # X range [150, 180] degrees; sweep the X angle from 140 to 220 (= -140).  A naive clamp
    # of the wrapped angle jumps from 180 to 150 once the angle passes 180 and reads as -179.
    lim = EulerRange("XYZ", (150, -10, -10), (180, 10, 10), degrees=True)
    thetas = np.radians(np.linspace(140, 220, 801))
    q = R.from_euler("XYZ", np.stack([thetas, np.zeros_like(thetas), np.zeros_like(thetas)], -1))
    c = lim.clamp(q)
    x = np.degrees(R.as_euler(c, "XYZ")[:, 0]) % 360.0
    expected = np.clip(np.degrees(thetas), 150, 180)
    assert np.max(np.abs(x - expected)) < 1e-7
    step = np.degrees(R.angle_between(c[1:], c[:-1]))
    assert np.max(step) <= 0.1 + 1e-9  # continuous: never more than one input step apart


def test_euler_twin_triple_counts_as_inside() -> None:
    # (180, 10, 180) degrees XYZ is the same rotation as (0, 170, 0): inside a box around the latter.
    q = R.from_euler("XYZ", [180, 10, 180], degrees=True)
    lim = EulerRange("XYZ", (-5, 160, -5), (5, 175, 5), degrees=True)
    c, hit = lim.clamp_hit(q)
    assert not hit and np.array_equal(c, q)


# --------------------------------------------------------------------------- shared
@pytest.mark.parametrize(
    "lim",
    [
        Hinge((0, 0, 1), -0.5, 0.7),
        SwingTwist((0, 1, 0), (0.4, 0.8), -0.2, 0.3),
        EulerRange("YXZ", (-0.5, -0.3, -1.0), (0.5, 0.6, 1.0)),
    ],
)
def test_rest_relative_frame_and_sign(lim: kinema.limits.Limit, rng: np.random.Generator) -> None:
    rest = _random_quats(rng, 300)
    q_rel = _random_quats(rng, 300)
    q_local = R.multiply(rest, q_rel)
    a = lim.clamp(q_local, rest)
    b = R.multiply(rest, lim.clamp(q_rel))
    assert np.all(R.equal(a, b, atol=1e-9))
    # q and -q: the same rotation in, the same rotation out, hemisphere kept.
    n = lim.clamp(-q_local, rest)
    assert np.all(R.equal(n, a, atol=1e-9))
    assert np.all(np.sum(n * -q_local, axis=-1) >= 0.0)
    # rest pose is inside (0 in every range) and untouched.
    c, hit = lim.clamp_hit(rest, rest)
    assert not np.any(hit) and np.array_equal(c, rest)


@given(q=st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(lambda v: sum(x * x for x in v) > 1e-6),
       lo=st.floats(-3.1, 3.1), width=st.floats(0.0, 3.0), swing=st.floats(0.0, 3.1))
def test_random_limits_never_nan_and_hold(q: list[float], lo: float, width: float, swing: float) -> None:
    hi = min(lo + width, math.pi)
    qa = np.asarray(q)
    for lim in (Hinge((0.3, -0.2, 0.9), lo, hi), SwingTwist((1, 0, 0), swing, lo, hi),
                SwingTwist((0, 1, 1), (swing, swing / 2), lo, hi), EulerRange("XYZ", (lo, -0.3, lo), (hi, 0.3, hi))):
        c = lim.clamp(qa)
        assert np.all(np.isfinite(c))
        assert lim.violation(c) <= TOL


def test_invalid_limits_name_the_problem() -> None:
    with pytest.raises(kinema.SolverInputError, match="zero vector"):
        Hinge((0, 0, 0), 0, 1)
    with pytest.raises(kinema.SolverInputError, match="greater than"):
        Hinge((1, 0, 0), 1.0, 0.5)
    with pytest.raises(kinema.SolverInputError, match="outside"):
        SwingTwist((1, 0, 0), 4.0)
    with pytest.raises(kinema.SolverInputError, match="order"):
        EulerRange("XYQ", (0, 0, 0), (1, 1, 1))
    with pytest.raises(kinema.SolverInputError, match="parallel"):
        SwingTwist((1, 0, 0), (0.1, 0.2), reference=(2, 0, 0))
    with pytest.raises(kinema.SolverInputError, match="finite"):
        Hinge((1, 0, 0), float("nan"), 1)


def test_pack_limits() -> None:
    sk = kinema.Skeleton(["a", "b", "c", "d"], [-1, 0, 1, 2], np.eye(4, 3),
                         R.from_axis_angle([[0, 0, 1]] * 4, [0.0, 0.1, 0.2, 0.3]))
    h = Hinge((1, 0, 0), 0, 1)
    p = pack_limits(sk, [1, 2, 3], {"b": h, 0: SwingTwist((0, 1, 0), 0.5)})  # "a" is not in the chain: ignored
    assert p.count == 1
    assert p.kinds.tolist() == [h.kind, 0, 0]
    assert np.array_equal(p.params[0], h.pack())
    assert np.array_equal(p.rest, sk.rotations[[1, 2, 3]])
    with pytest.raises(kinema.BoneNotFoundError):
        pack_limits(sk, [1, 2], {"nope": h})
    with pytest.raises(kinema.SolverInputError, match="two limits"):
        pack_limits(sk, [1, 2], {"b": h, 1: h})
    with pytest.raises(kinema.SolverInputError, match="not a Hinge"):
        pack_limits(sk, [1, 2], {"b": 3.0})  # type: ignore[dict-item]


# ---------------------------------------------------------------------------- any finite size
def test_axes_and_references_of_any_finite_size() -> None:
    """(1e300, 1e300, 0): its squared length overflowed and the axis became (0, 0, 0), silently."""
    assert Hinge((1e300, 1e300, 0), -1, 1).axis == Hinge((1, 1, 0), -1, 1).axis
    big = SwingTwist((0, 1e300, 0), (0.3, 0.6), reference=(1e300, 0, 2e299))
    small = SwingTwist((0, 1, 0), (0.3, 0.6), reference=(1, 0, 0.2))
    assert big.axis == small.axis
    np.testing.assert_allclose(big.reference, small.reference, rtol=0, atol=2 * np.finfo(float).eps)


@pytest.mark.parametrize(
    "lim",
    [Hinge((0, 0, 1), -0.5, 0.7), SwingTwist((0, 1, 0), (0.4, 0.8), -0.2, 0.3),
     EulerRange("YXZ", (-0.5, -0.3, -1.0), (0.5, 0.6, 1.0))],
)
@pytest.mark.parametrize("size", [1e160, 1e300])
def test_rotations_of_any_finite_size(lim: kinema.limits.Limit, size: float, rng: np.random.Generator) -> None:
    """A quaternion (or rest rotation) of components 1e300 is the rotation it holds: it used to normalise to
    zero, so an outside rotation read as inside (violation 0, returned unchanged) and a huge rest as identity."""
    rest = _random_quats(rng, 200)
    rel = _random_quats(rng, 200)
    rel[:100] = lim.clamp(rel[:100])  # half of them inside
    q = R.multiply(rest, rel)
    c, hit = lim.clamp_hit(q, rest)
    assert hit.any() and not hit.all()
    c_big, hit_big = lim.clamp_hit(q * size, rest * size)
    assert np.array_equal(hit_big, hit)
    assert np.all(R.equal(c_big, c, atol=1e-15))
    assert np.array_equal(c_big[~hit], q[~hit] * size)  # inside: the input itself, bit for bit
    np.testing.assert_allclose(lim.violation(q * size, rest * size), lim.violation(q, rest), rtol=0, atol=1e-14)


def test_contains_tolerance_is_a_number() -> None:
    h = Hinge((0, 0, 1), -0.5, 0.5)
    for atol in ("x", np.nan, -1.0, None):
        with pytest.raises(kinema.SolverInputError, match="atol"):
            h.contains([0, 0, 0, 1], atol=atol)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------- gimbal lock
SEQUENCES = list(R.EULER_SEQUENCES) + [s.lower() for s in R.EULER_SEQUENCES]


def _singular(seq: str) -> tuple[float, float]:
    """The middle angles of gimbal lock."""
    return (0.0, math.pi) if seq[0].lower() == seq[2].lower() else (-math.pi / 2, math.pi / 2)


def test_euler_inside_at_gimbal_lock_is_inside() -> None:
    """(0.25, 90, 0.25) XYZ is in the box below, but as_euler reads it as (0.5, 90, 0): it was measured 0.2 rad
    outside and clamped 0.2 rad away."""
    lim = EulerRange("XYZ", (-0.3, -math.pi, -0.3), (0.3, math.pi, 0.3))
    q = R.from_euler("XYZ", [0.25, math.pi / 2, 0.25])
    assert lim.violation(q) == 0.0
    c, hit = lim.clamp_hit(q)
    assert not hit and np.array_equal(c, q)


@pytest.mark.parametrize("seq", SEQUENCES)
def test_euler_at_gimbal_lock_every_sequence(seq: str, rng: np.random.Generator) -> None:
    """Boxes whose middle range holds a singular value, rotations at and near gimbal lock (up to 3e-7 off,
    across the band where as_euler sets the third angle to zero): inside ones are untouched; the clamp lands
    inside (violation <= TOL, 1.57 rad before), re-clamping moves nothing more than TOL; at the lock the clamp
    turns the rotation by exactly its violation (the smallest turn, about the first axis)."""
    for b_s in _singular(seq):
        for _ in range(6):
            half = rng.uniform(0.05, 1.2, 3)
            mid = rng.uniform(-1.5, 1.5, 3)
            mid[1] = b_s
            lo, hi = np.maximum(mid - half, -math.pi), np.minimum(mid + half, math.pi)
            lim = EulerRange(seq, lo, hi)
            a = rng.uniform(-math.pi, math.pi, (300, 3))
            a[:, 1] = b_s + rng.choice([0.0, 1e-9, 1e-7, 1.5e-7, 3e-7], 300) * np.sign(-b_s + 0.5)
            a[:100, 0] = rng.uniform(lo[0], hi[0], 100)  # inside ones
            a[:100, 2] = rng.uniform(lo[2], hi[2], 100)
            q = R.from_euler(seq, a)
            c, hit = lim.clamp_hit(q)
            assert not hit[:100].any() and np.array_equal(c[:100], q[:100])
            assert np.max(lim.violation(c)) <= TOL
            assert np.max(R.angle_between(lim.clamp(c), c)) <= TOL
            exact = a[:, 1] == b_s
            turned = R.angle_between(c[exact & hit], q[exact & hit])
            np.testing.assert_allclose(turned, lim.violation(q[exact & hit]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("limit", [
    Hinge((0.0, 0.0, 1.0), -0.4, 1.1),
    SwingTwist((0.0, 1.0, 0.0), (0.7, 0.3), -0.5, 0.2),
    EulerRange("XYZ", (-0.5, -0.5, -0.5), (0.5, 0.5, 0.5)),
    EulerRange("zxz", (-1.0, 0.2, -0.3), (0.8, 1.4, 0.9)),
])
def test_q_and_minus_q_clamp_to_opposite_signs_bit_for_bit(limit: Any) -> None:
    """``q`` and ``-q`` are one rotation: the clamp of one is the negated clamp of the other and their violations
    are equal, to the bit (an Euler box read the two signs' Euler angles with different rounding: 15% of clamps
    differed in the last bits, and DLS solves under such limits by up to 0.1 rad)."""
    qs = R.from_rotvec(np.random.default_rng(0).normal(size=(4000, 3)))
    np.testing.assert_array_equal(limit.clamp(-qs), -limit.clamp(qs))
    np.testing.assert_array_equal(limit.violation(-qs), limit.violation(qs))
