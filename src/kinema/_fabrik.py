"""FABRIK: forward and backward reaching IK for chains and multi-end-effector trees.

The public functions validate and flatten their input, then hand one batch
to the kernels in :mod:`kinema._kernels.fabrik` (whose docstring has the
notation and formulas).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._solve import (
    NO_POLE3,
    UNIFORM_SCALE_RTOL,
    as_target,
    cached_options,
    check_uniform_scale,
    entry_point,
    kernel_loader,
    prepare,
    resolve_chain,
    single_pose_copies,
    single_pose_rows,
)
from ._validate import resolve_joint
from .errors import SolverInputError
from .limits import PackedLimits, pack_limits
from .pose import Pose
from .result import SolveResult, single_result
from .skeleton import Skeleton

__all__ = ["solve_fabrik", "solve_fabrik_tree"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Batches up to this size run on the calling thread: starting the thread
#: pool costs more than a few solves.
SERIAL_MAX_ITEMS = 32

#: Work chunks per thread in a parallel solve (load balance vs. scratch allocations).
CHUNKS_PER_THREAD = 4

#: Solve plans kept per (skeleton, chain) so repeated per-frame calls skip the set-up.
_PLAN_CACHE_SIZE = 64


@dataclass(frozen=True)
class _Plan:
    """Skeleton-side arrays of one solve (see :mod:`kinema._kernels.fabrik`)."""

    skeleton: Skeleton
    base_path: IntArray
    joints: IntArray
    jpar: IntArray
    node_j: IntArray
    npar: IntArray
    child_ptr: IntArray
    child_idx: IntArray
    ngoal: IntArray
    goal_node: IntArray
    gw: FloatArray
    nw: FloatArray
    scale_joints: IntArray
    is_chain: bool
    no_limits: PackedLimits
    #: Packed kernel arrays (layout in :mod:`kinema._kernels.fabrik`): the
    #: integer arrays above in one, ``[gw, nw]`` in the other.
    index: IntArray
    weights: FloatArray


_plans: OrderedDict[Any, _Plan] = OrderedDict()


def _cached(key: Any, skeleton: Skeleton, build: Any) -> _Plan:
    plan = _plans.get(key)
    if plan is not None and plan.skeleton is skeleton:
        _plans.move_to_end(key)
        return plan
    plan = build()
    _plans[key] = plan
    if len(_plans) > _PLAN_CACHE_SIZE:
        _plans.popitem(last=False)
    return plan


def _children(npar: IntArray) -> tuple[IntArray, IntArray]:
    """CSR children lists ``(child_ptr (K+1,), child_idx)`` of a parent-first node list."""
    k = npar.shape[0]
    counts = np.bincount(npar[npar >= 0], minlength=k)
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    order = np.argsort(npar, kind="stable")
    idx = order[np.count_nonzero(npar < 0):].astype(np.int64)
    return ptr, idx


def _plan_arrays(
    skeleton: Skeleton,
    joints: IntArray,
    jpar: IntArray,
    node_j: IntArray,
    goal_nodes: IntArray,
    weights: FloatArray,
    is_chain: bool,
) -> _Plan:
    kn = node_j.shape[0]
    # Parent node of each node: the nearest node above it on the path.
    node_of = np.full(joints.shape[0], -1, dtype=np.int64)
    node_of[node_j] = np.arange(kn)
    npar = np.full(kn, -1, dtype=np.int64)
    for n in range(1, kn):
        a = int(jpar[node_j[n]])
        while node_of[a] < 0:
            a = int(jpar[a])
        npar[n] = node_of[a]
    ptr, idx = _children(npar)
    ngoal = np.full(kn, -1, dtype=np.int64)
    ngoal[goal_nodes] = np.arange(goal_nodes.shape[0])
    nw = np.zeros(kn)
    nw[goal_nodes] = weights
    for n in range(kn - 1, 0, -1):
        nw[npar[n]] += nw[n]
    root = int(joints[0])
    base_path = np.asarray(skeleton.ancestors(root)[::-1], dtype=np.int64)
    goal_nodes = goal_nodes.astype(np.int64)
    gw = np.ascontiguousarray(weights, dtype=np.float64)
    header = [base_path.shape[0], joints.shape[0], kn, idx.shape[0], goal_nodes.shape[0]]
    index = np.concatenate([np.asarray(header), base_path, joints, jpar, node_j, npar, ptr, idx, ngoal,
                            goal_nodes]).astype(np.int64)
    return _Plan(
        skeleton=skeleton,
        base_path=base_path,
        joints=joints,
        jpar=jpar,
        node_j=node_j,
        npar=npar,
        child_ptr=ptr,
        child_idx=idx,
        ngoal=ngoal,
        goal_node=goal_nodes,
        gw=gw,
        nw=nw,
        scale_joints=np.concatenate([base_path, joints]),
        is_chain=is_chain,
        no_limits=pack_limits(skeleton, joints[node_j], None),
        index=index,
        weights=np.concatenate([gw, nw]),
    )


def _chain_plan(skeleton: Skeleton, chain: Any) -> _Plan:
    joints, listed = resolve_chain(skeleton, chain)
    node_j = np.nonzero(listed)[0].astype(np.int64)
    jpar = np.arange(-1, joints.shape[0] - 1, dtype=np.int64)
    kn = node_j.shape[0]
    return _plan_arrays(skeleton, joints, jpar, node_j, np.array([kn - 1], dtype=np.int64), np.ones(1), True)


def _tree_plan(skeleton: Skeleton, goal_joints: tuple[int, ...], root: int, weights: tuple[float, ...]) -> _Plan:
    members: set[int] = set()
    for g in goal_joints:
        members.update(int(x) for x in skeleton.chain(root, g))
    joints = np.asarray(sorted(members), dtype=np.int64)  # depth-first order: parents first
    where = {int(j): a for a, j in enumerate(joints)}
    jpar = np.asarray([-1 if a == 0 else where[int(skeleton.parents[j])] for a, j in enumerate(joints)],
                      dtype=np.int64)
    node_j = np.arange(joints.shape[0], dtype=np.int64)
    goal_nodes = np.asarray([where[g] for g in goal_joints], dtype=np.int64)
    # Trees always iterate on rotations (rigid sub-bases), hence is_chain=False.
    return _plan_arrays(skeleton, joints, jpar, node_j, goal_nodes, np.asarray(weights, dtype=np.float64), False)


def _check_options(iterations: Any, tolerance: Any) -> tuple[int, float]:
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise SolverInputError(f"iterations must be a non-negative integer, got {iterations!r}")
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        raise SolverInputError(f"tolerance must be a number, got {tolerance!r}") from None
    if not math.isfinite(tol) or tol < 0.0:
        raise SolverInputError(f"tolerance must be finite and >= 0, got {tolerance!r}")
    return int(iterations), tol


#: The pole argument when there is none (the kernel reads no row of it).
_NO_POLE = np.zeros((1, 3))

#: The kernel module, imported on first use (``import kinema`` must not import numba).
_kernels = kernel_loader("fabrik")


#: Options arrays by value, shared between calls (see :func:`kinema._solve.cached_options`).
_OPTIONS: dict[tuple[Any, ...], FloatArray] = {}


def _options(mode: int, iterations: int, tol: float, fixed_root: bool, has_pole: bool, n_joints: int) -> FloatArray:
    """The kernel's ``options`` array (slots ``O_*`` in :mod:`kinema._kernels.fabrik`), cached by value."""
    key = (mode, iterations, tol, fixed_root, has_pole)
    return cached_options(_OPTIONS, key + (UNIFORM_SCALE_RTOL, n_joints))


def _run(
    skeleton: Skeleton,
    pose: Pose,
    plan: _Plan,
    packed: PackedLimits,
    targets: list[FloatArray],
    pole: FloatArray | None,
    iterations: int,
    tol: float,
    fixed_root: bool,
    out: Pose | None,
    what: str,
) -> tuple[Pose, tuple[int, ...], FloatArray, IntArray, NDArray[np.bool_]]:
    """Solve; returns ``(pose, batch, goal errors (N, G), counts (2, N): iterations, limit hits, moved (N,))``."""
    kf = _kernels()

    nj = skeleton.n_joints
    g = len(targets)
    pt = pose.translations
    if (out is None and g == 1 and targets[0].shape == (3,) and (pole is None or pole.shape == (3,))
            and pt.shape == (nj, 3) and pose.rotations.shape == (nj, 4) and pose.scales.shape == (nj, 3)):
        # One unbatched pose and target (the per-frame call): skip the
        # general broadcasting of prepare().
        batch: tuple[int, ...] = ()
        n = 1
        t3, r3, s3, out_pose = single_pose_rows(pose)
        tg = targets[0].reshape(1, 1, 3)
        poles = pole.reshape(1, 3) if pole is not None else _NO_POLE
    else:
        extras = [(tg_, (3,)) for tg_ in targets]
        if pole is not None:
            extras.append((pole, (3,)))
        prep = prepare(skeleton, pose, extras, out)
        batch, n, out_pose, t3, r3, s3 = prep.batch, prep.n, prep.out, prep.t, prep.r, prep.s
        tg = prep.extras[0].reshape(n, 1, 3) if g == 1 else np.ascontiguousarray(np.stack(prep.extras[:g], axis=1))
        poles = prep.extras[g] if pole is not None else _NO_POLE
    gerr = np.empty((n, g))
    counts = np.empty((2, n), dtype=np.int64)  # iterations, limit hits
    moved = np.empty(n, dtype=np.bool_)
    mode = kf.MODE_POSITIONS if plan.is_chain and packed.count == 0 else kf.MODE_ROTATIONS
    options = _options(mode, iterations, tol, bool(fixed_root), pole is not None, skeleton.n_joints)
    args = (plan.index, plan.weights, options, packed.kinds, packed.params, packed.rest, t3, r3, s3, tg, poles,
            gerr, counts, moved)
    if n <= SERIAL_MAX_ITEMS:
        bad = kf.solve_serial(*args)
    else:
        import numba

        bad = kf.solve_parallel(min(n, CHUNKS_PER_THREAD * numba.get_num_threads()), *args)
    if bad == kf.NONFINITE_INPUT:  # a target or pole passed unchecked by _as_point
        for tg_ in targets:
            as_target(tg_, "target")
        if pole is not None:
            as_target(pole, "pole")
    if bad >= 0:
        check_uniform_scale(skeleton, pose, plan.scale_joints, what)  # raises, naming the joint
    return out_pose, batch, gerr, counts, moved


def _as_point(x: ArrayLike, what: str) -> FloatArray:
    """:func:`as_target`, except that a float64 array of shape (3,) (the per-frame case) is passed as is:
    the kernel checks its finiteness (:data:`kinema._kernels.fabrik.NONFINITE_INPUT`)."""
    if isinstance(x, np.ndarray) and x.dtype == np.float64 and x.shape == (3,):
        return x
    return as_target(x, what)


#: One-solve fast path: a call's plain options resolve to a record ``(skeleton, chain, iterations, tolerance,
#: fixed_root, no_pole, index, weights, options, kinds, params, rest, tol)``: the call's own arguments first
#: (compared by identity, see ``_LAST``), then what the kernel takes and the tolerance as a float.  Records by
#: ``(id(skeleton), chain, options...)``.
_ONE: dict[Any, tuple[Any, ...]] = {}
#: The last record used: a per-frame loop passes the very same objects on every call, so comparing
#: identities finds it without hashing a key (as in :mod:`kinema._ccd`).
_LAST: tuple[Any, ...] = (None,) * 13
#: ``kinema._kernels.fabrik.solve_one``'s compiled entry point, once known (see
#: ``kinema._kernels._jit.entry_point``).
_one_entry: Any = None


def _one_record(skeleton: Skeleton, chain: Any, iterations: Any, tolerance: Any, fixed_root: Any,
                no_pole: bool) -> tuple[Any, ...] | None:
    """The one-solve record of these options (validated once, cached), or None when they need the general
    path (a chain not given as a tuple of names, a non-``int`` iteration count)."""
    global _LAST, _one_entry
    if type(iterations) is not int or type(chain) is not tuple or not all(type(c) is str for c in chain):
        return None  # (plans for other chain spellings are keyed by the general path)
    try:
        key = (id(skeleton), chain, iterations, tolerance, fixed_root, no_pole)
        rec = _ONE.get(key)
    except TypeError:  # an unhashable option (a 0-d array tolerance): the general path
        return None
    if rec is None or rec[0] is not skeleton:
        it, tol = _check_options(iterations, tolerance)
        plan = _cached(("chain", id(skeleton), chain), skeleton, lambda: _chain_plan(skeleton, chain))
        mode = _kernels().MODE_POSITIONS if plan.is_chain else _kernels().MODE_ROTATIONS
        options = _options(mode, it, tol, bool(fixed_root), not no_pole, skeleton.n_joints)
        if len(_ONE) >= _PLAN_CACHE_SIZE:
            _ONE.clear()
        lim = plan.no_limits
        rec = _ONE[key] = (skeleton, chain, iterations, tolerance, fixed_root, no_pole, plan.index, plan.weights,
                           options, lim.kinds, lim.params, lim.rest, tol)
        if _one_entry is None:
            nj = skeleton.n_joints
            # Target and pole are the caller's arrays: compiled for any strides (args 9 and 10).
            args = rec[6:12] + (np.zeros((nj, 3)), np.zeros((nj, 4)), np.zeros((nj, 3)), np.zeros(3), np.zeros(3))
            _one_entry = entry_point(_kernels().solve_one, args, any_layout=(9, 10))
    _LAST = rec
    return rec


def _solve_one(rec: tuple[Any, ...], pose: Pose, target: FloatArray, pole: FloatArray) -> SolveResult | None:
    """One unbatched solve through the kernel's ``solve_one`` (``rec`` from :func:`_one_record`; ``target`` and
    ``pole`` are 1-D arrays), or None for anything the general path must handle (a batched pose, a dtype other
    than float64, a wrong shape, a NaN target, non-uniform scale: the general path raises the precise error).

    Same kernel item as the general path (``solve_one`` runs ``solve_item`` on a batch of one), without its
    broadcasting.  Checks only what the compiled entry point cannot (numbers of dimensions), as
    :func:`kinema._ccd._solve_one` does.
    """
    copies = single_pose_copies(pose)
    if copies is None:
        return None
    t, r, s = copies
    try:
        status, err, iters, hits, moved = _one_entry(rec[6], rec[7], rec[8], rec[9], rec[10], rec[11], t, r, s,
                                                     target, pole)
    except TypeError:  # float32 and the like: the entry point converts nothing
        return None
    if status != -1:
        return None
    return single_result(t, r, s, err <= rec[12], err, iters, hits, {"moved": np.True_ if moved else np.False_})


def solve_fabrik(
    skeleton: Skeleton,
    pose: Pose,
    chain: Any,
    target: ArrayLike,
    *,
    iterations: int = 20,
    tolerance: float = 1e-3,
    limits: Any = None,
    pole: ArrayLike | None = None,
    fixed_root: bool = True,
    out: Pose | None = None,
) -> SolveResult:
    """Move a chain's end joint to ``target`` with FABRIK (Aristidou and Lasenby 2011).

    * ``chain``: ``(start, end)`` joint names or indices (every joint between
      them is turned), or an explicit list ``[start, ..., end]`` (only the
      listed joints are turned; joints between them ride along rigidly).
    * ``target``: ``(*batch, 3)`` world position of the end joint.
    * ``iterations``: most backward-forward passes; stops early once the end
      is within ``tolerance`` (world units) of the target.
    * ``pole``: ``(*batch, 3)`` world point the chain bends toward: after the
      passes, each inner joint turns about the line through its neighbours
      into the half-plane of the pole (end and bone lengths unchanged).
    * ``fixed_root``: the chain's first joint stays put (True), or is dragged
      along (False: the end reaches any target; the start joint's local
      translation is rewritten).
    * ``out``: a pose with the full batch shape to write into (may be ``pose``).

    Rotations from positions: each turned joint gets the minimal rotation
    from its current world bone direction to the solved one, applied root
    to tip through its parent's inverse, so twist about a bone is kept and
    re-solving a solved pose changes nothing.  A target out of reach (fixed
    root, ``|target - start| >= chain length``) gives the straight chain
    along the line from the start joint to the target, with ``reached``
    false.  Bone lengths are exact (rotations only).

    Returns a :class:`~kinema.SolveResult`: ``error`` is the end joint's
    distance to the target, ``iterations`` the passes used (0 when already
    within tolerance: the pose is returned unchanged), ``state["moved"]``
    whether any rotation changed.
    """
    if (out is None and not limits and type(pose) is Pose and type(target) is np.ndarray and target.ndim == 1
            and (pole is None or (type(pole) is np.ndarray and pole.ndim == 1))):
        # One unbatched solve, the per-frame call: a lean path (same kernel item, see _solve_one).
        last = _LAST
        rec: tuple[Any, ...] | None = last
        if not (last[0] is skeleton and last[1] is chain and last[2] is iterations and last[3] is tolerance
                and last[4] is fixed_root and last[5] is (pole is None)):
            rec = _one_record(skeleton, chain, iterations, tolerance, fixed_root, pole is None)
        if rec is not None:
            res = _solve_one(rec, pose, target, NO_POLE3 if pole is None else pole)
            if res is not None:
                return res
    it, tol = _check_options(iterations, tolerance)
    if type(chain) is tuple and all(type(c) is str for c in chain):
        key: Any = ("chain", id(skeleton), chain)  # names: the key as is (the per-frame call)
    else:
        key = ("chain", id(skeleton), chain if isinstance(chain, (str, int, np.integer)) else tuple(
            int(c) if isinstance(c, (int, np.integer)) else c for c in chain))
    plan = _cached(key, skeleton, lambda: _chain_plan(skeleton, chain))
    packed = plan.no_limits if not limits else pack_limits(skeleton, plan.joints[plan.node_j], limits)
    tgt = _as_point(target, "target")
    pl = None if pole is None else _as_point(pole, "pole")
    out_pose, batch, gerr, counts, moved = _run(skeleton, pose, plan, packed, [tgt], pl, it, tol, fixed_root, out,
                                                "solve_fabrik")
    err = gerr[:, 0]
    if not batch:  # one solve: 0-d views, no reshapes
        return SolveResult._trusted(out_pose, np.asarray(err[0] <= tol), err[0, ...], counts[0, 0, ...],
                                    counts[1, 0, ...], {"moved": moved[0, ...]})
    return SolveResult(
        pose=out_pose,
        reached=(err <= tol).reshape(batch),
        error=err.reshape(batch),
        iterations=counts[0].reshape(batch),
        limits_hit=counts[1].reshape(batch),
        state={"moved": moved.reshape(batch)},
    )


def _tree_root(skeleton: Skeleton, goal_joints: tuple[int, ...], root: Any) -> int:
    if root is not None:
        r = resolve_joint(skeleton, root)
        for g in goal_joints:
            if g != r and r not in skeleton.ancestors(g):
                raise SolverInputError(
                    f"goal joint {skeleton.names[g]!r} is not below the root {skeleton.names[r]!r}")
        return r
    tops = set()
    for g in goal_joints:
        anc = skeleton.ancestors(g)
        tops.add(anc[-1] if anc else g)
    if len(tops) != 1:
        raise SolverInputError("the goals lie in different trees of the skeleton (no common root)")
    return tops.pop()


def solve_fabrik_tree(
    skeleton: Skeleton,
    pose: Pose,
    goals: Mapping[Any, ArrayLike],
    *,
    root: Any = None,
    weights: Mapping[Any, float] | None = None,
    iterations: int = 20,
    tolerance: float = 1e-3,
    limits: Any = None,
    fixed_root: bool = True,
    out: Pose | None = None,
) -> SolveResult:
    """Reach several targets at once with multi-end-effector FABRIK.

    * ``goals``: mapping ``{joint: target}``; each joint (name or index) is
      an end effector and its target is a ``(*batch, 3)`` world position.
      Goal joints may be leaves or inner joints (a hand and the chest).
    * ``root``: the joint the tree hangs from (default: the skeleton root
      above the goals).  Every joint on the paths from ``root`` to the goals
      is turned; ``fixed_root`` keeps ``root`` in place.
    * ``weights``: mapping ``{joint: weight > 0}`` (default 1 per goal).

    Sub-bases (joints where branches meet, e.g. a chest with two arms) and
    goal joints that have branches below them are placed, in the backward
    pass, at the weighted centroid of what they want:
    ``p = sum_k w_k want_k / sum_k w_k`` where each branch ``b`` wants the
    joint at bone length from the branch's first joint (toward the joint's
    current position) with ``w_b`` = the sum of the goal weights in that
    branch, and the joint's own goal (if any) wants it on its target with
    its weight.  A sub-base's children are attached rigidly: its rotation
    is the weighted mean (rotation vectors, same weights) of the minimal
    rotations toward its branches.  When not every target can be reached,
    the miss is shared by the weights: a heavier goal gets closer.

    Returns a :class:`~kinema.SolveResult` with ``error`` the largest goal
    distance, ``reached`` true when every goal is within ``tolerance``,
    ``state["goal_errors"]`` ``(*batch, G)`` per goal (in ``state["goals"]``
    order, joint names) and ``state["moved"]``.
    """
    it, tol = _check_options(iterations, tolerance)
    if not isinstance(goals, Mapping) or len(goals) == 0:
        raise SolverInputError("goals must be a non-empty mapping {joint: target}")
    goal_joints = tuple(resolve_joint(skeleton, j) for j in goals)
    if len(set(goal_joints)) != len(goal_joints):
        raise SolverInputError("goals name the same joint twice")
    w_map = {} if weights is None else {resolve_joint(skeleton, j): w for j, w in weights.items()}
    for j in w_map:
        if j not in goal_joints:
            raise SolverInputError(f"weights names joint {skeleton.names[j]!r}, which has no goal")
    ws = []
    for g in goal_joints:
        w = w_map.get(g, 1.0)
        try:
            wf = float(w)
        except (TypeError, ValueError):
            raise SolverInputError(f"weight of goal {skeleton.names[g]!r} must be a number, got {w!r}") from None
        if not np.isfinite(wf) or wf <= 0.0:
            raise SolverInputError(f"weight of goal {skeleton.names[g]!r} must be finite and > 0, got {w!r}")
        ws.append(wf)
    r = _tree_root(skeleton, goal_joints, root)
    key = ("tree", id(skeleton), goal_joints, r, tuple(ws))
    plan = _cached(key, skeleton, lambda: _tree_plan(skeleton, goal_joints, r, tuple(ws)))
    packed = plan.no_limits if not limits else pack_limits(skeleton, plan.joints[plan.node_j], limits)
    tgts = [as_target(v, f"target of goal {skeleton.names[g]!r}")
            for g, v in zip(goal_joints, goals.values(), strict=True)]
    out_pose, batch, gerr, counts, moved = _run(skeleton, pose, plan, packed, tgts, None, it, tol, fixed_root, out,
                                                "solve_fabrik_tree")
    g_n = len(goal_joints)
    return SolveResult(
        pose=out_pose,
        reached=np.all(gerr <= tol, axis=1).reshape(batch),
        error=gerr.max(axis=1).reshape(batch),
        iterations=counts[0].reshape(batch),
        limits_hit=counts[1].reshape(batch),
        state={
            "goal_errors": gerr.reshape(batch + (g_n,)),
            "goals": tuple(skeleton.names[g] for g in goal_joints),
            "moved": moved.reshape(batch),
        },
    )
