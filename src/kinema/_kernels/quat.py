"""Scalar quaternion and vector helpers shared by every kernel.

Quaternions are tuples ``(x, y, z, w)`` (scalar last), vectors are tuples
``(x, y, z)``.  Working on tuples keeps the compiled kernels free of heap
allocation in their inner loops.  All rotations are active and compose as
Hamilton products: ``mul(a, b)`` applies ``b`` first, then ``a``.
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit

#: Below this norm a quaternion is treated as zero (``normalize`` returns the
#: identity instead of dividing by ~0).
QUAT_NORM_EPS = 1e-12

#: :func:`qnormalize`: when ``|q|^2`` is within this of 1 (a product of unit
#: quaternions, a rotation read back from a pose), ``1/|q|`` is taken as
#: ``1.5 - |q|^2 / 2``, one Newton step from 1.  Its error,
#: ``3/8 (|q|^2 - 1)^2 <= 4e-17``, is below a double's rounding, and it
#: spares a square root and a division (the solvers' sweeps and FK steps are
#: bound by those units).
QUAT_NEAR_UNIT_TOL = 1e-8

#: :func:`qfrom_two_vectors`: above this ``|a|^2 |b|^2`` the raw-vector form
#: could overflow (its squared norm is up to ``4 |a|^2 |b|^2``); such vectors
#: are normalised first.
HALFWAY_MAX_NORM2 = 1e300

#: At or below this length a vector carries no direction; rotations that would need it are the identity.
#: ``sqrt(SQUARES_SAFE_MIN)``: a shorter vector's squares lose digits to underflow, and its direction with
#: them.  Tied to float64's range, not to a unit: the solvers decide their degenerate cases (an end on its
#: joint, a zero-length bone) by tolerances relative to the chain's size, and an absolute length here (it
#: was 1e-12) took every direction of a rig in small units for none (two-bone and CCD reached nothing at
#: 1e-12 units).
VEC_NORM_EPS = 1e-145

#: ``from_two_vectors``: when the unit vectors' sum is shorter than this they
#: are taken as exactly opposite and a perpendicular axis is chosen.  1e-15
#: is a few ulps of a unit vector: any real miss (1e-14 rad and up) still
#: has a meaningful axis.
OPPOSITE_SINE_EPS = 1e-15


@njit(helper=True)
def row3(a, k):  # type: ignore[no-untyped-def]
    """Row ``k`` of an ``(n, 3)`` array as a vector tuple."""
    return (a[k, 0], a[k, 1], a[k, 2])


@njit(helper=True)
def row4(a, k):  # type: ignore[no-untyped-def]
    """Row ``k`` of an ``(n, 4)`` array as a quaternion tuple."""
    return (a[k, 0], a[k, 1], a[k, 2], a[k, 3])


@njit(helper=True)
def put3(a, k, v):  # type: ignore[no-untyped-def]
    """Write vector tuple ``v`` into row ``k`` of an ``(n, 3)`` array."""
    a[k, 0] = v[0]
    a[k, 1] = v[1]
    a[k, 2] = v[2]


@njit(helper=True)
def put4(a, k, q):  # type: ignore[no-untyped-def]
    """Write quaternion tuple ``q`` into row ``k`` of an ``(n, 4)`` array."""
    a[k, 0] = q[0]
    a[k, 1] = q[1]
    a[k, 2] = q[2]
    a[k, 3] = q[3]


@njit(helper=True)
def vdot(a: tuple, b: tuple) -> float:  # type: ignore[type-arg]
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(helper=True)
def vcross(a: tuple, b: tuple) -> tuple:  # type: ignore[type-arg]
    return (
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    )


@njit(helper=True)
def vnorm(a: tuple) -> float:  # type: ignore[type-arg]
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


@njit(inline=True)
def hypot(x: float, y: float) -> float:
    """``sqrt(x^2 + y^2)`` without undue overflow or underflow: libm's ``hypot``, compiled or not.

    numba compiles ``math.hypot`` to libm's function, but plain Python's ``math.hypot`` is CPython's own
    algorithm, which differs from libm's in the last bit for about 0.2% of inputs (measured), so the plain
    kernels (:mod:`kinema._kernels._tier`) would not give the compiled numbers.  ``np.hypot`` is libm's in
    both."""
    return np.hypot(x, y)


@njit(helper=True)
def vlength(x: float, y: float, z: float) -> float:
    """``|(x, y, z)|`` at any finite size: no square underflows or overflows (:func:`vnorm`'s squares vanish
    below 1e-154, so a rig measured in units that small would see every distance as 0)."""
    return hypot(hypot(x, y), z)


#: A sum of three squares at least this large (and finite) has lost nothing to underflow: its largest square is
#: above 3e-291, and a component whose square underflows (below 1.5e-154) is then under 1e-8 of the largest, its
#: square below rounding.
SQUARES_SAFE_MIN = 1e-290


@njit(helper=True)
def vmagnitude(x: float, y: float, z: float) -> float:
    """``|(x, y, z)|``: the root of the squares (the fast form, and its exact digits) when their sum is at least
    ``SQUARES_SAFE_MIN``, else :func:`vlength`: a length whose squares underflow to zero is still measured (a
    solver's reported error stays the true distance in tiny units).  Squares that overflow give inf, as the
    fast form does: the drivers' output checks then refuse the solve (coordinates near 1e154 and beyond, the
    documented limit, where a clip's millimetres are far below float64's spacing anyway)."""
    m2 = x * x + y * y + z * z
    if m2 >= SQUARES_SAFE_MIN:
        return math.sqrt(m2)
    return vlength(x, y, z)


@njit(helper=True)
def vnormalized(a: tuple) -> tuple:  # type: ignore[type-arg]
    """Unit vector along ``a``; the zero vector when ``|a| <= VEC_NORM_EPS``."""
    n = vnorm(a)
    if n <= VEC_NORM_EPS:
        return (0.0, 0.0, 0.0)
    inv = 1.0 / n  # one division, three products: within an ulp of a / n, and the divider is the bottleneck
    return (a[0] * inv, a[1] * inv, a[2] * inv)


@njit(helper=True)
def vperpendicular(u: tuple) -> tuple:  # type: ignore[type-arg]
    """A unit vector perpendicular to the unit vector ``u``.

    Crosses ``u`` with the basis axis along its smallest component, which is
    never close to parallel, so the result is well conditioned.
    """
    ax = abs(u[0])
    ay = abs(u[1])
    az = abs(u[2])
    if ax <= ay and ax <= az:
        c = (0.0, -u[2], u[1])  # u x (1,0,0)
    elif ay <= az:
        c = (u[2], 0.0, -u[0])  # u x (0,1,0)
    else:
        c = (-u[1], u[0], 0.0)  # u x (0,0,1)
    return vnormalized(c)


@njit(helper=True)
def qmul(a: tuple, b: tuple) -> tuple:  # type: ignore[type-arg]
    """Hamilton product ``a * b`` of xyzw quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


@njit(helper=True)
def qconj(q: tuple) -> tuple:  # type: ignore[type-arg]
    return (-q[0], -q[1], -q[2], q[3])


@njit(helper=True)
def qdot(a: tuple, b: tuple) -> float:  # type: ignore[type-arg]
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]


@njit(helper=True)
def qnormalize(q: tuple) -> tuple:  # type: ignore[type-arg]
    """Unit quaternion along ``q`` of any finite size; identity when ``|q| <= QUAT_NORM_EPS``."""
    n2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]
    if math.isinf(n2):
        # the squares overflowed (components near 1e154 and beyond): the same rotation scaled exactly by a power
        # of two (a non-finite q stays as it is and gives zeros, as NaN gives NaN)
        s = qscaled(q)
        return _qunit(s, s[0] * s[0] + s[1] * s[1] + s[2] * s[2] + s[3] * s[3])
    return _qunit(q, n2)


@njit(helper=True)
def tame_exponent(m: float) -> int:
    """The power of two that brings the largest component ``m`` of a row into [0.5, 1); 0 when ``m`` is inf."""
    if math.isinf(m):
        return 0  # not a finite row: nothing to scale (and frexp's exponent of inf is unspecified)
    return math.frexp(m)[1]


@njit(helper=True)
def qscaled(q: tuple) -> tuple:  # type: ignore[type-arg]
    """``q * 2**-e`` with its largest component in [0.5, 1): exact, the same rotation, squares that cannot overflow."""
    e = tame_exponent(max(abs(q[0]), abs(q[1]), abs(q[2]), abs(q[3])))
    return (math.ldexp(q[0], -e), math.ldexp(q[1], -e), math.ldexp(q[2], -e), math.ldexp(q[3], -e))


@njit(helper=True)
def _qunit(q: tuple, n2: float) -> tuple:  # type: ignore[type-arg]
    """:func:`qnormalize` of ``q`` whose sum of squares ``n2`` is finite."""
    if abs(n2 - 1.0) <= QUAT_NEAR_UNIT_TOL:
        # Nearly unit already (the common case): no square root (see QUAT_NEAR_UNIT_TOL).
        inv = 1.5 - 0.5 * n2
        return (q[0] * inv, q[1] * inv, q[2] * inv, q[3] * inv)
    n = math.sqrt(n2)
    if n <= QUAT_NORM_EPS:
        return (0.0, 0.0, 0.0, 1.0)
    inv = 1.0 / n  # one division, four products (see vnormalized)
    return (q[0] * inv, q[1] * inv, q[2] * inv, q[3] * inv)


@njit(helper=True)
def qcanonical(q: tuple) -> tuple:  # type: ignore[type-arg]
    """``q`` or ``-q``, whichever has ``w >= 0`` (ties broken on x, y, z)."""
    if q[3] > 0.0:
        return q
    if q[3] < 0.0:
        return (-q[0], -q[1], -q[2], -q[3])
    for k in range(3):
        if q[k] > 0.0:
            return q
        if q[k] < 0.0:
            return (-q[0], -q[1], -q[2], -q[3])
    return q


@njit(helper=True)
def qrotate(q: tuple, v: tuple) -> tuple:  # type: ignore[type-arg]
    """Rotate vector ``v`` by unit quaternion ``q``: ``v + 2w(u x v) + 2u x (u x v)``."""
    ux, uy, uz, w = q
    tx = 2.0 * (uy * v[2] - uz * v[1])
    ty = 2.0 * (uz * v[0] - ux * v[2])
    tz = 2.0 * (ux * v[1] - uy * v[0])
    return (
        v[0] + w * tx + uy * tz - uz * ty,
        v[1] + w * ty + uz * tx - ux * tz,
        v[2] + w * tz + ux * ty - uy * tx,
    )


@njit(helper=True)
def qfrom_axis_angle(axis: tuple, angle: float) -> tuple:  # type: ignore[type-arg]
    """Rotation by ``angle`` radians about ``axis`` (normalised here; a zero axis gives identity)."""
    u = vnormalized(axis)
    h = 0.5 * angle
    s = math.sin(h)
    if u[0] == 0.0 and u[1] == 0.0 and u[2] == 0.0:
        return (0.0, 0.0, 0.0, 1.0)
    return (u[0] * s, u[1] * s, u[2] * s, math.cos(h))


@njit(helper=True)
def qangle(q: tuple) -> float:  # type: ignore[type-arg]
    """Rotation angle of unit ``q`` in [0, pi]: ``2 atan2(|xyz|, |w|)``."""
    s = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2])
    return 2.0 * math.atan2(s, abs(q[3]))


@njit(helper=True)
def qto_rotvec(q: tuple) -> tuple:  # type: ignore[type-arg]
    """Rotation vector (axis * angle, angle in [0, pi]) of unit ``q``."""
    c = qcanonical(q)
    s = math.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2])
    angle = 2.0 * math.atan2(s, c[3])
    if s <= QUAT_NORM_EPS:
        # Small angle: angle / s -> 2 / w; use the series to stay exact.
        k = 2.0 / c[3] if c[3] != 0.0 else 0.0
    else:
        k = angle / s
    return (c[0] * k, c[1] * k, c[2] * k)


@njit(helper=True)
def qfrom_rotvec(r: tuple) -> tuple:  # type: ignore[type-arg]
    angle = vnorm(r)
    h = 0.5 * angle
    if angle <= 1e-6:
        # sin(h)/angle by its Taylor series: 1/2 - angle^2/48 (+O(angle^4) ~ 1e-26).
        k = 0.5 - angle * angle / 48.0
    else:
        k = math.sin(h) / angle
    return (r[0] * k, r[1] * k, r[2] * k, math.cos(h))


@njit(helper=True)
def qhalfway(c: tuple, sc2: float, nab: float, d: float) -> tuple:  # type: ignore[type-arg]
    """``normalize(c, nab + d)`` with ``c = a x b``, ``sc2 = |c|^2``, ``nab = |a||b|``, ``d = a . b``: the minimal
    rotation from ``a``'s direction to ``b``'s, well conditioned for ``d >= 0`` (up to 90 degrees).

    The norm is taken as ``sqrt(n2) * (1 / n2)``: the root and the division run side by side instead of one
    after the other (solver sweeps wait on this).
    """
    w = nab + d
    n2 = sc2 + w * w
    inv = math.sqrt(n2) * (1.0 / n2)
    return (c[0] * inv, c[1] * inv, c[2] * inv, w * inv)


@njit(helper=True)
def qfrom_two_vectors(a: tuple, b: tuple) -> tuple:  # type: ignore[type-arg]
    """Minimal rotation taking the direction of ``a`` to the direction of ``b``.

    Up to 90 degrees (``a . b >= 0``): ``normalize(a x b, |a||b| + a . b)``
    on the raw vectors, well conditioned there and the cheapest exact form
    (where ``|a|^2 |b|^2`` neither overflows nor underflows).
    Beyond (and where that product would), with unit ``u, v`` and their sum ``s = u + v``: the half-way form
    ``normalize(u x v, 1 + u . v)`` written as ``normalize(u x s, |s|^2 / 2)``
    (the same quaternion: ``u x v = u x s`` and ``1 + u . v = |s|^2 / 2``).
    Exact at every angle without trigonometry: near 180 degrees ``s`` is
    small but carries only its own rounding (~1e-16 absolute), the axis
    ``u x s`` is perpendicular to ``u`` by construction, and the angle
    ``2 atan2(|u x s|, |s|^2 / 2)`` is that of ``u`` and ``v``; a 1e-7 rad
    miss from opposite still rotates ``u`` onto ``v`` to ~1e-15 (the
    ``1 + u . v`` form loses ~1e-9 there).  Only truly opposite vectors
    (``|s| <= OPPOSITE_SINE_EPS``) take a stable perpendicular axis.  A vector
    no longer than ``VEC_NORM_EPS`` gives the identity.
    """
    a2 = a[0] * a[0] + a[1] * a[1] + a[2] * a[2]
    b2 = b[0] * b[0] + b[1] * b[1] + b[2] * b[2]
    if a2 <= VEC_NORM_EPS * VEC_NORM_EPS or b2 <= VEC_NORM_EPS * VEC_NORM_EPS:
        return (0.0, 0.0, 0.0, 1.0)  # a zero vector has no direction
    d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
    if d >= 0.0 and SQUARES_SAFE_MIN <= a2 * b2 <= HALFWAY_MAX_NORM2:
        # Up to 90 degrees: the half-way form on the raw vectors, normalize(a x b, |a||b| + a . b), the same
        # quaternion scaled by |a||b|.  Well conditioned here (|a||b| + a . b >= |a||b|), and two square
        # roots and one division instead of three and three.
        c = vcross(a, b)
        return qhalfway(c, c[0] * c[0] + c[1] * c[1] + c[2] * c[2], math.sqrt(a2 * b2), d)
    u = vnormalized(a)
    v = vnormalized(b)
    sx = u[0] + v[0]
    sy = u[1] + v[1]
    sz = u[2] + v[2]
    w = 0.5 * (sx * sx + sy * sy + sz * sz)
    if w <= 0.5 * OPPOSITE_SINE_EPS * OPPOSITE_SINE_EPS:
        # Exactly opposite: any perpendicular axis is a minimal rotation.
        p = vperpendicular(u)
        return (p[0], p[1], p[2], 0.0)
    c = vcross(u, (sx, sy, sz))
    inv = 1.0 / math.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2] + w * w)
    return (c[0] * inv, c[1] * inv, c[2] * inv, w * inv)


@njit(helper=True)
def qswing_twist(q: tuple, axis: tuple) -> tuple:  # type: ignore[type-arg]
    """Split unit ``q`` into ``(swing, twist)`` with ``q = swing * twist``.

    ``twist`` rotates about the unit ``axis``; ``swing`` about an axis
    perpendicular to it.  When ``q`` is a 180-degree turn about an axis
    perpendicular to ``axis`` the twist is undefined; it is the identity.
    """
    p = q[0] * axis[0] + q[1] * axis[1] + q[2] * axis[2]
    t = (axis[0] * p, axis[1] * p, axis[2] * p, q[3])
    n = math.sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2] + t[3] * t[3])
    if n <= QUAT_NORM_EPS:
        twist = (0.0, 0.0, 0.0, 1.0)  # degenerate: pure 180-degree swing
    else:
        twist = (t[0] / n, t[1] / n, t[2] / n, t[3] / n)
    swing = qmul(q, qconj(twist))
    return (swing, twist)


@njit(helper=True)
def qrest_twist(q_local: tuple, q_rest_local: tuple, axis_bone: tuple) -> tuple:  # type: ignore[type-arg]
    """``q_local`` with its twist about the bone replaced by the rest pose's (the ``twist="rest"`` policy).

    Writing ``q_local = q_rest_local * delta`` (``delta`` in the bone's own frame), ``delta``
    splits into ``swing * twist`` about the unit ``axis_bone`` (the bone's direction in its own
    frame, towards its child).  The result ``q_rest_local * swing`` points the bone exactly where
    ``q_local`` does, with no twist relative to rest, so it depends only on the bone's direction.
    """
    delta = qmul(qconj(q_rest_local), q_local)
    parts = qswing_twist(delta, axis_bone)
    return qnormalize(qmul(q_rest_local, parts[0]))


@njit(helper=True)
def twist_angle(twist: tuple, axis: tuple) -> float:  # type: ignore[type-arg]
    """Signed angle in (-pi, pi] of a twist quaternion about the unit ``axis``."""
    s = twist[0] * axis[0] + twist[1] * axis[1] + twist[2] * axis[2]
    w = twist[3]
    if w < 0.0:
        s = -s
        w = -w
    return 2.0 * math.atan2(s, w)


@njit(helper=True)
def qslerp(a: tuple, b: tuple, t: float) -> tuple:  # type: ignore[type-arg]
    """Shortest-path spherical interpolation; nlerp when the angle is tiny."""
    d = qdot(a, b)
    if d < 0.0:
        b = (-b[0], -b[1], -b[2], -b[3])
        d = -d
    if d > 0.9999999:
        # Angle below ~9e-4 rad: sin ratio ~ linear, nlerp is exact to ~1e-13.
        return qnormalize((a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]),
                           a[2] + t * (b[2] - a[2]), a[3] + t * (b[3] - a[3])))
    theta = math.acos(d)
    s = math.sin(theta)
    wa = math.sin((1.0 - t) * theta) / s
    wb = math.sin(t * theta) / s
    return qnormalize((wa * a[0] + wb * b[0], wa * a[1] + wb * b[1],
                       wa * a[2] + wb * b[2], wa * a[3] + wb * b[3]))


@njit(helper=True)
def qnlerp(a: tuple, b: tuple, t: float) -> tuple:  # type: ignore[type-arg]
    if qdot(a, b) < 0.0:
        b = (-b[0], -b[1], -b[2], -b[3])
    return qnormalize((a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]),
                       a[2] + t * (b[2] - a[2]), a[3] + t * (b[3] - a[3])))


@njit(helper=True)
def qto_matrix(q: tuple) -> tuple:  # type: ignore[type-arg]
    """Row-major 3x3 rotation matrix of unit ``q`` as a 9-tuple."""
    x, y, z, w = q
    xx = x * x
    yy = y * y
    zz = z * z
    xy = x * y
    xz = x * z
    yz = y * z
    wx = w * x
    wy = w * y
    wz = w * z
    return (
        1.0 - 2.0 * (yy + zz), 2.0 * (xy - wz), 2.0 * (xz + wy),
        2.0 * (xy + wz), 1.0 - 2.0 * (xx + zz), 2.0 * (yz - wx),
        2.0 * (xz - wy), 2.0 * (yz + wx), 1.0 - 2.0 * (xx + yy),
    )


@njit(helper=True)
def qfrom_matrix(m00: float, m01: float, m02: float, m10: float, m11: float,
                 m12: float, m20: float, m21: float, m22: float) -> tuple:  # type: ignore[type-arg]
    """Unit quaternion of a rotation matrix (Shepperd's method, largest pivot)."""
    tr = m00 + m11 + m22
    if tr >= m00 and tr >= m11 and tr >= m22:
        s = math.sqrt(1.0 + tr) * 2.0
        q = ((m21 - m12) / s, (m02 - m20) / s, (m10 - m01) / s, 0.25 * s)
    elif m00 >= m11 and m00 >= m22:
        s = math.sqrt(max(0.0, 1.0 + m00 - m11 - m22)) * 2.0
        q = (0.25 * s, (m01 + m10) / s, (m02 + m20) / s, (m21 - m12) / s)
    elif m11 >= m22:
        s = math.sqrt(max(0.0, 1.0 + m11 - m00 - m22)) * 2.0
        q = ((m01 + m10) / s, 0.25 * s, (m12 + m21) / s, (m02 - m20) / s)
    else:
        s = math.sqrt(max(0.0, 1.0 + m22 - m00 - m11)) * 2.0
        q = ((m02 + m20) / s, (m12 + m21) / s, 0.25 * s, (m10 - m01) / s)
    return qcanonical(qnormalize(q))


@njit(helper=True)
def qfrom_euler(a0: float, a1: float, a2: float, i: int, j: int, k: int, extrinsic: bool) -> tuple:  # type: ignore[type-arg]
    """Quaternion of Euler angles about axes ``i, j, k`` (0=x, 1=y, 2=z).

    Intrinsic (scipy's upper-case ``"XYZ"``): ``q = R_i(a0) R_j(a1) R_k(a2)``.
    Extrinsic (lower-case ``"xyz"``): ``q = R_k(a2) R_j(a1) R_i(a0)``.
    """
    q0 = _elementary(i, a0)
    q1 = _elementary(j, a1)
    q2 = _elementary(k, a2)
    if extrinsic:
        return qmul(q2, qmul(q1, q0))
    return qmul(q0, qmul(q1, q2))


@njit(helper=True)
def _elementary(axis: int, angle: float) -> tuple:  # type: ignore[type-arg]
    h = 0.5 * angle
    s = math.sin(h)
    c = math.cos(h)
    if axis == 0:
        return (s, 0.0, 0.0, c)
    if axis == 1:
        return (0.0, s, 0.0, c)
    return (0.0, 0.0, s, c)


#: Second Euler angle within this of 0 or pi is gimbal lock: the third angle
#: is set to zero and the first absorbs the whole rotation.
EULER_GIMBAL_EPS = 1e-7


@njit(helper=True)
def qto_euler(q: tuple, i: int, j: int, k: int, extrinsic: bool) -> tuple:  # type: ignore[type-arg]
    """Euler angles of unit ``q`` for axes ``i, j, k`` (the convention of ``qfrom_euler``).

    Direct quaternion method of Bernardes and Viollet (2022), as used by
    scipy.  Angles wrap to [-pi, pi); the middle one is in [0, pi] for proper
    Euler sequences and [-pi/2, pi/2] for Tait-Bryan ones.
    """
    if not extrinsic:
        t = i
        i = k
        k = t
    symmetric = i == k
    if symmetric:
        k = 3 - i - j
    sign = float((i - j) * (j - k) * (k - i) // 2)
    if symmetric:
        a = q[3]
        b = q[i]
        c = q[j]
        d = q[k] * sign
    else:
        a = q[3] - q[j]
        b = q[i] + q[k] * sign
        c = q[j] + q[3]
        d = q[k] * sign - q[i]
    half_sum = math.atan2(b, a)
    half_diff = math.atan2(d, c)
    mid = 2.0 * math.atan2(hypot(c, d), hypot(a, b))
    # e[0], e[2] in the extrinsic slot order; intrinsic swaps the roles below.
    e0 = 0.0
    e2 = 0.0
    if abs(mid) <= EULER_GIMBAL_EPS:
        e0 = 2.0 * half_sum  # gimbal lock at 0: one free angle, put in slot 0
    elif abs(mid - math.pi) <= EULER_GIMBAL_EPS:
        e0 = 2.0 * half_diff * (-1.0 if extrinsic else 1.0)  # gimbal lock at pi
    elif extrinsic:
        e0 = half_sum - half_diff
        e2 = half_sum + half_diff
    else:
        e2 = half_sum - half_diff
        e0 = half_sum + half_diff
    if not symmetric:
        if extrinsic:
            e2 = e2 * sign
        else:
            e0 = e0 * sign
        mid = mid - 0.5 * math.pi
    return (_wrap(e0), _wrap(mid), _wrap(e2))


@njit(helper=True)
def _wrap(a: float) -> float:
    """Wrap an angle to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi
