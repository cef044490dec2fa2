"""How often DLS reaches targets the limited humanoid can reach: a plain script printing one row per goal set.

Run ``.venv/bin/python benchmarks/dls_limits_reach.py [seed]``: for each goal set, 200 targets from FK of random
humanoid poses inside a full set of limits (knees and elbows hinged, shoulders and hips swing-twist, chest, neck
and wrists Euler boxes), each solved from a random walk frame with the default 100 iterations; prints the
fraction with every goal within the tolerance (1e-6), the median and largest iteration counts and how many
solves hit the cap.  It also checks that every limit holds and every reported goal error matches FK.
No timing is measured.  Figures: ``benchmarks/NOTES.md`` (2026-12-06).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import kinema
from kinema import rotation as rot
from kinema import samples
from kinema._problems import humanoid_limits
from kinema.goals import LookAtGoal, OrientationGoal, PoseGoal, PositionGoal

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

SK = samples.humanoid()
WALK = samples.clip("walk").pose
LIMITS = humanoid_limits()
ENDS = ("left_wrist", "right_wrist", "left_ankle", "right_ankle")


def random_pose(rng: np.random.Generator, n: int, translations: Any) -> kinema.Pose:
    """``n`` random poses (turns up to 1.2 rad per joint) clamped into ``LIMITS``."""
    axis = rng.normal(size=(n, SK.n_joints, 3))
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    r = rot.from_rotvec(axis * rng.uniform(0.0, 1.2, size=(n, SK.n_joints, 1)))
    for name, lim in LIMITS.items():
        j = SK.index(name)
        r[:, j] = lim.clamp(r[:, j], SK.rotations[j])
    return kinema.Pose(translations, r)


def row(rng: np.random.Generator, label: str, goals_for: Callable[[Any], list[Any]], use_limits: bool = True,
        n: int = 200, **options: Any) -> None:
    start = WALK[rng.integers(0, WALK.rotations.shape[0], n)]
    fk = kinema.forward_kinematics(SK, random_pose(rng, n, start.translations))
    goals = goals_for(fk)
    solver = kinema.DLS(SK, goals, limits=LIMITS if use_limits else None, **options)
    res = solver.solve(start)
    its = np.asarray(res.iterations)
    worst = 0.0
    for name, lim in (LIMITS.items() if use_limits else ()):
        j = SK.index(name)
        worst = max(worst, float(np.max(lim.violation(res.pose.rotations[:, j], SK.rotations[j]))))
    after = kinema.forward_kinematics(SK, res.pose)
    for g, goal in enumerate(goals):
        if isinstance(goal, PositionGoal):
            e = np.linalg.norm(after.positions[:, SK.index(goal.joint)] - goal.target, axis=-1)
            assert np.allclose(e, res.state["goal_errors"][:, g], rtol=0, atol=1e-9), label
    print(f"{label:42s} {np.mean(res.reached):7.3f} {np.median(its):7.1f} {its.max():5d} "
          f"{int(np.sum(its >= solver.iterations)):5d}   {worst:.1e}")


def main() -> None:
    rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    ix = SK.index
    print(f"{'goals (200 targets each)':42s} reached  median   max  capped  worst limit violation")
    row(rng, "left wrist position", lambda f: [PositionGoal("left_wrist", f.positions[:, ix("left_wrist")])])
    row(rng, "both wrists, position and orientation", lambda f: [
        *[PositionGoal(n, f.positions[:, ix(n)]) for n in ENDS[:2]],
        *[OrientationGoal(n, f.rotations[:, ix(n)]) for n in ENDS[:2]]])
    row(rng, "four limb ends, position", lambda f: [PositionGoal(n, f.positions[:, ix(n)]) for n in ENDS])
    row(rng, "four limb ends, root translation", lambda f: [PositionGoal(n, f.positions[:, ix(n)]) for n in ENDS],
        root_translation=True)
    row(rng, "ankles at priority 1, wrists", lambda f: [
        *[PositionGoal(n, f.positions[:, ix(n)], priority=1) for n in ENDS[2:]],
        *[PositionGoal(n, f.positions[:, ix(n)]) for n in ENDS[:2]]])
    row(rng, "the same with a pose goal", lambda f: [
        *[PositionGoal(n, f.positions[:, ix(n)], priority=1) for n in ENDS[2:]],
        *[PositionGoal(n, f.positions[:, ix(n)]) for n in ENDS[:2]], PoseGoal(0.1)])
    row(rng, "neck look-at", lambda f: [LookAtGoal("neck", f.positions[:, ix("neck")] + rot.rotate(
        f.rotations[:, ix("neck")], np.array([1.0, 0.0, 0.0])) * 2, axis=(1, 0, 0))])
    row(rng, "legs, position and orientation", lambda f: [
        *[PositionGoal(n, f.positions[:, ix(n)]) for n in ENDS[2:]],
        *[OrientationGoal(n, f.rotations[:, ix(n)]) for n in ENDS[2:]]])
    row(rng, "four limb ends, no limits (reference)",
        lambda f: [PositionGoal(n, f.positions[:, ix(n)]) for n in ENDS], use_limits=False)


if __name__ == "__main__":
    main()
