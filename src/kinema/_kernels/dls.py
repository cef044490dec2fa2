"""Damped least squares (DLS) kernels: several goals, strict priorities, joint limits.

One per-item solve, :func:`dls_item`, written once; the shared drivers
(:mod:`.drivers`: serial, and chunks over threads with one scratch set per
chunk) run it through :func:`dls_range`, so a batch equals a loop of
single solves bit for bit.

**Arguments** (see :mod:`kinema._dls` for the packing):

* ``plan_i (int64 1-D)``, ``plan_f (float64 1-D)``: the packed plan, laid
  out as :func:`layout` says (header ``P_*``, then the arrays);
* ``opts (float64 1-D)``: options at the slots ``O_*``;
* ``t (Nt,J,3)``, ``r (N,J,4)``, ``s (Ns,J,3)`` with ``Nt, Ns`` in {1, N}
  (item ``i`` reads row ``min(i, Nt - 1)``); ``r`` holds the input pose and
  receives the output; with root translation ``t`` has ``N`` rows and the
  kernel writes the root's translation in row ``i``;
* ``goals (N,G,8)``: per-item goal data in plan goal order (position or
  look-at target ``xyz``, or orientation ``xyzw``);
* ``weights (1|N,)``: each item's blend of the solved pose with the input
  pose, in [0, 1] (1: solved);
* ``diag (N,D)``: outputs at the slots ``D_*``, then ``goal_errors (G)``,
  ``goal_reached (G)``, ``at_limit (K)``;
* ``scratch``: the per-thread work arrays of :func:`make_scratch`.

**Degrees of freedom.**  A moving joint is a ball joint (three local
rotation-vector increments, ``q_local' = q_local * exp(delta)``, so the
world axis of increment ``a`` is ``R_world * e_a``) or, under a
:class:`~kinema.limits.Hinge`, one angle about the hinge axis; the optional
root translation adds three world-space DOFs.

**Step.**  Levels (goals of one priority) from the most important down:
each level's Jacobian is projected onto the orthogonal complement of every
more important level's rows (an orthonormal basis kept by Gram-Schmidt), so
its step leaves those tasks unchanged to first order, and solved by damped
least squares ``dq = J^T (J J^T + lambda^2 I)^-1 e`` (Cholesky).  The pose
goal is the last level (identity Jacobian, closed form).  No joint turns by
more than ``MAX_STEP_ANGLE`` in one step; the levels share that cap most
important first (a level's part is scaled into what the levels above left,
so a far, less important goal cannot shorten a more important one's step).
Lengths (position rows,
the root's translation DOFs) are in the item's own unit ``L`` (how far the
solved joints reach from the topmost one, see :func:`dls_item`), so the
damping and the weighing of positions against angles do not depend on the
rig's units.  Levenberg-Marquardt
damping: ``lambda`` shrinks after a step that lowers the weighted squared
error and grows (the step undone) after one that does not.

**Limits.**  After each step every limited joint is clamped
(:func:`kinema._kernels.limits.apply_limit_local`); the direction a clamp
cut off is remembered, and the next step removes that direction from the
joint's Jacobian columns when the step would push further into the limit.

**Straight chains.**  A straight chain aimed along its position goal's target line has no Jacobian column that
moves the end along the line: the step is zero.  When no step lowers the error any more (once per solve), such
a chain (its target within reach, unreached) is bent (:func:`_fold_straight`, as CCD and FABRIK do); one still
straight with its target on the line behind its first joint (pointing away: the worst pose, not the best) is
turned off the line (:func:`_turn_behind`) when the step test accepts the turn; the solve goes on from there.
A solve that never stalls there is unchanged.
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit
from .chain import FOLD_REACH_RTOL, FOLD_STRAIGHT_RTOL, fold_direction, fold_point, joint_world, read_q, write_q
from .constants import OK
from .drivers import make_drivers
from .limits import LIMIT_NONE, LIMIT_PARAMS, apply_limit_local
from .quat import (
    qangle,
    qconj,
    qfrom_axis_angle,
    qfrom_rotvec,
    qmul,
    qnormalize,
    qrotate,
    qslerp,
    qto_rotvec,
    vlength,
    vperpendicular,
)

# Goal kinds (plan goal_kind).
GOAL_POSITION = 0
GOAL_ORIENTATION = 1
GOAL_LOOK_AT = 2

# Affects codes (plan affects[k * G + g]): how moving joint k moves goal g's joint.
AFFECTS_NONE = 0
AFFECTS_SELF = 1  # k is the goal joint: its rotation turns the joint, its position stays
AFFECTS_ANCESTOR = 2  # k is a strict ancestor: it moves and turns the goal joint

# plan_i header slots.
P_N_FK = 0  # joints whose world transform the solve needs (goal joints and all their ancestors)
P_N_MOVING = 1  # moving joints K
P_N_GOALS = 2  # goals G (the pose goal excluded)
P_N_DOF = 3  # degrees of freedom (3 per ball joint, 1 per hinge, 3 for root translation)
P_ROOT_T = 4  # fk index of the translated root, or -1
P_N_LEVELS = 5  # priority levels of the goals
P_HAS_POSE = 6  # 1 when a pose goal keeps the input pose as the lowest level
P_HEADER = 8

# opts slots.
O_ITERATIONS = 0  # most iterations (steps tried)
O_TOLERANCE = 1  # a goal is reached within this error (length units or radians)
O_DAMPING = 2  # smallest damping lambda
O_SIZE = 3

# diag slots.
D_STATUS = 0  # 0 ok, STATUS_NONFINITE when the solve gave a non-finite pose (the input is kept)
D_ERROR = 1  # largest goal error
D_ITERATIONS = 2
D_LIMITS_HIT = 3  # clamps that changed a rotation (start and accepted steps)
D_POSE_ERROR = 4  # largest joint angle (rad) away from the input pose (the pose goal's error)
D_HEADER = 5

STATUS_OK = OK
STATUS_NONFINITE = 1

#: Damping grows by this factor after a rejected step and shrinks by it after an accepted one.
DAMPING_UP = 4.0
DAMPING_DOWN = 0.25
#: Damping past this means no step lowers the error any more: the solve stops (closest pose).
DAMPING_MAX = 1e8
#: Largest rotation (radians) one step may give a joint.  The levels share it most important first: each
#: level's part of the step is scaled down into what the levels above it left (so a far, less important
#: goal never shortens a more important level's step).
MAX_STEP_ANGLE = 0.5
#: Rows of a level whose part outside the more important levels' span is below this fraction of the
#: row's norm add nothing to the basis (they lie in the span).
RANK_RTOL = 1e-10
#: An accepted step whose largest DOF change is below this (radians or length) ends the solve.
STEP_TINY = 1e-14
#: A level whose squared error is within this fraction of another's counts as equal in the step test.
LEVEL_RTOL = 1e-12
#: Most second-order correction steps per iteration (each a Gauss-Newton step of the more important levels).
CORRECTION_STEPS = 4
#: Errors below this fraction of the tolerance count as zero when steps are compared, so reached goals
#: do not block the steps of less important ones.
SATISFIED_FRACTION = 0.1
#: Cholesky pivots below this are raised to it (the damped matrix is positive definite; this only
#: guards rounding).
PIVOT_MIN = 1e-300
#: A cut-off direction shorter than this (radians) marks no limit direction.
BLOCK_EPS = 1e-12
#: Most times one step is solved again with the limit directions it would push joints on their limits into
#: dropped (the clamping loop); what the last solve still runs into is clamped.
CLAMP_PASSES = 4
#: A joint is on its limit when turning it this far (radians) along its step crosses the limit: well above the
#: clamps' slack (1e-12), well below a step.
LIMIT_PROBE_ANGLE = 1e-9
#: ``at_limit`` reports a joint within this angle (radians) of its limit (some turn this large leaves it).
AT_LIMIT_ANGLE = 1e-6
#: A look-at target closer than this to its joint (a fraction of the item's length unit) gives no direction: no
#: error and no row.
LOOK_AT_MIN_DISTANCE = 1e-12
#: Below this ``|a_w x d|`` the look-at axis is along the direction (or exactly away): no rotation axis.
LOOK_AT_MIN_SIN = 1e-300
#: The bend (radians) given once to a straight chain aimed along its position goal's target line, within reach
#: (:func:`_fold_straight`): there no column of the Jacobian moves the end along the line, so the damped step is
#: zero; the seed gives the chain a side to fold to (as CCD's ``POLE_SEED_ANGLE``, and the same size).
FOLD_SEED_ANGLE = 0.1


@njit
def layout(plan_i):  # type: ignore[no-untyped-def]
    """Offsets of the packed plan's arrays (the one definition of the layout).

    ``plan_i``: header, ``fk_joint (NF)``, ``fk_parent (NF)`` (fk index or -1),
    ``mov_fk (K)``, ``mov_dof0 (K)``, ``mov_ndof (K)``, ``mov_limit (K)``
    (limit kind), ``goal_kind (G)``, ``goal_fk (G)``, ``level_start
    (L + 1)`` (goal ranges per level, most important first), ``affects (K*G)``.
    ``plan_f``: ``goal_sqrt_weight (G)``, ``goal_axis (3G)`` (look-at local
    axes), ``pose_weight (1)``, ``dof_axis (3K)`` (hinge axes, local),
    ``limit_params (K*LIMIT_PARAMS)``, ``limit_rest (4K)``.
    Returns the int offsets in that order, then the float ones, then the
    total lengths ``(len_i, len_f)``.
    """
    nf = plan_i[P_N_FK]
    k = plan_i[P_N_MOVING]
    g = plan_i[P_N_GOALS]
    nl = plan_i[P_N_LEVELS]
    o_fkj = P_HEADER
    o_fkp = o_fkj + nf
    o_mfk = o_fkp + nf
    o_dof0 = o_mfk + k
    o_ndof = o_dof0 + k
    o_lim = o_ndof + k
    o_gk = o_lim + k
    o_gfk = o_gk + g
    o_lev = o_gfk + g
    o_aff = o_lev + nl + 1
    len_i = o_aff + k * g
    f_gw = 0
    f_gax = f_gw + g
    f_pw = f_gax + 3 * g
    f_dax = f_pw + 1
    f_lp = f_dax + 3 * k
    f_lr = f_lp + LIMIT_PARAMS * k
    len_f = f_lr + 4 * k
    return (o_fkj, o_fkp, o_mfk, o_dof0, o_ndof, o_lim, o_gk, o_gfk, o_lev, o_aff,
            f_gw, f_gax, f_pw, f_dax, f_lp, f_lr, len_i, len_f)


@njit
def diag_size(plan_i):  # type: ignore[no-untyped-def]
    """Columns of ``diag``: the ``D_*`` slots, goal errors and reached flags (G each), at-limit flags (K)."""
    return D_HEADER + 2 * plan_i[P_N_GOALS] + plan_i[P_N_MOVING]


@njit
def make_scratch(plan_i, plan_f, opts):  # type: ignore[no-untyped-def]
    """Work arrays for one thread: ``(pos, rot, scl, q_in, q_save, jac, err, basis, lev_j, lev_a, lev_y,
    delta, e_pose, world_axis, block_n, block_new, gerr, t_io, lvl, mask, unit, block_try, probe, chain)``."""
    nf = plan_i[P_N_FK]
    k = plan_i[P_N_MOVING]
    g = plan_i[P_N_GOALS]
    nd = plan_i[P_N_DOF]
    m = 3 * g
    pos = np.zeros((nf, 3))
    rot = np.zeros((nf, 4))
    scl = np.zeros(nf)
    q_in = np.zeros((k, 4))
    q_save = np.zeros((k, 4))
    jac = np.zeros((max(m, 1), max(nd, 1)))
    err = np.zeros(max(m, 1))
    basis = np.zeros((max(m, 1), max(nd, 1)))
    lev_j = np.zeros((m + 1, max(nd, 1)))  # a level's rows; the last row holds one level's part of the step
    lev_a = np.zeros((max(m, 1), max(m, 1)))
    lev_y = np.zeros(max(m, 1))
    delta = np.zeros(max(nd, 1))
    e_pose = np.zeros(max(nd, 1))
    world_axis = np.zeros((max(nd, 1), 3))
    block_n = np.zeros((max(k, 1), 4))  # xyz: cut-off direction (local), w: 1 when set
    block_new = np.zeros((max(k, 1), 4))
    gerr = np.zeros(max(g, 1))
    t_io = np.zeros((2, 3))  # row 0: input root translation, row 1: saved before a step
    lvl = np.zeros((3, plan_i[P_N_LEVELS] + 1))  # per level (pose last): error now, after the step, floor
    mask = np.zeros(max(k, 1))  # joints whose limit direction the step drops
    unit = np.ones(2)  # the item's length unit L and 1 / L (see dls_item)
    block_try = np.zeros((max(k, 1), 4))  # one step's limit directions (block_n and what the clamping loop adds)
    probe = np.zeros(3)  # one joint's probing turn
    chain = np.zeros((k + 1, 3))  # a goal's moving ancestors and its joint, world positions (_fold_straight)
    return (pos, rot, scl, q_in, q_save, jac, err, basis, lev_j, lev_a, lev_y, delta, e_pose, world_axis,
            block_n, block_new, gerr, t_io, lvl, mask, unit, block_try, probe, chain)


@njit
def _fk(plan_i, lay, i, t, r, s, pos, rot, scl):  # type: ignore[no-untyped-def]
    """World transforms of the plan's fk joints (root first) into ``pos, rot, scl``."""
    o_fkj = lay[0]
    o_fkp = lay[1]
    it = min(i, t.shape[0] - 1)
    is_ = min(i, s.shape[0] - 1)
    for f in range(plan_i[P_N_FK]):
        j = plan_i[o_fkj + f]
        par = plan_i[o_fkp + f]
        if par < 0:
            pp = (0.0, 0.0, 0.0)
            pq = (0.0, 0.0, 0.0, 1.0)
            ps = 1.0
        else:
            pp = (pos[par, 0], pos[par, 1], pos[par, 2])
            pq = (rot[par, 0], rot[par, 1], rot[par, 2], rot[par, 3])
            ps = scl[par]
        p, q, sc = joint_world(pp, pq, ps, (t[it, j, 0], t[it, j, 1], t[it, j, 2]), read_q(r, i, j), s[is_, j, 0])
        pos[f, 0] = p[0]
        pos[f, 1] = p[1]
        pos[f, 2] = p[2]
        rot[f, 0] = q[0]
        rot[f, 1] = q[1]
        rot[f, 2] = q[2]
        rot[f, 3] = q[3]
        scl[f] = sc


@njit(helper=True)
def _dof_unit(plan_f, lay, k, ndof, a):  # type: ignore[no-untyped-def]
    """Local axis of DOF ``a`` of moving joint ``k``: ``e_a`` for a ball joint, the hinge axis for one DOF."""
    if ndof == 1:
        f_dax = lay[13]
        return (plan_f[f_dax + 3 * k], plan_f[f_dax + 3 * k + 1], plan_f[f_dax + 3 * k + 2])
    if a == 0:
        return (1.0, 0.0, 0.0)
    if a == 1:
        return (0.0, 1.0, 0.0)
    return (0.0, 0.0, 1.0)


@njit(helper=True)
def _look_dir(goals, i, g, p, unit):  # type: ignore[no-untyped-def]
    """``(unit direction from p to the look-at target, distance)``; distance 0 when too close (within
    ``LOOK_AT_MIN_DISTANCE`` of the item's length unit ``unit[0]``)."""
    dx = goals[i, g, 0] - p[0]
    dy = goals[i, g, 1] - p[1]
    dz = goals[i, g, 2] - p[2]
    d = vlength(dx, dy, dz)
    if d <= LOOK_AT_MIN_DISTANCE * unit[0]:
        return (0.0, 0.0, 0.0), 0.0
    return (dx / d, dy / d, dz / d), d


@njit
def _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr, e_pose, lvl, unit):  # type: ignore[no-untyped-def]
    """Residuals at the current pose: weighted goal rows ``err (3G)``, goal errors ``gerr (G)`` (unweighted,
    in length units or radians), the pose goal's DOF residual ``e_pose (NDOF)``, each level's weighted squared
    error ``lvl[:L + 1]`` (the pose goal last).  Lengths in ``err``, ``e_pose`` and the costs are in the item's
    length unit ``unit[0]`` (``unit[1]`` is its inverse).  Returns ``(weighted squared error, pose error)``."""
    o_mfk, o_dof0, o_ndof = lay[2], lay[3], lay[4]
    o_gk, o_gfk = lay[6], lay[7]
    f_gw, f_gax, f_pw = lay[10], lay[11], lay[12]
    nl = plan_i[P_N_LEVELS]
    cost = 0.0
    for lv in range(nl + 1):
        lvl[lv] = 0.0
    lv = 0
    for g in range(plan_i[P_N_GOALS]):
        while g >= plan_i[lay[8] + lv + 1]:
            lv += 1
        kind = plan_i[o_gk + g]
        f = plan_i[o_gfk + g]
        sw = plan_f[f_gw + g]
        p = (pos[f, 0], pos[f, 1], pos[f, 2])
        q = (rot[f, 0], rot[f, 1], rot[f, 2], rot[f, 3])
        in_unit = 1.0  # what one unit of gerr[g] is in the solve's units
        if kind == GOAL_POSITION:
            in_unit = unit[1]
            ex = goals[i, g, 0] - p[0]
            ey = goals[i, g, 1] - p[1]
            ez = goals[i, g, 2] - p[2]
            gerr[g] = vlength(ex, ey, ez)
            ex *= in_unit
            ey *= in_unit
            ez *= in_unit
        elif kind == GOAL_ORIENTATION:
            qt = (goals[i, g, 0], goals[i, g, 1], goals[i, g, 2], goals[i, g, 3])
            dq = qmul(qt, qconj(q))
            rv = qto_rotvec(dq)
            ex = rv[0]
            ey = rv[1]
            ez = rv[2]
            gerr[g] = qangle(dq)
        else:
            ax = qrotate(q, (plan_f[f_gax + 3 * g], plan_f[f_gax + 3 * g + 1], plan_f[f_gax + 3 * g + 2]))
            d, dist = _look_dir(goals, i, g, p, unit)
            ex = 0.0
            ey = 0.0
            ez = 0.0
            gerr[g] = 0.0
            if dist > 0.0:
                # the rotation still needed: angle phi about n = unit(a_w x d)
                cx = ax[1] * d[2] - ax[2] * d[1]
                cy = ax[2] * d[0] - ax[0] * d[2]
                cz = ax[0] * d[1] - ax[1] * d[0]
                sn = math.sqrt(cx * cx + cy * cy + cz * cz)
                phi = math.atan2(sn, ax[0] * d[0] + ax[1] * d[1] + ax[2] * d[2])
                gerr[g] = phi
                if sn > LOOK_AT_MIN_SIN:
                    k = phi / sn
                    ex = cx * k
                    ey = cy * k
                    ez = cz * k
                elif phi > 1.0:
                    # pointing exactly away: any axis perpendicular to a_w will do
                    n = vperpendicular(ax)
                    ex = n[0] * phi
                    ey = n[1] * phi
                    ez = n[2] * phi
        err[3 * g] = sw * ex
        err[3 * g + 1] = sw * ey
        err[3 * g + 2] = sw * ez
        c = sw * sw * (gerr[g] * in_unit) * (gerr[g] * in_unit)
        cost += c
        lvl[lv] += c
    pose_err = 0.0
    if plan_i[P_HAS_POSE] != 0:
        pw = plan_f[f_pw]
        for k in range(plan_i[P_N_MOVING]):
            j = plan_i[lay[0] + plan_i[o_mfk + k]]
            d0 = plan_i[o_dof0 + k]
            nd = plan_i[o_ndof + k]
            dq = qmul(qconj(read_q(r, i, j)), (q_in[k, 0], q_in[k, 1], q_in[k, 2], q_in[k, 3]))
            ang = qangle(dq)
            if ang > pose_err:
                pose_err = ang
            rv = qto_rotvec(dq)
            for a in range(nd):
                u = _dof_unit(plan_f, lay, k, nd, a)
                e = rv[0] * u[0] + rv[1] * u[1] + rv[2] * u[2]
                e_pose[d0 + a] = e
                cost += pw * e * e
                lvl[nl] += pw * e * e
        if plan_i[P_ROOT_T] >= 0:
            jr = plan_i[lay[0] + plan_i[P_ROOT_T]]
            nd_all = plan_i[P_N_DOF]
            for a in range(3):
                e = (t_io[0, a] - t[i, jr, a]) * unit[1]
                e_pose[nd_all - 3 + a] = e
                cost += pw * e * e
                lvl[nl] += pw * e * e
    return cost, pose_err


@njit
def _jacobian(plan_i, plan_f, lay, i, goals, pos, rot, jac, world_axis, unit):  # type: ignore[no-untyped-def]
    """Weighted goal rows ``jac (3G, NDOF)`` at the current pose (analytic, see the module docs), position rows
    and root translation columns in the item's length unit ``unit[0]`` (as :func:`_evaluate`'s rows)."""
    o_mfk, o_dof0, o_ndof = lay[2], lay[3], lay[4]
    o_gk, o_gfk, o_aff = lay[6], lay[7], lay[9]
    f_gw, f_gax = lay[10], lay[11]
    nk = plan_i[P_N_MOVING]
    ng = plan_i[P_N_GOALS]
    ndof = plan_i[P_N_DOF]
    for k in range(nk):
        f = plan_i[o_mfk + k]
        q = (rot[f, 0], rot[f, 1], rot[f, 2], rot[f, 3])
        nd = plan_i[o_ndof + k]
        for a in range(nd):
            w = qrotate(q, _dof_unit(plan_f, lay, k, nd, a))
            d = plan_i[o_dof0 + k] + a
            world_axis[d, 0] = w[0]
            world_axis[d, 1] = w[1]
            world_axis[d, 2] = w[2]
    for g in range(ng):
        kind = plan_i[o_gk + g]
        fg = plan_i[o_gfk + g]
        sw = plan_f[f_gw + g]
        pg = (pos[fg, 0], pos[fg, 1], pos[fg, 2])
        row = 3 * g
        for c in range(ndof):
            jac[row, c] = 0.0
            jac[row + 1, c] = 0.0
            jac[row + 2, c] = 0.0
        # look-at: current quantity a_w - d, with d the unit direction to the target
        aw = (0.0, 0.0, 0.0)
        dl = (0.0, 0.0, 0.0)
        inv_dist = 0.0
        if kind == GOAL_LOOK_AT:
            qg = (rot[fg, 0], rot[fg, 1], rot[fg, 2], rot[fg, 3])
            aw = qrotate(qg, (plan_f[f_gax + 3 * g], plan_f[f_gax + 3 * g + 1], plan_f[f_gax + 3 * g + 2]))
            dl, dist = _look_dir(goals, i, g, pg, unit)
            if dist == 0.0:
                continue
            inv_dist = 1.0 / dist
        for k in range(nk):
            aff = plan_i[o_aff + k * ng + g]
            if aff == AFFECTS_NONE:
                continue
            fk_ = plan_i[o_mfk + k]
            rx = pg[0] - pos[fk_, 0]
            ry = pg[1] - pos[fk_, 1]
            rz = pg[2] - pos[fk_, 2]
            for a in range(plan_i[o_ndof + k]):
                d = plan_i[o_dof0 + k] + a
                wx = world_axis[d, 0]
                wy = world_axis[d, 1]
                wz = world_axis[d, 2]
                if kind == GOAL_ORIENTATION:
                    cx = wx
                    cy = wy
                    cz = wz
                else:
                    # velocity of the goal joint's position (zero for the joint itself)
                    if aff == AFFECTS_ANCESTOR:
                        vx = wy * rz - wz * ry
                        vy = wz * rx - wx * rz
                        vz = wx * ry - wy * rx
                    else:
                        vx = 0.0
                        vy = 0.0
                        vz = 0.0
                    if kind == GOAL_POSITION:
                        cx = vx * unit[1]
                        cy = vy * unit[1]
                        cz = vz * unit[1]
                    else:
                        # achieved rotation of a_w towards d: the part of w perpendicular to a_w, plus the turn
                        # of d as the joint moves by v (d x v / dist; the target stays)
                        wa = wx * aw[0] + wy * aw[1] + wz * aw[2]
                        cx = (wx - wa * aw[0]) + (dl[1] * vz - dl[2] * vy) * inv_dist
                        cy = (wy - wa * aw[1]) + (dl[2] * vx - dl[0] * vz) * inv_dist
                        cz = (wz - wa * aw[2]) + (dl[0] * vy - dl[1] * vx) * inv_dist
                jac[row, d] = sw * cx
                jac[row + 1, d] = sw * cy
                jac[row + 2, d] = sw * cz
        if plan_i[P_ROOT_T] >= 0 and kind != GOAL_ORIENTATION:
            # every fk joint hangs below the translated root (the plan makes sure)
            for a in range(3):
                c = ndof - 3 + a
                vx = 1.0 if a == 0 else 0.0
                vy = 1.0 if a == 1 else 0.0
                vz = 1.0 if a == 2 else 0.0
                if kind == GOAL_POSITION:
                    jac[row, c] = sw * vx
                    jac[row + 1, c] = sw * vy
                    jac[row + 2, c] = sw * vz
                else:
                    # (a translation of one length unit: unit[0] in world lengths)
                    jac[row, c] = sw * (dl[1] * vz - dl[2] * vy) * inv_dist * unit[0]
                    jac[row + 1, c] = sw * (dl[2] * vx - dl[0] * vz) * inv_dist * unit[0]
                    jac[row + 2, c] = sw * (dl[0] * vy - dl[1] * vx) * inv_dist * unit[0]


@njit(helper=True)
def _block_columns(plan_i, lay, jac, nrows, block_n, mask):  # type: ignore[no-untyped-def]
    """Remove from ``jac``'s columns the remembered limit direction of each joint marked in ``mask``."""
    o_dof0, o_ndof = lay[3], lay[4]
    for k in range(plan_i[P_N_MOVING]):
        if block_n[k, 3] == 0.0 or mask[k] == 0.0:
            continue
        d0 = plan_i[o_dof0 + k]
        if plan_i[o_ndof + k] == 1:
            for row in range(nrows):
                jac[row, d0] = 0.0
            continue
        for row in range(nrows):
            c = jac[row, d0] * block_n[k, 0] + jac[row, d0 + 1] * block_n[k, 1] + jac[row, d0 + 2] * block_n[k, 2]
            jac[row, d0] -= c * block_n[k, 0]
            jac[row, d0 + 1] -= c * block_n[k, 1]
            jac[row, d0 + 2] -= c * block_n[k, 2]


@njit(helper=True)
def _project_blocked(plan_i, lay, v, block_n, active):  # type: ignore[no-untyped-def]
    """Remove from DOF vector ``v`` the limit directions of the joints whose columns were blocked."""
    o_dof0, o_ndof = lay[3], lay[4]
    for k in range(plan_i[P_N_MOVING]):
        if block_n[k, 3] == 0.0 or active[k] == 0.0:
            continue
        d0 = plan_i[o_dof0 + k]
        if plan_i[o_ndof + k] == 1:
            v[d0] = 0.0
            continue
        c = v[d0] * block_n[k, 0] + v[d0 + 1] * block_n[k, 1] + v[d0 + 2] * block_n[k, 2]
        v[d0] -= c * block_n[k, 0]
        v[d0 + 1] -= c * block_n[k, 1]
        v[d0 + 2] -= c * block_n[k, 2]


@njit(helper=True)
def _cholesky_solve(a, y, m):  # type: ignore[no-untyped-def]
    """Solve ``a[:m, :m] x = y[:m]`` in place (``a`` symmetric positive definite; its lower triangle becomes L)."""
    for j in range(m):
        d = a[j, j]
        for c in range(j):
            d -= a[j, c] * a[j, c]
        if d < PIVOT_MIN:
            d = PIVOT_MIN
        ljj = math.sqrt(d)
        a[j, j] = ljj
        for row in range(j + 1, m):
            v = a[row, j]
            for c in range(j):
                v -= a[row, c] * a[j, c]
            a[row, j] = v / ljj
    for row in range(m):
        v = y[row]
        for c in range(row):
            v -= a[row, c] * y[c]
        y[row] = v / a[row, row]
    for row in range(m - 1, -1, -1):
        v = y[row]
        for c in range(row + 1, m):
            v -= a[c, row] * y[c]
        y[row] = v / a[row, row]


@njit(helper=True)
def _joint_turn(plan_i, lay, v, k):  # type: ignore[no-untyped-def]
    """Moving joint ``k``'s rotation (radians) in the DOF vector ``v``: the norm of a ball joint's three DOFs,
    ``|v|`` of a hinge's one."""
    d0 = plan_i[lay[3] + k]
    if plan_i[lay[4] + k] == 1:
        return abs(v[d0])
    return math.sqrt(v[d0] * v[d0] + v[d0 + 1] * v[d0 + 1] + v[d0 + 2] * v[d0 + 2])


@njit(helper=True)
def _largest_angle(plan_i, lay, v):  # type: ignore[no-untyped-def]
    """The largest joint rotation (radians) of the DOF vector ``v`` (:func:`_joint_turn`; the root translation's
    DOFs are lengths, not counted)."""
    biggest = 0.0
    for k in range(plan_i[P_N_MOVING]):
        ang = _joint_turn(plan_i, lay, v, k)
        if ang > biggest:
            biggest = ang
    return biggest


@njit(helper=True)
def _add_within_budget(plan_i, lay, delta, part):  # type: ignore[no-untyped-def]
    """``delta += s * part`` with the largest ``s`` in [0, 1] that keeps every joint's rotation within
    ``MAX_STEP_ANGLE``: ``s = (MAX_STEP_ANGLE - largest(delta)) / largest(part)`` when that is below 1
    (per joint ``|a + s b| <= |a| + s |b|``, so the sum stays within the cap)."""
    need = _largest_angle(plan_i, lay, part)
    left = MAX_STEP_ANGLE - _largest_angle(plan_i, lay, delta)
    s = 1.0
    if need > left:
        # the levels above used (nearly) all of the cap: this level gets what is left, or nothing
        s = left / need if left > 0.0 else 0.0
    for c in range(plan_i[P_N_DOF]):
        delta[c] += s * part[c]


@njit(helper=True)
def _step(plan_i, plan_f, lay, lam, n_levels, use_pose, jac, err, basis, lev_j, lev_a, lev_y, delta, e_pose, block_n,
          mask):  # type: ignore[no-untyped-def]
    """The prioritised damped step of the first ``n_levels`` levels (and the pose level when ``use_pose``) into
    ``delta (NDOF)`` (see the module docs); ``mask[k]`` marks the joints whose limit direction is dropped."""
    o_lev = lay[8]
    ndof = plan_i[P_N_DOF]
    lam2 = lam * lam
    part = lev_j[lev_j.shape[0] - 1]  # one level's part of the step (the spare last row)
    for c in range(ndof):
        delta[c] = 0.0
    nb = 0  # rows in the orthonormal basis of the more important levels
    for lv in range(n_levels):
        r0 = 3 * plan_i[o_lev + lv]
        r1 = 3 * plan_i[o_lev + lv + 1]
        m = r1 - r0
        # projected rows and the level's residual after the steps of the levels above
        for a in range(m):
            row = r0 + a
            res = err[row]
            nrm0 = 0.0
            for c in range(ndof):
                v = jac[row, c]
                lev_j[a, c] = v
                res -= v * delta[c]
                nrm0 += v * v
            lev_y[a] = res
            for b in range(nb):
                dot = 0.0
                for c in range(ndof):
                    dot += lev_j[a, c] * basis[b, c]
                for c in range(ndof):
                    lev_j[a, c] -= dot * basis[b, c]
        for a in range(m):
            for b in range(a + 1):
                v = 0.0
                for c in range(ndof):
                    v += lev_j[a, c] * lev_j[b, c]
                lev_a[a, b] = v
                lev_a[b, a] = v
            lev_a[a, a] += lam2
        _cholesky_solve(lev_a, lev_y, m)
        for c in range(ndof):
            v = 0.0
            for a in range(m):
                v += lev_j[a, c] * lev_y[a]
            part[c] = v
        _add_within_budget(plan_i, lay, delta, part)
        # grow the basis by this level's projected rows (Gram-Schmidt, twice for orthogonality); the last
        # level needs none unless the pose level follows
        if lv == n_levels - 1 and not use_pose:
            break
        for a in range(m):
            nrm0 = 0.0
            for c in range(ndof):
                nrm0 += jac[r0 + a, c] * jac[r0 + a, c]
            for c in range(ndof):
                basis[nb, c] = lev_j[a, c]
            for _rep in range(2):
                for b in range(nb):
                    dot = 0.0
                    for c in range(ndof):
                        dot += basis[nb, c] * basis[b, c]
                    for c in range(ndof):
                        basis[nb, c] -= dot * basis[b, c]
            nrm = 0.0
            for c in range(ndof):
                nrm += basis[nb, c] * basis[nb, c]
            if nrm > RANK_RTOL * RANK_RTOL * nrm0 and nrm > 0.0:
                inv = 1.0 / math.sqrt(nrm)
                for c in range(ndof):
                    basis[nb, c] *= inv
                nb += 1
    if use_pose:
        # pose level: J = sqrt(w) I projected by P (complement of the basis, blocked directions removed):
        # dq = w / (w + lambda^2) P (e_pose - delta)
        pw = plan_f[lay[12]]
        k_pose = pw / (pw + lam2)
        for c in range(ndof):
            lev_j[0, c] = e_pose[c] - delta[c]
        _project_blocked(plan_i, lay, lev_j[0], block_n, mask)
        for b in range(nb):
            dot = 0.0
            for c in range(ndof):
                dot += lev_j[0, c] * basis[b, c]
            for c in range(ndof):
                lev_j[0, c] -= dot * basis[b, c]
        for c in range(ndof):
            part[c] = k_pose * lev_j[0, c]
        _add_within_budget(plan_i, lay, delta, part)


@njit(helper=True)
def _record_block(plan_f, lay, k, nd, cut, block_new):  # type: ignore[no-untyped-def]
    """Remember in ``block_new[k]`` the direction ``cut`` (a local rotation vector) that joint ``k``'s limit took
    off a rotation: unit in rotation-vector space for a ball joint, the sign along the hinge axis for a hinge;
    ``w = 1``.  A cut shorter than ``BLOCK_EPS`` marks nothing."""
    if nd == 1:
        u = _dof_unit(plan_f, lay, k, nd, 0)
        along = cut[0] * u[0] + cut[1] * u[1] + cut[2] * u[2]
        if abs(along) > BLOCK_EPS:
            block_new[k, 0] = 1.0 if along > 0.0 else -1.0
            block_new[k, 1] = 0.0
            block_new[k, 2] = 0.0
            block_new[k, 3] = 1.0
        return
    n = math.sqrt(cut[0] * cut[0] + cut[1] * cut[1] + cut[2] * cut[2])
    if n > BLOCK_EPS:
        block_new[k, 0] = cut[0] / n
        block_new[k, 1] = cut[1] / n
        block_new[k, 2] = cut[2] / n
        block_new[k, 3] = 1.0


@njit(helper=True)
def _turned(plan_f, lay, k, nd, q, delta, d0):  # type: ignore[no-untyped-def]
    """Joint ``k``'s local rotation ``q`` turned by its DOFs of ``delta`` (from ``d0``): ``q * exp(delta_k)``."""
    if nd == 1:
        dq = qfrom_axis_angle(_dof_unit(plan_f, lay, k, nd, 0), delta[d0])
    else:
        dq = qfrom_rotvec((delta[d0], delta[d0 + 1], delta[d0 + 2]))
    return qnormalize(qmul(q, dq))


@njit(helper=True)
def _apply_step(plan_i, plan_f, lay, i, t, r, delta, block_new, unit):  # type: ignore[no-untyped-def]
    """Add ``delta`` to the moving joints (clamped into their limits) and the root (its translation DOFs in the
    item's length unit ``unit[0]``); returns the clamps that hit.

    ``block_new[k]`` receives the direction a clamp cut off (:func:`_record_block`); rows of joints no clamp
    hit are left as they are.
    """
    o_mfk, o_dof0, o_ndof = lay[2], lay[3], lay[4]
    hits = 0
    for k in range(plan_i[P_N_MOVING]):
        j = plan_i[lay[0] + plan_i[o_mfk + k]]
        nd = plan_i[o_ndof + k]
        qn = _turned(plan_f, lay, k, nd, read_q(r, i, j), delta, plan_i[o_dof0 + k])
        qc, hit = _joint_limit(plan_i, plan_f, lay, k, qn)
        if hit:
            hits += 1
            _record_block(plan_f, lay, k, nd, qto_rotvec(qmul(qconj(qc), qn)), block_new)  # what the limit took off
            qn = qc
        write_q(r, i, j, qn)
    rt = plan_i[P_ROOT_T]
    if rt >= 0:
        jr = plan_i[lay[0] + rt]
        nd_all = plan_i[P_N_DOF]
        for a in range(3):
            t[i, jr, a] += delta[nd_all - 3 + a] * unit[0]
    return hits


@njit(helper=True)
def _save(plan_i, lay, i, t, r, q_save, t_io):  # type: ignore[no-untyped-def]
    for k in range(plan_i[P_N_MOVING]):
        j = plan_i[lay[0] + plan_i[lay[2] + k]]
        for a in range(4):
            q_save[k, a] = r[i, j, a]
    if plan_i[P_ROOT_T] >= 0:
        jr = plan_i[lay[0] + plan_i[P_ROOT_T]]
        for a in range(3):
            t_io[1, a] = t[i, jr, a]


@njit(helper=True)
def _restore(plan_i, lay, i, t, r, q_save, t_io):  # type: ignore[no-untyped-def]
    for k in range(plan_i[P_N_MOVING]):
        j = plan_i[lay[0] + plan_i[lay[2] + k]]
        for a in range(4):
            r[i, j, a] = q_save[k, a]
    if plan_i[P_ROOT_T] >= 0:
        jr = plan_i[lay[0] + plan_i[P_ROOT_T]]
        for a in range(3):
            t[i, jr, a] = t_io[1, a]


@njit(helper=True)
def _better(lvl, n_levels, new_cost, cost):  # type: ignore[no-untyped-def]
    """Whether a step's errors ``lvl[1]`` beat the current ``lvl[0]``, most important level first.

    A level's error below its floor ``lvl[2]`` counts as the floor, and errors within ``LEVEL_RTOL`` of each
    other as equal: the first level that differs decides; when none does, the total decides.
    """
    for lv in range(n_levels):
        old = max(lvl[0, lv], lvl[2, lv])
        new = max(lvl[1, lv], lvl[2, lv])
        if new > old * (1.0 + LEVEL_RTOL):
            return False
        if new < old * (1.0 - LEVEL_RTOL):
            return True
    return new_cost < cost


@njit(helper=True)
def _levels_to_restore(lvl, n_upper):  # type: ignore[no-untyped-def]
    """How many of the first ``n_upper`` levels a correction must restore after the step: 1 + the last of them
    that got worse (floors and ``LEVEL_RTOL`` as in :func:`_better`), 0 when all are held.

    Levels below the last worsened one are left out: a level the step improved (the one the solve is making
    progress on) would otherwise take a new full Gauss-Newton step inside every correction and disturb the
    levels above it again, so the correction never settled and the solve crawled.
    """
    k = 0
    for lv in range(n_upper):
        if max(lvl[1, lv], lvl[2, lv]) > max(lvl[0, lv], lvl[2, lv]) * (1.0 + LEVEL_RTOL):
            k = lv + 1
    return k


@njit(helper=True)
def _take_step(i, plan_i, plan_f, lay, t, r, s, goals, scratch, lam, n_levels, use_pose):  # type: ignore[no-untyped-def]
    """One step from the current pose (whose residuals ``err``, ``e_pose`` are current): Jacobian,
    prioritised step of the first ``n_levels`` levels (and the pose level, each within the step cap), limit directions,
    clamped update, FK and residuals (level errors into ``lvl[1]``).

    Returns ``(clamps that hit, largest DOF change, weighted squared error, pose error)``.
    """
    (pos, rot, scl, q_in, q_save, jac, err, basis, lev_j, lev_a, lev_y, delta, e_pose, world_axis,
     block_n, block_new, gerr, t_io, lvl, mask, unit, block_try, probe, chain) = scratch
    nk = plan_i[P_N_MOVING]
    o_dof0 = lay[3]
    o_ndof = lay[4]
    _jacobian(plan_i, plan_f, lay, i, goals, pos, rot, jac, world_axis, unit)
    for k in range(nk):
        mask[k] = 0.0
    for k in range(nk):
        for a in range(4):
            block_try[k, a] = block_n[k, a]
    _step(plan_i, plan_f, lay, lam, n_levels, use_pose, jac, err, basis, lev_j, lev_a, lev_y, delta, e_pose,
          block_try, mask)
    # The clamping loop: a joint the step would push into a limit (one it is remembered to be on, or one the
    # step would run into) has that direction dropped from its columns, and the step is solved again, so the
    # levels share out what the limited joints cannot do instead of a clamp distorting the step afterwards.
    for _pass in range(CLAMP_PASSES):
        new = 0
        for k in range(nk):
            if mask[k] != 0.0:
                continue
            d0 = plan_i[o_dof0 + k]
            nd = plan_i[o_ndof + k]
            if block_n[k, 3] != 0.0:
                if nd == 1:
                    push = delta[d0] * block_n[k, 0]
                else:
                    push = delta[d0] * block_n[k, 0] + delta[d0 + 1] * block_n[k, 1] + delta[d0 + 2] * block_n[k, 2]
                if push > 0.0:
                    mask[k] = 1.0
                    new += 1
                    continue
            if plan_i[lay[5] + k] != LIMIT_NONE:
                # on its limit already: a turn of LIMIT_PROBE_ANGLE along the step crosses it (a joint further
                # inside moves up to the limit, clamped, and is on it for the next step)
                j = plan_i[lay[0] + plan_i[lay[2] + k]]
                length = _joint_turn(plan_i, lay, delta, k)
                if length <= 0.0:
                    continue
                f = min(1.0, LIMIT_PROBE_ANGLE / length)
                for a in range(nd):
                    probe[a] = delta[d0 + a] * f
                qn = _turned(plan_f, lay, k, nd, read_q(r, i, j), probe, 0)
                qc, hit = _joint_limit(plan_i, plan_f, lay, k, qn)
                if hit:
                    block_try[k, 3] = 0.0
                    _record_block(plan_f, lay, k, nd, qto_rotvec(qmul(qconj(qc), qn)), block_try)
                    if block_try[k, 3] != 0.0:
                        mask[k] = 1.0
                        new += 1
        if new == 0:
            break
        _block_columns(plan_i, lay, jac, 3 * plan_i[P_N_GOALS], block_try, mask)
        _step(plan_i, plan_f, lay, lam, n_levels, use_pose, jac, err, basis, lev_j, lev_a, lev_y, delta, e_pose,
              block_try, mask)
    # (_step kept every joint's turn within MAX_STEP_ANGLE)
    size = 0.0
    for c in range(plan_i[P_N_DOF]):
        v = abs(delta[c])
        if v > size:
            size = v
    hits = _apply_step(plan_i, plan_f, lay, i, t, r, delta, block_new, unit)
    _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
    new_cost, new_pose_err = _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr,
                                       e_pose, lvl[1], unit)
    return hits, size, new_cost, new_pose_err


@njit(helper=True)
@njit(inline=True)
def _joint_limit(plan_i, plan_f, lay, k, q):  # type: ignore[no-untyped-def]
    """``(q, hit)``: moving joint ``k``'s local rotation ``q`` clamped into its limit (``apply_limit_local``, in its
    rest-relative frame); ``q`` itself and False when it has none."""
    kind = plan_i[lay[5] + k]
    if kind == LIMIT_NONE:
        return q, False
    f_lp, f_lr = lay[14], lay[15]
    rest = (plan_f[f_lr + 4 * k], plan_f[f_lr + 4 * k + 1], plan_f[f_lr + 4 * k + 2], plan_f[f_lr + 4 * k + 3])
    return apply_limit_local(kind, plan_f[f_lp + LIMIT_PARAMS * k:f_lp + LIMIT_PARAMS * (k + 1)], rest, q)


@njit(helper=True)
def _on_limit(plan_i, plan_f, lay, k, q):  # type: ignore[no-untyped-def]
    """Whether moving joint ``k``'s local rotation ``q`` is on its limit: a turn of ``AT_LIMIT_ANGLE`` about one of
    its local axes (a hinge: either way about its axis) leaves the limit."""
    if plan_i[lay[5] + k] == LIMIT_NONE:
        return False
    if plan_i[lay[4] + k] == 1:
        u = _dof_unit(plan_f, lay, k, 1, 0)
        for sign in (-1.0, 1.0):
            if _joint_limit(plan_i, plan_f, lay, k, qmul(q, qfrom_axis_angle(u, sign * AT_LIMIT_ANGLE)))[1]:
                return True
        return False
    for a in range(3):
        for sign in (-1.0, 1.0):
            v = sign * AT_LIMIT_ANGLE
            turn = (v if a == 0 else 0.0, v if a == 1 else 0.0, v if a == 2 else 0.0)
            if _joint_limit(plan_i, plan_f, lay, k, qmul(q, qfrom_rotvec(turn)))[1]:
                return True
    return False


@njit(helper=True)
def _goal_chain(plan_i, lay, g, pos, chain):  # type: ignore[no-untyped-def]
    """Position goal ``g``'s chain into ``chain``: the world positions of the moving joints that move it (its
    moving ancestors, parents first) and then of its joint.  Returns ``(rows, reach)``, ``reach`` the sum of the
    distances between consecutive rows (what the joints between two moving ones hold rigid)."""
    nk = plan_i[P_N_MOVING]
    ng = plan_i[P_N_GOALS]
    n = 0
    for k in range(nk):
        if plan_i[lay[9] + k * ng + g] == AFFECTS_ANCESTOR:
            f = plan_i[lay[2] + k]
            for a in range(3):
                chain[n, a] = pos[f, a]
            n += 1
    fg = plan_i[lay[7] + g]
    for a in range(3):
        chain[n, a] = pos[fg, a]
    n += 1
    reach = 0.0
    for c in range(1, n):
        reach += vlength(chain[c, 0] - chain[c - 1, 0], chain[c, 1] - chain[c - 1, 1], chain[c, 2] - chain[c - 1, 2])
    return n, reach


@njit(helper=True)
def _row_joint(plan_i, lay, nk, ng, g, kb):  # type: ignore[no-untyped-def]
    """The moving joint at row ``kb`` of goal ``g``'s chain (:func:`_goal_chain`: its moving ancestors, topmost
    first): ``(kf, f, j)``, its moving index, its FK row and its skeleton joint."""
    kf = -1
    row = 0
    for k in range(nk):
        if plan_i[lay[9] + k * ng + g] == AFFECTS_ANCESTOR:
            if row == kb:
                kf = k
            row += 1
    f = plan_i[lay[2] + kf]
    return kf, f, plan_i[lay[0] + f]


@njit(helper=True)
def _seed_turn(plan_i, plan_f, lay, kf, qw, w):  # type: ignore[no-untyped-def]
    """The seed turn of the stall handling for moving joint ``kf`` (world rotation ``qw``) toward a turn about
    the world unit axis ``w``: ``(axis, angle)`` in its local frame, ``FOLD_SEED_ANGLE`` about ``w`` itself, or
    for a hinge about the hinge's own axis with the sign that turns the same way (a hinge turns about nothing
    else)."""
    if plan_i[lay[4] + kf] == 1:
        axis = _dof_unit(plan_f, lay, kf, 1, 0)
        h = qrotate(qw, axis)
        return axis, FOLD_SEED_ANGLE if h[0] * w[0] + h[1] * w[1] + h[2] * w[2] >= 0.0 else -FOLD_SEED_ANGLE
    return qrotate(qconj(qw), w), FOLD_SEED_ANGLE


@njit(helper=True)
def _fold_straight(i, plan_i, plan_f, lay, t, r, s, goals, scratch, tol):  # type: ignore[no-untyped-def]
    """Bend each straight chain aimed along its unreached position goal's target line, the target within reach
    (as CCD and FABRIK do, :func:`kinema._kernels.chain.fold_point`): there every joint's rotation moves the end
    across the line, none along it, so the damped step is zero and the solve is stuck.  The moving joint nearest
    the chain's middle (``fold_point``) turns by ``FOLD_SEED_ANGLE`` so that it sticks out toward
    ``fold_direction`` (a hinge about its axis, the sign that does that), else the other way; the turn is
    clamped into the joint's limit, and a clamp that leaves the chain straight leaves the joint as it was.

    Reads the current FK and goal errors; on a fold writes ``r`` and the FK (the caller evaluates).  Returns
    ``(chains bent, clamps that hit)``; with none bent nothing is changed."""
    (pos, rot, scl, q_in, q_save, jac, err, basis, lev_j, lev_a, lev_y, delta, e_pose, world_axis,
     block_n, block_new, gerr, t_io, lvl, mask, unit, block_try, probe, chain) = scratch
    nk = plan_i[P_N_MOVING]
    ng = plan_i[P_N_GOALS]
    bent = 0
    hits = 0
    for g in range(ng):
        if plan_i[lay[6] + g] != GOAL_POSITION or gerr[g] <= tol:
            continue
        n, reach = _goal_chain(plan_i, lay, g, pos, chain)
        kb = fold_point(chain[:n], reach, 1)
        if kb < 0:
            continue
        # the target within reach, on the chain's line (the first joint to the end)
        tg = (goals[i, g, 0], goals[i, g, 1], goals[i, g, 2])
        x = (tg[0] - chain[0, 0], tg[1] - chain[0, 1], tg[2] - chain[0, 2])
        if vlength(x[0], x[1], x[2]) >= reach * (1.0 - FOLD_REACH_RTOL):
            continue
        e = (chain[n - 1, 0] - chain[0, 0], chain[n - 1, 1] - chain[0, 1], chain[n - 1, 2] - chain[0, 2])
        el2 = e[0] * e[0] + e[1] * e[1] + e[2] * e[2]
        c = (x[0] * e[0] + x[1] * e[1] + x[2] * e[2]) / el2
        if vlength(x[0] - c * e[0], x[1] - c * e[1], x[2] - c * e[2]) > FOLD_STRAIGHT_RTOL * reach:
            continue
        kf, f, j = _row_joint(plan_i, lay, nk, ng, g, kb)
        qw = (rot[f, 0], rot[f, 1], rot[f, 2], rot[f, 3])
        p_k = (chain[kb, 0], chain[kb, 1], chain[kb, 2])
        p_next = (chain[kb + 1, 0], chain[kb + 1, 1], chain[kb + 1, 2])
        dirn = fold_direction(qw, (chain[kb - 1, 0], chain[kb - 1, 1], chain[kb - 1, 2]), p_k, p_next)
        u = (p_next[0] - p_k[0], p_next[1] - p_k[1], p_next[2] - p_k[2])
        ul = vlength(u[0], u[1], u[2])
        if ul <= 0.0:
            continue
        # turning about w = dirn x u moves the bone after the joint toward -dirn: the joint sticks out toward dirn
        w = ((dirn[1] * u[2] - dirn[2] * u[1]) / ul, (dirn[2] * u[0] - dirn[0] * u[2]) / ul,
             (dirn[0] * u[1] - dirn[1] * u[0]) / ul)
        axis, angle = _seed_turn(plan_i, plan_f, lay, kf, qw, w)
        q0 = read_q(r, i, j)
        for sign in (1.0, -1.0):
            qc, hit = _joint_limit(plan_i, plan_f, lay, kf, qnormalize(qmul(q0, qfrom_axis_angle(axis, sign * angle))))
            write_q(r, i, j, qc)
            _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
            n, _ = _goal_chain(plan_i, lay, g, pos, chain)
            if fold_point(chain[:n], reach, 1) < 0:  # bent
                bent += 1
                hits += 1 if hit else 0
                break
            write_q(r, i, j, q0)
            _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
    return bent, hits


@njit(helper=True)
def _turn_behind(i, plan_i, plan_f, lay, t, r, s, goals, scratch, tol):  # type: ignore[no-untyped-def]
    """Turn off the line each straight chain whose unreached position goal's target lies on the chain's line
    behind its first joint (the chain points away from it): there every joint's rotation moves the end across
    the line, so the damped step is zero, and the error is the largest it can be, not the smallest.  The case
    :func:`_fold_straight` leaves: the target out of reach, a chain of one moving joint, or a fold its limits
    kept straight.

    The moving joints of the chain, first (topmost) first, are tried in turn: the joint turns by
    ``FOLD_SEED_ANGLE`` so that the rest of the chain swings toward ``fold_direction`` (the side the fold
    takes; a hinge about its axis, the sign that does that), else the other way, clamped into its limit.  A
    turn is kept when it takes the end off the line by more than ``FOLD_STRAIGHT_RTOL`` of the reach (less, as
    a limit's clamp may leave, is still on the line: the solve would stall again) and the step test
    (:func:`_better`) accepts it over the levels down to the goal's: no more important goal gets worse, so the
    turn obeys the priorities as a step does (equally important goals are weighed together, as in a step).
    Else the joint is put back and the next one tried.

    Reads the current FK, goal errors and level errors ``lvl[0]``; a kept turn leaves ``r``, the FK and the
    residuals (``lvl[0]`` too) of the new pose, a turn put back those of the pose as it was (computed again,
    the same bits).  Returns ``(chains turned, clamps that hit)``."""
    (pos, rot, scl, q_in, q_save, jac, err, basis, lev_j, lev_a, lev_y, delta, e_pose, world_axis,
     block_n, block_new, gerr, t_io, lvl, mask, unit, block_try, probe, chain) = scratch
    nk = plan_i[P_N_MOVING]
    ng = plan_i[P_N_GOALS]
    nl = plan_i[P_N_LEVELS]
    turned = 0
    hits = 0
    for g in range(ng):
        if plan_i[lay[6] + g] != GOAL_POSITION or gerr[g] <= tol:
            continue
        n, reach = _goal_chain(plan_i, lay, g, pos, chain)
        if reach <= 0.0:
            continue  # every row at one point: no line
        if n >= 3 and fold_point(chain[:n], reach, 1) < 0:
            continue  # bent: the steps have a side to work with
        # the target on the chain's line (the first joint to the end), behind the first joint
        tg = (goals[i, g, 0], goals[i, g, 1], goals[i, g, 2])
        o = (chain[0, 0], chain[0, 1], chain[0, 2])
        x = (tg[0] - o[0], tg[1] - o[1], tg[2] - o[2])
        # (a straight chain's end is its reach away from its first joint: no zero division; unit vectors keep
        # tiny and huge units free of underflowing squares)
        el = vlength(chain[n - 1, 0] - o[0], chain[n - 1, 1] - o[1], chain[n - 1, 2] - o[2])
        e = ((chain[n - 1, 0] - o[0]) / el, (chain[n - 1, 1] - o[1]) / el, (chain[n - 1, 2] - o[2]) / el)
        c = x[0] * e[0] + x[1] * e[1] + x[2] * e[2]
        if c >= 0.0 or vlength(x[0] - c * e[0], x[1] - c * e[1], x[2] - c * e[2]) > FOLD_STRAIGHT_RTOL * reach:
            continue  # in front (the fold's case, or straight is best), or off the line (a step turns it)
        lv_g = 0
        while g >= plan_i[lay[8] + lv_g + 1]:
            lv_g += 1
        done = False
        for kb in range(n - 1):
            kf, f, j = _row_joint(plan_i, lay, nk, ng, g, kb)
            qw = (rot[f, 0], rot[f, 1], rot[f, 2], rot[f, 3])
            p_k = (chain[kb, 0], chain[kb, 1], chain[kb, 2])
            p_next = (chain[kb + 1, 0], chain[kb + 1, 1], chain[kb + 1, 2])
            p_prev = (chain[kb - 1, 0], chain[kb - 1, 1], chain[kb - 1, 2]) if kb > 0 else p_k
            u = (p_next[0] - p_k[0], p_next[1] - p_k[1], p_next[2] - p_k[2])
            ul = vlength(u[0], u[1], u[2])
            if ul <= 0.0:
                continue  # a zero-length bone: no direction to turn it from
            dirn = fold_direction(qw, p_prev, p_k, p_next)
            # turning about w = u x dirn swings the bone after the joint (and the rest of the chain) toward dirn
            w = ((u[1] * dirn[2] - u[2] * dirn[1]) / ul, (u[2] * dirn[0] - u[0] * dirn[2]) / ul,
                 (u[0] * dirn[1] - u[1] * dirn[0]) / ul)
            axis, angle = _seed_turn(plan_i, plan_f, lay, kf, qw, w)
            q0 = read_q(r, i, j)
            for sign in (1.0, -1.0):
                qc, hit = _joint_limit(plan_i, plan_f, lay, kf,
                                       qnormalize(qmul(q0, qfrom_axis_angle(axis, sign * angle))))
                write_q(r, i, j, qc)
                _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
                _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr, e_pose, lvl[1], unit)
                m, _ = _goal_chain(plan_i, lay, g, pos, chain)
                # the end's distance from the line (the first joint stays where it was)
                d = (chain[m - 1, 0] - o[0], chain[m - 1, 1] - o[1], chain[m - 1, 2] - o[2])
                b = d[0] * e[0] + d[1] * e[1] + d[2] * e[2]
                off = vlength(d[0] - b * e[0], d[1] - b * e[1], d[2] - b * e[2])
                new_part = 0.0
                old_part = 0.0
                for lv in range(lv_g + 1):
                    new_part += lvl[1, lv]
                    old_part += lvl[0, lv]
                if off > FOLD_STRAIGHT_RTOL * reach and _better(lvl, lv_g + 1, new_part, old_part):
                    for lv in range(nl + 1):
                        lvl[0, lv] = lvl[1, lv]
                    turned += 1
                    hits += 1 if hit else 0
                    done = True
                    break
                # put back: the pose, its FK, residuals and chain as they were
                write_q(r, i, j, q0)
                _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
                _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr, e_pose, lvl[0], unit)
                _goal_chain(plan_i, lay, g, pos, chain)
            if done:
                break
    return turned, hits


@njit(borrows=True, helper=True)
def dls_item(i, plan_i, plan_f, opts, t, r, s, goals, weights, diag, scratch):  # type: ignore[no-untyped-def]
    """Solve item ``i`` (see the module docs); writes ``r[i]`` (and the root translation) and ``diag[i]``.

    ``weights (1|N,)``: each item's blend of the solved pose with the input pose (1: solved)."""
    (pos, rot, scl, q_in, q_save, jac, err, basis, lev_j, lev_a, lev_y, delta, e_pose, world_axis,
     block_n, block_new, gerr, t_io, lvl, mask, unit, block_try, probe, chain) = scratch
    lay = layout(plan_i)
    o_mfk = lay[2]
    nk = plan_i[P_N_MOVING]
    ng = plan_i[P_N_GOALS]
    max_iter = int(opts[O_ITERATIONS])
    tol = opts[O_TOLERANCE]
    lam_min = opts[O_DAMPING]
    weight = weights[i % weights.shape[0]]
    rt = plan_i[P_ROOT_T]
    jr = plan_i[lay[0] + rt] if rt >= 0 else 0
    # the input pose (the pose goal's target and the blend's start); start inside the limits.  Weight 0: the
    # input comes back as it was (not normalised, not clamped, no step), with its errors.
    frozen = weight == 0.0
    hits = 0
    for k in range(nk):
        j = plan_i[lay[0] + plan_i[o_mfk + k]]
        q = qnormalize(read_q(r, i, j))
        q_in[k, 0] = q[0]
        q_in[k, 1] = q[1]
        q_in[k, 2] = q[2]
        q_in[k, 3] = q[3]
        block_n[k, 0] = 0.0
        block_n[k, 1] = 0.0
        block_n[k, 2] = 0.0
        block_n[k, 3] = 0.0
        if frozen:
            continue
        q, hit = _joint_limit(plan_i, plan_f, lay, k, q)
        if hit:
            hits += 1
        write_q(r, i, j, q)
    if rt >= 0:
        for a in range(3):
            t_io[0, a] = t[i, jr, a]
    _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
    # The item's length unit L: how far the solved joints reach from the first (topmost) one.  Position errors,
    # their Jacobian rows and the root's translation are measured in L, so the steps, the damping and the
    # weighing of positions against angles do not depend on the rig's units (a rig under a parent scaled by s
    # solves to the same local rotations).
    reach = 0.0
    for f in range(1, plan_i[P_N_FK]):
        dx = pos[f, 0] - pos[0, 0]
        dy = pos[f, 1] - pos[0, 1]
        dz = pos[f, 2] - pos[0, 2]
        reach = max(reach, vlength(dx, dy, dz))
    if not (reach > 0.0 and reach < math.inf):
        reach = 1.0  # one joint, all at one point, or an overflowing pose: no length to measure by
    unit[0] = reach
    unit[1] = 1.0 / reach
    # per level, squared errors below the floor count as equal: (SATISFIED_FRACTION * tol)^2 per unit weight,
    # a position goal's tolerance in the length unit
    nl = plan_i[P_N_LEVELS]
    sat = SATISFIED_FRACTION * tol
    for lv in range(nl + 1):
        lvl[2, lv] = 0.0
    for lv in range(nl):
        for g in range(plan_i[lay[8] + lv], plan_i[lay[8] + lv + 1]):
            floor = sat * unit[1] if plan_i[lay[6] + g] == GOAL_POSITION else sat
            lvl[2, lv] += plan_f[lay[10] + g] * plan_f[lay[10] + g] * floor * floor
    lvl[2, nl] = plan_f[lay[12]] * sat * sat
    cost, pose_err = _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr,
                               e_pose, lvl[0], unit)
    lam = lam_min
    # levels that the lowest one (the pose level, else the least important goal level) may disturb
    n_upper = nl if plan_i[P_HAS_POSE] != 0 else nl - 1
    last_step = math.inf
    iters = 0
    has_pose = plan_i[P_HAS_POSE] != 0
    folded = False  # a stall was handled (_fold_straight, _turn_behind: once per solve)
    while iters < max_iter and not frozen:
        reached = True
        for g in range(ng):
            if gerr[g] > tol:
                reached = False
        if reached and (not has_pose or last_step <= tol):
            break
        iters += 1
        _save(plan_i, lay, i, t, r, q_save, t_io)
        accepted = False
        stop = False
        # first the step of every level; when it fails, the step of the more important levels alone (a less
        # important level's drift must not hold back a more important level that still improves)
        n_tries = 2 if n_upper > 0 else 1
        for attempt in range(n_tries):
            use_levels = nl if attempt == 0 else n_upper
            use_pose = has_pose if attempt == 0 else False
            for k in range(nk):
                for a in range(4):
                    block_new[k, a] = 0.0
            step_hits, size, new_cost, new_pose_err = _take_step(i, plan_i, plan_f, lay, t, r, s, goals, scratch,
                                                                 lam, use_levels, use_pose)
            # second-order correction: the step moved the more important levels a little (they are curved);
            # Gauss-Newton steps of those levels alone at the new pose take them back before the step is judged
            if attempt == 0:
                for _c in range(CORRECTION_STEPS):
                    n_fix = _levels_to_restore(lvl, n_upper)
                    if n_fix == 0:
                        break
                    h, _, new_cost, new_pose_err = _take_step(i, plan_i, plan_f, lay, t, r, s, goals, scratch,
                                                              lam_min, n_fix, False)
                    step_hits += h
            if _better(lvl, nl + 1, new_cost, cost):
                cost = new_cost
                for lv in range(nl + 1):
                    lvl[0, lv] = lvl[1, lv]
                pose_err = new_pose_err
                hits += step_hits
                for k in range(nk):
                    for a in range(4):
                        block_n[k, a] = block_new[k, a]
                if attempt == 0:
                    lam = max(lam * DAMPING_DOWN, lam_min)
                last_step = size
                accepted = True
                stop = size <= STEP_TINY and attempt == 0
                break
            _restore(plan_i, lay, i, t, r, q_save, t_io)
            _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
            cost, pose_err = _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr,
                                       e_pose, lvl[0], unit)
        if not accepted:
            lam *= DAMPING_UP
        if stop or (not accepted and lam > DAMPING_MAX):
            # No step lowers the error any more.  A straight chain aimed along its unreached target's line is
            # bent, one pointing away from its target turned, once, and the solve goes on from there (when
            # iterations are left); else this is the closest pose.
            if folded or iters >= max_iter:
                break
            folded = True
            n_bent, fold_hits = _fold_straight(i, plan_i, plan_f, lay, t, r, s, goals, scratch, tol)
            if n_bent > 0:
                hits += fold_hits
                cost, pose_err = _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr,
                                           e_pose, lvl[0], unit)
            n_turned, turn_hits = _turn_behind(i, plan_i, plan_f, lay, t, r, s, goals, scratch, tol)
            if n_turned > 0:
                hits += turn_hits
                cost, pose_err = _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr,
                                           e_pose, lvl[0], unit)
            if n_bent + n_turned == 0:
                break
            lam = lam_min
    if weight != 1.0 and not frozen:
        for k in range(nk):
            j = plan_i[lay[0] + plan_i[o_mfk + k]]
            q = qslerp((q_in[k, 0], q_in[k, 1], q_in[k, 2], q_in[k, 3]), read_q(r, i, j), weight)
            # (part way between two rotations inside a swing cone or an Euler box may be outside it)
            q, hit = _joint_limit(plan_i, plan_f, lay, k, q)
            if hit:
                hits += 1
            write_q(r, i, j, q)
        if rt >= 0:
            for a in range(3):
                t[i, jr, a] = t_io[0, a] + weight * (t[i, jr, a] - t_io[0, a])
        _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
        cost, pose_err = _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr,
                                   e_pose, lvl[0], unit)
    # a non-finite pose (never expected: every division is guarded) gives the input back, flagged
    finite = math.isfinite(cost)
    if not finite:
        for k in range(nk):
            j = plan_i[lay[0] + plan_i[o_mfk + k]]
            write_q(r, i, j, (q_in[k, 0], q_in[k, 1], q_in[k, 2], q_in[k, 3]))
        if rt >= 0:
            for a in range(3):
                t[i, jr, a] = t_io[0, a]
        _fk(plan_i, lay, i, t, r, s, pos, rot, scl)
        cost, pose_err = _evaluate(plan_i, plan_f, lay, i, t, r, goals, pos, rot, q_in, t_io, err, gerr,
                                   e_pose, lvl[0], unit)
    worst = 0.0
    for g in range(ng):
        if gerr[g] > worst:
            worst = gerr[g]
        diag[i, D_HEADER + g] = gerr[g]
        diag[i, D_HEADER + ng + g] = 1.0 if gerr[g] <= tol else 0.0
    for k in range(nk):
        j = plan_i[lay[0] + plan_i[o_mfk + k]]
        diag[i, D_HEADER + 2 * ng + k] = 1.0 if _on_limit(plan_i, plan_f, lay, k, read_q(r, i, j)) else 0.0
    diag[i, D_STATUS] = STATUS_OK if finite else STATUS_NONFINITE
    diag[i, D_ERROR] = worst
    diag[i, D_ITERATIONS] = iters
    diag[i, D_LIMITS_HIT] = hits
    diag[i, D_POSE_ERROR] = pose_err


@njit(borrows=True, helper=True)
def _ok(args):  # type: ignore[no-untyped-def]
    """The drivers' checks: OK (:class:`kinema.DLS` checked the inputs; per-item problems are in ``diag``)."""
    return OK


@njit(helper=True)
def dls_range(c0, c1, args):  # type: ignore[no-untyped-def]
    """Solve items ``c0 .. c1-1`` with one scratch set; ``args = (plan_i, plan_f, opts, t, r, s, goals, weights,
    diag)`` (``weights (1|N,)``: each item's blend with the input pose)."""
    plan_i, plan_f, opts, t, r, s, goals, weights, diag = args
    scratch = make_scratch(plan_i, plan_f, opts)
    for i in range(c0, c1):
        dls_item(i, plan_i, plan_f, opts, t, r, s, goals, weights, diag, scratch)


#: ``solve_serial(n, args)`` and ``solve_parallel(n_chunks, n, args)`` (:mod:`.drivers`): status 0 = ok.
DRIVERS = make_drivers("dls", _ok, dls_range, _ok)
solve_serial, solve_parallel = DRIVERS


@njit
def dls_serial(plan_i, plan_f, opts, t, r, s, goals, weights, diag):  # type: ignore[no-untyped-def]
    """:func:`solve_serial` with its arguments spread out (items ``0 .. N-1``, ``N = r.shape[0]``)."""
    return solve_serial(r.shape[0], (plan_i, plan_f, opts, t, r, s, goals, weights, diag))
