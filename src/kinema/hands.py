"""Hands: palm orientation, parametric finger curl and a cylinder grip.

Two-bone IK places the wrist; it says nothing about where the palm faces or
what the fingers do.  This module does the rest of a grip, in three steps run
after the arm solve:

1. :func:`align_palm` turns the wrist so its palm basis matches a target
   basis in world space (``W_new = target palm^T``: the rotation taking the
   wrist's current palm basis to the target, applied as the wrist's world
   orientation, converted to local through the parent; the wrist does not
   move).  :func:`palm_rotation` gives that world quaternion, e.g. for
   ``TwoBone.solve(..., end_rotation=...)``.
2. :func:`curl` bends every finger by a curl amount in 0..1, spread over its
   three hinge joints by per-joint weights (:func:`finger_angles`), plus a
   spread of the fingers about the palm normal.
3. :func:`grip` closes each finger around a cylinder (a handle, a pole)
   until it touches: the whole finger first, then the joints past the
   touching bone, each joint within its :class:`~kinema.limits.Hinge`.

A :class:`Hand` describes one hand of a skeleton (wrist, palm axes, fingers
with their hinge axes and limits); :meth:`Hand.from_skeleton` reads it from
``skeleton.meta["hands"]`` as :func:`kinema.samples.humanoid` ``(hands=True)``
writes it.  Quaternions are xyzw; lengths are the skeleton's units.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import rotation as rot
from ._solve import check_pose, check_pose_finite
from ._types import FloatArray
from ._validate import (
    as_float_array,
    as_float_scalar,
    broadcast_batch,
    is_sequence,
    positive_number,
    require_finite,
    resolve_joint,
    unit_and_length,
)
from .errors import ShapeError, SkeletonError, SolverInputError
from .fk import forward_kinematics
from .limits import Hinge
from .pose import Pose
from .skeleton import Skeleton, check_skeleton

__all__ = [
    "Finger",
    "Hand",
    "GripResult",
    "palm_basis",
    "palm_rotation",
    "align_palm",
    "finger_angles",
    "curl",
    "grip",
    "BASIS_ORTHONORMAL_TOL",
    "GRIP_TOLERANCE",
]


#: A target palm basis counts as a rotation matrix when ``|B^T B - I|`` and ``|det B - 1|`` are within this.
BASIS_ORTHONORMAL_TOL = 1e-6
#: Two palm axes closer than this to parallel (sine of their angle) give no basis.
PARALLEL_SINE_EPS = 1e-9
#: Curl samples over 0..1 when searching a finger's first contact, and the refinement rounds after it;
#: 64 samples then two rounds of 32 bracket the contact within 1/65536 of a finger's curl range.
CONTACT_SAMPLES = 64
CONTACT_REFINE_SAMPLES = 32
CONTACT_REFINE_ROUNDS = 2
#: A finger counts as touching the cylinder when its closest bone is within this fraction of the finger's length
#: (knuckle to tip, world) of the surface, in any units.  The contact search brackets a finger's curl within
#: 1/65536 of its range: gaps of a few 1e-5 finger lengths.  (1e-3 is 0.1 mm on a 10 cm finger.)
GRIP_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Finger:
    """One finger: three hinge joints (knuckle first) and a tip marker.

    * ``name``: e.g. ``"index"``; ``joints``: the three joint indices; ``tip``:
      the index of the joint at the fingertip (its rest offset is the last bone).
    * ``hinge_axis``: ``(3,)`` unit flexion axis in each joint's rest frame
      (positive angles curl towards the palm).
    * ``limits``: one :class:`~kinema.limits.Hinge` per joint about
      ``hinge_axis``; a curl goes from 0 (rest) to each ``max_angle``.
    * ``weights``: ``(3,)`` positive: how a curl is shared (:func:`finger_angles`).
    * ``spread_axis``: ``(3,)`` unit axis in the knuckle's rest frame and
      ``spread_angle`` (radians) the knuckle's turn about it at ``spread = 1``.
    """

    name: str
    joints: tuple[int, int, int]
    tip: int
    hinge_axis: FloatArray
    limits: tuple[Hinge, Hinge, Hinge]
    weights: FloatArray
    spread_axis: FloatArray
    spread_angle: float

    @property
    def max_angles(self) -> FloatArray:
        """``(3,)`` radians: each joint's full flexion (its hinge's ``max_angle``)."""
        return np.array([lim.max_angle for lim in self.limits])


@dataclass(frozen=True)
class Hand:
    """One hand of ``skeleton``: the wrist, its palm axes and the fingers.

    * ``wrist``: the wrist joint's index (the arm's end joint).
    * ``palm_basis``: ``(3, 3)`` rotation matrix in the wrist's frame whose
      columns are the palm's ``along`` (wrist to fingers), ``normal`` (out of
      the palm) and ``along x normal``.
    * ``palm_center``: ``(3,)`` a point on the palm's skin, wrist frame.
    * ``fingers``: the :class:`Finger` s, thumb first in the sample.
    """

    skeleton: Skeleton
    wrist: int
    palm_basis: FloatArray
    palm_center: FloatArray
    fingers: tuple[Finger, ...]

    @classmethod
    def from_skeleton(cls, skeleton: Skeleton, side: str) -> Hand:
        """The ``side`` (``"left"`` / ``"right"``) hand described by ``skeleton.meta["hands"][side]``.

        The entry's layout is the one :func:`kinema.samples.humanoid` writes
        (see its docstring).  Unknown joint names raise
        :class:`~kinema.BoneNotFoundError` (listing the closest names); a
        missing entry raises :class:`~kinema.SkeletonError`.
        """
        check_skeleton(skeleton)
        if not isinstance(side, str):
            raise SolverInputError(f"side must be a name such as 'left' or 'right', got {side!r}")
        hands = skeleton.meta.get("hands")
        if not isinstance(hands, Mapping) or side not in hands:
            have = sorted(hands) if isinstance(hands, Mapping) else []
            raise SkeletonError(f"the skeleton describes no {side!r} hand in meta['hands'] (it has {have}); "
                                "kinema.samples.humanoid(hands=True) has 'left' and 'right'")
        entry = hands[side]
        if not isinstance(entry, Mapping):
            raise SkeletonError(f"meta['hands'][{side!r}] must be a mapping, got {type(entry).__name__}")
        try:
            wrist = resolve_joint(skeleton, entry["wrist"])
            basis = palm_basis(entry["palm_along"], entry["palm_normal"])
            center = as_float_array(entry["palm_center"], "palm_center", (3,), batch=False)
            require_finite(center, "palm_center")
            if not is_sequence(entry["fingers"]):
                raise SkeletonError(f"meta['hands'][{side!r}]['fingers'] must be a sequence of finger entries, "
                                    f"got {entry['fingers']!r}")
            fingers = tuple(_finger(skeleton, f) for f in entry["fingers"])
        except KeyError as exc:
            raise SkeletonError(f"meta['hands'][{side!r}] lacks {exc.args[0]!r}") from None
        names = [f.name for f in fingers]
        if len(set(names)) != len(names):
            raise SkeletonError(f"meta['hands'][{side!r}]: finger names must be unique, got {names}")
        return cls(skeleton, wrist, basis, center, fingers)

    def finger(self, name: str) -> Finger:
        """The finger called ``name``; :class:`~kinema.SolverInputError` listing the names otherwise."""
        for f in self.fingers:
            if f.name == name:
                return f
        raise SolverInputError(f"no finger {name!r}; this hand has {[f.name for f in self.fingers]}")

    def limits(self) -> dict[str, Hinge]:
        """``{joint name: Hinge}`` for every finger joint (a map the solvers accept as ``limits=``)."""
        names = self.skeleton.names
        return {names[j]: lim for f in self.fingers for j, lim in zip(f.joints, f.limits, strict=True)}


def _finger(skeleton: Skeleton, spec: Mapping[str, Any]) -> Finger:
    if not isinstance(spec, Mapping):
        raise SkeletonError(f"a finger entry must be a mapping (name, joints, tip, ...), got {spec!r}")
    if not is_sequence(spec["joints"]):
        raise SkeletonError(f"finger {spec['name']!r}: joints must be a sequence of three joints, "
                            f"got {spec['joints']!r}")
    joints = tuple(resolve_joint(skeleton, j) for j in spec["joints"])
    if len(joints) != 3:
        raise SkeletonError(f"finger {spec['name']!r} needs three joints, got {len(joints)}")
    tip = resolve_joint(skeleton, spec["tip"])
    chain = [int(skeleton.parents[j]) for j in (*joints[1:], tip)]
    if chain != list(joints):
        raise SkeletonError(f"finger {spec['name']!r}: joints {spec['joints']} and tip {spec['tip']!r} "
                            "are not a parent-to-child chain")
    axis = as_float_array(spec["hinge_axis"], "hinge_axis", (3,), batch=False)
    axis_t = (float(axis[0]), float(axis[1]), float(axis[2]))
    flexion = as_float_array(spec["flexion_deg"], f"finger {spec['name']!r} flexion_deg", (3, 2), batch=False)
    limits = tuple(Hinge(axis_t, lo, hi, degrees=True) for lo, hi in flexion)
    for lim in limits:
        if not lim.min_angle <= 0.0 < lim.max_angle:
            raise SkeletonError(f"finger {spec['name']!r}: a flexion range must hold 0 (rest) and reach above it")
    weights = as_float_array(spec["weights"], "weights", (3,), batch=False)
    if not np.all(np.isfinite(weights)) or np.any(weights <= 0.0):
        raise SolverInputError(f"finger {spec['name']!r}: curl weights must be positive, got {tuple(weights)}")
    spread_axis = as_float_array(spec["spread_axis"], "spread_axis", (3,), batch=False)
    spread_len = float(np.linalg.norm(spread_axis))
    if not (math.isfinite(spread_len) and spread_len > 0.0):
        raise SolverInputError(f"finger {spec['name']!r}: spread_axis must be a finite non-zero vector")
    spread_deg = as_float_scalar(spec["spread_deg"], f"finger {spec['name']!r} spread_deg")
    if not math.isfinite(spread_deg):
        raise SolverInputError(f"finger {spec['name']!r}: spread_deg must be finite, got {spread_deg!r}")
    return Finger(str(spec["name"]), (joints[0], joints[1], joints[2]), tip, np.asarray(limits[0].axis),
                  (limits[0], limits[1], limits[2]), weights, spread_axis / spread_len, math.radians(spread_deg))


# --------------------------------------------------------------------------------------------- the palm
def palm_basis(along: ArrayLike, normal: ArrayLike) -> FloatArray:
    """The palm basis ``(*batch, 3, 3)`` with columns ``along``, ``normal``, ``along x normal``.

    ``along`` ``(*batch, 3)`` is the wrist-to-fingers direction; ``normal``
    ``(*batch, 3)`` the direction out of the palm, made perpendicular to
    ``along`` (Gram-Schmidt).  Raises :class:`~kinema.SolverInputError` for
    zero, non-finite or parallel vectors.
    """
    a = as_float_array(along, "along", (3,))
    n = as_float_array(normal, "normal", (3,))
    require_finite(a, "along")
    require_finite(n, "normal")
    batch = broadcast_batch(a.shape[:-1], n.shape[:-1])
    a_u, a_len = unit_and_length(a)  # finite vectors of any size: no overflow or underflow in the norm
    if np.any(a_len == 0.0):
        raise SolverInputError("along is a zero vector: a palm basis needs a direction")
    n_u, n_len = unit_and_length(n)
    n_perp = n_u - a_u * np.sum(n_u * a_u, axis=-1, keepdims=True)
    sine = np.linalg.norm(n_perp, axis=-1, keepdims=True)  # of the angle between along and normal
    if np.any(n_len == 0.0) or np.any(sine <= PARALLEL_SINE_EPS):
        raise SolverInputError("normal is zero or parallel to along: a palm basis needs two directions")
    # Gram-Schmidt once more: the first pass leaves an error of eps / sine along ``along`` (1e-7 for nearly
    # parallel vectors); the second leaves eps, so the basis is a rotation matrix to rounding.
    n_perp = n_perp - a_u * np.sum(n_perp * a_u, axis=-1, keepdims=True)
    n_u = n_perp / np.linalg.norm(n_perp, axis=-1, keepdims=True)
    a_u = np.broadcast_to(a_u, batch + (3,))  # one along for a batch of normals (n_u has the full batch)
    return np.stack([a_u, n_u, np.cross(a_u, n_u)], axis=-1)


def _check_basis(basis: ArrayLike, what: str) -> FloatArray:
    b = as_float_array(basis, what, (3, 3))
    require_finite(b, what)
    gram = np.swapaxes(b, -1, -2) @ b
    if np.any(np.abs(gram - np.eye(3)) > BASIS_ORTHONORMAL_TOL) or \
            np.any(np.abs(np.linalg.det(b) - 1.0) > BASIS_ORTHONORMAL_TOL):
        raise SolverInputError(f"{what} must be a rotation matrix (orthonormal columns, determinant 1); "
                               "build one with kinema.hands.palm_basis(along, normal)")
    return b


def palm_rotation(hand: Hand, target_basis_world: ArrayLike) -> FloatArray:
    """World rotation ``(*batch, 4)`` of the wrist that puts its palm basis on ``target_basis_world``.

    ``target_basis_world`` ``(*batch, 3, 3)``: the wanted palm basis in world
    space (columns ``along``, ``normal``, ``along x normal``, e.g. from
    :func:`palm_basis`).  The wrist's world rotation ``W`` maps the palm basis
    ``P`` (wrist frame) to ``W P``; solving ``W P = target`` gives
    ``W = target P^T``.
    """
    if not isinstance(hand, Hand):
        raise SolverInputError(f"palm_rotation: hand must be a kinema.hands.Hand, got {type(hand).__name__}")
    target = _check_basis(target_basis_world, "target_basis_world")
    return rot.from_matrix(target @ hand.palm_basis.T)


def align_palm(pose: Pose, hand: Hand, target_basis_world: ArrayLike, *, out: Pose | None = None) -> Pose:
    """``pose`` with the wrist turned so its palm basis is ``target_basis_world`` (world).

    Run it after the arm solve: the wrist's world orientation becomes
    :func:`palm_rotation`, converted to a local rotation through its parent's
    world rotation (``q_local = inverse(q_parent_world) W``).  The wrist's
    position and every other joint's local transform are unchanged.  Batched
    poses and bases broadcast; ``out`` (a pose of the full batch shape) is
    written when given, otherwise a new pose is returned.
    """
    _check_pose(hand, pose, "align_palm")
    wrist_world = palm_rotation(hand, target_basis_world)
    parent = int(hand.skeleton.parents[hand.wrist])
    result = _output(pose, out, wrist_world.shape[:-1])
    if parent < 0:
        result.rotations[..., hand.wrist, :] = wrist_world
        return result
    parent_world = forward_kinematics(hand.skeleton, pose).rotations[..., parent, :]
    result.rotations[..., hand.wrist, :] = rot.multiply(rot.inverse(parent_world), wrist_world)
    return result


# ------------------------------------------------------------------------------------------ the fingers
def finger_angles(finger: Finger, amount: ArrayLike) -> FloatArray:
    """Flexion angles ``(*batch, 3)`` (radians) of ``finger``'s joints for a curl ``amount`` ``(*batch,)`` in 0..1.

    The curl is a share of the finger's whole range: the angles add up to
    ``amount * sum(max_angles)``, each joint taking ``min(max_k, lam w_k)``
    (``w`` the finger's weights, ``lam`` solved exactly; piecewise linear),
    so heavier joints bend first and a joint that reaches its limit passes
    the rest on.  0 is the rest pose, 1 every joint at its ``max_angle``.
    """
    if not isinstance(finger, Finger):
        raise SolverInputError(f"finger must be a kinema.hands.Finger (e.g. hand.finger('index')), "
                               f"got {type(finger).__name__}")
    c = as_float_array(amount, "curl amount", ())
    require_finite(c, "curl amount")
    if np.any((c < 0.0) | (c > 1.0)):
        raise SolverInputError(f"curl amount must be in [0, 1], got {float(c[(c < 0.0) | (c > 1.0)].flat[0]):g}")
    hi = finger.max_angles
    w = finger.weights
    breaks = np.concatenate([[0.0], np.sort(hi / w)])
    totals = np.minimum(hi[None, :], breaks[:, None] * w[None, :]).sum(axis=1)
    lam = np.interp(c * hi.sum(), totals, breaks)
    return np.minimum(hi, lam[..., None] * w)


def _finger_local(finger: Finger, rest: FloatArray, angles: FloatArray, spread: FloatArray) -> FloatArray:
    """Local rotations ``(*batch, 3, 4)`` of a finger's joints: ``rest * [spread on the knuckle] * hinge``.

    ``angles`` ``(*batch, 3)`` flexion radians, ``spread`` ``(*batch,)`` in -1..1.
    """
    hinge = rot.from_axis_angle(finger.hinge_axis, angles)
    knuckle_spread = rot.from_axis_angle(finger.spread_axis, spread * finger.spread_angle)
    rel = hinge.copy()
    rel[..., 0, :] = rot.multiply(knuckle_spread, hinge[..., 0, :])
    return rot.multiply(rest, rel)


def curl(pose: Pose, hand: Hand, amount: ArrayLike, *, spread: ArrayLike = 0.0, out: Pose | None = None) -> Pose:
    """``pose`` with ``hand``'s fingers curled by ``amount`` and spread by ``spread``.

    * ``amount``: a number, ``(F,)`` one per finger (``F = len(hand.fingers)``,
      the hand's finger order) or ``(*batch, F)``, each in 0..1 (see
      :func:`finger_angles`).  The fingers' local rotations are *set*, not
      added to: 0 is the rest pose.
    * ``spread``: the same shapes, in -1..1: the knuckle turns by
      ``spread * finger.spread_angle`` about its ``spread_axis`` before
      flexing (0 keeps every joint a pure hinge, within its limit).

    The result's batch is the broadcast of the pose's batch and those of ``amount`` and ``spread`` (their
    shapes less the finger axis); :class:`~kinema.ShapeError` naming the three when they do not broadcast.
    """
    _check_pose(hand, pose, "curl")
    n_f = len(hand.fingers)
    c = _per_finger(amount, n_f, "curl amount")
    s = _per_finger(spread, n_f, "spread")
    if np.any(np.abs(s) > 1.0):
        raise SolverInputError("spread must be in [-1, 1]")
    try:
        broadcast_batch(pose.batch_shape, c.shape[:-1], s.shape[:-1])
    except ShapeError:
        raise ShapeError("pose, amount and spread batch dimensions", "shapes that broadcast together",
                         f"pose {pose.batch_shape}, amount {c.shape[:-1]}, spread {s.shape[:-1]}") from None
    # amount and spread on their common batch (each finger's rotations are made once per item of it, not
    # per item of the pose's batch); the pose's batch broadcasts in when they are written.
    batch = broadcast_batch(c.shape[:-1], s.shape[:-1])
    c = np.broadcast_to(c, batch + (n_f,))
    s = np.broadcast_to(s, batch + (n_f,))
    result = _output(pose, out, batch)
    rest = hand.skeleton.rotations
    for i, finger in enumerate(hand.fingers):
        angles = finger_angles(finger, c[..., i])
        idx = list(finger.joints)
        result.rotations[..., idx, :] = _finger_local(finger, rest[idx], angles, s[..., i])
    return result


def _per_finger(x: ArrayLike, n_f: int, what: str) -> FloatArray:
    a = as_float_array(x, what, ())
    require_finite(a, what)
    if a.ndim == 0:
        return np.full(n_f, float(a))
    if a.shape[-1] != n_f:
        raise ShapeError(what, f"a number, ({n_f},) or (..., {n_f}) (one per finger)", tuple(a.shape))
    return a


# --------------------------------------------------------------------------------------------- the grip
@dataclass(frozen=True)
class GripResult:
    """What :func:`grip` did, per finger (the hand's order).

    * ``pose``: the pose with the fingers closed.
    * ``angles``: ``(F, 3)`` radians, each joint's flexion (within its hinge).
    * ``gap``: ``(F,)`` distance from the finger's closest bone to the
      cylinder's surface (negative inside), length units.
    * ``touching``: ``(F,)`` bool, ``|gap| <= GRIP_TOLERANCE`` times the finger's
      length (knuckle to tip); False when the finger closed fully without
      reaching the cylinder.
    """

    pose: Pose
    angles: FloatArray
    gap: FloatArray
    touching: NDArray[np.bool_]


def grip(pose: Pose, hand: Hand, axis_point_world: ArrayLike, axis_direction_world: ArrayLike, radius: float,
         *, out: Pose | None = None) -> GripResult:
    """Close ``hand``'s fingers around a cylinder until each one touches it.

    The cylinder (infinite) has its axis through ``axis_point_world`` ``(3,)``
    along ``axis_direction_world`` ``(3,)`` and ``radius`` (length units;
    fingers are their bone lines, so add the finger's thickness for skin
    contact).  Each finger first curls as a whole (:func:`finger_angles`)
    until one of its bones reaches the surface, then the joints past that
    bone keep closing (towards their limits) until a later bone touches too,
    and so on to the tip; a finger that never reaches the cylinder ends fully
    curled with ``touching`` False.  A finger already touching or inside at
    rest stays at rest.  ``pose`` is one pose (no batch dimensions); the hand's
    other joints are read from it as they are (place the wrist first).
    """
    _check_pose(hand, pose, "grip")
    if pose.batch_shape != ():
        raise ShapeError("pose", "one pose (J, k) for grip", f"batch {pose.batch_shape}")
    center = as_float_array(axis_point_world, "axis_point_world", (3,), batch=False)
    direction = as_float_array(axis_direction_world, "axis_direction_world", (3,), batch=False)
    require_finite(center, "axis_point_world")
    require_finite(direction, "axis_direction_world")
    axis_u, length = unit_and_length(direction)
    if float(length[0]) == 0.0:
        raise SolverInputError("axis_direction_world is a zero vector: a cylinder needs an axis")
    r = positive_number(radius, "radius")
    result = _output(pose, out, ())
    fk = forward_kinematics(hand.skeleton, pose)
    if fk.scales is None:
        raise SolverInputError("grip needs uniform scales on the hand and its ancestors")
    n_f = len(hand.fingers)
    angles = np.zeros((n_f, 3))
    gaps = np.zeros(n_f)
    lengths = np.zeros(n_f)  # each finger's, knuckle to tip (world)
    for i, finger in enumerate(hand.fingers):
        parent = int(hand.skeleton.parents[finger.joints[0]])
        frame = _FingerFrame(hand.skeleton, pose, finger, fk.positions[finger.joints[0]], fk.rotations[parent],
                             float(fk.scales[parent]))

        def bone_gaps(a: FloatArray, frame: _FingerFrame = frame) -> FloatArray:
            return _bone_gaps(frame.points(a), center, axis_u, r)

        angles[i] = _close_finger(finger, bone_gaps)
        gaps[i] = float(bone_gaps(angles[i][None]).min())
        lengths[i] = float(np.sum(unit_and_length(frame.offsets)[1]))
        idx = list(finger.joints)
        result.rotations[idx, :] = _finger_local(finger, hand.skeleton.rotations[idx], angles[i], np.zeros(()))
    return GripResult(result, angles, gaps, np.abs(gaps) <= GRIP_TOLERANCE * lengths)


class _FingerFrame:
    """World points of one finger (knuckle, two joints, tip) for batches of flexion angles.

    Plain 3x3 matrices (Rodrigues' formula for the hinge turns): the grip evaluates a few hundred angle
    sets per finger, where per-call overhead matters more than the arithmetic.
    """

    def __init__(self, skeleton: Skeleton, pose: Pose, finger: Finger, knuckle_world: FloatArray,
                 parent_world: FloatArray, parent_scale: float) -> None:
        chain = [*finger.joints, finger.tip]
        if not np.allclose(pose.scales[chain], 1.0):
            raise SolverInputError(f"grip needs unit scales on finger {finger.name!r}")
        self.rest = rot.as_matrix(skeleton.rotations[list(finger.joints)])  # (3, 3, 3)
        self.offsets = pose.translations[chain[1:]] * parent_scale  # (3, 3): each joint's offset from the last
        self.knuckle_world = knuckle_world
        self.parent_world = rot.as_matrix(parent_world)
        a = finger.hinge_axis
        self.cross = np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])

    def points(self, angles: FloatArray) -> FloatArray:
        """``(M, 4, 3)`` world positions for angles ``(M, 3)``."""
        k = self.cross
        sin, cos = np.sin(angles)[..., None, None], np.cos(angles)[..., None, None]
        hinge = np.eye(3) + sin * k + (1.0 - cos) * (k @ k)  # (M, 3, 3, 3): each joint's turn
        world = np.broadcast_to(self.parent_world, (angles.shape[0], 3, 3))
        pts = [np.broadcast_to(self.knuckle_world, (angles.shape[0], 3))]
        for j in range(3):
            world = world @ self.rest[j] @ hinge[:, j]
            pts.append(pts[-1] + world @ self.offsets[j])
        return np.stack(pts, axis=1)


def _bone_gaps(points: FloatArray, center: FloatArray, axis_u: FloatArray, radius: float) -> FloatArray:
    """``(M, n - 1)``: each bone's distance to the axis line minus ``radius``, for polylines ``(M, n, 3)``."""
    rel = points - center
    perp = rel - np.sum(rel * axis_u, axis=-1, keepdims=True) * axis_u  # in the plane across the axis
    a, b = perp[:, :-1], perp[:, 1:]
    ab = b - a
    denom = np.sum(ab * ab, axis=-1)
    t = np.clip(-np.sum(a * ab, axis=-1) / np.where(denom > 0.0, denom, 1.0), 0.0, 1.0)
    closest = a + t[..., None] * ab
    return unit_and_length(closest)[1][..., 0] - radius  # finite however far the cylinder is


def _first_contact(gap_at: Callable[[FloatArray], FloatArray]) -> float | None:
    """Smallest ``t`` in [0, 1] with ``gap_at(t) <= 0`` (to the refinement's resolution), or None."""
    ts = np.linspace(0.0, 1.0, CONTACT_SAMPLES + 1)
    inside = gap_at(ts) <= 0.0
    if not np.any(inside):
        return None
    k = int(np.argmax(inside))
    if k == 0:
        return 0.0
    lo, hi = float(ts[k - 1]), float(ts[k])
    for _ in range(CONTACT_REFINE_ROUNDS):
        ts = np.linspace(lo, hi, CONTACT_REFINE_SAMPLES + 1)
        inside = gap_at(ts) <= 0.0
        k = max(int(np.argmax(inside)), 1)
        lo, hi = float(ts[k - 1]), float(ts[k])
    return hi


def _close_finger(finger: Finger, bone_gaps: Callable[[FloatArray], FloatArray]) -> FloatArray:
    """The finger's angles ``(3,)`` after closing on the cylinder (see :func:`grip`).

    ``bone_gaps(angles (M, 3)) -> (M, 3)``: each bone's distance to the surface.
    """
    t = _first_contact(lambda ts: bone_gaps(finger_angles(finger, ts)).min(axis=-1))
    if t is None:
        return finger.max_angles
    if t == 0.0:
        return np.zeros(3)  # touching or inside at rest: nothing to close
    angles = finger_angles(finger, np.array(t))
    hi = finger.max_angles
    first = 0
    while True:
        # The joints past the bone that touches keep closing until a later bone touches too.
        free = first + int(np.argmin(bone_gaps(angles[None])[0, first:])) + 1
        if free > 2:
            return angles
        start = angles.copy()

        def more(ts: FloatArray, free: int = free, start: FloatArray = start) -> FloatArray:
            a = np.broadcast_to(start, (ts.shape[0], 3)).copy()
            a[:, free:] = start[free:] + ts[:, None] * (hi[free:] - start[free:])
            return bone_gaps(a)[:, free:].min(axis=-1)

        t_more = _first_contact(more)
        if t_more is None:
            angles[free:] = hi[free:]
            return angles
        angles[free:] = start[free:] + t_more * (hi[free:] - start[free:])
        first = free


# ------------------------------------------------------------------------------------------------ shared
def _check_pose(hand: Hand, pose: Pose, what: str) -> None:
    """A pose of ``hand``'s skeleton (every array's joint count), finite."""
    if not isinstance(hand, Hand):
        raise SolverInputError(f"{what}: hand must be a kinema.hands.Hand, got {type(hand).__name__}")
    check_pose(hand.skeleton, pose, what)
    check_pose_finite(pose, what)


def _output(pose: Pose, out: Pose | None, batch: Sequence[int]) -> Pose:
    """The pose to write: ``out`` (filled from ``pose`` unless it is ``pose``) or a copy of the full batch."""
    shape = broadcast_batch(pose.batch_shape, tuple(batch))
    if out is None:
        return pose.broadcast(shape)
    if not isinstance(out, Pose) or out.rotations.shape != shape + (pose.n_joints, 4):
        got = tuple(out.rotations.shape) if isinstance(out, Pose) else type(out).__name__
        raise ShapeError("out", f"a Pose of shape {shape + (pose.n_joints, 4)}", got)
    if out is not pose:
        out.translations[...] = pose.translations
        out.rotations[...] = pose.rotations
        out.scales[...] = pose.scales
    return out
