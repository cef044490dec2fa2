"""The fixed, seeded problems shared by the benchmark suite (``kinema bench``) and the tests.

One module builds every workload, so the figures in the benchmark and the checks in the test
suite are taken on the same skeletons, poses and targets and cannot drift apart.  Every builder
is deterministic: the same arguments give the same arrays, bit for bit.

* :func:`chain_rig`, :func:`reachable_targets`: a plain chain with bent, uneven bones and
  targets placed where its end actually goes under random turns (so every target is reachable);
  :func:`ten_bone_chain` (10 bones, 1000 targets) and :func:`tentacle` (20 bones) are the two
  chain workloads.
* :func:`two_bone_arm`: a 4-joint arm (a rotated, translated root, then shoulder, elbow, wrist),
  one pose and 100,000 targets spread over and beyond its reach, with one pole.
* :func:`fk_rig`: 1000 frames of random rotations on a 60-joint random tree.
* :func:`humanoid_four_goals`: the bundled humanoid on 1000 walk frames, both feet pinned
  (priority 1) and both hands reaching near where they are; :func:`humanoid_limits`: a full set of
  joint limits for it (the limited full-body solves).
* :func:`repeat_clip`, :func:`long_walk`: the bundled walk repeated to any length (foot locking);
  :func:`long_bvh_text`: a BVH file of the walk with its MOTION block repeated (parsing).

Lengths are in metres (the humanoid) or chain units (about 1 per bone).
"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from . import rotation
from .fk import forward_kinematics
from .pose import Clip, Pose
from .skeleton import Skeleton

__all__ = [
    "CHAIN_BONES", "CHAIN_TARGETS", "TENTACLE_BONES", "TWO_BONE_TARGETS", "FK_FRAMES", "FK_JOINTS",
    "HUMANOID_FRAMES", "BVH_FRAMES", "ARM_JOINTS",
    "ChainProblem", "TwoBoneProblem", "GoalsProblem",
    "chain_rig", "reachable_targets", "ten_bone_chain", "tentacle", "two_bone_arm", "two_bone_best_error",
    "fk_rig", "humanoid_four_goals", "humanoid_limits", "repeat_clip", "long_walk", "long_bvh_text",
]

#: The 10-bone chain workload: bones and reachable targets.
CHAIN_BONES = 10
CHAIN_TARGETS = 1000
#: The tentacle workload: a 20-bone (21-joint) chain.
TENTACLE_BONES = 20
#: The two-bone batch workload: targets per batch.
TWO_BONE_TARGETS = 100_000
#: The FK workload: frames x joints.
FK_FRAMES = 1000
FK_JOINTS = 60
#: The humanoid four-goal workload: frames.
HUMANOID_FRAMES = 1000
#: The BVH parsing workload: frames.
BVH_FRAMES = 100_000
#: The two-bone arm's solved joints (upper, middle, end).
ARM_JOINTS = ("shoulder", "elbow", "wrist")

#: The two-bone kernel keeps the reach this fraction of the shorter bone inside full stretch and full fold.
_ARM_MARGIN_FRACTION = 1e-4


@dataclass(frozen=True)
class ChainProblem:
    """A chain workload: ``skeleton``, ``chain`` ``(start, end)`` joint names, the input ``pose``
    (the rest pose, unbatched) and ``targets_world (N, 3)``, every one reachable."""

    skeleton: Skeleton
    chain: tuple[str, str]
    pose: Pose
    targets_world: NDArray[np.float64]


@dataclass(frozen=True)
class TwoBoneProblem:
    """The two-bone workload: ``skeleton``, ``joints`` (upper, middle, end names), one input ``pose``,
    ``targets_world (N, 3)`` (over and beyond the reach) and one ``pole_world (3,)``."""

    skeleton: Skeleton
    joints: tuple[str, str, str]
    pose: Pose
    targets_world: NDArray[np.float64]
    pole_world: NDArray[np.float64]


@dataclass(frozen=True)
class GoalsProblem:
    """A multi-goal workload: ``skeleton``, an input ``pose (N, J)``, ``goal_joints`` (names) and one
    ``targets_world (N, 3)`` per goal (same order), and each goal's ``priorities``."""

    skeleton: Skeleton
    pose: Pose
    goal_joints: tuple[str, ...]
    targets_world: tuple[NDArray[np.float64], ...]
    priorities: tuple[int, ...]


def chain_rig(n_bones: int = CHAIN_BONES, seed: int = 7) -> tuple[Skeleton, tuple[str, str]]:
    """A chain of ``n_bones`` bones (``n_bones + 1`` joints ``j0 .. jN``, each the parent of the next)
    and its ``(start, end)``.

    Bones are 0.6 to 1.4 long, mostly along +y with a random lean; rest rotations are small random
    turns (so the rest pose is a gentle curve).
    """
    rng = np.random.default_rng(seed)
    n = n_bones + 1
    t = np.zeros((n, 3))
    t[1:] = rng.normal(size=(n_bones, 3)) * 0.15 + np.array([0.0, 1.0, 0.0])
    t[1:] *= rng.uniform(0.6, 1.4, size=(n_bones, 1)) / np.linalg.norm(t[1:], axis=1, keepdims=True)
    axes = rng.normal(size=(n, 3))
    rot = rotation.from_axis_angle(axes, rng.uniform(0.0, 0.15, size=n))
    names = [f"j{k}" for k in range(n)]
    sk = Skeleton(names, [-1] + list(range(n - 1)), t, rot)
    return sk, (names[0], names[-1])


def reachable_targets(skeleton: Skeleton, chain: tuple[str, str], n: int = CHAIN_TARGETS, seed: int = 11,
                      spread: float = 0.6) -> NDArray[np.float64]:
    """``(n, 3)`` world end positions of the chain under random local turns (rotation vectors with
    components ~ N(0, ``spread``) radians) of every chain joint: reachable by construction."""
    rng = np.random.default_rng(seed)
    pose = skeleton.rest_pose((n,))
    joints = skeleton.chain(*chain)
    turns = rotation.from_rotvec(rng.normal(size=(n, joints.size, 3)) * spread)
    pose.rotations[:, joints] = rotation.multiply(pose.rotations[:, joints], turns)
    fk = forward_kinematics(skeleton, pose)
    return np.ascontiguousarray(fk.positions[:, joints[-1]])


def ten_bone_chain(n_targets: int = CHAIN_TARGETS) -> ChainProblem:
    """The 10-bone chain and its reachable targets (the first ``n_targets`` of the fixed 1000, so a
    quick run solves a prefix of the full set)."""
    sk, chain = chain_rig(CHAIN_BONES, seed=7)
    targets = reachable_targets(sk, chain, max(n_targets, CHAIN_TARGETS), seed=11, spread=0.6)[:n_targets]
    return ChainProblem(sk, chain, sk.rest_pose(), np.ascontiguousarray(targets))


def tentacle(n_targets: int = CHAIN_TARGETS) -> ChainProblem:
    """The 20-bone tentacle (21 joints) and reachable targets (gentler turns than the 10-bone set:
    spread 0.3 rad per joint)."""
    sk, chain = chain_rig(TENTACLE_BONES, seed=3)
    targets = reachable_targets(sk, chain, max(n_targets, CHAIN_TARGETS), seed=5, spread=0.3)[:n_targets]
    return ChainProblem(sk, chain, sk.rest_pose(), np.ascontiguousarray(targets))


def two_bone_arm(n_targets: int = TWO_BONE_TARGETS) -> TwoBoneProblem:
    """The 4-joint arm, its rest pose, ``n_targets`` targets around the shoulder (normal, sigma 1.1
    against bones of 1.0 and 0.8: many beyond the reach) and a pole in front of the shoulder."""
    rot = rotation.from_axis_angle([[0.2, 0.9, 0.1], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
                                   [0.7, 0.3, 0.6, 0.1])
    sk = Skeleton(["root", *ARM_JOINTS], [-1, 0, 1, 2],
                  [[1.0, 0.9, -0.4], [0.2, 1.4, 0.0], [0.0, 1.0, 0.0], [0.0, 0.8, 0.0]], rot)
    pose = sk.rest_pose()
    rng = np.random.default_rng(3)
    shoulder = forward_kinematics(sk, pose).positions[1]
    targets = shoulder + rng.normal(size=(n_targets, 3)) * 1.1
    return TwoBoneProblem(sk, ARM_JOINTS, pose, targets, shoulder + np.array([0.0, 0.5, 3.0]))


def two_bone_best_error(problem: TwoBoneProblem) -> NDArray[np.float64]:
    """``(N,)`` the least end-to-target distance the arm can reach for each target: 0 inside its reach,
    else the distance to the reach shell (full stretch or full fold, less the solver's small margin
    kept off both).  A solver's error less this is its own inaccuracy."""
    fk = forward_kinematics(problem.skeleton, problem.pose).positions
    j = [problem.skeleton.index(n) for n in problem.joints]
    upper = float(np.linalg.norm(fk[j[1]] - fk[j[0]]))
    lower = float(np.linalg.norm(fk[j[2]] - fk[j[1]]))
    margin = _ARM_MARGIN_FRACTION * min(upper, lower)
    dist = np.linalg.norm(problem.targets_world - fk[j[0]], axis=-1)
    return np.maximum(0.0, np.maximum(dist - (upper + lower - margin), abs(upper - lower) + margin - dist))


def fk_rig(n_frames: int = FK_FRAMES, n_joints: int = FK_JOINTS) -> tuple[Skeleton, Pose]:
    """A random tree of ``n_joints`` joints (each parented to one of the 4 before it) and a pose of
    ``n_frames`` frames of random unit rotations, unit scales."""
    rng = np.random.default_rng(0)
    parents = np.array([-1] + [int(rng.integers(max(0, j - 4), j)) for j in range(1, n_joints)])
    sk = Skeleton([f"j{i}" for i in range(n_joints)], parents, rng.normal(size=(n_joints, 3)))
    q = rng.normal(size=(n_frames, n_joints, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    t = np.broadcast_to(sk.translations, (n_frames, n_joints, 3)).copy()
    return sk, Pose(t, q, np.ones((n_frames, n_joints, 3)))


def humanoid_four_goals(n_frames: int = HUMANOID_FRAMES) -> GoalsProblem:
    """The bundled humanoid on ``n_frames`` frames of the walk: both ankles pinned where each frame
    has them (priority 1) and both wrists reaching ~8 cm (normal, per axis) from where each frame has
    them (priority 0)."""
    from . import samples

    sk = samples.humanoid()
    clip = samples.clip("walk")
    pose = clip.pose[np.arange(n_frames) % clip.n_frames]
    p = forward_kinematics(sk, pose).positions
    rng = np.random.default_rng(17)
    names = ("left_ankle", "right_ankle", "left_wrist", "right_wrist")
    idx = [sk.index(n) for n in names]
    feet = [np.ascontiguousarray(p[:, i]) for i in idx[:2]]
    hands = [p[:, i] + rng.normal(size=(n_frames, 3)) * 0.08 for i in idx[2:]]
    return GoalsProblem(sk, pose, names, (*feet, *hands), (1, 1, 0, 0))


def humanoid_limits() -> dict[str, Any]:
    """Joint limits for every joint of the bundled humanoid (``samples.humanoid()``) that has one: knees and
    elbows hinged about their URDF axis (z), shoulders and hips swing-twist cones about the bone (-y), the
    chest, neck and wrists Euler boxes (radians)."""
    from .limits import EulerRange, Hinge, SwingTwist

    return {
        "left_knee": Hinge((0, 0, 1), -2.5, 0.0), "right_knee": Hinge((0, 0, 1), -2.5, 0.0),
        "left_elbow": Hinge((0, 0, 1), 0.0, 2.5), "right_elbow": Hinge((0, 0, 1), 0.0, 2.5),
        "left_shoulder": SwingTwist((0, -1, 0), 1.5, -0.8, 0.8),
        "right_shoulder": SwingTwist((0, -1, 0), 1.5, -0.8, 0.8),
        "left_hip": SwingTwist((0, -1, 0), (1.2, 0.6), -0.5, 0.5),
        "right_hip": SwingTwist((0, -1, 0), (1.2, 0.6), -0.5, 0.5),
        "chest": EulerRange("XYZ", (-0.4, -0.4, -0.4), (0.4, 0.4, 0.4)),
        "neck": EulerRange("XYZ", (-0.6, -0.8, -0.5), (0.6, 0.8, 0.5)),
        "left_wrist": EulerRange("XYZ", (-1.0, -0.3, -0.5), (1.0, 0.3, 0.5)),
        "right_wrist": EulerRange("XYZ", (-1.0, -0.3, -0.5), (1.0, 0.3, 0.5)),
    }


def repeat_clip(clip: Clip, n_frames: int, root: int = 0) -> Clip:
    """``clip`` repeated to ``n_frames`` frames; the root keeps walking (each loop starts where the last
    ended).  Raises ``ValueError`` for a clip with explicit frame times."""
    if clip.times is not None:
        raise ValueError("repeat_clip needs evenly spaced frames")
    full = clip.pose.broadcast()
    f = clip.n_frames
    reps = -(-n_frames // f)
    t = np.tile(full.translations, (reps, 1, 1))[:n_frames]
    r = np.tile(full.rotations, (reps, 1, 1))[:n_frames]
    s = np.tile(full.scales, (reps, 1, 1))[:n_frames]
    step = full.translations[-1, root] - full.translations[0, root]
    step[1] = 0.0  # keep the height; advance horizontally
    loop = np.repeat(np.arange(reps), f)[:n_frames]
    # one more frame's travel per loop, so the seam does not stand still for a frame
    travel = step + (full.translations[-1, root] - full.translations[-2, root]) * np.array([1.0, 0.0, 1.0])
    t[:, root] += loop[:, None] * travel
    return Clip(Pose(t, r, s), clip.fps)


def long_walk(n_frames: int) -> tuple[Any, Clip]:
    """The bundled humanoid and its walk repeated to ``n_frames`` frames (walking on, not looping back)."""
    from . import samples

    sk = samples.humanoid()
    return sk, repeat_clip(samples.clip("walk"), n_frames, sk.index("root"))


def long_bvh_text(n_frames: int = BVH_FRAMES) -> bytes:
    """A BVH file (bytes) of the bundled walk with its MOTION lines repeated to ``n_frames`` frames."""
    from . import samples
    from .io import save_bvh

    with tempfile.TemporaryDirectory(prefix="kinema-problems-") as tmp:
        path = os.path.join(tmp, "walk.bvh")
        save_bvh(path, samples.humanoid(), samples.clip("walk"))
        with open(path, "rb") as f:
            data = f.read()
    head, _, rest = data.partition(b"MOTION")
    motion = rest.splitlines(keepends=True)
    header = [ln for ln in motion if ln.strip().startswith((b"Frames:", b"Frame Time:"))]
    lines = [ln for ln in motion if ln.strip() and ln not in header]
    frame_time = next(ln for ln in header if ln.strip().startswith(b"Frame Time:"))
    rows = (lines * (n_frames // len(lines) + 1))[:n_frames]
    out = io.BytesIO()
    out.write(head + b"MOTION\n" + b"Frames: %d\n" % n_frames + frame_time.rstrip(b"\r\n") + b"\n")
    out.write(b"".join(rows))
    return out.getvalue()
