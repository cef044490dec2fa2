"""Array kernels behind :mod:`kinema.rotation`: one loop each over a flat batch."""

from __future__ import annotations

from ._jit import njit
from .quat import (
    put3,
    put4,
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
    row3,
    row4,
    vnormalized,
)


@njit
def mul(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qmul(qnormalize(row4(a, i)), qnormalize(row4(b, i))))


@njit
def normalize(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qnormalize(row4(q, i)))


@njit
def canonical(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qcanonical(qnormalize(row4(q, i))))


@njit
def rotate(q, v, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put3(out, i, qrotate(qnormalize(row4(q, i)), row3(v, i)))


@njit
def to_matrix(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        m = qto_matrix(qnormalize(row4(q, i)))
        for a in range(3):
            for b in range(3):
                out[i, a, b] = m[3 * a + b]


@njit
def from_matrix(m, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qfrom_matrix(m[i, 0, 0], m[i, 0, 1], m[i, 0, 2], m[i, 1, 0], m[i, 1, 1],
                                   m[i, 1, 2], m[i, 2, 0], m[i, 2, 1], m[i, 2, 2]))


@njit
def from_axis_angle(axis, angle, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qfrom_axis_angle(row3(axis, i), angle[i]))


@njit
def to_rotvec(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put3(out, i, qto_rotvec(qnormalize(row4(q, i))))


@njit
def from_rotvec(r, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qfrom_rotvec(row3(r, i)))


@njit
def from_euler(angles, i0, i1, i2, extrinsic, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qfrom_euler(angles[i, 0], angles[i, 1], angles[i, 2], i0, i1, i2, extrinsic))


@njit
def to_euler(q, i0, i1, i2, extrinsic, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put3(out, i, qto_euler(qnormalize(row4(q, i)), i0, i1, i2, extrinsic))


@njit
def slerp(a, b, t, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qslerp(qnormalize(row4(a, i)), qnormalize(row4(b, i)), t[i]))


@njit
def nlerp(a, b, t, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qnlerp(qnormalize(row4(a, i)), qnormalize(row4(b, i)), t[i]))


@njit
def angle_between(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        out[i] = qangle(qmul(qconj(qnormalize(row4(a, i))), qnormalize(row4(b, i))))


@njit
def from_two_vectors(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qfrom_two_vectors(row3(a, i), row3(b, i)))


@njit
def swing_twist(q, axis, swing_out, twist_out):  # type: ignore[no-untyped-def]
    for i in range(swing_out.shape[0]):
        st = qswing_twist(qnormalize(row4(q, i)), vnormalized(row3(axis, i)))
        put4(swing_out, i, st[0])
        put4(twist_out, i, st[1])
