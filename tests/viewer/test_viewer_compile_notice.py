"""The viewer says "compiling kernels" while numba compiles its warm-up, and nothing from a warm cache."""

from __future__ import annotations

import numpy as np

from kinema.cli._ui import COMPILING
from kinema.viewer import _serve
from kinema.viewer._state import ViewerState


def test_warm_up_notes_compilation_only_while_numba_compiles(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import numba

    state = ViewerState.from_sample()
    state.warm_up()  # whatever was cold is compiled now: a second warm-up compiles nothing
    state.messages.clear()
    assert _serve.warm_up_with_notice(state, verbose=False)
    assert COMPILING not in state.messages

    def compiling_warm_up() -> list[str]:
        # a kernel that was never compiled in this process (a new function object): numba compiles it here
        @numba.njit(cache=False)
        def fresh(x):  # type: ignore[no-untyped-def]
            return x * 2.0 + 1.0

        assert fresh(np.float64(1.0)) == 3.0
        return ["fresh"]

    monkeypatch.setattr(state, "warm_up", compiling_warm_up)
    state.messages.clear()
    assert _serve.warm_up_with_notice(state, verbose=True) == ["fresh"]
    assert state.messages == [COMPILING, _serve.COMPILED]
    out = capsys.readouterr().out
    assert f"[kinema view] {COMPILING}" in out and f"[kinema view] {_serve.COMPILED}" in out


#: Seconds a step of the deadlock test may wait (the fixed code needs milliseconds).
DEADLOCK_TIMEOUT_S = 5.0


def test_compile_notice_never_waits_for_the_state_lock_under_numbas_lock() -> None:
    """The start-up deadlock, interleaved deterministically: the warm-up thread compiles (numba fires its
    compile event holding its compiler lock, stood for here by ``compiler``) while a page action holds
    ``state.lock`` and waits for the compiler lock (it compiles too).  The notice must not wait for
    ``state.lock`` under the compiler lock; its notes arrive once the page action is done."""
    import threading

    from numba.core import event as ev

    state = ViewerState.from_sample()
    compiler = threading.Lock()  # numba's global compiler lock, as the two threads use it
    page_holds_state = threading.Event()
    warm_up_compiling = threading.Event()

    def compiling_warm_up() -> list[str]:
        assert page_holds_state.wait(DEADLOCK_TIMEOUT_S)
        with compiler:
            warm_up_compiling.set()
            with ev.trigger_event("numba:compile", data={"dispatcher": None, "args": ()}):
                pass  # the listener runs here, under the compiler lock
        return ["fresh"]

    state.warm_up = compiling_warm_up  # type: ignore[method-assign]
    result: list[list[str]] = []
    warm = threading.Thread(target=lambda: result.append(_serve.warm_up_with_notice(state, verbose=False)),
                            daemon=True)
    with state.lock:  # the page action: holds the state, then needs the compiler
        page_holds_state.set()
        warm.start()
        assert warm_up_compiling.wait(DEADLOCK_TIMEOUT_S)
        got_compiler = compiler.acquire(timeout=DEADLOCK_TIMEOUT_S)
        if got_compiler:
            compiler.release()
    assert got_compiler, "deadlock: the compile notice waited for state.lock under numba's compiler lock"
    warm.join(DEADLOCK_TIMEOUT_S)
    assert not warm.is_alive() and result == [["fresh"]]
    assert state.messages[-2:] == [COMPILING, _serve.COMPILED]
