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

from typing import Any, Callable, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])

prange = numba.prange


def njit(func: F | None = None, *, parallel: bool = False) -> Any:
    """``numba.njit`` with the project's defaults (cached, no fastmath).

    ``fastmath`` stays off on purpose: the solvers rely on IEEE behaviour of
    ``sqrt``, ``atan2`` and comparisons to keep their degenerate branches
    exact.
    """

    def wrap(f: F) -> F:
        return numba.njit(cache=True, parallel=parallel, fastmath=False, nogil=True)(f)  # type: ignore[no-any-return]

    if func is not None:
        return wrap(func)
    return wrap
