"""PNG frames of a demo: a :class:`~kinema.demos._draw.Drawing` drawn with pygame, no screen needed.

pygame draws on an off-screen surface (SDL's ``dummy`` video driver is selected before pygame is
imported, so no window or display is ever opened).  The projection is orthographic: a
:class:`Camera` looks at the world from a fixed direction (azimuth about +y, elevation above the
horizon) and maps it to pixels with one scale, fitted once per demo from the bounds of its first
frames (:func:`fit_camera`), so the picture does not jitter as the scene moves.

Needs the ``demo`` extra (``pip install 'kinema[demo]'``).
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..errors import KinemaError
from ._draw import Drawing

__all__ = ["Camera", "fit_camera", "render_png", "png_bytes", "draw_on", "import_pygame", "PygameMissingError",
           "IMAGE_SIZE", "FIT_SECONDS", "BACKGROUND"]

#: Width and height of a frame, pixels.
IMAGE_SIZE = (640, 480)
#: Seconds of a fresh session played to fit the camera (the union of those frames' bounds).
FIT_SECONDS = 3.0
#: Fraction of the image left free around the fitted bounds, on each side.
FIT_MARGIN = 0.07
#: Background colour (RGB, 0..255).
BACKGROUND = (246, 246, 242)
#: Caption colour and height (pixels).
CAPTION_COLOR = (40, 40, 40)
CAPTION_PX = 20


class PygameMissingError(KinemaError):
    """The PNG renderer needs pygame (the ``demo`` extra)."""


def import_pygame(headless: bool = True) -> Any:
    """pygame, imported without its start-up banner and, when ``headless``, with SDL's dummy video driver
    (unless ``SDL_VIDEODRIVER`` is set already)."""
    if headless:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError as e:
        raise PygameMissingError("PNG frames need pygame: pip install 'kinema[demo]'") from e
    return pygame


@dataclass(frozen=True)
class Camera:
    """An orthographic camera: world point ``p`` -> pixel ``(cx + scale (p . right - u0), cy - scale (p . up - v0))``.

    ``right``, ``up`` ``(3,)`` unit screen axes in world space, ``toward`` ``(3,)`` unit direction
    from the scene to the viewer (larger ``p . toward`` is nearer, drawn later); ``center_uv`` the
    screen-plane point at the image centre; ``scale`` pixels per length unit.
    """

    right: NDArray[np.float64]
    up: NDArray[np.float64]
    toward: NDArray[np.float64]
    center_uv: tuple[float, float]
    scale: float
    size: tuple[int, int] = IMAGE_SIZE

    @staticmethod
    def axes(view: Sequence[float] = (0.0, 0.0)) -> tuple[NDArray[np.float64], ...]:
        """``(right, up, toward)`` for ``view = (azimuth, elevation)`` in degrees (``(0, 0)``: x right, y up)."""
        az, el = math.radians(float(view[0])), math.radians(float(view[1]))
        toward = np.array([math.sin(az) * math.cos(el), math.sin(el), math.cos(az) * math.cos(el)])
        right = np.array([math.cos(az), 0.0, -math.sin(az)])
        return right, np.cross(toward, right), toward

    def uv(self, points_world: NDArray[np.float64]) -> NDArray[np.float64]:
        """Screen-plane coordinates ``(n, 2)`` (length units) of ``points_world (n, 3)``."""
        return np.stack([points_world @ self.right, points_world @ self.up], axis=-1)

    def pixels(self, points_world: NDArray[np.float64]) -> NDArray[np.float64]:
        """Pixel coordinates ``(n, 2)`` (x right, y down) of ``points_world (n, 3)``."""
        uv = self.uv(points_world)
        w, h = self.size
        x = 0.5 * w + self.scale * (uv[:, 0] - self.center_uv[0])
        y = 0.5 * h - self.scale * (uv[:, 1] - self.center_uv[1])
        return np.stack([x, y], axis=-1)

    def world_at(self, pixel: Sequence[float]) -> NDArray[np.float64]:
        """The world point ``(3,)`` at ``pixel`` (x right, y down) on the screen plane through the origin
        (for a planar demo seen face on, the point of the plane z = 0 under the pixel)."""
        w, h = self.size
        u = self.center_uv[0] + (float(pixel[0]) - 0.5 * w) / self.scale
        v = self.center_uv[1] - (float(pixel[1]) - 0.5 * h) / self.scale
        return np.asarray(u * self.right + v * self.up, dtype=np.float64)


#: The four corners of a unit square around a point: a dot's extent on screen is its radius each way.
_CORNERS = np.array([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])


def _fit(drawings: Iterable[Drawing], view: Sequence[float], size: tuple[int, int]) -> Camera:
    right, up, toward = Camera.axes(view)
    probe = Camera(right, up, toward, (0.0, 0.0), 1.0, size)
    pts = [probe.uv(ln.points_world) for d in drawings for ln in d.lines]
    pts += [probe.uv(dot.position_world[None]) + dot.radius * _CORNERS for d in drawings for dot in d.dots]
    if not pts:
        return Camera(right, up, toward, (0.0, 0.0), 100.0, size)
    uv = np.concatenate(pts, axis=0)
    lo, hi = uv.min(axis=0), uv.max(axis=0)
    extent = np.maximum(hi - lo, 1e-6)
    usable = np.array(size, dtype=np.float64) * (1.0 - 2.0 * FIT_MARGIN)
    scale = float(np.min(usable / extent))
    mid = 0.5 * (lo + hi)
    return Camera(right, up, toward, (float(mid[0]), float(mid[1])), scale, size)


def fit_camera(make: Callable[..., Any], fps: float, *, seed: int = 0, view: Sequence[float] = (0.0, 0.0),
               seconds: float = FIT_SECONDS, size: tuple[int, int] = IMAGE_SIZE) -> Camera:
    """A camera holding every frame of a fresh session ``make(seed=seed)`` played for ``seconds`` at ``fps``."""
    session = make(seed=seed)
    frames = max(1, int(round(seconds * fps)))
    drawings = []
    for _ in range(frames):
        drawings.append(session.drawing())
        session.step(1.0 / fps)
    return _fit(drawings, view, size)


def _rgb(color: Sequence[float]) -> tuple[int, int, int]:
    r, g, b = (int(round(255.0 * min(1.0, max(0.0, float(c))))) for c in color)
    return r, g, b


def png_bytes(drawing: Drawing, camera: Camera) -> bytes:
    """``drawing`` through ``camera`` (:func:`draw_on`), encoded as PNG in memory."""
    pygame = import_pygame()
    surface = pygame.Surface(camera.size)
    draw_on(surface, drawing, camera)
    buffer = io.BytesIO()  # no system call, so no signal handler runs (and raises) inside pygame's write callback
    pygame.image.save(surface, buffer, "frame.png")
    return buffer.getvalue()


def render_png(drawing: Drawing, camera: Camera, file: Any) -> None:
    """Draw ``drawing`` through ``camera`` (:func:`draw_on`) and write it as PNG into the binary file ``file``.

    The PNG is encoded in memory first and written here, not from pygame's write callback: a Ctrl-C or
    SIGTERM during the write then raises its ``KeyboardInterrupt`` to the caller, where pygame would
    turn it into a ``pygame.error`` (a false "error writing the PNG file").
    """
    file.write(png_bytes(drawing, camera))


def draw_on(surface: Any, drawing: Drawing, camera: Camera) -> None:
    """Paint ``drawing`` through ``camera`` onto the pygame ``surface`` (of ``camera.size``).

    Lines and dots are painted far to near (by ``p . camera.toward``; ties keep the drawing's
    order), lines with round joints; the caption goes at the top left.
    """
    import pygame

    if not pygame.font.get_init():
        pygame.font.init()
    surface.fill(BACKGROUND)
    items: list[tuple[float, int, Any]] = []
    for i, ln in enumerate(drawing.lines):
        items.append((float(np.mean(ln.points_world @ camera.toward)), i, ln))
    for i, dot in enumerate(drawing.dots):
        items.append((float(dot.position_world @ camera.toward), len(drawing.lines) + i, dot))
    items.sort(key=lambda t: (t[0], t[1]))
    for _, _, item in items:
        color = _rgb(item.color)
        if hasattr(item, "points_world"):
            px = camera.pixels(item.points_world)
            width = max(1, int(round(item.width * camera.scale)))
            pts = [(float(x), float(y)) for x, y in px]
            pygame.draw.lines(surface, color, False, pts, width)
            if width > 2:  # round joints and ends
                for p in pts:
                    pygame.draw.circle(surface, color, p, width / 2.0)
        else:
            (x, y), = camera.pixels(item.position_world[None])
            pygame.draw.circle(surface, color, (float(x), float(y)), max(1.0, item.radius * camera.scale))
    if drawing.caption:
        font = pygame.font.Font(None, CAPTION_PX)
        for k, text in enumerate(drawing.caption.splitlines()):
            surface.blit(font.render(text, True, CAPTION_COLOR), (8, 6 + k * CAPTION_PX))
