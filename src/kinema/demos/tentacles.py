"""``kinema demo tentacles``: a creature whose tentacles chase a moving target, one batched CCD solve a frame.

Every tentacle is the same chain (a fixed ``base`` joint carrying where and how it is attached to
the body, then :data:`LINKS` links), so one :class:`kinema.CCD`, prepared once with a
:class:`kinema.limits.SwingTwist` cone on every link, solves all of them in one call on a pose
batch ``(TENTACLES,)``: the bases differ per item, the chain and its limits do not.  Each frame
starts from the previous frame's solved pose, and ``max_step`` caps how far a link turns in
one sweep, so the tentacles curl after the target smoothly instead of flipping.

States: ``"chase"`` (the target circles the creature) and ``"rest"`` (it hovers below);
:meth:`TentaclesSession.advance_state` switches.
"""

from __future__ import annotations

import math

import numpy as np

from .. import CCD, Skeleton, rotation
from .._types import FloatArray
from ..filters import CriticallyDampedSpring
from ..fk import forward_kinematics
from ..limits import SwingTwist
from ._draw import Drawing

__all__ = ["DEMO", "TentaclesSession", "make", "TENTACLES", "LINKS", "LINK_LENGTH", "LINK_LIMIT", "BODY_RADIUS"]


#: Tentacles around the body, links per tentacle and their length (world units).
TENTACLES, LINKS, LINK_LENGTH = 6, 8, 0.16
#: Radius of the body (tentacles are attached on a ring of this radius, under its equator).
BODY_RADIUS = 0.35
#: Each link's limit relative to the one before it: a 28-degree cone, +-10 degrees of twist about
#: the link (its +y axis).
LINK_LIMIT = SwingTwist(axis=(0.0, 1.0, 0.0), swing=28.0, twist_min=-10.0, twist_max=10.0, degrees=True)
#: CCD per frame: sweeps, tolerance (world units) and the largest turn of a link per sweep (rad).
ITERATIONS, TOLERANCE, MAX_STEP = 12, 1e-3, 0.12
#: The target's path (world units, rad/s): a tilted circle of this radius around the body.
TARGET_RADIUS, TARGET_RATE, TARGET_BOB = 1.05, 0.8, 0.35
#: Where the target hovers in the "rest" state (from the body).
REST_TARGET = np.array([0.0, -1.3, 0.0])
#: The target follows its goal (the path, or the rest point) through a critically damped spring of
#: this angular frequency (rad/s), so a state switch eases it over instead of jumping.
TARGET_OMEGA = 4.0

BODY_COLOR = (0.55, 0.30, 0.60)
TENTACLE_COLORS = [(0.65, 0.35, 0.75), (0.45, 0.30, 0.70), (0.75, 0.40, 0.60)]
TARGET_COLOR = (0.95, 0.55, 0.10)


def tentacle_skeleton() -> Skeleton:
    """``base`` (the attachment, set per tentacle) and ``link0..link{LINKS}``, each :data:`LINK_LENGTH` along +y."""
    names = ["base"] + [f"link{i}" for i in range(LINKS + 1)]
    offsets = [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)] + [(0.0, LINK_LENGTH, 0.0)] * LINKS
    return Skeleton(names, [-1] + list(range(LINKS + 1)), offsets)


def _attachments() -> tuple[FloatArray, FloatArray]:
    """Bases' positions ``(T, 3)`` on the body ring and rotations ``(T, 4)`` pointing down and outward."""
    a = 2.0 * math.pi * np.arange(TENTACLES) / TENTACLES
    out = np.stack([np.cos(a), np.zeros_like(a), np.sin(a)], axis=-1)
    positions = BODY_RADIUS * (0.8 * out + np.array([0.0, -0.6, 0.0]))
    # each base's +y (the tentacle's direction) points down, then tips 40 degrees outward
    down = np.broadcast_to([0.0, 0.0, 1.0, 0.0], (TENTACLES, 4))  # 180 degrees about z: +y -> -y
    tilt_axis = np.cross(out, [0.0, 1.0, 0.0])  # turning about this tips -y toward +out
    tilt = rotation.from_axis_angle(tilt_axis, np.full(TENTACLES, -math.radians(40.0)))
    return positions, rotation.multiply(tilt, down)


class TentaclesSession:
    """One run of the tentacles demo: ``time`` (s), ``body`` ``(3,)``, ``target`` ``(3,)``, ``pose``
    (batch ``(TENTACLES,)``), ``positions`` ``(TENTACLES, LINKS + 2, 3)`` world, ``result`` (the last
    :class:`kinema.SolveResult`)."""

    def __init__(self, seed: int = 0) -> None:
        self.phase = float(np.random.default_rng(seed).uniform(0.0, 2.0 * math.pi)) if seed else 0.0
        self.time = 0.0
        self.auto = True
        self.state = "chase"
        self.skeleton = tentacle_skeleton()
        limits = {f"link{i}": LINK_LIMIT for i in range(1, LINKS + 1)}
        self.solver = CCD(self.skeleton, [f"link{i}" for i in range(LINKS + 1)], iterations=ITERATIONS,
                          tolerance=TOLERANCE, max_step=MAX_STEP, limits=limits)
        self.base_positions, self.base_rotations = _attachments()
        self.body = np.zeros(3)
        pose = self.skeleton.rest_pose((TENTACLES,))
        pose.rotations[:, 0] = self.base_rotations
        self.pose = pose
        self.follower = CriticallyDampedSpring(TARGET_OMEGA)
        self.target = self.follower.update(self._path_target(), 0.0)
        self._solve()

    def advance_state(self) -> None:
        """Switch between chasing the circling target and resting (the target hovers below)."""
        self.state = "rest" if self.state == "chase" else "chase"

    def _path_target(self) -> FloatArray:
        a = TARGET_RATE * self.time + self.phase
        return self.body + np.array([TARGET_RADIUS * math.cos(a), TARGET_BOB * math.sin(2.0 * a) - 0.7,
                                     TARGET_RADIUS * math.sin(a)])

    def step(self, dt: float) -> None:
        """Advance ``dt`` seconds: move the body and the target, then one batched CCD solve."""
        self.time += dt
        self.body = np.array([0.0, 0.08 * math.sin(1.3 * self.time), 0.0])
        goal = self._path_target() if self.state == "chase" else self.body + REST_TARGET
        self.target = self.follower.update(goal, dt)  # eases after the goal, whatever the frame rate
        self._solve()

    def _solve(self) -> None:
        self.pose.translations[:, 0] = self.body + self.base_positions
        targets = np.broadcast_to(self.target, (TENTACLES, 3))
        self.result = self.solver.solve(self.pose, targets)
        self.pose = self.result.pose
        self.positions = forward_kinematics(self.skeleton, self.pose).positions

    def drawing(self) -> Drawing:
        d = Drawing()
        d.dot(self.body, BODY_COLOR, BODY_RADIUS, "body")
        for side in (-1.0, 1.0):  # eyes, on the +z side
            d.dot(self.body + BODY_RADIUS * np.array([0.35 * side, 0.25, 0.9]), (1.0, 1.0, 1.0), 0.07)
        for k in range(TENTACLES):
            color = TENTACLE_COLORS[k % len(TENTACLE_COLORS)]
            pts = self.positions[k, 1:]
            for i in range(LINKS):  # thinner toward the tip
                d.line(pts[i:i + 2], color, 0.05 * (1.0 - 0.08 * i))
            d.dot(pts[-1], color, 0.03)
        d.dot(self.target, TARGET_COLOR, 0.07, "target")
        reached = int(np.count_nonzero(self.result.reached))
        d.caption = f"tentacles  t={self.time:5.2f}s  {self.state}  {reached}/{TENTACLES} reach the target"
        return d


def make(seed: int = 0) -> TentaclesSession:
    """A new tentacles session (``seed`` shifts the target's path)."""
    return TentaclesSession(seed)


DEMO = {"name": "tentacles", "make": make, "fps": 30.0, "view": (20.0, 18.0), "fit_seconds": 8.0,
        "about": "six CCD tentacles with swing-twist limits chasing a target, one batched solve a frame"}
