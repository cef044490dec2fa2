"""What a demo frame draws: world-space polylines and dots, independent of any renderer.

A demo builds one :class:`Drawing` per frame; a renderer (PNG frames, the viewer) draws it.
Colours are RGB triples in 0..1; widths and radii are in world length units.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..fk import forward_kinematics
from ..pose import Pose
from ..skeleton import Skeleton

__all__ = ["Dot", "Drawing", "Polyline"]

RGB = tuple[float, float, float]


@dataclass(frozen=True)
class Polyline:
    """A line through ``points_world`` ``(n, 3)`` (n >= 2), ``width`` in length units."""

    points_world: NDArray[np.float64]
    color: RGB
    width: float
    label: str = ""


@dataclass(frozen=True)
class Dot:
    """A filled disc or sphere of ``radius`` (length units) at ``position_world`` ``(3,)``."""

    position_world: NDArray[np.float64]
    color: RGB
    radius: float
    label: str = ""


@dataclass
class Drawing:
    """One frame of a demo: polylines and dots in world space (y up), plus a caption."""

    lines: list[Polyline] = field(default_factory=list)
    dots: list[Dot] = field(default_factory=list)
    caption: str = ""

    def line(self, points_world: ArrayLike, color: RGB, width: float, label: str = "") -> None:
        """Add a polyline through ``points_world`` ``(n, 3)``."""
        pts = np.array(points_world, dtype=np.float64).reshape(-1, 3)
        self.lines.append(Polyline(pts, color, float(width), label))

    def dot(self, position_world: ArrayLike, color: RGB, radius: float, label: str = "") -> None:
        """Add a dot at ``position_world`` ``(3,)``."""
        p = np.array(position_world, dtype=np.float64).reshape(3)
        self.dots.append(Dot(p, color, float(radius), label))

    def skeleton(self, skeleton: Skeleton, pose: Pose, color: RGB, width: float, joint_radius: float = 0.0) -> None:
        """Add every bone of one (unbatched) ``pose`` as a segment parent -> child, and dots at the joints."""
        positions_world = forward_kinematics(skeleton, pose).positions
        for j, p in enumerate(skeleton.parents):
            if p >= 0:
                self.line(positions_world[[p, j]], color, width)
            if joint_radius > 0.0:
                self.dot(positions_world[j], color, joint_radius)

    def bounds(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(lo, hi)`` ``(3,)`` corners of the box holding every point (zeros when empty)."""
        pts = [ln.points_world for ln in self.lines] + [d.position_world[None] for d in self.dots]
        if not pts:
            return np.zeros(3), np.zeros(3)
        allp = np.concatenate(pts, axis=0)
        return allp.min(axis=0), allp.max(axis=0)
