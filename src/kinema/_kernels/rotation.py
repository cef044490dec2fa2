"""Array kernels behind :mod:`kinema.rotation`: one loop each over a flat batch."""

from __future__ import annotations

from ._jit import njit
from .quat import (
    qangle,
    qcanonical,
    qconj,
    qfrom_axis_angle,
    qfrom_euler,
    qfrom_matrix,
    qfrom_rotvec,
    qfrom_two_vectors,
    qmul,
    qnlerp,
    qnormalize,
    qrotate,
    qslerp,
    qswing_twist,
    qto_euler,
    qto_matrix,
    qto_rotvec,
    vnormalized,
)


@njit
def _q(a, i):  # type: ignore[no-untyped-def]
    return (a[i, 0], a[i, 1], a[i, 2], a[i, 3])


@njit
def _v(a, i):  # type: ignore[no-untyped-def]
    return (a[i, 0], a[i, 1], a[i, 2])


@njit
def _put4(out, i, q):  # type: ignore[no-untyped-def]
    out[i, 0] = q[0]
    out[i, 1] = q[1]
    out[i, 2] = q[2]
    out[i, 3] = q[3]


@njit
def _put3(out, i, v):  # type: ignore[no-untyped-def]
    out[i, 0] = v[0]
    out[i, 1] = v[1]
    out[i, 2] = v[2]


@njit
def mul(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qmul(qnormalize(_q(a, i)), qnormalize(_q(b, i))))


@njit
def normalize(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qnormalize(_q(q, i)))


@njit
def canonical(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qcanonical(qnormalize(_q(q, i))))


@njit
def rotate(q, v, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put3(out, i, qrotate(qnormalize(_q(q, i)), _v(v, i)))


@njit
def to_matrix(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        m = qto_matrix(qnormalize(_q(q, i)))
        for a in range(3):
            for b in range(3):
                out[i, a, b] = m[3 * a + b]


@njit
def from_matrix(m, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qfrom_matrix(m[i, 0, 0], m[i, 0, 1], m[i, 0, 2], m[i, 1, 0], m[i, 1, 1],
                                   m[i, 1, 2], m[i, 2, 0], m[i, 2, 1], m[i, 2, 2]))


@njit
def from_axis_angle(axis, angle, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qfrom_axis_angle(_v(axis, i), angle[i]))


@njit
def to_rotvec(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put3(out, i, qto_rotvec(qnormalize(_q(q, i))))


@njit
def from_rotvec(r, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qfrom_rotvec(_v(r, i)))


@njit
def from_euler(angles, i0, i1, i2, extrinsic, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qfrom_euler(angles[i, 0], angles[i, 1], angles[i, 2], i0, i1, i2, extrinsic))


@njit
def to_euler(q, i0, i1, i2, extrinsic, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put3(out, i, qto_euler(qnormalize(_q(q, i)), i0, i1, i2, extrinsic))


@njit
def slerp(a, b, t, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qslerp(qnormalize(_q(a, i)), qnormalize(_q(b, i)), t[i]))


@njit
def nlerp(a, b, t, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qnlerp(qnormalize(_q(a, i)), qnormalize(_q(b, i)), t[i]))


@njit
def angle_between(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        out[i] = qangle(qmul(qconj(qnormalize(_q(a, i))), qnormalize(_q(b, i))))


@njit
def from_two_vectors(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        _put4(out, i, qfrom_two_vectors(_v(a, i), _v(b, i)))


@njit
def swing_twist(q, axis, swing_out, twist_out):  # type: ignore[no-untyped-def]
    for i in range(swing_out.shape[0]):
        st = qswing_twist(qnormalize(_q(q, i)), vnormalized(_v(axis, i)))
        _put4(swing_out, i, st[0])
        _put4(twist_out, i, st[1])
