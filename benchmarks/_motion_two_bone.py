"""Issue 18's two-bone figures for ``bench_motion.py``: landed behaviour (default options) beside the new options.

* the pole-axis sweep (:func:`kinema._sweeps.pole_axis_scene`, 600 frames at 60 fps, reach 0.75 of the
  arm) at 1, 3, 6 and 10 degrees from the pole axis: the largest per-frame elbow direction change over
  the median, for the plain pole and for history mode (landed: ``TwoBoneIK``; now: ``smooth=True`` with
  ``dt``), and how many frames after the target leaves the 15-degree cone the elbow needs to be back in
  the pole's plane ("plain pole" rows: landed is the stateless pole, now is the smooth history mode);
* the warm-started closed loop (:func:`kinema._sweeps.closed_loop`, 20 targets a loop, 50 loops, a
  pole): how far the pose ends from where the first loop left it, ``twist="input"`` (landed) vs
  ``"rest"``.

Angles, not times: the figures are deterministic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import kinema
from kinema import _sweeps as S
from kinema import rotation as R

__all__ = ["figures", "OFFSETS_DEG", "LOOPS"]

#: The issue's pole-axis offsets (degrees).
OFFSETS_DEG = (1.0, 3.0, 6.0, 10.0)
#: Loops of the closed-loop twist figure.
LOOPS = 50
#: The issue's thresholds.
MAX_OVER_MEDIAN = 5.0
POLE_CONE_DEG = 15.0
PLANE_TOL_DEG = 1e-9
LOOP_TOL_DEG = 1.0


def _ratio(scene: S.PoleAxisScene, poses: kinema.Pose) -> float:
    steps = S.step_angles(S.bone_directions(scene.skeleton, poses, "shoulder", "elbow"))
    return float(steps.max() / np.median(steps))


def _settle_frames(scene: S.PoleAxisScene, poses: kinema.Pose) -> int:
    """Frames after the target leaves the cone until the elbow stays in the pole's plane (0: already there)."""
    elbows = S.bone_directions(scene.skeleton, poses, "shoulder", "elbow")
    axis = S.pole_axis_angle_deg(scene.shoulder, scene.pole, scene.targets)
    plane = S.pole_plane_offset_deg(scene.shoulder, scene.pole, scene.targets, elbows)
    closest = int(np.argmin(axis))
    leave = closest + int(np.nonzero(axis[closest:] > POLE_CONE_DEG)[0][0])
    off = np.nonzero(plane[leave:] > PLANE_TOL_DEG)[0]
    return int(off[-1]) + 1 if off.size else 0


def _loop_drift_deg(twist: str) -> tuple[float, float]:
    """(degrees the upper arm turns per loop, summed over the loops: how far it wound up after LOOPS)."""
    scene = S.pole_axis_scene(10.0)
    targets = S.closed_loop(scene.shoulder + np.array([0.15, -0.2, 0.25]), 0.12, loops=LOOPS)
    poses = S.warm_loop(lambda p, t: kinema.solve_two_bone(scene.skeleton, p, S.ARM_JOINTS, t, scene.pole,
                                                           twist=twist), scene.pose, targets)
    ends = poses.rotations[19::20]
    upper = scene.skeleton.index("shoulder")
    per_loop = np.degrees(R.angle_between(ends[1:, upper], ends[:-1, upper]))
    return float(per_loop.mean()), float(per_loop.sum())


def figures() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for offset in OFFSETS_DEG:
        scene = S.pole_axis_scene(offset)
        plain = kinema.solve_two_bone(scene.skeleton, scene.pose, S.ARM_JOINTS, scene.targets, scene.pole)
        landed_ik = kinema.TwoBoneIK(scene.skeleton, S.ARM_JOINTS, pole=scene.pole)
        landed, _ = S.follow(landed_ik.solve, scene.pose, scene.targets)
        smooth_ik = kinema.TwoBoneIK(scene.skeleton, S.ARM_JOINTS, pole=scene.pole, smooth=True)
        now, _ = S.follow(smooth_ik.solve, scene.pose, scene.targets, dt=scene.dt)
        rows.append(dict(name=f"two-bone {offset:g} deg from pole axis: max/median elbow step (plain pole)",
                         landed=_ratio(scene, plain.pose), now=_ratio(scene, now), threshold=MAX_OVER_MEDIAN,
                         unit="x"))
        rows.append(dict(name=f"two-bone {offset:g} deg from pole axis: max/median elbow step (history mode)",
                         landed=_ratio(scene, landed), now=_ratio(scene, now), threshold=MAX_OVER_MEDIAN, unit="x"))
        rows.append(dict(name=f"two-bone {offset:g} deg: frames past 15 deg until in the pole's plane (history)",
                         landed=_settle_frames(scene, landed), now=_settle_frames(scene, now), threshold=3,
                         unit="frames"))
    per_loop_in, end_in = _loop_drift_deg("input")
    per_loop_rest, end_rest = _loop_drift_deg("rest")
    rows.append(dict(name="two-bone closed loop: upper arm turn per loop (twist input -> rest)", landed=per_loop_in,
                     now=per_loop_rest, threshold=LOOP_TOL_DEG / LOOPS, unit="deg"))
    rows.append(dict(name=f"two-bone closed loop: upper arm wound up over {LOOPS} loops (input -> rest)",
                     landed=end_in, now=end_rest, threshold=LOOP_TOL_DEG, unit="deg"))
    return rows
