"""A rig: prepared solvers layered, in order, over an animated pose.

A :class:`Rig` holds a list of :class:`Step` objects, each a named prepared
solver (:class:`~kinema.TwoBone`, :class:`~kinema.CCD`, :class:`~kinema.FABRIK`,
:class:`~kinema.FABRIKTree`, or any object with the same ``solve`` call) with
the joints it may move and a blend weight.  :meth:`Rig.solve` runs the steps
in their listed order, each on the pose the previous ones left, for one frame
or a batch of frames::

    rig = kinema.Rig(skeleton, [
        kinema.Step("left_leg", kinema.TwoBone(skeleton, ("left_hip", "left_knee", "left_ankle"))),
        kinema.Step("right_leg", kinema.TwoBone(skeleton, ("right_hip", "right_knee", "right_ankle"))),
        kinema.Step("spine", kinema.CCD(skeleton, ("chest", "neck")), weight=0.5),
    ])
    res = rig.solve(animated_pose, {"left_leg": foot_l, "right_leg": foot_r, "spine": look})
    res.pose, res.steps["spine"].error

**Ownership.**  A step *claims* the joints it may move.  A later step may not
move a joint an earlier step claims, nor an ancestor of an earlier step's
joints (that would carry the earlier step's end away from its target), unless
it says ``layer=True`` (it deliberately works on top of the earlier result).
Conflicts are refused when the rig is built, naming the steps and the joint.

**Errors.**  By default a step whose solve raises stops the rig (the error
propagates).  An interactive tool that must keep going passes
``errors="skip"``: a failing step then leaves the pose as the steps before it
left it, and its :class:`~kinema.KinemaError` is in :attr:`RigResult.errors`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._solve import check_pose, check_pose_finite, check_weight
from ._validate import as_float_scalar, is_sequence, resolve_joint
from .errors import KinemaError, SolverInputError
from .pose import Pose
from .result import SolveResult
from .skeleton import Skeleton

__all__ = ["Step", "Rig", "RigResult"]

#: What :meth:`Rig.solve` does when a step's solve raises a :class:`~kinema.KinemaError`.
ERROR_POLICIES = ("raise", "skip")
#: Keywords the rig passes to every step's ``solve`` itself (a step's ``options`` may not hold them).
RIG_KEYWORDS = ("weight", "out")


@dataclass(frozen=True)
class Step:
    """One step of a :class:`Rig`.

    * ``name``: the key of its target in :meth:`Rig.solve` and of its result.
    * ``solver``: a prepared solver (``solve(pose, target, *, weight=..., out=...)``).
    * ``weight``: blend of this step's result with the pose it started from, in [0, 1].
    * ``joints``: the joints it may move (names or indices); default: the
      solver's ``moved_joints`` (its joints without the end joint(s) it aims;
      every joint a :class:`~kinema.DLS` may turn).
    * ``layer``: it may move joints claimed by earlier steps (it layers on top).
    * ``options``: extra keyword arguments for every ``solve`` call of this
      step (``{"pole": ...}``, ``{"end_rotation": ...}``): keywords its
      ``solve`` takes, other than ``weight`` and ``out`` (the rig's own);
      :class:`Rig` refuses others when it is built.
    """

    name: str
    solver: Any
    weight: float = 1.0
    joints: Sequence[Any] | None = None
    layer: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RigResult:
    """What :meth:`Rig.solve` returns.

    * ``pose``: the final pose;
    * ``steps``: each step's :class:`~kinema.SolveResult` by name (steps that ran);
    * ``errors``: with ``errors="skip"``, the error of each step whose solve raised (it left the pose as it was).
    """

    pose: Pose
    steps: dict[str, SolveResult]
    errors: dict[str, KinemaError] = field(default_factory=dict)

    @property
    def reached(self) -> NDArray[np.bool_]:
        """``(*batch,)`` whether every step reached its target (every goal of a multi-goal step;
        False everywhere when a step failed with ``errors="skip"``)."""
        out = np.full(self.pose.batch_shape, not self.errors, dtype=bool)
        for r in self.steps.values():
            f = np.asarray(r.reached)
            out &= f if f.ndim == out.ndim else f.all(axis=-1)
        return out


class Rig:
    """Prepared solvers composed in order over an input pose (see the module docstring)."""

    def __init__(self, skeleton: Skeleton, steps: Sequence[Step]) -> None:
        if not isinstance(skeleton, Skeleton):
            raise SolverInputError(f"skeleton must be a kinema.Skeleton, got {type(skeleton).__name__}")
        self.skeleton = skeleton
        if not is_sequence(steps):
            raise SolverInputError(f"steps must be a sequence of kinema.Step, got {type(steps).__name__}")
        self.steps = tuple(steps)
        if not self.steps:
            raise SolverInputError("a rig needs at least one step")
        for step in self.steps:
            if not isinstance(step, Step):
                raise SolverInputError(f"rig steps must be kinema.Step objects, got {type(step).__name__}")
            _check_step(step)
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise SolverInputError(f"step names must be unique, got {names}")
        claimed: dict[int, str] = {}  # joint -> the step that claims it
        above: dict[int, str] = {}  # ancestors of claimed joints -> the step they would disturb
        self.moved: dict[str, tuple[int, ...]] = {}
        for step in self.steps:
            if getattr(step.solver, "skeleton", skeleton) is not skeleton:
                raise SolverInputError(f"step {step.name!r}: its solver was built for another skeleton")
            w = as_float_scalar(step.weight, f"step {step.name!r}: weight")
            if not 0.0 <= w <= 1.0:
                raise SolverInputError(f"step {step.name!r}: weight must be in [0, 1], got {step.weight!r}")
            if step.joints is not None and not is_sequence(step.joints):
                raise SolverInputError(f"step {step.name!r}: joints must be a sequence of joints, got {step.joints!r}")
            if step.joints is None and not hasattr(step.solver, "moved_joints"):
                raise SolverInputError(f"step {step.name!r}: its solver ({type(step.solver).__name__}) does not say "
                                       "which joints it moves (moved_joints): give the step joints=[...]")
            moved = (tuple(resolve_joint(skeleton, j) for j in step.joints) if step.joints is not None
                     else tuple(int(j) for j in step.solver.moved_joints))
            if not step.layer:
                for j in moved:
                    owner = claimed.get(j) or above.get(j)
                    if owner is not None:
                        raise SolverInputError(
                            f"steps {owner!r} and {step.name!r} both move joint {skeleton.names[j]!r} "
                            f"(or {step.name!r} moves an ancestor of {owner!r}'s joints); order them "
                            f"differently or give {step.name!r} layer=True")
            for j in moved:
                claimed.setdefault(j, step.name)
                for a in skeleton.ancestors(j):
                    above.setdefault(int(a), step.name)
            self.moved[step.name] = moved

    def solve(self, pose: Pose, targets: Mapping[str, ArrayLike], *, weights: Mapping[str, ArrayLike] | None = None,
              out: Pose | None = None, errors: str = "raise") -> RigResult:
        """Run every step in order on ``pose`` (one frame or a batch).

        ``targets``: ``{step name: target}`` (each in the form its solver's
        ``solve`` takes, with any batch dimensions); a step without a target is
        skipped.  ``weights``: per-call blend weights ``{step name: (*batch,)}``
        that multiply the steps' own.  The input pose is never written; the
        result is a new pose, or ``out``.  ``errors``: ``"raise"`` (a failing
        step's error propagates) or ``"skip"`` (it is recorded in
        :attr:`RigResult.errors` and the step leaves the pose as it was).
        """
        if not isinstance(errors, str) or errors not in ERROR_POLICIES:
            raise SolverInputError(f"errors must be one of {ERROR_POLICIES}, got {errors!r}")
        check_pose(self.skeleton, pose, "Rig.solve")
        if out is not None and not isinstance(out, Pose):
            raise SolverInputError(f"Rig.solve: out must be a kinema.Pose, got {type(out).__name__}")
        for name, given in (("targets", targets), ("weights", {} if weights is None else weights)):
            if not isinstance(given, Mapping):
                raise SolverInputError(f"{name} must be a mapping {{step name: value}}, got {type(given).__name__}")
        unknown = set(targets) - {s.name for s in self.steps}
        if unknown:
            raise SolverInputError(f"targets name unknown steps {sorted(unknown)}; steps: "
                                   f"{[s.name for s in self.steps]}")
        unknown = set(weights or {}) - {s.name for s in self.steps}
        if unknown:
            raise SolverInputError(f"weights name unknown steps {sorted(unknown)}")
        cur = pose
        results: dict[str, SolveResult] = {}
        failed: dict[str, KinemaError] = {}
        for step in self.steps:
            if step.name not in targets:
                continue
            w: Any = step.weight
            if weights is not None and step.name in weights:
                w = check_weight(weights[step.name]) * step.weight
            try:
                res = step.solver.solve(cur, targets[step.name], weight=w, **dict(step.options))
            except KinemaError as exc:
                if errors == "raise":
                    raise
                failed[step.name] = exc
                continue
            results[step.name] = res
            cur = res.pose
        if cur is pose:
            # no step solved (none targeted, or every one skipped): the pose was checked by no solver
            check_pose_finite(pose, "Rig.solve")
        if out is not None:
            from ._solve import prepare

            cur = prepare(self.skeleton, cur, (), out).out
        elif cur is pose:
            cur = pose.copy()
        return RigResult(pose=cur, steps=results, errors=failed)


def _check_step(step: Step) -> None:
    """What :class:`Rig` can tell of ``step`` before any solve: a string name, a solver with a ``solve``
    method, and ``options`` that are keywords of that method (other than the rig's own)."""
    if not isinstance(step.name, str):
        raise SolverInputError(f"a step's name must be a string, got {step.name!r}")
    solve = getattr(step.solver, "solve", None)
    if not callable(solve):
        raise SolverInputError(f"step {step.name!r}: its solver ({type(step.solver).__name__}) has no solve method")
    if not isinstance(step.options, Mapping) or not all(isinstance(k, str) for k in step.options):
        raise SolverInputError(f"step {step.name!r}: options must be a mapping of keyword names to values, "
                               f"got {step.options!r}")
    own = sorted(set(step.options) & set(RIG_KEYWORDS))
    if own:
        raise SolverInputError(f"step {step.name!r}: options may not hold {own} (the rig passes them: the step's "
                               "weight and Rig.solve's weights=, Rig.solve's out=)")
    takes = _option_names(solve)
    unknown = [] if takes is None else sorted(k for k in step.options if k not in takes)
    if unknown:
        raise SolverInputError(f"step {step.name!r}: options {unknown} are not keywords of "
                               f"{type(step.solver).__name__}.solve (its options: "
                               f"{[k for k in takes or () if k not in RIG_KEYWORDS]})")


#: :func:`_option_names` of each solver class's ``solve`` (rigs are built per call by ``solve_chains``).
_OPTION_NAMES: dict[Any, tuple[str, ...] | None] = {}


def _option_names(solve: Any) -> tuple[str, ...] | None:
    """The keywords ``solve(pose, target, ...)`` takes after its two positional arguments, in order; None when
    it takes any (``**kwargs``) or has no signature to read (its first solve will tell)."""
    key = solve.__func__ if inspect.ismethod(solve) else None
    if key in _OPTION_NAMES:
        return _OPTION_NAMES[key]
    try:
        params = list(inspect.signature(solve).parameters.values())
    except (TypeError, ValueError):
        return None
    names = None if any(p.kind is p.VAR_KEYWORD for p in params) else tuple(
        p.name for p in params[2:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    if key is not None:
        _OPTION_NAMES[key] = names
    return names
