"""Interactive viewer: pose any rig live in the browser (the ``viewer`` extra, built on viser).

``kinema view [FILE] [--host 127.0.0.1] [--port 8080] [--root DIR] [--out DIR]`` or, from Python::

    from kinema.viewer import serve
    serve("walk.bvh")                       # blocks until Ctrl-C
    viewer = serve(block=False, port=0)     # returns a running Viewer; viewer.close() stops it

The server-side state is a plain :class:`ViewerState` (no viser), so scripts
and tests can drive and inspect exactly what the browser shows.  The core
``kinema`` package never imports this one; viser is imported only by
:func:`serve`.

The page's file actions are confined (:class:`FileAccess`): Open lists and
reads only the files under one root folder, export writes only plain names
into one output folder and asks before it replaces a file.
"""

from __future__ import annotations

from ._cli import add_view_parser, main, run_view
from ._files import ExportExistsError, FileAccess, ViewerPathError
from ._serve import DEFAULT_HOST, DEFAULT_PORT, Viewer, serve
from ._state import (
    SOLVERS,
    ChainGoal,
    ChainStatus,
    SkinnedMesh,
    ViewerState,
    available_solvers,
    humanoid_limb_ends,
    load_any,
)

__all__ = [
    "serve",
    "Viewer",
    "ViewerState",
    "ChainGoal",
    "ChainStatus",
    "SkinnedMesh",
    "SOLVERS",
    "available_solvers",
    "load_any",
    "humanoid_limb_ends",
    "FileAccess",
    "ViewerPathError",
    "ExportExistsError",
    "add_view_parser",
    "run_view",
    "main",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
]
