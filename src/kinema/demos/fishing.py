"""The seated angler: one session state drives the rod, both arms, the palms and the fingers.

The scene of the fishing article the project grew from: an angler sits on a
jetty holding a rod in both hands, casts, waits for a bite, strikes, fights
the fish while one hand reels, lands it with a net taken in the free hand,
releases it and starts again.  Every frame runs the article's order::

    restore the base (seated) pose
    -> advance the state machine, place the actor
    -> rod pose and grip points from the state (grip offsets in the actor's frame -> world copies)
    -> both arms by two-bone IK (prepared kinema.TwoBone solvers, elbow poles, reach clamped)
    -> palms turned to the grips (kinema.hands.align_palm)
    -> fingers closed around the handle, the reel knob or the net's pole (kinema.hands.grip)
    -> draw (FishingSession.drawing)

Units are metres and seconds; the world is Y up, the angler faces +X with
the right hand on +Z (the sample humanoid's axes), the deck top at y = 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import hands
from .. import rotation as rot
from .._two_bone import TwoBone
from .._types import FloatArray
from .._validate import as_float_scalar, positive_number
from ..errors import SolverInputError
from ..fk import forward_kinematics
from ..pose import Pose
from ..samples import humanoid
from ..skeleton import Skeleton
from ._draw import Drawing

__all__ = ["FishingSession", "FishingOptions", "STATES", "DEMO"]


# ----------------------------------------------------------------------------------------- the scene
#: Height of the water surface below the deck top (m).
WATER_Y = -0.8
#: The jetty's deck: x from the back to the edge, z half-width (m).
DECK_BACK_X, DECK_EDGE_X, DECK_HALF_WIDTH = -1.0, 0.35, 1.0
#: Where the angler's pelvis (the humanoid's root) sits: on the deck, near the edge (m).
ACTOR_POSITION = np.array([0.05, 0.12, 0.0])
#: How far the angler may be turned on the jetty (degrees about +Y; the water lies along +X).
MAX_ACTOR_YAW_DEG = 45.0
#: The seated base pose: hips flexed and knees bent (degrees, about the joints' Z axis).
HIP_FLEX_DEG, KNEE_FLEX_DEG = 90.0, -90.0
#: Forward lean of the chest (degrees, negative about Z leans towards +X) while sitting still.
CHEST_LEAN_DEG = -8.0
#: The angler is never quite still: the chest sways (breathing) and the rod rocks, always, on top of the
#: state's motion (amplitudes in degrees, frequencies in Hz).
BREATH_DEG, BREATH_HZ = 5.0, 0.25
ROD_ROCK_DEG, ROD_ROCK_HZ = 6.0, 0.3

# ------------------------------------------------------------------------------------------- the rod
#: The rod: the rigid handle behind and in front of the front grip, and the tip blank as a chain (m).
HANDLE_BEHIND, HANDLE_FRONT = 0.32, 0.12
ROD_TIP_SEGMENTS, ROD_TIP_LENGTH = 8, 1.9
#: The handle's radius and the net pole's (m); fingers are bone lines, so they close on radius + finger pad.
HANDLE_RADIUS, NET_POLE_RADIUS, REEL_KNOB_RADIUS = 0.014, 0.012, 0.012
FINGER_PAD = 0.009
#: Largest bend of the tip under full load (radians at the tip, quadratic along the blank).
ROD_MAX_BEND = 1.2
#: Rod and line closer to parallel than this (sine of the angle) do not bend the tip.
PARALLEL_EPS = 1e-12
#: Where the rear hand sits along the handle from the front grip (m, negative: behind it).
REAR_GRIP_ALONG = -0.2
#: The reel: its seat along the handle from the front grip, its centre below the handle and the knob's
#: circle radius (m); turns per second.
REEL_ALONG, REEL_DROP, REEL_RADIUS, REEL_TURNS_PER_S = -0.08, 0.04, 0.025, 0.4
#: The reel's knob turns on the handle's left side, this far out from the rod (m).
REEL_SIDE = 0.05

# ------------------------------------------------------------------------------------------- the arms
#: Elbow pole points in the actor's frame (m): behind, below and outside each shoulder.
ELBOW_POLE_LOCAL = {"right": np.array([-0.25, 0.05, 0.65]), "left": np.array([-0.25, 0.05, -0.65])}
#: How far a hand's fingers stay curled (0..1) while it moves between holds.
RELAXED_CURL = 0.2
#: The palm's reference normal per hand in the actor's frame (made perpendicular to the held axis).
PALM_NORMAL_LOCAL = {"right": np.array([0.0, 0.3, -1.0]), "left": np.array([0.0, 0.3, 1.0])}

# ------------------------------------------------------------------------------------------- the net
#: The landing net: pole length, hoop radius (m); where it rests on the deck (grip point, pole direction,
#: actor frame) until the free hand takes it.
NET_POLE_LENGTH, NET_HOOP_RADIUS = 1.4, 0.2
NET_REST_GRIP_LOCAL = np.array([0.22, 0.23, -0.25])
NET_REST_DIRECTION_LOCAL = np.array([0.85, -0.12, -0.5])
#: In the hand (actor frame): the grip at the lap, and the pole's direction dipped under the fish, lifted
#: with the fish in the hoop, and tipped to let it go.
NET_LAP_GRIP_LOCAL = np.array([0.30, 0.30, -0.22])
NET_DOWN_LOCAL = np.array([1.0, -1.3, 0.2])
NET_UP_LOCAL = np.array([1.0, -0.45, 0.2])
NET_TIPPED_LOCAL = np.array([1.0, -1.0, 0.35])

# ------------------------------------------------------------------------------------ float and line
#: Float radius (m), bobbing amplitude (m) and frequency (Hz); line drop below the tip when hanging (m).
FLOAT_RADIUS, BOB_AMPLITUDE, BOB_HZ = 0.03, 0.015, 0.7
HANGING_LINE = 0.6
#: Cast: how far out the float lands (m, along +X from the deck edge, before the seed's jitter) and its flight (s).
CAST_DISTANCE, CAST_FLIGHT_S = 4.0, 1.0
#: The drawn water: out from the deck edge just past where the float lands, and its half-width (m); only the
#: part the scene uses, so the camera's fit leaves the angler large.
WATER_REACH, WATER_HALF_WIDTH = CAST_DISTANCE + 0.5, 1.2
#: The fish: how deep it swims (m, below the surface), its side-to-side wiggle (m, rad/s) while hooked,
#: where the fight brings it (world, beside the jetty); the float rides on the surface above it (m).
FISH_DEPTH_Y, FISH_WIGGLE, FISH_WIGGLE_RAD_PER_S = -0.1, 0.25, 3.0
FISH_LANDED_WORLD = np.array([DECK_EDGE_X + 0.95, WATER_Y + FISH_DEPTH_Y, 0.0])
FLOAT_ABOVE_FISH = -FISH_DEPTH_Y
#: Line sag at zero load as a fraction of the span (a parabola through both ends).
LINE_SAG = 0.08
#: Gravity for the float's flight (m/s^2).
GRAVITY = 9.81

for _offset in (ACTOR_POSITION, FISH_LANDED_WORLD, NET_REST_GRIP_LOCAL, NET_REST_DIRECTION_LOCAL,
                NET_LAP_GRIP_LOCAL, NET_DOWN_LOCAL, NET_UP_LOCAL, NET_TIPPED_LOCAL, *ELBOW_POLE_LOCAL.values(),
                *PALM_NORMAL_LOCAL.values()):
    _offset.setflags(write=False)  # configured offsets: converted to world as copies, never written

# ------------------------------------------------------------------------------------- the timeline
#: The session's states, in order; after "release" comes "idle" again.
STATES = ("idle", "cast", "wait", "strike", "fight", "land", "release")


class RodKey(NamedTuple):
    """Where the rod is at the end of a phase (actor frame): handle pitch and yaw (degrees), the front
    grip's position (m), the line's load (0..1) and the chest's lean (degrees)."""

    pitch_deg: float
    yaw_deg: float
    pivot: tuple[float, float, float]
    load: float
    lean_deg: float


class Phase(NamedTuple):
    """One stretch of a state: its name, its duration (s) and the rod key it eases to."""

    name: str
    duration: float
    key: RodKey


#: The front grip's resting place (actor frame, m): in front of the belly, above the lap.
_REST = (0.34, 0.24, 0.06)
#: Per state, its phases; each eases (smoothstep) from the previous phase's key, so the motion is
#: continuous across phases and states (the last key equals the first state's start).
TIMELINE: dict[str, tuple[Phase, ...]] = {
    "idle": (Phase("hold", 2.6, RodKey(35.0, 0.0, _REST, 0.05, CHEST_LEAN_DEG)),),
    "cast": (Phase("wind-up", 1.1, RodKey(88.0, 5.0, (0.26, 0.40, 0.08), 0.1, -2.0)),
             Phase("forward stroke", 1.2, RodKey(28.0, 0.0, (0.40, 0.30, 0.06), 0.3, -16.0)),
             Phase("release", 0.2, RodKey(22.0, 0.0, (0.41, 0.28, 0.06), 0.1, -16.0)),
             Phase("follow-through", 0.9, RodKey(15.0, 0.0, (0.38, 0.24, 0.06), 0.05, -12.0))),
    "wait": (Phase("float bobbing", 3.0, RodKey(25.0, 0.0, _REST, 0.1, CHEST_LEAN_DEG)),),
    "strike": (Phase("strike", 0.5, RodKey(62.0, 0.0, (0.30, 0.32, 0.06), 0.9, -4.0)),),
    "fight": (Phase("reel in", 2.6, RodKey(55.0, -6.0, (0.30, 0.30, 0.03), 0.7, -6.0)),
              Phase("reach for the net", 2.0, RodKey(60.0, 0.0, (0.30, 0.32, 0.08), 0.6, -10.0))),
    "land": (Phase("scoop", 2.8, RodKey(65.0, 0.0, (0.30, 0.34, 0.08), 0.4, -14.0)),),
    "release": (Phase("let go", 2.4, RodKey(40.0, 0.0, _REST, 0.05, CHEST_LEAN_DEG)),),
}
#: The left hand's moves between holds (rod to reel, reel to net, net back to rod) take this long (s).
HAND_TRANSFER_S = 2.0


def _smoothstep(x: float) -> float:
    """0 at 0, 1 at 1, zero slope at both ends (``x`` clamped)."""
    x = min(max(x, 0.0), 1.0)
    return x * x * (3.0 - 2.0 * x)


def _lerp_key(a: RodKey, b: RodKey, s: float) -> RodKey:
    pivot = tuple(pa + (pb - pa) * s for pa, pb in zip(a.pivot, b.pivot, strict=True))
    return RodKey(a.pitch_deg + (b.pitch_deg - a.pitch_deg) * s, a.yaw_deg + (b.yaw_deg - a.yaw_deg) * s,
                  (pivot[0], pivot[1], pivot[2]), a.load + (b.load - a.load) * s,
                  a.lean_deg + (b.lean_deg - a.lean_deg) * s)


def _state_duration(state: str) -> float:
    return sum(p.duration for p in TIMELINE[state])


def _previous_key(state: str) -> RodKey:
    """The key the state starts from: the last key of the state before it (the loop wraps)."""
    before = STATES[(STATES.index(state) - 1) % len(STATES)]
    return TIMELINE[before][-1].key


def rod_key_at(state: str, t: float) -> tuple[str, float, RodKey]:
    """``(phase name, phase progress 0..1, eased key)`` at ``t`` seconds into ``state`` (clamped to its end)."""
    start = _previous_key(state)
    elapsed = 0.0
    for phase in TIMELINE[state]:
        if t < elapsed + phase.duration or phase is TIMELINE[state][-1]:
            u = min(max((t - elapsed) / phase.duration, 0.0), 1.0)
            return phase.name, u, _lerp_key(start, phase.key, _smoothstep(u))
        elapsed += phase.duration
        start = phase.key
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------------------ geometry
def _unit(v: FloatArray) -> FloatArray:
    return v / np.linalg.norm(v)


def _handle_direction(pitch_deg: float, yaw_deg: float) -> FloatArray:
    """Unit direction butt -> tip in the actor's frame: pitch up from +X, yaw towards -Z (degrees)."""
    p, y = math.radians(pitch_deg), math.radians(yaw_deg)
    return np.array([math.cos(p) * math.cos(y), math.sin(p), -math.cos(p) * math.sin(y)])


def bent_blank(start: FloatArray, direction: FloatArray, pull: FloatArray, load: float) -> FloatArray:
    """The rod's tip blank ``(ROD_TIP_SEGMENTS + 1, 3)`` from ``start``: a chain of equal segments.

    Segment ``k`` turns from ``direction`` towards the line's ``pull`` (unit) by
    ``load * ROD_MAX_BEND * ((k + 1) / N)^2`` (a cantilever's bend grows towards
    its tip), never past the pull direction; segment lengths are exact.
    """
    n = ROD_TIP_SEGMENTS
    seg = ROD_TIP_LENGTH / n
    between = float(np.arccos(np.clip(direction @ pull, -1.0, 1.0)))
    axis = np.cross(direction, pull)
    straight = np.linalg.norm(axis) < PARALLEL_EPS  # the line pulls along the rod: nothing bends it sideways
    points = [start]
    for k in range(n):
        bend = min(load * ROD_MAX_BEND * ((k + 1) / n) ** 2, between)
        d = direction if straight else rot.rotate(rot.from_axis_angle(_unit(axis), bend), direction)
        points.append(points[-1] + seg * d)
    return np.array(points)


def sagging_line(a: FloatArray, b: FloatArray, sag: float, n: int = 24) -> FloatArray:
    """``(n, 3)`` points of a line from ``a`` to ``b`` hanging ``sag`` metres at mid-span (a parabola)."""
    t = np.linspace(0.0, 1.0, n)[:, None]
    return a + (b - a) * t - np.array([0.0, 1.0, 0.0]) * (4.0 * sag * t * (1.0 - t))


class Grip(NamedTuple):
    """What a hand holds this frame (world): the axis point the palm closes on, the axis direction, the
    radius the fingers close to, the palm's wanted basis ``(3, 3)``, and how open the hand is (0: closed
    on the axis; above 0 while the hand travels from one hold to the next, 1 half-way, fingers relaxed)."""

    axis_point: FloatArray
    axis_direction: FloatArray
    radius: float
    basis: FloatArray
    openness: float = 0.0


@dataclass
class FishingOptions:
    """What :meth:`FishingSession.drawing` adds beyond the scene: the elbow poles, the grip points, and
    the reach state (each hand's target coloured by whether the arm reaches it)."""

    poles: bool = False
    grips: bool = False
    reach: bool = False


# ------------------------------------------------------------------------------------------- session
class FishingSession:
    """The angler's session: call :meth:`step` once per frame, :meth:`drawing` to see it.

    ``state`` is the current state (one of :data:`STATES`) and ``phase`` its
    stretch; with ``auto`` True (the default) the session plays every state in
    turn and loops, otherwise it stays in the current state until
    :meth:`advance_state`.  ``seed`` varies the cast distance and the fish;
    ``actor_yaw_deg`` turns the angler on the jetty (the rod, grips, poles and
    net are configured in the angler's frame and follow).
    After each step: ``pose`` (the humanoid with hands), ``wrist_targets``
    and ``reached`` per hand, ``grips`` (what each hand holds), ``finger_gaps``
    (each finger's distance to what it holds), ``net_holder`` (``"deck"`` or ``"left"``).
    """

    def __init__(self, seed: int = 0, *, actor_yaw_deg: float = 0.0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise SolverInputError(f"seed must be a non-negative integer, got {seed!r}")
        yaw = as_float_scalar(actor_yaw_deg, "actor_yaw_deg")
        if not abs(yaw) <= MAX_ACTOR_YAW_DEG:
            raise SolverInputError(f"actor_yaw_deg must be within +-{MAX_ACTOR_YAW_DEG:g}, got {actor_yaw_deg!r}")
        #: The actor's orientation on the jetty (a turn about world +Y); everything the angler holds is
        #: configured in this frame.
        self.actor_rotation = rot.from_axis_angle([0.0, 1.0, 0.0], yaw, degrees=True)
        rng = np.random.default_rng(seed)
        self.skeleton = humanoid(hands=True)
        self.hands = {side: hands.Hand.from_skeleton(self.skeleton, side) for side in ("left", "right")}
        # Prepared once: each arm's two-bone solver keeps its elbow's bend side frame to frame.
        self.arms = {side: TwoBone(self.skeleton, (f"{side}_shoulder", f"{side}_elbow", f"{side}_wrist"),
                                   history=True) for side in ("left", "right")}
        self.base_pose = _seated_pose(self.skeleton)
        self.cast_distance = CAST_DISTANCE + float(rng.uniform(-0.5, 0.5))
        self.fish_phase = float(rng.uniform(0.0, 2.0 * math.pi))
        self.auto = True
        self.options = FishingOptions()
        self.state = STATES[0]
        self.state_time = 0.0
        self.time = 0.0
        self.phase = TIMELINE[self.state][0].name
        self.pose = self.base_pose.copy()
        self.net_holder = "deck"
        self._solve_frame()

    # --------------------------------------------------------------------------------- the state machine
    def advance_state(self) -> None:
        """Jump to the next state (the viewer's "step" button)."""
        self._enter(STATES[(STATES.index(self.state) + 1) % len(STATES)])
        self._solve_frame()

    def _enter(self, state: str) -> None:
        self.state = state
        self.state_time = 0.0
        if state == "land":
            self.net_holder = "left"  # the free hand takes the net
        elif state == "idle":
            self.net_holder = "deck"

    def step(self, dt: float) -> None:
        """Advance one frame of ``dt`` seconds and pose everything."""
        dt = positive_number(dt, "dt", allow_zero=True)
        self.time += dt
        self.state_time += dt
        while self.auto and self.state_time >= _state_duration(self.state):
            left_over = self.state_time - _state_duration(self.state)
            self._enter(STATES[(STATES.index(self.state) + 1) % len(STATES)])
            self.state_time = left_over
        self._solve_frame()

    # --------------------------------------------------------------------------------------- one frame
    def _solve_frame(self) -> None:
        # 1. restore the base (seated) pose
        pose = self.base_pose.copy()
        # 2. the state machine's key for this moment, and the actor placed (root and chest lean)
        self.phase, self.phase_progress, key = rod_key_at(self.state, self.state_time)
        pose.translations[0] = ACTOR_POSITION
        pose.rotations[0] = self.actor_rotation
        breath = BREATH_DEG * math.sin(2.0 * math.pi * BREATH_HZ * self.time)
        pose.rotations[self.skeleton.index("chest")] = rot.from_axis_angle([0.0, 0.0, 1.0], key.lean_deg + breath,
                                                                           degrees=True)
        to_world, dir_to_world = self._to_world, self._dir_to_world

        # 3. the rod's pose and the grips from the state
        rock = ROD_ROCK_DEG * math.sin(2.0 * math.pi * ROD_ROCK_HZ * self.time)
        direction = dir_to_world(_handle_direction(key.pitch_deg + rock, key.yaw_deg + 0.5 * rock))
        front = to_world(np.array(key.pivot))
        butt = front - HANDLE_BEHIND * direction
        blank_start = front + HANDLE_FRONT * direction
        self.load = key.load
        self.butt, self.front = butt, front
        self.rod_direction = direction
        self.reel_center = front + REEL_ALONG * direction - REEL_DROP * _unit(np.cross(
            np.cross(direction, [0.0, 1.0, 0.0]), direction))
        self._place_float_and_fish(blank_start, direction)
        self._place_net(to_world, dir_to_world)
        # The tip bends towards the line's pull, by the state's load.
        self.blank = bent_blank(blank_start, direction, _unit(self.float_position - blank_start), key.load)
        self.grips = self._grips()
        # 4. both arms by two-bone IK (elbow poles, reach clamped by the solver)
        self.wrist_targets: dict[str, FloatArray] = {}
        self.reached: dict[str, bool] = {}
        self.elbow_poles: dict[str, FloatArray] = {}
        for side, grip_now in self.grips.items():
            hand = self.hands[side]
            target = self._wrist_target(hand, grip_now)
            pole = to_world(ELBOW_POLE_LOCAL[side])
            res = self.arms[side].solve(pose, target, pole=pole)
            pose = res.pose
            self.wrist_targets[side] = target
            self.reached[side] = bool(res.reached)
            self.elbow_poles[side] = pole
        # 5. palms to the grips, 6. fingers around what they hold
        self.finger_gaps: dict[str, FloatArray] = {}
        for side, grip_now in self.grips.items():
            hand = self.hands[side]
            pose = hands.align_palm(pose, hand, grip_now.basis)
            result = hands.grip(pose, hand, grip_now.axis_point, grip_now.axis_direction, grip_now.radius)
            pose = result.pose
            self.finger_gaps[side] = result.gap
            if grip_now.openness > 0.0:  # between holds: the fingers open on the way (same hinges, in between)
                fingers = [j for f in hand.fingers for j in f.joints]
                relaxed = hands.curl(pose, hand, RELAXED_CURL).rotations[fingers]
                pose.rotations[fingers] = rot.slerp(pose.rotations[fingers], relaxed, grip_now.openness)
        self.pose = pose

    def _to_world(self, local: FloatArray) -> FloatArray:
        """A point in the actor's frame in world space (a new array: the configured offsets stay as they are)."""
        return ACTOR_POSITION + rot.rotate(self.actor_rotation, np.array(local, dtype=np.float64))

    def _dir_to_world(self, local: FloatArray) -> FloatArray:
        """A direction in the actor's frame in world space (a new array)."""
        return rot.rotate(self.actor_rotation, np.array(local, dtype=np.float64))

    # ---------------------------------------------------------------------------------- what is held
    def _grips(self) -> dict[str, Grip]:
        d = self.rod_direction
        right = self._grip_on(self.front, d, HANDLE_RADIUS, "right")
        if self.state in ("land", "release"):
            left = self._grip_on(self.net_grip, self.net_direction, NET_POLE_RADIUS, "left")
        elif self.state == "fight":
            left = self._reel_grip()
            if self.state_time < HAND_TRANSFER_S:  # from the rear of the handle to the reel
                rear = self._grip_on(self.front + REAR_GRIP_ALONG * d, d, HANDLE_RADIUS, "left")
                left = self._blend(rear, left, _smoothstep(self.state_time / HAND_TRANSFER_S))
            into = self.state_time - (_state_duration("fight") - HAND_TRANSFER_S)
            if into > 0.0:  # reaching for the net: the hand's grip eases from the reel to the resting net
                left = self._blend(left, self._grip_on(self.net_grip, self.net_direction, NET_POLE_RADIUS, "left"),
                                   _smoothstep(into / HAND_TRANSFER_S))
        else:
            left = self._grip_on(self.front + REAR_GRIP_ALONG * d, d, HANDLE_RADIUS, "left")
            if self.state == "idle" and self.state_time < HAND_TRANSFER_S:  # back from the net to the rod
                left = self._blend(self._grip_on(self.net_grip, self.net_direction, NET_POLE_RADIUS, "left"),
                                   left, _smoothstep(self.state_time / HAND_TRANSFER_S))
        return {"right": right, "left": left}

    def _grip_on(self, point: FloatArray, axis: FloatArray, radius: float, side: str) -> Grip:
        """A hand closing on an axis through ``point``: palm normal from the hand's reference, fingers across."""
        axis_u = _unit(axis)
        reference = self._dir_to_world(PALM_NORMAL_LOCAL[side])
        normal = _unit(reference - axis_u * (reference @ axis_u))
        along = np.cross(normal, axis_u) if side == "right" else np.cross(axis_u, normal)
        return Grip(point, axis_u, radius + FINGER_PAD, hands.palm_basis(along, normal))

    def _reel_grip(self) -> Grip:
        """The left hand turning the reel: the knob circles the reel's spindle (across the rod)."""
        d = self.rod_direction
        spindle = _unit(np.cross(d, [0.0, 1.0, 0.0]))
        up = np.cross(spindle, d)
        angle = 2.0 * math.pi * REEL_TURNS_PER_S * self.state_time
        knob = self.reel_center - REEL_SIDE * spindle + REEL_RADIUS * (math.cos(angle) * up + math.sin(angle) * d)
        return self._grip_on(knob, d, REEL_KNOB_RADIUS, "left")  # the knob's grip lies along the rod

    @staticmethod
    def _blend(a: Grip, b: Grip, s: float) -> Grip:
        """A grip on the way from ``a`` to ``b`` (``s`` in 0..1): points, axes and palm rotations interpolated."""
        qa = rot.from_matrix(a.basis)
        qb = rot.from_matrix(b.basis)
        q = rot.slerp(qa, qb, s)
        return Grip(a.axis_point + (b.axis_point - a.axis_point) * s,
                    _unit(a.axis_direction + (b.axis_direction - a.axis_direction) * s),
                    a.radius + (b.radius - a.radius) * s, rot.as_matrix(q), math.sin(math.pi * s))

    def _wrist_target(self, hand: hands.Hand, grip_now: Grip) -> FloatArray:
        """Where the wrist goes so the palm centre sits against the axis: the hand's offsets turned by the grip."""
        normal_world = grip_now.basis[:, 1]
        palm_world = rot.rotate(hands.palm_rotation(hand, grip_now.basis), hand.palm_center)
        return grip_now.axis_point - normal_world * grip_now.radius - palm_world

    # --------------------------------------------------------------------------- float, fish and net
    def _place_float_and_fish(self, tip_start: FloatArray, direction: FloatArray) -> None:
        tip = self.tip_straight = tip_start + ROD_TIP_LENGTH * direction  # the unbent tip
        landing = np.array([DECK_EDGE_X + self.cast_distance, WATER_Y, 0.0])
        hanging = tip - np.array([0.0, HANGING_LINE, 0.0])
        t = self.state_time
        bob = BOB_AMPLITUDE * math.sin(2.0 * math.pi * BOB_HZ * self.time)
        self.fish_position: FloatArray | None = None
        if self.state == "idle":
            self.float_position = hanging
        elif self.state == "cast":
            release_at = sum(p.duration for p in TIMELINE["cast"][:2])
            if t < release_at:
                self.float_position = hanging
            else:  # a ballistic flight from the release point to the landing spot
                u = min((t - release_at) / CAST_FLIGHT_S, 1.0)
                apex = GRAVITY * CAST_FLIGHT_S ** 2 / 8.0  # a projectile's rise above the chord over that time
                self.float_position = hanging + (landing - hanging) * u + np.array([0.0, 4.0 * apex * u * (1 - u), 0.0])
        elif self.state == "wait":
            self.float_position = landing + np.array([0.0, bob, 0.0])
        elif self.state in ("strike", "fight"):
            total = _state_duration("strike") + _state_duration("fight")
            into = t if self.state == "strike" else _state_duration("strike") + t
            u = _smoothstep(into / total)
            wiggle = FISH_WIGGLE * math.sin(FISH_WIGGLE_RAD_PER_S * self.time + self.fish_phase) * (1.0 - u)
            start = landing + np.array([0.0, FISH_DEPTH_Y, 0.0])
            self.fish_position = start + (FISH_LANDED_WORLD - start) * u + np.array([0.0, 0.0, wiggle])
            self.float_position = self.fish_position + np.array([0.0, FLOAT_ABOVE_FISH + 0.5 * bob, 0.0])
        else:  # land, release: the fish waits by the jetty (the net moves it, see _place_net)
            self.fish_position = FISH_LANDED_WORLD.copy()
            self.float_position = self.fish_position + np.array([0.0, FLOAT_ABOVE_FISH, 0.0])

    def _place_net(self, to_world: Callable[[FloatArray], FloatArray],
                   dir_to_world: Callable[[FloatArray], FloatArray]) -> None:
        """The net's grip point and pole direction (world), and the fish and float once the net is in play.

        Land: the hand brings the grip to the lap while the hoop dips under the fish, the fish glides in,
        the net comes up.  Release: the net tips the fish back into the water and goes back on the deck.
        """
        rest_grip, rest_dir = to_world(NET_REST_GRIP_LOCAL), _unit(dir_to_world(NET_REST_DIRECTION_LOCAL))
        lap_grip = to_world(NET_LAP_GRIP_LOCAL)
        down, up, tipped = (_unit(dir_to_world(v)) for v in (NET_DOWN_LOCAL, NET_UP_LOCAL, NET_TIPPED_LOCAL))
        if self.net_holder == "deck":
            self.net_grip, self.net_direction = rest_grip, rest_dir
            return
        hoop_of = self._hoop_center
        if self.state == "land":
            u = self.state_time / _state_duration("land")
            grab = _smoothstep(u / 0.5)
            self.net_grip = rest_grip + (lap_grip - rest_grip) * grab
            direction = _unit(rest_dir + (down - rest_dir) * grab)
            self.net_direction = _unit(direction + (up - direction) * _smoothstep((u - 0.6) / 0.4))
            assert self.fish_position is not None
            glide = _smoothstep((u - 0.35) / 0.25)  # the fish swims into the dipped hoop
            self.fish_position = self.fish_position + (hoop_of() - self.fish_position) * glide
            self.float_position = self.fish_position + np.array([0.0, FLOAT_ABOVE_FISH, 0.0])
            return
        u = self.state_time / _state_duration("release")
        tip = _smoothstep(u / 0.35)
        back = _smoothstep((u - 0.35) / 0.65)
        self.net_grip = lap_grip + (rest_grip - lap_grip) * back
        self.net_direction = _unit(_unit(up + (tipped - up) * tip) + (rest_dir - tipped) * back)
        in_net = hoop_of()
        drop = _smoothstep((u - 0.15) / 0.3)  # the fish slides out and falls back into the water
        water = np.array([in_net[0] + 0.3, WATER_Y - 0.1, in_net[2]])
        self.fish_position = None if u > 0.8 else in_net + (water - in_net) * drop
        hanging = self.tip_straight - np.array([0.0, HANGING_LINE, 0.0])
        held = in_net + np.array([0.0, FLOAT_ABOVE_FISH, 0.0])
        self.float_position = held + (hanging - held) * _smoothstep(u)

    def _hoop_center(self) -> FloatArray:
        return self.net_grip + self.net_direction * (NET_POLE_LENGTH + NET_HOOP_RADIUS)

    # ------------------------------------------------------------------------------------------ drawing
    def drawing(self) -> Drawing:
        """The current frame: deck, water, angler, rod, line, float, fish and net (world, y up, metres)."""
        d = Drawing(caption=f"fishing: {self.state} ({self.phase})")
        _draw_scene(d)
        fk = forward_kinematics(self.skeleton, self.pose)
        _draw_angler(d, self.skeleton, fk.positions)
        d.line([self.butt, self.front + HANDLE_FRONT * self.rod_direction], (0.35, 0.2, 0.1), 0.03, "rod handle")
        d.line(self.blank, (0.2, 0.2, 0.25), 0.012, "rod tip")
        sag = LINE_SAG * (1.0 - self.load) * float(np.linalg.norm(self.float_position - self.blank[-1]))
        d.line(sagging_line(self.blank[-1], self.float_position, sag), (0.9, 0.9, 0.9), 0.003, "line")
        d.dot(self.float_position, (0.95, 0.3, 0.1), FLOAT_RADIUS, "float")
        if self.fish_position is not None:
            d.dot(self.fish_position, (0.5, 0.6, 0.7), 0.06, "fish")
        hoop_center = self.net_grip + self.net_direction * (NET_POLE_LENGTH + NET_HOOP_RADIUS)
        d.line([self.net_grip, self.net_grip + self.net_direction * NET_POLE_LENGTH], (0.6, 0.6, 0.55), 0.015,
               "net pole")
        e1 = _unit(np.cross(self.net_direction, [0.0, 1.0, 0.0]) + 1e-9)
        angles = np.linspace(0.0, 2.0 * math.pi, 25)[:, None]
        hoop = hoop_center + NET_HOOP_RADIUS * (np.cos(angles) * e1 + np.sin(angles) * self.net_direction)
        d.line(hoop, (0.6, 0.6, 0.55), 0.01, "net hoop")
        for side in ("left", "right"):
            if self.options.poles:
                elbow = fk.positions[self.skeleton.index(f"{side}_elbow")]
                d.line([elbow, self.elbow_poles[side]], (0.3, 0.6, 1.0), 0.004, f"{side} elbow pole")
                d.dot(self.elbow_poles[side], (0.3, 0.6, 1.0), 0.02, f"{side} pole")
            if self.options.grips:
                d.dot(self.wrist_targets[side], (1.0, 0.9, 0.2), 0.015, f"{side} grip")
            if self.options.reach:
                color = (0.2, 0.9, 0.3) if self.reached[side] else (1.0, 0.2, 0.2)
                d.dot(self.wrist_targets[side], color, 0.025, f"{side} reach")
        if self.options.reach:
            d.caption += "  reach: " + ", ".join(f"{s} {'ok' if r else 'clamped'}" for s, r in self.reached.items())
        return d


def _seated_pose(skeleton: Skeleton) -> Pose:
    """The humanoid sitting: thighs forward (hips flexed), shins hanging (knees bent), arms at rest."""
    pose = skeleton.rest_pose()
    z = np.array([0.0, 0.0, 1.0])
    for side in ("left", "right"):
        pose.rotations[skeleton.index(f"{side}_hip")] = rot.from_axis_angle(z, HIP_FLEX_DEG, degrees=True)
        pose.rotations[skeleton.index(f"{side}_knee")] = rot.from_axis_angle(z, KNEE_FLEX_DEG, degrees=True)
    pose.translations[0] = ACTOR_POSITION
    return pose


#: The angler's colour, and bone widths and joint dot radius (m): body bones, finger bones.
SKIN = (0.85, 0.75, 0.6)
BODY_WIDTH, FINGER_WIDTH, JOINT_RADIUS = 0.03, 0.006, 0.018


def _draw_angler(d: Drawing, skeleton: Skeleton, positions_world: FloatArray) -> None:
    """The body as thick bones with joint dots, the fingers as thin bones (so the grip stays readable)."""
    n_body = humanoid().n_joints  # the hands come after the 15 body joints
    for j, parent in enumerate(skeleton.parents):
        if parent >= 0:
            width = BODY_WIDTH if j < n_body else FINGER_WIDTH
            d.line(positions_world[[parent, j]], SKIN, width, "finger" if j >= n_body else "body")
        if j < n_body:
            d.dot(positions_world[j], SKIN, JOINT_RADIUS, skeleton.names[j])


def _draw_scene(d: Drawing) -> None:
    """The jetty's deck and posts, and the water's edge lines."""
    plank = (0.55, 0.4, 0.25)
    for z in np.linspace(-DECK_HALF_WIDTH, DECK_HALF_WIDTH, 6):
        d.line([[DECK_BACK_X, 0.0, z], [DECK_EDGE_X, 0.0, z]], plank, 0.02, "deck")
    d.line([[DECK_EDGE_X, 0.0, -DECK_HALF_WIDTH], [DECK_EDGE_X, 0.0, DECK_HALF_WIDTH]], plank, 0.03, "deck edge")
    for z in (-DECK_HALF_WIDTH, DECK_HALF_WIDTH):
        d.line([[DECK_EDGE_X, 0.0, z], [DECK_EDGE_X, WATER_Y - 0.5, z]], plank, 0.05, "post")
    water = (0.2, 0.45, 0.75)
    for x in np.linspace(DECK_EDGE_X, DECK_EDGE_X + WATER_REACH, 6):
        d.line([[x, WATER_Y, -WATER_HALF_WIDTH], [x, WATER_Y, WATER_HALF_WIDTH]], water, 0.005, "water")


#: The demo's descriptor for ``kinema demo fishing``: the PNG camera looks over the angler's right shoulder and
#: is fitted over the session's widest part (the wind-up, the cast and the float far out while waiting).
DEMO = {"name": "fishing", "make": FishingSession, "fps": 30, "view": (-60.0, 15.0),
        "fit_seconds": sum(_state_duration(state) for state in ("idle", "cast", "wait")),
        "about": "a seated angler: two-bone arms to grips on the rod, palms aligned and fingers closed by "
                 "kinema.hands; hold, cast, wait, strike, fight, land with the net, release"}
