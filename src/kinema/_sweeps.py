"""Scripted sweeps for motion-quality figures (issue 18), shared by ``tests/`` and ``benchmarks/``.

One place for the paths a solver is driven along frame by frame, so a test's threshold and the
benchmark's printed figure are measured on the same motion.  Every generator is deterministic: a
``seed`` only picks the orientation of the path (never noise), and the same arguments give the same
arrays bit for bit.

* :func:`pole_axis_path`: targets at a constant distance from a shoulder on a great-circle arc that
  passes ``offset_deg`` from the shoulder-to-pole axis (the two-bone elbow-pop sweep).
* :func:`closed_loop`: targets going round the same closed circle again and again (the twist
  build-up sweep; each solve starts from the previous result).
* :func:`two_bone_arm`: the arm rig the two-bone sweeps use.
* :func:`step_angles`: the angle between consecutive unit directions (per-frame direction change).
* :func:`follow` and :func:`warm_loop`: drive a solver along targets, from the same input pose every
  frame or from the previous result; :func:`bone_directions`, :func:`pole_plane_offset_deg` and
  :func:`pole_axis_angle_deg` measure what came out.

Private: the figures are what is public (``benchmarks/bench_motion.py``, docs/motion-quality.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._types import FloatArray
from .fk import forward_kinematics
from .pose import Pose
from .rotation import from_axis_angle
from .skeleton import Skeleton

__all__ = ["ARM_JOINTS", "PoleAxisScene", "bone_directions", "closed_loop", "follow", "pole_axis_angle_deg",
           "pole_axis_path", "pole_axis_scene", "pole_plane_offset_deg", "step_angles", "two_bone_arm", "unit_frame",
           "warm_loop"]


#: The joints of :func:`two_bone_arm` a two-bone solver moves (upper, lower, end).
ARM_JOINTS = ("shoulder", "elbow", "wrist")

#: Frames of the pole-axis sweep and its arc (degrees), centred on the closest approach to the pole
#: axis: 600 frames over 120 degrees is 0.2 degrees of target direction per frame.
POLE_PATH_FRAMES = 600
POLE_PATH_SPAN_DEG = 120.0

#: The shoulder-to-target distance of the pole-axis sweep as a fraction of the arm's length ``a + b``.
POLE_PATH_REACH = 0.75

#: Seconds the pole-axis sweep lasts whatever its frame count (600 frames: 60 frames per second).
POLE_PATH_SECONDS = 10.0


def unit_frame(axis: ArrayLike, seed: int = 0) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(p, e1, e2)``: a right-handed orthonormal frame with ``p`` along ``axis``; ``seed`` turns ``e1, e2``
    about ``p`` by a fixed pseudo-random angle (the same for the same seed)."""
    p = np.asarray(axis, dtype=np.float64)
    p = p / np.linalg.norm(p)
    helper = np.array([1.0, 0.0, 0.0]) if abs(p[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    a = np.cross(p, helper)
    a /= np.linalg.norm(a)
    b = np.cross(p, a)
    turn = float(np.random.default_rng(seed).uniform(0.0, 2.0 * math.pi))
    e1 = math.cos(turn) * a + math.sin(turn) * b
    e2 = np.cross(p, e1)
    return p, e1, e2


def pole_axis_path(shoulder: ArrayLike, pole: ArrayLike, distance: float, offset_deg: float, *,
                   frames: int = POLE_PATH_FRAMES, span_deg: float = POLE_PATH_SPAN_DEG, seed: int = 0) -> FloatArray:
    """Targets ``(frames, 3)`` on a sphere of radius ``distance`` about ``shoulder`` (world points).

    The directions from the shoulder run at constant angular speed along a great-circle arc of
    ``span_deg`` degrees whose closest approach to the shoulder-to-``pole`` axis is ``offset_deg``
    degrees, half-way along.  Frame ``k`` sits at fraction ``k / frames`` of the arc (the end point is
    left out), so ``frames=300`` gives every other frame of ``frames=600`` exactly: the same path at
    half the frame rate.  ``seed`` picks the side of the pole axis the path passes on.
    """
    p, e1, e2 = unit_frame(np.asarray(pole, dtype=np.float64) - np.asarray(shoulder, dtype=np.float64), seed)
    delta = math.radians(offset_deg)
    closest = math.cos(delta) * p + math.sin(delta) * e1  # the path's nearest direction to the pole axis
    s = math.radians(span_deg) * (np.arange(frames) / frames - 0.5)
    directions = np.cos(s)[:, None] * closest + np.sin(s)[:, None] * e2
    return np.asarray(shoulder, dtype=np.float64) + distance * directions


def closed_loop(center: ArrayLike, radius: float, *, per_loop: int = 20, loops: int = 1, seed: int = 0) -> FloatArray:
    """Targets ``(loops * per_loop, 3)``: ``per_loop`` evenly spaced points on a circle of ``radius`` about
    ``center`` (world), visited ``loops`` times; every loop repeats the same points bit for bit.

    ``seed`` picks the circle's plane (a fixed pseudo-random normal) and its starting point.
    """
    rng = np.random.default_rng(seed)
    normal = rng.normal(size=3)
    _, e1, e2 = unit_frame(normal, seed)
    angle = 2.0 * math.pi * np.arange(per_loop) / per_loop
    one = np.asarray(center, dtype=np.float64) + radius * (np.cos(angle)[:, None] * e1 + np.sin(angle)[:, None] * e2)
    return np.tile(one, (loops, 1))


def two_bone_arm(upper: float = 0.30, lower: float = 0.27) -> Skeleton:
    """An arm: ``root -> shoulder -> elbow -> wrist -> hand`` (metres, bones along +y in their frames).

    The root sits 1.4 m up and is turned a little so no axis of the rig is a world axis; the elbow's
    rest rotation bends it 30 degrees so the rest pose has a bend plane.
    """
    rotations = from_axis_angle([[0.3, 1.0, 0.2], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0],
                                 [0.0, 0.0, 1.0]], [0.4, -0.2, math.radians(30.0), 0.0, 0.0])
    translations = [[0.1, 1.4, -0.05], [0.18, 0.05, 0.0], [0.0, upper, 0.0], [0.0, lower, 0.0], [0.0, 0.08, 0.0]]
    return Skeleton(["root", *ARM_JOINTS, "hand"], [-1, 0, 1, 2, 3], translations, rotations)


class PoleAxisScene(NamedTuple):
    """A two-bone arm, its rest pose, a pole and the targets of :func:`pole_axis_path`.

    ``targets (frames, 3)`` world; ``pole (3,)`` world; ``dt`` seconds per frame (the sweep lasts
    :data:`POLE_PATH_SECONDS` whatever its frame count); ``shoulder (3,)`` world.
    """

    skeleton: Skeleton
    pose: Pose
    shoulder: FloatArray
    pole: FloatArray
    targets: FloatArray
    dt: float


def pole_axis_scene(offset_deg: float, *, frames: int = POLE_PATH_FRAMES, reach: float = POLE_PATH_REACH,
                    seed: int = 0) -> PoleAxisScene:
    """The issue-18 pole-axis sweep on :func:`two_bone_arm`: a pole 0.5 m from the shoulder, behind and a
    little down, and ``frames`` targets at ``reach * (a + b)`` from the shoulder passing ``offset_deg``
    degrees from the shoulder-to-pole axis (:func:`pole_axis_path`)."""
    skeleton = two_bone_arm()
    pose = skeleton.rest_pose()
    world = forward_kinematics(skeleton, pose).positions
    shoulder, elbow, wrist = (world[skeleton.index(n)] for n in ARM_JOINTS)
    length = float(np.linalg.norm(elbow - shoulder) + np.linalg.norm(wrist - elbow))
    pole = shoulder + 0.5 * np.array([0.3, -0.4, -0.866]) / np.linalg.norm([0.3, -0.4, -0.866])
    targets = pole_axis_path(shoulder, pole, reach * length, offset_deg, frames=frames, seed=seed)
    return PoleAxisScene(skeleton, pose, shoulder, pole, targets, POLE_PATH_SECONDS / frames)


def step_angles(directions: ArrayLike) -> FloatArray:
    """Radians between consecutive directions: ``(F-1, ...)`` from ``(F, ..., 3)`` (normalised here)."""
    d = np.asarray(directions, dtype=np.float64)
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    # atan2 of |a x b| and a . b: accurate for the tiny steps (arccos of a dot product is not).
    cross = np.linalg.norm(np.cross(d[1:], d[:-1]), axis=-1)
    return np.arctan2(cross, np.sum(d[1:] * d[:-1], axis=-1))


def follow(solve: Callable[..., Any], pose: Pose, targets: ArrayLike, **kw: Any) -> tuple[Pose, FloatArray]:
    """Solve frame by frame from the same input ``pose`` (the animated pose): ``solve(pose, target, **kw)`` for
    each row of ``targets (F, 3)``; returns the solved poses stacked ``(F, ...)`` and the errors ``(F,)``."""
    rotations = []
    errors = []
    for target in np.asarray(targets, dtype=np.float64):
        res = solve(pose, target, **kw)
        rotations.append(res.pose.rotations)
        errors.append(float(res.error))
    return Pose(pose.translations, np.stack(rotations), pose.scales), np.array(errors)


def warm_loop(solve: Callable[..., Any], pose: Pose, targets: ArrayLike, **kw: Any) -> Pose:
    """Solve frame by frame, each solve starting from the previous result (a warm start); returns the poses
    ``(F, ...)`` after each target of ``targets (F, 3)``."""
    rotations = []
    for target in np.asarray(targets, dtype=np.float64):
        pose = solve(pose, target, **kw).pose
        rotations.append(pose.rotations)
    return Pose(pose.translations, np.stack(rotations), pose.scales)


def bone_directions(skeleton: Skeleton, poses: Pose, joint: str, child: str) -> FloatArray:
    """Unit world directions ``(*batch, 3)`` from ``joint`` to ``child`` in ``poses``."""
    world = forward_kinematics(skeleton, poses).positions
    d = world[..., skeleton.index(child), :] - world[..., skeleton.index(joint), :]
    return np.asarray(d / np.linalg.norm(d, axis=-1, keepdims=True))


def pole_axis_angle_deg(shoulder: ArrayLike, pole: ArrayLike, targets: ArrayLike) -> FloatArray:
    """Degrees between each shoulder-to-target direction and the shoulder-to-pole axis, ``(F,)``."""
    origin = np.asarray(shoulder, dtype=np.float64)
    p = np.asarray(pole, dtype=np.float64) - origin
    d = np.asarray(targets, dtype=np.float64) - origin
    return np.degrees(np.arctan2(np.linalg.norm(np.cross(d, p), axis=-1), d @ p))


def pole_plane_offset_deg(shoulder: ArrayLike, pole: ArrayLike, targets: ArrayLike, elbows: ArrayLike) -> FloatArray:
    """Degrees by which each elbow direction (unit, from the shoulder) lies out of the plane through the
    shoulder, the target and the pole (either side of the pole axis counts as in the plane), ``(F,)``."""
    origin = np.asarray(shoulder, dtype=np.float64)
    d = np.asarray(targets, dtype=np.float64) - origin
    normal = np.cross(d, np.asarray(pole, dtype=np.float64) - origin)
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    return np.degrees(np.arcsin(np.clip(np.abs(np.sum(np.asarray(elbows) * normal, axis=-1)), 0.0, 1.0)))


# ------------------------------------------------------------------ chain sweeps (CCD, FABRIK, FABRIKTree)
# :func:`chain_rig` and :func:`chain_pole_loop` (the 6-bone chain's slow loop with a far pole),
# :func:`twist_loop_scene` (the closed loop on the arm's chain), :func:`rotation_steps` (per-frame joint
# turns), :func:`torso_problem` (random reachable three-goal torsos on the bundled humanoid).

__all__ += ["ChainScene", "TorsoProblem", "chain_pole_loop", "chain_rig", "rotation_steps", "torso_problem",
            "twist_loop_scene"]

#: Frames of the slow smooth loop a chain with a pole follows (one turn of the loop).
CHAIN_LOOP_FRAMES = 500

#: Bones of :func:`chain_rig`, each this long (metres).
CHAIN_BONES = 6
CHAIN_BONE_LENGTH = 0.2


def chain_rig(bones: int = CHAIN_BONES, length: float = CHAIN_BONE_LENGTH) -> Skeleton:
    """A chain ``root -> j1 -> ... -> j<bones> -> end`` (metres): ``bones`` bones of ``length`` from ``j1``.

    The root sits 1 m up; every joint's rest rotation turns 0.15 rad (the root 0.3) about a tilted axis,
    so the rest pose is curled (it has a bend side) and no axis is a world axis.  The solvers move
    ``("j1", "end")``.
    """
    n = bones + 1
    names = ["root", *[f"j{i}" for i in range(1, n)], "end"]
    parents = list(range(-1, n))
    translations = [[0.0, 1.0, 0.0]] + [[0.0, length, 0.0]] * n
    rotations = from_axis_angle([[0.2, 0.1, 1.0]] * (n + 1), [0.3] + [0.15] * n)
    return Skeleton(names, parents, translations, rotations)


class ChainScene(NamedTuple):
    """A chain, its start pose, the chain joints ``(start, end)``, world ``targets (F, 3)`` and ``pole (3,)``."""

    skeleton: Skeleton
    pose: Pose
    chain: tuple[str, str]
    targets: FloatArray
    pole: FloatArray


def chain_pole_loop(*, frames: int = CHAIN_LOOP_FRAMES, seed: int = 1) -> ChainScene:
    """The issue-18 slow loop for chains with a pole, on :func:`chain_rig` from its rest pose.

    One turn of a circle (radius 0.2-0.5 m, centre about 0.5 m above the chain's first joint, plane
    and centre drawn from ``seed``) in ``frames`` frames, and a pole about 2 m from the first joint, far
    from the root-to-end line.  ``seed=1`` is the figure's loop: there the landed CCD pole flips a joint
    by 180 degrees in one frame and the landed FABRIK pole turns one by 50.
    """
    skeleton = chain_rig()
    pose = skeleton.rest_pose()
    base = forward_kinematics(skeleton, pose).positions[skeleton.index("j1")]
    rng = np.random.default_rng(seed)
    center = base + rng.normal(size=3) * 0.3 + np.array([0.0, 0.5, 0.0])
    radius = rng.uniform(0.2, 0.5)
    e1 = rng.normal(size=3)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(e1, rng.normal(size=3))
    e2 /= np.linalg.norm(e2)
    angle = 2.0 * math.pi * np.arange(frames) / frames
    targets = center + radius * (np.cos(angle)[:, None] * e1 + np.sin(angle)[:, None] * e2)
    pole = base + rng.normal(size=3) * 2.0
    return ChainScene(skeleton, pose, ("j1", "end"), targets, pole)


#: The closed loop of the twist sweep: its centre is this fraction of the way from the shoulder to the
#: wrist of :func:`two_bone_arm`'s rest pose (plus :data:`TWIST_LOOP_SHIFT`), its radius this (metres).
TWIST_LOOP_REACH = 0.8
TWIST_LOOP_SHIFT = (0.05, 0.0, 0.05)
TWIST_LOOP_RADIUS = 0.1


def twist_loop_scene(*, loops: int = 55, per_loop: int = 20, seed: int = 3) -> ChainScene:
    """The issue-18 twist build-up sweep for chains: :func:`two_bone_arm`'s ``("shoulder", "wrist")``
    chain from its rest pose, ``loops`` turns of :func:`closed_loop` (``per_loop`` targets each) and a
    pole below and behind the shoulder."""
    skeleton = two_bone_arm()
    pose = skeleton.rest_pose()
    world = forward_kinematics(skeleton, pose).positions
    shoulder = world[skeleton.index("shoulder")]
    wrist = world[skeleton.index("wrist")]
    center = shoulder + TWIST_LOOP_REACH * (wrist - shoulder) + np.asarray(TWIST_LOOP_SHIFT)
    targets = closed_loop(center, TWIST_LOOP_RADIUS, per_loop=per_loop, loops=loops, seed=seed)
    pole = shoulder + np.array([0.0, -0.3, -0.5])
    return ChainScene(skeleton, pose, ("shoulder", "wrist"), targets, pole)


def rotation_steps(rotations: ArrayLike) -> FloatArray:
    """Radians each joint turned between consecutive frames: ``(F-1, J)`` from local rotations
    ``(F, J, 4)`` (``2 acos |q_a . q_b|``, so ``q`` and ``-q`` are the same rotation)."""
    q = np.asarray(rotations, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    dots = np.abs(np.sum(q[1:] * q[:-1], axis=-1)).clip(0.0, 1.0)
    return 2.0 * np.arccos(dots)


#: The goals of the torso convergence problem on :func:`kinema.samples.humanoid`, and the joints its
#: random poses turn (the goals' ancestors below the fixed root, and the root itself).
TORSO_GOALS = ("neck", "right_wrist", "left_wrist")
TORSO_TURNED = ("root", "chest", "right_shoulder", "right_elbow", "left_shoulder", "left_elbow")
#: Standard deviation (radians, per rotation-vector component) of the random poses' turns.
TORSO_TURN_SIGMA = 0.5


class TorsoProblem(NamedTuple):
    """``n`` reachable three-goal torso problems: the humanoid, its rest pose ``(n,)`` to start from, and
    ``targets {goal: (n, 3)}`` (world) from FK of random poses (so every item has an exact solution)."""

    skeleton: Skeleton
    pose: Pose
    targets: dict[str, FloatArray]


def torso_problem(n: int = 200, *, seed: int = 7) -> TorsoProblem:
    """The issue-18 tree convergence problem: :func:`kinema.samples.humanoid`'s torso (root fixed, chest
    sub-base, neck and both arms), targets for :data:`TORSO_GOALS` from random poses that turn
    :data:`TORSO_TURNED` by normal rotation vectors (sigma :data:`TORSO_TURN_SIGMA`) after their rest."""
    from .rotation import from_rotvec, multiply
    from .samples import humanoid

    skeleton = humanoid()
    rng = np.random.default_rng(seed)
    posed = skeleton.rest_pose((n,))
    rotations = posed.rotations.copy()
    for name in TORSO_TURNED:
        j = skeleton.index(name)
        rotations[:, j] = multiply(rotations[:, j], from_rotvec(rng.normal(scale=TORSO_TURN_SIGMA, size=(n, 3))))
    world = forward_kinematics(skeleton, Pose(posed.translations, rotations)).positions
    targets = {g: np.ascontiguousarray(world[:, skeleton.index(g)]) for g in TORSO_GOALS}
    return TorsoProblem(skeleton, skeleton.rest_pose((n,)), targets)
