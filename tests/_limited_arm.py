"""Random right-arm problems under limits, solved at growing iteration counts (CCD and FABRIK tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import kinema
from kinema import rotation as R
from kinema.limits import Hinge, SwingTwist

#: The arm's limits: a hinged elbow and a swing-twist shoulder.
ARM_LIMITS = {"right_elbow": Hinge((0, 0, 1), 0, 150, degrees=True),
              "right_shoulder": SwingTwist((0, -1, 0), swing=100, twist_min=-60, twist_max=60, degrees=True)}


def errors_by_iterations(solve: Callable[..., Any], n: int = 300, seed: int = 0,
                         counts: tuple[int, ...] = (1, 2, 3, 5, 10, 20, 50)) -> np.ndarray:
    """``solve(skeleton, pose, chain, targets, limits=..., iterations=..., tolerance=...)`` (``solve_ccd``,
    ``solve_fabrik``) on ``n`` random poses of the humanoid, chest to right wrist, with targets around the
    shoulder, at each of ``counts`` iterations: the errors ``(len(counts), n)``.  Checks on the way that every
    reported error is the returned pose's (FK, 1e-12) and that the limits hold (1e-9 rad)."""
    sk = kinema.samples.humanoid()
    rng = np.random.default_rng(seed)
    pose = sk.rest_pose((n,))
    pose.rotations[:, 1:] = R.multiply(pose.rotations[:, 1:],
                                       R.from_rotvec(rng.normal(size=(n, sk.n_joints - 1, 3)) * 0.3))
    tg = kinema.forward_kinematics(sk, pose).positions[:, sk.index("right_shoulder")] + rng.normal(size=(n, 3)) * 0.35
    errors = []
    for iterations in counts:
        res = solve(sk, pose, ("chest", "right_wrist"), tg, limits=ARM_LIMITS, iterations=iterations, tolerance=1e-6)
        fk = kinema.forward_kinematics(sk, res.pose).positions[:, sk.index("right_wrist")]
        np.testing.assert_allclose(res.error, np.linalg.norm(fk - tg, axis=-1), rtol=0.0, atol=1e-12)
        for name, lim in ARM_LIMITS.items():
            j = sk.index(name)
            assert float(np.max(lim.violation(res.pose.rotations[:, j], sk.rotations[j]))) <= 1e-9
        errors.append(np.asarray(res.error))
    return np.array(errors)
