"""FABRIK: forward and backward reaching IK for chains and multi-end-effector trees.

The prepared solvers :class:`FABRIK` and :class:`FABRIKTree` validate and
pack their chain or tree once, then hand each batch to the kernels in
:mod:`kinema._kernels.fabrik` (whose docstring has the notation and
formulas); :func:`solve_fabrik` and :func:`solve_fabrik_tree` are thin
wrappers over them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._solve import (
    ABSENT_ROW3,
    SOLVERS,
    OneItemOutputs,
    Option,
    PackedChain,
    as_target,
    blend_limits,
    blend_weight,
    blend_with_input,
    check_iterations,
    check_nonnegative,
    check_pose_item,
    check_twist,
    item_pose,
    item_row,
    kernel_loader,
    pose_shapes,
    prepare,
    raise_status,
    resolve_chain,
    result,
    result_one,
    run_driver,
)
from ._types import FloatArray, IntArray
from ._validate import as_float_array, as_float_scalar, check_flag, is_sequence, resolve_joint
from .errors import SolverInputError
from .limits import PackedLimits, limit_map, pack_limits
from .pose import Pose
from .result import SolveResult
from .skeleton import Skeleton, check_skeleton

__all__ = ["FABRIK", "FABRIKTree", "solve_fabrik", "solve_fabrik_tree"]


#: The kernel module, imported on first use (``import kinema`` must not import numba).
_kernels = kernel_loader("fabrik")


#: An unbatched chain solve's outputs: ``gerr (1, 1)``, ``counts (2, 1)`` and ``moved (1,)``.
_ONE_ITEM = OneItemOutputs(lambda: (np.empty((1, 1)), np.zeros((2, 1), dtype=np.int64), np.zeros(1, dtype=np.bool_)))


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


def _children(npar: IntArray) -> tuple[IntArray, IntArray]:
    """CSR children lists ``(child_ptr (K+1,), child_idx)`` of a parent-first node list."""
    k = npar.shape[0]
    counts = np.bincount(npar[npar >= 0], minlength=k)
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    order = np.argsort(npar, kind="stable")
    idx = order[np.count_nonzero(npar < 0):].astype(np.int64)
    return ptr, idx


def _flexible_branches(ptr: IntArray, idx: IntArray, ngoal: IntArray) -> tuple[FloatArray, IntArray]:
    """``(br (kn,), btip (kn,))``: for each node ``c`` whose subtree is one chain of at least one bone with a
    single goal, at its tip, 1 and that goal's index; -1 and -1 for every other node (see
    :func:`kinema._kernels.fabrik._slack_subbase`, which measures the chain's reach per item)."""
    kn = ngoal.shape[0]
    br = np.full(kn, -1.0)
    btip = np.full(kn, -1, dtype=np.int64)
    for c in range(kn):
        m = c
        ok = ngoal[c] < 0
        while ok and ptr[m + 1] - ptr[m] == 1:
            m = int(idx[ptr[m]])
            if ngoal[m] >= 0 and ptr[m + 1] - ptr[m] != 0:
                ok = False  # a goal part-way down: not one goal at the tip
        if ok and m != c and ptr[m + 1] == ptr[m] and ngoal[m] >= 0:
            br[c] = 1.0
            btip[c] = int(ngoal[m])
    return br, btip


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
    br, btip = _flexible_branches(ptr, idx, ngoal)
    header = [base_path.shape[0], joints.shape[0], kn, idx.shape[0], goal_nodes.shape[0]]
    index = np.concatenate([np.asarray(header), base_path, joints, jpar, node_j, npar, ptr, idx, ngoal,
                            goal_nodes, btip]).astype(np.int64)
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
        weights=np.concatenate([gw, nw, br]),
    )


def _chain_plan(skeleton: Skeleton, chain: Any) -> _Plan:
    joints, listed = resolve_chain(skeleton, _chain_items(chain))
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


def _pole_budget(value: Any) -> float | None:
    """The ``pole_max_twist`` option: None, or a positive angle in radians (:class:`SolverInputError` otherwise)."""
    if value is None:
        return None
    from ._ccd import _max_step

    return _max_step(value, "pole_max_twist")


def _read_only(a: IntArray) -> IntArray:
    """``a`` made read-only (a solver's packed array handed out: writing it would change nothing)."""
    a.flags.writeable = False
    return a


def _end_joint_items(end_joints: Any) -> list[Any]:
    """A tree's goal joints as a list, read once (a generator is taken as the list it yields; a mapping as its
    keys); :class:`SolverInputError` for anything that is no non-empty sequence (one joint, None, a 0-d array)."""
    if isinstance(end_joints, np.ndarray) and end_joints.ndim == 0 or \
            not (is_sequence(end_joints) or isinstance(end_joints, Mapping)):
        raise SolverInputError(f"end_joints must be a non-empty sequence of joints, got {end_joints!r}")
    items = list(end_joints)
    if not items:
        raise SolverInputError(f"end_joints must be a non-empty sequence of joints, got {end_joints!r}")
    return items


def _chain_items(chain: Any) -> Any:
    """``chain`` for :func:`kinema._solve.resolve_chain`, a 0-d array refused here (it is iterable to Python but
    iterating it raised a bare TypeError)."""
    if isinstance(chain, np.ndarray) and chain.ndim == 0:
        raise SolverInputError(f"a chain is (start, end) or a list of joints, got {chain!r}")
    return chain


class _FabrikSolver(PackedChain):
    """What :class:`FABRIK` and :class:`FABRIKTree` share: the packed plan, limits and options, and the run.

    The options (``iterations``, ``tolerance``, ``fixed_root``, ``twist``, ``limits``, :class:`FABRIK`'s
    ``pole_max_twist``) are properties: a setter checks the value as the constructor does and packs again what
    the kernel reads, so a solver whose option was set solves exactly as one built with it.  What the plan is
    packed from (the skeleton, the chain or tree, a tree's goals, weights and root) is read-only: assigning it
    raises :class:`~kinema.SolverInputError`; build a new solver instead."""

    _plan: _Plan
    _packed: PackedLimits
    #: Whether :meth:`solve` takes a pole (``pole_max_twist`` applies).
    _HAS_POLE = False

    def _setup(self, skeleton: Skeleton, plan: _Plan, iterations: Any, tolerance: Any, limits: Any,
               fixed_root: Any, twist: Any = "input", pole_max_twist: Any = None) -> None:
        self._skeleton = skeleton
        self._pose_shapes = pose_shapes(skeleton)
        # The options are checked here as their setters check them, and packed once at the end.
        self._twist = check_twist(twist)
        self._pole_max_twist = _pole_budget(pole_max_twist)
        self._iterations = check_iterations(iterations)
        self._tolerance = check_nonnegative(tolerance, "tolerance")
        self._fixed_root = check_flag(fixed_root, "fixed_root")
        self._plan = plan
        self._joints = _read_only(plan.joints.copy())
        self.scale_joints = plan.scale_joints
        self._set_limits(limits)
        self._pack_options()

    def _set_limits(self, limits: Any) -> None:
        """Check and pack ``limits`` (as the constructor does): the kernel's packed limits, the limited joints a
        blend clamps again and the kernel's mode (positions only for a chain without limits)."""
        plan = self._plan
        limits = limit_map(limits)  # (a snapshot: the caller may change its mapping)
        packed = plan.no_limits if limits is None else pack_limits(self._skeleton, plan.joints[plan.node_j], limits)
        self._packed = packed
        self._limits = limits
        #: The limited joints a blend (weight < 1) clamps again.
        self._blend_limits = blend_limits(plan.joints[plan.node_j], packed, np.ones(plan.node_j.size, dtype=bool))
        k = _kernels()
        self._mode = k.MODE_POSITIONS if plan.is_chain and packed.count == 0 else k.MODE_ROTATIONS

    def _pack_options(self) -> None:
        """The kernel's options (slots ``O_*`` in :mod:`kinema._kernels.fabrik`) without and with a pole."""
        budget = 0.0 if self._pole_max_twist is None else self._pole_max_twist
        self._options = tuple(np.array([self._mode, self._iterations, self._tolerance, self._fixed_root, has_pole,
                                        self._twist == "rest", budget], dtype=np.float64)
                              for has_pole in (False, True))

    @property
    def limits(self) -> Mapping[Any, Any] | None:
        """The joint limits as given (a read-only mapping), or None.  Settable: ``{joint: Limit}`` or None,
        checked as the constructor checks it; the solver then solves exactly as one built with it."""
        return None if self._limits is None else MappingProxyType(self._limits)

    @limits.setter
    def limits(self, value: Any) -> None:
        self._set_limits(value)
        self._pack_options()

    iterations = Option(check_iterations, "The most backward-forward passes a solve runs.")
    tolerance = Option(lambda v: check_nonnegative(v, "tolerance"),
                       "A solve stops when every goal is this close to its target (``reached`` is "
                       "``error <= tolerance``).")
    fixed_root = Option(lambda v: check_flag(v, "fixed_root"),
                        "True keeps the first joint in place; False drags it along (its local translation is "
                        "rewritten).  (A :class:`~kinema.Rig` reads it when it is built, for the joints its steps "
                        "claim: set it before.)")
    twist = Option(check_twist, 'The twist policy, ``"input"`` or ``"rest"`` (see :func:`solve_fabrik`).')

    @property
    def pole_max_twist(self) -> float | None:
        """The cap on each inner joint's pole turn in one solve (radians), or None (see :func:`solve_fabrik`)."""
        return self._pole_max_twist

    @pole_max_twist.setter
    def pole_max_twist(self, value: float | None) -> None:
        if value is not None and not self._HAS_POLE:
            raise SolverInputError(f"{type(self).__name__} takes no pole: pole_max_twist must stay None, got {value!r}")
        self._pole_max_twist = _pole_budget(value)
        self._pack_options()

    def _run(self, pose: Pose, targets: list[FloatArray], pole: FloatArray | None, weight: Any,
             out: Pose | None) -> tuple[Pose, tuple[int, ...], FloatArray, IntArray, NDArray[np.bool_]]:
        """Solve; returns ``(pose, batch, goal errors (N, G), counts (2, N): iterations, limit hits, moved (N,))``."""
        one = check_pose_item(self._skeleton, pose, self.what, self._pose_shapes) and out is None
        w = blend_weight(weight)
        plan, packed = self._plan, self._packed
        if one and w is None and plan.is_chain and targets[0].ndim == 1 and (pole is None or pole.ndim == 1):
            # The per-frame call of a chain (one item, no blend): the kernel's rows made directly.
            res, t, r, s = item_pose(pose)
            gerr, counts, moved = _ONE_ITEM.outputs  # read back as scalars (FABRIK.solve)
            status = run_driver(_kernels().DRIVERS, 1,
                                (plan.index, plan.weights, self._options[pole is not None], packed.kinds,
                                 packed.params, packed.rest, t, r, s, item_row(targets[0])[None],
                                 ABSENT_ROW3 if pole is None else item_row(pole), gerr, counts, moved), own=True)
            if status:
                self._raise(status, pose, targets, pole)
            return res, (), gerr, counts, moved
        g = len(targets)
        extras: list[tuple[FloatArray, tuple[int, ...]]] = [(tg, (3,)) for tg in targets]
        if pole is not None:
            extras.append((pole, (3,)))
        inputs = None
        if w is not None:
            extras.append((w, ()))
            inputs = (pose.rotations.copy(), pose.translations.copy())  # the blend's; out=pose overwrites them
        prep = prepare(self._skeleton, pose, extras, out, checked=True, unbatched=one or None)
        n = prep.n
        tg = prep.extras[0][:, None] if g == 1 else np.ascontiguousarray(np.stack(prep.extras[:g], axis=1))  # (N, G, 3)
        poles = prep.extras[g] if pole is not None else ABSENT_ROW3
        if prep.batch or not plan.is_chain:
            gerr = np.empty((n, g))
            counts = np.empty((2, n), dtype=np.int64)  # iterations, limit hits
            moved = np.empty(n, dtype=np.bool_)
        else:  # one item of a chain: read back as scalars (FABRIK.solve)
            gerr, counts, moved = _ONE_ITEM.outputs
        status = run_driver(_kernels().DRIVERS, n,
                            (plan.index, plan.weights, self._options[pole is not None], packed.kinds, packed.params,
                             packed.rest, prep.t, prep.r, prep.s, tg, poles, gerr, counts, moved), own=prep.own)
        if status:
            self._raise(status, pose, targets, pole)
        if inputs is not None:
            from .fk import forward_kinematics

            w_f = prep.extras[-1]
            counts = counts.copy()  # (the one-item outputs are the thread's own)
            counts[1] += blend_with_input(  # the dragged root's translation too
                prep, inputs, plan.joints[plan.node_j], None if self._fixed_root else int(plan.joints[plan.node_j[0]]),
                w_f, self._blend_limits)
            # (the joint count spelled out: an empty batch has no size to infer it from)
            p = forward_kinematics(self._skeleton, prep.out).positions.reshape(n, self._skeleton.n_joints, 3)
            ends = plan.joints[plan.node_j[plan.goal_node]]
            w_n = np.broadcast_to(w_f, (n,))
            # the blended items' errors from their new pose (an item of weight 1 keeps the kernel's, as alone)
            gerr = np.where((w_n != 1.0)[:, None], np.linalg.norm(p[:, ends] - tg, axis=-1), gerr)
            moved &= w_n > 0.0
        return prep.out, prep.batch, gerr, counts, moved


    def _raise(self, status: int, pose: Pose, targets: list[FloatArray], pole: FloatArray | None) -> None:
        if len(self._plan.goal_node) == 1 and self._plan.is_chain:
            inputs: dict[str, Any] = {"target": targets[0], "pole": pole}
        else:
            names = self._skeleton.names
            ends = self._plan.joints[self._plan.node_j[self._plan.goal_node]]
            inputs = {f"target of goal {names[int(j)]!r}": t for j, t in zip(ends, targets, strict=True)}
        raise_status(status, self.what, self._skeleton, pose, self.scale_joints, inputs)


class FABRIK(_FabrikSolver):
    """A prepared FABRIK solver for one chain: validate once, solve every frame.

    ``FABRIK(skeleton, chain, *, iterations=20, tolerance=1e-3, limits=None,
    fixed_root=True, twist="input", pole_max_twist=None)``: the options mean what they mean for
    :func:`solve_fabrik` (whose docstring has the algorithm).  ``joints`` is
    the chain's joint indices, root first.

    The options may be set after construction (``ik.iterations = 5``): each is checked as the constructor
    checks it and the solver then solves exactly as one built with it (``limits`` too: it reads back the
    mapping given, or None).  ``joints`` is read-only.
    """

    what = "solve_fabrik"
    _HAS_POLE = True
    cache_options = ("iterations", "tolerance", "limits", "fixed_root", "twist", "pole_max_twist")

    def __init__(self, skeleton: Skeleton, chain: Any, *, iterations: int = 20, tolerance: float = 1e-3,
                 limits: Any = None, fixed_root: bool = True, twist: str = "input",
                 pole_max_twist: float | None = None) -> None:
        check_skeleton(skeleton)
        self._setup(skeleton, _chain_plan(skeleton, chain), iterations, tolerance, limits, fixed_root, twist,
                    pole_max_twist)

    def solve(self, pose: Pose, target: ArrayLike, *, pole: ArrayLike | None = None, weight: ArrayLike = 1.0,
              out: Pose | None = None) -> SolveResult:
        """Solve one frame or a batch: ``target (*batch, 3)`` world, ``pole (*batch, 3)`` world point or None,
        ``weight (*batch,)`` in [0, 1], ``out`` a caller-owned pose of the full batch shape."""
        return self._solve(pose, target, pole, weight, out)

    def _solve(self, pose: Pose, target: ArrayLike, pole: ArrayLike | None, weight: ArrayLike,
               out: Pose | None) -> SolveResult:
        tgt = as_float_array(target, "target", (3,))
        pl = None if pole is None else as_float_array(pole, "pole", (3,))
        out_pose, batch, gerr, counts, moved = self._run(pose, [tgt], pl, weight, out)
        err = gerr[:, 0]
        if not batch:
            return result_one(out_pose, err, self._tolerance, counts, {"moved": moved[0]})
        return result(out_pose, batch, err, err <= self._tolerance, counts[0], counts[1],
                      {"moved": moved.reshape(batch) if batch else moved[0, ...]})


class FABRIKTree(_FabrikSolver):
    """A prepared multi-end-effector FABRIK solver: validate once, solve every frame.

    ``FABRIKTree(skeleton, end_joints, *, root=None, weights=None,
    iterations=20, tolerance=1e-3, limits=None, fixed_root=True,
    twist="input")``: the goal
    joints (names or indices) and the options of :func:`solve_fabrik_tree`.
    ``goals`` is their names, in the order :meth:`solve` takes targets,
    ``goal_joints`` their indices.

    The options may be set after construction, as :class:`FABRIK`'s (``limits`` too); ``goals``,
    ``goal_joints``, ``root`` (the root joint's name), ``weights`` (``{goal name: weight}``) and ``joints`` are
    read-only.
    """

    what = "solve_fabrik_tree"
    cache_options = ("root", "weights", "iterations", "tolerance", "limits", "fixed_root", "twist")

    def __init__(self, skeleton: Skeleton, end_joints: Sequence[Any], *, root: Any = None,
                 weights: Mapping[Any, float] | None = None, iterations: int = 20, tolerance: float = 1e-3,
                 limits: Any = None, fixed_root: bool = True, twist: str = "input") -> None:
        check_skeleton(skeleton)
        goal_joints = tuple(resolve_joint(skeleton, j) for j in _end_joint_items(end_joints))
        if len(set(goal_joints)) != len(goal_joints):
            raise SolverInputError("goals name the same joint twice")
        if weights is not None and not isinstance(weights, Mapping):
            raise SolverInputError(f"weights must be a mapping {{end joint: weight}}, got {type(weights).__name__}")
        w_map: dict[int, Any] = {}
        for key, w in ({} if weights is None else weights).items():
            j = resolve_joint(skeleton, key)
            if j in w_map:  # one of the two would silently win
                raise SolverInputError(f"joint {skeleton.names[j]!r} has two weights (given by name and by index)")
            w_map[j] = w
        for j in w_map:
            if j not in goal_joints:
                raise SolverInputError(f"weights names joint {skeleton.names[j]!r}, which has no goal")
        ws = []
        for g in goal_joints:
            wf = as_float_scalar(w_map.get(g, 1.0), f"weight of goal {skeleton.names[g]!r}")
            if not np.isfinite(wf) or wf <= 0.0:
                raise SolverInputError(f"weight of goal {skeleton.names[g]!r} must be finite and > 0, got {wf!r}")
            ws.append(wf)
        r = _tree_root(skeleton, goal_joints, root)
        self._goal_joints = goal_joints
        self._goals = tuple(skeleton.names[g] for g in goal_joints)
        self._weights = dict(zip(self._goals, ws, strict=True))
        self._root = skeleton.names[r]
        self._setup(skeleton, _tree_plan(skeleton, goal_joints, r, tuple(ws)), iterations, tolerance, limits,
                    fixed_root, twist)

    @property
    def goal_joints(self) -> tuple[int, ...]:
        """The goal joints' indices, in :attr:`goals` order (read-only)."""
        return self._goal_joints

    @goal_joints.setter
    def goal_joints(self, value: Any) -> None:
        self._refuse("goal_joints", "the tree of the goals")

    @property
    def goals(self) -> tuple[str, ...]:
        """The goal joints' names, in the order :meth:`solve` takes targets (read-only)."""
        return self._goals

    @goals.setter
    def goals(self, value: Any) -> None:
        self._refuse("goals", "the tree of the goals")

    @property
    def root(self) -> str:
        """The name of the joint the tree hangs from (read-only)."""
        return self._root

    @root.setter
    def root(self, value: Any) -> None:
        self._refuse("root", "the tree below the root")

    @property
    def weights(self) -> Mapping[str, float]:
        """Each goal's weight, ``{goal name: weight}`` (a read-only mapping; read-only)."""
        return MappingProxyType(self._weights)

    @weights.setter
    def weights(self, value: Any) -> None:
        self._refuse("weights", "the tree's goal weighting")

    def solve(self, pose: Pose, targets: Any, *, weight: ArrayLike = 1.0, out: Pose | None = None) -> SolveResult:
        """Solve one frame or a batch.  ``targets``: a mapping ``{joint: (*batch, 3)}`` naming every goal
        joint, or an array ``(*batch, G, 3)`` / sequence of ``G`` targets in :attr:`goals` order."""
        names = self._skeleton.names
        if isinstance(targets, Mapping):
            by_joint = {}
            for key, v in targets.items():
                j = resolve_joint(self._skeleton, key)
                if j in by_joint:  # (as solve_fabrik_tree refuses it: one of the two would silently win)
                    raise SolverInputError(f"goals name the same joint twice: {names[j]!r}")
                by_joint[j] = v
            if set(by_joint) != set(self._goal_joints):
                raise SolverInputError(f"targets must name exactly the goal joints {list(self.goals)}, got "
                                       f"{[names[j] for j in by_joint]}")
            tgts = [as_target(by_joint[g], f"target of goal {names[g]!r}") for g in self.goal_joints]
        else:
            g_n = len(self.goal_joints)
            arr = as_float_array(targets, "targets", (g_n, 3))
            tgts = [arr[..., k, :] for k in range(g_n)]
        out_pose, batch, gerr, counts, moved = self._run(pose, tgts, None, weight, out)
        g_n = len(self.goal_joints)
        return result(out_pose, batch, gerr.max(axis=1), np.all(gerr <= self._tolerance, axis=1), counts[0],
                      counts[1], {"goal_errors": gerr.reshape(batch + (g_n,)), "goals": self.goals,
                                  "moved": moved.reshape(batch) if batch else moved[0, ...]})


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
    twist: str = "input",
    pole_max_twist: float | None = None,
    weight: ArrayLike = 1.0,
    out: Pose | None = None,
) -> SolveResult:
    """Move a chain's end joint to ``target`` with FABRIK (Aristidou and Lasenby 2011).

    * ``chain``: ``(start, end)`` joint names or indices (every joint between
      them is turned), or an explicit list ``[start, ..., end]`` (only the
      listed joints are turned; joints between them ride along rigidly).
    * ``target``: ``(*batch, 3)`` world position of the end joint.
    * ``iterations``: most backward-forward passes; stops early once the end
      is within ``tolerance`` (world units) of the target.
    * ``limits``: ``{joint: Hinge | SwingTwist | EulerRange}``, applied in
      every pass (a hinge joint turns about its axis only).  FABRIK moves
      points, so with limits the passes fight the clamps: they can go
      nowhere from a warm start, creep (hinges), or wander onto another
      branch.  On a chain (fixed root, no pole), once
      :data:`PASS_PATIENCE <kinema._kernels.fabrik.PASS_PATIENCE>` passes
      in a row fail to bring the error below
      :data:`PASS_GAIN <kinema._kernels.fabrik.PASS_GAIN>` times the best so
      far, the rest of the iterations descend from the best candidate (the
      input pose too, when it is inside its limits): each joint, tip to
      root, turns to point the end at the target, clamped, and is kept only
      when the end comes nearer, so a chain followed frame by frame moves
      continuously.  An unfinished solve returns its best pose, the input
      itself (bit for bit) when nothing came nearer.  Trees, poles and a
      free root keep the passes alone.
    * ``pole``: ``(*batch, 3)`` world point the chain bends toward: after the
      passes, each inner joint turns about the line through its neighbours
      into the half-plane of the pole (end and bone lengths unchanged).
      This snaps: a joint on the far side swings round in one solve, so a
      chain followed frame by frame can flip.
    * ``pole_max_twist``: radians, default None (no budget).  Caps each
      inner joint's total pole turn in one solve, so a solve keeps the bend
      side of the pose it starts from and moves it at most that far toward
      the pole: solved frame after frame from the previous result, the bend
      blends onto the pole instead of snapping (a few degrees, e.g.
      ``math.radians(5)``, for animation; a single cold solve may stop short
      of the pole's plane).
    * ``twist``: ``"input"`` (default) keeps each bone's twist about its own
      axis from the given pose (the smallest change, see below; warm-started
      solves can wind it up over a loop); ``"rest"`` takes every turned
      bone's twist from the rest pose relative to its parent after the solve
      (:func:`kinema._kernels.quat.qrest_twist`; bone directions, so joint
      positions, are kept, limits applied again), so the result depends only
      on where the joints end up.  Use ``"input"`` when each frame starts
      from an animated pose, ``"rest"`` when it starts from the previous
      result.
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

    ``weight (*batch,)`` in [0, 1] blends each turned joint's local rotation
    with the input's (slerp; the error is measured after the blend).  This is
    ``FABRIK(skeleton, chain, ...).solve(pose, target, pole=pole,
    weight=weight, out=out)`` through a bounded cache of prepared solvers.

    Returns a :class:`~kinema.SolveResult`: ``error`` is the end joint's
    distance to the target, ``iterations`` the passes used (0 when already
    within tolerance: the pose is returned unchanged), ``state["moved"]``
    whether any rotation changed.
    """
    solver = SOLVERS.get(FABRIK, skeleton, (chain, iterations, tolerance, limits, fixed_root, twist, pole_max_twist),
                         (type(chain), type(iterations), type(tolerance), type(limits), type(fixed_root), type(twist),
                          type(pole_max_twist)))
    return solver._solve(pose, target, pole, weight, out)


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
    twist: str = "input",
    weight: ArrayLike = 1.0,
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
    rotations toward its branches (refined :data:`SUBBASE_FIT_PASSES
    <kinema._kernels.fabrik.SUBBASE_FIT_PASSES>` times).  A branch that is
    one chain ending in one goal and that can reach its goal from where
    the binding wants put the joint (its own goal, rigid children such as a
    goal head, branches out of reach; a branch within
    :data:`SLACK_MARGIN <kinema._kernels.fabrik.SLACK_MARGIN>` of its full
    reach counts as out of reach) is left out of both: it would only hold
    the joint back.  A sub-base with exactly one goal-bearing leaf child (a
    goal head) aims that child exactly and turns about it to best place the
    others, and is put on the circle at the head's length from the head's
    goal and its bone's length from its parent (nearest the centroid), so
    with a fixed parent the head's goal is met after every iteration.  When
    not every target can be reached,
    the miss is shared by the weights: a heavier goal gets closer.

    ``twist``: as for :func:`solve_fabrik`; with ``"rest"`` every joint with
    one child on the tree's paths gets its twist from rest, sub-bases (where
    branches meet) keep the solved rotation.

    ``weight (*batch,)`` in [0, 1] blends the turned joints with the input
    pose.  This is ``FABRIKTree(skeleton, list(goals), ...).solve(pose,
    goals, weight=weight, out=out)`` through a bounded cache.

    Returns a :class:`~kinema.SolveResult` with ``error`` the largest goal
    distance, ``reached`` true when every goal is within ``tolerance``,
    ``state["goal_errors"]`` ``(*batch, G)`` per goal (in ``state["goals"]``
    order, joint names) and ``state["moved"]``.
    """
    if not isinstance(goals, Mapping) or len(goals) == 0:
        raise SolverInputError("goals must be a non-empty mapping {joint: target}")
    ends = tuple(goals)
    solver = SOLVERS.get(FABRIKTree, skeleton, (ends, root, weights, iterations, tolerance, limits, fixed_root,
                                                twist))
    return solver.solve(pose, goals, weight=weight, out=out)
