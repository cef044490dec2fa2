"""The solver layer side by side with its baselines, quiet and beside a busy process.

Run ``python benchmarks/bench_layer.py`` (``--quick`` for fewer repeats).  It prints, in one run:

* the machine's speed (an ``ndarray.copy`` probe) and single calls: each prepared solver's ``solve`` and its
  free function in alternating blocks, median microseconds and the free function's extra (paired blocks);
* batches: two-bone 100,000 targets (vs the vectorised NumPy solve), CCD and FABRIK 1000 targets on the
  10-bone chain (solves/s), FK 1000 frames x 60 joints (vs vectorised NumPy);
* every batch row again beside one busy process (a Python loop pinned to no core in particular, the same
  one ``kinema bench`` uses: :func:`kinema.bench._timing.busy_process`), and the busy / quiet ratio.

Machines are noisy: each figure is a median of repeats, printed with its spread.  No time is asserted
anywhere (the history of figures is in ``benchmarks/NOTES.md``).
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import kinema
from kinema.bench._timing import busy_process, measure, per_call

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _targets import chain_rig, reachable_targets  # noqa: E402
from bench_fk import _setup as fk_setup  # noqa: E402
from bench_fk import numpy_fk  # noqa: E402
from bench_two_bone import CHAIN as ARM  # noqa: E402
from bench_two_bone import _rig as arm_rig  # noqa: E402
from bench_two_bone import _targets as arm_targets  # noqa: E402
from bench_two_bone import numpy_two_bone  # noqa: E402

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)


def median_spread(fn: Callable[[], Any], repeats: int) -> tuple[float, float, float]:
    """``(median, min, max)`` seconds of ``fn()`` over ``repeats`` runs (after one warm-up run)."""
    s = measure(fn, repeats)
    return s.median, s.low, s.high


def per_call_us(fn: Callable[[int], Any], n: int, repeats: int) -> float:
    """Median microseconds of ``fn(i)`` over blocks of ``n`` calls."""
    return per_call(fn, n, repeats).median * 1e6


def _problems() -> dict[str, Any]:
    """The workloads, built once: the 10-bone chain and its targets, the two-bone arm, the FK rig."""
    sk, chain = chain_rig()
    arm_sk, arm_pose = arm_rig()
    arm_tg, arm_pole = arm_targets(arm_sk, arm_pose)
    fk_sk, fk_pose = fk_setup()
    return {"sk": sk, "chain": chain, "pose": sk.rest_pose(), "tg": reachable_targets(sk, chain), "arm_sk": arm_sk,
            "arm_pose": arm_pose, "arm_tg": arm_tg, "arm_pole": arm_pole, "fk_sk": fk_sk, "fk_pose": fk_pose,
            "two": kinema.TwoBone(arm_sk, ARM), "ccd": kinema.CCD(sk, chain), "fab": kinema.FABRIK(sk, chain)}


def single_rows(repeats: int) -> list[tuple[str, float, float, float]]:
    """``(solver, object us, free function us, free - object us)``: each solver's prepared ``solve`` and its
    free function, timed in alternating blocks of calls so that both see the same machine; the difference
    is the median of the paired blocks' differences (what the free function's cached lookup costs)."""
    p = _problems()
    sk, chain, pose, tg = p["sk"], p["chain"], p["pose"], p["tg"]
    arm_sk, arm_pose, arm_tg, arm_pole = p["arm_sk"], p["arm_pose"], p["arm_tg"], p["arm_pole"]
    two, ccd, fab = p["two"], p["ccd"], p["fab"]
    n = 300
    pairs: list[tuple[str, Callable[[int], Any], Callable[[int], Any]]] = [
        ("two-bone", lambda i: two.solve(arm_pose, arm_tg[i], pole=arm_pole),
         lambda i: kinema.solve_two_bone(arm_sk, arm_pose, ARM, arm_tg[i], arm_pole)),
        ("CCD (10 bones)", lambda i: ccd.solve(pose, tg[i]), lambda i: kinema.solve_ccd(sk, pose, chain, tg[i])),
        ("FABRIK (10 bones)", lambda i: fab.solve(pose, tg[i]), lambda i: kinema.solve_fabrik(sk, pose, chain, tg[i])),
    ]
    rows = []
    for name, obj, free in pairs:
        a: list[float] = []
        b: list[float] = []
        for _ in range(repeats):
            a.append(per_call(obj, n, 1).median * 1e6)
            b.append(per_call(free, n, 1).median * 1e6)
        d = sorted(y - x for x, y in zip(a, b, strict=True))
        rows.append((name, statistics.median(a), statistics.median(b), d[len(d) // 2]))
    return rows


def batch_rows() -> list[tuple[str, Callable[[], Any], int, Callable[[], Any] | None]]:
    """``(name, kinema call, items, baseline call or None)``."""
    p = _problems()
    arm_sk, arm_pose, arm_tg, arm_pole = p["arm_sk"], p["arm_pose"], p["arm_tg"], p["arm_pole"]
    fk_sk, fk_pose = p["fk_sk"], p["fk_pose"]
    return [
        ("two-bone batch", lambda: p["two"].solve(arm_pose, arm_tg, pole=arm_pole), len(arm_tg),
         lambda: numpy_two_bone(arm_sk.parents, arm_pose.translations, arm_pose.rotations, arm_pose.scales,
                                arm_tg, arm_pole)),
        ("CCD batch 1000", lambda: p["ccd"].solve(p["pose"], p["tg"]), len(p["tg"]), None),
        ("FABRIK batch 1000", lambda: p["fab"].solve(p["pose"], p["tg"]), len(p["tg"]), None),
        ("FK 1000x60", lambda: kinema.forward_kinematics(fk_sk, fk_pose), fk_pose.rotations.shape[0],
         lambda: numpy_fk(fk_sk.parents, fk_pose.translations, fk_pose.rotations, fk_pose.scales)),
    ]


def main(argv: list[str]) -> None:
    repeats = 5 if "--quick" in argv else 15
    probe = np.zeros((20, 3))
    print(f"machine: ndarray.copy of a (20, 3) array {per_call(lambda i: probe.copy(), 2000, 5).median * 1e9:.0f} ns "
          "(250-300 at normal speed)")
    print("single calls (median us per call: prepared object, free function, free - object)")
    for name, obj_us, free_us, diff_us in single_rows(repeats):
        print(f"  {name:20s} object {obj_us:7.2f}  free {free_us:7.2f}  free - object {diff_us:5.2f}")
    rows = batch_rows()
    quiet: dict[str, float] = {}
    print("\nbatches, quiet machine (median s, [min, max]; items/s; ratio to the baseline in the same run)")
    for name, call, n, base in rows:
        med, lo, hi = median_spread(call, repeats)
        quiet[name] = med
        line = f"  {name:20s} {med * 1e3:9.2f} ms [{lo * 1e3:.2f}, {hi * 1e3:.2f}]  {n / med:12,.0f}/s"
        if base is not None:
            bmed = median_spread(base, max(3, repeats // 3))[0]
            line += f"  baseline {bmed * 1e3:9.2f} ms  ratio {bmed / med:6.1f}x"
        print(line)
    with busy_process():
        print("\nbatches beside one busy process (median s; busy / quiet)")
        for name, call, _n, _base in rows:
            med, lo, hi = median_spread(call, repeats)
            print(f"  {name:20s} {med * 1e3:9.2f} ms [{lo * 1e3:.2f}, {hi * 1e3:.2f}]  x{med / quiet[name]:5.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
