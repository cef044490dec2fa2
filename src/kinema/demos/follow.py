"""``kinema demo follow``: the article's 2D two-bone arm following the pointer, and a tentacle too.

The seed article's mouse-following arm, done with the library: the pointer is smoothed by a
critically damped spring (:class:`kinema.filters.CriticallyDampedSpring`, integrated exactly over
each frame's ``dt``, so the arm follows the same way at 30 or 144 fps, unlike the article's
per-frame ``lerp(x, y, 0.15)``); the arm is :func:`kinema.solve_two_bone_2d` (law of cosines,
reach clamped to ``[|l1 - l2|, l1 + l2]`` continuously, never snapped); the bend side switches
with :meth:`FollowSession.advance_state`; an eight-link tentacle (a prepared
:class:`kinema.FABRIK`, created once) follows the same smoothed target.

The scene lies in the plane z = 0 (x right, y up).  With ``auto`` on the pointer is scripted along a
path that leaves the arm's reach on the outside and the inside; with it off the pointer is
whatever :meth:`FollowSession.set_pointer` last set (the viewer's draggable target).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from .. import FABRIK, Skeleton, TwoBone2D, solve_two_bone_2d
from .._types import FloatArray
from ..filters import CriticallyDampedSpring
from ..fk import forward_kinematics
from ._draw import Drawing

__all__ = ["DEMO", "FollowSession", "make", "UPPER_LENGTH", "LOWER_LENGTH", "SHOULDER", "TENTACLE_ROOT",
           "TENTACLE_LINKS", "TENTACLE_LINK_LENGTH", "SMOOTHING_OMEGA", "pointer_path"]


#: The arm's bone lengths, world units (the article's 110 and 90 pixels, divided by 100).
UPPER_LENGTH, LOWER_LENGTH = 1.1, 0.9
#: The shoulder ``(2,)`` and the tentacle's root ``(2,)``, world units in the plane z = 0.
SHOULDER = np.array([0.0, 0.0])
TENTACLE_ROOT = np.array([0.0, -2.4])
#: The tentacle: links and their length (world units): 8 x 0.3 = 2.4 long.
TENTACLE_LINKS, TENTACLE_LINK_LENGTH = 8, 0.3
#: The pointer spring's angular frequency (rad/s): a step is 90 % followed after about 0.3 s.
SMOOTHING_OMEGA = 13.0
#: The scripted pointer: angular speed around the shoulder (rad/s), and its distance
#: ``PATH_MEAN + PATH_SWING sin(PATH_RADIAL_RATE t)`` from the shoulder, which runs from 0.1
#: (inside the folded limit 0.2) to 2.3 (beyond the straight limit 2.0).
PATH_ANGULAR_RATE = 1.1
PATH_MEAN, PATH_SWING, PATH_RADIAL_RATE = 1.2, 1.1, 0.7
#: FABRIK settings for the tentacle (warm-started from the previous frame, so few iterations do).
TENTACLE_ITERATIONS, TENTACLE_TOLERANCE = 30, 1e-4

ARM_COLOR = (0.39, 0.40, 0.95)  # the article's indigo, #6366f1
TENTACLE_COLOR = (0.15, 0.60, 0.45)
JOINT_COLOR = (0.2, 0.2, 0.25)
TARGET_COLOR = (0.90, 0.25, 0.20)
POINTER_COLOR = (0.55, 0.55, 0.55)
REACH_COLOR = (0.80, 0.80, 0.85)


def pointer_path(t: float, phase: float = 0.0) -> FloatArray:
    """The scripted pointer ``(2,)`` at time ``t`` seconds: circles the shoulder going in and out of reach."""
    r = PATH_MEAN + PATH_SWING * math.sin(PATH_RADIAL_RATE * t + phase)
    a = PATH_ANGULAR_RATE * t + phase
    return SHOULDER + r * np.array([math.cos(a), math.sin(a)])


def _tentacle_skeleton() -> Skeleton:
    names = [f"link{i}" for i in range(TENTACLE_LINKS + 1)]
    offsets = [(TENTACLE_ROOT[0], TENTACLE_ROOT[1], 0.0)] + [(0.0, TENTACLE_LINK_LENGTH, 0.0)] * TENTACLE_LINKS
    return Skeleton(names, [-1] + list(range(TENTACLE_LINKS)), offsets)


def _circle(center: FloatArray, radius: float, n: int = 96) -> FloatArray:
    a = np.linspace(0.0, 2.0 * math.pi, n + 1)
    return np.stack([center[0] + radius * np.cos(a), center[1] + radius * np.sin(a), np.zeros_like(a)], axis=-1)


class FollowSession:
    """One run of the follow demo.

    * ``state``: ``"bend ccw"`` or ``"bend cw"`` (which side of the shoulder-target line the elbow is
      on); :meth:`advance_state` switches it.
    * ``auto``: the pointer follows :func:`pointer_path`; off, it stays where :meth:`set_pointer` put it.
    * after each :meth:`step`: ``time`` (s), ``pointer`` ``(2,)`` raw, ``target`` ``(2,)`` smoothed,
      ``arm`` (:class:`kinema.TwoBone2D`), ``tentacle_pose`` and ``tentacle_positions`` ``(9, 3)``.
    """

    def __init__(self, seed: int = 0) -> None:
        self.phase = float(np.random.default_rng(seed).uniform(0.0, 2.0 * math.pi)) if seed else 0.0
        self.time = 0.0
        self.auto = True
        self.bend = 1
        self.pointer = pointer_path(0.0, self.phase)
        self.spring = CriticallyDampedSpring(SMOOTHING_OMEGA)
        self.target = self.spring.update(self.pointer, 0.0)
        self.tentacle_skeleton = _tentacle_skeleton()
        self.tentacle = FABRIK(self.tentacle_skeleton, list(self.tentacle_skeleton.names),
                               iterations=TENTACLE_ITERATIONS, tolerance=TENTACLE_TOLERANCE)
        self.tentacle_pose = self.tentacle_skeleton.rest_pose()
        self._solve()

    @property
    def state(self) -> str:
        return "bend ccw" if self.bend > 0 else "bend cw"

    def advance_state(self) -> None:
        """Switch the elbow to the other side."""
        self.bend = -self.bend
        self._solve()

    def set_pointer(self, pointer: ArrayLike) -> None:
        """Put the pointer at ``pointer`` (x, y) or (x, y, z) world (z ignored); used when ``auto`` is off."""
        self.pointer = np.array(pointer, dtype=np.float64).reshape(-1)[:2].copy()

    def step(self, dt: float) -> None:
        """Advance ``dt`` seconds: move the pointer (if auto), smooth it, solve the arm and the tentacle."""
        self.time += dt
        if self.auto:
            self.pointer = pointer_path(self.time, self.phase)
        self.target = self.spring.update(self.pointer, dt)
        self._solve()

    def _solve(self) -> None:
        self.arm: TwoBone2D = solve_two_bone_2d(SHOULDER, self.target, UPPER_LENGTH, LOWER_LENGTH, self.bend)
        target_world = np.array([self.target[0], self.target[1], 0.0])
        res = self.tentacle.solve(self.tentacle_pose, target_world)
        self.tentacle_pose = res.pose
        self.tentacle_positions = forward_kinematics(self.tentacle_skeleton, self.tentacle_pose).positions

    def drawing(self) -> Drawing:
        d = Drawing()
        d.line(_circle(SHOULDER, UPPER_LENGTH + LOWER_LENGTH), REACH_COLOR, 0.015)
        d.line(_circle(SHOULDER, abs(UPPER_LENGTH - LOWER_LENGTH)), REACH_COLOR, 0.015)
        d.line(_circle(TENTACLE_ROOT, TENTACLE_LINKS * TENTACLE_LINK_LENGTH), REACH_COLOR, 0.015)
        d.line(self.tentacle_positions, TENTACLE_COLOR, 0.06, "tentacle")
        for p in self.tentacle_positions:
            d.dot(p, JOINT_COLOR, 0.035)
        arm = np.array([[*SHOULDER, 0.0], [*self.arm.elbow, 0.0], [*self.arm.end, 0.0]])
        d.line(arm, ARM_COLOR, 0.09, "arm")
        for p in arm:
            d.dot(p, JOINT_COLOR, 0.055, "joint")
        d.dot([*self.pointer, 0.0], POINTER_COLOR, 0.04, "pointer")
        d.dot([*self.target, 0.0], TARGET_COLOR, 0.05, "target")
        reach = "reached" if bool(self.arm.reached) else "clamped"
        d.caption = f"follow  t={self.time:5.2f}s  {self.state}  {reach}"
        return d


def make(seed: int = 0) -> FollowSession:
    """A new follow session (``seed`` 0: the documented path; others shift its phase)."""
    return FollowSession(seed)


DEMO = {"name": "follow", "make": make, "fps": 60.0, "view": (0.0, 0.0),
        "about": "2D two-bone arm and a FABRIK tentacle following a smoothed pointer"}
