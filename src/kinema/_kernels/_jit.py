"""The one place where numba is imported.

Every kernel in :mod:`kinema._kernels` is a plain-loop Python function
decorated with :func:`njit` below.  With ``NUMBA_DISABLE_JIT=1`` numba hands
the undecorated function back, so the very same code runs as plain Python
(for debugging and coverage); there is no second implementation.

This package is imported lazily by the public API (on the first call that
needs a kernel), so ``import kinema`` neither imports numba nor compiles
anything.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

# GNU OpenMP (numba's "omp" threading layer) keeps its threads spinning for a while after each
# parallel region by default.  Beside another busy process on few cores that spinning competes
# with the threads still working, and a parallel batch that takes 0.4 ms on a quiet machine took
# 8 ms (20x; the serial driver was not slowed at all).  Passive waiting puts idle threads to sleep
# at once; quiet speed is unchanged.  It must be set before libgomp loads (at numba's first
# parallel launch); a value the user set is kept.  Measured in benchmarks/NOTES.md.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numba  # noqa: E402
import numba.core.caching  # noqa: E402
import numba.core.config  # noqa: E402
import numba.core.registry  # noqa: E402

_config: Any = numba.core.config


def _cache_dir() -> str:
    """Numba cache folder keyed by a digest of every kernel source file.

    numba's own cache is invalidated only by the timestamp of the file that
    defines a kernel, not by the files of the helpers it inlines (an edit in
    ``quat.py`` would leave stale compiled ``fk`` code behind).  Keying the
    folder on all kernel sources makes any edit recompile everything.  The
    base folder is ``NUMBA_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME``
    (or ``~/.cache``) ``/kinema/numba``.
    """
    here = Path(__file__).resolve().parent
    digest = hashlib.sha1()
    for src in sorted(here.glob("*.py")):
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "kinema", "numba"
    )
    return os.path.join(base, f"{numba.__version__}-{digest.hexdigest()[:16]}")


_CACHE_DIR = _cache_dir()


def in_cache(name: str) -> bool:
    """Whether numba's cache (:data:`_CACHE_DIR`) holds an index of compiled code whose file name matches the
    glob pattern ``name``: numba names them ``<module>.<qualified name>-<line>.py<version>.nbi``, in one folder
    per source folder (a numba that names them otherwise fails ``tests/test_precompile.py``)."""
    import glob

    return bool(glob.glob(os.path.join(glob.escape(_CACHE_DIR), "*", name)))


# ---------------------------------------------------------------- whole cache writes
#: Held while numba writes a cache file (:func:`_whole_writes`): a thread that ends the process at once (the
#: precompile worker's watchdog, ``os._exit``) takes it first, so the write in progress is renamed before.
CACHE_WRITE_LOCK = threading.Lock()


def _new_cache_write_lock() -> None:
    """A process forked while another thread held :data:`CACHE_WRITE_LOCK` would inherit it held by a thread it
    does not have, and its first cache write would wait for ever: the child starts with a new lock."""
    global CACHE_WRITE_LOCK
    CACHE_WRITE_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):  # (POSIX)
    os.register_at_fork(after_in_child=_new_cache_write_lock)

#: The signals held during a cache write: Ctrl-C and the command line's SIGTERM (both end a command).
_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _whole_writes(open_for_write: Callable[..., Any]) -> Callable[..., Any]:
    """numba's cache-file writer ``open_for_write(self, filepath)`` made whole for kinema's cache folder
    (:data:`_CACHE_DIR`; other numba code's cache files are written as numba writes them): no temporary file
    is left.

    numba writes each cache file to ``<file>.tmp.<random>`` and renames it, and removes the temporary
    file on an ``Exception`` only: a Ctrl-C (``KeyboardInterrupt``), the command line's SIGTERM (an
    ``Interrupted``) or a watchdog's ``os._exit`` in the middle left it in the cache folder for good.
    Around each write :data:`CACHE_WRITE_LOCK` is held and, in the main thread (the only one whose
    signal handlers Python runs), SIGINT and SIGTERM are noted instead of handled; once the file is
    renamed the handlers are put back and each noted signal is raised again, so it acts as it would
    have (a ``KeyboardInterrupt``, or the default SIGTERM death), a few milliseconds later.  Before a
    process's first write, the leftovers of processes killed outright are removed
    (:func:`remove_stale_cache_temps`).
    """

    @contextlib.contextmanager
    def whole(self: Any, filepath: str) -> Iterator[Any]:
        if not os.path.abspath(filepath).startswith(os.path.join(os.path.abspath(_CACHE_DIR), "")):
            with open_for_write(self, filepath) as f:  # another numba user's cache: numba's own way
                yield f
            return
        with CACHE_WRITE_LOCK:
            if not _swept:
                _swept.append(remove_stale_cache_temps())
            noted: list[int] = []
            held = {}
            if threading.current_thread() is threading.main_thread():
                for sig in _HELD_SIGNALS:
                    handler = signal.getsignal(sig)
                    if handler is not None:  # (None: set outside Python, so it could not be put back)
                        held[sig] = signal.signal(sig, lambda signum, frame: noted.append(signum))
            try:
                with open_for_write(self, filepath) as f:
                    yield f
            finally:
                for sig, handler in held.items():
                    signal.signal(sig, handler)
                for signum in noted:
                    signal.raise_signal(signum)

    whole.__wrapped_writer__ = open_for_write  # type: ignore[attr-defined]
    return whole


#: Seconds after which a numba temporary file in kinema's cache folder is a leftover: a write takes
#: milliseconds, so only a process killed outright (SIGKILL, a power loss: no handler runs) leaves one.
STALE_CACHE_TEMP_S = 600.0

#: numba's temporary name of a cache file: ``<index or data file>.tmp.<16 hex digits>``.
_NUMBA_TEMP = re.compile(r"\.nb[ic]\.tmp\.[0-9a-f]{16}$")

#: Whether this process has swept the cache folder (done before its first cache write): ``[removed]``.
_swept: list[list[str]] = []


def remove_stale_cache_temps() -> list[str]:
    """Remove numba's temporary files older than :data:`STALE_CACHE_TEMP_S` from kinema's cache folder
    (:data:`_CACHE_DIR`, one folder per source folder); returns their paths.  Run before a process's first
    cache write.  Only kinema's own folder is swept, and only names of numba's temporary pattern."""
    import glob

    removed = []
    cutoff = time.time() - STALE_CACHE_TEMP_S
    for path in glob.glob(os.path.join(glob.escape(_CACHE_DIR), "*", "*.tmp.*")):
        if not _NUMBA_TEMP.search(path):
            continue
        try:
            if os.lstat(path).st_mtime < cutoff:
                os.unlink(path)
                removed.append(path)
        except OSError:  # gone meanwhile, or not ours to remove: left as it is
            pass
    return removed


# numba's private writer (its name and contract are checked by tests/test_solver_layer.py, numba pinned)
_cache_file: Any = numba.core.caching.IndexDataCacheFile
if not hasattr(_cache_file._open_for_write, "__wrapped_writer__"):
    _cache_file._open_for_write = _whole_writes(_cache_file._open_for_write)

F = TypeVar("F", bound=Callable[..., Any])

prange = numba.prange

def njit(func: F | None = None, *, parallel: bool = False, inline: bool = False, borrows: bool = False,
         helper: bool = False) -> Any:
    """``numba.njit`` with the project's defaults: cached, no fast-math, GIL released.

    No fast-math flag at all, not even ``contract`` (fused multiply-add): the
    solvers rely on IEEE ``NaN``/``inf``, signed zeros and no reassociation
    to keep their degenerate branches exact, and without contraction every
    compiled function rounds the same operations the same way, so the serial
    and the parallel driver (and plain Python with ``NUMBA_DISABLE_JIT=1``,
    up to the last bit of ``sin``/``atan2``-like library calls) give the same
    numbers for the same item.

    ``inline=True`` inlines the function into compiled callers at
    numba-IR level (``inline="always"``), which saves the call.  It does
    not save reference counting: every array argument of a helper (inlined
    or called) is increfed and decrefed, atomically, each time it runs, so
    in hot loops helpers should take tuples and the loop itself should
    index the arrays.

    ``borrows=True`` compiles the function without numba's reference
    counting (numba's ``_nrt=False``): its array arguments are borrowed from
    the caller, which keeps them alive for the call, so the atomic incref
    and decref of each one are skipped.  For the per-item solver functions
    that only index arrays their caller owns.  Such a function cannot
    allocate arrays or take a new one from a call (numba refuses to compile
    either: nothing would release it); it may slice its arguments and lend
    the views to other kernels.

    ``error_model="numpy"``: a float division by zero gives inf or NaN, as NumPy's float64 (and so as the
    same code without the JIT, on NumPy scalars) does, and the drivers' output checks turn that into the
    status it means; numba's default would raise a bare ``ZeroDivisionError`` out of the kernel (a chain in
    units of 1e-100, whose squared lengths underflow to zero, did).

    ``helper=True`` is for a function only other kernels call: numba compiles
    it without the wrappers that let Python call it (the CPython and the C
    callback wrapper), which roughly halves a small function's first
    compile; a cold first run compiles dozens of such helpers.  Called from
    Python, a helper raises :class:`KernelHelperCalled` (without the JIT it
    is the plain function and may be called).
    """

    def wrap(f: F) -> F:
        # numba picks the cache folder when the dispatcher is created; set ours
        # only for that moment so other numba code in the process keeps its own.
        saved = _config.CACHE_DIR
        _config.CACHE_DIR = _CACHE_DIR
        try:
            # ``_nrt`` is always set: numba lets a kernel that leaves it unset inherit its caller's, and a
            # borrowing caller would then compile an allocating callee without reference counting (refused).
            options: dict[str, Any] = {"parallel": parallel, "nogil": True, "error_model": "numpy",
                                       "inline": "always" if inline else "never", "_nrt": not borrows}
            if helper and not _config.DISABLE_JIT:
                return cast(F, _helper_dispatcher(f, options))
            return cast(F, numba.njit(cache=True, **options)(f))
        finally:
            _config.CACHE_DIR = saved

    if func is not None:
        return wrap(func)
    return wrap


class KernelHelperCalled(RuntimeError):
    """A kernel helper (``njit(helper=True)``) was called from Python: it has no Python entry (a bug in kinema)."""


class _HelperDispatcher(numba.core.registry.CPUDispatcher):  # type: ignore[misc,name-defined]
    """numba's dispatcher for a kernel helper: compiled without Python wrappers, so not callable from Python.

    numba's own ``no_cpython_wrapper`` option gives a dispatcher that would jump to a missing wrapper when
    called from Python (a crash); this one refuses the call instead.  Compiled callers type it as any
    dispatcher.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelHelperCalled(f"{self.py_func.__module__}.{self.py_func.__qualname__} is a kernel helper "
                                 "(njit(helper=True)): call it from a kernel, or with NUMBA_DISABLE_JIT=1")


def _helper_dispatcher(f: Callable[..., Any], options: dict[str, Any]) -> Any:
    """What ``numba.njit(cache=True, **options)(f)`` builds (``numba.core.decorators._jit``), as a
    :class:`_HelperDispatcher` compiled without the CPython and cfunc wrappers (numba's
    ``no_cpython_wrapper`` and ``no_cfunc_wrapper`` options, the ones its ``overload`` helpers get)."""
    disp = _HelperDispatcher(py_func=f, locals={}, targetoptions={
        "nopython": True, **options, "no_cpython_wrapper": True, "no_cfunc_wrapper": True})
    disp.enable_caching()
    return disp


def njit_like(kernel: Any, func: F) -> F:
    """``func`` compiled with the options :func:`njit` gave ``kernel`` (``parallel``, ``inline``, ``borrows``,
    ``helper``).

    For copies of a kernel's function with other globals (``kinema._kernels.drivers.specialise``).
    Without the JIT ``kernel`` is a plain function and ``func`` comes back as it is.
    """
    opts = getattr(kernel, "targetoptions", {})
    return cast(F, njit(func, parallel=bool(opts.get("parallel", False)), inline=opts.get("inline") == "always",
                        borrows=opts.get("_nrt") is False, helper=opts.get("no_cpython_wrapper") is True))


def num_threads() -> int:
    """numba's thread count for parallel drivers (``NUMBA_NUM_THREADS``, or the cores)."""
    return int(numba.get_num_threads())


def parallel_chunksize() -> Any:
    """A context in which the parallel drivers hand out one chunk at a time (numba's dynamic scheduling).

    numba's default splits a ``prange`` into one equal share per thread; beside
    a busy process a descheduled thread then holds up its whole share.  With
    chunk size 1 a free thread takes the next chunk.
    """
    return numba.parallel_chunksize(1)


def entry_point(dispatcher: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
    """The compiled code of ``dispatcher`` for the numba types of ``args``, callable without type dispatch.

    A numba dispatcher works out the type of every argument on each call
    before it picks the compiled version (a microsecond or more for a driver
    of twenty arguments, as much as solving one arm).  The entry point skips
    that lookup, so it must only ever get arguments of exactly these types:
    the solver layer calls it only with arrays it made itself (see
    ``kinema._solve.run_driver``).  This reads numba's ``overloads`` mapping
    and a compile result's ``entry_point`` (tested in
    ``tests/test_solver_layer.py``, numba pinned to the tested minor).
    Without JIT the plain function comes back.
    """
    overloads = getattr(dispatcher, "overloads", None)
    if overloads is None:
        return cast(Callable[..., Any], dispatcher)
    sig = tuple(numba.typeof(a) for a in args)
    cres = overloads.get(sig)
    if cres is None:
        dispatcher.compile(sig)
        cres = overloads[sig]
    return cast(Callable[..., Any], cres.entry_point)
