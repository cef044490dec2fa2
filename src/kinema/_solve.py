"""Plumbing shared by the public solver functions: chains, batch shapes, outputs.

Each public solver validates with these helpers, then hands flat arrays to
its kernel:

* ``t (Nt, J, 3)``, ``s (Ns, J, 3)``: the input pose's translations and
  scales, ``Nt, Ns`` in {1, N} (shared rows are not copied);
* ``r (N, J, 4)``: the *output* pose's rotations, initialised from the
  input; the kernel edits them in place;
* extra per-item arrays (targets, poles, ...) flattened to ``(N, ...)``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._kernels.constants import UNIFORM_SCALE_RTOL
from ._validate import as_float_array, broadcast_batch, require_finite, resolve_joint
from .errors import ShapeError, SolverInputError
from .pose import Pose
from .skeleton import Skeleton

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def entry_point(dispatcher: Any, args: tuple[Any, ...], any_layout: tuple[int, ...] = ()) -> Callable[..., Any]:
    """:func:`kinema._kernels._jit.entry_point`, importing numba only when first called."""
    from ._kernels._jit import entry_point as _entry_point

    return _entry_point(dispatcher, args, any_layout)


def kernel_loader(name: str) -> Callable[[], Any]:
    """A loader for ``kinema._kernels.<name>``: imported on its first call, then kept.

    ``import kinema`` must not import numba, so solver modules load their
    kernels lazily; an ``import`` statement in a single-solve hot path costs
    about 0.4 us per call, this closure's check a few tens of ns.
    """
    module: Any = None

    def load() -> Any:
        nonlocal module
        if module is None:
            module = importlib.import_module(f"kinema._kernels.{name}")
        return module

    return load


#: Option arrays shared between calls are dropped when a cache grows past this.
OPTIONS_CACHE_MAX = 256


def cached_options(cache: dict[tuple[Any, ...], FloatArray], key: tuple[Any, ...]) -> FloatArray:
    """``np.array(key, float64)``, built once per distinct ``key`` and shared (kernels only read it).

    Saves an allocation per single solve; ``cache`` is the calling solver's own dict.
    """
    arr = cache.get(key)
    if arr is None:
        if len(cache) >= OPTIONS_CACHE_MAX:
            cache.clear()
        arr = cache[key] = np.array(key, dtype=np.float64)
    return arr


def resolve_chain(skeleton: Skeleton, chain: Any) -> tuple[IntArray, NDArray[np.bool_]]:
    """Joints of a chain given as ``(start, end)`` or as an explicit list, root first.

    Returns ``(joints, listed)``: ``joints`` is the contiguous parent path
    from the first to the last joint, ``listed`` marks the joints the caller
    named (for a ``(start, end)`` pair, all of them).  Joints between listed
    ones (twist or helper bones) ride along but are not turned.
    """
    items = list(chain) if not isinstance(chain, (str, int, np.integer)) else [chain]
    if len(items) < 2:
        raise SolverInputError(f"a chain needs at least two joints (start and end), got {chain!r}")
    idx = [resolve_joint(skeleton, j) for j in items]
    if len(items) == 2:
        path = skeleton.chain(idx[0], idx[1])
        if len(path) < 2:
            raise SolverInputError(f"chain {chain!r} has a single joint: start and end must differ")
        return path, np.ones(len(path), dtype=bool)
    full: list[int] = [idx[0]]
    for a, b in zip(idx[:-1], idx[1:], strict=True):
        seg = skeleton.chain(a, b)
        if len(seg) < 2:
            raise SolverInputError(f"chain lists joint {skeleton.names[a]!r} twice in a row")
        full.extend(int(x) for x in seg[1:])
    joints = np.asarray(full, dtype=np.int64)
    listed = np.isin(joints, np.asarray(idx))
    return joints, listed


def ancestors_root_first(skeleton: Skeleton, joint: int) -> IntArray:
    """Indices from the root down to ``joint``'s parent (empty for a root)."""
    return np.asarray(skeleton.ancestors(joint)[::-1], dtype=np.int64)


def check_uniform_scale(skeleton: Skeleton, pose: Pose, joints: Sequence[int] | IntArray, what: str) -> None:
    """:class:`SolverInputError` when any of ``joints`` has a non-uniform scale in ``pose``."""
    j = np.asarray(joints, dtype=np.int64)
    if j.size == 0:
        return
    s = pose.scales[..., j, :]
    ok = np.isclose(s[..., 0], s[..., 1], rtol=UNIFORM_SCALE_RTOL, atol=0.0) & np.isclose(
        s[..., 0], s[..., 2], rtol=UNIFORM_SCALE_RTOL, atol=0.0
    )
    if not np.all(ok):
        bad = int(j[np.nonzero(~np.all(ok.reshape(-1, j.size), axis=0))[0][0]])
        raise SolverInputError(
            f"{what}: joint {skeleton.names[bad]!r} (or an ancestor) has a non-uniform scale; "
            "this solver needs uniform scale on the chain and its ancestors"
        )


def as_target(x: ArrayLike, what: str, trailing: tuple[int, ...] = (3,)) -> FloatArray:
    """A finite float array ``(..., *trailing)``; :class:`SolverInputError` on NaN or inf."""
    a = as_float_array(x, what, trailing)
    require_finite(a, what, SolverInputError)
    return a


@dataclass
class Prepared:
    """Flat arrays for a kernel, and the output pose they write into."""

    batch: tuple[int, ...]
    n: int
    t: FloatArray
    r: FloatArray
    s: FloatArray
    out: Pose
    extras: list[FloatArray]


NO_POLE3 = np.zeros(3)  # stands in for an absent pole (kernels read none of it)


class ThreadScratch(threading.local):
    """Scratch arrays lent to a borrowing single-solve kernel, one set per thread.

    The kernels release the GIL, so threads may run one at the same time;
    each thread's ``arrays`` start as None.  The hot path reads
    ``scratch.arrays or scratch.grow(n)``; a kernel that reports its scratch
    too short (``ONE_SMALL_SCRATCH``) is called again with ``grow(n)``.
    ``make(n)`` builds the arrays for a chain of ``n`` joints.
    """

    def __init__(self, make: Callable[[int], tuple[FloatArray, ...]]) -> None:
        self.make = make
        self.arrays: tuple[FloatArray, ...] | None = None

    def grow(self, n: int) -> tuple[FloatArray, ...]:
        """This thread's arrays, made anew for chains of up to ``n`` joints."""
        arrays = self.arrays = self.make(n)
        return arrays


def single_pose_copies(pose: Pose) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """Copies of an unbatched pose's ``(J, 3), (J, 4), (J, 3)`` arrays for a single-solve kernel, or None.

    None when the pose is batched (an array is not 2-D: the general path
    handles it).  Only dimensions are checked: a compiled entry point would
    read an array of another dimension count wrongly, while the single-solve
    kernels check the shapes themselves and the entry point refuses dtypes
    other than float64.  The copies are C-contiguous, of the pose's dtype.
    """
    t = pose.translations
    r = pose.rotations
    s = pose.scales
    if t.ndim != 2 or r.ndim != 2 or s.ndim != 2:
        return None
    return t.copy(), r.copy(), s.copy()


def single_pose_rows(pose: Pose) -> tuple[FloatArray, FloatArray, FloatArray, Pose]:
    """Copies of an unbatched pose with a leading batch axis of 1, and the output pose.

    The one-solve fast path of the chain solvers: ``(t (1,J,3), r (1,J,4),
    s (1,J,3), out)`` where the kernel edits the copies and ``out`` holds
    their ``[0]`` views, skipping :func:`prepare`'s broadcasting.
    """
    t3 = pose.translations[None].astype(np.float64)  # always a copy; float64 whatever the pose holds
    r3 = pose.rotations[None].astype(np.float64)
    s3 = pose.scales[None].astype(np.float64)
    return t3, r3, s3, Pose._trusted(t3[0], r3[0], s3[0])


def _rows(a: FloatArray, batch: tuple[int, ...], n: int, tail: tuple[int, ...]) -> FloatArray:
    if a.ndim == len(tail):
        return np.ascontiguousarray(a).reshape((1,) + tail)
    return np.ascontiguousarray(np.broadcast_to(a, batch + tail)).reshape((n,) + tail)


def fill_broadcast(dst: FloatArray, src: FloatArray) -> FloatArray:
    """``dst[...] = src`` broadcast (``dst`` C-contiguous); returns ``dst``.

    One pose copied into a whole batch (``src`` without the leading
    dimensions) is written by repeated doubling, ``dst[k:2k] = dst[:k]``:
    large contiguous copies, about 2.5x faster than ``numpy.copyto``'s
    broadcast loop over rows of a few numbers.  Anything else is
    ``numpy.copyto``.
    """
    if src.ndim < dst.ndim and src.shape == dst.shape[dst.ndim - src.ndim:] and dst.flags.c_contiguous:
        flat = dst.reshape(-1)
        m = src.size
        if m and flat.size:
            flat[:m] = src.reshape(-1)
            k = m
            while k < flat.size:
                c = min(k, flat.size - k)
                flat[k:k + c] = flat[:c]
                k += c
        return dst
    np.copyto(dst, np.broadcast_to(src, dst.shape))
    return dst


def prepare(
    skeleton: Skeleton,
    pose: Pose,
    extras: Sequence[tuple[FloatArray, tuple[int, ...]]] = (),
    out: Pose | None = None,
    rotations_only: bool = False,
) -> Prepared:
    """Broadcast ``pose`` with the per-item ``extras`` and set up the output pose.

    ``extras`` are ``(array, trailing_shape)`` pairs; each comes back as
    ``(N, *trailing_shape)`` in :attr:`Prepared.extras`.  The output pose is
    ``out`` (its three arrays must already have the full batch shape; the
    input is copied into it) or a new pose.  The input pose is never written.

    ``rotations_only``: the solver writes rotations only, so a new output
    pose keeps unbatched input translations and scales unbatched (copies of
    the ``(J, 3)`` arrays; :class:`~kinema.Pose` broadcasts them against the
    batched rotations) instead of repeating them for every item: a third of
    the memory for one pose solved against many targets.
    """
    nj = skeleton.n_joints
    if pose.n_joints != nj:
        raise ShapeError("pose", f"(..., {nj}, k) for a skeleton of {nj} joints", f"{pose.n_joints} joints")
    batch = broadcast_batch(pose.batch_shape, *[a.shape[: a.ndim - len(tl)] for a, tl in extras])
    n = int(np.prod(batch)) if batch else 1
    if out is None:
        keep_t = rotations_only and pose.translations.ndim == 2
        keep_s = rotations_only and pose.scales.ndim == 2
        out_pose = Pose._trusted(
            pose.translations.copy() if keep_t else fill_broadcast(np.empty(batch + (nj, 3)), pose.translations),
            fill_broadcast(np.empty(batch + (nj, 4)), pose.rotations),
            pose.scales.copy() if keep_s else fill_broadcast(np.empty(batch + (nj, 3)), pose.scales),
        )
    else:
        for name, arr, k in (("translations", out.translations, 3), ("rotations", out.rotations, 4),
                             ("scales", out.scales, 3)):
            if arr.shape != batch + (nj, k) or not arr.flags.c_contiguous or not arr.flags.writeable:
                raise ShapeError(f"out.{name}", f"{batch + (nj, k)} (C-contiguous, writeable)", tuple(arr.shape))
        if out is not pose:
            fill_broadcast(out.translations, pose.translations)
            fill_broadcast(out.rotations, pose.rotations)
            fill_broadcast(out.scales, pose.scales)
        out_pose = out
    # Translations and scales have 1 row (kept unbatched) or n; rotations n.
    t = out_pose.translations.reshape((-1, nj, 3))
    s = out_pose.scales.reshape((-1, nj, 3))
    r = out_pose.rotations.reshape((n, nj, 4))
    flat = [_rows(a, batch, n, tl) if a.ndim > len(tl) else np.broadcast_to(a, (n,) + tl).copy()
            for a, tl in extras]
    return Prepared(batch=batch, n=n, t=t, r=r, s=s, out=out_pose, extras=flat)
