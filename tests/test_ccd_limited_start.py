"""CCD with joint limits never ends farther from the target than a start inside its limits.

With limits the sweeps fight the clamps and an unfinished solve may wander: a warm-started arm whose target
crept along a circle just outside the shoulder's swing cone jumped 100-160 degrees a frame and its error went
from 0.07 m (the start) to 0.48 m.  A start inside every limit is a candidate: an unfinished solve none of whose
sweeps comes nearer than it returns the input bit for bit (moved False, no limit hits).
"""

from __future__ import annotations

import numpy as np

import kinema
from kinema.limits import Hinge, SwingTwist

SK = kinema.samples.humanoid()
ARM = ("right_shoulder", "right_wrist")
LIMITS = {"right_elbow": Hinge((0, 0, 1), 0, 150, degrees=True),
          "right_shoulder": SwingTwist((0, -1, 0), 120, -60, 60, degrees=True)}
SHOULDER = kinema.forward_kinematics(SK, SK.rest_pose()).positions[SK.index("right_shoulder")]


def _turn_deg(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.degrees(2.0 * np.arccos(np.clip(np.abs(np.sum(a * b, axis=-1)), 0.0, 1.0))).max())


def test_a_warm_started_arm_along_a_circle_never_ends_worse_than_its_start() -> None:
    ccd = kinema.CCD(SK, ARM, limits=LIMITS)
    pose = ccd.solve(SK.rest_pose(), SHOULDER + [0.0, 0.4, 0.0]).pose  # the first frame, from rest
    turns = []
    for f in range(1, 120):
        a = 2.0 * np.pi * f / 399.0
        target = SHOULDER + 0.4 * np.array([0.0, np.cos(a), np.sin(a)])
        start = kinema.forward_kinematics(SK, pose).positions[SK.index("right_wrist")]
        res = ccd.solve(pose, target)
        start_error = float(np.linalg.norm(start - target))
        assert float(res.error) <= start_error + 1e-12, (f, float(res.error), start_error)
        for name, lim in LIMITS.items():
            j = SK.index(name)
            assert float(lim.violation(res.pose.rotations[j], SK.rotations[j])) <= 1e-9
        if not res.state["moved"]:
            np.testing.assert_array_equal(res.pose.rotations, pose.rotations)  # the input, bit for bit
            assert int(res.limits_hit) == 0
        turns.append(_turn_deg(res.pose.rotations, pose.rotations))
        pose = res.pose
    assert max(turns) <= 30.0, max(turns)  # (it was 158 degrees in one frame)


def test_random_warm_started_limited_arms_never_end_worse_than_their_start() -> None:
    """Many arms solved toward targets 0.4 m from the shoulder in random directions (many beyond the cones), then
    warm started toward the targets moved 6 mm: no result is farther than its start, and the starts no sweep
    beat come back bit for bit."""
    rng = np.random.default_rng(17)
    ccd = kinema.CCD(SK, ARM, limits=LIMITS)
    n = 400
    d = rng.normal(size=(n, 3))
    targets = SHOULDER + 0.4 * d / np.linalg.norm(d, axis=-1, keepdims=True)
    pose = ccd.solve(SK.rest_pose((n,)), targets).pose  # inside the limits (a solve's result)
    start = kinema.forward_kinematics(SK, pose).positions[:, SK.index("right_wrist")]
    step = rng.normal(size=(n, 3))
    targets = targets + 0.006 * step / np.linalg.norm(step, axis=-1, keepdims=True)
    res = ccd.solve(pose, targets)
    start_error = np.linalg.norm(start - targets, axis=-1)
    assert np.all(res.error <= start_error + 1e-12), float(np.max(res.error - start_error))
    kept = ~res.state["moved"]
    assert kept.any()  # some starts no sweep beat (the case this guards)
    np.testing.assert_array_equal(res.pose.rotations[kept], pose.rotations[kept])
