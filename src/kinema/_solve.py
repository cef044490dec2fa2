"""The solver layer: prepared solvers, their shared plumbing, and the bounded cache of the free functions.

Every solver is a :class:`Solver`: its constructor resolves the chain, packs
the plan and the options and raises every configuration error once;
``solve`` converts the per-frame inputs (one conversion,
:func:`kinema._validate.as_float_array`), broadcasts them with
:func:`prepare` and calls the kernel's serial or parallel driver
(:func:`run_driver`), which run the same per-item code.  The free functions
(``solve_ccd`` ...) build their solver through :data:`SOLVERS` and call it.

Flat arrays handed to the kernels:

* ``t (Nt, J, 3)``, ``s (Ns, J, 3)``: the input pose's translations and
  scales, ``Nt, Ns`` in {1, N} (shared rows are not copied);
* ``r (N, J, 4)``: the *output* pose's rotations, initialised from the
  input; the kernel edits them in place;
* extra per-item arrays (targets, poles, ...) flattened to ``(N, ...)``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._kernels.constants import NONFINITE_INPUT, NONFINITE_RESULT, NONUNIFORM_SCALE, OK
from ._types import FloatArray, IntArray
from ._validate import (
    as_float_array,
    broadcast_batch,
    is_sequence,
    not_sequence_text,
    positive_number,
    require_finite,
    resolve_joint,
    uniform_scale,
)
from .errors import ShapeError, SolverInputError
from .limits import LIMIT_NONE, Limit, PackedLimits
from .pose import Pose
from .result import SolveResult
from .skeleton import Skeleton


def kernel_loader(name: str) -> Callable[[], Any]:
    """A loader for ``kinema._kernels.<name>``: what :func:`kinema._kernels._tier.kernels` hands out (the
    module, or its plain twin while compiling it would not pay), imported on the first call; once the module
    is chosen for good this closure keeps it.

    ``import kinema`` must not import numba, so solver modules load their
    kernels lazily; an ``import`` statement on every call costs more than
    this closure's check.
    """
    module: Any = None

    def load() -> Any:
        nonlocal module
        if module is not None:
            return module
        from ._kernels._tier import is_plain, kernels

        got = kernels(name)
        if not is_plain(got):
            module = got
        return got

    return load


def resolve_chain(skeleton: Skeleton, chain: Any) -> tuple[IntArray, NDArray[np.bool_]]:
    """Joints of a chain given as ``(start, end)`` or as an explicit list, root first.

    Returns ``(joints, listed)``: ``joints`` is the contiguous parent path
    from the first to the last joint, ``listed`` marks the joints the caller
    named (for a ``(start, end)`` pair, all of them).  Joints between listed
    ones (twist or helper bones) ride along but are not turned.
    """
    if isinstance(chain, np.ndarray) and chain.ndim == 0:
        chain = chain[()]  # one number in an array: one joint (refused below), not a sequence to iterate
    if not isinstance(chain, (str, int, np.integer)) and not is_sequence(chain):
        raise SolverInputError(f"a chain is (start, end) or a list of joints, got {not_sequence_text(chain)}")
    try:
        items = list(chain) if not isinstance(chain, (str, int, np.integer)) else [chain]
    except TypeError:  # an iterable that does not iterate (a 0-d array of another kind, ...)
        raise SolverInputError(f"a chain is (start, end) or a list of joints, got {chain!r}") from None
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
    ok = uniform_scale(s)
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


def pose_batch(pose: Pose) -> tuple[int, ...]:
    """``pose.batch_shape`` (an unbatched pose, the per-frame case, without broadcasting three empty shapes)."""
    if pose.translations.ndim == 2 and pose.rotations.ndim == 2 and pose.scales.ndim == 2:
        return ()
    return pose.batch_shape


def check_pose(skeleton: Skeleton, pose: Any, what: str) -> Pose:
    """``pose`` itself when it is a :class:`~kinema.Pose` of ``skeleton``'s joint count.

    :class:`SolverInputError` for anything that is not a pose, :class:`ShapeError` for another joint count.
    (Finiteness is checked by the kernels' drivers, see :func:`run_driver`.)
    """
    if not isinstance(pose, Pose):
        raise SolverInputError(f"{what}: pose must be a kinema.Pose, got {type(pose).__name__}")
    nj = skeleton.n_joints
    t, r, s = pose.translations, pose.rotations, pose.scales
    # All three arrays: their joint axes are tied together only by Pose's constructor, and the kernels
    # index them without bounds checks.
    if t.shape[-2:] == (nj, 3) and r.shape[-2:] == (nj, 4) and s.shape[-2:] == (nj, 3):
        return pose
    if pose.n_joints != nj:
        raise ShapeError("pose", f"(..., {nj}, k) for a skeleton of {nj} joints", f"{pose.n_joints} joints")
    for name, a, k in (("translations", t, 3), ("rotations", r, 4), ("scales", s, 3)):
        if a.shape[-2:] != (nj, k):
            raise ShapeError(f"pose {name}", f"(..., {nj}, {k})", tuple(a.shape))
    return pose


def pose_shapes(skeleton: Skeleton) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """The shapes of an unbatched pose of ``skeleton``: ``((J, 3), (J, 4), (J, 3))``."""
    nj = skeleton.n_joints
    return (nj, 3), (nj, 4), (nj, 3)


def check_pose_item(skeleton: Skeleton, pose: Any, what: str,
                    shapes: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]) -> bool:
    """:func:`check_pose`, and whether ``pose`` is unbatched (the per-frame case).

    ``shapes``: :func:`pose_shapes` of ``skeleton`` (a solver keeps it).  An unbatched pose of the right
    joint count is told by comparing its three shapes at once; anything else goes through :func:`check_pose`
    (a batched pose is valid, and False comes back; a wrong one raises).
    """
    # (Pose's private fields: its checked properties' getters cost a call each on the per-frame path.)
    if type(pose) is Pose and (pose._translations.shape, pose._rotations.shape, pose._scales.shape) == shapes:
        return True
    check_pose(skeleton, pose, what)
    return False


@dataclass(slots=True)
class Prepared:
    """Flat arrays for a kernel, and the output pose they write into."""

    batch: tuple[int, ...]
    n: int
    t: FloatArray
    r: FloatArray
    s: FloatArray
    out: Pose
    extras: list[FloatArray]
    #: Every array here is a fresh C-contiguous float64 copy made by :func:`prepare` (one unbatched item), so
    #: the drivers' compiled code for exactly these types may be called without numba's type dispatch.
    own: bool = False


def _rows(a: FloatArray, batch: tuple[int, ...], n: int, tail: tuple[int, ...]) -> FloatArray:
    """``a`` as C-contiguous rows ``(1, *tail)`` (no batch dims) or ``(N, *tail)``, always writeable.

    The kernels only read these rows, but numba types a read-only array apart from a writeable
    one: a broadcast view (read-only) for batches and a copy for single items would compile every
    driver twice.  A batch-shaped C-contiguous writeable input is used as it is (no copy).
    """
    if a.ndim == len(tail):
        rows = np.ascontiguousarray(a).reshape((1,) + tail)
    elif a.shape == batch + tail:
        rows = np.ascontiguousarray(a).reshape((n,) + tail)
    else:
        rows = np.ascontiguousarray(np.broadcast_to(a, batch + tail)).reshape((n,) + tail)
    return rows if rows.flags.writeable else rows.copy()


def fill_broadcast(dst: FloatArray, src: FloatArray) -> FloatArray:
    """``dst[...] = src`` broadcast (``dst`` C-contiguous); returns ``dst``.

    One pose copied into a whole batch (``src`` without the leading
    dimensions) is written by repeated doubling, ``dst[k:2k] = dst[:k]``:
    large contiguous copies instead of ``numpy.copyto``'s broadcast loop over
    rows of a few numbers.  Anything else is
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


#: The stand-in for an absent per-item ``(1|N, 3)`` input (no pole, no bend hint): a kernel reads no row of it
#: (its options say the input is absent).  Never written.
ABSENT_ROW3 = np.zeros((1, 3))


def prepare(
    skeleton: Skeleton,
    pose: Pose,
    extras: Sequence[tuple[FloatArray, tuple[int, ...]]] = (),
    out: Pose | None = None,
    rotations_only: bool = False,
    *,
    checked: bool = False,
    unbatched: bool | None = None,
    names: Sequence[str] | None = None,
) -> Prepared:
    """Broadcast ``pose`` with the per-item ``extras`` and set up the output pose.

    ``extras`` are ``(array, trailing_shape)`` pairs; each comes back as
    ``(N, *trailing_shape)`` in :attr:`Prepared.extras`.  The output pose is
    ``out`` (its three arrays must already have the full batch shape; the
    input is copied into it) or a new pose.  The input pose is never written.
    An extra that may share memory with ``out`` (a target read from the
    output buffer) is copied before ``out`` is written.
    ``checked``: the caller has already passed ``pose`` through :func:`check_pose`.
    ``unbatched``: True when the caller knows ``pose`` is unbatched and ``out`` None
    (:func:`check_pose_item`); None: worked out here.  ``names``: the argument each extra is (``"target"``,
    ...), for the error when the batch shapes do not broadcast (:func:`~kinema._validate.broadcast_batch`).

    ``rotations_only``: the solver writes rotations only, so a new output
    pose keeps unbatched input translations and scales unbatched (copies of
    the ``(J, 3)`` arrays; :class:`~kinema.Pose` broadcasts them against the
    batched rotations) instead of repeating them for every item: a third of
    the memory for one pose solved against many targets.

    One unbatched item (the per-frame call) is :func:`prepare_one`: one copy per array.
    """
    if not checked:
        check_pose(skeleton, pose, "solve")
    if out is not None and not isinstance(out, Pose):
        raise SolverInputError(f"out must be a kinema.Pose (or None), got {type(out).__name__}")
    if unbatched is None:
        unbatched = out is None and pose.translations.ndim == 2 and pose.rotations.ndim == 2 \
            and pose.scales.ndim == 2
    if unbatched:
        for a, tl in extras:
            if a.ndim != len(tl):
                break
        else:
            return prepare_one(pose, extras)  # no batched input: one item, no broadcasting
    if out is not None:
        # An extra that is a view into ``out`` (a target read from the output buffer) is read before ``out`` is
        # written: below (the input pose copied in) and by the kernel (the solve).
        extras = [(a.copy() if any(np.may_share_memory(a, b) for b in (out.translations, out.rotations,
                                                                          out.scales)) else a, tl)
                  for a, tl in extras]
    nj = skeleton.n_joints
    batch = broadcast_batch(pose.batch_shape, *[a.shape[: a.ndim - len(tl)] for a, tl in extras],
                            names=None if names is None else ("pose", *names))
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
        # An array the solve never writes (scales; translations too when it writes rotations only) may stay
        # unbatched in ``out`` when the input's is: there is nothing per item to hold (out=pose for a pose
        # made without per-frame scales).
        for name, arr, k, own in (
                ("translations", out.translations, 3, rotations_only and pose.translations.ndim == 2),
                ("rotations", out.rotations, 4, False), ("scales", out.scales, 3, pose.scales.ndim == 2)):
            want = (nj, k) if own and arr.ndim == 2 else batch + (nj, k)
            if arr.shape != want or not arr.flags.c_contiguous or not arr.flags.writeable:
                got: tuple[int, ...] | str = tuple(arr.shape) if arr.shape != want else \
                    f"{tuple(arr.shape)}, {'not C-contiguous' if not arr.flags.c_contiguous else 'read-only'}"
                raise ShapeError(f"out.{name}", f"{want} (C-contiguous, writeable)", got)
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


def prepare_one(pose: Pose, extras: Sequence[tuple[FloatArray, tuple[int, ...]]]) -> Prepared:
    """:func:`prepare` of one item: ``pose`` unbatched (checked), every extra without batch dimensions, no ``out``
    (:func:`item_pose` and :func:`item_row`)."""
    out, t, r, s = item_pose(pose)
    return Prepared((), 1, t, r, s, out, [item_row(a) for a, _ in extras], True)


def item_pose(pose: Pose) -> tuple[Pose, FloatArray, FloatArray, FloatArray]:
    """The per-frame call's output pose and the kernel's view of it: ``(out, t, r, s)``.

    ``pose`` is one unbatched item (checked by :func:`check_pose_item`); ``out``'s three ``(J, k)`` arrays are
    fresh C-contiguous float64 copies of its arrays and ``t, r, s`` are ``(1, J, k)`` views of them (the
    drivers' flat pose arrays).  The kernel writes ``t, r, s``; the input is never written.
    """
    # (Pose's fields, native float64 by its constructor's and setters' conversion; see check_pose_item)
    t2, r2, s2 = pose._translations.copy(), pose._rotations.copy(), pose._scales.copy()
    return Pose._trusted(t2, r2, s2), t2[None], r2[None], s2[None]


def item_row(a: FloatArray) -> FloatArray:
    """One item's input ``a`` (no batch dimensions, float64 from :func:`~kinema._validate.as_float_array`) as
    the kernels' rows ``(1, *a.shape)``: a fresh C-contiguous copy (never the caller's array)."""
    return a[None].copy()


class OneItemOutputs(threading.local):
    """A solver's output arrays for an unbatched solve, made by ``make()`` once per thread.

    The per-frame call allocates none of them: its result reads them back as numpy scalars, so nothing
    returned aliases them; each thread has its own (the kernels release the GIL); the drivers write every
    item's outputs, so nothing needs resetting.  ``outputs`` is ``make()``'s tuple.
    """

    def __init__(self, make: Callable[[], tuple[NDArray[Any], ...]]) -> None:
        self.outputs = make()


# ---------------------------------------------------------------- options
#: The most iterations a solver takes: far more than any solve uses, and within the kernels' integer
#: options (a count of 2**63 or more wrapped around to a solve of no iterations).
MAX_ITERATIONS = 2**31 - 1


def check_iterations(iterations: Any) -> int:
    """An iteration count in ``[0, MAX_ITERATIONS]``; :class:`SolverInputError` otherwise (bools are not counts)."""
    if isinstance(iterations, (bool, np.bool_)) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise SolverInputError(f"iterations must be a non-negative integer, got {iterations!r}")
    if iterations > MAX_ITERATIONS:
        raise SolverInputError(f"iterations must be at most {MAX_ITERATIONS}, got {iterations!r}")
    return int(iterations)


#: The twist policies every solver accepts: ``"input"`` keeps the smallest change from the given
#: pose (the default); ``"rest"`` takes each moved bone's twist about its own axis from the rest pose.
TWIST_POLICIES = ("input", "rest")


def check_twist(twist: Any) -> str:
    """The ``twist`` option, one of :data:`TWIST_POLICIES`; :class:`SolverInputError` otherwise."""
    if not isinstance(twist, str) or twist not in TWIST_POLICIES:
        raise SolverInputError(f"twist must be one of {', '.join(map(repr, TWIST_POLICIES))}, got {twist!r}")
    return twist


def check_nonnegative(x: Any, what: str) -> float:
    """A finite number ``>= 0`` (a tolerance, a distance); :class:`SolverInputError` otherwise."""
    return positive_number(x, what, allow_zero=True)


def blend_weight(weight: Any) -> FloatArray | None:
    """A solve's ``weight`` option: None for the default 1 (no blend to do), else :func:`check_weight`'s array."""
    if (type(weight) is float or type(weight) is int) and weight == 1:
        return None
    return check_weight(weight)


def check_weight(weight: Any) -> FloatArray:
    """The blend ``weight`` ``(*batch,)`` in [0, 1] as a float64 array; :class:`SolverInputError` otherwise."""
    try:
        w = as_float_array(weight, "weight", ())
    except ShapeError as exc:
        raise SolverInputError(str(exc)) from None
    if not np.all(np.isfinite(w)) or np.any(w < 0.0) or np.any(w > 1.0):
        raise SolverInputError(f"weight must be in [0, 1], got {np.asarray(weight).tolist()!r}")
    return w


# ---------------------------------------------------------------- drivers
#: Batches of at least this many items run the kernels' parallel driver;
#: smaller ones run on the calling thread (a parallel region costs a few
#: microseconds to start and, beside a busy process on a small machine,
#: waits for a descheduled worker: it pays only for real work).
PARALLEL_MIN_ITEMS = 64

#: Chunks per numba thread in a parallel driver: many small chunks, taken
#: in turn by whichever thread is free, so a thread that is descheduled
#: holds up one chunk, not a whole share of the batch.
CHUNKS_PER_THREAD = 16


def n_chunks(n: int) -> int:
    """How many chunks a parallel driver splits ``n`` items into."""
    from ._kernels._jit import num_threads

    return max(1, min(n, CHUNKS_PER_THREAD * num_threads()))


#: Compiled serial drivers by dispatcher, for one item in arrays :func:`prepare` made (``Prepared.own``).
_SERIAL_ENTRIES: dict[Any, Callable[..., Any]] = {}


def run_driver(drivers: Any, n: int, args: tuple[Any, ...], own: bool = False) -> int:
    """Run ``drivers.serial(n, args)`` or ``drivers.parallel(n_chunks, n, args)``; returns the status (0 = ok).

    ``drivers``: a kernel's :class:`~kinema._kernels.drivers.Drivers` (its ``DRIVERS``).  Every
    solver's two drivers come from one template
    (:func:`kinema._kernels.drivers.make_drivers`) and run the same per-item
    code, so the choice never changes a number: a batch equals a loop of
    single solves bit for bit.  ``args`` is the kernel's packed argument tuple.

    ``own``: every array in ``args`` is one the solver made itself (C-contiguous
    float64 or int64, never the caller's) and every scalar has a fixed type,
    so the serial driver's compiled code for those types is called directly,
    without numba's per-call type dispatch (see
    :func:`kinema._kernels._jit.entry_point`); the same compiled code.
    """
    if own and n == 1:
        dispatcher = drivers.serial
        entry = _SERIAL_ENTRIES.get(dispatcher)
        if entry is None:
            from ._kernels._jit import entry_point

            entry = _SERIAL_ENTRIES[dispatcher] = entry_point(dispatcher, (n, args))
        return int(entry(n, args))
    if n >= PARALLEL_MIN_ITEMS:
        from ._kernels._jit import parallel_chunksize

        with parallel_chunksize():
            return int(drivers.parallel(n_chunks(n), n, args))
    return int(drivers.serial(n, args))


def raise_status(status: int, what: str, skeleton: Skeleton, pose: Pose, scale_joints: IntArray,
                 inputs: Mapping[str, Any]) -> None:
    """Turn a driver's status (``kinema._kernels.constants``) into the :class:`SolverInputError` it means.

    ``inputs``: the per-item input arrays by name, searched for the NaN or inf
    the drivers found (the pose's arrays are searched first).
    """
    if status == OK:
        return
    if status == NONFINITE_INPUT:
        check_pose_finite(pose, what)
        for name, arr in inputs.items():
            if arr is not None:
                require_finite(np.asarray(arr, dtype=np.float64), f"{what}: {name}", SolverInputError)
        raise SolverInputError(f"{what}: an input contains NaN or inf")
    if status == NONUNIFORM_SCALE:
        check_uniform_scale(skeleton, pose, scale_joints, what)
    if status == NONFINITE_RESULT:
        raise SolverInputError(f"{what}: the solve overflowed float64: the pose's or the targets' values are "
                               "too large (coordinates or scales near 1e150 or beyond) or too small (a chain "
                               "near 1e-75 units long or shorter, whose squared lengths underflow)")
    raise SolverInputError(f"{what}: invalid input (kernel status {status})")


def check_pose_finite(pose: Pose, what: str) -> None:
    """:class:`SolverInputError` when ``pose`` holds NaN or inf, saying in which array and where."""
    for name in ("translations", "rotations", "scales"):
        a = getattr(pose, name)
        if not np.all(np.isfinite(a)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
            raise SolverInputError(f"{what}: pose has NaN or inf in its {name} (first at index {bad})")


def result(out: Pose, batch: tuple[int, ...], error: FloatArray, reached: NDArray[np.bool_], iterations: IntArray,
           limits_hit: IntArray, state: dict[str, Any]) -> SolveResult:
    """The :class:`SolveResult` of ``N = prod(batch)`` flat per-item diagnostics (numpy scalars when unbatched)."""
    if batch:
        return SolveResult._trusted(out, reached.reshape(batch), error.reshape(batch), iterations.reshape(batch),
                                    limits_hit.reshape(batch), state)
    return SolveResult._trusted(out, reached[0], error[0], iterations[0], limits_hit[0], state)


def result_one(out: Pose, error: FloatArray, tolerance: float, counts: IntArray, state: dict[str, Any]) -> SolveResult:
    """The :class:`SolveResult` of one unbatched item: numpy scalars, ``reached = error <= tolerance``.

    ``error (1,)``; ``counts (k, 1)`` with the iterations in row 0 and the limit hits in row 1."""
    e = error[0]
    return SolveResult._trusted(out, e <= tolerance, e, counts[0, 0], counts[1, 0], state)


def blend_rotations(r_out: FloatArray, r_in: FloatArray, joints: IntArray, weight: FloatArray) -> None:
    """``r_out[i, j] = slerp(r_in[i, j], r_out[i, j], weight[i])`` for the ``joints`` (in place).

    ``r_out (N, J, 4)`` the solved rotations, ``r_in (1|N, J, 4)`` the input
    ones, ``weight (1|N,)`` in [0, 1]: 0 gives the input rotation bit for bit,
    1 the solved one.  The blend every solver's ``weight`` means.
    """
    from .rotation import slerp

    w = np.broadcast_to(weight, (r_out.shape[0],))
    src = np.broadcast_to(r_in, r_out.shape)[:, joints]
    solved = r_out[:, joints]
    mixed = slerp(src, solved, w[:, None])
    # the ends exactly: slerp at 1 may give the solved rotation's other sign (-q, on the input's side), and an
    # item of weight 1 in a batch must be its unblended single solve bit for bit
    r_out[:, joints] = np.where((w <= 0.0)[:, None, None], src, np.where((w >= 1.0)[:, None, None], solved, mixed))


#: A limited joint a blend clamps: ``(joint, limit kind, parameter row (LIMIT_PARAMS,), rest rotation (1, 4))``
#: (see :func:`blend_limits`).
BlendLimit = tuple[int, int, FloatArray, FloatArray]


def blend_limits(joints: IntArray, packed: PackedLimits, turned: NDArray[np.bool_]) -> tuple[BlendLimit, ...]:
    """The limited joints among ``joints (K,)`` (``packed``: their limits) that the solver turns (``turned (K,)``),
    as :func:`blend_with_input` clamps them."""
    return tuple((int(j), int(packed.kinds[k]), packed.params[k], packed.rest[k:k + 1])
                 for k, j in enumerate(joints) if packed.kinds[k] != LIMIT_NONE and turned[k])


def blend_with_input(prep: Prepared, inputs: tuple[FloatArray, FloatArray], joints: IntArray, root: int | None,
                     weight: FloatArray, limited: tuple[BlendLimit, ...] = ()) -> IntArray:
    """The blend a chain solver's ``weight`` means, in place on ``prep``'s output pose; returns the limit clamps
    it made per item ``(N,)``.

    Each of ``joints``' local rotations goes from the input's to the solved one (:func:`blend_rotations`) and a
    ``root`` whose translation the solve moved (or None) goes linearly, ``t_in + weight (t_solved - t_in)``.
    ``inputs``: the input pose's rotations and translations as given, ``(*pose_batch, J, k)`` (copies: ``out=pose``
    overwrites the pose), broadcast here to the solve's batch (which targets or weights may widen);
    ``weight (1|N,)``.  The ``limited`` joints (:func:`blend_limits`) are then clamped into their limits where
    ``0 < weight < 1``: a rotation part way between two inside a swing cone or an Euler box may lie outside it.
    (At weight 0 the input comes back as it was; at 1 the solve is inside.)
    """
    r_in, t_in = inputs
    n = prep.n
    blend_rotations(prep.r, _batch_rows(r_in, prep.batch, n), joints, weight)
    if root is not None:
        blend_translations(prep.t, _batch_rows(t_in, prep.batch, n), np.array([root], dtype=np.int64), weight)
    return clamp_blended(prep.r, weight, limited)


def blend_translations(t_out: FloatArray, t_in: FloatArray, joints: IntArray, weight: FloatArray) -> None:
    """``t_out[i, j] = t_in[i, j] + weight[i] (t_out[i, j] - t_in[i, j])`` for the ``joints`` (in place): the blend
    of a translation a solve moved (a sliding root's).

    ``t_out (N, J, 3)`` the solved translations, ``t_in (1|N, J, 3)`` the input ones, ``weight (1|N,)`` in
    [0, 1].  The ends exactly, as :func:`blend_rotations`: 0 gives the input bit for bit, 1 the solved
    translation (``t_in + (t_out - t_in)`` may differ from ``t_out`` in the last bit, and an item of weight 1
    in a batch must be its unblended single solve).
    """
    w = np.broadcast_to(weight, (t_out.shape[0],))[:, None, None]
    src = np.broadcast_to(t_in, t_out.shape)[:, joints]
    solved = t_out[:, joints]
    mixed = src + w * (solved - src)
    t_out[:, joints] = np.where(w <= 0.0, src, np.where(w >= 1.0, solved, mixed))


def clamp_blended(r_out: FloatArray, weight: FloatArray, limited: tuple[BlendLimit, ...]) -> IntArray:
    """The ``limited`` joints of ``r_out (N, J, 4)`` clamped into their limits (in place) in the items blended part
    way (``0 < weight < 1``, ``weight (1|N,)``); returns the clamps that changed a rotation, per item ``(N,)``."""
    n = r_out.shape[0]
    hits = np.zeros(n, dtype=np.int64)
    w = np.broadcast_to(weight, (n,))
    items = np.nonzero((w > 0.0) & (w < 1.0))[0]
    if items.size and limited:
        from ._kernels._tier import kernels

        clamp_many = kernels("limits").clamp_many
        for j, kind, params, rest in limited:
            q = np.ascontiguousarray(r_out[items, j])
            clamped = np.empty_like(q)
            hit = np.zeros(items.size, dtype=np.bool_)
            clamp_many(kind, params, rest, q, clamped, hit)
            r_out[items, j] = clamped
            hits[items] += hit
    return hits


def _batch_rows(a: FloatArray, batch: tuple[int, ...], n: int) -> FloatArray:
    """``a (*b, J, k)`` broadcast to ``(*batch, J, k)`` as ``(N, J, k)`` rows."""
    return np.broadcast_to(a, batch + a.shape[-2:]).reshape((n,) + a.shape[-2:])


# ---------------------------------------------------------------- the solvers
def freeze(x: Any) -> Hashable:
    """A hashable snapshot of a solver argument (chains, weights, limits, options); TypeError if there is none."""
    if x is None or isinstance(x, (str, bool, int, float, np.integer, np.floating, Limit)):
        return (type(x).__name__, x)
    if isinstance(x, np.ndarray):
        return ("nd", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, Mapping):
        return ("map",) + tuple((freeze(k), freeze(v)) for k, v in x.items())
    if isinstance(x, (tuple, list)):
        return ("seq",) + tuple(freeze(v) for v in x)
    raise TypeError(type(x).__name__)


class Solver:
    """Base of the prepared solvers (:class:`kinema.TwoBone`, :class:`kinema.CCD`, ...).

    A subclass's constructor validates and packs everything that does not
    change per frame; :meth:`validate` checks a pose against it and ``solve``
    runs one frame or a batch.  ``skeleton`` is the skeleton it was built for;
    ``joints`` the joints it may turn, root first.
    """

    skeleton: Skeleton
    joints: IntArray
    #: The chain's joints and their ancestors: their scales must be uniform.
    scale_joints: IntArray
    #: Name used in error messages.
    what: str = "solve"
    #: The constructor's keyword options, in the order a free function's cache key lists them after the
    #: chain (see :meth:`SolverCache.get`).
    cache_options: tuple[str, ...] = ()

    @property
    def moved_joints(self) -> tuple[int, ...]:
        """The joints this solver may turn: its chain or tree without the end joint(s) it aims (a :class:`~kinema.Rig`
        step's claim)."""
        joints = [int(j) for j in self.joints]
        ends = {int(j) for j in getattr(self, "goal_joints", ())} or {joints[-1]}
        inner = {int(self.skeleton.parents[k]) for k in joints}
        return tuple(j for j in joints if j not in ends or j in inner)

    def validate(self, pose: Any) -> Pose:
        """``pose`` when it can be solved by this solver: a :class:`~kinema.Pose` of the skeleton's joint count,
        finite, with uniform scale on the solver's joints and their ancestors.  Raises otherwise."""
        check_pose(self.skeleton, pose, self.what)
        check_pose_finite(pose, self.what)
        check_uniform_scale(self.skeleton, pose, self.scale_joints, self.what)
        return pose


class Option:
    """A solver option as a property: read as stored, set through ``check`` (the constructor's check), after which
    the solver packs again what its kernel reads (``_pack_options``), so a solver whose option was set solves
    exactly as one built with it.  The value lives in ``_<name>``; the constructor sets that itself."""

    def __init__(self, check: Callable[[Any], Any], doc: str) -> None:
        self.check = check
        self.__doc__ = doc
        self.attr = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = f"_{name}"

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else getattr(obj, self.attr)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.attr, self.check(value))
        obj._pack_options()


class PackedChain(Solver):
    """A solver whose chain is packed into its kernel's plan: ``skeleton`` and ``joints`` are read-only (stored in
    ``_skeleton`` and ``_joints``); assigning either raises :class:`SolverInputError` (build a new solver)."""

    _skeleton: Skeleton
    _joints: IntArray

    def _refuse(self, name: str, what: str) -> None:
        raise SolverInputError(f"{type(self).__name__}.{name} is read-only: {what} is packed when the solver is "
                               "built; build a new solver")

    @property  # type: ignore[override]
    def skeleton(self) -> Skeleton:
        """The skeleton the solver was built for (read-only)."""
        return self._skeleton

    @skeleton.setter
    def skeleton(self, value: Skeleton) -> None:
        self._refuse("skeleton", "the chain of the skeleton it was built for")

    @property  # type: ignore[override]
    def joints(self) -> IntArray:
        """The joints the solver turns, root first (a read-only array; read-only)."""
        return self._joints

    @joints.setter
    def joints(self, value: IntArray) -> None:
        self._refuse("joints", "the chain")


S = TypeVar("S", bound=Solver)

#: Prepared solvers kept for the free functions.
SOLVER_CACHE_MAX = 256


class SolverCache:
    """A bounded cache of prepared solvers, shared by every free function.

    Keys are ``(solver class, id(skeleton), arguments, their types)``: the
    types keep 1, 1.0 and True apart (they are equal and hash alike, but a
    constructor refuses some of them).  A chain of numbers is also checked
    for its items' types (``(3, 5)`` is accepted, the equal ``(3.0, 5.0)``
    and ``(True, 5)`` are refused; see :func:`_value_key`), so whether a call
    is refused never depends on the calls before it.  A hit is used only
    when its solver's ``skeleton`` is the very skeleton asked for, so an id
    reused by a new object after the old one was freed never returns a stale
    solver (a cached solver keeps its skeleton alive, so while it is cached
    the id cannot be reused anyway).  Arguments other than numbers, strings,
    None and a chain of those (lists, arrays, limit maps, tuples of options,
    NumPy scalars) are keyed by their :func:`freeze` snapshot, which records
    every item's type at any depth; those with none (a generator) build a
    fresh solver, uncached.

    When full, the oldest entry goes (first in, first out).  A hit costs one
    dict lookup (and, for a chain of numbers in a new tuple, a look at its
    items' types); least-recently-used order would cost a
    reordering on every hit, and saves at most one rebuild per
    :data:`SOLVER_CACHE_MAX` new solvers built (a hot solver pushed out by that
    many others is built again once).
    """

    def __init__(self, maxsize: int = SOLVER_CACHE_MAX) -> None:
        self.maxsize = maxsize
        #: key -> ``(solver, check, chain)``: ``check`` the item types a hit's chain must have (None: nothing to
        #: check, see :func:`_value_key`), ``chain`` the one it was built from (the very same object, a per-frame
        #: loop's constant chain, needs no check).
        self._items: dict[Hashable, tuple[Solver, tuple[type, ...] | None, Any]] = {}
        #: Taken by a miss to insert and evict (a hit only reads): two threads evicting at once both took the
        #: same oldest key, and the second ``del`` raised KeyError out of a free function.
        self._lock = threading.Lock()

    def get(self, cls: type[S], skeleton: Skeleton, args: tuple[Any, ...],
            types: tuple[type, ...] | None = None) -> S:
        """The cached solver of ``cls`` for ``skeleton`` and ``args``, built when missing.

        ``args``: the chain (or the goal joints) and then the values of ``cls.cache_options``, in that
        order; a miss builds ``cls(skeleton, args[0], **dict(zip(cls.cache_options, args[1:])))``.
        ``types``: ``args``' types, when the caller has them at hand (a per-frame free function spells them
        out: cheaper than working them out here)."""
        items = self._items
        if types is None:
            types = (*map(type, args),)
        key: Hashable | None = (cls, id(skeleton), args, types)
        try:
            entry = items.get(key)
        except TypeError:  # an unhashable argument (a list, an array, a limit map): keyed by its snapshot below
            entry, key = None, None
        if entry is not None and entry[0].skeleton is skeleton:
            if entry[1] is None or entry[2] is args[0] or entry[1] == (*map(type, args[0]),):
                return entry[0]  # type: ignore[return-value]
            key = None  # a chain equal to the entry's, of other item types ((3.0, 5.0) for (3, 5)): its own key
        check = None
        if key is not None:
            by_value, check = _value_key(args, types)
            if not by_value:
                key = None
        if key is None:
            key = _frozen_key(cls, skeleton, args)
            if key is None:
                return _build(cls, skeleton, args)  # no snapshot (a generator, read once): built each time
            try:
                entry = items.get(key)
            except TypeError:  # a snapshot that does not hash (a limit holding an array): built each time
                return _build(cls, skeleton, args)
            if entry is not None and entry[0].skeleton is skeleton:
                return entry[0]  # type: ignore[return-value]
        solver = _build(cls, skeleton, args)
        with self._lock:
            items.pop(key, None)
            items[key] = (solver, check, args[0])
            while len(items) > self.maxsize:
                del items[next(iter(items))]
        return solver

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


#: Argument types a cache key compares by value, their types alongside: equal values of one of these types are the
#: same argument to every constructor.
_PLAIN_KEY_TYPES = frozenset({str, int, float, bool, type(None)})
_STR_TYPE = frozenset({str})


def _value_key(args: tuple[Any, ...], types: tuple[type, ...]) -> tuple[bool, tuple[type, ...] | None]:
    """Whether :class:`SolverCache` may key ``args`` (``types``: theirs) by value: each one a number, a string or
    None, but the first (the chain), which may also be a tuple of those.  And what a hit must then check: the
    chain's item types, or None when there is nothing to check.

    Equal values of different types hash alike (``3 == 3.0 == True``), and a chain ``(3, 5)`` is accepted where
    ``(3.0, 5.0)`` and ``(True, 5)`` are refused: a chain of numbers is looked up by value and its hit taken only
    for the same item types (an equal chain of other types gets a :func:`_frozen_key` of its own).  A chain of
    names has nothing to check (a string equals no number), so the per-frame call with names costs one lookup.
    """
    if not _PLAIN_KEY_TYPES.issuperset(types[1:]):
        return False, None
    if types[0] is not tuple:
        return types[0] in _PLAIN_KEY_TYPES, None
    item_types = (*map(type, args[0]),)
    if not _PLAIN_KEY_TYPES.issuperset(item_types):
        return False, None
    return True, None if _STR_TYPE.issuperset(item_types) else item_types


def _frozen_key(cls: type, skeleton: Skeleton, args: tuple[Any, ...]) -> Hashable | None:
    """The :class:`SolverCache` key of ``args`` not keyed by value (:func:`_value_key`): their :func:`freeze`
    snapshot, which records every item's type at any depth (``(1, 0, 1)`` and ``(True, False, True)`` apart);
    None when ``args`` have none (a generator, read once: a cached solver would answer for whatever it yields
    next)."""
    try:
        return (cls, id(skeleton), freeze(args))
    except TypeError:
        return None


def _build(cls: type[S], skeleton: Skeleton, args: tuple[Any, ...]) -> S:
    """``cls(skeleton, args[0], **options)``: the solver a :class:`SolverCache` key stands for."""
    return cls(skeleton, args[0], **dict(zip(cls.cache_options, args[1:], strict=True)))  # type: ignore[call-arg]


#: The one cache of prepared solvers behind the free functions.
SOLVERS = SolverCache()


def _forked() -> None:
    """In a forked child :data:`SOLVERS` starts with a new lock: one another thread of the parent held at the fork
    (inserting a solver) would never be released here, and the child's next cache miss would wait for ever."""
    SOLVERS._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # (POSIX)
    os.register_at_fork(after_in_child=_forked)
