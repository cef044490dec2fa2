"""``kinema demo stairs``: the bundled humanoid walking up a flight of steps, feet placed by leg IK.

A procedural gait, so that every number is the demo's own: each step the swing foot lifts off one
tread and lands on the tread after next (one tread per step, left and right in turn), on an arc
that clears the edge; the pelvis moves forward at a steady speed and rises with the ground under
it.  Each leg is a prepared :class:`kinema.TwoBone` (hip, knee, ankle) with a knee pole ahead of
the knee and the foot kept flat (``end_rotation``); when a foot target is farther from its hip
than the leg can reach, the pelvis is lowered just enough for it to reach (the most either leg
needs), the classic stairs fix.

The humanoid (:func:`kinema.samples.humanoid`) faces +x, y up, metres; its ankle joint is
:data:`ANKLE_HEIGHT` above the sole.  One state, ``"climb"``; the walk starts again from the
bottom once it reaches the top landing.
"""

from __future__ import annotations

import math

import numpy as np

from .. import TwoBone, samples
from .._types import FloatArray
from ..fk import forward_kinematics
from ._draw import Drawing

__all__ = ["DEMO", "StairsSession", "make", "TREAD", "RISE", "STEPS", "ANKLE_HEIGHT", "tread_height",
           "tread_center", "LEGS"]


#: The flight: tread depth and rise (metres) and the number of steps; treads before the first step
#: and after the last are flat floor and landing.
TREAD, RISE, STEPS = 0.32, 0.17, 8
#: Flat treads walked before the first step and after the last.
APPROACH, LANDING = 3, 3
#: The ankle joint's height above the sole (metres).
ANKLE_HEIGHT = 0.08
#: Seconds per step, and the fraction of it both feet are planted (double support).
STEP_TIME, DOUBLE_SUPPORT = 0.6, 0.25
#: How high the swing foot lifts (metres), on top of the rise it climbs.
LIFT = 0.12
#: The pelvis rides this fraction of the leg's length above the ground line (knees slightly bent).
STANCE_HEIGHT = 0.86
#: A target is reachable when within this fraction of the leg's full length (kept short of straight).
REACH_FRACTION = 0.97
#: After the pelvis was lowered, it comes back up at this rate (1/s): ``exp(-rate t)`` of the dip is left.
HIP_RECOVERY_RATE = 5.0
#: The knee pole: this far ahead (+x) of the hip-ankle midpoint.
POLE_AHEAD = 1.0
#: (side, hip, knee, ankle) of the two legs; left starts as the stance foot.
LEGS = (("left", "left_hip", "left_knee", "left_ankle"), ("right", "right_hip", "right_knee", "right_ankle"))
#: The head, drawn as a dot this far above the neck joint (m), of this radius.
HEAD_OFFSET, HEAD_RADIUS = np.array([0.0, 0.12, 0.0]), 0.1
FACING = np.array([1.0, 0.0, 0.0])
FLAT_FOOT = np.array([0.0, 0.0, 0.0, 1.0])  # the ankle's world rotation at rest: the foot level

BODY_COLOR = (0.25, 0.35, 0.70)
STAIR_COLOR = (0.45, 0.42, 0.38)
TARGET_COLOR = (0.90, 0.25, 0.20)
POLE_COLOR = (0.20, 0.65, 0.35)


def tread_height(k: int) -> float:
    """Height (m) of tread ``k`` (0-based from the first tread of the approach)."""
    return RISE * min(max(k - APPROACH + 1, 0), STEPS)


def tread_center(k: int) -> float:
    """x (m) of the middle of tread ``k``."""
    return TREAD * (k + 0.5)


def _smoothstep(s: float) -> float:
    return s * s * (3.0 - 2.0 * s)


class StairsSession:
    """One climb.  After each :meth:`step`: ``time`` (s), ``pose`` (the humanoid), ``foot_targets``
    ``{side: (3,)}`` ankle targets, ``planted`` ``{side: tread index or None}``, ``needed`` (m the
    pelvis must go down this frame for every foot to reach), ``lowered`` (m it went down: ``needed``,
    or more while it eases back up), ``results`` ``{side: SolveResult}``."""

    def __init__(self, seed: int = 0) -> None:
        self.time = 0.0
        self.auto = True
        self.state = "climb"
        self.skeleton = samples.humanoid()
        self.names = list(self.skeleton.names)
        rest = forward_kinematics(self.skeleton, self.skeleton.rest_pose()).positions
        self.hip_offsets = {side: rest[self.names.index(hip)] - rest[0] for side, hip, _, _ in LEGS}
        upper = float(np.linalg.norm(rest[self.names.index("left_knee")] - rest[self.names.index("left_hip")]))
        lower = float(np.linalg.norm(rest[self.names.index("left_ankle")] - rest[self.names.index("left_knee")]))
        self.leg_length = upper + lower
        self.legs = {side: TwoBone(self.skeleton, (hip, knee, ankle)) for side, hip, knee, ankle in LEGS}
        self.flights = APPROACH + STEPS + LANDING
        self.lowered = 0.0
        self._place(0.0)

    def advance_state(self) -> None:
        """The climb has one state: nothing to advance."""

    def step(self, dt: float) -> None:
        """Advance ``dt`` seconds and pose the humanoid."""
        self.time += dt
        if self.time / STEP_TIME >= self.flights - 2:  # at the top landing: start again from the bottom
            self.time = 0.0
        self._place(dt)

    def _foot(self, side_index: int, step_index: int, phase: float) -> tuple[FloatArray, int | None]:
        """Ankle target of leg ``side_index`` during step ``step_index`` at ``phase`` in [0, 1), and its
        tread if planted.  Leg 0 swings on odd steps, leg 1 on even ones; a swing goes from tread
        ``step - 1`` to ``step + 1``."""
        z = self.hip_offsets[LEGS[side_index][0]][2]
        swinging = (step_index % 2 == 0) == (side_index == 1)
        if not swinging or phase < DOUBLE_SUPPORT:
            k = step_index if not swinging else step_index - 1
            k = max(k, 0)
            return np.array([tread_center(k), tread_height(k) + ANKLE_HEIGHT, z]), k
        s = _smoothstep((phase - DOUBLE_SUPPORT) / (1.0 - DOUBLE_SUPPORT))
        k0, k1 = max(step_index - 1, 0), step_index + 1
        x = tread_center(k0) + s * (tread_center(k1) - tread_center(k0))
        y0, y1 = tread_height(k0), tread_height(k1)
        y = y0 + s * (y1 - y0) + (LIFT + 0.5 * (y1 - y0)) * math.sin(math.pi * s) + ANKLE_HEIGHT
        return np.array([x, y, z]), None

    def _ground_under(self, x: float) -> float:
        """The ground line under ``x``: tread heights joined linearly between tread centres."""
        u = x / TREAD - 0.5
        k = int(math.floor(u))
        f = u - k
        return (1.0 - f) * tread_height(max(k, 0)) + f * tread_height(max(k + 1, 0))

    def _place(self, dt: float) -> None:
        u = self.time / STEP_TIME
        step_index, phase = int(u), u - int(u)
        pelvis_x = tread_center(0) + TREAD * (u - 0.5)
        pelvis_y = self._ground_under(pelvis_x) + ANKLE_HEIGHT + STANCE_HEIGHT * self.leg_length
        self.foot_targets: dict[str, FloatArray] = {}
        self.planted: dict[str, int | None] = {}
        for i, (side, _, _, _) in enumerate(LEGS):
            self.foot_targets[side], self.planted[side] = self._foot(i, step_index, phase)
        # lower the pelvis until every foot target is within reach of its hip
        reach = REACH_FRACTION * self.leg_length
        needed = 0.0
        for side, target in self.foot_targets.items():
            hip = np.array([pelvis_x, pelvis_y, 0.0]) + self.hip_offsets[side]
            across = float(np.hypot(target[0] - hip[0], target[2] - hip[2]))
            highest = target[1] + math.sqrt(max(reach * reach - across * across, 0.0))
            needed = max(needed, hip[1] - highest)
        # down at once (the foot must reach), back up smoothly (exponential, frame-rate independent)
        eased = needed + (self.lowered - needed) * math.exp(-HIP_RECOVERY_RATE * dt)
        self.needed = max(needed, 0.0)
        self.lowered = max(needed, eased, 0.0)
        root = np.array([pelvis_x, pelvis_y - self.lowered, 0.0])
        pose = self.skeleton.rest_pose()
        pose.translations[0] = root
        self.results = {}
        for side, _, _, _ in LEGS:
            hip = root + self.hip_offsets[side]
            target = self.foot_targets[side]
            pole = 0.5 * (hip + target) + POLE_AHEAD * FACING
            res = self.legs[side].solve(pose, target, pole=pole, end_rotation=FLAT_FOOT)
            self.results[side] = res
            pose = res.pose
        self.pose = pose
        self.positions = forward_kinematics(self.skeleton, pose).positions

    def drawing(self) -> Drawing:
        d = Drawing()
        for z in (-0.35, 0.35):  # the flight's two side profiles, and the tread edges across
            prof = []
            for k in range(self.flights):
                x0, x1, y = TREAD * k, TREAD * (k + 1), tread_height(k)
                prof += [(x0, y, z), (x1, y, z)]
            d.line(prof, STAIR_COLOR, 0.012)
        for k in range(self.flights):
            y = tread_height(k)
            d.line([(TREAD * k, y, -0.35), (TREAD * k, y, 0.35)], STAIR_COLOR, 0.008)
        d.skeleton(self.skeleton, self.pose, BODY_COLOR, 0.045, joint_radius=0.03)
        d.dot(self.positions[self.names.index("neck")] + HEAD_OFFSET, BODY_COLOR, HEAD_RADIUS, "head")
        for side, _, _, ankle in LEGS:
            a = self.positions[self.names.index(ankle)]
            sole = a[1] - ANKLE_HEIGHT
            d.line([a, (a[0] - 0.05, sole, a[2]), (a[0] + 0.17, sole, a[2]), a], BODY_COLOR, 0.03)
            if self.planted[side] is None:
                d.dot(self.foot_targets[side], TARGET_COLOR, 0.025)
        low = f"  hips lowered {100.0 * self.lowered:.1f} cm" if self.lowered > 0.0 else ""
        d.caption = f"stairs  t={self.time:5.2f}s  step {int(self.time / STEP_TIME)}{low}"
        return d


def make(seed: int = 0) -> StairsSession:
    """A new climb (the walk is deterministic; ``seed`` is accepted for the common interface)."""
    return StairsSession(seed)


DEMO = {"name": "stairs", "make": make, "fps": 30.0, "view": (-35.0, 12.0), "fit_seconds": 7.0,
        "about": "the humanoid walking up steps: two-bone leg IK with knee poles, hips lowered to reach"}
