"""``kinema demo NAME`` in the browser: a demo session's :class:`~kinema.demos._draw.Drawing` as a viser scene.

Each frame the session steps by ``1 / fps`` and its drawing is sent: polylines as line segments
(one viser node per line width, updated in place), dots as spheres.  The panel has a ``step``
button (:meth:`advance_state`), an ``auto`` checkbox (the session's ``auto``) and the state's
name; a session with ``set_pointer`` (``follow``) gets a draggable target (transform controls)
that becomes its pointer, turning ``auto`` off.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..demos._draw import Drawing
from ..errors import KinemaError, SolverInputError
from ._serve import DEFAULT_HOST, DEFAULT_PORT, _free_port, check_port, is_loopback
from ._state import markdown_escape

__all__ = ["DemoApp", "DemoViewer", "serve_demo"]

#: Spheres of the dots: icosphere subdivisions (2: 80 faces, round enough at demo sizes).
DOT_SUBDIVISIONS = 2
#: The camera starts this many scene sizes away from the scene's centre.
CAMERA_DISTANCE = 1.15
#: The panel's caption is refreshed every this many frames (it changes every frame).
CAPTION_EVERY = 6
#: A pointer farther than this from the origin (world units; the demos' scenes span a few) is refused.
MAX_POINTER = 1e6


def _rgb255(color: Any) -> tuple[int, int, int]:
    r, g, b = (int(round(255.0 * min(1.0, max(0.0, float(c))))) for c in color)
    return r, g, b


@dataclass
class DemoApp:
    """The viser glue of one demo session: builds the panel and redraws the scene from :meth:`frame`."""

    demo: dict[str, Any]
    server: Any
    fps: float
    seed: int = 0
    session: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.session = self.demo["make"](seed=self.seed)
        self._lines: dict[float, Any] = {}
        self._dots: list[tuple[Any, float, tuple[int, int, int]]] = []
        self.frames = 0
        scene, gui = self.server.scene, self.server.gui
        scene.set_up_direction("+y")
        gui.add_markdown(f"**kinema demo {self.demo['name']}**  \n{self.demo.get('about', '')}")
        self.step_button = gui.add_button("step")
        self.step_button.on_click(lambda _: self.advance_state())
        self.auto_checkbox = gui.add_checkbox("auto", initial_value=bool(self.session.auto))
        self.auto_checkbox.on_update(lambda _: self._set_auto(bool(self.auto_checkbox.value)))
        self.state_text = gui.add_text("state", initial_value=str(self.session.state), disabled=True)
        # A session's drawing options (a dataclass of flags, e.g. fishing's poles/grips/reach): one checkbox each.
        self.option_checkboxes: dict[str, Any] = {}
        options = getattr(self.session, "options", None)
        if dataclasses.is_dataclass(options):
            for f in dataclasses.fields(options):
                if isinstance(getattr(options, f.name), bool):
                    box = gui.add_checkbox(f"draw {f.name}", initial_value=bool(getattr(options, f.name)))
                    box.on_update(lambda _, name=f.name, box=box: self._set_option(name, bool(box.value)))
                    self.option_checkboxes[f.name] = box
        self.caption = gui.add_markdown("")
        self.message = gui.add_markdown("")  # a refused pointer or a failed frame, said in the page
        self._last_error: str | None = None
        self.pointer: Any = None
        if hasattr(self.session, "set_pointer"):
            p = np.zeros(3)
            p[: np.size(self.session.pointer)] = self.session.pointer
            self.pointer = scene.add_transform_controls("/demo/pointer", scale=0.5, disable_rotations=True,
                                                        active_axes=(True, True, False), position=tuple(p))
            self.pointer.on_update(lambda _: self._on_pointer())
        self._view = self._fit()
        self.server.on_client_connect(self._place_camera)
        self.draw(self.session.drawing())

    def _fit(self) -> tuple[NDArray[np.float64], float]:
        lo, hi = self.session.drawing().bounds()
        return 0.5 * (lo + hi), float(max(np.max(hi - lo), 1.0))

    def _place_camera(self, client: Any) -> None:
        az, el = (math.radians(float(a)) for a in self.demo.get("view", (0.0, 0.0)))
        toward = np.array([math.sin(az) * math.cos(el), math.sin(el), math.cos(az) * math.cos(el)])
        center, size = self._view
        client.camera.up_direction = (0.0, 1.0, 0.0)
        client.camera.position = tuple(map(float, center + CAMERA_DISTANCE * size * toward))
        client.camera.look_at = tuple(map(float, center))

    def _set_auto(self, on: bool) -> None:
        with self.lock:
            self.session.auto = on

    def _set_option(self, name: str, on: bool) -> None:
        with self.lock:
            setattr(self.session.options, name, on)

    def advance_state(self) -> None:
        """The ``step`` button: the session's next state."""
        with self.lock:
            self.session.advance_state()
            self.state_text.value = str(self.session.state)

    def move_pointer(self, position_world: NDArray[np.float64]) -> None:
        """The dragged target: the session's pointer (``auto`` goes off so the script stops moving it).

        A position that is not finite, or farther than :data:`MAX_POINTER` from the origin (a client's
        NaN, a drag far off screen), raises :class:`kinema.SolverInputError` and changes nothing.
        """
        p = np.asarray(position_world, dtype=np.float64).reshape(-1)
        if p.size not in (2, 3) or not np.all(np.isfinite(p)) or float(np.max(np.abs(p))) > MAX_POINTER:
            raise SolverInputError(f"pointer refused: it must be 2 or 3 finite numbers within {MAX_POINTER:g} of "
                                   f"the origin, got {np.array2string(p, precision=4)}")
        with self.lock:
            self.session.auto = False
            self.session.set_pointer(p)
        self.auto_checkbox.value = False
        if self.message.content:  # an accepted pointer: the last refusal no longer holds
            self.message.content = ""

    def _on_pointer(self) -> None:
        """The gizmo moved: a refused position is said in the page and the gizmo put back on the pointer."""
        try:
            self.move_pointer(np.asarray(self.pointer.position))
        except KinemaError as exc:
            self.report(str(exc))
            with self.lock:
                back = np.zeros(3)
                back[: np.size(self.session.pointer)] = self.session.pointer
            self.pointer.position = tuple(map(float, back))

    def report(self, message: str) -> None:
        """Say ``message`` in the page (the panel and a notification) and in the terminal."""
        self.message.content = f"**Error:** {markdown_escape(message)}"
        print(f"[kinema demo] {message}", file=sys.stderr, flush=True)
        for client in self.server.get_clients().values():
            with contextlib.suppress(Exception):  # a tab closing meanwhile
                client.add_notification(title="kinema demo", body=message, color="red", auto_close_seconds=8.0)

    def frame(self) -> None:
        """Step the session by ``1 / fps`` and redraw."""
        with self.lock:
            self.session.step(1.0 / self.fps)
            drawing = self.session.drawing()
            state = str(self.session.state)
            scripted = self.pointer is not None and bool(self.session.auto)
            pointer = np.zeros(3)
            if scripted:
                pointer[: np.size(self.session.pointer)] = self.session.pointer
        if scripted:  # the target shows where the script has the pointer, ready to be grabbed
            self.pointer.position = tuple(map(float, pointer))
        if self.state_text.value != state:
            self.state_text.value = state
        self.draw(drawing)

    def draw(self, drawing: Drawing) -> None:
        """Send ``drawing`` to the scene: line segments grouped by width, one sphere per dot."""
        scene = self.server.scene
        groups: dict[float, tuple[list[NDArray[np.float64]], list[NDArray[np.uint8]]]] = {}
        for ln in drawing.lines:
            seg = np.stack([ln.points_world[:-1], ln.points_world[1:]], axis=1)
            pts, cols = groups.setdefault(round(ln.width, 4), ([], []))
            pts.append(seg)
            cols.append(np.broadcast_to(np.array(_rgb255(ln.color), dtype=np.uint8), seg.shape).copy())
        for width in [w for w in self._lines if w not in groups]:
            self._lines.pop(width).remove()
        for width, (pts, cols) in groups.items():
            points, colors = np.concatenate(pts), np.concatenate(cols)
            handle = self._lines.get(width)
            if handle is None or handle.points.shape != points.shape:
                if handle is not None:
                    handle.remove()
                self._lines[width] = scene.add_line_segments(f"/demo/lines/{width:g}", points, colors,
                                                             thickness=width, thickness_units="world")
            else:
                handle.points, handle.colors = points, colors
        while len(self._dots) > len(drawing.dots):
            self._dots.pop()[0].remove()
        for i, dot in enumerate(drawing.dots):
            color = _rgb255(dot.color)
            if i < len(self._dots) and self._dots[i][1:] == (dot.radius, color):
                self._dots[i][0].position = tuple(map(float, dot.position_world))
                continue
            if i < len(self._dots):
                self._dots[i][0].remove()
            handle = scene.add_icosphere(f"/demo/dots/{i}", radius=dot.radius, color=color,
                                         subdivisions=DOT_SUBDIVISIONS, position=tuple(map(float, dot.position_world)))
            if i < len(self._dots):
                self._dots[i] = (handle, dot.radius, color)
            else:
                self._dots.append((handle, dot.radius, color))
        self.frames += 1
        if drawing.caption and self.frames % CAPTION_EVERY == 1:
            self.caption.content = f"`{drawing.caption}`"


@dataclass
class DemoViewer:
    """A served demo: ``app`` (:class:`DemoApp`, its ``session``), ``server``, ``url``."""

    app: DemoApp
    server: Any
    url: str
    _stop: threading.Event
    _thread: threading.Thread

    def close(self) -> None:
        """Stop the frame loop and the server."""
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.server.stop()


def _loop(app: DemoApp, stop: threading.Event) -> None:
    period = 1.0 / app.fps
    next_t = time.monotonic()
    while not stop.is_set():
        try:
            app.frame()
            app._last_error = None
        except Exception as exc:  # one failed frame must not end the demo: say why (once), keep going
            message = f"frame failed: {type(exc).__name__}: {exc}"
            if message != app._last_error:
                app._last_error = message
                app.report(message)
                traceback.print_exc()
        next_t += period
        stop.wait(max(0.0, next_t - time.monotonic()))


def serve_demo(demo: dict[str, Any], *, fps: float, seed: int = 0, host: str = DEFAULT_HOST,
               port: int = DEFAULT_PORT, block: bool = True, verbose: bool = True) -> DemoViewer:
    """Serve ``demo`` (a registry descriptor) at ``fps``; ``block``: until Ctrl-C, else return the viewer.

    ``host`` is loopback by default (another one prints a warning); ``port`` 0 picks a free one.
    """
    import viser

    if not is_loopback(host):
        print(f"[kinema demo] warning: listening on {host or 'every interface'}: anyone on the network can "
              "drive the demo", file=sys.stderr, flush=True)
    port = check_port(port)
    if port == 0:
        port = _free_port(host)
    server = viser.ViserServer(host=host, port=port, verbose=False)
    app = DemoApp(demo, server, fps, seed)
    url = f"http://{host}:{server.get_port()}"
    stop = threading.Event()
    thread = threading.Thread(target=_loop, args=(app, stop), name="kinema-demo-frames", daemon=True)
    thread.start()
    viewer = DemoViewer(app, server, url, stop, thread)
    if verbose:
        print(f"kinema demo {demo['name']} at {url}  (Ctrl-C to stop)", flush=True)
    if not block:
        return viewer
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        viewer.close()
    return viewer
