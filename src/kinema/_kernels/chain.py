"""Chain helpers shared by the solver kernels.

A *chain* is a contiguous parent path ``joints[0] -> ... -> joints[K-1]``
(each joint the parent of the next).  Solvers keep the chain's world
transforms in small scratch arrays ``pos (K,3)``, ``rot (K,4)``,
``scl (K,)`` and edit the local rotations in ``r (N,J,4)`` in place.

Batch conventions (as in :mod:`kinema._kernels.fk`): ``t (Nt,J,3)``,
``r (N,J,4)``, ``s (Ns,J,3)`` with ``Nt, Ns`` in {1, N}; item ``i`` reads
row ``i % Nt``.  Scales are uniform here (the public API rejects
non-uniform scale on chains with :class:`~kinema.SolverInputError`), so
only ``s[..., 0]`` is read.
"""

from __future__ import annotations

import math

from ._jit import njit
from .constants import NONFINITE_INPUT, NONFINITE_RESULT, NONUNIFORM_SCALE, OK, UNIFORM_SCALE_RTOL
from .quat import qconj, qmul, qnormalize, qrotate, vdot


@njit(inline=True)
def read_q(r, i, j):  # type: ignore[no-untyped-def]
    return (r[i, j, 0], r[i, j, 1], r[i, j, 2], r[i, j, 3])


@njit(inline=True)
def write_q(r, i, j, q):  # type: ignore[no-untyped-def]
    r[i, j, 0] = q[0]
    r[i, j, 1] = q[1]
    r[i, j, 2] = q[2]
    r[i, j, 3] = q[3]


@njit(inline=True)
def joint_world(pp, pq, ps, tj, rj, sj):  # type: ignore[no-untyped-def]
    """World ``(pos, rot, scale)`` of a joint from its parent's ``(pp, pq, ps)``: the one FK step.

    ``pos = pp + ps * rotate(pq, tj)``, ``rot = pq * normalize(rj)``,
    ``scale = ps * sj`` (uniform scale), with the joint's local
    translation ``tj``, rotation ``rj`` (tuples) and scale ``sj``.  Tuples
    only: called in loops, a helper taking arrays costs their reference
    counting (atomic) on every call; inlined (numba IR) so the FK loops
    compile as if written out.
    """
    d = qrotate(pq, tj)
    return (pp[0] + ps * d[0], pp[1] + ps * d[1], pp[2] + ps * d[2]), qmul(pq, qnormalize(rj)), ps * sj


@njit(borrows=True, helper=True)
def path_world(path, i, t, r, s):  # type: ignore[no-untyped-def]
    """World ``(pos, rot, scale)`` at the end of ``path`` (root first), e.g. a chain's parent.

    An empty path gives the identity transform (the chain starts at a root).
    """
    pos = (0.0, 0.0, 0.0)
    rot = (0.0, 0.0, 0.0, 1.0)
    sc = 1.0
    it = i % t.shape[0]
    is_ = i % s.shape[0]
    for a in range(path.shape[0]):
        j = path[a]
        pos, rot, sc = joint_world(pos, rot, sc, (t[it, j, 0], t[it, j, 1], t[it, j, 2]), read_q(r, i, j),
                                   s[is_, j, 0])
    return pos, rot, sc


@njit(borrows=True, helper=True)
def chain_world(k0, base_pos, base_rot, base_scl, joints, i, t, r, s, pos, rot, scl):  # type: ignore[no-untyped-def]
    """(Re)compute world transforms of chain joints ``k0..K-1`` into ``pos, rot, scl``.

    Joint ``k``'s parent transform is ``(pos, rot, scl)[k-1]``, or the base
    transform for ``k == 0``.
    """
    it = i % t.shape[0]
    is_ = i % s.shape[0]
    for k in range(k0, joints.shape[0]):
        j = joints[k]
        if k == 0:
            pp = base_pos
            pq = base_rot
            ps = base_scl
        else:
            pp = (pos[k - 1, 0], pos[k - 1, 1], pos[k - 1, 2])
            pq = (rot[k - 1, 0], rot[k - 1, 1], rot[k - 1, 2], rot[k - 1, 3])
            ps = scl[k - 1]
        p, q, sc = joint_world(pp, pq, ps, (t[it, j, 0], t[it, j, 1], t[it, j, 2]), read_q(r, i, j), s[is_, j, 0])
        pos[k, 0] = p[0]
        pos[k, 1] = p[1]
        pos[k, 2] = p[2]
        rot[k, 0] = q[0]
        rot[k, 1] = q[1]
        rot[k, 2] = q[2]
        rot[k, 3] = q[3]
        scl[k] = sc


@njit(borrows=True, helper=True)
def all_finite(a):  # type: ignore[no-untyped-def]
    """Whether every value of ``a`` (any shape, any strides) is finite."""
    for v in a.flat:
        if not math.isfinite(v):
            return False
    return True


@njit(borrows=True, helper=True)
def first_nonuniform(s, scale_joints, rtol):  # type: ignore[no-untyped-def]
    """First joint of ``scale_joints`` whose scale is not uniform in some row of ``s``, or -1.

    Uniform: ``|sx - sy| <= rtol |sy|`` and ``|sx - sz| <= rtol |sz|`` (as
    ``numpy.isclose`` with ``atol=0`` in :func:`kinema._solve.check_uniform_scale`;
    ``rtol`` is :data:`~kinema._kernels.constants.UNIFORM_SCALE_RTOL`).
    """
    for row in range(s.shape[0]):
        for a in range(scale_joints.shape[0]):
            j = scale_joints[a]
            sx = s[row, j, 0]
            sy = s[row, j, 1]
            sz = s[row, j, 2]
            if abs(sx - sy) > rtol * abs(sy) or abs(sx - sz) > rtol * abs(sz):
                return j
    return -1


@njit(borrows=True, helper=True)
def output_status(t, r, err):  # type: ignore[no-untyped-def]
    """The drivers' check of what they wrote (CCD and FABRIK; two-bone checks each item as it is solved,
    :func:`item_finite`): :data:`NONFINITE_RESULT` when a rotation, a translation or an error overflowed
    (finite inputs of absurd size), else :data:`OK`; the caller then returns nothing."""
    if all_finite(t) and all_finite(r) and all_finite(err):
        return OK
    return NONFINITE_RESULT


@njit(borrows=True, helper=True)
def item_finite(r, i, joints, err):  # type: ignore[no-untyped-def]
    """Whether item ``i``'s rotations of ``joints`` and its error ``err`` are finite: what one item's solve
    wrote (the per-item form of :func:`output_status`, for a solver that writes nothing else)."""
    if not math.isfinite(err):
        return False
    for k in range(joints.shape[0]):
        j = joints[k]
        for c in range(4):
            if not math.isfinite(r[i, j, c]):
                return False
    return True


@njit(borrows=True, helper=True)
def input_status(t, r, s, target, pole, scale_joints):  # type: ignore[no-untyped-def]
    """Every chain driver's input check, before anything is solved (codes in :mod:`.constants`).

    :data:`NONFINITE_INPUT` when a pose array, ``target`` or ``pole`` holds NaN
    or inf; :data:`NONUNIFORM_SCALE` when a joint of ``scale_joints`` (the
    chain and its ancestors) has a non-uniform scale; else :data:`OK`.
    """
    if not (all_finite(t) and all_finite(r) and all_finite(s) and all_finite(target) and all_finite(pole)):
        return NONFINITE_INPUT
    if first_nonuniform(s, scale_joints, UNIFORM_SCALE_RTOL) != -1:
        return NONUNIFORM_SCALE
    return OK


@njit(inline=True)
def parent_world_rot(k, base_rot, rot):  # type: ignore[no-untyped-def]
    if k == 0:
        return base_rot
    return (rot[k - 1, 0], rot[k - 1, 1], rot[k - 1, 2], rot[k - 1, 3])


@njit(borrows=True, helper=True)
def set_world_rot(k, q_world, base_rot, joints, i, r, rot):  # type: ignore[no-untyped-def]
    """Give chain joint ``k`` the world rotation ``q_world``.

    ``Q_local = inverse(Q_parent_world) * Q_world``; written to ``r`` and to
    ``rot[k]``.  Descendants' world transforms are stale afterwards: call
    :func:`chain_world` from ``k + 1`` (or ``k``) before reading them.
    """
    pq = parent_world_rot(k, base_rot, rot)
    ql = qnormalize(qmul(qconj(pq), q_world))
    write_q(r, i, joints[k], ql)
    qw = qmul(pq, ql)
    rot[k, 0] = qw[0]
    rot[k, 1] = qw[1]
    rot[k, 2] = qw[2]
    rot[k, 3] = qw[3]


@njit(borrows=True, helper=True)
def rotate_world(k, dq, base_rot, joints, i, r, rot):  # type: ignore[no-untyped-def]
    """Left-multiply the world correction ``dq`` onto chain joint ``k``: ``Q_world' = dq * Q_world``."""
    cur = (rot[k, 0], rot[k, 1], rot[k, 2], rot[k, 3])
    set_world_rot(k, qmul(dq, cur), base_rot, joints, i, r, rot)


# ------------------------------------------------------------ straight chains
#: A chain counts as straight when every joint between its first and its end lies within this fraction of its
#: reach of the line between them.  CCD and FABRIK cannot fold a straight chain toward a target on its own
#: line (every joint sees the end and the target in one direction); they bend it first (:func:`fold_point`).
FOLD_STRAIGHT_RTOL = 1e-5

#: A straight chain (or sub-chain) is folded only when its end must come closer to its first joint than its
#: bones' length by more than this fraction (a target on the line within reach); else straight is the answer.
FOLD_REACH_RTOL = 1e-9

#: :func:`fold_direction`: a joint that sticks out of its neighbours' line by more than this fraction of the
#: line's length is bent already, and is bent further the same way; less is rounding (of coordinates far from
#: the origin, say), and the joint's own frame decides.
FOLD_BENT_RTOL = 1e-8

#: :func:`fold_direction`: a local axis counts as less aligned with the bone than the one before it only
#: by more than this (|cosine|): axes equally perpendicular to the bone (a bone along a local axis) are told
#: apart by order, not by rounding, so the choice does not change with the character's place or heading.
FOLD_AXIS_TIE = 1e-9


@njit(borrows=True, helper=True)
def fold_point(pos, reach, lengths_from):  # type: ignore[no-untyped-def]
    """The joint of a straight chain to bend, for a chain whose world positions are ``pos (K, 3)``: the interior
    joint nearest the middle of the chain's length (among ``lengths_from .. K-2``), or -1 when the chain is
    not straight (:data:`FOLD_STRAIGHT_RTOL`) or has no interior joint (K < 3)."""
    k_n = pos.shape[0]
    if k_n < 3 or reach <= 0.0:
        return -1
    e = (pos[k_n - 1, 0] - pos[0, 0], pos[k_n - 1, 1] - pos[0, 1], pos[k_n - 1, 2] - pos[0, 2])
    el2 = vdot(e, e)
    if el2 <= 0.0:
        return -1
    best = -1
    gap = math.inf
    acc = 0.0
    for k in range(1, k_n - 1):
        d = (pos[k, 0] - pos[k - 1, 0], pos[k, 1] - pos[k - 1, 1], pos[k, 2] - pos[k - 1, 2])
        acc += math.sqrt(vdot(d, d))
        x = (pos[k, 0] - pos[0, 0], pos[k, 1] - pos[0, 1], pos[k, 2] - pos[0, 2])
        c = vdot(x, e) / el2
        off = (x[0] - c * e[0], x[1] - c * e[1], x[2] - c * e[2])
        if vdot(off, off) > (FOLD_STRAIGHT_RTOL * reach) * (FOLD_STRAIGHT_RTOL * reach):
            return -1  # bent: the solver has a side to fold to
        if k >= lengths_from and abs(acc - 0.5 * reach) < gap:
            gap = abs(acc - 0.5 * reach)
            best = k
    return best


@njit(helper=True)
def fold_direction(q_world, p_prev, p_k, p_next):  # type: ignore[no-untyped-def]
    """The unit direction (world) in which joint ``p_k`` of a (nearly) straight chain ``p_prev, p_k, p_next``
    is moved off the line to bend it: the way it already sticks out when it does, else a direction fixed in the
    joint's frame ``q_world``: of its local x, y, z axes the least aligned with the bone ``p_k -> p_next`` (the
    first of equals, see :data:`FOLD_AXIS_TIE`), ``a``, gives ``u x a`` (``u`` the bone's direction).  It turns
    with the joint's parents, so a solve does not depend on where the character stands or faces.  ``(0, 0, 0)``
    for a zero-length bone."""
    u = (p_next[0] - p_k[0], p_next[1] - p_k[1], p_next[2] - p_k[2])
    ul = math.sqrt(vdot(u, u))
    if ul <= 0.0:
        return (0.0, 0.0, 0.0)
    u = (u[0] / ul, u[1] / ul, u[2] / ul)
    x = (p_k[0] - p_prev[0], p_k[1] - p_prev[1], p_k[2] - p_prev[2])
    line = (p_next[0] - p_prev[0], p_next[1] - p_prev[1], p_next[2] - p_prev[2])
    ll2 = vdot(line, line)
    if ll2 > 0.0:
        c = vdot(x, line) / ll2
        off = (x[0] - c * line[0], x[1] - c * line[1], x[2] - c * line[2])
        on = math.sqrt(vdot(off, off))
        if on > FOLD_BENT_RTOL * math.sqrt(ll2):
            return (off[0] / on, off[1] / on, off[2] / on)  # bent already: further that way
    return frame_side(q_world, u)


@njit(helper=True)
def frame_side(q_world, u):  # type: ignore[no-untyped-def]
    """:func:`fold_direction`'s side fixed in a joint's frame ``q_world``, for a bend off the unit direction
    ``u``: of the frame's local x, y, z axes the least aligned with ``u`` (the first of equals, see
    :data:`FOLD_AXIS_TIE`), ``a``, gives the unit ``u x a``."""
    best = 2.0
    a = (1.0, 0.0, 0.0)
    for c_ax in range(3):
        w = qrotate(q_world, (1.0 if c_ax == 0 else 0.0, 1.0 if c_ax == 1 else 0.0, 1.0 if c_ax == 2 else 0.0))
        d = abs(vdot(w, u))
        if d < best - FOLD_AXIS_TIE:
            best = d
            a = w
    f = (u[1] * a[2] - u[2] * a[1], u[2] * a[0] - u[0] * a[2], u[0] * a[1] - u[1] * a[0])
    fl = math.sqrt(vdot(f, f))
    return (f[0] / fl, f[1] / fl, f[2] / fl)
