"""Compiled kernels (numba).  Private: import only from inside kinema, lazily."""
