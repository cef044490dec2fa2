"""FABRIK kernels: chains and multi-end-effector trees, with joint limits.

Notation.  The solver works on *nodes*: the joints whose rotation it turns
(the listed joints of a chain, every joint of a tree's paths).  Nodes are in
parent-first order; node 0 is the root of the solve.  For node ``n > 0``
with parent node ``p = npar[n]``:

* ``V[n]`` is node ``n``'s offset from ``p`` in ``p``'s world frame (scale
  included), constant during a solve: ``P[n] = P[p] + rotate(Q[p], V[n])``;
  ``D[n] = |V[n]|`` is the bone length FABRIK keeps.
* ``M[n] = inverse(Q[p]) * Q_world(actual parent joint of n)``: the fixed
  rotation of the joints between ``p`` and ``n`` that ride along without
  being turned (identity when there are none).  The frame that node ``n``'s
  local rotation ``L[n]`` is relative to is ``F[n] = Q[p] * M[n]``, so
  ``Q[n] = F[n] * L[n]``.

One iteration is a *backward* pass (tips to root: each goal's node is put on
its target, each parent at bone length from its children, a node with
several children or a goal of its own at the weighted centroid of what they
want) and a *forward* pass (root to tips, see :func:`forward_rotations`).

Rotations from positions: the forward pass turns each node by the minimal
rotation (``qfrom_two_vectors``) from its current world bone direction to
the direction of its aim, applied in world space through the parent's frame
(``L' = inverse(F) * dq * F * L``), root to tip.  So twist about a bone is
never introduced, and an already aligned bone is not touched.

Batch conventions are those of :mod:`kinema._kernels.chain` (``t (N,J,3)``
writable, ``r (N,J,4)`` edited in place, ``s (Ns,J,3)``).
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from .chain import (
    FOLD_REACH_RTOL,
    FOLD_STRAIGHT_RTOL,
    fold_direction,
    fold_point,
    input_status,
    output_status,
    path_world,
    read_q,
    write_q,
)
from .drivers import make_drivers
from .limits import LIMIT_HINGE, apply_limit_local, wrap_near
from .quat import (
    VEC_NORM_EPS,
    put3,
    put4,
    qconj,
    qfrom_rotvec,
    qfrom_two_vectors,
    qmul,
    qnormalize,
    qrest_twist,
    qrotate,
    qto_rotvec,
    row3,
    row4,
    vcross,
    vdot,
    vmagnitude,
    vnorm,
)

#: At or below this distance (world units) an aim point is taken to coincide with the joint it is aimed from:
#: it gives no direction, and the bone keeps the direction it had at the start of the solve.  The
#: foundation's "no direction" (:data:`~.quat.VEC_NORM_EPS`, tied to float64's range): an absolute 1e-12 here
#: made a chain in units of 1e-12 take every aim for none and never move.
AIM_EPS = VEC_NORM_EPS

#: Pole: when a joint lies within this distance of the line through its
#: neighbours (a straight chain), or the pole does, the bend plane is
#: undefined and the joint is left where it is.
POLE_EPS = 1e-9

#: Modes of :func:`solve_item`.  POSITIONS: chains without limits iterate on
#: points only and turn the bones once at the end (same result as turning
#: them every pass, and several times cheaper).  ROTATIONS: every forward
#: pass turns the bones, so limits and rigid multi-child joints hold.
#: Pole on a straight chain: how far (relative to the bone) an inner joint on
#: the line is pushed toward the pole before a backward pass, to pick the bend
#: side FABRIK cannot pick from collinear points.  Small: the passes then
#: bend the chain by themselves.
POLE_NUDGE = 1e-3

MODE_POSITIONS = 0
MODE_ROTATIONS = 1

#: A limited chain's passes (one goal on its last node, fixed root, no pole) fight the clamps: from a warm start
#: they can go nowhere (the start is returned, frame after frame, while the target moves away), creep (hinges),
#: or wander off and land on another branch (a jump of 90-180 degrees).  Once PASS_PATIENCE passes in a row
#: each fail to bring the error below PASS_GAIN times the best so far, the passes end and the rest of the
#: iterations descend from the best candidate, the start included (:func:`_descend`).  0.9 and 3: among gains
#: 0.5, 0.8, 0.9, 0.95 and patience 1 to 4, the pair that kept the cone-limited chains' reach
#: (tests/test_fabrik.py) with the most random limited arm problems within 1 mm at 20 and at 50 iterations
#: (tests/_limited_arm.py) and hinged chains converging; patience 1 gave up on passes that recover after a
#: few losing ones (cold starts), a gain of 0.95 kept creeping hinge passes too long.
PASS_GAIN = 0.9
PASS_PATIENCE = 3

#: A sub-base's orientation (:func:`_fit`): the weighted mean of its children's minimal rotations is a
#: first-order fit; applying it and fitting again this many times in all converges to the orientation at
#: which the mean is zero (the rigid best fit, exact when the aims are consistent), so a sub-base is not
#: left turning a little further each FABRIK iteration.
SUBBASE_FIT_PASSES = 4

#: A flexible branch (:func:`_slack_subbase`) counts as slack only while its goal is within this fraction
#: short of its reach: a branch at full stretch converges slowly in FABRIK, so one nearer than that to
#: its reach's edge keeps pulling the sub-base toward its goal; :func:`_pivot_subbase` turns a goal-head
#: sub-base until its branches are that far inside their reach.  0.015: the best share of
#: :func:`kinema._sweeps.torso_problem` reached at 20 iterations among 0.01, 0.015, 0.02, 0.025, 0.03 and
#: 0.05 (with the pivot; below it the margin is too thin for the arms to converge in 20 iterations, above
#: it the poses that need an arm nearer full stretch than the margin are not met); best on seeds 1-4 too.
SLACK_MARGIN = 0.015

#: :func:`_pivot_subbase`: at most this many Gauss-Newton turns of a goal-head sub-base per backward pass;
#: the weight of its parent-distance row relative to the branches' (a hard constraint, held to first
#: order); and the damping added to the diagonal, relative to the trace.
PIVOT_PASSES = 4
PIVOT_HOLD = 100.0
PIVOT_DAMPING = 1e-6


@njit(borrows=True, helper=True)
def clamp_local(lim_kind, lim_par, lim_rest, n, q):  # type: ignore[no-untyped-def]
    """Node ``n``'s local rotation ``q`` moved into its limit; ``(q', changed)``.

    ``lim_kind (K,)``, ``lim_par (K, LIMIT_PARAMS)`` and ``lim_rest (K, 4)``
    are a :class:`kinema.limits.PackedLimits` for the nodes; the limit math
    is :func:`kinema._kernels.limits.apply_limit_local` (``LIMIT_NONE``
    returns ``q`` untouched).
    """
    return apply_limit_local(lim_kind[n], lim_par[n], row4(lim_rest, n), q)


@njit(helper=True)
def _toward(frm, to, fallback):  # type: ignore[no-untyped-def]
    """Unit vector from ``frm`` to ``to``; ``fallback`` when they coincide (``<= AIM_EPS``)."""
    d = (to[0] - frm[0], to[1] - frm[1], to[2] - frm[2])
    m = vnorm(d)
    if m <= AIM_EPS:
        return fallback
    inv = 1.0 / m
    return (d[0] * inv, d[1] * inv, d[2] * inv)


@njit(helper=True)
def _step(frm, to, length):  # type: ignore[no-untyped-def]
    """``(f, d)``: ``d = to - frm`` and ``f = length / |d|``, so ``frm + f d`` is at ``length`` from ``frm``
    toward ``to``; ``f = -1`` when the points coincide (``|d| <= AIM_EPS``).

    ``f = |d| (length / |d|^2)``: the square root and the division do not wait for each other (this is the
    latency chain of a FABRIK pass, one node after the other).
    """
    d = (to[0] - frm[0], to[1] - frm[1], to[2] - frm[2])
    m2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2]
    if m2 <= AIM_EPS * AIM_EPS:
        return -1.0, d
    return math.sqrt(m2) * (length / m2), d


@njit(borrows=True, helper=True)
def setup_item(i, base_path, joints, jpar, node_j, npar, t, r, s, pos, rot, scl, P, Q, L, V, D, M, U0):  # type: ignore[no-untyped-def]
    """World state of item ``i``: path joints' transforms, then the node arrays.

    ``U0[n]`` is node ``n``'s unit bone direction at the start of the solve
    (the fallback when an aim gives no direction).  Returns the base
    transform ``(pos, rot, scale)`` of the root node's parent.
    """
    base_pos, base_rot, base_scl = path_world(base_path, i, t, r, s)
    it = i % t.shape[0]
    is_ = i % s.shape[0]
    for a in range(joints.shape[0]):
        j = joints[a]
        pa = jpar[a]
        if pa < 0:
            pp = base_pos
            pq = base_rot
            ps = base_scl
        else:
            pp = row3(pos, pa)
            pq = row4(rot, pa)
            ps = scl[pa]
        d = qrotate(pq, (t[it, j, 0], t[it, j, 1], t[it, j, 2]))
        put3(pos, a, (pp[0] + ps * d[0], pp[1] + ps * d[1], pp[2] + ps * d[2]))
        put4(rot, a, qmul(pq, qnormalize(read_q(r, i, j))))
        scl[a] = ps * s[is_, j, 0]
    for n in range(node_j.shape[0]):
        a = node_j[n]
        put3(P, n, row3(pos, a))
        put4(Q, n, row4(rot, a))
        put4(L, n, qnormalize(read_q(r, i, joints[a])))
        p = npar[n]
        if p < 0:
            put3(V, n, (0.0, 0.0, 0.0))
            D[n] = 0.0
            put4(M, n, (0.0, 0.0, 0.0, 1.0))
            put3(U0, n, (0.0, 0.0, 0.0))
            continue
        off = (P[n, 0] - P[p, 0], P[n, 1] - P[p, 1], P[n, 2] - P[p, 2])
        pa = jpar[a]
        if pa == node_j[p]:
            # The node's joint hangs straight off the parent node's (a plain chain): its offset in the
            # parent's frame is its local translation times the parent's world scale, with no joint between.
            j = joints[a]
            sp = scl[pa]
            v = (sp * t[it, j, 0], sp * t[it, j, 1], sp * t[it, j, 2])
            put4(M, n, (0.0, 0.0, 0.0, 1.0))
        else:
            qp = row4(Q, p)
            v = qrotate(qconj(qp), off)
            put4(M, n, qnormalize(qmul(qconj(qp), row4(rot, pa))))
        put3(V, n, v)
        D[n] = vnorm(v)
        m = vnorm(off)
        if m <= AIM_EPS:
            put3(U0, n, (0.0, 0.0, 0.0))  # zero-length bone: no direction to keep
        else:
            inv = 1.0 / m
            put3(U0, n, (off[0] * inv, off[1] * inv, off[2] * inv))
    return base_pos, base_rot, base_scl


@njit(borrows=True, helper=True)
def _fit(qcur, n, aims, pn, child_ptr, child_idx, V, D, nw):  # type: ignore[no-untyped-def]
    """World correction turning node ``n`` (world rotation ``qcur``, at ``pn``) toward its children's aims.

    One child: the minimal rotation from the bone's direction to the aim's.
    Several (a sub-base): the weighted mean of the children's minimal
    rotations as rotation vectors, ``dq = exp(sum w_c log(dq_c) / sum w_c)``
    with ``w_c`` the child's subtree goal weight; repeated passes refine it.
    A sub-base with one goal head (:func:`_anchor`): :func:`_fit_anchored`.
    Zero-length children carry no direction and are skipped.
    """
    c0 = child_ptr[n]
    c1 = child_ptr[n + 1]
    if c1 - c0 == 1:
        c = child_idx[c0]
        if D[c] == 0.0:
            return (0.0, 0.0, 0.0, 1.0)
        cur = qrotate(qcur, row3(V, c))
        aim = (aims[c, 0] - pn[0], aims[c, 1] - pn[1], aims[c, 2] - pn[2])
        return qfrom_two_vectors(cur, aim)
    anchor = _anchor(n, child_ptr, child_idx, D, nw)
    if anchor >= 0:
        return _fit_anchored(qcur, n, aims, pn, child_ptr, child_idx, V, D, nw, anchor)
    total = (0.0, 0.0, 0.0, 1.0)
    qc = qcur
    for it in range(SUBBASE_FIT_PASSES):
        wx = 0.0
        wy = 0.0
        wz = 0.0
        wsum = 0.0
        for e in range(c0, c1):
            c = child_idx[e]
            if D[c] == 0.0:
                continue
            cur = qrotate(qc, row3(V, c))
            aim = (aims[c, 0] - pn[0], aims[c, 1] - pn[1], aims[c, 2] - pn[2])
            rv = qto_rotvec(qfrom_two_vectors(cur, aim))
            w = nw[c]
            wx += w * rv[0]
            wy += w * rv[1]
            wz += w * rv[2]
            wsum += w
        if wsum == 0.0:
            return (0.0, 0.0, 0.0, 1.0)  # a leaf, or only zero-length children
        dq = qfrom_rotvec((wx / wsum, wy / wsum, wz / wsum))
        if it == 0:
            total = dq
        else:
            total = qnormalize(qmul(dq, total))
        if it + 1 < SUBBASE_FIT_PASSES:
            qc = qmul(dq, qc)
    return total


@njit(borrows=True, helper=True)
def _anchor(n, child_ptr, child_idx, D, nw):  # type: ignore[no-untyped-def]
    """The one goal-bearing rigid leaf child (a goal head) of sub-base ``n``, or -1 (none, or several)."""
    anchor = -1
    for e in range(child_ptr[n], child_ptr[n + 1]):
        c = child_idx[e]
        if child_ptr[c + 1] == child_ptr[c] and nw[c] > 0.0 and D[c] > 0.0:
            if anchor != -1:
                return -1
            anchor = c
    return anchor


@njit(borrows=True, helper=True)
def _on_two_spheres(x, p, r1, t, r2):  # type: ignore[no-untyped-def]
    """The point nearest ``x`` at distance ``r1`` from ``p`` and ``r2`` from ``t`` (a circle), or ``x`` when
    the spheres do not meet or ``x`` lies on the circle's axis."""
    u = (t[0] - p[0], t[1] - p[1], t[2] - p[2])
    d = vnorm(u)
    if d <= AIM_EPS or d > r1 + r2 or d < abs(r1 - r2):
        return x
    u = (u[0] / d, u[1] / d, u[2] / d)
    along = (d * d + r1 * r1 - r2 * r2) / (2.0 * d)
    h = math.sqrt(max(r1 * r1 - along * along, 0.0))
    q = (x[0] - p[0], x[1] - p[1], x[2] - p[2])
    qu = vdot(q, u)
    w = (q[0] - qu * u[0], q[1] - qu * u[1], q[2] - qu * u[2])
    wn = vnorm(w)
    if wn <= AIM_EPS:
        return x
    return (p[0] + along * u[0] + h * w[0] / wn, p[1] + along * u[1] + h * w[1] / wn,
            p[2] + along * u[2] + h * w[2] / wn)


@njit(borrows=True, helper=True)
def _fit_anchored(qcur, n, aims, pn, child_ptr, child_idx, V, D, nw, anchor):  # type: ignore[no-untyped-def]
    """World correction for sub-base ``n`` with one goal-bearing rigid leaf child ``anchor`` (a goal head).

    The anchor's goal needs it exactly, so its bone is aimed exactly (the minimal rotation ``dq1``), and
    the turn about the aimed bone's axis ``a`` that best places the other children in the weighted
    least-squares sense is added: ``angle = atan2(sum w_c a.(b_c x d_c), sum w_c b_c.d_c)`` with
    ``b_c``, ``d_c`` the child's bone after ``dq1`` and its aim, both projected normal to ``a``.
    """
    c0 = child_ptr[n]
    c1 = child_ptr[n + 1]
    cur = qrotate(qcur, row3(V, anchor))
    aim = (aims[anchor, 0] - pn[0], aims[anchor, 1] - pn[1], aims[anchor, 2] - pn[2])
    if vnorm(aim) <= AIM_EPS:
        return (0.0, 0.0, 0.0, 1.0)
    dq1 = qfrom_two_vectors(cur, aim)
    q1 = qmul(dq1, qcur)
    inv = 1.0 / vnorm(aim)
    a = (aim[0] * inv, aim[1] * inv, aim[2] * inv)
    sn = 0.0
    cs = 0.0
    for e in range(c0, c1):
        c = child_idx[e]
        w = nw[c]
        if c == anchor or w == 0.0 or D[c] == 0.0:
            continue
        b = qrotate(q1, row3(V, c))
        d = (aims[c, 0] - pn[0], aims[c, 1] - pn[1], aims[c, 2] - pn[2])
        bh = vdot(b, a)
        dh = vdot(d, a)
        bp = (b[0] - bh * a[0], b[1] - bh * a[1], b[2] - bh * a[2])
        dp = (d[0] - dh * a[0], d[1] - dh * a[1], d[2] - dh * a[2])
        sn += w * vdot(vcross(bp, dp), a)
        cs += w * vdot(bp, dp)
    if sn == 0.0 and cs == 0.0:
        return dq1
    ang = math.atan2(sn, cs)
    sh = math.sin(0.5 * ang)
    return qnormalize(qmul((a[0] * sh, a[1] * sh, a[2] * sh, math.cos(0.5 * ang)), dq1))


@njit(borrows=True, helper=True)
def _hinge_fit(frame, params, qcur, n, aims, pn, child_ptr, child_idx, V):  # type: ignore[no-untyped-def]
    """World correction for a hinge node: the turn about its hinge axis that best aims its bone.

    ``frame = F * rest`` is the frame the hinge axis ``params[0:3]`` is
    given in; in world space the axis is ``h = rotate(frame, axis)``.  The
    bone direction ``b`` and the aim ``d`` are projected on the plane normal
    to ``h`` and the correction is the rotation about ``h`` by the signed
    angle between the projections: the direction in the hinge's reachable
    set (a plane, or a cone when the bone is not normal to the axis)
    closest to the aim.  Degenerate (bone or aim along the axis, within
    ``AIM_EPS``): no correction.
    """
    c = child_idx[child_ptr[n]]
    h = qrotate(frame, (params[0], params[1], params[2]))
    b = qrotate(qcur, row3(V, c))
    d = (aims[c, 0] - pn[0], aims[c, 1] - pn[1], aims[c, 2] - pn[2])
    bh = vdot(b, h)
    dh = vdot(d, h)
    bp = (b[0] - bh * h[0], b[1] - bh * h[1], b[2] - bh * h[2])
    dp = (d[0] - dh * h[0], d[1] - dh * h[1], d[2] - dh * h[2])
    if vnorm(bp) <= AIM_EPS or vnorm(dp) <= AIM_EPS:
        return (0.0, 0.0, 0.0, 1.0)  # bone or aim along the hinge axis: turning about it changes nothing
    ang = math.atan2(vdot(vcross(bp, dp), h), vdot(bp, dp))
    sh = math.sin(0.5 * ang)
    return (h[0] * sh, h[1] * sh, h[2] * sh, math.cos(0.5 * ang))


@njit(borrows=True, helper=True)
def forward_rotations(p0, base_rot, aims, aim, use_limits, npar, child_ptr, child_idx, P, Q, L, V, D, M, nw,
                      lim_kind, lim_par, lim_rest, Qb, TB):  # type: ignore[no-untyped-def]
    """Forward pass on rotations: root to tips, turn each node toward its children's aims.

    ``P[0] = p0``; for each node ``n``: ``F = base_rot`` (root) or
    ``Q[p] * M[n]``; ``Q_cur = F * L[n]`` (its world rotation now that its
    parent has moved); ``dq = fit(Q_cur)``; ``L[n] = inverse(F) * dq * Q_cur``,
    clamped to the node's limit when ``use_limits``; then each child is
    placed rigidly, ``P[c] = P[n] + rotate(Q[n], V[c])``.  ``aims`` may be
    ``P`` itself (a node's aims are read before the node places them).
    With ``aim`` false nothing is turned: the world state is rebuilt from
    the local rotations ``L`` (after an in-place clamp).

    Limits: a node flagged ``TB[n]`` by the backward pass (its orientation
    there was turned about its bone to fit a child's limit) starts from that
    backward rotation ``Qb[n]`` instead of ``Q_cur``, so the twist that
    brings, e.g., a hinge's plane onto the target survives into the pose.
    A hinge node turns only about its hinge axis (:func:`_hinge_fit`); any
    other limit is applied by clamping the turned local rotation.
    Returns the number of limit clamps that changed a rotation.
    """
    hits = 0
    put3(P, 0, p0)
    for n in range(npar.shape[0]):
        p = npar[n]
        if p < 0:
            f = base_rot
        elif M[n, 0] == 0.0 and M[n, 1] == 0.0 and M[n, 2] == 0.0:
            f = row4(Q, p)  # no joint between the node and its parent node (M is the identity)
        else:
            f = qmul(row4(Q, p), row4(M, n))
        qcur = qmul(f, row4(L, n))
        if TB[n]:
            qcur = row4(Qb, n)
        pn = row3(P, n)
        n_child = child_ptr[n + 1] - child_ptr[n]
        turn = aim and n_child > 0  # a leaf (the chain's end) aims nothing: its local rotation stays, bit for bit
        if turn:
            if use_limits and lim_kind[n] == LIMIT_HINGE and n_child == 1:
                dq = _hinge_fit(qmul(f, row4(lim_rest, n)), lim_par[n], qcur, n, aims, pn, child_ptr, child_idx, V)
            elif n_child == 1:
                # _fit's one-child case, written out (no helper taking arrays in the per-node loop).
                c = child_idx[child_ptr[n]]
                if D[c] == 0.0:
                    dq = (0.0, 0.0, 0.0, 1.0)
                else:
                    dq = qfrom_two_vectors(qrotate(qcur, (V[c, 0], V[c, 1], V[c, 2])),
                                           (aims[c, 0] - pn[0], aims[c, 1] - pn[1], aims[c, 2] - pn[2]))
            else:
                dq = _fit(qcur, n, aims, pn, child_ptr, child_idx, V, D, nw)
            qw = qmul(dq, qcur)
            loc = qnormalize(qmul(qconj(f), qw))
            # The world rotation straight from the turn (F * loc up to rounding): the next node waits for it,
            # not for the local rotation, so the pass's node-to-node chain is two products shorter.
            qn = qnormalize(qw)
        else:
            loc = row4(L, n)
        if use_limits:
            loc, changed = clamp_local(lim_kind, lim_par, lim_rest, n, loc)
            if changed:
                hits += 1
        put4(L, n, loc)
        if use_limits or not turn:
            qn = qmul(f, loc)
        put4(Q, n, qn)
        for e in range(child_ptr[n], child_ptr[n + 1]):
            c = child_idx[e]
            d = qrotate(qn, row3(V, c))
            put3(P, c, (pn[0] + d[0], pn[1] + d[1], pn[2] + d[2]))
    return hits


@njit(borrows=True, helper=True)
def _descend(sweeps, err, tol, p_root, base_rot, npar, child_ptr, child_idx, P, Q, L, V, D, M, nw, lim_kind,  # type: ignore[no-untyped-def]
             lim_par, lim_rest, Qb, TB, targets, i, goal_node, gerr):
    """Limited descent of a chain (one goal, on its last node) from the pose in ``L``/``P``/``Q`` at error ``err``.

    At most ``sweeps`` sweeps, tip to root: node ``n`` is turned by the rotation that best points the chain's
    end ``e`` at the target ``T`` from ``P[n]`` (the minimal rotation from ``e - P[n]`` to ``T - P[n]``; a hinge
    about its world axis ``h`` only, by the signed angle between the two projected normal to ``h``), clamped to
    its limit, and kept only when the rebuilt pose's end is strictly nearer (so the error falls and is exactly
    the one reported).  A step from a vector along ``h``, or of zero length, turns by an angle of rounding
    noise or none: kept only if it helps, like any other.  Every kept step lowers the error, so the pose moves
    continuously from where it starts, never onto another branch.  Stops at ``tol``, or after a sweep that
    keeps nothing (the next would repeat it).  Returns ``(sweeps run, steps kept, clamps among them, error)``;
    ``gerr[i]`` and the world state are the final pose's.
    """
    kn = npar.shape[0]
    end = kn - 1
    tgt = (targets[i, 0, 0], targets[i, 0, 1], targets[i, 0, 2])
    n_sweeps = 0
    n_kept = 0
    hits = 0
    for _ in range(sweeps):
        n_sweeps += 1
        kept = 0
        for n in range(kn - 2, -1, -1):
            p = npar[n]
            f = base_rot if p < 0 else qmul(row4(Q, p), row4(M, n))
            pn = row3(P, n)
            b = (P[end, 0] - pn[0], P[end, 1] - pn[1], P[end, 2] - pn[2])
            d = (tgt[0] - pn[0], tgt[1] - pn[1], tgt[2] - pn[2])
            if lim_kind[n] == LIMIT_HINGE:
                h = qrotate(qmul(f, row4(lim_rest, n)), (lim_par[n, 0], lim_par[n, 1], lim_par[n, 2]))
                bh = vdot(b, h)
                dh = vdot(d, h)
                bp = (b[0] - bh * h[0], b[1] - bh * h[1], b[2] - bh * h[2])
                dp = (d[0] - dh * h[0], d[1] - dh * h[1], d[2] - dh * h[2])
                ang = 0.5 * math.atan2(vdot(vcross(bp, dp), h), vdot(bp, dp))
                sh = math.sin(ang)
                dq = (h[0] * sh, h[1] * sh, h[2] * sh, math.cos(ang))
            else:
                dq = qfrom_two_vectors(b, d)
            old = row4(L, n)
            loc, changed = clamp_local(lim_kind, lim_par, lim_rest, n,
                                       qnormalize(qmul(qconj(f), qmul(dq, row4(Q, n)))))
            put4(L, n, loc)
            forward_rotations(p_root, base_rot, P, False, False, npar, child_ptr, child_idx, P, Q, L, V, D, M, nw,
                              lim_kind, lim_par, lim_rest, Qb, TB)
            e_new = _errors(targets, i, goal_node, P, gerr)
            if e_new < err:
                err = e_new
                kept += 1
                if changed:
                    hits += 1
                if err <= tol:
                    return n_sweeps, n_kept + kept, hits, err
            else:
                put4(L, n, old)  # no nearer: back to the pose before the step
                forward_rotations(p_root, base_rot, P, False, False, npar, child_ptr, child_idx, P, Q, L, V, D,
                                  M, nw, lim_kind, lim_par, lim_rest, Qb, TB)
        n_kept += kept
        if kept == 0:
            break
    _errors(targets, i, goal_node, P, gerr)
    return n_sweeps, n_kept, hits, err


@njit(borrows=True, helper=True)
def chain_positions(P, Pb, D, U0, tgt, p_root, fixed_root, iterations, tol, has_pole, pole, budget, PU):  # type: ignore[no-untyped-def]
    """All FABRIK iterations of an unlimited chain on points (``MODE_POSITIONS``); returns the iterations run.

    Nodes ``0 .. K-1`` root first, the goal on the last.  One iteration:
    the pole pass (when ``has_pole``, see :func:`apply_pole`), the backward
    pass ``Pb[K-1] = target``, ``Pb[n] = Pb[n+1] + D[n+1] unit(P[n] -
    Pb[n+1])`` (what :func:`backward` does for a chain), then the forward
    pass ``P[0] = p_root`` (or ``Pb[0]`` with a free root), ``P[n] = P[n-1]
    + D[n] unit(Pb[n] - P[n-1])``; it stops once ``|P[K-1] - target| <=
    tol``.  A direction that vanishes (``<= AIM_EPS``) keeps the bone's
    start-of-solve direction ``U0``.  One call runs every iteration, so the
    loop passes no arrays to helpers (numba reference-counts those).
    ``budget, PU``: the pole's per-solve twist budget (see :func:`apply_pole`).
    """
    k_n = P.shape[0]
    n_it = 0
    for _ in range(iterations):
        if has_pole:
            apply_pole(pole, P, P, True, budget, PU)
        Pb[k_n - 1, 0] = tgt[0]
        Pb[k_n - 1, 1] = tgt[1]
        Pb[k_n - 1, 2] = tgt[2]
        pc = (tgt[0], tgt[1], tgt[2])
        for n in range(k_n - 2, -1, -1):
            dc = D[n + 1]
            f, d = _step(pc, (P[n, 0], P[n, 1], P[n, 2]), dc)
            if f < 0.0:
                d = (-U0[n + 1, 0], -U0[n + 1, 1], -U0[n + 1, 2])  # node on its child: keep the start direction
                f = dc
            pc = (pc[0] + f * d[0], pc[1] + f * d[1], pc[2] + f * d[2])
            Pb[n, 0] = pc[0]
            Pb[n, 1] = pc[1]
            Pb[n, 2] = pc[2]
        pp = p_root if fixed_root else pc
        P[0, 0] = pp[0]
        P[0, 1] = pp[1]
        P[0, 2] = pp[2]
        for n in range(1, k_n):
            f, d = _step(pp, (Pb[n, 0], Pb[n, 1], Pb[n, 2]), D[n])
            if f < 0.0:
                d = (U0[n, 0], U0[n, 1], U0[n, 2])
                f = D[n]
            pp = (pp[0] + f * d[0], pp[1] + f * d[1], pp[2] + f * d[2])
            P[n, 0] = pp[0]
            P[n, 1] = pp[1]
            P[n, 2] = pp[2]
        n_it += 1
        if vmagnitude(pp[0] - tgt[0], pp[1] - tgt[1], pp[2] - tgt[2]) <= tol:
            break
    return n_it


@njit(helper=True)
def _hinge_side(params, rest, frame, pp, pn, pc, v_bone, v_child):  # type: ignore[no-untyped-def]
    """The backward pass's place for a hinge node: ``pn``, or its mirror image across the line from its parent
    ``pp`` to its child ``pc`` when only the mirror image bends the hinge within its range.

    ``frame``: the hinge's parent frame in world space (``F = Q[p] M[n]``), ``rest`` and ``params`` (axis,
    range) the hinge's; ``v_bone`` the node's offset from its parent node in ``F`` (``M[n]^-1 V[n]``),
    ``v_child`` its child's offset (in its own frame).  The hinge angle of the bend ``pp -> pn -> pc`` is
    ``s + phi``: ``phi`` the signed angle about the world hinge axis from the upper bone to the lower one,
    ``s`` the angle at which the two are in line.  A straight arm with a target a little off its line bends
    toward the target's side; when the hinge allows only the other side (an elbow of range [0, 150] degrees),
    every pass clamped it straight and the solve stalled short of a target within reach.  The mirror image
    (a rotation by half a turn about the line ``pp -> pc``: both distances kept) bends by ``s - phi``.
    Degenerate (a bone along the hinge axis, the three points in line): ``pn``.
    """
    axis = (params[0], params[1], params[2])
    h = qrotate(qmul(frame, rest), axis)
    up = (pn[0] - pp[0], pn[1] - pp[1], pn[2] - pp[2])
    lo_b = (pc[0] - pn[0], pc[1] - pn[1], pc[2] - pn[2])
    uh = vdot(up, h)
    lh = vdot(lo_b, h)
    up = (up[0] - uh * h[0], up[1] - uh * h[1], up[2] - uh * h[2])
    lo_b = (lo_b[0] - lh * h[0], lo_b[1] - lh * h[1], lo_b[2] - lh * h[2])
    x = v_child
    y = qrotate(qconj(rest), v_bone)
    xa = vdot(x, axis)
    ya = vdot(y, axis)
    x = (x[0] - xa * axis[0], x[1] - xa * axis[1], x[2] - xa * axis[2])
    y = (y[0] - ya * axis[0], y[1] - ya * axis[1], y[2] - ya * axis[2])
    if vnorm(up) <= AIM_EPS or vnorm(lo_b) <= AIM_EPS or vnorm(x) <= AIM_EPS or vnorm(y) <= AIM_EPS:
        return pn
    phi = math.atan2(vdot(vcross(up, lo_b), h), vdot(up, lo_b))
    s = math.atan2(vdot(vcross(x, y), axis), vdot(x, y))
    lo = params[3]
    hi = params[4]
    mid = 0.5 * (lo + hi)
    a = wrap_near(s + phi, mid)
    m = wrap_near(s - phi, mid)
    if (lo <= a <= hi) or not (lo <= m <= hi):
        return pn
    ln = (pc[0] - pp[0], pc[1] - pp[1], pc[2] - pp[2])
    l2 = vdot(ln, ln)
    if l2 <= AIM_EPS * AIM_EPS:
        return pn
    w = (pn[0] - pp[0], pn[1] - pp[1], pn[2] - pp[2])
    f = vdot(w, ln) / l2
    return (pp[0] + 2.0 * f * ln[0] - w[0], pp[1] + 2.0 * f * ln[1] - w[1], pp[2] + 2.0 * f * ln[2] - w[2])


@njit(inline=True)  # per-iteration call: inlined, no per-call reference counting of its arrays
def backward(targets, i, ngoal, gw, npar, child_ptr, child_idx, P, Pb, Q, Qb, V, D, M, nw, U0, use_limits,
             lim_kind, lim_par, lim_rest, TB, br, btip, WB):  # type: ignore[no-untyped-def]
    """Backward pass: tips to root, into ``Pb`` (and ``Qb``, the nodes' backward world rotations).

    Node ``n`` wants to be where its goal is (weight ``gw``) and, for each
    child ``c``, at bone length ``D[c]`` from ``Pb[c]`` on the line toward
    its current position ``P[n]`` (weight ``nw[c]``, the goal weight of
    ``c``'s subtree).  ``Pb[n]`` is the weighted centroid of these wants:
    ``Pb[n] = sum_k w_k want_k / sum_k w_k``.  With limits, a single-child
    node's bone is projected so that the child's local rotation (relative
    to the node) lies in the child's limit set: ``L_c = inverse(Qb[n] M[c])
    Qb[c]`` is clamped and ``Qb[n] = Qb[c] inverse(L_c') inverse(M[c])``,
    which also turns the node about its own bone so that, e.g., a hinge's
    plane contains its child.  A sub-base's slack branches are then left out
    of its wants (:func:`_slack_subbase`; the weights it used go to ``WB``
    for the forward pass's fit); one with a goal head is put on its circle
    (:func:`_on_two_spheres`) and turned about the head's goal until its
    branches reach (:func:`_pivot_subbase`).
    """
    kn = ngoal.shape[0]
    for n in range(kn):
        TB[n] = False
    for n in range(kn - 1, -1, -1):
        c0 = child_ptr[n]
        c1 = child_ptr[n + 1]
        pn = row3(P, n)
        qn = row4(Q, n)
        g = ngoal[n]
        if c1 - c0 == 1 and g < 0:
            c = child_idx[c0]
            pc = row3(Pb, c)
            back = row3(U0, c)
            u = _toward(pc, pn, (-back[0], -back[1], -back[2]))  # unit from the child to the node
            if use_limits:
                cur = qrotate(qn, row3(V, c))
                qb = qnormalize(qmul(qfrom_two_vectors(cur, (-u[0], -u[1], -u[2])), qn))
                if lim_kind[c] != 0 and child_ptr[c + 1] > child_ptr[c]:
                    qbc = row4(Qb, c)
                    loc = qnormalize(qmul(qconj(qmul(qb, row4(M, c))), qbc))
                    loc2, changed = clamp_local(lim_kind, lim_par, lim_rest, c, loc)
                    if changed:
                        qb = qnormalize(qmul(qmul(qbc, qconj(loc2)), qconj(row4(M, c))))
                        TB[n] = True
                d = qrotate(qb, row3(V, c))
                pb = (pc[0] - d[0], pc[1] - d[1], pc[2] - d[2])
                if lim_kind[n] == LIMIT_HINGE and npar[n] >= 0:
                    p = npar[n]
                    m_n = row4(M, n)
                    pm = _hinge_side(lim_par[n], row4(lim_rest, n), qmul(row4(Q, p), m_n), row3(P, p), pb, pc,
                                     qrotate(qconj(m_n), row3(V, n)), row3(V, c))
                    if pm[0] != pb[0] or pm[1] != pb[1] or pm[2] != pb[2]:
                        qb = qnormalize(qmul(qfrom_two_vectors(d, (pc[0] - pm[0], pc[1] - pm[1], pc[2] - pm[2])), qb))
                        pb = pm
                put4(Qb, n, qb)
                put3(Pb, n, pb)
            else:
                put3(Pb, n, (pc[0] + D[c] * u[0], pc[1] + D[c] * u[1], pc[2] + D[c] * u[2]))
            continue
        ax = 0.0
        ay = 0.0
        az = 0.0
        wsum = 0.0
        if g >= 0:
            w = gw[g]
            ax += w * targets[i, g, 0]
            ay += w * targets[i, g, 1]
            az += w * targets[i, g, 2]
            wsum += w
        for e in range(c0, c1):
            c = child_idx[e]
            pc = row3(Pb, c)
            back = row3(U0, c)
            u = _toward(pc, pn, (-back[0], -back[1], -back[2]))
            w = nw[c]
            ax += w * (pc[0] + D[c] * u[0])
            ay += w * (pc[1] + D[c] * u[1])
            az += w * (pc[2] + D[c] * u[2])
            wsum += w
        pnew = (ax / wsum, ay / wsum, az / wsum)
        if c1 - c0 > 1:
            # Sub-base: its children hang off it rigidly, so each branch's want
            # is where the branch's first joint puts the sub-base given the
            # sub-base's best-fit orientation ``qb`` (aimed from the first
            # estimate above), ``Pb[c] - rotate(qb, V[c])``; weighted centroid again.
            qb = qnormalize(qmul(_fit(qn, n, Pb, pnew, child_ptr, child_idx, V, D, nw), qn))
            pnew = _rigid_centroid(targets, i, g, gw, n, child_ptr, child_idx, qb, Pb, V, nw, br, False)
            pnew, qb = _slack_subbase(targets, i, g, gw, n, child_ptr, child_idx, qn, qb, pnew, Pb, V, D, nw, br,
                                      btip, WB)
            a = _anchor(n, child_ptr, child_idx, D, WB)
            if a >= 0 and g < 0 and npar[n] >= 0 and D[n] > 0.0:
                # A goal head: the sub-base must be D[a] from the head's goal and D[n] from its parent, so it
                # goes to the nearest point of that circle, and is turned to aim the head exactly.
                pnew = _on_two_spheres(pnew, row3(P, npar[n]), D[n], row3(Pb, a), D[a])
                qb = qnormalize(qmul(_fit(qn, n, Pb, pnew, child_ptr, child_idx, V, D, WB), qn))
                pnew, qb = _pivot_subbase(targets, i, n, a, row3(P, npar[n]), pnew, qb, Pb, V, D, nw, child_ptr,
                                          child_idx, br, btip)
            put4(Qb, n, qb)
        elif use_limits:
            put4(Qb, n, qnormalize(qmul(_fit(qn, n, Pb, pnew, child_ptr, child_idx, V, D, nw), qn)))
        put3(Pb, n, pnew)


@njit(borrows=True, helper=True)
def _branch_reach(c, child_ptr, child_idx, D):  # type: ignore[no-untyped-def]
    """The sum of the bone lengths ``D`` below node ``c`` along its chain (a flexible branch's reach)."""
    reach = 0.0
    m = c
    while child_ptr[m + 1] > child_ptr[m]:
        m = child_idx[child_ptr[m]]
        reach += D[m]
    return reach


@njit(borrows=True, helper=True)
def _slack_subbase(targets, i, g, gw, n, child_ptr, child_idx, qn, qb, pnew, Pb, V, D, nw, br, btip, WB):  # type: ignore[no-untyped-def]
    """Sub-base ``n`` placed by the wants that bind: ``(pnew, qb)``, and ``WB[c]`` for each child.

    A *flexible* branch (``br[c] >= 0``: the subtree of child ``c`` is a
    chain ending in one goal, ``btip[c]``; its reach is the sum of its bone
    lengths ``D``) can reach its
    goal from anywhere within that reach, so its want (where it happens to
    put the sub-base now) pulls for no reason: averaged with a binding want
    (the sub-base's own goal, a rigid child such as a goal head, or a
    branch out of reach) it lets the sub-base move only part of the way
    each iteration, and FABRIK converges slowly.  When some want binds,
    the sub-base goes to the weighted centroid of the binding wants, the
    flexible branches that could not reach their goals from there are
    added, its orientation is fitted again with those weights
    (:func:`_fit`), and the centroid is taken once more with that
    orientation.  With no binding want (every branch flexible) the plain
    weighted centroid ``pnew`` and fit ``qb`` are kept.
    """
    c0 = child_ptr[n]
    c1 = child_ptr[n + 1]
    for e in range(c0, c1):
        WB[child_idx[e]] = nw[child_idx[e]]
    n_flex = 0
    n_bind = 1 if g >= 0 else 0
    for e in range(c0, c1):
        if br[child_idx[e]] >= 0.0:
            n_flex += 1
        else:
            n_bind += 1
    if n_flex == 0 or n_bind == 0:
        return pnew, qb
    ps = _rigid_centroid(targets, i, g, gw, n, child_ptr, child_idx, qb, Pb, V, nw, br, True)  # the binding wants
    for e in range(c0, c1):
        c = child_idx[e]
        if br[c] >= 0.0:
            d = qrotate(qb, row3(V, c))
            gt = btip[c]
            reach = _branch_reach(c, child_ptr, child_idx, D)  # this item's scale
            to = (targets[i, gt, 0] - ps[0] - d[0], targets[i, gt, 1] - ps[1] - d[1], targets[i, gt, 2] - ps[2] - d[2])
            WB[c] = 0.0 if vnorm(to) <= (1.0 - SLACK_MARGIN) * reach else nw[c]
    qb = qnormalize(qmul(_fit(qn, n, Pb, ps, child_ptr, child_idx, V, D, WB), qn))
    return _rigid_centroid(targets, i, g, gw, n, child_ptr, child_idx, qb, Pb, V, WB, br, False), qb


@njit(borrows=True, helper=True)
def _rigid_centroid(targets, i, g, gw, n, child_ptr, child_idx, qb, Pb, V, W, br, bound_only):  # type: ignore[no-untyped-def]
    """Weighted centroid of sub-base ``n``'s wants with orientation ``qb``: its own goal ``g`` (weight
    ``gw[g]``, none when ``g < 0``) and, for each child ``c`` of weight ``W[c] > 0``, the place its backward
    point ``Pb[c]`` puts the sub-base, ``Pb[c] - rotate(qb, V[c])``; with ``bound_only`` the flexible
    children (``br[c] >= 0``, :func:`_slack_subbase`) are left out.  The caller ensures a positive total."""
    ax = 0.0
    ay = 0.0
    az = 0.0
    wsum = 0.0
    if g >= 0:
        w = gw[g]
        ax += w * targets[i, g, 0]
        ay += w * targets[i, g, 1]
        az += w * targets[i, g, 2]
        wsum += w
    for e in range(child_ptr[n], child_ptr[n + 1]):
        c = child_idx[e]
        w = W[c]
        if w > 0.0 and not (bound_only and br[c] >= 0.0):
            d = qrotate(qb, row3(V, c))
            ax += w * (Pb[c, 0] - d[0])
            ay += w * (Pb[c, 1] - d[1])
            az += w * (Pb[c, 2] - d[2])
            wsum += w
    return (ax / wsum, ay / wsum, az / wsum)


@njit(helper=True)
def _solve_sym3(a00, a01, a02, a11, a12, a22, b):  # type: ignore[no-untyped-def]
    """``x`` with ``A x = b`` for the symmetric 3x3 ``A`` (Cramer's rule); zero when ``A`` is singular."""
    c0 = (a00, a01, a02)
    c1 = (a01, a11, a12)
    c2 = (a02, a12, a22)
    det = vdot(c0, vcross(c1, c2))
    if det == 0.0:
        return (0.0, 0.0, 0.0)
    inv = 1.0 / det
    return (vdot(b, vcross(c1, c2)) * inv, vdot(c0, vcross(b, c2)) * inv, vdot(c0, vcross(c1, b)) * inv)


@njit(borrows=True, helper=True)
def _pivot_subbase(targets, i, n, a, pp, pnew, qb, Pb, V, D, nw, child_ptr, child_idx, br, btip):  # type: ignore[no-untyped-def]
    """Sub-base ``n`` with goal head ``a`` turned about the head's goal until its flexible branches reach.

    ``(pnew, qb)`` has the head on its goal ``h = Pb[a]`` and ``pnew`` at ``D[n]`` from its parent at ``pp``;
    every such pose is the sub-base turned rigidly about ``h``.  A flexible branch ``c`` whose goal is
    beyond ``(1 - SLACK_MARGIN)`` of its reach from its base ``s_c = pnew + rotate(qb, V[c])`` has the
    excess ``e_c``; a Gauss-Newton step on the turn ``w`` about ``h`` (first order: ``s_c`` moves by ``w x
    (s_c - h)``) solves ``sum_c nw_c j_c j_c^T w = sum_c nw_c j_c e_c``, ``j_c = (s_c - h) x u_c`` (``u_c``
    the unit from ``s_c`` to its goal), with the parent distance held by a row of weight
    ``PIVOT_HOLD`` and ``PIVOT_DAMPING`` on the diagonal (one binding branch leaves a direction free).
    The turn is applied, the sub-base put back on its circle (:func:`_on_two_spheres`) and the head
    re-aimed; at most ``PIVOT_PASSES`` steps, stopping once every branch reaches.  Position and turn move
    together, so the sub-base cannot stall where moving along the circle alone or turning about the head
    alone brings no branch closer.  The flexible children's backward points become their rigid places on
    the result, so the forward pass's fit (:func:`_fit_anchored`) turns the sub-base to ``qb``.
    """
    h = row3(Pb, a)
    c0 = child_ptr[n]
    c1 = child_ptr[n + 1]
    for _ in range(PIVOT_PASSES):
        a00 = 0.0
        a01 = 0.0
        a02 = 0.0
        a11 = 0.0
        a12 = 0.0
        a22 = 0.0
        bx = 0.0
        by = 0.0
        bz = 0.0
        wsum = 0.0
        for e in range(c0, c1):
            c = child_idx[e]
            if br[c] < 0.0:
                continue
            d = qrotate(qb, row3(V, c))
            sc = (pnew[0] + d[0], pnew[1] + d[1], pnew[2] + d[2])
            gt = btip[c]
            to = (targets[i, gt, 0] - sc[0], targets[i, gt, 1] - sc[1], targets[i, gt, 2] - sc[2])
            dist = vnorm(to)
            ex = dist - (1.0 - SLACK_MARGIN) * _branch_reach(c, child_ptr, child_idx, D)
            if ex <= 0.0:
                continue
            inv = 1.0 / dist
            j = vcross((sc[0] - h[0], sc[1] - h[1], sc[2] - h[2]), (to[0] * inv, to[1] * inv, to[2] * inv))
            w = nw[c]
            a00 += w * j[0] * j[0]
            a01 += w * j[0] * j[1]
            a02 += w * j[0] * j[2]
            a11 += w * j[1] * j[1]
            a12 += w * j[1] * j[2]
            a22 += w * j[2] * j[2]
            bx += w * j[0] * ex
            by += w * j[1] * ex
            bz += w * j[2] * ex
            wsum += w
        if wsum == 0.0:
            break  # every branch reaches: nothing to turn for
        dp = (pnew[0] - pp[0], pnew[1] - pp[1], pnew[2] - pp[2])
        dn = vnorm(dp)
        if dn > AIM_EPS:  # (a sub-base on its parent gives no direction to hold the distance along)
            inv = 1.0 / dn
            j = vcross((pnew[0] - h[0], pnew[1] - h[1], pnew[2] - h[2]), (dp[0] * inv, dp[1] * inv, dp[2] * inv))
            w = PIVOT_HOLD * wsum
            ep = dn - D[n]
            a00 += w * j[0] * j[0]
            a01 += w * j[0] * j[1]
            a02 += w * j[0] * j[2]
            a11 += w * j[1] * j[1]
            a12 += w * j[1] * j[2]
            a22 += w * j[2] * j[2]
            bx -= w * j[0] * ep
            by -= w * j[1] * ep
            bz -= w * j[2] * ep
        lam = PIVOT_DAMPING * (a00 + a11 + a22)
        rv = _solve_sym3(a00 + lam, a01, a02, a11 + lam, a12, a22 + lam, (bx, by, bz))
        dq = qfrom_rotvec(rv)
        x = qrotate(dq, (pnew[0] - h[0], pnew[1] - h[1], pnew[2] - h[2]))
        pnew = _on_two_spheres((h[0] + x[0], h[1] + x[1], h[2] + x[2]), pp, D[n], h, D[a])
        qb = qnormalize(qmul(dq, qb))
        cur = qrotate(qb, row3(V, a))
        qb = qnormalize(qmul(qfrom_two_vectors(cur, (h[0] - pnew[0], h[1] - pnew[1], h[2] - pnew[2])), qb))
    for e in range(c0, c1):
        c = child_idx[e]
        if br[c] >= 0.0:
            d = qrotate(qb, row3(V, c))
            put3(Pb, c, (pnew[0] + d[0], pnew[1] + d[1], pnew[2] + d[2]))
    return pnew, qb


@njit(borrows=True, helper=True)
def apply_pole(pole, A, B, nudge, budget, PU):  # type: ignore[no-untyped-def]
    """Turn each interior chain point of ``B`` about the line through its neighbours toward ``pole``.

    Point ``k`` (``1 <= k <= K-2``) turns about the axis through
    ``B[k-1]`` (``A[0]`` for ``k == 1``: the fixed root) and ``B[k+1]`` by
    the signed angle between its own and the pole's projections on the
    plane normal to that axis, so both neighbours' distances and the end
    point are unchanged.  Degenerate (straight chain or pole on the axis,
    within ``POLE_EPS``): the point stays, except that with ``nudge`` a
    point lying on the axis is pushed ``POLE_NUDGE`` times its distance
    from ``B[k-1]`` toward the pole (the passes that follow restore the
    bone lengths), so a straight chain starts bending toward the pole.

    ``budget > 0`` (the ``pole_max_twist`` option): point ``k``'s turns add
    up to at most ``budget`` radians in one solve (``PU[k]`` holds what it
    used; zeroed at the start of each item), so a solve keeps the bend side
    of the pose it starts from and blends toward the pole across
    warm-started frames instead of snapping.  ``budget == 0``: no budget.
    """
    k_n = B.shape[0]
    for k in range(1, k_n - 1):
        a = row3(A, 0) if k == 1 else row3(B, k - 1)
        b = row3(B, k + 1)
        ax = (b[0] - a[0], b[1] - a[1], b[2] - a[2])
        la = vnorm(ax)
        if la <= POLE_EPS:
            continue  # neighbours coincide: no axis
        ax = (ax[0] / la, ax[1] / la, ax[2] / la)
        x = (B[k, 0] - a[0], B[k, 1] - a[1], B[k, 2] - a[2])
        y = (pole[0] - a[0], pole[1] - a[1], pole[2] - a[2])
        xd = vdot(x, ax)
        yd = vdot(y, ax)
        xp = (x[0] - xd * ax[0], x[1] - xd * ax[1], x[2] - xd * ax[2])
        yp = (y[0] - yd * ax[0], y[1] - yd * ax[1], y[2] - yd * ax[2])
        ny = vnorm(yp)
        if ny <= POLE_EPS:
            continue  # pole on the axis: no bend plane
        if vnorm(xp) <= POLE_EPS:
            # Joint on the axis (straight chain): no angle to turn by.
            nx = vnorm(x)
            if nudge and nx > POLE_EPS:
                k_push = POLE_NUDGE * nx / ny
                B[k, 0] += k_push * yp[0]
                B[k, 1] += k_push * yp[1]
                B[k, 2] += k_push * yp[2]
            continue
        ang = math.atan2(vdot(vcross(xp, yp), ax), vdot(xp, yp))
        if budget > 0.0:
            left = budget - PU[k]
            if abs(ang) > left:
                ang = left if ang > 0.0 else -left
            if ang == 0.0:
                continue  # this solve's pole budget for the point is spent
            PU[k] += abs(ang)
        h = 0.5 * ang
        sh = math.sin(h)
        rq = (ax[0] * sh, ax[1] * sh, ax[2] * sh, math.cos(h))
        xr = qrotate(rq, x)
        B[k, 0] = a[0] + xr[0]
        B[k, 1] = a[1] + xr[1]
        B[k, 2] = a[2] + xr[2]


@njit(inline=True)  # per-iteration call: inlined, no per-call reference counting of its arrays
def _errors(targets, i, goal_node, P, gerr):  # type: ignore[no-untyped-def]
    """Each goal's distance to its target into ``gerr[i]``; returns the largest."""
    worst = 0.0
    for g in range(goal_node.shape[0]):
        n = goal_node[g]
        dx = P[n, 0] - targets[i, g, 0]
        dy = P[n, 1] - targets[i, g, 1]
        dz = P[n, 2] - targets[i, g, 2]
        e = vmagnitude(dx, dy, dz)  # (the true distance in any units)
        gerr[i, g] = e
        if e > worst:
            worst = e
    return worst


@njit(borrows=True, helper=True)
def solve_item(i, opts, plan, limits, pose, io, scratch):  # type: ignore[no-untyped-def]
    """Solve batch item ``i`` in place (see the module docstring).

    ``opts = (mode, iterations, tol, fixed_root, has_pole, twist_rest, budget)`` (the options, read once
    per range), ``plan`` the views of :func:`unpack_plan` without ``scale_joints``, ``limits = (lim_kind,
    lim_par, lim_rest)``, ``pose = (t, r, s)``, ``io = (targets, poles, gerr, iters, hits, moved)`` and
    ``scratch`` the work arrays of :func:`_scratch`.

    Writes the nodes' local rotations into ``r[i]`` (and, with a free root,
    the root's local translation into ``t[i]``), the goals' errors into
    ``gerr[i]``, and ``iters[i]``, ``hits[i]``, ``moved[i]``.
    """
    mode, iterations, tol, fixed_root, has_pole, twist_rest, budget = opts
    base_path, joints, jpar, node_j, npar, child_ptr, child_idx, ngoal, goal_node, gw, nw, br, btip = plan
    lim_kind, lim_par, lim_rest = limits
    t, r, s = pose
    targets, poles, gerr, iters, hits, moved = io
    pos, rot, scl, P, Pb, Q, Qb, L, V, D, M, U0, TB, PU, WB, LB, PB = scratch
    base_pos, base_rot, base_scl = setup_item(i, base_path, joints, jpar, node_j, npar, t, r, s,
                                              pos, rot, scl, P, Q, L, V, D, M, U0)
    kn = node_j.shape[0]
    use_limits = False
    for n in range(kn):
        TB[n] = False  # scratch from the chunk's previous item: no item may read another's backward flags
        PU[n] = 0.0  # the pole budget each point has used in this solve
        WB[n] = nw[n]  # the sub-base fit's weights (the backward pass sets its slack branches' to 0)
        if lim_kind[n] != 0:
            use_limits = True
    p_root = row3(P, 0)
    ip = i % poles.shape[0]  # no pole: one dummy row
    pole = (poles[ip, 0], poles[ip, 1], poles[ip, 2])
    n_hits = 0
    n_it = 0
    reverted = False
    worst = _errors(targets, i, goal_node, P, gerr)
    # A pole with a budget still has work when the end is already there (a warm start on a reached target):
    # one iteration runs, so a bend left off the pole's side is blended onto it, solve after solve.
    if worst <= tol and not (has_pole and budget > 0.0):
        # Already there.  Only a pose outside its limits is changed (clamped
        # in place, root to tip); otherwise the pose is left bit for bit.
        if use_limits:
            for n in range(kn):
                loc, changed = clamp_local(lim_kind, lim_par, lim_rest, n, row4(L, n))
                if changed:
                    n_hits += 1
                    put4(L, n, loc)
            if n_hits > 0:
                n_hits = forward_rotations(p_root, base_rot, P, False, False, npar, child_ptr, child_idx, P, Q, L,
                                           V, D, M, nw, lim_kind, lim_par, lim_rest, Qb, TB) + n_hits
                _errors(targets, i, goal_node, P, gerr)
    else:
        if fixed_root and not has_pole and goal_node.shape[0] == 1 and goal_node[0] == kn - 1:
            # A straight chain aimed along its target's line with the target within reach: no pass can bend it
            # (every aim is along the line).  Its middle node is pushed off the line toward fold_direction by
            # POLE_NUDGE of its bone, as a pole's nudge pushes it toward the pole, and the passes fold it.
            reach = 0.0
            linear = True
            for n in range(1, kn):
                reach += D[n]
                linear = linear and npar[n] == n - 1
            g_t = (targets[i, 0, 0], targets[i, 0, 1], targets[i, 0, 2])
            x = (g_t[0] - p_root[0], g_t[1] - p_root[1], g_t[2] - p_root[2])
            e = (P[kn - 1, 0] - p_root[0], P[kn - 1, 1] - p_root[1], P[kn - 1, 2] - p_root[2])
            ee = vdot(e, e)
            c = vdot(x, e) / ee if ee > 0.0 else 0.0
            off = (x[0] - c * e[0], x[1] - c * e[1], x[2] - c * e[2])
            on_line = vnorm(off) <= FOLD_STRAIGHT_RTOL * reach  # (off the line the passes bend it themselves)
            if linear and on_line and vnorm(x) < reach * (1.0 - FOLD_REACH_RTOL):
                kb = fold_point(P, reach, 1)
                if kb > 0:
                    dirn = fold_direction(row4(Q, kb), row3(P, kb - 1), row3(P, kb), row3(P, kb + 1))
                    push = POLE_NUDGE * D[kb]
                    put3(P, kb, (P[kb, 0] + push * dirn[0], P[kb, 1] + push * dirn[1], P[kb, 2] + push * dirn[2]))
        straight = False
        if mode == MODE_POSITIONS and fixed_root:
            # Unreachable chain: the answer is the straight chain along the
            # line from the root to the target (no iteration, so re-solving
            # the same target gives the same chain: nothing to oscillate).
            total = 0.0
            for n in range(1, kn):
                total += D[n]
            g = goal_node.shape[0] - 1
            tgt = (targets[i, g, 0], targets[i, g, 1], targets[i, g, 2])
            dist = vnorm((tgt[0] - p_root[0], tgt[1] - p_root[1], tgt[2] - p_root[2]))
            if dist >= total and dist > AIM_EPS:
                straight = True
                u = _toward(p_root, tgt, (0.0, 0.0, 0.0))
                acc = 0.0
                for n in range(1, kn):
                    acc += D[n]
                    put3(P, n, (p_root[0] + acc * u[0], p_root[1] + acc * u[1], p_root[2] + acc * u[2]))
                n_it = 1
        if not straight and mode == MODE_POSITIONS:
            g = goal_node.shape[0] - 1
            n_it = chain_positions(P, Pb, D, U0, (targets[i, g, 0], targets[i, g, 1], targets[i, g, 2]), p_root,
                                   fixed_root, iterations, tol, has_pole, pole, budget, PU)
        elif not straight:
            best = worst
            kept = False
            last = worst
            # A start inside every limit (a warm start from the previous frame's solve) is a candidate too: an
            # unfinished solve none of whose iterates comes nearer than it returns the input as it was.
            from_start = use_limits
            for n in range(kn):
                if from_start and clamp_local(lim_kind, lim_par, lim_rest, n, row4(L, n))[1]:
                    from_start = False
            if from_start:
                kept = True
                for n in range(kn):
                    put3(PB, n, row3(P, n))
                    put4(LB, n, row4(L, n))  # (the start's rotations: where a descent from it begins)
            # A limited chain (one goal on its last node, fixed root, no pole) whose passes stall spends the rest
            # of its iterations on a descent from its best candidate (PASS_GAIN, PASS_PATIENCE, _descend).
            descend = use_limits and fixed_root and not has_pole and goal_node.shape[0] == 1 and \
                goal_node[0] == kn - 1
            for n in range(1, kn):
                descend = descend and npar[n] == n - 1
            slow = False
            n_slow = 0
            for _ in range(iterations):
                if has_pole:
                    apply_pole(pole, P, P, True, budget, PU)
                backward(targets, i, ngoal, gw, npar, child_ptr, child_idx, P, Pb, Q, Qb, V, D, M, nw, U0,
                         use_limits, lim_kind, lim_par, lim_rest, TB, br, btip, WB)
                p0 = p_root if fixed_root else row3(Pb, 0)
                if has_pole:
                    apply_pole(pole, P if fixed_root else Pb, Pb, False, budget, PU)
                n_hits += forward_rotations(p0, base_rot, Pb, True, use_limits, npar, child_ptr, child_idx, P, Q,
                                            L, V, D, M, WB, lim_kind, lim_par, lim_rest, Qb, TB)
                n_it += 1
                last = _errors(targets, i, goal_node, P, gerr)
                if last <= tol:
                    break
                before = best
                if use_limits and last < best:
                    best = last
                    kept = True
                    from_start = False
                    for n in range(kn):
                        put4(LB, n, row4(L, n))
                        put3(PB, n, row3(P, n))
                if descend:
                    n_slow = 0 if last <= PASS_GAIN * before else n_slow + 1
                    if n_slow >= PASS_PATIENCE:
                        slow = True
                        break
            if slow and n_it < iterations:
                # The passes fight the clamps (a pass that goes nowhere, or loses ground and may end on another
                # branch): the rest of the iterations descend from the best candidate, the start included, so
                # the error falls monotonically and the pose moves continuously from where the solve began.
                cur = last
                if kept:
                    cur = best
                    for n in range(kn):
                        put4(L, n, row4(LB, n))
                forward_rotations(p_root, base_rot, P, False, False, npar, child_ptr, child_idx, P, Q, L, V, D, M,
                                  WB, lim_kind, lim_par, lim_rest, Qb, TB)
                sweeps, n_kept, d_hits, cur = _descend(iterations - n_it, cur, tol, p_root, base_rot, npar,
                                                       child_ptr, child_idx, P, Q, L, V, D, M, WB, lim_kind,
                                                       lim_par, lim_rest, Qb, TB, targets, i, goal_node, gerr)
                n_it += sweeps
                if n_kept > 0:
                    # Nearer than every candidate: the descent's pose is the answer (nothing to restore).
                    n_hits += d_hits
                    kept = False
                    from_start = False
                    last = cur
            unfinished = use_limits and kept and last > best and last > tol  # (a finished solve is kept as it is)
            if unfinished and from_start:
                # No iterate came nearer than the input: it is the answer, bit for bit (nothing is written).
                reverted = True
                for n in range(kn):
                    put3(P, n, row3(PB, n))
            elif unfinished:
                # With limits the passes fight the clamps and the error need not fall: an unfinished solve
                # ends on its best iterate, not on wherever the last pass left it (another branch, a flip).
                for n in range(kn):
                    put4(L, n, row4(LB, n))
                forward_rotations(row3(PB, 0), base_rot, P, False, use_limits, npar, child_ptr, child_idx, P, Q,
                                  L, V, D, M, WB, lim_kind, lim_par, lim_rest, Qb, TB)
        if mode == MODE_POSITIONS:
            if has_pole:
                apply_pole(pole, P, P, False, budget, PU)
            # Rotations from positions: one forward rotation pass aimed at the solved points.
            forward_rotations(row3(P, 0), base_rot, P, True, False, npar, child_ptr, child_idx, P, Q, L, V, D, M, nw,
                              lim_kind, lim_par, lim_rest, Qb, TB)
        if twist_rest and n_it > 0 and not reverted:
            n_hits += rest_twist_nodes(base_rot, use_limits, npar, child_ptr, child_idx, P, Q, L, V, D, M,
                                       lim_kind, lim_par, lim_rest)
        _errors(targets, i, goal_node, P, gerr)
    if reverted:
        n_hits = 0  # the clamps of the iterates thrown away changed nothing in the pose returned
    elif n_it > 0 or n_hits > 0:
        for n in range(kn):
            write_q(r, i, joints[node_j[n]], row4(L, n))
        if not fixed_root:
            # Free root: its new world position back into its local translation.
            d = (P[0, 0] - base_pos[0], P[0, 1] - base_pos[1], P[0, 2] - base_pos[2])
            lt = qrotate(qconj(base_rot), d)
            j0 = joints[node_j[0]]
            t[i, j0, 0] = lt[0] / base_scl
            t[i, j0, 1] = lt[1] / base_scl
            t[i, j0, 2] = lt[2] / base_scl
    iters[i] = n_it
    hits[i] = n_hits
    moved[i] = (n_it > 0 or n_hits > 0) and not reverted


@njit(borrows=True, helper=True)
def rest_twist_nodes(base_rot, use_limits, npar, child_ptr, child_idx, P, Q, L, V, D, M, lim_kind, lim_par,  # type: ignore[no-untyped-def]
                     lim_rest):
    """The ``twist="rest"`` policy on a solved item: each one-child node's twist about its bone from rest.

    Root to tips: node ``n``'s frame ``F`` (``base_rot`` or ``Q[p] M[n]``,
    with its parent's new rotation) and its solved world rotation ``Q[n]``
    give ``L = inverse(F) Q[n]``; a node with exactly one child ``c``
    (``D[c] > 0``) gets :func:`~kinema._kernels.quat.qrest_twist` of it
    about its bone's own direction ``V[c] / D[c]`` with its rest rotation
    ``lim_rest[n]``, then its limit when ``use_limits``.  That keeps every
    bone's world direction, so every position (``P`` is rebuilt to check:
    it moves only where a limit acts).  Sub-bases keep their solved world
    rotation (they carry several branches: no one bone to untwist about);
    leaves keep their local rotation, as the solve does.  Returns the limit
    clamps that changed a rotation.
    """
    hits = 0
    for n in range(npar.shape[0]):
        p = npar[n]
        if p < 0:
            f = base_rot
        else:
            f = qmul(row4(Q, p), row4(M, n))
        n_child = child_ptr[n + 1] - child_ptr[n]
        if n_child == 0:
            loc = row4(L, n)
        else:
            loc = qnormalize(qmul(qconj(f), row4(Q, n)))
            if n_child == 1:
                c = child_idx[child_ptr[n]]
                if D[c] > 0.0:
                    inv = 1.0 / D[c]
                    loc = qrest_twist(loc, row4(lim_rest, n), (V[c, 0] * inv, V[c, 1] * inv, V[c, 2] * inv))
            if use_limits:
                loc, changed = clamp_local(lim_kind, lim_par, lim_rest, n, loc)
                if changed:
                    hits += 1
        put4(L, n, loc)
        qn = qmul(f, loc)
        put4(Q, n, qn)
        pn = row3(P, n)
        for e in range(child_ptr[n], child_ptr[n + 1]):
            c = child_idx[e]
            d = qrotate(qn, row3(V, c))
            put3(P, c, (pn[0] + d[0], pn[1] + d[1], pn[2] + d[2]))
    return hits


@njit(helper=True)
def _scratch(n_path, kn):  # type: ignore[no-untyped-def]
    return (np.empty((n_path, 3)), np.empty((n_path, 4)), np.empty(n_path), np.empty((kn, 3)), np.empty((kn, 3)),
            np.empty((kn, 4)), np.empty((kn, 4)), np.empty((kn, 4)), np.empty((kn, 3)), np.empty(kn),
            np.empty((kn, 4)), np.empty((kn, 3)), np.zeros(kn, dtype=np.bool_), np.zeros(kn),
            np.empty(kn), np.empty((kn, 4)), np.empty((kn, 3)))


# Slots of the per-call ``options`` float64 array (integers and flags are
# stored as exact floats: one array, one dispatch argument).
O_MODE = 0
O_ITERATIONS = 1
O_TOLERANCE = 2
O_FIXED_ROOT = 3
O_HAS_POLE = 4
O_TWIST_REST = 5  # 1: the twist="rest" policy (:func:`rest_twist_nodes`), 0: "input"
O_POLE_MAX_TWIST = 6  # > 0: the pole's turn budget per point and solve (radians, :func:`apply_pole`); 0: none
N_OPTIONS = 7

# Packed plan (built once per chain or tree by :mod:`kinema._fabrik`, so a
# call passes two arrays instead of eleven):
#   ``index`` int64 ``[n_path, K, kn, n_child, G, base_path (n_path), joints (K), jpar (K), node_j (kn),
#   npar (kn), child_ptr (kn + 1), child_idx (n_child), ngoal (kn), goal_node (G), btip (kn)]``;
#   ``weights`` float64 ``[gw (G), nw (kn), br (kn)]``: ``br[c]`` 1 when the subtree below node ``c`` is one
#   chain ending in one goal (``btip[c]``, its goal index), else -1 (see :func:`_slack_subbase`).
_INDEX_HEADER = 5


@njit(inline=True)  # inlined: in a borrowing caller its views cost no reference counting
def unpack_plan(index, weights):  # type: ignore[no-untyped-def]
    """Views ``(base_path, joints, jpar, node_j, npar, child_ptr, child_idx, ngoal, goal_node, gw, nw,
    scale_joints, br, btip)`` of a packed plan (``scale_joints``: the chain's ancestors, then its joints)."""
    n_path = index[0]
    n_j = index[1]
    kn = index[2]
    n_child = index[3]
    n_goal = index[4]
    a = _INDEX_HEADER
    base_path = index[a:a + n_path]
    joints = index[a + n_path:a + n_path + n_j]
    scale_joints = index[a:a + n_path + n_j]
    a += n_path + n_j
    jpar = index[a:a + n_j]
    a += n_j
    node_j = index[a:a + kn]
    a += kn
    npar = index[a:a + kn]
    a += kn
    child_ptr = index[a:a + kn + 1]
    a += kn + 1
    child_idx = index[a:a + n_child]
    a += n_child
    ngoal = index[a:a + kn]
    a += kn
    goal_node = index[a:a + n_goal]
    a += n_goal
    btip = index[a:a + kn]
    gw = weights[:n_goal]
    nw = weights[n_goal:n_goal + kn]
    br = weights[n_goal + kn:n_goal + 2 * kn]
    return (base_path, joints, jpar, node_j, npar, child_ptr, child_idx, ngoal, goal_node, gw, nw, scale_joints,
            br, btip)


@njit(helper=True)
def solve_range(c0, c1, args):  # type: ignore[no-untyped-def]
    """Items ``c0 .. c1-1`` with one scratch set.

    ``args = (index, weights, options, lim_kind, lim_par, lim_rest, t, r, s, targets, poles, gerr, counts,
    moved)``: the packed plan, the options (``O_*``), the packed limits, the pose arrays, ``targets (N, G, 3)``,
    ``poles (1|N, 3)``, and the outputs ``gerr (N, G)``, ``counts (2, N)`` (iterations, limit hits) and
    ``moved (N,)``.
    """
    index = args[0]
    scratch = _scratch(index[1], index[2])  # owned here, lent to the borrowing item loop
    _solve_items(c0, c1, args, scratch)


@njit(borrows=True, helper=True)
def _solve_items(c0, c1, args, scratch):  # type: ignore[no-untyped-def]
    """:func:`solve_range` after its scratch allocation: the plan's views are made here, where they cost no
    reference counting, and the options are read once for all the items."""
    index, weights, options, lim_kind, lim_par, lim_rest, t, r, s, targets, poles, gerr, counts, moved = args
    (base_path, joints, jpar, node_j, npar, child_ptr, child_idx, ngoal, goal_node, gw, nw,
     _, br, btip) = unpack_plan(index, weights)
    plan = (base_path, joints, jpar, node_j, npar, child_ptr, child_idx, ngoal, goal_node, gw, nw, br, btip)
    opts = (int(options[O_MODE]), int(options[O_ITERATIONS]), options[O_TOLERANCE], options[O_FIXED_ROOT] != 0.0,
            options[O_HAS_POLE] != 0.0, options[O_TWIST_REST] != 0.0, options[O_POLE_MAX_TWIST])
    limits = (lim_kind, lim_par, lim_rest)
    pose = (t, r, s)
    io = (targets, poles, gerr, counts[0], counts[1], moved)
    for i in range(c0, c1):
        solve_item(i, opts, plan, limits, pose, io, scratch)


@njit(borrows=True, helper=True)
def _check(args):  # type: ignore[no-untyped-def]
    """The drivers' input check (:func:`~kinema._kernels.chain.input_status`): nothing is solved unless OK."""
    index, weights, options, lim_kind, lim_par, lim_rest, t, r, s, targets, poles, gerr, counts, moved = args
    return input_status(t, r, s, targets, poles, unpack_plan(index, weights)[11])


@njit(borrows=True, helper=True)
def _finish(args):  # type: ignore[no-untyped-def]
    """The drivers' output check (:func:`~kinema._kernels.chain.output_status`)."""
    index, weights, options, lim_kind, lim_par, lim_rest, t, r, s, targets, poles, gerr, counts, moved = args
    return output_status(t, r, gerr)


#: ``solve_serial(n, args)`` and ``solve_parallel(n_chunks, n, args)`` (:mod:`.drivers`): status 0 = ok.
DRIVERS = make_drivers("fabrik", _check, solve_range, _finish)
solve_serial, solve_parallel = DRIVERS
