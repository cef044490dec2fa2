"""Array kernels behind :mod:`kinema.rotation`: one loop each over a flat batch.

Every quaternion is read through :func:`~kinema._kernels.quat.qnormalize` (of any finite size: a quaternion
whose sum of squares overflows, components near 1e154 and beyond, is scaled exactly by a power of two first)
and every direction through :func:`vtamed` (the same for :func:`~kinema._kernels.quat.vnormalized`).
"""

from __future__ import annotations

import math

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
    qscaled,
    qslerp,
    qswing_twist,
    qto_euler,
    qto_matrix,
    qto_rotvec,
    row3,
    row4,
    tame_exponent,
    vnorm,
    vnormalized,
)


@njit(helper=True)
def qtamed(q: tuple) -> tuple:  # type: ignore[type-arg]
    """``q`` itself, or :func:`qscaled` when its sum of squares overflows."""
    if math.isinf(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]):
        return qscaled(q)
    return q


@njit(helper=True)
def vtamed(v: tuple) -> tuple:  # type: ignore[type-arg]
    """``(v * 2**-e, e)``: ``v`` as it is (``e = 0``), or, when its sum of squares overflows, scaled exactly by a
    power of two that brings its largest component into [0.5, 1)."""
    if not math.isinf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]):
        return v, 0
    e = tame_exponent(max(abs(v[0]), abs(v[1]), abs(v[2])))
    return (math.ldexp(v[0], -e), math.ldexp(v[1], -e), math.ldexp(v[2], -e)), e


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
        put4(out, i, qfrom_axis_angle(vtamed(row3(axis, i))[0], angle[i]))


@njit
def to_rotvec(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put3(out, i, qto_rotvec(qnormalize(row4(q, i))))


@njit
def from_rotvec(r, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        v, e = vtamed(row3(r, i))
        if e == 0:
            put4(out, i, qfrom_rotvec(v))
        else:
            # |r| near 1e154 and beyond: the angle is |v| 2**e (exact scaling), the axis v's direction
            n = vnorm(v)
            if math.frexp(n)[1] + e > 1024:  # longer than the largest float: no angle (the caller refuses it)
                put4(out, i, (math.nan, math.nan, math.nan, math.nan))
            else:
                put4(out, i, qfrom_axis_angle(v, math.ldexp(n, e)))


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
        put4(out, i, qfrom_two_vectors(vtamed(row3(a, i))[0], vtamed(row3(b, i))[0]))


@njit
def swing_twist(q, axis, swing_out, twist_out):  # type: ignore[no-untyped-def]
    for i in range(swing_out.shape[0]):
        st = qswing_twist(qnormalize(row4(q, i)), vnormalized(vtamed(row3(axis, i))[0]))
        put4(swing_out, i, st[0])
        put4(twist_out, i, st[1])
