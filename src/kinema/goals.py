"""Goals for the full-body solver (:func:`kinema.solve_dls`, :class:`kinema.DLS`).

Small frozen objects; each names a joint and what it should do::

    PositionGoal(joint, target, weight=1.0, priority=0)      # the joint's origin at a world point
    OrientationGoal(joint, rotation, weight=1.0, priority=0)  # the joint's world rotation (xyzw)
    LookAtGoal(joint, target, axis=(0, 0, 1), weight=1.0, priority=0)  # local axis points at a world point
    PoseGoal(weight=1.0)                                      # stay near the input (animated) pose

Targets may carry batch dimensions (``(*batch, 3)`` or ``(*batch, 4)``),
broadcast against the pose's.  **Priority: a larger number is more
important** (as in :func:`kinema.solve_chains`); a goal never disturbs a
more important one (it acts in the null space of all more important
goals), and goals of equal priority are weighted together (least squares,
cost ``sum(weight * error^2)``; only the weights' ratios within a priority
matter).  The pose goal is always the least
important level: it uses only what the other goals leave free.

Errors are reported in length units (position) or radians (orientation,
look-at; the pose goal: the largest joint angle away from the input pose).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._types import FloatArray
from ._validate import as_float_array, as_float_scalar, require_finite, resolve_joint, unit_and_length
from .errors import SolverInputError

__all__ = ["PositionGoal", "OrientationGoal", "LookAtGoal", "PoseGoal", "AnyGoal"]


#: A quaternion shorter than this has no rotation: refused as a target.
ZERO_QUAT_NORM = 1e-12
#: A look-at axis shorter than this has no direction.
ZERO_AXIS_NORM = 1e-12


def as_input_array(x: Any, what: str, trailing: tuple[int, ...], *, finite: bool = True) -> FloatArray:
    """``x`` as a native float64 array ``(..., *trailing)``: :func:`kinema._validate.as_float_array` (the one
    conversion of every array input), plus the finiteness check.

    Integers, float32 and big-endian floats are read as the numbers they
    hold.  Complex, boolean, string, object and datetime data, and sets or
    dicts where a sequence is expected, raise :class:`~kinema.ShapeError`
    naming ``what``; so does a wrong trailing shape.  ``finite``: NaN or inf
    raises :class:`~kinema.SolverInputError`.
    """
    a = as_float_array(x, what, trailing)
    if finite:
        require_finite(a, what, SolverInputError)
    return a


def _frozen(a: FloatArray) -> FloatArray:
    a = np.array(a, dtype=np.float64)  # own copy
    a.setflags(write=False)
    return a


def _weight(w: Any, what: str) -> float:
    v = as_float_scalar(w, f"{what} weight")  # a real number: not a bool, a numeric string or an array
    if not math.isfinite(v) or v <= 0.0:
        raise SolverInputError(f"{what} weight must be finite and > 0, got {w!r}")
    return v


def _priority(p: Any, what: str) -> int:
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
        raise SolverInputError(f"{what} priority must be an integer, got {p!r}")
    return int(p)


def _joint(j: Any, what: str) -> int | str:
    if isinstance(j, str):
        return j
    if isinstance(j, (int, np.integer)) and not isinstance(j, bool):
        return int(j)
    raise SolverInputError(f"{what} joint must be a name or an index, got {j!r}")


def unit_quaternions(q: FloatArray, what: str) -> FloatArray:
    """``q (..., 4)`` normalised (of any finite size); :class:`~kinema.SolverInputError` for a (near) zero
    quaternion."""
    u, n = unit_and_length(q)
    if np.any(n <= ZERO_QUAT_NORM):
        raise SolverInputError(f"{what} holds a zero quaternion (no rotation)")
    return u


@dataclass(frozen=True, eq=False)
class PositionGoal:
    """Put ``joint``'s origin at the world point ``target (*batch, 3)``."""

    joint: int | str
    target: ArrayLike
    weight: float = 1.0
    priority: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "joint", _joint(self.joint, "PositionGoal"))
        object.__setattr__(self, "target", _frozen(as_input_array(self.target, "PositionGoal target", (3,))))
        object.__setattr__(self, "weight", _weight(self.weight, "PositionGoal"))
        object.__setattr__(self, "priority", _priority(self.priority, "PositionGoal"))


@dataclass(frozen=True, eq=False)
class OrientationGoal:
    """Give ``joint`` the world rotation ``rotation (*batch, 4)`` (xyzw; normalised here)."""

    joint: int | str
    rotation: ArrayLike
    weight: float = 1.0
    priority: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "joint", _joint(self.joint, "OrientationGoal"))
        q = as_input_array(self.rotation, "OrientationGoal rotation", (4,))
        object.__setattr__(self, "rotation", _frozen(unit_quaternions(q, "OrientationGoal rotation")))
        object.__setattr__(self, "weight", _weight(self.weight, "OrientationGoal"))
        object.__setattr__(self, "priority", _priority(self.priority, "OrientationGoal"))


@dataclass(frozen=True, eq=False)
class LookAtGoal:
    """Turn ``joint`` so that its local ``axis`` points at the world point ``target (*batch, 3)``.

    The error is the angle (radians) between the axis in world space and
    the direction from the joint to the target (0 when the target is on the
    joint).
    """

    joint: int | str
    target: ArrayLike
    axis: ArrayLike = (0.0, 0.0, 1.0)
    weight: float = 1.0
    priority: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "joint", _joint(self.joint, "LookAtGoal"))
        object.__setattr__(self, "target", _frozen(as_input_array(self.target, "LookAtGoal target", (3,))))
        ax = as_input_array(self.axis, "LookAtGoal axis", (3,))
        unit, n = unit_and_length(ax)
        if ax.ndim != 1 or float(n[0]) <= ZERO_AXIS_NORM:
            raise SolverInputError(f"LookAtGoal axis must be one non-zero 3-vector, got {self.axis!r}")
        object.__setattr__(self, "axis", tuple(float(v) for v in unit))
        object.__setattr__(self, "weight", _weight(self.weight, "LookAtGoal"))
        object.__setattr__(self, "priority", _priority(self.priority, "LookAtGoal"))


@dataclass(frozen=True, eq=False)
class PoseGoal:
    """Stay near the input pose (the animation): the least important level, cost ``weight * |dq|^2``.

    It moves only in what every other goal leaves free, pulling each
    moving joint (and a translating root) back towards its input value.
    """

    weight: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "weight", _weight(self.weight, "PoseGoal"))


#: Any goal the full-body solver takes.
AnyGoal = PositionGoal | OrientationGoal | LookAtGoal | PoseGoal

GOAL_TYPES = (PositionGoal, OrientationGoal, LookAtGoal, PoseGoal)


def goal_joint(skeleton: Any, goal: PositionGoal | OrientationGoal | LookAtGoal) -> int:
    """Index of ``goal``'s joint in ``skeleton`` (:class:`~kinema.BoneNotFoundError` when unknown)."""
    return resolve_joint(skeleton, goal.joint)


def goal_target(goal: PositionGoal | OrientationGoal | LookAtGoal) -> FloatArray:
    """The goal's own target: ``(*batch, 3)`` point or ``(*batch, 4)`` rotation."""
    if isinstance(goal, OrientationGoal):
        return np.asarray(goal.rotation)
    return np.asarray(goal.target)
