"""Batched forward kinematics and its inverse."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validate import as_float_array, broadcast_batch, uniform_scale
from .errors import ShapeError, SolverInputError
from .pose import Pose
from .skeleton import Skeleton

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


def _check_skeleton(skeleton: Skeleton) -> None:
    if not isinstance(skeleton, Skeleton):
        raise SolverInputError(f"skeleton must be a kinema.Skeleton, got {type(skeleton).__name__}")


def _check_pose(skeleton: Skeleton, pose: Pose) -> None:
    _check_skeleton(skeleton)
    if not isinstance(pose, Pose):
        raise SolverInputError(f"pose must be a kinema.Pose, got {type(pose).__name__}")
    if pose.n_joints != skeleton.n_joints:
        raise ShapeError("pose", f"(..., {skeleton.n_joints}, k) for a skeleton of {skeleton.n_joints} joints",
                         f"{pose.n_joints} joints")


def forward_kinematics(skeleton: Skeleton, pose: Pose, *, matrices: bool = False) -> FKResult:
    """World transforms of every joint of ``pose`` (batch dims ``(*batch,)``).

    ``p_j = p_parent + s_parent * rotate(q_parent, t_j)``, ``q_j = q_parent q_j``
    for uniform scales; non-uniform scales go through 3x3 linear parts (see
    :class:`FKResult`).  Single pose in, single result out.
    """
    from ._kernels import fk as kfk

    _check_pose(skeleton, pose)
    batch = pose.batch_shape
    n = int(np.prod(batch)) if batch else 1
    nj = skeleton.n_joints
    t = _batch_view(pose.translations, batch, n, (nj, 3))
    r = _batch_view(pose.rotations, batch, n, (nj, 4))
    s = _batch_view(pose.scales, batch, n, (nj, 3))
    uniform = _is_uniform(s)
    pos = np.empty((n, nj, 3))
    rot = np.empty((n, nj, 4))
    scl = np.empty((n, nj))
    need_mat = matrices or not uniform
    mat = np.empty((n, nj, 4, 4)) if need_mat else np.empty((1, 1, 4, 4))
    # Plain FK (uniform scales, no matrices) has kernels of its own: the same operations, without
    # compiling the 3x3 path it never takes.
    plain = uniform and not matrices
    args: tuple[object, ...] = ((skeleton.parents, t, r, s, pos, rot, scl) if plain else
                                (skeleton.parents, t, r, s, uniform, matrices, pos, rot, scl, mat))
    if n * nj >= FK_PARALLEL_MIN_JOINTS:
        from ._kernels._jit import parallel_chunksize
        from ._solve import n_chunks

        with parallel_chunksize():
            (kfk.fk_uniform_parallel if plain else kfk.fk_parallel)(n_chunks(n), *args)
    else:
        (kfk.fk_uniform_serial if plain else kfk.fk_serial)(*args)
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
    product underflows) raises :class:`~kinema.SolverInputError`.
    """
    from ._kernels import fk as kfk

    _check_skeleton(skeleton)
    nj = skeleton.n_joints
    rw = as_float_array(world_rotations, "world_rotations", (nj, 4))
    pw = as_float_array(world_positions, "world_positions", (nj, 3))
    s_in = skeleton.scales if scales is None else as_float_array(scales, "scales", (nj, 3))
    batch = broadcast_batch(rw.shape[:-2], pw.shape[:-2], s_in.shape[:-2])
    n = int(np.prod(batch)) if batch else 1
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
            kfk.world_to_local(n_chunks(n), *args)
    else:
        kfk.world_to_local_serial(*args)
    if np.any(singular >= 0):
        i = int(np.argmax(singular >= 0))
        item = f" (item {tuple(int(k) for k in np.unravel_index(i, batch))})" if batch else ""
        raise SolverInputError(f"world_to_local: the world scale of joint {skeleton.names[int(singular[i])]!r} has no "
                               f"inverse{item}: a zero scale, or scales whose product underflows")
    s_full = np.broadcast_to(s_in, batch + (nj, 3)).copy()
    return Pose(t_out.reshape(batch + (nj, 3)), r_out.reshape(batch + (nj, 4)), s_full)
