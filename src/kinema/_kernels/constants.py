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

#: Status of a one-solve kernel (``kinema._kernels.ccd.ccd_one``) when an array's shape is not the one it
#: takes: nothing is solved and the caller's general path reports the problem precisely.
ONE_BAD_SHAPE = -3
#: Status of a one-solve kernel when the scratch its caller lent has fewer rows than the chain has joints:
#: nothing is solved; the caller lends a larger one.
ONE_SMALL_SCRATCH = -4
