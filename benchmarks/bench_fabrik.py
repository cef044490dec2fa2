"""FABRIK benchmark, side by side with CCD in the same run.

Run with pytest-benchmark (``.venv/bin/pytest benchmarks/bench_fabrik.py``)
or directly (``.venv/bin/python benchmarks/bench_fabrik.py``) for a summary:

* the 10-bone chain and 1000 reachable targets of ``benchmarks/_targets.py``
  (shared with the CCD benchmark): for 5, 10 and 20 iterations, the
  fraction of targets within 1e-3 and 1e-4 and microseconds per solve
  (one batched call / 1000) for ``kinema.solve_fabrik`` and
  ``kinema.solve_ccd``, both with ``tolerance=0`` so that each runs exactly
  the given number of iterations (equal iteration counts);
* a 20-bone tentacle (21 joints), one public ``solve_fabrik`` call per
  target with the defaults (20 iterations, tolerance 1e-3): median
  microseconds (goal <= 20 us), next to ``solve_ccd`` on the same calls.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import kinema

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import copy_probe_ns  # noqa: E402
from _targets import chain_rig, reachable_targets  # noqa: E402

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

SK, CHAIN = chain_rig()
TARGETS = reachable_targets(SK, CHAIN)
POSE = SK.rest_pose()

TENTACLE, T_CHAIN = chain_rig(20, seed=3)
T_TARGETS = reachable_targets(TENTACLE, T_CHAIN, n=1000, seed=5, spread=0.3)
T_POSE = TENTACLE.rest_pose()

SOLVERS = {"fabrik": kinema.solve_fabrik, "ccd": kinema.solve_ccd}


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def accuracy_row(solver: str, iterations: int, rounds: int = 5) -> tuple[float, float, float]:
    """``(fraction <= 1e-3, fraction <= 1e-4, microseconds per solve)`` on the 10-bone set."""
    fn = SOLVERS[solver]

    def run() -> kinema.SolveResult:
        return fn(SK, POSE, CHAIN, TARGETS, iterations=iterations, tolerance=0.0)

    res = run()  # compile
    best = min(_timed(run) for _ in range(rounds))
    err = np.asarray(res.error)
    return float(np.mean(err <= 1e-3)), float(np.mean(err <= 1e-4)), best / len(TARGETS) * 1e6


def tentacle_single_median_us(solver: str, rounds: int = 3) -> float:
    """Median wall time of one public call on the 20-bone tentacle (defaults), over ``rounds`` x 1000 targets."""
    fn = SOLVERS[solver]
    for t in T_TARGETS:  # compile, then one untimed pass
        fn(TENTACLE, T_POSE, T_CHAIN, t)
    times = []
    for _ in range(rounds):
        for t in T_TARGETS:
            t0 = time.perf_counter()
            fn(TENTACLE, T_POSE, T_CHAIN, t)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


# ----------------------------------------------------------------- pytest-benchmark


def test_fabrik_batch_10_bones(benchmark: Any) -> None:
    benchmark(lambda: kinema.solve_fabrik(SK, POSE, CHAIN, TARGETS, iterations=20, tolerance=0.0))


def test_ccd_batch_10_bones(benchmark: Any) -> None:
    benchmark(lambda: kinema.solve_ccd(SK, POSE, CHAIN, TARGETS, iterations=20, tolerance=0.0))


def test_fabrik_tentacle_single(benchmark: Any) -> None:
    t = T_TARGETS[17]
    benchmark(lambda: kinema.solve_fabrik(TENTACLE, T_POSE, T_CHAIN, t))


def test_ccd_tentacle_single(benchmark: Any) -> None:
    t = T_TARGETS[17]
    benchmark(lambda: kinema.solve_ccd(TENTACLE, T_POSE, T_CHAIN, t))


def main() -> None:
    # Single calls first: right after parallel batches, numba's OpenMP workers keep spinning for a while
    # before they sleep, and on this 2-core machine that competes with the calling thread.
    probe = copy_probe_ns()
    tentacle = {name: tentacle_single_median_us(name) for name in SOLVERS}
    print(f"machine probe (ndarray.copy, normal ~275 ns, slow phase 450+): {probe:.0f} ns before, "
          f"{copy_probe_ns():.0f} ns after the single calls")
    print(f"10-bone chain, {len(TARGETS)} reachable targets, tolerance=0 (every iteration runs)")
    print(f"{'iterations':>10} {'solver':>7} {'<=1e-3':>8} {'<=1e-4':>8} {'us/solve':>9}")
    for it in (5, 10, 20):
        for name in SOLVERS:
            a, b, us = accuracy_row(name, it)
            print(f"{it:>10} {name:>7} {a:>8.3f} {b:>8.3f} {us:>9.2f}")
    print("20-bone tentacle, one public call per target (iterations=20, tolerance=1e-3), median us:")
    for name in SOLVERS:
        print(f"  {name:>7}: {tentacle[name]:.2f}")


if __name__ == "__main__":
    main()
