"""Fixtures for the viewer tests: a small Y-up humanoid with a swinging-arm clip."""

from __future__ import annotations

import numpy as np
import pytest

from kinema import Clip, Pose, Skeleton, rotation

pytest.importorskip("viser")

#: name, parent, rest translation (metres, Y up, facing +Z)
TOY_JOINTS = [
    ("hips", None, (0.0, 1.0, 0.0)),
    ("spine", "hips", (0.0, 0.2, 0.0)),
    ("chest", "spine", (0.0, 0.25, 0.0)),
    ("neck", "chest", (0.0, 0.2, 0.0)),
    ("head", "neck", (0.0, 0.15, 0.0)),
    ("l_shoulder", "chest", (0.18, 0.15, 0.0)),
    ("l_elbow", "l_shoulder", (0.3, 0.0, 0.0)),
    ("l_wrist", "l_elbow", (0.25, 0.0, 0.0)),
    ("r_shoulder", "chest", (-0.18, 0.15, 0.0)),
    ("r_elbow", "r_shoulder", (-0.3, 0.0, 0.0)),
    ("r_wrist", "r_elbow", (-0.25, 0.0, 0.0)),
    ("l_hip", "hips", (0.1, -0.05, 0.0)),
    ("l_knee", "l_hip", (0.0, -0.45, 0.0)),
    ("l_ankle", "l_knee", (0.0, -0.42, 0.0)),
    ("r_hip", "hips", (-0.1, -0.05, 0.0)),
    ("r_knee", "r_hip", (0.0, -0.45, 0.0)),
    ("r_ankle", "r_knee", (0.0, -0.42, 0.0)),
]

N_FRAMES = 24


def make_toy() -> tuple[Skeleton, Clip]:
    names = [n for n, _, _ in TOY_JOINTS]
    parents = [-1 if p is None else names.index(p) for _, p, _ in TOY_JOINTS]
    # a slight bend at the elbows and knees so chains have a bend plane
    rest_rot = np.tile([0.0, 0.0, 0.0, 1.0], (len(names), 1))
    rest_rot[names.index("l_elbow")] = rotation.from_axis_angle([0, 1, 0], -0.3)
    rest_rot[names.index("r_elbow")] = rotation.from_axis_angle([0, 1, 0], 0.3)
    rest_rot[names.index("l_knee")] = rotation.from_axis_angle([1, 0, 0], 0.2)
    rest_rot[names.index("r_knee")] = rotation.from_axis_angle([1, 0, 0], 0.2)
    skel = Skeleton(names, parents, [t for _, _, t in TOY_JOINTS], rest_rot)
    t = np.linspace(0.0, 2 * np.pi, N_FRAMES, endpoint=False)
    rots = np.broadcast_to(skel.rotations, (N_FRAMES, len(names), 4)).copy()
    for side, sign in (("l", 1.0), ("r", -1.0)):
        swing = rotation.from_axis_angle(np.broadcast_to([0, 0, 1.0], (N_FRAMES, 3)), sign * (-1.1 + 0.3 * np.sin(t)))
        rots[:, names.index(f"{side}_shoulder")] = swing
        leg = rotation.from_axis_angle(np.broadcast_to([1.0, 0, 0], (N_FRAMES, 3)), sign * 0.4 * np.sin(t))
        rots[:, names.index(f"{side}_hip")] = leg
    trans = np.broadcast_to(skel.translations, (N_FRAMES, len(names), 3)).copy()
    trans[:, 0, 2] = np.linspace(0.0, 0.5, N_FRAMES)
    return skel, Clip(Pose(trans, rots), fps=24.0)


@pytest.fixture
def toy() -> tuple[Skeleton, Clip]:
    return make_toy()
