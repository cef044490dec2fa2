"""Joint limits: small, immutable data objects shared by every solver.

Three kinds::

    Hinge(axis, min_angle, max_angle)              # one axis, an angle range
    SwingTwist(axis, swing, twist_min, twist_max)  # a cone (circular or elliptical) plus a twist range
    EulerRange(order, mins, maxs)                  # per-axis Euler ranges (three.js rotationMin/Max)

Angles are radians (``degrees=True`` on construction converts).

**Frame.**  A limit acts on the joint's *rest-relative* local rotation::

    q_rel = inverse(q_rest) * q_local        q_local = q_rest * q_rel

where ``q_rest`` is the skeleton's rest local rotation of that joint
(``skeleton.rotations[j]``) and ``q_local`` the pose's local rotation.  So
axes are given in the joint's own rest frame and the rest pose is always
inside a limit whose range contains 0.  Pass ``rest_rotation=None`` to the
methods below to treat ``rotation_local`` as already rest-relative.

**Semantics** (identical in every solver, one implementation in
:mod:`kinema._kernels.limits`):

* ``Hinge``: the rotation is split into swing and twist about ``axis``
  (``q = swing * twist``); the swing (off-axis part) is dropped and the
  twist angle clamped to ``[min_angle, max_angle]``.
* ``SwingTwist``: ``q = swing * twist`` about ``axis``.  The swing is a
  rotation by ``theta`` about a unit direction ``n`` perpendicular to the
  axis; with ``n = n1 e1 + n2 e2`` (``e1 = reference``, ``e2 = axis x e1``)
  it must satisfy ``(theta n1 / s1)^2 + (theta n2 / s2)^2 <= 1`` where
  ``swing = s1`` (circular cone) or ``swing = (s1, s2)`` (elliptical: ``s1``
  bounds turning about ``e1``, ``s2`` about ``e2``).  A swing outside is
  scaled down along its own direction onto the cone (radial clamp); the
  twist angle is clamped to ``[twist_min, twist_max]``.  A swing of a half
  turn has no defined twist (it reads as 0): with a twist range narrower
  than the full circle a clamped swing is kept at most ``pi - 1e-2``, where
  the twist the clamp sets is the one the result reads.
* ``EulerRange``: Euler angles (sequence ``order`` as in
  :mod:`kinema.rotation`: upper case intrinsic, lower case extrinsic;
  three.js's ``'XYZ'`` is ``"XYZ"`` here) clamped per axis to
  ``[mins, maxs]``.  **No flips near +-180 degrees**: every rotation has two
  Euler triples (``(a+pi, pi-b, c+pi)`` is the twin of ``(a, b, c)`` for
  Tait-Bryan orders), and angles are compared modulo 2 pi nearest the middle
  of their range, so 179 and -179 degrees count as 2 degrees apart.  If either
  triple is inside the box nothing changes; otherwise both are clamped (the
  short way round) and the rebuilt rotation closer to the input is kept.
  **Gimbal lock** (the middle angle within 2e-7 rad of +-pi/2, or of 0 or pi
  for sequences such as ``"ZXZ"``): the rotation fixes only the middle angle
  and the sum or the difference of the outer angles, so it is inside when the
  middle angle of either triple is in range (a range may end at the lock from
  either side) and some pair of the box gives that sum or difference
  (whatever split :func:`kinema.rotation.as_euler` reports).  One outside is
  turned by just its violation: the middle angle is clamped to its range, the
  sum or difference to the values the box gives it, and split into a pair of
  the box.  **Near** the lock (within 1e-2 rad) the outer angles read from a
  rotation carry a rounding error of about ``eps / d`` each (``d`` the middle
  angle's distance from the lock), so they may slide together along the lock
  direction by ten times that before they count as outside (a turn of the
  rotation of at most 4e-15 rad): a rotation clamped onto a bound reads inside.

Every clamp leaves a rotation that is inside (within ``LIMIT_SLACK``,
1e-12 rad) **bit for bit unchanged**, never produces NaN, and keeps the sign
(hemisphere) of the input quaternion.

**For solver authors.**  Pack once per call with :func:`pack_limits`::

    packed = pack_limits(skeleton, chain_joints, limits)   # chain_joints (K,) root first
    # packed.kinds (K,) int64: LIMIT_NONE / LIMIT_HINGE / LIMIT_SWING_TWIST / LIMIT_EULER
    # packed.params (K, LIMIT_PARAMS) float64, packed.rest (K, 4) rest local rotations

and, inside a kernel, after each update of chain joint ``k``'s local rotation::

    from kinema._kernels.limits import apply_limit_local
    q_local, hit = apply_limit_local(kinds[k], params[k], rest_k_tuple, q_local)

(``apply_limit_local`` works on xyzw tuples; ``hit`` tells whether it
changed anything, for ``SolveResult.limits_hit``).  The row layout is in
:mod:`kinema._kernels.limits`.  Limits for joints that are not in the chain
are ignored, so one rig-wide ``{joint: limit}`` map can serve every chain.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._types import FloatArray
from ._validate import (
    as_float_array,
    as_float_scalar,
    broadcast_batch,
    check_flag,
    positive_number,
    require_finite,
    unit_and_length,
)
from .errors import ShapeError, SolverInputError

if TYPE_CHECKING:
    from .skeleton import Skeleton

__all__ = [
    "Limit",
    "Hinge",
    "SwingTwist",
    "EulerRange",
    "PackedLimits",
    "pack_limits",
    "LIMIT_NONE",
    "LIMIT_HINGE",
    "LIMIT_SWING_TWIST",
    "LIMIT_EULER",
    "LIMIT_PARAMS",
    "LIMIT_SLACK",
]


# Mirrors of the kernel constants (kept here so ``import kinema.limits`` needs no numba);
# tests check they agree with kinema._kernels.limits.
LIMIT_NONE = 0
LIMIT_HINGE = 1
LIMIT_SWING_TWIST = 2
LIMIT_EULER = 3
LIMIT_PARAMS = 12
#: Rotations within this many radians of their range count as inside (left untouched).
LIMIT_SLACK = 1e-12

#: An axis shorter than this is rejected (it has no direction).
AXIS_EPS = 1e-12


def _unit(v: ArrayLike, what: str) -> tuple[float, float, float]:
    """``v`` as a unit 3-vector: its direction at any finite size (1e300 components included)."""
    try:
        a = as_float_array(v, what, (3,), batch=False)
    except ShapeError:
        raise SolverInputError(f"{what} must be 3 finite numbers, got {v!r}") from None
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise SolverInputError(f"{what} must be 3 finite numbers, got {v!r}")
    u, n = unit_and_length(a)
    if float(n[0]) <= AXIS_EPS:
        raise SolverInputError(f"{what} is a zero vector; a limit axis needs a direction")
    return (float(u[0]), float(u[1]), float(u[2]))


def _rotations(q: FloatArray, what: str) -> FloatArray:
    """``q (..., 4)`` as unit quaternions; SolverInputError when one holds NaN or inf or is a zero quaternion
    (no rotation: the kernels would read it as the identity)."""
    require_finite(q, what, SolverInputError)
    u, length = unit_and_length(q)  # of any finite size
    if np.any(length <= AXIS_EPS):
        raise SolverInputError(f"{what} contains a zero quaternion, which is no rotation")
    return u


def _angle(x: Any, what: str, degrees: bool, lo: float = -math.pi, hi: float = math.pi) -> float:
    v = as_float_scalar(x, what)  # a real number (not a bool, a numeric string or an array)
    if degrees:
        v = math.radians(v)
    if not math.isfinite(v):
        raise SolverInputError(f"{what} must be finite, got {x!r}")
    # 1e-12 slack lets math.pi converted from 180 degrees through.
    if v < lo - 1e-12 or v > hi + 1e-12:
        raise SolverInputError(f"{what} = {v!r} rad is outside [{lo:.6g}, {hi:.6g}]")
    return min(max(v, lo), hi)


def _angle_array(v: Any, what: str) -> Any:
    """``v`` itself, or for a NumPy array: a 0-d one as the number it holds, any other as it is when it holds
    real numbers; :class:`SolverInputError` naming ``what`` for an array of anything else (objects, bools,
    strings, complex numbers), whose items would each pass as a number or fail one by one."""
    if not isinstance(v, np.ndarray):
        return v
    if v.dtype.kind not in "iuf":
        raise SolverInputError(f"{what} must be real numbers, got an array of dtype {v.dtype}")
    return v[()] if v.ndim == 0 else v


def _perpendicular(axis: tuple[float, float, float]) -> tuple[float, float, float]:
    """A unit vector perpendicular to ``axis``: the cross with the basis axis along its smallest component."""
    a = np.asarray(axis)
    basis = np.zeros(3)
    basis[int(np.argmin(np.abs(a)))] = 1.0
    c = np.cross(a, basis)
    c /= np.linalg.norm(c)
    return (float(c[0]), float(c[1]), float(c[2]))


class Limit(ABC):
    """Base class: a joint limit that packs into a kind code and a parameter row."""

    kind: ClassVar[int] = LIMIT_NONE

    @abstractmethod
    def pack(self) -> FloatArray:
        """The ``(LIMIT_PARAMS,)`` float64 parameter row (layout in :mod:`kinema._kernels.limits`)."""

    def _arrays(self, rotation_local: ArrayLike, rest_rotation: ArrayLike | None
                ) -> tuple[tuple[int, ...], FloatArray, FloatArray]:
        q = as_float_array(rotation_local, "rotation_local", (4,))
        r = np.array([0.0, 0.0, 0.0, 1.0]) if rest_rotation is None else as_float_array(
            rest_rotation, "rest_rotation", (4,))
        _rotations(q, "rotation_local")  # checked only: the kernels take any size, and return inside ones as given
        r = _rotations(r, "rest_rotation")
        batch = broadcast_batch(q.shape[:-1], r.shape[:-1])
        n = int(np.prod(batch)) if batch else 1
        qf = np.ascontiguousarray(np.broadcast_to(q, batch + (4,))).reshape(n, 4)
        # a writeable copy (a read-only broadcast view would be a kernel specialisation of its own)
        rf = np.array(np.broadcast_to(r, batch + (4,)), dtype=np.float64, order="C").reshape(n, 4)
        return batch, qf, rf

    def clamp(self, rotation_local: ArrayLike, rest_rotation: ArrayLike | None = None) -> FloatArray:
        """``rotation_local (..., 4)`` clamped into the limit (same shape).

        ``rest_rotation (..., 4)`` is the joint's rest local rotation (None:
        ``rotation_local`` is already rest-relative).  Inside rotations come
        back unchanged.  A zero quaternion (or NaN or inf) in either raises
        :class:`~kinema.SolverInputError` (here and in every method below).
        """
        return self.clamp_hit(rotation_local, rest_rotation)[0]

    def clamp_hit(self, rotation_local: ArrayLike, rest_rotation: ArrayLike | None = None
                  ) -> tuple[FloatArray, NDArray[np.bool_]]:
        """``(clamped (..., 4), hit (...,))``: as :meth:`clamp`, plus whether each rotation changed."""
        from ._kernels._tier import kernels

        kl = kernels("limits")

        batch, qf, rf = self._arrays(rotation_local, rest_rotation)
        out = np.empty_like(qf)
        hit = np.zeros(qf.shape[0], dtype=bool)
        kl.clamp_many(self.kind, self.pack(), rf, qf, out, hit)
        return out.reshape(batch + (4,)), hit.reshape(batch)

    def violation(self, rotation_local: ArrayLike, rest_rotation: ArrayLike | None = None) -> FloatArray:
        """How far (radians, ``(...,)``) each rotation lies outside the limit; 0 inside.

        Hinge: max(off-axis angle, angle outside the range).  SwingTwist:
        max(swing beyond the cone along its direction, twist outside the
        range).  EulerRange: the largest per-axis excess of the better of the
        two Euler triples (near gimbal lock after the slide described in the
        module docs; at it, of the middle angle and the sum or difference of
        the outer angles).
        """
        from ._kernels._tier import kernels

        kl = kernels("limits")

        batch, qf, rf = self._arrays(rotation_local, rest_rotation)
        out = np.empty(qf.shape[0])
        kl.violation_many(self.kind, self.pack(), rf, qf, out)
        return out.reshape(batch)

    def contains(self, rotation_local: ArrayLike, rest_rotation: ArrayLike | None = None,
                 atol: float = 1e-9) -> NDArray[np.bool_]:
        """``(...,)`` bool: :meth:`violation` ``<= atol`` (a finite number >= 0)."""
        atol = positive_number(atol, "atol", allow_zero=True)
        return np.asarray(self.violation(rotation_local, rest_rotation) <= atol)


@dataclass(frozen=True)
class Hinge(Limit):
    """One rotation axis (in the joint's rest frame) and an angle range in [-pi, pi].

    Off-axis rotation is removed (swing-twist split), the angle about
    ``axis`` clamped to ``[min_angle, max_angle]``.  An elbow bending 0 to 145
    degrees about x: ``Hinge((1, 0, 0), 0, 145, degrees=True)``.
    """

    axis: tuple[float, float, float]
    min_angle: float
    max_angle: float
    degrees: bool = False

    kind: ClassVar[int] = LIMIT_HINGE

    def __post_init__(self) -> None:
        degrees = check_flag(self.degrees, "Hinge degrees")
        object.__setattr__(self, "axis", _unit(self.axis, "Hinge axis"))
        lo = _angle(self.min_angle, "Hinge min_angle", degrees)
        hi = _angle(self.max_angle, "Hinge max_angle", degrees)
        if lo > hi:
            raise SolverInputError(f"Hinge min_angle {lo!r} is greater than max_angle {hi!r}")
        object.__setattr__(self, "min_angle", lo)
        object.__setattr__(self, "max_angle", hi)
        object.__setattr__(self, "degrees", False)

    def pack(self) -> FloatArray:
        p = np.zeros(LIMIT_PARAMS)
        p[0:3] = self.axis
        p[3] = self.min_angle
        p[4] = self.max_angle
        return p


@dataclass(frozen=True)
class SwingTwist(Limit):
    """A swing cone around ``axis`` plus a twist range about it.

    * ``axis``: the bone's twist axis in the joint's rest frame.
    * ``swing``: the cone's half-angle in [0, pi], or a pair ``(s1, s2)`` for an
      elliptical cone: ``s1`` bounds swinging about ``reference``, ``s2``
      about ``axis x reference``.
    * ``twist_min, twist_max``: the twist range in [-pi, pi].  Either left out
      (None) is free: ``-pi`` and ``pi`` in radians, whatever ``degrees``
      says (it converts only the angles given); both read back as floats.
    * ``reference``: a direction perpendicular to ``axis`` (made so if it is
      not); default a stable perpendicular.  Only matters for an ellipse.
    """

    axis: tuple[float, float, float]
    swing: float | tuple[float, float]
    twist_min: float | None = None  # None: free (-pi); a float after construction
    twist_max: float | None = None  # None: free (pi)
    reference: tuple[float, float, float] | None = None
    degrees: bool = False

    kind: ClassVar[int] = LIMIT_SWING_TWIST

    def __post_init__(self) -> None:
        degrees = check_flag(self.degrees, "SwingTwist degrees")
        axis = _unit(self.axis, "SwingTwist axis")
        object.__setattr__(self, "axis", axis)
        swing = _angle_array(self.swing, "SwingTwist swing")  # a 0-d array: the one angle it holds
        if isinstance(swing, (tuple, list, np.ndarray)):
            if len(swing) != 2:
                raise SolverInputError(f"SwingTwist swing is one angle or a pair, got {self.swing!r}")
            s1 = _angle(swing[0], "SwingTwist swing[0]", degrees, 0.0, math.pi)
            s2 = _angle(swing[1], "SwingTwist swing[1]", degrees, 0.0, math.pi)
            object.__setattr__(self, "swing", (s1, s2))
        else:
            object.__setattr__(self, "swing", _angle(swing, "SwingTwist swing", degrees, 0.0, math.pi))
        # a bound left out is free in radians: converting the default pi as degrees made it 0.0548 rad
        lo = -math.pi if self.twist_min is None else _angle(self.twist_min, "SwingTwist twist_min", degrees)
        hi = math.pi if self.twist_max is None else _angle(self.twist_max, "SwingTwist twist_max", degrees)
        if lo > hi:
            raise SolverInputError(f"SwingTwist twist_min {lo!r} is greater than twist_max {hi!r}")
        object.__setattr__(self, "twist_min", lo)
        object.__setattr__(self, "twist_max", hi)
        if self.reference is None:
            ref = _perpendicular(axis)
        else:
            r = np.asarray(_unit(self.reference, "SwingTwist reference"))
            r = r - np.dot(r, axis) * np.asarray(axis)
            if np.linalg.norm(r) <= 1e-9:
                raise SolverInputError("SwingTwist reference is parallel to the axis")
            r /= np.linalg.norm(r)
            ref = (float(r[0]), float(r[1]), float(r[2]))
        object.__setattr__(self, "reference", ref)
        object.__setattr__(self, "degrees", False)

    @property
    def swing_limits(self) -> tuple[float, float]:
        """``(s1, s2)``: the cone's half-angles about ``reference`` and ``axis x reference``."""
        if isinstance(self.swing, tuple):
            return self.swing
        return (float(self.swing), float(self.swing))

    def pack(self) -> FloatArray:
        p = np.zeros(LIMIT_PARAMS)
        p[0:3] = self.axis
        assert self.reference is not None
        p[3:6] = self.reference
        p[6], p[7] = self.swing_limits
        assert self.twist_min is not None and self.twist_max is not None  # floats after __post_init__
        p[8] = self.twist_min
        p[9] = self.twist_max
        return p


@dataclass(frozen=True)
class EulerRange(Limit):
    """Per-axis Euler-angle ranges, as three.js's ``rotationMin`` / ``rotationMax``.

    ``order`` is a sequence like ``"XYZ"`` (intrinsic, three.js's default
    order) or ``"xyz"`` (extrinsic); ``mins`` / ``maxs`` are three angles in
    [-pi, pi], in the order's axis order.  See the module docs for how the
    clamp avoids flips near +-180 degrees.
    """

    order: str
    mins: tuple[float, float, float]
    maxs: tuple[float, float, float]
    degrees: bool = False

    kind: ClassVar[int] = LIMIT_EULER

    def __post_init__(self) -> None:
        from .rotation import _parse_seq

        degrees = check_flag(self.degrees, "EulerRange degrees")
        try:
            _parse_seq(self.order)
        except ValueError as exc:
            raise SolverInputError(f"EulerRange order: {exc}") from None
        given = {}
        for name in ("mins", "maxs"):
            v = _angle_array(getattr(self, name), f"EulerRange {name}")  # a 0-d array: one number, not three
            if isinstance(v, (str, bytes)) or not isinstance(v, Sequence | np.ndarray) or len(v) != 3:
                raise SolverInputError(f"EulerRange {name} needs three angles, got {getattr(self, name)!r}")
            given[name] = v
        lo = tuple(_angle(x, f"EulerRange mins[{a}]", degrees) for a, x in enumerate(given["mins"]))
        hi = tuple(_angle(x, f"EulerRange maxs[{a}]", degrees) for a, x in enumerate(given["maxs"]))
        for a in range(3):
            if lo[a] > hi[a]:
                raise SolverInputError(f"EulerRange mins[{a}] = {lo[a]!r} is greater than maxs[{a}] = {hi[a]!r}")
        object.__setattr__(self, "mins", lo)
        object.__setattr__(self, "maxs", hi)
        object.__setattr__(self, "degrees", False)

    def pack(self) -> FloatArray:
        from .rotation import _parse_seq

        i, j, k, ext = _parse_seq(self.order)
        p = np.zeros(LIMIT_PARAMS)
        p[0:4] = (i, j, k, 1.0 if ext else 0.0)
        p[4:7] = self.mins
        p[7:10] = self.maxs
        return p


@dataclass(frozen=True)
class PackedLimits:
    """Limits of a chain as arrays a kernel consumes.

    * ``kinds``: ``(K,)`` int64 kind code per chain joint (``LIMIT_NONE`` where none).
    * ``params``: ``(K, LIMIT_PARAMS)`` float64 parameter rows.
    * ``rest``: ``(K, 4)`` the joints' rest local rotations (xyzw, unit).
    * ``count``: how many chain joints have a limit.
    """

    kinds: NDArray[np.int64]
    params: FloatArray
    rest: FloatArray
    count: int


def limit_map(limits: Any) -> dict[Any, Limit] | None:
    """A solver's ``limits`` argument as it keeps it: a snapshot (a new dict) of a ``{joint: Limit}`` mapping, or
    None for None and for an empty mapping (no limits).  Anything else (an array, a list of limits, a
    set) raises :class:`~kinema.SolverInputError` naming its type; the entries are checked by
    :func:`pack_limits`."""
    if limits is None:
        return None
    if not isinstance(limits, Mapping):
        raise SolverInputError(f"limits must map joint names or indices to limit objects, got {type(limits).__name__}")
    return dict(limits) or None


def pack_limits(skeleton: Skeleton, joints: Sequence[int] | NDArray[np.int64],
                limits: Mapping[Any, Limit] | None) -> PackedLimits:
    """Pack ``limits`` (``{joint name or index: Limit}``) for the chain ``joints (K,)``.

    ``joints`` is a sequence (a list, a tuple, a 1-D array) of joint indices
    (a negative one counts from the last joint, as in Python) or names; an
    item that is not one of the skeleton's joints (out of range, a float, a
    bool, an unknown name) raises :class:`~kinema.BoneNotFoundError`, and a
    ``skeleton`` that is not a :class:`~kinema.Skeleton` or ``joints`` that
    are not a sequence :class:`~kinema.SolverInputError`.

    Unknown joint names in ``limits`` raise :class:`~kinema.BoneNotFoundError`; joints of
    the skeleton that are not in ``joints`` are ignored.  A joint given twice
    (by name and by index) or a value that is not a :class:`Limit` raises
    :class:`~kinema.SolverInputError`.
    """
    from ._validate import is_sequence, resolve_joint
    from .errors import BoneNotFoundError
    from .skeleton import check_skeleton

    check_skeleton(skeleton)
    if not is_sequence(joints) or (isinstance(joints, np.ndarray) and joints.ndim != 1):
        raise SolverInputError(f"joints must be a sequence of joint indices or names, got {joints!r}")
    n = skeleton.n_joints
    if (isinstance(joints, np.ndarray) and joints.dtype.kind in "iu"
            and not np.any((joints < -n) | (joints >= n))):
        j = np.where(joints < 0, joints + n, joints).astype(np.int64)  # the solvers' case, at NumPy speed
    else:  # item by item, so an item that is no joint is named
        resolved = []
        for a, x in enumerate(joints):
            try:
                resolved.append(resolve_joint(skeleton, x))
            except BoneNotFoundError as exc:
                raise BoneNotFoundError(x, skeleton.names, f"joints[{a}]: {exc}") from None
        j = np.array(resolved, dtype=np.int64)
    k = j.size
    kinds = np.zeros(k, dtype=np.int64)
    params = np.zeros((k, LIMIT_PARAMS))
    rest = np.ascontiguousarray(skeleton.rotations[j])
    count = 0
    limits = limit_map(limits)
    if limits:
        pos = {int(x): a for a, x in enumerate(j)}
        seen: set[int] = set()
        for key, lim in limits.items():
            idx = resolve_joint(skeleton, key)
            if idx in seen:
                raise SolverInputError(f"joint {skeleton.names[idx]!r} has two limits (given by name and by index)")
            seen.add(idx)
            if not isinstance(lim, Limit) or type(lim) is Limit:
                raise SolverInputError(f"limit for joint {skeleton.names[idx]!r} is not a Hinge, SwingTwist or "
                                       f"EulerRange: {lim!r}")
            if idx not in pos:
                continue
            a = pos[idx]
            kinds[a] = lim.kind
            params[a] = lim.pack()
            count += 1
    return PackedLimits(kinds=kinds, params=params, rest=rest, count=count)
