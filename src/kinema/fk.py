"""Batched forward kinematics and its inverse."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import _validate
from ._validate import as_float_array, broadcast_batch, check_allocation, require_finite, uniform_scale
from .errors import ShapeError, SolverInputError
from .pose import Pose
from .skeleton import Skeleton, check_skeleton

__all__ = ["FKResult", "forward_kinematics", "world_to_local"]

#: Joint transforms (frames x joints) from which FK and world_to_local run their parallel drivers: below it a
#: parallel region's start and its wait for every thread cost more than they save (and beside a busy process
#: much more), and a small job never compiles the parallel driver at all (seconds on a cold cache).
FK_PARALLEL_MIN_JOINTS = 16384


@dataclass(frozen=True)
class FKResult:
    """World transforms from :func:`forward_kinematics`.

    * ``positions``: ``(*batch, J, 3)`` joint origins in world space.
    * ``rotations``: ``(*batch, J, 4)`` world rotations, xyzw (the product of
      local rotations from the root; with non-uniform scale the exact linear
      part is in ``matrices``).
    * ``scales``: ``(*batch, J)`` world uniform scale (ones-product of the
      local scales) or None when some scale is non-uniform.
    * ``matrices``: ``(*batch, J, 4, 4)`` world matrices ``T_world_joint``
      with scale (column vectors), or None unless requested.
    """

    positions: NDArray[np.float64]
    rotations: NDArray[np.float64]
    scales: NDArray[np.float64] | None
    matrices: NDArray[np.float64] | None = None


def _is_uniform(s: NDArray[np.float64]) -> bool:
    return bool(np.all(uniform_scale(s, rtol=0.0)))  # exactly uniform: any other scale takes the exact path


def _batch_view(a: NDArray[np.float64], batch: tuple[int, ...], n: int, tail: tuple[int, ...]) -> NDArray[np.float64]:
    """``a`` as writeable C-contiguous ``(1, *tail)`` (no batch dims) or ``(n, *tail)``: the solver layer's rows."""
    from ._solve import _rows

    return _rows(a, batch, n, tail)


def _check_pose(skeleton: Skeleton, pose: Pose) -> None:
    check_skeleton(skeleton)
    if not isinstance(pose, Pose):
        raise SolverInputError(f"pose must be a kinema.Pose, got {type(pose).__name__}")
    if pose.n_joints != skeleton.n_joints:
        raise ShapeError("pose", f"(..., {skeleton.n_joints}, k) for a skeleton of {skeleton.n_joints} joints",
                         f"{pose.n_joints} joints")


#: Bytes per joint transform that bound what forward_kinematics allocates: results (8 floats, 24 with matrices) and
#: the inputs' broadcast copies (10 floats).
_FK_BYTES_BOUND = 8 * (3 + 4 + 1 + 16 + 3 + 4 + 3)


def _copied_bytes(arrays: tuple[tuple[NDArray[np.float64], int], ...], batch: tuple[int, ...], n: int, nj: int) -> int:
    """Bytes :func:`_batch_view` copies for these ``(array, k)`` inputs: a batched one broadcast or strided
    (``(N, J, k)`` float64 each); an unbatched one or a full C-contiguous batch is used as it is."""
    total = 0
    for a, k in arrays:
        if a.ndim > 2 and (a.shape[:-2] != batch or not a.flags.c_contiguous):
            total += 8 * n * nj * k
    return total


def _too_large(what: str, batch: tuple[int, ...], nj: int, nbytes: int) -> None:
    """:class:`ShapeError` before allocating when ``nbytes`` passes the allocation limit."""
    check_allocation(nbytes, what, "a batch small enough to allocate its results", f"batch {batch} of {nj} joints")


def _nonfinite_items(arrays: tuple[NDArray[np.float64], ...]) -> NDArray[np.bool_]:
    """Per item, whether any of the ``(N, ...)`` result ``arrays`` holds a NaN or inf (the error path only)."""
    bad = np.zeros(arrays[0].shape[0], dtype=bool)
    for a in arrays:
        bad |= ~np.isfinite(a.reshape(a.shape[0], -1)).all(axis=1)
    return bad


def _item_text(bad: NDArray[np.bool_], batch: tuple[int, ...]) -> str:
    """`` (item (i, ...))`` for the first True of ``bad`` (empty when unbatched)."""
    if not batch:
        return ""
    return f" (item {tuple(int(k) for k in np.unravel_index(int(np.argmax(bad)), batch))})"


def _refuse_nonfinite(pose: Pose, results: tuple[NDArray[np.float64], ...], batch: tuple[int, ...]) -> None:
    """After a kernel said a result may be NaN or inf: :class:`SolverInputError` naming the pose's first NaN or
    inf (array and index), else the first item whose results overflowed.  Nothing when every result is finite
    (the kernel's sum of finite results near 1e308 overflowed, not a result)."""
    from ._solve import check_pose_finite

    check_pose_finite(pose, "forward_kinematics")
    bad = _nonfinite_items(results)
    if np.any(bad):
        raise SolverInputError(_overflow_message("forward_kinematics", _item_text(bad, batch)))


def _overflow_message(what: str, where: str) -> str:
    """The solvers' wording for finite input whose results overflow float64."""
    return (f"{what}: the world transforms overflowed float64{where}: the pose's values are too large "
            "(coordinates near 1e308, or scales whose product along a chain passes it)")


def forward_kinematics(skeleton: Skeleton, pose: Pose, *, matrices: bool = False) -> FKResult:
    """World transforms of every joint of ``pose`` (batch dims ``(*batch,)``).

    ``p_j = p_parent + s_parent * rotate(q_parent, t_j)``, ``q_j = q_parent q_j``
    for uniform scales; non-uniform scales go through 3x3 linear parts (see
    :class:`FKResult`).  Single pose in, single result out.

    :class:`~kinema.SolverInputError` for a pose holding NaN or inf (naming the
    array and the index), for finite values whose world transforms overflow
    float64 and for ``matrices`` other than True or False;
    :class:`~kinema.ShapeError` for a batch whose results would pass
    :data:`~kinema._validate.MAX_ALLOCATION_BYTES`.
    """
    from ._kernels._tier import kernels

    kfk = kernels("fk")

    matrices = _validate.check_flag(matrices, "matrices")
    _check_pose(skeleton, pose)
    batch = pose.batch_shape
    n = math.prod(batch)  # (a Python int: a broadcast batch of views may count past int64)
    nj = skeleton.n_joints
    t_in, r_in, s_in = pose._translations, pose._rotations, pose._scales  # (the arrays, without the properties)
    near_limit = bool(batch) and n * nj * _FK_BYTES_BOUND > _validate.MAX_ALLOCATION_BYTES  # else nothing to count
    if near_limit:  # the results (matrices when asked for) and the inputs' copies, before anything is allocated
        _too_large("forward_kinematics: pose", batch, nj,
                   8 * n * nj * (3 + 4 + 1 + 16 * matrices) + _copied_bytes(((t_in, 3), (r_in, 4), (s_in, 3)),
                                                                            batch, n, nj))
    t = _batch_view(t_in, batch, n, (nj, 3))
    r = _batch_view(r_in, batch, n, (nj, 4))
    s = _batch_view(s_in, batch, n, (nj, 3))
    uniform = _is_uniform(s)
    if near_limit and not uniform and not matrices:  # the 3x3 path's matrices too
        _too_large("forward_kinematics: pose", batch, nj, 8 * n * nj * (3 + 4 + 1 + 16))
    pos = np.empty((n, nj, 3))
    rot = np.empty((n, nj, 4))
    scl = np.empty((n, nj))
    need_mat = matrices or not uniform
    mat = np.empty((n, nj, 4, 4)) if need_mat else np.empty((1, 1, 4, 4))
    # Plain FK (uniform scales, no matrices) has kernels of its own: the same operations, without
    # compiling the 3x3 path it never takes.
    plain = uniform and not matrices
    topology = skeleton._fk_topology  # the parents, then the leaves: where every NaN or inf ends (kinema._kernels.fk)
    args: tuple[object, ...] = ((topology, t, r, s, pos, rot, scl) if plain else
                                (topology, t, r, s, uniform, matrices, pos, rot, scl, mat))
    if n * nj >= FK_PARALLEL_MIN_JOINTS:
        from ._kernels._jit import parallel_chunksize
        from ._solve import n_chunks

        with parallel_chunksize():
            bad = (kfk.fk_uniform_parallel if plain else kfk.fk_parallel)(n_chunks(n), *args)
    else:
        bad = (kfk.fk_uniform_serial if plain else kfk.fk_serial)(*args)
    if bad:  # a result may be NaN or inf: from the input (named), or an overflow
        _refuse_nonfinite(pose, (pos, rot, scl) + ((mat,) if need_mat else ()), batch)
    return FKResult(
        positions=pos.reshape(batch + (nj, 3)),
        rotations=rot.reshape(batch + (nj, 4)),
        scales=scl.reshape(batch + (nj,)) if uniform else None,
        matrices=mat.reshape(batch + (nj, 4, 4)) if matrices else None,
    )


def world_to_local(
    skeleton: Skeleton,
    world_rotations: ArrayLike,
    world_positions: ArrayLike,
    scales: ArrayLike | None = None,
) -> Pose:
    """Local pose from world rotations ``(*batch, J, 4)`` and positions ``(*batch, J, 3)``.

    ``q_local = inverse(q_parent_world) q_world`` and
    ``t_local = L_parent^-1 (p - p_parent)`` where ``L_parent`` is the
    parent's world linear part built from the local ``scales`` (default: the
    skeleton's rest scales).  Exact inverse of :func:`forward_kinematics`.  A
    parent whose world scale has no inverse (a zero scale, or scales whose
    product underflows), a NaN or inf in an input (named, with its index) and
    finite inputs whose results overflow float64 raise
    :class:`~kinema.SolverInputError`.
    """
    from ._kernels._tier import kernels

    kfk = kernels("fk")

    check_skeleton(skeleton)
    nj = skeleton.n_joints
    rw = as_float_array(world_rotations, "world_rotations", (nj, 4))
    pw = as_float_array(world_positions, "world_positions", (nj, 3))
    s_in = skeleton.scales if scales is None else as_float_array(scales, "scales", (nj, 3))
    batch = broadcast_batch(rw.shape[:-2], pw.shape[:-2], s_in.shape[:-2])
    n = math.prod(batch)
    if batch:  # the results, the work space, the broadcast world arrays, the scales' copy and rows
        _too_large("world_to_local", batch, nj, 8 * n * nj * (3 + 4 + 9 + 4 + 3 + 3 + 3) + 8 * n)
    # Every item reads its own row of these two (the kernel has no one-row case), so they are broadcast.
    rw_f = _batch_view(rw if rw.shape == batch + (nj, 4) else np.broadcast_to(rw, batch + (nj, 4)), batch, n, (nj, 4))
    pw_f = _batch_view(pw if pw.shape == batch + (nj, 3) else np.broadcast_to(pw, batch + (nj, 3)), batch, n, (nj, 3))
    s = _batch_view(s_in, batch, n, (nj, 3))
    uniform = _is_uniform(s)
    t_out = np.empty((n, nj, 3))
    r_out = np.empty((n, nj, 4))
    work = np.empty((n, nj, 1, 1)) if uniform else np.empty((n, nj, 3, 3))
    singular = np.full(n, -1, dtype=np.int64)  # per item: the first joint whose world linear part has no inverse
    args = (skeleton.parents, rw_f, pw_f, s, uniform, t_out, r_out, work, singular)
    if n * nj >= FK_PARALLEL_MIN_JOINTS:  # as forward_kinematics: small jobs never start (or compile) threads
        from ._kernels._jit import parallel_chunksize
        from ._solve import n_chunks

        with parallel_chunksize():
            bad = kfk.world_to_local(n_chunks(n), *args)
    else:
        bad = kfk.world_to_local_serial(*args)
    if bad:  # a NaN or inf in an input (named here), else a singular scale (below) or an overflow
        for name, a in (("world_rotations", rw), ("world_positions", pw), ("scales", s_in)):
            require_finite(a, f"world_to_local: {name}")
    if np.any(singular >= 0):
        i = int(np.argmax(singular >= 0))
        item = f" (item {tuple(int(k) for k in np.unravel_index(i, batch))})" if batch else ""
        raise SolverInputError(f"world_to_local: the world scale of joint {skeleton.names[int(singular[i])]!r} has no "
                               f"inverse{item}: a zero scale, or scales whose product underflows")
    if bad:  # (world_to_local's kernel sums x * 0.0: no false alarm)
        raise SolverInputError(_overflow_message("world_to_local", _item_text(_nonfinite_items((t_out, work)), batch)))
    s_full = np.broadcast_to(s_in, batch + (nj, 3)).copy()
    return Pose(t_out.reshape(batch + (nj, 3)), r_out.reshape(batch + (nj, 4)), s_full)
