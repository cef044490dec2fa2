"""CCD (cyclic coordinate descent) for chains of any length, and prioritised multi-chain solves."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._solve import (
    ABSENT_ROW3,
    SOLVERS,
    OneItemOutputs,
    Option,
    PackedChain,
    ancestors_root_first,
    as_target,
    blend_limits,
    blend_rotations,
    blend_translations,
    blend_weight,
    blend_with_input,
    check_iterations,
    check_nonnegative,
    check_pose,
    check_pose_item,
    check_twist,
    clamp_blended,
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
from ._validate import as_float_array, as_float_scalar, broadcast_batch, check_flag, is_sequence, resolve_joint
from .errors import ShapeError, SolverInputError
from .limits import Limit, limit_map, pack_limits
from .pose import Pose
from .result import SolveResult
from .rig import Rig, Step
from .skeleton import Skeleton, check_skeleton

__all__ = ["CCD", "solve_ccd", "Goal", "solve_chains"]


#: The kernel module, imported on first use (``import kinema`` must not import numba).
_kernels = kernel_loader("ccd")


#: An unbatched solve's outputs: ``err (1,)`` and ``counts (3, 1)`` (sweeps, limit hits, changed).
_ONE_ITEM = OneItemOutputs(lambda: (np.empty(1), np.zeros((3, 1), dtype=np.int64)))


def _chain_weights(skeleton: Skeleton, joints: IntArray, listed: NDArray[np.bool_], weights: Any) -> FloatArray:
    """Per chain joint weight in [0, 1], one per joint of ``joints``; the end's is unused.

    ``weights`` are the listed joints' (``listed``: the joints the chain names, all of them for a
    ``(start, end)`` pair): None (all 1), one value per listed joint root first, or ``{joint: weight}`` naming
    listed joints (the rest 1).  Helper joints (between listed ones, not listed) ride along unturned: their
    weight is 0, always.  An array of one value per chain joint (helpers included, root first: what
    :attr:`CCD.weights` gives back) is taken too, with 0 for every helper.  A helper given a weight, a joint
    named twice or outside the chain, a value outside [0, 1] raise :class:`SolverInputError`.
    """
    k = joints.size
    n_listed = int(np.count_nonzero(listed))
    w = listed.astype(np.float64)
    if weights is None:
        return w
    names = [skeleton.names[j] for j in joints]
    listed_names = [skeleton.names[j] for j, on in zip(joints, listed, strict=True) if on]

    def rides_along(j: int) -> SolverInputError:
        return SolverInputError(f"weights: joint {skeleton.names[j]!r} is a helper between the chain's listed joints: "
                                f"it rides along unturned and takes no weight (weights are for the listed joints "
                                f"{listed_names})")

    if isinstance(weights, Mapping):
        pos = {int(j): a for a, j in enumerate(joints)}
        seen: set[int] = set()
        for key, val in weights.items():
            idx = resolve_joint(skeleton, key)
            if idx in seen:
                raise SolverInputError(f"weights: joint {skeleton.names[idx]!r} is given twice (by name and by "
                                       "index)")
            seen.add(idx)
            if idx not in pos:
                raise SolverInputError(f"weights: joint {skeleton.names[idx]!r} is not in the chain {names}")
            if not listed[pos[idx]]:
                raise rides_along(idx)
            w[pos[idx]] = as_float_scalar(val, f"weight of joint {skeleton.names[idx]!r}")
    else:
        try:
            a = as_float_array(weights, "weights", (), batch=True)
        except ShapeError as exc:
            raise SolverInputError(str(exc)) from None
        if a.shape == (n_listed,):
            w[listed] = a
        elif a.shape == (k,):
            w = a.copy()
            helpers = np.nonzero(~listed & (w != 0.0))[0]
            if helpers.size:
                raise rides_along(int(joints[helpers[0]]))
        else:
            also = "" if n_listed == k else f", or {k} (one per chain joint root first, 0 for the helpers: {names})"
            raise SolverInputError(f"weights: expected {n_listed} values (one per listed chain joint, root first: "
                                   f"{listed_names}){also}, got shape {a.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0.0) or np.any(w > 1.0):
        raise SolverInputError(f"weights must be finite numbers in [0, 1], got {w.tolist()}")
    return np.ascontiguousarray(w)


def _max_step(max_step: Any, what: str = "max_step") -> float:
    """The kernel's step cap (or another per-solve angle cap named ``what``): 0 for none, else a positive
    angle in radians."""
    if max_step is None:
        return 0.0  # 0 = no cap in the kernel
    step = as_float_scalar(max_step, what)
    if not math.isfinite(step) or step <= 0.0:
        raise SolverInputError(f"{what} must be a positive angle in radians (or None), got {max_step!r}")
    return step


class CCD(PackedChain):
    """A prepared CCD solver for one chain: validate once, solve every frame.

    ``CCD(skeleton, chain, *, iterations=20, tolerance=1e-3, weights=None,
    max_step=None, adaptive_step=True, limits=None, fixed_root=True,
    twist="input", pole_max_twist=None)``: the
    options mean what they mean for :func:`solve_ccd` (whose docstring has
    the algorithm); the constructor resolves the chain, packs its weights and
    limits and raises every configuration error.  :meth:`solve` runs one
    frame or a batch.  ``joints`` is the chain's joint indices, root first.

    The options may be set after construction (``ik.iterations = 5``): each
    is checked as the constructor checks it and the solver then solves
    exactly as one built with it.  ``weights`` reads back one value per
    joint of ``joints`` (helpers 0, read-only); ``limits`` the mapping given
    (read-only), or None.  ``skeleton`` and ``joints`` (the chain) are
    read-only: assigning one raises :class:`~kinema.SolverInputError`.
    """

    what = "solve_ccd"
    cache_options = ("iterations", "tolerance", "weights", "max_step", "adaptive_step", "limits", "fixed_root",
                     "twist", "pole_max_twist")

    def __init__(self, skeleton: Skeleton, chain: Any, *, iterations: int = 20, tolerance: float = 1e-3,
                 weights: Sequence[float] | Mapping[Any, float] | ArrayLike | None = None,
                 max_step: float | None = None, adaptive_step: bool = True,
                 limits: Mapping[Any, Limit] | None = None, fixed_root: bool = True, twist: str = "input",
                 pole_max_twist: float | None = None) -> None:
        check_skeleton(skeleton)
        self._skeleton = skeleton
        self._pose_shapes = pose_shapes(skeleton)
        # The options are checked here as their setters check them, and packed once at the end.
        self._twist = check_twist(twist)
        self._pole_max_twist = None if pole_max_twist is None else _max_step(pole_max_twist, "pole_max_twist")
        self._iterations = check_iterations(iterations)
        self._tolerance = check_nonnegative(tolerance, "tolerance")
        self._max_step = None if max_step is None else _max_step(max_step)
        self._adaptive_step = check_flag(adaptive_step, "adaptive_step")
        self._fixed_root = check_flag(fixed_root, "fixed_root")
        joints, listed = resolve_chain(skeleton, chain)
        self._joints = joints = _read_only(np.ascontiguousarray(joints, dtype=np.int64))
        #: Which of ``joints`` the chain lists (the rest are helpers: they ride along unturned).
        self._listed = listed
        self._weights = _read_only(_chain_weights(skeleton, joints, listed, weights))
        self._base = ancestors_root_first(skeleton, int(joints[0]))
        self.scale_joints = np.concatenate([self._base, joints]).astype(np.int64)
        self._set_limits(limits)
        self._pack_options()

    # Every option is a property: its setter checks the value as the constructor does and packs again what the
    # kernel reads (``_index``, ``_values``, ``_options``), so a solver whose option was set solves exactly as
    # one built with it.
    def _pack_plan(self) -> None:
        """Pack the weights and limits: the kernel's plan and the limited joints a blend clamps."""
        packed = self._packed
        #: The limited joints a blend (weight < 1) clamps again.
        self._blend_limits = blend_limits(self.joints, packed, self._weights > 0.0)
        #: Packed plan (layout in :mod:`kinema._kernels.ccd`): ``[K, B, base, joints, kinds]`` and
        #: ``[weights, limit params, rest rotations]``.
        self._index = np.concatenate([np.array([self.joints.size, self._base.size], dtype=np.int64), self._base,
                                      self.joints, packed.kinds]).astype(np.int64)
        self._values = np.concatenate([self._weights, packed.params.ravel(), packed.rest.ravel()]).astype(np.float64)

    def _pack_options(self) -> None:
        """Pack the kernel's options (slots ``O_*`` in :mod:`kinema._kernels.ccd`) without and with a pole."""
        step = 0.0 if self._max_step is None else self._max_step
        budget = 0.0 if self._pole_max_twist is None else self._pole_max_twist
        self._options = tuple(np.array([self._iterations, has_pole, self._fixed_root, self._adaptive_step,
                                        self._tolerance, step, self._twist == "rest", budget], dtype=np.float64)
                              for has_pole in (False, True))

    iterations = Option(check_iterations, "The most sweeps a solve runs.")
    tolerance = Option(lambda v: check_nonnegative(v, "tolerance"),
                       "A solve stops when the end is this close to the target (``reached`` is "
                       "``error <= tolerance``).")
    max_step = Option(lambda v: None if v is None else _max_step(v),
                      "The cap on each joint's turn per sweep (radians), or None.")
    adaptive_step = Option(lambda v: check_flag(v, "adaptive_step"),
                           "Whether the step cap shrinks as the end closes in (with a ``max_step``).")
    fixed_root = Option(lambda v: check_flag(v, "fixed_root"),
                        "False lets the chain's first joint slide toward a target out of reach.  (A "
                        ":class:`~kinema.Rig` reads it when it is built, for the joints its steps claim: set it "
                        "before.)")
    twist = Option(check_twist, 'The twist policy, ``"input"`` or ``"rest"`` (see :func:`solve_ccd`).')
    pole_max_twist = Option(lambda v: None if v is None else _max_step(v, "pole_max_twist"),
                            "The cap on the pole's twist of each sub-chain in one solve (radians), or None.")

    @property
    def weights(self) -> FloatArray:
        """Each chain joint's weight, one per joint of :attr:`joints` (helpers 0), read-only.

        Set it in any form the constructor takes (one per listed joint, one per chain joint as read here, or
        ``{joint: weight}``; None for all 1)."""
        return self._weights

    @weights.setter
    def weights(self, value: Sequence[float] | Mapping[Any, float] | ArrayLike | None) -> None:
        self._weights = _read_only(_chain_weights(self.skeleton, self.joints, self._listed, value))
        self._pack_plan()

    @property
    def limits(self) -> Mapping[Any, Limit] | None:
        """The joint limits as given (a read-only mapping), or None; set it as the constructor's ``limits``."""
        return None if self._limits is None else MappingProxyType(self._limits)

    @limits.setter
    def limits(self, value: Mapping[Any, Limit] | None) -> None:
        self._set_limits(value)

    def _set_limits(self, limits: Any) -> None:
        """Check and pack ``limits`` (as the constructor does); a refused value leaves the solver as it was."""
        kept = limit_map(limits)  # (a snapshot: the caller may change its mapping)
        self._packed = pack_limits(self.skeleton, self.joints, kept)
        self._limits = kept
        self._pack_plan()

    def solve(self, pose: Pose, target: ArrayLike, *, pole: ArrayLike | None = None, weight: ArrayLike = 1.0,
              out: Pose | None = None) -> SolveResult:
        """Solve one frame or a batch: ``target (*batch, 3)`` world, ``pole (*batch, 3)`` world point or None,
        ``weight (*batch,)`` in [0, 1] (blend of each turned joint's local rotation with the input's, see
        :func:`kinema._solve.blend_rotations`), ``out`` a caller-owned pose of the full batch shape."""
        return self._solve(pose, target, pole, weight, out, self._values)

    def _solve(self, pose: Pose, target: ArrayLike, pole: ArrayLike | None, weight: ArrayLike, out: Pose | None,
               values: FloatArray) -> SolveResult:
        one = check_pose_item(self._skeleton, pose, self.what, self._pose_shapes) and out is None
        tgt = as_float_array(target, "target", (3,))
        pol = None if pole is None else as_float_array(pole, "pole", (3,))
        w = blend_weight(weight)
        if one and w is None and tgt.ndim == 1 and (pol is None or pol.ndim == 1):
            # The per-frame call (one item, no blend): the kernel's rows made directly, not through prepare.
            res, t, r, s = item_pose(pose)
            err, counts = _ONE_ITEM.outputs  # read back as scalars below
            self._run(1, (self._index, values, t, r, s, item_row(tgt), ABSENT_ROW3 if pol is None else item_row(pol),
                          self._options[pol is not None], err, counts), True, pose, tgt, pol)
            return result_one(res, err, self._tolerance, counts, {"joints": self._joints, "moved": counts[2, 0] != 0})
        extras: list[tuple[FloatArray, tuple[int, ...]]] = [(tgt, (3,))]
        if pol is not None:
            extras.append((pol, (3,)))
        if w is not None:
            extras.append((w, ()))
        # the blend reads the input, which out=pose overwrites
        inputs = None if w is None else (pose.rotations.copy(), pose.translations.copy())
        prep = prepare(self.skeleton, pose, extras, out, checked=True, unbatched=one or None)
        n = prep.n
        tgt_f = prep.extras[0]
        pol_f = prep.extras[1] if pol is not None else ABSENT_ROW3
        if prep.batch:
            err = np.empty(n)
            counts = np.empty((3, n), dtype=np.int64)  # sweeps, limit hits, changed
        else:
            err, counts = _ONE_ITEM.outputs  # read back as scalars below
        self._run(n, (self._index, values, prep.t, prep.r, prep.s, tgt_f, pol_f, self._options[pol is not None], err,
                      counts), prep.own, pose, tgt, pol)
        if w is None and not prep.batch:  # one item, no blend
            return result_one(prep.out, err, self._tolerance, counts,
                              {"joints": self.joints, "moved": counts[2, 0] != 0})
        changed = counts[2] != 0
        limits_hit = counts[1]
        if inputs is not None:
            w_f = prep.extras[-1]
            limits_hit = limits_hit + blend_with_input(  # the sliding root's translation too
                prep, inputs, self.joints[self._weights > 0.0], None if self._fixed_root else int(self.joints[0]), w_f,
                self._blend_limits)
            w_n = np.broadcast_to(w_f, (n,))
            # the blended items' errors from their new pose (an item of weight 1 keeps the kernel's, as alone)
            err = np.where(w_n != 1.0, _end_error(self.skeleton, prep.out, int(self.joints[-1]), tgt_f, n), err)
            changed = changed & (w_n > 0.0)
        return result(prep.out, prep.batch, err, err <= self._tolerance, counts[0], limits_hit,
                      {"joints": self.joints, "moved": changed.reshape(prep.batch) if prep.batch else changed[0]})


    def _run(self, n: int, args: tuple[Any, ...], own: bool, pose: Pose, target: FloatArray,
             pole: FloatArray | None) -> None:
        """Run the kernel on ``n`` items of the packed ``args`` (:func:`~kinema._solve.run_driver`); a status
        other than OK raises the error it means."""
        status = run_driver(_kernels().DRIVERS, n, args, own=own)
        if status:
            raise_status(status, self.what, self.skeleton, pose, self.scale_joints, {"target": target, "pole": pole})


A = TypeVar("A", bound=np.ndarray)


def _read_only(a: A) -> A:
    """``a`` made read-only (a solver's packed array handed out: writing it would change nothing)."""
    a.flags.writeable = False
    return a


def _end_error(skeleton: Skeleton, pose: Pose, end: int, target_rows: FloatArray, n: int) -> FloatArray:
    """``(N,)`` world distance from joint ``end`` of ``pose`` to the targets (after a blend moved it)."""
    from .fk import forward_kinematics

    p = forward_kinematics(skeleton, pose).positions[..., end, :].reshape(n, 3)
    return np.asarray(np.linalg.norm(p - target_rows, axis=-1))


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
    twist: str = "input",
    pole_max_twist: float | None = None,
    weight: ArrayLike = 1.0,
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
    0 freezes the joint (no turn, no limit clamp).  For an explicit list the
    weights are the listed joints' (one per listed joint, or a mapping naming
    listed joints); the helpers between them always ride along unturned, and
    giving one a weight raises :class:`~kinema.SolverInputError` (an array of
    one per joint of the full path, helpers included, is taken when the
    helpers' values are 0: what ``CCD.weights`` reads back).  A joint named
    twice in the mapping (by name and by index) raises too.  ``max_step`` (radians)
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
    end lies on the line, so the twist never moves it.  This snaps: a
    chain whose bend is on the far side is turned all the way round in one
    solve, so a chain followed frame by frame can flip.  ``pole_max_twist``
    (radians, default None: no budget) caps the pole's total twist of each
    sub-chain in one solve: a solve keeps the bend side of the pose it
    starts from and moves it at most that far toward the pole, so a chain
    solved frame after frame from the previous result blends onto the pole
    instead of snapping (a few degrees, e.g. ``math.radians(5)``, for
    animation; a single cold solve may then stop short of the pole's plane).

    **Twist.**  ``twist="input"`` (default): every turn is the smallest
    rotation from the given pose, so each bone keeps the twist about its
    own axis it came in with, and warm-started solves can wind it up over
    a loop.  ``twist="rest"``: after the solve every turnable joint's twist
    about its bone (toward its child in the chain) is taken from the rest
    pose relative to its parent
    (:func:`kinema._kernels.quat.qrest_twist`), keeping each bone's world
    direction and so every joint position (limits are applied again after
    it); the result depends only on where the joints end up.  Use
    ``"input"`` when solving from an animated pose each frame (it keeps the
    animation's twist), ``"rest"`` when each frame starts from the previous
    result.

    **Root.**  The first joint never translates with ``fixed_root=True``.
    With ``fixed_root=False``, after each sweep in which the target is out
    of reach (``|target - p_0| > reach``) it slides along ``p_0 -> target``
    by the shortfall ``|target - p_0| - reach``, or by the end's remaining
    miss along that line if that is larger (written into its local
    translation); it never slides while the target is within reach.

    With no limits, weights, ``max_step`` or pole, and ``tolerance=0``, this
    is the plain algorithm of three.js's ``CCDIKSolver`` (iteration = sweeps,
    same order, same 1e-5 skip); three.js does not skip short vectors.

    **Weight and out.**  ``weight (*batch,)`` in [0, 1] blends each turned
    joint's solved local rotation with the input's (slerp; 0 gives the input
    pose, 1 the solve); the reported error is measured after the blend.
    ``out``: a caller-owned pose of the full batch shape (may be ``pose``).

    This is ``CCD(skeleton, chain, ...).solve(pose, target, pole=pole,
    weight=weight, out=out)`` through a bounded cache of prepared solvers.

    Returns a :class:`~kinema.SolveResult`: ``error`` and ``reached``
    (``error <= tolerance``) per batch item, ``iterations`` (sweeps run),
    ``limits_hit``; ``state["joints"]`` is the chain's joint indices and
    ``state["moved"]`` ``(*batch,)`` whether the solve changed the pose.
    """
    solver = SOLVERS.get(CCD, skeleton, (chain, iterations, tolerance, weights, max_step, adaptive_step, limits,
                                         fixed_root, twist, pole_max_twist),
                         (type(chain), type(iterations), type(tolerance), type(weights), type(max_step),
                          type(adaptive_step), type(limits), type(fixed_root), type(twist), type(pole_max_twist)))
    return solver._solve(pose, target, pole, weight, out, solver._values)


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
    twist: str = "input"
    pole_max_twist: float | None = None


_GOAL_KEYS = set(Goal.__dataclass_fields__)


def _as_goal(g: Any, i: int) -> Goal:
    """Goal ``i`` of :func:`solve_chains` (a :class:`Goal` or a dict of its fields), its priority checked."""
    if isinstance(g, Mapping):
        bad = set(g) - _GOAL_KEYS
        if bad:
            raise SolverInputError(f"goal {i}: unknown keys {sorted(bad)}; known: {sorted(_GOAL_KEYS)}")
        if "chain" not in g or "target" not in g:
            raise SolverInputError(f"goal {i}: needs 'chain' and 'target'")
        g = Goal(**g)
    if not isinstance(g, Goal):
        raise SolverInputError(f"goal {i} must be a kinema.Goal or a dict, got {type(g).__name__}")
    if isinstance(g.priority, (bool, np.bool_)) or not isinstance(g.priority, (int, np.integer)):
        raise SolverInputError(f"goal {i}: priority must be an integer, got {g.priority!r}")
    if g.name is not None and not isinstance(g.name, str):  # it labels the goal in messages and the result
        raise SolverInputError(f"goal {i}: name must be a str or None, got {g.name!r}")
    return g


def _goal_solver(skeleton: Skeleton, g: Goal, weights: Any = None) -> CCD:
    """The cached :class:`CCD` solver of one goal's chain and options (``weights`` replacing the goal's own)."""
    w = g.weights if weights is None else weights
    return SOLVERS.get(CCD, skeleton, (g.chain, g.iterations, g.tolerance, w, g.max_step, g.adaptive_step,
                                       g.limits, g.fixed_root, g.twist, g.pole_max_twist))


def solve_chains(skeleton: Skeleton, pose: Pose, goals: Sequence[Goal | Mapping[str, Any]], *,
                 weight: ArrayLike = 1.0, out: Pose | None = None) -> SolveResult:
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

    ``weight (*batch,)`` in [0, 1] blends the final pose's turned joints
    with the input's (as for :func:`solve_ccd`); ``out`` is a caller-owned
    pose of the full batch shape.

    Returns one :class:`~kinema.SolveResult` for the whole solve: ``pose``
    is the final pose; ``reached``, ``error``, ``iterations`` and
    ``limits_hit`` have shape ``(*batch, n_goals)`` in the order goals were
    given, with errors measured on the final pose.  ``state``:

    * ``"goal_errors"``: ``(*batch, n_goals)`` (the same as ``error``, in the
      place every multi-goal solver reports it);
    * ``"names"``: goal names;  ``"order"``: goal indices in solve order;
    * ``"moved"``: ``(*batch,)`` whether the solve changed the pose;
    * ``"moved_joints"``: per goal, joint indices whose rotation that goal
      changed (in any batch item); ``"moved_names"``: the same as names;
    * ``"frozen"``: per goal, joint indices of its chain frozen by higher goals.
    """
    from .fk import forward_kinematics

    check_skeleton(skeleton, "solve_chains")
    check_pose(skeleton, pose, "solve_chains")
    if out is not None and not isinstance(out, Pose):
        raise SolverInputError(f"solve_chains: out must be a kinema.Pose (or None), got {type(out).__name__}")
    if not is_sequence(goals):
        raise SolverInputError(f"goals must be a sequence of kinema.Goal or dicts, got {type(goals).__name__}")
    gl = [_as_goal(g, i) for i, g in enumerate(goals)]
    if not gl:
        raise SolverInputError("solve_chains needs at least one goal")
    names = [g.name if g.name is not None else f"goal{i}" for i, g in enumerate(gl)]
    order = sorted(range(len(gl)), key=lambda i: -int(gl[i].priority))
    solvers = [_goal_solver(skeleton, g) for g in gl]
    targets = [as_target(g.target, f"goal {names[i]!r} target") for i, g in enumerate(gl)]
    poles = [None if g.pole is None else as_target(g.pole, f"goal {names[i]!r} pole") for i, g in enumerate(gl)]
    w = blend_weight(weight)
    batch = broadcast_batch(pose.batch_shape, *[t.shape[:-1] for t in targets], *(() if w is None else (w.shape,)))
    for i, pl in enumerate(poles):  # poles broadcast into the batch like targets (and may widen it)
        if pl is not None:
            try:
                batch = broadcast_batch(batch, pl.shape[:-1])
            except ShapeError:
                raise ShapeError(f"goal {names[i]!r} pole", f"(*batch, 3) with batch dimensions that broadcast "
                                 f"with the solve's {batch}", tuple(pl.shape)) from None
    # A full copy of the input, never written: where the solve starts, what a blend goes back to and what "moved"
    # compares with (``out`` is written only at the end: it may be the pose, or hold the targets).
    inp = pose.broadcast(batch)
    # The ownership rule as a Rig: each goal's solver has the joints earlier goals own frozen (weight 0),
    # so its step moves only unowned joints and the Rig's conflict check holds by construction.
    owned = np.zeros(skeleton.n_joints, dtype=bool)
    frozen: list[IntArray] = [np.zeros(0, dtype=np.int64)] * len(gl)
    steps: list[Step] = []
    for gi in order:
        base = solvers[gi]
        joints = base.joints
        fz = owned[joints]
        frozen[gi] = joints[fz]
        solver = base if not fz.any() else _goal_solver(skeleton, gl[gi], np.where(fz, 0.0, base.weights))
        turning = [int(j) for j, wj in zip(joints[:-1], solver.weights[:-1], strict=True) if wj > 0.0]
        steps.append(Step(str(gi), solver, joints=turning, options={"pole": poles[gi]}))
        for j in turning:
            owned[j] = True
            owned[list(skeleton.ancestors(j))] = True
    rig_res = Rig(skeleton, steps).solve(inp, {str(gi): targets[gi] for gi in order})
    n_goals = len(gl)
    iters = np.zeros(batch + (n_goals,), dtype=np.int64)
    hits = np.zeros(batch + (n_goals,), dtype=np.int64)
    moved: list[IntArray] = [np.zeros(0, dtype=np.int64)] * len(gl)
    before = inp.rotations
    for gi in order:
        step_res = rig_res.steps[str(gi)]
        iters[..., gi] = step_res.iterations
        hits[..., gi] = step_res.limits_hit
        after = np.broadcast_to(step_res.pose.rotations, before.shape)
        changed = np.any(before != after, axis=-1).reshape(-1, skeleton.n_joints).any(axis=0)
        moved[gi] = np.nonzero(changed)[0].astype(np.int64)
        before = after
    cur = rig_res.pose
    if w is not None:
        nj = skeleton.n_joints
        n = int(np.prod(batch)) if batch else 1
        r_flat = cur.rotations.reshape((n, nj, 4))
        t_flat = cur.translations.reshape((n, nj, 3))
        t_in = inp.translations.reshape((n, nj, 3))
        turned = np.unique(np.concatenate([np.zeros(0, dtype=np.int64), *moved]))
        w_flat = np.ascontiguousarray(np.broadcast_to(w, batch)).reshape(-1)
        blend_rotations(r_flat, inp.rotations.reshape((n, nj, 4)), turned, w_flat)
        # the joints a goal translated (a root with fixed_root=False slid), linearly (see blend_with_input)
        slid = np.nonzero(np.any(t_flat != t_in, axis=(0, 2)))[0].astype(np.int64)
        if slid.size:
            blend_translations(t_flat, t_in, slid, w_flat)
        for gi in order:  # each goal's limited joints that the blend moved, clamped again (see blend_with_input)
            limited = tuple(lim for lim in solvers[gi]._blend_limits if lim[0] in moved[gi])
            hits[..., gi] += clamp_blended(r_flat, w_flat, limited).reshape(batch)
    fk = forward_kinematics(skeleton, cur)
    err = np.zeros(batch + (n_goals,))
    for gi in range(n_goals):
        end = int(solvers[gi].joints[-1])
        err[..., gi] = np.linalg.norm(fk.positions[..., end, :] - targets[gi], axis=-1)
    tols = np.array([sv.tolerance for sv in solvers])
    any_moved = (np.any(inp.rotations != cur.rotations, axis=(-1, -2))
                 | np.any(inp.translations != cur.translations, axis=(-1, -2)))
    if out is not None:  # last: a target may be a view into out
        cur = prepare(skeleton, cur, (), out).out
    return SolveResult(
        pose=cur,
        reached=err <= tols,
        error=err,
        iterations=iters,
        limits_hit=hits,
        state={
            "goal_errors": err,
            "names": names,
            "order": order,
            "moved": any_moved,
            "moved_joints": moved,
            "moved_names": [tuple(skeleton.names[j] for j in m) for m in moved],
            "frozen": frozen,
        },
    )
