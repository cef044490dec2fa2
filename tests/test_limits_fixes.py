"""Joint-limit fixes: the free twist of a SwingTwist built in degrees, ``degrees`` True or False only, zero
rotations refused, and the swing-twist clamp at (and near) a half-turn swing."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import kinema
from kinema import rotation as R
from kinema.limits import LIMIT_SLACK, EulerRange, Hinge, Limit, SwingTwist

AXIS = np.array([0.0, 1.0, 0.0])
#: The swing a clamp leaves when the twist range is not the full circle (kernel SWING_HALF_TURN_MARGIN).
HALF_TURN_MARGIN = 1e-2


# --------------------------------------------------------------------- the default twist is free
def test_swing_twist_default_twist_is_free_whatever_degrees_says() -> None:
    """``SwingTwist(axis, 45, degrees=True)`` converted the free default (-pi, pi) as degrees: +-0.0548 rad, so a
    pure 90-degree twist read 1.52 rad outside and was clamped to 3.14 degrees."""
    lim = SwingTwist(AXIS, 45, degrees=True)
    assert (lim.twist_min, lim.twist_max) == (-math.pi, math.pi)
    assert lim.swing == math.radians(45)
    twist_90 = R.from_axis_angle(AXIS, math.pi / 2)
    assert lim.violation(twist_90) == 0.0
    c, hit = lim.clamp_hit(twist_90)
    assert not hit and np.array_equal(c, twist_90)
    # one bound given: that one converts, the other stays free in radians
    low = SwingTwist(AXIS, 45, twist_min=-30, degrees=True)
    assert (low.twist_min, low.twist_max) == (math.radians(-30), math.pi)
    high = SwingTwist(AXIS, 45, twist_max=30, degrees=True)
    assert (high.twist_min, high.twist_max) == (-math.pi, math.radians(30))
    # the default is the same limit as the explicit free range, in radians and in degrees
    assert SwingTwist(AXIS, 0.5) == SwingTwist(AXIS, 0.5, -math.pi, math.pi)
    assert np.array_equal(lim.pack(), SwingTwist(AXIS, 45, -180, 180, degrees=True).pack())
    # explicit values as before (positional and by name)
    st = SwingTwist(AXIS, (20, 40), -10, 15, (1, 0, 0), True)
    assert st.swing == (math.radians(20), math.radians(40))
    assert (st.twist_min, st.twist_max) == (math.radians(-10), math.radians(15))
    assert SwingTwist(AXIS, 0.4, twist_min=-0.2, twist_max=0.3).pack()[8:10].tolist() == [-0.2, 0.3]


# ------------------------------------------------------------------------ degrees: True or False
BAD_FLAGS: list[Any] = ["no", "0", "False", "", [0], [True], 1, 0, 1.0, None, np.array([True])]


def _build(kind: str, degrees: Any, scale: float = 1.0) -> Limit:
    """A limit whose angles (valid in radians and in degrees) are scaled by ``scale``."""
    if kind == "Hinge":
        return Hinge((1, 0, 0), 0, 1.5 * scale, degrees=degrees)
    if kind == "SwingTwist":
        return SwingTwist((0, 0, 1), 0.5 * scale, -0.2 * scale, 0.3 * scale, degrees=degrees)
    return EulerRange("XYZ", (0, -0.4 * scale, 0), (1.0 * scale, 0.2 * scale, 1.0 * scale), degrees=degrees)


@pytest.mark.parametrize("kind", ["Hinge", "SwingTwist", "EulerRange"])
def test_degrees_is_true_or_false_only(kind: str) -> None:
    """Any truthy object read as degrees (``degrees='no'``, ``'0'``, ``[0]``), a falsy one as radians."""
    for bad in BAD_FLAGS:
        with pytest.raises(kinema.SolverInputError, match=f"{kind} degrees must be True or False"):
            _build(kind, bad)
    # Python and numpy booleans: True converts, False does not
    radians = _build(kind, False).pack()
    converted = _build(kind, False, math.pi / 180).pack()
    for flag, expected in ((True, converted), (np.True_, converted), (False, radians), (np.False_, radians)):
        lim = _build(kind, flag)
        assert lim.degrees is False  # the angles are radians after construction
        np.testing.assert_allclose(lim.pack(), expected, rtol=1e-15, atol=0)


# ------------------------------------------------------------------- zero rotations are refused
LIMITS = [Hinge((1, 0, 0), 0, 1), SwingTwist((0, 1, 0), (0.4, 0.8), -0.2, 0.3),
          EulerRange("YXZ", (-0.5, -0.3, -1.0), (0.5, 0.6, 1.0))]


@pytest.mark.parametrize("lim", LIMITS, ids=["hinge", "swing_twist", "euler"])
@pytest.mark.parametrize("method", ["violation", "contains", "clamp", "clamp_hit"])
def test_zero_rotation_is_refused(lim: Limit, method: str) -> None:
    """A zero quaternion to test read as the identity: violation 0, contains True, while clamp returned the zero
    quaternion itself.  A zero rest rotation was already refused; the rotation to test is now, too."""
    call = getattr(lim, method)
    batch = R.normalize(np.random.default_rng(3).normal(size=(5, 4)))
    batch[2] = 0.0
    for q in ([0.0, 0.0, 0.0, 0.0], batch, [1e-13, 0.0, 0.0, 0.0]):
        with pytest.raises(kinema.SolverInputError, match="rotation_local contains a zero quaternion"):
            call(q)
        with pytest.raises(kinema.SolverInputError, match="rotation_local contains a zero quaternion"):
            call(q, [0.0, 0.0, 0.0, 1.0])
    for q in ([np.nan, 0.0, 0.0, 1.0], [0.0, np.inf, 0.0, 1.0]):
        with pytest.raises(kinema.SolverInputError, match="rotation_local contains NaN or inf"):
            call(q)
    with pytest.raises(kinema.SolverInputError, match="rest_rotation contains a zero quaternion"):
        call([0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0])
    call(batch[[0, 1, 3]] * 1e300)  # any finite size is still a rotation


# ---------------------------------------------------------------------------- half-turn swings
def _perpendicular_dirs(axis: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    d = np.cross(axis, rng.normal(size=(n, 3)))
    return d / np.linalg.norm(d, axis=-1, keepdims=True)


def _assert_clamps_inside_and_idempotent(lim: Limit, q: np.ndarray, rest: np.ndarray | None = None) -> np.ndarray:
    c, hit = lim.clamp_hit(q, rest)
    assert np.all(np.isfinite(c))
    assert float(np.max(lim.violation(c, rest))) <= LIMIT_SLACK
    c2, hit2 = lim.clamp_hit(c, rest)
    assert not np.any(hit2) and np.array_equal(c2, c)  # a clamped rotation is inside: untouched, to the bit
    np.testing.assert_array_equal(lim.clamp(-q, rest), -c)  # q and -q: one rotation, opposite signs
    return hit


def test_half_turn_swing_clamps_inside() -> None:
    """180 degrees about y, a full cone and twists in [0.5, 1] about z: the twist of a half-turn swing is undefined
    (it reads as 0), and the clamp set it to 0.5 on a rotation that was still a half-turn swing: violation 0.5
    after the clamp, and every further clamp turned it again."""
    lim = SwingTwist((0, 0, 1), math.pi, twist_min=0.5, twist_max=1.0)
    q = np.array([0.0, 1.0, 0.0, 0.0])
    assert lim.violation(q) == 0.5
    assert _assert_clamps_inside_and_idempotent(lim, q)
    c = lim.clamp(q)
    # the swing pulled back by the margin along its own direction, the twist onto its bound
    sw, tw = R.swing_twist(c, [0.0, 0.0, 1.0])
    assert abs(R.angle_between(sw, [0.0, 0.0, 0.0, 1.0]) - (math.pi - HALF_TURN_MARGIN)) <= 1e-12
    assert abs(2.0 * math.atan2(tw[2], tw[3]) - 0.5) <= LIMIT_SLACK
    np.testing.assert_allclose(sw[:3] / np.linalg.norm(sw[:3]), [0.0, 1.0, 0.0], rtol=0, atol=1e-15)


@pytest.mark.parametrize("swing", [math.pi, (math.pi, 2.0), math.pi - 1e-3, 3.0])
def test_swings_near_a_half_turn_clamp_inside(swing: float | tuple[float, float], rng: np.random.Generator) -> None:
    """Swings pi - delta (delta 0 .. 1e-9, and up to 3e-2) with random twists, under restricted twist ranges:
    within 1e-9 of a half turn the twist read back is off by about 8 eps / delta (2e-7 rad at 1e-9), so a clamp
    onto a twist bound read outside and was clamped again; every clamp now lands inside and stays put."""
    axis = np.array([0.3, -1.0, 0.5]) / np.linalg.norm([0.3, -1.0, 0.5])
    n = 4000
    deltas = np.concatenate([np.zeros(n // 4), rng.choice([1e-16, 1e-15, 1e-12, 1e-10, 1e-9], n // 4),
                             rng.uniform(0.0, 1e-9, n // 4), 10.0 ** rng.uniform(-9, -1.5, n // 4)])
    swing_q = R.from_axis_angle(_perpendicular_dirs(axis, rng, n), math.pi - deltas)
    swing_q[deltas == 0.0, 3] = 0.0  # exact half turns (cos(pi / 2) is 6e-17)
    q = R.multiply(swing_q, R.from_axis_angle(axis, rng.uniform(-math.pi, math.pi, n)))
    rest = R.normalize(rng.normal(size=(n, 4)))
    for lo, hi in ((0.5, 1.0), (-0.3, 0.2), (-math.pi, 3.0), (1.2, 1.2), (-math.pi, math.pi)):
        lim = SwingTwist(axis, swing, lo, hi)
        hit = _assert_clamps_inside_and_idempotent(lim, q)
        full = swing == math.pi and (lo, hi) == (-math.pi, math.pi)  # a full cone and a free twist hold every rotation
        assert not hit.any() if full else hit.any()
        _assert_clamps_inside_and_idempotent(lim, R.multiply(rest, q), rest)


def test_ordinary_swing_twist_clamps_are_the_documented_ones(rng: np.random.Generator) -> None:
    """Away from a half-turn swing (and under a free twist) the clamp is the radial swing clamp times the clamped
    twist, inside and idempotent; near a half turn with a restricted twist the swing is pulled back by the margin
    (the old clamp left it there and read outside)."""
    n = 3000
    q = R.normalize(rng.normal(size=(n, 4)))
    # and 300 swings within the margin of a half turn (random rotations have almost none there)
    near = R.from_axis_angle(_perpendicular_dirs(AXIS, rng, 300), math.pi - rng.uniform(2e-3, HALF_TURN_MARGIN, 300))
    q[:300] = R.multiply(near, R.from_axis_angle(AXIS, rng.uniform(-math.pi, math.pi, 300)))
    for swing, lo, hi in ((0.6, -0.3, 0.5), (2.5, -2.0, 0.1), (math.pi, -math.pi, math.pi), (math.pi, -1.0, 1.0)):
        lim = SwingTwist(AXIS, swing, lo, hi)
        c = lim.clamp(q)
        sw, tw = R.swing_twist(q, AXIS)
        ang = R.angle_between(sw, [0.0, 0.0, 0.0, 1.0])
        t = 2.0 * np.arctan2(tw[:, :3] @ AXIS * np.sign(tw[:, 3]), np.abs(tw[:, 3]))
        mid = 0.5 * (lo + hi)
        t_wrapped = mid + (t - mid + math.pi) % (2 * math.pi) - math.pi
        t_out = np.where(t_wrapped < lo, lo, np.where(t_wrapped > hi, hi, t))
        restricted = hi - lo < 2 * math.pi
        a_max = min(swing, math.pi - HALF_TURN_MARGIN) if restricted else swing
        hit = (ang > swing + LIMIT_SLACK) | (t_out != t)
        a_out = np.where(hit, np.minimum(ang, a_max), ang)
        d = sw[:, :3] * np.sign(sw[:, 3:4])
        d /= np.linalg.norm(d, axis=-1, keepdims=True)
        expected = R.multiply(R.from_axis_angle(d, a_out), R.from_axis_angle(AXIS, t_out))
        assert np.all(R.equal(c, expected, atol=1e-12))
        assert np.array_equal(c[~hit], q[~hit])
        _assert_clamps_inside_and_idempotent(lim, q)
        if (swing, lo, hi) == (math.pi, -1.0, 1.0):
            assert np.any(hit & (ang > math.pi - HALF_TURN_MARGIN))  # the pulled-back ones are among them
