"""Array kernels behind :mod:`kinema.rotation`: one loop each over a flat batch.

Every quaternion is read through :func:`qunit` and every direction through :func:`vtamed`: a row whose sum of
squares overflows (components near 1e154 and beyond) is scaled by a power of two (exact: the same rotation or
direction), so that :func:`~kinema._kernels.quat.qnormalize` and :func:`~kinema._kernels.quat.vnormalized`
do not divide by inf (a quaternion of components 1e200 normalised to zeros, and rotated nothing).  Any other
row is read as it is, after one comparison.
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
    qslerp,
    qswing_twist,
    qto_euler,
    qto_matrix,
    qto_rotvec,
    row3,
    row4,
    vnorm,
    vnormalized,
)


@njit(helper=True)
def _tame_exponent(m: float) -> int:
    """The power of two that brings the largest component ``m`` of a row into [0.5, 1); 0 when ``m`` is inf."""
    if math.isinf(m):
        return 0  # not a finite row: nothing to scale (and frexp's exponent of inf is unspecified)
    return math.frexp(m)[1]


@njit(helper=True)
def qscaled(q: tuple) -> tuple:  # type: ignore[type-arg]
    """``q * 2**-e`` with its largest component in [0.5, 1): exact, the same rotation, squares that cannot overflow."""
    e = _tame_exponent(max(abs(q[0]), abs(q[1]), abs(q[2]), abs(q[3])))
    return (math.ldexp(q[0], -e), math.ldexp(q[1], -e), math.ldexp(q[2], -e), math.ldexp(q[3], -e))


@njit(helper=True)
def qtamed(q: tuple) -> tuple:  # type: ignore[type-arg]
    """``q`` itself, or :func:`qscaled` when its sum of squares overflows."""
    if math.isinf(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]):
        return qscaled(q)
    return q


@njit(helper=True)
def is_zero4(q: tuple) -> bool:  # type: ignore[type-arg]
    """Whether all four components are zero: what ``qnormalize`` makes of a quaternion whose squares overflow
    (it never returns zero otherwise: near zero is the identity, NaN stays NaN)."""
    return q[3] == 0.0 and q[0] == 0.0 and q[1] == 0.0 and q[2] == 0.0


@njit(inline=True, helper=True)
def qunit(q: tuple) -> tuple:  # type: ignore[type-arg]
    """``q`` as a unit quaternion, of any finite size (near zero: the identity).

    ``qnormalize`` first, as every kernel does; only when its sum of squares overflowed (it gave zero) again
    on :func:`qscaled`, so the common case costs one comparison.
    """
    u = qnormalize(q)
    if is_zero4(u):
        return qnormalize(qscaled(q))
    return u


@njit(helper=True)
def vtamed(v: tuple) -> tuple:  # type: ignore[type-arg]
    """``(v * 2**-e, e)``: ``v`` as it is (``e = 0``), or, when its sum of squares overflows, scaled exactly by a
    power of two that brings its largest component into [0.5, 1)."""
    if not math.isinf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]):
        return v, 0
    e = _tame_exponent(max(abs(v[0]), abs(v[1]), abs(v[2])))
    return (math.ldexp(v[0], -e), math.ldexp(v[1], -e), math.ldexp(v[2], -e)), e


@njit
def mul(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qmul(qunit(row4(a, i)), qunit(row4(b, i))))


@njit
def normalize(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qunit(row4(q, i)))


@njit
def canonical(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qcanonical(qunit(row4(q, i))))


@njit
def rotate(q, v, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put3(out, i, qrotate(qunit(row4(q, i)), row3(v, i)))


@njit
def to_matrix(q, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        m = qto_matrix(qunit(row4(q, i)))
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
        put3(out, i, qto_rotvec(qunit(row4(q, i))))


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
        put3(out, i, qto_euler(qunit(row4(q, i)), i0, i1, i2, extrinsic))


@njit
def slerp(a, b, t, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qslerp(qunit(row4(a, i)), qunit(row4(b, i)), t[i]))


@njit
def nlerp(a, b, t, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qnlerp(qunit(row4(a, i)), qunit(row4(b, i)), t[i]))


@njit
def angle_between(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        out[i] = qangle(qmul(qconj(qunit(row4(a, i))), qunit(row4(b, i))))


@njit
def from_two_vectors(a, b, out):  # type: ignore[no-untyped-def]
    for i in range(out.shape[0]):
        put4(out, i, qfrom_two_vectors(vtamed(row3(a, i))[0], vtamed(row3(b, i))[0]))


@njit
def swing_twist(q, axis, swing_out, twist_out):  # type: ignore[no-untyped-def]
    for i in range(swing_out.shape[0]):
        st = qswing_twist(qunit(row4(q, i)), vnormalized(vtamed(row3(axis, i))[0]))
        put4(swing_out, i, st[0])
        put4(twist_out, i, st[1])
