"""Cyclic coordinate descent (CCD) over a flattened batch.

One item: a chain ``joints (K,)`` (root first, each the parent of the
next), its ancestors ``base_path`` (root first), a target, an optional
pole.  Arrays follow :mod:`kinema._kernels.chain`: ``t (Nt,J,3)``,
``r (N,J,4)`` (edited in place), ``s (Ns,J,3)``; per-item ``target (Ng,3)``
and ``pole (Np,3)`` with ``Ng, Np`` in {1, N}.

A sweep turns chain joints ``K-2, K-3, ..., 0`` (the end never turns; the
first joint does, as in three.js's ``CCDIKSolver``).  Joint ``k`` turns by
the exact minimal rotation taking ``end - p_k`` to ``target - p_k``
(:func:`~kinema._kernels.quat.qfrom_two_vectors`), scaled by its weight,
capped by the step limit, applied as a world correction through the parent's
inverse, then clamped by its joint limit.  The end position is carried
through the sweep exactly: joints ``0..k`` do not move when ``k`` turns, and
the end moves by the joint's actual world rotation ``d`` about ``p_k``.

Between sweeps the chain is kept in world space: after a sweep its world
positions and rotations move by the recorded corrections
(:func:`_apply_sweep`, two quaternion products and a vector rotation per
joint) instead of a forward-kinematics pass over local rotations, and a
turned joint's local rotation is rebuilt from the world ones once, at the
end (:func:`_write_locals`).
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from .chain import (
    FOLD_BENT_RTOL,
    FOLD_REACH_RTOL,
    FOLD_STRAIGHT_RTOL,
    fold_direction,
    fold_point,
    frame_side,
    input_status,
    output_status,
    path_world,
)
from .chain import chain_world as _chain_world_call
from .drivers import make_drivers
from .limits import LIMIT_NONE, LIMIT_PARAMS, apply_limit_local
from .quat import (
    qangle,
    qconj,
    qfrom_axis_angle,
    qfrom_two_vectors,
    qhalfway,
    qmul,
    qnormalize,
    qrest_twist,
    qrotate,
    vcross,
    vdot,
    vmagnitude,
)

#: A joint whose alignment turn is below this (radians) is left alone, and a
#: sweep in which no joint turned by more than this ends the solve.  Same
#: value as three.js's CCDIKSolver ("prevent vibration of bone").
MIN_TURN_ANGLE = 1e-5

#: Joint-to-end or joint-to-target vectors shorter than this fraction of the
#: chain's reach (sum of bone lengths; absolute when the reach is zero) carry
#: no direction: that joint is skipped for the sweep (target on the joint,
#: end on the joint after a zero-length bone).
SHORT_VECTOR_EPS = 1e-12

#: Adaptive step: the step cap is the full ``max_step`` while the error is at
#: least this fraction of the chain's reach ...
ADAPTIVE_FAR_FRACTION = 0.25
#: ... and shrinks linearly with the error below that, but never under this
#: fraction of ``max_step``.
ADAPTIVE_MIN_FRACTION = 0.1

#: Pole pass: a sub-chain whose middle joints are within this multiple of
#: ``SHORT_VECTOR_EPS * reach`` of the line ``p_k -> end`` is straight (it
#: has no bend side to twist).
POLE_STRAIGHT_FRACTION = 1e3
#: The bend (radians, times the joint's weight) a pole seeds into a folded
#: straight sub-chain so that it has a side to keep.
POLE_SEED_ANGLE = 0.1

# Slots of the per-call ``options`` float64 array (integers and flags are
# stored as exact floats: one array, one dispatch argument).
O_ITERATIONS = 0
O_HAS_POLE = 1
O_FIXED_ROOT = 2
O_ADAPTIVE = 3
O_TOLERANCE = 4
O_MAX_STEP = 5
O_TWIST_REST = 6  # 1: the twist="rest" policy (:func:`_rest_twist_pass`), 0: "input"
O_POLE_MAX_TWIST = 7  # > 0: the pole's total twist budget per sub-chain and solve (radians); 0: no budget
N_OPTIONS = 8

# Packed plan (built once per chain by :mod:`kinema._ccd`, so a call passes
# two arrays instead of eight):
#   ``index`` int64 ``[K, B, base_path (B), joints (K), kinds (K)]``;
#   ``values`` float64 ``[weights (K), limit params (K * LIMIT_PARAMS), rest rotations (K * 4)]``.


#: :func:`kinema._kernels.chain.chain_world` compiled inline into the CCD item
#: (its first FK, and the FK after a pole pass or a root slide): the same
#: Python function, without a call that passes twelve arguments.  Without
#: JIT it is the function.  The rare FKs (after a stall's seed bend, a
#: revert to the best sweep, the rest-twist pass) call ``_chain_world_call``
#: instead: each inlined copy is compiled again with the item, and the five
#: of them took 2.8 s of the item's 9.3 s first compile (same numbers).
chain_world = njit(inline=True)(getattr(_chain_world_call, "py_func", _chain_world_call))

#: ``sin(MIN_TURN_ANGLE)``: a turn of at most 90 degrees is below the minimum
#: exactly when the vectors' cross product is shorter than this (relative).
_SIN_MIN_TURN = math.sin(MIN_TURN_ANGLE)


@njit(inline=True)
def _align(a, b, nab2):  # type: ignore[no-untyped-def]
    """``(dq, sin2, cos, small, nab)``: the minimal rotation taking direction ``a`` to ``b``, given
    ``nab2 = |a|^2 |b|^2``; ``nab = |a| |b|`` when the half-way form built ``dq``, else -1.

    ``sqrt(sin2), cos`` are the turn angle's sine and cosine times
    ``|a| |b|`` (``angle = atan2(sqrt(sin2), cos)``, computed by the caller
    only when a weight or step cap needs it).  ``small``: the turn is below ``MIN_TURN_ANGLE``
    (``dq`` is then the identity).  ``a`` and ``b`` are non-zero.

    Up to 90 degrees the half-way form ``normalize(a x b, |a||b| + a . b)`` (:func:`qhalfway`)
    is the exact minimal rotation without trigonometry (well conditioned:
    ``|a||b| + a . b >= |a||b|``).  Beyond 90 degrees the foundation's
    :func:`qfrom_two_vectors` (exact up to opposite vectors) builds it.
    """
    c = vcross(a, b)
    d = vdot(a, b)
    sc2 = vdot(c, c)
    if d >= 0.0:
        # |a x b| < sin(MIN_TURN_ANGLE) |a||b|, compared squared (no square root on the hot path).
        if sc2 < _SIN_MIN_TURN * _SIN_MIN_TURN * nab2:
            return (0.0, 0.0, 0.0, 1.0), sc2, d, True, -1.0
        nab = math.sqrt(nab2)
        return qhalfway(c, sc2, nab, d), sc2, d, False, nab
    return qfrom_two_vectors(a, b), sc2, d, False, -1.0


@njit(helper=True)
def _dist(a, b):  # type: ignore[no-untyped-def]
    """``|a - b|`` of two points (tuples), at any size (:func:`~.quat.vmagnitude`)."""
    return vmagnitude(a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(helper=True)
def _turned_local(pq, old, dq):  # type: ignore[no-untyped-def]
    """``normalize(inverse(pq) dq old)``: the local rotation of a joint whose world rotation ``old`` (parent
    world rotation ``pq``) is turned by the world correction ``dq``.  Tuples only, so it compiles into its
    callers without any array bookkeeping."""
    return qnormalize(qmul(qconj(pq), qmul(dq, old)))


@njit(inline=True)
def _turn(k, dq, base_rot, joints, i, r, rot, kinds, params, rest):  # type: ignore[no-untyped-def]
    """Apply world correction ``dq`` to chain joint ``k``, then its limit.

    ``q_local' = inverse(Q_parent) dq Q_world`` (normalised), limited, then
    written to ``r`` and ``rot[k] = Q_parent q_local'``.  Returns
    ``(d, hit)``: ``d`` is the world rotation the joint actually made
    (``Q_world_new Q_world_old^-1``; ``dq`` itself unless the limit changed
    it), ``hit`` whether the limit changed the rotation.
    """
    old = (rot[k, 0], rot[k, 1], rot[k, 2], rot[k, 3])
    if k == 0:
        pq = base_rot
    else:
        pq = (rot[k - 1, 0], rot[k - 1, 1], rot[k - 1, 2], rot[k - 1, 3])
    ql = _turned_local(pq, old, dq)
    hit = False
    if kinds[k] != LIMIT_NONE:
        rk = (rest[k, 0], rest[k, 1], rest[k, 2], rest[k, 3])
        ql, hit = apply_limit_local(kinds[k], params[k], rk, ql)
    j = joints[k]
    r[i, j, 0] = ql[0]
    r[i, j, 1] = ql[1]
    r[i, j, 2] = ql[2]
    r[i, j, 3] = ql[3]
    qw = qmul(pq, ql)
    rot[k, 0] = qw[0]
    rot[k, 1] = qw[1]
    rot[k, 2] = qw[2]
    rot[k, 3] = qw[3]
    if hit:
        return qmul(qw, qconj(old)), True
    return dq, False


@njit(helper=True)
def _scaled(dq, ang, a2):  # type: ignore[no-untyped-def]
    """``dq`` (angle ``ang`` > 0) with its angle replaced by ``a2``, same axis."""
    s = math.sin(0.5 * ang)
    k = math.sin(0.5 * a2) / s
    return (dq[0] * k, dq[1] * k, dq[2] * k, math.cos(0.5 * a2))


@njit(borrows=True, helper=True)
def _pole_pass(i, joints, base_rot, r, rot, pos, scl, t, s, base_pos, base_scl, pole,  # type: ignore[no-untyped-def]
               weights, cap, kinds, params, rest, eps, budget, aux):
    """Twist each sub-chain ``k..end`` about the line ``p_k -> end`` toward the pole.

    For ``k = 0 .. K-3`` (root first): the mean of the middle joints
    ``k+1 .. K-2``, projected off the line, is turned onto the pole's
    projection (angle times the joint's weight, capped like any turn).
    The end lies on the line, so the twist never moves it.  Returns
    ``(moved, hits)``.

    ``budget > 0`` (the ``pole_max_twist`` option): sub-chain ``k``'s pole
    twists (and a fold seed at ``k + 1``) add up to at most ``budget``
    radians in one solve (``aux[k, A_POLE]`` holds what it used), so a solve
    keeps the bend side of the pose it starts from and moves it toward the
    pole by at most ``budget``; warm-started frame after frame, the bend
    blends onto the pole's side instead of snapping (or flipping) there.
    ``budget == 0``: no budget (every pass turns the full weighted angle).
    """
    n_k = joints.shape[0]
    moved = False
    hits = 0
    for k in range(0, n_k - 2):
        w = weights[k]
        if w <= 0.0:
            continue
        p = (pos[k, 0], pos[k, 1], pos[k, 2])
        e = (pos[n_k - 1, 0] - p[0], pos[n_k - 1, 1] - p[1], pos[n_k - 1, 2] - p[2])
        el = math.sqrt(vdot(e, e))
        if el <= eps:
            continue  # end on the joint: no line to twist about
        u = (e[0] / el, e[1] / el, e[2] / el)
        mx = 0.0
        my = 0.0
        mz = 0.0
        for m in range(k + 1, n_k - 1):
            mx += pos[m, 0] - p[0]
            my += pos[m, 1] - p[1]
            mz += pos[m, 2] - p[2]
        c = vdot((mx, my, mz), u)
        mp = (mx - c * u[0], my - c * u[1], mz - c * u[2])
        pv = (pole[0] - p[0], pole[1] - p[1], pole[2] - p[2])
        c = vdot(pv, u)
        pp = (pv[0] - c * u[0], pv[1] - c * u[1], pv[2] - c * u[2])
        if math.sqrt(vdot(pp, pp)) <= eps:
            continue  # pole on the line: it has no side
        if math.sqrt(vdot(mp, mp)) <= POLE_STRAIGHT_FRACTION * eps:
            # Straight sub-chain: no bend to twist.  If it is folded back on
            # itself (end closer than the bones' length; CCD folds a straight
            # chain aimed along itself), seed a small bend toward the pole at
            # the next joint; the following sweeps keep that side.
            sub = 0.0
            for m in range(k, n_k - 1):
                d = (pos[m + 1, 0] - pos[m, 0], pos[m + 1, 1] - pos[m, 1], pos[m + 1, 2] - pos[m, 2])
                sub += math.sqrt(vdot(d, d))
            w1 = weights[k + 1]
            if w1 <= 0.0 or el >= sub * (1.0 - FOLD_REACH_RTOL):
                continue  # frozen, or fully stretched (reaching straight out: nothing to orient)
            v = (pos[k + 2, 0] - pos[k + 1, 0], pos[k + 2, 1] - pos[k + 1, 1], pos[k + 2, 2] - pos[k + 1, 2])
            ax = vcross(v, pp)
            if math.sqrt(vdot(ax, ax)) <= eps * eps:
                continue  # zero-length bone after the joint: nothing to bend
            a2 = POLE_SEED_ANGLE * w1
            if cap > 0.0 and a2 > cap:
                a2 = cap
            if budget > 0.0:
                a2 = min(a2, budget - aux[k, A_POLE])
                if a2 < MIN_TURN_ANGLE:
                    continue  # this solve's pole budget for the sub-chain is spent
                aux[k, A_POLE] += a2
            d, hit = _turn(k + 1, qfrom_axis_angle(ax, a2), base_rot, joints, i, r, rot, kinds, params, rest)
            hits += 1 if hit else 0
            moved = True
            chain_world(k + 1, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
            continue
        ang = math.atan2(vdot(vcross(mp, pp), u), vdot(mp, pp))
        a2 = ang * w
        if cap > 0.0 and abs(a2) > cap:
            a2 = cap if a2 > 0.0 else -cap
        if budget > 0.0:
            left = budget - aux[k, A_POLE]
            if abs(a2) > left:
                a2 = left if a2 > 0.0 else -left
        if abs(a2) < MIN_TURN_ANGLE:
            continue
        if budget > 0.0:
            aux[k, A_POLE] += abs(a2)
        d, hit = _turn(k, qfrom_axis_angle(u, a2), base_rot, joints, i, r, rot, kinds, params, rest)
        if hit:
            hits += 1
            if qangle(d) >= MIN_TURN_ANGLE:
                moved = True
        else:
            moved = True
        chain_world(k, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
    return moved, hits


#: Retries of a fold whose bend a limit blocked (:func:`ccd_item`): the mirrored side, then the two sides square
#: to it (:func:`_retry_side`).
FOLD_RETRIES = 3

#: :func:`_backward_bone`: a bone within this angle's sine of the line from the end to the target (either way)
#: lies on it.  A stall leaves the bones of a chain folded onto the line off it by up to about ten
#: ``MIN_TURN_ANGLE`` (1.1e-4 rad seen on a 6-bone chain), far below a seed's turn (``POLE_SEED_ANGLE``).
LINE_BONE_SINE = 1e-3


@njit(borrows=True, helper=True)
def _backward_bone(pos, tgt, reach, weights):  # type: ignore[no-untyped-def]
    """For a chain ``pos (K, 3)`` along the line from its end to ``tgt`` (every bone within ``LINE_BONE_SINE``
    of it, either way) and behind its end (no joint nearer the target than the end by more than
    ``FOLD_STRAIGHT_RTOL * reach``: the end falls short of the target from every joint): the joint ``kb``
    (``1 .. K-2``) at the far end of the bone nearest the end that points away from the target and whose joint
    ``kb - 1`` turns (weight > 0).  -1 when there is none, the chain is bent, or the end is within
    ``FOLD_STRAIGHT_RTOL * reach`` of the target (no line).  Bones up to ``FOLD_STRAIGHT_RTOL * reach`` long
    have no direction and are passed over.  (The last bone is not looked at: the joint at its far end is the
    end, whose frame the solve does not keep, and pointing away it is flipped by a sweep.)"""
    n_k = pos.shape[0]
    tol = FOLD_STRAIGHT_RTOL * reach
    e = (pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2])
    u = (tgt[0] - e[0], tgt[1] - e[1], tgt[2] - e[2])
    ul = math.sqrt(vdot(u, u))
    if n_k < 3 or ul <= tol:
        return -1  # (a chain of one bone has no joint to move off the line; an end on the target, no line)
    u = (u[0] / ul, u[1] / ul, u[2] / ul)
    for k in range(n_k - 1):
        if vdot((pos[k, 0] - e[0], pos[k, 1] - e[1], pos[k, 2] - e[2]), u) > tol:
            return -1  # a joint past the end toward the target: the end overshoots it (the fold's case)
        b = (pos[k + 1, 0] - pos[k, 0], pos[k + 1, 1] - pos[k, 1], pos[k + 1, 2] - pos[k, 2])
        bl = math.sqrt(vdot(b, b))
        if bl > tol:
            c = vcross(b, u)
            if vdot(c, c) > (LINE_BONE_SINE * bl) * (LINE_BONE_SINE * bl):
                return -1  # bent: the sweeps have a side to work with
    for m in range(n_k - 3, -1, -1):
        b = (pos[m + 1, 0] - pos[m, 0], pos[m + 1, 1] - pos[m, 1], pos[m + 1, 2] - pos[m, 2])
        if weights[m] > 0.0 and vdot(b, u) < -tol:
            return m + 1
    return -1


@njit(borrows=True, helper=True)
def _line_side(pos, rot, kb, tgt):  # type: ignore[no-untyped-def]
    """The unit direction in which :func:`_backward_bone`'s joint ``kb`` is moved off the line from the end to
    ``tgt``: the way it already sticks out from that line (by more than ``FOLD_BENT_RTOL`` of the bone before
    it), else :func:`~kinema._kernels.chain.frame_side` of its frame about the line, as a fold's."""
    n_k = pos.shape[0]
    e = (pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2])
    u = (tgt[0] - e[0], tgt[1] - e[1], tgt[2] - e[2])
    ul = math.sqrt(vdot(u, u))  # > 0 (_backward_bone)
    u = (u[0] / ul, u[1] / ul, u[2] / ul)
    x = (pos[kb, 0] - e[0], pos[kb, 1] - e[1], pos[kb, 2] - e[2])
    c = vdot(x, u)
    off = (x[0] - c * u[0], x[1] - c * u[1], x[2] - c * u[2])
    on = math.sqrt(vdot(off, off))
    if on > FOLD_BENT_RTOL * _dist((pos[kb, 0], pos[kb, 1], pos[kb, 2]), (pos[kb - 1, 0], pos[kb - 1, 1],
                                                                          pos[kb - 1, 2])):
        return (off[0] / on, off[1] / on, off[2] / on)  # off the line already: further that way
    return frame_side((rot[kb, 0], rot[kb, 1], rot[kb, 2], rot[kb, 3]), u)


@njit(borrows=True, helper=True)
def _retry_side(pos, rot, kb, side, n):  # type: ignore[no-untyped-def]
    """Side ``n`` (1, 2, 3) of a fold's retry: the first fold's side ``side`` (in the frame of its middle joint
    ``kb``) in world space, square to the bone after ``kb``, gives ``-side`` (mirrored), then ``u x side`` and
    ``-(u x side)`` (``u`` the bone's direction).  ``(0, 0, 0)`` (no turn) when the bone has no direction
    or the side lies along it."""
    v = qrotate((rot[kb, 0], rot[kb, 1], rot[kb, 2], rot[kb, 3]), side)
    u = (pos[kb + 1, 0] - pos[kb, 0], pos[kb + 1, 1] - pos[kb, 1], pos[kb + 1, 2] - pos[kb, 2])
    ul = math.sqrt(vdot(u, u))
    if ul <= 0.0:
        return (0.0, 0.0, 0.0)  # a zero-length bone
    u = (u[0] / ul, u[1] / ul, u[2] / ul)
    c = vdot(v, u)
    v = (v[0] - c * u[0], v[1] - c * u[1], v[2] - c * u[2])
    vl = math.sqrt(vdot(v, v))
    if vl <= FOLD_BENT_RTOL:
        return (0.0, 0.0, 0.0)  # the side turned onto the bone: no side left
    v = (v[0] / vl, v[1] / vl, v[2] / vl)
    if n == 2:
        return vcross(u, v)
    if n == 3:
        w = vcross(u, v)
        return (-w[0], -w[1], -w[2])
    return (-v[0], -v[1], -v[2])


@njit(borrows=True, helper=True)
def _seed_bend(kb, dirn, a2, max_step, pos, base_rot, joints, i, r, rot, kinds, params, rest):  # type: ignore[no-untyped-def]
    """Turn chain joint ``kb - 1`` by the angle ``a2`` (capped by ``max_step``) so that joint ``kb`` moves off
    its line toward ``dirn`` (about ``bone x dirn``, the bone ``kb - 1 -> kb``), then clamp it (:func:`_turn`);
    returns ``(d, hit)``: the fold's seed turn."""
    p_prev = (pos[kb - 1, 0], pos[kb - 1, 1], pos[kb - 1, 2])
    p_k = (pos[kb, 0], pos[kb, 1], pos[kb, 2])
    ax = vcross((p_k[0] - p_prev[0], p_k[1] - p_prev[1], p_k[2] - p_prev[2]), dirn)
    if max_step > 0.0 and a2 > max_step:
        a2 = max_step
    return _turn(kb - 1, qfrom_axis_angle(ax, a2), base_rot, joints, i, r, rot, kinds, params, rest)


#: Columns of the ``aux (K, AUX_COLS)`` scratch of :func:`ccd_item`: ``[:, 0:4]`` the joint's world
#: correction in the current sweep, ``A_TURNED`` whether it turned in this sweep, ``A_DIRTY`` whether its
#: local rotation in ``r`` is behind its world rotation in ``rot``, ``A_POLE`` the pole twist sub-chain
#: ``k`` used in this solve (radians; read only with a pole budget), ``[:, A_BEST:A_BEST + 4]`` the joint's
#: local rotation in the best sweep so far and ``[0, A_BEST_T:A_BEST_T + 3]`` the first joint's local
#: translation then (read only with limits, see :func:`ccd_item`).
A_TURNED = 4
A_DIRTY = 5
A_POLE = 6
A_BEST = 7
A_BEST_T = 11
AUX_COLS = 14


@njit(borrows=True, helper=True)
def _apply_sweep(n_k, pos, rot, aux, tgt):  # type: ignore[no-untyped-def]
    """Move the chain's world transforms by a sweep's corrections; returns the end's distance to ``tgt``.

    Joint ``k`` turned by the world correction ``d_k`` about its position
    (``aux[k, 0:4]``, where ``aux[k, A_TURNED]``), the sweep ran from the end
    toward the root, so joint ``m`` is turned by ``C_m = d_0 d_1 ... d_m``
    (``d`` of joints that did not turn is the identity):
    ``Q_m' = C_m Q_m`` and
    ``p_m' = p_{m-1}' + C_{m-1} (p_m - p_{m-1})`` (``p_0`` never moves: the
    base does not turn).  Scales do not change.

    ``Q`` is not renormalised here (5% of a sweep): the corrections are
    unit quaternions (a clamped turn is normalised in the sweep), so ``Q``
    drifts from unit length by a few ulp per sweep, additively, and every
    rotation computed from ``Q`` (a limited joint's local rotation, the
    final local rotations) is normalised.  Only the end's ``Q`` is skipped:
    nothing reads it during a solve.
    """
    c = (0.0, 0.0, 0.0, 1.0)
    c_id = True  # C is the identity so far: nothing from here to the root moved
    old_prev = (pos[0, 0], pos[0, 1], pos[0, 2])
    new_prev = old_prev
    for k in range(n_k):
        old_k = (pos[k, 0], pos[k, 1], pos[k, 2])
        new_k = old_k
        if not c_id:
            b = qrotate(c, (old_k[0] - old_prev[0], old_k[1] - old_prev[1], old_k[2] - old_prev[2]))
            new_k = (new_prev[0] + b[0], new_prev[1] + b[1], new_prev[2] + b[2])
            pos[k, 0] = new_k[0]
            pos[k, 1] = new_k[1]
            pos[k, 2] = new_k[2]
        old_prev = old_k
        new_prev = new_k
        if aux[k, A_TURNED] != 0.0:
            d = (aux[k, 0], aux[k, 1], aux[k, 2], aux[k, 3])
            c = d if c_id else qmul(c, d)
            c_id = False
        if not c_id and k < n_k - 1:  # (the end's world rotation is never read during a solve)
            q = qmul(c, (rot[k, 0], rot[k, 1], rot[k, 2], rot[k, 3]))
            rot[k, 0] = q[0]
            rot[k, 1] = q[1]
            rot[k, 2] = q[2]
            rot[k, 3] = q[3]
    return _dist(new_prev, tgt)


@njit(inline=True)
def _local_of(k, rot, base_rot):  # type: ignore[no-untyped-def]
    """Chain joint ``k``'s local rotation from the world rotations: ``normalize(inverse(Q_parent) Q_k)``."""
    pq = base_rot if k == 0 else (rot[k - 1, 0], rot[k - 1, 1], rot[k - 1, 2], rot[k - 1, 3])
    return qnormalize(qmul(qconj(pq), (rot[k, 0], rot[k, 1], rot[k, 2], rot[k, 3])))


@njit(borrows=True, helper=True)
def _write_locals(n_k, joints, i, r, rot, aux, base_rot):  # type: ignore[no-untyped-def]
    """``r``'s local rotation of every joint marked ``A_DIRTY``, from the world rotations (:func:`_local_of`).
    Joints that did not turn keep theirs bit for bit."""
    for k in range(n_k - 1):
        if aux[k, A_DIRTY] != 0.0:
            ql = _local_of(k, rot, base_rot)
            j = joints[k]
            r[i, j, 0] = ql[0]
            r[i, j, 1] = ql[1]
            r[i, j, 2] = ql[2]
            r[i, j, 3] = ql[3]
            aux[k, A_DIRTY] = 0.0


@njit(borrows=True, helper=True)
def _keep_best(n_k, joints, i, r, t, rot, aux, base_rot):  # type: ignore[no-untyped-def]
    """Copy the chain's local rotations now (``A_DIRTY`` joints' from the world rotations, as
    :func:`_write_locals` would write them, the others' from ``r``) and the first joint's local translation
    into ``aux`` (``A_BEST``, ``A_BEST_T``).  Reads only: the solve goes on exactly as without it."""
    for k in range(n_k - 1):
        ql = _local_of(k, rot, base_rot) if aux[k, A_DIRTY] != 0.0 else (
            r[i, joints[k], 0], r[i, joints[k], 1], r[i, joints[k], 2], r[i, joints[k], 3])
        for c in range(4):
            aux[k, A_BEST + c] = ql[c]
    it = i % t.shape[0]
    for c in range(3):
        aux[0, A_BEST_T + c] = t[it, joints[0], c]


@njit(borrows=True, helper=True)
def ccd_item(i, joints, base_path, t, r, s, target, pole, weights, kinds, params, rest,  # type: ignore[no-untyped-def]
             options, pos, rot, scl, aux):
    """Solve batch item ``i``; returns ``(error, sweeps, limit_hits, changed)``.

    ``changed``: whether any local rotation (or the sliding root's
    translation) was written.

    ``pos (K,3)``, ``rot (K,4)``, ``scl (K,)`` (world transforms) and
    ``aux (K, AUX_COLS)`` are scratch.

    Between sweeps the chain lives in world space: a sweep records each
    joint's world correction ``d_k`` (``aux``), and :func:`_apply_sweep`
    moves the world transforms by them.  Local rotations are rebuilt from the
    world ones (:func:`_write_locals`) only for joints that turned, once at
    the end (or before a pole pass or a root slide, which work on locals).
    Joints with a limit are clamped in their local frame at the turn and
    their local rotation is written then.
    """
    n_k = joints.shape[0]
    iterations = int(options[O_ITERATIONS])
    has_pole = options[O_HAS_POLE] != 0.0
    fixed_root = options[O_FIXED_ROOT] != 0.0
    adaptive = options[O_ADAPTIVE] != 0.0
    tol = options[O_TOLERANCE]
    max_step = options[O_MAX_STEP]

    base_pos, base_rot, base_scl = path_world(base_path, i, t, r, s)
    chain_world(0, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
    ig = i % target.shape[0]
    tgt = (target[ig, 0], target[ig, 1], target[ig, 2])
    ip = i % pole.shape[0]
    pole_i = (pole[ip, 0], pole[ip, 1], pole[ip, 2])

    reach = 0.0
    for k in range(n_k - 1):
        reach += _dist((pos[k + 1, 0], pos[k + 1, 1], pos[k + 1, 2]), (pos[k, 0], pos[k, 1], pos[k, 2]))
    eps = SHORT_VECTOR_EPS * reach if reach > 0.0 else SHORT_VECTOR_EPS

    err = _dist((pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2]), tgt)
    twist_rest = options[O_TWIST_REST] != 0.0
    pole_budget = options[O_POLE_MAX_TWIST]
    for k in range(n_k):
        aux[k, A_TURNED] = 0.0
        aux[k, A_DIRTY] = 0.0
        aux[k, A_POLE] = 0.0
    hits = 0
    sweeps = 0
    changed = False
    limited = False
    for k in range(n_k - 1):
        limited = limited or kinds[k] != LIMIT_NONE
    best = err  # with limits: the smallest error after a sweep, whose pose aux keeps (A_BEST)
    kept = False
    # A start inside every limit it is held to (a warm start from the previous frame's solve) is a candidate too:
    # an unfinished solve none of whose sweeps comes nearer than it returns the input as it was, not a pose the
    # clamps threw further off (a target just outside a swing cone made the sweeps thrash, 0.07 -> 0.48 m).
    from_start = limited and err > tol
    for k in range(n_k - 1):
        if from_start and kinds[k] != LIMIT_NONE and weights[k] > 0.0:
            j = joints[k]
            from_start = not apply_limit_local(kinds[k], params[k], (rest[k, 0], rest[k, 1], rest[k, 2], rest[k, 3]),
                                               (r[i, j, 0], r[i, j, 1], r[i, j, 2], r[i, j, 3]))[1]
    if from_start:
        kept = True
        _keep_best(n_k, joints, i, r, t, rot, aux, base_rot)
    it0 = i % t.shape[0]
    j0 = joints[0]
    # A pole with a budget still has work when the end is already there (a warm start on a reached target):
    # its pass then runs once per solve, so a bend left off the pole's side is blended onto it, frame by frame.
    pole_pending = has_pole and pole_budget > 0.0
    folded = has_pole  # a pole folds a straight chain its own way (the pole pass)
    seeds = 0  # seed turns off the target's line (_backward_bone), at most K per solve
    fold_kb = -1  # the fold's middle joint (-1: no fold made), its side in that joint's frame, the retries made
    fold_side = (0.0, 0.0, 0.0)
    fold_tries = 0
    fold_hits = 0  # the limit clamps counted when the fold (or its last retry) was made
    while sweeps < iterations and (err > tol or pole_pending):
        sweeps += 1
        cap = max_step
        if cap > 0.0 and adaptive and reach > 0.0:
            f = err / (ADAPTIVE_FAR_FRACTION * reach)
            if f < ADAPTIVE_MIN_FRACTION:
                f = ADAPTIVE_MIN_FRACTION
            if f < 1.0:
                cap = cap * f
        moved = False
        end = (pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2])
        for k in range(n_k - 2, -1, -1):
            aux[k, A_TURNED] = 0.0
            w = weights[k]
            if w <= 0.0:
                continue  # frozen joint
            p = (pos[k, 0], pos[k, 1], pos[k, 2])
            to_end = (end[0] - p[0], end[1] - p[1], end[2] - p[2])
            to_tgt = (tgt[0] - p[0], tgt[1] - p[1], tgt[2] - p[2])
            # Degenerate: end or target on the joint, no direction to align; skip the joint.
            le2 = vdot(to_end, to_end)
            lt2 = vdot(to_tgt, to_tgt)
            if le2 <= eps * eps or lt2 <= eps * eps:
                continue
            dq, sn2, cs, small, nab = _align(to_end, to_tgt, le2 * lt2)
            if small:
                continue  # turn below MIN_TURN_ANGLE
            aligned = nab > 0.0
            a2 = MIN_TURN_ANGLE  # unweighted, uncapped: the turn is at least this (only compared below)
            if w != 1.0 or cap > 0.0:
                ang = math.atan2(math.sqrt(sn2), cs)
                a2 = ang * w
                if cap > 0.0 and a2 > cap:
                    a2 = cap
                if a2 != ang:
                    dq = _scaled(dq, ang, a2)
                    aligned = False
            d = dq
            hit = False
            if kinds[k] != LIMIT_NONE:
                # Limited joint: clamp in its rest-relative local frame now (this sweep's later joints, its
                # ancestors, have not turned yet, so rot[k] and its parent's are current).
                old = (rot[k, 0], rot[k, 1], rot[k, 2], rot[k, 3])
                pq = base_rot if k == 0 else (rot[k - 1, 0], rot[k - 1, 1], rot[k - 1, 2], rot[k - 1, 3])
                ql, hit = apply_limit_local(kinds[k], params[k], (rest[k, 0], rest[k, 1], rest[k, 2], rest[k, 3]),
                                            _turned_local(pq, old, dq))
                if hit:
                    # The world turn the joint actually made, normalised: pq and old are products that are
                    # not renormalised (see _apply_sweep), and a correction of norm |pq||old| would compound
                    # their drift sweep after sweep.
                    d = qnormalize(qmul(qmul(pq, ql), qconj(old)))
                    j = joints[k]  # the clamped local rotation, exactly
                    r[i, j, 0] = ql[0]
                    r[i, j, 1] = ql[1]
                    r[i, j, 2] = ql[2]
                    r[i, j, 3] = ql[3]
            # Rebuild the local rotation from the world ones later, unless the limit just wrote it (a limit
            # that does not act leaves the joint exactly as an unlimited one).
            aux[k, A_DIRTY] = 0.0 if hit else 1.0
            aux[k, 0] = d[0]
            aux[k, 1] = d[1]
            aux[k, 2] = d[2]
            aux[k, 3] = d[3]
            aux[k, A_TURNED] = 1.0
            changed = True
            if hit:
                hits += 1
                if qangle(d) >= MIN_TURN_ANGLE:
                    moved = True
            elif a2 >= MIN_TURN_ANGLE:
                moved = True
            if aligned and not hit:
                # dq took to_end's direction exactly onto to_tgt's: the end is on to_tgt at its old distance
                # |to_end| = nab / |to_tgt|, so f = nab / |to_tgt|^2 (no quaternion on the end's chain).
                f = nab / lt2
                end = (p[0] + to_tgt[0] * f, p[1] + to_tgt[1] * f, p[2] + to_tgt[2] * f)
            else:
                rel = qrotate(d, to_end)
                end = (p[0] + rel[0], p[1] + rel[1], p[2] + rel[2])
        err = _apply_sweep(n_k, pos, rot, aux, tgt)
        if has_pole or not fixed_root:
            # The pole pass and the root slide work on local rotations: bring them up to date first, and
            # rebuild the world transforms by FK after them.
            _write_locals(n_k, joints, i, r, rot, aux, base_rot)
            if has_pole:
                pm, ph = _pole_pass(i, joints, base_rot, r, rot, pos, scl, t, s, base_pos, base_scl, pole_i,
                                    weights, cap, kinds, params, rest, eps, pole_budget, aux)
                hits += ph
                moved = moved or pm
                pole_pending = False
                changed = changed or pm
            if not fixed_root and weights[0] > 0.0:
                # Sliding first joint, only while the target is out of reach: it
                # moves along p_0 -> target by the shortfall (distance - reach),
                # or by the end's remaining miss along that line if larger (the
                # chain is rarely straight yet, and straightening by CCD is slow).
                dt = _dist((pos[0, 0], pos[0, 1], pos[0, 2]), tgt)
                if dt > reach and dt > 0.0:
                    dirn = ((tgt[0] - pos[0, 0]) / dt, (tgt[1] - pos[0, 1]) / dt, (tgt[2] - pos[0, 2]) / dt)
                    miss = ((tgt[0] - pos[n_k - 1, 0]) * dirn[0] + (tgt[1] - pos[n_k - 1, 1]) * dirn[1]
                            + (tgt[2] - pos[n_k - 1, 2]) * dirn[2])
                    f = dt - reach if dt - reach > miss else miss
                    shift = (dirn[0] * f, dirn[1] * f, dirn[2] * f)
                    loc = qrotate(qconj(base_rot), shift)
                    j0 = joints[0]
                    it = i % t.shape[0]
                    t[it, j0, 0] += loc[0] / base_scl
                    t[it, j0, 1] += loc[1] / base_scl
                    t[it, j0, 2] += loc[2] / base_scl
                    moved = True
                    changed = True
            chain_world(0, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
            err = _dist((pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2]), tgt)
        if limited and err < best and err > tol:
            # With limits a clamp can undo part of a sweep's progress, and the error need not fall from one
            # sweep to the next: keep the best sweep's pose, to end on it if the solve does not finish.
            best = err
            kept = True
            from_start = False
            _keep_best(n_k, joints, i, r, t, rot, aux, base_rot)
        if not moved:
            if err <= tol:
                break
            _write_locals(n_k, joints, i, r, rot, aux, base_rot)
            if not folded:
                # Stuck short of the target: a straight chain aimed along the target's line (each joint sees the
                # end and the target in one direction, so none turns).  When the target is within reach, the chain
                # is bent once: the joint before its middle joint turns so that the middle one sticks out toward
                # fold_direction, and the sweeps fold it from there.  Else straight is the answer.
                folded = True
                kb = fold_point(pos, reach, 1)
                if (kb > 0 and weights[kb - 1] > 0.0
                        and _dist((pos[0, 0], pos[0, 1], pos[0, 2]), tgt) < reach * (1.0 - FOLD_REACH_RTOL)):
                    p_k = (pos[kb, 0], pos[kb, 1], pos[kb, 2])
                    q_k = (rot[kb, 0], rot[kb, 1], rot[kb, 2], rot[kb, 3])
                    dirn = fold_direction(q_k, (pos[kb - 1, 0], pos[kb - 1, 1], pos[kb - 1, 2]), p_k,
                                          (pos[kb + 1, 0], pos[kb + 1, 1], pos[kb + 1, 2]))
                    d, hit = _seed_bend(kb, dirn, POLE_SEED_ANGLE * weights[kb - 1], max_step, pos, base_rot, joints,
                                        i, r, rot, kinds, params, rest)
                    hits += 1 if hit else 0
                    if qangle(d) < MIN_TURN_ANGLE:
                        break  # a zero-length bone, or a limit that keeps the joint straight
                    # remembered for a retry (in the middle joint's frame, which turns with the chain)
                    fold_kb = kb
                    fold_side = qrotate(qconj(q_k), dirn)
                    fold_hits = hits
                    changed = True
                    _chain_world_call(kb - 1, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
                    err = _dist((pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2]), tgt)
                    continue
            elif (fold_kb >= 0 and hits != fold_hits and fold_tries < FOLD_RETRIES
                  and fold_point(pos, reach, 1) == fold_kb):
                # The fold's bend was blocked by a limit (a one-sided hinge asked to bend the other way: clamps acted
                # since the fold, and the chain is straight again): the fold is tried toward the mirrored side,
                # then the two sides square to it, each at most once, from the pose the stall left.
                bent = False
                while not bent and fold_tries < FOLD_RETRIES:
                    fold_tries += 1
                    dirn = _retry_side(pos, rot, fold_kb, fold_side, fold_tries)
                    d, hit = _seed_bend(fold_kb, dirn, POLE_SEED_ANGLE * weights[fold_kb - 1], max_step, pos,
                                        base_rot, joints, i, r, rot, kinds, params, rest)
                    hits += 1 if hit else 0
                    bent = qangle(d) >= MIN_TURN_ANGLE  # else a side the limit blocks outright: the next one
                fold_hits = hits
                if bent:
                    changed = True
                    _chain_world_call(fold_kb - 1, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
                    err = _dist((pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2]), tgt)
                    continue
            # Stuck on the target's line, short of it, with a bone pointing away from it (a chain folded back on
            # itself: the flips of a chain aimed away from its target leave such zig-zags): every joint sees the
            # end and the target in one direction, so none turns, and no fold of a straight chain applies.  The
            # joint at that bone's far end is moved off the line (its bone's joint turns by the fold's seed angle),
            # and the sweeps unfold the chain toward the target.
            kh = _backward_bone(pos, tgt, reach, weights) if seeds < n_k else -1
            if kh < 0:
                break
            seeds += 1
            dirn = _line_side(pos, rot, kh, tgt)
            d, hit = _seed_bend(kh, dirn, POLE_SEED_ANGLE * weights[kh - 1], max_step, pos, base_rot, joints, i, r,
                                rot, kinds, params, rest)
            hits += 1 if hit else 0
            if qangle(d) < MIN_TURN_ANGLE:
                break  # a limit that keeps the joint on the line
            changed = True
            _chain_world_call(kh - 1, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
            err = _dist((pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2]), tgt)
    _write_locals(n_k, joints, i, r, rot, aux, base_rot)
    if kept and hits > 0 and err > best:
        # An unfinished solve whose limits acted ends on its best sweep (or its start, see above), not on wherever
        # the last one left it.  (Without a clamp CCD's error does not grow, up to rounding: a limit that never
        # acts changes nothing.)
        for k in range(n_k - 1):
            for c in range(4):
                r[i, joints[k], c] = aux[k, A_BEST + c]
        for c in range(3):
            t[it0, j0, c] = aux[0, A_BEST_T + c]
        _chain_world_call(0, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
        err = _dist((pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2]), tgt)
        if from_start:
            # the input, bit for bit: nothing turned, and the clamps of the sweeps thrown away changed nothing
            changed = False
            hits = 0
    if twist_rest and changed:
        hits += _rest_twist_pass(i, joints, t, r, s, rot, weights, kinds, params, rest, base_rot)
        _chain_world_call(0, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl)
        err = _dist((pos[n_k - 1, 0], pos[n_k - 1, 1], pos[n_k - 1, 2]), tgt)
    return err, sweeps, hits, changed


@njit(borrows=True, helper=True)
def _rest_twist_pass(i, joints, t, r, s, rot, weights, kinds, params, rest, base_rot):  # type: ignore[no-untyped-def]
    """The ``twist="rest"`` policy on a solved chain: every turnable joint's twist about its bone from rest.

    Root first, joint ``k`` (weight > 0, ``k <= K-2``) gets the local rotation
    that points its bone where the solve pointed it in world space (``rot[k]``,
    under its parent's new world rotation) with the rest pose's twist:
    :func:`~kinema._kernels.quat.qrest_twist` about the bone's own direction,
    then its joint limit.  The bone runs to the next joint the solve turns
    (weight > 0), or to the end: the joints between (helper joints riding
    along, frozen ones) keep their local rotations, so the bone is the vector
    through them, ``t_{k+1} + s_{k+1} q_{k+1} (t_{k+2} + ...)`` in ``k``'s
    frame.  So every turned joint's position and the end's are kept (unless
    a limit moves them); the joints between turn rigidly with the bone.
    ``rot`` must hold the solved world rotations; ``r`` is written.  Returns
    the limit clamps that changed a rotation.
    """
    n_k = joints.shape[0]
    it = i % t.shape[0]
    i_s = i % s.shape[0]
    pq = base_rot
    hits = 0
    for k in range(n_k - 1):
        j = joints[k]
        if weights[k] > 0.0:
            m = k + 1
            while m < n_k - 1 and weights[m] <= 0.0:
                m += 1
            jm = joints[m]
            axis = (t[it, jm, 0], t[it, jm, 1], t[it, jm, 2])
            for h in range(m - 1, k, -1):  # through the joints between, from m's parent up to k's child
                jh = joints[h]
                v = qrotate((r[i, jh, 0], r[i, jh, 1], r[i, jh, 2], r[i, jh, 3]), axis)
                sh = s[i_s, jh, 0]  # uniform (the solver checks)
                axis = (t[it, jh, 0] + sh * v[0], t[it, jh, 1] + sh * v[1], t[it, jh, 2] + sh * v[2])
            la = math.sqrt(vdot(axis, axis))
            ql = qnormalize(qmul(qconj(pq), (rot[k, 0], rot[k, 1], rot[k, 2], rot[k, 3])))
            rk = (rest[k, 0], rest[k, 1], rest[k, 2], rest[k, 3])
            if la > 0.0:
                ql = qrest_twist(ql, rk, (axis[0] / la, axis[1] / la, axis[2] / la))
            if kinds[k] != LIMIT_NONE:
                ql, hit = apply_limit_local(kinds[k], params[k], rk, ql)
                hits += 1 if hit else 0
            r[i, j, 0] = ql[0]
            r[i, j, 1] = ql[1]
            r[i, j, 2] = ql[2]
            r[i, j, 3] = ql[3]
        else:
            ql = qnormalize((r[i, j, 0], r[i, j, 1], r[i, j, 2], r[i, j, 3]))
        pq = qmul(pq, ql)
    return hits


@njit(inline=True)  # inlined: in a borrowing caller its views cost no reference counting
def unpack_plan(index, values):  # type: ignore[no-untyped-def]
    """Views ``(joints, base_path, scale_joints, kinds, weights, params, rest)`` of a packed plan."""
    n_k = index[0]
    n_b = index[1]
    base_path = index[2:2 + n_b]
    joints = index[2 + n_b:2 + n_b + n_k]
    kinds = index[2 + n_b + n_k:2 + n_b + 2 * n_k]
    scale_joints = index[2:2 + n_b + n_k]  # ancestors, then the chain
    weights = values[:n_k]
    params = values[n_k:n_k + n_k * LIMIT_PARAMS].reshape((n_k, LIMIT_PARAMS))
    rest = values[n_k + n_k * LIMIT_PARAMS:n_k + n_k * (LIMIT_PARAMS + 4)].reshape((n_k, 4))
    return joints, base_path, scale_joints, kinds, weights, params, rest


@njit(borrows=True, helper=True)
def _check(args):  # type: ignore[no-untyped-def]
    """The drivers' input check (:func:`~kinema._kernels.chain.input_status`): nothing is solved unless OK."""
    index, values, t, r, s, target, pole, options, err_out, counts_out = args
    return input_status(t, r, s, target, pole, unpack_plan(index, values)[2])


@njit(borrows=True, helper=True)
def _finish(args):  # type: ignore[no-untyped-def]
    """The drivers' output check (:func:`~kinema._kernels.chain.output_status`)."""
    index, values, t, r, s, target, pole, options, err_out, counts_out = args
    return output_status(t, r, err_out)


@njit(helper=True)
def ccd_range(c0, c1, args):  # type: ignore[no-untyped-def]
    """Solve items ``c0 .. c1-1`` with one scratch set.

    ``args = (index, values, t, r, s, target, pole, options, err_out, counts_out)``: the packed plan, the
    pose arrays, ``target, pole (1|N, 3)``, the options (``O_*``), the errors ``(N,)`` and
    ``counts_out (3, N)``: sweeps, limit hits, changed (0/1).
    """
    index, values, t, r, s, target, pole, options, err_out, counts_out = args
    joints, base_path, scale_joints, kinds, weights, params, rest = unpack_plan(index, values)
    n_k = joints.shape[0]
    pos = np.empty((n_k, 3))
    rot = np.empty((n_k, 4))
    scl = np.empty(n_k)
    aux = np.empty((n_k, AUX_COLS))
    for i in range(c0, c1):
        e, n, h, c = ccd_item(i, joints, base_path, t, r, s, target, pole, weights, kinds, params, rest,
                              options, pos, rot, scl, aux)
        err_out[i] = e
        counts_out[0, i] = n
        counts_out[1, i] = h
        counts_out[2, i] = 1 if c else 0


#: ``solve_serial(n, args)`` and ``solve_parallel(n_chunks, n, args)`` (:mod:`.drivers`): status 0 = ok.
DRIVERS = make_drivers("ccd", _check, ccd_range, _finish)
solve_serial, solve_parallel = DRIVERS
