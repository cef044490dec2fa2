"""Which code a kernel call runs: compiled, or the same functions as plain Python while compiling would not pay.

numba compiles a kernel on its first call, which takes seconds (a cold foot
lock compiles about 80 functions), while the same functions run as plain
Python (what ``NUMBA_DISABLE_JIT=1`` runs) solve a short clip in a fraction
of a second.  So a process starts with each kernel module's *plain twin*:
the module's functions, undecorated, whose globals name the twins of the
kernels they call.  A module is compiled, for the rest of the process, as
soon as one of these holds:

* its compiled code is in numba's cache (an earlier run compiled it:
  loading takes milliseconds) or this process compiled it;
* one call's arrays hold more than :data:`INTERPRET_MAX_ELEMENTS` numbers
  (a large batch: compiled code pays for its compile at once);
* this process has spent :data:`INTERPRET_BUDGET_S` seconds in plain
  kernels (a loop of many small solves, a viewer): a worker process
  compiles the kernels it ran, for the argument types it ran them with,
  while this one goes on with the plain kernels, and once the worker ends
  they load from the cache (on one CPU, or when no process can start, they
  compile here at once);
* a plain call raised an arithmetic error where compiled code gives inf or
  NaN (numba's NumPy error model): the call's writable arrays are put back
  and it runs compiled;
* ``KINEMA_COMPILE=always`` (compile on first use, as ``kinema warmup``
  and the benchmarks do), or the JIT is off (everything is plain anyway).

The choice never changes a number: compiled kernels use no fast-math and
no fused multiply-add, the plain twins run the same operations in the same
order on float64, and the only library function whose plain and compiled
forms differ (``math.hypot``) is not used (:func:`~kinema._kernels.quat.hypot`).
``tests/test_tier.py`` compares the two bit for bit for every solver, FK,
the rotation, limit, contact and BVH kernels.

The Python layer gets a module with :func:`kernels` (``kernels("fk").fk_serial(...)``) on each call: the
module itself once it is compiled (a dictionary lookup), else its twin.
"""

from __future__ import annotations

import importlib
import os
import time
import types
from typing import Any

import numpy as np

from ..errors import KinemaError

__all__ = ["INTERPRET_BUDGET_S", "INTERPRET_MAX_ELEMENTS", "MODES", "MODE_ENV", "compile_always", "compiles",
           "is_plain", "kernels", "plain"]

#: The environment variable that picks the policy: ``auto`` (the default: plain while compiling would not
#: pay) or ``always`` (every kernel compiled on its first call).
MODE_ENV = "KINEMA_COMPILE"
MODES = ("auto", "always")

#: Seconds of plain-Python kernel calls a process may spend before every kernel is compiled.  A cold compile
#: takes 5-30 s; waiting this long before paying for it costs a process that would have paid little, and a
#: short job (the sample walk's foot lock: 0.05 s of plain kernels) never pays.
INTERPRET_BUDGET_S = 2.0

#: A call whose arrays hold more numbers than this runs compiled at once.  Plain kernels take 0.3-8 us a
#: number of their arrays (FK 0.5, a two-bone solve 0.8, a 20-sweep CCD solve 8: measured), so a call at
#: this size runs 0.03-0.8 s plain.
INTERPRET_MAX_ELEMENTS = 100_000

#: Modules chosen for good: ``kinema._kernels.<name>`` itself, by name.
_final: dict[str, Any] = {}
#: Plain twins of modules not compiled yet, by name.
_twins: dict[str, Any] = {}
#: Plain functions by the id of their kernel (the kernel is kept beside its twin, so its id is never reused).
_plain: dict[int, tuple[Any, Any]] = {}
#: The calls run plain, for a worker to compile: ``{(module, name, driver field or ""): {numba signature}}``.
_calls: dict[tuple[str, str, str], set[tuple[Any, ...]]] = {}
#: Plain globals by the id of the kernel globals they mirror (the originals kept alive likewise).
_plain_globals: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}


class _Spent:
    """Seconds this process has spent in plain kernel calls, whether ``always`` was asked in-process, and whether
    a worker compiles the modules in use beside it (None: not tried yet)."""

    seconds = 0.0
    always = False
    beside: bool | None = None


def _past_budget(start: bool = True) -> bool:
    """Whether this process is past its plain budget with nothing compiling its kernels beside it: its modules
    compile here, now.

    When the budget first runs out a worker process compiles the modules in use (``kinema._precompile``'s
    ``"in_use"`` group: on two or more CPUs, the JIT on) while this process goes on with the plain kernels; once
    it ends they load from the cache in milliseconds.  Without one (``start`` False, one CPU, no process
    could start) they compile here."""
    if _Spent.seconds < INTERPRET_BUDGET_S:
        return False
    from .. import _precompile

    if _Spent.beside is None and start:
        import pickle

        _Spent.beside = bool(_calls) and _precompile.start("in_use", pickle.dumps(_calls_now()))
    return not (_Spent.beside and _precompile.running("in_use"))


def _calls_now() -> dict[tuple[str, str, str], set[tuple[Any, ...]]]:
    """A copy of :data:`_calls` to pickle: other threads' plain calls go on recording theirs, and pickling runs
    Python code (numba's types' ``__reduce__``) between which they may, so pickling ``_calls`` itself could see it
    change size.  The copy's two steps (``list`` of the items, ``set`` of each) run no Python code."""
    return {where: set(signatures) for where, signatures in list(_calls.items())}


def _compile_everything(start: bool = True) -> bool:
    """Whether every kernel module is compiled now: the JIT is off (everything is plain anyway), ``always`` was
    asked, or the plain budget is spent with nothing compiling beside this process (:func:`_past_budget`)."""
    from ._jit import _config

    return bool(_config.DISABLE_JIT or _Spent.always or _mode() == "always" or _past_budget(start))


def compile_always() -> None:
    """Compile every kernel on its first call from now on in this process (``kinema warmup``, a precompile
    worker): as ``KINEMA_COMPILE=always``."""
    _Spent.always = True


def _mode() -> str:
    mode = os.environ.get(MODE_ENV, "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise KinemaError(f"{MODE_ENV} must be one of {', '.join(MODES)}, got {os.environ[MODE_ENV]!r}")
    return mode


def kernels(name: str) -> Any:
    """``kinema._kernels.<name>`` as a call should run it now: the module (compiled code) or its plain twin."""
    module = _final.get(name)
    if module is not None:
        return module
    return _choose(name)


def compiles(numbers: int) -> bool:
    """Whether a call on arrays of ``numbers`` numbers runs compiled code now, cached or not (a command asks
    before it starts a worker to compile kernels beside it: :mod:`kinema._precompile`)."""
    from ._jit import _config

    return not _config.DISABLE_JIT and (numbers > INTERPRET_MAX_ELEMENTS or _compile_everything(start=False))


def is_plain(module: Any) -> bool:
    """Whether ``module`` (from :func:`kernels`) is a plain twin."""
    return isinstance(module, _PlainModule)


def _choose(name: str) -> Any:
    everything = _compile_everything()
    twin = _twins.get(name)
    if twin is not None and not everything:
        return twin  # (the cache was looked at when the twin was made)
    from .._precompile import wait

    wait(name)  # a worker compiling these kernels (a command's cold first run): load its results
    module = importlib.import_module(f"kinema._kernels.{name}")
    if everything or _compiled(name, module):
        _final[name] = module
        return module
    twin = _twins[name] = _twin_module(name, module)
    return twin


def _compile(name: str) -> None:
    """Compile module ``name`` from now on (its kernels compile, or load from the cache, on their next call)."""
    _final[name] = importlib.import_module(f"kinema._kernels.{name}")


def _is_kernel(value: Any) -> bool:
    from numba.core.dispatcher import Dispatcher

    return isinstance(value, Dispatcher)


def _compiled(name: str, module: Any) -> bool:
    """Whether one of ``module``'s entry points (its drivers, and its kernels Python may call: not the
    ``helper=True`` ones) is compiled in this process or in numba's cache.

    Entry points only: a worker killed half-way (at its parent's exit) leaves the helpers it compiled in the
    cache without the driver that calls them, and taking such a module for compiled would compile the driver
    here, for seconds, instead of running it plain."""
    return any(k.overloads or _in_cache(k) for k in _entry_points(module))


def _entry_points(module: Any) -> list[Any]:
    from ._jit import _HelperDispatcher
    from .drivers import Drivers

    found: list[Any] = []
    for value in vars(module).values():
        if isinstance(value, Drivers):
            found.extend(value)
        elif _is_kernel(value) and not isinstance(value, _HelperDispatcher) and \
                value.py_func.__module__ == module.__name__:
            found.append(value)
    return found


def _in_cache(kernel: Any) -> bool:
    """Whether numba's cache holds ``kernel``'s compiled code (:func:`kinema._kernels._jit.in_cache`)."""
    import glob

    from ._jit import in_cache

    py = kernel.py_func
    return in_cache(glob.escape(f"{py.__module__.rsplit('.', 1)[-1]}.{py.__qualname__}-") + "*.nbi")


def plain(kernel: Any) -> Any:
    """The plain twin of a compiled kernel: its Python function, with globals naming the twins of the
    kernels it calls (:func:`_mirror`).  A plain function comes back as it is."""
    if not _is_kernel(kernel):
        return kernel
    from .drivers import _copy

    got = _plain.get(id(kernel))
    if got is None:
        py = kernel.py_func
        got = _plain[id(kernel)] = (kernel, _copy(py, _mirror(py.__globals__), py.__qualname__))
    return got[1]


def _mirror(glob: dict[str, Any]) -> dict[str, Any]:
    """A copy of a kernel's globals with every kernel (and every pair of drivers) replaced by its plain twin.

    Registered before it is filled, so kernels of one module that call each other share one copy."""
    from .drivers import Drivers

    got = _plain_globals.get(id(glob))
    if got is not None:
        return got[1]
    copy = dict(glob)
    _plain_globals[id(glob)] = (glob, copy)
    for key, value in glob.items():
        if isinstance(value, Drivers):
            copy[key] = Drivers(*map(plain, value))
        elif _is_kernel(value):
            copy[key] = plain(value)
    return copy


class _PlainModule(types.ModuleType):
    """A kernel module's plain twin: the module's names, with each kernel a :class:`_PlainKernel`."""


def _twin_module(name: str, module: Any) -> _PlainModule:
    """The plain twin of ``module``: its kernels (and drivers) as :class:`_PlainKernel` s, its Python functions
    rebound to the twin (``two_bone.drivers_for`` hands out the twin's drivers), everything else as it is."""
    from .drivers import Drivers, _copy

    twin = _PlainModule(f"{module.__name__} (plain)")
    space = twin.__dict__
    for key, value in vars(module).items():
        if key in ("__name__", "__doc__"):
            continue
        if isinstance(value, Drivers):
            space[key] = Drivers(*(_PlainKernel(name, getattr(value, f), (name, key, f)) for f in Drivers._fields))
        elif _is_kernel(value):
            space[key] = _PlainKernel(name, value, (name, key, ""))
        else:
            space[key] = value
    for key, value in list(space.items()):
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            space[key] = _copy(value, space, value.__qualname__)
    return twin


def _arrays(args: Any, out: list[np.ndarray]) -> list[np.ndarray]:
    """The arrays in ``args`` (nested tuples), appended to ``out``."""
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(a)
        elif isinstance(a, tuple):
            _arrays(a, out)
    return out


def _record(where: tuple[str, str, str], args: tuple[Any, ...]) -> None:
    """Note a plain call's numba signature (a worker compiles exactly these when the budget runs out)."""
    from numba import typeof

    try:
        sig = tuple(typeof(a) for a in args)
    except ValueError:  # a type numba has no name for: nothing to compile ahead
        return
    _calls.setdefault(where, set()).add(sig)


class _PlainKernel:
    """A kernel of a module that is not compiled yet: its plain twin runs the call while that pays, else the
    kernel (which compiles, or loads from the cache, on its first call)."""

    __slots__ = ("name", "kernel", "func", "where")

    def __init__(self, name: str, kernel: Any, where: tuple[str, str, str] = ("", "", "")) -> None:
        self.name = name
        self.kernel = kernel
        self.func = plain(kernel)
        #: ``(module, name, driver field or "")``: where a worker finds the kernel (:data:`_calls`).
        self.where = where

    def __call__(self, *args: Any) -> Any:
        if self.name not in _final and not _compile_everything():
            arrays = _arrays(args, [])
            if sum(a.size for a in arrays) <= INTERPRET_MAX_ELEMENTS:
                if self.where[0] and _Spent.beside is None:  # (once a worker has its calls, none are sent again)
                    _record(self.where, args)
                return self._plain([a for a in arrays if a.flags.writeable], args)
        _compile(self.name)
        return self.kernel(*args)

    def _plain(self, writable: list[np.ndarray], args: tuple[Any, ...]) -> Any:
        """The plain run of a call (its ``writable`` arrays put back and the call run compiled if it raises)."""
        saved = [a.copy() for a in writable]
        t0 = time.perf_counter()
        try:
            # numba's NumPy error model: a division by zero is inf or NaN, silently (NumPy scalars warn).
            with np.errstate(all="ignore"):
                return self.func(*args)
        except (ArithmeticError, ValueError):
            # Python floats raise where compiled code gives inf or NaN (1.0 / 0.0, math.sqrt(-0.5)): put back
            # what the call wrote and run it compiled.
            for a, s in zip(writable, saved, strict=True):
                np.copyto(a, s)
        finally:
            _Spent.seconds += time.perf_counter() - t0
        _compile(self.name)
        return self.kernel(*args)

    def __repr__(self) -> str:
        return f"<plain twin of {self.kernel!r}>"
