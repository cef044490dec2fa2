"""Serial against parallel drivers, quiet and beside one busy process (issue 14 point 8).

Run ``python benchmarks/bench_parallel_busy.py`` (and with ``OMP_WAIT_POLICY=ACTIVE`` or
``NUMBA_THREADING_LAYER=workqueue`` in the environment to compare the settings; kinema sets
``OMP_WAIT_POLICY=PASSIVE`` itself unless it is set).  FK of 1000 frames x 60 joints and CCD on the
10-bone chain with 1000 targets, median of 40 calls each; the serial driver is forced by raising the
parallel thresholds for the measurement.  Figures and history: benchmarks/NOTES.md.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import kinema
import kinema._solve as solve_layer
import kinema.fk as fk_module
from kinema import _problems as problems
from kinema.bench._timing import busy_process

os.environ.setdefault("KINEMA_COMPILE", "always")  # time compiled kernels only (kinema._kernels._tier)

#: Calls per median.
REPEATS = 40
#: A threshold no batch reaches: forces the serial driver.
NEVER = 1 << 62


def median_ms(f: Callable[[], object], repeats: int = REPEATS) -> float:
    f()
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def measure(label: str, workloads: dict[str, Callable[[], object]]) -> None:
    fk_min, items_min = fk_module.FK_PARALLEL_MIN_JOINTS, solve_layer.PARALLEL_MIN_ITEMS
    parts = []
    for name, f in workloads.items():
        fk_module.FK_PARALLEL_MIN_JOINTS, solve_layer.PARALLEL_MIN_ITEMS = NEVER, NEVER
        try:
            serial = median_ms(f)
        finally:
            fk_module.FK_PARALLEL_MIN_JOINTS, solve_layer.PARALLEL_MIN_ITEMS = fk_min, items_min
        parts.append(f"{name}: serial {serial:.2f} ms, parallel {median_ms(f):.2f} ms")
    print(f"{label:6s} " + "; ".join(parts), flush=True)


def main() -> None:
    skeleton, pose = problems.fk_rig()
    chain = problems.ten_bone_chain()
    ccd = kinema.CCD(chain.skeleton, chain.chain)
    workloads = {"FK": lambda: kinema.forward_kinematics(skeleton, pose),
                 "CCD": lambda: ccd.solve(chain.pose, chain.targets_world)}
    measure("quiet", workloads)
    with busy_process():
        measure("busy", workloads)


if __name__ == "__main__":
    main()
