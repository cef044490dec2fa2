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

**Ownership.**  A step *claims* the joints it may move: those it may turn,
the joint whose translation its solver may move (a :class:`~kinema.DLS` with
``root_translation=True`` moves the root's; a :class:`~kinema.CCD`,
:class:`~kinema.FABRIK` or :class:`~kinema.FABRIKTree` with
``fixed_root=False`` its first joint's), and its end joint when its options
set that joint's rotation (``end_rotation``).  A later step may not move a
joint an earlier step claims, nor an ancestor of an earlier step's joints
(that would carry the earlier step's end away from its target), unless it
says ``layer=True`` (it deliberately works on top of the earlier result).
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
from ._validate import as_float_scalar, check_flag, is_sequence, resolve_joint
from .errors import KinemaError, SolverInputError
from .pose import Pose
from .result import SolveResult
from .skeleton import Skeleton, check_skeleton

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
    * ``joints``: the joints it may turn (names or indices); default: the
      solver's ``moved_joints`` (its joints without the end joint(s) it aims;
      every joint a :class:`~kinema.DLS` may turn).  The step's claim adds,
      whatever ``joints`` says, a joint its solver translates and an end
      joint whose rotation its ``options`` set (see the module docstring).
    * ``layer``: True or False; True: it may move joints claimed by earlier steps (it layers on top).
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
        """``(*batch,)`` whether every step reached its target, per item of the final batch (every goal of a
        multi-goal step; False everywhere when a step failed with ``errors="skip"``).

        A step ran over its own batch (its result pose's), which a later step's targets or weights may have
        enlarged since: its flags are broadcast to the final batch, item by item.  Flags past its batch axes
        (a goal axis, ``(*batch, G)``) are combined per item first."""
        batch = self.pose.batch_shape
        out = np.full(batch, not self.errors, dtype=bool)
        for name, r in self.steps.items():
            f = np.asarray(r.reached, dtype=bool)
            own = r.pose.batch_shape
            if f.ndim > len(own):  # goal axes after the step's batch axes
                f = np.asarray(f.all(axis=tuple(range(len(own), f.ndim))))
            try:
                out &= np.broadcast_to(f, batch)
            except ValueError:
                raise SolverInputError(f"step {name!r}: its result's reached {f.shape} (after its batch "
                                       f"{own}) does not broadcast to the rig's batch {batch}") from None
        return out


class Rig:
    """Prepared solvers composed in order over an input pose (see the module docstring)."""

    def __init__(self, skeleton: Skeleton, steps: Sequence[Step]) -> None:
        check_skeleton(skeleton)
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
        how: dict[int, str] = {}  # claimed joint -> how its step moves it, when it does not (only) turn it
        above: dict[int, str] = {}  # ancestors of claimed joints -> the step they would disturb
        #: Each step's claim: the joints it may turn, then any joint it translates or whose rotation it sets.
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
            turned = (tuple(resolve_joint(skeleton, j) for j in step.joints) if step.joints is not None
                      else tuple(int(j) for j in step.solver.moved_joints))
            # Beyond its turned joints a step moves a joint it translates (with everything below it) and an end
            # joint whose rotation it sets: claimed too, so that no later step carries or turns them away.
            extra = {j: "translates it" for j in _translated_joints(skeleton, step.solver)}
            end = _end_rotation_joint(step)
            if end is not None:
                extra.setdefault(end, "sets its rotation (end_rotation)")
            moved = turned + tuple(j for j in extra if j not in turned)
            if not step.layer:  # (True or False: _check_step checked it)
                fix = f"order them differently or give {step.name!r} layer=True"
                for j in moved:
                    name = skeleton.names[j]
                    if j in claimed:
                        owner = claimed[j]
                        why = "; ".join(f"{who!r} {what}" for who, what in ((owner, how.get(j)),
                                                                             (step.name, extra.get(j)))
                                        if what is not None)
                        raise SolverInputError(f"steps {owner!r} and {step.name!r} both move joint {name!r}"
                                               f"{f' ({why})' if why else ''}; {fix}")
                    if j in above:
                        verb = "translates" if j in extra and j not in turned else "moves"
                        raise SolverInputError(f"step {step.name!r} {verb} joint {name!r}, an ancestor of joints "
                                               f"step {above[j]!r} claims: it would carry that step's result "
                                               f"away; {fix}")
            for j in moved:
                if j not in claimed:
                    claimed[j] = step.name
                    if j in extra:
                        how[j] = extra[j]
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


def _translated_joints(skeleton: Skeleton, solver: Any) -> tuple[int, ...]:
    """The joints whose local translation ``solver``'s solve may change (each carries its whole subtree).

    Read from the solvers' own attributes: a :class:`~kinema.DLS` with ``root_translation`` moves the root
    above its goal joints (the one root among the joints its FK reads, ``_fk_joints``); a chain or tree solver
    with ``fixed_root=False`` drags its first joint, except a :class:`~kinema.CCD` whose first joint has
    weight 0 (its kernel slides the first joint only while that weight is > 0, which is how
    :func:`~kinema.solve_chains` freezes an owned root)."""
    parents = skeleton.parents
    if getattr(solver, "root_translation", False):
        fk = getattr(solver, "_fk_joints", None)
        # without the FK joint list (a solver of the same interface), every root it may be under
        candidates = range(skeleton.n_joints) if fk is None else (int(j) for j in fk)
        return tuple(j for j in candidates if parents[j] < 0)
    joints = getattr(solver, "joints", None)
    if getattr(solver, "fixed_root", True) or joints is None or len(joints) == 0:
        return ()
    weights = getattr(solver, "weights", None)
    if isinstance(weights, np.ndarray) and weights.shape == np.shape(joints) and not weights[0] > 0.0:
        return ()
    return (int(joints[0]),)


def _end_rotation_joint(step: Step) -> int | None:
    """The end joint whose rotation ``step``'s options set (``end_rotation`` not None: the last of its
    solver's ``joints``, as :class:`~kinema.TwoBone` aims it), or None."""
    if not isinstance(step.options, Mapping) or step.options.get("end_rotation") is None:
        return None
    joints = getattr(step.solver, "joints", None)
    return None if joints is None or len(joints) == 0 else int(joints[-1])


def _check_step(step: Step) -> None:
    """What :class:`Rig` can tell of ``step`` before any solve: a string name, ``layer`` True or False, a solver
    with a ``solve`` method, and ``options`` that are keywords of that method (other than the rig's own)."""
    if not isinstance(step.name, str):
        raise SolverInputError(f"a step's name must be a string, got {step.name!r}")
    # (truthiness would read layer="False" as True and switch the ownership check off)
    check_flag(step.layer, f"step {step.name!r}: layer")
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
