"""Full-body DLS benchmark (``kinema.DLS`` / ``kinema.solve_dls``), a plain script printing figures.

Run ``.venv/bin/python benchmarks/bench_dls.py``:

* the 10-bone chain and 1000 reachable targets of ``benchmarks/_targets.py``
  (shared with the CCD and FABRIK benchmarks): fraction of targets within
  1e-4 and 1e-6, and microseconds per solve in one batched call, with CCD
  and FABRIK (20 iterations) beside it; ikpy and pytorch_kinematics rows
  when installed;
* a limited 6-bone chain with targets made by FK from random poses inside
  the limits: fraction reached within 1e-3 for DLS, CCD and FABRIK;
* the bundled 15-joint humanoid with four position goals (both feet pinned,
  both hands reaching) and a look-at of the neck: microseconds per single
  call, and frames per second for a 1000-frame batch.

No timing is asserted.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import kinema
from kinema import samples
from kinema._dls import DLS
from kinema.bench._peers import IkpyChain
from kinema.goals import LookAtGoal, PositionGoal
from kinema.limits import EulerRange, Hinge, SwingTwist

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import copy_probe_ns  # noqa: E402
from _targets import chain_rig, reachable_targets  # noqa: E402

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)


def _best(fn: Any, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def chain_rows() -> None:
    sk, chain = chain_rig()
    targets = reachable_targets(sk, chain)
    pose = sk.rest_pose()
    n = len(targets)
    solver = DLS(sk, [PositionGoal(chain[1], targets)])
    res = solver.solve(pose)  # compile
    sec = _best(lambda: solver.solve(pose))
    err = np.asarray(res.error)
    print(f"10-bone chain, {n} reachable targets, one batched call (DLS defaults: tolerance 1e-6, "
          f"at most {solver.iterations} iterations)")
    print(f"{'solver':>20} {'<=1e-4':>8} {'<=1e-6':>8} {'us/solve':>9} {'median its':>10}")
    print(f"{'dls':>20} {np.mean(err <= 1e-4):>8.4f} {np.mean(err <= 1e-6):>8.4f} {sec / n * 1e6:>9.2f} "
          f"{statistics.median(np.asarray(res.iterations)):>10.0f}")
    for name, fn in (("ccd (20 its)", kinema.solve_ccd), ("fabrik (20 its)", kinema.solve_fabrik)):
        r = fn(sk, pose, chain, targets, iterations=20, tolerance=0.0)
        s = _best(lambda fn=fn: fn(sk, pose, chain, targets, iterations=20, tolerance=0.0))
        e = np.asarray(r.error)
        print(f"{name:>20} {np.mean(e <= 1e-4):>8.4f} {np.mean(e <= 1e-6):>8.4f} {s / n * 1e6:>9.2f} {20:>10}")
    if importlib.util.find_spec("ikpy") is None:
        print(f"{'ikpy':>20}  not installed (optional benchmark peer: pip install ikpy)")
    else:
        n_ik = 20  # ikpy takes tens of milliseconds per solve
        e, us = ikpy_row(sk, targets[:n_ik])
        print(f"{'ikpy (' + str(n_ik) + ' targets)':>20} {np.mean(e <= 1e-4):>8.4f} {np.mean(e <= 1e-6):>8.4f} "
              f"{us:>9.0f} {'':>10}  (DLS is {us / (sec / n * 1e6):.0f}x faster)")
    if importlib.util.find_spec("pytorch_kinematics") is None:
        print(f"{'pytorch_kinematics':>20}  not installed (optional benchmark peer: pip install pytorch-kinematics)")
    else:
        print(f"{'pytorch_kinematics':>20}  installed; no comparison row is written for it yet")


def ikpy_row(sk: kinema.Skeleton, targets: np.ndarray) -> tuple[np.ndarray, float]:
    """ikpy on the same chain (:class:`kinema.bench._peers.IkpyChain`): errors and median us per solve."""
    import ikpy

    errors, seconds = IkpyChain(ikpy, sk).solve(targets)
    return errors, statistics.median(seconds) * 1e6


def limited_rows(rng: np.random.Generator) -> None:
    n_joints = 7
    t = np.zeros((n_joints, 3))
    t[1:, 1] = 0.3
    sk = kinema.Skeleton([f"j{k}" for k in range(n_joints)], [-1] + list(range(n_joints - 1)), t)
    limits = {"j0": SwingTwist((0, 1, 0), 1.0, -0.5, 0.5), "j1": Hinge((1, 0, 0), 0.0, 2.0),
              "j2": SwingTwist((0, 1, 0), (0.6, 1.0), -0.3, 0.3), "j3": Hinge((0, 0, 1), -1.5, 1.5),
              "j4": EulerRange("XYZ", (-0.8, -0.4, -0.8), (0.8, 0.4, 0.8)), "j5": Hinge((1, 0, 0), -1.0, 1.0)}
    n = 1000
    rest = sk.rest_pose()
    r = np.tile(rest.rotations, (n, 1, 1))
    r[:, :6] = kinema.rotation.from_rotvec(rng.normal(size=(n, 6, 3)))
    for name, lim in limits.items():
        j = sk.index(name)
        r[:, j] = lim.clamp(r[:, j], sk.rotations[j])
    targets = kinema.forward_kinematics(sk, kinema.Pose(rest.translations, r)).positions[:, -1]
    print(f"6-bone chain with limits on every joint, {n} targets from FK of random poses inside the limits:")
    print(f"{'solver':>20} {'<=1e-3':>8} {'us/solve':>9}")
    dls = DLS(sk, [PositionGoal("j6", targets)], limits=limits)
    res = dls.solve(rest)
    sec = _best(lambda: dls.solve(rest))
    print(f"{'dls':>20} {np.mean(np.asarray(res.error) <= 1e-3):>8.4f} {sec / n * 1e6:>9.2f}")
    for name, fn in (("ccd (20 its)", kinema.solve_ccd), ("fabrik (20 its)", kinema.solve_fabrik)):
        r_ = fn(sk, rest, ("j0", "j6"), targets, limits=limits)
        s = _best(lambda fn=fn: fn(sk, rest, ("j0", "j6"), targets, limits=limits))
        print(f"{name:>20} {np.mean(np.asarray(r_.error) <= 1e-3):>8.4f} {s / n * 1e6:>9.2f}")


def humanoid_rows(rng: np.random.Generator) -> None:
    sk = samples.humanoid()
    clip = samples.clip("walk")
    n = 1000
    frames = np.arange(n) % clip.n_frames
    pose = clip.pose[frames]
    p = kinema.forward_kinematics(sk, pose).positions
    hands_l = p[:, 8] + rng.normal(size=(n, 3)) * 0.08
    hands_r = p[:, 5] + rng.normal(size=(n, 3)) * 0.08
    look = p[:, 2] + np.array([2.0, 0.0, 0.0]) + rng.normal(size=(n, 3)) * 0.5
    solver = DLS(sk, [PositionGoal("left_ankle", p[0, 14], priority=1), PositionGoal("right_ankle", p[0, 11],
                                                                                    priority=1),
                      PositionGoal("left_wrist", p[0, 8]), PositionGoal("right_wrist", p[0, 5]),
                      LookAtGoal("neck", p[0, 2] + [2.0, 0.0, 0.0], axis=(1, 0, 0))])
    targets = [p[:, 14], p[:, 11], hands_l, hands_r, look]
    # single calls first (numba's threads spin for a while after a parallel batch)
    singles = [(pose[i], [a[i] for a in targets]) for i in range(200)]
    for one, tg in singles[:5]:
        solver.solve(one, tg)
    times = []
    reached = 0
    for one, tg in singles:
        t0 = time.perf_counter()
        r = solver.solve(one, tg)
        times.append(time.perf_counter() - t0)
        reached += bool(r.reached)
    res = solver.solve(pose, targets)
    sec = _best(lambda: solver.solve(pose, targets))
    feet = np.asarray(res.state["goal_errors"])[:, :2]
    print("humanoid (15 joints), feet pinned (priority 1), hands reaching, neck looking (priority 0):")
    print(f"  single call: median {statistics.median(times) * 1e6:.0f} us over {len(singles)} frames "
          f"({reached} reached)")
    print(f"  {n}-frame batch: {n / sec:,.0f} frames/s; reached {np.mean(np.asarray(res.reached)):.3f}, "
          f"feet max error {feet.max():.2e}, median iterations {statistics.median(np.asarray(res.iterations)):.0f}")


def main() -> None:
    rng = np.random.default_rng(17)
    probe = copy_probe_ns()
    humanoid_rows(rng)
    print(f"machine probe (ndarray.copy, normal ~275 ns, slow phase 450+): {probe:.0f} ns before, "
          f"{copy_probe_ns():.0f} ns after")
    chain_rows()
    limited_rows(rng)


if __name__ == "__main__":
    main()
