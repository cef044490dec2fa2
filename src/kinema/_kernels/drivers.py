"""The one serial and the one parallel batch driver, shared by every solver kernel.

A solver kernel module provides three compiled functions of its packed
arguments ``args`` (one flat tuple: the plan, the options, the flat pose
arrays, the per-item inputs and the outputs, each solver's own layout; flat
because numba's parallel loop refuses a tuple of arrays nested in another):

* ``check(args)``: the input check before anything is solved, a status of
  :mod:`.constants` (``OK`` = 0);
* ``solve_range(c0, c1, args)``: solve items ``c0 .. c1-1`` with one scratch
  set (the per-item solve, written once);
* ``finish(args)``: the check of what was written, a status (``OK`` = 0).

and gets its drivers from :func:`make_drivers`, a :class:`Drivers` pair
(what :func:`kinema._solve.run_driver` runs):

* ``solve_serial(n, args)``: every item on the calling thread (single solves
  and small batches: no thread start-up);
* ``solve_parallel(n_chunks, n, args)``: the items in ``n_chunks`` contiguous
  chunks over numba's threads (one scratch set per chunk; with
  :func:`~kinema._kernels._jit.parallel_chunksize` a free thread takes the
  next chunk).

Both return ``check``'s status when it fails (nothing solved) and
``finish``'s otherwise, and run every item through the same
``solve_range`` code, so a batch equals a loop of single solves bit for bit.

Why a template and not one compiled driver taking the range function as an
argument: numba 0.68 compiles a driver that takes a dispatcher argument
(or closes over one), but never loads it from the cache (measured: a
fresh process compiled it again every time), which would put every
driver's compile back on each cold start.  So the two driver bodies below
are written once, as plain functions, and :func:`make_drivers` makes a copy
of each per solver whose globals name that solver's three functions (numba
freezes a compiled function's globals), under a name of its own
(``<solver>_serial``), which keys its own cache file.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ._jit import njit, njit_like, prange
from .constants import OK

# Stand-ins for the three per-solver functions; each driver copy's globals replace them.
check: Any = None
solve_range: Any = None
finish: Any = None


def _serial(n, args):  # type: ignore[no-untyped-def]
    """``solve_serial(n, args)``: check, items ``0 .. n-1`` in one range, check the outputs."""
    status = check(args)
    if status != OK:
        return status
    # np.int64(0), not the literal 0: the parallel driver's solve_range compile serves this one too.
    solve_range(np.int64(0), n, args)
    return finish(args)


def _parallel(n_chunks, n, args):  # type: ignore[no-untyped-def]
    """``solve_parallel(n_chunks, n, args)``: check, ``n_chunks`` contiguous ranges over threads, check the
    outputs."""
    status = check(args)
    if status != OK:
        return status
    for c in prange(n_chunks):
        # Balanced contiguous chunks (sizes differ by at most one item; none is empty while n >= n_chunks).
        solve_range(c * n // n_chunks, (c + 1) * n // n_chunks, args)
    return finish(args)


def _copy(func: Callable[..., Any], glob: dict[str, Any], qualname: str) -> Callable[..., Any]:
    """A copy of the plain function ``func`` with the globals ``glob``, named ``qualname`` (numba keys a
    cached compile by the function's file and qualified name, so each copy has its own cache entry)."""
    code = func.__code__
    f = types.FunctionType(code, glob, code.co_name, func.__defaults__, func.__closure__)
    f.__qualname__ = qualname
    f.__doc__ = func.__doc__
    return f


def _bind(template: Callable[..., Any], solver: str, bound: dict[str, Any]) -> Callable[..., Any]:
    """A copy of ``template`` whose globals hold ``bound``, named ``<solver><template's name>``."""
    glob = dict(template.__globals__)
    glob.update(bound)
    return _copy(template, glob, f"{solver}{template.__name__}")


def specialise(namespace: Mapping[str, Any], names: Sequence[str], constants: Mapping[str, Any],
               suffix: str) -> dict[str, Any]:
    """Compiled copies of the kernels ``names`` of one module (``namespace``: its globals, with those kernels)
    in which the module's globals ``constants`` hold other values: ``{name: copy}``.

    Each copy calls the other copies where the original calls the originals, has the original's
    :func:`~._jit.njit` options and is named ``<qualname>_<suffix>``.  For feature switches: numba drops a
    branch on a global constant before typing (``if WITH_X and flags & X:`` with ``WITH_X = False``), so a
    copy with features off compiles none of their code and none of the kernels only they call, and it runs
    the very same source as the original for everything else.
    """
    glob = dict(namespace)
    glob.update(constants)
    copies: dict[str, Any] = {}
    for name in names:
        kernel = namespace[name]
        func = getattr(kernel, "py_func", kernel)
        copies[name] = njit_like(kernel, _copy(func, glob, f"{func.__qualname__}_{suffix}"))
    glob.update(copies)  # read when a copy compiles (numba resolves globals then)
    return copies


class Drivers(NamedTuple):
    """One solver's compiled drivers."""

    #: ``solve_serial(n, args)``.
    serial: Any
    #: ``solve_parallel(n_chunks, n, args)``.
    parallel: Any


def make_drivers(solver: str, check: Any, solve_range: Any, finish: Any) -> Drivers:
    """The drivers of one solver (``solver``: its short name, e.g. ``"ccd"``) from its three functions."""
    bound = {"check": check, "solve_range": solve_range, "finish": finish}
    # The serial driver is the entry of every single solve: compiled borrowing (no reference counting),
    # its CPython wrapper reads each array argument without giving it a reference-counted header of its own
    # (half the cost of a call of twenty arrays).  It allocates nothing: ``solve_range`` owns its scratch.
    return Drivers(njit(borrows=True)(_bind(_serial, solver, bound)),
                   njit(parallel=True)(_bind(_parallel, solver, bound)))
