"""The array type aliases of kinema's annotations, defined once (numpy only: no import cycle, no numba)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["BoolArray", "FloatArray", "IntArray"]

#: Arrays of float64: positions, rotations, scales, errors.
FloatArray = NDArray[np.float64]
#: Arrays of int64: joint indices, counts, packed plans.
IntArray = NDArray[np.int64]
#: Arrays of bool: masks, ``reached``.
BoolArray = NDArray[np.bool_]
