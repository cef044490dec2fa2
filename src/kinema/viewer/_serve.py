"""Start a viser server showing a :class:`~kinema.viewer.ViewerState`."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..limits import Limit
from ._state import ViewerState

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "Viewer", "serve"]

#: Listen on the loopback interface only unless told otherwise (viser's own default is 0.0.0.0).
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


@dataclass
class Viewer:
    """A running viewer: ``state`` (inspect / drive it), ``app`` (the viser glue), ``server``, ``url``."""

    state: ViewerState
    app: Any
    server: Any
    url: str

    def close(self) -> None:
        """Stop playback and the server."""
        self.app.close()
        self.server.stop()


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _initial_state(path: str | os.PathLike[str] | None, limits: Mapping[Any, Limit] | None
                   ) -> tuple[ViewerState, str | None]:
    """State for ``path`` (or the sample); a bad file falls back to the sample with the error kept."""
    if path is None:
        return ViewerState.from_sample(limits=limits), None
    from ._state import load_any

    try:
        skel, clip, mesh = load_any(path)
    except Exception as exc:  # any unreadable file: show the sample and the reason, do not crash
        msg = f"could not open {os.fspath(path)}: {type(exc).__name__}: {exc}"
        state = ViewerState.from_sample(limits=limits)
        state.note(msg)
        return state, msg
    return ViewerState(skel, clip, mesh=mesh, limits=limits, source=os.fspath(path)), None


def serve(
    path: str | os.PathLike[str] | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    block: bool = True,
    state: ViewerState | None = None,
    limits: Mapping[Any, Limit] | None = None,
    export_dir: str | os.PathLike[str] | None = None,
    verbose: bool = True,
) -> Viewer:
    """Serve the viewer for a BVH / glTF / GLB file (the bundled sample when ``path`` is None).

    * ``host``: interface to listen on, loopback by default (pass
      ``"0.0.0.0"`` explicitly to share on a network).
    * ``port``: TCP port; 0 picks a free one.
    * ``block``: serve until Ctrl-C (then stop and return), or return the
      running :class:`Viewer` at once.
    * ``state``: show this :class:`ViewerState` instead of loading ``path``.
    * ``limits``: ``{joint: Limit}`` for the solvers and the drawn outlines.
    * ``export_dir``: where the export button writes (default: current folder).

    A file that cannot be read does not stop the viewer: the bundled sample
    is shown and the error appears in the page and on stderr.
    """
    import viser

    error = None
    if state is None:
        state, error = _initial_state(path, limits)
    if port == 0:
        port = _free_port(host)
    # Blocking in the main thread: Ctrl-C only sets a flag, from the moment the
    # server starts (the page is served while the app is still being built and
    # its first solve compiled), so it always ends in the same clean stop.
    stop = threading.Event()
    previous = None
    if block and threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    try:
        server = viser.ViserServer(host=host, port=port, verbose=False)
        from ._app import ViewerApp

        app = ViewerApp(state, server, export_dir=export_dir)
        url = f"http://{host}:{server.get_port()}"
        if error is not None:
            print(f"[kinema view] {error}", file=sys.stderr, flush=True)
            app._set_message(f"**Error:** {error}")
        if verbose:
            src = "bundled sample" if state.source is None else state.source
            print(f"kinema viewer: {src} at {url}  (Ctrl-C to stop)", flush=True)
        viewer = Viewer(state=state, app=app, server=server, url=url)
        # compile the solvers now, not on the first drag
        threading.Thread(target=state.warm_up, name="kinema-view-warm-up", daemon=True).start()
        if not block:
            return viewer
        try:
            while not stop.wait(1.0):
                pass
        except KeyboardInterrupt:  # blocking outside the main thread's signal handler
            pass
        finally:
            viewer.close()
        return viewer
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
