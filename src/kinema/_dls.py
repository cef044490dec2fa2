"""Full-body IK: damped least squares over several goals, with strict priorities and joint limits.

:class:`DLS` validates and packs a problem once (skeleton, goals, moving
joints, limits, options); :meth:`DLS.solve` solves one frame or a batch.
:func:`solve_dls` is ``DLS(...).solve(...)``.  The maths is in
:mod:`kinema._kernels.dls`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._solve import blend_weight, check_iterations, check_uniform_scale, kernel_loader, prepare, run_driver
from ._types import FloatArray, IntArray
from ._validate import is_unordered, positive_number, require_finite
from .errors import ShapeError, SolverInputError
from .goals import (
    GOAL_TYPES,
    LookAtGoal,
    OrientationGoal,
    PoseGoal,
    PositionGoal,
    as_input_array,
    goal_joint,
    goal_target,
    unit_quaternions,
)
from .limits import LIMIT_HINGE, LIMIT_PARAMS, Limit, pack_limits
from .pose import Pose
from .result import SolveResult
from .skeleton import Skeleton, check_skeleton

__all__ = ["DLS", "solve_dls"]


#: Default most iterations (steps tried); a reachable goal set usually converges in under 20.
DEFAULT_ITERATIONS = 100
#: Default tolerance: a goal within this error (length units or radians) is reached.
DEFAULT_TOLERANCE = 1e-6
#: Default smallest damping (error units per radian, lengths in the item's own unit, see
#: :mod:`kinema._kernels.dls`): small enough that the last steps are Gauss-Newton steps (quadratic
#: convergence), large enough to keep steps bounded near singular poses.
DEFAULT_DAMPING = 1e-3

_kernels = kernel_loader("dls")

# Mirrors of the kernel's plan constants (the kernel module imports numba; these are checked against it
# in the tests).
_GOAL_KIND = {PositionGoal: 0, OrientationGoal: 1, LookAtGoal: 2}
_P_HEADER = 8
_AFFECTS_SELF = 1
_AFFECTS_ANCESTOR = 2
_O_ITERATIONS, _O_TOLERANCE, _O_DAMPING, _O_SIZE = 0, 1, 2, 3
_DAMPING_MAX = 1e8
_D_STATUS, _D_ERROR, _D_ITERATIONS, _D_LIMITS_HIT, _D_POSE_ERROR, _D_HEADER = 0, 1, 2, 3, 4, 5


#: The default blend weight (solved pose only), a 0-d array as :func:`~kinema._solve.check_weight` gives.
_FULL_WEIGHT = np.ones(())


class DLS:
    """A prepared full-body solver: several goals, priorities, limits, one frame or a batch per call.

    * ``skeleton``: the :class:`~kinema.Skeleton`.
    * ``goals``: a sequence of :mod:`kinema.goals` objects (at least one
      that is not a :class:`~kinema.goals.PoseGoal`; at most one pose goal).
    * ``joints``: the joints the solver may turn (names or indices); None:
      every ancestor of a goal joint, plus the joint itself for orientation
      and look-at goals.  Each listed joint must move some goal.
    * ``root_translation``: the root (hips) may translate too (all goal
      joints must then hang below one root).
    * ``iterations`` (steps tried, >= 0), ``tolerance`` (a goal within it is
      reached; length units or radians), ``damping`` (the smallest
      Levenberg-Marquardt damping; it adapts from there).
    * ``limits``: ``{joint: Hinge | SwingTwist | EulerRange}``
      (:mod:`kinema.limits`); they hold after every iteration.  A joint with
      a :class:`~kinema.limits.Hinge` turns about its hinge axis only (one
      degree of freedom); other joints are ball joints.

    Configuration errors raise here (:class:`~kinema.SolverInputError`,
    :class:`~kinema.BoneNotFoundError`).  The goals' targets are the
    defaults of :meth:`solve`.
    """

    def __init__(self, skeleton: Skeleton, goals: Sequence[Any], *, joints: Sequence[Any] | None = None,
                 root_translation: bool = False, iterations: int = DEFAULT_ITERATIONS,
                 tolerance: float = DEFAULT_TOLERANCE, damping: float = DEFAULT_DAMPING,
                 limits: Mapping[Any, Limit] | None = None) -> None:
        check_skeleton(skeleton)
        if isinstance(goals, (str, bytes, Mapping)) or not isinstance(goals, Sequence):
            why = " (its order is arbitrary: give a list or a tuple)" if is_unordered(goals) else ""
            raise SolverInputError(f"goals must be a sequence of kinema.goals objects, got {type(goals).__name__}"
                                   f"{why}")
        goals = list(goals)
        for n, g in enumerate(goals):
            if not isinstance(g, GOAL_TYPES):
                raise SolverInputError(f"goal {n} is not a PositionGoal, OrientationGoal, LookAtGoal or PoseGoal: "
                                       f"{g!r}")
        pose_idx = [n for n, g in enumerate(goals) if isinstance(g, PoseGoal)]
        if len(pose_idx) > 1:
            raise SolverInputError("goals hold more than one PoseGoal")
        hard = [n for n, g in enumerate(goals) if not isinstance(g, PoseGoal)]
        if not hard:
            raise SolverInputError("goals need at least one PositionGoal, OrientationGoal or LookAtGoal")
        if not isinstance(root_translation, (bool, np.bool_)):
            raise SolverInputError(f"root_translation must be True or False, got {root_translation!r}")
        self.skeleton = skeleton
        self.goals: tuple[Any, ...] = tuple(goals)
        self.root_translation = bool(root_translation)
        self.iterations = check_iterations(iterations)
        self.tolerance = positive_number(tolerance, "tolerance")
        self.damping = positive_number(damping, "damping")
        if self.damping >= _DAMPING_MAX:  # the kernel stops the solve once the damping passes this
            raise SolverInputError(f"damping must be below {_DAMPING_MAX:g}, got {damping!r}")
        parents = skeleton.parents
        gj = {n: goal_joint(skeleton, goals[n]) for n in hard}

        # joints whose world transform the solve needs: the goal joints and all their ancestors (parents first)
        fk_set: set[int] = set()
        for j in gj.values():
            fk_set.add(j)
            fk_set.update(skeleton.ancestors(j))
        fk_joints = np.array(sorted(fk_set), dtype=np.int64)
        fk_index = {int(j): f for f, j in enumerate(fk_joints)}
        fk_parent = np.array([fk_index[int(parents[j])] if parents[j] >= 0 else -1 for j in fk_joints],
                             dtype=np.int64)

        def turns(k: int, n: int) -> int:
            """How joint ``k`` moves goal ``n``'s joint (0: not, 1: turns it in place, 2: moves and turns it)."""
            j = gj[n]
            if k == j:
                return 0 if isinstance(goals[n], PositionGoal) else _AFFECTS_SELF
            return _AFFECTS_ANCESTOR if k in skeleton.ancestors(j) else 0

        if joints is None:
            moving = sorted(k for k in fk_set if any(turns(k, n) for n in hard))
        else:
            if isinstance(joints, (str, int, np.integer)) or not isinstance(joints, Sequence):
                raise SolverInputError(f"joints must be a sequence of joint names or indices, got {joints!r}")
            from ._validate import resolve_joint

            listed = [resolve_joint(skeleton, j) for j in joints]
            if len(set(listed)) != len(listed):
                raise SolverInputError("joints names a joint twice")
            for k in listed:
                if not any(turns(k, n) for n in hard):
                    raise SolverInputError(f"joint {skeleton.names[k]!r} moves none of the goals")
            moving = sorted(listed)
        root_fk = -1
        if self.root_translation:
            roots = [int(j) for j in fk_joints if parents[j] < 0]
            if len(roots) != 1:
                raise SolverInputError("root_translation needs every goal joint below one root")
            root_fk = fk_index[roots[0]]
        if not moving and not self.root_translation:
            raise SolverInputError("no joint can move the goals (every goal joint is a root, or joints is empty)")
        mov = np.array(moving, dtype=np.int64)
        self.joints: IntArray = mov
        packed = pack_limits(skeleton, mov, limits)
        ndof_k = np.where(packed.kinds == LIMIT_HINGE, 1, 3).astype(np.int64)
        dof0 = np.concatenate([[0], np.cumsum(ndof_k)[:-1]]).astype(np.int64) if mov.size else np.zeros(0, np.int64)
        n_dof = int(ndof_k.sum()) + (3 if self.root_translation else 0)
        dof_axis = np.zeros((mov.size, 3))
        hinge = packed.kinds == LIMIT_HINGE
        dof_axis[hinge] = packed.params[hinge, 0:3]

        # canonical goal order: levels by priority (most important first), then kind, joint, weight, axis and
        # target, so the order goals are listed in does not change the numbers (only identical goals tie)
        def key(n: int) -> tuple[Any, ...]:
            g = goals[n]
            axis = g.axis if isinstance(g, LookAtGoal) else (0.0, 0.0, 0.0)
            target = goal_target(g)
            return (-g.priority, _GOAL_KIND[type(g)], gj[n], g.weight, axis, target.shape,
                    np.ascontiguousarray(target, dtype=np.float64).tobytes(), n)

        order = sorted(hard, key=key)
        self._order = order  # plan goal p is user goal order[p]
        #: The per-item inputs of a solve in plan order, for its broadcast error: the goals' own targets, the weight.
        self._input_names = (*[f"goals[{n}] target" for n in order], "weight")
        self._pose_goal = pose_idx[0] if pose_idx else -1
        n_goals = len(order)
        prios = [goals[n].priority for n in order]
        level_start = [0] + [p for p in range(1, n_goals) if prios[p] != prios[p - 1]] + [n_goals]
        affects = np.array([[turns(int(k), n) for n in order] for k in mov], dtype=np.int64).reshape(-1)
        header = np.zeros(_P_HEADER, dtype=np.int64)
        header[:7] = [fk_joints.size, mov.size, n_goals, n_dof, root_fk, len(level_start) - 1,
                      1 if pose_idx else 0]
        self._plan_i = np.ascontiguousarray(np.concatenate([
            header, fk_joints, fk_parent, np.array([fk_index[int(k)] for k in mov], dtype=np.int64), dof0, ndof_k,
            packed.kinds, np.array([_GOAL_KIND[type(goals[n])] for n in order], dtype=np.int64),
            np.array([fk_index[gj[n]] for n in order], dtype=np.int64), np.array(level_start, dtype=np.int64),
            affects]).astype(np.int64))
        goal_axis = np.array([goals[n].axis if isinstance(goals[n], LookAtGoal) else (0.0, 0.0, 0.0)
                              for n in order], dtype=np.float64).reshape(-1)
        pose_w = goals[pose_idx[0]].weight if pose_idx else 0.0
        # Weights count within a level (sum of weight x error^2 over its goals): relative to the level's largest,
        # so the level's scale is 1 against the damping (a lone goal of weight 1e-10 would otherwise be damped
        # to a standstill, 10 cm short of a reachable target).
        weights = np.array([goals[n].weight for n in order], dtype=np.float64)
        for lv in range(len(level_start) - 1):
            lo, hi = level_start[lv], level_start[lv + 1]
            weights[lo:hi] /= weights[lo:hi].max()
        self._plan_f = np.ascontiguousarray(np.concatenate([
            np.sqrt(weights), goal_axis, [pose_w],
            dof_axis.reshape(-1), packed.params.reshape(-1), packed.rest.reshape(-1)]).astype(np.float64))
        assert packed.params.shape[1] == LIMIT_PARAMS
        opts = np.zeros(_O_SIZE)
        opts[_O_ITERATIONS] = self.iterations
        opts[_O_TOLERANCE] = self.tolerance
        opts[_O_DAMPING] = self.damping
        self._opts = opts
        self._fk_joints = fk_joints
        self._goal_names = tuple("pose" if isinstance(g, PoseGoal) else skeleton.names[gj[n]]
                                 for n, g in enumerate(goals))
        self._targets = [goal_target(goals[n]) for n in order]
        self._order_arr = np.asarray(order, dtype=np.int64)
        self._joint_names = tuple(skeleton.names[int(j)] for j in mov)

    @property
    def n_goals(self) -> int:
        """Number of goals, in the order given (the pose goal included)."""
        return len(self.goals)

    @property
    def moved_joints(self) -> tuple[int, ...]:
        """Every joint this solver may turn (a :class:`~kinema.Rig` step's claim)."""
        return tuple(int(j) for j in self.joints)

    def validate(self, pose: Pose) -> None:
        """Check ``pose`` against this solver: a :class:`~kinema.Pose` of the skeleton's joint count, finite,
        with uniform scale on the joints the solve reads; raises :class:`~kinema.ShapeError` or
        :class:`~kinema.SolverInputError`."""
        if not isinstance(pose, Pose):
            raise SolverInputError(f"pose must be a kinema.Pose, got {type(pose).__name__}")
        nj = self.skeleton.n_joints
        if pose.n_joints != nj:
            raise ShapeError("pose", f"(..., {nj}, k) for a skeleton of {nj} joints", f"{pose.n_joints} joints")
        for name, a in (("pose translations", pose.translations), ("pose rotations", pose.rotations),
                        ("pose scales", pose.scales)):
            if a.dtype != np.float64:
                raise ShapeError(name, "float64 data", str(a.dtype))
            if not np.isfinite(a).all():
                require_finite(a, name, SolverInputError)  # raises, saying where
        sc = pose.scales[..., self._fk_joints, :]
        if not ((sc[..., 0] == sc[..., 1]).all() and (sc[..., 0] == sc[..., 2]).all()):
            check_uniform_scale(self.skeleton, pose, self._fk_joints, "solve_dls")  # within its tolerance?

    def _goal_targets(self, targets: Sequence[Any] | None) -> list[FloatArray]:
        """Targets in plan order: the goals' own, or ``targets`` (goal order; None keeps a goal's own)."""
        if targets is None:
            return self._targets
        if isinstance(targets, (str, bytes, Mapping, set, frozenset)) or not isinstance(targets, Sequence):
            raise SolverInputError(f"targets must be a sequence with one entry per goal, got {type(targets).__name__}")
        if len(targets) != len(self.goals):
            raise SolverInputError(f"targets has {len(targets)} entries for {len(self.goals)} goals")
        if self._pose_goal >= 0 and targets[self._pose_goal] is not None:
            raise SolverInputError(f"targets[{self._pose_goal}] is for the PoseGoal and must be None")
        out = []
        for p, n in enumerate(self._order):
            x = targets[n]
            if x is None:
                out.append(self._targets[p])
            elif isinstance(self.goals[n], OrientationGoal):
                q = as_input_array(x, f"targets[{n}]", (4,))
                out.append(unit_quaternions(q, f"targets[{n}]"))
            else:
                out.append(as_input_array(x, f"targets[{n}]", (3,)))
        return out

    def solve(self, pose: Pose, targets: Sequence[Any] | None = None, *, weight: ArrayLike = 1.0,
              out: Pose | None = None) -> SolveResult:
        """Solve ``pose (*batch, J, ...)`` for the goals; one frame or a batch.

        * ``targets``: one entry per goal in goal order, replacing the goals'
          own targets for this call (None keeps a goal's own; the pose
          goal's entry must be None).  Targets broadcast against the pose's
          batch.
        * ``weight``: ``(*batch,)`` in [0, 1], each item's blend of the solved
          pose with the input (0: the input as it was, no step taken; 1: solved), applied to the moving
          joints (slerp) and the root; it broadcasts with the pose and the
          targets, as every solver's ``weight``.
        * ``out``: a pose to write the result into (full batch shape,
          C-contiguous); may be ``pose`` itself.

        Returns a :class:`~kinema.SolveResult`: ``error`` the largest goal
        error (the pose goal aside), ``reached`` every such goal within
        tolerance, ``iterations``, ``limits_hit`` (clamps that changed a
        rotation), and ``state``:

        * ``"goal_errors"`` ``(*batch, G)`` per goal in goal order (length
          units for positions, radians for orientations and look-ats, the
          largest joint angle away from the input for the pose goal);
        * ``"goal_reached"`` ``(*batch, G)`` bool; ``"goals"``: the goal joints' names (``"pose"``);
        * ``"at_limit"`` ``(*batch, K)`` bool: moving joints on their limit in
          the returned pose (within 1e-6 rad of it, after any blend);
          ``"joints"``: the moving joints' names;
        * ``"status"`` ``(*batch,)`` int: 0 (a solve that overflows float64,
          with coordinates or scales near 1e150 or beyond, raises
          :class:`~kinema.SolverInputError` instead);
        * ``"moved"`` ``(*batch,)`` bool: whether the solve changed the pose
          (any rotation or translation differs from the input's), as for every
          solver.
        """
        self.validate(pose)
        w = blend_weight(weight)
        tg = self._goal_targets(targets)
        extras: list[tuple[FloatArray, tuple[int, ...]]] = [(a, (a.shape[-1],)) for a in tg]
        extras.append((_FULL_WEIGHT if w is None else w, ()))
        # The input as given, for state["moved"] (kept aside when the output overwrites it: out=pose, or another
        # Pose over the same arrays).
        aliased = out is not None and isinstance(out, Pose) and (
            np.may_share_memory(out.rotations, pose.rotations) or np.may_share_memory(out.translations,
                                                                                      pose.translations))
        r_in, t_in = (pose.rotations.copy(), pose.translations.copy()) if aliased else \
            (pose.rotations, pose.translations)
        names = self._input_names if targets is None else \
            (*[f"goals[{n}] target" if targets[n] is None else f"targets[{n}]" for n in self._order], "weight")
        prep = prepare(self.skeleton, pose, extras, out, rotations_only=not self.root_translation, names=names)
        n = prep.n
        n_goals = len(self._order)
        goal_data = np.zeros((n, n_goals, 8))
        for p, a in enumerate(prep.extras[:-1]):
            goal_data[:, p, : a.shape[1]] = a
        k = _kernels()
        diag = np.zeros((n, k.diag_size(self._plan_i)))
        run_driver(k.DRIVERS, n, (self._plan_i, self._plan_f, self._opts, prep.t, prep.r, prep.s, goal_data,
                                  prep.extras[-1], diag), own=prep.own)
        bad = np.nonzero(diag[:, _D_STATUS] != 0.0)[0]
        if bad.size:  # an item's solve overflowed (the kernel gave its input back): refused, as every solver does
            where = f" (batch item {np.unravel_index(int(bad[0]), prep.batch)})" if prep.batch else ""
            raise SolverInputError(f"solve_dls: the solve overflowed float64{where}: the pose's or the "
                                   "targets' values are too large (coordinates or scales near 1e150 or beyond)")
        res = self._result(prep.out, prep.batch, diag)
        res.state["moved"] = _changed(prep.out.rotations, r_in) | _changed(prep.out.translations, t_in)
        return res

    def _result(self, out_pose: Pose, batch: tuple[int, ...], diag: FloatArray) -> SolveResult:
        n_goals = len(self._order)
        n = diag.shape[0]
        h = _D_HEADER
        order = self._order_arr
        gerr = np.empty((n, len(self.goals)))
        greached = np.empty((n, len(self.goals)), dtype=bool)
        gerr[:, order] = diag[:, h:h + n_goals]
        greached[:, order] = diag[:, h + n_goals:h + 2 * n_goals] != 0.0
        if self._pose_goal >= 0:
            gerr[:, self._pose_goal] = diag[:, _D_POSE_ERROR]
            greached[:, self._pose_goal] = diag[:, _D_POSE_ERROR] <= self.tolerance
        at_limit = diag[:, h + 2 * n_goals:h + 2 * n_goals + self.joints.size] != 0.0
        counts = diag[:, [_D_ITERATIONS, _D_LIMITS_HIT, _D_STATUS]].astype(np.int64)
        reached = (diag[:, h + n_goals:h + 2 * n_goals] != 0.0).all(axis=1)
        if not batch:  # one solve: numpy scalars and (G,) / (K,) arrays
            return SolveResult._trusted(out_pose, reached[0], diag[0, _D_ERROR], counts[0, 0], counts[0, 1], {
                "goal_errors": gerr[0], "goal_reached": greached[0], "goals": self._goal_names,
                "at_limit": at_limit[0], "joints": self._joint_names, "status": counts[0, 2]})
        return SolveResult._trusted(
            out_pose, reached.reshape(batch), diag[:, _D_ERROR].reshape(batch), counts[:, 0].reshape(batch),
            counts[:, 1].reshape(batch), {
                "goal_errors": gerr.reshape(batch + gerr.shape[1:]),
                "goal_reached": greached.reshape(batch + greached.shape[1:]),
                "goals": self._goal_names,
                "at_limit": at_limit.reshape(batch + at_limit.shape[1:]),
                "joints": self._joint_names,
                "status": counts[:, 2].reshape(batch),
            })


def _changed(after: FloatArray, before: FloatArray) -> NDArray[np.bool_]:
    """``(*batch,)`` whether any value of ``after (*batch, J, k)`` differs from ``before`` (broadcast to it)."""
    return np.any(after != before, axis=(-2, -1))


def solve_dls(skeleton: Skeleton, pose: Pose, goals: Sequence[Any], *, joints: Sequence[Any] | None = None,
              root_translation: bool = False, iterations: int = DEFAULT_ITERATIONS,
              tolerance: float = DEFAULT_TOLERANCE, damping: float = DEFAULT_DAMPING,
              limits: Mapping[Any, Limit] | None = None, weight: ArrayLike = 1.0,
              out: Pose | None = None) -> SolveResult:
    """Full-body IK by damped least squares: :class:`DLS` ``(skeleton, goals, ...).solve(pose, weight=, out=)``.

    See :class:`DLS` for the arguments and :meth:`DLS.solve` for the result.
    For per-frame use build a :class:`DLS` once and pass ``targets`` to
    :meth:`DLS.solve`.
    """
    return DLS(skeleton, goals, joints=joints, root_translation=root_translation, iterations=iterations,
               tolerance=tolerance, damping=damping, limits=limits).solve(pose, weight=weight, out=out)
