"""kinema.rotation: algebra, conversions and the near-180-degree cases, cross-checked with scipy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial.transform import Rotation as SciRot

import kinema
from kinema import ShapeError, SolverInputError
from kinema import rotation as R
from kinema._kernels.quat import EULER_GIMBAL_EPS

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


def test_from_matrix_of_a_stretched_rotation_is_its_rotation(rng: np.random.Generator) -> None:
    """``M = R P`` with ``P`` symmetric positive definite (a scale, a stretch, float32 round-off) gives ``R``, the
    nearest rotation (before, Shepperd's method read the stretched entries as a rotation's)."""
    q = R.from_rotvec(rng.normal(size=(200, 3)) * 1.5)
    a = rng.normal(size=(200, 3, 3)) * 0.4
    stretch = np.eye(3) + 0.5 * (a + np.swapaxes(a, -1, -2))
    stretch = np.where((np.linalg.eigvalsh(stretch)[:, 0] > 0.05)[:, None, None], stretch, 2.5 * np.eye(3))
    m = R.as_matrix(q) @ stretch
    assert np.all(R.equal(R.from_matrix(m), q, atol=1e-12))
    assert np.all(R.equal(R.from_matrix(R.as_matrix(q) * 1e300), q, atol=1e-12))  # M^T M overflows: projected
    m32 = R.as_matrix(q).astype(np.float32)  # orthonormal to ~1e-7
    assert np.all(R.equal(R.from_matrix(m32), q, atol=1e-6))
    m32_rot = np.linalg.svd(m32.astype(np.float64))
    assert np.all(R.equal(R.from_matrix(m32), R.from_matrix(m32_rot[0] @ m32_rot[2]), atol=1e-15))
    # a rotation as it is (orthonormal within ORTHONORMAL_TOL): Shepperd's method on the matrix as given
    exact = R.as_matrix(q)
    assert np.max(np.abs(np.swapaxes(exact, -1, -2) @ exact - np.eye(3))) <= R.ORTHONORMAL_TOL
    assert np.all(R.equal(R.from_matrix(exact), q, atol=1e-15))


def test_from_matrix_refuses_a_mirror_and_a_singular_matrix() -> None:
    m = np.stack([np.eye(3), np.diag([1.0, 1.0, -1.0]), np.zeros((3, 3))])
    with pytest.raises(SolverInputError, match=r"m\[1\] is not a rotation matrix: it is a mirror"):
        R.from_matrix(m)
    with pytest.raises(SolverInputError, match=r"^m is not a rotation matrix: it is singular"):
        R.from_matrix(np.diag([1.0, 0.0, 1.0]))
    with pytest.raises(SolverInputError, match=r"m\[0, 1\] is not a rotation matrix: it is singular"):
        R.from_matrix(np.stack([np.eye(3), np.ones((3, 3))])[None])


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


@pytest.mark.parametrize("scale", [1e-140, 1e-100, 1e-40, 1e-11, 1.0, 1e3, 1e100])
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


def test_a_direction_is_a_direction_at_any_length_above_vec_norm_eps() -> None:
    """The kernels' "no direction" is tied to float64's range (``sqrt(SQUARES_SAFE_MIN)``), not to a unit: it was
    an absolute 1e-12, under which a rig in small units lost every direction.  ``kinema.rotation`` keeps its own
    copy for ``swing_twist``'s refusal (it must not import the kernels): the two agree."""
    from kinema._kernels import quat

    assert quat.VEC_NORM_EPS == R._VEC_NORM_EPS
    assert abs(quat.VEC_NORM_EPS**2 / quat.SQUARES_SAFE_MIN - 1.0) < 1e-15
    a, b = np.array([1.0, 2.0, -0.5]), np.array([-1.0, -1.9, 0.6])  # beyond 90 degrees: the normalised form
    q = R.from_rotvec([0.3, 0.5, 0.2])
    for scale in (2.0**-40, 2.0**-330, 2.0**-470):  # about 1e-12, 5e-100 and 3e-142: exact scalings, the same bits
        assert np.array_equal(R.from_two_vectors(a * scale, b * scale), R.from_two_vectors(a, b)), scale
        assert np.array_equal(R.swing_twist(q, a * scale)[1], R.swing_twist(q, a)[1]), scale
    assert np.array_equal(R.from_two_vectors(a * quat.VEC_NORM_EPS / 3.0, b), [0, 0, 0, 1])
    with pytest.raises(ShapeError, match="a zero vector or a shorter one"):
        R.swing_twist(q, a * quat.VEC_NORM_EPS / 3.0)


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


# ------------------------------------------------------------------------------------ any finite size
#: A quaternion and two vectors whose largest component is in [0.5, 1): scaled by a power of two they are
#: brought back to exactly these numbers, so every function must give the same bits for them at any size.
Q_HALF = np.array([0.1, -0.2, 0.7, 0.4])
V_HALF = np.array([0.6, -0.3, 0.2])
W = np.array([-0.4, 1.3, 0.5])


def _results(q: np.ndarray, u: np.ndarray) -> dict[str, object]:
    """Every kinema.rotation function of the quaternion ``q`` and the direction ``u``."""
    return {
        "normalize": R.normalize(q), "canonical": R.canonical(-q), "inverse": R.inverse(q),
        "rotate": R.rotate(q, W), "as_matrix": R.as_matrix(q), "as_euler": R.as_euler(q, "ZXY"),
        "as_rotvec": R.as_rotvec(q), "multiply": R.multiply(q, q), "slerp": R.slerp(q, [0, 0, 0, 1], 0.3),
        "nlerp": R.nlerp([0, 0, 0, 1], q, 0.3), "angle_between": R.angle_between(q, [0, 0, 0, 1]),
        "equal": R.equal(q, Q_HALF), "swing_twist": R.swing_twist(q, u), "from_two_vectors": R.from_two_vectors(u, W),
        "from_two_vectors_b": R.from_two_vectors(W, u), "from_axis_angle": R.from_axis_angle(u, 0.7),
        "swing_twist_axis": R.swing_twist(Q_HALF, u),
    }


@pytest.mark.parametrize("scale", [2.0**520, 2.0**1000])
def test_quaternions_and_directions_scaled_by_a_power_of_two_give_the_same_bits(scale: float) -> None:
    """Components of 1e157 and 1e301 (their squares overflow): before, normalize gave zeros, rotate left the
    vector where it was and from_two_vectors returned a zero quaternion."""
    want = _results(Q_HALF, V_HALF)
    got = _results(Q_HALF * scale, V_HALF * scale)
    for name, value in want.items():
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(value), err_msg=name)


@pytest.mark.parametrize("size", [1e160, 1e200, 1e300])
def test_huge_quaternions_are_the_rotation_they_hold(size: float) -> None:
    q = np.array([0.0, 0.0, 1.0, 1.0])
    unit_q = q / np.sqrt(2.0)
    np.testing.assert_allclose(R.normalize(q * size), unit_q, rtol=0, atol=2 * np.finfo(float).eps)
    np.testing.assert_allclose(R.rotate(q * size, [1.0, 0.0, 0.0]), [0.0, 1.0, 0.0], rtol=0, atol=1e-15)
    assert R.equal(q * size, -q)
    assert float(R.angle_between(q * size, unit_q)) <= 1e-15


def test_rotation_vectors_of_any_finite_length() -> None:
    """|r| = 1e200: the squared length overflowed and gave NaN; beyond the largest float there is no angle."""
    # lengths that are exact in floating point: 1e200, and 5 * 2**600 for (3, -4, 0) * 2**600
    for axis, angle in (([0.0, 0.0, 1.0], 1e200), ([0.6, -0.8, 0.0], 5.0 * 2.0**600)):
        r = np.asarray(axis) * angle
        np.testing.assert_allclose(R.from_rotvec(r), R.from_axis_angle(axis, angle), rtol=0, atol=1e-15)
    with pytest.raises(SolverInputError, match="longer than the largest float"):
        R.from_rotvec([1.5e308, 1.5e308, 0.0])


def test_bad_arguments_are_kinema_errors_that_name_the_problem() -> None:
    """Each of these escaped as a bare TypeError, ValueError, ZeroDivisionError or numpy error, or was read as
    a number it is not ("1", None as NaN, True as 1)."""
    for bad in ("1", None, 1j, [True]):
        with pytest.raises(ShapeError, match="angle: .*non-numeric"):
            R.from_axis_angle([0, 0, 1], bad)  # type: ignore[arg-type]
        with pytest.raises(ShapeError, match="t: .*non-numeric"):
            R.slerp([0, 0, 0, 1], [0, 0, 1, 0], bad)  # type: ignore[arg-type]
    for call in (lambda: R.from_axis_angle([0, 0, 1], np.inf), lambda: R.from_euler("XYZ", [0.0, np.nan, 0.0]),
                 lambda: R.from_rotvec([np.inf, 0.0, 0.0]), lambda: R.nlerp([0, 0, 0, 1], [0, 0, 1, 0], np.nan)):
        with pytest.raises(SolverInputError, match="NaN or inf"):
            call()
    with pytest.raises(SolverInputError, match=r"m contains NaN or inf \(first at index \(1, 1\)\)"):
        R.from_matrix(np.diag([1.0, np.nan, 1.0]))  # ZeroDivisionError from the kernel before
    for atol in ("x", np.nan, -1.0):
        with pytest.raises(SolverInputError, match="atol"):
            R.equal([0, 0, 0, 1], [0, 0, 0, 1], atol=atol)  # type: ignore[arg-type]
    for shape in ("ab", (-1,), (2.0,), None):
        with pytest.raises(ShapeError, match="shape: expected shape a tuple of non-negative ints"):
            R.identity(shape)  # type: ignore[arg-type]
    assert R.identity(3).shape == (3, 4) and R.identity(np.int64(2)).shape == (2, 4)
    for seq in ("XXY", "xyZ", 5):
        with pytest.raises(kinema.KinemaError, match="Euler sequence|three axes"):
            R.as_euler([0, 0, 0, 1], seq)  # type: ignore[arg-type]


def test_every_function_refuses_nan_and_inf_naming_the_argument() -> None:
    """NaN is no rotation: most of these returned NaN (``as_axis_angle`` a finite, wrong axis (1, 0, 0); ``equal``
    False), a few raised.  Now every quaternion, vector and matrix input is refused the same way, by name, at any
    position in a batch."""
    q = np.array([[0.0, 0.0, 0.0, 1.0], [0.1, 0.2, 0.3, 0.9]])
    v = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.5]])
    calls = {
        "multiply": (lambda a, b: R.multiply(a, b), (q, q), ("a", "b")),
        "conjugate": (lambda a: R.conjugate(a), (q,), ("q",)),
        "inverse": (lambda a: R.inverse(a), (q,), ("q",)),
        "normalize": (lambda a: R.normalize(a), (q,), ("q",)),
        "canonical": (lambda a: R.canonical(a), (q,), ("q",)),
        "equal": (lambda a, b: R.equal(a, b), (q, q), ("a", "b")),
        "rotate": (lambda a, b: R.rotate(a, b), (q, v), ("q", "v")),
        "as_matrix": (lambda a: R.as_matrix(a), (q,), ("q",)),
        "as_axis_angle": (lambda a: R.as_axis_angle(a), (q,), ("q",)),
        "as_rotvec": (lambda a: R.as_rotvec(a), (q,), ("q",)),
        "as_euler": (lambda a: R.as_euler(a, "ZXY"), (q,), ("q",)),
        "slerp": (lambda a, b: R.slerp(a, b, 0.5), (q, q), ("a", "b")),
        "nlerp": (lambda a, b: R.nlerp(a, b, 0.5), (q, q), ("a", "b")),
        "angle_between": (lambda a, b: R.angle_between(a, b), (q, q), ("a", "b")),
        "from_two_vectors": (lambda a, b: R.from_two_vectors(a, b), (v, v), ("a", "b")),
        "swing_twist": (lambda a, b: R.swing_twist(a, b), (q, v), ("q", "axis")),
        "from_axis_angle": (lambda a: R.from_axis_angle(a, 0.3), (v,), ("axis",)),
    }
    for call, good, names in calls.values():
        call(*good)  # finite: fine
        for k, what in enumerate(names):
            for bad_value in (np.nan, np.inf, -np.inf):
                args = [g.copy() for g in good]
                args[k][1, 2] = bad_value
                with pytest.raises(SolverInputError, match=rf"^{what} contains NaN or inf \(first at index \(1, 2\)\)"):
                    call(*args)


rows = arrays(np.float64, st.tuples(st.integers(1, 5), st.just(4)), elements=finite)


@given(rows, st.lists(st.sampled_from([1.0, 1e-300, 2.0**700, 1e300]), min_size=5, max_size=5))
def test_batch_equals_a_loop_of_single_calls_bit_for_bit(a: np.ndarray, sizes: list[float]) -> None:
    """Rows of mixed sizes (unit, tiny, huge): each row of a batch is the single call on that row, to the bit."""
    n = len(a)
    q = a * np.asarray(sizes[:n])[:, None]
    v = a[:, :3] * np.asarray(sizes[::-1][:n])[:, None]
    b = np.roll(q, 1, axis=0)
    t = np.linspace(0.0, 1.0, n)
    m = R.as_matrix(a)
    calls = {
        "multiply": (R.multiply, (q, b)), "normalize": (R.normalize, (q,)), "canonical": (R.canonical, (q,)),
        "rotate": (R.rotate, (q, a[:, 1:])), "as_matrix": (R.as_matrix, (q,)), "from_matrix": (R.from_matrix, (m,)),
        "from_axis_angle": (R.from_axis_angle, (v, a[:, 0])), "as_rotvec": (R.as_rotvec, (q,)),
        "from_rotvec": (R.from_rotvec, (v,)), "from_euler": (lambda x: R.from_euler("ZYZ", x), (a[:, :3],)),
        "as_euler": (lambda x: R.as_euler(x, "xzy"), (q,)), "slerp": (R.slerp, (q, b, t)),
        "nlerp": (R.nlerp, (q, b, t)), "angle_between": (R.angle_between, (q, b)),
        "from_two_vectors": (R.from_two_vectors, (v, a[:, 1:])), "swing_twist": (R.swing_twist, (q, a[:, :3] + 1e-3)),
    }
    for name, (f, args) in calls.items():
        whole = f(*args)
        for i in range(n):
            np.testing.assert_array_equal(np.asarray(f(*[x[i] for x in args])), np.asarray(whole)[..., i, :]
                                          if name == "swing_twist" else whole[i], err_msg=name)


@pytest.mark.parametrize("seq", list(R.EULER_SEQUENCES) + [s.lower() for s in R.EULER_SEQUENCES])
def test_euler_round_trip_tolerance_at_and_near_gimbal_lock(seq: str, rng: np.random.Generator) -> None:
    """as_euler then from_euler gives the rotation back to 2e-15 rad with the middle angle at its singular value
    or more than 2 EULER_GIMBAL_EPS from it; within EULER_GIMBAL_EPS of it (where the third angle is set to
    zero) to 2 EULER_GIMBAL_EPS rad, the documented cost of that convention."""
    n = 2000
    angles = rng.uniform(-np.pi, np.pi, size=(n, 3))
    proper = seq[0].lower() == seq[2].lower()
    singular = rng.choice([0.0, np.pi] if proper else [-np.pi / 2, np.pi / 2], n)
    off = np.where(rng.random(n) < 0.5, 0.0, 10.0 ** rng.uniform(-12, -2, n))
    inward = np.where(singular > 0.0, -1.0, 1.0) if not proper else np.where(singular == 0.0, 1.0, -1.0)
    angles[:, 1] = singular + inward * off
    q = R.from_euler(seq, angles)
    err = R.angle_between(q, R.from_euler(seq, R.as_euler(q, seq)))
    far = (off == 0.0) | (off > 2 * EULER_GIMBAL_EPS)
    assert np.max(err[far]) <= 2e-15
    assert np.max(err) <= 2 * EULER_GIMBAL_EPS


def test_identity_refuses_a_shape_beyond_memory_before_allocating(monkeypatch: pytest.MonkeyPatch) -> None:
    """``identity`` of more quaternions than kinema allocates is a ShapeError naming the shape argument (it
    was numpy's bare MemoryError); a shape at the limit is still made."""
    import kinema._validate as v

    monkeypatch.setattr(v, "MAX_ALLOCATION_BYTES", 10 * 4 * 8)
    assert kinema.rotation.identity(10).shape == (10, 4)
    with pytest.raises(ShapeError, match="shape"):
        kinema.rotation.identity(11)
