"""A speed probe for reading benchmark figures on a machine whose speed drifts.

The development VM runs at two speeds that alternate every few seconds to
minutes; every row of a benchmark (kinema and its baselines alike) moves
with it, by up to 2x.  Printing this probe next to the figures says which
speed they were taken at.
"""

from __future__ import annotations

import timeit

import numpy as np


def copy_probe_ns() -> float:
    """Best-of-3 time of one ``ndarray.copy`` of a (21, 4) float64 array, in ns.

    About 270 to 280 ns at this VM's normal speed and 450 to 700 ns in its
    slow phases.
    """
    a = np.zeros((21, 4))
    return min(timeit.repeat(a.copy, number=20000, repeat=3)) / 20000 * 1e9
