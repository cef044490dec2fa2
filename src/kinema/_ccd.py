"""CCD (cyclic coordinate descent) for chains of any length, and prioritised multi-chain solves."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._solve import ancestors_root_first, as_target, check_uniform_scale, prepare, resolve_chain
from ._validate import broadcast_batch, resolve_joint
from .errors import SolverInputError
from .limits import Limit, pack_limits
from .pose import Pose
from .result import SolveResult
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


def _run(
    skeleton: Skeleton,
    pose: Pose,
    joints: IntArray,
    w: FloatArray,
    target: ArrayLike,
    *,
    iterations: int,
    tolerance: float,
    max_step: float,
    adaptive_step: bool,
    limits: Mapping[Any, Limit] | None,
    pole: ArrayLike | None,
    fixed_root: bool,
    out: Pose | None,
) -> SolveResult:
    from ._kernels import ccd as kccd

    tgt = as_target(target, "target")
    extras = [(tgt, (3,))]
    pol = None
    if pole is not None:
        pol = as_target(pole, "pole")
        extras.append((pol, (3,)))
    base = ancestors_root_first(skeleton, int(joints[0]))
    check_uniform_scale(skeleton, pose, np.concatenate([base, joints]), "solve_ccd")
    prep = prepare(skeleton, pose, extras, out)
    n = prep.n
    tgt_f = prep.extras[0] if tgt.ndim > 1 else tgt.reshape(1, 3)
    pol_f = (prep.extras[1] if pol.ndim > 1 else pol.reshape(1, 3)) if pol is not None else np.zeros((1, 3))
    packed = pack_limits(skeleton, joints, limits)
    iparams = np.array([iterations, pol is not None, fixed_root, adaptive_step], dtype=np.int64)
    fparams = np.array([tolerance, max_step])
    err = np.empty(n)
    sweeps = np.empty(n, dtype=np.int64)
    hits = np.empty(n, dtype=np.int64)
    k = joints.size
    if n <= SERIAL_BATCH_MAX:
        fn = kccd.ccd_serial
        n_chunks = 1
    else:
        fn = kccd.ccd_parallel
        n_chunks = min(n, _num_threads() * CHUNKS_PER_THREAD)
    fn(joints, base, prep.t, prep.r, prep.s, tgt_f, pol_f, w, packed.kinds, packed.params, packed.rest,
       iparams, fparams, err, sweeps, hits,
       np.empty((n_chunks, k, 3)), np.empty((n_chunks, k, 4)), np.empty((n_chunks, k)))
    b = prep.batch
    return SolveResult(
        pose=prep.out,
        reached=(err <= tolerance).reshape(b),
        error=err.reshape(b),
        iterations=sweeps.reshape(b),
        limits_hit=hits.reshape(b),
        state={"joints": joints},
    )


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
    turned by ``MIN_TURN_ANGLE`` or more.

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
    With ``fixed_root=False``, after each sweep it slides toward the target
    by the distance the chain cannot cover (``|target - p_0| - reach`` when
    positive; written into its local translation), never otherwise.

    With no limits, weights, ``max_step`` or pole, and ``tolerance=0``, this
    is the plain algorithm of three.js's ``CCDIKSolver`` (iteration = sweeps,
    same order, same 1e-5 skip); three.js does not skip short vectors.

    Returns a :class:`~kinema.SolveResult`: ``error`` and ``reached``
    (``error <= tolerance``) per batch item, ``iterations`` (sweeps run),
    ``limits_hit``; ``state["joints"]`` is the chain's joint indices.
    """
    joints, listed = resolve_chain(skeleton, chain)
    it, tol, step = _check_options(iterations, tolerance, max_step)
    w = _chain_weights(skeleton, joints, listed, weights)
    return _run(skeleton, pose, joints, w, target, iterations=it, tolerance=tol, max_step=step,
                adaptive_step=bool(adaptive_step), limits=limits, pole=pole, fixed_root=bool(fixed_root),
                out=out)


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
        joints, listed = resolve_chain(skeleton, g.chain)
        it, tol, step = _check_options(g.iterations, g.tolerance, g.max_step)
        w = _chain_weights(skeleton, joints, listed, g.weights)
        plans.append((joints, w, it, tol, step))
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
        joints, w, it, tol, step = plans[gi]
        fz = owned[joints]
        w = np.where(fz, 0.0, w)
        frozen[gi] = joints[fz]
        before = cur.rotations.copy()
        res = _run(skeleton, cur, joints, w, targets[gi], iterations=it, tolerance=tol, max_step=step,
                   adaptive_step=bool(g.adaptive_step), limits=g.limits, pole=g.pole,
                   fixed_root=bool(g.fixed_root), out=cur)
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
        end = int(plans[gi][0][-1])
        err[..., gi] = np.linalg.norm(fk.positions[..., end, :] - targets[gi], axis=-1)
    tols = np.array([p[3] for p in plans])
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
