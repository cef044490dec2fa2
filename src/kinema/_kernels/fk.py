"""Forward kinematics and its inverse over a flattened batch.

Array arguments with a leading batch axis of length 1 are shared by every
batch item (broadcast without copying); otherwise the axis has length ``N``.

FK's ``topology (J + L,)`` int64 is the skeleton's parent indices (``J``,
as many as the world arrays' joint axis, ``-1`` for a root) followed by its
``L`` leaves (``kinema.Skeleton._fk_topology``): one array argument instead of
two (each costs numba's dispatch a few hundred nanoseconds on every call).

NaN and inf: every driver returns how many items (FK's parallel drivers:
chunks of items) may hold a NaN or inf in their results, from a NaN or inf in
the input or from finite input whose results overflow, without a pass over
the arrays.  FK adds up, after each item, the world position, rotation and
scale (linear part) of the skeleton's leaves (the joints without children; a
few values per item, still in cache): a NaN or inf in a joint's input reaches
that joint's world transform, and one there reaches every child's world
position (``p_parent + s_parent * rotate(q_parent, t)``: ``inf * 0`` and
``NaN * 0`` are NaN), so every one ends in a leaf, and a sum holding a NaN or
inf is NaN or inf.  A sum of finite values can itself overflow (results near
1e308): the caller looks at the results before it refuses anything.  This
costs about 3% of plain FK's kernel time (16 leaves of 60 joints,
benchmarks' rig).  :func:`world_to_local_item` sums its inputs and results as
it goes (a leaf's scale reaches no result there).
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import njit, prange
from .chain import joint_world
from .quat import qconj, qmul, qnormalize, qrotate, qto_matrix


@njit(helper=True)
def _mat3_mul(a: tuple, b: tuple) -> tuple:  # type: ignore[type-arg]
    return (
        a[0] * b[0] + a[1] * b[3] + a[2] * b[6],
        a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
        a[0] * b[2] + a[1] * b[5] + a[2] * b[8],
        a[3] * b[0] + a[4] * b[3] + a[5] * b[6],
        a[3] * b[1] + a[4] * b[4] + a[5] * b[7],
        a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
        a[6] * b[0] + a[7] * b[3] + a[8] * b[6],
        a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
        a[6] * b[2] + a[7] * b[5] + a[8] * b[8],
    )


@njit(helper=True)
def _mat3_vec(a: tuple, v: tuple) -> tuple:  # type: ignore[type-arg]
    return (
        a[0] * v[0] + a[1] * v[1] + a[2] * v[2],
        a[3] * v[0] + a[4] * v[1] + a[5] * v[2],
        a[6] * v[0] + a[7] * v[1] + a[8] * v[2],
    )


@njit(helper=True)
def _inverse(x: float) -> float:
    """``1 / x``, or inf when ``x`` is 0 or so small that its inverse overflows (the caller refuses it)."""
    if x == 0.0:
        return math.inf
    return 1.0 / x


@njit(helper=True)
def _mat3_inv(a: tuple) -> tuple:  # type: ignore[type-arg]
    """``(inverse of a, 1 / det a)``: the second is inf when ``a`` has no inverse (see :func:`_inverse`)."""
    c00 = a[4] * a[8] - a[5] * a[7]
    c01 = a[5] * a[6] - a[3] * a[8]
    c02 = a[3] * a[7] - a[4] * a[6]
    det = a[0] * c00 + a[1] * c01 + a[2] * c02
    k = _inverse(det)
    return (
        c00 * k, (a[2] * a[7] - a[1] * a[8]) * k, (a[1] * a[5] - a[2] * a[4]) * k,
        c01 * k, (a[0] * a[8] - a[2] * a[6]) * k, (a[2] * a[3] - a[0] * a[5]) * k,
        c02 * k, (a[1] * a[6] - a[0] * a[7]) * k, (a[0] * a[4] - a[1] * a[3]) * k,
    ), k


@njit(helper=True)
def _read_mat3(m: np.ndarray) -> tuple:  # type: ignore[type-arg]
    return (m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], m[2, 0], m[2, 1], m[2, 2])


@njit(helper=True)
def _write_linear(out: np.ndarray, lin: tuple, p: tuple) -> None:  # type: ignore[type-arg]
    for a in range(3):
        for b in range(3):
            out[a, b] = lin[3 * a + b]
        out[a, 3] = p[a]
        out[3, a] = 0.0
    out[3, 3] = 1.0


@njit(helper=True)
def fk_uniform_item(i, topology, t_local, r_local, s_local, pos_world, rot_world, scale_world):  # type: ignore[no-untyped-def]
    """:func:`fk_item` for uniform scales without matrices: the same operations, only the FK step.

    Its own kernel so that plain FK (the common call) compiles neither the
    3x3 path nor the matrix writes (seconds on a cold cache).
    """
    nj = pos_world.shape[1]
    it = i % t_local.shape[0]
    ir = i % r_local.shape[0]
    is_ = i % s_local.shape[0]
    for j in range(nj):
        t = (t_local[it, j, 0], t_local[it, j, 1], t_local[it, j, 2])
        rq = (r_local[ir, j, 0], r_local[ir, j, 1], r_local[ir, j, 2], r_local[ir, j, 3])
        p = topology[j]
        if p < 0:
            pp = (0.0, 0.0, 0.0)
            pq = (0.0, 0.0, 0.0, 1.0)
            ps = 1.0
        else:
            pq = (rot_world[i, p, 0], rot_world[i, p, 1], rot_world[i, p, 2], rot_world[i, p, 3])
            pp = (pos_world[i, p, 0], pos_world[i, p, 1], pos_world[i, p, 2])
            ps = scale_world[i, p]
        wp, wq, ws = joint_world(pp, pq, ps, t, rq, s_local[is_, j, 0])
        scale_world[i, j] = ws
        pos_world[i, j, 0] = wp[0]
        pos_world[i, j, 1] = wp[1]
        pos_world[i, j, 2] = wp[2]
        rot_world[i, j, 0] = wq[0]
        rot_world[i, j, 1] = wq[1]
        rot_world[i, j, 2] = wq[2]
        rot_world[i, j, 3] = wq[3]


@njit(helper=True)
def leaves_sum(i, topology, pos_world, rot_world, scale_world):  # type: ignore[no-untyped-def]
    """The sum of item ``i``'s world positions, rotations and uniform scales at the leaves (``topology``'s
    tail): NaN or inf when any result of the item is (see the module's notes), or when finite results near 1e308
    overflow the sum."""
    acc = 0.0
    for k in range(pos_world.shape[1], topology.shape[0]):
        j = topology[k]
        acc += (((pos_world[i, j, 0] + pos_world[i, j, 1]) + (pos_world[i, j, 2] + scale_world[i, j]))
                + ((rot_world[i, j, 0] + rot_world[i, j, 1]) + (rot_world[i, j, 2] + rot_world[i, j, 3])))
    return acc


@njit(helper=True)
def leaves_sum_linear(i, topology, pos_world, rot_world, mat_world):  # type: ignore[no-untyped-def]
    """:func:`leaves_sum` for the non-uniform path: the leaves' world linear parts instead of their scales."""
    acc = 0.0
    for k in range(pos_world.shape[1], topology.shape[0]):
        j = topology[k]
        acc += ((pos_world[i, j, 0] + pos_world[i, j, 1] + pos_world[i, j, 2])
                + ((rot_world[i, j, 0] + rot_world[i, j, 1]) + (rot_world[i, j, 2] + rot_world[i, j, 3])))
        for a in range(3):
            acc += mat_world[i, j, a, 0] + mat_world[i, j, a, 1] + mat_world[i, j, a, 2]
    return acc


@njit(helper=True)
def fk_item_sum(i, topology, t_local, r_local, s_local, uniform, want_matrices, pos_world,  # type: ignore[no-untyped-def]
                rot_world, scale_world, mat_world):
    """:func:`fk_item`, then the sum of its leaves' results (:func:`leaves_sum`; finite world rotations and scales
    give finite matrices)."""
    fk_item(i, topology, t_local, r_local, s_local, uniform, want_matrices, pos_world, rot_world, scale_world,
            mat_world)
    if uniform:
        return leaves_sum(i, topology, pos_world, rot_world, scale_world)
    return leaves_sum_linear(i, topology, pos_world, rot_world, mat_world)


@njit(helper=True)
def fk_item(i, topology, t_local, r_local, s_local, uniform, want_matrices, pos_world, rot_world, scale_world,  # type: ignore[no-untyped-def]
            mat_world):
    """World transforms of every joint of item ``i`` (see :func:`fk_serial` for the arrays).

    Uniform scales: the one FK step, :func:`~kinema._kernels.chain.joint_world`
    (``p = p_parent + s_parent * rotate(q_parent, t)``, ``q = q_parent *
    normalize(q)``, ``s = s_parent * s``).  Non-uniform scales carry the 3x3
    linear part ``L = L_parent R(q) diag(s)`` and ``p = p_parent + L_parent t``
    (exact, shear included); ``rot_world`` is then the product of the local
    rotations.
    """
    nj = pos_world.shape[1]
    if uniform:  # the one per-item code for it, whichever driver runs; matrices read back from its results
        fk_uniform_item(i, topology, t_local, r_local, s_local, pos_world, rot_world, scale_world)
        if want_matrices:
            for j in range(nj):
                ws = scale_world[i, j]
                m = qto_matrix((rot_world[i, j, 0], rot_world[i, j, 1], rot_world[i, j, 2], rot_world[i, j, 3]))
                lin = (m[0] * ws, m[1] * ws, m[2] * ws, m[3] * ws, m[4] * ws, m[5] * ws,
                       m[6] * ws, m[7] * ws, m[8] * ws)
                _write_linear(mat_world[i, j], lin, (pos_world[i, j, 0], pos_world[i, j, 1], pos_world[i, j, 2]))
        return
    it = i % t_local.shape[0]
    ir = i % r_local.shape[0]
    is_ = i % s_local.shape[0]
    for j in range(nj):
        t = (t_local[it, j, 0], t_local[it, j, 1], t_local[it, j, 2])
        rq = (r_local[ir, j, 0], r_local[ir, j, 1], r_local[ir, j, 2], r_local[ir, j, 3])
        p = topology[j]
        # non-uniform scales: the 3x3 linear part L = L_parent R(q) diag(s)
        q = qnormalize(rq)
        m = qto_matrix(q)
        sx = s_local[is_, j, 0]
        sy = s_local[is_, j, 1]
        sz = s_local[is_, j, 2]
        rs = (m[0] * sx, m[1] * sy, m[2] * sz, m[3] * sx, m[4] * sy, m[5] * sz, m[6] * sx, m[7] * sy, m[8] * sz)
        if p < 0:
            wp = t
            wq = q
            lin = rs
        else:
            pl = _read_mat3(mat_world[i, p])
            lt = _mat3_vec(pl, t)
            wp = (pos_world[i, p, 0] + lt[0], pos_world[i, p, 1] + lt[1], pos_world[i, p, 2] + lt[2])
            wq = qmul((rot_world[i, p, 0], rot_world[i, p, 1], rot_world[i, p, 2], rot_world[i, p, 3]), q)
            lin = _mat3_mul(pl, rs)
        scale_world[i, j] = 1.0
        _write_linear(mat_world[i, j], lin, wp)
        pos_world[i, j, 0] = wp[0]
        pos_world[i, j, 1] = wp[1]
        pos_world[i, j, 2] = wp[2]
        rot_world[i, j, 0] = wq[0]
        rot_world[i, j, 1] = wq[1]
        rot_world[i, j, 2] = wq[2]
        rot_world[i, j, 3] = wq[3]


@njit
def fk_serial(topology, t_local, r_local, s_local, uniform, want_matrices, pos_world, rot_world,  # type: ignore[no-untyped-def]
              scale_world, mat_world):
    """World transforms of every joint, items on the calling thread.

    ``t_local (Nt,J,3)``, ``r_local (Nr,J,4)``, ``s_local (Ns,J,3)`` with
    ``Nx`` in {1, N}; outputs ``pos_world (N,J,3)``, ``rot_world (N,J,4)``,
    ``scale_world (N,J)`` (uniform world scale, meaningful when ``uniform``)
    and ``mat_world (N,J,4,4)`` (written when ``want_matrices`` or not
    ``uniform``; may be a dummy ``(1,1,4,4)`` otherwise); ``topology``: the
    parents, then the leaves (see the module's notes).  Returns how many items
    may hold a NaN or inf.
    """
    bad = 0
    for i in range(pos_world.shape[0]):
        acc = fk_item_sum(i, topology, t_local, r_local, s_local, uniform, want_matrices, pos_world,
                          rot_world, scale_world, mat_world)
        if acc * 0.0 != 0.0:  # NaN for a NaN or inf
            bad += 1
    return bad


@njit(parallel=True)
def fk_parallel(n_chunks, topology, t_local, r_local, s_local, uniform, want_matrices, pos_world,  # type: ignore[no-untyped-def]
                rot_world, scale_world, mat_world):
    """:func:`fk_serial` with the items split into ``n_chunks`` chunks over threads (same per-item code); returns
    how many chunks may hold a NaN or inf."""
    n = pos_world.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    bad = 0
    for c in prange(n_chunks):
        acc = 0.0
        for i in range(c * size, min(n, (c + 1) * size)):
            acc += fk_item_sum(i, topology, t_local, r_local, s_local, uniform, want_matrices, pos_world,
                               rot_world, scale_world, mat_world) * 0.0
        bad += 0 if acc == 0.0 else 1
    return bad


@njit
def fk_uniform_serial(topology, t_local, r_local, s_local, pos_world, rot_world, scale_world):  # type: ignore[no-untyped-def]
    """:func:`fk_serial` for uniform scales without matrices (:func:`fk_uniform_item` per item)."""
    bad = 0
    for i in range(pos_world.shape[0]):
        fk_uniform_item(i, topology, t_local, r_local, s_local, pos_world, rot_world, scale_world)
        if leaves_sum(i, topology, pos_world, rot_world, scale_world) * 0.0 != 0.0:
            bad += 1
    return bad


@njit(parallel=True)
def fk_uniform_parallel(n_chunks, topology, t_local, r_local, s_local, pos_world, rot_world, scale_world):  # type: ignore[no-untyped-def]
    """:func:`fk_uniform_serial` with the items split into ``n_chunks`` chunks over threads (same per-item code);
    returns how many chunks may hold a NaN or inf."""
    n = pos_world.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    bad = 0
    for c in prange(n_chunks):
        acc = 0.0
        for i in range(c * size, min(n, (c + 1) * size)):
            fk_uniform_item(i, topology, t_local, r_local, s_local, pos_world, rot_world, scale_world)
            acc += leaves_sum(i, topology, pos_world, rot_world, scale_world) * 0.0
        bad += 0 if acc == 0.0 else 1
    return bad


@njit(helper=True)
def world_to_local_item(i, parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,  # type: ignore[no-untyped-def]
                        singular):
    """Inverse of :func:`fk_item` for item ``i``: ``q_local = conj(q_parent) q``, ``t = L_parent^-1 (p - p_parent)``.

    ``rot_world (N,J,4)``, ``pos_world (N,J,3)``, ``s_local (Ns,J,3)``;
    writes ``t_local (N,J,3)``, ``r_local (N,J,4)``; ``mat_work (N,J,3,3)``
    holds world linear parts when scales are not uniform, and ``(N,J,1,1)``
    (world uniform scale in ``[0, 0]``) when they are.  ``singular (N,)`` gets, for item ``i``, the first
    joint whose world linear part has no inverse (a zero scale, or scales whose product underflows); its
    children's translations are then inf or NaN, and the caller refuses the item.  Returns whether an input
    the item reads or a result (local translation, world scale or linear part) is NaN or inf.
    """
    nj = parents.shape[0]
    is_ = i % s_local.shape[0]
    acc = 0.0
    for j in range(nj):
        rq = (rot_world[i, j, 0], rot_world[i, j, 1], rot_world[i, j, 2], rot_world[i, j, 3])
        q = qnormalize(rq)
        wp = (pos_world[i, j, 0], pos_world[i, j, 1], pos_world[i, j, 2])
        # the inputs (a leaf's scale reaches no result), then the results below: 0, or NaN from a NaN or inf on
        acc += (rq[0] * 0.0 + rq[1] * 0.0 + rq[2] * 0.0 + rq[3] * 0.0 + wp[0] * 0.0 + wp[1] * 0.0 + wp[2] * 0.0)
        p = parents[j]
        if p < 0:
            lq = q
            lt = wp
        else:
            pq = qnormalize((rot_world[i, p, 0], rot_world[i, p, 1], rot_world[i, p, 2], rot_world[i, p, 3]))
            lq = qmul(qconj(pq), q)
            d = (wp[0] - pos_world[i, p, 0], wp[1] - pos_world[i, p, 1], wp[2] - pos_world[i, p, 2])
            if uniform:
                inv_s = _inverse(mat_work[i, p, 0, 0])
                lt0 = qrotate(qconj(pq), d)
                lt = (lt0[0] * inv_s, lt0[1] * inv_s, lt0[2] * inv_s)
            else:
                inv, inv_s = _mat3_inv(_read_mat3(mat_work[i, p]))
                lt = _mat3_vec(inv, d)
            if math.isinf(inv_s) and singular[i] < 0:
                singular[i] = p
        acc += lt[0] * 0.0 + lt[1] * 0.0 + lt[2] * 0.0
        if uniform:
            ws = s_local[is_, j, 0]  # (exactly uniform: sy and sz are this number)
            acc += ws * 0.0
            if p >= 0:
                ws = ws * mat_work[i, p, 0, 0]
            acc += ws * 0.0
            mat_work[i, j, 0, 0] = ws
        else:
            m = qto_matrix(lq)
            sx = s_local[is_, j, 0]
            sy = s_local[is_, j, 1]
            sz = s_local[is_, j, 2]
            rs = (m[0] * sx, m[1] * sy, m[2] * sz, m[3] * sx, m[4] * sy, m[5] * sz, m[6] * sx, m[7] * sy, m[8] * sz)
            lin = rs if p < 0 else _mat3_mul(_read_mat3(mat_work[i, p]), rs)
            acc += (sx * 0.0 + sy * 0.0 + sz * 0.0 + lin[0] * 0.0 + lin[1] * 0.0 + lin[2] * 0.0 + lin[3] * 0.0
                    + lin[4] * 0.0 + lin[5] * 0.0 + lin[6] * 0.0 + lin[7] * 0.0 + lin[8] * 0.0)
            for a in range(3):
                for b in range(3):
                    mat_work[i, j, a, b] = lin[3 * a + b]
        for c in range(3):
            t_local[i, j, c] = lt[c]
        for c in range(4):
            r_local[i, j, c] = lq[c]
    return acc != 0.0


@njit
def world_to_local_serial(parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,  # type: ignore[no-untyped-def]
                          singular):
    """:func:`world_to_local_item` for every item on the calling thread; returns how many items have a NaN or
    inf input or result."""
    bad = 0
    for i in range(rot_world.shape[0]):
        if world_to_local_item(i, parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,
                               singular):
            bad += 1
    return bad


@njit(parallel=True)
def world_to_local(n_chunks, parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,  # type: ignore[no-untyped-def]
                   singular):
    """:func:`world_to_local_serial` with the items split into ``n_chunks`` chunks over threads (same per-item code)."""
    n = rot_world.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    bad = 0
    for c in prange(n_chunks):
        k = 0
        for i in range(c * size, min(n, (c + 1) * size)):
            if world_to_local_item(i, parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,
                                   singular):
                k += 1
        bad += k
    return bad
