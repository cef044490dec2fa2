"""CCD benchmark: 10-bone chain, 20 sweeps, 1000 reachable targets; three.js CCDIKSolver side by side.

Run with pytest-benchmark (``.venv/bin/pytest benchmarks/bench_ccd.py``) or
directly (``.venv/bin/python benchmarks/bench_ccd.py``) for a summary:

* single public call ``kinema.solve_ccd(...)`` per target, median (goal <= 10 us);
* one batched call over all 1000 targets, solves per second (goal >= 200,000/s);
* three.js ``CCDIKSolver`` (iteration=20) under node on the same chain and
  targets, median microseconds per solve, when node and npm are present.

kinema runs with its default ``tolerance=1e-3`` (stops once within 1 mm of
a metre-scale chain) and, for the like-for-like row, ``tolerance=0``
(always the same sweeps as three.js, which has no tolerance).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import kinema

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _machine import copy_probe_ns  # noqa: E402
from _targets import chain_rig, reachable_targets  # noqa: E402

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

SK, CHAIN = chain_rig()
TARGETS = reachable_targets(SK, CHAIN)
POSE = SK.rest_pose()


def _single_all(tolerance: float = 1e-3) -> None:
    for t in TARGETS:
        kinema.solve_ccd(SK, POSE, CHAIN, t, iterations=20, tolerance=tolerance)


def _batched(tolerance: float = 1e-3) -> kinema.SolveResult:
    return kinema.solve_ccd(SK, POSE, CHAIN, TARGETS, iterations=20, tolerance=tolerance)


def single_call_median_us(tolerance: float = 1e-3, rounds: int = 5) -> float:
    """Median wall time of one public call, over ``rounds`` x 1000 targets."""
    for t in TARGETS:  # compile, then one untimed pass (no parallel batch: see __main__)
        kinema.solve_ccd(SK, POSE, CHAIN, t, iterations=20, tolerance=tolerance)
    times = []
    for _ in range(rounds):
        for t in TARGETS:
            t0 = time.perf_counter()
            kinema.solve_ccd(SK, POSE, CHAIN, t, iterations=20, tolerance=tolerance)
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def batched_per_second(tolerance: float = 1e-3, rounds: int = 15) -> float:
    _batched(tolerance)
    best = min(_timed(lambda: _batched(tolerance)) for _ in range(rounds))
    return len(TARGETS) / best


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def threejs_us(repeats: int = 15) -> float | None:
    import _threejs

    ok, _why = _threejs.available()
    if not ok:
        return None
    j = SK.chain(*CHAIN)
    _, us = _threejs.run_ccd(SK.translations[j], SK.rotations[j], TARGETS, iteration=20, repeats=repeats)
    return us


# ----------------------------------------------------------------- pytest-benchmark
def test_single_call(benchmark: Any) -> None:
    benchmark.extra_info["median_single_us"] = single_call_median_us(rounds=1)
    benchmark(kinema.solve_ccd, SK, POSE, CHAIN, TARGETS[0], iterations=20)


def test_batched_1000(benchmark: Any) -> None:
    _batched()
    res = benchmark(_batched)
    benchmark.extra_info["reached"] = float(res.reached.mean())
    benchmark.extra_info["mean_sweeps"] = float(res.iterations.mean())


def test_batched_1000_like_threejs(benchmark: Any) -> None:
    _batched(0.0)
    benchmark(_batched, 0.0)


def test_threejs_baseline(benchmark: Any) -> None:
    """three.js's time is measured inside node (median over repeats, no process start-up) and
    reported in ``extra_info["threejs_us_per_solve"]``; the timed row itself is a placeholder."""
    import pytest

    us = threejs_us(repeats=5)
    if us is None:
        pytest.skip("node/npm or three@0.186 not available")
    benchmark.extra_info["threejs_us_per_solve"] = us
    benchmark.pedantic(lambda: None, rounds=1)


if __name__ == "__main__":
    # Single calls first: right after a parallel batch, numba's OpenMP workers keep spinning for a while
    # before they sleep, and on this 2-core machine that competes with the calling thread.
    probe = copy_probe_ns()
    single = single_call_median_us()
    single0 = single_call_median_us(0.0)
    print(f"machine probe (ndarray.copy, normal ~275 ns, slow phase 450+): {probe:.0f} ns before, "
          f"{copy_probe_ns():.0f} ns after the single calls")
    res = _batched()
    print(f"chain: {len(SK.chain(*CHAIN)) - 1} bones, 20 sweeps, {len(TARGETS)} reachable targets; "
          f"tol 1e-3: reached {res.reached.mean():.3f}, mean sweeps {res.iterations.mean():.2f}")
    print(f"single public call, median:            {single:8.2f} us  (goal <= 10)")
    print(f"single public call, tol=0, median:     {single0:8.2f} us")
    bps = batched_per_second()
    print(f"batched (1000 per call), tol 1e-3:     {bps:10.0f} solves/s ({1e6 / bps:.2f} us each; goal >= 200,000)")
    bps0 = batched_per_second(0.0)
    print(f"batched (1000 per call), tol 0:        {bps0:10.0f} solves/s ({1e6 / bps0:.2f} us each)")
    us = threejs_us()
    if us is None:
        print("three.js CCDIKSolver: skipped (node/npm or three@0.186 not available)")
    else:
        print(f"three.js CCDIKSolver (node), iteration=20: {us:8.2f} us per solve "
              f"({1e6 / us:.0f} solves/s); kinema batched tol 0 is {us / (1e6 / bps0):.1f}x faster")
