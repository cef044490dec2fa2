"""kinema.rotation: algebra, conversions and the near-180-degree cases, cross-checked with scipy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.transform import Rotation as SciRot

from kinema import ShapeError
from kinema import rotation as R

finite = st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False)
quat_arrays = arrays(np.float64, st.tuples(st.integers(1, 6), st.just(4)), elements=finite).filter(
    lambda q: np.all(np.linalg.norm(q, axis=-1) > 1e-3)
)
vec_arrays = arrays(np.float64, st.tuples(st.integers(1, 6), st.just(3)), elements=finite)


def unit(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def random_quats(rng: np.random.Generator, n: int) -> np.ndarray:
    return unit(rng.normal(size=(n, 4)))


@given(quat_arrays, quat_arrays)
def test_multiply_matches_scipy(a: np.ndarray, b: np.ndarray) -> None:
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    ours = R.multiply(a, b)
    ref = (SciRot.from_quat(a) * SciRot.from_quat(b)).as_quat()
    assert np.all(R.equal(ours, ref, atol=1e-12))


@given(quat_arrays)
def test_q_and_minus_q_are_equal_and_canonical(q: np.ndarray) -> None:
    assert np.all(R.equal(q, -q))
    c = R.canonical(q)
    assert np.all(c[..., 3] >= 0.0)
    assert np.allclose(R.canonical(-q), c, atol=1e-15)
    # Rotating by q or -q gives the same vector.
    v = np.array([0.3, -1.2, 2.0])
    assert np.allclose(R.rotate(q, v), R.rotate(-q, v), atol=1e-12)


def test_equal_rejects_different_rotations() -> None:
    q = R.from_axis_angle([0, 0, 1], 0.5)
    assert not R.equal(q, R.from_axis_angle([0, 0, 1], 0.5 + 1e-6))
    assert R.equal(q, -q)


@given(quat_arrays, vec_arrays)
def test_rotate_matches_scipy(q: np.ndarray, v: np.ndarray) -> None:
    n = min(len(q), len(v))
    ours = R.rotate(q[:n], v[:n])
    ref = SciRot.from_quat(q[:n]).apply(v[:n])
    assert np.allclose(ours, ref, atol=1e-12 * (1 + np.abs(v[:n]).max()))


@given(quat_arrays)
def test_inverse_and_normalize(q: np.ndarray) -> None:
    qi = R.inverse(q)
    ident = R.multiply(q, qi)
    assert np.allclose(R.canonical(ident), [0, 0, 0, 1], atol=1e-12)
    assert np.allclose(np.linalg.norm(R.normalize(q), axis=-1), 1.0, atol=1e-15)


def test_normalize_zero_gives_identity() -> None:
    assert np.array_equal(R.normalize([0.0, 0.0, 0.0, 0.0]), [0.0, 0.0, 0.0, 1.0])


def test_normalize_near_unit_branch_matches_exact(rng: np.random.Generator) -> None:
    """``|q|^2`` within ``QUAT_NEAR_UNIT_TOL`` of 1 takes the square-root-free branch: same result as
    dividing by the norm to 2 ulp, on both sides of the threshold, and unit to 2 ulp."""
    from kinema._kernels.quat import QUAT_NEAR_UNIT_TOL

    u = rng.normal(size=(4000, 4))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    # |q|^2 - 1 from far inside the branch to just outside it (both sides of 1).
    e = np.concatenate([np.geomspace(1e-16, 10 * QUAT_NEAR_UNIT_TOL, 2000)] * 2)
    e[2000:] *= -1.0
    q = u * np.sqrt(1.0 + e)[:, None]
    ours = R.normalize(q)
    exact = q / np.linalg.norm(q, axis=-1, keepdims=True)
    assert np.max(np.abs(ours - exact)) <= 2 * np.finfo(float).eps
    assert np.max(np.abs(np.linalg.norm(ours, axis=-1) - 1.0)) <= 2 * np.finfo(float).eps
    inside = np.abs(e) <= QUAT_NEAR_UNIT_TOL
    assert inside.any() and (~inside).any()


@given(quat_arrays)
def test_matrix_round_trip_and_scipy(q: np.ndarray) -> None:
    m = R.as_matrix(q)
    assert np.allclose(m, SciRot.from_quat(q).as_matrix(), atol=1e-12)
    assert np.all(R.equal(R.from_matrix(m), q, atol=1e-12))
    assert np.all(R.from_matrix(m)[..., 3] >= 0)


def test_from_matrix_near_180(rng: np.random.Generator) -> None:
    # Rotations by pi about random axes: trace = -1, the w pivot is useless.
    axes = unit(rng.normal(size=(50, 3)))
    q = R.from_axis_angle(axes, np.pi)
    assert np.all(R.equal(R.from_matrix(R.as_matrix(q)), q, atol=1e-12))


@pytest.mark.parametrize("seq", list(R.EULER_SEQUENCES) + [s.lower() for s in R.EULER_SEQUENCES])
def test_euler_all_orders_match_scipy_and_round_trip(seq: str, rng: np.random.Generator) -> None:
    angles = rng.uniform(-np.pi, np.pi, size=(200, 3))
    angles[:, 1] = rng.uniform(-np.pi / 2 + 0.01, np.pi / 2 - 0.01, size=200)
    if seq[0].lower() == seq[2].lower():  # proper Euler: middle angle in (0, pi)
        angles[:, 1] = rng.uniform(0.01, np.pi - 0.01, size=200)
    q = R.from_euler(seq, angles)
    assert np.all(R.equal(q, SciRot.from_euler(seq, angles).as_quat(), atol=1e-12))
    back = R.as_euler(q, seq)
    assert np.allclose(back, SciRot.from_quat(q).as_euler(seq), atol=1e-9)
    assert np.all(R.equal(R.from_euler(seq, back), q, atol=1e-12))


@pytest.mark.parametrize("seq", ["ZXY", "xyz", "ZYZ", "yxy"])
def test_euler_gimbal_lock_round_trips(seq: str) -> None:
    mid = 0.0 if seq[0].lower() == seq[2].lower() else np.pi / 2
    q = R.from_euler(seq, [0.7, mid, -0.2])
    back = R.as_euler(q, seq)
    assert back[2] == 0.0 or back[0] == 0.0
    assert R.equal(R.from_euler(seq, back), q, atol=1e-9)


def test_euler_degrees_and_bad_sequences() -> None:
    assert R.equal(R.from_euler("ZXY", [90, 0, 0], degrees=True), R.from_axis_angle([0, 0, 1], np.pi / 2))
    for bad in ("XYz", "XXY", "AB", "XYZW"):
        with pytest.raises(ValueError, match="Euler sequence|three axes"):
            R.from_euler(bad, [0, 0, 0])


@given(vec_arrays)
def test_rotvec_round_trip(v: np.ndarray) -> None:
    v = v / 10.0 * np.pi / np.sqrt(3) * 0.999  # |v| < pi
    q = R.from_rotvec(v)
    assert np.all(R.equal(q, SciRot.from_rotvec(v).as_quat(), atol=1e-12))
    assert np.allclose(R.as_rotvec(q), v, atol=1e-10)


def test_axis_angle(rng: np.random.Generator) -> None:
    axes = unit(rng.normal(size=(20, 3)))
    angles = rng.uniform(0.01, np.pi - 0.01, 20)
    q = R.from_axis_angle(axes, angles)
    ax, an = R.as_axis_angle(q)
    assert np.allclose(ax, axes, atol=1e-10)
    assert np.allclose(an, angles, atol=1e-12)
    assert R.equal(R.from_axis_angle([1, 0, 0], 180, degrees=True), [1, 0, 0, 0])
    ax0, an0 = R.as_axis_angle([0, 0, 0, 1])
    assert an0 == 0.0 and np.array_equal(ax0, [1.0, 0.0, 0.0])


def test_slerp_nlerp(rng: np.random.Generator) -> None:
    a = random_quats(rng, 30)
    b = random_quats(rng, 30)
    t = rng.uniform(0, 1, 30)
    ours = R.slerp(a, b, t)
    total = R.angle_between(a, b)
    # Constant speed along the shorter arc: angle(a, slerp) = t * angle(a, b).
    assert np.allclose(R.angle_between(a, ours), t * total, atol=1e-10)
    assert np.allclose(R.angle_between(ours, b), (1 - t) * total, atol=1e-10)
    assert np.all(R.equal(R.slerp(a, b, 0.0), a)) and np.all(R.equal(R.slerp(a, b, 1.0), b))
    # Tiny angle falls to nlerp and stays unit.
    c = R.multiply(a, R.from_axis_angle([0, 0, 1], 1e-9))
    assert np.allclose(np.linalg.norm(R.slerp(a, c, 0.5), axis=-1), 1.0, atol=1e-15)
    n = R.nlerp(a, -b, 0.5)  # sign of b does not matter
    assert np.all(R.equal(n, R.nlerp(a, b, 0.5)))


def test_angle_between_matches_scipy(rng: np.random.Generator) -> None:
    a = random_quats(rng, 40)
    b = random_quats(rng, 40)
    ref = (SciRot.from_quat(a).inv() * SciRot.from_quat(b)).magnitude()
    assert np.allclose(R.angle_between(a, b), ref, atol=1e-10)
    assert np.allclose(R.angle_between(a, -a), 0.0, atol=1e-7)


@pytest.mark.parametrize("miss", [1e-3, 1e-4, 1e-7, 0.0])
def test_from_two_vectors_near_180_is_exact(miss: float, rng: np.random.Generator) -> None:
    for _ in range(20):
        u = unit(rng.normal(size=3))
        perp = unit(np.cross(u, rng.normal(size=3)))
        # v at angle pi - miss from u, in the (u, perp) plane.
        v = np.cos(np.pi - miss) * u + np.sin(np.pi - miss) * perp
        q = R.from_two_vectors(u * 2.5, v * 0.3)
        got = R.rotate(q, u)
        assert np.linalg.norm(got - v) <= 1e-12, (miss, np.linalg.norm(got - v))
        # Minimal: the rotation angle is the angle between the vectors.
        assert abs(R.angle_between([0, 0, 0, 1], q) - (np.pi - miss)) <= 1e-9


@pytest.mark.parametrize("scale", [1e-11, 1.0, 1e3, 1e100])
def test_from_two_vectors_both_forms_meet_at_90_degrees(scale: float, rng: np.random.Generator) -> None:
    """Angles just below 90 degrees take the raw-vector form, just above the normalised one (and vectors past
    HALFWAY_MAX_NORM2, 1e100 here, the normalised one at every angle): each rotates ``a`` onto ``b`` to 2e-15
    and turns by exactly the angle between them."""
    for off in (-1e-3, -1e-9, 0.0, 1e-9, 1e-3):
        for _ in range(10):
            u = unit(rng.normal(size=3))
            perp = unit(np.cross(u, rng.normal(size=3)))
            ang = np.pi / 2 + off
            v = np.cos(ang) * u + np.sin(ang) * perp
            q = R.from_two_vectors(u * scale * 1.7, v * scale * 0.6)
            assert abs(np.linalg.norm(q) - 1.0) <= 4e-16
            assert np.linalg.norm(R.rotate(q, u) - v) <= 2e-15
            assert abs(R.angle_between([0, 0, 0, 1], q) - ang) <= 4e-15


def test_from_two_vectors_degenerate() -> None:
    assert np.array_equal(R.from_two_vectors([0, 0, 0], [1, 0, 0]), [0, 0, 0, 1])
    assert np.array_equal(R.from_two_vectors([1, 0, 0], [2, 0, 0]), [0, 0, 0, 1])
    q = R.from_two_vectors([1, 0, 0], [-1, 0, 0])
    assert np.allclose(R.rotate(q, [1, 0, 0]), [-1, 0, 0], atol=1e-15)
    assert abs(q[3]) == 0.0


@given(vec_arrays, vec_arrays)
def test_from_two_vectors_property(a: np.ndarray, b: np.ndarray) -> None:
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    keep = (np.linalg.norm(a, axis=-1) > 1e-3) & (np.linalg.norm(b, axis=-1) > 1e-3)
    a, b = a[keep], b[keep]
    if not len(a):
        return
    q = R.from_two_vectors(a, b)
    assert np.allclose(R.rotate(q, unit(a)), unit(b), atol=1e-12)


@given(quat_arrays, vec_arrays)
def test_swing_twist(q: np.ndarray, axis: np.ndarray) -> None:
    n = min(len(q), len(axis))
    q, axis = q[:n], axis[:n]
    keep = np.linalg.norm(axis, axis=-1) > 1e-3
    q, axis = q[keep], axis[keep]
    if not len(q):
        return
    swing, twist = R.swing_twist(q, axis)
    assert np.all(R.equal(R.multiply(swing, twist), q, atol=1e-12))
    u = unit(axis)
    # Twist rotates about the axis (its vector part is parallel to it) ...
    assert np.allclose(np.cross(twist[..., :3], u), 0.0, atol=1e-12)
    # ... and swing's axis is perpendicular to it.
    assert np.allclose(np.einsum("...i,...i", swing[..., :3], u), 0.0, atol=1e-12)


def test_swing_twist_degenerate_180_swing() -> None:
    q = R.from_axis_angle([1, 0, 0], np.pi)  # perpendicular to z: no twist defined
    swing, twist = R.swing_twist(q, [0, 0, 1])
    assert np.array_equal(twist, [0, 0, 0, 1])
    assert R.equal(swing, q)
    with pytest.raises(ShapeError, match="non-zero"):
        R.swing_twist(q, [0, 0, 0])


def test_single_in_single_out_and_broadcasting(rng: np.random.Generator) -> None:
    q = random_quats(rng, 1)[0]
    assert R.multiply(q, q).shape == (4,)
    assert R.rotate(q, [1, 0, 0]).shape == (3,)
    assert R.as_matrix(q).shape == (3, 3)
    assert R.as_euler(q, "XYZ").shape == (3,)
    assert R.angle_between(q, q).shape == ()
    qs = random_quats(rng, 6).reshape(2, 3, 4)
    assert R.multiply(qs, q).shape == (2, 3, 4)
    assert R.rotate(qs, np.ones((3, 3))).shape == (2, 3, 3)
    assert np.allclose(R.multiply(qs, q)[1, 2], R.multiply(qs[1, 2], q), atol=1e-15)


def test_shape_errors_say_expected_and_got() -> None:
    with pytest.raises(ShapeError, match=r"expected shape \(\.\.\., 4\), got \(3,\)"):
        R.multiply([0, 0, 1], [0, 0, 0, 1])
    with pytest.raises(ShapeError, match="batch"):
        R.multiply(np.ones((2, 4)), np.ones((3, 4)))
    with pytest.raises(ShapeError, match="non-numeric"):
        R.normalize(["a", "b", "c", "d"])
