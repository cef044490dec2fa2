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

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import numba
import numba.core.config

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

F = TypeVar("F", bound=Callable[..., Any])

prange = numba.prange

#: The only fast-math flag: fused multiply-add (see :func:`njit`).
_FASTMATH = {"contract"}


def njit(func: F | None = None, *, parallel: bool = False, inline: bool = False, borrows: bool = False) -> Any:
    """``numba.njit`` with the project's defaults (cached, ``fastmath={"contract"}`` only).

    The one fast-math flag is ``contract``: LLVM may fuse ``a * b + c`` into
    one fused multiply-add (one rounding instead of two, so results move by
    at most an ulp per fused pair, and the quaternion and vector chains'
    latency drops: the 10-bone CCD sweep ran 14% faster).  Every other flag
    stays off on purpose: the solvers rely on IEEE ``NaN``/``inf``, signed
    zeros, ``sqrt``, ``atan2`` and comparisons to keep their degenerate
    branches exact, and on no reassociation.  Fusion is decided per
    compiled function, so the same item solved by two drivers (a batch and
    a single-solve kernel) may differ by an ulp or two; and with
    ``NUMBA_DISABLE_JIT=1`` Python does not fuse.  Tests comparing paths
    state their tolerance (1e-15 and up).

    ``inline=True`` inlines the function into compiled callers at
    numba-IR level (``inline="always"``), which saves the call.  It does
    not save reference counting: every array argument of a helper (inlined
    or called) is increfed and decrefed, atomically, each time it runs, so
    in hot loops helpers should take tuples and the loop itself should
    index the arrays (a CCD sweep ran 12% faster written that way).

    ``borrows=True`` compiles the function without numba's reference
    counting (numba's ``_nrt=False``): its array arguments are borrowed from
    the caller, which keeps them alive for the call, so the atomic incref
    and decref of each one are skipped (a call passing 20 arrays took
    330 ns with them, 7 ns without).  For the per-item solver functions
    that only index arrays their caller owns.  Such a function cannot
    allocate arrays or take a new one from a call (numba refuses to compile
    either: nothing would release it); it may slice its arguments and lend
    the views to other kernels.
    """

    def wrap(f: F) -> F:
        # numba picks the cache folder when the dispatcher is created; set ours
        # only for that moment so other numba code in the process keeps its own.
        saved = _config.CACHE_DIR
        _config.CACHE_DIR = _CACHE_DIR
        try:
            options: dict[str, Any] = {"_nrt": False} if borrows else {}
            return cast(F, numba.njit(cache=True, parallel=parallel, fastmath=_FASTMATH, nogil=True,
                                      inline="always" if inline else "never", **options)(f))
        finally:
            _config.CACHE_DIR = saved

    if func is not None:
        return wrap(func)
    return wrap


def entry_point(dispatcher: Any, args: tuple[Any, ...], any_layout: tuple[int, ...] = ()) -> Callable[..., Any]:
    """The compiled code of ``dispatcher`` for the types of ``args``, callable without type dispatch.

    A numba dispatcher works out the numba type of every argument on every
    call before it picks the compiled version (about 0.5 us for a kernel of
    16 arguments, a tenth of a single two-bone solve).  The returned
    callable is that compiled version's own entry point (it still converts
    each argument, it only skips the lookup).  It is only for hot paths that
    pass arguments of the very same kinds every time: ``float64`` / ``int64``
    arrays of the same number of dimensions, C-contiguous, and Python
    scalars of the same types.  (A read-only array may stand in for a
    writable one the kernel does not write: the compiled code sees the same
    memory layout.)  Compiles the version first when needed.  Without JIT
    (``NUMBA_DISABLE_JIT=1``) ``dispatcher`` is the plain function and comes
    back as it is.

    ``any_layout``: positions of array arguments compiled for any strides
    (numba layout ``"A"``) instead of the layout of the array in ``args``.
    Code compiled for a C-contiguous array reads it as contiguous whatever
    its real strides (the entry point does not check), so a caller that
    passes arrays it did not make itself either checks their layout or
    names them here.  Number of dimensions and dtype still have to match.
    """
    overloads = getattr(dispatcher, "overloads", None)
    if overloads is None:
        return cast(Callable[..., Any], dispatcher)
    sig = tuple(numba.typeof(a).copy(layout="A") if k in any_layout else numba.typeof(a) for k, a in enumerate(args))
    cres = overloads.get(sig)
    if cres is None:
        dispatcher.compile(sig)
        cres = overloads[sig]
    return cast(Callable[..., Any], cres.entry_point)

