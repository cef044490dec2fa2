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


def _fresh_python(code: str, **env: str) -> str:
    import os
    import subprocess

    full = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    full.update(env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


#: A parallel FK launch in a fresh process (FK of 400 frames x 60 joints goes parallel), then what OpenMP was told.
_LAUNCH = ("import numpy as np, os, kinema, kinema.fk as F\n"
           "from kinema import _problems as P\n"
           "sk, pose = P.fk_rig(400)\n"
           "assert 400 * sk.n_joints >= F.FK_PARALLEL_MIN_JOINTS\n"
           "F.forward_kinematics(sk, pose)\n"
           "print(os.environ.get('OMP_WAIT_POLICY'))\n")


def test_openmp_threads_wait_passively_unless_the_user_says_otherwise() -> None:
    """Idle OpenMP threads must sleep, not spin: spinning beside a busy process made parallel batches 20x
    slower (benchmarks/NOTES.md).  The kernels' module sets it before numba can load libgomp; a user's
    own setting is kept."""
    assert _fresh_python(_LAUNCH) == "PASSIVE"
    assert _fresh_python(_LAUNCH, OMP_WAIT_POLICY="ACTIVE") == "ACTIVE"
    # set before numba is imported at all (libgomp reads it once, when it loads)
    assert _fresh_python("import os, sys\nimport kinema._kernels._jit\n"
                         "print(os.environ['OMP_WAIT_POLICY'] if 'numba' in sys.modules else 'no numba')") == "PASSIVE"
