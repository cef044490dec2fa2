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

#: Two-bone's default reach margin as a fraction of the shorter bone: the
#: shoulder-to-end distance stays in ``[|a-b| + m, a+b - m]`` so the arm never
#: sits exactly straight or exactly folded (both singular: the bend plane is
#: undefined).  Foot lock keeps its targets just inside it (``mocap``).
DEFAULT_MARGIN_FRACTION = 1e-4

#: A quaternion shorter than this carries no orientation (a zero rotation in a
#: skeleton, a file or an ``end_rotation``): refused rather than normalised.
ZERO_QUAT_EPS = 1e-8

# Status of a kernel driver (one convention for every solver; 0 = ok).  The
# public API turns the others into SolverInputError messages.
#: Every input was valid; the items were solved.
OK = 0
#: A pose array, a target or a pole held NaN or inf: nothing was solved.
NONFINITE_INPUT = 1
#: A joint on the chain or above it has a non-uniform scale: nothing was solved.
NONUNIFORM_SCALE = 2
#: The inputs were finite but the solve overflowed float64 (coordinates or scales near 1e154 and beyond):
#: the outputs are not returned.
NONFINITE_RESULT = 3
