"""Forward kinematics and its inverse over a flattened batch.

Array arguments with a leading batch axis of length 1 are shared by every
batch item (broadcast without copying); otherwise the axis has length ``N``.
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
def fk_uniform_item(i, parents, t_local, r_local, s_local, pos_world, rot_world, scale_world):  # type: ignore[no-untyped-def]
    """:func:`fk_item` for uniform scales without matrices: the same operations, only the FK step.

    Its own kernel so that plain FK (the common call) compiles neither the
    3x3 path nor the matrix writes (seconds on a cold cache).
    """
    nj = parents.shape[0]
    it = i % t_local.shape[0]
    ir = i % r_local.shape[0]
    is_ = i % s_local.shape[0]
    for j in range(nj):
        t = (t_local[it, j, 0], t_local[it, j, 1], t_local[it, j, 2])
        rq = (r_local[ir, j, 0], r_local[ir, j, 1], r_local[ir, j, 2], r_local[ir, j, 3])
        p = parents[j]
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
def fk_item(i, parents, t_local, r_local, s_local, uniform, want_matrices, pos_world, rot_world, scale_world,  # type: ignore[no-untyped-def]
            mat_world):
    """World transforms of every joint of item ``i`` (see :func:`fk_serial` for the arrays).

    Uniform scales: the one FK step, :func:`~kinema._kernels.chain.joint_world`
    (``p = p_parent + s_parent * rotate(q_parent, t)``, ``q = q_parent *
    normalize(q)``, ``s = s_parent * s``).  Non-uniform scales carry the 3x3
    linear part ``L = L_parent R(q) diag(s)`` and ``p = p_parent + L_parent t``
    (exact, shear included); ``rot_world`` is then the product of the local
    rotations.
    """
    nj = parents.shape[0]
    if uniform:  # the one per-item code for it, whichever driver runs; matrices read back from its results
        fk_uniform_item(i, parents, t_local, r_local, s_local, pos_world, rot_world, scale_world)
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
        p = parents[j]
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
def fk_serial(parents, t_local, r_local, s_local, uniform, want_matrices, pos_world, rot_world, scale_world,  # type: ignore[no-untyped-def]
              mat_world):
    """World transforms of every joint, items on the calling thread.

    ``t_local (Nt,J,3)``, ``r_local (Nr,J,4)``, ``s_local (Ns,J,3)`` with
    ``Nx`` in {1, N}; outputs ``pos_world (N,J,3)``, ``rot_world (N,J,4)``,
    ``scale_world (N,J)`` (uniform world scale, meaningful when ``uniform``)
    and ``mat_world (N,J,4,4)`` (written when ``want_matrices`` or not
    ``uniform``; may be a dummy ``(1,1,4,4)`` otherwise).
    """
    for i in range(pos_world.shape[0]):
        fk_item(i, parents, t_local, r_local, s_local, uniform, want_matrices, pos_world, rot_world, scale_world,
                mat_world)


@njit(parallel=True)
def fk_parallel(n_chunks, parents, t_local, r_local, s_local, uniform, want_matrices, pos_world,  # type: ignore[no-untyped-def]
                rot_world, scale_world, mat_world):
    """:func:`fk_serial` with the items split into ``n_chunks`` chunks over threads (same per-item code)."""
    n = pos_world.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        for i in range(c * size, min(n, (c + 1) * size)):
            fk_item(i, parents, t_local, r_local, s_local, uniform, want_matrices, pos_world, rot_world,
                    scale_world, mat_world)


@njit
def fk_uniform_serial(parents, t_local, r_local, s_local, pos_world, rot_world, scale_world):  # type: ignore[no-untyped-def]
    """:func:`fk_serial` for uniform scales without matrices (:func:`fk_uniform_item` per item)."""
    for i in range(pos_world.shape[0]):
        fk_uniform_item(i, parents, t_local, r_local, s_local, pos_world, rot_world, scale_world)


@njit(parallel=True)
def fk_uniform_parallel(n_chunks, parents, t_local, r_local, s_local, pos_world, rot_world, scale_world):  # type: ignore[no-untyped-def]
    """:func:`fk_uniform_serial` with the items split into ``n_chunks`` chunks over threads (same per-item code)."""
    n = pos_world.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        for i in range(c * size, min(n, (c + 1) * size)):
            fk_uniform_item(i, parents, t_local, r_local, s_local, pos_world, rot_world, scale_world)


@njit(helper=True)
def world_to_local_item(i, parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,  # type: ignore[no-untyped-def]
                        singular):
    """Inverse of :func:`fk_item` for item ``i``: ``q_local = conj(q_parent) q``, ``t = L_parent^-1 (p - p_parent)``.

    ``rot_world (N,J,4)``, ``pos_world (N,J,3)``, ``s_local (Ns,J,3)``;
    writes ``t_local (N,J,3)``, ``r_local (N,J,4)``; ``mat_work (N,J,3,3)``
    holds world linear parts when scales are not uniform, and ``(N,J,1,1)``
    (world uniform scale in ``[0, 0]``) when they are.  ``singular (N,)`` gets, for item ``i``, the first
    joint whose world linear part has no inverse (a zero scale, or scales whose product underflows); its
    children's translations are then inf or NaN, and the caller refuses the item.
    """
    nj = parents.shape[0]
    is_ = i % s_local.shape[0]
    for j in range(nj):
        q = qnormalize((rot_world[i, j, 0], rot_world[i, j, 1], rot_world[i, j, 2], rot_world[i, j, 3]))
        wp = (pos_world[i, j, 0], pos_world[i, j, 1], pos_world[i, j, 2])
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
        if uniform:
            ws = s_local[is_, j, 0]
            if p >= 0:
                ws = ws * mat_work[i, p, 0, 0]
            mat_work[i, j, 0, 0] = ws
        else:
            m = qto_matrix(lq)
            sx = s_local[is_, j, 0]
            sy = s_local[is_, j, 1]
            sz = s_local[is_, j, 2]
            rs = (m[0] * sx, m[1] * sy, m[2] * sz, m[3] * sx, m[4] * sy, m[5] * sz, m[6] * sx, m[7] * sy, m[8] * sz)
            lin = rs if p < 0 else _mat3_mul(_read_mat3(mat_work[i, p]), rs)
            for a in range(3):
                for b in range(3):
                    mat_work[i, j, a, b] = lin[3 * a + b]
        for c in range(3):
            t_local[i, j, c] = lt[c]
        for c in range(4):
            r_local[i, j, c] = lq[c]


@njit
def world_to_local_serial(parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,  # type: ignore[no-untyped-def]
                          singular):
    """:func:`world_to_local_item` for every item on the calling thread."""
    for i in range(rot_world.shape[0]):
        world_to_local_item(i, parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,
                            singular)


@njit(parallel=True)
def world_to_local(n_chunks, parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,  # type: ignore[no-untyped-def]
                   singular):
    """:func:`world_to_local_serial` with the items split into ``n_chunks`` chunks over threads (same per-item code)."""
    n = rot_world.shape[0]
    size = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        for i in range(c * size, min(n, (c + 1) * size)):
            world_to_local_item(i, parents, rot_world, pos_world, s_local, uniform, t_local, r_local, mat_work,
                                singular)
