"""Start a viser server showing a :class:`~kinema.viewer.ViewerState`."""

from __future__ import annotations

import ipaddress
import os
import queue
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SolverInputError
from ..limits import Limit
from ._files import FileAccess
from ._state import ViewerState

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "Viewer", "serve", "is_loopback", "host_warning"]

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


#: What the viewer says once the warm-up's compilation is over.
COMPILED = "kernels compiled (cached for the next start)"


def warm_up_with_notice(state: ViewerState, verbose: bool = True) -> list[str]:
    """:meth:`ViewerState.warm_up`, telling the page (a state note) and the terminal while numba compiles.

    The notice is the command line's (``kinema.cli._ui.COMPILING``), raised by
    numba's own compile events, so a start from a warm cache says nothing.

    numba fires those events while it holds its global compiler lock, and a
    page action holding ``state.lock`` may be waiting for that lock (it
    compiles too): the listener therefore only queues the message, and a
    publisher thread takes ``state.lock`` to note it, never under numba's
    lock (lock order: ``state.lock``, then numba's; a deadlock otherwise).
    The notes are all published when this returns.
    """
    from ..cli._ui import COMPILING, compile_notice

    pending: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def publish() -> None:
        while (message := pending.get()) is not None:
            if verbose:
                print(f"[kinema view] {message}", flush=True)
            state.note(message)  # may wait for state.lock: fine here, this thread holds no numba lock

    publisher = threading.Thread(target=publish, name="kinema-view-compile-notice", daemon=True)
    publisher.start()

    def on_change(active: bool) -> None:  # runs under numba's compiler lock: must not block
        pending.put(COMPILING if active else COMPILED)

    try:
        with compile_notice(on_change):
            return state.warm_up()
    finally:
        pending.put(None)
        publisher.join()  # outside compile_notice: this thread holds no numba lock here


def is_loopback(host: str) -> bool:
    """True when ``host`` names only this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:  # a host name or "" (every interface): not known to be loopback
        return False


def host_warning(host: str, files: FileAccess) -> str | None:
    """The warning :func:`serve` prints for a ``host`` other than loopback (None for loopback)."""
    if is_loopback(host):
        return None
    where = host or "every interface"
    return (f"warning: listening on {where}, not only this machine: anyone who can reach it on the network "
            f"can drive the page, open the files under {files.root} and write into {files.out_dir}")


#: The largest TCP port.
MAX_PORT = 65535


def check_port(port: Any) -> int:
    """``port`` when it is an integer in 0..:data:`MAX_PORT` (0: any free port); :class:`~kinema.SolverInputError`
    otherwise (viser's server thread would raise OverflowError and leave the caller waiting for ever)."""
    if isinstance(port, (bool, np.bool_)) or not isinstance(port, (int, np.integer)) or not 0 <= port <= MAX_PORT:
        raise SolverInputError(f"port must be an integer in 0..{MAX_PORT} (0: any free port), got {port!r}")
    return int(port)


def serve(
    path: str | os.PathLike[str] | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    block: bool = True,
    state: ViewerState | None = None,
    limits: Mapping[Any, Limit] | None = None,
    root: str | os.PathLike[str] | None = None,
    export_dir: str | os.PathLike[str] | None = None,
    limb_chains: bool = True,
    verbose: bool = True,
) -> Viewer:
    """Serve the viewer for a BVH / glTF / GLB file (the bundled sample when ``path`` is None).

    * ``host``: interface to listen on, loopback by default; any other
      prints a warning (:func:`host_warning`) that anyone on the network can
      drive the page.
    * ``port``: TCP port; 0 picks a free one (:func:`check_port`).
    * ``block``: serve until Ctrl-C (then stop and return), or return the
      running :class:`Viewer` at once.
    * ``state``: show this :class:`ViewerState` instead of loading ``path``.
    * ``limits``: ``{joint: Limit}`` for the solvers and the drawn outlines.
    * ``root``: the folder whose files the page's Open lists and may read
      (default: the current folder).
    * ``export_dir``: the one folder the page's export writes into (default:
      the current folder).
    * ``limb_chains``: start with the four limb chains on a humanoid the
      viewer recognises (:meth:`ViewerState.add_limb_chains`).

    A ``path`` that cannot be read raises the loader's error
    (:func:`load_any`) before anything listens; a ``root`` or
    ``export_dir`` that is not a folder raises
    :class:`~kinema.viewer.ViewerPathError`.
    """
    import viser

    port = check_port(port)
    files = FileAccess(os.getcwd() if root is None else root, os.getcwd() if export_dir is None else export_dir)
    if state is None:
        extra = {} if limits is None else {"limits": limits}  # the sample brings its own limits
        state = ViewerState.from_sample(**extra) if path is None else ViewerState.from_file(path, **extra)
    warning = host_warning(host, files)
    if warning is not None:
        print(f"[kinema view] {warning}", file=sys.stderr, flush=True)
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

        app = ViewerApp(state, server, files=files, limb_chains=limb_chains)
        url = f"http://{host}:{server.get_port()}"
        if verbose:
            src = "bundled sample" if state.source is None else state.source
            print(f"kinema viewer: {src} at {url}  (Ctrl-C to stop)", flush=True)
            print(f"  Open lists the files under {files.root}; export writes into {files.out_dir}", flush=True)
        viewer = Viewer(state=state, app=app, server=server, url=url)
        # compile the solvers now, not on the first drag, saying so while numba compiles
        threading.Thread(target=warm_up_with_notice, args=(state, verbose), name="kinema-view-warm-up",
                         daemon=True).start()
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
