"""The ``demo`` command: ``kinema demo NAME [--headless --frames N --out DIR | --window] [--fps F] [--seed S]``.

Without ``--headless`` the demo is served in the viewer (:mod:`kinema.viewer._demo`); with
``--window`` it is shown in a pygame window (:mod:`kinema.demos._window`); with ``--headless``,
N frames are written as ``DIR/frame_0000.png ...`` (pygame, no screen; each file written to a
temporary name and renamed, an existing frame refused without ``--force``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ._files import CliError, UsageError, make_folders, remove_empty_folders
from ._ui import UI

__all__ = ["add_demo_arguments", "run_demo", "frame_name", "MAX_FRAMES", "MAX_FPS", "HELP", "EXAMPLES"]

HELP = "run a seed demo (follow, tentacles, stairs, fishing) in the viewer, or headless as PNG frames"

EXAMPLES = """\
examples:
  kinema demo --list                                   the demos there are
  kinema demo follow                                   in the browser viewer (drag the target)
  kinema demo follow --window                          in a pygame window following the mouse
  kinema demo stairs --headless --frames 90 --out out/stairs     90 PNG frames, no screen needed
  kinema demo tentacles --headless --frames 8 --out out/t --fps 30 --seed 2

Headless frames need the demo extra (pip install 'kinema[demo]', pygame); the viewer needs
the viewer extra.  Existing frames are refused without --force.
"""

#: Frames ``--headless`` writes when ``--frames`` is not given.
DEFAULT_FRAMES = 120
#: More frames than this is refused before anything is computed (10 minutes at 60 fps).
MAX_FRAMES = 36_000
#: Frame rates above this are refused (a typo, not a demo).
MAX_FPS = 1000.0


def frame_name(i: int) -> str:
    """The file name of frame ``i`` (0-based): ``frame_0000.png``."""
    return f"frame_{i:04d}.png"


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    """``demo``'s arguments (the CLI's parser calls this on its subparser)."""
    from ..viewer._cli import MAX_PORT, port_number
    from ..viewer._serve import DEFAULT_HOST, DEFAULT_PORT

    p.add_argument("name", nargs="?", metavar="NAME", help="the demo (see --list)")
    p.add_argument("--list", action="store_true", help="list the demos and exit")
    p.add_argument("--headless", action="store_true", help="write PNG frames into --out instead of serving")
    p.add_argument("--window", action="store_true",
                   help="show the demo in a pygame window instead (the mouse is the pointer; needs a display)")
    p.add_argument("--frames", type=int, default=None, metavar="N",
                   help=f"frames to write (default {DEFAULT_FRAMES}); with --window, frames to show (default: "
                        "until the window is closed)")
    p.add_argument("--out", metavar="DIR", help="folder for the frames (created if missing)")
    p.add_argument("--fps", type=float, metavar="F", help="frames per second (default: the demo's own)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="the session's seed (default 0)")
    p.add_argument("--force", action="store_true", help="replace existing frames in DIR")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"viewer interface (default {DEFAULT_HOST})")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT,
                   help=f"viewer TCP port, 0..{MAX_PORT} (default {DEFAULT_PORT}; 0: any)")


def _list(ui: UI) -> int:
    from ..demos import _registry

    for name in _registry.available():
        demo = _registry.load(name)
        ui.print(f"{name:10s} {demo.get('about', '')}")
    return 0


def run_demo(args: argparse.Namespace, ui: UI) -> int:
    from ..demos import _registry

    if args.list:
        return _list(ui)
    if not args.name:
        raise UsageError(f"demo needs NAME (or --list); choose one of: {', '.join(_registry.available())}")
    try:
        demo = _registry.load(args.name)
    except _registry.DemoNotFoundError as e:
        if args.name in _registry.DEMO_MODULES:  # a known demo that is broken or not installed: not the user's typo
            raise
        raise UsageError(str(e)) from None  # a NAME that is no demo is a bad command line (exit 2)
    fps = float(demo["fps"]) if args.fps is None else float(args.fps)
    if not 0.0 < fps <= MAX_FPS:
        raise UsageError(f"--fps must be in (0, {MAX_FPS:g}], got {args.fps:g}")
    if args.seed < 0:
        raise UsageError(f"--seed must be 0 or more, got {args.seed}")
    if args.window:
        if args.headless or args.out is not None:
            raise UsageError("--window shows the demo on screen; it takes neither --headless nor --out")
        from ..demos._window import run_window

        if args.frames is not None and not 1 <= args.frames <= MAX_FRAMES:
            raise UsageError(f"--frames must be in 1..{MAX_FRAMES}, got {args.frames}")
        run_window(demo, fps=fps, seed=args.seed, max_frames=args.frames)
        return 0
    if not args.headless:
        if args.out is not None:
            raise UsageError("--out needs --headless (the viewer writes no frames)")
        try:
            import viser  # noqa: F401
        except ImportError:
            raise CliError("kinema demo in the viewer needs the viewer extra: pip install 'kinema[viewer]' "
                           "(or use --headless --out DIR)") from None
        from ..viewer._demo import serve_demo

        serve_demo(demo, fps=fps, seed=args.seed, host=args.host, port=args.port, block=True)
        return 0
    if args.out is None:
        raise UsageError("--headless needs --out DIR")
    if args.out == "":  # an empty name would write the frames into the current folder
        raise UsageError("--out needs a folder name, got an empty one")
    frames = DEFAULT_FRAMES if args.frames is None else args.frames
    if not 1 <= frames <= MAX_FRAMES:
        raise UsageError(f"--frames must be in 1..{MAX_FRAMES}, got {frames}")
    written = write_frames(demo, args.out, frames, fps=fps, seed=args.seed, force=args.force)
    ui.print(f"wrote {len(written)} frames of {args.name} to {args.out} ({fps:g} fps, seed {args.seed})")
    return 0


def write_frames(demo: dict[str, Any], out: str, frames: int, *, fps: float, seed: int, force: bool) -> list[str]:
    """Play a fresh ``demo["make"](seed=seed)`` for ``frames`` frames at ``fps``, writing each as PNG into ``out``.

    The camera is fitted once (:func:`kinema.demos._png.fit_camera`) before the first frame; every
    frame goes through :func:`kinema.io._atomic.atomic_write`.  Refuses (before writing anything) an
    ``out`` that is not a folder and, without ``force``, any frame file that exists.  Returns the paths.
    """
    from ..demos._png import FIT_SECONDS, fit_camera, import_pygame, render_png
    from ..io._atomic import atomic_write

    import_pygame()  # the missing extra is an error before any folder is made
    if os.path.lexists(out) and not os.path.isdir(out):
        raise CliError(f"{out}: exists and is not a folder")
    paths = [os.path.join(out, frame_name(i)) for i in range(frames)]
    if not force:
        existing = [p for p in paths if os.path.lexists(p)]
        if existing:
            raise CliError(f"{existing[0]}: already exists ({len(existing)} of the frames do); "
                           "pass --force to replace them")
    view = demo.get("view", (0.0, 0.0))
    camera = fit_camera(demo["make"], fps, seed=seed, view=view, seconds=float(demo.get("fit_seconds", FIT_SECONDS)))
    created = make_folders(out)
    try:
        session = demo["make"](seed=seed)
        for path in paths:
            with atomic_write(path) as f:
                render_png(session.drawing(), camera, f)
            session.step(1.0 / fps)
    except BaseException:
        remove_empty_folders(created)
        raise
    return paths
