"""The kernel decorator's options: borrowed array arguments (no reference counting) are safe to pass views to."""

from __future__ import annotations

import sys

import numpy as np

from kinema._kernels._jit import njit


@njit(borrows=True)
def _row_sums(a, out):  # type: ignore[no-untyped-def]
    for i in range(a.shape[0]):
        acc = 0.0
        for j in range(a.shape[1]):
            acc += a[i, j]
        out[i] = acc


@njit
def _many_calls(a, out, n):  # type: ignore[no-untyped-def]
    for _ in range(n):
        _row_sums(a[1:], out[1:])  # views made by a reference-counted caller, lent to a borrowing callee


def test_borrowing_kernel_gives_the_same_numbers_and_leaks_no_reference() -> None:
    a = np.arange(12.0).reshape(4, 3)
    out = np.zeros(4)
    before = (sys.getrefcount(a), sys.getrefcount(out))
    _many_calls(a, out, 1000)
    _row_sums(a, out)  # called from Python too
    assert (sys.getrefcount(a), sys.getrefcount(out)) == before
    np.testing.assert_array_equal(out, a.sum(axis=1))


def test_borrows_turns_off_reference_counting_only_where_asked() -> None:
    opts = getattr(_row_sums, "targetoptions", None)
    if opts is None:  # NUMBA_DISABLE_JIT=1: the plain function, nothing to check
        assert callable(_row_sums)
        return
    assert opts.get("_nrt") is False
    assert "_nrt" not in _many_calls.targetoptions
