"""Constants shared by kernels and the public API.

This module imports nothing (no numba), so the public side can import it
cheaply.  Kernels read constants from inside ``kinema._kernels`` only: the
numba cache key covers these files (see :mod:`._jit`), and a compiled kernel
freezes the value of every global it reads.
"""

from __future__ import annotations

#: Scales along a chain must agree to this relative tolerance to count as
#: uniform (the solvers then use the first component).  Files store scales in
#: float32: glTF exporters write "uniform" scales such as
#: (1, 1.000000119, 0.99999994), which must not be rejected; the position
#: error of treating them as uniform is below 1e-5 of a bone's length.
UNIFORM_SCALE_RTOL = 1e-5
