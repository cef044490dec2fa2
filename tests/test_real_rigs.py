"""Every solver on a real third-party rig (RiggedFigure.gltf, float32 scales such as 1.000000119)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kinema
from kinema import io

ARM = ("arm_joint_L_1", "arm_joint_L_2", "arm_joint_L_3")
#: float32 scales are treated as uniform: the end may miss by this fraction of the arm's length.
FLOAT32_SCALE_RTOL = 1e-5


@pytest.fixture(scope="module")
def figure(shared_data: Path) -> tuple[kinema.Skeleton, kinema.Pose]:
    asset = io.load_gltf(shared_data / "gltf" / "RiggedFigure.gltf")
    sk = asset.skeleton
    assert not sk.has_uniform_scale  # the file's scales are not bit-exact uniform ...
    assert np.allclose(sk.scales, 1.0, rtol=1e-6)  # ... only float32 noise around 1
    return sk, sk.rest_pose()


def _reachable_target(sk: kinema.Skeleton, pose: kinema.Pose) -> tuple[np.ndarray, float]:
    fk = kinema.forward_kinematics(sk, pose)
    idx = sk.indices(ARM)
    p = fk.positions[idx]
    a = np.linalg.norm(p[1] - p[0])
    b = np.linalg.norm(p[2] - p[1])
    # A point 80 % of the reach away from the shoulder, off to the side and forward.
    direction = np.array([0.6, -0.3, 0.74])
    return p[0] + 0.8 * (a + b) * direction / np.linalg.norm(direction), a + b


@pytest.mark.parametrize("solver", ["two_bone", "ccd", "fabrik"])
def test_each_solver_reaches_on_the_real_rig(figure: tuple[kinema.Skeleton, kinema.Pose], solver: str) -> None:
    sk, pose = figure
    target, reach = _reachable_target(sk, pose)
    if solver == "two_bone":
        res = kinema.solve_two_bone(sk, pose, ARM, target)
    elif solver == "ccd":
        res = kinema.solve_ccd(sk, pose, (ARM[0], ARM[2]), target, iterations=200, tolerance=1e-7)
    else:
        res = kinema.solve_fabrik(sk, pose, (ARM[0], ARM[2]), target, iterations=200, tolerance=1e-7)
    # Exact FK (non-uniform scales carried through matrices) puts the hand on the target.
    hand = kinema.forward_kinematics(sk, res.pose).positions[sk.index(ARM[2])]
    assert np.linalg.norm(hand - target) <= FLOAT32_SCALE_RTOL * reach
    # Joints off the chain keep their rotations bit for bit.
    others = np.setdiff1d(np.arange(sk.n_joints), sk.indices(ARM))
    assert np.array_equal(res.pose.rotations[others], pose.rotations[others])


def test_clearly_non_uniform_scale_is_still_rejected(figure: tuple[kinema.Skeleton, kinema.Pose]) -> None:
    sk, pose = figure
    bad = pose.copy()
    bad.scales[sk.index(ARM[0])] = [1.0, 1.1, 1.0]
    target, _ = _reachable_target(sk, pose)
    with pytest.raises(kinema.SolverInputError, match="non-uniform scale"):
        kinema.solve_two_bone(sk, bad, ARM, target)
