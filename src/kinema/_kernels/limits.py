"""Joint-limit kernels shared by every solver.

A limit is packed as an int *kind* and a float parameter row of length
``LIMIT_PARAMS`` (see :mod:`kinema.limits` for the public objects and the
packing).  Limits act on the joint's **rest-relative** local rotation
``q_rel = inverse(q_rest) * q_local`` (so ``q_local = q_rest * q_rel``, and
limit axes are expressed in the joint's rest frame).

Parameter rows (unused slots are zero):

* ``LIMIT_HINGE``: ``[ax, ay, az, min_angle, max_angle]``; ``a`` is a unit axis.
* ``LIMIT_SWING_TWIST``: ``[ax, ay, az, e1x, e1y, e1z, swing_1, swing_2,
  twist_min, twist_max]``; ``a`` the unit twist axis, ``e1`` a unit vector
  perpendicular to it; ``swing_1`` bounds the swing rotation about ``e1``,
  ``swing_2`` about ``e2 = a x e1`` (an elliptical cone; equal for a circle).
* ``LIMIT_EULER``: ``[i, j, k, extrinsic, min0, min1, min2, max0, max1,
  max2]``; axis indices 0/1/2 = x/y/z as in :func:`kinema._kernels.quat.qfrom_euler`.

Every function here is scalar (tuples in, tuples out) and allocation-free.
"""

from __future__ import annotations

import math

from ._jit import njit
from .quat import (
    EULER_GIMBAL_EPS,
    qangle,
    qcanonical,
    qconj,
    qdot,
    qfrom_axis_angle,
    qfrom_euler,
    qmul,
    qnormalize,
    qswing_twist,
    qto_euler,
    twist_angle,
    vcross,
)
from .rotation import qtamed

LIMIT_NONE = 0
LIMIT_HINGE = 1
LIMIT_SWING_TWIST = 2
LIMIT_EULER = 3

#: Floats per packed parameter row.
LIMIT_PARAMS = 12

#: A rotation within this many radians of its range counts as inside and is
#: left untouched.  Without it a joint clamped exactly onto a bound would be
#: re-clamped by one ulp on the next pass (and counted as a hit every time).
LIMIT_SLACK = 1e-12

#: :func:`_euler_near_lock` counts a middle angle within this of its singular value as gimbal lock: twice
#: ``EULER_GIMBAL_EPS``, so that every triple ``qto_euler`` snapped (its test rounds differently, by an ulp)
#: is read as one; a triple within it that was not snapped is exact, and its ``u`` is that of the rotation.
EULER_LOCK_BAND = 2.0 * EULER_GIMBAL_EPS

#: Near gimbal lock (the middle angle ``delta`` from its singular value, outside ``EULER_LOCK_BAND``) the outer
#: angles ``a``, ``c`` that ``qto_euler`` reads from a quaternion are each off by up to about ``eps / delta``
#: along the lock direction ``(a + t, c + sigma t)`` (only ``a - sigma c`` is well conditioned): measured at most
#: 1.6 ``eps / delta`` over the 24 sequences, so a rotation built exactly on an outer bound with its middle angle
#: 1e-6 rad from the lock read up to 7e-11 rad outside (above ``LIMIT_SLACK``) and was clamped again.  The Euler
#: measure therefore lets the pair slide along that direction by up to ``EULER_SLIDE_ULPS * eps / delta`` (ten
#: times the reading error) before it counts an excess.  Such a slide turns the rotation by about ``|t| delta``,
#: at most ``EULER_SLIDE_ULPS * eps`` (4e-15 rad): the rotations counted inside are those of the box to that.
EULER_SLIDE_ULPS = 16.0

#: The slide applies only within this of a lock; farther out the reading error (below 1.6 eps / 1e-2 = 4e-14
#: rad) is far inside ``LIMIT_SLACK``, and the measure is the plain per-axis one, bit for bit.
EULER_SLIDE_ZONE = 1e-2

_EPS = 2.220446049250313e-16  # float64 machine epsilon

#: A swing below this angle (radians) has no direction: the elliptical
#: bound is then irrelevant (the swing is inside any cone).
SWING_DIR_EPS = 1e-15

_TWO_PI = 2.0 * math.pi

#: A swing-twist clamp with a twist range narrower than the full circle leaves its swing at most ``pi`` minus
#: this (radians).  At a half-turn swing the split ``q = swing * twist`` is undefined (``qswing_twist`` reads the
#: twist of a 180-degree turn about an axis perpendicular to ``axis`` as zero, whatever twist built it), and
#: within ``delta`` of it the twist read back from a rotation is off by up to about ``8 eps / delta`` (measured,
#: random rest rotations included): a clamp onto a twist bound there read as far outside as it had moved the twist
#: at ``delta = 0``, and up to 2e-7 rad outside at ``delta = 1e-9``, and a second clamp moved it again.  At this
#: margin the reading error is below 2e-13 rad, a fifth of ``LIMIT_SLACK``: the clamp lands inside and a second
#: clamp leaves it alone.
SWING_HALF_TURN_MARGIN = 1e-2


@njit(helper=True)
def wrap_near(a: float, center: float) -> float:
    """``a`` plus a multiple of 2 pi, in ``[center - pi, center + pi)``."""
    return center + ((a - center + math.pi) % _TWO_PI - math.pi)


@njit(helper=True)
def clamp_angle(a: float, lo: float, hi: float) -> float:
    """Clamp angle ``a`` into ``[lo, hi]`` going the short way round the circle.

    ``a`` is first taken modulo 2 pi nearest the middle of the range, so an
    angle just past +180 degrees is compared as just past -180 (no flip).
    Returns ``a`` itself (not a wrapped copy) when it is inside.
    """
    c = 0.5 * (lo + hi)
    w = wrap_near(a, c)
    if w < lo:
        return lo
    if w > hi:
        return hi
    return a


@njit(helper=True)
def _angle_excess(a: float, lo: float, hi: float) -> float:
    """How far (radians, >= 0) angle ``a`` lies outside ``[lo, hi]``, modulo 2 pi."""
    w = wrap_near(a, 0.5 * (lo + hi))
    if w < lo:
        return lo - w
    if w > hi:
        return w - hi
    return 0.0


@njit(borrows=True, helper=True)
def _swing_bound(params, n1: float, n2: float) -> float:  # type: ignore[no-untyped-def]
    """Largest swing angle along unit direction ``(n1, n2)`` of the (elliptical) cone.

    Radial bound of the ellipse ``(t1/s1)^2 + (t2/s2)^2 <= 1``:
    ``s1 s2 / sqrt((n1 s2)^2 + (n2 s1)^2)``.  Both semi-axes zero: a zero cone.
    """
    s1 = params[6]
    s2 = params[7]
    den = math.sqrt((n1 * s2) * (n1 * s2) + (n2 * s1) * (n2 * s1))
    if den <= 0.0:
        return 0.0  # both semi-axes are zero (or the direction hits a zero one exactly)
    return s1 * s2 / den


@njit(borrows=True, helper=True)
def _swing_parts(params, swing):  # type: ignore[no-untyped-def]
    """``(angle, n1, n2)`` of a swing quaternion: its angle and unit direction in the (e1, e2) plane."""
    ang = qangle(swing)
    # the sign with w >= 0; at w == 0 (a half-turn swing: s and -s are one rotation) the tie-break of qcanonical,
    # so that q and -q give the same direction
    sx, sy, sz, _ = qcanonical(swing)
    e1 = (params[3], params[4], params[5])
    e2 = vcross((params[0], params[1], params[2]), e1)
    c1 = sx * e1[0] + sy * e1[1] + sz * e1[2]
    c2 = sx * e2[0] + sy * e2[1] + sz * e2[2]
    r = math.sqrt(c1 * c1 + c2 * c2)
    if r <= SWING_DIR_EPS:
        return ang, 1.0, 0.0  # no swing: any direction will do, the angle is ~0
    return ang, c1 / r, c2 / r


@njit(helper=True)
def _euler_solutions(q, i: int, j: int, k: int, extrinsic: bool):  # type: ignore[no-untyped-def]
    """Both Euler triples of ``q`` for the sequence: the principal one and its twin.

    Tait-Bryan (``i != k``): ``(a + pi, pi - b, c + pi)``; proper Euler
    (``i == k``): ``(a + pi, -b, c + pi)``.  Both give the same rotation.
    Read from ``q``'s canonical sign, so ``q`` and ``-q`` give the same
    triples to the bit (``qto_euler``'s half-angle ``atan2`` shifts by pi
    with the sign and rounds differently).
    """
    e = qto_euler(qcanonical(q), i, j, k, extrinsic)
    if i == k:
        f = (e[0] + math.pi, -e[1], e[2] + math.pi)
    else:
        f = (e[0] + math.pi, math.pi - e[1], e[2] + math.pi)
    return e, f


@njit(borrows=True, helper=True)
def _euler_excess(params, e, sigma: float, tau: float) -> float:  # type: ignore[no-untyped-def]
    """The largest per-axis excess of the triple ``e``, after sliding its outer angles to ``(a + t, c + sigma t)``
    by the ``|t| <= tau`` that makes it smallest (``EULER_SLIDE_ULPS``; ``tau = 0``: no slide)."""
    xb = _angle_excess(e[1], params[5], params[8])
    if tau <= 0.0:
        xa = _angle_excess(e[0], params[4], params[7])
        xc = _angle_excess(e[2], params[6], params[9])
    else:
        # the shifts t that bring a + t into its range, and c + sigma t into its own, as intervals of t
        wa = wrap_near(e[0], 0.5 * (params[4] + params[7]))
        al = params[4] - wa
        ah = params[7] - wa
        wc = wrap_near(e[2], 0.5 * (params[6] + params[9]))
        cl = params[6] - wc
        ch = params[9] - wc
        if sigma < 0.0:
            cl, ch = -ch, -cl
        # max(distance of t from each interval) is convex in t: least on their overlap (or the middle of the gap
        # between them); the best t within [-tau, tau] is the point of that set nearest 0, clamped to it
        lo = al if al > cl else cl
        hi = ah if ah < ch else ch
        if lo > hi:
            t = 0.5 * (lo + hi)
        elif lo > 0.0:
            t = lo
        elif hi < 0.0:
            t = hi
        else:
            t = 0.0
        t = min(max(t, -tau), tau)
        xa = max(al - t, t - ah, 0.0)
        xc = max(cl - t, t - ch, 0.0)
    m = xa if xa > xb else xb
    return m if m > xc else xc


@njit(helper=True)
def _euler_near_lock(i: int, j: int, k: int, extrinsic: bool, b: float):  # type: ignore[no-untyped-def]
    """``(delta, sigma)`` for the middle angle ``b`` of :func:`~kinema._kernels.quat.qto_euler` (or its twin's).

    ``delta`` (>= 0) is how far ``b`` lies from its nearest singular value: 0 or pi for proper Euler sequences,
    +-pi/2 for Tait-Bryan ones.  Within ``EULER_LOCK_BAND`` of it the rotation is at gimbal lock
    (``qto_euler`` puts the whole turn in the first angle there) and fixes only ``u = a - sigma c`` of the
    outer angles: ``(a + t, b, c + sigma t)`` is the same rotation for every ``t``.  ``sigma`` is -1 at 0 and
    +1 at pi for proper Euler sequences; for Tait-Bryan ones the sign of ``b`` times the parity of
    ``(i, j, k)`` (+1 cyclic), negated for intrinsic sequences (the tests check it on rotations built at the
    lock, for all 24 sequences).
    """
    if i == k:
        if abs(b) <= 0.5 * math.pi:
            return abs(b), -1.0
        return math.pi - abs(b), 1.0
    p = float((i - j) * (j - k) * (k - i) // 2)
    if not extrinsic:
        p = -p
    return 0.5 * math.pi - abs(b), (p if b >= 0.0 else -p)


@njit(borrows=True, helper=True)
def _lock_range(params, sigma: float):  # type: ignore[no-untyped-def]
    """``(lo, hi)``: the values ``a - sigma c`` takes over the box's first and third ranges."""
    if sigma > 0.0:
        return params[4] - params[9], params[7] - params[6]
    return params[4] + params[6], params[7] + params[9]


@njit(borrows=True, helper=True)
def _lock_excess(params, e, f, sigma: float) -> float:  # type: ignore[no-untyped-def]
    """:func:`_euler_excess` of a rotation at gimbal lock: it is inside when some ``(a, c)`` of the box gives its
    ``u = a - sigma c`` (the twin ``f`` has the same ``u``, modulo 2 pi) and the middle angle of ``e`` or of ``f``
    is in range, whatever split ``qto_euler`` picked.  (A range ending at the lock from the side ``qto_euler``
    does not read, ``[x, 0]`` for ``"ZXZ"``, holds the twin's middle angle only.)"""
    lo, hi = _lock_range(params, sigma)
    xu = 0.0 if hi - lo >= _TWO_PI else _angle_excess(e[0] - sigma * e[2], lo, hi)
    xb = _angle_excess(e[1], params[5], params[8])
    xf = _angle_excess(f[1], params[5], params[8])
    if xf < xb:
        xb = xf
    return xu if xu > xb else xb


@njit(borrows=True, helper=True)
def _euler_box_excess(params, q):  # type: ignore[no-untyped-def]
    """``(excess, e, f, lock, sigma)``: how far (radians) ``q`` lies outside the Euler box, its two triples, and
    whether it is at gimbal lock (:func:`_euler_near_lock`).  Off the lock the better of the two triples counts
    (near it, within ``EULER_SLIDE_ZONE``, after the slide of ``EULER_SLIDE_ULPS``); at the lock only ``u``
    and the better of the two middle angles do (:func:`_lock_excess`)."""
    i = int(params[0])
    j = int(params[1])
    k = int(params[2])
    ext = params[3] != 0.0
    e, f = _euler_solutions(q, i, j, k, ext)
    delta, sigma = _euler_near_lock(i, j, k, ext, e[1])
    if delta <= EULER_LOCK_BAND:
        return _lock_excess(params, e, f, sigma), e, f, True, sigma
    tau = EULER_SLIDE_ULPS * _EPS / delta if delta < EULER_SLIDE_ZONE else 0.0
    a = _euler_excess(params, e, sigma, tau)
    b = _euler_excess(params, f, sigma, tau)
    return (a if a < b else b), e, f, False, sigma


@njit(borrows=True, helper=True)
def limit_violation(kind: int, params, q_rel) -> float:  # type: ignore[no-untyped-def]
    """How far (radians, >= 0) the rest-relative rotation ``q_rel`` lies outside the limit.

    Hinge: the larger of the off-axis (swing) angle and the angle outside
    ``[min, max]``.  Swing-twist: the larger of the swing beyond the cone
    (along the swing's own direction) and the twist outside its range.
    Euler: the smaller, over the two Euler triples, of the largest per-axis
    excess.  0 when inside (and for ``LIMIT_NONE``).
    """
    q = qnormalize(q_rel)
    if kind == LIMIT_HINGE:
        axis = (params[0], params[1], params[2])
        sw, tw = qswing_twist(q, axis)
        off = qangle(sw)
        ex = _angle_excess(twist_angle(tw, axis), params[3], params[4])
        return off if off > ex else ex
    if kind == LIMIT_SWING_TWIST:
        axis = (params[0], params[1], params[2])
        sw, tw = qswing_twist(q, axis)
        ang, n1, n2 = _swing_parts(params, sw)
        bound = _swing_bound(params, n1, n2)
        sx = ang - bound if ang > bound else 0.0
        ex = _angle_excess(twist_angle(tw, axis), params[8], params[9])
        return sx if sx > ex else ex
    if kind == LIMIT_EULER:
        return _euler_box_excess(params, q)[0]
    return 0.0


@njit(borrows=True, helper=True)
def apply_limit(kind: int, params, q_rel):  # type: ignore[no-untyped-def]
    """Clamp the rest-relative rotation ``q_rel`` into the limit: ``(q_rel_out, hit)``.

    ``hit`` is False and ``q_rel`` comes back unchanged (bit for bit) when it
    is inside (within ``LIMIT_SLACK``).  Otherwise:

    * hinge: the swing about axes off the hinge axis is dropped (swing-twist
      split, keep the twist) and the twist angle is clamped to the range;
    * swing-twist: ``q = swing * twist``; the swing angle is scaled down
      radially onto the (elliptical) cone, the twist clamped to its range;
      with a twist range narrower than the full circle the swing of the
      result is at most ``pi - SWING_HALF_TURN_MARGIN`` (near a half-turn
      swing the twist is undefined or cannot be read back precisely);
    * Euler: see :func:`_clamp_euler`.

    The result has the sign of the input (``dot >= 0``), so a clamped
    quaternion does not flip hemisphere from frame to frame.  Never NaN for
    any finite input: every division is guarded.
    """
    if kind == LIMIT_NONE:
        return q_rel, False
    q = qnormalize(q_rel)
    if kind == LIMIT_HINGE:
        axis = (params[0], params[1], params[2])
        sw, tw = qswing_twist(q, axis)
        ang = twist_angle(tw, axis)
        lo = params[3]
        hi = params[4]
        if qangle(sw) <= LIMIT_SLACK and _angle_excess(ang, lo, hi) <= LIMIT_SLACK:
            return q_rel, False
        out = qfrom_axis_angle(axis, clamp_angle(ang, lo, hi))
    elif kind == LIMIT_SWING_TWIST:
        axis = (params[0], params[1], params[2])
        sw, tw = qswing_twist(q, axis)
        ang, n1, n2 = _swing_parts(params, sw)
        bound = _swing_bound(params, n1, n2)
        tang = twist_angle(tw, axis)
        lo = params[8]
        hi = params[9]
        swing_out = ang > bound + LIMIT_SLACK
        twist_out = _angle_excess(tang, lo, hi) > LIMIT_SLACK
        if not swing_out and not twist_out:
            return q_rel, False
        swing_ang = bound if swing_out else ang
        rebuild = swing_out
        if hi - lo < _TWO_PI and swing_ang > math.pi - SWING_HALF_TURN_MARGIN:
            # degenerate: a swing (nearly) a half turn, whose twist is undefined (or read back too imprecisely to
            # be held to a bound, see SWING_HALF_TURN_MARGIN): pull the swing back along its own direction so
            # that the twist clamped below is the one the result reads (a free twist needs none of this)
            swing_ang = math.pi - SWING_HALF_TURN_MARGIN
            rebuild = True
        if rebuild:
            e1 = (params[3], params[4], params[5])
            e2 = vcross(axis, e1)
            d = (n1 * e1[0] + n2 * e2[0], n1 * e1[1] + n2 * e2[1], n1 * e1[2] + n2 * e2[2])
            sw = qfrom_axis_angle(d, swing_ang)
        if twist_out:
            tw = qfrom_axis_angle(axis, clamp_angle(tang, lo, hi))
        out = qmul(sw, tw)
    elif kind == LIMIT_EULER:
        out = _clamp_euler(params, q)
        if qdot(out, out) == 0.0:
            return q_rel, False  # marker: one of the Euler triples is inside
    else:
        return q_rel, False
    if qdot(out, q_rel) < 0.0:
        out = (-out[0], -out[1], -out[2], -out[3])
    return out, True


@njit(borrows=True, helper=True)
def _clamp_euler(params, q):  # type: ignore[no-untyped-def]
    """Clamp ``q`` into an Euler box without flips near +-180 degrees.

    1. Take both Euler triples of ``q`` (:func:`_euler_solutions`).
    2. Compare each angle modulo 2 pi nearest the middle of its range
       (:func:`wrap_near`): 179 and -179 degrees are 2 degrees apart.
    3. If either triple is inside the box, the rotation is inside: return the
       zero quaternion as a marker (the caller keeps ``q`` untouched).
    4. At gimbal lock only the middle angle and ``u = a - sigma c`` matter
       (:func:`_euler_near_lock`).  Take the triple (``e`` or its twin ``f``)
       whose middle angle is nearer its range and clamp that angle; clamp
       ``u`` into the range the box gives it and split it into an ``(a, c)``
       of the box.  With the middle angle in range this is the smallest turn
       that brings ``q`` inside (a triple clamped per axis would leave the
       rotation outside or move one that was inside); the result is inside
       whether or not its middle angle is still at the lock.
    5. Otherwise clamp each triple per axis the short way round
       (:func:`clamp_angle`), rebuild both, and return the one closer to
       ``q`` (largest ``|dot|``).  Near the lock its outer angles read back
       within the slide the measure allows (``EULER_SLIDE_ULPS``).
    """
    i = int(params[0])
    j = int(params[1])
    k = int(params[2])
    ext = params[3] != 0.0
    excess, e, f, lock, sigma = _euler_box_excess(params, q)
    if excess <= LIMIT_SLACK:
        return (0.0, 0.0, 0.0, 0.0)
    if lock:
        t = e
        if _angle_excess(f[1], params[5], params[8]) < _angle_excess(e[1], params[5], params[8]):
            t = f  # the twin's middle angle is nearer the range (the range ends at the lock on the twin's side)
        b = clamp_angle(t[1], params[5], params[8])
        lo, hi = _lock_range(params, sigma)
        u = clamp_angle(t[0] - sigma * t[2], lo, hi)
        a = clamp_angle(u + sigma * clamp_angle(t[2], params[6], params[9]), params[4], params[7])
        c = clamp_angle(wrap_near(sigma * (a - u), 0.5 * (params[6] + params[9])), params[6], params[9])
        return qfrom_euler(a, b, c, i, j, k, ext)
    qe = qfrom_euler(clamp_angle(e[0], params[4], params[7]), clamp_angle(e[1], params[5], params[8]),
                     clamp_angle(e[2], params[6], params[9]), i, j, k, ext)
    qf = qfrom_euler(clamp_angle(f[0], params[4], params[7]), clamp_angle(f[1], params[5], params[8]),
                     clamp_angle(f[2], params[6], params[9]), i, j, k, ext)
    if abs(qdot(qe, q)) >= abs(qdot(qf, q)):
        return qe
    return qf


@njit(borrows=True)
def apply_limit_local(kind: int, params, rest, q_local):  # type: ignore[no-untyped-def]
    """:func:`apply_limit` on a local rotation: ``q_rel = rest^-1 q_local``, back as ``rest * q_rel'``.

    Returns ``(q_local_out, hit)``; ``q_local`` itself when not hit.
    """
    if kind == LIMIT_NONE:
        return q_local, False
    q_rel = qmul(qconj(rest), q_local)
    out, hit = apply_limit(kind, params, q_rel)
    if not hit:
        return q_local, False
    return qmul(rest, out), True


@njit
def clamp_many(kind, params, rest, q_local, out, hit):  # type: ignore[no-untyped-def]
    """Array form of :func:`apply_limit_local` for :mod:`kinema.limits` methods.

    ``rest (Nr,4)`` with ``Nr`` in {1, N}, ``q_local (N,4)``, ``out (N,4)``, ``hit (N,)``.
    """
    nr = rest.shape[0]
    for n in range(q_local.shape[0]):
        r = (rest[n % nr, 0], rest[n % nr, 1], rest[n % nr, 2], rest[n % nr, 3])
        q = (q_local[n, 0], q_local[n, 1], q_local[n, 2], q_local[n, 3])
        # qtamed: components of any finite size (near 1e308 rest^-1 q itself would overflow)
        o, h = apply_limit_local(kind, params, r, qtamed(q))
        if not h:
            o = q  # inside: the input itself, bit for bit
        out[n, 0] = o[0]
        out[n, 1] = o[1]
        out[n, 2] = o[2]
        out[n, 3] = o[3]
        hit[n] = h


@njit
def violation_many(kind, params, rest, q_local, out):  # type: ignore[no-untyped-def]
    """Array form of :func:`limit_violation` on local rotations (``rest`` as in :func:`clamp_many`)."""
    nr = rest.shape[0]
    for n in range(q_local.shape[0]):
        r = (rest[n % nr, 0], rest[n % nr, 1], rest[n % nr, 2], rest[n % nr, 3])
        q = qnormalize((q_local[n, 0], q_local[n, 1], q_local[n, 2], q_local[n, 3]))  # (of any finite size)
        out[n] = limit_violation(kind, params, qmul(qconj(r), q))
