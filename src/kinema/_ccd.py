"""CCD (cyclic coordinate descent) for chains of any length, and prioritised multi-chain solves."""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._kernels.constants import ONE_SMALL_SCRATCH
from ._solve import (
    NO_POLE3,
    UNIFORM_SCALE_RTOL,
    ThreadScratch,
    ancestors_root_first,
    as_target,
    cached_options,
    entry_point,
    kernel_loader,
    prepare,
    resolve_chain,
    single_pose_copies,
    single_pose_rows,
)
from ._validate import broadcast_batch, resolve_joint
from .errors import SolverInputError
from .limits import Limit, pack_limits
from .pose import Pose
from .result import SolveResult, single_result
from .skeleton import Skeleton

__all__ = ["solve_ccd", "Goal", "solve_chains"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Batches up to this size run in the calling thread (a thread-pool start
#: costs more than it saves); larger ones are split across numba's threads.
SERIAL_BATCH_MAX = 16

#: Chunks per numba thread for large batches (evens out items that stop early).
CHUNKS_PER_THREAD = 8


def _num_threads() -> int:
    try:
        import numba

        return int(numba.get_num_threads())
    except Exception:  # pragma: no cover - numba always present in the core
        return os.cpu_count() or 1


def _chain_weights(skeleton: Skeleton, joints: IntArray, listed: NDArray[np.bool_], weights: Any) -> FloatArray:
    """Per chain joint weight in [0, 1]; helper joints (not listed) get 0, the end's is unused."""
    k = joints.size
    w = listed.astype(np.float64)
    if weights is None:
        return w
    if isinstance(weights, Mapping):
        pos = {int(j): a for a, j in enumerate(joints)}
        for key, val in weights.items():
            idx = resolve_joint(skeleton, key)
            if idx not in pos:
                raise SolverInputError(f"weights: joint {skeleton.names[idx]!r} is not in the chain "
                                       f"{[skeleton.names[j] for j in joints]}")
            w[pos[idx]] = float(val)
    else:
        a = np.asarray(weights, dtype=np.float64)
        if a.shape != (k,):
            raise SolverInputError(f"weights: expected {k} values (one per chain joint, root first: "
                                   f"{[skeleton.names[j] for j in joints]}), got shape {a.shape}")
        w = a.copy()
    if not np.all(np.isfinite(w)) or np.any(w < 0.0) or np.any(w > 1.0):
        raise SolverInputError(f"weights must be finite numbers in [0, 1], got {w.tolist()}")
    return np.ascontiguousarray(w)


def _check_options(iterations: Any, tolerance: Any, max_step: Any) -> tuple[int, float, float]:
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise SolverInputError(f"iterations must be a non-negative integer, got {iterations!r}")
    tol = float(tolerance)
    if not math.isfinite(tol) or tol < 0.0:
        raise SolverInputError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
    if max_step is None:
        step = 0.0  # 0 = no cap in the kernel
    else:
        step = float(max_step)
        if not math.isfinite(step) or step <= 0.0:
            raise SolverInputError(f"max_step must be a positive angle in radians (or None), got {max_step!r}")
    return int(iterations), tol, step


@dataclass(frozen=True)
class _Plan:
    """Everything about a chain that does not change from call to call.

    ``index`` and ``values`` are the packed arrays the kernel reads (layout
    in :mod:`kinema._kernels.ccd`): ``index = [K, B, base, joints, kinds]``,
    ``values = [w, params.ravel(), rest.ravel()]``.
    """

    skeleton: Skeleton
    joints: IntArray
    w: FloatArray
    index: IntArray
    values: FloatArray

    def with_weights(self, w: FloatArray) -> FloatArray:
        """``values`` with the weights replaced by ``w (K,)`` (a new array)."""
        values = self.values.copy()
        values[: w.shape[0]] = w
        return values


#: Plans by (skeleton id, chain, weights, limits); cleared when it grows past this.
_PLAN_CACHE_MAX = 256
_PLANS: dict[Hashable, _Plan] = {}


def _freeze(x: Any) -> Hashable:
    """A hashable snapshot of a chain / weights / limits argument (TypeError if there is none)."""
    if x is None or isinstance(x, (str, int, float, np.integer, np.floating, Limit)):
        return x
    if isinstance(x, np.ndarray):
        return ("nd", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, Mapping):
        return ("map",) + tuple((_freeze(k), _freeze(v)) for k, v in x.items())
    if isinstance(x, (tuple, list)):
        return ("seq",) + tuple(_freeze(v) for v in x)
    raise TypeError(type(x).__name__)


def _make_plan(skeleton: Skeleton, joints: IntArray, w: FloatArray, limits: Mapping[Any, Limit] | None) -> _Plan:
    base = ancestors_root_first(skeleton, int(joints[0]))
    packed = pack_limits(skeleton, joints, limits)
    index = np.concatenate([np.array([joints.size, base.size], dtype=np.int64), base, joints,
                            packed.kinds]).astype(np.int64)
    values = np.concatenate([w, packed.params.ravel(), packed.rest.ravel()]).astype(np.float64)
    return _Plan(skeleton=skeleton, joints=joints, w=w, index=index, values=values)


def _plain_chain_key(chain: Any) -> tuple[Any, ...] | None:
    """``chain`` itself when it is a tuple of names / ints (hashable as is, the common case), else None."""
    if type(chain) is tuple:
        for c in chain:
            if type(c) is not str and type(c) is not int:
                return None
        return chain
    return None


def _plan(skeleton: Skeleton, chain: Any, weights: Any, limits: Mapping[Any, Limit] | None) -> _Plan:
    """Resolve (or fetch from the cache) a chain's joints, weights and packed limits."""
    key: Hashable | None
    plain = _plain_chain_key(chain) if weights is None and limits is None else None
    if plain is not None:
        key = (id(skeleton), "plain", plain)  # no "seq" tag: cannot collide with a frozen key
    else:
        try:
            key = (id(skeleton), _freeze(chain), _freeze(weights), _freeze(limits))
        except TypeError:
            key = None
    if key is not None:
        hit = _PLANS.get(key)
        if hit is not None and hit.skeleton is skeleton:
            return hit
    joints, listed = resolve_chain(skeleton, chain)
    plan = _make_plan(skeleton, joints, _chain_weights(skeleton, joints, listed, weights), limits)
    if key is not None:
        if len(_PLANS) >= _PLAN_CACHE_MAX:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


#: The pole argument when there is none (the kernel reads no row of it).
_NO_POLE = np.zeros((1, 3))

#: The kernel module, imported on first use (``import kinema`` must not import numba).
_kernels = kernel_loader("ccd")


#: Options arrays by value, shared between calls (see :func:`kinema._solve.cached_options`).
_OPTIONS: dict[tuple[Any, ...], FloatArray] = {}


def _options(iterations: int, has_pole: bool, fixed_root: bool, adaptive_step: bool, tolerance: float,
             max_step: float, n_joints: int) -> FloatArray:
    """The kernel's ``options`` array (slots ``O_*`` in :mod:`kinema._kernels.ccd`), cached by value."""
    key = (iterations, has_pole, fixed_root, adaptive_step, tolerance, max_step)
    return cached_options(_OPTIONS, key + (UNIFORM_SCALE_RTOL, n_joints))


def _run(
    skeleton: Skeleton,
    pose: Pose,
    plan: _Plan,
    target: ArrayLike,
    *,
    iterations: int,
    tolerance: float,
    max_step: float,
    adaptive_step: bool,
    pole: ArrayLike | None,
    fixed_root: bool,
    out: Pose | None,
    w: FloatArray | None = None,
) -> SolveResult:
    kccd = _kernels()
    nj = skeleton.n_joints
    tgt = target if isinstance(target, np.ndarray) and target.dtype == np.float64 else None
    pol = pole if isinstance(pole, np.ndarray) and pole.dtype == np.float64 else None
    pt = pose.translations
    fast = (out is None and tgt is not None and tgt.shape == (3,) and (pole is None or (pol is not None
            and pol.shape == (3,))) and pt.ndim == 2 and pose.rotations.ndim == 2 and pose.scales.ndim == 2
            and pt.shape[0] == nj)
    if fast:
        # One unbatched pose and target: skip the general broadcasting (the
        # kernel checks scales, and the target's and pole's finiteness).
        assert tgt is not None
        batch: tuple[int, ...] = ()
        n = 1
        t3, r3, s3, out_pose = single_pose_rows(pose)
        tgt_f = tgt[None]
        pol_f = pol[None] if pol is not None else _NO_POLE
    else:
        tgt = as_target(target, "target")
        extras = [(tgt, (3,))]
        if pole is not None:
            pol = as_target(pole, "pole")
            extras.append((pol, (3,)))
        prep = prepare(skeleton, pose, extras, out)
        batch, n, out_pose = prep.batch, prep.n, prep.out
        t3, r3, s3 = prep.t, prep.r, prep.s
        tgt_f = prep.extras[0] if tgt.ndim > 1 else tgt.reshape(1, 3)
        pol_f = (prep.extras[1] if pol.ndim > 1 else pol.reshape(1, 3)) if pol is not None else _NO_POLE
    options = _options(iterations, pol is not None, fixed_root, adaptive_step, tolerance, max_step, nj)
    values = plan.values if w is None else plan.with_weights(w)
    err = np.empty(n)
    counts = np.empty((2, n), dtype=np.int64)  # sweeps, limit hits
    if n <= SERIAL_BATCH_MAX:
        bad = kccd.ccd_serial(plan.index, values, t3, r3, s3, tgt_f, pol_f, options, err, counts)
    else:
        bad = kccd.ccd_parallel(plan.index, values, t3, r3, s3, tgt_f, pol_f, options, err, counts,
                                min(n, _num_threads() * CHUNKS_PER_THREAD))
    if bad == kccd.NONFINITE_INPUT:  # only from the one-solve path (the others checked already)
        as_target(tgt, "target")
        if pol is not None:
            as_target(pol, "pole")
    if bad >= 0:
        raise SolverInputError(
            f"solve_ccd: joint {skeleton.names[int(bad)]!r} (on the chain or an ancestor) has a non-uniform "
            "scale; this solver needs uniform scale on the chain and its ancestors"
        )
    if batch:
        return SolveResult(pose=out_pose, reached=(err <= tolerance).reshape(batch), error=err.reshape(batch),
                           iterations=counts[0].reshape(batch), limits_hit=counts[1].reshape(batch),
                           state={"joints": plan.joints})
    # One solve: 0-d views of the outputs, no reshapes.
    return SolveResult._trusted(out_pose, np.asarray(err[0] <= tolerance), err[0, ...], counts[0, 0, ...],
                                counts[1, 0, ...], {"joints": plan.joints})


#: One-solve fast path: a call's plain options resolve to a record ``(skeleton, chain, iterations, tolerance,
#: max_step, adaptive_step, fixed_root, no_pole, index, values, options, tol, joints)``: the call's own
#: arguments first (compared by identity, see ``_LAST``), then the plan's arrays, the kernel's options array,
#: the tolerance as a float and the chain's joints.  Records by ``(id(skeleton), chain, options...)``.
_ONE: dict[Hashable, tuple[Any, ...]] = {}
#: The last record used: a per-frame loop passes the very same objects on every call (the skeleton, the
#: chain tuple, the option constants), so comparing identities finds it without hashing a key.
_LAST: tuple[Any, ...] = (None,) * 13
#: ``kinema._kernels.ccd.ccd_one``'s compiled entry point, once known (see ``kinema._kernels._jit.entry_point``).
_one_entry: Any = None


def _scratch(n_k: int) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``ccd_one``'s scratch for chains of up to ``n_k`` joints: ``pos (n_k,3), rot (n_k,4), scl (n_k,), aux``."""
    return np.empty((n_k, 3)), np.empty((n_k, 4)), np.empty(n_k), np.empty((n_k, _kernels().AUX_COLS))


#: ``ccd_one``'s scratch, per thread.
_SCRATCH = ThreadScratch(_scratch)


def _one_record(skeleton: Skeleton, chain: Any, iterations: Any, tolerance: Any, max_step: Any, adaptive_step: Any,
                fixed_root: Any, no_pole: bool) -> tuple[Any, ...] | None:
    """The one-solve record of these options (validated once, cached), or None when they need the general
    path (an unhashable chain such as a list, a non-``int`` iteration count)."""
    global _LAST, _one_entry
    if type(iterations) is not int:
        return None
    try:
        key = (id(skeleton), chain, iterations, tolerance, max_step, adaptive_step, fixed_root, no_pole)
        rec = _ONE.get(key)
    except TypeError:  # an unhashable chain (a list): the general path
        return None
    if rec is None or rec[0] is not skeleton:
        it, tol, step = _check_options(iterations, tolerance, max_step)
        plan = _plan(skeleton, chain, None, None)
        options = _options(it, not no_pole, bool(fixed_root), bool(adaptive_step), tol, step, skeleton.n_joints)
        if len(_ONE) >= _PLAN_CACHE_MAX:
            _ONE.clear()
        rec = _ONE[key] = (skeleton, chain, iterations, tolerance, max_step, adaptive_step, fixed_root, no_pole,
                           plan.index, plan.values, options, tol, plan.joints)
        if _one_entry is None:
            nj = skeleton.n_joints
            # Target and pole are the caller's arrays: compiled for any strides (args 5 and 6).
            args = (plan.index, plan.values, np.zeros((nj, 3)), np.zeros((nj, 4)), np.zeros((nj, 3)), np.zeros(3),
                    np.zeros(3), options) + _scratch(1)
            _one_entry = entry_point(_kernels().ccd_one, args, any_layout=(5, 6))
    _LAST = rec
    return rec


def _solve_one(rec: tuple[Any, ...], pose: Pose, target: FloatArray, pole: FloatArray) -> SolveResult | None:
    """One unbatched solve through ``ccd_one`` (``rec`` from :func:`_one_record`; ``target`` and ``pole`` are
    1-D arrays), or None for anything the general path must handle (a batched pose, a dtype other than
    float64, a wrong shape, a NaN target, non-uniform scale: the general path raises the precise error).

    Same kernel item as the general path (``ccd_one`` runs ``ccd_item`` on a batch of one), without its
    broadcasting.  Checks only what the compiled entry point cannot: numbers of dimensions (it reads an
    array of another dimension count wrongly); it refuses other dtypes (TypeError) and the kernel checks
    shapes.  The pose's arrays are copied, C-contiguous.
    """
    copies = single_pose_copies(pose)
    if copies is None:
        return None
    t, r, s = copies
    sc = _SCRATCH.arrays or _SCRATCH.grow(rec[12].size)
    try:
        status, err, sweeps, hits = _one_entry(rec[8], rec[9], t, r, s, target, pole, rec[10], *sc)
        if status == ONE_SMALL_SCRATCH:  # a longer chain than this thread has solved before
            sc = _SCRATCH.grow(rec[12].size)
            status, err, sweeps, hits = _one_entry(rec[8], rec[9], t, r, s, target, pole, rec[10], *sc)
    except TypeError:  # float32 and the like: the entry point converts nothing
        return None
    if status != -1:
        return None
    return single_result(t, r, s, err <= rec[11], err, sweeps, hits, {"joints": rec[12]})


def solve_ccd(
    skeleton: Skeleton,
    pose: Pose,
    chain: Any,
    target: ArrayLike,
    *,
    iterations: int = 20,
    tolerance: float = 1e-3,
    weights: Sequence[float] | Mapping[Any, float] | ArrayLike | None = None,
    max_step: float | None = None,
    adaptive_step: bool = True,
    limits: Mapping[Any, Limit] | None = None,
    pole: ArrayLike | None = None,
    fixed_root: bool = True,
    out: Pose | None = None,
) -> SolveResult:
    """Turn a chain's joints so its end reaches ``target``, by cyclic coordinate descent.

    * ``chain``: ``(start, end)`` names or indices, or an explicit list of
      joints root first (joints between listed ones ride along unturned).
      The chain's joints are ``j_0 (start) .. j_{K-1} (end)``.
    * ``target``: ``(*batch, 3)`` world position; ``pose`` may carry batch
      dimensions too (they broadcast).  NaN or inf raise
      :class:`~kinema.SolverInputError`.

    **Sweep.**  Joints ``j_{K-2}, ..., j_0`` turn in that order (the end
    never turns; the first joint does, as in three.js's ``CCDIKSolver``).
    Joint ``k`` turns by the exact minimal rotation taking ``end - p_k`` to
    ``target - p_k``, applied in world space through its parent's inverse
    (``q_local' = inverse(Q_parent) dq Q_world``).  A joint is skipped when
    either vector is shorter than ``SHORT_VECTOR_EPS`` times the chain's
    reach (target on the joint, zero-length end bone) or when its turn is
    below ``MIN_TURN_ANGLE`` (1e-5 rad).  The solve stops after
    ``iterations`` sweeps, when the end is within ``tolerance`` of the target
    (checked before the first sweep too), or after a sweep in which no joint
    turned by ``MIN_TURN_ANGLE`` or more.  (So the end settles to about
    ``MIN_TURN_ANGLE`` times its distance from the joints, ~1e-5 of the
    chain's size; a tighter ``tolerance`` ends on that stall rule.)

    **Weights and steps.**  ``weights`` (one per chain joint root first, or
    ``{joint: weight}`` with the rest 1) in [0, 1] scale each turn's angle;
    0 freezes the joint (no turn, no limit clamp).  ``max_step`` (radians)
    caps each joint's turn per sweep, after weighting.  With
    ``adaptive_step`` (and a ``max_step``), the cap at the start of each
    sweep is ``max_step * clamp(error / (0.25 * reach), 0.1, 1)``: the full
    step while the end is a quarter of the chain's reach or more away, then
    proportionally smaller (down to a tenth) as it closes in, so a far
    target is approached quickly without orbiting and a near one without
    jitter.  Without ``max_step`` there is no cap and ``adaptive_step`` has
    no effect.

    **Limits.**  ``{joint: Hinge | SwingTwist | EulerRange}`` (see
    :mod:`kinema.limits`), applied after each turn of that joint, in its
    rest-relative local frame.  Limits of joints outside the chain are
    ignored.  ``limits_hit`` counts clamps that changed a rotation.

    **Pole.**  ``pole (*batch, 3)``: after each sweep, for ``k = 0 .. K-3``
    the sub-chain from ``j_k`` is twisted about the line ``p_k -> end`` so
    the mean of its middle joints (``j_{k+1} .. j_{K-2}``) lies on the pole's
    side of that line (angle times ``weights[k]``, capped by the step).  The
    end lies on the line, so the twist never moves it.

    **Root.**  The first joint never translates with ``fixed_root=True``.
    With ``fixed_root=False``, after each sweep in which the target is out
    of reach (``|target - p_0| > reach``) it slides along ``p_0 -> target``
    by the shortfall ``|target - p_0| - reach``, or by the end's remaining
    miss along that line if that is larger (written into its local
    translation); it never slides while the target is within reach.

    With no limits, weights, ``max_step`` or pole, and ``tolerance=0``, this
    is the plain algorithm of three.js's ``CCDIKSolver`` (iteration = sweeps,
    same order, same 1e-5 skip); three.js does not skip short vectors.

    Returns a :class:`~kinema.SolveResult`: ``error`` and ``reached``
    (``error <= tolerance``) per batch item, ``iterations`` (sweeps run),
    ``limits_hit``; ``state["joints"]`` is the chain's joint indices.
    """
    if (out is None and weights is None and limits is None and type(pose) is Pose and type(target) is np.ndarray
            and target.ndim == 1 and (pole is None or (type(pole) is np.ndarray and pole.ndim == 1))):
        # One unbatched solve, the per-frame call: a lean path (same kernel item, see _solve_one).
        last = _LAST
        rec: tuple[Any, ...] | None = last
        if not (last[0] is skeleton and last[1] is chain and last[2] is iterations and last[3] is tolerance
                and last[4] is max_step and last[5] is adaptive_step and last[6] is fixed_root
                and last[7] is (pole is None)):
            rec = _one_record(skeleton, chain, iterations, tolerance, max_step, adaptive_step, fixed_root,
                              pole is None)
        if rec is not None:
            res = _solve_one(rec, pose, target, NO_POLE3 if pole is None else pole)
            if res is not None:
                return res
    it, tol, step = _check_options(iterations, tolerance, max_step)
    plan = _plan(skeleton, chain, weights, limits)
    return _run(skeleton, pose, plan, target, iterations=it, tolerance=tol, max_step=step,
                adaptive_step=bool(adaptive_step), pole=pole, fixed_root=bool(fixed_root), out=out)


@dataclass
class Goal:
    """One chain's goal for :func:`solve_chains`.

    ``chain``, ``target`` and the options mean what they mean for
    :func:`solve_ccd`.  ``priority``: larger is solved first; equal
    priorities keep their order in the list.  ``name`` labels the goal in
    the result (default ``"goal<i>"``).
    """

    chain: Any
    target: ArrayLike
    priority: int = 0
    name: str | None = None
    weights: Sequence[float] | Mapping[Any, float] | ArrayLike | None = None
    limits: Mapping[Any, Limit] | None = None
    pole: ArrayLike | None = None
    iterations: int = 20
    tolerance: float = 1e-3
    max_step: float | None = None
    adaptive_step: bool = True
    fixed_root: bool = True


_GOAL_KEYS = set(Goal.__dataclass_fields__)


def _as_goal(g: Any, i: int) -> Goal:
    if isinstance(g, Goal):
        return g
    if isinstance(g, Mapping):
        bad = set(g) - _GOAL_KEYS
        if bad:
            raise SolverInputError(f"goal {i}: unknown keys {sorted(bad)}; known: {sorted(_GOAL_KEYS)}")
        if "chain" not in g or "target" not in g:
            raise SolverInputError(f"goal {i}: needs 'chain' and 'target'")
        return Goal(**g)
    raise SolverInputError(f"goal {i} must be a kinema.Goal or a dict, got {type(g).__name__}")


def solve_chains(skeleton: Skeleton, pose: Pose, goals: Sequence[Goal | Mapping[str, Any]], *,
                 out: Pose | None = None) -> SolveResult:
    """Solve several CCD goals on one skeleton, in priority order.

    ``goals``: :class:`Goal` objects or dicts with the same keys.  They are
    solved one after the other, highest ``priority`` first (ties keep list
    order), each on the pose the previous ones left.

    **Ownership rule.**  When a goal has been solved it *owns* the joints it
    may turn (its chain minus the end, weight > 0) and all their ancestors
    (they carry its chain; turning them would move its end).  Every later
    goal treats owned joints as frozen (weight 0), so a lower-priority goal
    never moves a joint a higher one owns: feet before hands, and a spine
    belongs to the first chain that claims it (later chains reaching
    through it only turn their own joints).

    Returns one :class:`~kinema.SolveResult` for the whole solve: ``pose``
    is the final pose; ``reached``, ``error``, ``iterations`` and
    ``limits_hit`` have shape ``(*batch, n_goals)`` in the order goals were
    given, with errors measured on the final pose.  ``state``:

    * ``"names"``: goal names;  ``"order"``: goal indices in solve order;
    * ``"moved"``: per goal, joint indices whose rotation that goal changed
      (in any batch item); ``"moved_names"``: the same as names;
    * ``"frozen"``: per goal, joint indices of its chain frozen by higher goals.
    """
    from .fk import forward_kinematics

    gl = [_as_goal(g, i) for i, g in enumerate(goals)]
    if not gl:
        raise SolverInputError("solve_chains needs at least one goal")
    names = [g.name if g.name is not None else f"goal{i}" for i, g in enumerate(gl)]
    order = sorted(range(len(gl)), key=lambda i: -int(gl[i].priority))
    plans = []
    for g in gl:
        it, tol, step = _check_options(g.iterations, g.tolerance, g.max_step)
        plan = _plan(skeleton, g.chain, g.weights, g.limits)
        plans.append((plan, it, tol, step))
    targets = [as_target(g.target, f"goal {names[i]!r} target") for i, g in enumerate(gl)]
    batch = broadcast_batch(pose.batch_shape, *[t.shape[:-1] for t in targets])
    cur = pose.broadcast(batch)  # a full copy: the input pose is never written
    if out is not None:
        cur = prepare(skeleton, cur, (), out).out
    owned = np.zeros(skeleton.n_joints, dtype=bool)
    moved: list[IntArray] = [np.zeros(0, dtype=np.int64)] * len(gl)
    frozen: list[IntArray] = [np.zeros(0, dtype=np.int64)] * len(gl)
    n_goals = len(gl)
    iters = np.zeros(batch + (n_goals,), dtype=np.int64)
    hits = np.zeros(batch + (n_goals,), dtype=np.int64)
    for gi in order:
        g = gl[gi]
        plan, it, tol, step = plans[gi]
        joints = plan.joints
        fz = owned[joints]
        w = np.where(fz, 0.0, plan.w)
        frozen[gi] = joints[fz]
        before = cur.rotations.copy()
        res = _run(skeleton, cur, plan, targets[gi], iterations=it, tolerance=tol, max_step=step,
                   adaptive_step=bool(g.adaptive_step), pole=g.pole, fixed_root=bool(g.fixed_root), out=cur, w=w)
        iters[..., gi] = res.iterations
        hits[..., gi] = res.limits_hit
        changed = np.any(before != cur.rotations, axis=-1).reshape(-1, skeleton.n_joints).any(axis=0)
        moved[gi] = np.nonzero(changed)[0].astype(np.int64)
        for a in range(joints.size - 1):
            if w[a] > 0.0:
                j = int(joints[a])
                owned[j] = True
                owned[list(skeleton.ancestors(j))] = True
    fk = forward_kinematics(skeleton, cur)
    err = np.zeros(batch + (n_goals,))
    for gi in range(n_goals):
        end = int(plans[gi][0].joints[-1])
        err[..., gi] = np.linalg.norm(fk.positions[..., end, :] - targets[gi], axis=-1)
    tols = np.array([p[2] for p in plans])
    return SolveResult(
        pose=cur,
        reached=err <= tols,
        error=err,
        iterations=iters,
        limits_hit=hits,
        state={
            "names": names,
            "order": order,
            "moved": moved,
            "moved_names": [tuple(skeleton.names[j] for j in m) for m in moved],
            "frozen": frozen,
        },
    )
