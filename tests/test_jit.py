"""The kernel decorator's options: borrowed array arguments (no reference counting) are safe to pass views to."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

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
    # Set, not left out: numba lets a kernel without the option inherit its caller's (see below).
    assert _many_calls.targetoptions["_nrt"] is True


@njit(borrows=True)
def _borrowing_caller(a, out):  # type: ignore[no-untyped-def]
    return _allocating_callee(a, out)


@njit
def _allocating_callee(a, out):  # type: ignore[no-untyped-def]
    scratch = np.empty(a.shape[1])  # needs reference counting: refused if it inherited the caller's _nrt=False
    for i in range(a.shape[0]):
        scratch[:] = a[i]
        out[i] = scratch.sum()
    return a.shape[0]


def test_a_borrowing_caller_may_call_a_kernel_that_allocates() -> None:
    """Every solver's serial driver borrows (its Python entry then unboxes its arrays without reference-counted
    headers) and calls a range function that allocates scratch: the callee keeps its own reference counting.
    (Compiled in this order, the callee first met from the borrowing caller, numba refuses ``np.empty`` if the
    callee inherits ``_nrt=False``.)"""
    _borrowing_caller(np.ones((2, 3)), np.zeros(2))  # compiles (numba's compile may hold its arguments)
    a = np.arange(12.0).reshape(4, 3)
    out = np.zeros(4)
    before = (sys.getrefcount(a), sys.getrefcount(out))
    assert _borrowing_caller(a, out) == 4
    np.testing.assert_array_equal(out, a.sum(axis=1))
    assert (sys.getrefcount(a), sys.getrefcount(out)) == before


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


#: Two toy solvers on the shared driver template (kinema._kernels.drivers), in a module of their own so that
#: numba can cache them: each range function writes its own formula, ``check`` refuses a negative first input.
_TOY_SOLVERS = '''
import numpy as np
from kinema._kernels._jit import njit
from kinema._kernels.drivers import make_drivers


@njit(borrows=True)
def check(args):
    return 1 if args[0][0] < 0.0 else 0


@njit(borrows=True)
def finish(args):
    return 0


@njit
def range_a(c0, c1, args):
    x, y = args
    for i in range(c0, c1):
        y[i] = x[i] * 2.0 + 1.0


@njit
def range_b(c0, c1, args):
    x, k, y = args
    for i in range(c0, c1):
        y[i] = x[i] - k[0]


A = make_drivers("toy_a", check, range_a, finish)
B = make_drivers("toy_b", check, range_b, finish)
'''

_TOY_RUN = ("import sys, numpy as np, numba\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "import toy_solvers as T\n"
            "x = np.arange(100.0)\n"
            "ya, yp, yb, ybp = np.zeros(100), np.zeros(100), np.zeros(100), np.zeros(100)\n"
            "assert T.A.serial(100, (x, ya)) == 0 and T.B.serial(100, (x, np.array([3]), yb)) == 0\n"
            "with numba.parallel_chunksize(1):\n"
            "    assert T.A.parallel(7, 100, (x, yp)) == 0 and T.B.parallel(7, 100, (x, np.array([3]), ybp)) == 0\n"
            "assert (ya == 2.0 * x + 1.0).all() and (yp == ya).all() and (yb == x - 3).all() and (ybp == yb).all()\n"
            "print(sum(len(d.stats.cache_hits) for d in (*T.A, *T.B)),"
            " sum(len(d.stats.cache_misses) for d in (*T.A, *T.B)))\n")


def test_shared_drivers_keep_each_solver_apart_and_load_from_the_cache(tmp_path: Path) -> None:
    """Every solver's serial and parallel drivers are copies of one template bound to that solver's
    functions: two solvers on it run their own code, the parallel driver gives the serial numbers, and a
    fresh process loads all four drivers from numba's cache (nothing compiled again: a driver taking the
    range function as an argument was recompiled in every process)."""
    if os.environ.get("NUMBA_DISABLE_JIT") == "1":
        pytest.skip("no compiled drivers without the JIT")
    mod = tmp_path / "mods"
    mod.mkdir()
    (mod / "toy_solvers.py").write_text(_TOY_SOLVERS)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = _fresh_python(_TOY_RUN.replace("sys.argv[1]", repr(str(mod))), **env)
    again = _fresh_python(_TOY_RUN.replace("sys.argv[1]", repr(str(mod))), **env)
    assert first == "0 4", first  # compiled: four misses
    assert again == "4 0", again  # loaded: four hits, nothing compiled


def test_driver_check_status_stops_the_solve() -> None:
    from kinema._kernels.drivers import make_drivers

    @njit(borrows=True)
    def refuse(args):  # type: ignore[no-untyped-def]
        return 2

    @njit(borrows=True)
    def ok(args):  # type: ignore[no-untyped-def]
        return 0

    @njit
    def fill(c0, c1, args):  # type: ignore[no-untyped-def]
        for i in range(c0, c1):
            args[0][i] = 1.0

    y = np.zeros(5)
    drivers = make_drivers("refusing", refuse, fill, ok)
    assert drivers.serial(5, (y,)) == 2
    assert not y.any()  # nothing solved
    assert make_drivers("filling", ok, fill, ok).serial(5, (y,)) == 0
    assert (y == 1.0).all()


def _array_args(kernel: object) -> list[Any]:
    import numba

    return [a for sig in getattr(kernel, "signatures", []) for a in sig
            if isinstance(a, numba.types.Array) and a.dtype == numba.types.float64]


def test_rotation_and_fk_hand_their_kernels_writeable_rows_whatever_the_input() -> None:
    """A read-only or broadcast input is not compiled for separately (numba types read-only arrays apart)."""
    import kinema
    from kinema import rotation
    from kinema._kernels import fk as kfk
    from kinema._kernels import rotation as krot

    q = rotation.from_euler("ZXY", np.array([[0.1, 0.2, 0.3], [0.4, -0.5, 0.6]]))
    frozen = q.copy()
    frozen.flags.writeable = False
    v = np.array([1.0, 2.0, 3.0])
    expected = rotation.rotate(q, v)
    # read-only, a read-only broadcast view, one quaternion for a batch of vectors, plain arrays
    for qq, vv in ((frozen, v), (np.broadcast_to(frozen[0], (2, 4)), v), (frozen[0], np.stack([v, v])), (q, v)):
        out = rotation.rotate(qq, vv)
        np.testing.assert_array_equal(out, rotation.rotate(np.array(qq), np.array(vv)))
    np.testing.assert_array_equal(rotation.rotate(frozen, v), expected)
    np.testing.assert_array_equal(rotation.normalize(frozen), rotation.normalize(q))

    sk = kinema.samples.humanoid()
    pose = sk.rest_pose()
    ro = [np.broadcast_to(a, (3,) + a.shape) for a in (pose.translations, pose.rotations, pose.scales)]
    batch = kinema.Pose(*ro)
    fk_ro = kinema.forward_kinematics(sk, batch)
    fk_one = kinema.forward_kinematics(sk, pose)
    np.testing.assert_array_equal(fk_ro.positions[2], fk_one.positions)
    with_matrices = kinema.forward_kinematics(sk, batch, matrices=True)  # the general kernel, read-only input
    np.testing.assert_array_equal(with_matrices.positions, fk_ro.positions)
    back = kinema.world_to_local(sk, np.broadcast_to(fk_one.rotations, (2,) + fk_one.rotations.shape),
                                 fk_one.positions)
    np.testing.assert_allclose(back.translations[1], pose.translations, rtol=0.0, atol=1e-12)

    if getattr(krot.rotate, "signatures", None) is None:  # NUMBA_DISABLE_JIT=1: nothing compiled
        return
    for kernel in (krot.rotate, krot.normalize, kfk.fk_serial, kfk.fk_uniform_serial, kfk.world_to_local_serial):
        arrays = _array_args(kernel)
        assert arrays, kernel
        assert all(a.mutable and a.layout == "C" for a in arrays), (kernel, getattr(kernel, "signatures", None))


def test_fk_and_its_inverse_give_the_same_numbers_on_the_serial_and_the_parallel_driver() -> None:
    """A batch past FK_PARALLEL_MIN_JOINTS (parallel driver) equals the same frames in small batches (serial)."""
    import kinema
    from kinema.fk import FK_PARALLEL_MIN_JOINTS

    rng = np.random.default_rng(3)
    sk = kinema.samples.humanoid()
    nj = sk.n_joints
    n = FK_PARALLEL_MIN_JOINTS // nj + 7
    for scales in (np.ones((n, nj, 3)), rng.uniform(0.5, 2.0, size=(n, nj, 3))):  # uniform and not
        pose = kinema.Pose(rng.normal(size=(n, nj, 3)), rng.normal(size=(n, nj, 4)), scales)
        whole = kinema.forward_kinematics(sk, pose, matrices=True)
        back = kinema.world_to_local(sk, whole.rotations, whole.positions, scales)
        for lo in range(0, n, 500):
            part = kinema.forward_kinematics(sk, pose[lo:lo + 500], matrices=True)
            np.testing.assert_array_equal(part.positions, whole.positions[lo:lo + 500])
            np.testing.assert_array_equal(part.matrices, whole.matrices[lo:lo + 500])  # type: ignore[index]
            small = kinema.world_to_local(sk, part.rotations, part.positions, scales[lo:lo + 500])
            np.testing.assert_array_equal(small.translations, back.translations[lo:lo + 500])
            np.testing.assert_array_equal(small.rotations, back.rotations[lo:lo + 500])
