"""Pure-NumPy geometry for the viewer: joint spheres, bone capsules, limit outlines.

Nothing here imports viser; the functions return arrays the scene nodes take
(positions, wxyz quaternions, scales, ``(N, 2, 3)`` line segments).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .. import rotation as rot
from .._types import FloatArray
from ..limits import EulerRange, Hinge, Limit, SwingTwist
from ..pose import Pose
from ..skeleton import Skeleton

__all__ = [
    "icosphere",
    "unit_bone_mesh",
    "bone_instances",
    "limit_segments",
    "joint_radius",
    "xyzw_to_wxyz",
]


#: Bones shorter than this (world units) are not drawn (a joint sitting on its parent has no direction).
MIN_BONE_LENGTH = 1e-9

#: Limit outlines are drawn at this fraction of the limited joint's child bone.
LIMIT_RADIUS_FRACTION = 0.45

#: Points per drawn arc or cone rim.
ARC_POINTS = 24


def xyzw_to_wxyz(q: FloatArray) -> FloatArray:
    """kinema's xyzw quaternions in viser's wxyz order (``(..., 4)``)."""
    return np.concatenate([q[..., 3:4], q[..., :3]], axis=-1)


def icosphere(subdivisions: int = 1) -> tuple[FloatArray, NDArray[np.int32]]:
    """A unit sphere: ``(vertices (V, 3), faces (F, 3))``."""
    t = (1.0 + math.sqrt(5.0)) / 2.0
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
         (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11),
         (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    verts = [np.asarray(p, dtype=np.float64) / np.linalg.norm(p) for p in v]
    faces = f
    for _ in range(subdivisions):
        cache: dict[tuple[int, int], int] = {}

        def mid(a: int, b: int, cache: dict[tuple[int, int], int] = cache) -> int:
            key = (min(a, b), max(a, b))
            if key not in cache:
                m = verts[a] + verts[b]
                verts.append(m / np.linalg.norm(m))
                cache[key] = len(verts) - 1
            return cache[key]

        new = []
        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            new += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = new
    return np.asarray(verts), np.asarray(faces, dtype=np.int32)


def unit_bone_mesh(sides: int = 8) -> tuple[FloatArray, NDArray[np.int32]]:
    """An octahedral bone (Blender style) from z=0 to z=1, widest (radius 1) at z=0.2.

    Scaled per instance by ``(width, width, length)`` and turned so +z runs
    from the parent joint to the child joint.
    """
    ring = [(math.cos(2 * math.pi * k / sides), math.sin(2 * math.pi * k / sides), 0.2) for k in range(sides)]
    verts = np.asarray([(0.0, 0.0, 0.0), *ring, (0.0, 0.0, 1.0)])
    tip = sides + 1
    faces = []
    for k in range(sides):
        a, b = 1 + k, 1 + (k + 1) % sides
        faces.append((0, b, a))
        faces.append((a, b, tip))
    return verts, np.asarray(faces, dtype=np.int32)


def joint_radius(skeleton: Skeleton, positions: FloatArray) -> float:
    """A sphere radius that suits the rig: 6% of its median bone length (1e-3 of its size at least)."""
    par = skeleton.parents
    has = par >= 0
    lengths = np.linalg.norm(positions[has] - positions[par[has]], axis=-1) if has.any() else np.zeros(0)
    lengths = lengths[lengths > MIN_BONE_LENGTH]
    extent = float(np.ptp(positions, axis=0).max()) if positions.shape[0] > 1 else 1.0
    base = float(np.median(lengths)) if lengths.size else max(extent, 1.0) * 0.1
    return max(0.06 * base, 1e-3 * max(extent, 1e-9))


def bone_instances(skeleton: Skeleton, positions: FloatArray, width: float
                   ) -> tuple[NDArray[np.int64], FloatArray, FloatArray, FloatArray]:
    """Per-bone instances of :func:`unit_bone_mesh`: ``(child joints, positions, wxyz, scales (N, 3))``.

    One bone per joint with a parent and a non-zero offset from it; the
    instance sits on the parent, +z turned onto ``child - parent``
    (minimal rotation from +z, :func:`kinema.rotation.from_two_vectors`).
    """
    par = skeleton.parents
    kids = np.nonzero(par >= 0)[0]
    d = positions[kids] - positions[par[kids]]
    length = np.linalg.norm(d, axis=-1)
    keep = length > MIN_BONE_LENGTH
    kids, d, length = kids[keep], d[keep], length[keep]
    q = rot.from_two_vectors(np.broadcast_to([0.0, 0.0, 1.0], d.shape), d)
    w = np.minimum(width, 0.15 * length)
    scales = np.stack([w, w, length], axis=-1)
    return kids, positions[par[kids]].copy(), xyzw_to_wxyz(q), scales


def _child_direction(skeleton: Skeleton, pose: Pose, joint: int, child: int | None) -> FloatArray | None:
    """The child's offset in ``joint``'s local frame (pose translation), or None without a child."""
    if child is None:
        kids = skeleton.children(joint)
        if not kids:
            return None
        child = int(kids[0])
    t = np.asarray(pose.translations[child], dtype=np.float64)
    n = float(np.linalg.norm(t))
    if n <= MIN_BONE_LENGTH:  # child sits on the joint: no direction to draw
        return None
    return t / n


def _polyline(points: FloatArray) -> FloatArray:
    return np.stack([points[:-1], points[1:]], axis=1)


def limit_segments(skeleton: Skeleton, pose: Pose, world_positions: FloatArray, world_rotations: FloatArray,
                   joint: int, limit: Limit, child: int | None = None) -> FloatArray:
    """Line segments ``(N, 2, 3)`` outlining ``limit`` of ``joint`` in world space.

    The outline is where the child bone may point: the limit acts on the
    rest-relative rotation ``q_rel`` (``q_local = q_rest q_rel``), so a child
    offset ``d`` (unit, joint-local) points along
    ``R_parent q_rest q_rel d`` in the world.

    * Hinge: the arc swept by ``q_rel = rot(axis, a)``, ``a`` in
      ``[min_angle, max_angle]``, plus the two end spokes.
    * SwingTwist: the cone rim, ``q_rel = rot(n, theta(n))`` with ``n``
      round the axis and ``theta(n) = 1 / sqrt((n1/s1)^2 + (n2/s2)^2)``
      (the elliptical bound), plus four spokes.
    * EulerRange: the twelve edges of the angle box.

    Empty ``(0, 2, 3)`` when the joint has no child to point with.
    """
    d = _child_direction(skeleton, pose, joint, child)
    empty = np.zeros((0, 2, 3))
    if d is None:
        return empty
    par = int(skeleton.parents[joint])
    q_parent = world_rotations[par] if par >= 0 else np.array([0.0, 0.0, 0.0, 1.0])
    q_base = rot.multiply(q_parent, skeleton.rotations[joint])
    origin = world_positions[joint]
    kid = child if child is not None else int(skeleton.children(joint)[0])
    radius = LIMIT_RADIUS_FRACTION * float(np.linalg.norm(world_positions[kid] - origin))
    if radius <= MIN_BONE_LENGTH:
        return empty

    def tip(q_rel: FloatArray) -> FloatArray:
        return origin + radius * rot.rotate(rot.multiply(q_base, q_rel), d)

    if isinstance(limit, Hinge):
        a = np.linspace(limit.min_angle, limit.max_angle, ARC_POINTS)
        pts = tip(rot.from_axis_angle(np.broadcast_to(limit.axis, (a.size, 3)), a))
        spokes = np.stack([np.stack([origin, pts[0]]), np.stack([origin, pts[-1]])])
        return np.concatenate([_polyline(pts), spokes])
    if isinstance(limit, SwingTwist):
        s1, s2 = limit.swing_limits
        axis = np.asarray(limit.axis)
        e1 = np.asarray(limit.reference, dtype=np.float64)
        e2 = np.cross(axis, e1)
        phi = np.linspace(0.0, 2.0 * math.pi, ARC_POINTS * 2 + 1)
        n1, n2 = np.cos(phi), np.sin(phi)
        theta = _ellipse_bound(n1, n2, s1, s2)
        axes = n1[:, None] * e1 + n2[:, None] * e2
        pts = tip(rot.from_axis_angle(axes, theta))
        n_rim = len(phi) - 1
        spokes = np.stack([np.stack([origin, pts[i]]) for i in range(0, n_rim, n_rim // 4)])
        return np.concatenate([_polyline(pts), spokes])
    if isinstance(limit, EulerRange):
        lo, hi = np.asarray(limit.mins), np.asarray(limit.maxs)
        segs = []
        s = np.linspace(0.0, 1.0, ARC_POINTS // 2)
        for ax in range(3):
            others = [i for i in range(3) if i != ax]
            for ca in (lo[others[0]], hi[others[0]]):
                for cb in (lo[others[1]], hi[others[1]]):
                    ang = np.empty((s.size, 3))
                    ang[:, ax] = lo[ax] + s * (hi[ax] - lo[ax])
                    ang[:, others[0]] = ca
                    ang[:, others[1]] = cb
                    segs.append(_polyline(tip(rot.from_euler(limit.order, ang))))
        return np.concatenate(segs)
    return empty


#: Swing bounds below this (radians) count as a closed cone direction (theta 0 there).
SWING_EPS = 1e-12


def _ellipse_bound(n1: FloatArray, n2: FloatArray, s1: float, s2: float) -> FloatArray:
    """``theta`` with ``(theta n1 / s1)^2 + (theta n2 / s2)^2 = 1``; a zero bound pins its direction to 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(np.abs(n1) > 0, (n1 / max(s1, SWING_EPS)) ** 2, 0.0)
        b = np.where(np.abs(n2) > 0, (n2 / max(s2, SWING_EPS)) ** 2, 0.0)
        out: Any = 1.0 / np.sqrt(a + b)
    return np.asarray(np.minimum(out, math.pi))
