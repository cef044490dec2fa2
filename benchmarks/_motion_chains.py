"""Issue-18 motion figures for the chain solvers (CCD, FABRIK, FABRIKTree), for ``bench_motion.py``.

:func:`figures` measures each figure on the scripted sweeps of :mod:`kinema._sweeps` and returns rows
``{name, landed, now, threshold, unit}``:

* the slow pole loop (:func:`kinema._sweeps.chain_pole_loop`): the largest per-frame joint turn after
  frame 5, degrees; landed = the default pole (snaps), now = ``pole_max_twist=POLE_MAX_TWIST``;
* the twist loops (:func:`kinema._sweeps.twist_loop_scene`): how far the pose after loop 55 is from the
  pose after loop 5 (50 loops later), degrees; landed = ``twist="input"``, now = ``twist="rest"``;
* tree convergence (:func:`kinema._sweeps.torso_problem`): the share of items with every goal within
  1 mm at 20, 50 and 100 iterations; landed = the figure measured on the landed code (commit 8c97601,
  recorded in :data:`TREE_LANDED`: the algorithm it came from is gone), now = measured.

The tests in ``tests/test_motion_chains.py`` assert the same measurements against the thresholds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import kinema
from kinema import _sweeps as sw

__all__ = ["POLE_MAX_TWIST", "TREE_LANDED", "TREE_ITEMS", "figures", "pole_loop_max_turn", "tree_reached",
           "twist_drift"]

#: The pole budget the figure uses (radians per solve).
POLE_MAX_TWIST = math.radians(5.0)
#: Frames at the start of the pole loop left out of its figure (the chain settles from its rest pose).
POLE_SETTLE_FRAMES = 5
#: Loops left out before the twist drift is measured (the first starts from the rest pose, off the loop),
#: and the loops it is measured over.
TWIST_SETTLE_LOOPS = 5
TWIST_LOOPS = 50
#: Items of the torso problem, and its success distance (metres).
TREE_ITEMS = 200
TREE_REACHED = 1e-3
#: Share of torso items reached on the landed code (commit 8c97601, 200 items, seed 7) at 20, 50, 100
#: iterations.
TREE_LANDED = {20: 0.07, 50: 0.42, 100: 0.66}


def pole_loop_max_turn(solver: Any) -> float:
    """Degrees: the largest turn of any joint between consecutive frames after the settling frames, the
    chain following :func:`kinema._sweeps.chain_pole_loop` from the previous result each frame."""
    scene = sw.chain_pole_loop()
    poses = sw.warm_loop(lambda p, t: solver.solve(p, t, pole=scene.pole), scene.pose, scene.targets)
    steps = sw.rotation_steps(poses.rotations)
    return float(np.degrees(steps[POLE_SETTLE_FRAMES:].max()))


def twist_drift(solver: Any, *, pole: bool) -> float:
    """Degrees: the largest joint-rotation difference between the pose after loop ``TWIST_SETTLE_LOOPS``
    and after ``TWIST_LOOPS`` more loops of :func:`kinema._sweeps.twist_loop_scene` (warm-started)."""
    per_loop = 20
    scene = sw.twist_loop_scene(loops=TWIST_SETTLE_LOOPS + TWIST_LOOPS, per_loop=per_loop)
    pl = scene.pole if pole else None
    poses = sw.warm_loop(lambda p, t: solver.solve(p, t, pole=pl), scene.pose, scene.targets)
    a = poses.rotations[TWIST_SETTLE_LOOPS * per_loop - 1]
    b = poses.rotations[-1]
    return float(np.degrees(sw.rotation_steps(np.stack([a, b]))[0].max()))


def tree_reached(iterations: int, n: int = TREE_ITEMS) -> float:
    """Share of :func:`kinema._sweeps.torso_problem` items whose every goal is within 1 mm."""
    prob = sw.torso_problem(n)
    res = kinema.solve_fabrik_tree(prob.skeleton, prob.pose, prob.targets, iterations=iterations,
                                   tolerance=TREE_REACHED)
    return float(np.mean(res.state["goal_errors"].max(axis=-1) <= TREE_REACHED))


def figures() -> list[dict[str, Any]]:
    """Every chain figure of issue 18: ``{name, landed, now, threshold, unit}`` per row."""
    rows: list[dict[str, Any]] = []
    scene = sw.chain_pole_loop()
    for label, cls in (("CCD", kinema.CCD), ("FABRIK", kinema.FABRIK)):
        landed = pole_loop_max_turn(cls(scene.skeleton, scene.chain))
        now = pole_loop_max_turn(cls(scene.skeleton, scene.chain, pole_max_twist=POLE_MAX_TWIST))
        rows.append({"name": f"{label} slow pole loop: largest joint turn per frame after frame 5",
                     "landed": landed, "now": now, "threshold": 15.0, "unit": "deg"})
    tw = sw.twist_loop_scene(loops=1)
    for label, cls, pole in (("CCD", kinema.CCD, False), ("CCD with pole", kinema.CCD, True),
                             ("FABRIK", kinema.FABRIK, False)):
        landed = twist_drift(cls(tw.skeleton, tw.chain), pole=pole)
        now = twist_drift(cls(tw.skeleton, tw.chain, twist="rest"), pole=pole)
        rows.append({"name": f"{label} closed loop: pose drift over 50 loops (input vs twist='rest')",
                     "landed": landed, "now": now, "threshold": 1.0, "unit": "deg"})
    for it in (20, 50, 100):
        rows.append({"name": f"FABRIKTree torso, 3 goals: share within 1 mm at {it} iterations",
                     "landed": TREE_LANDED[it], "now": tree_reached(it), "threshold": 0.9, "unit": ">= share"})
    return rows


if __name__ == "__main__":
    for row in figures():
        print(f"{row['name']}: landed {row['landed']:.3g}, now {row['now']:.3g} (threshold {row['threshold']} "
              f"{row['unit']})")
