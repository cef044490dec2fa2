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
