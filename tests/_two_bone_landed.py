"""The two-bone solves whose results were recorded from the landed code (before issue 18's options) in
``tests/data/motion/two_bone_landed.npz``: the default behaviour must stay bit for bit what it was.

``cases()`` returns ``{name: rotations}`` computed with the code under test; run this file as a script to
re-record (only when the default behaviour changes on purpose: the file is the copy of the intended one).
Re-recorded once since: when a pole's solve began to roll the upper bone with the bend plane (no pop near a
half-turn swing, no wind-up under a warm start; ``tests/test_two_bone_roll.py``).  The cases without a pole
(``plain``) and the hinged one were unchanged bit for bit; those with a pole changed.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

import kinema
from kinema import _sweeps as S
from kinema import rotation as R
from kinema.limits import Hinge

LANDED = Path(__file__).parent / "data" / "motion" / "two_bone_landed.npz"


def twist_arm() -> kinema.Skeleton:
    """An arm with a twist joint half-way along each bone (root, shoulder, upper_twist, elbow, fore_twist,
    wrist, hand)."""
    rot = R.from_axis_angle([[0.3, 1.0, 0.2], [0.0, 0.0, 1.0], [0, 1, 0], [1.0, 0.0, 0.0], [0, 1, 0], [0, 0, 1],
                             [0, 0, 1]], [0.4, -0.2, 0.3, math.radians(40.0), -0.2, 0.1, 0.0])
    t = [[0.1, 1.4, -0.05], [0.18, 0.05, 0.0], [0, 0.15, 0], [0, 0.15, 0], [0, 0.13, 0], [0, 0.14, 0], [0, 0.08, 0]]
    return kinema.Skeleton(["root", "shoulder", "upper_twist", "elbow", "fore_twist", "wrist", "hand"],
                           [-1, 0, 1, 2, 3, 4, 5], t, rot)


def cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(18)
    out: dict[str, np.ndarray] = {}
    for name, sk in (("arm", S.two_bone_arm()), ("twist", twist_arm())):
        pose = sk.rest_pose((32,))
        pose.rotations[:] = R.multiply(pose.rotations, R.from_rotvec(rng.normal(size=(32, sk.n_joints, 3)) * 0.3))
        fk = kinema.forward_kinematics(sk, pose).positions
        shoulder = fk[:, 1]
        targets = shoulder + rng.normal(size=(32, 3)) * 0.4
        poles = shoulder + rng.normal(size=(32, 3))
        hints = rng.normal(size=(32, 3))
        ends = R.normalize(rng.normal(size=(32, 4)))
        weights = rng.uniform(0.2, 1.0, size=32)
        for cont in (False, True):
            res = kinema.solve_two_bone(sk, pose, S.ARM_JOINTS, targets, poles, bend_hint=hints, end_rotation=ends,
                                        twist_spread=0.5, soft=0.1, weight=weights, continuity=cont)
            out[f"{name} options continuity={cont}"] = res.pose.rotations
        out[f"{name} plain"] = kinema.solve_two_bone(sk, pose, S.ARM_JOINTS, targets).pose.rotations
    sk = S.two_bone_arm()
    hinge = {"elbow": Hinge((1.0, 0.0, 0.0), 0.1, 2.5)}
    shoulder = kinema.forward_kinematics(sk, sk.rest_pose()).positions[1]
    out["hinge"] = kinema.solve_two_bone(sk, sk.rest_pose(), S.ARM_JOINTS, shoulder + rng.normal(size=(16, 3)) * 0.4,
                                         shoulder + [0.0, 0.0, -1.0], limits=hinge).pose.rotations
    # History mode along the pole-axis sweep, and a warm-started closed loop (twist "input").
    scene = S.pole_axis_scene(3.0)
    ik = kinema.TwoBoneIK(scene.skeleton, S.ARM_JOINTS, pole=scene.pole)
    out["history sweep"] = np.stack([ik.solve(scene.pose, t).pose.rotations for t in scene.targets])
    loop = S.closed_loop(scene.shoulder + [0.15, -0.2, 0.25], 0.12, loops=5)
    pose = scene.pose
    frames = []
    for t in loop:
        pose = kinema.solve_two_bone(scene.skeleton, pose, S.ARM_JOINTS, t, scene.pole).pose
        frames.append(pose.rotations)
    out["warm loop"] = np.stack(frames)
    return out


if __name__ == "__main__":
    if "--record" not in sys.argv:
        raise SystemExit("usage: python tests/_two_bone_landed.py --record  (from the landed code only)")
    LANDED.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(LANDED, **cases())
    print(f"recorded {LANDED}")
