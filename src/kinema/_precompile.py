"""One solver's kernels compiled in a second process while this one works (a command's cold first run).

numba compiles a kernel on its first use, in the calling process, one
function at a time (its compiler holds a process-wide lock, so threads do
not help), and saves it to its cache (:mod:`kinema._kernels._jit`'s
folder).  A command that needs several solvers' kernels on its first run
can hand one solver's compile to a worker process: the worker compiles it
into the cache while this process compiles the rest, and the first load of
that solver's kernel module here (:func:`kinema._solve.kernel_loader`)
waits for the worker, so numba here loads the worker's compiled code from
the cache instead of compiling it again.  The numbers are the same: the
same code compiled for the same types (a load is a cached compile).

It runs only where it can pay: the JIT is on, this process may use more
than one CPU, and the solver's driver is not in the cache yet
(:func:`cached`).  The worker never outlives the command: it is
terminated when this process exits, and its own watchdog thread ends it
when this process is gone (killed).  A worker that fails changes nothing:
this process then compiles what it needs itself.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["GROUPS", "WAIT_EVENT", "cached", "running", "start", "stop_all", "wait",
           "worker_command"]

#: The longest this process waits for a worker (s): far beyond a cold compile on a loaded machine; after it
#: the worker is stopped and this process compiles what it needs itself.
WAIT_LIMIT_S = 300.0

#: How often a worker checks that its parent is alive (s).
PARENT_POLL_S = 0.1

#: The numba event (``numba.core.event``) around a wait for a worker: kinema's own kind beside numba's
#: ``"numba:compile"``, which :func:`kinema.cli._ui.compile_notice` also listens to.
WAIT_EVENT = "kinema:precompile_wait"


def _warm_two_bone() -> None:
    """Compile the two-bone batch solve that :func:`kinema.mocap.footlock` runs for each leg and
    :func:`kinema.mocap.reach` for the arm: a batch pose and ``(N, 3)`` targets and poles with ``end_rotation
    (N, 4)`` (a batch small enough for the serial driver; ``tests/test_precompile.py`` checks that a foot lock
    and a reach then compile no two-bone kernel)."""
    import numpy as np

    from ._two_bone import solve_two_bone
    from .pose import Pose
    from .skeleton import Skeleton

    leg = Skeleton(["hip", "knee", "foot"], [-1, 0, 1], np.array([[0.0, 1.0, 0.0], [0.0, -0.5, 0.0], [0.0, -0.5, 0.0]]))
    n = 2
    pose = Pose(np.broadcast_to(leg.translations, (n, 3, 3)).copy(), np.tile([0.0, 0.0, 0.0, 1.0], (n, 3, 1)),
                np.ones((n, 3, 3)))
    solve_two_bone(leg, pose, (0, 1, 2), np.tile([0.1, 0.3, 0.1], (n, 1)), np.tile([0.0, 0.5, 1.0], (n, 1)),
                   end_rotation=np.tile([0.0, 0.0, 0.0, 1.0], (n, 1)))


def _warm_second_half() -> None:
    """``kinema warmup``'s steps for a second process (``SECOND_PROCESS_STEPS`` of :mod:`kinema.cli._commands`)."""
    from .cli._commands import SECOND_PROCESS_STEPS, warm_kernels

    warm_kernels(only=SECOND_PROCESS_STEPS)


def _warm_in_use() -> None:
    """The kernel calls a process ran plain until its budget ran out (:mod:`kinema._kernels._tier`), compiled for
    the very argument types they had: a pickled ``{(module, name, driver field or ""): {numba signature}}`` read
    from this worker's standard input (its parent's pipe)."""
    import importlib
    import pickle

    calls = pickle.load(sys.stdin.buffer)
    for (module, name, field), signatures in sorted(calls.items()):
        kernel = getattr(importlib.import_module(f"kinema._kernels.{module}"), name)
        if field:
            kernel = getattr(kernel, field)
        for sig in signatures:
            kernel.compile(sig)


#: What a worker can compile: ``{group: (a file numba's cache holds once the group is compiled (None: not
#: looked for), the function that compiles it)}``.  A group
#: named after a kernel module (``kinema._kernels.<name>``) is waited for on that module's first load
#: (:func:`wait`); ``"warmup"`` is waited for by ``kinema warmup`` itself; ``"in_use"`` (the modules a process
#: ran plain until its budget ran out) is never waited for: that process goes on with the plain kernels and
#: asks :func:`running`.
GROUPS: dict[str, tuple[str | None, Callable[[], None]]] = {
    "two_bone": ("drivers.two_bone_basic_serial-*.nbi", _warm_two_bone),
    "warmup": ("drivers.dls_parallel-*.nbi", _warm_second_half),
    "in_use": (None, _warm_in_use),
}

_workers: dict[str, subprocess.Popen[bytes]] = {}
_lock = threading.Lock()


def _forked() -> None:
    """In a forked child: the parent's workers are not its own (it can neither wait for nor stop them), and a
    lock another thread of the parent held at the fork would never be released here."""
    global _lock
    _lock = threading.Lock()
    _workers.clear()


if hasattr(os, "register_at_fork"):  # (POSIX)
    os.register_at_fork(after_in_child=_forked)


def cached(group: str) -> bool:
    """Whether numba's cache already holds ``group``'s driver (its index file:
    :func:`kinema._kernels._jit.in_cache`)."""
    from ._kernels._jit import in_cache

    pattern, _ = GROUPS[group]
    return pattern is not None and in_cache(pattern)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_command(group: str) -> list[str]:
    """The worker's command line: this Python, with this process's ``sys.path``, running :func:`main`.

    Not ``python -m kinema._precompile``: ``-m`` (and ``-c``) put the working folder first on the path, so a
    command run in a folder of untrusted files that holds a ``kinema`` package would run that package's code.
    The worker imports what this process imports, whatever its working folder."""
    code = f"import sys; sys.path[:] = {sys.path!r}; from kinema._precompile import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", code, group, str(os.getpid())]


def start(group: str, payload: bytes | None = None) -> bool:
    """Start a worker compiling ``group`` (a key of :data:`GROUPS`) unless it would not pay; whether one runs.
    ``payload``: bytes for the worker's standard input (``"in_use"``: the calls to compile)."""
    if group not in GROUPS:
        raise KeyError(f"no precompile group {group!r}; groups: {sorted(GROUPS)}")
    from ._kernels._jit import _config

    with _lock:
        if group in _workers or _config.DISABLE_JIT or _cpus() < 2 or cached(group):
            return group in _workers
        if not sys.executable:  # an embedded interpreter: no Python to start
            return False
        try:
            proc = subprocess.Popen(worker_command(group), stdin=subprocess.DEVNULL if payload is None else
                                    subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError:  # no process could start (limits): this process compiles everything itself
            return False
        if payload is not None:
            assert proc.stdin is not None
            try:
                proc.stdin.write(payload)
                proc.stdin.close()
            except OSError:  # the worker is gone already: this process compiles what it needs itself
                _stop(proc)
                return False
        _workers[group] = proc
        if len(_workers) == 1:
            atexit.register(stop_all)
    return True


def wait(group: str) -> None:
    """Wait for ``group``'s worker, if one was started (called on the first load of ``kinema._kernels.<group>``).

    After :data:`WAIT_LIMIT_S` the worker is stopped: this process compiles what it needs itself."""
    with _lock:
        proc = _workers.pop(group, None)
    if proc is None:
        return
    from numba.core import event

    with event.trigger_event(WAIT_EVENT):  # a command's spinner says "compiling kernels" meanwhile
        try:
            proc.wait(timeout=WAIT_LIMIT_S)
        except subprocess.TimeoutExpired:
            _stop(proc)


def running(group: str) -> bool:
    """Whether ``group``'s worker still runs (one that ended is forgotten: its compiled code is in the cache)."""
    with _lock:
        proc = _workers.get(group)
        if proc is None:
            return False
        if proc.poll() is None:
            return True
        del _workers[group]
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_all() -> None:
    """Stop every worker still running (at exit: a command that ends early leaves none behind)."""
    with _lock:
        procs = list(_workers.values())
        _workers.clear()
    for proc in procs:
        if proc.poll() is None:
            _stop(proc)


def _watch_parent(parent: int) -> None:
    """End this worker as soon as its parent is gone (it was killed: nothing will read the cache now), after
    the cache file it may be writing is renamed (:data:`kinema._kernels._jit.CACHE_WRITE_LOCK`)."""
    from ._kernels import _jit

    while True:
        if os.getppid() != parent:
            with _jit.CACHE_WRITE_LOCK:  # (looked up now: the module's current lock, the one writes take)
                os._exit(0)
        time.sleep(PARENT_POLL_S)


def main(argv: Sequence[str]) -> int:
    """The worker (:func:`worker_command`): ``main([group, parent pid])``."""
    group, parent = argv[0], int(argv[1])
    import kinema._kernels._jit  # noqa: F401  (numba, and its cache writes made whole, before the watchdog starts)

    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    from ._kernels._tier import compile_always

    compile_always()  # this worker is here to fill the cache
    try:
        GROUPS[group][1]()
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: end quietly, the parent reports it
        return 130
    return 0
