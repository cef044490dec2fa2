"""A demo in a pygame window (``kinema demo NAME --window``): the mouse is the pointer.

The same drawing and camera as the PNG frames (:mod:`kinema.demos._png`), on screen: each frame
the session steps by ``1 / fps`` and is painted.  Moving the mouse over the window gives a session
with ``set_pointer`` (``follow``) the point under it and turns its ``auto`` off; space is the
``step`` button (:meth:`advance_state`), ``a`` toggles ``auto``, Escape or closing the window stops.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import KinemaError
from ._png import FIT_SECONDS, Camera, draw_on, fit_camera, import_pygame

__all__ = ["run_window", "NoDisplayError", "OFF_SCREEN_DRIVERS"]

#: SDL video drivers that show nothing: chosen on purpose (``SDL_VIDEODRIVER`` set) they are fine
#: (tests), picked by SDL itself they mean there is no display.
OFF_SCREEN_DRIVERS = ("offscreen", "dummy")


class NoDisplayError(KinemaError):
    """pygame could not open a window (no display): use ``--headless`` or the viewer."""


def run_window(demo: dict[str, Any], *, fps: float, seed: int = 0, max_frames: int | None = None,
               on_frame: Callable[[int, Any, Camera], None] | None = None) -> int:
    """Show ``demo`` in a window until it is closed (or for ``max_frames`` frames); returns the frames shown.

    ``on_frame(i, session, camera)`` is called after frame ``i`` is shown (tests post events from it).
    """
    pygame = import_pygame(headless=False)
    camera = fit_camera(demo["make"], fps, seed=seed, view=demo.get("view", (0.0, 0.0)),
                        seconds=float(demo.get("fit_seconds", FIT_SECONDS)))
    try:
        pygame.display.init()
        screen = pygame.display.set_mode(camera.size)
    except pygame.error as e:
        raise NoDisplayError(f"cannot open a window ({e}); use --headless --out DIR or the viewer") from e
    driver = pygame.display.get_driver()
    if driver in OFF_SCREEN_DRIVERS and "SDL_VIDEODRIVER" not in os.environ:
        pygame.display.quit()  # SDL fell back to drawing nowhere: there is no display
        raise NoDisplayError(f"no display to open a window on (SDL chose its {driver!r} driver); "
                             "use --headless --out DIR or the viewer")
    pygame.display.set_caption(f"kinema demo {demo['name']}  (mouse: pointer, space: step, a: auto, Esc: quit)")
    session = demo["make"](seed=seed)
    clock = pygame.time.Clock()
    shown = 0
    try:
        while max_frames is None or shown < max_frames:
            for event in pygame.event.get():
                if event.type == pygame.QUIT or (event.type == pygame.KEYDOWN and event.key == pygame.K_ESCAPE):
                    return shown
                if event.type == pygame.MOUSEMOTION and hasattr(session, "set_pointer"):
                    session.auto = False
                    session.set_pointer(camera.world_at(event.pos))
                elif event.type == pygame.KEYDOWN and event.key == pygame.K_SPACE:
                    session.advance_state()
                elif event.type == pygame.KEYDOWN and event.key == pygame.K_a:
                    session.auto = not session.auto
            session.step(1.0 / fps)
            draw_on(screen, session.drawing(), camera)
            pygame.display.flip()
            if on_frame is not None:
                on_frame(shown, session, camera)
            shown += 1
            clock.tick(fps)
    finally:
        pygame.display.quit()
    return shown
